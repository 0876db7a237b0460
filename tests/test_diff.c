/* test_diff.c - differential tests of the core ops: compiled code against the reference
 * interpreter, through the harness of diffcase.c (which says how results are compared), with
 * fusion on and off, both layouts, OpenMP on and off, aliased arguments, ahead of time, and
 * C without warnings. test_diff_abi.c checks the boundary of the compiled code (typed entry
 * points, dlclose, names, values worked out by hand, nest_call's checks); test_diff_ops.c
 * the op set of real models.
 *
 * Set NEST_DIFF_VERBOSE=1 to print each case's timing, NEST_DIFF_TEST=pattern to run only the
 * matching tests (test_aot*), NEST_DIFF_ONLY=text to run only the cases whose name contains text,
 * NEST_DIFF_DUMP=case to print a case's text and C.
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
 * Element-wise ops
 * ------------------------------------------------------------------------------------------- */

typedef nest_value (*binary_fn)(nest_function *, nest_value, nest_value);
typedef nest_value (*unary_fn)(nest_function *, nest_value);

static const nest_type NUM_TYPES[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64};
static const nest_type ALL_TYPES[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_BOOL};

static const struct {
    const char *name;
    binary_fn fn;
} BINARY[] = {
    {"add", nest_add},         {"subtract", nest_subtract}, {"multiply", nest_multiply},
    {"divide", nest_divide},   {"maximum", nest_maximum},   {"minimum", nest_minimum},
};

static const struct {
    const char *name;
    unary_fn fn;
    bool float_only, trans;
} UNARY[] = {
    {"negative", nest_negative, false, false}, {"abs", nest_abs, false, false},
    {"sqrt", nest_sqrt, true, false},          {"exp", nest_exp, true, true},
    {"log", nest_log, true, true},             {"tanh", nest_tanh, true, true},
};

/* Every binary arithmetic op over every shape, on one element type. */
static void build_binary(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    bool fl = is_float_t(t);
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, t, sh, G_EXTREME), y = PS(b, t, sh, G_EXTREME);
        for (size_t o = 0; o < countof_(BINARY); o++)
            R(b, BINARY[o].fn(b->f, x, y), fl ? R_ARITH : R_EXACT, "%s %s", BINARY[o].name,
              SHS(t, sh));
        nest_value base = PS(b, t, sh, G_GENERAL), ex = PS(b, t, sh, G_POWEXP);
        R(b, nest_power(b->f, base, ex), fl ? R_TRANS : R_EXACT, "power %s", SHS(t, sh));
    }
}

static void test_binary(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "binary_%s", tname(NUM_TYPES[i]));
        check_case(name, build_binary, &NUM_TYPES[i], V_STD);
    }
}

static void build_unary(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    bool fl = is_float_t(t);
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, t, sh, G_EXTREME);
        for (size_t o = 0; o < countof_(UNARY); o++) {
            if (UNARY[o].float_only && !fl)
                continue;
            R(b, UNARY[o].fn(b->f, x), !fl ? R_EXACT : UNARY[o].trans ? R_TRANS : R_ARITH,
              "%s %s", UNARY[o].name, SHS(t, sh));
        }
    }
}

static void test_unary(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "unary_%s", tname(NUM_TYPES[i]));
        check_case(name, build_unary, &NUM_TYPES[i], V_STD);
    }
}

/* less, greater (numeric), equal (any), select (any), select of a comparison. */
static void build_compare(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    bool num = t != NEST_BOOL;
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, t, sh, G_SMALL), y = PS(b, t, sh, G_SMALL);
        nest_value c = PS(b, NEST_BOOL, sh, G_BOOL);
        if (num) {
            R(b, nest_less(b->f, x, y), R_EXACT, "less %s", SHS(t, sh));
            R(b, nest_greater(b->f, x, y), R_EXACT, "greater %s", SHS(t, sh));
            R(b, nest_select(b->f, nest_less(b->f, y, x), x, y), R_EXACT, "select(less) %s",
              SHS(t, sh));
        }
        R(b, nest_equal(b->f, x, y), R_EXACT, "equal %s", SHS(t, sh));
        R(b, nest_select(b->f, c, x, y), R_EXACT, "select %s", SHS(t, sh));
        /* an operand against itself (NaN is not equal to itself; C compilers warn about
         * integer self-comparisons) */
        R(b, nest_equal(b->f, x, x), R_EXACT, "equal(x, x) %s", SHS(t, sh));
        R(b, nest_select(b->f, c, x, x), R_EXACT, "select(c, x, x) %s", SHS(t, sh));
        if (num) {
            R(b, nest_less(b->f, x, x), R_EXACT, "less(x, x) %s", SHS(t, sh));
            R(b, nest_greater(b->f, y, y), R_EXACT, "greater(y, y) %s", SHS(t, sh));
            R(b, nest_maximum(b->f, x, x), R_EXACT, "maximum(x, x) %s", SHS(t, sh));
            R(b, nest_minimum(b->f, y, y), R_EXACT, "minimum(y, y) %s", SHS(t, sh));
        }
        R(b, nest_select(b->f, nest_equal(b->f, x, y), c, nest_equal(b->f, y, y)), R_EXACT,
          "select(equal) of bools %s", SHS(t, sh));
    }
}

static void test_compare_select(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "compare_%s", tname(ALL_TYPES[i]));
        check_case(name, build_compare, &ALL_TYPES[i], V_STD);
    }
}

/* convert from one type to every type, every shape */
static void build_convert(bctx *b, const void *arg)
{
    nest_type from = *(const nest_type *)arg;
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, from, sh, G_CONVERT);
        for (size_t k = 0; k < countof_(ALL_TYPES); k++)
            R(b, nest_convert(b->f, x, ALL_TYPES[k]), R_EXACT, "convert to %s %s",
              tname(ALL_TYPES[k]), SHS(from, sh));
        /* a conversion inside a chain: back and forth */
        for (size_t k = 0; k < countof_(ALL_TYPES); k++)
            R(b, nest_convert(b->f, nest_convert(b->f, x, ALL_TYPES[k]), from), R_EXACT,
              "convert to %s and back %s", tname(ALL_TYPES[k]), SHS(from, sh));
    }
}

static void test_convert(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "convert_%s", tname(ALL_TYPES[i]));
        check_case(name, build_convert, &ALL_TYPES[i], V_STD);
    }
}

/* Chains of element-wise ops whose intermediates are shared, returned or used once: what fusion
 * changes (with fuse = 0 every op is stored). */
static void build_chain(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    bool fl = is_float_t(t);
    int k = fl ? R_ARITH : R_EXACT;
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, t, sh, G_GENERAL), y = PS(b, t, sh, G_GENERAL),
                   z = PS(b, t, sh, G_GENERAL);
        nest_value s1 = nest_add(f, x, y);            /* used three times */
        nest_value s2 = nest_multiply(f, s1, z);      /* a result and used again */
        nest_value s3 = nest_subtract(f, s2, nest_negative(f, x));
        nest_value s4 = nest_maximum(f, s3, nest_abs(f, y));
        nest_value s5 = nest_select(f, nest_less(f, s4, s1), s4, nest_minimum(f, s1, z));
        R(b, s5, k, "chain %s", SHS(t, sh));
        R(b, s2, k, "chain intermediate %s", SHS(t, sh));
        R(b, nest_divide(f, s1, nest_add(f, z, s1)), k, "chain divide %s", SHS(t, sh));
        if (fl)
            R(b, nest_sqrt(f, nest_add(f, nest_multiply(f, x, x), nest_multiply(f, y, y))),
              R_ARITH, "chain hypot %s", SHS(t, sh));
        /* an equal operand twice, and a value compared with itself */
        R(b, nest_select(f, nest_equal(f, s1, s1), nest_add(f, x, x), s1), k,
          "chain self %s", SHS(t, sh));
    }
}

static void test_chain(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "chain_%s", tname(NUM_TYPES[i]));
        check_case(name, build_chain, &NUM_TYPES[i], V_STD);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Constants
 * ------------------------------------------------------------------------------------------- */

/* A constant of shape sh: a splat of one element (count 1) or every element (count of sh). The
 * values cover the literals the emitter must spell: NaN, infinities, -0, the largest and the
 * smallest values, INT_MIN. */
static nest_value constant_of(bctx *b, nest_type t, const shp *sh, bool full, int which)
{
    int64_t n = full ? shp_count(sh) : 1;
    size_t size = nest_type_size(t);
    unsigned char *d = malloc((size_t)(n ? n : 1) * size);
    assert_non_null(d);
    static const double fv[] = {0.1, NAN, INFINITY, -INFINITY, -0.0, FLT_MAX, 0x1p-149, -3.5,
                                1e-40, 16777217.0, 1.0 / 3, -FLT_MAX, 0, 2.5e-8, 12345.678};
    static const double dv[] = {0.1, NAN, INFINITY, -INFINITY, -0.0, DBL_MAX, 0x1p-1074, -3.5,
                                1e-310, 9007199254740993.0, 1.0 / 3, -DBL_MAX, 0, 2.5e-300,
                                12345.678};
    static const int64_t iv[] = {0, -1, INT32_MIN, INT32_MAX, 7, -123456, 1, 100, -2, 42};
    static const int64_t lv[] = {0, -1, INT64_MIN, INT64_MAX, 7, -1234567890123, 1, INT32_MIN,
                                 (int64_t)1 << 53, -2};
    for (int64_t i = 0; i < n; i++) {
        size_t k = (size_t)(i + which);
        switch (t) {
        case NEST_F32: ((float *)d)[i] = (float)fv[k % countof_(fv)]; break;
        case NEST_F64: ((double *)d)[i] = dv[k % countof_(dv)]; break;
        case NEST_I32: ((int32_t *)d)[i] = (int32_t)iv[k % countof_(iv)]; break;
        case NEST_I64: ((int64_t *)d)[i] = lv[k % countof_(lv)]; break;
        case NEST_BOOL: ((uint8_t *)d)[i] = (uint8_t)(k % 3 != 0); break;
        }
    }
    nest_value v = nest_constant(b->f, t, sh->rank, sh->d, d, n);
    free(d);
    return v;
}

