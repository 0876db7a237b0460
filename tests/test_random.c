/*
 * test_random.c - randomized differential testing: seeded random graphs, compiled in process,
 * against the reference interpreter.
 *
 * A generator with its own PRNG builds a function of a few to ~30 ops: element-wise arithmetic
 * and math, comparisons and select, convert, broadcast (new axes anywhere), reshape (transposes,
 * contiguous merges and splits, general reorders), strided slices, concat, sum/max/min over
 * random axes, dot (scaling, vector, matrix), convolution and pooling (random_window.h),
 * constants, tuples, and the op set of real models (random_ops.c: math, logic, product,
 * argmax, pad, reverse, replace_slice, one_hot, gather, softmax, batch_dot, topk); shapes of
 * rank 0 to 4 with small dims (1 and sometimes 0), several results, some column-major
 * parameters and results. Each
 * graph runs through the interpreter (the oracle) and through nest_compile with fusion on, and
 * for every fourth seed with fusion off as well.
 *
 * Tolerances are derived, not guessed. For every value the generator keeps an interval that
 * holds its exact (real-number) elements and a bound on how far any correct evaluation may be
 * from them: floats that hold small multiples of a power of two stay exact through add,
 * subtract, multiply, max, min, sums and dots while they fit the significand (so reassociation
 * and contraction change nothing and they may be compared, converted to integers and selected
 * on); other float ops add their rounding (libm functions a few ulps) and propagate their
 * operands' bounds through the derivative. Ops whose bound would swamp the value (division near
 * zero, exp of large values, cancelling inexact sums) are not generated; operands are reshaped
 * into a safe domain instead (abs + c, exp of bounded values, tanh). Integers wrap identically
 * everywhere and are compared exactly.
 *
 * `make test` runs a few hundred fixed seeds, two graphs of thousands of ops drawn the same way
 * over small values (the passes and the emitter at the size of real models), and the graphs
 * that once failed (kept as text, since any change to the generator changes what a seed builds).
 * `make fuzz` runs NEST_FUZZ_COUNT graphs from seed NEST_FUZZ_SEED (default: the time), printing
 * progress. A failing graph prints
 * its seed and its text form; NEST_FUZZ_SEED=<seed> NEST_FUZZ_COUNT=1 build/tests/test_random
 * reproduces it (NEST_FUZZ_PRINT=1 prints every graph; NEST_FUZZ_FILE=graph.nest runs a text
 * graph, say a reduced one, against the interpreter; NEST_FUZZ_NOFUSE=1 runs every graph with
 * fusion off as well, not every fourth). A crash in that mode names the seed and
 * prints the graph; under cmocka (make test), rerun the failing range that way.
 */
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define MAXRANK 4
#define MAXVALS 16384 /* the graphs of thousands of ops (thousands_of_ops) */
#define MAXPARAMS 10
#define MAXRESULTS 8
#define countof(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- the PRNG (splitmix64) ---- */

typedef struct rng {
    uint64_t s;
    const uint8_t *data; /* under libFuzzer: the input, whose bytes are drawn first */
    size_t left;
} rng;

static uint64_t next(rng *r)
{
    if (r->left) { /* the fuzzer's bytes decide, 8 at a time, while they last */
        uint64_t z = 0;
        size_t k = r->left < 8 ? r->left : 8;
        memcpy(&z, r->data, k);
        r->data += k;
        r->left -= k;
        return z;
    }
    uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int below(rng *r, int n) { return n <= 1 ? 0 : (int)(next(r) % (uint64_t)n); }
static bool chance(rng *r, int percent) { return below(r, 100) < percent; }

/* ---- what the generator knows of a value ---- */

typedef struct info {
    double lo, hi; /* the exact elements lie in [lo, hi] */
    double err;    /* floats: any correct evaluation is within err of the exact elements */
    int q;         /* floats with err 0: every element is a multiple of 2^q */
    bool special;  /* holds infinities (max/min over nothing): returned, never an operand */
} info;

typedef struct val {
    nest_value v;
    nest_type t;
    int rank;
    int64_t shape[MAXRANK];
    int64_t count;
    info in;
    int uses; /* how often the generator took it as an operand */
} val;

/* How the arguments of a parameter are drawn: multiples of 2^q in [lo, hi]. */
typedef struct domain {
    double lo, hi;
    int q;
} domain;

/* The ops the generator builds. */
typedef enum opk {
    O_ADD, O_SUBTRACT, O_MULTIPLY, O_DIVIDE, O_MAXIMUM, O_MINIMUM, O_POWER,
    O_NEGATIVE, O_ABS, O_EXP, O_LOG, O_SQRT, O_TANH,
    O_LESS, O_GREATER, O_EQUAL, O_SUM, O_MAX, O_MIN,
} opk;

enum { C_BINARY, C_UNARY, C_COMPARE, C_CONVERT, C_BROADCAST, C_RESHAPE, C_SLICE, C_CONCAT,
       C_REDUCE, C_DOT, C_CONST, C_TUPLE, C_ROWS, C_DENSE, C_CONV, C_POOL, C_MODEL, C_COUNT };

typedef struct gen {
    rng r;
    nest_function *f;
    val vals[MAXVALS];
    int n;
    domain params[MAXPARAMS];
    int np;
    int weight[C_COUNT];
    int64_t cap;       /* elements of a value at most */
    int maxdim;
    bool large;        /* the large profile: long loops, tiles */
    bool huge;         /* ... and beyond: OpenMP, folds in chunks */
    bool many;         /* thousands of ops: operands mostly values nothing reads yet */
    bool broken;       /* a builder refused an op: a bug of the generator or of the builder */
    char why[512];
    /* the results */
    int nres;
    int res[MAXRESULTS]; /* indexes into vals */
} gen;

static bool isf(nest_type t) { return t == NEST_F32 || t == NEST_F64; }
static bool isnum(nest_type t) { return t != NEST_BOOL; }
static double unit(nest_type t) { return t == NEST_F32 ? 0x1p-24 : 0x1p-53; }
static int prec(nest_type t) { return t == NEST_F32 ? 24 : 53; }
static double mag(const info *in) { return fmax(fabs(in->lo), fabs(in->hi)); }
static bool exact(const val *v) { return v->in.err == 0 && !v->in.special; }

static double int_min(nest_type t)
{
    return t == NEST_I32 ? -0x1p31 : t == NEST_I64 ? -0x1p63 : 0;
}

static double int_max(nest_type t)
{
    return t == NEST_I32 ? 0x1p31 - 1 : t == NEST_I64 ? 0x1p63 : 1;
}

/* Finishes the info of a new value: floats that were exact so far stay exact if they still fit
 * the significand (else they round); integers that may leave their range wrap anywhere in it.
 * Returns false when the value is not worth generating (a float too large or too uncertain). */
static bool settle(nest_type t, info *r, bool was_exact)
{
    if (!isf(t)) {
        if (t != NEST_BOOL && (r->lo < int_min(t) || r->hi > int_max(t) || r->lo != r->lo)) {
            r->lo = int_min(t);
            r->hi = int_max(t);
        }
        r->err = 0;
        r->q = 0;
        return true;
    }
    double m = mag(r);
    if (!(m <= 1e12))
        return false;
    if (was_exact && r->err == 0 && m < ldexp(1.0, r->q + prec(t)))
        return true;
    r->err += unit(t) * m;
    return r->err <= 1e-3 * fmax(m, 1.0);
}

/* ---- shapes ---- */

static int64_t count_of(int rank, const int64_t *shape)
{
    int64_t c = 1;
    for (int k = 0; k < rank; k++)
        c *= shape[k];
    return c;
}

/* Elements of a shape ignoring zero dims: what bounds the work. */
static int64_t volume(int rank, const int64_t *shape)
{
    int64_t c = 1;
    for (int k = 0; k < rank; k++)
        c *= shape[k] ? shape[k] : 1;
    return c;
}

static int64_t rand_dim(gen *g)
{
    if (chance(&g->r, 3))
        return 0;
    if (g->huge && chance(&g->r, 50)) {
        static const int64_t big[] = {64, 333, 1000, 1024, 4099};
        return big[below(&g->r, countof(big))];
    }
    if (g->large && chance(&g->r, 40)) {
        static const int64_t big[] = {16, 33, 64, 100, 128, 257};
        return big[below(&g->r, countof(big))];
    }
    if (chance(&g->r, 20))
        return 1;
    return 1 + below(&g->r, g->maxdim);
}

static void rand_shape(gen *g, int rank, int64_t *shape)
{
    for (int tries = 0;; tries++) {
        for (int k = 0; k < rank; k++)
            shape[k] = rand_dim(g);
        if (volume(rank, shape) <= g->cap)
            return;
        if (tries > 20)
            for (int k = 0; k < rank; k++)
                shape[k] = 1 + (k == 0);
    }
}

/* ---- building ---- */

static val *push(gen *g, nest_value v, info in, const char *what)
{
    if (v < 0 || g->n == MAXVALS) {
        if (!g->broken)
            snprintf(g->why, sizeof g->why, "building %s: %s", what,
                     v < 0 ? nest_errmsg(g->f) : "too many values");
        g->broken = true;
        return NULL;
    }
    val *x = &g->vals[g->n++];
    x->v = v;
    x->t = (nest_type)nest_value_type(g->f, v);
    x->rank = nest_value_rank(g->f, v);
    assert_true(x->rank <= MAXRANK);
    const int64_t *s = nest_value_shape(g->f, v);
    for (int k = 0; k < x->rank; k++)
        x->shape[k] = s[k];
    x->count = count_of(x->rank, x->shape);
    x->in = in;
    x->uses = 0;
    return x;
}

static domain rand_domain(gen *g, nest_type t)
{
    switch (t) {
    case NEST_F32:
    case NEST_F64:
        switch (below(&g->r, 4)) {
        case 0: return (domain){0.25, 4, -2};
        case 1: return (domain){-2, 2, -6};
        default: return (domain){-4, 4, -2};
        }
    case NEST_I32:
        switch (below(&g->r, 5)) {
        case 0: return (domain){-100000, 100000, 0};
        case 1: return (domain){-3, 3, 0};
        default: return (domain){-20, 20, 0};
        }
    case NEST_I64:
        switch (below(&g->r, 5)) {
        case 0: return (domain){-3e9, 3e9, 0};
        case 1: return (domain){-3, 3, 0};
        default: return (domain){-20, 20, 0};
        }
    case NEST_BOOL:
        return (domain){0, 1, 0};
    }
    return (domain){0, 0, 0};
}

/* A draw from a domain: a multiple of 2^q in [lo, hi]. */
static double draw(rng *r, const domain *d)
{
    double step = ldexp(1.0, d->q);
    int64_t n = (int64_t)floor((d->hi - d->lo) / step);
    return d->lo + step * (double)(int64_t)(next(r) % (uint64_t)(n + 1));
}

static void store_elem(nest_type t, void *p, int64_t i, double x)
{
    switch (t) {
    case NEST_F32: ((float *)p)[i] = (float)x; break;
    case NEST_F64: ((double *)p)[i] = x; break;
    case NEST_I32: ((int32_t *)p)[i] = (int32_t)x; break;
    case NEST_I64: ((int64_t *)p)[i] = (int64_t)x; break;
    case NEST_BOOL: ((uint8_t *)p)[i] = x != 0; break;
    }
}

static val *new_param(gen *g, nest_type t, int rank, const int64_t *shape)
{
    if (g->np == MAXPARAMS)
        return NULL;
    char name[16];
    snprintf(name, sizeof name, "p%d", g->np);
    nest_layout layout = rank >= 2 && chance(&g->r, 25) ? NEST_COL_MAJOR : NEST_ROW_MAJOR;
    domain d = rand_domain(g, t);
    g->params[g->np++] = d;
    return push(g, nest_parameter(g->f, name, t, rank, shape, layout),
                (info){d.lo, d.hi, 0, d.q, false}, "a parameter");
}

static val *new_const(gen *g, nest_type t, int rank, const int64_t *shape)
{
    int64_t n = chance(&g->r, 60) ? 1 : count_of(rank, shape);
    if (n == 0)
        n = 1;
    domain d = rand_domain(g, t);
    void *data = malloc((size_t)n * 8);
    assert_non_null(data);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double x = draw(&g->r, &d);
        store_elem(t, data, i, x);
        lo = fmin(lo, x);
        hi = fmax(hi, x);
    }
    val *v = push(g, nest_constant(g->f, t, rank, shape, data, n), (info){lo, hi, 0, d.q, false},
                  "a constant");
    free(data);
    return v;
}

