/*
 * grad.c - reverse-mode gradients, a graph-to-graph pass: nest_grad appends to a function the
 * nodes that compute d loss / d w for a scalar loss and some of its variables or parameters.
 *
 * The adjoint of the loss is 1. Walking the nodes from the loss down to the first variable, each
 * node that depends on a variable and reaches the loss passes its adjoint g to its operands by
 * the rule of its op (below), and an operand used several times sums what it receives. The
 * rules build ordinary nodes with ir_build, so the gradient graph is typed, printed and compiled
 * like any other: transposes are reshapes with an order (views), the sum a broadcast needs is a
 * reduction, and the product of a dense layer's backward is a dot the tile pass tiles.
 *
 * Nothing flows through values that are not floats (comparisons, integers, bool), into the
 * condition of a select, or out of convert to an integer: those have no derivative. At a tie
 * the rules follow the forward op: maximum(a, b) is a > b ? a : b, so b takes the gradient when
 * a == b; max and min over axes share the gradient among the elements equal to the result.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct gctx {
    nest_function *f;
    int32_t *adj;   /* per node below top: its adjoint so far, or -1 (zero) */
    bool *need;     /* per node below top: depends on a wrt value and reaches the loss */
    bool failed;
} gctx;

/* ---- building ---- */

static int32_t build(gctx *g, ir_op op, int nin, const int32_t *in, const ir_attrs *at)
{
    if (g->failed)
        return NEST_NONE;
    for (int i = 0; i < nin; i++)
        if (in[i] < 0) {
            g->failed = true;
            return NEST_NONE;
        }
    int32_t v = ir_build(g->f, op, nin, in, at);
    if (v < 0)
        g->failed = true;
    return v;
}

static int32_t bin(gctx *g, ir_op op, int32_t a, int32_t b)
{
    int32_t in[2] = {a, b};
    return build(g, op, 2, in, NULL);
}

static int32_t un(gctx *g, ir_op op, int32_t a) { return build(g, op, 1, &a, NULL); }

static int32_t sel(gctx *g, int32_t c, int32_t a, int32_t b)
{
    int32_t in[3] = {c, a, b};
    return build(g, OP_SELECT, 3, in, NULL);
}

/* A tensor of `shape` (etype) whose elements are all v. */
static int32_t fill(gctx *g, int etype, double v, int rank, const int64_t *shape)
{
    if (g->failed)
        return NEST_NONE;
    int32_t c = ir_fill(g->f, etype, v, rank, shape);
    if (c < 0)
        g->failed = true;
    return c;
}

/* A tensor of x's type and shape whose elements are all v. */
static int32_t like(gctx *g, double v, int32_t x)
{
    if (x < 0)
        return NEST_NONE;
    const ir_node *n = &g->f->nodes[x];
    return fill(g, n->etype, v, n->rank, n->shape);
}

/* x broadcast to `shape` along the axes of mask (x itself for no axes). */
static int32_t bcast(gctx *g, int32_t x, int rank, const int64_t *shape, uint32_t mask)
{
    if (!mask)
        return x;
    int64_t axes[NEST_MAX_RANK];
    ir_attrs at = {.rank = rank, .shape = shape, .naxes = ir_mask_axes(mask, axes), .axes = axes};
    return build(g, OP_BROADCAST, 1, &x, &at);
}

/* op (a reduction, or reverse) of x over the axes of mask (x itself for no axes). */
static int32_t on_axes(gctx *g, ir_op op, int32_t x, uint32_t mask)
{
    if (!mask)
        return x;
    int64_t axes[NEST_MAX_RANK];
    ir_attrs at = {.naxes = ir_mask_axes(mask, axes), .axes = axes};
    return build(g, op, 1, &x, &at);
}

/* The sum of x over the axes of mask. */
static int32_t sum(gctx *g, int32_t x, uint32_t mask) { return on_axes(g, OP_SUM, x, mask); }

/* x read in the axis `order` (NULL: identity) and laid out in `shape`; x itself when that
 * changes nothing. */
static int32_t reshape(gctx *g, int32_t x, const int64_t *order, int rank, const int64_t *shape)
{
    if (x < 0)
        return NEST_NONE;
    const ir_node *n = &g->f->nodes[x];
    bool same = n->rank == rank && memcmp(n->shape, shape, (size_t)rank * sizeof *shape) == 0;
    for (int k = 0; same && order && k < rank; k++)
        same = order[k] == k;
    if (same)
        return x;
    ir_attrs at = {.order = order, .rank = rank, .shape = shape};
    return build(g, OP_RESHAPE, 1, &x, &at);
}

/* x[lower:upper:step] (step NULL: 1). */
static int32_t slice(gctx *g, int32_t x, const int64_t *lower, const int64_t *upper,
                     const int64_t *step)
{
    ir_attrs at = {.lower = lower, .upper = upper, .step = step};
    return build(g, OP_SLICE, 1, &x, &at);
}

static int32_t concat(gctx *g, int n, const int32_t *parts, int axis)
{
    ir_attrs at = {.index = axis};
    return build(g, OP_CONCAT, n, parts, &at);
}

/* Adds a contribution to node x's adjoint. */
static void acc(gctx *g, int32_t x, int32_t v)
{
    if (v < 0) {
        g->failed = true;
        return;
    }
    g->adj[x] = g->adj[x] < 0 ? v : bin(g, OP_ADD, g->adj[x], v);
}

/* ---- the rules that need more than a line ---- */

/* Refuses a rule that does not take symbolic dims yet: an error on f naming the op and the dim. */
static void refuse_sym(gctx *g, int32_t node, int64_t dim, const char *what)
{
    char *t = dim_text(g->f, dim);
    const ir_node *n = &g->f->nodes[node];
    ir_error(g->f, NEST_ERR_ARG, "grad: %s of %s (node %d) along the symbolic dim %s is not "
             "differentiated yet; nest_specialize gives plain sizes",
             what, n->name ? n->name : ir_ops[n->op].name, node, t ? t : "?");
    free(t);
    g->failed = true;
}

/* out = dot(a, b): a [I.., K] and b [K, J..] contract K. With the free axes of each side merged
 * (I, J), ga = g . b^T and gb = a^T . g, the transposes being reshapes with an order. */
