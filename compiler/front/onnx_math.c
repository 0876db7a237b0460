/*
 * onnx_math.c - the element-wise ONNX operators: arithmetic, comparisons and logic, activations, Clip,
 * Cast, Identity and Dropout. Numpy broadcasting of the inputs is explicit (ox_inputs_bcast).
 * Add, Sub, Mul, Div and Neg of the model's symbolic dims (a Shape's, known at import) are
 * computed at import into dim expressions.
 */
#include <math.h>
#include <stdlib.h>

#include "onnx.h"

typedef nest_value (*bin_fn)(nest_function *, nest_value, nest_value);
typedef nest_value (*un_fn)(nest_function *, nest_value);

static int binary(ox *c, bin_fn fn)
{
    nest_value v[2];
    if (ox_inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    c->out[0] = fn(c->f, v[0], v[1]);
    return NEST_OK;
}

static int unary(ox *c, un_fn fn)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    c->out[0] = fn(c->f, x);
    return NEST_OK;
}

/* ---- arithmetic on the model's symbolic dims (a Shape's, known at import) ---- */

typedef int64_t (*dim_fn)(nest_function *, int64_t, int64_t);

/* ONNX's integer Div of dims: plain ones as numbers (truncated toward zero), a symbolic dividend
 * only by a plain divisor of every coefficient of its terms (dim_div_exact). */
static int64_t dim_div(nest_function *f, int64_t a, int64_t b)
{
    if (dim_is_sym(a) || dim_is_sym(b) || b == 0)
        return dim_div_exact(f, a, b);
    return a / b;
}

static int64_t dim_neg(nest_function *f, int64_t a, int64_t b)
{
    (void)b;
    return dim_sub(f, 0, a);
}

/* The node's inputs (one or two int64 tensors known at import, some holding dims) combined
 * element by element by fn, with numpy's broadcasting, on the table of the model's function:
 * the output is a constant of the results (handles where they are symbolic). */
static int dims_arith(ox *c, dim_fn fn)
{
    const char *op = c->node->op_type;
    nest_function *df = ox_dims_fn(c);
    const ox_tensor *t[2];
    int n = c->nin < 2 ? c->nin : 2, rank = 0;
    int64_t shape[NEST_MAX_RANK], count = 1;
    for (int i = 0; i < n; i++) {
        if (!(t[i] = ox_known(c, i)))
            return NEST_ERR_ARG;
        if (t[i]->etype != NEST_I64)
            return ox_err(c, NEST_ERR_ARG, "input %d ('%.200s') is %s: %s of the model's symbolic "
                          "dims (a Shape's) is computed in int64 only; give the dims their sizes "
                          "(nestc --dim NAME=N)", i + 1, c->in[i]->name,
                          nest_type_name((nest_type)t[i]->etype), op);
        rank = t[i]->rank > rank ? t[i]->rank : rank;
    }
    for (int j = 0; j < rank; j++) {
        shape[j] = 1;
        for (int i = 0; i < n; i++) {
            int a = j - (rank - t[i]->rank);
            int64_t d = a < 0 ? 1 : t[i]->shape[a];
            if (d != 1 && shape[j] != 1 && d != shape[j])
                return ox_err(c, NEST_ERR_TYPE, "shapes do not broadcast: dimension %d is %lld "
                              "and %lld", j, (long long)shape[j], (long long)d);
            shape[j] = d != 1 ? d : shape[j];
        }
        if (mul_overflows(count, shape[j], &count) || count > OX_FOLD_BYTES / 8)
            return ox_err(c, NEST_ERR_LIMIT, "%s of the model's symbolic dims (a Shape's) into "
                          "more than %lld elements", op, (long long)(OX_FOLD_BYTES / 8));
    }
    int64_t *out = malloc((size_t)count * sizeof *out + 1);
    if (!out)
        return ox_err(c, NEST_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < count; e++) {
        int64_t v[2] = {0, 0};
        for (int i = 0; i < n; i++) {
            /* the element of input i that element e of the output reads */
            int64_t at = 0, stride = 1, rest = e;
            for (int j = rank - 1; j >= rank - t[i]->rank; j--) {
                int64_t d = t[i]->shape[j - (rank - t[i]->rank)];
                at += (d == 1 ? 0 : rest % shape[j]) * stride;
                rest /= shape[j];
                stride *= d;
            }
            v[i] = ox_int_at(t[i], at);
            if (!t[i]->dims && v[i] <= DIM_SYM0) { /* would read as a handle */
                free(out);
                return ox_err(c, NEST_ERR_ARG, "input %d ('%.200s') holds %lld: %s of the "
                              "model's symbolic dims (a Shape's) takes numbers above %lld", i + 1,
                              c->in[i]->name, (long long)v[i], op, (long long)DIM_SYM0);
            }
        }
        if ((out[e] = fn(df, v[0], v[1])) == DIM_NONE) {
            free(out);
            return ox_err(c, nest_errcode(df), "%s of the model's symbolic dims (a Shape's): "
                          "%s; give the dims their sizes (nestc --dim NAME=N)", op,
                          nest_errmsg(df));
        }
    }
    c->out[0] = nest_constant(c->f, NEST_I64, rank, shape, out, count);
    free(out);
    return NEST_OK;
}

