/*
 * test_grad.c - reverse-mode gradients (compiler/graph/grad.c) against central finite
 * differences: the rule of each op, and random graphs.
 *
 * Each case builds a function of random-shaped f64 parameters around one op (or a few), reduces
 * its result to a scalar loss = sum(result * R) with a random constant R, and asks nest_grad for
 * the gradient with respect to every parameter. The reference interpreter evaluates loss and
 * gradient; every element of every gradient must match (loss(x + h e) - loss(x - h e)) / 2h. The
 * same function is compiled in process, and the kernel's gradients must match the
 * interpreter's: the gradient graph goes through the same passes as any graph.
 */
#include <ctype.h>

/* the random graphs' generator, and its PRNG for the cases here */
#include "randgraph.c"

static double uniform(rng *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(next(r) >> 11) * 0x1p-53;
}

#define MAXP 4
#define MAXE 256

/* What a case builds: parameters (their shapes and the domain of their values) and the value
 * whose gradient is checked. */
typedef struct gcase {
    rng *r;
    nest_function *f;
    int np;
    nest_value p[MAXP];
    int rank[MAXP];
    int64_t shape[MAXP][4];
    double lo[MAXP], hi[MAXP];
    double h, tol; /* the finite-difference step and the tolerance */
} gcase;

static void rshape(rng *r, int rank, int64_t *shape)
{
    for (int k = 0; k < rank; k++)
        shape[k] = 1 + below(r, 4);
}

/* A new f64 parameter of the shape, drawn from [lo, hi]. */
static nest_value param(gcase *c, int rank, const int64_t *shape, double lo, double hi)
{
    int i = c->np++;
    char name[8];
    snprintf(name, sizeof name, "p%d", i);
    c->rank[i] = rank;
    if (rank > 0)
        memcpy(c->shape[i], shape, (size_t)rank * sizeof *shape);
    c->lo[i] = lo;
    c->hi[i] = hi;
    c->p[i] = nest_parameter(c->f, name, NEST_F64, rank, shape, NEST_ROW_MAJOR);
    return c->p[i];
}

static nest_value rparam(gcase *c, int rank, double lo, double hi)
{
    int64_t shape[4];
    rshape(c->r, rank, shape);
    return param(c, rank, shape, lo, hi);
}

static nest_value scalar(nest_function *f, double v)
{
    return nest_constant(f, NEST_F64, 0, NULL, &v, 1);
}

static nest_value like(nest_function *f, nest_value x, double v)
{
    int r = nest_value_rank(f, x);
    int64_t axes[4] = {0, 1, 2, 3};
    return r == 0 ? scalar(f, v) : nest_broadcast(f, scalar(f, v), r, nest_value_shape(f, x), r, axes);
}

/* ---- the cases ---- */

typedef nest_value (*build_fn)(gcase *c);

static nest_value b_binary(gcase *c, nest_value (*op)(nest_function *, nest_value, nest_value),
                           double lo, double hi, double blo, double bhi)
{
    int64_t shape[4];
    int rank = below(c->r, 4);
    rshape(c->r, rank, shape);
    nest_value a = param(c, rank, shape, lo, hi), b = param(c, rank, shape, blo, bhi);
    return op(c->f, a, b);
}

static nest_value b_unary(gcase *c, nest_value (*op)(nest_function *, nest_value), double lo, double hi)
{
    return op(c->f, rparam(c, below(c->r, 4), lo, hi));
}

static nest_value c_add(gcase *c) { return b_binary(c, nest_add, -2, 2, -2, 2); }
static nest_value c_subtract(gcase *c) { return b_binary(c, nest_subtract, -2, 2, -2, 2); }
static nest_value c_multiply(gcase *c) { return b_binary(c, nest_multiply, -2, 2, -2, 2); }
static nest_value c_divide(gcase *c) { return b_binary(c, nest_divide, -2, 2, 0.5, 2); }
static nest_value c_maximum(gcase *c) { return b_binary(c, nest_maximum, -2, 2, -2, 2); }
static nest_value c_minimum(gcase *c) { return b_binary(c, nest_minimum, -2, 2, -2, 2); }
static nest_value c_power(gcase *c) { return b_binary(c, nest_power, 0.5, 2, -2, 2); }
static nest_value c_negative(gcase *c) { return b_unary(c, nest_negative, -2, 2); }
static nest_value c_abs(gcase *c) { return b_unary(c, nest_abs, -2, 2); }
static nest_value c_exp(gcase *c) { return b_unary(c, nest_exp, -2, 2); }
static nest_value c_log(gcase *c) { return b_unary(c, nest_log, 0.2, 3); }
static nest_value c_sqrt(gcase *c) { return b_unary(c, nest_sqrt, 0.2, 3); }
static nest_value c_tanh(gcase *c) { return b_unary(c, nest_tanh, -2, 2); }

/* x * x: one operand twice */
static nest_value c_square(gcase *c)
{
    nest_value x = rparam(c, below(c->r, 4), -2, 2);
    return nest_multiply(c->f, x, x);
}

static nest_value c_select(gcase *c)
{
    int64_t shape[4];
    int rank = below(c->r, 4);
    rshape(c->r, rank, shape);
    nest_value a = param(c, rank, shape, -2, 2), b = param(c, rank, shape, -2, 2);
    nest_value k = param(c, rank, shape, -2, 2);
    return nest_select(c->f, nest_less(c->f, a, k), a, b);
}

/* through f32 and back: the rounding needs a larger step */
static nest_value c_convert(gcase *c)
{
    nest_value x = rparam(c, below(c->r, 4), -2, 2);
    c->h = 1e-3;
    c->tol = 2e-3;
    return nest_convert(c->f, nest_exp(c->f, nest_convert(c->f, x, NEST_F32)), NEST_F64);
}

static nest_value c_dot(gcase *c)
{
    /* ranks of the two sides: scalars, vectors, matrices, rank 3 */
    static const int ranks[][2] = {{0, 2}, {2, 0}, {0, 0}, {1, 1}, {2, 1}, {1, 2}, {2, 2},
                                   {3, 2}, {2, 3}, {1, 3}, {3, 1}};
    const int *rk = ranks[below(c->r, (int)(sizeof ranks / sizeof ranks[0]))];
    int64_t sa[4], sb[4];
    rshape(c->r, rk[0], sa);
    rshape(c->r, rk[1], sb);
    if (rk[0] && rk[1])
        sb[0] = sa[rk[0] - 1];
    nest_value a = param(c, rk[0], sa, -2, 2), b = param(c, rk[1], sb, -2, 2);
    return nest_dot(c->f, a, b);
}