static void rule_dot(gctx *g, int32_t gi, int32_t a, int32_t b)
{
    nest_function *f = g->f;
    ir_node A = f->nodes[a], B = f->nodes[b];
    bool na = g->need[a], nb = g->need[b];
    if (A.rank == 0 || B.rank == 0) { /* a scalar s scales t: gs = sum(g * t), gt = s * g */
        int32_t s = A.rank == 0 ? a : b, t = A.rank == 0 ? b : a;
        int tr = f->nodes[t].rank;
        if (g->need[s])
            acc(g, s, sum(g, bin(g, OP_MULTIPLY, gi, t), (uint32_t)((1ull << tr) - 1)));
        if (g->need[t])
            acc(g, t, bin(g, OP_DOT, s, gi));
        return;
    }
    if (A.rank == 1 && B.rank == 1) { /* vector . vector: g is a scalar */
        if (na)
            acc(g, a, bin(g, OP_DOT, gi, b));
        if (nb)
            acc(g, b, bin(g, OP_DOT, gi, a));
        return;
    }
    int ra = A.rank, rb = B.rank;
    /* the merged free axes: products of dims (N*64 when a batch N is symbolic) */
    int64_t K = A.shape[ra - 1], I = ir_dims_count(f, ra - 1, A.shape),
            J = ir_dims_count(f, rb - 1, B.shape + 1);
    if (I == DIM_NONE || J == DIM_NONE) {
        g->failed = true;
        return;
    }
    int64_t order[NEST_MAX_RANK];
    if (na) { /* ga [I, K] = g [I, J] . bt [J, K] */
        int64_t gs[2] = {I, J}, bts[2] = {J, K};
        int32_t g2 = ra == 1 ? reshape(g, gi, NULL, 1, &J) : reshape(g, gi, NULL, 2, gs);
        for (int k = 0; k < rb - 1; k++)
            order[k] = k + 1;
        order[rb - 1] = 0;
        int32_t bt = reshape(g, b, order, 2, bts);
        acc(g, a, reshape(g, bin(g, OP_DOT, g2, bt), NULL, ra, A.shape));
    }
    if (nb) { /* gb [K, J] = at [K, I] . g [I, J] */
        int64_t ats[2] = {K, I}, gs[2] = {I, J};
        order[0] = ra - 1;
        for (int k = 1; k < ra; k++)
            order[k] = k - 1;
        int32_t at = reshape(g, a, order, 2, ats);
        int32_t g2 = rb == 1 ? reshape(g, gi, NULL, 1, &I) : reshape(g, gi, NULL, 2, gs);
        acc(g, b, reshape(g, bin(g, OP_DOT, at, g2), NULL, rb, B.shape));
    }
}

/* out = reshape(a, order, shape): g back to the permuted shape, then the inverse permutation. */
static void rule_reshape(gctx *g, int32_t gi, int32_t node, int32_t a)
{
    const nest_function *f = g->f;
    const ir_node *A = &f->nodes[a];
    const uint8_t *order = f->nodes[node].a.order;
    int r = A->rank;
    int64_t pshape[NEST_MAX_RANK], inv[NEST_MAX_RANK];
    const int64_t *ashape = A->shape;
    for (int k = 0; k < r; k++) {
        pshape[k] = ashape[order[k]];
        inv[order[k]] = k;
    }
    int32_t t = reshape(g, gi, NULL, r, pshape);
    acc(g, a, reshape(g, t, inv, r, ashape));
}

/* out = slice(a, lower, upper, step): g placed back where the slice took its elements, zeros
 * elsewhere; axis by axis, zeros interleave for a step and concatenate below and above. */
static void rule_slice(gctx *g, int32_t gi, int32_t node, int32_t a)
{
    nest_function *f = g->f;
    ir_node n = f->nodes[node];
    const ir_node *A = &f->nodes[a];
    int r = A->rank, et = A->etype;
    const int64_t *full = A->shape; /* in the arena: building moves only the nodes */
    int64_t cur[NEST_MAX_RANK + 1];
    memcpy(cur, n.shape, (size_t)r * sizeof *cur);
    if (ir_dims_count(f, r, cur) == 0)
        return; /* nothing was taken: the gradient is zero */
    int32_t x = gi;
    for (int d = 0; d < r && !g->failed; d++) {
        int64_t cnt = cur[d], step = n.a.slice.step[d], lo = n.a.slice.lower[d];
        if (dim_is_sym(full[d]) || dim_is_sym(cnt) || dim_is_sym(lo)) {
            if (lo == 0 && cnt == full[d] && step == 1)
                continue; /* a symbolic axis taken whole */
            refuse_sym(g, node, dim_is_sym(full[d]) ? full[d] : dim_is_sym(cnt) ? cnt : lo,
                       "a slice");
            return;
        }
        if (step > 1 && cnt > 1) {
            /* [.., cnt, ..] -> [.., cnt, 1, ..] ++ zeros [.., cnt, step - 1, ..] -> [.., cnt * step, ..] */
            if (r + 1 > NEST_MAX_RANK) {
                ir_error(f, NEST_ERR_LIMIT, "grad: a strided slice of rank %d (the limit is %d)", r,
                         NEST_MAX_RANK - 1);
                g->failed = true;
                return;
            }
            int64_t s1[NEST_MAX_RANK + 1], s2[NEST_MAX_RANK + 1];
            for (int k = 0, j = 0; k <= r; k++)
                s1[k] = k == d + 1 ? 1 : cur[j++];
            memcpy(s2, s1, sizeof s1);
            s2[d + 1] = step - 1;
            int32_t parts[2] = {reshape(g, x, NULL, r + 1, s1), fill(g, et, 0, r + 1, s2)};
            int32_t c = concat(g, 2, parts, d + 1);
            cur[d] = cnt * step;
            x = reshape(g, c, NULL, r, cur);
            int64_t lo0[NEST_MAX_RANK] = {0}, up[NEST_MAX_RANK];
            memcpy(up, cur, (size_t)r * sizeof *up);
            up[d] = (cnt - 1) * step + 1;
            x = slice(g, x, lo0, up, NULL);
            cur[d] = up[d];
        }
        int64_t below = lo, above = full[d] - lo - cur[d];
        if (below > 0 || above > 0) {
            int32_t parts[3];
            int np = 0;
            int64_t zs[NEST_MAX_RANK];
            memcpy(zs, cur, (size_t)r * sizeof *zs);
            if (below > 0) {
                zs[d] = below;
                parts[np++] = fill(g, et, 0, r, zs);
            }
            parts[np++] = x;
            if (above > 0) {
                zs[d] = above;
                parts[np++] = fill(g, et, 0, r, zs);
            }
            x = concat(g, np, parts, d);
            cur[d] = full[d];
        }
    }
    acc(g, a, x);
}

/* out = max or min of a over axes: the elements equal to the result share its gradient. */
static void rule_extremum(gctx *g, int32_t gi, int32_t node, int32_t a)
{
    int r = g->f->nodes[a].rank;
    const int64_t *shape = g->f->nodes[a].shape; /* in the arena: building moves only the nodes */
    uint32_t mask = g->f->nodes[node].a.axes;
    int32_t m = bin(g, OP_EQUAL, a, bcast(g, node, r, shape, mask));
    int32_t zero = like(g, 0, a);
    int32_t ones = sel(g, m, like(g, 1, a), zero);
    int32_t share = bin(g, OP_DIVIDE, bcast(g, gi, r, shape, mask),
                        bcast(g, sum(g, ones, mask), r, shape, mask));
    acc(g, a, sel(g, m, share, zero));
}

