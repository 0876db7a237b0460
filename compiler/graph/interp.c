/*
 * interp.c - the reference interpreter: the oracle the compiled code is tested against.
 *
 * Deliberately simple and independent of the emitter. Every node the results need is evaluated
 * in index order (operands always come first) into a dense row-major buffer of its element
 * type, and freed after its last use. Floating arithmetic is done in double and rounded to the
 * element type, so f32 add, subtract, multiply, divide and sqrt are exactly rounded; sums and dot
 * products of floats accumulate in double. Integer arithmetic wraps (computed in uint64_t), and
 * where C would be undefined (overflow, x / 0, INT_MIN / -1, float to integer out of range) the
 * value is the one nest.h documents. Views (broadcast, reshape with an order, slice, concat)
 * and the column-major layouts are one strided walk over a multi-index.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- the strided walk ---- */

/* Visits every multi-index of a shape in row-major order, keeping the element offsets of two
 * arrays: off[0] in the array written (stride[0]) and off[1] in the array read (stride[1]).
 * A stride of 0 visits the same element again (broadcast, reduction). */
typedef struct walker {
    int rank;
    int64_t count; /* elements visited */
    int64_t dim[NEST_MAX_RANK];
    int64_t idx[NEST_MAX_RANK];
    int64_t stride[2][NEST_MAX_RANK];
    int64_t off[2];
} walker;

static void walk_start(walker *w, int rank, const int64_t *dim)
{
    memset(w, 0, sizeof *w);
    w->rank = rank;
    w->count = 1;
    for (int i = 0; i < rank; i++) {
        w->dim[i] = dim[i];
        w->count *= dim[i]; /* below 2^62: checked when the node was built */
    }
}

static void walk_next(walker *w)
{
    for (int i = w->rank - 1; i >= 0; i--) {
        w->off[0] += w->stride[0][i];
        w->off[1] += w->stride[1][i];
        if (++w->idx[i] < w->dim[i])
            return;
        w->off[0] -= w->stride[0][i] * w->dim[i];
        w->off[1] -= w->stride[1][i] * w->dim[i];
        w->idx[i] = 0;
    }
}

/* Copies every visited element of src to dst; size is the element size in bytes. */
static void walk_copy(walker *w, void *dst, const void *src, size_t size)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (int64_t k = 0; k < w->count; k++, walk_next(w)) {
        unsigned char *p = d + (size_t)w->off[0] * size;
        const unsigned char *q = s + (size_t)w->off[1] * size;
        switch (size) {
        case 1: *p = *q; break;
        case 4: memcpy(p, q, 4); break;
        default: memcpy(p, q, 8); break;
        }
    }
}

/* Strides of a dense array in elements: row-major (last axis 1) and column-major (first 1).
 * An empty shape gives some zero strides, which is harmless: nothing is visited. */
static void row_strides(int rank, const int64_t *shape, int64_t *s)
{
    int64_t c = 1;
    for (int i = rank - 1; i >= 0; i--) {
        s[i] = c;
        c *= shape[i];
    }
}

static void col_strides(int rank, const int64_t *shape, int64_t *s)
{
    int64_t c = 1;
    for (int i = 0; i < rank; i++) {
        s[i] = c;
        c *= shape[i];
    }
}

/* ---- elements ---- */