/* a product of matrices big enough for the tile pass */
static nest_value c_dense(gcase *c)
{
    int64_t sa[2] = {8, 5 + below(c->r, 4)}, sb[2] = {sa[1], 17 + below(c->r, 8)};
    nest_value a = param(c, 2, sa, -1, 1), b = param(c, 2, sb, -1, 1);
    nest_value z = nest_dot(c->f, a, b);
    return nest_maximum(c->f, z, like(c->f, z, 0));
}

static nest_value c_broadcast(gcase *c)
{
    int rank = 1 + below(c->r, 3), na = 1 + below(c->r, rank);
    int64_t shape[4], axes[4], in[4];
    rshape(c->r, rank, shape);
    uint32_t mask = 0;
    while (__builtin_popcount(mask) < na)
        mask |= 1u << below(c->r, rank);
    int n = 0, m = 0;
    for (int k = 0; k < rank; k++) {
        if (mask & (1u << k))
            axes[n++] = k;
        else
            in[m++] = shape[k];
    }
    nest_value x = param(c, m, in, -2, 2);
    return nest_broadcast(c->f, x, rank, shape, n, axes);
}

static nest_value c_reshape(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    int64_t shape[4], order[4] = {0, 1, 2, 3}, out[4];
    rshape(c->r, rank, shape);
    nest_value x = param(c, rank, shape, -2, 2);
    for (int k = rank - 1; k > 0; k--) { /* a random permutation */
        int j = below(c->r, k + 1);
        int64_t t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    int64_t count = 1;
    for (int k = 0; k < rank; k++)
        count *= shape[k];
    if (below(c->r, 2)) { /* the permuted shape */
        for (int k = 0; k < rank; k++)
            out[k] = shape[order[k]];
        return nest_reshape(c->f, x, order, rank, out);
    }
    out[0] = count; /* all in one axis, or [count / d, d] */
    int orank = 1;
    for (int64_t d = 2; d <= 4; d++)
        if (count % d == 0 && below(c->r, 2)) {
            out[0] = count / d;
            out[1] = d;
            orank = 2;
            break;
        }
    return nest_reshape(c->f, x, order, orank, out);
}

static nest_value c_slice(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    int64_t shape[4], lo[4], up[4], st[4];
    for (int k = 0; k < rank; k++) {
        shape[k] = 1 + below(c->r, 7);
        lo[k] = below(c->r, (int)shape[k]);
        up[k] = lo[k] + 1 + below(c->r, (int)(shape[k] - lo[k]));
        st[k] = 1 + below(c->r, 3);
    }
    nest_value x = param(c, rank, shape, -2, 2);
    return nest_slice(c->f, x, lo, up, st);
}

static nest_value c_concat(gcase *c)
{
    int rank = 1 + below(c->r, 3), axis = below(c->r, rank), n = 2 + below(c->r, 2);
    int64_t shape[4];
    rshape(c->r, rank, shape);
    nest_value parts[3];
    for (int i = 0; i < n; i++) {
        int64_t s[4];
        memcpy(s, shape, sizeof s);
        s[axis] = 1 + below(c->r, 3);
        parts[i] = param(c, rank, s, -2, 2);
    }
    return nest_concat(c->f, n, parts, axis);
}

/* A random non-empty set of the axes of a rank; their count. */
static int rand_axes(gcase *c, int rank, int64_t *axes)
{
    int n = 0;
    for (int k = 0; k < rank; k++)
        if (below(c->r, 2) || (k == rank - 1 && n == 0))
            axes[n++] = k;
    return n;
}

static nest_value reduce(gcase *c, nest_value (*op)(nest_function *, nest_value, int, const int64_t *))
{
    int rank = 1 + below(c->r, 3);
    nest_value x = rparam(c, rank, -2, 2);
    int64_t axes[4];
    int n = rand_axes(c, rank, axes);
    return op(c->f, x, n, axes);
}

static nest_value c_sum(gcase *c) { return reduce(c, nest_sum); }
static nest_value c_max(gcase *c) { return reduce(c, nest_max); }
static nest_value c_min(gcase *c) { return reduce(c, nest_min); }

static nest_value c_tuple(gcase *c)
{
    nest_value a = rparam(c, 1, -2, 2);
    nest_value t = nest_tuple(c->f, 2, (nest_value[]){nest_exp(c->f, a), a});
    return nest_multiply(c->f, nest_get(c->f, t, 0), nest_get(c->f, t, 1));
}

/* the element-wise math of the op set (floor, ceiling and sign have zero gradients) */
static nest_value c_sin(gcase *c) { return b_unary(c, nest_sin, -3, 3); }
static nest_value c_cos(gcase *c) { return b_unary(c, nest_cos, -3, 3); }
static nest_value c_tan(gcase *c) { return b_unary(c, nest_tan, -1.2, 1.2); }
static nest_value c_asin(gcase *c) { return b_unary(c, nest_asin, -0.9, 0.9); }
static nest_value c_acos(gcase *c) { return b_unary(c, nest_acos, -0.9, 0.9); }
static nest_value c_atan(gcase *c) { return b_unary(c, nest_atan, -3, 3); }
static nest_value c_sinh(gcase *c) { return b_unary(c, nest_sinh, -2, 2); }
static nest_value c_cosh(gcase *c) { return b_unary(c, nest_cosh, -2, 2); }
static nest_value c_erf(gcase *c) { return b_unary(c, nest_erf, -2, 2); }
static nest_value c_relu(gcase *c) { return b_unary(c, nest_relu, -2, 2); }
static nest_value c_sigmoid(gcase *c) { return b_unary(c, nest_sigmoid, -4, 4); }
static nest_value c_floor(gcase *c)
{
    nest_value x = rparam(c, 1 + below(c->r, 3), -2, 2);
    nest_value t = nest_add(c->f, nest_floor(c->f, x), nest_ceiling(c->f, x));
    return nest_add(c->f, nest_multiply(c->f, t, nest_sign(c->f, x)), x);
}
static nest_value c_product(gcase *c) { return reduce(c, nest_product); }

/* a product over groups holding zeros (one, or two, or none): no division by zero */
static nest_value c_product_zeros(gcase *c)
{
    int64_t s[2] = {3, 2 + below(c->r, 4)}, ax[1] = {1};
    nest_value x = param(c, 2, s, -2, 2);
    double m[3 * 6];
    for (int i = 0; i < 3 * s[1]; i++)
        m[i] = 1;
    m[0] = 0;                  /* row 0: one zero */
    m[s[1]] = m[s[1] + 1] = 0; /* row 1: two; row 2: none */
    nest_value z = nest_multiply(c->f, x, nest_constant(c->f, NEST_F64, 2, s, m, 3 * s[1]));
    return nest_product(c->f, z, 1, ax);
}

static nest_value c_reverse(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    nest_value x = rparam(c, rank, -2, 2);
    int64_t axes[4];
    int n = rand_axes(c, rank, axes);
    /* times a ramp, so that the order matters */
    return nest_multiply(c->f, nest_reverse(c->f, x, n, axes), nest_exp(c->f, x));
}

static nest_value c_softmax(gcase *c) { return reduce(c, nest_softmax); }

/* softmax cross-entropy over rows: max, exp, sum, log, broadcasts, a dot for the labels */
static nest_value c_softmax_xent(gcase *c)
{
    int64_t n = 1 + below(c->r, 4), k = 2 + below(c->r, 4);
    nest_function *f = c->f;
    nest_value z = param(c, 2, (int64_t[]){n, k}, -3, 3);
    nest_value y = param(c, 2, (int64_t[]){n, k}, 0, 1);
    int64_t s[2] = {n, k}, ax1[1] = {1}, ax01[2] = {0, 1};
    nest_value m = nest_broadcast(f, nest_max(f, z, 1, ax1), 2, s, 1, ax1);
    nest_value zs = nest_subtract(f, z, m);
    nest_value lse = nest_log(f, nest_sum(f, nest_exp(f, zs), 1, ax1));
    nest_value logp = nest_subtract(f, zs, nest_broadcast(f, lse, 2, s, 1, ax1));
    return nest_negative(f, nest_sum(f, nest_multiply(f, y, logp), 2, ax01));
}

/* pad with padding below, above (negative: cropping) and between the elements; the padding
 * value is a parameter too */
static nest_value c_pad(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    int64_t shape[4], lo[4], hi[4], mid[4];
    rshape(c->r, rank, shape);
    for (int k = 0; k < rank; k++) {
        mid[k] = below(c->r, 3);
        int64_t dil = (shape[k] - 1) * (mid[k] + 1) + 1;
        lo[k] = below(c->r, 4) - 1;
        hi[k] = below(c->r, 4) - 1;
        if (dil + lo[k] + hi[k] < 1)
            lo[k] = hi[k] = 0;
    }
    nest_value x = param(c, rank, shape, -2, 2), v = param(c, 0, NULL, -2, 2);
    return nest_pad(c->f, x, v, lo, hi, mid);
}

static nest_value c_replace_slice(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    int64_t shape[4], lo[4], up[4], st[4], box[4];
    for (int k = 0; k < rank; k++) {
        shape[k] = 1 + below(c->r, 6);
        lo[k] = below(c->r, (int)shape[k]);
        up[k] = lo[k] + 1 + below(c->r, (int)(shape[k] - lo[k]));
        st[k] = 1 + below(c->r, 3);
        box[k] = (up[k] - lo[k] + st[k] - 1) / st[k];
    }
    nest_value x = param(c, rank, shape, -2, 2), y = param(c, rank, box, -2, 2);
    return nest_replace_slice(c->f, x, y, lo, up, st);
}

/* numpy's matmul: vectors, matrices, batches with axes broadcast on either side */
static nest_value c_batch_dot(gcase *c)
{
    static const int ranks[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {3, 2}, {2, 3},
                                   {3, 3}, {4, 3}, {3, 4}, {1, 3}, {3, 1}};
    const int *rk = ranks[below(c->r, (int)(sizeof ranks / sizeof ranks[0]))];
    int64_t sa[4], sb[4], m = 1 + below(c->r, 4), k = 1 + below(c->r, 4), n = 1 + below(c->r, 4);
    int ba = rk[0] - 2 > 0 ? rk[0] - 2 : 0, bb = rk[1] - 2 > 0 ? rk[1] - 2 : 0;
    int nb = ba > bb ? ba : bb;
    int64_t batch[2];
    for (int i = 0; i < nb; i++)
        batch[i] = 2 + below(c->r, 2);
    for (int i = 0; i < ba; i++) /* aligned at the right; extent 1 broadcasts */
        sa[i] = below(c->r, 3) ? batch[nb - ba + i] : 1;
    for (int i = 0; i < bb; i++)
        sb[i] = below(c->r, 3) ? batch[nb - bb + i] : 1;
    if (rk[0] == 1)
        sa[0] = k;
    else {
        sa[ba] = m;
        sa[ba + 1] = k;
    }
    if (rk[1] == 1)
        sb[0] = k;
    else {
        sb[bb] = k;
        sb[bb + 1] = n;
    }
    nest_value a = param(c, rk[0], sa, -2, 2), b = param(c, rk[1], sb, -2, 2);
    return nest_batch_dot(c->f, a, b);
}

/* random indices of `rank` dims in [-n - 1, n]: negative ones, clamped ones, repeats */
static nest_value indices(gcase *c, int rank, int64_t n)
{
    int64_t shape[4], v[64];
    rshape(c->r, rank, shape);
    int64_t cnt = count_of(rank, shape);
    for (int64_t e = 0; e < cnt; e++)
        v[e] = (int64_t)below(c->r, (int)(2 * n + 2)) - n - 1;
    return nest_constant(c->f, NEST_I64, rank, shape, v, cnt);
}

static nest_value c_gather(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    nest_value x = rparam(c, rank, -2, 2);
    int axis = below(c->r, rank);
    nest_value i = indices(c, below(c->r, 3), c->shape[0][axis]);
    /* times a ramp of x: the gathered values are used twice */
    nest_value t = nest_gather(c->f, x, i, axis);
    return nest_multiply(c->f, t, nest_gather(c->f, nest_exp(c->f, x), i, axis));
}

static nest_value c_scatter_add(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    nest_value x = rparam(c, rank, -2, 2);
    int axis = below(c->r, rank), ri = below(c->r, 3);
    nest_value i = indices(c, ri, c->shape[0][axis]);
    int64_t us[6];
    int ur = 0;
    for (int k = 0; k < rank; k++) {
        if (k == axis)
            for (int j = 0; j < ri; j++)
                us[ur++] = nest_value_shape(c->f, i)[j];
        else
            us[ur++] = c->shape[0][k];
    }
    if (ur > 4)
        return nest_scatter_add(c->f, x, i, nest_gather(c->f, x, i, axis), axis);
    nest_value u = param(c, ur, us, -2, 2);
    nest_value s = nest_scatter_add(c->f, nest_exp(c->f, x), i, nest_multiply(c->f, u, u), axis);
    return nest_multiply(c->f, s, s);
}

static nest_value c_topk(gcase *c)
{
    int rank = 1 + below(c->r, 3);
    nest_value x = rparam(c, rank, -2, 2);
    int axis = below(c->r, rank);
    int64_t k = below(c->r, (int)c->shape[0][axis] + 1);
    nest_value t = nest_topk(c->f, x, k, axis, below(c->r, 2));
    return nest_multiply(c->f, nest_get(c->f, t, 0), nest_get(c->f, t, 0));
}

/* convolution: 1 or 2 spatial axes, strides, dilation, padding (negative: cropping), data
 * dilation, groups; random sizes that fit */
static nest_value c_conv(gcase *c)
{
    int nsp = 1 + below(c->r, 2);
    int64_t G = 1 + below(c->r, 2), N = 1 + below(c->r, 2), C = G * (1 + below(c->r, 2));
    int64_t K = G * (1 + below(c->r, 2));
    int64_t xs[5] = {N, C}, ws[5] = {K, C / G}, st[3], dil[3], pb[3], pa[3], dd[3];
    for (int i = 0; i < nsp; i++) {
        st[i] = 1 + below(c->r, 2);
        dil[i] = 1 + below(c->r, 2);
        dd[i] = 1 + below(c->r, 2);
        ws[2 + i] = 1 + below(c->r, 3);
        xs[2 + i] = 1 + below(c->r, 5);
        pb[i] = below(c->r, 3) - 1;
        pa[i] = below(c->r, 3) - 1;
        int64_t in = (xs[2 + i] - 1) * dd[i] + 1, win = (ws[2 + i] - 1) * dil[i] + 1;
        if (in + pb[i] + pa[i] < win) /* the window must fit: pad enough */
            pa[i] = win - in - pb[i];
    }
    nest_value x = param(c, 2 + nsp, xs, -2, 2), w = param(c, 2 + nsp, ws, -2, 2);
    return nest_convolution(c->f, x, w, st, dil, pb, pa, dd, G);
}

static nest_value pool(gcase *c, bool max)
{
    int nsp = 1 + below(c->r, 2);
    int64_t xs[5] = {1 + below(c->r, 2), 1 + below(c->r, 2)}, win[3], st[3], pb[3], pa[3];
    bool tiled = below(c->r, 2); /* stride = window, no padding: the windows tile x */
    for (int i = 0; i < nsp; i++) {
        win[i] = 1 + below(c->r, 3);
        st[i] = tiled ? win[i] : 1 + below(c->r, 3);
        pb[i] = tiled ? 0 : below(c->r, (int)win[i]);
        pa[i] = tiled ? 0 : below(c->r, (int)win[i]);
        xs[2 + i] = win[i] + below(c->r, 4);
    }
    nest_value x = param(c, 2 + nsp, xs, -2, 2);
    return max ? nest_max_pool(c->f, x, win, st, pb, pa)
               : nest_avg_pool(c->f, x, win, st, pb, pa, below(c->r, 2));
}

static nest_value c_max_pool(gcase *c) { return pool(c, true); }
static nest_value c_avg_pool(gcase *c) { return pool(c, false); }

static const struct {
    const char *name;
    build_fn build;
} cases[] = {
    {"add", c_add}, {"subtract", c_subtract}, {"multiply", c_multiply}, {"divide", c_divide},
    {"maximum", c_maximum}, {"minimum", c_minimum}, {"power", c_power},
    {"negative", c_negative}, {"abs", c_abs}, {"exp", c_exp}, {"log", c_log}, {"sqrt", c_sqrt},
    {"tanh", c_tanh}, {"square", c_square}, {"select", c_select}, {"convert", c_convert},
    {"dot", c_dot}, {"dense", c_dense}, {"broadcast", c_broadcast}, {"reshape", c_reshape},
    {"slice", c_slice}, {"concat", c_concat}, {"sum", c_sum}, {"max", c_max}, {"min", c_min},
    {"tuple", c_tuple}, {"softmax_xent", c_softmax_xent},
    {"sin", c_sin}, {"cos", c_cos}, {"tan", c_tan}, {"asin", c_asin}, {"acos", c_acos},
    {"atan", c_atan}, {"sinh", c_sinh}, {"cosh", c_cosh}, {"erf", c_erf}, {"relu", c_relu},
    {"sigmoid", c_sigmoid}, {"floor_ceiling_sign", c_floor}, {"product", c_product},
    {"product_zeros", c_product_zeros}, {"reverse", c_reverse}, {"softmax", c_softmax},
    {"pad", c_pad}, {"replace_slice", c_replace_slice}, {"batch_dot", c_batch_dot},
    {"gather", c_gather}, {"scatter_add", c_scatter_add}, {"topk", c_topk},
    {"convolution", c_conv}, {"max_pool", c_max_pool}, {"avg_pool", c_avg_pool},
};

/* ---- the check ---- */

/* loss = sum(v * R) over all axes, R a random constant. */
static nest_value to_loss(nest_function *f, nest_value v, rng *r)
{
    int rank = nest_value_rank(f, v);
    const int64_t *shape = nest_value_shape(f, v);
    int64_t n = count_of(rank, shape), axes[NEST_MAX_RANK];
    for (int k = 0; k < rank; k++)
        axes[k] = k;
    double *w = malloc((size_t)n * sizeof *w + 8);
    for (int64_t i = 0; i < n; i++)
        w[i] = uniform(r, -1, 1);
    nest_value R = nest_constant(f, NEST_F64, rank, shape, w, n);
    free(w);
    nest_value t = nest_multiply(f, v, R);
    return rank ? nest_sum(f, t, rank, axes) : t;
}

static double loss_at(nest_function *lf, double **x, int np)
{
    double l;
    void *res[1] = {&l};
    assert_ok(lf, nest_evaluate(lf, (void **)x, np, res, 1));
    return l;
}

/* Builds case k with the seed, checks the gradient by finite differences, and the compiled
 * gradient against the interpreter's (with `jit`). */
static void check_case(int k, uint64_t seed, bool jit)
{
    rng r = {.s = seed};
    gcase c = {.r = &r, .h = 1e-6, .tol = 1e-6};
    /* the loss alone, and the loss with its gradient: the same graph built twice */
    nest_function *fs[2];
    nest_value grads = NEST_NONE;
    double *x[MAXP];
    for (int pass = 0; pass < 2; pass++) {
        r.s = seed;
        c.np = 0;
        c.f = fs[pass] = nest_function_new("g");
        nest_value v = cases[k].build(&c);
        assert_value(c.f, v);
        nest_value loss = to_loss(c.f, v, &r);
        assert_value(c.f, loss);
        if (pass == 0) {
            assert_ok(c.f, nest_return(c.f, 1, &loss, NULL));
            continue;
        }
        grads = nest_grad(c.f, loss, c.np, c.p);
        assert_value(c.f, grads);
        nest_value outs[1 + MAXP] = {loss};
        for (int i = 0; i < c.np; i++)
            outs[1 + i] = nest_get(c.f, grads, i);
        assert_ok(c.f, nest_return(c.f, 1 + c.np, outs, NULL));
    }
    nest_function *lf = fs[0], *gf = fs[1];
    rng vr = {.s = seed ^ 0x5555};
    double *g[1 + MAXP], *jg[1 + MAXP], l, jl;
    g[0] = &l;
    jg[0] = &jl;
    for (int i = 0; i < c.np; i++) {
        int64_t n = count_of(c.rank[i], c.shape[i]);
        x[i] = malloc((size_t)n * sizeof(double) + 8);
        g[1 + i] = malloc((size_t)n * sizeof(double) + 8);
        jg[1 + i] = malloc((size_t)n * sizeof(double) + 8);
        for (int64_t e = 0; e < n; e++)
            x[i][e] = uniform(&vr, c.lo[i], c.hi[i]);
    }
    assert_ok(gf, nest_evaluate(gf, (void **)x, c.np, (void **)g, 1 + c.np));
    assert_close(NEST_F64, &l, &(double){loss_at(lf, x, c.np)}, 1, 1e-12, 1e-12);
    for (int i = 0; i < c.np; i++) {
        int64_t n = count_of(c.rank[i], c.shape[i]);
        for (int64_t e = 0; e < n && e < MAXE; e++) {
            double x0 = x[i][e];
            x[i][e] = x0 + c.h;
            double up = loss_at(lf, x, c.np);
            x[i][e] = x0 - c.h;
            double down = loss_at(lf, x, c.np);
            x[i][e] = x0;
            double fd = (up - down) / (2 * c.h);
            if (!(fabs(fd - g[1 + i][e]) <= c.tol + c.tol * fabs(fd))) {
                print_error("case %s, seed %llu: d loss / d p%d[%lld] is %.12g by nest_grad, %.12g "
                            "by finite differences\n",
                            cases[k].name, (unsigned long long)seed, i, (long long)e, g[1 + i][e], fd);
                char *text = nest_print(&gf, 1);
                print_error("%s\n", text ? text : "");
                free(text);
                fail();
            }
        }
    }
    if (jit) {
        nest_kernel *kern = nest_compile(gf, NULL);
        if (!kern)
            print_error("%s\n", nest_errmsg(gf));
        assert_non_null(kern);
        assert_int_equal(nest_call(kern, (void **)x, c.np, (void **)jg, 1 + c.np), NEST_OK);
        /* f32 math differs from the interpreter's by an ulp or so: the case's tolerance */
        double tol = c.tol > 1e-6 ? 1e-5 : 1e-10;
        assert_close(NEST_F64, &jl, &l, 1, tol, tol);
        for (int i = 0; i < c.np; i++)
            assert_close(NEST_F64, jg[1 + i], g[1 + i], count_of(c.rank[i], c.shape[i]), tol, tol);
        nest_kernel_free(kern);
    }
    for (int i = 0; i < c.np; i++) {
        free(x[i]);
        free(g[1 + i]);
        free(jg[1 + i]);
    }
    nest_function_free(lf);
    nest_function_free(gf);
}

static void test_rules(void **state)
{
    (void)state;
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++)
        for (uint64_t seed = 1; seed <= 12; seed++)
            check_case(k, seed * 1000 + (uint64_t)k, seed == 1);
}