/* A scalar constant broadcast to a shape (or the scalar itself). */
static val *splat(gen *g, nest_type t, double x, int rank, const int64_t *shape)
{
    void *data = malloc(8);
    assert_non_null(data);
    store_elem(t, data, 0, x);
    nest_value c = nest_constant(g->f, t, 0, NULL, data, 1);
    free(data);
    info in = {x, x, 0, -2, false};
    if (rank == 0)
        return push(g, c, in, "a scalar constant");
    int64_t axes[MAXRANK];
    for (int k = 0; k < rank; k++)
        axes[k] = k;
    return push(g, nest_broadcast(g->f, c, rank, shape, rank, axes), in, "a broadcast constant");
}

/* A random operand, never a special one (`ok` filters): mostly a value nothing uses yet, so
 * that chains grow deep and little of the graph is dead; else a recent one or any (which makes
 * values with several consumers). */
static val *pick(gen *g, bool (*ok)(const val *))
{
    int cand[MAXVALS], n = 0, fresh[MAXVALS], nf = 0;
    for (int i = 0; i < g->n; i++)
        if (!g->vals[i].in.special && (!ok || ok(&g->vals[i]))) {
            cand[n++] = i;
            if (g->vals[i].uses == 0 && i >= g->np)
                fresh[nf++] = i;
        }
    if (n == 0)
        return NULL;
    val *v;
    int x = below(&g->r, 100);
    if (nf > 0 && x < (g->many ? 80 : 55))
        v = &g->vals[fresh[nf - 1 - below(&g->r, nf < 3 ? nf : 3)]];
    else if (n > 4 && x < 75)
        v = &g->vals[cand[n - 1 - below(&g->r, 4)]];
    else
        v = &g->vals[cand[below(&g->r, n)]];
    v->uses++;
    return v;
}

static bool same_shape(const val *v, int rank, const int64_t *shape)
{
    if (v->rank != rank)
        return false;
    for (int k = 0; k < rank; k++)
        if (v->shape[k] != shape[k])
            return false;
    return true;
}

static val *ew_unary(gen *g, opk op, val *a);
static val *ew_binary(gen *g, opk op, val *a, val *b);
static val *convert(gen *g, val *a, nest_type to);

/* Whether convert(v, to) is deterministic: to integers and bool only from exact values. */
static bool convertible(const val *v, nest_type to)
{
    if (v->in.special)
        return false;
    if (!isf(to) && isf(v->t))
        return exact(v);
    if (to == NEST_BOOL)
        return exact(v);
    return true;
}

/* A value of type t and the given shape (exact if need_exact): an existing one, or made from
 * one by broadcast, reshape, slice or convert, or a new parameter or constant. */
static val *obtain(gen *g, nest_type t, int rank, const int64_t *shape, bool need_exact)
{
    int64_t cnt = count_of(rank, shape);
    for (int attempt = 0; attempt < 8 && !g->broken; attempt++) {
        int strategy = below(&g->r, 7);
        int cand[MAXVALS], n = 0;
        for (int i = 0; i < g->n; i++) {
            const val *v = &g->vals[i];
            if (v->in.special || (need_exact && !exact(v)))
                continue;
            bool take = false;
            switch (strategy) {
            case 0:
            case 1: take = v->t == t && same_shape(v, rank, shape); break;
            case 2: take = v->t == t && v->rank < rank; break;
            case 3: take = v->t == t && v->count == cnt && v->rank <= MAXRANK; break;
            case 4: {
                take = v->t == t && v->rank == rank && rank > 0;
                for (int k = 0; take && k < rank; k++)
                    take = v->shape[k] >= shape[k];
                break;
            }
            case 5: take = v->t != t && same_shape(v, rank, shape) && convertible(v, t); break;
            default: break;
            }
            if (take)
                cand[n++] = i;
        }
        if (strategy == 6) {
            val *p = chance(&g->r, 50) ? new_param(g, t, rank, shape) : NULL;
            return p ? p : new_const(g, t, rank, shape);
        }
        if (n == 0)
            continue;
        val *v = &g->vals[cand[below(&g->r, n)]];
        v->uses++;
        switch (strategy) {
        case 0:
        case 1:
            return v;
        case 2: { /* broadcast: v's axes are a subsequence of the shape */
            int subsets[64], ns = 0;
            for (int m = 0; m < (1 << rank); m++) {
                if (__builtin_popcount((unsigned)m) != v->rank)
                    continue;
                bool fits = true;
                for (int k = 0, j = 0; k < rank && fits; k++)
                    if (m & (1 << k))
                        fits = shape[k] == v->shape[j++];
                if (fits)
                    subsets[ns++] = m;
            }
            if (ns == 0)
                continue;
            int m = subsets[below(&g->r, ns)];
            int64_t axes[MAXRANK];
            int na = 0;
            for (int k = 0; k < rank; k++)
                if (!(m & (1 << k)))
                    axes[na++] = k;
            /* list the new axes in a random order: any order is valid */
            for (int k = na - 1; k > 0; k--) {
                int j = below(&g->r, k + 1);
                int64_t tmp = axes[k];
                axes[k] = axes[j];
                axes[j] = tmp;
            }
            return push(g, nest_broadcast(g->f, v->v, rank, shape, na, axes), v->in, "broadcast");
        }
        case 3: { /* reshape with a random order */
            int64_t order[MAXRANK];
            for (int k = 0; k < v->rank; k++)
                order[k] = k;
            if (chance(&g->r, 50))
                for (int k = v->rank - 1; k > 0; k--) {
                    int j = below(&g->r, k + 1);
                    int64_t tmp = order[k];
                    order[k] = order[j];
                    order[j] = tmp;
                }
            return push(g, nest_reshape(g->f, v->v, chance(&g->r, 20) ? NULL : order, rank, shape),
                        v->in, "reshape");
        }
        case 4: { /* a strided slice with exactly the shape */
            int64_t lo[MAXRANK], up[MAXRANK], st[MAXRANK];
            for (int k = 0; k < rank; k++) {
                int64_t d = v->shape[k], want = shape[k];
                int64_t s = 1 + below(&g->r, 3);
                while (s > 1 && (want - 1) * s + 1 > d)
                    s--;
                if (want == 0) {
                    lo[k] = up[k] = below(&g->r, (int)d + 1);
                } else {
                    int64_t span = (want - 1) * s + 1;
                    lo[k] = below(&g->r, (int)(d - span) + 1);
                    int64_t umax = lo[k] + want * s < d ? lo[k] + want * s : d;
                    up[k] = lo[k] + span + below(&g->r, (int)(umax - lo[k] - span) + 1);
                }
                st[k] = s;
            }
            bool unit_steps = true;
            for (int k = 0; k < rank; k++)
                unit_steps &= st[k] == 1;
            return push(g, nest_slice(g->f, v->v, lo, up, unit_steps && chance(&g->r, 50) ? NULL : st),
                        v->in, "slice");
        }
        case 5:
            return convert(g, v, t);
        }
    }
    if (g->broken)
        return NULL;
    val *p = chance(&g->r, 50) ? new_param(g, t, rank, shape) : NULL;
    return p ? p : new_const(g, t, rank, shape);
}

/* ---- the ops, with their infos ---- */

static void corners(double a0, double a1, double b0, double b1, double (*f)(double, double),
                    double *lo, double *hi)
{
    double c[4] = {f(a0, b0), f(a0, b1), f(a1, b0), f(a1, b1)};
    *lo = fmin(fmin(c[0], c[1]), fmin(c[2], c[3]));
    *hi = fmax(fmax(c[0], c[1]), fmax(c[2], c[3]));
}

static double mul_d(double a, double b) { return a * b; }
static double div_d(double a, double b) { return a / b; }

