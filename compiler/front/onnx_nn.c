/*
 * onnx_nn.c - the ONNX operators of networks: reductions, Softmax and LogSoftmax, MatMul and Gemm,
 * BatchNormalization and LayerNormalization, the global pools.
 */
#include <string.h>

#include "onnx.h"

#define R NEST_MAX_RANK

typedef nest_value (*red_fn)(nest_function *, nest_value, int, const int64_t *);

/* The reduced axes (all when none are given, unless noop_with_empty_axes) and the kept shape. */
static int reduce(ox *c, red_fn fn, bool mean, int input_opset)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    int64_t axes[R], keep[R];
    int n = ox_axes_arg(c, input_opset, 1, axes);
    if (n == -2)
        return NEST_ERR_ARG;
    if (n <= 0 && ox_attr_int(c, "noop_with_empty_axes", 0)) {
        c->out[0] = x;
        return NEST_OK;
    }
    uint32_t red = 0;
    if (n <= 0) {
        red = rank ? (uint32_t)((1ull << rank) - 1) : 0;
    } else {
        for (int i = 0; i < n; i++) {
            int a = ox_axis(c, axes[i], rank, "axis");
            if (a < 0)
                return NEST_ERR_ARG;
            red |= 1u << a;
        }
    }
    int na = 0;
    int64_t count = 1;
    for (int i = 0; i < rank; i++) {
        if (red >> i & 1) {
            axes[na++] = i;
            count *= ox_shape(c, x)[i];
            keep[i] = 1;
        } else {
            keep[i] = ox_shape(c, x)[i];
        }
    }
    nest_value r = fn(c->f, x, na, axes);
    if (mean)
        r = nest_divide(c->f, r, ox_full_like(c, r, (double)count));
    c->out[0] = ox_attr_int(c, "keepdims", 1) ? ox_reshape(c, r, rank, keep) : r;
    return NEST_OK;
}

int ox_op_reduce_sum(ox *c) { return reduce(c, nest_sum, false, 13); }
int ox_op_reduce_mean(ox *c) { return reduce(c, nest_sum, true, 18); }
int ox_op_reduce_max(ox *c) { return reduce(c, nest_max, false, 18); }
int ox_op_reduce_min(ox *c) { return reduce(c, nest_min, false, 18); }

/* x reduced over the axes from `first` to the end, kept as extents of 1 (for broadcasting
 * back). */
static nest_value reduce_tail(ox *c, red_fn fn, nest_value x, int first)
{
    if (x == NEST_NONE)
        return NEST_NONE;
    int rank = ox_rank(c, x);
    int64_t axes[R], keep[R];
    for (int i = 0; i < rank; i++) {
        keep[i] = i < first ? ox_shape(c, x)[i] : 1;
        if (i >= first)
            axes[i - first] = i;
    }
    return ox_reshape(c, fn(c->f, x, rank - first, axes), rank, keep);
}

/* x reduced over one axis, kept as an extent of 1. */
static nest_value reduce_axis(ox *c, red_fn fn, nest_value x, int axis)
{
    if (x == NEST_NONE)
        return NEST_NONE;
    int rank = ox_rank(c, x);
    int64_t a = axis, keep[R];
    for (int i = 0; i < rank; i++)
        keep[i] = i == axis ? 1 : ox_shape(c, x)[i];
    return ox_reshape(c, fn(c->f, x, 1, &a), rank, keep);
}

static nest_value like(ox *c, nest_value v, nest_value shape_from)
{
    if (v == NEST_NONE || shape_from == NEST_NONE)
        return NEST_NONE;
    return ox_bcast_to(c, v, ox_rank(c, shape_from), ox_shape(c, shape_from));
}

/* Softmax and LogSoftmax: along one axis (opset 13), or over the axes from `axis` on of the
 * input flattened to 2-D (earlier opsets). */
static int softmax(ox *c, bool log_of)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    int axis = ox_axis(c, ox_attr_int(c, "axis", c->opset >= 13 ? -1 : 1), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    nest_value v = x;
    if (c->opset < 13) {
        int64_t two[2] = {ox_count(axis, ox_shape(c, x)),
                          ox_count(rank - axis, ox_shape(c, x) + axis)};
        v = ox_reshape(c, x, 2, two);
        axis = 1;
    }
    nest_value m = like(c, reduce_axis(c, nest_max, v, axis), v);
    nest_value d = nest_subtract(c->f, v, m);
    nest_value e = nest_exp(c->f, d);
    nest_value s = like(c, reduce_axis(c, nest_sum, e, axis), v);
    nest_value r = log_of ? nest_subtract(c->f, d, nest_log(c->f, s)) : nest_divide(c->f, e, s);
    c->out[0] = ox_reshape(c, r, rank, ox_shape(c, x));
    return NEST_OK;
}

