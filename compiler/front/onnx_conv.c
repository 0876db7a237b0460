/*
 * onnx_conv.c - the ONNX operators that slide a window over the spatial axes: Conv (a
 * BatchNormalization after it folded into its weights), ConvTranspose (a convolution of the
 * input dilated by the strides, with the filters flipped), MaxPool and AveragePool. Padding
 * (pads or auto_pad) and ceil_mode become nest's explicit padding below and above each axis.
 */
#include <math.h>
#include <string.h>

#include "onnx.h"

#define R NEST_MAX_RANK

/* The window over the k spatial axes of an input [N, C, d1..dk]. */
typedef struct window {
    int k;
    bool ceil_pad; /* ceil_mode added padding above (for a last partial window) */
    int64_t kernel[3], strides[3], dil[3], below[3], above[3], out[3];
} window;

/* An ints attribute of k entries (dflt fills it when absent); -1 with the error otherwise. */
static int ints_k(ox *c, const char *name, int k, int64_t *v, int64_t dflt)
{
    int64_t got[6];
    int n = ox_attr_ints(c, name, got, 6);
    if (n == -2)
        return -1;
    if (n < 0) {
        for (int i = 0; i < k; i++)
            v[i] = dflt;
        return 0;
    }
    if (n != k)
        return ox_err(c, NEST_ERR_ARG, "%s has %d entries, not one per spatial axis (%d)", name,
                      n, k), -1;
    for (int i = 0; i < k; i++) {
        if (got[i] < 1)
            return ox_err(c, NEST_ERR_ARG, "%s must be positive", name), -1;
        v[i] = got[i];
    }
    return 0;
}

/* The padded extent of a window's taps. */
static int64_t span(const window *w, int i) { return (w->kernel[i] - 1) * w->dil[i] + 1; }

/* Strides, dilations and padding (pads or auto_pad) of a window whose kernel is set, for an
 * input of spatial extents `in`; ceil_mode adds padding above so that the last partial window
 * counts (it must start inside the input or its padding below). */
static int window_attrs(ox *c, const int64_t *in, window *w, bool ceil_mode)
{
    int k = w->k;
    w->ceil_pad = false;
    if (ints_k(c, "strides", k, w->strides, 1) < 0 || ints_k(c, "dilations", k, w->dil, 1) < 0)
        return NEST_ERR_ARG;
    const char *pad = ox_attr_str(c, "auto_pad", "NOTSET");
    int64_t pads[6];
    int n = ox_attr_ints(c, "pads", pads, 6);
    if (n == -2)
        return NEST_ERR_ARG;
    if (strcmp(pad, "NOTSET") == 0) {
        if (n >= 0 && n != 2 * k)
            return ox_err(c, NEST_ERR_ARG, "pads has %d entries, not %d", n, 2 * k);
        for (int i = 0; i < k; i++) {
            w->below[i] = n < 0 ? 0 : pads[i];
            w->above[i] = n < 0 ? 0 : pads[k + i];
            if (w->below[i] < 0 || w->above[i] < 0)
                return ox_err(c, NEST_ERR_ARG, "pads must not be negative");
        }
    } else if (strcmp(pad, "VALID") == 0) {
        for (int i = 0; i < k; i++)
            w->below[i] = w->above[i] = 0;
    } else if (strcmp(pad, "SAME_UPPER") == 0 || strcmp(pad, "SAME_LOWER") == 0) {
        /* the output extent is ceil(in / stride), the padding split evenly, the odd one
         * above (SAME_UPPER) or below (SAME_LOWER) */
        for (int i = 0; i < k; i++) {
            int64_t o = (in[i] + w->strides[i] - 1) / w->strides[i];
            int64_t total = (o - 1) * w->strides[i] + span(w, i) - in[i];
            total = total < 0 ? 0 : total;
            w->below[i] = pad[5] == 'U' ? total / 2 : total - total / 2;
            w->above[i] = total - w->below[i];
        }
    } else {
        return ox_err(c, NEST_ERR_ARG, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or "
                      "VALID", pad);
    }
    for (int i = 0; i < k; i++) {
        int64_t room = in[i] + w->below[i] + w->above[i] - span(w, i);
        if (room < 0)
            return ox_err(c, NEST_ERR_TYPE, "the window (%lld) is larger than the padded input "
                          "(%lld) on spatial axis %d", (long long)span(w, i),
                          (long long)(room + span(w, i)), i);
        w->out[i] = room / w->strides[i] + 1;
        if (ceil_mode && room % w->strides[i]) {
            /* one more window, when it starts inside the input or its padding below */
            if (w->out[i] * w->strides[i] < in[i] + w->below[i]) {
                w->above[i] += w->strides[i] - room % w->strides[i];
                w->out[i]++;
                w->ceil_pad = true;
            }
        }
    }
    return NEST_OK;
}