static double load_f(int t, const void *p, int64_t i)
{
    return t == NEST_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static void store_f(int t, void *p, int64_t i, double v)
{
    if (t == NEST_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

/* Integers and bool, widened to int64_t. */
static int64_t load_i(int t, const void *p, int64_t i)
{
    switch (t) {
    case NEST_I32: return ((const int32_t *)p)[i];
    case NEST_I64: return ((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

/* Two's complement wrapping without implementation-defined conversions. */
static int32_t wrap32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    return u <= INT32_MAX ? (int32_t)u : (int32_t)(u - 0x80000000u) + INT32_MIN;
}

static int64_t wrap64(uint64_t v)
{
    return v <= INT64_MAX ? (int64_t)v : (int64_t)(v - 0x8000000000000000u) + INT64_MIN;
}

/* Stores v modulo 2^bits of the type (bool: v != 0). */
static void store_i(int t, void *p, int64_t i, uint64_t v)
{
    switch (t) {
    case NEST_I32: ((int32_t *)p)[i] = wrap32(v); break;
    case NEST_I64: ((int64_t *)p)[i] = wrap64(v); break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

/* Float to integer: truncates toward zero, saturates, NaN gives 0. */
static int64_t float_to_int(double d, int t)
{
    if (d != d)
        return 0;
    if (t == NEST_I32) {
        if (d >= 0x1p31)
            return INT32_MAX;
        if (d <= -0x1p31 - 1.0)
            return INT32_MIN;
        return (int32_t)d;
    }
    if (d >= 0x1p63)
        return INT64_MAX;
    if (d < -0x1p63)
        return INT64_MIN;
    return (int64_t)d;
}

/* ---- element-wise ops ---- */

static double ew_float(ir_op op, double x, double y)
{
    switch (op) {
    case OP_ADD: return x + y;
    case OP_SUBTRACT: return x - y;
    case OP_MULTIPLY: return x * y;
    case OP_DIVIDE: return x / y;
    case OP_MAXIMUM: return x > y ? x : y;
    case OP_MINIMUM: return x < y ? x : y;
    case OP_POWER: return pow(x, y);
    case OP_NEGATIVE: return -x;
    case OP_ABS: return fabs(x);
    case OP_EXP: return exp(x);
    case OP_LOG: return log(x);
    case OP_SQRT: return sqrt(x);
    case OP_TANH: return tanh(x);
    case OP_SIN: return sin(x);
    case OP_COS: return cos(x);
    case OP_TAN: return tan(x);
    case OP_ASIN: return asin(x);
    case OP_ACOS: return acos(x);
    case OP_ATAN: return atan(x);
    case OP_SINH: return sinh(x);
    case OP_COSH: return cosh(x);
    case OP_FLOOR: return floor(x);
    case OP_CEILING: return ceil(x);
    case OP_ERF: return erf(x);
    case OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;
    case OP_RELU: return x < 0 ? 0 : x;
    case OP_SIGMOID: return 1 / (1 + exp(-x));
    default: assert(!"not a floating element-wise op"); return 0;
    }
}

/* a^b wrapping; for b < 0 the truncated 1 / a^-b: 1 for a = 1, +-1 for a = -1, 0 otherwise
 * (a = 0 divides by zero, which gives 0). */
static uint64_t ipow(int64_t a, int64_t b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? (b % 2 != 0 ? UINT64_MAX : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    while (b > 0) {
        if (b & 1)
            r *= x;
        x *= x;
        b >>= 1;
    }
    return r;
}

/* Integer ops on values widened to int64_t; the caller wraps the result to the type. For i32,
 * INT32_MIN / -1 is 2^31 here, which wraps to INT32_MIN. */
static uint64_t ew_int(ir_op op, int64_t x, int64_t y)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (op) {
    case OP_ADD: return ux + uy;
    case OP_SUBTRACT: return ux - uy;
    case OP_MULTIPLY: return ux * uy;
    case OP_DIVIDE:
        if (y == 0)
            return 0;
        if (y == -1)
            return 0 - ux;
        return (uint64_t)(x / y);
    case OP_MAXIMUM: return x > y ? ux : uy;
    case OP_MINIMUM: return x < y ? ux : uy;
    case OP_POWER: return ipow(x, y);
    case OP_NEGATIVE: return 0 - ux;
    case OP_ABS: return x < 0 ? 0 - ux : ux;
    case OP_NOT: return x == 0;
    case OP_AND: return x != 0 && y != 0;
    case OP_OR: return x != 0 || y != 0;
    default: assert(!"not an integer element-wise op"); return 0;
    }
}

/* A comparison from the operands' order: lt, gt, eq (all false for a NaN). */
static bool compare_by(ir_op op, bool lt, bool gt, bool eq)
{
    switch (op) {
    case OP_LESS: return lt;
    case OP_GREATER: return gt;
    case OP_LESS_EQ: return lt || eq;
    case OP_GREATER_EQ: return gt || eq;
    case OP_NOT_EQUAL: return !eq;
    default: return eq;
    }
}

static bool compare(ir_op op, double x, double y) { return compare_by(op, x < y, x > y, x == y); }

static bool compare_i(ir_op op, int64_t x, int64_t y)
{
    return compare_by(op, x < y, x > y, x == y);
}

/* ---- evaluating one node ---- */

typedef struct interp {
    nest_function *f;
    void *const *args;
    void *const *state; /* the module's state tensors */
    void **val; /* the buffer of each node, or NULL */
} interp;

static const ir_node *operand(const interp *in, const ir_node *n, int i)
{
    return &in->f->nodes[ir_resolve(in->f, n->in[i])];
}

static const void *operand_val(const interp *in, const ir_node *n, int i)
{
    return in->val[ir_resolve(in->f, n->in[i])];
}

static void eval_param(const interp *in, const ir_node *n, void *out)
{
    const void *arg = in->args[n->a.param.index];
    size_t size = nest_type_size((nest_type)n->etype);
    int64_t count = ir_count(n);
    if (count == 0)
        return;
    if (n->a.param.layout == NEST_COL_MAJOR) {
        walker w;
        walk_start(&w, n->rank, n->shape);
        row_strides(n->rank, n->shape, w.stride[0]);
        col_strides(n->rank, n->shape, w.stride[1]);
        walk_copy(&w, out, arg, size);
    } else {
        memcpy(out, arg, (size_t)count * size);
    }
    if (n->etype == NEST_BOOL) {
        uint8_t *b = out;
        for (int64_t i = 0; i < count; i++)
            b[i] = b[i] != 0;
    }
}

static void eval_constant(const ir_node *n, void *out)
{
    size_t size = nest_type_size((nest_type)n->etype);
    int64_t count = ir_count(n);
    if (n->a.constant.count == count) {
        if (count > 0)
            memcpy(out, n->a.constant.data, (size_t)count * size);
        return;
    }
    for (int64_t i = 0; i < count; i++)
        memcpy((unsigned char *)out + (size_t)i * size, n->a.constant.data, size);
}

static void eval_elementwise(const interp *in, const ir_node *n, void *out)
{
    ir_op op = (ir_op)n->op;
    int64_t count = ir_count(n);
    const ir_node *a = operand(in, n, 0);
    const void *x = operand_val(in, n, 0);
    const void *y = n->nin > 1 ? operand_val(in, n, 1) : x;
    int t = a->etype;
    if (ir_is_float(t)) {
        for (int64_t i = 0; i < count; i++)
            store_f(t, out, i, ew_float(op, load_f(t, x, i), load_f(t, y, i)));
    } else {
        for (int64_t i = 0; i < count; i++)
            store_i(t, out, i, ew_int(op, load_i(t, x, i), load_i(t, y, i)));
    }
}

static void eval_compare(const interp *in, const ir_node *n, void *out)
{
    ir_op op = (ir_op)n->op;
    int64_t count = ir_count(n);
    int t = operand(in, n, 0)->etype;
    const void *x = operand_val(in, n, 0), *y = operand_val(in, n, 1);
    uint8_t *r = out;
    for (int64_t i = 0; i < count; i++)
        r[i] = ir_is_float(t) ? compare(op, load_f(t, x, i), load_f(t, y, i))
                              : compare_i(op, load_i(t, x, i), load_i(t, y, i));
}

static void eval_select(const interp *in, const ir_node *n, void *out)
{
    int64_t count = ir_count(n);
    size_t size = nest_type_size((nest_type)n->etype);
    const uint8_t *c = operand_val(in, n, 0);
    const unsigned char *a = operand_val(in, n, 1), *b = operand_val(in, n, 2);
    for (int64_t i = 0; i < count; i++)
        memcpy((unsigned char *)out + (size_t)i * size, (c[i] ? a : b) + (size_t)i * size, size);
}

static void eval_convert(const interp *in, const ir_node *n, void *out)
{
    int64_t count = ir_count(n);
    int from = operand(in, n, 0)->etype, to = n->etype;
    const void *x = operand_val(in, n, 0);
    for (int64_t i = 0; i < count; i++) {
        if (ir_is_float(from)) {
            double v = load_f(from, x, i);
            if (ir_is_float(to))
                store_f(to, out, i, v);
            else if (to == NEST_BOOL)
                ((uint8_t *)out)[i] = v != 0;
            else
                store_i(to, out, i, (uint64_t)float_to_int(v, to));
        } else {
            int64_t v = load_i(from, x, i);
            if (to == NEST_F32)
                ((float *)out)[i] = (float)v; /* one rounding, as a C cast from the integer */
            else if (to == NEST_F64)
                ((double *)out)[i] = (double)v;
            else
                store_i(to, out, i, (uint64_t)v); /* integer to integer wraps */
        }
    }
}

/* Returns false when out of memory (the float accumulator). */
static bool eval_dot(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0), *b = operand(in, n, 1);
    const void *x = operand_val(in, n, 0), *y = operand_val(in, n, 1);
    int t = n->etype;
    bool fl = ir_is_float(t);
    if (a->rank == 0 || b->rank == 0) { /* a scalar scales the other operand */
        int64_t count = ir_count(n);
        for (int64_t i = 0; i < count; i++) {
            int64_t ia = a->rank == 0 ? 0 : i, ib = b->rank == 0 ? 0 : i;
            if (fl)
                store_f(t, out, i, load_f(t, x, ia) * load_f(t, y, ib));
            else
                store_i(t, out, i, (uint64_t)load_i(t, x, ia) * (uint64_t)load_i(t, y, ib));
        }
        return true;
    }
    /* a is [M, K] and b is [K, N] once their outer axes are merged */
    int64_t M = 1, K = b->shape[0], N = 1;
    for (int i = 0; i < a->rank - 1; i++)
        M *= a->shape[i];
    for (int i = 1; i < b->rank; i++)
        N *= b->shape[i];
    if (M == 0 || N == 0)
        return true;
    double *facc = fl ? malloc((size_t)N * sizeof *facc) : NULL;
    uint64_t *iacc = fl ? NULL : malloc((size_t)N * sizeof *iacc);
    if (!facc && !iacc)
        return false;
    for (int64_t m = 0; m < M; m++) {
        if (fl) {
            for (int64_t j = 0; j < N; j++)
                facc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                double v = load_f(t, x, m * K + k);
                for (int64_t j = 0; j < N; j++)
                    facc[j] += v * load_f(t, y, k * N + j);
            }
            for (int64_t j = 0; j < N; j++)
                store_f(t, out, m * N + j, facc[j]);
        } else {
            for (int64_t j = 0; j < N; j++)
                iacc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                uint64_t v = (uint64_t)load_i(t, x, m * K + k);
                for (int64_t j = 0; j < N; j++)
                    iacc[j] += v * (uint64_t)load_i(t, y, k * N + j);
            }
            for (int64_t j = 0; j < N; j++)
                store_i(t, out, m * N + j, iacc[j]);
        }
    }
    free(facc);
    free(iacc);
    return true;
}

static void eval_broadcast(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0);
    int64_t as[NEST_MAX_RANK];
    row_strides(a->rank, a->shape, as);
    walker w;
    walk_start(&w, n->rank, n->shape);
    row_strides(n->rank, n->shape, w.stride[0]);
    for (int i = 0, j = 0; i < n->rank; i++)
        w.stride[1][i] = (n->a.axes >> i & 1) ? 0 : as[j++];
    walk_copy(&w, out, operand_val(in, n, 0), nest_type_size((nest_type)n->etype));
}

/* Reads a in the axis order and writes the elements in sequence. */
static void eval_reshape(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0);
    int64_t as[NEST_MAX_RANK], dims[NEST_MAX_RANK];
    walker w;
    row_strides(a->rank, a->shape, as);
    for (int k = 0; k < a->rank; k++)
        dims[k] = a->shape[n->a.order[k]];
    walk_start(&w, a->rank, dims);
    row_strides(a->rank, dims, w.stride[0]);
    for (int k = 0; k < a->rank; k++)
        w.stride[1][k] = as[n->a.order[k]];
    walk_copy(&w, out, operand_val(in, n, 0), nest_type_size((nest_type)n->etype));
}

static void eval_slice(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0);
    int64_t as[NEST_MAX_RANK];
    row_strides(a->rank, a->shape, as);
    walker w;
    walk_start(&w, n->rank, n->shape);
    row_strides(n->rank, n->shape, w.stride[0]);
    for (int i = 0; i < n->rank; i++) {
        /* an axis of at most one element never takes its stride, which may be 2^63 - 1 */
        w.stride[1][i] = n->shape[i] <= 1 ? 0 : as[i] * n->a.slice.step[i];
        w.off[1] += as[i] * n->a.slice.lower[i];
    }
    if (w.count > 0) /* an empty slice may start at the end of a */
        walk_copy(&w, out, operand_val(in, n, 0), nest_type_size((nest_type)n->etype));
}

static void eval_concat(const interp *in, const ir_node *n, void *out)
{
    int64_t os[NEST_MAX_RANK], start = 0;
    row_strides(n->rank, n->shape, os);
    for (int j = 0; j < n->nin; j++) {
        const ir_node *a = operand(in, n, j);
        walker w;
        walk_start(&w, a->rank, a->shape);
        memcpy(w.stride[0], os, (size_t)n->rank * sizeof *os);
        row_strides(a->rank, a->shape, w.stride[1]);
        w.off[0] = start * os[n->a.axis];
        walk_copy(&w, out, operand_val(in, n, j), nest_type_size((nest_type)n->etype));
        start += a->shape[n->a.axis];
    }
}

/* Returns false when out of memory (the float accumulator of sum). */
static bool eval_reduce(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0);
    const void *x = operand_val(in, n, 0);
    int t = n->etype;
    ir_op op = (ir_op)n->op;
    int64_t count = ir_count(n), os[NEST_MAX_RANK];
    walker w;
    walk_start(&w, a->rank, a->shape);
    row_strides(a->rank, a->shape, w.stride[1]);
    row_strides(n->rank, n->shape, os);
    for (int i = 0, j = 0; i < a->rank; i++)
        w.stride[0][i] = (n->a.axes >> i & 1) ? 0 : os[j++];

    if (ir_is_float(t)) {
        /* sum and product accumulate in double; max and min are exact in the element type */
        double *acc = malloc((size_t)(count ? count : 1) * sizeof *acc);
        if (!acc)
            return false;
        double init = op == OP_SUM ? 0 : op == OP_PRODUCT ? 1 : op == OP_MAX ? -INFINITY : INFINITY;
        for (int64_t i = 0; i < count; i++)
            acc[i] = init;
        for (int64_t k = 0; k < w.count; k++, walk_next(&w)) {
            double v = load_f(t, x, w.off[1]), *r = &acc[w.off[0]];
            if (op == OP_SUM)
                *r += v;
            else if (op == OP_PRODUCT)
                *r *= v;
            else if (op == OP_MAX)
                *r = v > *r ? v : *r;
            else
                *r = v < *r ? v : *r;
        }
        for (int64_t i = 0; i < count; i++)
            store_f(t, out, i, acc[i]);
        free(acc);
        return true;
    }
    int64_t lo = t == NEST_I32 ? INT32_MIN : INT64_MIN, hi = t == NEST_I32 ? INT32_MAX : INT64_MAX;
    uint64_t init = op == OP_SUM       ? 0
                    : op == OP_PRODUCT ? 1
                    : op == OP_MAX     ? (uint64_t)lo
                                       : (uint64_t)hi;
    for (int64_t i = 0; i < count; i++)
        store_i(t, out, i, init);
    for (int64_t k = 0; k < w.count; k++, walk_next(&w)) {
        int64_t v = load_i(t, x, w.off[1]), r = load_i(t, out, w.off[0]);
        if (op == OP_SUM)
            store_i(t, out, w.off[0], (uint64_t)r + (uint64_t)v);
        else if (op == OP_PRODUCT)
            store_i(t, out, w.off[0], (uint64_t)r * (uint64_t)v);
        else if (op == OP_MAX ? v > r : v < r)
            store_i(t, out, w.off[0], (uint64_t)v);
    }
    return true;
}

/* ---- the op set of real models ---- */

/* argmax and argmin along one axis: the first index of the best element, a NaN beating every
 * number (so the first NaN, if any). */
static void eval_argreduce(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0);
    const void *x = operand_val(in, n, 0);
    int t = a->etype, axis = n->a.axis;
    bool max = n->op == OP_ARGMAX;
    int64_t as[NEST_MAX_RANK] = {0}, len = a->shape[axis], step;
    row_strides(a->rank, a->shape, as);
    step = as[axis];
    /* the outer positions: a walk over a's shape with the axis at extent 1 */
    int64_t dims[NEST_MAX_RANK];
    memcpy(dims, a->shape, (size_t)a->rank * sizeof *dims);
    dims[axis] = 1;
    walker w;
    walk_start(&w, a->rank, dims);
    memcpy(w.stride[1], as, (size_t)a->rank * sizeof *as);
    for (int64_t k = 0; k < w.count; k++, walk_next(&w)) {
        int64_t best = 0;
        for (int64_t j = 1; j < len; j++) {
            int64_t pb = w.off[1] + best * step, pj = w.off[1] + j * step;
            bool better;
            if (ir_is_float(t)) {
                double v = load_f(t, x, pj), b = load_f(t, x, pb);
                better = b == b && (v != v || (max ? v > b : v < b));
            } else {
                int64_t v = load_i(t, x, pj), b = load_i(t, x, pb);
                better = max ? v > b : v < b;
            }
            if (better)
                best = j;
        }
        ((int64_t *)out)[k] = best;
    }
}