/* Constants returned directly and used in expressions, splat and full, on every shape (full
 * ones only where the C stays small), plus a splat of every special value. */
static void build_constant(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    bool fl = is_float_t(t), num = t != NEST_BOOL;
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        bool full = shp_count(sh) <= 1000;
        nest_value x = PS(b, t, sh, G_GENERAL);
        nest_value splat = constant_of(b, t, sh, false, s);
        R(b, splat, R_EXACT, "splat constant %s", SHS(t, sh));
        R(b, num ? nest_add(f, x, splat) : nest_equal(f, x, splat), fl ? R_ARITH : R_EXACT,
          "x + splat %s", SHS(t, sh));
        if (full) {
            nest_value c = constant_of(b, t, sh, true, s);
            R(b, c, R_EXACT, "full constant %s", SHS(t, sh));
            R(b, num ? nest_multiply(f, c, x) : nest_equal(f, c, x), fl ? R_ARITH : R_EXACT,
              "full * x %s", SHS(t, sh));
            nest_value c2 = constant_of(b, NEST_BOOL, sh, true, s + 1);
            R(b, nest_select(f, c2, c, x), R_EXACT, "select(const, const, x) %s", SHS(t, sh));
        }
        /* a scalar constant broadcast into an expression */
        shp sc = {0, {0}};
        nest_value k = constant_of(b, t, &sc, false, s + 2);
        nest_value kb = nest_broadcast(f, k, sh->rank, sh->d, sh->rank,
                                       SHAPE(0, 1, 2, 3));
        R(b, num ? nest_subtract(f, x, kb) : nest_equal(f, kb, x), fl ? R_ARITH : R_EXACT,
          "x - broadcast(scalar const) %s", SHS(t, sh));
    }
    /* every special value as a splat over [3] and as a scalar, returned and in a select */
    shp s3 = {1, {3}}, s0 = {0, {0}};
    nest_value c = PS(b, NEST_BOOL, &s3, G_BOOL), y = PS(b, t, &s3, G_GENERAL);
    for (int w = 0; w < 15; w++) {
        nest_value k = constant_of(b, t, &s3, false, w);
        R(b, k, R_EXACT, "splat value %d", w);
        R(b, constant_of(b, t, &s0, false, w), R_EXACT, "scalar value %d", w);
        R(b, nest_select(f, c, k, y), R_EXACT, "select with splat value %d", w);
    }
}

static void test_constant(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "constant_%s", tname(ALL_TYPES[i]));
        check_case(name, build_constant, &ALL_TYPES[i], V_STD | V_AOT);
    }
}

/* A function without parameters: constants only. */
static void build_no_params(bctx *b, const void *arg)
{
    (void)arg;
    shp s = {2, {2, 3}};
    nest_value c = constant_of(b, NEST_F32, &s, true, 0);
    R(b, nest_sum(b->f, M(b, c), 1, SHAPE(1)), R_EXACT, "sum of a constant");
    R(b, nest_convert(b->f, constant_of(b, NEST_I64, &s, true, 3), NEST_F64), R_EXACT,
      "convert of a constant");
}

static void test_no_params(void **state)
{
    (void)state;
    check_case("no_params", build_no_params, NULL, V_STD | V_AOT);
}

/* ---------------------------------------------------------------------------------------------
 * dot
 * ------------------------------------------------------------------------------------------- */

typedef struct dot_form {
    shp a, b;
} dot_form;

static const dot_form DOTS[] = {
    /* scalar . scalar, scalar . tensor, tensor . scalar */
    {{0, {0}}, {0, {0}}},
    {{0, {0}}, {1, {7}}},
    {{2, {5, 17}}, {0, {0}}},
    {{0, {0}}, {3, {3, 0, 2}}},
    {{3, {64, 65, 67}}, {0, {0}}},
    /* vector . vector, including the zero-length contraction */
    {{1, {0}}, {1, {0}}},
    {{1, {1}}, {1, {1}}},
    {{1, {7}}, {1, {7}}},
    {{1, {33}}, {1, {33}}},
    {{1, {1000003}}, {1, {1000003}}},
    /* matrix . vector, vector . matrix, matrix . matrix */
    {{2, {5, 17}}, {1, {17}}},
    {{1, {33}}, {2, {33, 7}}},
    {{2, {1, 1}}, {2, {1, 1}}},
    {{2, {5, 17}}, {2, {17, 33}}},
    {{2, {33, 65}}, {2, {65, 47}}},
    {{2, {64, 65}}, {2, {65, 67}}},
    /* thin products (fewer columns than a register tile's: the thin tiles of tile.c), with
     * whole and partial blocks of rows */
    {{2, {37, 29}}, {2, {29, 10}}},
    {{2, {40, 33}}, {2, {33, 3}}},
    {{2, {19, 70}}, {2, {70, 40}}},
    /* zero-length contraction with an output, zero-size outputs */
    {{2, {3, 0}}, {2, {0, 4}}},
    {{2, {0, 3}}, {2, {3, 4}}},
    {{2, {3, 4}}, {2, {4, 0}}},
    {{3, {3, 0, 2}}, {2, {2, 5}}},
    /* higher ranks */
    {{3, {2, 3, 4}}, {2, {4, 5}}},
    {{1, {4}}, {3, {4, 2, 3}}},
    {{2, {2, 3}}, {3, {3, 4, 5}}},
    {{3, {1, 1, 1}}, {3, {1, 1, 1}}},
    {{3, {64, 65, 67}}, {1, {67}}},
    {{1, {64}}, {3, {64, 65, 67}}},
};

typedef struct dot_arg {
    nest_type t;
    gen g;
} dot_arg;

static int64_t contraction(const dot_form *d)
{
    if (d->a.rank == 0 || d->b.rank == 0)
        return 1;
    return d->b.d[0];
}

static void build_dot(bctx *b, const void *arg)
{
    const dot_arg *da = arg;
    nest_type t = da->t;
    bool fl = is_float_t(t), exact = da->g == G_EXACT;
    for (size_t i = 0; i < countof_(DOTS); i++) {
        const dot_form *d = &DOTS[i];
        nest_value x = PS(b, t, &d->a, da->g), y = PS(b, t, &d->b, da->g);
        nest_value r = nest_dot(b->f, M(b, x), M(b, y));
        if (fl && !exact)
            RS(b, r, contraction(d), "dot %s . %s", SHS(t, &d->a), SHS(t, &d->b));
        else
            R(b, r, R_EXACT, "dot %s . %s", SHS(t, &d->a), SHS(t, &d->b));
    }
}

/* dot of expressions: fused or stored operands, views, the l2 pattern, a dot feeding ops */
static void build_dot_expr(bctx *b, const void *arg)
{
    const dot_arg *da = arg;
    nest_type t = da->t;
    nest_function *f = b->f;
    bool fl = is_float_t(t);
    shp m = {2, {5, 17}}, n = {2, {17, 33}}, tr = {2, {17, 5}}, v = {1, {1000003}},
        v33 = {1, {33}}, o = {2, {5, 33}}, wn = {2, {33, 17}};
    nest_value a = PS(b, t, &m, da->g), a2 = PS(b, t, &m, da->g), c = PS(b, t, &n, da->g);
    nest_value at = PS(b, t, &tr, da->g), x = PS(b, t, &v, da->g), y = PS(b, t, &v, da->g);
    nest_value w = PS(b, t, &v33, da->g), bias = PS(b, t, &o, da->g);
    nest_value s = nest_add(f, a, a2);
    nest_value r1 = nest_dot(f, M(b, s), M(b, c));
    nest_value tt = nest_reshape(f, at, SHAPE(1, 0), 2, SHAPE(5, 17));
    nest_value r2 = nest_dot(f, M(b, tt), M(b, c));
    nest_value ct = nest_reshape(f, c, SHAPE(1, 0), 2, SHAPE(33, 17));
    nest_value r3 = nest_dot(f, M(b, a), M(b, nest_reshape(f, ct, SHAPE(1, 0), 2, SHAPE(17, 33))));
    nest_value d = nest_subtract(f, x, y);
    nest_value r4 = nest_dot(f, M(b, d), M(b, d));
    nest_value wb = nest_broadcast(f, w, 2, SHAPE(17, 33), 1, SHAPE(0));
    nest_value r5 = nest_dot(f, M(b, a), M(b, wb));
    nest_value r6 = nest_dot(f, M(b, nest_negative(f, a)), M(b, nest_multiply(f, c, c)));
    /* a . w^T with fewer rows than columns (a dense layer's backward: tile.c computes it
     * transposed, w read in place), and a bias after it */
    nest_value wt = nest_reshape(f, PS(b, t, &wn, da->g), SHAPE(1, 0), 2, SHAPE(17, 33));
    nest_value r7 = nest_dot(f, M(b, a), M(b, wt));
    nest_value h7 = nest_add(f, r7, b->mag ? nest_abs(f, bias) : bias);
    if (fl) {
        RS(b, r7, 17, "dot(a, w^T)");
        RS(b, h7, 18, "dot(a, w^T) + bias");
        RS(b, r1, 17, "dot(add, c)");
        RS(b, r2, 17, "dot(transpose, c)");
        RS(b, r3, 17, "dot(a, transpose of transpose)");
        RS(b, r4, 1000003, "dot(d, d)");
        RS(b, r5, 17, "dot(a, broadcast)");
        RS(b, r6, 17, "dot(negative, multiply)");
        /* a dot feeding element-wise ops (the dense layer); in the twin, the magnitude */
        nest_value h = nest_add(f, r1, bias);
        if (b->mag)
            h = nest_add(f, r1, nest_abs(f, bias));
        RS(b, h, 18, "dot + bias");
    } else {
        R(b, r1, R_EXACT, "dot(add, c)");
        R(b, r2, R_EXACT, "dot(transpose, c)");
        R(b, r3, R_EXACT, "dot(a, transpose of transpose)");
        R(b, r4, R_EXACT, "dot(d, d)");
        R(b, r5, R_EXACT, "dot(a, broadcast)");
        R(b, r6, R_EXACT, "dot(negative, multiply)");
        R(b, r7, R_EXACT, "dot(a, w^T)");
        R(b, h7, R_EXACT, "dot(a, w^T) + bias");
        nest_value h = nest_add(f, r1, bias);
        R(b, nest_maximum(f, h, nest_negative(f, h)), R_EXACT, "|dot + bias|");
    }
}