/* The input x of rank 3 to 5 and the kernel of a pool (kernel_shape, required). */
static int pool_window(ox *c, nest_value x, window *w)
{
    int rank = ox_rank(c, x);
    if (rank < 3 || rank > 5)
        return ox_err(c, NEST_ERR_TYPE, "the input must have 1 to 3 spatial axes (rank 3 to 5), "
                      "not rank %d", rank);
    w->k = rank - 2;
    if (!ox_attr(c, "kernel_shape"))
        return ox_err(c, NEST_ERR_ARG, "kernel_shape is required");
    if (ints_k(c, "kernel_shape", w->k, w->kernel, 1) < 0)
        return NEST_ERR_ARG;
    return window_attrs(c, ox_shape(c, x) + 2, w, ox_attr_int(c, "ceil_mode", 0) != 0);
}

/* ---- Conv ---- */

/* Conv's weights [M, C/g, k..] and bias [M] with the BatchNormalization after it folded in:
 * w'[m] = w[m] a[m], b' = b a + shift. False when it does not apply (unknown weights, no such
 * node). */
static bool conv_fold_bn(ox *c, nest_value *w, nest_value *bias)
{
    int32_t index;
    double *a, *sh;
    int64_t n;
    const ox_tensor *kw = ox_peek(c, 1), *kb = ox_has(c, 2) ? ox_peek(c, 2) : NULL;
    if (!kw || kw->rank < 3 || (kw->etype != NEST_F32 && kw->etype != NEST_F64) ||
        (ox_has(c, 2) && (!kb || kb->etype != kw->etype || kb->rank != 1)) ||
        !ox_bn_after(c, &index, &a, &sh, &n) || n != kw->shape[0] ||
        (kb && kb->shape[0] != n))
        return false;
    ox_tensor *nw = ox_tensor_new(c, kw->etype, kw->rank, kw->shape);
    ox_tensor *nb = ox_tensor_new(c, kw->etype, 1, &n);
    if (!nw || !nb)
        return false;
    int64_t per = ox_count(kw->rank - 1, kw->shape + 1);
    for (int64_t m = 0; m < n; m++) {
        for (int64_t j = 0; j < per; j++)
            ox_store(nw, m * per + j, ox_float_at(kw, kw->count == 1 ? 0 : m * per + j) * a[m]);
        ox_store(nb, m, (kb ? ox_float_at(kb, kb->count == 1 ? 0 : m) : 0) * a[m] + sh[m]);
    }
    *w = ox_constant(c, nw, c->node->input[1]);
    *bias = ox_constant(c, nb, kb ? c->node->input[2] : c->node->output[0]);
    ox_absorb(c, index);
    return true;
}

int ox_op_conv(ox *c)
{
    nest_value x = ox_in(c, 0), w = NEST_NONE, bias = NEST_NONE;
    OX_CHECK(x);
    if (!conv_fold_bn(c, &w, &bias)) {
        w = ox_in(c, 1);
        bias = ox_has(c, 2) ? ox_in(c, 2) : NEST_NONE;
        if (ox_has(c, 2))
            OX_CHECK(bias);
    }
    OX_CHECK(w);
    int rank = ox_rank(c, x);
    if (rank < 3 || rank > 5 || ox_rank(c, w) != rank)
        return ox_err(c, NEST_ERR_TYPE, "X and W must have 1 to 3 spatial axes alike (ranks %d "
                      "and %d)", rank, ox_rank(c, w));
    window win = {.k = rank - 2};
    memcpy(win.kernel, ox_shape(c, w) + 2, (size_t)win.k * sizeof *win.kernel);
    int64_t ks[3];
    if (ox_attr(c, "kernel_shape")) {
        if (ints_k(c, "kernel_shape", win.k, ks, 1) < 0)
            return NEST_ERR_ARG;
        if (memcmp(ks, win.kernel, (size_t)win.k * sizeof *ks) != 0)
            return ox_err(c, NEST_ERR_TYPE, "kernel_shape differs from W's spatial extents");
    }
    if (window_attrs(c, ox_shape(c, x) + 2, &win, false) != NEST_OK)
        return NEST_ERR_ARG;
    nest_value y = nest_convolution(c->f, x, w, win.strides, win.dil, win.below, win.above, NULL,
                                    ox_attr_int(c, "group", 1));
    if (bias != NEST_NONE)
        y = nest_add(c->f, y, ox_per_channel(c, bias, y));
    c->out[0] = y;
    return NEST_OK;
}

