/*
 * onnx_ops.c - the ONNX operators as nest ops, one lowering per operator over the inputs and
 * attributes that onnx_read.c gives (ox_in, ox_known, ox_attr_*). Numpy broadcasting becomes an
 * explicit broadcast (after a reshape drops the dims of extent 1 it stretches). The operators
 * are listed in one table at the end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.h"

#define R NEST_MAX_RANK

/* ---- helpers over values of c->f ---- */

static const ir_node *node_of(const ox *c, nest_value v) { return &c->f->nodes[v]; }
static int type_of(const ox *c, nest_value v) { return node_of(c, v)->etype; }
static int rank_of(const ox *c, nest_value v) { return node_of(c, v)->rank; }
static const int64_t *shape_of(const ox *c, nest_value v) { return node_of(c, v)->shape; }
static int64_t count_of(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

/* A constant of one value filling a shape (integers saturate, as nest_convert does). */
static nest_value full(ox *c, int etype, double value, int rank, const int64_t *shape)
{
    return ir_fill(c->f, etype, value, rank, shape);
}

/* A constant of v's type and shape. */
static nest_value full_like(ox *c, nest_value v, double value)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    return full(c, type_of(c, v), value, rank_of(c, v), shape_of(c, v));
}

/* An axis in [-rank, rank) made positive; -1 with the error when out of range. */
static int axis_of(ox *c, int64_t axis, int rank, const char *what)
{
    if (axis < -rank || axis >= rank || (rank == 0 && axis != 0)) {
        ox_err(c, NEST_ERR_ARG, "%s %lld is out of range for rank %d", what, (long long)axis,
               rank);
        return -1;
    }
    return (int)(axis < 0 ? axis + rank : axis);
}

static nest_value reshape(ox *c, nest_value v, int rank, const int64_t *shape)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    const ir_node *n = node_of(c, v);
    if (n->rank == rank && memcmp(n->shape, shape, (size_t)rank * sizeof *shape) == 0)
        return v;
    return nest_reshape(c->f, v, NULL, rank, shape);
}

static nest_value transpose(ox *c, nest_value v, const int64_t *perm)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    int rank = rank_of(c, v);
    int64_t shape[R];
    bool identity = true;
    for (int i = 0; i < rank; i++) {
        shape[i] = shape_of(c, v)[perm[i]];
        identity = identity && perm[i] == i;
    }
    return identity ? v : nest_reshape(c->f, v, perm, rank, shape);
}

/* v broadcast to `shape` by numpy's rule (v's dims align to the right; 1 stretches). */
static nest_value bcast_to(ox *c, nest_value v, int rank, const int64_t *shape)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    int vr = rank_of(c, v);
    const int64_t *vs = shape_of(c, v);
    if (vr > rank) {
        ox_err(c, NEST_ERR_TYPE, "cannot broadcast rank %d to rank %d", vr, rank);
        return NEST_NONE;
    }
    int64_t kept[R], axes[R];
    int nk = 0, na = 0;
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - vr);
        if (j >= 0 && vs[j] == shape[i]) {
            kept[nk++] = vs[j];
        } else if (j < 0 || vs[j] == 1) {
            axes[na++] = i;
        } else {
            ox_err(c, NEST_ERR_TYPE, "cannot broadcast dimension %lld to %lld",
                   (long long)vs[j], (long long)shape[i]);
            return NEST_NONE;
        }
    }
    if (na == 0)
        return reshape(c, v, rank, shape);
    v = reshape(c, v, nk, kept);
    return nest_broadcast(c->f, v, rank, shape, na, axes);
}

/* The numpy broadcast of n values' shapes. */
static int bshape(ox *c, int n, const nest_value *v, int *rank, int64_t *shape)
{
    *rank = 0;
    for (int k = 0; k < n; k++)
        if (rank_of(c, v[k]) > *rank)
            *rank = rank_of(c, v[k]);
    for (int i = 0; i < *rank; i++)
        shape[i] = 1;
    for (int k = 0; k < n; k++) {
        int vr = rank_of(c, v[k]);
        const int64_t *vs = shape_of(c, v[k]);
        for (int j = 0; j < vr; j++) {
            int64_t *d = &shape[*rank - vr + j];
            if (vs[j] == *d || vs[j] == 1)
                continue;
            if (*d != 1)
                return ox_err(c, NEST_ERR_TYPE, "shapes do not broadcast: dimension %d is %lld "
                              "and %lld", *rank - vr + j, (long long)*d, (long long)vs[j]);
            *d = vs[j];
        }
    }
    return NEST_OK;
}

/* Inputs 0..n-1 broadcast to their common shape. */
static int inputs_bcast(ox *c, int n, nest_value *v)
{
    for (int i = 0; i < n; i++)
        if ((v[i] = ox_in(c, i)) == NEST_NONE)
            return c->m ? nest_errcode(c->f) ? nest_errcode(c->f) : NEST_ERR_ARG : NEST_ERR_ARG;
    int rank;
    int64_t shape[R];
    int st = bshape(c, n, v, &rank, shape);
    for (int i = 0; st == NEST_OK && i < n; i++)
        if ((v[i] = bcast_to(c, v[i], rank, shape)) == NEST_NONE)
            st = NEST_ERR_TYPE;
    return st;
}

#define CHECK(v)                                                                               \
    do {                                                                                       \
        if ((v) == NEST_NONE)                                                                  \
            return NEST_ERR_ARG;                                                               \
    } while (0)

/* ---- element-wise ---- */

typedef nest_value (*bin_fn)(nest_function *, nest_value, nest_value);
typedef nest_value (*un_fn)(nest_function *, nest_value);

static int binary(ox *c, bin_fn fn)
{
    nest_value v[2];
    if (inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    c->out[0] = fn(c->f, v[0], v[1]);
    return NEST_OK;
}

static int unary(ox *c, un_fn fn)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    c->out[0] = fn(c->f, x);
    return NEST_OK;
}

static int lower_add(ox *c) { return binary(c, nest_add); }
static int lower_sub(ox *c) { return binary(c, nest_subtract); }
static int lower_mul(ox *c) { return binary(c, nest_multiply); }
static int lower_div(ox *c) { return binary(c, nest_divide); }
static int lower_equal(ox *c) { return binary(c, nest_equal); }
static int lower_less(ox *c) { return binary(c, nest_less); }
static int lower_greater(ox *c) { return binary(c, nest_greater); }
static int lower_sqrt(ox *c) { return unary(c, nest_sqrt); }
static int lower_exp(ox *c) { return unary(c, nest_exp); }
static int lower_log(ox *c) { return unary(c, nest_log); }
static int lower_abs(ox *c) { return unary(c, nest_abs); }
static int lower_neg(ox *c) { return unary(c, nest_negative); }
static int lower_tanh(ox *c) { return unary(c, nest_tanh); }

