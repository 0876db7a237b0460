/*
 * interp_window.c - the reference interpreter's convolution and pooling: direct loops over the
 * definition (window.c), in double for floats, sharing nothing with the compiled forms.
 */
#include <math.h>
#include <stdint.h>

#include "internal.h"

/* A window's geometry with every tensor seen as [N, C, d0, d1, d2]: absent spatial axes have
 * extent 1 and a window of 1. */
typedef struct geom {
    int64_t d[IR_MAX_SPATIAL], o[IR_MAX_SPATIAL], f[IR_MAX_SPATIAL];
    int64_t s[IR_MAX_SPATIAL], dil[IR_MAX_SPATIAL], dd[IR_MAX_SPATIAL], pb[IR_MAX_SPATIAL];
} geom;

static void geom_of(const ir_window *w, const ir_node *x, const ir_node *out, geom *g)
{
    for (int i = 0; i < IR_MAX_SPATIAL; i++) {
        bool on = i < w->nsp;
        g->d[i] = on ? x->shape[2 + i] : 1;
        g->o[i] = on ? out->shape[2 + i] : 1;
        g->f[i] = on ? w->window[i] : 1;
        g->s[i] = on ? w->stride[i] : 1;
        g->dil[i] = on ? w->dilation[i] : 1;
        g->dd[i] = on ? w->data_dilation[i] : 1;
        g->pb[i] = on ? w->pad_below[i] : 0;
    }
}

/* The input index that tap t of output position o reads along axis i, or -1 where the tap
 * falls on padding or between dilated elements. */
static int64_t source(const geom *g, int i, int64_t o, int64_t t)
{
    int64_t v = o * g->s[i] + t * g->dil[i] - g->pb[i];
    if (v < 0 || v % g->dd[i] != 0 || v / g->dd[i] >= g->d[i])
        return -1;
    return v / g->dd[i];
}

/* Where tap t (row-major over the window) of output position o (row-major over an output
 * plane) reads in an input plane, or -1 where it falls on padding or between dilated
 * elements. */
static int64_t tap_source(const geom *g, int64_t o, int64_t t)
{
    int64_t at = 0, stride = 1;
    for (int i = IR_MAX_SPATIAL - 1; i >= 0; i--) {
        int64_t v = source(g, i, o % g->o[i], t % g->f[i]);
        if (v < 0)
            return -1;
        at += v * stride;
        stride *= g->d[i];
        o /= g->o[i];
        t /= g->f[i];
    }
    return at;
}

static double load(int t, const void *p, int64_t i)
{
    switch (t) {
    case NEST_F32: return ((const float *)p)[i];
    case NEST_F64: return ((const double *)p)[i];
    default: return 0;
    }
}

static int64_t load_int(int t, const void *p, int64_t i)
{
    return t == NEST_I32 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

static void store(int t, void *p, int64_t i, double v)
{
    if (t == NEST_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

static void convolution(const ir_node *n, const ir_node *xn, const void *x, const void *w,
                        void *out)
{
    geom g;
    geom_of(n->a.win, xn, n, &g);
    int t = n->etype;
    int64_t N = xn->shape[0], C = xn->shape[1], K = n->shape[1], G = n->a.win->groups;
    int64_t Cg = C / G, Kg = K / G;
    int64_t dsz = g.d[0] * g.d[1] * g.d[2], fsz = g.f[0] * g.f[1] * g.f[2];
    int64_t osz = g.o[0] * g.o[1] * g.o[2], e = 0;
    for (int64_t b = 0; b < N; b++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t o = 0; o < osz; o++) {
                double acc = 0;
                int64_t c0 = k / Kg * Cg;
                for (int64_t ft = 0; ft < fsz; ft++) {
                    int64_t xi = tap_source(&g, o, ft);
                    for (int64_t c = 0; xi >= 0 && c < Cg; c++)
                        acc += load(t, x, (b * C + c0 + c) * dsz + xi) *
                               load(t, w, (k * Cg + c) * fsz + ft);
                }
                store(t, out, e++, acc);
            }
}

/* A pool's taps along axis i that land on x for output index o: [*lo, *hi) (pools have no
 * dilation: tap t reads o * s + t - pb). Only those are visited, so that a window of 2^40 taps
 * that is nearly all padding takes as long as the elements it holds. */
static void pool_taps(const geom *g, int i, int64_t o, int64_t *lo, int64_t *hi)
{
    int64_t first = g->pb[i] - o * g->s[i]; /* the tap that reads element 0 */
    *lo = first > 0 ? first : 0;
    *hi = g->d[i] < g->f[i] - first ? first + g->d[i] : g->f[i];
}

static void pool(const ir_node *n, const ir_node *xn, const void *x, void *out)
{
    geom g;
    geom_of(n->a.win, xn, n, &g);
    int t = n->etype;
    bool max = n->op == OP_MAX_POOL, flt = ir_is_float(t);
    int64_t planes = xn->shape[0] * xn->shape[1];
    int64_t osz = g.o[0] * g.o[1] * g.o[2], e = 0;
    double whole = (double)g.f[0] * (double)g.f[1] * (double)g.f[2];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t o = 0; o < osz; o++, e++) {
            int64_t oi[IR_MAX_SPATIAL], lo[IR_MAX_SPATIAL], hi[IR_MAX_SPATIAL], rest = o;
            for (int i = IR_MAX_SPATIAL - 1; i >= 0; i--) {
                oi[i] = rest % g.o[i];
                rest /= g.o[i];
                pool_taps(&g, i, oi[i], &lo[i], &hi[i]);
            }
            /* floats in double (max: a NaN is never larger, as in nest_max) */
            double acc = max ? -INFINITY : 0;
            int64_t iacc = t == NEST_I32 ? INT32_MIN : INT64_MIN, count = 0;
            for (int64_t t0 = lo[0]; t0 < hi[0]; t0++)
                for (int64_t t1 = lo[1]; t1 < hi[1]; t1++)
                    for (int64_t t2 = lo[2]; t2 < hi[2]; t2++) {
                        int64_t xi = p, tt[IR_MAX_SPATIAL] = {t0, t1, t2};
                        for (int i = 0; i < IR_MAX_SPATIAL; i++)
                            xi = xi * g.d[i] + source(&g, i, oi[i], tt[i]);
                        count++;
                        if (!flt) {
                            int64_t v = load_int(t, x, xi);
                            iacc = v > iacc ? v : iacc;
                        } else if (max) {
                            double v = load(t, x, xi);
                            acc = v > acc ? v : acc;
                        } else {
                            acc += load(t, x, xi);
                        }
                    }
            if (!flt) {
                if (t == NEST_I32)
                    ((int32_t *)out)[e] = (int32_t)iacc;
                else
                    ((int64_t *)out)[e] = iacc;
                continue;
            }
            if (!max)
                acc /= n->a.win->include_pad ? whole : (double)count;
            store(t, out, e, acc);
        }
}

void interp_window(const nest_function *f, const ir_node *n, const void *x, const void *w,
                   void *out)
{
    const ir_node *xn = &f->nodes[ir_resolve(f, n->in[0])];
    if (n->op == OP_CONVOLUTION)
        convolution(n, xn, x, w, out);
    else
        pool(n, xn, x, out);
}