/* out = product of a over axes: d/da_j = product of the others. With z zeros in a group, that
 * is p / a_j when z = 0, the product of the nonzero elements at the one zero when z = 1, and 0
 * otherwise; no division by zero. */
static void rule_product(gctx *g, int32_t gi, int32_t node, int32_t a)
{
    int r = g->f->nodes[a].rank;
    const int64_t *shape = g->f->nodes[a].shape;
    uint32_t mask = g->f->nodes[node].a.axes;
    int32_t zero = like(g, 0, a), one = like(g, 1, a);
    int32_t isz = bin(g, OP_EQUAL, a, zero);
    int32_t nz = sel(g, isz, one, a);
    int32_t pnz = on_axes(g, OP_PRODUCT, nz, mask);
    int32_t zs = sum(g, sel(g, isz, one, zero), mask);
    int32_t pb = bcast(g, pnz, r, shape, mask), zb = bcast(g, zs, r, shape, mask);
    int32_t gb = bcast(g, gi, r, shape, mask);
    int32_t none = bin(g, OP_DIVIDE, pb, nz);                         /* z = 0 */
    int32_t onez = sel(g, bin(g, OP_EQUAL, zb, like(g, 1, a)), sel(g, isz, pb, zero), zero);
    int32_t d = sel(g, bin(g, OP_EQUAL, zb, zero), none, onez);
    acc(g, a, bin(g, OP_MULTIPLY, gb, d));
}

/* out = pad(a, v, below, above, interior): g padded by -below and -above (cropping what the
 * padding added, zeros where it cropped) is the dilated operand's gradient, and every
 * (interior + 1)-th element of it a's. v takes the rest: sum(g) - sum(ga). */
static void rule_pad(gctx *g, int32_t gi, int32_t node, int32_t a, int32_t v)
{
    nest_function *f = g->f;
    ir_node n = f->nodes[node];
    const ir_node *A = &f->nodes[a];
    int r = n.rank;
    int64_t lo[NEST_MAX_RANK], hi[NEST_MAX_RANK], zero[NEST_MAX_RANK] = {0}, up[NEST_MAX_RANK],
        step[NEST_MAX_RANK];
    bool pads = false, steps = false;
    for (int k = 0; k < r; k++) {
        if (n.a.pad.below[k] == INT64_MIN || n.a.pad.above[k] == INT64_MIN) {
            ir_error(f, NEST_ERR_LIMIT, "grad: the padding of %s is out of range",
                     n.name ? n.name : "a pad");
            g->failed = true;
            return;
        }
        lo[k] = -n.a.pad.below[k];
        hi[k] = -n.a.pad.above[k];
        step[k] = n.a.pad.interior[k] + 1;
        if (dim_is_sym(A->shape[k]) && (lo[k] || hi[k] || step[k] != 1)) {
            refuse_sym(g, node, A->shape[k], "a pad");
            return;
        }
        /* the dilated extent (a symbolic axis is not dilated) */
        up[k] = dim_is_sym(A->shape[k]) ? A->shape[k]
                : A->shape[k]           ? (A->shape[k] - 1) * step[k] + 1
                                        : 0;
        pads |= lo[k] != 0 || hi[k] != 0;
        steps |= step[k] != 1;
    }
    int32_t ga = gi;
    if (pads) {
        ir_attrs at = {.below = lo, .above = hi};
        int32_t in[2] = {gi, fill(g, n.etype, 0, 0, NULL)};
        ga = build(g, OP_PAD, 2, in, &at);
    }
    if (steps)
        ga = slice(g, ga, zero, up, step);
    uint32_t all = (uint32_t)((1ull << r) - 1);
    if (g->need[a])
        acc(g, a, ga);
    if (g->need[v])
        acc(g, v, bin(g, OP_SUBTRACT, sum(g, gi, all), sum(g, ga, all)));
}

/* t [nb.., p, q] summed to the shape of a batch_dot operand x whose matrices (x itself, or a
 * vector as one) are [.., p, q] (rank xr, shape xs): over the batch axes x lacks or broadcast
 * (extent 1). */
static int32_t unbroadcast(gctx *g, int32_t t, int nb, int32_t x, int xr, const int64_t *xs)
{
    if (t < 0)
        return NEST_NONE;
    int skip = nb - (xr - 2);
    uint32_t mask = 0;
    for (int i = 0; i < nb; i++)
        if (i < skip || (xs[i - skip] == 1 && g->f->nodes[t].shape[i] != 1))
            mask |= 1u << i;
    ir_node X = g->f->nodes[x]; /* a copy: building moves the nodes */
    return reshape(g, sum(g, t, mask), NULL, X.rank, X.shape);
}

/* x with its last two axes swapped (a view). */
static int32_t swap_last(gctx *g, int32_t x, int r, const int64_t *shape)
{
    int64_t order[NEST_MAX_RANK], s[NEST_MAX_RANK];
    for (int k = 0; k < r; k++) {
        order[k] = k < r - 2 ? k : k == r - 2 ? r - 1 : r - 2;
        s[k] = shape[order[k]];
    }
    return reshape(g, x, order, r, s);
}

/* out = batch_dot(a, b): a [.., m, k] and b [.., k, n] (a vector a is [1, k], a vector b
 * [k, 1]); with g as [batch.., m, n], ga = g . b^T and gb = a^T . g as batch_dots, the
 * transposes views, each summed over the batch axes its operand was broadcast along. */
static void rule_batch_dot(gctx *g, int32_t gi, int32_t node, int32_t a, int32_t b)
{
    nest_function *f = g->f;
    ir_node N = f->nodes[node], A = f->nodes[a], B = f->nodes[b];
    int nb = N.rank - (A.rank >= 2) - (B.rank >= 2);
    int64_t k = A.shape[A.rank - 1];
    int64_t gs[NEST_MAX_RANK + 2], as[NEST_MAX_RANK + 2], bs[NEST_MAX_RANK + 2];
    memcpy(gs, N.shape, (size_t)nb * sizeof *gs);
    gs[nb] = A.rank >= 2 ? A.shape[A.rank - 2] : 1;
    gs[nb + 1] = B.rank >= 2 ? B.shape[B.rank - 1] : 1;
    int ar = A.rank >= 2 ? A.rank : 2, br = B.rank >= 2 ? B.rank : 2;
    memcpy(as, A.shape, (size_t)A.rank * sizeof *as);
    memcpy(bs, B.shape, (size_t)B.rank * sizeof *bs);
    if (A.rank == 1) {
        as[0] = 1;
        as[1] = k;
    }
    if (B.rank == 1) {
        bs[0] = k;
        bs[1] = 1;
    }
    if (nb + 2 > NEST_MAX_RANK) {
        ir_error(f, NEST_ERR_LIMIT, "grad: a batch_dot of rank %d (the limit is %d)", N.rank,
                 NEST_MAX_RANK - 2);
        g->failed = true;
        return;
    }
    int32_t g2 = reshape(g, gi, NULL, nb + 2, gs);
    int32_t a2 = reshape(g, a, NULL, ar, as), b2 = reshape(g, b, NULL, br, bs);
    if (g->need[a]) /* [nb.., m, k] */
        acc(g, a, unbroadcast(g, bin(g, OP_BATCH_DOT, g2, swap_last(g, b2, br, bs)), nb, a, ar, as));
    if (g->need[b]) /* [nb.., k, n] */
        acc(g, b, unbroadcast(g, bin(g, OP_BATCH_DOT, swap_last(g, a2, ar, as), g2), nb, b, br, bs));
}