static int lower_pow(ox *c)
{
    nest_value v[2];
    if (inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    if (type_of(c, v[1]) != type_of(c, v[0])) /* opset 12: the exponent may have its own type */
        v[1] = nest_convert(c->f, v[1], (nest_type)type_of(c, v[0]));
    c->out[0] = nest_power(c->f, v[0], v[1]);
    return NEST_OK;
}

/* a <= b as (a < b) or (a == b): false when either is NaN, as in numpy */
static nest_value or_equal(nest_function *f, nest_value lt, nest_value a, nest_value b)
{
    nest_value t = nest_constant(f, NEST_BOOL, 0, NULL, &(uint8_t){1}, 1);
    const ir_node *n = &f->nodes[lt];
    if (lt == NEST_NONE || t == NEST_NONE)
        return NEST_NONE;
    int64_t axes[R];
    for (int i = 0; i < n->rank; i++)
        axes[i] = i;
    t = nest_broadcast(f, t, n->rank, n->shape, n->rank, axes);
    return nest_select(f, lt, t, nest_equal(f, a, b));
}

static int lower_less_eq(ox *c)
{
    nest_value v[2];
    if (inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    c->out[0] = or_equal(c->f, nest_less(c->f, v[0], v[1]), v[0], v[1]);
    return NEST_OK;
}

static int lower_greater_eq(ox *c)
{
    nest_value v[2];
    if (inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    c->out[0] = or_equal(c->f, nest_greater(c->f, v[0], v[1]), v[0], v[1]);
    return NEST_OK;
}

static int lower_not(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    c->out[0] = nest_equal(c->f, x, full_like(c, x, 0));
    return NEST_OK;
}

static int lower_and(ox *c)
{
    nest_value v[2];
    if (inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    c->out[0] = nest_select(c->f, v[0], v[1], full_like(c, v[0], 0));
    return NEST_OK;
}

static int lower_or(ox *c)
{
    nest_value v[2];
    if (inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    c->out[0] = nest_select(c->f, v[0], full_like(c, v[0], 1), v[1]);
    return NEST_OK;
}

static int lower_where(ox *c)
{
    nest_value v[3];
    if (inputs_bcast(c, 3, v) != NEST_OK)
        return NEST_ERR_TYPE;
    c->out[0] = nest_select(c->f, v[0], v[1], v[2]);
    return NEST_OK;
}

/* Max, Min, Sum, Mean: any number of inputs, broadcast together. */
static int variadic(ox *c, bin_fn fn, bool mean)
{
    if (c->nin < 1 || c->nin > 64)
        return ox_err(c, NEST_ERR_ARG, "takes 1 to 64 inputs, not %d", c->nin);
    nest_value v[64];
    if (inputs_bcast(c, c->nin, v) != NEST_OK)
        return NEST_ERR_TYPE;
    nest_value r = v[0];
    for (int i = 1; i < c->nin; i++)
        r = fn(c->f, r, v[i]);
    if (mean && c->nin > 1)
        r = nest_divide(c->f, r, full_like(c, r, c->nin));
    c->out[0] = r;
    return NEST_OK;
}

static int lower_max(ox *c) { return variadic(c, nest_maximum, false); }
static int lower_min(ox *c) { return variadic(c, nest_minimum, false); }
static int lower_sum(ox *c) { return variadic(c, nest_add, false); }
static int lower_mean(ox *c) { return variadic(c, nest_add, true); }

static int lower_reciprocal(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    c->out[0] = nest_divide(c->f, full_like(c, x, 1), x);
    return NEST_OK;
}

/* max(0, x): a NaN stays NaN, as numpy's maximum */
static int lower_relu(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    c->out[0] = nest_maximum(c->f, full_like(c, x, 0), x);
    return NEST_OK;
}

static int lower_sigmoid(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    nest_value e = nest_exp(c->f, nest_negative(c->f, x));
    c->out[0] = nest_divide(c->f, full_like(c, x, 1), nest_add(c->f, full_like(c, x, 1), e));
    return NEST_OK;
}

static int lower_leaky_relu(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    nest_value ax = nest_multiply(c->f, x, full_like(c, x, ox_attr_float(c, "alpha", 0.01f)));
    c->out[0] = nest_select(c->f, nest_less(c->f, x, full_like(c, x, 0)), ax, x);
    return NEST_OK;
}

static int lower_elu(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    nest_value em1 = nest_subtract(c->f, nest_exp(c->f, x), full_like(c, x, 1));
    nest_value neg = nest_multiply(c->f, em1, full_like(c, x, ox_attr_float(c, "alpha", 1.0f)));
    c->out[0] = nest_select(c->f, nest_less(c->f, x, full_like(c, x, 0)), neg, x);
    return NEST_OK;
}

static int lower_hard_sigmoid(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    nest_value y = nest_add(c->f, nest_multiply(c->f, x, full_like(c, x, ox_attr_float(c, "alpha", 0.2f))),
                            full_like(c, x, ox_attr_float(c, "beta", 0.5f)));
    y = nest_minimum(c->f, full_like(c, x, 1), y);
    c->out[0] = nest_maximum(c->f, full_like(c, x, 0), y);
    return NEST_OK;
}

/* sign(x) = 1, -1, or x itself for 0 and NaN */
static int lower_sign(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    nest_value zero = full_like(c, x, 0);
    nest_value neg = nest_select(c->f, nest_less(c->f, x, zero), full_like(c, x, -1), x);
    c->out[0] = nest_select(c->f, nest_greater(c->f, x, zero), full_like(c, x, 1), neg);
    return NEST_OK;
}

static int lower_clip(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    nest_value lo = NEST_NONE, hi = NEST_NONE;
    if (c->opset < 11) {
        lo = full_like(c, x, ox_attr_float(c, "min", -INFINITY));
        hi = full_like(c, x, ox_attr_float(c, "max", INFINITY));
    } else {
        if (ox_has(c, 1))
            lo = bcast_to(c, ox_in(c, 1), rank_of(c, x), shape_of(c, x));
        if (ox_has(c, 2))
            hi = bcast_to(c, ox_in(c, 2), rank_of(c, x), shape_of(c, x));
        if ((ox_has(c, 1) && lo == NEST_NONE) || (ox_has(c, 2) && hi == NEST_NONE))
            return NEST_ERR_ARG;
    }
    /* x < lo ? lo : x, then x > hi ? hi : x: NaN passes through */
    if (lo != NEST_NONE)
        x = nest_select(c->f, nest_less(c->f, x, lo), lo, x);
    if (hi != NEST_NONE)
        x = nest_select(c->f, nest_greater(c->f, x, hi), hi, x);
    c->out[0] = x;
    return NEST_OK;
}

static int lower_cast(ox *c)
{
    static const int types[] = {-1, NEST_F32, -1, -1, -1, -1, NEST_I32, NEST_I64, -1,
                                NEST_BOOL, -1, NEST_F64};
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int64_t to = ox_attr_int(c, "to", -1);
    if (to < 0 || to >= (int64_t)countof(types) || types[to] < 0)
        return ox_err(c, NEST_ERR_TYPE, "cast to data type %lld is not supported (float, "
                      "double, int32, int64, bool)", (long long)to);
    c->out[0] = type_of(c, x) == types[to] ? x : nest_convert(c->f, x, (nest_type)types[to]);
    return NEST_OK;
}

static int lower_identity(ox *c)
{
    c->out[0] = ox_in(c, 0);
    return NEST_OK;
}

static int lower_dropout(ox *c)
{
    if (c->opset >= 12 && ox_has(c, 2)) {
        const ox_tensor *t = ox_known(c, 2);
        if (!t)
            return NEST_ERR_ARG;
        if (ox_int_at(t, 0))
            return ox_err(c, NEST_ERR_ARG, "training mode is not supported (inference only)");
    }
    if (c->opset < 7 && ox_attr_int(c, "is_test", 1) == 0)
        return ox_err(c, NEST_ERR_ARG, "training mode is not supported (inference only)");
    nest_value x = ox_in(c, 0);
    CHECK(x);
    c->out[0] = x;
    if (c->nout > 1)
        c->out[1] = full(c, NEST_BOOL, 1, rank_of(c, x), shape_of(c, x));
    return NEST_OK;
}

/* ---- constants and shapes ---- */

static nest_value known_value(ox *c, const ox_tensor *t)
{
    return nest_constant(c->f, (nest_type)t->etype, t->rank, t->shape, t->data, t->count);
}

static int lower_constant(ox *c)
{
    const Onnx__AttributeProto *a;
    if ((a = ox_attr(c, "value")) && a->t) {
        const ox_tensor *t = ox_decode(c, a->t, "attribute value");
        if (!t)
            return NEST_ERR_ARG;
        c->out[0] = known_value(c, t);
    } else if ((a = ox_attr(c, "value_float")) && a->has_f) {
        c->out[0] = nest_constant(c->f, NEST_F32, 0, NULL, &a->f, 1);
    } else if ((a = ox_attr(c, "value_int")) && a->has_i) {
        c->out[0] = nest_constant(c->f, NEST_I64, 0, NULL, &a->i, 1);
    } else if ((a = ox_attr(c, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        c->out[0] = nest_constant(c->f, NEST_F32, 1, &n, a->floats, n);
    } else if ((a = ox_attr(c, "value_ints"))) {
        int64_t n = (int64_t)a->n_ints;
        c->out[0] = nest_constant(c->f, NEST_I64, 1, &n, a->ints, n);
    } else {
        return ox_err(c, NEST_ERR_ARG, "needs a value, value_float(s) or value_int(s) attribute "
                      "(sparse and string values are not supported)");
    }
    return NEST_OK;
}

static int lower_constant_of_shape(ox *c)
{
    int64_t shape[R];
    int rank = ox_known_ints(c, 0, shape, R);
    if (rank < 0)
        return NEST_ERR_ARG;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return ox_err(c, NEST_ERR_ARG, "dimension %d is %lld", i, (long long)shape[i]);
    const Onnx__AttributeProto *a = ox_attr(c, "value");
    if (!a || !a->t) {
        c->out[0] = full(c, NEST_F32, 0, rank, shape);
        return NEST_OK;
    }
    const ox_tensor *t = ox_decode(c, a->t, "attribute value");
    if (!t)
        return NEST_ERR_ARG;
    if (count_of(t->rank, t->shape) != 1)
        return ox_err(c, NEST_ERR_ARG, "the value must hold one element");
    c->out[0] = nest_constant(c->f, (nest_type)t->etype, rank, shape, t->data, 1);
    return NEST_OK;
}

static int lower_shape(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int64_t start = 0, end = rank;
    if (c->opset >= 15) {
        start = ox_attr_int(c, "start", 0);
        end = ox_attr_int(c, "end", rank);
        start = start < 0 ? start + rank : start;
        end = end < 0 ? end + rank : end;
        start = start < 0 ? 0 : start > rank ? rank : start;
        end = end < start ? start : end > rank ? rank : end;
    }
    int64_t n = end - start;
    c->out[0] = nest_constant(c->f, NEST_I64, 1, &n, shape_of(c, x) + start, n);
    return NEST_OK;
}

static int lower_size(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int64_t n = ir_count(node_of(c, x));
    c->out[0] = nest_constant(c->f, NEST_I64, 0, NULL, &n, 1);
    return NEST_OK;
}

static int lower_range(ox *c)
{
    const ox_tensor *t[3];
    for (int i = 0; i < 3; i++)
        if (!(t[i] = ox_known(c, i)))
            return NEST_ERR_ARG;
    int etype = t[0]->etype;
    double start = ox_float_at(t[0], 0), limit = ox_float_at(t[1], 0), delta = ox_float_at(t[2], 0);
    if (delta == 0 || delta != delta)
        return ox_err(c, NEST_ERR_ARG, "delta is %g", delta);
    double steps = ceil((limit - start) / delta);
    if (!(steps < (double)(1 << 30)))
        return ox_err(c, NEST_ERR_LIMIT, "%g elements", steps);
    int64_t n = steps > 0 ? (int64_t)steps : 0;
    void *data = calloc((size_t)n + 1, 8);
    if (!data)
        return ox_err(c, NEST_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        switch (etype) {
        case NEST_F32: ((float *)data)[i] = (float)(start + (double)i * delta); break;
        case NEST_F64: ((double *)data)[i] = start + (double)i * delta; break;
        case NEST_I32: ((int32_t *)data)[i] = (int32_t)(ox_int_at(t[0], 0) + i * ox_int_at(t[2], 0)); break;
        default: ((int64_t *)data)[i] = ox_int_at(t[0], 0) + i * ox_int_at(t[2], 0); break;
        }
    }
    c->out[0] = nest_constant(c->f, (nest_type)etype, 1, &n, data, n);
    free(data);
    return NEST_OK;
}

/* ---- views ---- */

static int lower_reshape(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int64_t shape[R];
    int rank = c->opset < 5 ? ox_attr_ints(c, "shape", shape, R) : ox_known_ints(c, 1, shape, R);
    if (rank < 0)
        return NEST_ERR_ARG;
    bool allowzero = ox_attr_int(c, "allowzero", 0) != 0;
    int64_t have = ir_count(node_of(c, x)), known = 1;
    int infer = -1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == 0 && !allowzero) {
            if (i >= rank_of(c, x))
                return ox_err(c, NEST_ERR_ARG, "shape[%d] is 0 (copy) beyond the input's rank", i);
            shape[i] = shape_of(c, x)[i];
        }
        if (shape[i] == -1) {
            if (infer >= 0)
                return ox_err(c, NEST_ERR_ARG, "the shape has two -1 entries");
            infer = i;
        } else if (shape[i] < 0) {
            return ox_err(c, NEST_ERR_ARG, "shape[%d] is %lld", i, (long long)shape[i]);
        } else if (mul_overflows(known, shape[i], &known)) {
            return ox_err(c, NEST_ERR_LIMIT, "the shape is too large: its element count overflows "
                          "at shape[%d] = %lld", i, (long long)shape[i]);
        }
    }
    if (infer >= 0) {
        if (known == 0 || have % known)
            return ox_err(c, NEST_ERR_TYPE, "cannot infer shape[%d]: %lld elements into %lld",
                          infer, (long long)have, (long long)known);
        shape[infer] = have / known;
    }
    c->out[0] = reshape(c, x, rank, shape);
    return NEST_OK;
}

static int lower_flatten(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int64_t axis = ox_attr_int(c, "axis", 1);
    if (axis < -rank || axis > rank)
        return ox_err(c, NEST_ERR_ARG, "axis %lld is out of range for rank %d", (long long)axis,
                      rank);
    if (axis < 0)
        axis += rank;
    int64_t shape[2] = {count_of((int)axis, shape_of(c, x)),
                        count_of(rank - (int)axis, shape_of(c, x) + axis)};
    c->out[0] = reshape(c, x, 2, shape);
    return NEST_OK;
}

static int lower_transpose(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int64_t perm[R];
    int n = ox_attr_ints(c, "perm", perm, R);
    if (n == -2)
        return NEST_ERR_ARG;
    if (n < 0)
        for (int i = 0; i < rank; i++)
            perm[i] = rank - 1 - i;
    else if (n != rank)
        return ox_err(c, NEST_ERR_ARG, "perm has %d entries for rank %d", n, rank);
    uint32_t seen = 0;
    for (int i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank || (seen >> perm[i] & 1))
            return ox_err(c, NEST_ERR_ARG, "perm is not a permutation of the %d axes", rank);
        seen |= 1u << perm[i];
    }
    c->out[0] = transpose(c, x, perm);
    return NEST_OK;
}

/* The axes of Squeeze, Unsqueeze and the reductions: an attribute before `input_opset`, the
 * input `index` from it. Returns the count, -1 when not given, -2 on an error. */
static int axes_arg(ox *c, int input_opset, int index, int64_t *axes)
{
    if (c->opset < input_opset)
        return ox_attr_ints(c, "axes", axes, R);
    if (!ox_has(c, index))
        return -1;
    int n = ox_known_ints(c, index, axes, R);
    return n < 0 ? -2 : n;
}

static int lower_squeeze(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    const int64_t *xs = shape_of(c, x);
    int64_t axes[R], shape[R];
    int n = axes_arg(c, 13, 1, axes);
    if (n == -2)
        return NEST_ERR_ARG;
    uint32_t drop = 0;
    for (int i = 0; i < n; i++) {
        int a = axis_of(c, axes[i], rank, "axis");
        if (a < 0)
            return NEST_ERR_ARG;
        if (xs[a] != 1)
            return ox_err(c, NEST_ERR_ARG, "axis %d has extent %lld, not 1", a, (long long)xs[a]);
        drop |= 1u << a;
    }
    int k = 0;
    for (int i = 0; i < rank; i++)
        if (n < 0 ? xs[i] != 1 : !(drop >> i & 1))
            shape[k++] = xs[i];
    c->out[0] = reshape(c, x, k, shape);
    return NEST_OK;
}

static int lower_unsqueeze(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int64_t axes[R], shape[R];
    int n = axes_arg(c, 13, 1, axes);
    if (n < 0)
        return n == -2 ? NEST_ERR_ARG : ox_err(c, NEST_ERR_ARG, "needs axes");
    int rank = rank_of(c, x) + n;
    if (rank > R)
        return ox_err(c, NEST_ERR_LIMIT, "rank %d is above %d", rank, R);
    uint32_t add = 0;
    for (int i = 0; i < n; i++) {
        int a = axis_of(c, axes[i], rank, "axis");
        if (a < 0)
            return NEST_ERR_ARG;
        if (add >> a & 1)
            return ox_err(c, NEST_ERR_ARG, "axis %d is given twice", a);
        add |= 1u << a;
    }
    for (int i = 0, j = 0; i < rank; i++)
        shape[i] = add >> i & 1 ? 1 : shape_of(c, x)[j++];
    c->out[0] = reshape(c, x, rank, shape);
    return NEST_OK;
}

static int lower_concat(ox *c)
{
    if (c->nin < 1 || c->nin > 64)
        return ox_err(c, NEST_ERR_ARG, "takes 1 to 64 inputs");
    nest_value v[64];
    for (int i = 0; i < c->nin; i++)
        CHECK(v[i] = ox_in(c, i));
    int axis = axis_of(c, ox_attr_int(c, "axis", 0), rank_of(c, v[0]), "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    c->out[0] = c->nin == 1 ? v[0] : nest_concat(c->f, c->nin, v, axis);
    return NEST_OK;
}

/* x[lower:upper:step] along one axis. */
static nest_value slice_axis(ox *c, nest_value x, int axis, int64_t lo, int64_t hi, int64_t step)
{
    int rank = rank_of(c, x);
    int64_t lower[R], upper[R], strides[R];
    for (int i = 0; i < rank; i++) {
        lower[i] = 0;
        upper[i] = shape_of(c, x)[i];
        strides[i] = 1;
    }
    lower[axis] = lo, upper[axis] = hi, strides[axis] = step;
    if (lo == 0 && hi == shape_of(c, x)[axis] && step == 1)
        return x;
    return nest_slice(c->f, x, lower, upper, strides);
}

static int lower_split(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int axis = axis_of(c, ox_attr_int(c, "axis", 0), rank_of(c, x), "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    int64_t dim = shape_of(c, x)[axis], parts[64];
    int n = c->opset < 13 ? ox_attr_ints(c, "split", parts, 64)
            : ox_has(c, 1) ? ox_known_ints(c, 1, parts, 64) : -1;
    if (n == -2 || (n < 0 && c->opset >= 13 && ox_has(c, 1)))
        return NEST_ERR_ARG;
    if (n < 0) {
        if (c->nout < 1)
            return ox_err(c, NEST_ERR_ARG, "no outputs to split into");
        if (dim % c->nout)
            return ox_err(c, NEST_ERR_ARG, "%lld does not split in %d equal parts",
                          (long long)dim, c->nout);
        n = c->nout;
        for (int i = 0; i < n; i++)
            parts[i] = dim / n;
    }
    if (n != c->nout)
        return ox_err(c, NEST_ERR_ARG, "%d parts for %d outputs", n, c->nout);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i] < 0 || parts[i] > dim - at)
            return ox_err(c, NEST_ERR_ARG, "the parts do not add up to %lld", (long long)dim);
        c->out[i] = slice_axis(c, x, axis, at, at + parts[i], 1);
        at += parts[i];
    }
    if (at != dim)
        return ox_err(c, NEST_ERR_ARG, "the parts add up to %lld, not %lld", (long long)at,
                      (long long)dim);
    return NEST_OK;
}

static int lower_slice(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int64_t starts[R], ends[R], axes[R], steps[R];
    int ns, ne, na = -1, nst = -1;
    if (c->opset < 10) {
        ns = ox_attr_ints(c, "starts", starts, R);
        ne = ox_attr_ints(c, "ends", ends, R);
        na = ox_attr_ints(c, "axes", axes, R);
    } else {
        ns = ox_known_ints(c, 1, starts, R);
        ne = ox_known_ints(c, 2, ends, R);
        if (ox_has(c, 3) && (na = ox_known_ints(c, 3, axes, R)) < 0)
            return NEST_ERR_ARG;
        if (ox_has(c, 4) && (nst = ox_known_ints(c, 4, steps, R)) < 0)
            return NEST_ERR_ARG;
    }
    if (ns < 0 || ne < 0 || na == -2)
        return ns == -1 || ne == -1 ? ox_err(c, NEST_ERR_ARG, "needs starts and ends") : NEST_ERR_ARG;
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return ox_err(c, NEST_ERR_ARG, "starts, ends, axes and steps differ in length");
    int64_t lower[R], upper[R], step[R];
    for (int i = 0; i < rank; i++)
        lower[i] = 0, upper[i] = shape_of(c, x)[i], step[i] = 1;
    uint32_t seen = 0;
    for (int i = 0; i < ns; i++) {
        int a = axis_of(c, na >= 0 ? axes[i] : i, rank, "axis");
        if (a < 0)
            return NEST_ERR_ARG;
        if (seen >> a & 1)
            return ox_err(c, NEST_ERR_ARG, "axis %d is given twice", a);
        seen |= 1u << a;
        int64_t d = shape_of(c, x)[a], s = nst >= 0 ? steps[i] : 1;
        if (s == 0)
            return ox_err(c, NEST_ERR_ARG, "step 0 on axis %d", a);
        if (s < 0)
            return ox_err(c, NEST_ERR_ARG, "negative steps are not supported yet (axis %d)", a);
        int64_t b = starts[i], e = ends[i];
        b = b < 0 ? b + d : b;
        e = e < 0 ? e + d : e;
        b = b < 0 ? 0 : b > d ? d : b;
        e = e < b ? b : e > d ? d : e;
        lower[a] = b, upper[a] = e, step[a] = s;
    }
    c->out[0] = nest_slice(c->f, x, lower, upper, step);
    return NEST_OK;
}

/* Gather with indices known at import: slices joined along the axis. */
static int lower_gather(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    const ox_tensor *idx = ox_known(c, 1);
    if (!idx)
        return NEST_ERR_ARG;
    if (idx->etype != NEST_I64 && idx->etype != NEST_I32)
        return ox_err(c, NEST_ERR_TYPE, "indices must be int64 or int32");
    int rank = rank_of(c, x);
    int axis = axis_of(c, ox_attr_int(c, "axis", 0), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    int64_t n = count_of(idx->rank, idx->shape), d = shape_of(c, x)[axis];
    if (n > 4096)
        return ox_err(c, NEST_ERR_LIMIT, "%lld indices (at most 4096 until nest has a gather op)",
                      (long long)n);
    if (rank - 1 + idx->rank > R)
        return ox_err(c, NEST_ERR_LIMIT, "the result's rank is above %d", R);
    nest_value *parts = calloc((size_t)n + 1, sizeof *parts);
    if (!parts)
        return ox_err(c, NEST_ERR_NOMEM, "out of memory");
    int st = NEST_OK;
    for (int64_t i = 0; i < n && st == NEST_OK; i++) {
        int64_t k = ox_int_at(idx, i);
        if (k < -d || k >= d)
            st = ox_err(c, NEST_ERR_ARG, "index %lld is out of range for extent %lld",
                        (long long)k, (long long)d);
        k = k < 0 ? k + d : k;
        parts[i] = slice_axis(c, x, axis, k, k + 1, 1);
    }
    int64_t shape[R];
    int k = 0;
    for (int i = 0; i < axis; i++)
        shape[k++] = shape_of(c, x)[i];
    for (int i = 0; i < idx->rank; i++)
        shape[k++] = idx->shape[i];
    for (int i = axis + 1; i < rank; i++)
        shape[k++] = shape_of(c, x)[i];
    if (st == NEST_OK) {
        nest_value joined;
        if (n == 0) {
            int64_t es[R];
            memcpy(es, shape_of(c, x), (size_t)rank * sizeof *es);
            es[axis] = 0;
            joined = full(c, type_of(c, x), 0, rank, es);
        } else {
            joined = n == 1 ? parts[0] : nest_concat(c->f, (int)n, parts, axis);
        }
        c->out[0] = reshape(c, joined, k, shape);
    }
    free(parts);
    return st;
}

static int lower_expand(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int64_t want[R], shape[R];
    int n = ox_known_ints(c, 1, want, R);
    if (n < 0)
        return NEST_ERR_ARG;
    int rank = n > rank_of(c, x) ? n : rank_of(c, x);
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - n), k = i - (rank - rank_of(c, x));
        int64_t a = j >= 0 ? want[j] : 1, b = k >= 0 ? shape_of(c, x)[k] : 1;
        if (a != b && a != 1 && b != 1)
            return ox_err(c, NEST_ERR_TYPE, "cannot expand dimension %lld to %lld",
                          (long long)b, (long long)a);
        shape[i] = a == 1 ? b : a;
    }
    c->out[0] = bcast_to(c, x, rank, shape);
    return NEST_OK;
}

/* Tile: x broadcast to [r0, d0, r1, d1, ...], read as [r0 * d0, r1 * d1, ...]. */
static int lower_tile(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int64_t reps[R], big[2 * R], shape[R], axes[R];
    int n = ox_known_ints(c, 1, reps, R);
    if (n < 0)
        return NEST_ERR_ARG;
    if (n != rank)
        return ox_err(c, NEST_ERR_ARG, "%d repeats for rank %d", n, rank);
    if (2 * rank > R)
        return ox_err(c, NEST_ERR_LIMIT, "rank %d is too large to tile", rank);
    for (int i = 0; i < rank; i++) {
        if (reps[i] < 0)
            return ox_err(c, NEST_ERR_ARG, "repeat %d is %lld", i, (long long)reps[i]);
        big[2 * i] = reps[i];
        big[2 * i + 1] = shape_of(c, x)[i];
        axes[i] = 2 * i;
        if (mul_overflows(reps[i], shape_of(c, x)[i], &shape[i]))
            return ox_err(c, NEST_ERR_LIMIT, "the result is too large");
    }
    nest_value b = nest_broadcast(c->f, x, 2 * rank, big, rank, axes);
    c->out[0] = reshape(c, b, rank, shape);
    return NEST_OK;
}

/* Pad: constant (values), edge and reflect, built as slices and joins per axis. */
static int lower_pad(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int64_t pads[2 * R];
    int n;
    double value = 0;
    if (c->opset < 11) {
        n = ox_attr_ints(c, "pads", pads, 2 * R);
        value = ox_attr_float(c, "value", 0);
    } else {
        n = ox_known_ints(c, 1, pads, 2 * R);
        if (ox_has(c, 2)) {
            const ox_tensor *v = ox_known(c, 2);
            if (!v)
                return NEST_ERR_ARG;
            value = ox_float_at(v, 0);
        }
        if (ox_has(c, 3))
            return ox_err(c, NEST_ERR_ARG, "the axes input is not supported");
    }
    if (n < 0)
        return n == -1 ? ox_err(c, NEST_ERR_ARG, "needs pads") : NEST_ERR_ARG;
    if (n != 2 * rank)
        return ox_err(c, NEST_ERR_ARG, "%d pads for rank %d", n, rank);
    const char *mode = ox_attr_str(c, "mode", "constant");
    bool reflect = strcmp(mode, "reflect") == 0, edge = strcmp(mode, "edge") == 0;
    if (!reflect && !edge && strcmp(mode, "constant") != 0)
        return ox_err(c, NEST_ERR_ARG, "mode '%.40s' is not supported (constant, reflect, edge)",
                      mode);
    for (int a = 0; a < rank; a++) {
        int64_t lo = pads[a], hi = pads[a + rank], d = shape_of(c, x)[a];
        /* negative pads crop */
        if (lo < 0 || hi < 0) {
            int64_t b = lo < 0 ? -lo : 0, e = hi < 0 ? d + hi : d;
            if (b > e)
                return ox_err(c, NEST_ERR_ARG, "pads crop more than axis %d holds", a);
            CHECK(x = slice_axis(c, x, a, b, e, 1));
            lo = lo < 0 ? 0 : lo, hi = hi < 0 ? 0 : hi;
            d = e - b;
        }
        if (lo == 0 && hi == 0)
            continue;
        if ((reflect || edge) && d == 0)
            return ox_err(c, NEST_ERR_ARG, "axis %d is empty: nothing to %s", a, mode);
        if (reflect && (lo >= d || hi >= d))
            return ox_err(c, NEST_ERR_ARG, "reflect pads of %lld and %lld on axis %d of extent "
                          "%lld", (long long)lo, (long long)hi, a, (long long)d);
        if (lo + hi > 4096 && !edge && reflect)
            return ox_err(c, NEST_ERR_LIMIT, "reflect pads above 4096");
        nest_value parts[8194];
        int np = 0;
        for (int side = 0; side < 2; side++) {
            int64_t p = side ? hi : lo;
            if (p == 0) {
                if (side == 0)
                    parts[np++] = x;
                continue;
            }
            if (!reflect) {
                int64_t shape[R];
                memcpy(shape, shape_of(c, x), (size_t)rank * sizeof *shape);
                shape[a] = p;
                if (edge) {
                    int64_t at = side ? d - 1 : 0;
                    nest_value s = slice_axis(c, x, a, at, at + 1, 1);
                    parts[np++] = bcast_to(c, s, rank, shape);
                } else {
                    parts[np++] = full(c, type_of(c, x), value, rank, shape);
                }
            } else {
                for (int64_t k = 0; k < p; k++) {
                    int64_t at = side ? d - 2 - k : p - k;
                    parts[np++] = slice_axis(c, x, a, at, at + 1, 1);
                }
            }
            if (side == 0)
                parts[np++] = x;
        }
        CHECK(x = nest_concat(c->f, np, parts, a));
    }
    c->out[0] = x;
    return NEST_OK;
}

/* ---- reductions ---- */

typedef nest_value (*red_fn)(nest_function *, nest_value, int, const int64_t *);

/* The reduced axes (all when none are given, unless noop_with_empty_axes) and the kept shape. */
static int reduce(ox *c, red_fn fn, bool mean, int input_opset)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int64_t axes[R], keep[R];
    int n = axes_arg(c, input_opset, 1, axes);
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
            int a = axis_of(c, axes[i], rank, "axis");
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
            count *= shape_of(c, x)[i];
            keep[i] = 1;
        } else {
            keep[i] = shape_of(c, x)[i];
        }
    }
    nest_value r = fn(c->f, x, na, axes);
    if (mean)
        r = nest_divide(c->f, r, full_like(c, r, (double)count));
    c->out[0] = ox_attr_int(c, "keepdims", 1) ? reshape(c, r, rank, keep) : r;
    return NEST_OK;
}

