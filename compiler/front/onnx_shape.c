/*
 * onnx_shape.c - the ONNX operators of constants, shapes and views: Constant, ConstantOfShape, Shape,
 * Size, Range, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather,
 * Expand, Tile, Pad. The inputs that give shapes, axes or pads must be known at import.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.h"

#define R NEST_MAX_RANK

static nest_value known_value(ox *c, const ox_tensor *t)
{
    return nest_constant(c->f, (nest_type)t->etype, t->rank, t->shape, t->data, t->count);
}

int ox_op_constant(ox *c)
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

int ox_op_constant_of_shape(ox *c)
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
        c->out[0] = ox_full(c, NEST_F32, 0, rank, shape);
        return NEST_OK;
    }
    const ox_tensor *t = ox_decode(c, a->t, "attribute value");
    if (!t)
        return NEST_ERR_ARG;
    if (ox_count(t->rank, t->shape) != 1)
        return ox_err(c, NEST_ERR_ARG, "the value must hold one element");
    c->out[0] = nest_constant(c->f, (nest_type)t->etype, rank, shape, t->data, 1);
    return NEST_OK;
}

int ox_op_shape(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
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
    for (int64_t i = start; i < end; i++) /* symbolic dims: their handles, marked (dims_use) */
        c->dims |= dim_is_sym(ox_shape(c, x)[i]);
    c->out[0] = nest_constant(c->f, NEST_I64, 1, &n, ox_shape(c, x) + start, n);
    return NEST_OK;
}

int ox_op_size(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    if (ox_symbolic(c, x, "Size"))
        return NEST_ERR_ARG;
    int64_t n = ir_count(ox_node(c, x));
    c->out[0] = nest_constant(c->f, NEST_I64, 0, NULL, &n, 1);
    return NEST_OK;
}

int ox_op_range(ox *c)
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

int ox_op_reshape(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int64_t shape[R];
    int rank = c->opset < 5 ? ox_attr_ints(c, "shape", shape, R) : ox_known_ints(c, 1, shape, R);
    if (rank < 0)
        return NEST_ERR_ARG;
    bool allowzero = ox_attr_int(c, "allowzero", 0) != 0;
    /* the counts apart: plain factors, and symbolic dims (batch) multiplied */
    int64_t have = 1, have_sym = 1, known = 1, known_sym = 1;
    for (int i = 0; i < ox_rank(c, x); i++) {
        int64_t d = ox_shape(c, x)[i];
        if (dim_is_sym(d))
            have_sym = dim_mul(c->f, have_sym, d);
        else
            have *= d; /* within the limit of a value's size */
    }
    int infer = -1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == 0 && !allowzero) {
            if (i >= ox_rank(c, x))
                return ox_err(c, NEST_ERR_ARG, "shape[%d] is 0 (copy) beyond the input's rank", i);
            shape[i] = ox_shape(c, x)[i];
            if (dim_is_sym(shape[i])) { /* a symbolic dim copied */
                known_sym = dim_mul(c->f, known_sym, shape[i]);
                continue;
            }
        }
        if (dim_is_sym(shape[i]) && c->in[1] && c->in[1]->k && c->in[1]->k->dims &&
            dim_valid(c->f, shape[i])) { /* a symbolic dim of a Shape */
            known_sym = dim_mul(c->f, known_sym, shape[i]);
            continue;
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
    if (have_sym == NEST_DIM_NONE || known_sym == NEST_DIM_NONE)
        return NEST_ERR_ARG;
    if (infer >= 0) {
        /* -1 takes what the rest leaves: the plain quotient, times the symbolic dims the
         * shape does not copy (all of them, or none) */
        bool all_sym = dim_compare(c->f, known_sym, 1) == 0;
        if (!all_sym && dim_compare(c->f, known_sym, have_sym) != 0) {
            char *h = dim_text(c->f, have_sym), *k = dim_text(c->f, known_sym);
            ox_err(c, NEST_ERR_TYPE, "cannot infer shape[%d]: the shape keeps %.100s of the "
                   "input's symbolic dims %.100s", infer, k ? k : "?", h ? h : "?");
            free(h);
            free(k);
            return NEST_ERR_TYPE;
        }
        if (known == 0 || have % known)
            return ox_err(c, NEST_ERR_TYPE, "cannot infer shape[%d]: %lld elements into %lld",
                          infer, (long long)have, (long long)known);
        shape[infer] = all_sym ? dim_mul(c->f, have_sym, have / known) : have / known;
        if (shape[infer] == NEST_DIM_NONE)
            return NEST_ERR_ARG;
    }
    c->out[0] = ox_reshape(c, x, rank, shape);
    return NEST_OK;
}