/* out = the values of topk(a): each goes back to where its index (the next node) took it:
 * one_hot of the indices over a new axis of a's extent beside the k one, times g, summed over k. */
static void rule_topk(gctx *g, int32_t gi, int32_t node, int32_t a)
{
    nest_function *f = g->f;
    ir_node n = f->nodes[node];
    const ir_node *A = &f->nodes[a];
    int r = A->rank, axis = n.a.topk.axis;
    if (r + 1 > NEST_MAX_RANK) {
        ir_error(f, NEST_ERR_LIMIT, "grad: a topk of rank %d (the limit is %d)", r, NEST_MAX_RANK - 1);
        g->failed = true;
        return;
    }
    int64_t s[NEST_MAX_RANK];
    for (int k = 0, j = 0; k <= r; k++)
        s[k] = k == axis ? A->shape[axis] : n.shape[j++];
    int32_t idx = node + 1; /* the indices: built with the values (ir_verify checks it) */
    ir_attrs oh = {.rank = r + 1, .shape = s, .index = axis}, cv = {.type = n.etype};
    int32_t hot = build(g, OP_ONE_HOT, 1, &idx, &oh);
    hot = build(g, OP_CONVERT, 1, &hot, &cv);
    acc(g, a, sum(g, bin(g, OP_MULTIPLY, hot, bcast(g, gi, r + 1, s, 1u << axis)),
                  1u << (axis + 1)));
}

/* ---- convolution and pooling (window.c's general forms) ---- */

/* dilated(n, s): (n - 1) * s + 1, or 0 for n = 0. */
static int64_t dilated(int64_t n, int64_t s) { return n ? (n - 1) * s + 1 : 0; }

/* out = convolution(x, w): x [N, C, d..], w [K, C/G, f..], out [N, K, o..], along each spatial
 * axis stride s, dilation dil, padding pb and pa, data dilation dd. With P the dilated, padded
 * input, out[o] = sum over taps t of P[o s + t dil] w[t], so
 *  - gx is a convolution of g dilated by s (data dilation s) with the filters flipped along the
 *    spatial axes and their channels swapped within each group ([C, K/G, f..]), dilation dil,
 *    stride dd (x's elements are every dd-th of P), padded below by (f - 1) dil - pb and above
 *    so that it has d elements;
 *  - gw is a convolution of x as [C/G, G N, d..] (images as channels, in G groups) with g as
 *    filters [K, N, o..] dilated by s, stride dil, x's padding and data dilation (the padding
 *    above cropped to what the windows read): [C/G, K, f..], transposed. */
static void rule_conv(gctx *g, int32_t gi, int32_t node, int32_t x, int32_t w)
{
    nest_function *f = g->f;
    ir_node n = f->nodes[node], X = f->nodes[x], W = f->nodes[w];
    const ir_window *win = n.a.win;
    int nsp = win->nsp, r = X.rank;
    int64_t G = win->groups, C = X.shape[1], K = W.shape[0], N = X.shape[0];
    if (ir_count(&n) == 0 || ir_count(&X) == 0 || ir_count(&W) == 0)
        return; /* nothing is summed: the gradients are zeros */
    int64_t pb[IR_MAX_SPATIAL], pa[IR_MAX_SPATIAL], spatial[NEST_MAX_RANK];
    int64_t s5[NEST_MAX_RANK], t5[NEST_MAX_RANK], o5[NEST_MAX_RANK], shape[NEST_MAX_RANK];
    for (int i = 0; i < nsp; i++)
        spatial[i] = 2 + i;
    if (g->need[x]) {
        /* w [K, C/G, f..] as [G, K/G, C/G, f..], read as [G, C/G, K/G, f..]: [C, K/G, f..] */
        int64_t order[NEST_MAX_RANK] = {0, 2, 1};
        s5[0] = t5[0] = G;
        s5[1] = t5[2] = K / G;
        s5[2] = t5[1] = C / G;
        shape[0] = C;
        shape[1] = K / G;
        for (int i = 0; i < nsp; i++) {
            order[3 + i] = 3 + i;
            s5[3 + i] = t5[3 + i] = shape[2 + i] = W.shape[2 + i];
            int64_t d = X.shape[2 + i], F = dilated(W.shape[2 + i], win->dilation[i]);
            int64_t lg = dilated(n.shape[2 + i], win->stride[i]);
            pb[i] = F - 1 - win->pad_below[i];
            pa[i] = (d - 1) * win->data_dilation[i] + F - lg - pb[i];
        }
        int32_t wt = reshape(g, reshape(g, reshape(g, w, NULL, r + 1, s5), order, r + 1, t5), NULL, r,
                             shape);
        ir_attrs rv = {.naxes = nsp, .axes = spatial};
        wt = build(g, OP_REVERSE, 1, &wt, &rv);
        ir_attrs at = {.step = win->data_dilation, .dilation = win->dilation, .pad_below = pb,
                       .pad_above = pa, .data_dilation = win->stride, .groups = G};
        acc(g, x, build(g, OP_CONVOLUTION, 2, (int32_t[]){gi, wt}, &at));
    }
    if (g->need[w] && dim_is_sym(N)) { /* the images would be channels of a symbolic count */
        refuse_sym(g, node, N, "the filters of a convolution");
        return;
    }
    if (g->need[w]) {
        /* x [N, C, d..] as [N, G, C/G, d..], read as [C/G, G, N, d..]: [C/G, G N, d..] */
        int64_t xo[NEST_MAX_RANK] = {2, 1, 0}, go[NEST_MAX_RANK] = {1, 2, 0}, wo[NEST_MAX_RANK] = {1, 0};
        s5[0] = N;
        s5[1] = G;
        s5[2] = C / G;
        shape[0] = C / G;
        shape[1] = G * N;
        /* g [N, K, o..] as [N, G, K/G, o..], read as [G, K/G, N, o..]: [K, N, o..] */
        t5[0] = N;
        t5[1] = G;
        t5[2] = K / G;
        o5[0] = K;
        o5[1] = N;
        int64_t ws[NEST_MAX_RANK];
        ws[0] = K;
        ws[1] = C / G;
        for (int i = 0; i < nsp; i++) {
            xo[3 + i] = go[3 + i] = 3 + i;
            wo[2 + i] = 2 + i;
            s5[3 + i] = shape[2 + i] = X.shape[2 + i];
            t5[3 + i] = o5[2 + i] = n.shape[2 + i];
            ws[2 + i] = W.shape[2 + i];
            int64_t lp = dilated(X.shape[2 + i], win->data_dilation[i]) + win->pad_below[i] +
                         win->pad_above[i];
            int64_t used = dilated(n.shape[2 + i], win->stride[i]) +
                           (W.shape[2 + i] - 1) * win->dilation[i];
            pb[i] = win->pad_below[i];
            pa[i] = win->pad_above[i] - (lp - used);
        }
        int32_t xt = reshape(g, reshape(g, x, NULL, r + 1, s5), xo, r, shape);
        int32_t gt = reshape(g, reshape(g, gi, NULL, r + 1, t5), go, r, o5);
        ir_attrs at = {.step = win->dilation, .dilation = win->stride, .pad_below = pb,
                       .pad_above = pa, .data_dilation = win->data_dilation, .groups = G};
        int32_t c = build(g, OP_CONVOLUTION, 2, (int32_t[]){xt, gt}, &at);
        acc(g, w, reshape(g, c, wo, r, ws));
    }
}