/* What has no gradient gets zeros; comparisons and integers stop it. */
static void test_no_gradient(void **state)
{
    nest_function *f = *state;
    nest_value x = nest_parameter(f, "x", NEST_F64, 1, SHAPE(3), NEST_ROW_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F64, 1, SHAPE(3), NEST_ROW_MAJOR);
    /* loss = sum(convert(convert(x, i32), f64)) + sum(select(x < y, 1, 0)) + y . y */
    nest_value xi = nest_convert(f, nest_convert(f, x, NEST_I32), NEST_F64);
    nest_value cmp = nest_select(f, nest_less(f, x, y), like(f, x, 1), like(f, x, 0));
    int64_t ax[1] = {0};
    nest_value loss = nest_add(f, nest_add(f, nest_sum(f, xi, 1, ax), nest_sum(f, cmp, 1, ax)),
                               nest_dot(f, y, y));
    nest_value g = nest_grad(f, loss, 2, (nest_value[]){x, y});
    assert_value(f, g);
    nest_value outs[2] = {nest_get(f, g, 0), nest_get(f, g, 1)};
    assert_ok(f, nest_return(f, 2, outs, NULL));
    double xs[3] = {0.5, 2.5, -1}, ys[3] = {1, 2, 3}, gx[3], gy[3];
    void *args[2] = {xs, ys}, *res[2] = {gx, gy};
    assert_ok(f, evaluate(f, args, res));
    const double zero[3] = {0, 0, 0}, twice[3] = {2, 4, 6};
    assert_exact(NEST_F64, gx, zero, 3);
    assert_exact(NEST_F64, gy, twice, 3);
    /* a failed grad leaves the function as it was */
    int before = nest_result_count(f);
    assert_int_equal(nest_grad(f, x, 1, &y), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "the loss must be an f32 or f64 scalar");
    assert_int_equal(nest_result_count(f), before);
    assert_int_equal(nest_grad(f, loss, 0, NULL), NEST_NONE);
    assert_int_equal(nest_grad(f, loss, 1, &loss), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "is not a variable or a parameter");
}