int ox_op_flatten(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    int64_t axis = ox_attr_int(c, "axis", 1);
    if (axis < -rank || axis > rank)
        return ox_err(c, NEST_ERR_ARG, "axis %lld is out of range for rank %d", (long long)axis,
                      rank);
    if (axis < 0)
        axis += rank;
    int64_t shape[2] = {ir_dims_count(c->f, (int)axis, ox_shape(c, x)),
                        ir_dims_count(c->f, rank - (int)axis, ox_shape(c, x) + axis)};
    c->out[0] = ox_reshape(c, x, 2, shape);
    return NEST_OK;
}

int ox_op_transpose(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
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
    c->out[0] = ox_transpose(c, x, perm);
    return NEST_OK;
}

int ox_op_squeeze(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    const int64_t *xs = ox_shape(c, x);
    int64_t axes[R], shape[R];
    int n = ox_axes_arg(c, 13, 1, axes);
    if (n == -2)
        return NEST_ERR_ARG;
    uint32_t drop = 0;
    for (int i = 0; i < n; i++) {
        int a = ox_axis(c, axes[i], rank, "axis");
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
    c->out[0] = ox_reshape(c, x, k, shape);
    return NEST_OK;
}

int ox_op_unsqueeze(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int64_t axes[R], shape[R];
    int n = ox_axes_arg(c, 13, 1, axes);
    if (n < 0)
        return n == -2 ? NEST_ERR_ARG : ox_err(c, NEST_ERR_ARG, "needs axes");
    int rank = ox_rank(c, x) + n;
    if (rank > R)
        return ox_err(c, NEST_ERR_LIMIT, "rank %d is above %d", rank, R);
    uint32_t add = 0;
    for (int i = 0; i < n; i++) {
        int a = ox_axis(c, axes[i], rank, "axis");
        if (a < 0)
            return NEST_ERR_ARG;
        if (add >> a & 1)
            return ox_err(c, NEST_ERR_ARG, "axis %d is given twice", a);
        add |= 1u << a;
    }
    for (int i = 0, j = 0; i < rank; i++)
        shape[i] = add >> i & 1 ? 1 : ox_shape(c, x)[j++];
    c->out[0] = ox_reshape(c, x, rank, shape);
    return NEST_OK;
}

int ox_op_concat(ox *c)
{
    if (c->nin < 1 || c->nin > 64)
        return ox_err(c, NEST_ERR_ARG, "takes 1 to 64 inputs");
    nest_value v[64];
    for (int i = 0; i < c->nin; i++)
        OX_CHECK(v[i] = ox_in(c, i));
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), ox_rank(c, v[0]), "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    c->out[0] = c->nin == 1 ? v[0] : nest_concat(c->f, c->nin, v, axis);
    return NEST_OK;
}

int ox_op_split(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), ox_rank(c, x), "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    int64_t dim = ox_shape(c, x)[axis], parts[64];
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
        c->out[i] = ox_slice_axis(c, x, axis, at, at + parts[i], 1);
        at += parts[i];
    }
    if (at != dim)
        return ox_err(c, NEST_ERR_ARG, "the parts add up to %lld, not %lld", (long long)at,
                      (long long)dim);
    return NEST_OK;
}

