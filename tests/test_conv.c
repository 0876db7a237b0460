/* test_conv.c - convolution and pooling.
 *
 *   - type rules: result shapes against the formula, and every bad operand or attribute is an
 *     error naming the op and the shapes (C API and text form, with its position);
 *   - the text form: attributes parse, print canonically and parse back;
 *   - the reference interpreter against closed forms: all-ones inputs (each output counts the
 *     taps that land on the input, a product of per-axis counts) and hand-computed values;
 *   - compiled code against the interpreter, over 1 to 3 spatial axes, strides, dilations, data
 *     dilation, padding (asymmetric and negative), groups (depthwise too), batches, odd and
 *     prime sizes, f32 and f64, the element-wise work fused into the store (bias, batch-norm
 *     scale and shift, residual, ReLU), pools with the activation before them, chains of
 *     convolutions; under the JIT with fusion on and off, OpenMP off, for AVX2 and x86-64-v2
 *     CPUs, ahead of time with cc; column-major parameters and results.
 *
 * Inputs are small integers (floats holding them), so every sum is exact in any order and the
 * compiled results must equal the interpreter's exactly; one case of real-valued data checks
 * rounding against a bound from the sums of magnitudes. The results' arrays carry a guard that
 * must stay untouched, and the arguments must be left as they were.
 *
 * NEST_CONV_VERBOSE=1 prints each case's time; NEST_CONV_DUMP=case prints a case's C.
 */
#include <dlfcn.h>
#include <float.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define countof_(a) (sizeof(a) / sizeof((a)[0]))

static char g_tmp[128];
static int g_seq;
static bool g_verbose;

static int group_setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/nest-conv-XXXXXX",
             t && t[0] == '/' && strlen(t) < 80 ? t : "/tmp");
    if (!mkdtemp(g_tmp))
        return -1;
    char xdg[160];
    snprintf(xdg, sizeof xdg, "%s/cache", g_tmp);
    setenv("XDG_CACHE_HOME", xdg, 1); /* every compile here compiles */
    unsetenv("NEST_CACHE");
    const char *v = getenv("NEST_CONV_VERBOSE");
    g_verbose = v && *v && strcmp(v, "0") != 0;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (g_tmp[0])
        tu_rm_rf(g_tmp);
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* ---------------------------------------------------------------------------------------------
 * Cases: convolutions and pools with their element-wise work, several in one function
 * ------------------------------------------------------------------------------------------- */

/* E_CONST: the filters a constant (packed ahead of time where the tiles take channels in
 * lanes); E_CONST_KEPT: and a result too (then they are packed per call) */
enum { E_BIAS = 1, E_BN = 2, E_RES = 4, E_RELU = 8, E_TWICE = 16, E_KEEP = 32, E_CONST = 64,
       E_CONST_KEPT = 128 };

typedef struct spec {
    int nsp;
    int64_t n, c, k, g;
    int64_t d[3], f[3];
    /* NULL-able attributes: all-zero arrays mean "not given" */
    int64_t s[3], dil[3], pb[3], pa[3], dd[3];
    unsigned epi;
} spec;

typedef struct pspec {
    int nsp;
    bool avg, incl;
    nest_type t;
    int64_t n, c, d[3], win[3], s[3], pb[3], pa[3];
    bool relu; /* an activation before the pool */
} pspec;

#define MAX_ARRAYS 96 /* parameters or results of one function */

/* The builder's state: the function, its results (row-major unless a builder sets lay), and
 * whether it is the magnitude twin (every multiplied operand wrapped in abs). */
typedef struct bld {
    nest_function *f;
    nest_value res[MAX_ARRAYS];
    nest_layout lay[MAX_ARRAYS];
    int nres;
    int np;
    bool mag;
} bld;

static nest_value param(bld *b, nest_type t, int rank, const int64_t *shape)
{
    char name[16];
    snprintf(name, sizeof name, "p%d", b->np++);
    return nest_parameter(b->f, name, t, rank, shape, NEST_ROW_MAJOR);
}

static nest_value A(bld *b, nest_value v) { return b->mag ? nest_abs(b->f, v) : v; }

static const int64_t *given(const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i])
            return v;
    return NULL;
}

/* max(v, 0) */
static nest_value relu(nest_function *f, nest_type t, nest_value v, int rank, const int64_t *shape)
{
    static const int64_t zeros[1] = {0}; /* 8 zero bytes: a zero of every type */
    static const int64_t all[5] = {0, 1, 2, 3, 4};
    nest_value z = nest_constant(f, t, 0, NULL, zeros, 1);
    return nest_maximum(f, v, nest_broadcast(f, z, rank, shape, rank, all));
}

static nest_value channel_vector(bld *b, nest_type t, int64_t k, int rank, const int64_t *shape)
{
    int64_t axes[5] = {0, 2, 3, 4};
    nest_value v = A(b, param(b, t, 1, &k));
    return nest_broadcast(b->f, v, rank, shape, rank - 1, axes);
}

/* Filters of `shape` as a constant of small integers (exact in any type) from seed. */
static nest_value const_filters(bld *b, nest_type t, int rank, const int64_t *shape,
                                uint64_t seed)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    size_t esize = t == NEST_F32 ? sizeof(float) : sizeof(double);
    char *v = malloc((size_t)n * esize + 1);
    if (!v)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        double x = (double)(rnd(&seed) % 7) - 3;
        if (t == NEST_F32)
            ((float *)v)[i] = (float)x;
        else
            ((double *)v)[i] = x;
    }
    nest_value w = nest_constant(b->f, t, rank, shape, v, n);
    free(v);
    return w;
}

/* A convolution of spec sp with its element-wise work; returns its value. */
static nest_value conv_of(bld *b, nest_type t, const spec *sp)
{
    nest_function *f = b->f;
    int rank = 2 + sp->nsp;
    int64_t xs[5] = {sp->n, sp->c}, ws[5] = {sp->k, sp->g ? sp->c / sp->g : sp->c};
    for (int i = 0; i < sp->nsp; i++) {
        xs[2 + i] = sp->d[i];
        ws[2 + i] = sp->f[i];
    }
    nest_value x = A(b, param(b, t, rank, xs)), w;
    if (sp->epi & (E_CONST | E_CONST_KEPT)) {
        w = const_filters(b, t, rank, ws, (uint64_t)b->np * 7919 + (uint64_t)sp->k);
        if (sp->epi & E_CONST_KEPT)
            b->res[b->nres++] = w;
        w = A(b, w);
    } else {
        w = A(b, param(b, t, rank, ws));
    }
    nest_value y = nest_convolution(f, x, w, given(sp->s, sp->nsp), given(sp->dil, sp->nsp),
                                    given(sp->pb, sp->nsp), given(sp->pa, sp->nsp),
                                    given(sp->dd, sp->nsp), sp->g ? sp->g : 1);
    if (y < 0)
        return y;
    int64_t os[5];
    memcpy(os, nest_value_shape(f, y), sizeof(int64_t) * (size_t)rank);
    nest_value v = y;
    if (sp->epi & E_KEEP)
        b->res[b->nres++] = y; /* the value itself is a result too */
    if (sp->epi & E_BN)
        v = nest_add(f, nest_multiply(f, v, channel_vector(b, t, sp->k, rank, os)),
                     channel_vector(b, t, sp->k, rank, os));
    if (sp->epi & E_BIAS)
        v = nest_add(f, v, channel_vector(b, t, sp->k, rank, os));
    if (sp->epi & E_RES)
        v = nest_add(f, v, A(b, param(b, t, rank, os)));
    if (sp->epi & E_TWICE)
        v = nest_add(f, v, b->mag ? v : nest_multiply(f, v, v));
    if (sp->epi & E_RELU)
        v = relu(f, t, v, rank, os);
    return v;
}

static nest_value pool_of(bld *b, const pspec *sp)
{
    nest_function *f = b->f;
    int rank = 2 + sp->nsp;
    int64_t xs[5] = {sp->n, sp->c};
    for (int i = 0; i < sp->nsp; i++)
        xs[2 + i] = sp->d[i];
    nest_value x = A(b, param(b, sp->t, rank, xs));
    if (sp->relu)
        x = relu(f, sp->t, x, rank, xs);
    const int64_t *s = given(sp->s, sp->nsp), *pb = given(sp->pb, sp->nsp),
                  *pa = given(sp->pa, sp->nsp);
    return sp->avg ? nest_avg_pool(f, x, sp->win, s, pb, pa, sp->incl)
                   : nest_max_pool(f, x, sp->win, s, pb, pa);
}

/* ---------------------------------------------------------------------------------------------
 * Running: inputs, the interpreter, compiled variants, comparisons
 * ------------------------------------------------------------------------------------------- */

enum {
    V_JIT = 1 << 0,    /* nest_compile, default options */
    V_NOFUSE = 1 << 1, /* fuse = 0 */
    V_NOOMP = 1 << 2,  /* openmp = 0 */
    V_AVX2 = 1 << 3,   /* march x86-64-v3: 32-byte vectors, 16 registers */
    V_V2 = 1 << 4,     /* march x86-64-v2: 16-byte vectors */
    V_AOT = 1 << 5,    /* nest_build_so with cc, called through NAME_call */
    V_AOT_PLAIN = 1 << 6, /* the same, cc told it is gcc 11: nest_transpose_* as plain loops */
};

static const struct {
    unsigned flag;
    const char *what;
    int fuse, openmp;
    const char *march, *cc;
} VARIANTS[] = {
    {V_JIT, "jit", 1, 1, NULL, NULL},
    {V_NOFUSE, "jit fuse=0", 0, 1, NULL, NULL},
    {V_NOOMP, "jit openmp=0", 1, 0, NULL, NULL},
    {V_AVX2, "jit march=x86-64-v3", 1, 1, "x86-64-v3", NULL},
    {V_V2, "jit march=x86-64-v2", 1, 1, "x86-64-v2", NULL},
    {V_AOT, "aot cc", 1, 1, NULL, "cc"},
    /* (gcc before 12 has no __builtin_shufflevector; with clang as cc this is V_AOT again) */
    {V_AOT_PLAIN, "aot cc as gcc 11", 1, 1, NULL, "cc -U__GNUC__ -D__GNUC__=11"},
};

