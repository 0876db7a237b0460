/* diffcase.c - the harness of the differential tests: compiled code against the reference
 * interpreter.
 *
 * Every case is a function built by a small builder. The harness makes deterministic inputs
 * for its parameters, evaluates it with nest_evaluate (the oracle), compiles it with nest_compile
 * (and for a subset with nest_build_so) under several options, calls it, and compares each result
 * array with the oracle's, raw (column-major results are compared as the bytes they are). It also
 * checks that the call writes nothing past a result's end and leaves the arguments unchanged.
 *
 * How results are compared
 *   - integers and bool: exactly.
 *   - floats: NaN must match NaN and an infinity must match the same infinity, always. Finite
 *     values, by the kind of op that made the result (R_* below):
 *       exact    max/min reductions, views, copies, constants, conversions, comparisons: equal
 *                (-0 and +0 count as equal);
 *       arith    element-wise add, subtract, multiply, divide, sqrt, maximum, minimum, abs,
 *                negative and chains of them: |got - want| <= 2 ulp(want) (the oracle rounds
 *                each op once, as the compiled C does);
 *       trans    exp, log, tanh, power (libm or libmvec in float against the oracle's double
 *                libm rounded once): |got - want| <= 4 ulp(want);
 *       sum      sum and dot of n terms: |got - want| <= 2 ulp(want) + eps * S * c(n), where S is
 *                the sum of |terms| for that element (the oracle evaluates a twin of the case in
 *                which every reduced or contracted operand is wrapped in abs) and
 *                c(n) = 2 log2(n) + sqrt(n) + 2. That admits any association order and
 *                accumulation in the element type, plus the oracle's own error (it sums f64 in
 *                f64, one term after the other: about eps * S * sqrt(n) for terms of one sign);
 *                it catches gross errors only, so every reduction is also run on floats that
 *                are small multiples of 1/4, where any order gives the exact sum and the
 *                comparison is exact.
 *       norm     softmax over n elements, exp(x - max) / sum: |got - want| <= u ulp(want) with
 *                u = 9 + n + (|ln want| + ln n) / 2: exp within 4 ulp in the numerator and in
 *                every term of the sum, n positive terms summed within n - 1 more, the quotient
 *                within 1/2, and exp's argument x - max rounded to the element type (the oracle
 *                computes in f64): |x - max| <= |ln want| + ln n, whose rounding scales the
 *                result by up to that times eps / 2.
 *     ulp(w) here is eps * |w| plus a few of the smallest subnormals, eps the type's epsilon.
 *
 * What runs
 *   - Builders (build_*) put one op family over many shapes and one element type into one
 *     function with many results (a JIT compile costs tens of milliseconds; batching keeps the
 *     coverage and the run time). Shapes: rank 0, size-1 dims, zero-size dims, sizes that are
 *     no multiple of a vector width, one large 1-d and one large 3-d case.
 *   - check_case runs a case under variants (V_*): the JIT with fusion on and off, OpenMP off,
 *     for another CPU (other tile sizes), AOT with cc and clang-14, every parameter and result
 *     column-major, one array for all parameters of one type and shape.
 *   - Separate tests: several functions in one .so, the typed entry points, dlclose of an
 *     OpenMP .so, the generated C and header compiled with -Werror by gcc, clang and g++,
 *     hostile and colliding names, nest_call's checks, hand-computed anchors.
 *
 * Inputs (fill) are reproducible from the case name: floats mix moderate values of both signs
 * and varied magnitude with 0, -0 and, where the op is defined there, infinities, NaN, the
 * largest finite values and subnormals; integers mix small values with values near the type's
 * limits, so sums and products wrap, divisions see 0 and -1, and INT_MIN / -1 occurs.
 *
 * The JIT's compile cache is pointed at a fresh directory for this process (XDG_CACHE_HOME), so
 * every compile here really compiles. Set NEST_DIFF_VERBOSE=1 to print each case's timing,
 * NEST_DIFF_TEST=pattern to run only the matching tests (test_aot*), NEST_DIFF_ONLY=text to run
 * only the cases whose name contains text, NEST_DIFF_DUMP=case to print a case's text and C.
 */
#include <dlfcn.h>
#include <float.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "diffcase.h"

/* ---------------------------------------------------------------------------------------------
 * Process fixture: a temporary directory for the cache, shared objects and C files
 * ------------------------------------------------------------------------------------------- */

static char g_tmp[128];
static int g_seq;
bool g_verbose;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int group_setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/nest-diff-XXXXXX",
             t && t[0] == '/' && strlen(t) < 80 ? t : "/tmp");
    if (!mkdtemp(g_tmp))
        return -1;
    char xdg[160];
    snprintf(xdg, sizeof xdg, "%s/cache", g_tmp);
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("NEST_CACHE");
    const char *v = getenv("NEST_DIFF_VERBOSE");
    g_verbose = v && *v && strcmp(v, "0") != 0;
    return 0;
}

