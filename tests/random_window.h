/*
 * random_window.h - the convolution and pooling steps of the random graph generator
 * (randgraph.c). Included by randgraph.c after the helpers they use (gen, val, info, obtain,
 * bounded, push, splat, binary_info, ew_binary, settle), so that file keeps to its size.
 *
 * A convolution of n terms per output (the group's input channels times the taps) is bounded
 * like a dot of n terms, with 0 in its range (taps on the padding add nothing); a max pool keeps
 * its operand's bounds and error; an average adds the rounding of a sum of the window's size
 * and a division (with the padding counted, 0 joins the range).
 */

/* dilated(n, s) = (n - 1) * s + 1, 0 for n = 0 */
static int64_t rw_dilated(int64_t n, int64_t s) { return n == 0 ? 0 : (n - 1) * s + 1; }

/* A random window over nsp spatial axes of extents d: a convolution's filters or a pool's window
 * f, and strides, dilation, padding below and above, data dilation; the output extents into o.
 * False when the window does not fit. */
static bool rw_window(gen *g, int nsp, bool conv, const int64_t *d, int64_t *f, int64_t *s,
                      int64_t *dil, int64_t *pb, int64_t *pa, int64_t *dd, int64_t *o)
{
    for (int i = 0; i < nsp; i++) {
        f[i] = 1 + below(&g->r, 4);
        s[i] = chance(&g->r, 30) ? 2 + below(&g->r, 2) : 1;
        dil[i] = conv && chance(&g->r, 15) ? 2 : 1;
        dd[i] = conv && chance(&g->r, 10) ? 2 : 1;
        pb[i] = below(&g->r, (int)f[i]);
        pa[i] = below(&g->r, (int)f[i]);
        if (conv && chance(&g->r, 5))
            pb[i] = -1; /* crops */
        if (!conv && d[i] == 0)
            return false;
        int64_t in = rw_dilated(d[i], dd[i]) + pb[i] + pa[i], win = rw_dilated(f[i], dil[i]);
        if (win > in)
            return false;
        o[i] = (in - win) / s[i] + 1;
    }
    return true;
}

/* A convolution (1 or 2 spatial axes, groups now and then, depthwise too), now and then with a
 * bias and a ReLU after it: the element-wise work its store absorbs. */
static bool step_conv(gen *g)
{
    nest_type t = chance(&g->r, 80) ? NEST_F32 : NEST_F64;
    int nsp = 1 + below(&g->r, 2), rank = 2 + nsp;
    int64_t groups = chance(&g->r, 25) ? 1 + below(&g->r, 3) : 1;
    int64_t cg = 1 + below(&g->r, 3), kg = 1 + below(&g->r, g->large ? 20 : 4);
    if (chance(&g->r, 10))
        cg = kg = 1, groups = 1 + below(&g->r, 6); /* depthwise */
    int64_t xs[MAXRANK] = {1 + below(&g->r, 2), groups * cg}, ws[MAXRANK] = {groups * kg, cg};
    int64_t os[MAXRANK] = {xs[0], ws[0]};
    int64_t s[2], dil[2], pb[2], pa[2], dd[2];
    for (int i = 0; i < nsp; i++)
        xs[2 + i] = chance(&g->r, 3) ? 0 : 1 + below(&g->r, g->large ? 24 : 7);
    if (!rw_window(g, nsp, true, xs + 2, ws + 2, s, dil, pb, pa, dd, os + 2))
        return false;
    if (volume(rank, xs) > g->cap || volume(rank, ws) > g->cap || volume(rank, os) > g->cap)
        return false;
    val *x = obtain(g, t, rank, xs, false);
    x = x ? bounded(g, x, 100) : NULL;
    int ix = x ? (int)(x - g->vals) : -1;
    val *w = x ? obtain(g, t, rank, ws, false) : NULL;
    w = w ? bounded(g, w, 100) : NULL;
    if (!w)
        return false;
    x = &g->vals[ix];
    x->uses++, w->uses++;
    info p, r;
    if (!binary_info(O_MULTIPLY, t, &x->in, &w->in, &p))
        return false;
    double n = (double)cg;
    for (int i = 0; i < nsp; i++)
        n *= (double)ws[2 + i];
    r = p;
    r.lo = fmin(n * p.lo, 0);
    r.hi = fmax(n * p.hi, 0);
    r.err = n * p.err + n * n * unit(t) * mag(&p);
    if (!settle(t, &r, p.err == 0))
        return false;
    val *y = push(g, nest_convolution(g->f, x->v, w->v, s, dil, pb, pa, dd, groups), r,
                  "convolution");
    if (!y || chance(&g->r, 40))
        return y != NULL;
    int iy = (int)(y - g->vals);
    val *bias = obtain(g, t, 1, &os[1], false);
    int64_t axes[MAXRANK - 1] = {0, 2, 3};
    val *bb = bias ? push(g, nest_broadcast(g->f, bias->v, rank, os, rank - 1, axes), bias->in,
                          "broadcast of a bias")
                   : NULL;
    val *z = bb ? ew_binary(g, O_ADD, &g->vals[iy], bb) : NULL;
    if (!z || chance(&g->r, 30))
        return z != NULL;
    int iz = (int)(z - g->vals);
    val *zero = splat(g, t, 0, rank, os);
    return zero && ew_binary(g, O_MAXIMUM, &g->vals[iz], zero) != NULL;
}

static bool pool_operand(const val *v) { return isnum(v->t) && v->rank >= 3; }

/* A max pool (any numeric type) or an average pool (floats) of a value of rank 3 or 4. */
static bool step_pool(gen *g)
{
    val *x = chance(&g->r, 60) ? pick(g, pool_operand) : NULL;
    if (!x) {
        int64_t xs[MAXRANK];
        int rank = 3 + below(&g->r, 2);
        rand_shape(g, rank, xs);
        x = obtain(g, chance(&g->r, 70) ? NEST_F32 : rand_type(g), rank, xs, false);
        if (!x || !pool_operand(x))
            return false;
    }
    int ix = (int)(x - g->vals), nsp = x->rank - 2;
    bool avg = isf(x->t) && chance(&g->r, 50), incl = avg && chance(&g->r, 30);
    int64_t f[2], s[2], dil[2], pb[2], pa[2], dd[2], o[2];
    if (!rw_window(g, nsp, false, x->shape + 2, f, s, dil, pb, pa, dd, o))
        return false;
    x = &g->vals[ix];
    x->uses++;
    info r = x->in;
    if (avg) {
        double n = (double)f[0] * (double)(nsp > 1 ? f[1] : 1);
        if (incl) {
            r.lo = fmin(r.lo, 0);
            r.hi = fmax(r.hi, 0);
        }
        r.err = x->in.err + (n + 2) * unit(x->t) * mag(&r);
        if (!settle(x->t, &r, false))
            return false;
        return push(g, nest_avg_pool(g->f, x->v, f, s, pb, pa, incl), r, "avg_pool") != NULL;
    }
    return push(g, nest_max_pool(g->f, x->v, f, s, pb, pa), r, "max_pool") != NULL;
}
