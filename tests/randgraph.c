/*
 * randgraph.c - the random graph generator of test_random.c (and of test_grad.c and the
 * fuzz-jit target): a PRNG of its own (splitmix64, or under libFuzzer the input's bytes), what
 * the generator knows of each value (an interval holding its exact elements and a bound on the
 * error of any correct evaluation), shapes, and the building helpers; the steps that add ops are
 * in random_steps.c (arithmetic, convert, views, reductions, dot, constants, tuples),
 * random_ops.c (the op set of real models) and random_window.h (convolution, pooling).
 * gen_graph() at the end draws a whole function. Included, not linked: the suites that use it
 * take its static helpers as their own.
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
 */
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

/* Graphs for gradients (test_grad): sqrt only of values of at least 0.25, as log. At an exact
 * zero (an empty sum) sqrt's derivative is infinite, and reverse mode multiplies it by the
 * zero derivative of that sum: NaN, in nest as in any reverse mode, where the function itself
 * does not move. */
static bool gen_for_gradients;

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


/* the core steps */
#include "random_steps.c"

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
