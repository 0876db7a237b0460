/*
 * onnx_nn.c - the ONNX operators of networks: reductions, Softmax and LogSoftmax, MatMul and Gemm,
 * BatchNormalization and LayerNormalization, the global pools, ArgMax, ArgMin and TopK.
 */
#include <math.h>
#include <stdlib.h>
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
int ox_op_reduce_prod(ox *c) { return reduce(c, nest_product, false, 18); }

/* ArgMax and ArgMin: the first index of the extreme along the axis, or the last one
 * (select_last_index: the axis read backwards, the index counted back). */
static int arg_extreme(ox *c, bool max)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    if (rank < 1)
        return ox_err(c, NEST_ERR_TYPE, "the input must have rank 1 or more");
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    bool last = ox_attr_int(c, "select_last_index", 0) != 0;
    int64_t a = axis, d = ox_shape(c, x)[axis], keep[R];
    nest_value v = last ? nest_reverse(c->f, x, 1, &a) : x;
    nest_value r = max ? nest_argmax(c->f, v, a) : nest_argmin(c->f, v, a);
    if (last)
        r = nest_subtract(c->f, ox_full_like(c, r, (double)(d - 1)), r);
    for (int i = 0; i < rank; i++)
        keep[i] = i == axis ? 1 : ox_shape(c, x)[i];
    c->out[0] = ox_attr_int(c, "keepdims", 1) ? ox_reshape(c, r, rank, keep) : r;
    return NEST_OK;
}

int ox_op_argmax(ox *c) { return arg_extreme(c, true); }
int ox_op_argmin(ox *c) { return arg_extreme(c, false); }

/* TopK: the k (an attribute before opset 10, then a known input) largest or smallest along
 * the axis, sorted, equal elements in index order; values and int64 indices. */
int ox_op_topk(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    if (rank < 1)
        return ox_err(c, NEST_ERR_TYPE, "the input must have rank 1 or more");
    int axis = ox_axis(c, ox_attr_int(c, "axis", -1), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    int64_t k = -1;
    if (c->opset < 10) {
        k = ox_attr_int(c, "k", -1);
    } else {
        int n = ox_known_ints(c, 1, &k, 1);
        if (n < 0)
            return NEST_ERR_ARG;
        if (n != 1)
            return ox_err(c, NEST_ERR_ARG, "K must hold one value");
    }
    if (k < 0 || k > ox_shape(c, x)[axis])
        return ox_err(c, NEST_ERR_ARG, "K %lld is not in [0, %lld]", (long long)k,
                      (long long)ox_shape(c, x)[axis]);
    nest_value t = nest_topk(c->f, x, k, axis, ox_attr_int(c, "largest", 1) != 0);
    OX_CHECK(t);
    c->out[0] = nest_get(c->f, t, 0);
    if (c->nout > 1)
        c->out[1] = nest_get(c->f, t, 1);
    return NEST_OK;
}

/* x reduced over the axes from `first` to before `end`, kept as extents of 1 (for
 * broadcasting back). */
static nest_value reduce_keep(ox *c, red_fn fn, nest_value x, int first, int end)
{
    if (x == NEST_NONE)
        return NEST_NONE;
    int rank = ox_rank(c, x);
    int64_t axes[R], keep[R];
    for (int i = 0; i < rank; i++) {
        keep[i] = i >= first && i < end ? 1 : ox_shape(c, x)[i];
        axes[i] = first + i;
    }
    return ox_reshape(c, fn(c->f, x, end - first, axes), rank, keep);
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
        int64_t two[2] = {ir_dims_count(c->f, axis, ox_shape(c, x)),
                          ir_dims_count(c->f, rank - axis, ox_shape(c, x) + axis)};
        v = ox_reshape(c, x, 2, two);
        axis = 1;
    }
    if (!log_of) {
        int64_t a = axis;
        c->out[0] = ox_reshape(c, nest_softmax(c->f, v, 1, &a), rank, ox_shape(c, x));
        return NEST_OK;
    }
    nest_value m = like(c, reduce_keep(c, nest_max, v, axis, axis + 1), v);
    nest_value d = nest_subtract(c->f, v, m);
    nest_value e = nest_exp(c->f, d);
    nest_value s = like(c, reduce_keep(c, nest_sum, e, axis, axis + 1), v);
    nest_value r = nest_subtract(c->f, d, nest_log(c->f, s));
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
        if (rb <= 2 && ra > 2) {
            /* [..., M, K] x [K, N] as one product of matrices [B * M, K] x [K, N] (the tile
             * pass blocks it), reshaped back */
            int64_t two[2] = {ir_dims_count(c->f, ra - 1, ox_shape(c, a)), k}, shape[R];
            memcpy(shape, ox_shape(c, a), (size_t)ra * sizeof *shape);
            shape[ra - 1] = rb == 2 ? ox_shape(c, b)[1] : 1;
            nest_value p = nest_dot(c->f, ox_reshape(c, a, 2, two), b);
            return ox_reshape(c, p, rb == 2 ? ra : ra - 1, shape);
        }
        if (rb <= 2)
            return nest_dot(c->f, a, b);
    }
    /* batches of products: numpy's matmul (batch dims broadcast, a vector a) is batch_dot's */
    return nest_batch_dot(c->f, a, b);
}