int ox_op_slice(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
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
        lower[i] = 0, upper[i] = ox_shape(c, x)[i], step[i] = 1;
    int64_t rev[R];
    int nrev = 0;
    uint32_t seen = 0;
    for (int i = 0; i < ns; i++) {
        int a = ox_axis(c, na >= 0 ? axes[i] : i, rank, "axis");
        if (a < 0)
            return NEST_ERR_ARG;
        if (seen >> a & 1)
            return ox_err(c, NEST_ERR_ARG, "axis %d is given twice", a);
        seen |= 1u << a;
        int64_t d = ox_shape(c, x)[a], s = nst >= 0 ? steps[i] : 1;
        if (s == 0)
            return ox_err(c, NEST_ERR_ARG, "step 0 on axis %d", a);
        int64_t b = starts[i], e = ends[i];
        if (s < 0) {
            /* backwards from b (clamped to [0, d - 1]) to e (to [-1, d - 1]), exclusive: the
             * reversed axis read forwards from d - 1 - b to d - 1 - e */
            b = b < 0 ? b + d : b;
            e = e < 0 ? e + d : e;
            b = b < 0 ? 0 : b > d - 1 ? d - 1 : b;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            lower[a] = d - 1 - b, upper[a] = d - 1 - e, step[a] = -s;
            upper[a] = upper[a] < lower[a] ? lower[a] : upper[a];
            rev[nrev++] = a;
            continue;
        }
        b = b < 0 ? b + d : b;
        e = e < 0 ? e + d : e;
        b = b < 0 ? 0 : b > d ? d : b;
        e = e < b ? b : e > d ? d : e;
        lower[a] = b, upper[a] = e, step[a] = s;
    }
    if (nrev)
        x = nest_reverse(c->f, x, nrev, rev);
    c->out[0] = nest_slice(c->f, x, lower, upper, step);
    return NEST_OK;
}

/* Gather: a few indices known at import are slices joined along the axis (views the fusion
 * reads in place); others are numpy.take (nest_gather). */
#define GATHER_SLICES 16
int ox_op_gather(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    const ox_tensor *idx = ox_peek(c, 1);
    int rank = ox_rank(c, x);
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), rank, "axis");
    if (axis < 0)
        return NEST_ERR_ARG;
    int64_t d = ox_shape(c, x)[axis];
    if (idx && idx->etype != NEST_I64 && idx->etype != NEST_I32)
        return ox_err(c, NEST_ERR_TYPE, "indices must be int64 or int32");
    for (int64_t i = 0; idx && i < idx->count; i++) {
        int64_t k = ox_int_at(idx, i);
        if (k < -d || k >= d)
            return ox_err(c, NEST_ERR_ARG, "index %lld is out of range for extent %lld",
                          (long long)k, (long long)d);
    }
    int64_t n = idx ? ox_count(idx->rank, idx->shape) : 0;
    if (!idx || n > GATHER_SLICES) {
        /* indices known at run time, or many: numpy.take (an index out of range is clamped) */
        nest_value i = ox_in(c, 1);
        OX_CHECK(i);
        if (ox_type(c, i) != NEST_I64 && ox_type(c, i) != NEST_I32)
            return ox_err(c, NEST_ERR_TYPE, "indices must be int64 or int32");
        c->out[0] = nest_gather(c->f, x, i, axis);
        return NEST_OK;
    }
    if (rank - 1 + idx->rank > R)
        return ox_err(c, NEST_ERR_LIMIT, "the result's rank is above %d", R);
    nest_value parts[GATHER_SLICES];
    for (int64_t i = 0; i < n; i++) {
        int64_t k = ox_int_at(idx, i);
        k = k < 0 ? k + d : k;
        parts[i] = ox_slice_axis(c, x, axis, k, k + 1, 1);
    }
    int64_t shape[R];
    int k = 0;
    for (int i = 0; i < axis; i++)
        shape[k++] = ox_shape(c, x)[i];
    for (int i = 0; i < idx->rank; i++)
        shape[k++] = idx->shape[i];
    for (int i = axis + 1; i < rank; i++)
        shape[k++] = ox_shape(c, x)[i];
    nest_value joined;
    if (n == 0) {
        int64_t es[R];
        memcpy(es, ox_shape(c, x), (size_t)rank * sizeof *es);
        es[axis] = 0;
        joined = ox_full(c, ox_type(c, x), 0, rank, es);
    } else {
        joined = n == 1 ? parts[0] : nest_concat(c->f, (int)n, parts, axis);
    }
    c->out[0] = ox_reshape(c, joined, k, shape);
    return NEST_OK;
}

int ox_op_expand(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int64_t want[R], shape[R];
    int n = ox_known_ints(c, 1, want, R);
    if (n < 0)
        return NEST_ERR_ARG;
    int rank = n > ox_rank(c, x) ? n : ox_rank(c, x);
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - n), k = i - (rank - ox_rank(c, x));
        int64_t a = j >= 0 ? want[j] : 1, b = k >= 0 ? ox_shape(c, x)[k] : 1;
        if (a != b && a != 1 && b != 1)
            return ox_err(c, NEST_ERR_TYPE, "cannot expand dimension %lld to %lld",
                          (long long)b, (long long)a);
        shape[i] = a == 1 ? b : a;
    }
    c->out[0] = ox_bcast_to(c, x, rank, shape);
    return NEST_OK;
}