int ox_op_softmax(ox *c) { return softmax(c, false); }
int ox_op_log_softmax(ox *c) { return softmax(c, true); }

/* ---- products of matrices ---- */

/* numpy's matmul: 1-D operands gain an axis (dropped again), batch dims broadcast. */
static nest_value matmul(ox *c, nest_value a, nest_value b)
{
    if (a == NEST_NONE || b == NEST_NONE)
        return NEST_NONE;
    int ra = ox_rank(c, a), rb = ox_rank(c, b);
    if (ra == 0 || rb == 0) {
        ox_err(c, NEST_ERR_TYPE, "operands must have rank 1 or more");
        return NEST_NONE;
    }
    if (ra == 1 || rb == 1 || rb == 2) {
        /* dot contracts a's last axis with b's first: [..., M, K] x [K, N] -> [..., M, N] */
        int64_t k = ox_shape(c, a)[ra - 1], kb = ox_shape(c, b)[rb == 1 ? 0 : rb - 2];
        if (k != kb) {
            ox_err(c, NEST_ERR_TYPE, "inner dimensions %lld and %lld differ", (long long)k,
                   (long long)kb);
            return NEST_NONE;
        }
        if (rb <= 2)
            return nest_dot(c->f, a, b);
        /* a vector times a batch of matrices: [K] x [..., K, N] -> [..., N] */
        int64_t as[2] = {1, k};
        a = ox_reshape(c, a, 2, as);
        ra = 2;
    }
    /* batches: [..., M, K, 1] * [..., 1, K, N] summed over K */
    int rank = ra > rb ? ra : rb;
    int64_t shape[R + 1], bsa[R], bsb[R];
    for (int i = 0; i < rank - 2; i++) {
        int ia = i - (rank - ra), ib = i - (rank - rb);
        int64_t da = ia >= 0 ? ox_shape(c, a)[ia] : 1, db = ib >= 0 ? ox_shape(c, b)[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            ox_err(c, NEST_ERR_TYPE, "batch dimensions %lld and %lld do not broadcast",
                   (long long)da, (long long)db);
            return NEST_NONE;
        }
        shape[i] = da == 1 ? db : da;
    }
    int64_t m = ox_shape(c, a)[ra - 2], k = ox_shape(c, a)[ra - 1];
    int64_t kb = ox_shape(c, b)[rb - 2], n = ox_shape(c, b)[rb - 1];
    if (k != kb) {
        ox_err(c, NEST_ERR_TYPE, "inner dimensions %lld and %lld differ", (long long)k,
               (long long)kb);
        return NEST_NONE;
    }
    if (rank + 1 > R) {
        ox_err(c, NEST_ERR_LIMIT, "rank %d is too large", rank);
        return NEST_NONE;
    }
    memcpy(bsa, shape, sizeof bsa);
    memcpy(bsb, shape, sizeof bsb);
    bsa[rank - 2] = m, bsa[rank - 1] = k, bsa[rank] = 1;
    bsb[rank - 2] = 1, bsb[rank - 1] = k, bsb[rank] = n;
    int64_t s[R + 1];
    memcpy(s, ox_shape(c, a), (size_t)ra * sizeof *s);
    s[ra] = 1;
    nest_value a3 = ox_reshape(c, a, ra + 1, s);
    memcpy(s, ox_shape(c, b), (size_t)rb * sizeof *s);
    memmove(s + rb - 1, s + rb - 2, 2 * sizeof *s);
    s[rb - 2] = 1;
    nest_value b3 = ox_reshape(c, b, rb + 1, s);
    shape[rank - 2] = m, shape[rank - 1] = k, shape[rank] = n;
    nest_value p = nest_multiply(c->f, ox_bcast_to(c, a3, rank + 1, shape), ox_bcast_to(c, b3, rank + 1, shape));
    int64_t ax = rank - 1;
    return nest_sum(c->f, p, 1, &ax);
}

int ox_op_matmul(ox *c)
{
    nest_value a = ox_in(c, 0), b = ox_in(c, 1);
    OX_CHECK(a);
    OX_CHECK(b);
    c->out[0] = matmul(c, a, b);
    return NEST_OK;
}

int ox_op_gemm(ox *c)
{
    nest_value a = ox_in(c, 0), b = ox_in(c, 1);
    OX_CHECK(a);
    OX_CHECK(b);
    if (ox_rank(c, a) != 2 || ox_rank(c, b) != 2)
        return ox_err(c, NEST_ERR_TYPE, "A and B must be matrices");
    static const int64_t swap[2] = {1, 0};
    if (ox_attr_int(c, "transA", 0))
        a = ox_transpose(c, a, swap);
    if (ox_attr_int(c, "transB", 0))
        b = ox_transpose(c, b, swap);
    OX_CHECK(a);
    OX_CHECK(b);
    nest_value y = matmul(c, a, b);
    OX_CHECK(y);
    float alpha = ox_attr_float(c, "alpha", 1), beta = ox_attr_float(c, "beta", 1);
    if (alpha != 1)
        y = nest_multiply(c->f, y, ox_full_like(c, y, alpha));
    if (ox_has(c, 2) && beta != 0) {
        nest_value cc = ox_in(c, 2);
        OX_CHECK(cc);
        cc = ox_bcast_to(c, cc, 2, ox_shape(c, y));
        if (beta != 1)
            cc = nest_multiply(c->f, cc, ox_full_like(c, cc, beta));
        y = nest_add(c->f, y, cc);
    }
    c->out[0] = y;
    return NEST_OK;
}