int ox_op_add(ox *c) { return c->dims ? dims_arith(c, dim_add) : binary(c, nest_add); }
int ox_op_sub(ox *c) { return c->dims ? dims_arith(c, dim_sub) : binary(c, nest_subtract); }
int ox_op_mul(ox *c) { return c->dims ? dims_arith(c, dim_mul) : binary(c, nest_multiply); }
int ox_op_div(ox *c) { return c->dims ? dims_arith(c, dim_div) : binary(c, nest_divide); }
int ox_op_equal(ox *c) { return binary(c, nest_equal); }
int ox_op_less(ox *c) { return binary(c, nest_less); }
int ox_op_greater(ox *c) { return binary(c, nest_greater); }
int ox_op_less_eq(ox *c) { return binary(c, nest_less_eq); }
int ox_op_greater_eq(ox *c) { return binary(c, nest_greater_eq); }
int ox_op_and(ox *c) { return binary(c, nest_and); }
int ox_op_or(ox *c) { return binary(c, nest_or); }
int ox_op_sqrt(ox *c) { return unary(c, nest_sqrt); }
int ox_op_exp(ox *c) { return unary(c, nest_exp); }
int ox_op_log(ox *c) { return unary(c, nest_log); }
int ox_op_abs(ox *c) { return unary(c, nest_abs); }
int ox_op_neg(ox *c) { return c->dims ? dims_arith(c, dim_neg) : unary(c, nest_negative); }
int ox_op_tanh(ox *c) { return unary(c, nest_tanh); }
int ox_op_floor(ox *c) { return unary(c, nest_floor); }
int ox_op_ceil(ox *c) { return unary(c, nest_ceiling); }
int ox_op_erf(ox *c) { return unary(c, nest_erf); }
int ox_op_not(ox *c) { return unary(c, nest_not); }
int ox_op_sigmoid(ox *c) { return unary(c, nest_sigmoid); }

/* Whether every element of a known tensor is v. */
static bool all_equal(const ox_tensor *t, double v)
{
    for (int64_t i = 0; i < t->count; i++)
        if (ox_float_at(t, i) != v)
            return false;
    return true;
}

int ox_op_pow(ox *c)
{
    nest_value v[2];
    const ox_tensor *e = ox_peek(c, 1);
    if (ox_inputs_bcast(c, 2, v) != NEST_OK)
        return NEST_ERR_TYPE;
    /* x^2 as x * x (exactly what pow computes, without the call: layer norms square) */
    if (e && all_equal(e, 2) && (ox_type(c, v[0]) == NEST_F32 || ox_type(c, v[0]) == NEST_F64)) {
        c->out[0] = nest_multiply(c->f, v[0], v[0]);
        return NEST_OK;
    }
    if (ox_type(c, v[1]) != ox_type(c, v[0])) /* opset 12: the exponent may have its own type */
        v[1] = nest_convert(c->f, v[1], (nest_type)ox_type(c, v[0]));
    c->out[0] = nest_power(c->f, v[0], v[1]);
    return NEST_OK;
}

int ox_op_where(ox *c)
{
    nest_value v[3];
    if (ox_inputs_bcast(c, 3, v) != NEST_OK)
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
    if (ox_inputs_bcast(c, c->nin, v) != NEST_OK)
        return NEST_ERR_TYPE;
    nest_value r = v[0];
    for (int i = 1; i < c->nin; i++)
        r = fn(c->f, r, v[i]);
    if (mean && c->nin > 1)
        r = nest_divide(c->f, r, ox_full_like(c, r, c->nin));
    c->out[0] = r;
    return NEST_OK;
}

int ox_op_max(ox *c) { return variadic(c, nest_maximum, false); }
int ox_op_min(ox *c) { return variadic(c, nest_minimum, false); }
int ox_op_sum(ox *c) { return variadic(c, nest_add, false); }
int ox_op_mean(ox *c) { return variadic(c, nest_add, true); }