int group_teardown(void **state)
{
    (void)state;
    if (g_tmp[0])
        nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---------------------------------------------------------------------------------------------
 * Inputs
 * ------------------------------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* uniform in [0, n) */
static uint64_t below(uint64_t *s, uint64_t n) { return rnd(s) % n; }

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* A moderate float: sign * [1, 2) * 2^k, k in [-8, 8]. */
static double moderate(uint64_t *s)
{
    double m = 1.0 + (double)(rnd(s) >> 11) * 0x1p-53;
    int k = (int)below(s, 17) - 8;
    return ldexp(m, k) * (rnd(s) & 1 ? -1 : 1);
}

static double float_value(nest_type t, gen g, uint64_t *s)
{
    bool f32 = t == NEST_F32;
    double big = f32 ? FLT_MAX : DBL_MAX, tiny = f32 ? 0x1p-149 : 0x0.0000000000001p-1022;
    double norm = f32 ? FLT_MIN : DBL_MIN;
    switch (g) {
    case G_SMALL: {
        static const double v[] = {-2, -1, -0.0, 0, 1, 2, 0.5, INFINITY, -INFINITY, NAN};
        return v[below(s, countof_(v))];
    }
    case G_POWEXP: {
        static const double v[] = {-3, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 2.5, 1.0 / 3, -0.0};
        if (below(s, 3))
            return v[below(s, countof_(v))];
        return (double)(int64_t)below(s, 64) / 8.0 - 4.0;
    }
    case G_EXACT:
        return (double)((int64_t)below(s, 17) - 8) / 4.0;
    case G_CONVERT: {
        const double v[] = {NAN, INFINITY, -INFINITY, 0x1p31, -0x1p31, 0x1p31 - 128, -0x1p31 - 256,
                            0x1p63, -0x1p63, 0x1p62, -0x1p64, 1e19, -1e19, 1e10, -1e10, 0.5,
                            -0.5, 1.5, -1.5, -0.99, 0.99, 255.75, 256, -0.0, 0x1p24 + 2, big,
                            -big, tiny, 2147483647.0, -2147483648.0, 2147483647.5,
                            -2147483648.5, -2147483649.0, 9.2e18, -9.3e18, 16777217.0};
        if (below(s, 2))
            return v[below(s, countof_(v))];
        return moderate(s) * (below(s, 2) ? 1e6 : 1);
    }
    case G_EXTREME:
        if (below(s, 4) == 0) {
            const double v[] = {INFINITY, -INFINITY, NAN, big, -big, big / 2, tiny, -tiny, norm,
                                -norm, 0.0, -0.0, 1e30, -1e-30};
            return v[below(s, countof_(v))];
        }
        /* fall through */
    case G_GENERAL:
    default:
        if (below(s, 16) == 0) {
            static const double v[] = {0.0, -0.0, 1, -1, 0.5, -2, 3, 1e-3, 100};
            return v[below(s, countof_(v))];
        }
        return moderate(s);
    }
}

static int64_t int_value(nest_type t, gen g, uint64_t *s)
{
    bool i32 = t == NEST_I32;
    int64_t mx = i32 ? INT32_MAX : INT64_MAX, mn = i32 ? INT32_MIN : INT64_MIN;
    switch (g) {
    case G_SMALL: {
        const int64_t v[] = {-2, -1, 0, 1, 2, mx, mn};
        return v[below(s, countof_(v))];
    }
    case G_POWEXP: {
        const int64_t v[] = {0, 1, 2, 3, 5, 31, 32, 63, 64, -1, -2, -3, mx, mn, 7, 17};
        return v[below(s, countof_(v))];
    }
    case G_EXACT:
        return (int64_t)below(s, 17) - 8;
    case G_CONVERT: {
        const int64_t v[] = {mx, mn, mx - 1, mn + 1, -1, 0, 1, 255, 256, 16777217, -16777217,
                             (int64_t)1 << 30, i32 ? 12345 : ((int64_t)1 << 53) + 1,
                             i32 ? -7 : -(((int64_t)1 << 53) + 1), i32 ? 65536 : (int64_t)1 << 32,
                             i32 ? 2147483584 : INT64_C(9223372036854774784)};
        if (below(s, 2))
            return v[below(s, countof_(v))];
        uint64_t r = rnd(s);
        return i32 ? (int32_t)(uint32_t)r : (int64_t)(r >> 1) * (r & 1 ? -1 : 1);
    }
    case G_EXTREME:
    case G_GENERAL:
    default: {
        uint64_t k = below(s, 8);
        if (k == 0) {
            const int64_t v[] = {mx, mn, mx - 1, mn + 1, -1, 0, 1, 46341, 65536,
                                 i32 ? (int64_t)1 << 30 : (int64_t)1 << 62, -(i32 ? 65537 : 3037000500)};
            return v[below(s, countof_(v))];
        }
        if (k == 1) { /* anywhere in the range */
            uint64_t r = rnd(s);
            if (i32)
                return (int64_t)(r & 0xFFFFFFFFu) - ((int64_t)1 << 31);
            return (int64_t)(r >> 1) - (r & 1 ? INT64_MAX : 0);
        }
        return (int64_t)below(s, 2001) - 1000;
    }
    }
}

static void fill(void *p, nest_type t, int64_t n, gen g, uint64_t seed)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case NEST_F32: ((float *)p)[i] = (float)float_value(t, g, &s); break;
        case NEST_F64: ((double *)p)[i] = float_value(t, g, &s); break;
        case NEST_I32: ((int32_t *)p)[i] = (int32_t)int_value(t, g, &s); break;
        case NEST_I64: ((int64_t *)p)[i] = int_value(t, g, &s); break;
        case NEST_BOOL: ((uint8_t *)p)[i] = (uint8_t)(rnd(&s) >> 63); break;
        }
    }
}