/* ---- ConvTranspose ---- */

/* ConvTranspose's weights [C, M/g, k..] as a convolution's [M, C/g, k..] with the taps
 * reversed: w'[g, m, c, t] = w[g, c, m, k - 1 - t]. Computed at import when known, else
 * views. */
static nest_value flipped_filters(ox *c, nest_value w, int64_t groups)
{
    int rank = ox_rank(c, w), k = rank - 2;
    const int64_t *s = ox_shape(c, w);
    int64_t cg = s[0] / groups, mg = s[1], spatial = ox_count(k, s + 2);
    int64_t out[R];
    out[0] = groups * mg, out[1] = cg;
    memcpy(out + 2, s + 2, (size_t)k * sizeof *out);
    const ox_tensor *kw = ox_peek(c, 1);
    if (kw && kw->count == ox_count(rank, s)) {
        ox_tensor *t = ox_tensor_new(c, kw->etype, rank, out);
        if (!t)
            return NEST_NONE;
        size_t es = nest_type_size((nest_type)kw->etype);
        for (int64_t g = 0; g < groups; g++)
            for (int64_t ci = 0; ci < cg; ci++)
                for (int64_t m = 0; m < mg; m++)
                    for (int64_t p = 0; p < spatial; p++)
                        memcpy((char *)t->data +
                                   (size_t)((((g * mg + m) * cg + ci) * spatial) + p) * es,
                               (const char *)kw->data +
                                   (size_t)((((g * cg + ci) * mg + m) * spatial) +
                                            spatial - 1 - p) * es, es);
        return ox_constant(c, t, c->node->input[1]);
    }
    /* [g, C/g, M/g, k..] -> [g, M/g, C/g, k..], the taps reversed */
    int64_t split[R], perm[R], axes[3];
    split[0] = groups, split[1] = cg, split[2] = mg;
    memcpy(split + 3, s + 2, (size_t)k * sizeof *split);
    for (int i = 0; i < rank + 1; i++)
        perm[i] = i;
    perm[1] = 2, perm[2] = 1;
    for (int i = 0; i < k; i++)
        axes[i] = 3 + i;
    nest_value v = ox_reshape(c, w, rank + 1, split);
    v = ox_transpose(c, v, perm);
    v = nest_reverse(c->f, v, k, axes);
    return ox_reshape(c, v, rank, out);
}