/* Advances a row-major multi-index over dims; false after the last one. */
static bool next_index(int rank, const int64_t *dims, int64_t *idx)
{
    for (int k = rank - 1; k >= 0; k--) {
        if (++idx[k] < dims[k])
            return true;
        idx[k] = 0;
    }
    return false;
}

static void fill_value(void *out, int64_t count, const void *v, size_t size)
{
    for (int64_t i = 0; i < count; i++)
        memcpy((unsigned char *)out + (size_t)i * size, v, size);
}

/* pad: the value everywhere, then each element of x where it lands: x[j] goes to
 * below + j * (interior + 1) along each axis, if that is inside the output. */
static void eval_pad(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0);
    const unsigned char *x = operand_val(in, n, 0);
    size_t size = nest_type_size((nest_type)n->etype);
    int64_t count = ir_count(n), os[NEST_MAX_RANK], idx[NEST_MAX_RANK] = {0};
    fill_value(out, count, operand_val(in, n, 1), size);
    if (ir_count(a) == 0 || count == 0)
        return;
    row_strides(n->rank, n->shape, os);
    int64_t i = 0;
    do {
        int64_t off = 0;
        bool inside = true;
        for (int k = 0; k < a->rank && inside; k++) {
            int64_t p = n->a.pad.below[k] + idx[k] * (n->a.pad.interior[k] + 1);
            inside = p >= 0 && p < n->shape[k];
            off += p * os[k];
        }
        if (inside)
            memcpy((unsigned char *)out + (size_t)off * size, x + (size_t)i * size, size);
        i++;
    } while (next_index(a->rank, a->shape, idx));
}