int64_t shp_count(const shp *s)
{
    int64_t c = 1;
    for (int i = 0; i < s->rank; i++)
        c *= s->d[i];
    return c;
}

const char *tname(nest_type t) { return nest_type_name(t); }

/* "f32[5,17]" */
const char *shape_str(nest_type t, int rank, const int64_t *d)
{
    static char ring[8][96];
    static int k;
    char *s = ring[k++ & 7];
    int n = snprintf(s, 96, "%s[", tname(t));
    for (int i = 0; i < rank && n < 80; i++)
        n += snprintf(s + n, (size_t)(96 - n), "%s%lld", i ? "," : "", (long long)d[i]);
    snprintf(s + n, (size_t)(96 - n), "]");
    return s;
}

/* A parameter with an input generator; its layout is the case's. */
nest_value P(bctx *b, nest_type t, int rank, const int64_t *shape, gen g)
{
    char name[16];
    snprintf(name, sizeof name, "p%d", b->np);
    nest_value v = nest_parameter(b->f, name, t, rank, shape, b->lay);
    if (v >= 0 && b->np < MAXP)
        b->gen[b->np++] = (uint8_t)(t == NEST_BOOL ? G_BOOL : g);
    return v;
}

static void Rv(bctx *b, nest_value v, int kind, int64_t nterms, const char *fmt, va_list ap)
{
    if (b->nr >= MAXR) {
        b->nr++; /* reported by the harness */
        return;
    }
    b->res[b->nv++] = v;
    b->rlay[b->nr] = b->lay;
    b->kind[b->nr] = (uint8_t)kind;
    b->nterms[b->nr] = nterms;
    vsnprintf(b->label[b->nr], LABEL, fmt, ap);
    b->nr++;
}

/* A parameter in a layout of its own. */
nest_value PL(bctx *b, nest_type t, int rank, const int64_t *shape, gen g, nest_layout lay)
{
    nest_layout saved = b->lay;
    b->lay = lay;
    nest_value v = P(b, t, rank, shape, g);
    b->lay = saved;
    return v;
}

/* A result of the case: the kind of op that made it sets the float tolerance. */
void R(bctx *b, nest_value v, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Rv(b, v, kind, 0, fmt, ap);
    va_end(ap);
}

/* A sum or dot result of nterms terms per element. */
void RS(bctx *b, nest_value v, int64_t nterms, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Rv(b, v, R_SUM, nterms, fmt, ap);
    va_end(ap);
}

/* A softmax result normalized over n elements. */
void RN(bctx *b, nest_value v, int64_t nterms, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Rv(b, v, R_NORM, nterms, fmt, ap);
    va_end(ap);
}

/* A tuple result of n elements (no nested tuples): one array each, of the kinds given (a sum
 * element of nterms[i] terms). */
void RT(bctx *b, nest_value v, int n, const uint8_t *kinds, const int64_t *nterms,
               const char *label)
{
    if (b->nr + n > MAXR) {
        b->nr += n;
        return;
    }
    b->res[b->nv++] = v;
    for (int i = 0; i < n; i++, b->nr++) {
        b->rlay[b->nr] = b->lay;
        b->kind[b->nr] = kinds[i];
        b->nterms[b->nr] = nterms ? nterms[i] : 0;
        snprintf(b->label[b->nr], LABEL, "%s element %d", label, i);
    }
}

/* In the magnitude twin, |v| (floats); else v. Wrap every operand of sum and dot in it. */
nest_value M(bctx *b, nest_value v)
{
    if (!b->mag || v < 0)
        return v;
    int t = nest_value_type(b->f, v);
    return t == NEST_F32 || t == NEST_F64 ? nest_abs(b->f, v) : v;
}

bool is_float_t(int t) { return t == NEST_F32 || t == NEST_F64; }

/* Builds a case: returns the context with f, or NULL after reporting the builder's error. */
bctx *build(const char *name, build_fn fn, const void *arg, nest_layout lay, bool mag)
{
    bctx *b = calloc(1, sizeof *b);
    assert_non_null(b);
    b->f = nest_function_new(name);
    b->mag = mag;
    b->lay = lay;
    assert_non_null(b->f);
    fn(b, arg);
    if (b->nr > MAXR) {
        print_error("%s: more than %d results\n", name, MAXR);
        fail();
    }
    int st = nest_errcode(b->f);
    if (st == NEST_OK)
        st = nest_return(b->f, b->nv, b->res, b->rlay);
    if (st == NEST_OK && nest_result_count(b->f) != b->nr) {
        print_error("%s: %d result arrays, the case's metadata says %d\n", name,
                    nest_result_count(b->f), b->nr);
        fail();
    }
    if (st != NEST_OK) {
        print_error("%s: building failed: %s\n", name, nest_errmsg(b->f));
        nest_function_free(b->f);
        free(b);
        fail();
    }
    return b;
}

