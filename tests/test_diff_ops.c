/* test_diff_ops.c - differential tests of the op set of real models: compiled code (the JIT with
 * fusion on and off, ahead of time with cc and clang) against the reference interpreter, through
 * the harness of diffcase.c, which says how results are compared. Shapes cover every rank up to
 * 3, extents of 1, primes, empty axes, and sizes large enough for the parallel loops; every op
 * runs on each element type it takes.
 *
 * NEST_DIFF_VERBOSE=1, NEST_DIFF_TEST=pattern, NEST_DIFF_ONLY=text and NEST_DIFF_DUMP=case work
 * as in test_diff.c.
 */
#include "diffcase.h"

static const nest_type FLOAT_TYPES[] = {NEST_F32, NEST_F64};
static const nest_type NUM_TYPES[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64};
static const nest_type ALL_TYPES[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_BOOL};

typedef nest_value (*unary_fn)(nest_function *, nest_value);
typedef nest_value (*binary_fn)(nest_function *, nest_value, nest_value);

/* ---------------------------------------------------------------------------------------------
 * Element-wise math, logic and comparisons
 * ------------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    unary_fn fn;
    int kind;
} MATH[] = {
    {"sin", nest_sin, R_TRANS},         {"cos", nest_cos, R_TRANS},
    {"tan", nest_tan, R_TRANS},         {"asin", nest_asin, R_TRANS},
    {"acos", nest_acos, R_TRANS},       {"atan", nest_atan, R_TRANS},
    {"sinh", nest_sinh, R_TRANS},       {"cosh", nest_cosh, R_TRANS},
    {"erf", nest_erf, R_TRANS},         {"sigmoid", nest_sigmoid, R_TRANS},
    {"floor", nest_floor, R_EXACT},     {"ceiling", nest_ceiling, R_EXACT},
    {"sign", nest_sign, R_EXACT},       {"relu", nest_relu, R_EXACT},
};

static void build_math(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, t, sh, G_EXTREME);
        for (size_t o = 0; o < countof_(MATH); o++)
            R(b, MATH[o].fn(b->f, x), MATH[o].kind, "%s %s", MATH[o].name, SHS(t, sh));
    }
    /* a chain: each op feeds the next, fused into one loop */
    nest_function *f = b->f;
    const shp *sh = &SHAPES[7];
    nest_value x = PS(b, t, sh, G_GENERAL);
    nest_value c = nest_relu(f, nest_sin(f, nest_floor(f, nest_multiply(f, x, x))));
    R(b, nest_add(f, c, nest_sigmoid(f, nest_atan(f, x))), R_TRANS, "chain %s", SHS(t, sh));
}

static void test_math(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(FLOAT_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "math_%s", tname(FLOAT_TYPES[i]));
        check_case(name, build_math, &FLOAT_TYPES[i], V_STD | V_AOT | V_AOT_CLANG);
    }
}

/* not, and, or on bool; not_equal on every type; less_eq and greater_eq on numbers. */
static void build_logic(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, t, sh, G_SMALL), y = PS(b, t, sh, G_SMALL);
        nest_value ne = nest_not_equal(f, x, y);
        R(b, ne, R_EXACT, "not_equal %s", SHS(t, sh));
        R(b, nest_not_equal(f, x, x), R_EXACT, "not_equal(x, x) %s", SHS(t, sh));
        nest_value c = PS(b, NEST_BOOL, sh, G_BOOL);
        R(b, nest_and(f, ne, c), R_EXACT, "and %s", SHS(t, sh));
        R(b, nest_or(f, nest_not(f, ne), c), R_EXACT, "or(not) %s", SHS(t, sh));
        R(b, nest_and(f, c, c), R_EXACT, "and(c, c) %s", SHS(t, sh));
        if (t == NEST_BOOL)
            continue;
        nest_value le = nest_less_eq(f, x, y), ge = nest_greater_eq(f, x, y);
        R(b, le, R_EXACT, "less_eq %s", SHS(t, sh));
        R(b, ge, R_EXACT, "greater_eq %s", SHS(t, sh));
        R(b, nest_less_eq(f, y, y), R_EXACT, "less_eq(y, y) %s", SHS(t, sh));
        R(b, nest_greater_eq(f, x, x), R_EXACT, "greater_eq(x, x) %s", SHS(t, sh));
        R(b, nest_select(f, nest_or(f, le, nest_not(f, ge)), x, y), R_EXACT,
          "select(or(less_eq, not(greater_eq))) %s", SHS(t, sh));
    }
}