static void eval_reverse(const interp *in, const ir_node *n, void *out)
{
    int64_t as[NEST_MAX_RANK];
    row_strides(n->rank, n->shape, as);
    walker w;
    walk_start(&w, n->rank, n->shape);
    if (w.count == 0)
        return;
    row_strides(n->rank, n->shape, w.stride[0]);
    for (int k = 0; k < n->rank; k++) {
        bool rev = n->a.axes >> k & 1;
        w.stride[1][k] = rev ? -as[k] : as[k];
        if (rev)
            w.off[1] += (n->shape[k] - 1) * as[k];
    }
    walk_copy(&w, out, operand_val(in, n, 0), nest_type_size((nest_type)n->etype));
}

/* replace_slice: x, then y written over the box lower + j * stride. */
static void eval_replace_slice(const interp *in, const ir_node *n, void *out)
{
    const ir_node *y = operand(in, n, 1);
    size_t size = nest_type_size((nest_type)n->etype);
    int64_t count = ir_count(n);
    if (count > 0)
        memcpy(out, operand_val(in, n, 0), (size_t)count * size);
    walker w;
    walk_start(&w, y->rank, y->shape);
    if (w.count == 0)
        return;
    int64_t os[NEST_MAX_RANK];
    row_strides(n->rank, n->shape, os);
    row_strides(y->rank, y->shape, w.stride[1]);
    for (int k = 0; k < n->rank; k++) {
        w.stride[0][k] = os[k] * n->a.slice.step[k];
        w.off[0] += os[k] * n->a.slice.lower[k];
    }
    walk_copy(&w, out, operand_val(in, n, 1), size);
}