/* ---- normalization and pooling ---- */

/* v of shape [C] (or broadcastable) as the channel axis 1 of x's shape. */
static nest_value per_channel(ox *c, nest_value v, nest_value x)
{
    if (v == NEST_NONE || x == NEST_NONE)
        return NEST_NONE;
    int rank = ox_rank(c, x);
    if (rank < 2 || ox_rank(c, v) != 1) {
        ox_err(c, NEST_ERR_TYPE, "needs an input of rank 2 or more and per-channel vectors");
        return NEST_NONE;
    }
    int64_t s[R];
    for (int i = 0; i < rank; i++)
        s[i] = i == 1 ? ox_shape(c, v)[0] : 1;
    return ox_bcast_to(c, ox_reshape(c, v, rank, s), rank, ox_shape(c, x));
}

int ox_op_batch_norm(ox *c)
{
    if (ox_attr_int(c, "training_mode", 0) || (c->opset < 7 && !ox_attr_int(c, "is_test", 0)))
        return ox_err(c, NEST_ERR_ARG, "training mode is not supported (inference only)");
    for (int i = 1; i < c->nout; i++)
        if (c->node->output[i] && c->node->output[i][0])
            return ox_err(c, NEST_ERR_ARG, "output %d (a training statistic) is not supported",
                          i + 1);
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    double eps = ox_attr_float(c, "epsilon", 1e-5f);
    nest_value scale = ox_in(c, 1), bias = ox_in(c, 2), mean = ox_in(c, 3), var = ox_in(c, 4);
    OX_CHECK(scale);
    OX_CHECK(bias);
    OX_CHECK(mean);
    OX_CHECK(var);
    /* y = x * a + (bias - mean * a), a = scale / sqrt(var + eps): per channel, then broadcast
     * (known statistics make a and b constants after folding) */
    nest_value a = nest_divide(c->f, scale, nest_sqrt(c->f, nest_add(c->f, var, ox_full_like(c, var, eps))));
    nest_value b = nest_subtract(c->f, bias, nest_multiply(c->f, mean, a));
    c->out[0] = nest_add(c->f, nest_multiply(c->f, x, per_channel(c, a, x)), per_channel(c, b, x));
    return NEST_OK;
}

int ox_op_layer_norm(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    int axis = ox_axis(c, ox_attr_int(c, "axis", -1), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    double eps = ox_attr_float(c, "epsilon", 1e-5f);
    double n = (double)ox_count(rank - axis, ox_shape(c, x) + axis);
    nest_value mean = reduce_tail(c, nest_sum, x, axis);
    mean = nest_divide(c->f, mean, ox_full_like(c, mean, n));
    nest_value d = nest_subtract(c->f, x, like(c, mean, x));
    nest_value var = reduce_tail(c, nest_sum, nest_multiply(c->f, d, d), axis);
    var = nest_divide(c->f, var, ox_full_like(c, var, n));
    nest_value inv = nest_divide(c->f, ox_full_like(c, var, 1),
                                 nest_sqrt(c->f, nest_add(c->f, var, ox_full_like(c, var, eps))));
    nest_value y = nest_multiply(c->f, d, like(c, inv, x));
    y = nest_multiply(c->f, y, like(c, ox_in(c, 1), x));
    if (ox_has(c, 2))
        y = nest_add(c->f, y, like(c, ox_in(c, 2), x));
    c->out[0] = y;
    if (c->nout > 1)
        c->out[1] = mean;
    if (c->nout > 2)
        c->out[2] = inv;
    return NEST_OK;
}

static int global_pool(ox *c, bool avg)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    if (ox_rank(c, x) < 2)
        return ox_err(c, NEST_ERR_TYPE, "needs an input of rank 2 or more");
    nest_value r = reduce_tail(c, avg ? nest_sum : nest_max, x, 2);
    if (avg)
        r = nest_divide(c->f, r, ox_full_like(c, r, (double)ox_count(ox_rank(c, x) - 2, ox_shape(c, x) + 2)));
    c->out[0] = r;
    return NEST_OK;
}

int ox_op_global_avg_pool(ox *c) { return global_pool(c, true); }
int ox_op_global_max_pool(ox *c) { return global_pool(c, false); }