#define GUARD 16 /* elements past each result that no call may write */

typedef struct arrays {
    int n;
    void *p[MAX_ARRAYS], *base[MAX_ARRAYS]; /* (p within the block at base) */
    int64_t count[MAX_ARRAYS];
    nest_type type[MAX_ARRAYS];
} arrays;

static int64_t count_of(const nest_function *f, nest_value v)
{
    int64_t c = 1;
    for (int i = 0; i < nest_value_rank(f, v); i++)
        c *= nest_value_shape(f, v)[i];
    return c;
}

/* Results of the next checks at 64-byte boundaries plus g_skew elements when g_aligned (the
 * stores past the caches take whole lines where a result is aligned, and plain stores where it
 * is not); else where malloc puts them. */
static bool g_aligned;
static int g_skew;

static void arrays_alloc(arrays *a, const nest_function *f, bool results)
{
    a->n = results ? nest_result_count(f) : nest_param_count(f);
    assert_true(a->n <= MAX_ARRAYS);
    for (int i = 0; i < a->n; i++) {
        nest_value v = results ? nest_result(f, i) : nest_param(f, i);
        a->type[i] = (nest_type)nest_value_type(f, v);
        a->count[i] = count_of(f, v);
        size_t bytes = (size_t)(a->count[i] + GUARD) * nest_type_size(a->type[i]);
        if (results && g_aligned) {
            size_t skew = (size_t)g_skew * nest_type_size(a->type[i]);
            a->base[i] = aligned_alloc(64, (bytes + skew + 63) / 64 * 64);
            a->p[i] = a->base[i] ? (char *)a->base[i] + skew : NULL;
        } else {
            a->p[i] = a->base[i] = malloc(bytes);
        }
        assert_non_null(a->p[i]);
        memset(a->p[i], 0xA5, bytes);
    }
}

static void arrays_free(arrays *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->base[i]);
    a->n = 0;
}

/* Small integers in [-3, 3] (exact sums), or with real, reals in (-1, 1). */
static void fill(arrays *a, uint64_t seed, bool real)
{
    for (int i = 0; i < a->n; i++) {
        uint64_t s = seed + 7919u * (uint64_t)i;
        for (int64_t j = 0; j < a->count[i]; j++) {
            uint64_t r = rnd(&s);
            double v = real ? (double)(r >> 11) / 4503599627370496.0 - 1.0 : (double)(r % 7) - 3;
            switch (a->type[i]) {
            case NEST_F32: ((float *)a->p[i])[j] = (float)v; break;
            case NEST_F64: ((double *)a->p[i])[j] = v; break;
            case NEST_I32: ((int32_t *)a->p[i])[j] = (int32_t)(r % 2001) - 1000; break;
            case NEST_I64: ((int64_t *)a->p[i])[j] = (int64_t)(r >> 2) - (INT64_MAX >> 2); break;
            default: ((uint8_t *)a->p[i])[j] = (uint8_t)(r & 1); break;
            }
        }
    }
}

typedef int (*call_fn)(void *const *, void *const *);

/* Compiles f under variant vi and calls it into got; false after printing why. */
static bool run_variant(nest_function *f, int vi, arrays *args, arrays *got)
{
    nest_options o;
    nest_options_init(&o);
    o.fuse = VARIANTS[vi].fuse;
    o.openmp = VARIANTS[vi].openmp;
    if (VARIANTS[vi].march)
        o.march = VARIANTS[vi].march;
    if (!VARIANTS[vi].cc) {
        nest_kernel *k = nest_compile(f, &o);
        if (!k) {
            print_error("%s: %s: nest_compile: %s\n", nest_function_name(f), VARIANTS[vi].what,
                        nest_errmsg(f));
            return false;
        }
        int st = nest_call(k, args->p, args->n, got->p, got->n);
        if (st)
            print_error("%s: nest_call: %s\n", VARIANTS[vi].what, nest_kernel_errmsg(k));
        nest_kernel_free(k);
        return st == NEST_OK;
    }
    o.cc = VARIANTS[vi].cc;
    char so[256], sym[300];
    snprintf(so, sizeof so, "%s/%s_%d.so", g_tmp, nest_function_name(f), ++g_seq);
    if (nest_build_so(&f, 1, so, NULL, &o, NULL) != NEST_OK) {
        print_error("%s: %s: %s\n", nest_function_name(f), VARIANTS[vi].what, nest_errmsg(f));
        return false;
    }
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    snprintf(sym, sizeof sym, "%s_call", nest_function_name(f));
    void *fp = h ? dlsym(h, sym) : NULL;
    if (!fp) {
        print_error("%s: %s: %s\n", nest_function_name(f), VARIANTS[vi].what, dlerror());
        return false;
    }
    call_fn call;
    memcpy(&call, &fp, sizeof call);
    int rc = call(args->p, got->p);
    /* never dlclose'd: gcc's libgomp pool threads may still run in it */
    return rc == 0;
}

static double ulp_of(nest_type t) { return t == NEST_F32 ? FLT_EPSILON : DBL_EPSILON; }

/* Compares got with want: exactly, or within `ulps` of the magnitude in mag (when given). */
static int64_t compare(const char *what, const nest_function *f, const arrays *got,
                       const arrays *want, const arrays *mag, double ulps)
{
    int64_t bad = 0;
    for (int r = 0; r < got->n; r++) {
        nest_type t = got->type[r];
        size_t es = nest_type_size(t);
        const unsigned char *g = got->p[r];
        for (int64_t j = got->count[r] * (int64_t)es; j < (got->count[r] + GUARD) * (int64_t)es; j++)
            if (g[j] != 0xA5) {
                print_error("%s: %s: result %d was written past its end\n", nest_function_name(f),
                            what, r);
                bad++;
                break;
            }
        for (int64_t j = 0; j < got->count[r]; j++) {
            bool ok;
            double gv = 0, wv = 0, tol = 0;
            if (t == NEST_F32 || t == NEST_F64) {
                gv = tu_float(t, got->p[r], j);
                wv = tu_float(t, want->p[r], j);
                tol = mag ? ulps * ulp_of(t) * (tu_float(t, mag->p[r], j) + 1e-30) : 0;
                ok = gv == wv || (isnan(gv) && isnan(wv)) || fabs(gv - wv) <= tol;
            } else {
                ok = tu_int(t, got->p[r], j) == tu_int(t, want->p[r], j);
                gv = (double)tu_int(t, got->p[r], j);
                wv = (double)tu_int(t, want->p[r], j);
            }
            if (!ok && bad++ < 4)
                print_error("%s: %s: result %d element %lld: got %.17g, want %.17g (tol %g)\n",
                            nest_function_name(f), what, r, (long long)j, gv, wv, tol);
        }
    }
    return bad;
}

typedef void (*build_fn)(bld *b, const void *arg);

static nest_function *build(const char *name, build_fn fn, const void *arg, bool mag)
{
    bld b = {.f = nest_function_new(name), .mag = mag};
    assert_non_null(b.f);
    fn(&b, arg);
    if (nest_errcode(b.f) == NEST_OK)
        nest_return(b.f, b.nres, b.res, b.lay);
    if (nest_errcode(b.f) != NEST_OK) {
        print_error("%s: building failed: %s\n", name, nest_errmsg(b.f));
        nest_function_free(b.f);
        fail();
    }
    return b.f;
}

/* Runs the case built by fn under the variants: the interpreter's results against each
 * compiled one. With real data, floats compare within `ulps` of the sum of magnitudes (the
 * interpreter's twin with every multiplied operand in abs). */
static void check(const char *name, build_fn fn, const void *arg, unsigned variants, bool real,
                  double ulps)
{
    double t0 = now_ms();
    nest_function *f = build(name, fn, arg, false), *m = NULL;
    arrays args, want, got, mag = {0}, copy;
    arrays_alloc(&args, f, false);
    arrays_alloc(&copy, f, false);
    arrays_alloc(&want, f, true);
    arrays_alloc(&got, f, true);
    uint64_t seed = 0;
    for (const char *s = name; *s; s++)
        seed = seed * 131 + (unsigned char)*s;
    fill(&args, seed, real);
    for (int i = 0; i < args.n; i++)
        memcpy(copy.p[i], args.p[i], (size_t)args.count[i] * nest_type_size(args.type[i]));
    assert_ok(f, nest_evaluate(f, args.p, args.n, want.p, want.n));
    const char *dump = getenv("NEST_CONV_DUMP"); /* NEST_CONV_DUMP=case prints its C */
    if (dump && strcmp(dump, name) == 0) {
        char *text = nest_emit(&f, 1, NEST_EMIT_C, NULL);
        fprintf(stderr, "%s", text ? text : nest_errmsg(f));
        nest_string_free(text);
    }
    if (real) {
        m = build(name, fn, arg, true);
        arrays_alloc(&mag, m, true);
        assert_ok(m, nest_evaluate(m, args.p, args.n, mag.p, mag.n));
    }
    int64_t bad = 0;
    for (size_t vi = 0; vi < countof_(VARIANTS); vi++) {
        if (!(variants & VARIANTS[vi].flag))
            continue;
        for (int r = 0; r < got.n; r++)
            memset(got.p[r], 0xA5, (size_t)(got.count[r] + GUARD) * nest_type_size(got.type[r]));
        if (!run_variant(f, (int)vi, &args, &got)) {
            bad++;
            continue;
        }
        bad += compare(VARIANTS[vi].what, f, &got, &want, real ? &mag : NULL, ulps);
        for (int i = 0; i < args.n; i++)
            if (memcmp(copy.p[i], args.p[i],
                       (size_t)args.count[i] * nest_type_size(args.type[i])) != 0) {
                print_error("%s: %s: argument %d was written\n", name, VARIANTS[vi].what, i);
                bad++;
            }
    }
    if (g_verbose)
        fprintf(stderr, "  %-28s %2d results: %7.1f ms\n", name, got.n, now_ms() - t0);
    arrays_free(&args);
    arrays_free(&copy);
    arrays_free(&want);
    arrays_free(&got);
    arrays_free(&mag);
    nest_function_free(f);
    nest_function_free(m);
    if (bad) {
        print_error("%s: %lld mismatches or failed runs\n", name, (long long)bad);
        fail();
    }
}