/* one_hot: 1 where the operand's element equals the index along the new axis, else 0. */
static void eval_one_hot(const interp *in, const ir_node *n, void *out)
{
    const void *x = operand_val(in, n, 0);
    int t = n->etype, axis = n->a.axis;
    int64_t count = ir_count(n), idx[NEST_MAX_RANK] = {0};
    if (count == 0)
        return;
    int64_t xs[NEST_MAX_RANK + 1];
    row_strides(n->rank - 1, operand(in, n, 0)->shape, xs);
    int64_t i = 0;
    do {
        int64_t xo = 0;
        for (int k = 0, j = 0; k < n->rank; k++)
            if (k != axis)
                xo += idx[k] * xs[j++];
        bool hot = ir_is_float(t) ? load_f(t, x, xo) == (double)idx[axis]
                                  : load_i(t, x, xo) == idx[axis];
        if (ir_is_float(t))
            store_f(t, out, i, hot);
        else
            store_i(t, out, i, hot);
        i++;
    } while (next_index(n->rank, n->shape, idx));
}

/* gather (numpy.take): along `axis`, the index i takes element i, a negative one counting from
 * the end, clamped to [0, n). */
static int64_t take(int64_t i, int64_t n)
{
    if (i < 0)
        i += n;
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* Where element idx of gather(a, indices, axis)'s space lies in a (row-major strides as, and the
 * indices' is). */
static int64_t taken_offset(const ir_node *a, const ir_node *ix, const void *iv, int axis,
                            const int64_t *idx, const int64_t *as, const int64_t *is)
{
    int64_t io = 0, xo = 0;
    for (int k = 0; k < ix->rank; k++)
        io += idx[axis + k] * is[k];
    for (int k = 0; k < a->rank; k++) {
        int64_t j = k < axis ? idx[k] : k > axis ? idx[k + ix->rank - 1]
                                                 : take(load_i(ix->etype, iv, io), a->shape[axis]);
        xo += j * as[k];
    }
    return xo;
}

/* gather (numpy.take) copies element taken_offset of the operand to each element of its result;
 * scatter_add (numpy.add.at) copies the operand, then adds each update there in turn (floats in
 * their type, integers wrapping). Both run over gather's result space, the updates' shape. */
static void eval_take(const interp *in, const ir_node *n, void *out)
{
    bool scatter = n->op == OP_SCATTER_ADD;
    const ir_node *a = operand(in, n, 0), *ix = operand(in, n, 1);
    const ir_node *sp = scatter ? operand(in, n, 2) : n;
    const unsigned char *x = operand_val(in, n, 0);
    const void *iv = operand_val(in, n, 1), *uv = scatter ? operand_val(in, n, 2) : NULL;
    int t = n->etype;
    size_t size = nest_type_size((nest_type)t);
    int64_t idx[NEST_MAX_RANK] = {0}, as[NEST_MAX_RANK], is[NEST_MAX_RANK];
    if (scatter && ir_count(n) > 0)
        memcpy(out, x, (size_t)ir_count(n) * size);
    if (ir_count(sp) == 0)
        return;
    row_strides(a->rank, a->shape, as);
    row_strides(ix->rank, ix->shape, is);
    int64_t i = 0;
    do {
        int64_t xo = taken_offset(a, ix, iv, n->a.axis, idx, as, is);
        if (!scatter)
            memcpy((unsigned char *)out + (size_t)i * size, x + (size_t)xo * size, size);
        else if (ir_is_float(t))
            store_f(t, out, xo, load_f(t, out, xo) + load_f(t, uv, i));
        else
            store_i(t, out, xo, (uint64_t)load_i(t, out, xo) + (uint64_t)load_i(t, uv, i));
        i++;
    } while (next_index(sp->rank, sp->shape, idx));
}

/* softmax over the axes in mask: per group (the elements that differ only along those axes),
 * exp(x - max) / sum of exp(x - max), in double. Returns false when out of memory. */
static bool eval_softmax(const interp *in, const ir_node *n, void *out)
{
    const void *x = operand_val(in, n, 0);
    int t = n->etype, r = n->rank;
    int64_t count = ir_count(n), st[NEST_MAX_RANK], gdims[NEST_MAX_RANK], sdims[NEST_MAX_RANK];
    if (count == 0)
        return true;
    row_strides(r, n->shape, st);
    /* the groups: the kept axes (normalized ones at extent 1); within a group, the others */
    for (int k = 0; k < r; k++) {
        bool norm = n->a.axes >> k & 1;
        gdims[k] = norm ? 1 : n->shape[k];
        sdims[k] = norm ? n->shape[k] : 1;
    }
    int64_t glen = 1;
    for (int k = 0; k < r; k++)
        glen *= sdims[k];
    double *e = malloc((size_t)glen * sizeof *e);
    int64_t *offs = malloc((size_t)glen * sizeof *offs);
    if (!e || !offs) {
        free(e);
        free(offs);
        return false;
    }
    int64_t g[NEST_MAX_RANK] = {0};
    do {
        int64_t base = 0, j = 0, s[NEST_MAX_RANK] = {0};
        for (int k = 0; k < r; k++)
            base += g[k] * st[k];
        do {
            int64_t o = base;
            for (int k = 0; k < r; k++)
                o += s[k] * st[k];
            offs[j++] = o;
        } while (next_index(r, sdims, s));
        double m = -INFINITY, sum = 0;
        for (int64_t i = 0; i < glen; i++) {
            double v = load_f(t, x, offs[i]);
            m = v > m ? v : m;
        }
        for (int64_t i = 0; i < glen; i++)
            sum += e[i] = exp(load_f(t, x, offs[i]) - m);
        for (int64_t i = 0; i < glen; i++)
            store_f(t, out, offs[i], e[i] / sum);
    } while (next_index(r, gdims, g));
    free(e);
    free(offs);
    return true;
}

/* batch_dot: per element of the result, the sum over k of a[.., i, k] * b[.., k, j], each batch
 * index taken modulo the operand's extent (an extent of 1 broadcasts). */
static void eval_batch_dot(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0), *b = operand(in, n, 1);
    const void *x = operand_val(in, n, 0), *y = operand_val(in, n, 1);
    int t = n->etype;
    int64_t count = ir_count(n), as[NEST_MAX_RANK], bs[NEST_MAX_RANK], idx[NEST_MAX_RANK] = {0};
    if (count == 0)
        return;
    row_strides(a->rank, a->shape, as);
    row_strides(b->rank, b->shape, bs);
    int ba = a->rank >= 2 ? a->rank - 2 : 0, bb = b->rank >= 2 ? b->rank - 2 : 0;
    int nb = n->rank - (a->rank >= 2) - (b->rank >= 2);
    int64_t kn = a->shape[a->rank - 1];
    int64_t i = 0;
    do {
        int64_t ao = 0, bo = 0;
        for (int k = 0; k < nb; k++) {
            int ia = k - (nb - ba), ib = k - (nb - bb);
            if (ia >= 0 && a->shape[ia] > 1)
                ao += idx[k] * as[ia];
            if (ib >= 0 && b->shape[ib] > 1)
                bo += idx[k] * bs[ib];
        }
        int p = nb;
        if (a->rank >= 2)
            ao += idx[p++] * as[a->rank - 2];
        if (b->rank >= 2)
            bo += idx[p++] * bs[b->rank - 1];
        int64_t ak = as[a->rank - 1], bk = bs[b->rank >= 2 ? b->rank - 2 : 0];
        if (ir_is_float(t)) {
            double acc = 0;
            for (int64_t k = 0; k < kn; k++)
                acc += load_f(t, x, ao + k * ak) * load_f(t, y, bo + k * bk);
            store_f(t, out, i, acc);
        } else {
            uint64_t acc = 0;
            for (int64_t k = 0; k < kn; k++)
                acc += (uint64_t)load_i(t, x, ao + k * ak) * (uint64_t)load_i(t, y, bo + k * bk);
            store_i(t, out, i, acc);
        }
        i++;
    } while (next_index(n->rank, n->shape, idx));
}

