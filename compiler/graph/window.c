/*
 * window.c - the type rules of convolution and pooling (nGraph's general forms).
 *
 * Both slide a window over the spatial axes (2..) of x [N, C, d1..dk], k = 1 to 3. Along each
 * spatial axis the data is dilated (data_dilation - 1 zeros between elements: transposed
 * convolution), padded (pad_below and pad_above zeros; negative padding crops, convolution
 * only), and the window, dilated (dilation - 1 skipped elements between its taps), steps by its
 * stride over the result:
 *
 *     out = (dilated(d, data_dilation) + pad_below + pad_above - dilated(f, dilation)) / stride + 1
 *     dilated(n, s) = (n - 1) * s + 1 for n > 0, 0 for n = 0
 *
 * convolution(x, w): w is [K, C / groups, f1..fk]; the result [N, K, out..] sums, for output
 * channel k of group g = k / (K / groups), over the input channels of that group and the taps.
 * max_pool, avg_pool: the result [N, C, out..]; padding must be smaller than the window, so that
 * every window holds at least one element of x.
 */
#include <string.h>

#include "internal.h"

/* dilated(n, s) into *out; false on overflow. */
static bool dilated(int64_t n, int64_t s, int64_t *out)
{
    if (n == 0) {
        *out = 0;
        return true;
    }
    return !mul_overflows(n - 1, s, out) && !add_overflows(*out, 1, out);
}

int64_t ir_window_out(const ir_window *w, int i, int64_t d)
{
    int64_t in, win;
    dilated(d, w->data_dilation[i], &in); /* checked when the node was built */
    dilated(w->window[i], w->dilation[i], &win);
    return (in + w->pad_below[i] + w->pad_above[i] - win) / w->stride[i] + 1;
}

/* Reads the attribute list `v` (NULL: every entry is `def`) into out, checking each entry is at
 * least `min`. */
static int read_list(nest_function *f, ir_op op, int nin, const int32_t *in, const char *what,
                     int nsp, const int64_t *v, int64_t def, int64_t min, int64_t *out)
{
    for (int i = 0; i < nsp; i++) {
        out[i] = v ? v[i] : def;
        if (out[i] < min)
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                               "%s must be at least %lld (spatial axis %d is %lld)", what,
                               (long long)min, i, (long long)out[i]);
    }
    return NEST_OK;
}