void bctx_free(bctx *b)
{
    if (b) {
        nest_function_free(b->f);
        free(b);
    }
}

static int64_t value_count(const nest_function *f, nest_value v)
{
    int64_t c = 1;
    for (int i = 0; i < nest_value_rank(f, v); i++)
        c *= nest_value_shape(f, v)[i];
    return c;
}

/* Arrays for the parameters (results: false) or results of f, each followed by GUARD bytes. */
void arrays_alloc(arrays *a, const nest_function *f, bool results)
{
    a->n = results ? nest_result_count(f) : nest_param_count(f);
    size_t n = (size_t)a->n + 1;
    a->p = calloc(n, sizeof *a->p);
    a->count = calloc(n, sizeof *a->count);
    a->type = calloc(n, 1);
    a->bytes = calloc(n, sizeof *a->bytes);
    assert_true(a->p && a->count && a->type && a->bytes);
    for (int i = 0; i < a->n; i++) {
        nest_value v = results ? nest_result(f, i) : nest_param(f, i);
        a->type[i] = (uint8_t)nest_value_type(f, v);
        a->count[i] = value_count(f, v);
        a->bytes[i] = (size_t)a->count[i] * nest_type_size((nest_type)a->type[i]);
        a->p[i] = malloc(a->bytes[i] + GUARD);
        assert_non_null(a->p[i]);
        memset(a->p[i], GUARD_BYTE, a->bytes[i] + GUARD);
    }
}

void arrays_free(arrays *a)
{
    for (int i = 0; a->p && i < a->n; i++)
        free(a->p[i]);
    free(a->p);
    free(a->count);
    free(a->type);
    free(a->bytes);
    memset(a, 0, sizeof *a);
}

void arrays_poison(arrays *a)
{
    for (int i = 0; i < a->n; i++)
        memset(a->p[i], GUARD_BYTE, a->bytes[i] + GUARD);
}

/* ---------------------------------------------------------------------------------------------
 * Comparing
 * ------------------------------------------------------------------------------------------- */

static double eps_of(int t) { return t == NEST_F32 ? FLT_EPSILON : DBL_EPSILON; }
static double tiny_of(int t) { return t == NEST_F32 ? 0x1p-149 : 0x0.0000000000001p-1022; }

/* The multi-index of element i of a row- or column-major array, as text. */
static void index_text(char *out, size_t cap, const nest_function *f, nest_value v, int64_t i,
                       nest_layout lay)
{
    int r = nest_value_rank(f, v);
    const int64_t *d = nest_value_shape(f, v);
    int64_t idx[NEST_MAX_RANK];
    for (int k = 0; k < r; k++) {
        int ax = lay == NEST_COL_MAJOR ? k : r - 1 - k;
        idx[ax] = d[ax] ? i % d[ax] : 0;
        i = d[ax] ? i / d[ax] : 0;
    }
    size_t n = (size_t)snprintf(out, cap, "[");
    for (int k = 0; k < r && n < cap; k++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", k ? "," : "", (long long)idx[k]);
    if (n < cap)
        snprintf(out + n, cap - n, "]");
}

/* Compares result r; prints up to 3 mismatches and returns how many elements differ. */
static int64_t compare_one(const bctx *b, int r, const void *got, const void *want,
                           const void *mag, const char *how)
{
    const nest_function *f = b->f;
    int t = nest_value_type(f, nest_result(f, r));
    int64_t n = value_count(f, nest_result(f, r));
    int kind = r < MAXR ? b->kind[r] : R_EXACT;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        double g = 0, w = 0, tol = 0;
        if (is_float_t(t)) {
            g = tu_float((nest_type)t, got, i);
            w = tu_float((nest_type)t, want, i);
            if (isnan(w) || isnan(g))
                ok = isnan(w) && isnan(g);
            else if (isinf(w) || isinf(g))
                ok = g == w;
            else {
                double e = eps_of(t), ulps = kind == R_TRANS ? 4 : kind == R_EXACT ? 0 : 2;
                if (kind == R_NORM && w != 0) {
                    /* exp's argument x - max is rounded to the type: |x - max| is at most
                     * |ln w| + ln n, and its rounding scales the result by that times eps / 2 */
                    double nt = (double)(b->nterms[r] > 1 ? b->nterms[r] : 1);
                    ulps = 9 + nt + 0.5 * (fabs(log(fabs(w))) + log(nt));
                }
                tol = ulps * (e * fabs(w) + 4 * tiny_of(t));
                if (kind == R_SUM && mag) {
                    double nt = (double)(b->nterms[r] > 1 ? b->nterms[r] : 1);
                    double s = tu_float((nest_type)t, mag, i);
                    tol += e * s * (2 * log2(nt) + sqrt(nt) + 2);
                    if (isinf(s) || isnan(s))
                        tol = INFINITY;
                }
                ok = fabs(g - w) <= tol;
            }
        } else {
            ok = tu_int((nest_type)t, got, i) == tu_int((nest_type)t, want, i);
        }
        if (ok)
            continue;
        if (bad++ < 3) {
            char idx[128];
            index_text(idx, sizeof idx, f, nest_result(f, r), i,
                       r < MAXR ? b->rlay[r] : NEST_ROW_MAJOR);
            if (is_float_t(t))
                print_error("%s: %s: result %d (%s) element %lld %s: got %.17g, want %.17g "
                            "(tolerance %.3g)\n",
                            nest_function_name(f), how, r, r < MAXR ? b->label[r] : "?",
                            (long long)i, idx, g, w, tol);
            else
                print_error("%s: %s: result %d (%s) element %lld %s: got %lld, want %lld\n",
                            nest_function_name(f), how, r, r < MAXR ? b->label[r] : "?",
                            (long long)i, idx, (long long)tu_int((nest_type)t, got, i),
                            (long long)tu_int((nest_type)t, want, i));
        }
    }
    if (bad > 3)
        print_error("%s: %s: result %d (%s): %lld of %lld elements differ\n",
                    nest_function_name(f), how, r, r < MAXR ? b->label[r] : "?", (long long)bad,
                    (long long)n);
    return bad;
}