/* The info of a elementwise-op b (same type); false: not worth generating. */
static bool binary_info(opk op, nest_type t, const info *a, const info *b, info *r)
{
    bool ex = a->err == 0 && b->err == 0;
    double u = unit(t), ma = mag(a), mb = mag(b);
    *r = (info){0, 0, 0, a->q < b->q ? a->q : b->q, false};
    switch (op) {
    case O_ADD:
        r->lo = a->lo + b->lo, r->hi = a->hi + b->hi;
        r->err = a->err + b->err;
        break;
    case O_SUBTRACT:
        r->lo = a->lo - b->hi, r->hi = a->hi - b->lo;
        r->err = a->err + b->err;
        break;
    case O_MULTIPLY:
        corners(a->lo, a->hi, b->lo, b->hi, mul_d, &r->lo, &r->hi);
        r->err = ma * b->err + mb * a->err + a->err * b->err;
        r->q = a->q + b->q;
        break;
    case O_MAXIMUM:
        r->lo = fmax(a->lo, b->lo), r->hi = fmax(a->hi, b->hi);
        r->err = fmax(a->err, b->err);
        break;
    case O_MINIMUM:
        r->lo = fmin(a->lo, b->lo), r->hi = fmin(a->hi, b->hi);
        r->err = fmax(a->err, b->err);
        break;
    case O_DIVIDE:
        if (!isf(t)) {
            r->lo = -ma, r->hi = ma;
            break;
        }
        {
            double bmin = b->lo > 0 ? b->lo : -b->hi; /* |b| at least */
            if (!(b->lo >= 0.25 || b->hi <= -0.25) || b->err > 0.1 * bmin)
                return false;
            corners(a->lo, a->hi, b->lo, b->hi, div_d, &r->lo, &r->hi);
            r->err = (a->err + mag(r) * b->err) / (bmin - b->err);
            ex = false;
        }
        break;
    case O_POWER:
        if (!isf(t)) {
            if (b->lo >= 0 && b->hi <= 6 && ma <= 100) {
                double m = pow(ma, b->hi) + 1;
                r->lo = -m, r->hi = m;
            } else {
                r->lo = int_min(t), r->hi = int_max(t);
            }
            break;
        }
        if (!(a->lo >= 0.25) || a->err > 0.1 * a->lo || mb > 3)
            return false;
        corners(a->lo, a->hi, b->lo, b->hi, pow, &r->lo, &r->hi);
        r->err = mag(r) * (mb * a->err / (a->lo - a->err) +
                           fmax(fabs(log(a->lo)), fabs(log(a->hi))) * b->err) * 1.1 +
                 8 * u * mag(r);
        ex = false;
        break;
    default:
        return false;
    }
    if (!ex && isf(t))
        r->err += u * mag(r);
    return settle(t, r, ex);
}

static bool unary_info(opk op, nest_type t, const info *a, info *r)
{
    double u = unit(t);
    bool ex = a->err == 0;
    *r = *a;
    switch (op) {
    case O_NEGATIVE:
        r->lo = -a->hi, r->hi = -a->lo;
        break;
    case O_ABS:
        r->lo = a->lo >= 0 ? a->lo : a->hi <= 0 ? -a->hi : 0;
        r->hi = mag(a);
        break;
    case O_EXP:
        if (a->hi > (t == NEST_F32 ? 12 : 30) || a->err > 0.1)
            return false;
        r->lo = exp(a->lo), r->hi = exp(a->hi);
        r->err = exp(a->hi) * a->err * 1.2 + 8 * u * r->hi;
        ex = false;
        break;
    case O_LOG:
        if (!(a->lo >= 0.25) || a->err > 0.1 * a->lo)
            return false;
        r->lo = log(a->lo), r->hi = log(a->hi);
        r->err = a->err / (a->lo - a->err) + 8 * u * mag(r);
        ex = false;
        break;
    case O_SQRT:
        if (!(a->lo >= 0) || (a->err > 0 && (a->lo < 0.25 || a->err > 0.1 * a->lo)))
            return false;
        r->lo = sqrt(a->lo), r->hi = sqrt(a->hi);
        r->err = (a->err > 0 ? a->err / (2 * sqrt(a->lo - a->err)) : 0) + u * r->hi;
        ex = false;
        break;
    case O_TANH:
        r->lo = tanh(a->lo), r->hi = tanh(a->hi);
        r->err = a->err + 8 * u;
        ex = false;
        break;
    default:
        return false;
    }
    return settle(t, r, ex);
}

static val *ew_binary(gen *g, opk op, val *a, val *b)
{
    info r;
    if (!binary_info(op, a->t, &a->in, &b->in, &r))
        return NULL;
    static nest_value (*const build[])(nest_function *, nest_value, nest_value) = {
        [O_ADD] = nest_add, [O_SUBTRACT] = nest_subtract, [O_MULTIPLY] = nest_multiply,
        [O_DIVIDE] = nest_divide, [O_MAXIMUM] = nest_maximum, [O_MINIMUM] = nest_minimum,
        [O_POWER] = nest_power,
    };
    a->uses++, b->uses++;
    return push(g, build[op](g->f, a->v, b->v), r, "an element-wise binary op");
}

static val *ew_unary(gen *g, opk op, val *a)
{
    info r;
    if (!unary_info(op, a->t, &a->in, &r))
        return NULL;
    static nest_value (*const build[])(nest_function *, nest_value) = {
        [O_NEGATIVE] = nest_negative, [O_ABS] = nest_abs, [O_EXP] = nest_exp,
        [O_LOG] = nest_log, [O_SQRT] = nest_sqrt, [O_TANH] = nest_tanh,
    };
    a->uses++;
    return push(g, build[op](g->f, a->v), r, "an element-wise unary op");
}

/* a turned into a float value with elements at least 0.25 (for log, sqrt, pow, divide). */
static val *positive(gen *g, val *a)
{
    if (a->in.lo >= 0.25 && a->in.err <= 0.1 * a->in.lo)
        return a;
    int how = below(&g->r, 3);
    if (how == 0 && a->in.lo >= -1 && a->in.hi <= 4 && a->in.err <= 0.01)
        return ew_unary(g, O_EXP, a); /* exp of something bounded */
    if (how <= 1) { /* abs(a) + c */
        val *ab = ew_unary(g, O_ABS, a);
        val *c = ab ? splat(g, a->t, 0.25 * (2 + below(&g->r, 6)), a->rank, a->shape) : NULL;
        return c ? ew_binary(g, O_ADD, ab, c) : NULL;
    }
    /* maximum(a, c) */
    int ia = (int)(a - g->vals);
    val *c = obtain(g, a->t, a->rank, a->shape, false);
    if (!c || c->in.lo < 0.25 || c->in.err > 0.1 * c->in.lo)
        c = splat(g, a->t, 0.25 * (1 + below(&g->r, 8)), a->rank, a->shape);
    return c ? ew_binary(g, O_MAXIMUM, &g->vals[ia], c) : NULL;
}

/* a squeezed into [-1, 1] when it is large. */
static val *bounded(gen *g, val *a, double limit)
{
    if (mag(&a->in) <= limit)
        return a;
    return ew_unary(g, O_TANH, a);
}

static val *convert(gen *g, val *a, nest_type to)
{
    if (!convertible(a, to))
        return NULL;
    info r = a->in;
    bool ex = a->in.err == 0;
    if (a->t == NEST_BOOL) {
        r = (info){0, 1, 0, 0, false};
    } else if (to == NEST_BOOL) {
        r = (info){0, 1, 0, 0, false};
    } else if (isf(to) && !isf(a->t)) {
        r.q = 0;
    } else if (!isf(to) && isf(a->t)) {
        r.lo = fmax(fmin(trunc(a->in.lo), int_max(to)), int_min(to));
        r.hi = fmax(fmin(trunc(a->in.hi), int_max(to)), int_min(to));
        r.q = 0;
    }
    if (!settle(to, &r, ex))
        return NULL;
    a->uses++;
    return push(g, nest_convert(g->f, a->v, to), r, "convert");
}

static nest_type rand_type(gen *g)
{
    static const nest_type types[] = {NEST_F32, NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_F32,
                                      NEST_F64, NEST_I32, NEST_BOOL};
    return types[below(&g->r, countof(types))];
}

static bool is_numeric_val(const val *v) { return isnum(v->t); }
static bool is_float_val(const val *v) { return isf(v->t); }
static bool is_exact_val(const val *v) { return exact(v); }
static bool is_exact_numeric(const val *v) { return exact(v) && isnum(v->t); }
static bool has_axes(const val *v) { return v->rank > 0; }
static bool below_max_rank(const val *v) { return v->rank < MAXRANK; }
static bool dot_operand(const val *v) { return isnum(v->t) && v->rank <= 2; }

static bool step_binary(gen *g)
{
    static const opk ops[] = {O_ADD, O_ADD, O_SUBTRACT, O_SUBTRACT, O_MULTIPLY,
                                O_MULTIPLY, O_DIVIDE, O_MAXIMUM, O_MINIMUM, O_POWER};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, is_numeric_val);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *b = obtain(g, a->t, a->rank, a->shape, false);
    a = &g->vals[ia];
    if (!b)
        return false;
    int ib = (int)(b - g->vals);
    if (isf(a->t) && op == O_DIVIDE) {
        b = positive(g, b);
        if (b && chance(&g->r, 30))
            b = ew_unary(g, O_NEGATIVE, b);
    } else if (isf(a->t) && op == O_POWER) {
        val *base = positive(g, a);
        if (!base)
            return false;
        ia = (int)(base - g->vals);
        b = bounded(g, &g->vals[ib], 3);
    } else if (isf(a->t) && op == O_MULTIPLY) {
        a = bounded(g, a, 1e4);
        ia = a ? (int)(a - g->vals) : -1;
        b = a ? bounded(g, &g->vals[ib], 1e4) : NULL;
    }
    if (!b || ia < 0)
        return false;
    a = &g->vals[ia];
    return chance(&g->r, 50) || op == O_DIVIDE || op == O_POWER || op == O_SUBTRACT
               ? ew_binary(g, op, a, b) != NULL
               : ew_binary(g, op, b, a) != NULL;
}

static bool step_unary(gen *g)
{
    static const opk ops[] = {O_NEGATIVE, O_ABS, O_EXP, O_LOG, O_SQRT, O_TANH};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, op == O_NEGATIVE || op == O_ABS ? is_numeric_val : is_float_val);
    if (!a)
        return false;
    if (op == O_LOG || (op == O_SQRT && (a->in.lo < 0 || a->in.err > 0)))
        a = positive(g, a);
    else if (op == O_EXP)
        a = bounded(g, a, 4);
    return a && ew_unary(g, op, a) != NULL;
}