int ox_op_reciprocal(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    c->out[0] = nest_divide(c->f, ox_full_like(c, x, 1), x);
    return NEST_OK;
}

/* max(0, x): a NaN stays NaN, as numpy's maximum */
int ox_op_relu(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    c->out[0] = nest_maximum(c->f, ox_full_like(c, x, 0), x);
    return NEST_OK;
}

int ox_op_leaky_relu(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    nest_value ax = nest_multiply(c->f, x, ox_full_like(c, x, ox_attr_float(c, "alpha", 0.01f)));
    c->out[0] = nest_select(c->f, nest_less(c->f, x, ox_full_like(c, x, 0)), ax, x);
    return NEST_OK;
}

int ox_op_elu(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    nest_value em1 = nest_subtract(c->f, nest_exp(c->f, x), ox_full_like(c, x, 1));
    nest_value neg = nest_multiply(c->f, em1, ox_full_like(c, x, ox_attr_float(c, "alpha", 1.0f)));
    c->out[0] = nest_select(c->f, nest_less(c->f, x, ox_full_like(c, x, 0)), neg, x);
    return NEST_OK;
}

int ox_op_hard_sigmoid(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    nest_value y = nest_add(c->f, nest_multiply(c->f, x, ox_full_like(c, x, ox_attr_float(c, "alpha", 0.2f))),
                            ox_full_like(c, x, ox_attr_float(c, "beta", 0.5f)));
    y = nest_minimum(c->f, ox_full_like(c, x, 1), y);
    c->out[0] = nest_maximum(c->f, ox_full_like(c, x, 0), y);
    return NEST_OK;
}

/* sign(x) = 1, -1, or x itself for 0 and NaN */
int ox_op_sign(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    nest_value zero = ox_full_like(c, x, 0);
    nest_value neg = nest_select(c->f, nest_less(c->f, x, zero), ox_full_like(c, x, -1), x);
    c->out[0] = nest_select(c->f, nest_greater(c->f, x, zero), ox_full_like(c, x, 1), neg);
    return NEST_OK;
}

int ox_op_clip(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    nest_value lo = NEST_NONE, hi = NEST_NONE;
    if (c->opset < 11) {
        lo = ox_full_like(c, x, ox_attr_float(c, "min", -INFINITY));
        hi = ox_full_like(c, x, ox_attr_float(c, "max", INFINITY));
    } else {
        if (ox_has(c, 1))
            lo = ox_bcast_to(c, ox_in(c, 1), ox_rank(c, x), ox_shape(c, x));
        if (ox_has(c, 2))
            hi = ox_bcast_to(c, ox_in(c, 2), ox_rank(c, x), ox_shape(c, x));
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

int ox_op_cast(ox *c)
{
    static const int types[] = {-1, NEST_F32, -1, -1, -1, -1, NEST_I32, NEST_I64, -1,
                                NEST_BOOL, -1, NEST_F64};
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int64_t to = ox_attr_int(c, "to", -1);
    if (to < 0 || to >= (int64_t)countof(types) || types[to] < 0)
        return ox_err(c, NEST_ERR_TYPE, "cast to data type %lld is not supported (float, "
                      "double, int32, int64, bool)", (long long)to);
    c->out[0] = ox_type(c, x) == types[to] ? x : nest_convert(c->f, x, (nest_type)types[to]);
    return NEST_OK;
}

int ox_op_identity(ox *c)
{
    c->out[0] = ox_in(c, 0);
    return NEST_OK;
}

/* Dropout in inference is the identity; in training mode too when the ratio is 0 (otherwise it
 * draws random numbers, which nest does not). */
int ox_op_dropout(ox *c)
{
    if (c->opset >= 12 && ox_has(c, 2)) {
        const ox_tensor *t = ox_known(c, 2), *r = NULL;
        if (!t)
            return NEST_ERR_ARG;
        if (ox_int_at(t, 0) && ox_has(c, 1) && !(r = ox_known(c, 1)))
            return NEST_ERR_ARG;
        if (ox_int_at(t, 0) && (!r || ox_float_at(r, 0) != 0))
            return ox_err(c, NEST_ERR_ARG, "training mode is not supported (inference only) "
                          "unless the ratio is 0");
    }
    if (c->opset < 7 && ox_attr_int(c, "is_test", 1) == 0)
        return ox_err(c, NEST_ERR_ARG, "training mode is not supported (inference only)");
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    c->out[0] = x;
    if (c->nout > 1)
        c->out[1] = ox_full(c, NEST_BOOL, 1, ox_rank(c, x), ox_shape(c, x));
    return NEST_OK;
}