static int lower_reduce_sum(ox *c) { return reduce(c, nest_sum, false, 13); }
static int lower_reduce_mean(ox *c) { return reduce(c, nest_sum, true, 18); }
static int lower_reduce_max(ox *c) { return reduce(c, nest_max, false, 18); }
static int lower_reduce_min(ox *c) { return reduce(c, nest_min, false, 18); }

/* x reduced over the axes from `first` to the end, kept as extents of 1 (for broadcasting
 * back). */
static nest_value reduce_tail(ox *c, red_fn fn, nest_value x, int first)
{
    if (x == NEST_NONE)
        return NEST_NONE;
    int rank = rank_of(c, x);
    int64_t axes[R], keep[R];
    for (int i = 0; i < rank; i++) {
        keep[i] = i < first ? shape_of(c, x)[i] : 1;
        if (i >= first)
            axes[i - first] = i;
    }
    return reshape(c, fn(c->f, x, rank - first, axes), rank, keep);
}

/* x reduced over one axis, kept as an extent of 1. */
static nest_value reduce_axis(ox *c, red_fn fn, nest_value x, int axis)
{
    if (x == NEST_NONE)
        return NEST_NONE;
    int rank = rank_of(c, x);
    int64_t a = axis, keep[R];
    for (int i = 0; i < rank; i++)
        keep[i] = i == axis ? 1 : shape_of(c, x)[i];
    return reshape(c, fn(c->f, x, 1, &a), rank, keep);
}