static void test_dot(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[32];
        dot_arg da = {NUM_TYPES[i], G_GENERAL};
        snprintf(name, sizeof name, "dot_%s", tname(NUM_TYPES[i]));
        check_case(name, build_dot, &da, V_STD);
        snprintf(name, sizeof name, "dot_expr_%s", tname(NUM_TYPES[i]));
        check_case(name, build_dot_expr, &da, V_STD);
        if (is_float_t(NUM_TYPES[i])) {
            da.g = G_EXACT;
            snprintf(name, sizeof name, "dot_exact_%s", tname(NUM_TYPES[i]));
            check_case(name, build_dot, &da, V_FUSE);
        }
    }
}

/* Products of matrices in the shapes and forms the register tiles take (f32 and f64 with at
 * least 2 rows and 16 columns): edges of tiles and panels, an empty contraction, strided and
 * transposed first factors, computed second factors, the element-wise nest absorbed into the
 * tile's store (or not, when it reads the product elsewhere), a product that is also a result,
 * chained products. */
static void build_tile(bctx *b, const void *arg)
{
    const dot_arg *da = arg;
    nest_type t = da->t;
    nest_function *f = b->f;
    bool fl = is_float_t(t), exact = da->g == G_EXACT;
#define TR(v_, n_, ...)                                                                          \
    do {                                                                                         \
        if (fl && !exact)                                                                        \
            RS(b, (v_), (n_), __VA_ARGS__);                                                      \
        else                                                                                     \
            R(b, (v_), R_EXACT, __VA_ARGS__);                                                    \
    } while (0)
    static const int64_t mkn[][3] = {
        {2, 1, 16},   {5, 1, 130},  {7, 3, 16},    {3, 0, 20},   {13, 17, 33},
        {6, 64, 64},  {9, 200, 129}, {4, 5, 17},   {25, 31, 97}, {130, 7, 19},
        /* up to 8 blocks of rows read the second factor in place (the columns in parallel
         * past 2^18 multiply-adds, a last block narrower than a tile among them), more pack */
        {16, 256, 200}, {32, 70, 128}, {33, 70, 128}, {40, 64, 64},
        /* a result of a megabyte or more with a small second factor: packed whole, then
         * the blocks row by row (a last block of fewer rows, and of fewer columns) */
        {301, 5, 900},
        /* columns that waste a quarter of the tiles' where the rows fill them: computed
         * transposed (the sum not a multiple of the lanes, last blocks short both ways) */
        {256, 37, 196}, {100, 45, 70}, {100, 45, 40},
        /* 250 columns in 256 and a small second factor: transposed for a saving of 2% */
        {64, 24, 250},
    };
    for (size_t i = 0; i < countof_(mkn); i++) {
        int64_t m = mkn[i][0], k = mkn[i][1], n = mkn[i][2];
        nest_value x = P(b, t, 2, SHAPE(m, k), da->g), y = P(b, t, 2, SHAPE(k, n), da->g);
        TR(nest_dot(f, M(b, x), M(b, y)), k, "dot [%lld,%lld].[%lld,%lld]", (long long)m,
           (long long)k, (long long)k, (long long)n);
    }
    /* a transposed and a strided first factor; a computed second factor (each product with
     * its own columns: adjacent products over one space would merge and not be tiled) */
    nest_value at = P(b, t, 2, SHAPE(40, 9), da->g), big = P(b, t, 2, SHAPE(30, 90), da->g);
    nest_value w[6];
    for (int i = 0; i < 6; i++)
        w[i] = P(b, t, 2, SHAPE(40, 70 + i), da->g);
    nest_value w2 = P(b, t, 2, SHAPE(40, 73), da->g);
    nest_value a = nest_reshape(f, at, SHAPE(1, 0), 2, SHAPE(9, 40));
    TR(nest_dot(f, M(b, a), M(b, w[1])), 40, "dot(transpose, w)");
    nest_value as = nest_slice(f, big, SHAPE(1, 3), SHAPE(28, 83), SHAPE(3, 2)); /* [9,40] */
    TR(nest_dot(f, M(b, as), M(b, w[2])), 40, "dot(strided slice, w)");
    nest_value wb = P(b, t, 2, SHAPE(80, 75), da->g); /* rows 2 apart: B in place, its k stride */
    nest_value ws = nest_slice(f, wb, SHAPE(0, 1), SHAPE(80, 73), SHAPE(2, 1));
    TR(nest_dot(f, M(b, a), M(b, ws)), 40, "dot(a, strided slice)");
    TR(nest_dot(f, M(b, a), M(b, nest_negative(f, w[3]))), 40, "dot(a, -w)");
    TR(nest_dot(f, M(b, a), M(b, nest_add(f, w[3], w2))), 40, "dot(a, w + w2)");
    /* absorbed consumers: bias and ReLU, a scale, a second output; and ones that read the
     * product elsewhere */
    nest_value bias = P(b, t, 1, SHAPE(70), da->g);
    nest_value h = nest_dot(f, M(b, a), M(b, w[0]));
    nest_value bb = nest_broadcast(f, bias, 2, SHAPE(9, 70), 1, SHAPE(0));
    nest_value z = nest_add(f, h, b->mag ? nest_abs(f, bb) : bb);
    TR(nest_maximum(f, z, nest_subtract(f, z, z)), 41, "relu(dot + bias)");
    TR(z, 41, "dot + bias, also a result");
    nest_value g = nest_dot(f, M(b, as), M(b, w[4]));
    TR(nest_multiply(f, nest_add(f, g, g), g), 40 * 40 * 3, "(g + g) * g");
    nest_value h2 = nest_dot(f, M(b, as), M(b, w[5]));
    nest_value h2t = nest_reshape(f, h2, SHAPE(1, 0), 2, SHAPE(75, 9));
    TR(nest_add(f, h2, nest_reshape(f, h2t, SHAPE(1, 0), 2, SHAPE(9, 75))), 80,
       "h2 + transpose(transpose(h2))");
    TR(nest_slice(f, h2, SHAPE(1, 2), SHAPE(9, 75), SHAPE(2, 3)), 40, "slice of a product");
    TR(h2t, 40, "transpose of a product");
    /* a . w^T with many rows of w (tile.c computes it transposed): blocks of several tiles
     * down the rows, so that each column's stores fill cache lines, the last block short;
     * on several cores past 2^18 multiply-adds; and an update absorbed into its store */
    nest_value wl = P(b, t, 2, SHAPE(901, 300), da->g), al = P(b, t, 2, SHAPE(40, 300), da->g);
    nest_value wlt = nest_reshape(f, wl, SHAPE(1, 0), 2, SHAPE(300, 901));
    nest_value rl = nest_dot(f, M(b, al), M(b, wlt));
    TR(rl, 300, "dot(a, w^T) in blocks of rows");
    nest_value ul = P(b, t, 2, SHAPE(40, 901), da->g);
    nest_value rr = nest_multiply(f, rl, rl); /* the twin: |u| + rl^2 bounds the error */
    TR(b->mag ? nest_add(f, nest_abs(f, ul), rr) : nest_subtract(f, ul, rr), 300 * 300 * 2,
       "u - dot(a, w^T)^2");
    /* computed transposed for its columns (196 of 256), with bias and ReLU absorbed into its
     * store and the biased value a result too */
    nest_value tl = P(b, t, 2, SHAPE(128, 37), da->g), tr = P(b, t, 2, SHAPE(37, 196), da->g);
    nest_value tbias = P(b, t, 1, SHAPE(196), da->g);
    nest_value tbb = nest_broadcast(f, tbias, 2, SHAPE(128, 196), 1, SHAPE(0));
    nest_value zt = nest_add(f, nest_dot(f, M(b, tl), M(b, tr)), b->mag ? nest_abs(f, tbb) : tbb);
    TR(nest_maximum(f, zt, nest_subtract(f, zt, zt)), 38, "relu(dot + bias), transposed");
    TR(zt, 38, "dot + bias, transposed, also a result");
    /* chained products: the second's first factor is the first's result */
    nest_value c = P(b, t, 2, SHAPE(70, 24), da->g);
    TR(nest_dot(f, M(b, h), M(b, c)), 70 * 40, "dot(dot(a, w), c)");
#undef TR
}

static void test_tile(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        char name[32];
        dot_arg da = {NUM_TYPES[i], G_GENERAL};
        snprintf(name, sizeof name, "tile_%s", tname(NUM_TYPES[i]));
        check_case(name, build_tile, &da, i == 0 ? V_STD | V_NOOMP | V_MARCH | V_AOT : V_STD);
        snprintf(name, sizeof name, "tile_col_%s", tname(NUM_TYPES[i]));
        check_case(name, build_tile, &da, V_COL | V_NOROW | V_FUSE);
        da.g = G_EXACT;
        snprintf(name, sizeof name, "tile_exact_%s", tname(NUM_TYPES[i]));
        check_case(name, build_tile, &da, V_FUSE | V_MARCH);
    }
}