int ir_infer_window(nest_function *f, ir_node *n, ir_op op, int nin, const int32_t *in,
                    const ir_attrs *at)
{
    const ir_node *x = &f->nodes[in[0]];
    bool conv = ir_ops[op].kind == K_CONV;
    if (x->rank < 3 || x->rank > 2 + IR_MAX_SPATIAL)
        return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                           "the input must be [N, C, d1..dk] with 1 to %d spatial axes (rank 3 "
                           "to %d), not rank %d",
                           IR_MAX_SPATIAL, 2 + IR_MAX_SPATIAL, x->rank);
    /* a symbolic batch passes through; the geometry takes plain sizes */
    for (int i = 1; i < x->rank; i++)
        if (dim_is_sym(x->shape[i]) || (conv && dim_is_sym(f->nodes[in[1]].shape[i - 1])) ||
            (conv && i == x->rank - 1 && dim_is_sym(f->nodes[in[1]].shape[i])))
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                               "only the batch (axis 0 of the input) may be a symbolic dim");
    ir_window *w = arena_alloc(&f->arena, sizeof *w);
    if (!w)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    int nsp = x->rank - 2, st;
    w->nsp = nsp;
    w->groups = 1;
    int64_t shape[2 + IR_MAX_SPATIAL];
    shape[0] = x->shape[0];
    shape[1] = x->shape[1];
    if (conv) {
        const ir_node *k = &f->nodes[in[1]];
        if (k->etype != x->etype)
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in, "operand element types differ");
        if (k->rank != x->rank)
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                               "the filters must be [K, C/groups, f1..fk] of the input's rank "
                               "%d, not rank %d",
                               x->rank, k->rank);
        if (at->groups < 1)
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in, "groups must be at least 1, not %lld",
                               (long long)at->groups);
        w->groups = at->groups;
        int64_t channels;
        if (mul_overflows(k->shape[1], w->groups, &channels) || channels != x->shape[1])
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                               "the filters take %lld input channels in each of %lld groups, "
                               "but the input has %lld channels",
                               (long long)k->shape[1], (long long)w->groups,
                               (long long)x->shape[1]);
        if (k->shape[0] % w->groups != 0)
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                               "%lld groups do not divide the %lld output channels",
                               (long long)w->groups, (long long)k->shape[0]);
        shape[1] = k->shape[0];
        for (int i = 0; i < nsp; i++) {
            w->window[i] = k->shape[2 + i];
            if (w->window[i] < 1)
                return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                                   "the filters are empty along spatial axis %d", i);
        }
        if ((st = read_list(f, op, nin, in, "dilation", nsp, at->dilation, 1, 1, w->dilation)) ||
            (st = read_list(f, op, nin, in, "data_dilation", nsp, at->data_dilation, 1, 1,
                            w->data_dilation)) ||
            (st = read_list(f, op, nin, in, "pad_below", nsp, at->pad_below, 0, -IR_MAX_BYTES,
                            w->pad_below)) ||
            (st = read_list(f, op, nin, in, "pad_above", nsp, at->pad_above, 0, -IR_MAX_BYTES,
                            w->pad_above)))
            return st;
    } else {
        if (!at->window)
            return ir_op_error(f, NEST_ERR_ARG, op, nin, in, "the window is not given");
        if ((st = read_list(f, op, nin, in, "window", nsp, at->window, 1, 1, w->window)) ||
            (st = read_list(f, op, nin, in, "pad_below", nsp, at->pad_below, 0, 0, w->pad_below)) ||
            (st = read_list(f, op, nin, in, "pad_above", nsp, at->pad_above, 0, 0, w->pad_above)))
            return st;
        for (int i = 0; i < nsp; i++) {
            w->dilation[i] = w->data_dilation[i] = 1;
            if (x->shape[2 + i] == 0)
                return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                                   "spatial axis %d is empty: no window would hold an element", i);
            if (w->pad_below[i] >= w->window[i] || w->pad_above[i] >= w->window[i])
                return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                                   "padding (%lld below, %lld above) must be smaller than the "
                                   "window (%lld) along spatial axis %d",
                                   (long long)w->pad_below[i], (long long)w->pad_above[i],
                                   (long long)w->window[i], i);
        }
        w->include_pad = at->include_pad != 0;
    }
    if ((st = read_list(f, op, nin, in, "strides", nsp, at->step, 1, 1, w->stride)))
        return st;
    /* the taps of one window: a count the loops over them and an average's divisor hold */
    int64_t taps = 1;
    for (int i = 0; i < nsp; i++)
        if (mul_overflows(taps, w->window[i], &taps) || taps >= IR_MAX_BYTES)
            return ir_op_error(f, NEST_ERR_LIMIT, op, nin, in,
                               "the window has too many taps (%lld along spatial axis %d; the "
                               "limit is 2^62 in all)",
                               (long long)w->window[i], i);
    /* the output extent along each spatial axis */
    for (int i = 0; i < nsp; i++) {
        int64_t d = x->shape[2 + i], in_len, win;
        if (!dilated(d, w->data_dilation[i], &in_len) ||
            add_overflows(in_len, w->pad_below[i], &in_len) ||
            add_overflows(in_len, w->pad_above[i], &in_len) ||
            !dilated(w->window[i], w->dilation[i], &win))
            return ir_op_error(f, NEST_ERR_LIMIT, op, nin, in,
                               "spatial axis %d: the dilated and padded sizes are too large", i);
        if (win > in_len)
            return ir_op_error(f, NEST_ERR_TYPE, op, nin, in,
                               "spatial axis %d: the window (%lld with dilation) is larger than "
                               "the padded input (%lld)",
                               i, (long long)win, (long long)in_len);
        shape[2 + i] = (in_len - win) / w->stride[i] + 1;
    }
    /* the size limit of every tensor (ir.c), on the product of the non-zero dims */
    int64_t bytes = (int64_t)nest_type_size((nest_type)x->etype);
    bool huge = false;
    for (int i = 0; i < x->rank; i++)
        huge |= shape[i] != 0 && !dim_is_sym(shape[i]) && mul_overflows(bytes, shape[i], &bytes);
    if (huge || bytes >= IR_MAX_BYTES)
        return ir_op_error(f, NEST_ERR_LIMIT, op, nin, in,
                           "the result is too large (the limit is 2^62 bytes)");
    n->etype = x->etype;
    n->rank = x->rank;
    n->shape = arena_memdup(&f->arena, shape, sizeof(int64_t) * (size_t)x->rank);
    if (!n->shape)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    n->a.win = w;
    return NEST_OK;
}