int64_t g_results, g_elements; /* compared, for the summary */

/* Compares every result and checks the guards; returns the number of bad results. */
static int compare_all(const bctx *b, const arrays *got, const arrays *want, const arrays *mag,
                       const char *how)
{
    int bad = 0;
    for (int r = 0; r < got->n; r++) {
        const unsigned char *g = got->p[r];
        bool guard = true;
        for (size_t k = 0; k < GUARD; k++)
            guard &= g[got->bytes[r] + k] == GUARD_BYTE;
        if (!guard) {
            print_error("%s: %s: result %d (%s) was written past its end\n",
                        nest_function_name(b->f), how, r, r < MAXR ? b->label[r] : "?");
            bad++;
            continue;
        }
        if (compare_one(b, r, got->p[r], want->p[r], mag ? mag->p[r] : NULL, how))
            bad++;
        g_results++;
        g_elements += got->count[r];
    }
    return bad;
}

/* Calls f compiled by the JIT into got; returns false (after printing why) on failure. */
static bool run_jit(nest_function *f, const variant *v, arrays *args, arrays *got)
{
    nest_options o;
    nest_options_init(&o);
    o.fuse = v->fuse;
    o.openmp = v->openmp;
    if (v->march)
        o.march = v->march;
    nest_kernel *k = nest_compile(f, &o);
    if (!k) {
        print_error("%s: %s: nest_compile failed: %s\n", nest_function_name(f), v->what,
                    nest_errmsg(f));
        return false;
    }
    int st = nest_call(k, args->p, args->n, got->p, got->n);
    if (st != NEST_OK)
        print_error("%s: %s: nest_call returned %d: %s\n", nest_function_name(f), v->what, st,
                    nest_kernel_errmsg(k));
    nest_kernel_free(k);
    return st == NEST_OK;
}

/* A symbol of a shared object as a function pointer (POSIX: the round trip is defined). */
void *fn_sym(void *h, const char *name)
{
    return dlsym(h, name);
}

/* Calls f's entry points in a loaded .so into got: NAME_call_ws with a workspace of
 * NAME_workspace_size() bytes when f has one (then NAME_call too, which must give the same
 * bytes), else NAME_call. Returns false after printing why. */
bool so_call(void *h, nest_function *f, const char *what, arrays *args, arrays *got)
{
    char sym[300];
    const char *name = nest_function_name(f);
    snprintf(sym, sizeof sym, "%s_workspace_size", name);
    void *wsz = fn_sym(h, sym);
    snprintf(sym, sizeof sym, "%s_call_ws", name);
    void *cws = fn_sym(h, sym);
    snprintf(sym, sizeof sym, "%s_call", name);
    void *c = fn_sym(h, sym);
    bool ok = c != NULL && (wsz != NULL) == (cws != NULL);
    if (!ok) {
        print_error("%s: %s: entry points missing (call %p, call_ws %p, workspace_size %p)\n",
                    name, what, c, cws, wsz);
        return false;
    }
    call_fn call;
    memcpy(&call, &c, sizeof call);
    if (!cws) {
        int rc = call(args->p, got->p);
        if (rc != 0)
            print_error("%s: %s: %s_call returned %d\n", name, what, name, rc);
        return rc == 0;
    }
    ws_size_fn size;
    call_ws_fn call_ws;
    memcpy(&size, &wsz, sizeof size);
    memcpy(&call_ws, &cws, sizeof call_ws);
    size_t n = size();
    void *ws = malloc(n + 1);
    assert_non_null(ws);
    memset(ws, GUARD_BYTE, n + 1);
    int rc = call_ws(args->p, got->p, ws);
    free(ws);
    if (rc != 0) {
        print_error("%s: %s: %s_call_ws returned %d\n", name, what, name, rc);
        return false;
    }
    /* NAME_call allocates the workspace itself and gives the same bytes */
    arrays again;
    arrays_alloc(&again, f, true);
    rc = call(args->p, again.p);
    for (int r = 0; ok && r < again.n; r++)
        if (rc != 0 || memcmp(again.p[r], got->p[r], again.bytes[r]) != 0) {
            print_error("%s: %s: %s_call (returned %d) and %s_call_ws differ in result %d\n",
                        name, what, name, rc, name, r);
            ok = false;
        }
    arrays_free(&again);
    return ok;
}