/* out = max_pool or avg_pool of x. Each tap t of the window reads P (x padded) at o s + t, a
 * strided slice of P; its share of g goes back to x through a pad with interior s - 1 (below
 * t - pb, cropping where negative), and the taps' shares add up:
 *  - max_pool: the first tap in the window (row-major) equal to the result, among the elements
 *    of x (not the padding), takes g, as the interpreter picks it and PyTorch does;
 *  - avg_pool: every tap takes g over the window's count (its elements of x, or the whole
 *    window with include_pad). */
static void rule_pool(gctx *g, int32_t gi, int32_t node, int32_t x)
{
    nest_function *f = g->f;
    ir_node n = f->nodes[node], X = f->nodes[x];
    const ir_window *win = n.a.win;
    int nsp = win->nsp, r = X.rank, et = n.etype;
    if (ir_count(&n) == 0 || ir_count(&X) == 0)
        return;
    bool padded = false;
    int64_t taps = 1, below[NEST_MAX_RANK] = {0}, above[NEST_MAX_RANK] = {0}, mid[NEST_MAX_RANK] = {0};
    int64_t lo[NEST_MAX_RANK] = {0}, up[NEST_MAX_RANK], st[NEST_MAX_RANK], t[IR_MAX_SPATIAL] = {0};
    for (int i = 0; i < nsp; i++) {
        taps *= win->window[i];
        padded |= win->pad_below[i] || win->pad_above[i];
        below[2 + i] = win->pad_below[i];
        above[2 + i] = win->pad_above[i];
        mid[2 + i] = win->stride[i] - 1;
    }
    up[0] = n.shape[0];
    up[1] = n.shape[1];
    st[0] = st[1] = 1;
    /* windows that tile x (stride = window, no padding): each tap's share is a strided part
     * of x's gradient, and the parts stack into it without any index arithmetic */
    bool tiled = !padded;
    for (int i = 0; i < nsp; i++)
        tiled &= win->stride[i] == win->window[i];
    int32_t *terms = tiled ? malloc((size_t)taps * sizeof *terms) : NULL;
    if (tiled && !terms) {
        ir_error(f, NEST_ERR_NOMEM, "grad: out of memory");
        g->failed = true;
        return;
    }
    int32_t zero = fill(g, et, 0, 0, NULL), share = gi, P = x, V = -1, found = -1, sum = -1;
    if (n.op == OP_AVG_POOL) { /* g over each window's count */
        int64_t cnt = 1, osp = 1;
        for (int i = 0; i < nsp; i++)
            osp *= n.shape[2 + i];
        if (win->include_pad || !padded) {
            for (int i = 0; i < nsp; i++)
                cnt *= win->window[i];
            share = bin(g, OP_DIVIDE, gi, like(g, (double)cnt, gi));
        } else { /* a constant over the output's positions, broadcast over N and C */
            double *c = malloc((size_t)osp * sizeof *c + 8);
            if (!c) {
                ir_error(f, NEST_ERR_NOMEM, "grad: out of memory");
                g->failed = true;
                free(terms);
                return;
            }
            for (int64_t p = 0; p < osp; p++) {
                int64_t rest = p, k = 1;
                for (int i = nsp - 1; i >= 0; i--) {
                    int64_t o = rest % n.shape[2 + i], ins = 0;
                    rest /= n.shape[2 + i];
                    for (int64_t tt = 0; tt < win->window[i]; tt++) {
                        int64_t pos = o * win->stride[i] + tt - win->pad_below[i];
                        ins += pos >= 0 && pos < X.shape[2 + i];
                    }
                    k *= ins;
                }
                c[p] = (double)k;
            }
            int64_t axes01[2] = {0, 1};
            int32_t cn = NEST_NONE;
            if (!g->failed) {
                ir_attrs ca = {.type = NEST_F64, .rank = nsp, .shape = n.shape + 2, .data = c,
                               .count = osp};
                cn = ir_build(f, OP_CONSTANT, 0, NULL, &ca);
                g->failed |= cn < 0;
            }
            free(c);
            if (et != NEST_F64) {
                ir_attrs cv = {.type = et};
                cn = build(g, OP_CONVERT, 1, &cn, &cv);
            }
            ir_attrs ba = {.rank = r, .shape = n.shape, .naxes = 2, .axes = axes01};
            share = bin(g, OP_DIVIDE, gi, build(g, OP_BROADCAST, 1, &cn, &ba));
        }
    } else if (padded) { /* P, and V: which of P's elements are x's */
        ir_attrs pa = {.below = below, .above = above};
        P = build(g, OP_PAD, 2, (int32_t[]){x, zero}, &pa);
        int32_t yes = fill(g, NEST_BOOL, 1, r, X.shape), no = fill(g, NEST_BOOL, 0, 0, NULL);
        V = build(g, OP_PAD, 2, (int32_t[]){yes, no}, &pa);
    }
    for (int64_t k = 0; k < taps && !g->failed; k++) {
        int64_t pb[NEST_MAX_RANK] = {0}, pa[NEST_MAX_RANK] = {0};
        for (int i = 0; i < nsp; i++) {
            int64_t o = n.shape[2 + i], s = win->stride[i];
            int64_t lp = X.shape[2 + i] + win->pad_below[i] + win->pad_above[i];
            lo[2 + i] = t[i];
            up[2 + i] = t[i] + (o - 1) * s + 1;
            st[2 + i] = s;
            pb[2 + i] = t[i] - win->pad_below[i];
            pa[2 + i] = lp - up[2 + i] - win->pad_above[i];
        }
        int32_t v = share;
        if (n.op == OP_MAX_POOL) {
            int32_t eq = bin(g, OP_EQUAL, slice(g, P, lo, up, st), node);
            if (V >= 0)
                eq = bin(g, OP_AND, eq, slice(g, V, lo, up, st));
            int32_t m = found < 0 ? eq : bin(g, OP_AND, eq, un(g, OP_NOT, found));
            found = found < 0 ? eq : bin(g, OP_OR, found, eq);
            v = sel(g, m, gi, like(g, 0, gi));
        }
        if (tiled) { /* [N, C, o1, 1, .., ok, 1], to be stacked along the tap axes */
            int64_t s6[NEST_MAX_RANK] = {n.shape[0], n.shape[1]};
            for (int i = 0; i < nsp; i++) {
                s6[2 + 2 * i] = n.shape[2 + i];
                s6[3 + 2 * i] = 1;
            }
            terms[k] = reshape(g, v, NULL, 2 + 2 * nsp, s6);
        } else {
            ir_attrs at = {.below = pb, .above = pa, .interior = mid};
            int32_t term = build(g, OP_PAD, 2, (int32_t[]){v, zero}, &at);
            sum = sum < 0 ? term : bin(g, OP_ADD, sum, term);
        }
        for (int i = nsp - 1; i >= 0; i--) { /* the next tap, row-major */
            if (++t[i] < win->window[i])
                break;
            t[i] = 0;
        }
    }
    if (tiled && !g->failed) {
        /* the taps stacked, innermost axis first: [N, C, o1, w1, .., ok, wk], which is x's
         * elements that the windows cover, then zeros for those they do not */
        for (int i = nsp - 1, count = (int)taps; i >= 0; i--) {
            int w = (int)win->window[i];
            for (int j = 0; j < count / w; j++)
                terms[j] = w > 1 ? concat(g, w, terms + j * w, 3 + 2 * i) : terms[j * w];
            count /= w;
        }
        int64_t cover[NEST_MAX_RANK] = {n.shape[0], n.shape[1]}, rest[NEST_MAX_RANK] = {0};
        bool short_ = false;
        for (int i = 0; i < nsp; i++) {
            cover[2 + i] = n.shape[2 + i] * win->window[i];
            rest[2 + i] = X.shape[2 + i] - cover[2 + i];
            short_ |= rest[2 + i] != 0;
        }
        sum = reshape(g, terms[0], NULL, r, cover);
        if (short_) {
            ir_attrs at = {.below = below, .above = rest};
            for (int i = 0; i < nsp; i++)
                below[2 + i] = 0;
            sum = build(g, OP_PAD, 2, (int32_t[]){sum, zero}, &at);
        }
    }
    free(terms);
    acc(g, x, sum);
}