/* ---------------------------------------------------------------------------------------------
 * broadcast, reshape, slice, concat
 * ------------------------------------------------------------------------------------------- */

typedef struct bc_form {
    shp in, out;
    int naxes;
    int64_t axes[4];
} bc_form;

static const bc_form BCS[] = {
    {{0, {0}}, {0, {0}}, 0, {0}},
    {{0, {0}}, {1, {7}}, 1, {0}},
    {{0, {0}}, {2, {5, 17}}, 2, {1, 0}},
    {{0, {0}}, {3, {3, 0, 2}}, 3, {0, 1, 2}},
    {{0, {0}}, {3, {64, 65, 67}}, 3, {0, 1, 2}},
    {{1, {17}}, {2, {5, 17}}, 1, {0}},
    {{1, {5}}, {2, {5, 17}}, 1, {1}},
    {{1, {65}}, {3, {64, 65, 67}}, 2, {0, 2}},
    {{2, {64, 67}}, {3, {64, 65, 67}}, 1, {1}},
    {{2, {64, 65}}, {3, {64, 65, 67}}, 1, {2}},
    {{1, {1}}, {3, {1, 1, 1}}, 2, {0, 1}},
    {{1, {0}}, {2, {3, 0}}, 1, {0}},
    {{1, {3}}, {2, {3, 0}}, 1, {1}},
    {{2, {2, 3}}, {4, {4, 2, 5, 3}}, 2, {2, 0}},
    {{1, {1000003}}, {2, {2, 1000003}}, 1, {0}},
    {{1, {33}}, {2, {33, 1}}, 1, {1}},
    {{2, {5, 17}}, {2, {5, 17}}, 0, {0}},
};

static void build_broadcast(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    bool num = t != NEST_BOOL;
    for (size_t i = 0; i < countof_(BCS); i++) {
        const bc_form *c = &BCS[i];
        nest_value x = PS(b, t, &c->in, G_GENERAL), y = PS(b, t, &c->out, G_GENERAL);
        nest_value v = nest_broadcast(f, x, c->out.rank, c->out.d, c->naxes, c->axes);
        R(b, v, R_EXACT, "broadcast %s to %s", SHS(t, &c->in), SHS(t, &c->out));
        R(b, num ? nest_subtract(f, y, v) : nest_equal(f, y, v), is_float_t(t) ? R_ARITH : R_EXACT,
          "y - broadcast %s to %s", SHS(t, &c->in), SHS(t, &c->out));
        /* a broadcast of an expression (stored first when it is not cheap) */
        if (num) {
            nest_value e = nest_multiply(f, nest_add(f, x, x), x);
            R(b, nest_add(f, nest_broadcast(f, e, c->out.rank, c->out.d, c->naxes, c->axes), y),
              is_float_t(t) ? R_ARITH : R_EXACT, "broadcast of (x+x)*x %s to %s",
              SHS(t, &c->in), SHS(t, &c->out));
        }
    }
}

static void test_broadcast(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "broadcast_%s", tname(ALL_TYPES[i]));
        check_case(name, build_broadcast, &ALL_TYPES[i], V_STD);
    }
}

typedef struct rs_form {
    shp in, out;
    bool has_order;
    int64_t order[4];
} rs_form;

static const rs_form RSS[] = {
    {{2, {5, 17}}, {1, {85}}, false, {0}},
    {{1, {85}}, {2, {5, 17}}, false, {0}},
    {{3, {2, 3, 4}}, {2, {4, 6}}, false, {0}},
    {{0, {0}}, {3, {1, 1, 1}}, false, {0}},
    {{3, {1, 1, 1}}, {0, {0}}, false, {0}},
    {{3, {3, 0, 2}}, {2, {0, 6}}, false, {0}},
    {{1, {7}}, {1, {7}}, false, {0}},
    {{1, {7}}, {1, {7}}, true, {0}},
    {{2, {5, 17}}, {2, {5, 17}}, true, {0, 1}},
    /* transposes */
    {{2, {5, 17}}, {2, {17, 5}}, true, {1, 0}},
    {{2, {33, 1}}, {2, {1, 33}}, true, {1, 0}},
    {{3, {3, 4, 5}}, {3, {5, 3, 4}}, true, {2, 0, 1}},
    {{3, {3, 4, 5}}, {3, {4, 5, 3}}, true, {1, 2, 0}},
    {{3, {64, 65, 67}}, {3, {67, 64, 65}}, true, {2, 0, 1}},
    {{3, {3, 0, 2}}, {3, {2, 3, 0}}, true, {2, 0, 1}},
    /* an order and a new shape: the transposed elements laid out again (a copy) */
    {{2, {5, 17}}, {1, {85}}, true, {1, 0}},
    {{3, {3, 4, 5}}, {2, {5, 12}}, true, {2, 0, 1}},
    {{3, {3, 4, 5}}, {2, {10, 6}}, true, {1, 2, 0}},
    {{3, {3, 4, 5}}, {3, {2, 5, 6}}, true, {2, 1, 0}},
};

static void build_reshape(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    bool num = t != NEST_BOOL;
    int k = is_float_t(t) ? R_ARITH : R_EXACT;
    for (size_t i = 0; i < countof_(RSS); i++) {
        const rs_form *c = &RSS[i];
        const int64_t *ord = c->has_order ? c->order : NULL;
        nest_value x = PS(b, t, &c->in, G_GENERAL), y = PS(b, t, &c->out, G_GENERAL);
        nest_value v = nest_reshape(f, x, ord, c->out.rank, c->out.d);
        R(b, v, R_EXACT, "reshape %s to %s (%d)", SHS(t, &c->in), SHS(t, &c->out), (int)i);
        R(b, num ? nest_add(f, v, y) : nest_equal(f, v, y), k, "reshape + y (%d)", (int)i);
        if (num) {
            /* a reshape of an expression, and a reshape of a reshape */
            nest_value e = nest_subtract(f, x, nest_negative(f, x));
            R(b, nest_reshape(f, e, ord, c->out.rank, c->out.d), k, "reshape of x - -x (%d)",
              (int)i);
        }
        nest_value back = nest_reshape(f, v, NULL, c->in.rank, c->in.d);
        R(b, back, R_EXACT, "reshape back to %s (%d)", SHS(t, &c->in), (int)i);
    }
    /* transpose, then a reshape that merges the transposed axes: must copy */
    shp m = {2, {5, 17}}, c3 = {3, {3, 4, 5}};
    nest_value x = PS(b, t, &m, G_GENERAL), z = PS(b, t, &c3, G_GENERAL);
    nest_value tx = nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(17, 5));
    R(b, nest_reshape(f, tx, NULL, 1, SHAPE(85)), R_EXACT, "reshape(transpose) to [85]");
    R(b, nest_reshape(f, tx, NULL, 2, SHAPE(5, 17)), R_EXACT, "reshape(transpose) to [5,17]");
    nest_value tz = nest_reshape(f, z, SHAPE(2, 0, 1), 3, SHAPE(5, 3, 4));
    nest_value rz = nest_reshape(f, tz, NULL, 2, SHAPE(15, 4));
    R(b, rz, R_EXACT, "reshape(order [2,0,1]) to [15,4]");
    R(b, nest_reshape(f, rz, SHAPE(1, 0), 2, SHAPE(4, 15)), R_EXACT,
      "transpose of reshape(order [2,0,1])");
    if (num)
        R(b, nest_add(f, nest_reshape(f, tz, NULL, 1, SHAPE(60)),
                      nest_reshape(f, z, NULL, 1, SHAPE(60))),
          k, "reshape(transposed) + reshape");
}

static void test_reshape(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "reshape_%s", tname(ALL_TYPES[i]));
        check_case(name, build_reshape, &ALL_TYPES[i], V_STD);
    }
}

typedef struct sl_form {
    shp in;
    int64_t lo[4], hi[4], st[4];
    bool strided;
} sl_form;

static const sl_form SLS[] = {
    {{0, {0}}, {0}, {0}, {0}, false},
    {{1, {1}}, {0}, {1}, {1}, false},
    {{3, {1, 1, 1}}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, true},
    {{1, {0}}, {0}, {0}, {1}, false},
    {{3, {3, 0, 2}}, {1, 0, 0}, {3, 0, 2}, {1, 1, 2}, true},
    {{1, {7}}, {3}, {3}, {1}, false},
    {{1, {7}}, {7}, {7}, {1}, false},
    {{1, {7}}, {0}, {7}, {10}, true},
    {{1, {7}}, {1}, {6}, {1}, false},
    {{1, {33}}, {3}, {30}, {4}, true},
    {{2, {5, 17}}, {1, 2}, {5, 17}, {2, 3}, true},
    {{2, {5, 17}}, {0, 16}, {5, 17}, {1, 1}, false},
    {{2, {5, 17}}, {2, 0}, {3, 17}, {1, 1}, false},
    {{1, {1000003}}, {1}, {1000003}, {2}, true},
    {{1, {1000003}}, {17}, {999999}, {1}, false},
    {{3, {64, 65, 67}}, {1, 0, 3}, {63, 65, 67}, {3, 1, 5}, true},
    {{3, {64, 65, 67}}, {0, 1, 0}, {64, 64, 66}, {1, 1, 1}, false},
};