static void test_logic(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "logic_%s", tname(ALL_TYPES[i]));
        check_case(name, build_logic, &ALL_TYPES[i], V_STD);
    }
}

/* ---------------------------------------------------------------------------------------------
 * product, argmax, argmin
 * ------------------------------------------------------------------------------------------- */

typedef struct red_form {
    shp in;
    int naxes;
    int64_t axes[3];
} red_form;

/* Products over at most 67 terms: on G_SMALL inputs (0, +-0.5, +-1, +-2, infinities, NaN) every
 * order of the products gives the same, exact result. */
static const red_form PRODS[] = {
    {{0, {0}}, 0, {0}},          {{1, {1}}, 1, {0}},          {{3, {1, 1, 1}}, 2, {0, 2}},
    {{1, {0}}, 1, {0}},          {{3, {3, 0, 2}}, 1, {1}},    {{3, {3, 0, 2}}, 2, {2, 0}},
    {{1, {7}}, 1, {0}},          {{1, {33}}, 1, {0}},         {{2, {5, 17}}, 1, {0}},
    {{2, {5, 17}}, 1, {1}},      {{2, {5, 17}}, 2, {0, 1}},   {{3, {64, 65, 67}}, 1, {0}},
    {{3, {64, 65, 67}}, 1, {1}}, {{3, {64, 65, 67}}, 1, {2}},
};

/* argmax and argmin: every axis of every shape (empty axes only where the result is empty). */
static const struct {
    shp in;
    int axis;
} ARGS_[] = {
    {{1, {1}}, 0},          {{3, {1, 1, 1}}, 1},    {{3, {3, 0, 2}}, 0},    {{3, {3, 0, 2}}, 2},
    {{1, {7}}, 0},          {{1, {33}}, 0},         {{2, {5, 17}}, 0},      {{2, {5, 17}}, 1},
    {{1, {1000003}}, 0},    {{3, {64, 65, 67}}, 0}, {{3, {64, 65, 67}}, 1}, {{3, {64, 65, 67}}, 2},
    {{2, {1024, 300}}, 1},  {{2, {3, 1}}, 1},
};

static void build_product(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    for (size_t i = 0; i < countof_(PRODS); i++) {
        const red_form *c = &PRODS[i];
        nest_value x = PS(b, t, &c->in, G_SMALL);
        R(b, nest_product(f, x, c->naxes, c->axes), R_EXACT, "product of %s (%d)",
          SHS(t, &c->in), (int)i);
        if (is_float_t(t))
            continue;
        /* integers wrap the same in every order */
        nest_value y = PS(b, t, &c->in, G_GENERAL);
        R(b, nest_product(f, y, c->naxes, c->axes), R_EXACT, "product (wrapping) of %s (%d)",
          SHS(t, &c->in), (int)i);
    }
    /* a product of an expression, and one joined to a sum of the same space */
    shp m = {2, {5, 17}};
    nest_value x = PS(b, t, &m, G_SMALL), y = PS(b, t, &m, G_SMALL);
    R(b, nest_product(f, nest_multiply(f, x, y), 1, SHAPE(1)), R_EXACT, "product(x * y)");
    R(b, nest_product(f, nest_maximum(f, x, y), 1, SHAPE(0)), R_EXACT, "product(maximum)");
    R(b, nest_sum(f, nest_negative(f, x), 1, SHAPE(1)), R_EXACT, "sum beside the product");
}

static void build_arg(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    for (size_t i = 0; i < countof_(ARGS_); i++) {
        const shp *in = &ARGS_[i].in;
        int axis = ARGS_[i].axis;
        nest_value x = PS(b, t, in, G_SMALL), y = PS(b, t, in, G_EXTREME);
        R(b, nest_argmax(f, x, axis), R_EXACT, "argmax %s axis %d", SHS(t, in), axis);
        R(b, nest_argmin(f, x, axis), R_EXACT, "argmin %s axis %d", SHS(t, in), axis);
        R(b, nest_argmax(f, y, axis), R_EXACT, "argmax of extremes %s axis %d", SHS(t, in), axis);
    }
    /* of an expression (fused into the search), beside a max over the same axis, of a
     * transpose, and feeding an element-wise op */
    shp m = {2, {5, 17}};
    nest_value x = PS(b, t, &m, G_SMALL), y = PS(b, t, &m, G_SMALL);
    R(b, nest_argmax(f, nest_subtract(f, x, y), 1), R_EXACT, "argmax(x - y)");
    R(b, nest_max(f, x, 1, SHAPE(1)), R_EXACT, "max beside argmax");
    R(b, nest_argmax(f, x, 1), R_EXACT, "argmax beside max");
    nest_value xt = nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(17, 5));
    R(b, nest_argmin(f, xt, 0), R_EXACT, "argmin(transpose) axis 0");
    nest_value am = nest_argmax(f, y, 0);
    R(b, nest_add(f, am, am), R_EXACT, "argmax + argmax");
    if (is_float_t(t)) {
        nest_value e = nest_exp(f, nest_multiply(f, x, y));
        R(b, nest_argmax(f, nest_divide(f, e, nest_broadcast(f, nest_sum(f, e, 1, SHAPE(1)), 2,
                                                             SHAPE(5, 17), 1, SHAPE(1))),
                         1),
          R_EXACT, "argmax of a normalized row");
    }
}