/* A unique path in the temporary directory. */
void temp_path(char *out, size_t cap, const char *stem, const char *ext)
{
    snprintf(out, cap, "%s/%s_%d%s", g_tmp, stem, ++g_seq, ext);
}

/* Builds fns into a .so with cc (and opts as in v) and loads it; NULL after printing why. The
 * handle is never closed: a .so built with gcc -fopenmp takes libgomp down with it while the
 * pool's threads still run there (see test_aot_dlclose). */
void *build_and_load(nest_function *const *fns, int n, const variant *v)
{
    nest_options o;
    nest_options_init(&o);
    o.fuse = v->fuse;
    o.openmp = v->openmp;
    o.cc = v->cc;
    if (v->march)
        o.march = v->march;
    char so[256];
    temp_path(so, sizeof so, nest_function_name(fns[0]), ".so");
    int st = nest_build_so(fns, n, so, NULL, &o, NULL);
    if (st != NEST_OK) {
        print_error("%s: %s: nest_build_so failed (%d): %s\n", nest_function_name(fns[0]),
                    v->what, st, nest_errmsg(fns[0]));
        return NULL;
    }
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        print_error("%s: %s: dlopen: %s\n", nest_function_name(fns[0]), v->what, dlerror());
    remove(so);
    return h;
}

static bool run_aot(nest_function *f, const variant *v, arrays *args, arrays *got)
{
    void *h = build_and_load(&f, 1, v);
    return h && so_call(h, f, v->what, args, got);
}

/* The parameters' arrays: filled from the case's generators; with alias, a parameter of the
 * same type and shape as an earlier one shares its array. */
static void make_inputs(const bctx *b, arrays *args, bool alias, unsigned char **owned)
{
    const nest_function *f = b->f;
    uint64_t seed = hash_str(nest_function_name(f));
    for (int i = 0; i < args->n; i++) {
        owned[i] = args->p[i];
        fill(args->p[i], (nest_type)args->type[i], args->count[i], (gen)b->gen[i],
             seed + 0x1000193u * (uint64_t)(i + 1));
        if (!alias)
            continue;
        nest_value vi = nest_param(f, i);
        for (int j = 0; j < i; j++) {
            nest_value vj = nest_param(f, j);
            if (args->type[i] != args->type[j] || nest_value_rank(f, vi) != nest_value_rank(f, vj) ||
                memcmp(nest_value_shape(f, vi), nest_value_shape(f, vj),
                       (size_t)nest_value_rank(f, vi) * sizeof(int64_t)) != 0)
                continue;
            args->p[i] = args->p[j];
            break;
        }
    }
}

void prepare(prepared *pr, const char *name, build_fn fn, const void *arg, nest_layout lay,
                    bool alias)
{
    double t0 = now_ms();
    memset(pr, 0, sizeof *pr);
    pr->name = name;
    pr->b = build(name, fn, arg, lay, false);
    bool need_mag = false;
    for (int r = 0; r < pr->b->nr; r++)
        need_mag |= pr->b->kind[r] == R_SUM;
    pr->m = need_mag ? build(name, fn, arg, lay, true) : NULL;
    if (pr->m && nest_result_count(pr->m->f) != nest_result_count(pr->b->f)) {
        print_error("%s: the magnitude twin has other results\n", name);
        fail();
    }
    arrays_alloc(&pr->args, pr->b->f, false);
    arrays_alloc(&pr->want, pr->b->f, true);
    arrays_alloc(&pr->got, pr->b->f, true);
    pr->owned = calloc((size_t)pr->args.n + 1, sizeof *pr->owned);
    pr->copy = calloc((size_t)pr->args.n + 1, sizeof *pr->copy);
    assert_true(pr->owned && pr->copy);
    make_inputs(pr->b, &pr->args, alias, pr->owned);
    for (int i = 0; i < pr->args.n; i++) {
        pr->copy[i] = malloc(pr->args.bytes[i] + 1);
        assert_non_null(pr->copy[i]);
        memcpy(pr->copy[i], pr->args.p[i], pr->args.bytes[i]);
    }
    if (nest_evaluate(pr->b->f, pr->args.p, pr->args.n, pr->want.p, pr->want.n) != NEST_OK) {
        print_error("%s: nest_evaluate: %s\n", name, nest_errmsg(pr->b->f));
        fail();
    }
    if (pr->m) {
        arrays_alloc(&pr->mag, pr->m->f, true);
        if (nest_evaluate(pr->m->f, pr->args.p, pr->args.n, pr->mag.p, pr->mag.n) != NEST_OK) {
            print_error("%s: nest_evaluate (magnitudes): %s\n", name, nest_errmsg(pr->m->f));
            fail();
        }
    }
    const char *dump = getenv("NEST_DIFF_DUMP");
    if (dump && strcmp(dump, name) == 0) {
        /* NEST_DIFF_DUMP=case writes the case as text and its C (both fusion settings) */
        nest_options o;
        nest_options_init(&o);
        nest_function *f = pr->b->f;
        char *ir = nest_print(&f, 1), *c1 = nest_emit(&f, 1, NEST_EMIT_C, &o);
        o.fuse = 0;
        char *c0 = nest_emit(&f, 1, NEST_EMIT_C, &o);
        fprintf(stderr, "%s\n/* ---- fuse=1 ---- */\n%s\n/* ---- fuse=0 ---- */\n%s\n",
                ir ? ir : "", c1 ? c1 : "", c0 ? c0 : "");
        nest_string_free(ir);
        nest_string_free(c1);
        nest_string_free(c0);
    }
    pr->ms = now_ms() - t0;
}