static void build_slice(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    bool num = t != NEST_BOOL;
    int k = is_float_t(t) ? R_ARITH : R_EXACT;
    for (size_t i = 0; i < countof_(SLS); i++) {
        const sl_form *c = &SLS[i];
        const int64_t *st = c->strided ? c->st : NULL;
        nest_value x = PS(b, t, &c->in, G_GENERAL);
        nest_value v = nest_slice(f, x, c->lo, c->hi, st);
        R(b, v, R_EXACT, "slice of %s (%d)", SHS(t, &c->in), (int)i);
        if (num) {
            nest_value e = nest_multiply(f, x, nest_add(f, x, x));
            R(b, nest_slice(f, e, c->lo, c->hi, st), k, "slice of x*(x+x) (%d)", (int)i);
            R(b, nest_add(f, v, v), k, "slice + slice (%d)", (int)i);
        } else {
            R(b, nest_equal(f, v, v), R_EXACT, "slice == slice (%d)", (int)i);
        }
    }
    /* slices of views: of a transpose, of a slice, of a broadcast, of a concat */
    shp m = {2, {5, 17}}, r = {1, {17}}, s7 = {1, {7}}, s4 = {1, {4}};
    nest_value x = PS(b, t, &m, G_GENERAL), y = PS(b, t, &r, G_GENERAL);
    nest_value p = PS(b, t, &s7, G_GENERAL), q = PS(b, t, &s4, G_GENERAL);
    nest_value tx = nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(17, 5));
    R(b, nest_slice(f, tx, SHAPE(3, 1), SHAPE(16, 5), SHAPE(4, 2)), R_EXACT, "slice of transpose");
    nest_value s1 = nest_slice(f, x, SHAPE(1, 1), SHAPE(5, 16), SHAPE(1, 2));
    R(b, nest_slice(f, s1, SHAPE(1, 2), SHAPE(4, 8), SHAPE(2, 3)), R_EXACT, "slice of slice");
    nest_value by = nest_broadcast(f, y, 2, SHAPE(9, 17), 1, SHAPE(0));
    R(b, nest_slice(f, by, SHAPE(2, 3), SHAPE(9, 17), SHAPE(3, 4)), R_EXACT, "slice of broadcast");
    nest_value cc = nest_concat(f, 2, VALUES(p, q), 0);
    R(b, nest_slice(f, cc, SHAPE(2), SHAPE(10), SHAPE(3)), R_EXACT, "slice of concat");
    R(b, nest_slice(f, cc, SHAPE(6), SHAPE(11), NULL), R_EXACT, "slice of concat across");
    R(b, nest_slice(f, cc, SHAPE(8), SHAPE(11), NULL), R_EXACT, "slice of concat's last part");
}

static void test_slice(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "slice_%s", tname(ALL_TYPES[i]));
        check_case(name, build_slice, &ALL_TYPES[i], V_STD);
    }
}

typedef struct cc_form {
    int n;
    shp part[3];
    int axis;
} cc_form;

static const cc_form CCS[] = {
    {2, {{1, {3}}, {1, {4}}}, 0},
    {3, {{1, {3}}, {1, {0}}, {1, {4}}}, 0},
    {2, {{1, {0}}, {1, {0}}}, 0},
    {1, {{1, {7}}}, 0},
    {2, {{1, {1}}, {1, {1}}}, 0},
    {3, {{2, {2, 3}}, {2, {2, 5}}, {2, {2, 1}}}, 1},
    {2, {{2, {2, 3}}, {2, {4, 3}}}, 0},
    {3, {{3, {2, 3, 4}}, {3, {2, 1, 4}}, {3, {2, 0, 4}}}, 1},
    {2, {{3, {2, 3, 4}}, {3, {2, 3, 5}}}, 2},
    {2, {{3, {1, 1, 1}}, {3, {1, 1, 1}}}, 2},
    {3, {{3, {3, 0, 2}}, {3, {3, 0, 2}}, {3, {1, 0, 2}}}, 0},
    {2, {{3, {3, 0, 2}}, {3, {3, 0, 2}}}, 1},
    {2, {{3, {3, 0, 2}}, {3, {3, 0, 5}}}, 2},
    {2, {{3, {64, 65, 67}}, {3, {64, 65, 1}}}, 2},
    {2, {{3, {64, 65, 67}}, {3, {1, 65, 67}}}, 0},
    {2, {{1, {1000003}}, {1, {7}}}, 0},
    {3, {{2, {5, 17}}, {2, {5, 16}}, {2, {5, 0}}}, 1},
    {2, {{2, {5, 17}}, {2, {0, 17}}}, 0},
};

static void build_concat(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    bool num = t != NEST_BOOL;
    int k = is_float_t(t) ? R_ARITH : R_EXACT;
    for (size_t i = 0; i < countof_(CCS); i++) {
        const cc_form *c = &CCS[i];
        nest_value parts[3], exprs[3];
        for (int j = 0; j < c->n; j++) {
            parts[j] = PS(b, t, &c->part[j], G_GENERAL);
            exprs[j] = num ? (j % 2 ? nest_negative(f, parts[j]) : nest_add(f, parts[j], parts[j]))
                           : nest_equal(f, parts[j], parts[j]);
        }
        nest_value v = nest_concat(f, c->n, parts, c->axis);
        R(b, v, R_EXACT, "concat %d parts axis %d (%d)", c->n, c->axis, (int)i);
        R(b, nest_concat(f, c->n, exprs, c->axis), k, "concat of expressions (%d)", (int)i);
        if (num) {
            /* a concat inside an expression, with a view of it */
            R(b, nest_multiply(f, v, nest_add(f, v, v)), k, "v * (v + v), v a concat (%d)",
              (int)i);
        }
    }
    /* nested concats on the same and on another axis, a part used twice, parts that are views */
    shp a = {2, {2, 3}}, bb = {2, {2, 2}}, cs = {2, {3, 5}}, tr = {2, {5, 2}};
    nest_value x = PS(b, t, &a, G_GENERAL), y = PS(b, t, &bb, G_GENERAL);
    nest_value z = PS(b, t, &cs, G_GENERAL), w = PS(b, t, &tr, G_GENERAL);
    nest_value in = nest_concat(f, 2, VALUES(x, y), 1);                    /* [2,5] */
    R(b, nest_concat(f, 3, VALUES(in, x, in), 1), R_EXACT, "concat(concat, x, concat) axis 1");
    R(b, nest_concat(f, 2, VALUES(in, z), 0), R_EXACT, "concat(concat axis 1, z) axis 0");
    R(b, nest_concat(f, 2, VALUES(x, x), 0), R_EXACT, "concat(x, x)");
    nest_value wt = nest_reshape(f, w, SHAPE(1, 0), 2, SHAPE(2, 5));
    nest_value zs = nest_slice(f, z, SHAPE(0, 0), SHAPE(3, 5), SHAPE(2, 1));
    R(b, nest_concat(f, 3, VALUES(wt, zs, in), 0), R_EXACT, "concat(transpose, slice, concat)");
    if (num)
        R(b, nest_add(f, nest_concat(f, 2, VALUES(in, wt), 0), nest_concat(f, 2, VALUES(wt, in), 0)),
          k, "concat + concat with other boundaries");
}

static void test_concat(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "concat_%s", tname(ALL_TYPES[i]));
        check_case(name, build_concat, &ALL_TYPES[i], V_STD);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reductions
 * ------------------------------------------------------------------------------------------- */

static const red_form REDS[] = {
    {{0, {0}}, 0, {0}},
    {{1, {1}}, 1, {0}},
    {{3, {1, 1, 1}}, 2, {0, 2}},
    {{1, {0}}, 1, {0}},
    {{3, {3, 0, 2}}, 1, {1}},
    {{3, {3, 0, 2}}, 1, {0}},
    {{3, {3, 0, 2}}, 2, {2, 0}},
    {{3, {3, 0, 2}}, 0, {0}},
    {{1, {7}}, 1, {0}},
    {{1, {33}}, 1, {0}},
    {{1, {33}}, 0, {0}},
    {{2, {5, 17}}, 1, {0}},
    {{2, {5, 17}}, 1, {1}},
    {{2, {5, 17}}, 2, {0, 1}},
    {{2, {5, 17}}, 0, {0}},
    {{1, {1000003}}, 1, {0}},
    {{3, {64, 65, 67}}, 1, {0}},
    {{3, {64, 65, 67}}, 1, {1}},
    {{3, {64, 65, 67}}, 1, {2}},
    {{3, {64, 65, 67}}, 2, {0, 2}},
    {{3, {64, 65, 67}}, 2, {1, 2}},
    {{3, {64, 65, 67}}, 3, {0, 1, 2}},
};

static int64_t reduced_terms(const red_form *r)
{
    int64_t n = 1;
    for (int i = 0; i < r->naxes; i++)
        n *= r->in.d[r->axes[i]];
    return n;
}

typedef struct red_arg {
    nest_type t;
    bool exact; /* small multiples of 1/4: float sums are exact */
} red_arg;

static void build_reduce(bctx *b, const void *arg)
{
    const red_arg *ra = arg;
    nest_type t = ra->t;
    nest_function *f = b->f;
    bool fl = is_float_t(t);
    for (size_t i = 0; i < countof_(REDS); i++) {
        const red_form *c = &REDS[i];
        int64_t n = reduced_terms(c);
        nest_value xs = PS(b, t, &c->in, ra->exact ? G_EXACT : G_GENERAL);
        nest_value r = nest_sum(f, M(b, xs), c->naxes, c->axes);
        if (fl && !ra->exact)
            RS(b, r, n, "sum of %s (%d)", SHS(t, &c->in), (int)i);
        else
            R(b, r, R_EXACT, "sum of %s (%d)", SHS(t, &c->in), (int)i);
        if (ra->exact)
            continue;
        /* max and min see NaN and infinities (skipped / kept by x > acc ? x : acc) */
        nest_value xm = PS(b, t, &c->in, G_EXTREME);
        R(b, nest_max(f, xm, c->naxes, c->axes), R_EXACT, "max of %s (%d)", SHS(t, &c->in), (int)i);
        R(b, nest_min(f, xm, c->naxes, c->axes), R_EXACT, "min of %s (%d)", SHS(t, &c->in), (int)i);
    }
}