static bool step_compare(gen *g)
{
    static const opk ops[] = {O_LESS, O_GREATER, O_EQUAL};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, op == O_EQUAL ? is_exact_val : is_exact_numeric);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *b = obtain(g, a->t, a->rank, a->shape, true);
    a = &g->vals[ia];
    if (!b || !exact(b))
        return false;
    nest_value c = op == O_LESS      ? nest_less(g->f, a->v, b->v)
                   : op == O_GREATER ? nest_greater(g->f, a->v, b->v)
                                      : nest_equal(g->f, a->v, b->v);
    b->uses++;
    val *cv = push(g, c, (info){0, 1, 0, 0, false}, "a comparison");
    if (!cv || chance(&g->r, 25))
        return cv != NULL;
    int ic = (int)(cv - g->vals);
    nest_type t = chance(&g->r, 50) ? a->t : rand_type(g);
    val *x = obtain(g, t, cv->rank, cv->shape, false);
    int ix = x ? (int)(x - g->vals) : -1;
    val *y = x ? obtain(g, t, cv->rank, cv->shape, false) : NULL;
    if (!y)
        return false;
    x = &g->vals[ix];
    cv = &g->vals[ic];
    info r = {fmin(x->in.lo, y->in.lo), fmax(x->in.hi, y->in.hi), fmax(x->in.err, y->in.err),
              x->in.q < y->in.q ? x->in.q : y->in.q, false};
    x->uses++, y->uses++, cv->uses++;
    return push(g, nest_select(g->f, cv->v, x->v, y->v), r, "select") != NULL;
}

static bool step_convert(gen *g)
{
    val *a = pick(g, NULL);
    if (!a)
        return false;
    nest_type to = rand_type(g);
    if (!convertible(a, to))
        to = chance(&g->r, 50) ? NEST_F64 : NEST_F32;
    return convert(g, a, to) != NULL;
}

static bool step_broadcast(gen *g)
{
    val *a = pick(g, below_max_rank);
    if (!a)
        return false;
    int rank = a->rank + 1 + below(&g->r, MAXRANK - a->rank);
    int64_t shape[MAXRANK], axes[MAXRANK];
    int na = 0;
    /* choose which output axes are new */
    uint32_t mask = 0;
    while (__builtin_popcount(mask) < rank - a->rank)
        mask |= 1u << below(&g->r, rank);
    for (int tries = 0; tries < 10; tries++) {
        na = 0;
        for (int k = 0, j = 0; k < rank; k++) {
            if (mask & (1u << k)) {
                shape[k] = rand_dim(g);
                axes[na++] = k;
            } else {
                shape[k] = a->shape[j++];
            }
        }
        if (volume(rank, shape) <= g->cap)
            return push(g, nest_broadcast(g->f, a->v, rank, shape, na, axes), a->in,
                        "broadcast") != NULL;
    }
    return false;
}

/* Random dims with the given product (count > 0). */
static bool factor(gen *g, int64_t count, int rank, int64_t *shape)
{
    if (rank == 0)
        return count == 1;
    int64_t rest = count;
    for (int k = 0; k < rank - 1; k++) {
        int64_t divs[64];
        int nd = 0;
        for (int64_t d = 1; d <= rest && nd < 64; d++)
            if (rest % d == 0)
                divs[nd++] = d;
        shape[k] = divs[below(&g->r, nd)];
        rest /= shape[k];
    }
    shape[rank - 1] = rest;
    /* shuffle so that the large remainder is not always last */
    for (int k = rank - 1; k > 0; k--) {
        int j = below(&g->r, k + 1);
        int64_t t = shape[k];
        shape[k] = shape[j];
        shape[j] = t;
    }
    return true;
}