/* Builders over lists of specs. */
typedef struct specs {
    const spec *v;
    size_t n;
    nest_type t;
} specs;

static void build_convs(bld *b, const void *arg)
{
    const specs *s = arg;
    for (size_t i = 0; i < s->n; i++)
        b->res[b->nres++] = conv_of(b, s->t, &s->v[i]);
}

typedef struct pspecs {
    const pspec *v;
    size_t n;
} pspecs;

static void build_pools(bld *b, const void *arg)
{
    const pspecs *s = arg;
    for (size_t i = 0; i < s->n; i++)
        b->res[b->nres++] = pool_of(b, &s->v[i]);
}

/* ---------------------------------------------------------------------------------------------
 * Compiled against the interpreter
 * ------------------------------------------------------------------------------------------- */

#define S3(a, b, c) {a, b, c}

static const spec CONV1[] = {
    /* nsp, n, c, k, g, d, f, s, dil, pb, pa, dd, epi */
    {1, 2, 3, 4, 1, S3(11, 0, 0), S3(3, 0, 0), {0}, {0}, S3(1, 0, 0), S3(1, 0, 0), {0}, 0},
    {1, 1, 5, 7, 1, S3(13, 0, 0), S3(3, 0, 0), S3(2, 0, 0), {0}, {0}, {0}, {0}, 0},
    {1, 1, 2, 3, 1, S3(17, 0, 0), S3(4, 0, 0), {0}, S3(3, 0, 0), S3(2, 0, 0), S3(5, 0, 0), {0}, 0},
    {1, 2, 3, 2, 1, S3(7, 0, 0), S3(3, 0, 0), S3(1, 0, 0), {0}, S3(2, 0, 0), S3(2, 0, 0),
     S3(2, 0, 0), 0},
    {1, 1, 4, 5, 1, S3(9, 0, 0), S3(2, 0, 0), S3(3, 0, 0), S3(2, 0, 0), S3(-1, 0, 0),
     S3(2, 0, 0), S3(3, 0, 0), 0},
    {1, 1, 6, 6, 3, S3(10, 0, 0), S3(3, 0, 0), {0}, {0}, S3(1, 0, 0), S3(0, 0, 0), {0}, 0},
    {1, 3, 5, 5, 5, S3(8, 0, 0), S3(5, 0, 0), {0}, {0}, S3(2, 0, 0), S3(2, 0, 0), {0}, 0},
    {1, 1, 3, 17, 1, S3(40, 0, 0), S3(1, 0, 0), {0}, {0}, {0}, {0}, {0}, 0},
    {1, 1, 1, 1, 1, S3(1, 0, 0), S3(1, 0, 0), {0}, {0}, {0}, {0}, {0}, 0},
    {1, 2, 16, 32, 1, S3(5, 0, 0), S3(3, 0, 0), {0}, {0}, S3(1, 0, 0), S3(1, 0, 0), {0}, E_RELU},
    /* 1x1 over 128 positions: a product of matrices (tile.c), the bias in its tiles */
    {1, 2, 8, 5, 1, S3(128, 0, 0), S3(1, 0, 0), {0}, {0}, {0}, {0}, {0}, E_BIAS},
    /* a long filter: more taps than the kernels write out, so they loop over a table */
    {1, 1, 2, 3, 1, S3(100, 0, 0), S3(70, 0, 0), {0}, {0}, S3(3, 0, 0), {0}, {0}, 0},
};

static void test_conv1d(void **state)
{
    (void)state;
    specs s = {CONV1, countof_(CONV1), NEST_F32};
    check("conv1d", build_convs, &s, V_JIT | V_NOFUSE | V_V2 | V_AOT, false, 0);
    s.t = NEST_F64;
    check("conv1d_f64", build_convs, &s, V_JIT | V_AVX2, false, 0);
}