/* Reductions of expressions, reductions of reductions, reductions feeding element-wise ops. */
static void build_reduce_expr(bctx *b, const void *arg)
{
    const red_arg *ra = arg;
    nest_type t = ra->t;
    nest_function *f = b->f;
    bool fl = is_float_t(t);
    shp m = {2, {5, 17}}, big = {3, {64, 65, 67}}, v = {1, {33}}, tr = {2, {17, 5}};
    nest_value x = PS(b, t, &m, G_GENERAL), y = PS(b, t, &m, G_GENERAL);
    nest_value z = PS(b, t, &big, G_GENERAL), w = PS(b, t, &v, G_GENERAL);
    nest_value xt = PS(b, t, &tr, G_GENERAL), e = PS(b, t, &m, G_EXTREME);
#define SUMR(v_, n_, ...)                                                                        \
    do {                                                                                         \
        if (fl)                                                                                  \
            RS(b, (v_), (n_), __VA_ARGS__);                                                      \
        else                                                                                     \
            R(b, (v_), R_EXACT, __VA_ARGS__);                                                    \
    } while (0)
    /* the reduced value is an op whose C is a conditional or a difference */
    SUMR(nest_sum(f, M(b, nest_maximum(f, x, y)), 1, SHAPE(1)), 17, "sum(maximum) axis 1");
    SUMR(nest_sum(f, M(b, nest_minimum(f, x, y)), 2, SHAPE(0, 1)), 85, "sum(minimum) all");
    SUMR(nest_sum(f, M(b, nest_subtract(f, x, y)), 1, SHAPE(0)), 5, "sum(subtract) axis 0");
    SUMR(nest_sum(f, M(b, nest_select(f, nest_less(f, x, y), x, y)), 1, SHAPE(1)), 17,
         "sum(select)");
    SUMR(nest_sum(f, M(b, nest_multiply(f, x, y)), 1, SHAPE(1)), 17, "sum(multiply)");
    R(b, nest_max(f, nest_select(f, nest_less(f, x, y), x, y), 1, SHAPE(1)), R_EXACT,
      "max(select)");
    R(b, nest_min(f, nest_maximum(f, e, y), 1, SHAPE(0)), R_EXACT, "min(maximum) with NaN");
    R(b, nest_max(f, nest_subtract(f, x, y), 2, SHAPE(1, 0)), fl ? R_ARITH : R_EXACT,
      "max(subtract)");
    R(b, nest_max(f, nest_negative(f, e), 1, SHAPE(1)), R_EXACT, "max(negative) with NaN");
    /* a reduction of a view */
    nest_value xtt = nest_reshape(f, xt, SHAPE(1, 0), 2, SHAPE(5, 17));
    SUMR(nest_sum(f, M(b, xtt), 1, SHAPE(1)), 17, "sum(transpose) axis 1");
    R(b, nest_max(f, xtt, 1, SHAPE(0)), R_EXACT, "max(transpose) axis 0");
    nest_value wb = nest_broadcast(f, w, 2, SHAPE(9, 33), 1, SHAPE(0));
    SUMR(nest_sum(f, M(b, wb), 1, SHAPE(0)), 9, "sum(broadcast) over the new axis");
    SUMR(nest_sum(f, M(b, nest_slice(f, z, SHAPE(1, 2, 3), SHAPE(64, 65, 67), SHAPE(2, 3, 4))), 2,
                  SHAPE(0, 2)),
         32 * 16, "sum(slice) axes 0,2");
    /* reductions of reductions */
    nest_value mz = nest_max(f, z, 1, SHAPE(2));
    R(b, nest_min(f, mz, 1, SHAPE(0)), R_EXACT, "min(max axis 2) axis 0");
    SUMR(nest_sum(f, M(b, nest_sum(f, M(b, z), 1, SHAPE(1))), 1, SHAPE(0)), 64 * 65,
         "sum(sum axis 1) axis 0");
    /* a reduction feeding element-wise ops: x - max(x) (softmax's first step) */
    nest_value mx = nest_max(f, x, 1, SHAPE(1));
    R(b, nest_subtract(f, x, nest_broadcast(f, mx, 2, SHAPE(5, 17), 1, SHAPE(1))),
      fl ? R_ARITH : R_EXACT, "x - broadcast(max(x))");
    if (fl) {
        nest_value ex = nest_exp(f, nest_subtract(f, x, nest_broadcast(f, mx, 2, SHAPE(5, 17), 1,
                                                                       SHAPE(1))));
        RS(b, nest_sum(f, M(b, ex), 1, SHAPE(1)), 17, "sum(exp(x - max))");
    }
    /* the same input reduced three ways in one function */
    SUMR(nest_sum(f, M(b, z), 1, SHAPE(2)), 67, "sum(z) axis 2");
    R(b, nest_max(f, z, 1, SHAPE(2)), R_EXACT, "max(z) axis 2");
    R(b, nest_min(f, z, 2, SHAPE(0, 1)), R_EXACT, "min(z) axes 0,1");
#undef SUMR
}

static void test_reduce(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[32];
        red_arg ra = {NUM_TYPES[i], false};
        snprintf(name, sizeof name, "reduce_%s", tname(NUM_TYPES[i]));
        check_case(name, build_reduce, &ra, V_STD);
        snprintf(name, sizeof name, "reduce_expr_%s", tname(NUM_TYPES[i]));
        check_case(name, build_reduce_expr, &ra, V_STD);
        if (is_float_t(NUM_TYPES[i])) {
            ra.exact = true;
            snprintf(name, sizeof name, "reduce_exact_%s", tname(NUM_TYPES[i]));
            check_case(name, build_reduce, &ra, V_STD);
        }
    }
}

/* Row-wise normalizations, the patterns whose nests share one loop over the rows (rows.c):
 * softmax and layer norm along the last axis, softmax along the first (not grouped), on shapes
 * with one, few and many rows and columns. In the magnitude twin each result is a bound of its
 * own: softmax's relative error follows its sum's; layer norm's absolute error follows the
 * mean's, |x| over the standard deviation. */
static void build_rows(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    static const int64_t shapes[][2] = {{2, 3}, {5, 17}, {64, 1000}, {300, 7}, {1, 33}, {33, 1},
                                        {4, 0}, {2, 4096}};
    double epsv = 1e-3;
    for (size_t i = 0; i < countof_(shapes); i++) {
        int64_t r = shapes[i][0], c = shapes[i][1];
        nest_value x = P(b, t, 2, shapes[i], G_GENERAL);
        const int64_t *rc = shapes[i];
        /* softmax over the last axis */
        nest_value mx = nest_max(f, x, 1, SHAPE(1));
        nest_value e = nest_exp(f, nest_subtract(f, x, nest_broadcast(f, mx, 2, rc, 1, SHAPE(1))));
        nest_value sm = nest_sum(f, e, 1, SHAPE(1));
        nest_value y = nest_divide(f, e, nest_broadcast(f, sm, 2, rc, 1, SHAPE(1)));
        RS(b, y, c + 4, "softmax of [%lld,%lld]", (long long)r, (long long)c);
        /* softmax over the first axis */
        nest_value mx0 = nest_max(f, x, 1, SHAPE(0));
        nest_value e0 = nest_exp(f, nest_subtract(f, x, nest_broadcast(f, mx0, 2, rc, 1, SHAPE(0))));
        nest_value y0 = nest_divide(f, e0, nest_broadcast(f, nest_sum(f, e0, 1, SHAPE(0)), 2, rc,
                                                          1, SHAPE(0)));
        RS(b, y0, r + 4, "softmax over axis 0 of [%lld,%lld]", (long long)r, (long long)c);
        /* layer norm over the last axis */
        nest_value cn = nest_constant(f, t, 0, NULL,
                                      t == NEST_F32 ? (const void *)&(float){(float)c}
                                                    : (const void *)&(double){(double)c}, 1);
        nest_value ep = nest_constant(f, t, 0, NULL,
                                      t == NEST_F32 ? (const void *)&(float){(float)epsv}
                                                    : (const void *)&epsv, 1);
        nest_value cb = nest_broadcast(f, cn, 1, SHAPE(r), 1, SHAPE(0));
        nest_value mean = nest_divide(f, nest_sum(f, x, 1, SHAPE(1)), cb);
        nest_value d = nest_subtract(f, x, nest_broadcast(f, mean, 2, rc, 1, SHAPE(1)));
        nest_value var = nest_divide(f, nest_sum(f, nest_multiply(f, d, d), 1, SHAPE(1)), cb);
        nest_value sd = nest_sqrt(f, nest_add(f, var, nest_broadcast(f, ep, 1, SHAPE(r), 1,
                                                                     SHAPE(0))));
        nest_value ln = nest_divide(f, d, nest_broadcast(f, sd, 2, rc, 1, SHAPE(1)));
        if (b->mag) {
            /* (mean of |x| + |d|) / sd, the scale of ln's error */
            nest_value ma = nest_divide(f, nest_sum(f, nest_abs(f, x), 1, SHAPE(1)), cb);
            ln = nest_divide(f, nest_add(f, nest_broadcast(f, ma, 2, rc, 1, SHAPE(1)),
                                         nest_abs(f, d)),
                             nest_broadcast(f, sd, 2, rc, 1, SHAPE(1)));
        }
        RS(b, ln, c + 4, "layer norm of [%lld,%lld]", (long long)r, (long long)c);
        R(b, mx, R_EXACT, "row max of [%lld,%lld]", (long long)r, (long long)c);
    }
}

static void test_rows(void **state)
{
    (void)state;
    nest_type f32 = NEST_F32, f64 = NEST_F64;
    check_case("rows_f32", build_rows, &f32, V_STD | V_NOOMP | V_MARCH);
    check_case("rows_f64", build_rows, &f64, V_STD);
    check_case("rows_col_f32", build_rows, &f32, V_COL | V_NOROW | V_FUSE);
}

/* ---------------------------------------------------------------------------------------------
 * Results: tuples, get, several results, values returned twice, parameters returned
 * ------------------------------------------------------------------------------------------- */