static bool step_reshape(gen *g)
{
    val *a = pick(g, NULL);
    if (!a)
        return false;
    int64_t order[MAXRANK], shape[MAXRANK];
    int rank = a->rank;
    for (int k = 0; k < a->rank; k++)
        order[k] = k;
    int mode = below(&g->r, 3);
    if (mode == 0 && a->rank >= 2) { /* a transpose */
        for (int k = a->rank - 1; k > 0; k--) {
            int j = below(&g->r, k + 1);
            int64_t t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        for (int k = 0; k < rank; k++)
            shape[k] = a->shape[order[k]];
    } else if (mode == 1) { /* contiguous: merge two adjacent dims or split one */
        memcpy(shape, a->shape, sizeof shape);
        if (a->rank >= 2 && (a->rank == MAXRANK || chance(&g->r, 50))) {
            int k = below(&g->r, a->rank - 1);
            shape[k] *= shape[k + 1];
            memmove(&shape[k + 1], &shape[k + 2], (size_t)(a->rank - k - 2) * sizeof *shape);
            rank--;
        } else if (a->rank < MAXRANK) {
            int k = a->rank ? below(&g->r, a->rank) : 0;
            int64_t d = a->rank ? a->shape[k] : 1, f = 1;
            for (int64_t x = 2; x <= d; x++)
                if (d % x == 0 && chance(&g->r, 50)) {
                    f = x;
                    break;
                }
            memmove(&shape[k + 1], &shape[k], (size_t)(a->rank - k) * sizeof *shape);
            shape[k] = f;
            shape[k + 1] = a->rank ? d / f : 1;
            rank++;
        }
    } else { /* any order, any shape of the same count */
        for (int k = a->rank - 1; k > 0; k--) {
            int j = below(&g->r, k + 1);
            int64_t t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        rank = below(&g->r, MAXRANK + 1);
        if (a->count == 0) {
            if (rank == 0)
                rank = 1;
            for (int k = 0; k < rank; k++)
                shape[k] = 1 + below(&g->r, 3);
            shape[below(&g->r, rank)] = 0;
        } else if (!factor(g, a->count, rank, shape)) {
            rank = 1;
            shape[0] = a->count;
        }
    }
    bool identity = true;
    for (int k = 0; k < a->rank; k++)
        identity &= order[k] == k;
    return push(g, nest_reshape(g->f, a->v, identity && chance(&g->r, 50) ? NULL : order, rank,
                                shape),
                a->in, "reshape") != NULL;
}

static bool step_slice(gen *g)
{
    val *a = pick(g, has_axes);
    if (!a)
        return false;
    int64_t lo[MAXRANK], up[MAXRANK], st[MAXRANK];
    for (int k = 0; k < a->rank; k++) {
        int64_t d = a->shape[k];
        if (chance(&g->r, 30)) { /* the whole axis */
            lo[k] = 0, up[k] = d, st[k] = 1;
            continue;
        }
        lo[k] = below(&g->r, (int)d + 1);
        up[k] = lo[k] + below(&g->r, (int)(d - lo[k]) + 1);
        if (up[k] == lo[k] && d > 0 && chance(&g->r, 80)) /* empty slices now and then */
            up[k] = d, lo[k] = below(&g->r, (int)d);
        st[k] = 1 + below(&g->r, 3);
    }
    bool unit_steps = true;
    for (int k = 0; k < a->rank; k++)
        unit_steps &= st[k] == 1;
    return push(g, nest_slice(g->f, a->v, lo, up, unit_steps && chance(&g->r, 50) ? NULL : st),
                a->in, "slice") != NULL;
}

/* A concat along axis of the values at idx. */
static val *concat_of(gen *g, const int *idx, int nparts, int axis)
{
    nest_value parts[3];
    info r = g->vals[idx[0]].in;
    for (int i = 0; i < nparts; i++) {
        val *p = &g->vals[idx[i]];
        p->uses++;
        parts[i] = p->v;
        r.lo = fmin(r.lo, p->in.lo);
        r.hi = fmax(r.hi, p->in.hi);
        r.err = fmax(r.err, p->in.err);
        r.q = r.q < p->in.q ? r.q : p->in.q;
    }
    return push(g, nest_concat(g->f, nparts, parts, axis), r, "concat");
}

/* A part of a concat: now and then a concat itself along the same axis, whose boundaries the
 * outer one shifts when it selects its parts. */
static val *part_of(gen *g, nest_type t, int rank, const int64_t *shape, int axis)
{
    if (shape[axis] >= 2 && chance(&g->r, 30)) {
        int64_t s1[MAXRANK], s2[MAXRANK];
        memcpy(s1, shape, sizeof s1);
        memcpy(s2, shape, sizeof s2);
        s1[axis] = 1 + below(&g->r, (int)shape[axis] - 1);
        s2[axis] = shape[axis] - s1[axis];
        val *x = obtain(g, t, rank, s1, false);
        int idx[2] = {x ? (int)(x - g->vals) : -1, -1};
        val *y = x ? obtain(g, t, rank, s2, false) : NULL;
        if (!y)
            return NULL;
        idx[1] = (int)(y - g->vals);
        return concat_of(g, idx, 2, axis);
    }
    return obtain(g, t, rank, shape, false);
}

static bool step_concat(gen *g)
{
    val *a = pick(g, has_axes);
    if (!a)
        return false;
    int axis = below(&g->r, a->rank), nparts = 2 + (chance(&g->r, 30) ? 1 : 0);
    int idx[3];
    idx[0] = (int)(a - g->vals);
    for (int i = 1; i < nparts; i++) {
        int64_t shape[MAXRANK];
        memcpy(shape, g->vals[idx[0]].shape, sizeof shape);
        shape[axis] = chance(&g->r, 10) ? 0 : 1 + below(&g->r, g->maxdim);
        int64_t vol = volume(g->vals[idx[0]].rank, shape);
        if (vol > g->cap / 3)
            shape[axis] = 1;
        val *p = part_of(g, g->vals[idx[0]].t, g->vals[idx[0]].rank, shape, axis);
        if (!p)
            return false;
        idx[i] = (int)(p - g->vals);
    }
    /* a random position for the first part */
    int pos = below(&g->r, nparts), t = idx[0];
    idx[0] = idx[pos];
    idx[pos] = t;
    return concat_of(g, idx, nparts, axis) != NULL;
}

/* op (O_SUM, O_MAX or O_MIN) of a over the axes of its own where all, else over a random few. */
static val *reduce_val(gen *g, opk op, val *a, bool all)
{
    int64_t axes[MAXRANK];
    int na = 0;
    double n = 1;
    for (int k = 0; k < a->rank; k++)
        if (all || chance(&g->r, 50)) {
            axes[na++] = k;
            n *= (double)a->shape[k];
        }
    info r = a->in;
    nest_type t = a->t;
    if (op == O_SUM) {
        r.lo = n == 0 ? 0 : fmin(n * a->in.lo, a->in.lo);
        r.hi = n == 0 ? 0 : fmax(n * a->in.hi, a->in.hi);
        if (isf(t))
            r.err = n * a->in.err + (n > 1 ? n * n * unit(t) * mag(&a->in) : 0);
        if (!settle(t, &r, a->in.err == 0))
            return NULL;
    } else if (n == 0) {
        if (isf(t))
            r = (info){-INFINITY, INFINITY, 0, 0, true};
        else
            r = (info){int_min(t), int_max(t), 0, 0, false};
    }
    nest_value v = op == O_SUM   ? nest_sum(g->f, a->v, na, axes)
                   : op == O_MAX ? nest_max(g->f, a->v, na, axes)
                                  : nest_min(g->f, a->v, na, axes);
    a->uses++;
    return push(g, v, r, "a reduction");
}

static bool step_reduce(gen *g)
{
    static const opk ops[] = {O_SUM, O_SUM, O_MAX, O_MIN};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, is_numeric_val);
    if (!a)
        return false;
    a->uses--; /* pick counted the use reduce_val() counts */
    return reduce_val(g, op, a, chance(&g->r, 25)) != NULL;
}

/* The values nothing reads (numbers, not the parameters), each summed to a scalar in f64, added
 * up: the graph's root, which every such value reaches (else a graph of thousands of ops is
 * mostly dead code). Values too large are squeezed by tanh first. NULL if there are none. */
static val *gather_leaves(gen *g)
{
    int last = g->n, acc = -1;
    for (int i = g->np; i < last && !g->broken; i++) {
        val *v = &g->vals[i];
        if (v->uses != 0 || v->in.special || !isnum(v->t) || v->count == 0 || v->count > 1 << 16)
            continue;
        val *s = reduce_val(g, O_SUM, v, true);
        val *d = s ? convert(g, s, NEST_F64) : NULL;
        val *b = d ? bounded(g, d, 1e6) : NULL;
        if (!b)
            continue;
        if (acc < 0) {
            acc = (int)(b - g->vals);
            continue;
        }
        val *sum = ew_binary(g, O_ADD, &g->vals[acc], b);
        if (sum)
            acc = (int)(sum - g->vals);
    }
    return acc >= 0 && !g->broken ? &g->vals[acc] : NULL;
}

static val *make_dot(gen *g, int ia, int ib, double n, bool swap);

static bool step_dot(gen *g)
{
    val *a = pick(g, dot_operand);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    nest_type t = a->t;
    int64_t shape[MAXRANK];
    int rank;
    double n = 1;
    if (a->rank == 0) { /* scaling */
        rank = below(&g->r, 3);
        rand_shape(g, rank, shape);
    } else {
        int64_t k = a->shape[a->rank - 1];
        n = (double)k;
        rank = chance(&g->r, 50) ? 1 : 2;
        shape[0] = k;
        if (rank == 2) {
            shape[1] = rand_dim(g);
            if (volume(a->rank, a->shape) * (shape[1] ? shape[1] : 1) > g->cap)
                shape[1] = 1;
        }
        if (chance(&g->r, 10)) /* the tensor on the left, the scalar on the right */
            rank = 0;
    }
    if (a->rank > 0 && rank == 0)
        n = 1;
    val *b = obtain(g, t, rank, shape, false);
    if (!b)
        return false;
    return make_dot(g, ia, (int)(b - g->vals), n, g->vals[ia].rank == 0 && chance(&g->r, 50)) !=
           NULL;
}

/* dot(vals[ia], vals[ib]) contracting n elements (swapped: dot(b, a)); float operands are first
 * squeezed into a range where the sum's bound stays useful. */
static val *make_dot(gen *g, int ia, int ib, double n, bool swap)
{
    nest_type t = g->vals[ia].t;
    if (isf(t)) {
        val *ba = bounded(g, &g->vals[ia], 100);
        ia = ba ? (int)(ba - g->vals) : -1;
        val *bb = ba ? bounded(g, &g->vals[ib], 100) : NULL;
        ib = bb ? (int)(bb - g->vals) : -1;
        if (ia < 0 || ib < 0)
            return NULL;
    }
    val *a = &g->vals[ia], *b = &g->vals[ib];
    a->uses++, b->uses++;
    info p;
    if (!binary_info(O_MULTIPLY, t, &a->in, &b->in, &p))
        return NULL;
    info r = p;
    if (n != 1) {
        r.lo = n == 0 ? 0 : fmin(n * p.lo, p.lo);
        r.hi = n == 0 ? 0 : fmax(n * p.hi, p.hi);
        if (isf(t))
            r.err = n * p.err + n * n * unit(t) * mag(&p);
        if (!settle(t, &r, p.err == 0))
            return NULL;
    }
    return push(g, swap ? nest_dot(g->f, b->v, a->v) : nest_dot(g->f, a->v, b->v), r, "dot");
}

/* A dense layer, maximum(dot(x, w) + broadcast(b), 0) or a part of it: the product of
 * matrices is tiled from 16 columns on, and the bias and ReLU that follow are absorbed into
 * the tile's store. */
static bool step_dense(gen *g)
{
    static const nest_type types[] = {NEST_F32, NEST_F32, NEST_F64, NEST_I32, NEST_I64};
    nest_type t = types[below(&g->r, countof(types))];
    int64_t m = 1 + below(&g->r, g->large ? 70 : 6), k = below(&g->r, g->large ? 70 : 9);
    int64_t n = chance(&g->r, 20) ? 1 + below(&g->r, 15) : 16 + below(&g->r, g->large ? 150 : 60);
    if (chance(&g->r, 10))
        m = 0;
    while (m > 1 && (m * n > g->cap || m * k > g->cap))
        m /= 2;
    while (k > 1 && (k * n > g->cap || m * k > g->cap))
        k /= 2;
    if (m * n > g->cap || k * n > g->cap)
        return false;
    val *x = obtain(g, t, 2, (int64_t[]){m, k}, false);
    int ix = x ? (int)(x - g->vals) : -1;
    val *w = x ? obtain(g, t, 2, (int64_t[]){k, n}, false) : NULL;
    val *h = w ? make_dot(g, ix, (int)(w - g->vals), (double)k, false) : NULL;
    if (!h || chance(&g->r, 20))
        return h != NULL;
    int ih = (int)(h - g->vals);
    val *bias = obtain(g, t, 1, (int64_t[]){n}, false);
    val *bb = bias ? push(g, nest_broadcast(g->f, bias->v, 2, (int64_t[]){m, n}, 1,
                                            (int64_t[]){0}),
                          bias->in, "broadcast of a bias")
                   : NULL;
    val *z = bb ? ew_binary(g, O_ADD, &g->vals[ih], bb) : NULL;
    if (!z || chance(&g->r, 30))
        return z != NULL;
    val *zero = splat(g, t, 0, 2, (int64_t[]){m, n});
    int iz = (int)(z - g->vals);
    return zero && ew_binary(g, O_MAXIMUM, &g->vals[iz], zero) != NULL;
}

/* A row-wise pattern: reduce over some axes, broadcast back, combine with the operand; for
 * floats now and then a whole softmax, exp(x - max) / sum(exp(x - max)). */
static val *reduce_back(gen *g, val *a, opk op, uint32_t mask)
{
    int64_t axes[MAXRANK];
    int na = 0;
    double n = 1;
    for (int k = 0; k < a->rank; k++)
        if (mask & (1u << k)) {
            axes[na++] = k;
            n *= (double)a->shape[k];
        }
    if (n == 0)
        return NULL;
    info r = a->in;
    if (op == O_SUM) {
        r.lo = fmin(n * a->in.lo, a->in.lo);
        r.hi = fmax(n * a->in.hi, a->in.hi);
        if (isf(a->t))
            r.err = n * a->in.err + (n > 1 ? n * n * unit(a->t) * mag(&a->in) : 0);
        if (!settle(a->t, &r, a->in.err == 0))
            return NULL;
    }
    int ia = (int)(a - g->vals);
    a->uses++;
    val *red = push(g,
                    op == O_SUM   ? nest_sum(g->f, a->v, na, axes)
                    : op == O_MAX ? nest_max(g->f, a->v, na, axes)
                                  : nest_min(g->f, a->v, na, axes),
                    r, "a row reduction");
    if (!red)
        return NULL;
    red->uses++;
    a = &g->vals[ia];
    /* mostly back along the reduced axes; sometimes along others of the same extents, so that
     * a row reads what other rows computed (a transposed use of a row reduction) */
    if (chance(&g->r, 30)) {
        uint32_t masks[16];
        int nm = 0;
        for (uint32_t m = 0; m < (1u << a->rank); m++) {
            if (__builtin_popcount(m) != na)
                continue;
            bool fits = true;
            for (int k = 0, j = 0; k < a->rank && fits; k++)
                if (!(m & (1u << k)))
                    fits = a->shape[k] == red->shape[j++];
            if (fits)
                masks[nm++] = m;
        }
        uint32_t m = masks[below(&g->r, nm)];
        for (int k = 0, j = 0; k < a->rank; k++)
            if (m & (1u << k))
                axes[j++] = k;
    }
    return push(g, nest_broadcast(g->f, red->v, a->rank, a->shape, na, axes), r,
                "a broadcast back");
}

static bool step_rows(gen *g)
{
    val *a = pick(g, has_axes);
    if (a && chance(&g->r, 30)) { /* equal extents, so reductions can come back transposed */
        int64_t d = 2 + below(&g->r, g->maxdim), shape[MAXRANK] = {d, d, d, d};
        a = obtain(g, a->t, 2 + below(&g->r, 2), shape, false);
    }
    if (!a || !isnum(a->t) || a->count == 0)
        return false;
    int ia = (int)(a - g->vals);
    uint32_t mask = 0;
    if (chance(&g->r, 60))
        mask = 1u << (a->rank - 1); /* the last axis: rows */
    while (!mask)
        mask = (uint32_t)below(&g->r, 1 << a->rank);
    if (isf(a->t) && chance(&g->r, 50)) { /* softmax */
        val *x = bounded(g, a, 4);
        int ix = x ? (int)(x - g->vals) : -1;
        val *m = x ? reduce_back(g, x, O_MAX, mask) : NULL;
        val *d = m ? ew_binary(g, O_SUBTRACT, &g->vals[ix], m) : NULL;
        val *e = d ? ew_unary(g, O_EXP, d) : NULL;
        int ie = e ? (int)(e - g->vals) : -1;
        val *s = e ? reduce_back(g, e, O_SUM, mask) : NULL;
        val *ps = s ? positive(g, s) : NULL;
        return ps && ew_binary(g, O_DIVIDE, &g->vals[ie], ps) != NULL;
    }
    static const opk reds[] = {O_SUM, O_MAX, O_MIN};
    static const opk ops[] = {O_SUBTRACT, O_ADD, O_MULTIPLY, O_MAXIMUM, O_MINIMUM};
    val *b = reduce_back(g, a, reds[below(&g->r, 3)], mask);
    return b && ew_binary(g, ops[below(&g->r, 5)], &g->vals[ia], b) != NULL;
}

static bool step_const(gen *g)
{
    int rank = below(&g->r, MAXRANK + 1);
    int64_t shape[MAXRANK];
    rand_shape(g, rank, shape);
    return new_const(g, rand_type(g), rank, shape) != NULL;
}

static bool step_tuple(gen *g)
{
    val *a = pick(g, NULL);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *b = pick(g, NULL);
    int ib = (int)(b - g->vals);
    nest_value parts[2] = {g->vals[ia].v, g->vals[ib].v};
    nest_value tu = nest_tuple(g->f, 2, parts);
    int which = below(&g->r, 2);
    return push(g, nest_get(g->f, tu, which), g->vals[which ? ib : ia].in, "get") != NULL;
}

/* the op set of real models: steps of their own */
#include "random_ops.c"

/* ---- a whole graph ---- */

#include "random_window.h" /* step_conv, step_pool */

/* Under libFuzzer (NEST_LIBFUZZER): the input whose bytes the generator draws first. */
static const uint8_t *fuzz_data;
static size_t fuzz_left;

/* A graph of seed; of about `ops` ops when ops > 0 (small values, so that thousands of ops stay
 * quick to interpret), else of the size the seed draws. */
static void generate(gen *g, uint64_t seed, int ops)
{
    memset(g, 0, sizeof *g);
    g->r.s = seed * 0x2545f4914f6cdd1du + 0x1234567u;
    next(&g->r);
    g->r.data = fuzz_data, g->r.left = fuzz_left;
    char name[32];
    snprintf(name, sizeof name, "r%llu", (unsigned long long)seed);
    g->f = nest_function_new(name);
    assert_non_null(g->f);
    int profile = below(&g->r, 200);
    g->many = ops > 0;
    g->large = profile < 26 && ops == 0;
    g->huge = profile < 10 && !fuzz_data && ops == 0; /* seconds per graph: too slow to fuzz */
    g->cap = g->huge ? 1 << 21 : g->large ? 40000 : 360;
    g->maxdim = g->large ? 8 : 2 + below(&g->r, 6);
    static const int base[C_COUNT] = {
        [C_BINARY] = 24, [C_UNARY] = 12, [C_COMPARE] = 7, [C_CONVERT] = 5, [C_BROADCAST] = 8,
        [C_RESHAPE] = 10, [C_SLICE] = 8, [C_CONCAT] = 6, [C_REDUCE] = 8, [C_DOT] = 6,
        [C_CONST] = 2, [C_TUPLE] = 1, [C_ROWS] = 5, [C_DENSE] = 3, [C_CONV] = 3, [C_POOL] = 2,
        [C_MODEL] = 16,
    };
    for (int c = 0; c < C_COUNT; c++) /* each graph leans its own way */
        g->weight[c] = base[c] * (chance(&g->r, 15) ? 0 : 1 + below(&g->r, 3));
    g->weight[C_BINARY] += 1;
    int total = 0;
    for (int c = 0; c < C_COUNT; c++)
        total += g->weight[c];

    /* parameters: mostly one element type per graph, so ops find operands */
    nest_type main_type = rand_type(g);
    if (main_type == NEST_BOOL)
        main_type = NEST_F32;
    int np = 1 + below(&g->r, 3);
    for (int i = 0; i < np; i++) {
        int rank = below(&g->r, MAXRANK + 1);
        int64_t shape[MAXRANK];
        rand_shape(g, rank, shape);
        if (i > 0 && chance(&g->r, 50)) { /* same shape as the first */
            rank = g->vals[0].rank;
            memcpy(shape, g->vals[0].shape, sizeof shape);
        }
        if (!new_param(g, chance(&g->r, 80) ? main_type : rand_type(g), rank, shape))
            return;
    }
    int nops = ops > 0 ? ops : g->huge ? 2 + below(&g->r, 5) : g->large ? 2 + below(&g->r, 8)
                                                                  : 3 + below(&g->r, 28);
    for (int built = 0, tries = 0; built < nops && tries < 20 * nops && !g->broken; tries++) {
        int before = g->n, x = below(&g->r, total), c = 0;
        while (x >= g->weight[c])
            x -= g->weight[c++];
        bool ok = false;
        switch (c) {
        case C_BINARY: ok = step_binary(g); break;
        case C_UNARY: ok = step_unary(g); break;
        case C_COMPARE: ok = step_compare(g); break;
        case C_CONVERT: ok = step_convert(g); break;
        case C_BROADCAST: ok = step_broadcast(g); break;
        case C_RESHAPE: ok = step_reshape(g); break;
        case C_SLICE: ok = step_slice(g); break;
        case C_CONCAT: ok = step_concat(g); break;
        case C_REDUCE: ok = step_reduce(g); break;
        case C_DOT: ok = step_dot(g); break;
        case C_CONST: ok = step_const(g); break;
        case C_TUPLE: ok = step_tuple(g); break;
        case C_ROWS: ok = step_rows(g); break;
        case C_DENSE: ok = step_dense(g); break;
        case C_CONV: ok = step_conv(g); break;
        case C_POOL: ok = step_pool(g); break;
        case C_MODEL: ok = step_model(g); break;
        }
        built += ok || g->n > before;
    }
    val *root = ops > 0 && !g->broken ? gather_leaves(g) : NULL;
    if (g->broken)
        return;
    /* results: the last value and a few values nothing uses (so little of the graph is dead);
     * now and then any value: a parameter, or one returned twice */
    int leaves[MAXVALS], nl = 0;
    for (int i = g->np; i < g->n - 1; i++)
        if (g->vals[i].uses == 0)
            leaves[nl++] = i;
    g->nres = 1 + below(&g->r, 4);
    g->res[0] = root ? (int)(root - g->vals) : g->n - 1;
    for (int i = 1; i < g->nres; i++) {
        if (nl > 0 && chance(&g->r, 85)) {
            int j = below(&g->r, nl);
            g->res[i] = leaves[j];
            leaves[j] = leaves[--nl];
        } else {
            g->res[i] = below(&g->r, g->n);
        }
    }
    nest_value vs[MAXRESULTS];
    nest_layout layouts[MAXRESULTS];
    for (int i = 0; i < g->nres; i++) {
        vs[i] = g->vals[g->res[i]].v;
        layouts[i] = g->vals[g->res[i]].rank >= 2 && chance(&g->r, 25) ? NEST_COL_MAJOR
                                                                       : NEST_ROW_MAJOR;
    }
    if (nest_return(g->f, g->nres, vs, layouts) != NEST_OK) {
        snprintf(g->why, sizeof g->why, "nest_return: %s", nest_errmsg(g->f));
        g->broken = true;
    }
}

#ifndef NEST_RANDOM_GENERATOR_ONLY /* tests/test_grad.c takes the generator alone */

/* ---- running one graph ---- */

/* What a crash reports: the seed and the graph being run. */
static volatile sig_atomic_t current_running;
static uint64_t current_seed;
static char *current_text;
static struct sigaction old_actions[32];

static void write_str(const char *s) { (void)!write(2, s, strlen(s)); }

static void on_crash(int sig)
{
    if (current_running) {
        char line[96];
        snprintf(line, sizeof line, "\ntest_random: signal %d while running seed %llu:\n", sig,
                 (unsigned long long)current_seed);
        write_str(line);
        if (current_text)
            write_str(current_text);
    }
    sigaction(sig, &old_actions[sig], NULL);
    raise(sig);
}

static void install_crash_handlers(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (int i = 0; i < countof(sigs); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_crash;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, &old_actions[sigs[i]]);
    }
}