/* ---- the rule of each op ---- */

static void rule(gctx *g, int32_t i)
{
    nest_function *f = g->f;
    ir_node n = f->nodes[i];
    int32_t gi = g->adj[i];
    int32_t a = n.nin > 0 ? ir_resolve(f, n.in[0]) : -1, b = n.nin > 1 ? ir_resolve(f, n.in[1]) : -1;
    bool na = a >= 0 && g->need[a], nb = b >= 0 && g->need[b];
    switch ((ir_op)n.op) {
    case OP_ADD:
        if (na)
            acc(g, a, gi);
        if (nb)
            acc(g, b, gi);
        break;
    case OP_SUBTRACT:
        if (na)
            acc(g, a, gi);
        if (nb)
            acc(g, b, un(g, OP_NEGATIVE, gi));
        break;
    case OP_MULTIPLY:
        if (na)
            acc(g, a, bin(g, OP_MULTIPLY, gi, b));
        if (nb)
            acc(g, b, bin(g, OP_MULTIPLY, gi, a));
        break;
    case OP_DIVIDE: /* d(a/b)/db = -(a/b)/b */
        if (na)
            acc(g, a, bin(g, OP_DIVIDE, gi, b));
        if (nb)
            acc(g, b, un(g, OP_NEGATIVE, bin(g, OP_DIVIDE, bin(g, OP_MULTIPLY, gi, i), b)));
        break;
    case OP_MAXIMUM:
    case OP_MINIMUM: {
        int32_t m = bin(g, n.op == OP_MAXIMUM ? OP_GREATER : OP_LESS, a, b);
        int32_t zero = like(g, 0, i);
        if (na)
            acc(g, a, sel(g, m, gi, zero));
        if (nb)
            acc(g, b, sel(g, m, zero, gi));
        break;
    }
    case OP_POWER: { /* as PyTorch: no gradient for a where b == 0, nor for b where a == 0 <= b */
        int32_t zero = like(g, 0, i);
        if (na) {
            int32_t bm1 = bin(g, OP_SUBTRACT, b, like(g, 1, b));
            int32_t t = bin(g, OP_MULTIPLY, gi, bin(g, OP_MULTIPLY, b, bin(g, OP_POWER, a, bm1)));
            acc(g, a, sel(g, bin(g, OP_EQUAL, b, zero), zero, t));
        }
        if (nb) {
            int32_t t = bin(g, OP_MULTIPLY, gi, bin(g, OP_MULTIPLY, i, un(g, OP_LOG, a)));
            int32_t keep = sel(g, bin(g, OP_LESS, b, zero), t, zero);
            acc(g, b, sel(g, bin(g, OP_EQUAL, a, zero), keep, t));
        }
        break;
    }
    case OP_NEGATIVE:
        acc(g, a, un(g, OP_NEGATIVE, gi));
        break;
    case OP_ABS: {
        int32_t zero = like(g, 0, i);
        int32_t neg = sel(g, bin(g, OP_LESS, a, zero), un(g, OP_NEGATIVE, gi), zero);
        acc(g, a, sel(g, bin(g, OP_GREATER, a, zero), gi, neg));
        break;
    }
    case OP_EXP:
        acc(g, a, bin(g, OP_MULTIPLY, gi, i));
        break;
    case OP_LOG:
        acc(g, a, bin(g, OP_DIVIDE, gi, a));
        break;
    case OP_SQRT:
        acc(g, a, bin(g, OP_DIVIDE, gi, bin(g, OP_MULTIPLY, like(g, 2, i), i)));
        break;
    case OP_TANH:
        acc(g, a, bin(g, OP_MULTIPLY, gi,
                      bin(g, OP_SUBTRACT, like(g, 1, i), bin(g, OP_MULTIPLY, i, i))));
        break;
    case OP_SIN:
        acc(g, a, bin(g, OP_MULTIPLY, gi, un(g, OP_COS, a)));
        break;
    case OP_COS:
        acc(g, a, un(g, OP_NEGATIVE, bin(g, OP_MULTIPLY, gi, un(g, OP_SIN, a))));
        break;
    case OP_TAN: /* 1 + tan^2 */
        acc(g, a, bin(g, OP_MULTIPLY, gi, bin(g, OP_ADD, like(g, 1, i), bin(g, OP_MULTIPLY, i, i))));
        break;
    case OP_ASIN:
    case OP_ACOS: { /* +-1 / sqrt(1 - a^2) */
        int32_t d = bin(g, OP_DIVIDE, gi,
                        un(g, OP_SQRT, bin(g, OP_SUBTRACT, like(g, 1, a), bin(g, OP_MULTIPLY, a, a))));
        acc(g, a, n.op == OP_ASIN ? d : un(g, OP_NEGATIVE, d));
        break;
    }
    case OP_ATAN:
        acc(g, a, bin(g, OP_DIVIDE, gi, bin(g, OP_ADD, like(g, 1, a), bin(g, OP_MULTIPLY, a, a))));
        break;
    case OP_SINH:
        acc(g, a, bin(g, OP_MULTIPLY, gi, un(g, OP_COSH, a)));
        break;
    case OP_COSH:
        acc(g, a, bin(g, OP_MULTIPLY, gi, un(g, OP_SINH, a)));
        break;
    case OP_ERF: /* 2 / sqrt(pi) exp(-a^2) */
        acc(g, a, bin(g, OP_MULTIPLY, gi,
                      bin(g, OP_MULTIPLY, like(g, 1.12837916709551257390, a),
                          un(g, OP_EXP, un(g, OP_NEGATIVE, bin(g, OP_MULTIPLY, a, a))))));
        break;
    case OP_RELU: /* as PyTorch: 0 at 0 */
        acc(g, a, sel(g, bin(g, OP_GREATER, a, like(g, 0, a)), gi, like(g, 0, i)));
        break;
    case OP_SIGMOID:
        acc(g, a, bin(g, OP_MULTIPLY, gi,
                      bin(g, OP_MULTIPLY, i, bin(g, OP_SUBTRACT, like(g, 1, i), i))));
        break;
    case OP_FLOOR:
    case OP_CEILING:
    case OP_SIGN: /* steps: zero almost everywhere */
        break;
    case OP_REVERSE:
        acc(g, a, on_axes(g, OP_REVERSE, gi, n.a.axes));
        break;
    case OP_SOFTMAX: { /* y * (g - sum(g * y) over the axes) */
        int32_t s = sum(g, bin(g, OP_MULTIPLY, gi, i), n.a.axes);
        s = bcast(g, s, n.rank, n.shape, n.a.axes);
        acc(g, a, bin(g, OP_MULTIPLY, i, bin(g, OP_SUBTRACT, gi, s)));
        break;
    }
    case OP_PRODUCT:
        rule_product(g, gi, i, a);
        break;
    case OP_PAD:
        rule_pad(g, gi, i, a, b);
        break;
    case OP_REPLACE_SLICE: { /* a outside the box, b inside */
        const int64_t *lo = n.a.slice.lower, *up = n.a.slice.upper, *st = n.a.slice.step;
        if (na) {
            ir_attrs at = {.lower = lo, .upper = up, .step = st};
            int32_t in[2] = {gi, like(g, 0, b)};
            acc(g, a, build(g, OP_REPLACE_SLICE, 2, in, &at));
        }
        if (nb)
            acc(g, b, slice(g, gi, lo, up, st));
        break;
    }
    case OP_BATCH_DOT:
        rule_batch_dot(g, gi, i, a, b);
        break;
    case OP_GATHER: { /* the adjoint: g added back where the indices took */
        ir_attrs at = {.index = n.a.axis};
        int32_t in[3] = {like(g, 0, a), b, gi};
        acc(g, a, build(g, OP_SCATTER_ADD, 3, in, &at));
        break;
    }
    case OP_SCATTER_ADD: {
        int32_t u = ir_resolve(f, n.in[2]);
        if (na)
            acc(g, a, gi);
        if (g->need[u]) {
            ir_attrs at = {.index = n.a.axis};
            int32_t in[2] = {gi, b};
            acc(g, u, build(g, OP_GATHER, 2, in, &at));
        }
        break;
    }
    case OP_CONVOLUTION:
        rule_conv(g, gi, i, a, b);
        break;
    case OP_MAX_POOL:
    case OP_AVG_POOL:
        rule_pool(g, gi, i, a);
        break;
    case OP_TOPK: /* the values; the indices pass nothing */
        if (n.a.topk.which == 0)
            rule_topk(g, gi, i, a);
        break;
    case OP_SELECT: {
        int32_t c = a, x = b, y = ir_resolve(f, n.in[2]);
        int32_t zero = like(g, 0, i);
        if (g->need[x])
            acc(g, x, sel(g, c, gi, zero));
        if (g->need[y])
            acc(g, y, sel(g, c, zero, gi));
        break;
    }
    case OP_CONVERT:
        if (na && ir_is_float(f->nodes[a].etype)) {
            ir_attrs at = {.type = f->nodes[a].etype};
            acc(g, a, f->nodes[a].etype == n.etype ? gi : build(g, OP_CONVERT, 1, &gi, &at));
        }
        break;
    case OP_DOT:
        rule_dot(g, gi, a, b);
        break;
    case OP_BROADCAST:
        acc(g, a, sum(g, gi, n.a.axes));
        break;
    case OP_RESHAPE:
        rule_reshape(g, gi, i, a);
        break;
    case OP_SLICE:
        rule_slice(g, gi, i, a);
        break;
    case OP_CONCAT: {
        int64_t lo[NEST_MAX_RANK] = {0}, up[NEST_MAX_RANK], start = 0;
        memcpy(up, n.shape, (size_t)n.rank * sizeof *up);
        for (int j = 0; j < n.nin; j++) {
            int32_t x = ir_resolve(f, n.in[j]);
            int64_t len = f->nodes[x].shape[n.a.axis];
            lo[n.a.axis] = start;
            up[n.a.axis] = dim_add(f, start, len); /* symbolic along a symbolic axis */
            if (g->need[x])
                acc(g, x, slice(g, gi, lo, up, NULL));
            start = up[n.a.axis];
        }
        break;
    }
    case OP_SUM:
        acc(g, a, bcast(g, gi, f->nodes[a].rank, f->nodes[a].shape, n.a.axes));
        break;
    case OP_MAX:
    case OP_MIN:
        rule_extremum(g, gi, i, a);
        break;
    case OP_PARAMETER:
    case OP_STATE:
    case OP_CONSTANT: /* leaves */
        break;
    default: /* an op without a rule here: an error rather than a silent zero */
        ir_error(f, NEST_ERR_ARG, "grad: no gradient rule for %s yet (on the path from %s to the loss)",
                 ir_ops[n.op].name, n.name ? n.name : "a value");
        g->failed = true;
        break;
    }
}