/* Compares the results of a run in pr->got with the oracle's and checks that the inputs are
 * as made; returns the number of problems (each printed). */
int verify(prepared *pr, const char *how)
{
    int bad = compare_all(pr->b, &pr->got, &pr->want, pr->m ? &pr->mag : NULL, how);
    for (int i = 0; i < pr->args.n; i++)
        if (memcmp(pr->copy[i], pr->args.p[i], pr->args.bytes[i]) != 0) {
            print_error("%s: %s: argument %d was written\n", pr->name, how, i);
            bad++;
            memcpy(pr->args.p[i], pr->copy[i], pr->args.bytes[i]);
        }
    return bad;
}

void release(prepared *pr)
{
    for (int i = 0; i < pr->args.n; i++) {
        free(pr->copy[i]);
        pr->args.p[i] = pr->owned[i];
    }
    free(pr->copy);
    free(pr->owned);
    arrays_free(&pr->args);
    arrays_free(&pr->want);
    arrays_free(&pr->got);
    arrays_free(&pr->mag);
    bctx_free(pr->b);
    bctx_free(pr->m);
    memset(pr, 0, sizeof *pr);
}

int g_cases, g_runs;

/* Runs one case under the variants in flags; fails the test after reporting every mismatch. */
void check_case(const char *name, build_fn fn, const void *arg, unsigned flags)
{
    const char *only = getenv("NEST_DIFF_ONLY"); /* runs only the cases whose name has it */
    if (only && !strstr(name, only))
        return;
    int bad = 0;
    for (int pass = 0; pass < 2; pass++) {
        nest_layout lay = pass ? NEST_COL_MAJOR : NEST_ROW_MAJOR;
        if (pass && !(flags & V_COL))
            break;
        if (!pass && (flags & V_NOROW))
            continue;
        prepared pr;
        prepare(&pr, name, fn, arg, lay, (flags & V_ALIAS) != 0);
        double tj = 0;
        for (size_t vi = 0; vi < countof_(VARIANTS); vi++) {
            const variant *v = &VARIANTS[vi];
            if (!(flags & v->flag))
                continue;
            char how[96];
            snprintf(how, sizeof how, "%s%s%s", v->what, pass ? ", column-major" : "",
                     flags & V_ALIAS ? ", aliased arguments" : "");
            arrays_poison(&pr.got);
            double t2 = now_ms();
            bool ok = v->cc ? run_aot(pr.b->f, v, &pr.args, &pr.got)
                            : run_jit(pr.b->f, v, &pr.args, &pr.got);
            tj += now_ms() - t2;
            g_runs++;
            bad += ok ? verify(&pr, how) : 1;
        }
        if (g_verbose)
            fprintf(stderr, "  %-24s %s %3d params %3d results: build+oracle %7.1f ms, runs %7.1f ms\n",
                    name, pass ? "col" : "row", pr.args.n, pr.want.n, pr.ms, tj);
        g_cases++;
        release(&pr);
    }
    if (bad) {
        print_error("%s: %d mismatching results or failed runs\n", name, bad);
        fail();
    }
}

/* Compiles f (fused and not) and calls it on args; each result must equal want[r] bytewise
 * (floats: equal, or both NaN). */