static nest_value like(ox *c, nest_value v, nest_value shape_from)
{
    if (v == NEST_NONE || shape_from == NEST_NONE)
        return NEST_NONE;
    return bcast_to(c, v, rank_of(c, shape_from), shape_of(c, shape_from));
}

/* Softmax and LogSoftmax: along one axis (opset 13), or over the axes from `axis` on of the
 * input flattened to 2-D (earlier opsets). */
static int softmax(ox *c, bool log_of)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int axis = axis_of(c, ox_attr_int(c, "axis", c->opset >= 13 ? -1 : 1), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    nest_value v = x;
    if (c->opset < 13) {
        int64_t two[2] = {count_of(axis, shape_of(c, x)),
                          count_of(rank - axis, shape_of(c, x) + axis)};
        v = reshape(c, x, 2, two);
        axis = 1;
    }
    nest_value m = like(c, reduce_axis(c, nest_max, v, axis), v);
    nest_value d = nest_subtract(c->f, v, m);
    nest_value e = nest_exp(c->f, d);
    nest_value s = like(c, reduce_axis(c, nest_sum, e, axis), v);
    nest_value r = log_of ? nest_subtract(c->f, d, nest_log(c->f, s)) : nest_divide(c->f, e, s);
    c->out[0] = reshape(c, r, rank, shape_of(c, x));
    return NEST_OK;
}