/* Tile: x broadcast to [r0, d0, r1, d1, ...], read as [r0 * d0, r1 * d1, ...]. */
int ox_op_tile(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
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
        big[2 * i + 1] = ox_shape(c, x)[i];
        axes[i] = 2 * i;
        if (mul_overflows(reps[i], ox_shape(c, x)[i], &shape[i]))
            return ox_err(c, NEST_ERR_LIMIT, "the result is too large");
    }
    nest_value b = nest_broadcast(c->f, x, 2 * rank, big, rank, axes);
    c->out[0] = ox_reshape(c, b, rank, shape);
    return NEST_OK;
}

/* The p values edge or reflect Pad puts before (or after) axis a of x (not empty): its first
 * (last) element repeated, or the p elements next to it read backwards. */
static nest_value pad_side(ox *c, nest_value x, int a, int64_t p, bool after, bool edge)
{
    int rank = ox_rank(c, x);
    int64_t d = ox_shape(c, x)[a], axis = a, shape[R];
    if (edge) {
        int64_t at = after ? d - 1 : 0;
        memcpy(shape, ox_shape(c, x), (size_t)rank * sizeof *shape);
        shape[a] = p;
        return ox_bcast_to(c, ox_slice_axis(c, x, a, at, at + 1, 1), rank, shape);
    }
    int64_t from = after ? d - 1 - p : 1;
    return nest_reverse(c->f, ox_slice_axis(c, x, a, from, from + p, 1), 1, &axis);
}

/* Pad: constant (values) is nest's pad; edge and reflect are joins per axis. */
int ox_op_pad(ox *c)
{
    nest_value x = ox_in(c, 0);
    OX_CHECK(x);
    int rank = ox_rank(c, x);
    int64_t pads[2 * R];
    int n;
    double value = 0;
    if (c->opset < 11) {
        n = ox_attr_ints(c, "pads", pads, 2 * R);
        value = ox_attr_float(c, "value", 0);
    } else {
        if (!ox_has(c, 1))
            return ox_err(c, NEST_ERR_ARG, "needs pads");
        if ((n = ox_known_ints(c, 1, pads, 2 * R)) < 0)
            return NEST_ERR_ARG;
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
    for (int a = 0; a < rank; a++) { /* negative pads crop */
        int64_t lo = pads[a], hi = pads[a + rank], d = ox_shape(c, x)[a];
        if (dim_is_sym(d) && lo == 0 && hi == 0)
            continue; /* a symbolic axis left alone */
        if (dim_is_sym(d))
            return ox_err(c, NEST_ERR_ARG, "pads of axis %d, which is symbolic", a);
        if ((lo < 0 ? -lo : 0) > (hi < 0 ? d + hi : d))
            return ox_err(c, NEST_ERR_ARG, "pads crop more than axis %d holds", a);
    }
    if (!reflect && !edge) {
        c->out[0] = nest_pad(c->f, x, ox_full(c, ox_type(c, x), value, 0, NULL), pads,
                             pads + rank, NULL);
        return NEST_OK;
    }
    for (int a = 0; a < rank; a++) {
        int64_t lo = pads[a], hi = pads[a + rank], d = ox_shape(c, x)[a];
        if (lo < 0 || hi < 0) {
            int64_t b = lo < 0 ? -lo : 0, e = hi < 0 ? d + hi : d;
            OX_CHECK(x = ox_slice_axis(c, x, a, b, e, 1));
            lo = lo < 0 ? 0 : lo, hi = hi < 0 ? 0 : hi;
            d = e - b;
        }
        if (lo == 0 && hi == 0)
            continue;
        if (d == 0)
            return ox_err(c, NEST_ERR_ARG, "axis %d is empty: nothing to %s", a, mode);
        if (reflect && (lo >= d || hi >= d))
            return ox_err(c, NEST_ERR_ARG, "reflect pads of %lld and %lld on axis %d of extent "
                          "%lld", (long long)lo, (long long)hi, a, (long long)d);
        nest_value parts[3];
        int np = 0;
        if (lo)
            parts[np++] = pad_side(c, x, a, lo, false, edge);
        parts[np++] = x;
        if (hi)
            parts[np++] = pad_side(c, x, a, hi, true, edge);
        OX_CHECK(x = nest_concat(c->f, np, parts, a));
    }
    c->out[0] = x;
    return NEST_OK;
}