/* Whether op passes a gradient from its result to operand j (given float types on both). Every
 * kind is listed: a new one must say. */
static bool differentiable(const ir_node *n, int j)
{
    switch (ir_kind_of(n)) {
    case K_EW:
    case K_CONVERT:
    case K_DOT:
    case K_BROADCAST:
    case K_RESHAPE:
    case K_SLICE:
    case K_CONCAT:
    case K_REDUCE:
    case K_REVERSE:
    case K_SOFTMAX:
    case K_CONV:           /* the input and the filters */
    case K_POOL:
    case K_PAD:            /* the operand and the padding value */
    case K_REPLACE_SLICE:
    case K_BATCH_DOT:
        return true;
    case K_GATHER:         /* not the indices */
        return j == 0;
    case K_SCATTER_ADD:
        return j == 0 || j == 2;
    case K_TOPK:           /* the values; the indices are integers */
        return n->a.topk.which == 0;
    case K_SELECT:         /* not the condition */
        return j > 0;
    case K_CMP:            /* bool results */
    case K_ARGREDUCE:      /* indices (nest_grad refuses a path through them) */
    case K_ONE_HOT:        /* of integer indices, or a step function of float ones */
    case K_PARAM:
    case K_CONST:
    case K_STATE:
    case K_TUPLE:
    case K_GET:
        return false;
    }
    return false;
}

