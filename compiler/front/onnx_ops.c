/*
 * onnx_ops.c - what the lowerings of ONNX operators share (values of the function being built,
 * constants, numpy broadcasting, axes) and the table of operators, generated from onnx_ops.def.
 * The lowerings themselves are in onnx_math.c (element-wise), onnx_shape.c (constants, shapes
 * and views) and onnx_nn.c (reductions, products of matrices, normalization, pooling).
 */
#include <stdlib.h>
#include <string.h>

#include "onnx.h"

#define R NEST_MAX_RANK

bool ox_symbolic(ox *c, nest_value v, const char *what)
{
    const ir_node *x = ox_node(c, v);
    for (int i = 0; i < x->rank; i++)
        if (dim_is_sym(x->shape[i])) {
            char *d = dim_text(c->f, x->shape[i]);
            ox_err(c, NEST_ERR_ARG, "%s of a value with a symbolic dim (%.100s, axis %d) is not "
                   "computed yet; give the model's dims their sizes (nestc --dim NAME=N)", what,
                   d ? d : "?", i);
            free(d);
            return true;
        }
    return false;
}

/* A constant of one value filling a shape (integers saturate, as nest_convert does). */
nest_value ox_full(ox *c, int etype, double value, int rank, const int64_t *shape)
{
    return ir_fill(c->f, etype, value, rank, shape);
}

/* A constant of v's type and shape. */
nest_value ox_full_like(ox *c, nest_value v, double value)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    return ox_full(c, ox_type(c, v), value, ox_rank(c, v), ox_shape(c, v));
}

/* An axis in [-rank, rank) made positive; -1 with the error when out of range. */
int ox_axis(ox *c, int64_t axis, int rank, const char *what)
{
    if (axis < -rank || axis >= rank || (rank == 0 && axis != 0)) {
        ox_err(c, NEST_ERR_ARG, "%s %lld is out of range for rank %d", what, (long long)axis,
               rank);
        return -1;
    }
    return (int)(axis < 0 ? axis + rank : axis);
}

nest_value ox_reshape(ox *c, nest_value v, int rank, const int64_t *shape)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    const ir_node *n = ox_node(c, v);
    if (n->rank == rank && memcmp(n->shape, shape, (size_t)rank * sizeof *shape) == 0)
        return v;
    return nest_reshape(c->f, v, NULL, rank, shape);
}

nest_value ox_transpose(ox *c, nest_value v, const int64_t *perm)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    int rank = ox_rank(c, v);
    int64_t shape[R];
    bool identity = true;
    for (int i = 0; i < rank; i++) {
        shape[i] = ox_shape(c, v)[perm[i]];
        identity = identity && perm[i] == i;
    }
    return identity ? v : nest_reshape(c->f, v, perm, rank, shape);
}

/* v broadcast to `shape` by numpy's rule (v's dims align to the right; 1 stretches). */
nest_value ox_bcast_to(ox *c, nest_value v, int rank, const int64_t *shape)
{
    if (v == NEST_NONE)
        return NEST_NONE;
    int vr = ox_rank(c, v);
    const int64_t *vs = ox_shape(c, v);
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
        return ox_reshape(c, v, rank, shape);
    v = ox_reshape(c, v, nk, kept);
    return nest_broadcast(c->f, v, rank, shape, na, axes);
}

/* The numpy broadcast of n values' shapes. */
static int bshape(ox *c, int n, const nest_value *v, int *rank, int64_t *shape)
{
    *rank = 0;
    for (int k = 0; k < n; k++)
        if (ox_rank(c, v[k]) > *rank)
            *rank = ox_rank(c, v[k]);
    for (int i = 0; i < *rank; i++)
        shape[i] = 1;
    for (int k = 0; k < n; k++) {
        int vr = ox_rank(c, v[k]);
        const int64_t *vs = ox_shape(c, v[k]);
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
int ox_inputs_bcast(ox *c, int n, nest_value *v)
{
    for (int i = 0; i < n; i++)
        if ((v[i] = ox_in(c, i)) == NEST_NONE)
            return nest_errcode(c->f) ? nest_errcode(c->f) : NEST_ERR_ARG;
    int rank;
    int64_t shape[R];
    int st = bshape(c, n, v, &rank, shape);
    for (int i = 0; st == NEST_OK && i < n; i++)
        if ((v[i] = ox_bcast_to(c, v[i], rank, shape)) == NEST_NONE)
            st = NEST_ERR_TYPE;
    return st;
}

/* The axes of Squeeze, Unsqueeze and the reductions: an attribute before `input_opset`, the
 * input `index` from it. Returns the count, -1 when not given, -2 on an error. */
int ox_axes_arg(ox *c, int input_opset, int index, int64_t *axes)
{
    if (c->opset < input_opset)
        return ox_attr_ints(c, "axes", axes, R);
    if (!ox_has(c, index))
        return -1;
    int n = ox_known_ints(c, index, axes, R);
    return n < 0 ? -2 : n;
}

/* x[lower:upper:step] along one axis. */
nest_value ox_slice_axis(ox *c, nest_value x, int axis, int64_t lo, int64_t hi, int64_t step)
{
    int rank = ox_rank(c, x);
    int64_t lower[R], upper[R], strides[R];
    for (int i = 0; i < rank; i++) {
        lower[i] = 0;
        upper[i] = ox_shape(c, x)[i];
        strides[i] = 1;
    }
    lower[axis] = lo, upper[axis] = hi, strides[axis] = step;
    if (lo == 0 && hi == ox_shape(c, x)[axis] && step == 1)
        return x;
    return nest_slice(c->f, x, lower, upper, strides);
}

/* ---- the table ---- */

static const struct {
    const char *name;
    ox_lower_fn fn;
} lowerings[] = {
#define OX(name, fn) {#name, ox_op_##fn},
#include "onnx_ops.def"
#undef OX
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