int ox_op_matmul(ox *c)
{
    nest_value a = ox_in(c, 0), b = ox_in(c, 1);
    OX_CHECK(a);
    OX_CHECK(b);
    c->out[0] = matmul(c, a, b);
    return NEST_OK;
}

/* The coefficients of an inference BatchNormalization node whose scale, bias, mean and
 * variance are known vectors of n values: y = x * a + b per channel, a = scale / sqrt(var +
 * eps), b = bias - mean * a, computed in double at import. False otherwise (nothing reported). */
static bool bn_coeffs(ox *c, const Onnx__NodeProto *bn, double **a, double **b, int64_t *n)
{
    const ox u = {.m = c->m, .node = bn}; /* for bn's attributes */
    if (bn->n_input < 5 || bn->n_output != 1 || (bn->domain && bn->domain[0]) ||
        ox_attr_int(&u, "training_mode", 0) || !ox_attr_int(&u, "spatial", 1))
        return false;
    double eps = ox_attr_float(&u, "epsilon", 1e-5f);
    const ox_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = ox_peek_name(c, bn->input[i + 1]);
        if (!t[i] || t[i]->rank != 1 || t[i]->shape[0] != t[0]->shape[0] ||
            (t[i]->etype != NEST_F32 && t[i]->etype != NEST_F64))
            return false;
    }
    *n = t[0]->shape[0];
    ox_tensor *ka = ox_tensor_new(c, NEST_F64, 1, n), *kb = ox_tensor_new(c, NEST_F64, 1, n);
    if (!ka || !kb)
        return false;
    *a = ka->data, *b = kb->data;
    for (int64_t k = 0; k < *n; k++) {
        (*a)[k] = ox_float_at(t[0], k) / sqrt(ox_float_at(t[3], k) + eps);
        (*b)[k] = ox_float_at(t[1], k) - ox_float_at(t[2], k) * (*a)[k];
    }
    return true;
}

const Onnx__NodeProto *ox_bn_after(ox *c, int32_t *index, double **a, double **b, int64_t *n)
{
    const Onnx__NodeProto *u = ox_sole_user(c, 0, index);
    if (!u || !u->op_type || strcmp(u->op_type, "BatchNormalization") != 0 ||
        strcmp(u->input[0], c->node->output[0]) != 0 || !bn_coeffs(c, u, a, b, n))
        return NULL;
    return u;
}

void ox_store(ox_tensor *t, int64_t i, double v)
{
    if (t->etype == NEST_F32)
        ((float *)t->data)[i] = (float)v;
    else
        ((double *)t->data)[i] = v;
}

/* Gemm's B and C with the BatchNormalization after it folded in, when B, C and the statistics
 * are known: B's columns (rows with transB) scaled by a, and C' = beta C a + b, so that
 * y = alpha A B' + C'. False when it does not apply. */