/* An index has no derivative: a loss that depends on x through argmax or argmin is an error
 * naming the op; the indices of topk pass nothing while its values carry the gradient. */
static void test_index_gradient(void **state)
{
    nest_function *f = *state;
    nest_value x = nest_parameter(f, "x", NEST_F64, 2, SHAPE(2, 3), NEST_ROW_MAJOR);
    nest_value t = nest_parameter(f, "t", NEST_F64, 1, SHAPE(3), NEST_ROW_MAJOR);
    nest_value am = nest_argmax(f, x, 1);
    assert_ok(f, nest_set_name(f, am, "best"));
    int64_t ax[1] = {0};
    nest_value via = nest_sum(f, nest_gather(f, t, am, 0), 1, ax);
    assert_int_equal(nest_grad(f, via, 1, &x), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "grad: argmax best has no gradient (its result is an index)");
    assert_int_equal(nest_grad(f, via, 2, (nest_value[]){t, x}), NEST_NONE);
    /* by t alone it is fine: d/dt sum(t[argmax(x)]) counts each row's pick */
    nest_value g = nest_grad(f, via, 1, &t);
    assert_value(f, g);
    nest_value am2 = nest_argmin(f, x, 0);
    nest_value via2 = nest_sum(f, nest_convert(f, am2, NEST_F64), 1, ax);
    assert_int_equal(nest_grad(f, via2, 1, &x), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "argmin has no gradient");
    /* topk: loss = sum(values * 2) + sum(convert(indices)) */
    nest_value tk = nest_topk(f, x, 2, 1, 1);
    int64_t ax01[2] = {0, 1};
    nest_value two = nest_constant(f, NEST_F64, 0, NULL, (double[]){2}, 1);
    nest_value vals = nest_multiply(f, nest_get(f, tk, 0), nest_broadcast(f, two, 2, SHAPE(2, 2), 2, ax01));
    nest_value loss = nest_add(f, nest_sum(f, vals, 2, ax01),
                               nest_sum(f, nest_convert(f, nest_get(f, tk, 1), NEST_F64), 2, ax01));
    nest_value gt = nest_grad(f, loss, 2, (nest_value[]){x, t});
    assert_value(f, gt);
    nest_value outs[3] = {nest_get(f, g, 0), nest_get(f, gt, 0), nest_get(f, gt, 1)};
    assert_ok(f, nest_return(f, 3, outs, NULL));
    double xs[6] = {3, 1, 2, -1, 5, 4}, ts[3] = {1, 1, 1}, g1[3], g2[6], g3[3];
    void *args[2] = {xs, ts}, *res[3] = {g1, g2, g3};
    assert_ok(f, evaluate(f, args, res));
    const double picks[3] = {1, 1, 0}, top2[6] = {2, 0, 2, 0, 2, 2}, zero[3] = {0, 0, 0};
    assert_exact(NEST_F64, g1, picks, 3);
    assert_exact(NEST_F64, g2, top2, 6);
    assert_exact(NEST_F64, g3, zero, 3);
}