typedef struct stats {
    long graphs, compiles, failures, ops, results;
    double compile_ms, max_ms;
    uint64_t slowest;
} stats;

static void report(const gen *g, uint64_t seed, const char *what)
{
    fprintf(stderr, "\n==== test_random: seed %llu: %s\n", (unsigned long long)seed, what);
    fprintf(stderr, "reproduce: NEST_FUZZ_SEED=%llu NEST_FUZZ_COUNT=1 build/tests/test_random\n",
            (unsigned long long)seed);
    if (current_text)
        fprintf(stderr, "%s", current_text);
    (void)g;
}

static bool compare_result(const gen *g, uint64_t seed, int fuse, int i, const void *got,
                           const void *want)
{
    const val *v = &g->vals[g->res[i]];
    double tol = 2 * v->in.err;
    for (int64_t j = 0; j < v->count; j++) {
        bool ok;
        double gj = 0, wj = 0;
        if (isf(v->t)) {
            gj = tu_float(v->t, got, j), wj = tu_float(v->t, want, j);
            ok = gj == wj || (isnan(gj) && isnan(wj)) ||
                 (isfinite(gj) && isfinite(wj) && fabs(gj - wj) <= tol);
        } else {
            gj = (double)tu_int(v->t, got, j), wj = (double)tu_int(v->t, want, j);
            ok = tu_int(v->t, got, j) == tu_int(v->t, want, j);
        }
        if (!ok) {
            char what[256];
            snprintf(what, sizeof what,
                     "fusion %s: result %d (%s, %lld elements) element %lld: got %.17g, want "
                     "%.17g, tolerance %.3g",
                     fuse ? "on" : "off", i, nest_type_name(v->t), (long long)v->count,
                     (long long)j, gj, wj, tol);
            report(g, seed, what);
            return false;
        }
    }
    return true;
}

/* Generates (of about `ops` ops, or of the seed's size when 0), runs and compares one graph;
 * false on a mismatch or an error (reported). */