static int lower_softmax(ox *c) { return softmax(c, false); }
static int lower_log_softmax(ox *c) { return softmax(c, true); }

/* ---- products of matrices ---- */

/* numpy's matmul: 1-D operands gain an axis (dropped again), batch dims broadcast. */
static nest_value matmul(ox *c, nest_value a, nest_value b)
{
    if (a == NEST_NONE || b == NEST_NONE)
        return NEST_NONE;
    int ra = rank_of(c, a), rb = rank_of(c, b);
    if (ra == 0 || rb == 0) {
        ox_err(c, NEST_ERR_TYPE, "operands must have rank 1 or more");
        return NEST_NONE;
    }
    if (ra == 1 || rb == 1 || rb == 2) {
        /* dot contracts a's last axis with b's first: [..., M, K] x [K, N] -> [..., M, N] */
        int64_t k = shape_of(c, a)[ra - 1], kb = shape_of(c, b)[rb == 1 ? 0 : rb - 2];
        if (k != kb) {
            ox_err(c, NEST_ERR_TYPE, "inner dimensions %lld and %lld differ", (long long)k,
                   (long long)kb);
            return NEST_NONE;
        }
        if (rb <= 2)
            return nest_dot(c->f, a, b);
        /* a vector times a batch of matrices: [K] x [..., K, N] -> [..., N] */
        int64_t as[2] = {1, k};
        a = reshape(c, a, 2, as);
        ra = 2;
    }
    /* batches: [..., M, K, 1] * [..., 1, K, N] summed over K */
    int rank = ra > rb ? ra : rb;
    int64_t shape[R + 1], bsa[R], bsb[R];
    for (int i = 0; i < rank - 2; i++) {
        int ia = i - (rank - ra), ib = i - (rank - rb);
        int64_t da = ia >= 0 ? shape_of(c, a)[ia] : 1, db = ib >= 0 ? shape_of(c, b)[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            ox_err(c, NEST_ERR_TYPE, "batch dimensions %lld and %lld do not broadcast",
                   (long long)da, (long long)db);
            return NEST_NONE;
        }
        shape[i] = da == 1 ? db : da;
    }
    int64_t m = shape_of(c, a)[ra - 2], k = shape_of(c, a)[ra - 1];
    int64_t kb = shape_of(c, b)[rb - 2], n = shape_of(c, b)[rb - 1];
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
    memcpy(s, shape_of(c, a), (size_t)ra * sizeof *s);
    s[ra] = 1;
    nest_value a3 = reshape(c, a, ra + 1, s);
    memcpy(s, shape_of(c, b), (size_t)rb * sizeof *s);
    memmove(s + rb - 1, s + rb - 2, 2 * sizeof *s);
    s[rb - 2] = 1;
    nest_value b3 = reshape(c, b, rb + 1, s);
    shape[rank - 2] = m, shape[rank - 1] = k, shape[rank] = n;
    nest_value p = nest_multiply(c->f, bcast_to(c, a3, rank + 1, shape), bcast_to(c, b3, rank + 1, shape));
    int64_t ax = rank - 1;
    return nest_sum(c->f, p, 1, &ax);
}