static const spec CONV2[] = {
    /* 3x3, padding 1, bias and ReLU fused */
    {2, 2, 4, 6, 1, S3(7, 9, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BIAS | E_RELU},
    /* the 7x7 stride-2 stem on a prime size, batch norm */
    {2, 1, 3, 8, 1, S3(23, 19, 0), S3(7, 7, 0), S3(2, 2, 0), {0}, S3(3, 3, 0), S3(3, 3, 0), {0},
     E_BN},
    /* dilation 2, asymmetric padding, residual */
    {2, 1, 3, 5, 1, S3(11, 13, 0), S3(3, 2, 0), {0}, S3(2, 3, 0), S3(0, 2, 0), S3(3, 1, 0), {0},
     E_RES},
    /* groups, prime channels per group */
    {2, 2, 6, 9, 3, S3(6, 5, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0}, E_RELU},
    /* depthwise 3x3 */
    {2, 1, 7, 7, 7, S3(9, 9, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BN | E_RELU},
    /* depthwise with a channel multiplier of 2, stride 2 */
    {2, 1, 4, 8, 4, S3(10, 7, 0), S3(3, 3, 0), S3(2, 2, 0), {0}, S3(1, 1, 0), S3(1, 1, 0), {0}, 0},
    /* 1x1 at 7x7: a product of matrices per image (tile.c), though its 49 positions waste
     * 23% of 64-wide tiles; at 6x5, too few positions for the tiles' columns: the direct
     * form, the input read in place (positions not a multiple of any vector) */
    {2, 3, 5, 7, 1, S3(7, 7, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_BIAS},
    {2, 3, 5, 7, 1, S3(6, 5, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_BIAS},
    /* 1x1 over 8x8 positions: a product of matrices per image (tile.c), with the batch norm,
     * the residual and the ReLU in its tiles; and with its value kept as a result too */
    {2, 2, 16, 24, 1, S3(8, 8, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_BN | E_RES | E_RELU},
    {2, 3, 5, 7, 1, S3(16, 4, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_KEEP | E_RELU},
    /* 1x1 at 10x10 to 190 channels: a product computed transposed (positions as the rows of
     * its tiles, tile.c), the filters packed once for the batch; with the batch norm, the
     * residual and the ReLU in its tiles; with its value kept too; at 14x14 with nothing
     * after it */
    {2, 3, 37, 190, 1, S3(10, 10, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_BN | E_RES | E_RELU},
    {2, 2, 37, 190, 1, S3(10, 10, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_KEEP | E_RELU},
    {2, 1, 48, 128, 1, S3(14, 14, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, 0},
    /* 1x1 stride 2 (the downsampling of a residual block) */
    {2, 2, 4, 6, 1, S3(8, 9, 0), S3(1, 1, 0), S3(2, 2, 0), {0}, {0}, {0}, {0}, 0},
    /* valid 5x5 (LeNet), in place */
    {2, 2, 3, 6, 1, S3(12, 12, 0), S3(5, 5, 0), {0}, {0}, {0}, {0}, {0}, E_RELU},
    /* data dilation (a transposed convolution), negative padding that crops */
    {2, 1, 3, 4, 1, S3(5, 6, 0), S3(3, 3, 0), S3(1, 2, 0), {0}, S3(2, -1, 0), S3(2, 1, 0),
     S3(2, 3, 0), 0},
    /* 17 output channels (a partial tile of channels), the value kept as a result too */
    {2, 1, 2, 17, 1, S3(6, 6, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_KEEP | E_RELU},
    /* the value read twice by its epilogue */
    {2, 1, 3, 4, 1, S3(5, 5, 0), S3(2, 2, 0), {0}, {0}, S3(1, 0, 0), S3(0, 1, 0), {0}, E_TWICE},
    /* stride larger than the window, dilation with stride */
    {2, 1, 2, 3, 1, S3(13, 11, 0), S3(2, 3, 0), S3(3, 2, 0), S3(1, 2, 0), {0}, {0}, {0}, 0},
    /* small images, channels in vector lanes (the filters packed): 3x3 at 7x7, batch 2, bias
     * and ReLU; 1x1 at 5x5 read in place; grouped with stride 2; a partial tile of channels */
    {2, 2, 8, 32, 1, S3(7, 7, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BIAS | E_RELU},
    {2, 1, 16, 16, 1, S3(5, 5, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_RES},
    {2, 1, 32, 64, 2, S3(6, 6, 0), S3(3, 3, 0), S3(2, 2, 0), {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BN},
    {2, 1, 24, 40, 1, S3(4, 3, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0}, E_KEEP},
    {2, 2, 8, 32, 1, S3(7, 7, 0), S3(9, 9, 0), {0}, {0}, S3(4, 4, 0), S3(4, 4, 0), {0}, E_RELU},
    /* empty: no input channels (zeros, then the bias), an empty axis inside the padding, no
     * output channels, no images */
    {2, 1, 0, 3, 1, S3(4, 5, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0}, E_BIAS},
    {2, 1, 2, 3, 1, S3(0, 3, 0), S3(2, 2, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0}, 0},
    {2, 1, 2, 0, 1, S3(4, 4, 0), S3(3, 3, 0), {0}, {0}, {0}, {0}, {0}, E_RELU},
    {2, 0, 2, 3, 1, S3(4, 4, 0), S3(3, 3, 0), {0}, {0}, {0}, {0}, {0}, 0},
};

static void test_conv2d(void **state)
{
    (void)state;
    specs s = {CONV2, countof_(CONV2), NEST_F32};
    check("conv2d", build_convs, &s, V_JIT | V_NOFUSE | V_AVX2 | V_AOT | V_AOT_PLAIN, false, 0);
    s.t = NEST_F64;
    check("conv2d_f64", build_convs, &s, V_JIT | V_V2, false, 0);
}

static const spec CONV3[] = {
    {3, 1, 2, 3, 1, S3(5, 6, 7), S3(3, 3, 3), {0}, {0}, S3(1, 1, 1), S3(1, 1, 1), {0},
     E_BIAS | E_RELU},
    {3, 2, 4, 4, 2, S3(7, 5, 6), S3(3, 2, 3), S3(2, 1, 2), S3(1, 2, 1), S3(1, 0, 2), S3(0, 1, 1),
     {0}, 0},
    {3, 1, 3, 3, 3, S3(4, 5, 3), S3(2, 2, 2), {0}, {0}, {0}, {0}, S3(2, 1, 2), E_RES},
    {3, 1, 2, 5, 1, S3(3, 4, 5), S3(1, 1, 1), {0}, {0}, {0}, {0}, {0}, 0},
    {3, 2, 4, 6, 1, S3(4, 4, 4), S3(1, 1, 1), {0}, {0}, {0}, {0}, {0}, E_BIAS | E_RELU},
    /* 270 taps: the kernels loop over the taps axis by axis (a table per axis), stride phases */
    {3, 2, 3, 5, 1, S3(12, 11, 13), S3(9, 3, 10), S3(1, 1, 2), {0}, S3(1, 0, 0), S3(2, 0, 1), {0},
     E_RELU},
    {3, 1, 8, 32, 1, S3(3, 3, 3), S3(3, 3, 3), {0}, {0}, S3(1, 1, 1), S3(1, 1, 1), {0}, E_BIAS},
};

static void test_conv3d(void **state)
{
    (void)state;
    specs s = {CONV3, countof_(CONV3), NEST_F32};
    check("conv3d", build_convs, &s, V_JIT | V_NOFUSE | V_V2, false, 0);
}

/* Layers large enough for the parallel loops and the full register tiles. */
static const spec CONV_BIG[] = {
    {2, 2, 32, 32, 1, S3(20, 24, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BN | E_RELU},
    {2, 1, 64, 48, 1, S3(14, 14, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0}, E_RES | E_RELU},
    {2, 2, 16, 16, 16, S3(30, 30, 0), S3(3, 3, 0), S3(2, 2, 0), {0}, S3(1, 1, 0), S3(1, 1, 0),
     {0}, 0},
    /* channels in lanes at 4x4 with the images inside each tile of channels (AVX-512: 3 tiles
     * of 32 channels, the 3 images' 2 tiles of 8 positions each) */
    {2, 3, 128, 96, 1, S3(4, 4, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BN | E_RELU},
    /* the same with constant filters, packed ahead of time; then grouped (two groups of 40
     * channels, each a panel of 48 with 8 of zeros under AVX-512); then constant filters that
     * are a result too, packed per call */
    {2, 3, 128, 96, 1, S3(4, 4, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BN | E_RELU | E_CONST},
    {2, 1, 64, 80, 2, S3(5, 5, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BIAS | E_CONST},
    {2, 2, 128, 96, 1, S3(4, 4, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_RELU | E_CONST_KEPT},
    /* a stem's shape: 7x7 with stride 2 over 16 channels of 90x90, whose planes (one per phase
     * of the stride, 590 KB an image) pass half the second-level cache while the filters (75
     * KB) stay within it: the tiles of channels run innermost (AVX-512) */
    {2, 2, 16, 24, 1, S3(90, 90, 0), S3(7, 7, 0), S3(2, 2, 0), {0}, S3(3, 3, 0), S3(3, 3, 0),
     {0}, E_BIAS | E_RELU},
    /* to 32x32: tiles of positions along the output rows, each a tile of two vectors of the
     * 32 positions (AVX-512: the planes' rows of 35 would take 24 tiles of 48 an image) */
    {2, 2, 3, 16, 1, S3(64, 64, 0), S3(7, 7, 0), S3(2, 2, 0), {0}, S3(3, 3, 0), S3(3, 3, 0),
     {0}, E_BIAS | E_RELU},
    /* a 1x1 convolution with constant filters at 14x14: a product computed transposed, the
     * filters its second factor, stored as its panels (AVX-512) */
    {2, 2, 256, 128, 1, S3(14, 14, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0},
     E_BN | E_RELU | E_CONST},
    /* 1x1 at 10x10 from 300 to 190 channels, 5 images (600 KB of input): compiled for one
     * core, the sum in blocks of 128 k (the last of 44), three images a group (the last of
     * two), the batch norm, the residual and the ReLU after the last block (AVX-512) */
    {2, 5, 300, 190, 1, S3(10, 10, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0},
     E_BN | E_RES | E_RELU},
    /* the same at 14x14 to 128 channels with constant filters, stored as their panels: the
     * partial sums in a buffer of their own, two images a group */
    {2, 3, 300, 128, 1, S3(14, 14, 0), S3(1, 1, 0), {0}, {0}, {0}, {0}, {0},
     E_BN | E_RELU | E_CONST},
};

static void test_conv_big(void **state)
{
    (void)state;
    specs s = {CONV_BIG, countof_(CONV_BIG), NEST_F32};
    check("conv_big", build_convs, &s, V_JIT | V_NOOMP | V_V2 | V_AOT | V_AOT_PLAIN, false, 0);
}

/* One image at small sizes, in the dense form (positions in lanes, the copy a run of the output
 * positions per input channel and tap, no planes' margins: AVX-512). */
static const spec CONV_DENSE[] = {
    /* 512@7x7's shape at 160 channels: the sum over 2 blocks of 80 input channels, 16 tiles of
     * 8 channels x 48 positions, the 49th position summed with the channels and taps in the
     * lanes (the tail); through a batch norm, a residual and a ReLU */
    {2, 1, 160, 128, 1, S3(7, 7, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BN | E_RES | E_RELU},
    /* 131 channels in tiles of 4: the last tile of 3 channels (the kernel's general loop, its
     * block after block), the tail's 3 likewise; the value kept beside the bias' */
    {2, 1, 160, 131, 1, S3(7, 7, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BIAS | E_KEEP},
    /* 1-D with stride 2: 49 positions of 97 */
    {1, 1, 64, 64, 1, S3(97, 0, 0), S3(3, 0, 0), S3(2, 0, 0), {0}, S3(1, 0, 0), S3(1, 0, 0), {0},
     E_RELU},
    /* stride 2 and dilation 2: 6x6, the last 4 positions the tail */
    {2, 1, 64, 64, 1, S3(13, 13, 0), S3(3, 3, 0), S3(2, 2, 0), S3(2, 2, 0), S3(2, 2, 0),
     S3(2, 2, 0), {0}, E_BN},
    /* data dilation 2 (a transposed convolution's form): 9x9 */
    {2, 1, 32, 64, 1, S3(5, 5, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), S3(2, 2, 0),
     0},
    /* 60 channels in tiles of 6: the tail's 4 channels at a time, then 2 */
    {2, 1, 128, 60, 1, S3(7, 7, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_TWICE},
    /* 3-D, 4x4x4: 64 positions in 4 vectors, no tail */
    {3, 1, 24, 48, 1, S3(4, 4, 4), S3(3, 3, 3), {0}, {0}, S3(1, 1, 1), S3(1, 1, 1), {0}, E_RELU},
    /* 320 channels: without OpenMP three blocks of 107 (the second and third added to the
     * first's sums); with it 8 chunks of 40, on two threads four each, on three 3, 3 and 2; a
     * residual after */
    {2, 1, 320, 56, 1, S3(7, 7, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_RES | E_RELU},
    /* 7x9: 63 positions in one tile of 5 channels x 4 vectors, no tail: the copy's slack
     * zeroed by the last chunk ends where the partial sums start (it once reached into them
     * and zeroed the sums of the chunks that had run) */
    {2, 1, 200, 70, 1, S3(7, 9, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BIAS},
};

/* The specs of CONV_DENSE large enough to split their input channels over the threads. */
static const bool CONV_DENSE_SPLIT[] = {true, true, false, false, false, false, false, true, true};

/* f64: tiles of 7 channels x 3 vectors of 8, the tail's one position 4 channels then 3; at 200
 * channels, blocks of 67 split over the threads */
static const spec CONV_DENSE64[] = {
    {2, 1, 96, 70, 1, S3(7, 7, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BN | E_RELU},
    {2, 1, 200, 70, 1, S3(7, 7, 0), S3(3, 3, 0), {0}, {0}, S3(1, 1, 0), S3(1, 1, 0), {0},
     E_BIAS},
};

/* The team of the JIT'd code's next parallel regions on this thread: n threads (from libomp,
 * which the first compiled call with OpenMP loaded); false when it cannot be set. */
static bool omp_threads(int n)
{
    void *lib = dlopen("libomp.so.5", RTLD_NOW | RTLD_NOLOAD);
    void (*set)(int) = NULL;
    if (lib)
        *(void **)&set = dlsym(lib, "omp_set_num_threads");
    if (set)
        set(n);
    if (lib)
        dlclose(lib);
    return set != NULL;
}

/* The compiled convolutions of s (V_JIT) on real-valued inputs give the same bits on 1, 2 and
 * 3 threads (omp_threads: libomp loaded). */
static void same_bits_on_threads(const char *name, const specs *s)
{
    nest_function *f = build(name, build_convs, s, false);
    arrays args, got[3];
    arrays_alloc(&args, f, false);
    fill(&args, 7, true);
    int64_t bad = 0;
    for (int t = 0; t < 3; t++) {
        arrays_alloc(&got[t], f, true);
        omp_threads(t + 1);
        if (!run_variant(f, 0, &args, &got[t])) {
            bad++;
            continue;
        }
        for (int r = 0; t > 0 && r < got[t].n; r++)
            if (memcmp(got[t].p[r], got[0].p[r],
                       (size_t)got[t].count[r] * nest_type_size(got[t].type[r])) != 0) {
                print_error("%s: result %d on %d threads differs from one thread's\n", name, r,
                            t + 1);
                bad++;
            }
    }
    for (int t = 0; t < 3; t++)
        arrays_free(&got[t]);
    arrays_free(&args);
    nest_function_free(f);
    if (bad)
        fail();
}

static void test_conv_dense(void **state)
{
    (void)state;
    specs s = {CONV_DENSE, countof_(CONV_DENSE), NEST_F32};
    unsigned all = V_JIT | V_NOOMP | V_AVX2 | V_V2 | V_AOT | V_AOT_PLAIN;
    assert_int_equal(countof_(CONV_DENSE_SPLIT), countof_(CONV_DENSE));
    /* with 64-byte vectors, each of them takes the dense form, split over the threads when
     * large enough */
    for (size_t i = 0; i < countof_(CONV_DENSE); i++) {
        specs one = {&CONV_DENSE[i], 1, NEST_F32};
        nest_function *f = build("conv_dense_form", build_convs, &one, false);
        char *text = nest_emit(&f, 1, NEST_EMIT_C, NULL);
        assert_non_null(text);
        if (strstr(text, "nest_f32x16") &&
            (!strstr(text, "positions dense, a run per input channel and tap") ||
             !strstr(text, "chunks, each summing every tile") != !CONV_DENSE_SPLIT[i])) {
            print_error("conv_dense spec %zu: not in the dense form%s\n", i,
                        CONV_DENSE_SPLIT[i] ? " split over the threads" : " on one core");
            fail();
        }
        nest_string_free(text);
        nest_function_free(f);
    }
    check("conv_dense", build_convs, &s, all, false, 0);
    check("conv_dense_real", build_convs, &s, V_JIT | V_NOOMP, true, 64);
    specs d = {CONV_DENSE64, countof_(CONV_DENSE64), NEST_F64};
    check("conv_dense_f64", build_convs, &d, all, false, 0);
    /* the split on one thread (every chunk on it) and on three (uneven shares of the chunks),
     * real-valued: the same bits on 1, 2 and 3 threads */
    if (omp_threads(1)) {
        check("conv_dense_1t", build_convs, &s, V_JIT, false, 0);
        check("conv_dense_f64_1t", build_convs, &d, V_JIT, false, 0);
        omp_threads(3);
        check("conv_dense_3t", build_convs, &s, V_JIT, false, 0);
        check("conv_dense_f64_3t", build_convs, &d, V_JIT, false, 0);
        same_bits_on_threads("conv_dense_bits", &s);
        same_bits_on_threads("conv_dense_f64_bits", &d);
        omp_threads((int)sysconf(_SC_NPROCESSORS_ONLN));
    } else {
        print_error("conv_dense: libomp not loaded, the split not checked on 1 and 3 threads\n");
        fail();
    }
}

/* Stems: 7x7 with stride 2 from 3 channels of 128x128 to 64 of 64x64, 2 images: tiles of
 * positions along the output rows (48, then the last 16 in a tile of one vector: AVX-512), the
 * result (2 MB) written past the caches; alone, and through a batch norm and a ReLU absorbed
 * into the tiles' stores. With the results at 64 bytes (whole lines past the caches), and a
 * float past them (plain stores). */
static const spec CONV_STREAM[] = {
    {2, 2, 3, 64, 1, S3(128, 128, 0), S3(7, 7, 0), S3(2, 2, 0), {0}, S3(3, 3, 0), S3(3, 3, 0),
     {0}, 0},
    {2, 2, 3, 64, 1, S3(128, 128, 0), S3(7, 7, 0), S3(2, 2, 0), {0}, S3(3, 3, 0), S3(3, 3, 0),
     {0}, E_BN | E_RELU},
};

static void test_conv_stream(void **state)
{
    (void)state;
    g_aligned = true;
    for (g_skew = 0; g_skew < 2; g_skew++) {
        for (size_t i = 0; i < countof_(CONV_STREAM); i++) {
            specs s = {&CONV_STREAM[i], 1, NEST_F32};
            check(g_skew ? "conv_stream_skewed" : "conv_stream", build_convs, &s,
                  V_JIT | V_NOOMP | V_AOT, false, 0);
        }
    }
    g_aligned = false;
    g_skew = 0;
}

/* Real-valued data: the compiled sums may round differently from the interpreter's (double,
 * one order), within a few ulps of the sum of magnitudes for these sums of tens to hundreds of
 * terms. */
static void test_conv_rounding(void **state)
{
    (void)state;
    specs s = {CONV2, countof_(CONV2), NEST_F32};
    check("conv2d_real", build_convs, &s, V_JIT, true, 64);
    s.v = CONV_BIG;
    s.n = countof_(CONV_BIG);
    check("conv_big_real", build_convs, &s, V_JIT, true, 64);
}

static const pspec POOLS[] = {
    /* nsp, avg, incl, type, n, c, d, window, strides, pad below, above, relu before */
    {2, false, false, NEST_F32, 2, 3, S3(8, 8, 0), S3(2, 2, 0), S3(2, 2, 0), {0}, {0}, true},
    {2, false, false, NEST_F32, 1, 4, S3(11, 9, 0), S3(3, 3, 0), S3(2, 2, 0), S3(1, 1, 0),
     S3(1, 1, 0), false},
    {2, true, false, NEST_F32, 1, 2, S3(7, 9, 0), S3(3, 2, 0), S3(2, 3, 0), S3(1, 1, 0),
     S3(2, 1, 0), false},
    {2, true, true, NEST_F32, 2, 2, S3(6, 5, 0), S3(3, 3, 0), {0}, S3(1, 2, 0), S3(2, 1, 0), true},
    {1, false, false, NEST_F64, 3, 2, S3(13, 0, 0), S3(4, 0, 0), S3(3, 0, 0), S3(2, 0, 0),
     S3(3, 0, 0), false},
    {1, true, false, NEST_F64, 1, 3, S3(10, 0, 0), S3(3, 0, 0), {0}, S3(2, 0, 0), {0}, false},
    {3, false, false, NEST_F32, 1, 2, S3(5, 6, 4), S3(2, 3, 2), S3(2, 1, 2), S3(1, 0, 1),
     S3(1, 2, 1), true},
    {3, true, true, NEST_F32, 1, 1, S3(4, 4, 4), S3(2, 2, 2), S3(2, 2, 2), {0}, {0}, false},
    {2, false, false, NEST_I32, 1, 3, S3(6, 7, 0), S3(2, 3, 0), S3(2, 2, 0), S3(1, 1, 0),
     S3(0, 2, 0), true},
    {2, false, false, NEST_I64, 2, 1, S3(5, 5, 0), S3(3, 3, 0), S3(1, 1, 0), S3(1, 1, 0),
     S3(1, 1, 0), false},
    /* a global average (a 7x7 image to one value per channel), large enough for threads */
    {2, true, false, NEST_F32, 8, 256, S3(7, 7, 0), S3(7, 7, 0), {0}, {0}, {0}, false},
    {2, false, false, NEST_F32, 2, 64, S3(56, 56, 0), S3(3, 3, 0), S3(2, 2, 0), S3(1, 1, 0),
     S3(1, 1, 0), true},
};

static void test_pool(void **state)
{
    (void)state;
    pspecs s = {POOLS, countof_(POOLS)};
    /* averages divide once: in float here and in double there, so they may differ by an ulp */
    check("pools", build_pools, &s, V_JIT | V_NOFUSE | V_NOOMP | V_V2 | V_AOT, true, 2);
}

/* A ResNet basic block: conv, batch norm, ReLU, conv, batch norm, the residual, ReLU; then a
 * max pool of the ReLU of a third convolution's output, and LeNet's convolutions and pools. */
static void build_block(bld *b, const void *arg)
{
    (void)arg;
    nest_function *f = b->f;
    int64_t xs[4] = {2, 8, 10, 10}, ws[4] = {8, 8, 3, 3}, k = 8, pad[2] = {1, 1};
    int64_t all[4] = {0, 1, 2, 3}, ch[3] = {0, 2, 3};
    nest_value x = A(b, param(b, NEST_F32, 4, xs));
    nest_value w1 = A(b, param(b, NEST_F32, 4, ws)), w2 = A(b, param(b, NEST_F32, 4, ws));
    nest_value s1 = A(b, param(b, NEST_F32, 1, &k)), h1 = A(b, param(b, NEST_F32, 1, &k));
    nest_value s2 = A(b, param(b, NEST_F32, 1, &k)), h2 = A(b, param(b, NEST_F32, 1, &k));
    nest_value zero = nest_broadcast(f, nest_constant(f, NEST_F32, 0, NULL, &(float){0}, 1), 4,
                                     xs, 4, all);
    nest_value y = nest_convolution(f, x, w1, NULL, NULL, pad, pad, NULL, 1);
    y = nest_add(f, nest_multiply(f, y, nest_broadcast(f, s1, 4, xs, 3, ch)),
                 nest_broadcast(f, h1, 4, xs, 3, ch));
    y = nest_maximum(f, y, zero);
    y = nest_convolution(f, y, w2, NULL, NULL, pad, pad, NULL, 1);
    y = nest_add(f, nest_multiply(f, y, nest_broadcast(f, s2, 4, xs, 3, ch)),
                 nest_broadcast(f, h2, 4, xs, 3, ch));
    y = nest_maximum(f, nest_add(f, y, x), zero);
    b->res[b->nres++] = y;
    nest_value w3 = A(b, param(b, NEST_F32, 4, ws));
    nest_value z = nest_maximum(f, nest_convolution(f, y, w3, NULL, NULL, pad, pad, NULL, 1), zero);
    int64_t win[2] = {3, 3}, st[2] = {2, 2};
    b->res[b->nres++] = nest_max_pool(f, z, win, st, pad, pad);
    /* LeNet: 1 -> 6 channels 5x5 on 32x32, 2x2 max pool, 6 -> 16 5x5, 2x2 average pool */
    int64_t ls[4] = {2, 1, 32, 32}, lw1[4] = {6, 1, 5, 5}, lw2[4] = {16, 6, 5, 5}, two[2] = {2, 2};
    nest_value l = A(b, param(b, NEST_F32, 4, ls));
    l = nest_convolution(f, l, A(b, param(b, NEST_F32, 4, lw1)), NULL, NULL, NULL, NULL, NULL, 1);
    l = nest_max_pool(f, b->mag ? l : nest_tanh(f, l), two, two, NULL, NULL);
    l = nest_convolution(f, l, A(b, param(b, NEST_F32, 4, lw2)), NULL, NULL, NULL, NULL, NULL, 1);
    b->res[b->nres++] = nest_avg_pool(f, l, two, two, NULL, NULL, 0);
}

static void test_chains(void **state)
{
    (void)state;
    check("chains", build_block, NULL, V_JIT | V_NOFUSE | V_AVX2 | V_AOT, true, 64);
}

/* Column-major parameters and results (the first and the last; the second is row-major): the
 * input is copied (not read in place) and the filters are made dense first. */
static void build_colmajor(bld *b, const void *arg)
{
    (void)arg;
    nest_function *f = b->f;
    int64_t xs[4] = {2, 3, 6, 5}, ws[4] = {4, 3, 1, 1}, ws3[4] = {4, 3, 3, 3};
    nest_value x = nest_parameter(f, "x", NEST_F32, 4, xs, NEST_COL_MAJOR);
    nest_value w = nest_parameter(f, "w", NEST_F32, 4, ws, NEST_COL_MAJOR);
    nest_value w3 = nest_parameter(f, "w3", NEST_F32, 4, ws3, NEST_COL_MAJOR);
    int64_t pad[2] = {1, 1};
    b->lay[b->nres] = NEST_COL_MAJOR;
    b->res[b->nres++] = nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 1);
    b->res[b->nres++] = nest_convolution(f, x, w3, NULL, NULL, pad, pad, NULL, 1);
    int64_t win[2] = {2, 2};
    b->lay[b->nres] = NEST_COL_MAJOR;
    b->res[b->nres++] = nest_max_pool(f, x, win, NULL, NULL, NULL);
}

static void test_colmajor(void **state)
{
    (void)state;
    check("colmajor", build_colmajor, NULL, V_JIT | V_NOFUSE | V_AOT, false, 0);
}

/* ---------------------------------------------------------------------------------------------
 * The reference interpreter against closed forms
 * ------------------------------------------------------------------------------------------- */

/* Along one axis: how many taps of output position o land on an element of x. */
static int64_t taps_on_x(int64_t o, int64_t d, int64_t f, int64_t s, int64_t dil, int64_t pb,
                         int64_t dd)
{
    int64_t n = 0;
    for (int64_t t = 0; t < f; t++) {
        int64_t u = o * s + t * dil - pb;
        n += u >= 0 && u % dd == 0 && u / dd < d;
    }
    return n;
}

/* All-ones x and w: each output is (C / groups) times the product over the axes of the taps that
 * land on x; the result's shape is the formula's. */
static void test_interp_ones(void **state)
{
    (void)state;
    static const spec cases[] = {
        {2, 2, 4, 6, 2, S3(7, 9, 0), S3(3, 4, 0), S3(2, 1, 0), S3(1, 2, 0), S3(2, -1, 0),
         S3(1, 3, 0), S3(1, 2, 0), 0},
        {3, 1, 3, 3, 3, S3(4, 3, 5), S3(2, 3, 1), S3(1, 2, 3), S3(2, 1, 1), S3(1, 1, 0),
         S3(0, 2, 1), S3(3, 1, 2), 0},
        {1, 1, 1, 1, 1, S3(6, 0, 0), S3(2, 0, 0), S3(4, 0, 0), S3(3, 0, 0), S3(5, 0, 0),
         S3(4, 0, 0), S3(2, 0, 0), 0},
    };
    for (size_t ci = 0; ci < countof_(cases); ci++) {
        const spec *sp = &cases[ci];
        nest_function *f = nest_function_new("ones");
        bld b = {.f = f};
        nest_value y = conv_of(&b, NEST_F64, sp);
        assert_value(f, y);
        assert_ok(f, nest_return(f, 1, &y, NULL));
        int64_t o[3] = {1, 1, 1}, S[3], D[3], F[3], P[3], L[3], DD[3];
        for (int i = 0; i < 3; i++) {
            bool on = i < sp->nsp;
            S[i] = on && sp->s[i] ? sp->s[i] : 1;
            D[i] = on ? sp->d[i] : 1;
            F[i] = on ? sp->f[i] : 1;
            P[i] = on ? sp->pb[i] : 0;
            L[i] = on && sp->dil[i] ? sp->dil[i] : 1;
            DD[i] = on && sp->dd[i] ? sp->dd[i] : 1;
            if (on) {
                int64_t in = (D[i] - 1) * DD[i] + 1 + sp->pb[i] + sp->pa[i];
                o[i] = (in - ((F[i] - 1) * L[i] + 1)) / S[i] + 1;
                assert_int_equal(nest_value_shape(f, y)[2 + i], o[i]);
            }
        }
        arrays args, got;
        arrays_alloc(&args, f, false);
        arrays_alloc(&got, f, true);
        for (int i = 0; i < args.n; i++)
            for (int64_t j = 0; j < args.count[i]; j++)
                ((double *)args.p[i])[j] = 1;
        assert_ok(f, nest_evaluate(f, args.p, args.n, got.p, got.n));
        const double *r = got.p[0];
        int64_t e = 0;
        for (int64_t n = 0; n < sp->n; n++)
            for (int64_t k = 0; k < sp->k; k++)
                for (int64_t a = 0; a < o[0]; a++)
                    for (int64_t bb = 0; bb < o[1]; bb++)
                        for (int64_t cc = 0; cc < o[2]; cc++, e++) {
                            double want =
                                (double)(sp->c / sp->g) *
                                (double)taps_on_x(a, D[0], F[0], S[0], L[0], P[0], DD[0]) *
                                (double)taps_on_x(bb, D[1], F[1], S[1], L[1], P[1], DD[1]) *
                                (double)taps_on_x(cc, D[2], F[2], S[2], L[2], P[2], DD[2]);
                            if (r[e] != want)
                                fail_msg("case %zu element %lld: %g, want %g", ci, (long long)e,
                                         r[e], want);
                        }
        arrays_free(&args);
        arrays_free(&got);
        nest_function_free(f);
    }
}

/* Hand-computed: a 1-d convolution with 2 groups, stride 2, padding and dilation; pools with
 * and without the padding in the average. */
static void test_interp_values(void **state)
{
    nest_function *f = *state;
    int64_t xs[3] = {1, 2, 5}, ws[3] = {2, 1, 2};
    nest_value x = nest_parameter(f, "x", NEST_F32, 3, xs, NEST_ROW_MAJOR);
    nest_value w = nest_parameter(f, "w", NEST_F32, 3, ws, NEST_ROW_MAJOR);
    int64_t s[1] = {2}, dil[1] = {2}, pb[1] = {1}, win[1] = {2}, one[1] = {1};
    nest_value y = nest_convolution(f, x, w, s, dil, pb, NULL, NULL, 2);
    nest_value mp = nest_max_pool(f, x, win, NULL, one, NULL);
    nest_value ap = nest_avg_pool(f, x, win, s, one, one, 0);
    nest_value ai = nest_avg_pool(f, x, win, s, one, one, 1);
    nest_value r[4] = {y, mp, ap, ai};
    assert_ok(f, nest_return(f, 4, r, NULL));
    /* x = [1 2 3 4 5; 6 7 8 9 10], w = [[10, 1], [100, 1000]]. Channel 0 padded below:
     * [0 1 2 3 4 5]; output o takes u = 2o and 2o + 2 (twice: the window of 3 fits at 0 and 2):
     * 10*0 + 1*2 = 2, 10*2 + 1*4 = 24. Channel 1, [0 6 7 8 9 10]: 100*0 + 1000*7 = 7000,
     * 100*7 + 1000*9 = 9700. */
    float xv[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, wv[4] = {10, 1, 100, 1000};
    float got[4][12];
    void *args[2] = {xv, wv}, *res[4] = {got[0], got[1], got[2], got[3]};
    assert_ok(f, nest_evaluate(f, args, 2, res, 4));
    assert_int_equal(nest_value_shape(f, y)[2], 2);
    float want_y[4] = {2, 24, 7000, 9700};
    assert_exact(NEST_F32, got[0], want_y, 4);
    /* max pool, window 2, 1 below: [pad 1] [1 2] [2 3] [3 4] [4 5] */
    float want_mp[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    assert_exact(NEST_F32, got[1], want_mp, 10);
    /* average, window 2 stride 2, 1 each side: [pad 1] [2 3] [4 5]: 1, 2.5, 4.5 over the
     * elements of x, or 0.5, 2.5, 4.5 with the padding counted */
    float want_ap[6] = {1, 2.5f, 4.5f, 6, 7.5f, 9.5f}, want_ai[6] = {0.5f, 2.5f, 4.5f, 3, 7.5f, 9.5f};
    assert_exact(NEST_F32, got[2], want_ap, 6);
    assert_exact(NEST_F32, got[3], want_ai, 6);
}

/* ---------------------------------------------------------------------------------------------
 * Type rules and errors
 * ------------------------------------------------------------------------------------------- */

static void test_errors(void **state)
{
    nest_function *f = *state;
    int64_t xs[4] = {1, 4, 5, 5}, ws[4] = {6, 2, 3, 3}, w3s[3] = {6, 4, 3}, bigs[4] = {6, 4, 7, 7};
    nest_value x = nest_parameter(f, "x", NEST_F32, 4, xs, NEST_ROW_MAJOR);
    nest_value w = nest_parameter(f, "w", NEST_F32, 4, ws, NEST_ROW_MAJOR);
    nest_value w3 = nest_parameter(f, "w3", NEST_F32, 3, w3s, NEST_ROW_MAJOR);
    nest_value big = nest_parameter(f, "big", NEST_F32, 4, bigs, NEST_ROW_MAJOR);
    nest_value wd = nest_parameter(f, "wd", NEST_F64, 4, ws, NEST_ROW_MAJOR);
    nest_value xi = nest_parameter(f, "xi", NEST_I32, 4, xs, NEST_ROW_MAJOR);
    int64_t vs[1] = {5};
    nest_value v = nest_parameter(f, "v", NEST_F32, 1, vs, NEST_ROW_MAJOR);
    int64_t zero[2] = {0, 1}, neg[2] = {-1, 1}, three[2] = {3, 1}, win[2] = {2, 2}, six[2] = {6, 1};

    /* groups 2: each filter takes 2 channels; the result is [1, 6, 3, 3] */
    nest_value y = nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 2);
    assert_value(f, y);
    assert_int_equal(nest_value_shape(f, y)[1], 6);
    assert_int_equal(nest_value_shape(f, y)[3], 3);

    assert_int_equal(nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 1), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "convolution(x: f32[1,4,5,5], w: f32[6,2,3,3]): the filters "
                                   "take 2 input channels in each of 1 groups");
    assert_int_equal(nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 4), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "in each of 4 groups, but the input has 4 channels");
    assert_int_equal(nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 0), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "groups must be at least 1");
    assert_int_equal(nest_convolution(f, x, w, zero, NULL, NULL, NULL, NULL, 2), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "strides must be at least 1 (spatial axis 0 is 0)");
    assert_int_equal(nest_convolution(f, x, w, NULL, neg, NULL, NULL, NULL, 2), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "dilation must be at least 1");
    assert_int_equal(nest_convolution(f, x, w, NULL, NULL, NULL, NULL, zero, 2), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "data_dilation must be at least 1");
    assert_int_equal(nest_convolution(f, x, big, NULL, NULL, NULL, NULL, NULL, 1), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE,
                 "spatial axis 0: the window (7 with dilation) is larger than the padded input (5)");
    int64_t neg2[2] = {-2, 0};
    assert_int_equal(nest_convolution(f, x, w, NULL, NULL, neg2, neg, NULL, 2), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "larger than the padded input (2)");
    assert_int_equal(nest_convolution(f, x, w, NULL, three, NULL, NULL, NULL, 2), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "the window (7 with dilation)");
    assert_int_equal(nest_convolution(f, x, w3, NULL, NULL, NULL, NULL, NULL, 1), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "the filters must be [K, C/groups, f1..fk] of the input's rank 4");
    assert_int_equal(nest_convolution(f, x, wd, NULL, NULL, NULL, NULL, NULL, 2), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "operand element types differ");
    assert_int_equal(nest_convolution(f, xi, w, NULL, NULL, NULL, NULL, NULL, 2), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "operand 1 must be f32 or f64, not i32");
    assert_int_equal(nest_convolution(f, v, v, NULL, NULL, NULL, NULL, NULL, 1), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "the input must be [N, C, d1..dk] with 1 to 3 spatial axes");

    /* pools */
    assert_value(f, nest_max_pool(f, xi, win, win, NULL, NULL));
    assert_int_equal(nest_max_pool(f, x, NULL, NULL, NULL, NULL), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "max_pool(x: f32[1,4,5,5]): the window is not given");
    assert_int_equal(nest_max_pool(f, x, zero, NULL, NULL, NULL), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "window must be at least 1");
    assert_int_equal(nest_max_pool(f, x, win, NULL, win, NULL), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "padding (2 below, 0 above) must be smaller than the window (2)");
    assert_int_equal(nest_avg_pool(f, x, win, NULL, NULL, neg, 0), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "pad_above must be at least 0");
    assert_int_equal(nest_max_pool(f, x, six, NULL, NULL, NULL), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "the window (6 with dilation) is larger than the padded input (5)");
    assert_int_equal(nest_avg_pool(f, xi, win, NULL, NULL, NULL, 0), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "avg_pool(xi: i32[1,4,5,5]): operand 1 must be f32 or f64");
    /* an empty spatial axis: no window would hold an element */
    int64_t es[3] = {1, 1, 0}, w1[1] = {1};
    nest_value e = nest_parameter(f, "e", NEST_F32, 3, es, NEST_ROW_MAJOR);
    assert_int_equal(nest_max_pool(f, e, w1, NULL, NULL, NULL), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "spatial axis 0 is empty");
    /* a result too large */
    int64_t hs[3] = {1, 1, (int64_t)1 << 40}, hw[3] = {1 << 22, 1, 1};
    nest_value hx = nest_parameter(f, "hx", NEST_F32, 3, hs, NEST_ROW_MAJOR);
    nest_value hk = nest_parameter(f, "hk", NEST_F32, 3, hw, NEST_ROW_MAJOR);
    assert_int_equal(nest_convolution(f, hx, hk, NULL, NULL, NULL, NULL, NULL, 1), NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "the result is too large");
    /* a pool window of 2^63 taps (each axis' padding fills it around one element): a count no
     * loop or average holds */
    int64_t ones[5] = {1, 1, 1, 1, 1}, pw[3], pp[3];
    for (int i = 0; i < 3; i++)
        pw[i] = (int64_t)1 << 21, pp[i] = ((int64_t)1 << 21) - 1;
    nest_value o = nest_parameter(f, "o", NEST_F32, 5, ones, NEST_ROW_MAJOR);
    assert_int_equal(nest_max_pool(f, o, pw, NULL, pp, pp), NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "max_pool(o: f32[1,1,1,1,1]): the window has too many taps "
                                    "(2097152 along spatial axis 2; the limit is 2^62 in all)");
    assert_int_equal(nest_avg_pool(f, o, pw, NULL, pp, pp, 1), NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "the window has too many taps");
    pw[2] = 1 << 20, pp[2] = (1 << 20) - 1; /* 2^62 taps: the limit */
    assert_int_equal(nest_max_pool(f, o, pw, NULL, pp, pp), NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "the window has too many taps");
    pw[2] = 1 << 19, pp[2] = (1 << 19) - 1; /* 2^61 taps, one window holding the element */
    nest_value po = nest_max_pool(f, o, pw, pw, pp, pp);
    assert_value(f, po);
    for (int i = 2; i < 5; i++)
        assert_int_equal(nest_value_shape(f, po)[i], 1);
}

/* A pool window of 2^40 taps over one element padded by 2^40 - 1: the interpreter took a step
 * per tap (hours); now both it and the compiled code visit only the taps on the input. Against
 * closed forms: the max and the average without padding are the element, with padding the
 * element over 2^40. */
static void test_huge_pool_window(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("wide");
    int64_t big = (int64_t)1 << 40, win[2] = {1, big}, pad[2] = {0, big - 1};
    nest_value x = nest_parameter(f, "x", NEST_F64, 4, SHAPE(1, 2, 1, 1), NEST_ROW_MAJOR);
    nest_value r[3] = {nest_max_pool(f, x, win, NULL, NULL, pad),
                       nest_avg_pool(f, x, win, NULL, pad, NULL, 0),
                       nest_avg_pool(f, x, win, NULL, NULL, pad, 1)};
    assert_ok(f, nest_return(f, 3, r, NULL));
    double xv[2] = {-0.625, 3.5}, got[3][2];
    void *args[1] = {xv}, *res[3] = {got[0], got[1], got[2]};
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    for (int run = 0; run < 2; run++) {
        memset(got, 0, sizeof got);
        if (run == 0)
            assert_ok(f, nest_evaluate(f, args, 1, res, 3));
        else
            assert_int_equal(nest_call(k, args, 1, res, 3), NEST_OK);
        for (int c = 0; c < 2; c++) {
            assert_true(got[0][c] == xv[c]);
            assert_true(got[1][c] == xv[c]);
            assert_true(got[2][c] == xv[c] / (double)big);
        }
    }
    nest_kernel_free(k);
    nest_function_free(f);
}

/* Windows too large for the generated code: an error naming the op, its window and the limit,
 * at the start of planning, before anything of the window's size is allocated. */
static void test_window_limits(void **state)
{
    (void)state;
    /* a window of 2^40 taps (fuzz_build): its table of tap offsets would take 8 TiB */
    nest_function *f = nest_function_new("huge");
    int64_t big = (int64_t)1 << 40;
    nest_value x = nest_parameter(f, "x", NEST_F32, 3, SHAPE(1, 1, big), NEST_ROW_MAJOR);
    nest_value w = nest_parameter(f, "w", NEST_F32, 3, SHAPE(1, 1, big), NEST_ROW_MAJOR);
    nest_value y = nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 1);
    assert_ok(f, nest_return(f, 1, &y, NULL));
    assert_null(nest_emit(&f, 1, NEST_EMIT_C, NULL));
    assert_error(f, NEST_ERR_LIMIT,
                 "compiling huge: convolution (filters f32[1,1,1099511627776]): its window has "
                 "1099511627776 taps along spatial axis 0, more than the 65536 the generated code "
                 "takes (in pass fuse)");
    assert_null(nest_compile(f, NULL));
    assert_error(f, NEST_ERR_LIMIT, "1099511627776 taps along spatial axis 0");
    nest_function_free(f);

    /* one tap over the limit, on the second axis, from the text form */
    f = nest_function_new("over");
    x = nest_parameter(f, "x", NEST_F64, 4, SHAPE(1, 2, 3, 65537), NEST_ROW_MAJOR);
    w = nest_parameter(f, "w", NEST_F64, 4, SHAPE(1, 2, 1, 65537), NEST_ROW_MAJOR);
    y = nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 1);
    assert_ok(f, nest_return(f, 1, &y, NULL));
    assert_null(nest_emit(&f, 1, NEST_EMIT_C, NULL));
    assert_error(f, NEST_ERR_LIMIT, "convolution (filters f64[1,2,1,65537]): its window has 65537 "
                                    "taps along spatial axis 1, more than the 65536");
    nest_function_free(f);

    /* a window of 2 x 2 x 2 taps dilated by 2^40 over one element padded by 2^40 on each axis:
     * one output, but the padded input's planes (2^120 elements) overflow int64 */
    f = nest_function_new("spread");
    int64_t dil[3] = {big, big, big}, pad[3] = {big, big, big}, zero[3] = {0, 0, 0};
    x = nest_parameter(f, "x", NEST_F32, 5, SHAPE(1, 1, 1, 1, 1), NEST_ROW_MAJOR);
    w = nest_parameter(f, "w", NEST_F32, 5, SHAPE(1, 1, 2, 2, 2), NEST_ROW_MAJOR);
    y = nest_convolution(f, x, w, NULL, dil, pad, zero, NULL, 1);
    assert_value(f, y);
    for (int i = 2; i < 5; i++)
        assert_int_equal(nest_value_shape(f, y)[i], 1);
    assert_ok(f, nest_return(f, 1, &y, NULL));
    assert_null(nest_emit(&f, 1, NEST_EMIT_C, NULL));
    assert_error(f, NEST_ERR_LIMIT, "convolution (filters f32[1,1,2,2,2]): the padded and dilated "
                                    "input is too large to copy");
    nest_function_free(f);
}

/* ---------------------------------------------------------------------------------------------
 * The text form
 * ------------------------------------------------------------------------------------------- */

static const char TEXT[] =
    "func net(x: f32[2,3,9,9], w: f32[6,1,3,3], b: f32[6]) -> (f32[2,6,4,4], f32[2,3,5,5], "
    "f32[2,3,4,4]) {\n"
    "  y = convolution(x, w, strides=[2,2], dilation=[1,1], pad_below=[1,-1], pad_above=[0,2], "
    "data_dilation=[1,1], groups=3)\n"
    "  bb = broadcast(b, shape=[2,6,4,4], axes=[0,2,3])\n"
    "  m = max_pool(x, window=[3,3], strides=[2,2], pad_below=[1,1], pad_above=[1,1])\n"
    "  a = avg_pool(x, window=[2,2], strides=[2,2], include_pad=true)\n"
    "  return add(y, bb), m, a\n"
    "}\n";

static void test_text(void **state)
{
    (void)state;
    nest_module *m = tu_parse(TEXT, "net.nest");
    nest_function *f = nest_module_function(m, 0);
    char *s = nest_print(&f, 1);
    assert_non_null(s);
    /* defaults are not printed */
    assert_non_null(strstr(s, "convolution(x, w, strides=[2,2], pad_below=[1,-1], "
                              "pad_above=[0,2], groups=3)"));
    assert_non_null(strstr(s, "max_pool(x, window=[3,3], strides=[2,2], pad_below=[1,1], "
                              "pad_above=[1,1])"));
    assert_non_null(strstr(s, "avg_pool(x, window=[2,2], strides=[2,2], include_pad=true)"));
    nest_module *m2 = tu_parse(s, "again.nest");
    nest_function *f2 = nest_module_function(m2, 0);
    char *s2 = nest_print(&f2, 1);
    assert_string_equal(s, s2);
    nest_string_free(s);
    nest_string_free(s2);
    nest_module_free(m);
    nest_module_free(m2);
}

static void parse_error(const char *body, const char *part, int col)
{
    char text[1024];
    snprintf(text, sizeof text, "func g(x: f32[1,4,6,6], w: f32[8,4,3,3]) -> f32[] {\n%s\n}\n",
             body);
    nest_module *m = nest_parse(text, strlen(text), "bad.nest");
    assert_non_null(m);
    const char *msg = nest_module_errmsg(m);
    if (nest_module_errcode(m) == NEST_OK || !strstr(msg, part) || nest_module_errline(m) != 2 ||
        (col && nest_module_errcol(m) != col))
        fail_msg("%s: got \"%s\" at %d:%d, want \"%s\" at 2:%d", body, msg,
                 nest_module_errline(m), nest_module_errcol(m), part, col);
    nest_module_free(m);
}

static void test_text_errors(void **state)
{
    (void)state;
    parse_error("  y = convolution(x, w, strides=[1])", "strides has 1 entries but the input has 2 "
                                                        "spatial axes", 25);
    parse_error("  y = convolution(x, w, strides=[0,1])", "strides must be at least 1", 7);
    parse_error("  y = convolution(x, w, strides=[-1,1])", "strides entries cannot be negative", 0);
    parse_error("  y = convolution(x, w, groups=-2)", "groups cannot be negative", 0);
    parse_error("  y = convolution(x, w, groups=3)", "groups", 7);
    parse_error("  y = convolution(x, w, window=[3,3])", "convolution has no attribute 'window'", 0);
    parse_error("  y = max_pool(x)", "max_pool needs window=[...]", 7);
    parse_error("  y = max_pool(x, window=[2,2], include_pad=true)",
                "max_pool has no attribute 'include_pad'", 0);
    parse_error("  y = avg_pool(x, window=[2,2], include_pad=1)", "expected true or false", 0);
    parse_error("  y = max_pool(x, window=[2,2], pad_below=[2,0])", "must be smaller than the window",
                7);
    parse_error("  y = convolution(x)", "convolution takes 2 operands, not 1", 7);
}

/* ---------------------------------------------------------------------------------------------
 * The generated C: warning-free under gcc and clang, for any x86-64
 * ------------------------------------------------------------------------------------------- */

static void test_emit_warnings(void **state)
{
    (void)state;
    specs s = {CONV2, countof_(CONV2), NEST_F32};
    nest_function *f = build("emitted", build_convs, &s, false);
    pspecs ps = {POOLS, countof_(POOLS)};
    nest_function *g = build("pooled", build_pools, &ps, false);
    static const char *const marchs[] = {"native", "x86-64", "x86-64-v2", "x86-64-v3"};
    static const char *const ccs[] = {"gcc", "clang-14"};
    for (size_t mi = 0; mi < countof_(marchs); mi++) {
        nest_options o;
        nest_options_init(&o);
        o.march = marchs[mi];
        nest_function *fns[2] = {f, g};
        char *c = nest_emit(fns, 2, NEST_EMIT_C, &o);
        assert_non_null(c);
        char path[256];
        snprintf(path, sizeof path, "%s/emitted_%zu.c", g_tmp, mi);
        tu_write_file(path, c);
        nest_string_free(c);
        for (size_t ci = 0; ci < countof_(ccs); ci++) {
            char cmd[1024];
            snprintf(cmd, sizeof cmd,
                     "%s -std=c99 -Wall -Wextra -pedantic -Werror -O1 -march=%s -fopenmp -c %s "
                     "-o %s.o",
                     ccs[ci], marchs[mi], path, path);
            if (system(cmd) != 0)
                fail_msg("%s failed", cmd);
        }
    }
    nest_function_free(f);
    nest_function_free(g);
}

/* The kernels' plain C, for compilers without GNU C's vector types: the generated C with every
 * `#ifdef __GNUC__` turned off, built with cc, against the interpreter. */
static void test_plain_c(void **state)
{
    (void)state;
    specs sp = {CONV2, countof_(CONV2), NEST_F32};
    nest_function *f = build("plain", build_convs, &sp, false);
    char *text = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    assert_non_null(text);
    for (char *q = text; (q = strstr(q, "#ifdef __GNUC__")) != NULL; q++)
        memcpy(q, "#if 0 /*GNUC_*/", strlen("#ifdef __GNUC__")); /* as long as it */
    char path[256], so[300], cmd[1024];
    snprintf(path, sizeof path, "%s/plain.c", g_tmp);
    snprintf(so, sizeof so, "%s/plain.so", g_tmp);
    tu_write_file(path, text);
    nest_string_free(text);
    snprintf(cmd, sizeof cmd, "cc -std=c99 -O1 -shared -fPIC -o %s %s -lm", so, path);
    if (system(cmd) != 0)
        fail_msg("%s failed", cmd);
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    void *fn = h ? dlsym(h, "plain_call") : NULL;
    assert_non_null(fn);
    call_fn call;
    memcpy(&call, &fn, sizeof call);
    arrays args, want, got;
    arrays_alloc(&args, f, false);
    arrays_alloc(&want, f, true);
    arrays_alloc(&got, f, true);
    fill(&args, 7, false);
    assert_ok(f, nest_evaluate(f, args.p, args.n, want.p, want.n));
    assert_int_equal(call(args.p, got.p), 0);
    int64_t bad = compare("plain C", f, &got, &want, NULL, 0);
    arrays_free(&args);
    arrays_free(&want);
    arrays_free(&got);
    dlclose(h);
    nest_function_free(f);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_errors, fn_setup, fn_teardown),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_text_errors),
        cmocka_unit_test(test_interp_ones),
        cmocka_unit_test_setup_teardown(test_interp_values, fn_setup, fn_teardown),
        cmocka_unit_test(test_conv1d),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv3d),
        cmocka_unit_test(test_conv_big),
        cmocka_unit_test(test_conv_dense),
        cmocka_unit_test(test_conv_stream),
        cmocka_unit_test(test_conv_rounding),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_chains),
        cmocka_unit_test(test_colmajor),
        cmocka_unit_test(test_emit_warnings),
        cmocka_unit_test(test_plain_c),
        cmocka_unit_test(test_window_limits),
        cmocka_unit_test(test_huge_pool_window),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