void anchor(nest_function *f, void *const *args, const void *const *want)
{
    int nr = nest_result_count(f);
    for (int fuse = 1; fuse >= 0; fuse--) {
        nest_options o;
        nest_options_init(&o);
        o.fuse = fuse;
        arrays got;
        arrays_alloc(&got, f, true);
        nest_kernel *k = nest_compile(f, &o);
        if (!k)
            print_error("%s: %s\n", nest_function_name(f), nest_errmsg(f));
        assert_non_null(k);
        assert_int_equal(nest_call(k, args, nest_param_count(f), got.p, nr), NEST_OK);
        for (int r = 0; r < nr; r++)
            tu_assert_close((nest_type)got.type[r], got.p[r], want[r], got.count[r], 0, 0,
                            __FILE__, __LINE__);
        nest_kernel_free(k);
        arrays_free(&got);
    }
}

/* Runs a shell command; false after printing its output. */
bool run_cmd(const char *cmd)
{
    char log[300], full[2200];
    temp_path(log, sizeof log, "cmd", ".log");
    snprintf(full, sizeof full, "%s >%s 2>&1", cmd, log);
    int rc = system(full);
    if (rc != 0) {
        print_error("`%s` failed (status %d):\n", cmd, rc);
        FILE *in = fopen(log, "r");
        char line[512];
        for (int n = 0; in && n < 40 && fgets(line, sizeof line, in); n++)
            print_error("  %s", line);
        if (in)
            fclose(in);
    }
    remove(log);
    return rc == 0;
}

bool write_file(const char *path, const char *text)
{
    FILE *out = fopen(path, "w");
    bool ok = out && fputs(text, out) >= 0;
    if (out && fclose(out) != 0)
        ok = false;
    return ok;
}

/* Parameters and values named like the emitter's own identifiers, the C library's, and C++
 * keywords (for the header): built, compiled by the JIT and AOT, compared with the oracle. */
const char *const COLLIDING[] = {
    "ws", "i0", "i1", "i2", "u", "args", "results", "workspace", "rc", "acc", "result0",
    "result1", "x_acc", "t", "f", "emit_names", "emit_names_call", "emit_names_impl",
    "nest", "NAN", "INFINITY", "INT32_MIN", "INT64_MAX", "INT64_C", "NULL", "int32_t",
    "int64_t", "uint8_t", "uint32_t", "uint64_t", "size_t", "malloc", "free", "memcpy", "expf",
    "exp", "fabsf", "sqrt", "powf", "tanh", "logf", "class", "new", "this", "template",
    "delete", "operator", "namespace", "private", "omp", "pragma", "main0",
    "restrict_", "errno", "HUGE_VAL", "EXIT_FAILURE", "SIZE_MAX", "offsetof", "abs", "exit",
    "linux", "unix", "and", "xor", "powl", "isnan",
};
const size_t NCOLLIDING = countof_(COLLIDING);

void build_emit_names(bctx *b, const void *arg)
{
    (void)arg;
    nest_function *f = b->f;
    int n = (int)NCOLLIDING;
    nest_value prev = NEST_NONE;
    shp v = {1, {40}}, m = {2, {3, 40}};
    for (int i = 0; i < n; i++) {
        nest_value x = nest_parameter(f, COLLIDING[i], i % 3 ? NEST_F32 : NEST_F64,
                                      i % 4 == 3 ? m.rank : v.rank, i % 4 == 3 ? m.d : v.d,
                                      NEST_ROW_MAJOR);
        if (x >= 0 && b->np < MAXP)
            b->gen[b->np++] = G_GENERAL;
        nest_value y = i % 4 == 3 ? nest_sum(f, x, 1, SHAPE(0)) : x;
        y = nest_convert(f, y, NEST_F32);
        nest_value e = i % 2 ? nest_exp(f, nest_negative(f, nest_abs(f, y)))
                             : nest_sqrt(f, nest_abs(f, y));
        prev = prev == NEST_NONE ? e : nest_add(f, prev, e);
        if (i % 5 == 0)
            R(b, prev, R_TRANS, "through %s", COLLIDING[i]);
    }
    /* values named the same way (each name once: parameters and values share one scope), so a
     * different spelling */
    nest_value s = nest_sum(f, M(b, prev), 1, SHAPE(0));
    char vn[64];
    for (int i = 0; i < n; i++) {
        snprintf(vn, sizeof vn, "v_%s", COLLIDING[i]);
        nest_value w = nest_multiply(f, prev, nest_broadcast(f, s, 1, SHAPE(40), 1, SHAPE(0)));
        if (nest_set_name(f, w, vn) != NEST_OK)
            return; /* the error stays on f: the harness reports it */
        if (i % 9 == 0)
            RS(b, w, 40, "value %s", vn);
    }
    R(b, nest_convert(f, nest_max(f, prev, 1, SHAPE(0)), NEST_F64), R_TRANS, "max");
}

int diff_run_tests(const char *name, const struct CMUnitTest *tests, size_t n)
{
    const char *filter = getenv("NEST_DIFF_TEST");
    if (filter)
        cmocka_set_test_filter(filter);
    int rc = _cmocka_run_group_tests(name, tests, n, group_setup, group_teardown);
    if (g_verbose)
        fprintf(stderr, "%d cases, %d compiled runs, %lld result arrays (%lld elements) compared\n",
                g_cases, g_runs, (long long)g_results, (long long)g_elements);
    return rc;
}