static bool run_graph(uint64_t seed, int ops, stats *st)
{
    gen *g = calloc(1, sizeof *g);
    assert_non_null(g);
    generate(g, seed, ops);
    free(current_text);
    current_text = nest_print(&g->f, 1);
    current_seed = seed;
    if (getenv("NEST_FUZZ_PRINT") && current_text)
        printf("# seed %llu\n%s", (unsigned long long)seed, current_text);
    bool ok = true;
    if (g->broken) {
        report(g, seed, g->why);
        ok = false;
        goto out;
    }
    st->graphs++;
    st->ops += g->n - g->np;
    st->results += g->nres;

    /* arguments from each parameter's domain; results prefilled with garbage */
    rng r = {.s = seed ^ 0xa0761d6478bd642fu};
    void *args[MAXPARAMS] = {0}, *want[MAXRESULTS] = {0}, *got[MAXRESULTS] = {0};
    int np = nest_param_count(g->f), nr = nest_result_count(g->f);
    for (int i = 0; i < np; i++) {
        const val *p = &g->vals[0];
        for (int k = 0; k < g->n; k++)
            if (g->vals[k].v == nest_param(g->f, i))
                p = &g->vals[k];
        args[i] = malloc((size_t)(p->count ? p->count : 1) * 8);
        assert_non_null(args[i]);
        for (int64_t j = 0; j < p->count; j++)
            store_elem(p->t, args[i], j, draw(&r, &g->params[i]));
    }
    for (int i = 0; i < nr; i++) {
        const val *v = &g->vals[g->res[i]];
        size_t bytes = (size_t)(v->count ? v->count : 1) * 8;
        want[i] = malloc(bytes);
        got[i] = malloc(bytes);
        assert_true(want[i] && got[i]);
    }
    current_running = 1;
    if (evaluate(g->f, args, want) != NEST_OK) {
        report(g, seed, nest_errmsg(g->f));
        ok = false;
    }
    for (int fuse = 1; ok && fuse >= 0; fuse--) {
        if (fuse == 0 && (seed % 4 != 0 || ops > 0) && !getenv("NEST_FUZZ_NOFUSE"))
            break;
        nest_options o;
        nest_options_init(&o);
        o.fuse = fuse;
        nest_kernel *k = nest_compile(g->f, &o);
        st->compiles++;
        if (k) {
            double ms = nest_kernel_compile_ms(k);
            st->compile_ms += ms;
            if (ms > st->max_ms)
                st->max_ms = ms, st->slowest = seed;
        }
        if (!k) {
            char what[600];
            snprintf(what, sizeof what, "fusion %s: nest_compile failed: %.500s",
                     fuse ? "on" : "off", nest_errmsg(g->f));
            report(g, seed, what);
            ok = false;
            break;
        }
        for (int i = 0; i < nr; i++)
            memset(got[i], 0xa5, (size_t)(g->vals[g->res[i]].count ? g->vals[g->res[i]].count : 1) * 8);
        if (nest_call(k, args, np, got, nr) != NEST_OK) {
            report(g, seed, nest_kernel_errmsg(k));
            ok = false;
        }
        for (int i = 0; ok && i < nr; i++)
            ok = compare_result(g, seed, fuse, i, got[i], want[i]);
        nest_kernel_free(k);
    }
    current_running = 0;
    for (int i = 0; i < np; i++)
        free(args[i]);
    for (int i = 0; i < nr; i++) {
        free(want[i]);
        free(got[i]);
    }
out:
    if (!ok)
        st->failures++;
    nest_function_free(g->f);
    free(g);
    return ok;
}

static bool run_seed(uint64_t seed, stats *st) { return run_graph(seed, 0, st); }

typedef struct buf_t {
    char *data;
    size_t len;
} buf_t;

/* ---- the cache directory ---- */

static char cache_root[64];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void cache_setup(void)
{
    snprintf(cache_root, sizeof cache_root, "/tmp/nest-test-random-XXXXXX");
    if (mkdtemp(cache_root)) {
        setenv("XDG_CACHE_HOME", cache_root, 1);
        unsetenv("NEST_CACHE");
    } else {
        cache_root[0] = 0;
        setenv("NEST_CACHE", "0", 1);
    }
}