/* topk: whether element a comes before element b (values va, vb; indices ia < ib or not):
 * the better value first (a NaN beyond every number), ties in index order. */
static bool topk_before(bool fl, bool largest, double fa, double fb, int64_t xa, int64_t xb,
                        int64_t ia, int64_t ib)
{
    bool better, worse;
    if (fl) {
        bool na = fa != fa, nb = fb != fb;
        if (na || nb) {
            better = largest ? na && !nb : !na && nb;
            worse = largest ? nb && !na : !nb && na;
        } else {
            better = largest ? fa > fb : fa < fb;
            worse = largest ? fb > fa : fb < fa;
        }
    } else {
        better = largest ? xa > xb : xa < xb;
        worse = largest ? xb > xa : xb < xa;
    }
    return better || (!worse && ia < ib);
}

/* Each row along the axis sorted by a stable merge sort of its indices; the first k kept.
 * Returns false when out of memory. */
static bool eval_topk(const interp *in, const ir_node *n, void *out)
{
    const ir_node *a = operand(in, n, 0);
    const void *x = operand_val(in, n, 0);
    int t = a->etype, axis = n->a.topk.axis;
    bool fl = ir_is_float(t), largest = n->a.topk.largest;
    int64_t len = a->shape[axis], k = n->a.topk.k, as[NEST_MAX_RANK], os[NEST_MAX_RANK];
    int64_t dims[NEST_MAX_RANK], idx[NEST_MAX_RANK] = {0};
    if (ir_count(n) == 0)
        return true;
    row_strides(a->rank, a->shape, as);
    row_strides(n->rank, n->shape, os);
    memcpy(dims, a->shape, (size_t)a->rank * sizeof *dims);
    dims[axis] = 1;
    int64_t *ord = malloc((size_t)(2 * len + 1) * sizeof *ord);
    double *fv = malloc((size_t)(len + 1) * sizeof *fv);
    int64_t *iv = malloc((size_t)(len + 1) * sizeof *iv);
    if (!ord || !fv || !iv) {
        free(ord);
        free(fv);
        free(iv);
        return false;
    }
    int64_t *tmp = ord + len;
    do {
        int64_t base = 0, obase = 0;
        for (int d = 0; d < a->rank; d++) {
            base += idx[d] * as[d];
            obase += idx[d] * os[d];
        }
        for (int64_t j = 0; j < len; j++) {
            ord[j] = j;
            if (fl)
                fv[j] = load_f(t, x, base + j * as[axis]);
            else
                iv[j] = load_i(t, x, base + j * as[axis]);
        }
        for (int64_t w = 1; w < len; w *= 2) {
            for (int64_t lo = 0; lo < len; lo += 2 * w) {
                int64_t mid = lo + w < len ? lo + w : len, hi = lo + 2 * w < len ? lo + 2 * w : len;
                int64_t p = lo, q = mid, o = lo;
                while (p < mid && q < hi) {
                    int64_t u = ord[p], v = ord[q];
                    bool first = topk_before(fl, largest, fl ? fv[u] : 0, fl ? fv[v] : 0,
                                             fl ? 0 : iv[u], fl ? 0 : iv[v], u, v);
                    tmp[o++] = first ? ord[p++] : ord[q++];
                }
                while (p < mid)
                    tmp[o++] = ord[p++];
                while (q < hi)
                    tmp[o++] = ord[q++];
            }
            memcpy(ord, tmp, (size_t)len * sizeof *ord);
        }
        for (int64_t j = 0; j < k; j++) {
            int64_t o = obase + j * os[axis];
            if (n->a.topk.which)
                ((int64_t *)out)[o] = ord[j];
            else if (fl)
                store_f(t, out, o, fv[ord[j]]);
            else
                store_i(t, out, o, (uint64_t)iv[ord[j]]);
        }
    } while (next_index(a->rank, dims, idx));
    free(ord);
    free(fv);
    free(iv);
    return true;
}