static void build_results(bctx *b, const void *arg)
{
    (void)arg;
    nest_function *f = b->f;
    shp m = {2, {5, 17}}, v = {1, {7}}, s0 = {0, {0}}, z = {3, {3, 0, 2}};
    nest_value x = PS(b, NEST_F32, &m, G_GENERAL), y = PS(b, NEST_F32, &m, G_GENERAL);
    nest_value k = PS(b, NEST_I32, &v, G_GENERAL), c = PS(b, NEST_BOOL, &v, G_BOOL);
    nest_value sc = PS(b, NEST_F64, &s0, G_GENERAL), e = PS(b, NEST_I64, &z, G_GENERAL);
    nest_value a = nest_add(f, x, y);
    nest_value sm = nest_sum(f, M(b, x), 1, SHAPE(1));
    nest_value t = nest_tuple(f, 2, VALUES(a, sm));
    nest_value t2 = nest_tuple(f, 3, VALUES(t, k, nest_tuple(f, 0, NULL)));
    R(b, nest_get(f, t, 0), R_ARITH, "get(t, 0)");
    RS(b, nest_get(f, nest_get(f, t2, 0), 1), 17, "get(get(t2, 0), 1)");
    R(b, nest_multiply(f, nest_get(f, t, 0), nest_get(f, t, 0)), R_ARITH, "get * get");
    R(b, x, R_EXACT, "a parameter returned");
    R(b, x, R_EXACT, "the same parameter again");
    R(b, a, R_ARITH, "x + y");
    R(b, a, R_ARITH, "x + y again");
    R(b, k, R_EXACT, "an i32 parameter");
    R(b, c, R_EXACT, "a bool parameter");
    R(b, sc, R_EXACT, "a scalar parameter");
    R(b, e, R_EXACT, "an empty parameter");
    R(b, nest_negative(f, k), R_EXACT, "negative i32");
    R(b, nest_select(f, c, k, nest_negative(f, k)), R_EXACT, "select i32");
    R(b, nest_convert(f, sc, NEST_F32), R_EXACT, "convert of a scalar");
    /* a tuple as a result: its elements become results of their own */
    RT(b, t2, 3, (const uint8_t[]){R_ARITH, R_SUM, R_EXACT}, SHAPE(1, 17, 1), "tuple");
    R(b, nest_abs(f, sc), R_EXACT, "after the tuple");
}

static void test_results(void **state)
{
    (void)state;
    check_case("results", build_results, NULL, V_STD | V_COL | V_AOT);
}

/* ---------------------------------------------------------------------------------------------
 * Layouts: column-major parameters and results, and both mixed in one function
 * ------------------------------------------------------------------------------------------- */

static void build_mixed_layouts(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    int k = is_float_t(t) ? R_ARITH : R_EXACT;
    const nest_layout RM = NEST_ROW_MAJOR, CM = NEST_COL_MAJOR;
    nest_value xr = PL(b, t, 2, SHAPE(5, 17), G_GENERAL, RM);
    nest_value xc = PL(b, t, 2, SHAPE(5, 17), G_GENERAL, CM);
    nest_value zr = PL(b, t, 3, SHAPE(64, 65, 67), G_GENERAL, RM);
    nest_value zc = PL(b, t, 3, SHAPE(64, 65, 67), G_GENERAL, CM);
    nest_value wc = PL(b, t, 2, SHAPE(17, 33), G_EXACT, CM);
    nest_value vc = PL(b, t, 1, SHAPE(17), G_GENERAL, CM);
    nest_value ec = PL(b, t, 3, SHAPE(3, 0, 2), G_GENERAL, CM);
    nest_value s = nest_add(f, xr, xc);
    b->lay = CM;
    R(b, s, k, "row + col into col");
    R(b, xr, R_EXACT, "a row-major parameter into col");
    R(b, nest_add(f, zr, zc), k, "3-d row + col into col");
    R(b, nest_reshape(f, zc, SHAPE(2, 0, 1), 3, SHAPE(67, 64, 65)), R_EXACT, "transpose into col");
    nest_value dt = nest_dot(f, M(b, nest_convert(f, xc, t)), M(b, wc));
    if (is_float_t(t))
        RS(b, dt, 17, "dot of col-major operands into col");
    else
        R(b, dt, R_EXACT, "dot of col-major operands into col");
    R(b, nest_concat(f, 2, VALUES(xr, xc), 1), R_EXACT, "concat of both into col");
    R(b, nest_slice(f, zc, SHAPE(1, 2, 3), SHAPE(60, 65, 67), SHAPE(3, 4, 5)), R_EXACT,
      "slice of col into col");
    R(b, nest_max(f, zc, 1, SHAPE(1)), R_EXACT, "max of col over axis 1 into col");
    R(b, ec, R_EXACT, "an empty col parameter into col");
    R(b, nest_reshape(f, xc, NULL, 2, SHAPE(17, 5)), R_EXACT, "reshape of col into col");
    b->lay = RM;
    R(b, s, k, "row + col into row");
    R(b, xc, R_EXACT, "a col-major parameter into row");
    R(b, nest_broadcast(f, vc, 2, SHAPE(5, 17), 1, SHAPE(0)), R_EXACT, "broadcast of col into row");
    R(b, nest_reshape(f, xc, NULL, 1, SHAPE(85)), R_EXACT, "reshape of col into row");
    R(b, nest_reshape(f, zc, SHAPE(1, 2, 0), 2, SHAPE(65, 4288)), R_EXACT,
      "transpose and reshape of col into row");
    R(b, nest_min(f, zc, 2, SHAPE(0, 2)), R_EXACT, "min of col over axes 0,2 into row");
}

static void test_layouts(void **state)
{
    (void)state;
    /* whole families with every parameter and result column-major */
    nest_type t32 = NEST_F32, t64 = NEST_I64;
    check_case("col_binary_f32", build_binary, &t32, V_COL | V_NOROW | V_STD);
    check_case("col_chain_i64", build_chain, &t64, V_COL | V_NOROW | V_STD);
    check_case("col_broadcast_f32", build_broadcast, &t32, V_COL | V_NOROW | V_STD);
    check_case("col_reshape_i64", build_reshape, &t64, V_COL | V_NOROW | V_STD);
    check_case("col_slice_f32", build_slice, &t32, V_COL | V_NOROW | V_STD);
    check_case("col_concat_i64", build_concat, &t64, V_COL | V_NOROW | V_STD);
    dot_arg da = {NEST_F32, G_GENERAL}, di = {NEST_I32, G_GENERAL};
    check_case("col_dot_f32", build_dot, &da, V_COL | V_NOROW | V_STD);
    check_case("col_dot_expr_i32", build_dot_expr, &di, V_COL | V_NOROW | V_STD);
    red_arg ra = {NEST_F64, false}, ri = {NEST_I32, false};
    check_case("col_reduce_f64", build_reduce, &ra, V_COL | V_NOROW | V_STD);
    check_case("col_reduce_expr_i32", build_reduce_expr, &ri, V_COL | V_NOROW | V_STD);
    check_case("col_constant_f64", build_constant, &ra.t, V_COL | V_NOROW | V_STD);
    /* both layouts in one function */
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "mixed_layouts_%s", tname(NUM_TYPES[i]));
        check_case(name, build_mixed_layouts, &NUM_TYPES[i], V_STD);
    }
}

/* ---------------------------------------------------------------------------------------------
 * OpenMP on and off, one array for several arguments
 * ------------------------------------------------------------------------------------------- */

static void test_openmp(void **state)
{
    (void)state;
    nest_type f32 = NEST_F32, f64 = NEST_F64, i64 = NEST_I64;
    red_arg ra = {NEST_F32, false}, re = {NEST_F64, true};
    dot_arg da = {NEST_F32, G_GENERAL}, de = {NEST_F64, G_EXACT};
    unsigned both = V_FUSE | V_NOOMP;
    check_case("omp_binary_f32", build_binary, &f32, both);
    check_case("omp_chain_f64", build_chain, &f64, both);
    check_case("omp_reduce_f32", build_reduce, &ra, both);
    check_case("omp_reduce_exact_f64", build_reduce, &re, both);
    check_case("omp_reduce_expr_i64", build_reduce_expr, &(red_arg){NEST_I64, false}, both);
    check_case("omp_dot_f32", build_dot, &da, both);
    check_case("omp_dot_exact_f64", build_dot, &de, both);
    check_case("omp_broadcast_i64", build_broadcast, &i64, both);
}

static void test_alias(void **state)
{
    (void)state;
    nest_type f32 = NEST_F32, i32 = NEST_I32, f64 = NEST_F64;
    red_arg ra = {NEST_F32, false};
    dot_arg da = {NEST_F64, G_GENERAL};
    check_case("alias_binary_f32", build_binary, &f32, V_STD | V_ALIAS);
    check_case("alias_binary_i32", build_binary, &i32, V_STD | V_ALIAS);
    check_case("alias_chain_f64", build_chain, &f64, V_STD | V_ALIAS);
    check_case("alias_compare_f32", build_compare, &f32, V_STD | V_ALIAS);
    check_case("alias_reduce_expr_f32", build_reduce_expr, &ra, V_STD | V_ALIAS);
    check_case("alias_dot_f64", build_dot, &da, V_STD | V_ALIAS);
    check_case("alias_results", build_results, NULL, V_STD | V_ALIAS | V_AOT);
}

/* ---------------------------------------------------------------------------------------------
 * Ahead of time: the default cc and clang-14, one function per .so
 * ------------------------------------------------------------------------------------------- */