/* Pools by hand: max_pool's gradient goes to the first element of a window equal to its
 * maximum (row-major, as PyTorch picks it), tiled windows or padded ones; avg_pool's divides by
 * the window's elements of x, or by the whole window with include_pad. */
static void test_pool_ties(void **state)
{
    nest_function *f = *state;
    nest_value x = nest_parameter(f, "x", NEST_F64, 4, SHAPE(1, 1, 2, 4), NEST_ROW_MAJOR);
    nest_value r = nest_parameter(f, "r", NEST_F64, 4, SHAPE(1, 1, 1, 3), NEST_ROW_MAJOR);
    int64_t ax4[4] = {0, 1, 2, 3};
    /* tiled: windows {1, 1, 1, 0} and {0, 2, 2, 2}, weights 3 and 5 */
    nest_value mp = nest_max_pool(f, x, SHAPE(2, 2), SHAPE(2, 2), NULL, NULL);
    nest_value w2 = nest_constant(f, NEST_F64, 4, SHAPE(1, 1, 1, 2), (double[]){3, 5}, 2);
    nest_value l1 = nest_sum(f, nest_multiply(f, mp, w2), 4, ax4);
    /* padded: window 2 x 2, stride 1 x 2, one row of padding above: windows of rows {0, 1}
     * and {1, pad}, weights 1, 2 (top) and 4, 8 (bottom) */
    nest_value mq = nest_max_pool(f, x, SHAPE(2, 2), SHAPE(1, 2), SHAPE(0, 0), SHAPE(1, 0));
    nest_value w4 = nest_constant(f, NEST_F64, 4, SHAPE(1, 1, 2, 2), (double[]){1, 2, 4, 8}, 4);
    nest_value l2 = nest_sum(f, nest_multiply(f, mq, w4), 4, ax4);
    /* avg over {r0, r1} and {r2, padding} */
    nest_value a0 = nest_avg_pool(f, r, SHAPE(1, 2), SHAPE(1, 2), SHAPE(0, 0), SHAPE(0, 1), 0);
    nest_value a1 = nest_avg_pool(f, r, SHAPE(1, 2), SHAPE(1, 2), SHAPE(0, 0), SHAPE(0, 1), 1);
    nest_value w5 = nest_constant(f, NEST_F64, 4, SHAPE(1, 1, 1, 2), (double[]){6, 10}, 2);
    nest_value l3 = nest_add(f, nest_sum(f, nest_multiply(f, a0, w5), 4, ax4),
                             nest_sum(f, nest_multiply(f, a1, w5), 4, ax4));
    nest_value g1 = nest_grad(f, l1, 1, &x), g2 = nest_grad(f, l2, 1, &x), g3 = nest_grad(f, l3, 1, &r);
    assert_value(f, g3);
    nest_value outs[3] = {nest_get(f, g1, 0), nest_get(f, g2, 0), nest_get(f, g3, 0)};
    assert_ok(f, nest_return(f, 3, outs, NULL));
    double xs[8] = {1, 1, 0, 2, 1, 0, 2, 2}, rs[3] = {1, 2, 3}, gx1[8], gx2[8], gr[3];
    void *args[2] = {xs, rs}, *res[3] = {gx1, gx2, gr};
    const double want1[8] = {3, 0, 0, 5, 0, 0, 0, 0};
    /* top windows: {1, 1, 1, 0} -> x[0], {0, 2, 2, 2} -> x[3]; bottom: {1, 0} -> x[4],
     * {2, 2} -> x[6] */
    const double want2[8] = {1, 0, 0, 2, 4, 0, 8, 0};
    const double want3[3] = {3 + 3, 3 + 3, 10 + 5};
    assert_ok(f, evaluate(f, args, res));
    assert_exact(NEST_F64, gx1, want1, 8);
    assert_exact(NEST_F64, gx2, want2, 8);
    assert_exact(NEST_F64, gr, want3, 3);
    /* compiled alike */
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    assert_int_equal(nest_call(k, args, 2, res, 3), NEST_OK);
    assert_exact(NEST_F64, gx1, want1, 8);
    assert_exact(NEST_F64, gx2, want2, 8);
    assert_exact(NEST_F64, gr, want3, 3);
    nest_kernel_free(k);
}