/* Evaluates node i into out (sized for it). Returns false when out of memory. */
static bool eval_node(const interp *in, const ir_node *n, void *out)
{
    switch (ir_kind_of(n)) {
    case K_PARAM: eval_param(in, n, out); return true;
    case K_CONST: eval_constant(n, out); return true;
    case K_STATE:
        if (ir_count(n) > 0)
            memcpy(out, in->state[n->a.state], (size_t)ir_count(n) * nest_type_size((nest_type)n->etype));
        return true;
    case K_EW: eval_elementwise(in, n, out); return true;
    case K_CMP: eval_compare(in, n, out); return true;
    case K_SELECT: eval_select(in, n, out); return true;
    case K_CONVERT: eval_convert(in, n, out); return true;
    case K_DOT: return eval_dot(in, n, out);
    case K_BROADCAST: eval_broadcast(in, n, out); return true;
    case K_RESHAPE: eval_reshape(in, n, out); return true;
    case K_SLICE: eval_slice(in, n, out); return true;
    case K_CONCAT: eval_concat(in, n, out); return true;
    case K_REDUCE: return eval_reduce(in, n, out);
    case K_CONV:
    case K_POOL:
        interp_window(in->f, n, operand_val(in, n, 0), n->nin > 1 ? operand_val(in, n, 1) : NULL,
                      out);
        return true;
    case K_ARGREDUCE: eval_argreduce(in, n, out); return true;
    case K_PAD: eval_pad(in, n, out); return true;
    case K_REVERSE: eval_reverse(in, n, out); return true;
    case K_REPLACE_SLICE: eval_replace_slice(in, n, out); return true;
    case K_ONE_HOT: eval_one_hot(in, n, out); return true;
    case K_GATHER:
    case K_SCATTER_ADD: eval_take(in, n, out); return true;
    case K_SOFTMAX: return eval_softmax(in, n, out);
    case K_BATCH_DOT: eval_batch_dot(in, n, out); return true;
    case K_TOPK: return eval_topk(in, n, out);
    case K_TUPLE:
    case K_GET: break; /* never needed: operands and results are resolved through them */
    }
    assert(!"a tuple or get node was evaluated");
    return true;
}