static void test_aot(void **state)
{
    (void)state;
    unsigned both = V_AOT | V_AOT_CLANG;
    nest_type f32 = NEST_F32, f64 = NEST_F64, i32 = NEST_I32, i64 = NEST_I64, b8 = NEST_BOOL;
    check_case("aot_binary_i64", build_binary, &i64, both);
    check_case("aot_binary_f32", build_binary, &f32, both);
    check_case("aot_unary_f64", build_unary, &f64, both);
    check_case("aot_convert_f32", build_convert, &f32, both);
    check_case("aot_convert_f64", build_convert, &f64, both);
    check_case("aot_convert_i64", build_convert, &i64, both);
    check_case("aot_compare_bool", build_compare, &b8, both);
    check_case("aot_constant_f32", build_constant, &f32, V_AOT_CLANG);
    check_case("aot_chain_i32", build_chain, &i32, both | V_NOFUSE);
    dot_arg da = {NEST_F32, G_GENERAL}, di = {NEST_I32, G_GENERAL};
    check_case("aot_dot_expr_f32", build_dot_expr, &da, both);
    check_case("aot_dot_i32", build_dot, &di, both);
    red_arg ra = {NEST_F64, false}, ri = {NEST_I64, false};
    check_case("aot_reduce_expr_f64", build_reduce_expr, &ra, both);
    check_case("aot_reduce_i64", build_reduce, &ri, both);
    check_case("aot_concat_f32", build_concat, &f32, both);
    check_case("aot_slice_i32", build_slice, &i32, both);
    check_case("aot_reshape_f64", build_reshape, &f64, both);
    check_case("aot_broadcast_bool", build_broadcast, &b8, both);
    check_case("aot_mixed_layouts_f32", build_mixed_layouts, &f32, both);
}

/* Several functions in one .so (and one header), each called through its entry points. */
static void test_aot_several(void **state)
{
    (void)state;
    static const nest_type i32 = NEST_I32, b8 = NEST_BOOL;
    static const red_arg ri = {NEST_I64, false};
    static const dot_arg df = {NEST_F64, G_GENERAL};
    struct {
        const char *name;
        build_fn fn;
        const void *arg;
    } set[] = {
        {"several_results", build_results, NULL},
        {"several_mixed_i32", build_mixed_layouts, &i32},
        {"several_reduce_expr", build_reduce_expr, &ri},
        {"several_constant", build_constant, &b8},
        {"several_dot_expr", build_dot_expr, &df},
    };
    enum { N = (int)countof_(set) };
    prepared pr[N];
    nest_function *fns[N];
    for (int i = 0; i < N; i++) {
        prepare(&pr[i], set[i].name, set[i].fn, set[i].arg, NEST_ROW_MAJOR, false);
        fns[i] = pr[i].b->f;
    }
    int bad = 0;
    for (size_t vi = 0; vi < countof_(VARIANTS); vi++) {
        const variant *v = &VARIANTS[vi];
        if (!v->cc)
            continue;
        void *h = build_and_load(fns, N, v);
        if (!h) {
            bad++;
            continue;
        }
        for (int i = 0; i < N; i++) {
            arrays_poison(&pr[i].got);
            g_runs++;
            bad += so_call(h, fns[i], v->what, &pr[i].args, &pr[i].got) ? verify(&pr[i], v->what)
                                                                        : 1;
        }
    }
    for (int i = 0; i < N; i++)
        release(&pr[i]);
    assert_int_equal(bad, 0);
}
/* ---------------------------------------------------------------------------------------------
 * The generated C compiles without warnings; so does its header, as C and as C++
 * ------------------------------------------------------------------------------------------- */

/* The broad set: one function per family and several element types. */

static int emit_set(bctx **out, int cap)
{
    static const nest_type f32 = NEST_F32, f64 = NEST_F64, i32 = NEST_I32, i64 = NEST_I64,
                           b8 = NEST_BOOL;
    static const dot_arg df = {NEST_F32, G_GENERAL}, di = {NEST_I64, G_GENERAL};
    static const red_arg rf = {NEST_F64, false}, ri = {NEST_I32, false};
    const struct {
        const char *name;
        build_fn fn;
        const void *arg;
    } set[] = {
        {"e_binary_f32", build_binary, &f32},   {"e_binary_i64", build_binary, &i64},
        {"e_unary_f64", build_unary, &f64},     {"e_unary_i32", build_unary, &i32},
        {"e_compare_f32", build_compare, &f32}, {"e_compare_bool", build_compare, &b8},
        {"e_convert_f32", build_convert, &f32}, {"e_convert_f64", build_convert, &f64},
        {"e_convert_i32", build_convert, &i32}, {"e_convert_i64", build_convert, &i64},
        {"e_convert_bool", build_convert, &b8}, {"e_chain_i32", build_chain, &i32},
        {"e_chain_f32", build_chain, &f32},     {"e_constant_f32", build_constant, &f32},
        {"e_constant_f64", build_constant, &f64}, {"e_constant_i64", build_constant, &i64},
        {"e_constant_i32", build_constant, &i32}, {"e_constant_bool", build_constant, &b8},
        {"e_dot_f32", build_dot, &df},          {"e_dot_i64", build_dot, &di},
        {"e_dot_expr_f32", build_dot_expr, &df}, {"e_broadcast_bool", build_broadcast, &b8},
        {"e_broadcast_f64", build_broadcast, &f64}, {"e_reshape_i32", build_reshape, &i32},
        {"e_slice_f64", build_slice, &f64},     {"e_concat_f32", build_concat, &f32},
        {"e_concat_bool", build_concat, &b8},   {"e_reduce_f64", build_reduce, &rf},
        {"e_reduce_i32", build_reduce, &ri},    {"e_reduce_expr_f64", build_reduce_expr, &rf},
        {"e_results", build_results, NULL},     {"e_mixed_i64", build_mixed_layouts, &i64},
        {"e_no_params", build_no_params, NULL}, {"e_names", build_emit_names, NULL},
    };
    int n = 0;
    for (size_t i = 0; i < countof_(set) && n < cap; i++)
        out[n++] = build(set[i].name, set[i].fn, set[i].arg, NEST_ROW_MAJOR, false);
    return n;
}

static void test_emit_warnings(void **state)
{
    (void)state;
    if (getenv("NEST_DIFF_ONLY"))
        return;
    bctx *set[64];
    nest_function *fns[64];
    int n = emit_set(set, 64);
    for (int i = 0; i < n; i++)
        fns[i] = set[i]->f;
    static const char *const warn = "-std=c99 -Wall -Wextra -pedantic -Werror";
    bool ok = true;
    for (int fuse = 1; fuse >= 0; fuse--) {
        nest_options o;
        nest_options_init(&o);
        o.fuse = fuse;
        char *c = nest_emit(fns, n, NEST_EMIT_C, &o), *h = nest_emit(fns, n, NEST_EMIT_H, &o);
        if (!c || !h)
            print_error("nest_emit: %s\n", nest_errmsg(fns[0]));
        assert_true(c && h);
        char cpath[256], hpath[256], cmd[1200];
        temp_path(cpath, sizeof cpath, fuse ? "emit_fused" : "emit_unfused", ".c");
        temp_path(hpath, sizeof hpath, fuse ? "emit_fused" : "emit_unfused", ".h");
        assert_true(write_file(cpath, c) && write_file(hpath, h));
        const char *ccs[] = {"gcc", "clang-14"};
        for (size_t k = 0; k < countof_(ccs); k++) {
            snprintf(cmd, sizeof cmd, "%s %s -c %s -o %s.o", ccs[k], warn, cpath, cpath);
            ok &= run_cmd(cmd);
            /* optimized and with OpenMP only for the fused code: it has the pragmas worth it */
            if (fuse) {
                snprintf(cmd, sizeof cmd, "%s %s -O3 -fopenmp -c %s -o %s.o", ccs[k], warn, cpath,
                         cpath);
                ok &= run_cmd(cmd);
            }
            snprintf(cmd, sizeof cmd, "%s %s -fsyntax-only -x c %s", ccs[k], warn, hpath);
            ok &= run_cmd(cmd);
        }
        snprintf(cmd, sizeof cmd, "g++ -Wall -Wextra -pedantic -Werror -fsyntax-only -x c++ %s",
                 hpath);
        ok &= run_cmd(cmd);
        /* the header in the compilers' default (GNU) modes, where linux and unix are macros */
        snprintf(cmd, sizeof cmd, "gcc -Wall -Wextra -Werror -fsyntax-only -x c %s", hpath);
        ok &= run_cmd(cmd);
        snprintf(cmd, sizeof cmd, "clang-14 -std=gnu99 -Wall -Wextra -Werror -fsyntax-only -x c %s",
                 hpath);
        ok &= run_cmd(cmd);
        /* the header declares what the C defines: both in one translation unit */
        char both[256];
        temp_path(both, sizeof both, "emit_both", ".c");
        char *inc = malloc(strlen(hpath) + strlen(cpath) + 64);
        assert_non_null(inc);
        sprintf(inc, "#include \"%s\"\n#include \"%s\"\n", hpath, cpath);
        assert_true(write_file(both, inc));
        free(inc);
        snprintf(cmd, sizeof cmd, "gcc %s -Wmissing-prototypes -fsyntax-only %s", warn, both);
        ok &= run_cmd(cmd);
        remove(both);
        char obj[300];
        snprintf(obj, sizeof obj, "%s.o", cpath);
        remove(obj);
        remove(cpath);
        remove(hpath);
        nest_string_free(c);
        nest_string_free(h);
    }
    for (int i = 0; i < n; i++)
        bctx_free(set[i]);
    assert_true(ok);
}

/* ---------------------------------------------------------------------------------------------
 * The suite
 * ------------------------------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_compare_select),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_no_params),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_tile),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_results),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_openmp),
        cmocka_unit_test(test_alias),
        cmocka_unit_test(test_aot),
        cmocka_unit_test(test_aot_several),
        cmocka_unit_test(test_emit_warnings),
    };
    return run_diff_tests(tests);
}