static bool gemm_fold_bn(ox *c, const ox_tensor **b, nest_value *cc, float *beta)
{
    int32_t index;
    double *a, *sh;
    int64_t n;
    const ox_tensor *kb = ox_peek(c, 1), *kc = ox_has(c, 2) ? ox_peek(c, 2) : NULL;
    if (!kb || kb->rank != 2 || (kb->etype != NEST_F32 && kb->etype != NEST_F64) ||
        (ox_has(c, 2) && (!kc || kc->etype != kb->etype || kc->rank > 2)) ||
        !ox_bn_after(c, &index, &a, &sh, &n))
        return false;
    bool tb = ox_attr_int(c, "transB", 0) != 0;
    if (n != kb->shape[tb ? 0 : 1])
        return false;
    /* C right-aligned to [cm, cn]; C' is [cm, n] (cm is 1 or M) */
    int64_t cm = kc && kc->rank == 2 ? kc->shape[0] : 1;
    int64_t cn = !kc || kc->rank == 0 ? 1 : kc->shape[kc->rank - 1];
    if (cn != 1 && cn != n)
        return false;
    ox_tensor *nb = ox_tensor_new(c, kb->etype, 2, kb->shape);
    int64_t cshape[2] = {cm, n};
    ox_tensor *nc = ox_tensor_new(c, kb->etype, cm > 1 ? 2 : 1, cm > 1 ? cshape : &n);
    if (!nb || !nc)
        return false;
    for (int64_t i = 0; i < kb->shape[0]; i++)
        for (int64_t j = 0; j < kb->shape[1]; j++)
            ox_store(nb, i * kb->shape[1] + j,
                     ox_float_at(kb, i * kb->shape[1] + j) * a[tb ? i : j]);
    for (int64_t i = 0; i < cm; i++)
        for (int64_t j = 0; j < n; j++)
            ox_store(nc, i * n + j,
                     (kc ? *beta * ox_float_at(kc, i * cn + (cn == 1 ? 0 : j)) : 0) * a[j] + sh[j]);
    *b = nb;
    *cc = ox_constant(c, nc, kc ? c->node->input[2] : c->node->output[0]);
    *beta = 1;
    ox_absorb(c, index);
    return true;
}

/* A known matrix transposed. */
static ox_tensor *transposed(ox *c, const ox_tensor *t)
{
    int64_t shape[2] = {t->shape[1], t->shape[0]};
    ox_tensor *r = ox_tensor_new(c, t->etype, 2, shape);
    size_t es = nest_type_size((nest_type)t->etype);
    for (int64_t i = 0; r && i < t->shape[0]; i++)
        for (int64_t j = 0; j < t->shape[1]; j++)
            memcpy((char *)r->data + (size_t)(j * t->shape[0] + i) * es,
                   (const char *)t->data + (size_t)(i * t->shape[1] + j) * es, es);
    return r;
}

int ox_op_gemm(ox *c)
{
    nest_value a = ox_in(c, 0), b = NEST_NONE, cc = NEST_NONE;
    float alpha = ox_attr_float(c, "alpha", 1), beta = ox_attr_float(c, "beta", 1);
    bool tb = ox_attr_int(c, "transB", 0) != 0;
    const ox_tensor *kb = NULL;
    OX_CHECK(a);
    if (!gemm_fold_bn(c, &kb, &cc, &beta)) {
        kb = NULL;
        cc = ox_has(c, 2) && beta != 0 ? ox_in(c, 2) : NEST_NONE;
        if (ox_has(c, 2) && beta != 0)
            OX_CHECK(cc);
        const ox_tensor *w = ox_peek(c, 1);
        if (tb && w && w->rank == 2)
            kb = w;
    }
    if (kb && tb) {
        /* known weights transposed at import: B is [K, N] row-major, which the product's
         * tiles read along N */
        if (!(kb = transposed(c, kb)))
            return NEST_ERR_NOMEM;
        tb = false;
    }
    b = kb ? ox_constant(c, kb, c->node->input[1]) : ox_in(c, 1);
    OX_CHECK(b);
    if (ox_rank(c, a) != 2 || ox_rank(c, b) != 2)
        return ox_err(c, NEST_ERR_TYPE, "A and B must be matrices");
    static const int64_t swap[2] = {1, 0};
    if (ox_attr_int(c, "transA", 0))
        a = ox_transpose(c, a, swap);
    if (tb)
        b = ox_transpose(c, b, swap);
    OX_CHECK(a);
    OX_CHECK(b);
    nest_value y = matmul(c, a, b);
    OX_CHECK(y);
    if (alpha != 1)
        y = nest_multiply(c->f, y, ox_full_like(c, y, alpha));
    if (cc != NEST_NONE) {
        cc = ox_bcast_to(c, cc, 2, ox_shape(c, y));
        if (beta != 1)
            cc = nest_multiply(c->f, cc, ox_full_like(c, cc, beta));
        y = nest_add(c->f, y, cc);
    }
    c->out[0] = y;
    return NEST_OK;
}