static void cache_teardown(void)
{
    if (cache_root[0])
        nftw(cache_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- graphs that once failed, kept as text: the generator's seeds change with it ---- */

static const char *const regressions[] = {
    /* A fold over [0,5r,3r] into an empty temporary ran in a function without a workspace:
     * "use of undeclared identifier 'ws'" (fixed: emit_c.c nest_runs, memplan.c). */
    "func r78(p0: f64[3,1,0,5], p1: f64[3,1,0,5] col, p2: f64[3,1,0,5], p3: f64[3,1,0,5], p4: f32[3,1,1,4]) -> f32[1,2,3,0] {\n"
    "  _3 = max(p2, axes=[0,2])\n"
    "  _4 = slice(p0, lower=[0,0,0,0], upper=[3,0,0,5], strides=[1,1,1,3])\n"
    "  _5 = slice(p2, lower=[0,0,0,0], upper=[3,1,0,5], strides=[3,3,1,1])\n"
    "  _6 = slice(p0, lower=[0,0,0,0], upper=[3,1,0,5], strides=[1,2,3,1])\n"
    "  _7 = greater(p2, _6)\n"
    "  _8 = convert(p2, type=f32)\n"
    "  _9 = select(_7, _8, _8)\n"
    "  _10 = slice(_8, lower=[0,0,0,0], upper=[3,1,0,5], strides=[1,2,2,1])\n"
    "  _11 = subtract(_9, _10)\n"
    "  _12 = convert(p1, type=f32)\n"
    "  _13 = abs(_9)\n"
    "  _14 = constant(f32[], 1.75)\n"
    "  _15 = broadcast(_14, shape=[3,1,0,5], axes=[0,1,2,3])\n"
    "  _16 = add(_13, _15)\n"
    "  _17 = tanh(_12)\n"
    "  _18 = power(_16, _17)\n"
    "  _19 = min(_16, axes=[1,3])\n"
    "  _20 = reshape(_10, order=[0,3,1,2], shape=[3,1,0,5])\n"
    "  _21 = add(_20, _16)\n"
    "  _22 = concat(_17, _16, axis=0)\n"
    "  _23 = less(p2, p2)\n"
    "  _24 = convert(p0, type=f32)\n"
    "  _25 = select(_23, _21, _24)\n"
    "  _27 = minimum(p1, p3)\n"
    "  _28 = broadcast(_19, shape=[1,3,0,1], axes=[0,3])\n"
    "  _29 = tuple(_9, p3)\n"
    "  _30 = get(_29, 0)\n"
    "  _31 = slice(_23, lower=[0,0,0,0], upper=[1,1,0,5])\n"
    "  _32 = reshape(_23, shape=[3,1,0,5])\n"
    "  _33 = concat(_31, _23, _32, axis=0)\n"
    "  _34 = broadcast(_19, shape=[3,0,1,4], axes=[2,3])\n"
    "  _36 = slice(_34, lower=[0,0,0,0], upper=[3,0,1,4], strides=[1,1,2,1])\n"
    "  _37 = concat(_36, p4, _34, axis=1)\n"
    "  _38 = broadcast(_19, shape=[3,0,4,0], axes=[1,2])\n"
    "  _39 = broadcast(_19, shape=[1,2,3,0], axes=[0,1])\n"
    "  return _39\n"
    "}\n",
    /* Row groups fold max(x, axes=[1]) in memory: out = INT64_MIN, then out = max(x, out)
     * over tiny fully unrolled loops, with float math after it in the same row loop. clang 14
     * -O3 with AVX2 and -fno-math-errno vectorizes the row loop with interleaved load and store
     * groups and reads `out` before its initial store (llvm/llvm-project#63602; the generated C
     * is correct: gcc and clang -O0/-O1 agree with the interpreter). The JIT now turns that
     * vectorization off (runtime/jit.c). With fusion off, as the random tester first found it
     * (seed 40 of its first generator): */
    "func r40(p0: i64[4,3,2], p1: f64[1,2,4,4], p2: i64[1,2,1,0], p3: i64[4,2,3] col) -> (i64[4,3], f32[4,3] col, i64[1,2,1,0], f32[4,3]) {\n"
    "  _3 = constant(f32[0,1,3,5], 0.5)\n"
    "  _4 = convert(_3, type=bool)\n"
    "  _5 = reshape(_4, shape=[0,3,5])\n"
    "  _6 = reshape(p0, order=[0,2,1], shape=[4,2,3])\n"
    "  _7 = exp(p1)\n"
    "  _9 = subtract(_6, p3)\n"
    "  _10 = convert(_7, type=f32)\n"
    "  _11 = max(_9, axes=[1])\n"
    "  _12 = constant(bool[5,3], true)\n"
    "  _13 = min(_11, axes=[0,1])\n"
    "  _14 = convert(_11, type=f32)\n"
    "  _15 = slice(_14, lower=[0,0], upper=[4,3])\n"
    "  _16 = constant(f32[], 0.5)\n"
    "  _17 = broadcast(_16, shape=[4,3], axes=[0,1])\n"
    "  _18 = maximum(_14, _17)\n"
    "  _19 = log(_18)\n"
    "  _20 = max(_19, axes=[1])\n"
    "  _21 = broadcast(_20, shape=[4,3], axes=[1])\n"
    "  _22 = subtract(_19, _21)\n"
    "  _23 = exp(_22)\n"
    "  _24 = sum(_23, axes=[1])\n"
    "  _25 = broadcast(_24, shape=[4,3], axes=[1])\n"
    "  _26 = slice(_17, lower=[0,0], upper=[4,3])\n"
    "  _27 = maximum(_25, _26)\n"
    "  _28 = min(_13, axes=[])\n"
    "  _29 = sum(_28, axes=[])\n"
    "  _30 = convert(_26, type=f32)\n"
    "  _31 = min(_11, axes=[0])\n"
    "  _32 = broadcast(_31, shape=[4,3], axes=[0])\n"
    "  _33 = minimum(_11, _32)\n"
    "  return _33, _27, p2, _30\n"
    "}\n",
    /* ... and the same with the default options, reduced by hand: */
    "func fr(x: i64[4,2,3]) -> (i64[4,3], f32[4]) {\n"
    "  m = max(x, axes=[1])\n"
    "  l = log(maximum(convert(m, type=f32), broadcast(constant(f32[], 0.5), shape=[4,3], axes=[0,1])))\n"
    "  return m, sum(exp(l), axes=[1])\n"
    "}\n",
};

/* Runs a text graph through the interpreter and the JIT with fusion on and off: integers and
 * bool exactly, floats within 1e-4 relative (these graphs are small). */
static bool run_text(const char *text)
{
    nest_module *m = nest_parse(text, strlen(text), "regression");
    assert_non_null(m);
    if (nest_module_errcode(m)) {
        fprintf(stderr, "%s\n", nest_module_errmsg(m));
        nest_module_free(m);
        return false;
    }
    nest_function *f = nest_module_function(m, 0);
    int np = nest_param_count(f), nr = nest_result_count(f);
    void *args[MAXPARAMS] = {0}, *want[MAXRESULTS] = {0}, *got[MAXRESULTS] = {0};
    int64_t counts[MAXRESULTS];
    assert_true(np <= MAXPARAMS && nr <= MAXRESULTS);
    rng r = {.s = 12345};
    for (int i = 0; i < np; i++) {
        nest_value v = nest_param(f, i);
        nest_type t = (nest_type)nest_value_type(f, v);
        int64_t n = count_of(nest_value_rank(f, v), nest_value_shape(f, v));
        domain d = isf(t) ? (domain){-4, 4, -2} : t == NEST_BOOL ? (domain){0, 1, 0}
                                                                 : (domain){-20, 20, 0};
        args[i] = malloc((size_t)(n ? n : 1) * 8);
        assert_non_null(args[i]);
        for (int64_t j = 0; j < n; j++)
            store_elem(t, args[i], j, draw(&r, &d));
    }
    for (int i = 0; i < nr; i++) {
        nest_value v = nest_result(f, i);
        counts[i] = count_of(nest_value_rank(f, v), nest_value_shape(f, v));
        want[i] = malloc((size_t)(counts[i] ? counts[i] : 1) * 8);
        got[i] = malloc((size_t)(counts[i] ? counts[i] : 1) * 8);
        assert_true(want[i] && got[i]);
    }
    bool ok = evaluate(f, args, want) == NEST_OK;
    for (int fuse = 1; ok && fuse >= 0; fuse--) {
        nest_options o;
        nest_options_init(&o);
        o.fuse = fuse;
        nest_kernel *k = nest_compile(f, &o);
        if (!k) {
            fprintf(stderr, "fusion %s: %s\n", fuse ? "on" : "off", nest_errmsg(f));
            ok = false;
            break;
        }
        for (int i = 0; i < nr; i++)
            memset(got[i], 0xa5, (size_t)(counts[i] ? counts[i] : 1) * 8);
        ok = nest_call(k, args, np, got, nr) == NEST_OK;
        for (int i = 0; ok && i < nr; i++) {
            nest_type t = (nest_type)nest_value_type(f, nest_result(f, i));
            for (int64_t j = 0; ok && j < counts[i]; j++) {
                double g = isf(t) ? tu_float(t, got[i], j) : (double)tu_int(t, got[i], j);
                double w = isf(t) ? tu_float(t, want[i], j) : (double)tu_int(t, want[i], j);
                ok = isf(t) ? g == w || fabs(g - w) <= 1e-4 * (1 + fabs(w)) : g == w;
                if (!ok)
                    fprintf(stderr, "%s, fusion %s: result %d element %lld: got %.17g, want %.17g\n",
                            nest_function_name(f), fuse ? "on" : "off", i, (long long)j, g, w);
            }
        }
        nest_kernel_free(k);
    }
    for (int i = 0; i < np; i++)
        free(args[i]);
    for (int i = 0; i < nr; i++) {
        free(want[i]);
        free(got[i]);
    }
    nest_module_free(m);
    return ok;
}

static void regression_graphs(void **state)
{
    (void)state;
    int failed = 0;
    for (int i = 0; i < countof(regressions); i++)
        failed += !run_text(regressions[i]);
    assert_int_equal(failed, 0);
}

/* ---- make test: fixed seeds ---- */

static void run_range(uint64_t first, uint64_t count)
{
    stats st = {0};
    for (uint64_t s = first; s < first + count; s++)
        run_seed(s, &st);
    print_message("%ld graphs (%ld ops, %ld results), %ld compiles, %ld failing\n", st.graphs,
                  st.ops, st.results, st.compiles, st.failures);
    assert_int_equal(st.failures, 0);
}

static void seeds_1_to_100(void **state) { (void)state; run_range(1, 100); }
static void seeds_101_to_200(void **state) { (void)state; run_range(101, 100); }
static void seeds_201_to_300(void **state) { (void)state; run_range(201, 100); }
static void seeds_301_to_400(void **state) { (void)state; run_range(301, 100); }
static void seeds_401_to_500(void **state) { (void)state; run_range(401, 100); }
static void seeds_501_to_600(void **state) { (void)state; run_range(501, 100); }

/* Graphs of 1,000 and 2,000 steps, about 3,000 and 6,000 values (every kind of op, fan-out near
 * and far, all of it reaching the first result): the passes and the emitter at the scale of
 * real models, still against the interpreter. */
static void thousands_of_ops(void **state)
{
    (void)state;
    stats st = {0};
    static const int sizes[] = {1000, 2000};
    for (int i = 0; i < countof(sizes); i++)
        run_graph(7000001 + (uint64_t)i, sizes[i], &st);
    print_message("%ld graphs (%ld ops, %ld results), %ld compiles, %ld failing; compiles %.0f ms "
                  "on average\n", st.graphs, st.ops, st.results, st.compiles, st.failures,
                  st.compile_ms / (st.compiles ? st.compiles : 1));
    assert_int_equal(st.graphs, countof(sizes));
    assert_true(st.ops >= 2 * (1000 + 2000));
    assert_int_equal(st.failures, 0);
}

/* The generator itself: every seed builds a valid graph of the size asked for. */
static void generator_builds(void **state)
{
    (void)state;
    long ops = 0, broken = 0;
    for (uint64_t s = 1000000; s < 1002000; s++) {
        gen *g = calloc(1, sizeof *g);
        assert_non_null(g);
        generate(g, s, 0);
        if (g->broken) {
            fprintf(stderr, "seed %llu: %s\n", (unsigned long long)s, g->why);
            broken++;
        }
        ops += g->n - g->np;
        nest_function_free(g->f);
        free(g);
    }
    print_message("2000 graphs, %ld ops on average\n", ops / 2000);
    assert_int_equal(broken, 0);
}

/* ---- make fuzz: a long run ---- */

static int fuzz(const char *count_s)
{
    uint64_t count = strtoull(count_s, NULL, 10);
    const char *seed_s = getenv("NEST_FUZZ_SEED");
    uint64_t seed = seed_s && *seed_s ? strtoull(seed_s, NULL, 10) : (uint64_t)time(NULL) * 1000;
    printf("test_random: %llu graphs from seed %llu\n", (unsigned long long)count,
           (unsigned long long)seed);
    fflush(stdout);
    stats st = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 0; i < count; i++) {
        run_seed(seed + i, &st);
        if ((i + 1) % 100 == 0 || i + 1 == count) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
            printf("  %llu/%llu graphs (seeds %llu..%llu), %ld compiles, %ld failing, %.1f s\n",
                   (unsigned long long)(i + 1), (unsigned long long)count,
                   (unsigned long long)seed, (unsigned long long)(seed + i), st.compiles,
                   st.failures, s);
            fflush(stdout);
        }
    }
    printf("test_random: %ld graphs, %ld ops, %ld results, %ld failing; compiles %.0f ms on "
           "average, the slowest %.0f ms (seed %llu)\n",
           st.graphs, st.ops, st.results, st.failures, st.compile_ms / (st.compiles ? st.compiles : 1),
           st.max_ms, (unsigned long long)st.slowest);
    return st.failures ? 1 : 0;
}

/* NEST_FUZZ_FILE=graph.nest: a text graph (what a failure printed, edited) run the way the
 * regressions are. */
static int run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return 2;
    }
    buf_t text = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) {
        char *p = realloc(text.data, text.len + n + 1);
        assert_non_null(p);
        text.data = p;
        memcpy(text.data + text.len, chunk, n);
        text.len += n;
        text.data[text.len] = 0;
    }
    fclose(fp);
    bool ok = text.data && run_text(text.data);
    printf("%s: %s\n", path, ok ? "the JIT agrees with the interpreter" : "MISMATCH");
    free(text.data);
    return ok ? 0 : 1;
}

#ifdef NEST_LIBFUZZER
/* Compile and compare under libFuzzer (make fuzz-jit): the generator's choices come from the
 * input's bytes, so the fuzzer steers the graphs; a disagreement prints the graph and aborts. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool once;
    if (!once) {
        setenv("NEST_CACHE", "0", 1); /* every input is a new graph: no cache to fill */
        once = true;
    }
    uint64_t seed = 0xcbf29ce484222325u;
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 0x100000001b3u;
    fuzz_data = data, fuzz_left = size;
    stats st = {0};
    bool ok = run_seed(seed, &st);
    fuzz_data = NULL, fuzz_left = 0;
    if (!ok)
        abort();
    return 0;
}
#else
int main(void)
{
    cache_setup();
    install_crash_handlers();
    int rc;
    const char *count = getenv("NEST_FUZZ_COUNT"), *file = getenv("NEST_FUZZ_FILE");
    if (file && *file) {
        rc = run_file(file);
    } else if (count && *count) {
        rc = fuzz(count);
    } else {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(generator_builds),
            cmocka_unit_test(regression_graphs),
            cmocka_unit_test(seeds_1_to_100),
            cmocka_unit_test(seeds_101_to_200),
            cmocka_unit_test(seeds_201_to_300),
            cmocka_unit_test(seeds_301_to_400),
            cmocka_unit_test(seeds_401_to_500),
            cmocka_unit_test(seeds_501_to_600),
            cmocka_unit_test(thousands_of_ops),
        };
        rc = cmocka_run_group_tests(tests, NULL, NULL);
    }
    free(current_text);
    cache_teardown();
    return rc;
}
#endif /* NEST_LIBFUZZER */

#endif /* NEST_RANDOM_GENERATOR_ONLY */