/* The backward of a dense layer: both products are tiled, with the transposes as views. */
static void test_dense_backward_tiled(void **state)
{
    nest_function *f = *state;
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(64, 128), NEST_ROW_MAJOR);
    nest_value w = nest_parameter(f, "w", NEST_F32, 2, SHAPE(128, 96), NEST_ROW_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F32, 2, SHAPE(64, 96), NEST_ROW_MAJOR);
    nest_value d = nest_subtract(f, nest_dot(f, x, w), y);
    int64_t ax[2] = {0, 1};
    nest_value loss = nest_sum(f, nest_multiply(f, d, d), 2, ax);
    nest_value g = nest_grad(f, loss, 2, (nest_value[]){x, w});
    nest_value outs[3] = {loss, nest_get(f, g, 0), nest_get(f, g, 1)};
    assert_ok(f, nest_return(f, 3, outs, NULL));
    char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    assert_non_null(c);
    int tiles = 0;
    for (const char *p = c; (p = strstr(p, "in tiles of")); p++)
        tiles++;
    assert_int_equal(tiles, 3); /* x.w, d.w^T and x^T.d */
    assert_null(strstr(c, "reshape(w, order=[1,0]")); /* no nest computes a transpose */
    free(c);
}

/* ---- random graphs ----
 *
 * The graphs are those of tests/randgraph.c's generator (element-wise math, comparisons and
 * select, convert, broadcast, reshape, slice, concat, reductions, dot, tuples and the op set of
 * real models), moved to f64:
 * the canonical text of each graph with f32 replaced by f64 and column-major layouts dropped
 * (neither changes what is computed). The loss is the sum of every float result times a
 * random constant; nest_grad gives its gradient with respect to every float parameter, which
 * the reference interpreter evaluates at random points of the generator's domains. Each
 * checked element must match (loss(x + h) - loss(x - h)) / 2h, unless the two one-sided
 * differences disagree: then x is within h of a jump or a kink (a comparison, a conversion to
 * an integer, a tie of maximum) and the element is skipped. Every fourth graph is also
 * compiled, its gradients checked against the interpreter's.
 */