nest_value nest_grad(nest_function *f, nest_value loss, int n, const nest_value *wrt)
{
    if (!f)
        return NEST_NONE;
    if (!f->name)
        return ir_error(f, NEST_ERR_ARG, "the function has no valid name"), NEST_NONE;
    if (loss < 0)
        return f->status ? NEST_NONE : (ir_error(f, NEST_ERR_ARG, "grad: the loss is NEST_NONE"), NEST_NONE);
    if (n < 1 || !wrt)
        return ir_error(f, NEST_ERR_ARG, "grad: give at least one value to differentiate by"),
               NEST_NONE;
    if (loss >= f->nnodes)
        return ir_error(f, NEST_ERR_ARG, "grad: %d is not a value of function %s", loss, f->name),
               NEST_NONE;
    int32_t L = ir_resolve(f, loss);
    const ir_node *ln = &f->nodes[L];
    if (ln->etype == IR_TUPLE || !ir_is_float(ln->etype) || ln->rank != 0) {
        buf b = {0};
        ir_format_type(&b, f, L);
        char *t = buf_finish(&b);
        ir_error(f, NEST_ERR_TYPE, "grad: the loss must be an f32 or f64 scalar, not %s", t ? t : "?");
        free(t);
        return NEST_NONE;
    }
    int32_t top = f->nnodes, lo = top;
    for (int k = 0; k < n; k++) {
        if (wrt[k] < 0)
            return f->status ? NEST_NONE : (ir_error(f, NEST_ERR_ARG, "grad: value %d is NEST_NONE", k + 1), NEST_NONE);
        if (wrt[k] >= f->nnodes)
            return ir_error(f, NEST_ERR_ARG, "grad: %d is not a value of function %s", wrt[k], f->name),
                   NEST_NONE;
        int32_t w = ir_resolve(f, wrt[k]);
        const ir_node *x = &f->nodes[w];
        const char *nm = x->name ? x->name : ir_ops[x->op].name;
        if (x->op == OP_STATE && !f->module->states[x->a.state].trainable)
            return ir_error(f, NEST_ERR_ARG,
                            "grad: %s is a persistent tensor, which is not trained (declare it "
                            "var to differentiate by it)",
                            nm),
                   NEST_NONE;
        if (x->op != OP_STATE && x->op != OP_PARAMETER)
            return ir_error(f, NEST_ERR_ARG,
                            "grad: %s is not a variable or a parameter (gradients are taken with "
                            "respect to inputs)",
                            nm),
                   NEST_NONE;
        if (!ir_is_float(x->etype))
            return ir_error(f, NEST_ERR_TYPE,
                            "grad: %s is %s, which has no gradient (only f32 and f64 values have "
                            "one)",
                            nm, nest_type_name((nest_type)x->etype)),
                   NEST_NONE;
        if (w < lo)
            lo = w;
    }
    gctx g = {f, malloc((size_t)top * sizeof(int32_t)), calloc((size_t)top, sizeof(bool)), false};
    bool *dep = calloc((size_t)top, sizeof(bool)), *reach = calloc((size_t)top, sizeof(bool));
    int32_t *res = malloc((size_t)n * sizeof *res), t = NEST_NONE;
    if (!g.adj || !g.need || !dep || !reach || !res) {
        ir_error(f, NEST_ERR_NOMEM, "grad: out of memory");
        g.failed = true;
        goto out;
    }
    /* which nodes depend on a wrt value through float ops, and which reach the loss */
    for (int k = 0; k < n; k++)
        dep[ir_resolve(f, wrt[k])] = true;
    for (int32_t i = lo; i < top; i++) {
        const ir_node *x = &f->nodes[i];
        if (dep[i] || x->etype == IR_TUPLE || x->op == OP_GET || !ir_is_float(x->etype))
            continue;
        for (int j = 0; j < x->nin && !dep[i]; j++) {
            int32_t o = ir_resolve(f, x->in[j]);
            dep[i] = dep[o] && ir_is_float(f->nodes[o].etype) && differentiable(x, j);
        }
    }
    reach[L] = true;
    for (int32_t i = L; i >= 0; i--) {
        const ir_node *x = &f->nodes[i];
        if (!reach[i] || x->etype == IR_TUPLE)
            continue;
        for (int j = 0; j < x->nin; j++)
            reach[ir_resolve(f, x->in[j])] = true;
    }
    for (int32_t i = 0; i < top; i++) {
        g.need[i] = dep[i] && reach[i];
        g.adj[i] = -1;
    }
    /* an index of a value that depends on a wrt value, on the way to the loss: no derivative */
    for (int32_t i = lo; i < top && !g.failed; i++) {
        const ir_node *x = &f->nodes[i];
        int32_t o = x->nin > 0 ? ir_resolve(f, x->in[0]) : -1;
        if (ir_kind_of(x) == K_ARGREDUCE && reach[i] && dep[o]) {
            ir_error(f, NEST_ERR_ARG,
                     "grad: %s%s%s has no gradient (its result is an index), and the loss depends "
                     "through it on a value to differentiate by",
                     ir_ops[x->op].name, x->name ? " " : "", x->name ? x->name : "");
            g.failed = true;
        }
    }
    if (g.need[L]) {
        g.adj[L] = like(&g, 1, L);
        for (int32_t i = L; i >= lo && !g.failed; i--)
            if (g.need[i] && g.adj[i] >= 0)
                rule(&g, i);
    }
    for (int k = 0; k < n && !g.failed; k++) {
        int32_t w = ir_resolve(f, wrt[k]);
        res[k] = g.adj[w] >= 0 ? g.adj[w] : like(&g, 0, w);
    }
    if (!g.failed)
        t = build(&g, OP_TUPLE, n, res, NULL);
out:
    free(g.adj);
    free(g.need);
    free(dep);
    free(reach);
    free(res);
    if (g.failed) {
        if (!f->status)
            ir_error(f, NEST_ERR_NOMEM, "grad: out of memory");
        f->nnodes = top; /* the nodes built so far go: the function is as it was */
        return NEST_NONE;
    }
    return t;
}