/* ---- normalization and pooling ---- */

nest_value ox_per_channel(ox *c, nest_value v, nest_value x)
{
    if (v == NEST_NONE || x == NEST_NONE)
        return NEST_NONE;
    int rank = ox_rank(c, x);
    if (rank < 2 || ox_rank(c, v) != 1) {
        ox_err(c, NEST_ERR_TYPE, "needs an input of rank 2 or more and per-channel vectors");
        return NEST_NONE;
    }
    const int64_t *xs = ox_shape(c, x);
    int64_t s[R], axes[R];
    if (ox_shape(c, v)[0] == xs[1]) { /* one broadcast along every axis but the channels' */
        for (int i = 0; i < rank - 1; i++)
            axes[i] = i == 0 ? 0 : i + 1;
        return nest_broadcast(c->f, v, rank, xs, rank - 1, axes);
    }
    for (int i = 0; i < rank; i++)
        s[i] = i == 1 ? ox_shape(c, v)[0] : 1;
    return ox_bcast_to(c, ox_reshape(c, v, rank, s), rank, xs);
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
    double *ka, *kb;
    int64_t n;
    if (bn_coeffs(c, c->node, &ka, &kb, &n)) {
        /* known statistics: the coefficients are constants of x's type */
        ox_tensor *ta = ox_tensor_new(c, ox_type(c, x), 1, &n);
        ox_tensor *tb = ox_tensor_new(c, ox_type(c, x), 1, &n);
        if (!ta || !tb || (ox_type(c, x) != NEST_F32 && ox_type(c, x) != NEST_F64))
            return ta && tb ? ox_err(c, NEST_ERR_TYPE, "the input must be float or double")
                            : NEST_ERR_NOMEM;
        for (int64_t k = 0; k < n; k++) {
            ox_store(ta, k, ka[k]);
            ox_store(tb, k, kb[k]);
        }
        nest_value a = ox_constant(c, ta, c->node->input[1]);
        nest_value b = ox_constant(c, tb, c->node->input[2]);
        c->out[0] = nest_add(c->f, nest_multiply(c->f, x, ox_per_channel(c, a, x)),
                             ox_per_channel(c, b, x));
        return NEST_OK;
    }
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
    c->out[0] = nest_add(c->f, nest_multiply(c->f, x, ox_per_channel(c, a, x)), ox_per_channel(c, b, x));
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
    int64_t count = ir_dims_count(c->f, rank - axis, ox_shape(c, x) + axis);
    if (dim_is_sym(count)) {
        char *d = dim_text(c->f, count);
        ox_err(c, NEST_ERR_ARG, "the normalized axes hold %.100s elements: a symbolic count",
               d ? d : "?");
        free(d);
        return NEST_ERR_ARG;
    }
    double n = (double)count;
    nest_value mean = reduce_keep(c, nest_sum, x, axis, rank);
    mean = nest_divide(c->f, mean, ox_full_like(c, mean, n));
    nest_value d = nest_subtract(c->f, x, like(c, mean, x));
    nest_value var = reduce_keep(c, nest_sum, nest_multiply(c->f, d, d), axis, rank);
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
    nest_value r = reduce_keep(c, avg ? nest_sum : nest_max, x, 2, ox_rank(c, x));
    if (avg)
        r = nest_divide(c->f, r, ox_full_like(c, r, (double)ox_count(ox_rank(c, x) - 2, ox_shape(c, x) + 2)));
    c->out[0] = r;
    return NEST_OK;
}

int ox_op_global_avg_pool(ox *c) { return global_pool(c, true); }
int ox_op_global_max_pool(ox *c) { return global_pool(c, false); }