/* Replaces the word `from` by `to` (same length) and drops the word " col" in place. */
static void to_f64(char *s)
{
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n; i++) {
        bool start = i == 0 || !(isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_');
        if (start && strncmp(s + i, "f32", 3) == 0 && !(isalnum((unsigned char)s[i + 3]) || s[i + 3] == '_')) {
            memcpy(s + k, "f64", 3);
            k += 3;
            i += 2;
            continue;
        }
        if (strncmp(s + i, " col", 4) == 0 && !(isalnum((unsigned char)s[i + 4]) || s[i + 4] == '_')) {
            i += 3;
            continue;
        }
        s[k++] = s[i];
    }
    s[k] = '\0';
}

typedef struct stats {
    int graphs, checked, skipped, compiled;
    int index;  /* graphs whose loss depends on a parameter through an argmax or argmin:
                 * nest_grad refuses them */
} stats;

static double eval_loss(nest_function *lf, void **args, int np)
{
    double l = NAN;
    void *res[1] = {&l};
    if (nest_evaluate(lf, args, np, res, 1) != NEST_OK)
        return NAN;
    return l;
}

/* Builds the loss of the graph's float results in f (each as to_loss makes it, summed);
 * returns it, or NEST_NONE if none. */
static nest_value loss_of(nest_function *f, rng *r)
{
    nest_value loss = NEST_NONE;
    for (int i = 0; i < nest_result_count(f); i++) {
        nest_value v = nest_result(f, i);
        if (nest_value_type(f, v) != NEST_F64)
            continue;
        nest_value t = to_loss(f, v, r);
        loss = loss < 0 ? t : nest_add(f, loss, t);
    }
    return loss;
}