/* Writes a node's row-major buffer to a result array in its layout. */
static void write_result(const ir_node *n, const void *src, void *dst, int layout)
{
    size_t size = nest_type_size((nest_type)n->etype);
    int64_t count = ir_count(n);
    if (count == 0)
        return;
    if (layout == NEST_COL_MAJOR) {
        walker w;
        walk_start(&w, n->rank, n->shape);
        col_strides(n->rank, n->shape, w.stride[0]);
        row_strides(n->rank, n->shape, w.stride[1]);
        walk_copy(&w, dst, src, size);
    } else {
        memcpy(dst, src, (size_t)count * size);
    }
}

int interp_run(nest_function *f, void *const *args, void *const *results, void *const *state)
{
    int32_t nn = f->nnodes;
    interp in = {f, args, state, calloc((size_t)nn + 1, sizeof(void *))};
    /* last[i]: the last node reading node i (nn for results), or -1 when i is not needed */
    int32_t *last = malloc(((size_t)nn + 1) * sizeof *last);
    int status = NEST_OK;
    if (!in.val || !last) {
        status = ir_error(f, NEST_ERR_NOMEM, "evaluate %s: out of memory", f->name);
        goto out;
    }
    for (int32_t i = 0; i < nn; i++)
        last[i] = -1;
    for (int32_t r = 0; r < f->nresults; r++)
        last[f->results[r]] = nn;
    for (int32_t a = 0; a < f->nassigns; a++)
        last[f->assigns[a].node] = nn;
    for (int32_t i = nn - 1; i >= 0; i--) { /* consumers come after their operands */
        const ir_node *n = &f->nodes[i];
        if (last[i] < 0 || n->op == OP_TUPLE || n->op == OP_GET)
            continue;
        for (int j = 0; j < n->nin; j++) {
            int32_t o = ir_resolve(f, n->in[j]);
            if (last[o] < 0)
                last[o] = i;
        }
    }

    for (int32_t i = 0; i < nn; i++) {
        const ir_node *n = &f->nodes[i];
        if (last[i] < 0 || n->op == OP_TUPLE || n->op == OP_GET)
            continue;
        size_t bytes = (size_t)ir_count(n) * nest_type_size((nest_type)n->etype);
        in.val[i] = malloc(bytes ? bytes : 1);
        if (!in.val[i] || !eval_node(&in, n, in.val[i])) {
            status = ir_error(f, NEST_ERR_NOMEM,
                              "evaluate %s: out of memory for node %d (%s, %zu bytes)", f->name,
                              i, ir_ops[n->op].name, bytes);
            goto out;
        }
        for (int j = 0; j < n->nin; j++) {
            int32_t o = ir_resolve(f, n->in[j]);
            if (last[o] == i) {
                free(in.val[o]);
                in.val[o] = NULL;
            }
        }
    }

    for (int32_t r = 0; r < f->nresults; r++) {
        int32_t v = f->results[r];
        write_result(&f->nodes[v], in.val[v], results[r], f->result_layout[r]);
    }
    /* the state takes its new values last: every read above saw the entry values */
    for (int32_t a = 0; a < f->nassigns; a++) {
        const ir_assign *as = &f->assigns[a];
        write_result(&f->nodes[as->node], in.val[as->node], state[as->state], NEST_ROW_MAJOR);
    }

out:
    if (in.val)
        for (int32_t i = 0; i < nn; i++)
            free(in.val[i]);
    free(in.val);
    free(last);
    return status;
}