static int lower_matmul(ox *c)
{
    nest_value a = ox_in(c, 0), b = ox_in(c, 1);
    CHECK(a);
    CHECK(b);
    c->out[0] = matmul(c, a, b);
    return NEST_OK;
}

static int lower_gemm(ox *c)
{
    nest_value a = ox_in(c, 0), b = ox_in(c, 1);
    CHECK(a);
    CHECK(b);
    if (rank_of(c, a) != 2 || rank_of(c, b) != 2)
        return ox_err(c, NEST_ERR_TYPE, "A and B must be matrices");
    static const int64_t swap[2] = {1, 0};
    if (ox_attr_int(c, "transA", 0))
        a = transpose(c, a, swap);
    if (ox_attr_int(c, "transB", 0))
        b = transpose(c, b, swap);
    CHECK(a);
    CHECK(b);
    nest_value y = matmul(c, a, b);
    CHECK(y);
    float alpha = ox_attr_float(c, "alpha", 1), beta = ox_attr_float(c, "beta", 1);
    if (alpha != 1)
        y = nest_multiply(c->f, y, full_like(c, y, alpha));
    if (ox_has(c, 2) && beta != 0) {
        nest_value cc = ox_in(c, 2);
        CHECK(cc);
        cc = bcast_to(c, cc, 2, shape_of(c, y));
        if (beta != 1)
            cc = nest_multiply(c->f, cc, full_like(c, cc, beta));
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
    int rank = rank_of(c, x);
    if (rank < 2 || rank_of(c, v) != 1) {
        ox_err(c, NEST_ERR_TYPE, "needs an input of rank 2 or more and per-channel vectors");
        return NEST_NONE;
    }
    int64_t s[R];
    for (int i = 0; i < rank; i++)
        s[i] = i == 1 ? shape_of(c, v)[0] : 1;
    return bcast_to(c, reshape(c, v, rank, s), rank, shape_of(c, x));
}

static int lower_batch_norm(ox *c)
{
    if (ox_attr_int(c, "training_mode", 0) || (c->opset < 7 && !ox_attr_int(c, "is_test", 0)))
        return ox_err(c, NEST_ERR_ARG, "training mode is not supported (inference only)");
    for (int i = 1; i < c->nout; i++)
        if (c->node->output[i] && c->node->output[i][0])
            return ox_err(c, NEST_ERR_ARG, "output %d (a training statistic) is not supported",
                          i + 1);
    nest_value x = ox_in(c, 0);
    CHECK(x);
    double eps = ox_attr_float(c, "epsilon", 1e-5f);
    nest_value scale = ox_in(c, 1), bias = ox_in(c, 2), mean = ox_in(c, 3), var = ox_in(c, 4);
    CHECK(scale);
    CHECK(bias);
    CHECK(mean);
    CHECK(var);
    /* y = x * a + (bias - mean * a), a = scale / sqrt(var + eps): per channel, then broadcast
     * (known statistics make a and b constants after folding) */
    nest_value a = nest_divide(c->f, scale, nest_sqrt(c->f, nest_add(c->f, var, full_like(c, var, eps))));
    nest_value b = nest_subtract(c->f, bias, nest_multiply(c->f, mean, a));
    c->out[0] = nest_add(c->f, nest_multiply(c->f, x, per_channel(c, a, x)), per_channel(c, b, x));
    return NEST_OK;
}

static int lower_layer_norm(ox *c)
{
    nest_value x = ox_in(c, 0);
    CHECK(x);
    int rank = rank_of(c, x);
    int axis = axis_of(c, ox_attr_int(c, "axis", -1), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    double eps = ox_attr_float(c, "epsilon", 1e-5f);
    double n = (double)count_of(rank - axis, shape_of(c, x) + axis);
    nest_value mean = reduce_tail(c, nest_sum, x, axis);
    mean = nest_divide(c->f, mean, full_like(c, mean, n));
    nest_value d = nest_subtract(c->f, x, like(c, mean, x));
    nest_value var = reduce_tail(c, nest_sum, nest_multiply(c->f, d, d), axis);
    var = nest_divide(c->f, var, full_like(c, var, n));
    nest_value inv = nest_divide(c->f, full_like(c, var, 1),
                                 nest_sqrt(c->f, nest_add(c->f, var, full_like(c, var, eps))));
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
    CHECK(x);
    if (rank_of(c, x) < 2)
        return ox_err(c, NEST_ERR_TYPE, "needs an input of rank 2 or more");
    nest_value r = reduce_tail(c, avg ? nest_sum : nest_max, x, 2);
    if (avg)
        r = nest_divide(c->f, r, full_like(c, r, (double)count_of(rank_of(c, x) - 2, shape_of(c, x) + 2)));
    c->out[0] = r;
    return NEST_OK;
}

static int lower_global_avg_pool(ox *c) { return global_pool(c, true); }
static int lower_global_max_pool(ox *c) { return global_pool(c, false); }

/* ---- the table ---- */

static const struct {
    const char *name;
    ox_lower_fn fn;
} lowerings[] = {
    {"Abs", lower_abs},
    {"Add", lower_add},
    {"And", lower_and},
    {"BatchNormalization", lower_batch_norm},
    {"Cast", lower_cast},
    {"Clip", lower_clip},
    {"Concat", lower_concat},
    {"Constant", lower_constant},
    {"ConstantOfShape", lower_constant_of_shape},
    {"Div", lower_div},
    {"Dropout", lower_dropout},
    {"Elu", lower_elu},
    {"Equal", lower_equal},
    {"Exp", lower_exp},
    {"Expand", lower_expand},
    {"Flatten", lower_flatten},
    {"Gather", lower_gather},
    {"Gemm", lower_gemm},
    {"GlobalAveragePool", lower_global_avg_pool},
    {"GlobalMaxPool", lower_global_max_pool},
    {"Greater", lower_greater},
    {"GreaterOrEqual", lower_greater_eq},
    {"HardSigmoid", lower_hard_sigmoid},
    {"Identity", lower_identity},
    {"LayerNormalization", lower_layer_norm},
    {"LeakyRelu", lower_leaky_relu},
    {"Less", lower_less},
    {"LessOrEqual", lower_less_eq},
    {"Log", lower_log},
    {"LogSoftmax", lower_log_softmax},
    {"MatMul", lower_matmul},
    {"Max", lower_max},
    {"Mean", lower_mean},
    {"Min", lower_min},
    {"Mul", lower_mul},
    {"Neg", lower_neg},
    {"Not", lower_not},
    {"Or", lower_or},
    {"Pad", lower_pad},
    {"Pow", lower_pow},
    {"Range", lower_range},
    {"Reciprocal", lower_reciprocal},
    {"ReduceMax", lower_reduce_max},
    {"ReduceMean", lower_reduce_mean},
    {"ReduceMin", lower_reduce_min},
    {"ReduceSum", lower_reduce_sum},
    {"Relu", lower_relu},
    {"Reshape", lower_reshape},
    {"Shape", lower_shape},
    {"Sigmoid", lower_sigmoid},
    {"Sign", lower_sign},
    {"Size", lower_size},
    {"Slice", lower_slice},
    {"Softmax", lower_softmax},
    {"Split", lower_split},
    {"Sqrt", lower_sqrt},
    {"Squeeze", lower_squeeze},
    {"Sub", lower_sub},
    {"Sum", lower_sum},
    {"Tanh", lower_tanh},
    {"Tile", lower_tile},
    {"Transpose", lower_transpose},
    {"Unsqueeze", lower_unsqueeze},
    {"Where", lower_where},
};

ox_lower_fn ox_lookup(const char *op_type)
{
    for (size_t i = 0; i < countof(lowerings); i++)
        if (strcmp(lowerings[i].name, op_type) == 0)
            return lowerings[i].fn;
    return NULL;
}

void ox_supported(buf *b)
{
    for (size_t i = 0; i < countof(lowerings); i++)
        buf_printf(b, "%s%s", i ? ", " : "", lowerings[i].name);
}

bool ox_foldable(const char *op_type)
{
    (void)op_type;
    return true;
}