static void test_reductions(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[32];
        snprintf(name, sizeof name, "product_%s", tname(NUM_TYPES[i]));
        check_case(name, build_product, &NUM_TYPES[i], V_STD);
        snprintf(name, sizeof name, "argmax_%s", tname(NUM_TYPES[i]));
        check_case(name, build_arg, &NUM_TYPES[i], V_STD | (i == 0 ? V_AOT | V_COL : 0));
    }
}

/* ---------------------------------------------------------------------------------------------
 * Anchors: compiled results against values worked out by hand
 * ------------------------------------------------------------------------------------------- */

static void test_anchors(void **state)
{
    (void)state;
    /* argmax and argmin: ties to the lowest index, the first NaN wins, infinities */
    nest_function *f = nest_function_new("anchor_arg");
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(4, 4), NEST_ROW_MAJOR);
    assert_ok(f, nest_return(f, 4,
                             VALUES(nest_argmax(f, x, 1), nest_argmin(f, x, 1),
                                    nest_argmax(f, x, 0), nest_argmin(f, x, 0)),
                             NULL));
    float xv[16] = {1, 3, 3, 2, NAN, 1, NAN, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                    5, -1, INFINITY, NAN};
    anchor(f, (void *[]){xv},
           (const void *[]){(int64_t[]){1, 0, 0, 3}, (int64_t[]){0, 0, 0, 3},
                            (int64_t[]){1, 0, 1, 3}, (int64_t[]){1, 2, 1, 3}});
    nest_function_free(f);

    /* element-wise: sign, relu, floor, ceiling, sigmoid and the logic ops on exact cases */
    f = nest_function_new("anchor_ew");
    nest_value y = nest_parameter(f, "y", NEST_F64, 1, SHAPE(6), NEST_ROW_MAJOR);
    nest_value p = nest_parameter(f, "p", NEST_BOOL, 1, SHAPE(4), NEST_ROW_MAJOR);
    nest_value q = nest_parameter(f, "q", NEST_BOOL, 1, SHAPE(4), NEST_ROW_MAJOR);
    nest_value z = nest_parameter(f, "z", NEST_F32, 1, SHAPE(4), NEST_ROW_MAJOR);
    assert_ok(f, nest_return(f, 8,
                             VALUES(nest_sign(f, y), nest_relu(f, y), nest_floor(f, y),
                                    nest_ceiling(f, y), nest_sigmoid(f, z), nest_and(f, p, q),
                                    nest_or(f, p, nest_not(f, q)),
                                    nest_product(f, y, 1, SHAPE(0))),
                             NULL));
    double yv[6] = {-2.5, 0, NAN, 1.5, -INFINITY, INFINITY};
    uint8_t pv[4] = {0, 0, 1, 1}, qv[4] = {0, 1, 0, 1};
    float zv[4] = {0, -INFINITY, INFINITY, NAN};
    anchor(f, (void *[]){yv, pv, qv, zv},
           (const void *[]){(double[]){-1, 0, NAN, 1, -1, 1}, (double[]){0, 0, NAN, 1.5, 0, INFINITY},
                            (double[]){-3, 0, NAN, 1, -INFINITY, INFINITY},
                            (double[]){-2, 0, NAN, 2, -INFINITY, INFINITY},
                            (float[]){0.5f, 0, 1, NAN},
                            (uint8_t[]){0, 0, 0, 1}, (uint8_t[]){1, 0, 1, 1}, (double[]){NAN}});
    nest_function_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_math),
        cmocka_unit_test(test_logic),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_anchors),
    };
    const char *filter = getenv("NEST_DIFF_TEST");
    if (filter)
        cmocka_set_test_filter(filter);
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    if (g_verbose)
        fprintf(stderr, "%d cases, %d compiled runs, %lld result arrays (%lld elements) compared\n",
                g_cases, g_runs, (long long)g_results, (long long)g_elements);
    return rc;
}