int ox_op_conv_transpose(ox *c)
{
    nest_value x = ox_in(c, 0), w = ox_in(c, 1);
    OX_CHECK(x);
    OX_CHECK(w);
    int rank = ox_rank(c, x), k = rank - 2;
    int64_t groups = ox_attr_int(c, "group", 1);
    if (rank < 3 || rank > 5 || ox_rank(c, w) != rank)
        return ox_err(c, NEST_ERR_TYPE, "X and W must have 1 to 3 spatial axes alike (ranks %d "
                      "and %d)", rank, ox_rank(c, w));
    if (groups < 1 || ox_shape(c, w)[0] % groups || ox_shape(c, w)[0] != ox_shape(c, x)[1])
        return ox_err(c, NEST_ERR_TYPE, "W's first extent (%lld) must be X's channels (%lld) "
                      "and a multiple of group (%lld)", (long long)ox_shape(c, w)[0],
                      (long long)ox_shape(c, x)[1], (long long)groups);
    window win = {.k = k};
    memcpy(win.kernel, ox_shape(c, w) + 2, (size_t)k * sizeof *win.kernel);
    int64_t outpad[3], oshape[6], pads[6];
    if (ints_k(c, "strides", k, win.strides, 1) < 0 || ints_k(c, "dilations", k, win.dil, 1) < 0)
        return NEST_ERR_ARG;
    int64_t got[6];
    int n = ox_attr_ints(c, "output_padding", got, 6);
    if (n == -2 || (n >= 0 && n != k))
        return n == -2 ? NEST_ERR_ARG : ox_err(c, NEST_ERR_ARG, "output_padding has %d entries, "
                                               "not %d", n, k);
    for (int i = 0; i < k; i++)
        outpad[i] = n < 0 ? 0 : got[i];
    const char *pad = ox_attr_str(c, "auto_pad", "NOTSET");
    int no = ox_attr_ints(c, "output_shape", oshape, 6), np = ox_attr_ints(c, "pads", pads, 6);
    if (no == -2 || np == -2)
        return NEST_ERR_ARG;
    if (no >= 0 && no != k && no != rank)
        return ox_err(c, NEST_ERR_ARG, "output_shape has %d entries, not %d", no, k);
    bool same = strncmp(pad, "SAME_", 5) == 0;
    for (int i = 0; i < k; i++) {
        int64_t in = ox_shape(c, x)[2 + i];
        int64_t full = win.strides[i] * (in - 1) + outpad[i] + span(&win, i);
        if (no >= 0 || same) {
            /* the padding that gives output_shape (auto_pad SAME: in * stride) */
            int64_t want = no >= 0 ? oshape[no == rank ? 2 + i : i] : in * win.strides[i];
            if (want < 1)
                return ox_err(c, NEST_ERR_ARG, "output_shape must be positive");
            /* split as the ONNX reference does, halves rounded down: a negative total (an
             * output beyond what the input gives) pads the output with the bias alone */
            int64_t total = full - want, half = total >= 0 ? total / 2 : -((1 - total) / 2);
            win.below[i] = strcmp(pad, "SAME_UPPER") == 0 ? half : total - half;
            win.above[i] = total - win.below[i];
        } else if (np >= 0) {
            if (np != 2 * k)
                return ox_err(c, NEST_ERR_ARG, "pads has %d entries, not %d", np, 2 * k);
            win.below[i] = pads[i], win.above[i] = pads[k + i];
        } else {
            win.below[i] = win.above[i] = 0;
        }
        win.out[i] = full - win.below[i] - win.above[i];
        if (win.out[i] < 1)
            return ox_err(c, NEST_ERR_ARG, "the padding of spatial axis %d (%lld and %lld) leaves "
                          "no output", i, (long long)win.below[i], (long long)win.above[i]);
    }
    /* a convolution of x dilated by the strides, padded by the window's span less the pads,
     * with the taps reversed */
    int64_t one[3], below[3], above[3];
    for (int i = 0; i < k; i++) {
        one[i] = 1;
        below[i] = span(&win, i) - 1 - win.below[i];
        above[i] = span(&win, i) - 1 - win.above[i] + outpad[i];
    }
    nest_value wf = flipped_filters(c, w, groups);
    OX_CHECK(wf);
    nest_value y = nest_convolution(c->f, x, wf, one, win.dil, below, above, win.strides, groups);
    if (ox_has(c, 2))
        y = nest_add(c->f, y, ox_per_channel(c, ox_in(c, 2), y));
    c->out[0] = y;
    return NEST_OK;
}

/* ---- pools ---- */

/* The max over the window's taps as strided slices of x padded with the lowest value, and,
 * when `indices`, the flat index into x of the first largest (storage_order 1: the spatial
 * axes column-major): for dilated windows and MaxPool's second output. */