static void check_graph(uint64_t seed, stats *st)
{
    gen *g = calloc(1, sizeof *g);
    generate(g, seed, 0);
    if (g->broken) {
        nest_function_free(g->f);
        free(g);
        return;
    }
    char *text = nest_print(&g->f, 1);
    assert_non_null(text);
    to_f64(text);
    domain doms[MAXPARAMS];
    int np = g->np;
    memcpy(doms, g->params, sizeof doms);
    nest_function_free(g->f);
    free(g);
    /* twice: the loss alone (for the differences), and the loss with its gradient */
    nest_module *ml = nest_parse(text, strlen(text), "g.nest"), *mg = nest_parse(text, strlen(text), "g.nest");
    if (nest_module_errcode(ml))
        print_error("seed %llu: %s\n%s\n", (unsigned long long)seed, nest_module_errmsg(ml), text);
    assert_int_equal(nest_module_errcode(ml), NEST_OK);
    nest_function *lf = nest_module_function(ml, 0), *gf = nest_module_function(mg, 0);
    rng r = {.s = seed ^ 0x9e3779b97f4a7c15u};
    rng r2 = r;
    nest_value ll = loss_of(lf, &r), gl = loss_of(gf, &r2);
    int nw = 0;
    nest_value wrt[MAXPARAMS];
    int widx[MAXPARAMS];
    for (int i = 0; i < np; i++)
        if (nest_value_type(gf, nest_param(gf, i)) == NEST_F64) {
            widx[nw] = i;
            wrt[nw++] = nest_param(gf, i);
        }
    if (ll < 0 || nw == 0) {
        nest_module_free(ml);
        nest_module_free(mg);
        free(text);
        return;
    }
    assert_ok(lf, nest_return(lf, 1, &ll, NULL));
    nest_value grads = nest_grad(gf, gl, nw, wrt);
    if (grads < 0 && strstr(nest_errmsg(gf), "has no gradient (its result is an index)")) {
        st->index++;
        nest_module_free(ml);
        nest_module_free(mg);
        free(text);
        return;
    }
    if (grads < 0)
        print_error("seed %llu: %s\n%s\n", (unsigned long long)seed, nest_errmsg(gf), text);
    assert_value(gf, grads);
    nest_value outs[1 + MAXPARAMS] = {gl};
    for (int i = 0; i < nw; i++)
        outs[1 + i] = nest_get(gf, grads, i);
    assert_ok(gf, nest_return(gf, 1 + nw, outs, NULL));
    st->graphs++;
    /* arguments: continuous random points of the generator's domains */
    void *args[MAXPARAMS];
    int64_t counts[MAXPARAMS];
    rng vr = {.s = seed * 7 + 1};
    for (int i = 0; i < np; i++) {
        nest_value p = nest_param(lf, i);
        int t = nest_value_type(lf, p);
        counts[i] = 1;
        for (int k = 0; k < nest_value_rank(lf, p); k++)
            counts[i] *= nest_value_shape(lf, p)[k];
        args[i] = calloc((size_t)counts[i] + 1, 8);
        for (int64_t e = 0; e < counts[i]; e++) {
            double u = (double)(next(&vr) >> 11) * 0x1p-53;
            double x = doms[i].lo + (doms[i].hi - doms[i].lo) * u;
            if (t == NEST_F64)
                ((double *)args[i])[e] = x;
            else
                store_elem((nest_type)t, args[i], e, draw(&vr, &doms[i]));
        }
    }
    double *res[1 + MAXPARAMS], loss;
    res[0] = &loss;
    for (int i = 0; i < nw; i++)
        res[1 + i] = malloc((size_t)counts[widx[i]] * 8 + 8);
    assert_ok(gf, nest_evaluate(gf, args, np, (void **)res, 1 + nw));
    double l0 = eval_loss(lf, args, np);
    if (!isfinite(l0) || !isfinite(loss))
        goto done;
    assert_close(NEST_F64, &loss, &l0, 1, 1e-12, 1e-12);
    for (int i = 0; i < nw; i++) {
        double *x = args[widx[i]];
        for (int64_t e = 0; e < counts[widx[i]] && e < 48; e++) {
            double x0 = x[e], h = 1e-6 * fmax(1, fabs(x0));
            x[e] = x0 + h;
            double up = eval_loss(lf, args, np);
            x[e] = x0 - h;
            double down = eval_loss(lf, args, np);
            x[e] = x0;
            double fd = (up - down) / (2 * h), fu = (up - l0) / h, fl = (l0 - down) / h;
            double scale = 1 + fabs(fd) + 1e-6 * fabs(l0) / h;
            if (!isfinite(fd) || fabs(fu - fl) > 1e-3 * scale) { /* a jump or a kink */
                st->skipped++;
                continue;
            }
            st->checked++;
            double gv = res[1 + i][e];
            if (!(fabs(gv - fd) <= 1e-5 * scale)) {
                print_error("seed %llu: d loss / d p%d[%lld]: nest_grad %.12g, finite "
                            "differences %.12g (one-sided %.12g, %.12g)\n%s\n",
                            (unsigned long long)seed, widx[i], (long long)e, gv, fd, fu, fl, text);
                fail();
            }
        }
    }
    if (seed % 4 == 0) { /* the compiled gradient graph */
        nest_kernel *k = nest_compile(gf, NULL);
        if (!k)
            print_error("seed %llu: %s\n", (unsigned long long)seed, nest_errmsg(gf));
        assert_non_null(k);
        double *got[1 + MAXPARAMS], kl;
        got[0] = &kl;
        for (int i = 0; i < nw; i++)
            got[1 + i] = malloc((size_t)counts[widx[i]] * 8 + 8);
        assert_int_equal(nest_call(k, args, np, (void **)got, 1 + nw), NEST_OK);
        for (int i = 0; i < nw; i++) {
            for (int64_t e = 0; e < counts[widx[i]]; e++) {
                double a = got[1 + i][e], b = res[1 + i][e];
                if (!(a == b || fabs(a - b) <= 1e-9 * (1 + fabs(b)) || (isnan(a) && isnan(b)))) {
                    print_error("seed %llu: compiled d loss / d p%d[%lld] is %.17g, the "
                                "interpreter's %.17g\n%s\n",
                                (unsigned long long)seed, widx[i], (long long)e, a, b, text);
                    fail();
                }
            }
            free(got[1 + i]);
        }
        nest_kernel_free(k);
        st->compiled++;
    }
done:
    for (int i = 0; i < np; i++)
        free(args[i]);
    for (int i = 0; i < nw; i++)
        free(res[1 + i]);
    nest_module_free(ml);
    nest_module_free(mg);
    free(text);
}

static void random_graphs(void **state)
{
    (void)state;
    const char *count = getenv("NEST_GRAD_COUNT"), *first = getenv("NEST_GRAD_SEED");
    uint64_t n = count && *count ? strtoull(count, NULL, 10) : 300;
    uint64_t s0 = first && *first ? strtoull(first, NULL, 10) : 1;
    stats st = {0};
    gen_for_gradients = true;
    for (uint64_t s = s0; s < s0 + n; s++)
        check_graph(s, &st);
    print_message("%d graphs, %d gradient elements checked, %d skipped (within h of a jump or "
                  "a kink), %d graphs compiled; %d graphs whose loss depends on a parameter "
                  "through an index (argmax, argmin)\n",
                  st.graphs, st.checked, st.skipped, st.compiled, st.index);
    assert_true(st.checked > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(random_graphs),
        cmocka_unit_test_setup_teardown(test_no_gradient, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_index_gradient, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_pool_ties, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_dense_backward_tiled, fn_setup, fn_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