static int max_taps(ox *c, nest_value x, const window *w, nest_value *best, nest_value *indices)
{
    int rank = ox_rank(c, x), k = w->k;
    const int64_t *xs = ox_shape(c, x);
    int64_t below[R] = {0}, above[R] = {0}, outs[R];
    for (int i = 0; i < k; i++)
        below[2 + i] = w->below[i], above[2 + i] = w->above[i];
    /* padded with -inf, or the least integer (ox_full saturates) */
    nest_value xp = nest_pad(c->f, x, ox_full(c, ox_type(c, x), -INFINITY, 0, NULL), below,
                              above, NULL);
    OX_CHECK(xp);
    outs[0] = xs[0], outs[1] = xs[1];
    memcpy(outs + 2, w->out, (size_t)k * sizeof *outs);
    int64_t taps = ox_count(k, w->kernel), spatial = ox_count(k, w->out);
    bool cols = ox_attr_int(c, "storage_order", 0) != 0;
    /* the index of [n, c, 0..]: (n C + c) times the spatial size of x */
    nest_value base = NEST_NONE;
    if (indices && spatial > OX_FOLD_BYTES / (int64_t)sizeof(int64_t) / taps)
        return ox_err(c, NEST_ERR_LIMIT,
                      "the indices of %lld taps at %lld output positions would take more than "
                      "the %lld MiB an import may hold",
                      (long long)taps, (long long)spatial, (long long)(OX_FOLD_BYTES >> 20));
    if (indices) {
        int64_t nc[2] = {xs[0], xs[1]};
        ox_tensor *t = ox_tensor_new(c, NEST_I64, 2, nc);
        if (!t)
            return NEST_ERR_NOMEM;
        for (int64_t i = 0; i < nc[0] * nc[1]; i++)
            ((int64_t *)t->data)[i] = i * ox_count(k, xs + 2);
        int64_t s[R];
        for (int i = 0; i < rank; i++)
            s[i] = i < 2 ? xs[i] : 1;
        base = ox_bcast_to(c, ox_reshape(c, ox_constant(c, t, c->node->output[1]), rank, s),
                           rank, outs);
    }
    for (int64_t tap = 0; tap < taps; tap++) {
        int64_t at[3], lower[R], upper[R], strides[R];
        for (int i = k - 1, r = (int)tap; i >= 0; i--) {
            at[i] = r % w->kernel[i];
            r /= (int)w->kernel[i];
        }
        for (int i = 0; i < rank; i++) {
            bool sp = i >= 2;
            lower[i] = sp ? at[i - 2] * w->dil[i - 2] : 0;
            strides[i] = sp ? w->strides[i - 2] : 1;
            upper[i] = sp ? lower[i] + (w->out[i - 2] - 1) * strides[i] + 1 : xs[i];
        }
        nest_value v = nest_slice(c->f, xp, lower, upper, strides);
        nest_value idx = NEST_NONE;
        if (indices) {
            /* the position in x of this tap at each output position (padding: any) */
            ox_tensor *t = ox_tensor_new(c, NEST_I64, k, w->out);
            if (!t)
                return NEST_ERR_NOMEM;
            for (int64_t p = 0; p < spatial; p++) {
                int64_t flat = 0, rest = p, pos[3];
                for (int i = k - 1; i >= 0; i--) {
                    pos[i] = rest % w->out[i] * w->strides[i] + at[i] * w->dil[i] - w->below[i];
                    rest /= w->out[i];
                }
                for (int j = 0; j < k; j++) {
                    int i = cols ? k - 1 - j : j;
                    flat = flat * xs[2 + i] + pos[i];
                }
                ((int64_t *)t->data)[p] = flat;
            }
            idx = nest_add(c->f, base, ox_bcast_to(c, ox_constant(c, t, c->node->output[1]),
                                                    rank, outs));
        }
        if (tap == 0) {
            *best = v;
            if (indices)
                *indices = idx;
            continue;
        }
        nest_value gt = nest_greater(c->f, v, *best);
        *best = nest_select(c->f, gt, v, *best);
        if (indices)
            *indices = nest_select(c->f, gt, idx, *indices);
    }
    return NEST_OK;
}

int ox_op_max_pool(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    window w;
    int st = pool_window(c, x, &w);
    if (st != NEST_OK)
        return st;
    bool dilated = false;
    for (int i = 0; i < w.k; i++)
        dilated = dilated || w.dil[i] != 1;
    bool want_indices = c->nout > 1 && c->node->output[1] && c->node->output[1][0];
    if (dilated || want_indices)
        return max_taps(c, x, &w, &c->out[0], want_indices ? &c->out[1] : NULL);
    c->out[0] = nest_max_pool(c->f, x, w.kernel, w.strides, w.below, w.above);
    return NEST_OK;
}

int ox_op_avg_pool(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    window w;
    int st = pool_window(c, x, &w);
    if (st != NEST_OK)
        return st;
    for (int i = 0; i < w.k; i++)
        if (w.dil[i] != 1)
            return ox_err(c, NEST_ERR_ARG, "dilations are not supported for AveragePool");
    int include = (int)ox_attr_int(c, "count_include_pad", 0);
    if (include && w.ceil_pad)
        return ox_err(c, NEST_ERR_ARG, "ceil_mode with count_include_pad is not supported (the "
                      "last windows would count padding beyond pads)");
    c->out[0] = nest_avg_pool(c->f, x, w.kernel, w.strides, w.below, w.above, include);
    return NEST_OK;
}
