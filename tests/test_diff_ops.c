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
 * Structural ops: pad, reverse, replace_slice, one_hot, gather
 * ------------------------------------------------------------------------------------------- */

typedef struct pad_form {
    shp in;
    int64_t below[3], above[3], interior[3];
} pad_form;

static const pad_form PADS[] = {
    {{0, {0}}, {0}, {0}, {0}},
    {{1, {1}}, {2}, {3}, {0}},
    {{1, {7}}, {2}, {3}, {0}},
    {{1, {7}}, {-2}, {-1}, {0}},
    {{1, {7}}, {0}, {0}, {2}},
    {{1, {7}}, {-3}, {2}, {1}},
    {{1, {7}}, {-9}, {4}, {0}},
    {{1, {33}}, {-10}, {-23}, {0}},
    {{1, {0}}, {2}, {1}, {3}},
    {{2, {5, 17}}, {1, 2}, {3, 0}, {0, 0}},
    {{2, {5, 17}}, {-1, 0}, {0, -16}, {0, 0}},
    {{2, {5, 17}}, {0, 1}, {2, -3}, {1, 0}},
    {{2, {5, 17}}, {1, -1}, {1, 1}, {0, 2}},
    {{3, {1, 1, 1}}, {1, 0, 1}, {0, 1, 1}, {0, 0, 0}},
    {{3, {3, 0, 2}}, {1, 1, 1}, {0, 2, 0}, {0, 0, 0}},
    {{3, {64, 65, 67}}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}},
    {{3, {64, 65, 67}}, {0, -2, 3}, {-1, 0, 5}, {0, 0, 0}},
};

static void build_pad(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    bool num = t != NEST_BOOL;
    for (size_t i = 0; i < countof_(PADS); i++) {
        const pad_form *c = &PADS[i];
        nest_value x = PS(b, t, &c->in, G_GENERAL), v = P(b, t, 0, NULL, G_GENERAL);
        nest_value p = nest_pad(f, x, v, c->below, c->above, c->interior);
        R(b, p, R_EXACT, "pad %s (%d)", SHS(t, &c->in), (int)i);
        if (!num)
            continue;
        /* consumed by an element-wise op and by a reduction, as a view */
        nest_value y = PS(b, t, &c->in, G_GENERAL);
        nest_value q = nest_pad(f, y, v, c->below, c->above, c->interior);
        R(b, nest_subtract(f, p, q), is_float_t(t) ? R_ARITH : R_EXACT, "pad - pad %s (%d)",
          SHS(t, &c->in), (int)i);
        if (c->in.rank > 0)
            R(b, nest_max(f, q, 1, SHAPE(0)), R_EXACT, "max(pad) %s (%d)", SHS(t, &c->in), (int)i);
    }
    if (!num)
        return;
    /* the padding value computed; a pad of an expression and of a concat; a pad of a pad */
    shp m = {2, {5, 17}};
    nest_value x = PS(b, t, &m, G_GENERAL), y = PS(b, t, &m, G_GENERAL), s = P(b, t, 0, NULL, G_GENERAL);
    nest_value cat = nest_concat(f, 2, VALUES(x, y), 1);
    nest_value p1 = nest_pad(f, nest_maximum(f, x, y), nest_negative(f, s), SHAPE(2, 1), SHAPE(0, 3),
                             NULL);
    R(b, p1, R_EXACT, "pad(maximum) with a computed value");
    R(b, nest_pad(f, cat, s, SHAPE(1, -3), SHAPE(-2, 4), NULL), R_EXACT, "pad(concat)");
    R(b, nest_pad(f, cat, s, SHAPE(0, 1), SHAPE(0, 0), SHAPE(1, 1)), R_EXACT,
      "pad(concat) with interior padding");
    R(b, nest_pad(f, p1, s, SHAPE(-1, 1), SHAPE(1, -2), SHAPE(2, 0)), R_EXACT, "pad(pad)");
}

static void build_reverse(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    for (int s = 0; s < NSHAPES; s++) {
        const shp *sh = &SHAPES[s];
        nest_value x = PS(b, t, sh, G_GENERAL);
        for (uint32_t mask = 0; mask < (1u << sh->rank); mask++) {
            int64_t axes[4];
            int n = 0;
            for (int k = 0; k < sh->rank; k++)
                if (mask & (1u << k))
                    axes[n++] = k;
            R(b, nest_reverse(f, x, n, axes), R_EXACT, "reverse %s mask %u", SHS(t, sh), mask);
        }
    }
    shp m = {2, {5, 17}}, v = {1, {7}};
    nest_value x = PS(b, t, &m, G_GENERAL), y = PS(b, t, &m, G_GENERAL), z = PS(b, t, &v, G_GENERAL);
    /* a reverse of concats, along their axis and across it, of a transpose, of a strided slice */
    nest_value cat = nest_concat(f, 3, VALUES(x, y, x), 1);
    R(b, nest_reverse(f, cat, 1, SHAPE(1)), R_EXACT, "reverse(concat) along");
    R(b, nest_reverse(f, cat, 2, SHAPE(0, 1)), R_EXACT, "reverse(concat) both");
    nest_value c2 = nest_concat(f, 2, VALUES(nest_concat(f, 2, VALUES(z, z), 0), z), 0);
    R(b, nest_reverse(f, c2, 1, SHAPE(0)), R_EXACT, "reverse(nested concat)");
    R(b, nest_reverse(f, nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(17, 5)), 1, SHAPE(0)), R_EXACT,
      "reverse(transpose)");
    R(b, nest_reverse(f, nest_slice(f, y, SHAPE(1, 2), SHAPE(5, 17), SHAPE(2, 3)), 2, SHAPE(0, 1)),
      R_EXACT, "reverse(strided slice)");
    if (t != NEST_BOOL) {
        R(b, nest_add(f, x, nest_reverse(f, y, 1, SHAPE(1))), is_float_t(t) ? R_ARITH : R_EXACT,
          "x + reverse(y)");
        R(b, nest_max(f, nest_reverse(f, cat, 1, SHAPE(1)), 1, SHAPE(1)), R_EXACT,
          "max(reverse(concat))");
    }
}

typedef struct rs_form {
    shp in;
    int64_t lower[3], upper[3], strides[3];
} rs_form;

static const rs_form REPLACES[] = {
    {{0, {0}}, {0}, {0}, {0}},
    {{1, {1}}, {0}, {1}, {1}},
    {{1, {7}}, {2}, {5}, {1}},
    {{1, {7}}, {0}, {7}, {3}},
    {{1, {7}}, {3}, {3}, {1}},
    {{1, {33}}, {1}, {32}, {4}},
    {{2, {5, 17}}, {1, 2}, {4, 16}, {1, 1}},
    {{2, {5, 17}}, {0, 0}, {5, 17}, {2, 5}},
    {{2, {5, 17}}, {4, 0}, {5, 1}, {1, 1}},
    {{3, {3, 0, 2}}, {1, 0, 0}, {2, 0, 2}, {1, 1, 1}},
    {{3, {1, 1, 1}}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}},
    {{3, {64, 65, 67}}, {1, 2, 3}, {63, 60, 67}, {1, 1, 1}},
    {{3, {64, 65, 67}}, {0, 1, 2}, {64, 65, 60}, {3, 1, 2}},
};

static void build_replace_slice(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    for (size_t i = 0; i < countof_(REPLACES); i++) {
        const rs_form *c = &REPLACES[i];
        int64_t box[3];
        for (int k = 0; k < c->in.rank; k++)
            box[k] = (c->upper[k] - c->lower[k] + c->strides[k] - 1) / c->strides[k];
        nest_value x = PS(b, t, &c->in, G_GENERAL), y = P(b, t, c->in.rank, box, G_GENERAL);
        R(b, nest_replace_slice(f, x, y, c->lower, c->upper, c->strides), R_EXACT,
          "replace_slice %s (%d)", SHS(t, &c->in), (int)i);
    }
    if (t == NEST_BOOL)
        return;
    /* of expressions, consumed by an element-wise op */
    shp m = {2, {5, 17}};
    nest_value x = PS(b, t, &m, G_GENERAL), y = P(b, t, 2, SHAPE(2, 3), G_GENERAL);
    nest_value r = nest_replace_slice(f, nest_negative(f, x), nest_abs(f, y), SHAPE(1, 4),
                                      SHAPE(3, 7), NULL);
    R(b, nest_add(f, r, x), is_float_t(t) ? R_ARITH : R_EXACT, "replace_slice(-x, |y|) + x");
    nest_value r2 = nest_replace_slice(f, x, y, SHAPE(0, 1), SHAPE(4, 6), SHAPE(2, 2));
    R(b, nest_max(f, r2, 1, SHAPE(1)), R_EXACT, "max(strided replace_slice)");
}

static void build_one_hot(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    static const struct {
        shp in;
        int64_t depth;
        int axis;
    } forms[] = {
        {{0, {0}}, 4, 0},   {{1, {7}}, 3, 1},       {{1, {7}}, 3, 0},      {{1, {33}}, 1, 1},
        {{1, {0}}, 5, 0},   {{2, {5, 17}}, 3, 2},   {{2, {5, 17}}, 2, 1},  {{1, {1000}}, 513, 1},
        {{1, {5}}, 0, 1},
    };
    for (size_t i = 0; i < countof_(forms); i++) {
        const shp *in = &forms[i].in;
        int axis = forms[i].axis;
        int64_t shape[4];
        for (int k = 0, j = 0; k <= in->rank; k++)
            shape[k] = k == axis ? forms[i].depth : in->d[j++];
        nest_value x = PS(b, t, in, G_SMALL);
        R(b, nest_one_hot(f, x, in->rank + 1, shape, axis), R_EXACT, "one_hot %s depth %lld axis %d",
          SHS(t, in), (long long)forms[i].depth, axis);
    }
    /* of an argmax: the one-hot of each row's largest element */
    shp m = {2, {5, 17}};
    nest_value x = PS(b, t, &m, G_SMALL);
    nest_value am = nest_argmax(f, x, 1);
    R(b, nest_one_hot(f, am, 2, SHAPE(5, 17), 1), R_EXACT, "one_hot(argmax)");
}

static void build_gather(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    static const struct {
        shp table, idx;
        int axis;
    } forms[] = {
        {{1, {7}}, {0, {0}}, 0},          {{1, {7}}, {1, {9}}, 0},
        {{2, {5, 17}}, {1, {33}}, 0},     {{2, {5, 17}}, {2, {3, 4}}, 1},
        {{3, {3, 4, 5}}, {2, {2, 3}}, 1}, {{3, {3, 4, 5}}, {1, {7}}, 2},
        {{3, {3, 0, 2}}, {1, {4}}, 0},    {{2, {0, 3}}, {1, {0}}, 0},
        {{2, {1000, 64}}, {1, {513}}, 0}, {{1, {1}}, {3, {2, 2, 2}}, 0},
    };
    for (size_t i = 0; i < countof_(forms); i++) {
        nest_value x = PS(b, t, &forms[i].table, G_GENERAL);
        for (int it = 0; it < 2; it++) {
            nest_type ti = it ? NEST_I64 : NEST_I32;
            nest_value ix = PS(b, ti, &forms[i].idx, G_SMALL);
            R(b, nest_gather(f, x, ix, forms[i].axis), R_EXACT, "gather %s by %s axis %d",
              SHS(t, &forms[i].table), SHS(ti, &forms[i].idx), forms[i].axis);
        }
    }
    shp m = {2, {5, 17}}, v = {1, {6}};
    nest_value x = PS(b, t, &m, G_GENERAL), y = PS(b, t, &m, G_GENERAL);
    nest_value i6 = PS(b, NEST_I64, &v, G_SMALL);
    /* of a concat along the axis (the operand is stored first) and across it; of a transpose;
     * a gather of a gather; indices computed */
    nest_value cat = nest_concat(f, 2, VALUES(x, y), 0);
    R(b, nest_gather(f, cat, i6, 0), R_EXACT, "gather(concat) along");
    R(b, nest_gather(f, nest_concat(f, 2, VALUES(x, y), 1), i6, 0), R_EXACT, "gather(concat) across");
    R(b, nest_gather(f, nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(17, 5)), i6, 1), R_EXACT,
      "gather(transpose) axis 1");
    R(b, nest_gather(f, nest_gather(f, x, i6, 1), i6, 0), R_EXACT, "gather(gather)");
    nest_value idx2 = nest_add(f, i6, nest_reverse(f, i6, 1, SHAPE(0)));
    R(b, nest_gather(f, x, idx2, 1), R_EXACT, "gather by computed indices");
    if (t != NEST_BOOL && t != NEST_I32 && t != NEST_I64) {
        nest_value e = nest_exp(f, x);
        R(b, nest_gather(f, e, i6, 1), R_TRANS, "gather(exp(x))");
        R(b, nest_add(f, nest_gather(f, x, i6, 1), nest_gather(f, y, i6, 1)), R_ARITH,
          "gather + gather");
    }
}

/* scatter_add: each update added where gather would take it (repeated indices add up, in the
 * updates' order); float results are sums of up to (indices + 1) terms */
static void build_scatter_add(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    static const struct {
        shp x, idx;
        int axis;
    } forms[] = {
        {{1, {7}}, {0, {0}}, 0},          {{1, {7}}, {1, {9}}, 0},
        {{2, {5, 17}}, {1, {33}}, 0},     {{2, {5, 17}}, {2, {3, 4}}, 1},
        {{3, {3, 4, 5}}, {2, {2, 3}}, 1}, {{3, {3, 4, 5}}, {1, {7}}, 2},
        {{3, {3, 0, 2}}, {1, {0}}, 1},    {{2, {0, 3}}, {1, {0}}, 0},
        {{2, {1000, 64}}, {1, {513}}, 0}, {{1, {1}}, {3, {2, 2, 2}}, 0},
        {{3, {8, 50, 1024}}, {1, {40}}, 1}, /* parallel over the first axis */
    };
    for (size_t i = 0; i < countof_(forms); i++) {
        int axis = forms[i].axis;
        const shp *xs = &forms[i].x, *is = &forms[i].idx;
        shp us = {0, {0}};
        for (int k = 0; k < xs->rank; k++)
            if (k == axis)
                for (int j = 0; j < is->rank; j++)
                    us.d[us.rank++] = is->d[j];
            else
                us.d[us.rank++] = xs->d[k];
        nest_value x = PS(b, t, xs, G_GENERAL), u = PS(b, t, &us, G_GENERAL);
        nest_type ti = i % 2 ? NEST_I64 : NEST_I32;
        nest_value ix = PS(b, ti, is, G_SMALL);
        RS(b, nest_scatter_add(f, M(b, x), ix, M(b, u), axis), shp_count(is) + 1,
           "scatter_add %s by %s axis %d", SHS(t, xs), SHS(ti, is), axis);
    }
    shp m = {2, {5, 17}}, v = {1, {6}}, h = {2, {6, 17}};
    nest_value x = PS(b, t, &m, G_GENERAL), y = PS(b, t, &h, G_GENERAL);
    nest_value i6 = PS(b, NEST_I64, &v, G_SMALL);
    /* updates computed, gathered, concatenated (stored first); indices computed */
    RS(b, nest_scatter_add(f, M(b, x), i6, M(b, nest_multiply(f, y, y)), 0), 7,
       "scatter_add of y * y");
    RS(b, nest_scatter_add(f, M(b, x), i6, M(b, nest_gather(f, x, i6, 0)), 0), 7,
       "scatter_add of its own gather");
    nest_value cat = nest_concat(f, 2, VALUES(nest_slice(f, y, SHAPE(0, 0), SHAPE(6, 9), NULL),
                                              nest_slice(f, y, SHAPE(0, 9), SHAPE(6, 17), NULL)),
                                 1);
    RS(b, nest_scatter_add(f, M(b, x), i6, M(b, cat), 0), 7, "scatter_add of a concat");
    nest_value idx2 = nest_concat(f, 2, VALUES(nest_slice(f, i6, SHAPE(3), SHAPE(6), NULL),
                                               nest_slice(f, i6, SHAPE(0), SHAPE(3), NULL)),
                                  0);
    RS(b, nest_scatter_add(f, M(b, x), idx2, M(b, y), 0), 7, "scatter_add by computed indices");
    /* a scatter_add read by element-wise ops and a reduction */
    nest_value sa = nest_scatter_add(f, M(b, x), i6, M(b, y), 0);
    RS(b, nest_sum(f, M(b, nest_add(f, sa, x)), 1, SHAPE(1)), 17 * 8, "sum(scatter_add + x)");
}

static void test_structural(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(ALL_TYPES); i++) {
        nest_type t = ALL_TYPES[i];
        char name[40];
        unsigned more = i == 0 ? V_AOT | V_AOT_CLANG | V_COL | V_NOOMP : 0;
        snprintf(name, sizeof name, "pad_%s", tname(t));
        check_case(name, build_pad, &ALL_TYPES[i], V_STD | more);
        snprintf(name, sizeof name, "reverse_%s", tname(t));
        check_case(name, build_reverse, &ALL_TYPES[i], V_STD | more);
        snprintf(name, sizeof name, "replace_slice_%s", tname(t));
        check_case(name, build_replace_slice, &ALL_TYPES[i], V_STD | more);
        snprintf(name, sizeof name, "gather_%s", tname(t));
        check_case(name, build_gather, &ALL_TYPES[i], V_STD | more);
        if (t != NEST_BOOL) {
            snprintf(name, sizeof name, "one_hot_%s", tname(t));
            check_case(name, build_one_hot, &ALL_TYPES[i], V_STD | more);
            snprintf(name, sizeof name, "scatter_add_%s", tname(t));
            check_case(name, build_scatter_add, &ALL_TYPES[i], V_STD | more);
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * softmax and batch_dot
 * ------------------------------------------------------------------------------------------- */

static void build_softmax(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    static const struct {
        shp in;
        int naxes;
        int64_t axes[3];
    } forms[] = {
        {{1, {1}}, 1, {0}},           {{1, {7}}, 1, {0}},            {{1, {0}}, 1, {0}},
        {{2, {5, 17}}, 1, {1}},       {{2, {5, 17}}, 1, {0}},        {{2, {5, 17}}, 2, {0, 1}},
        {{2, {5, 17}}, 0, {0}},       {{3, {3, 0, 2}}, 1, {2}},      {{3, {1, 1, 1}}, 2, {0, 2}},
        {{3, {64, 65, 67}}, 1, {2}},  {{3, {64, 65, 67}}, 1, {1}},   {{3, {64, 65, 67}}, 2, {0, 2}},
        {{2, {3, 1000003}}, 1, {1}},  {{2, {512, 512}}, 1, {1}},
    };
    for (size_t i = 0; i < countof_(forms); i++) {
        int64_t n = 1;
        for (int k = 0; k < forms[i].naxes; k++)
            n *= forms[i].in.d[forms[i].axes[k]];
        nest_value x = PS(b, t, &forms[i].in, G_GENERAL);
        RN(b, nest_softmax(f, x, forms[i].naxes, forms[i].axes), n, "softmax %s (%d)",
           SHS(t, &forms[i].in), (int)i);
    }
    /* special values: NaN, infinities, huge magnitudes (no overflow) */
    shp m = {2, {5, 17}};
    nest_value e = PS(b, t, &m, G_EXTREME);
    RN(b, nest_softmax(f, e, 1, SHAPE(1)), 17, "softmax of extremes");
    /* of an expression, consumed by element-wise ops and a reduction, an attention row */
    nest_value x = PS(b, t, &m, G_GENERAL), y = PS(b, t, &m, G_GENERAL);
    nest_value s = nest_softmax(f, nest_multiply(f, x, y), 1, SHAPE(1));
    RN(b, s, 17, "softmax(x * y)");
    R(b, nest_argmax(f, s, 1), R_EXACT, "argmax(softmax)");
    nest_value two = nest_broadcast(f, nest_constant(f, t, 0, NULL, t == NEST_F32 ? (const void *)&(float){2} : (const void *)&(double){2}, 1), 2, SHAPE(5, 17), 2, SHAPE(0, 1));
    RN(b, nest_multiply(f, nest_softmax(f, x, 1, SHAPE(0)), two), 5, "2 * softmax axis 0");
}

typedef struct bd_form {
    shp a, b;
} bd_form;

static const bd_form BDOTS[] = {
    {{1, {7}}, {1, {7}}},                       {{1, {5}}, {2, {5, 3}}},
    {{2, {4, 5}}, {1, {5}}},                    {{2, {1, 1}}, {2, {1, 1}}},
    {{3, {3, 4, 5}}, {3, {3, 5, 6}}},           {{3, {3, 4, 5}}, {2, {5, 6}}},
    {{2, {4, 5}}, {3, {3, 5, 6}}},              {{4, {2, 1, 3, 4}}, {3, {5, 4, 2}}},
    {{3, {2, 0, 3}}, {2, {3, 4}}},              {{3, {2, 3, 0}}, {3, {2, 0, 4}}},
    {{3, {6, 33, 17}}, {3, {6, 17, 40}}},       {{4, {2, 3, 40, 32}}, {4, {2, 3, 32, 40}}},
    {{3, {1, 67, 300}}, {3, {3, 300, 65}}},     {{3, {4, 130, 70}}, {2, {70, 128}}},
    {{2, {128, 257}}, {3, {2, 257, 64}}},
};

typedef struct bd_arg {
    nest_type t;
    bool exact;
} bd_arg;

static int64_t bd_k(const bd_form *c) { return c->a.d[c->a.rank - 1]; }

static void build_batch_dot(bctx *b, const void *arg)
{
    const bd_arg *ba = arg;
    nest_type t = ba->t;
    nest_function *f = b->f;
    bool fl = is_float_t(t), exact = ba->exact || !fl;
    gen g = ba->exact ? G_EXACT : G_GENERAL;
    for (size_t i = 0; i < countof_(BDOTS); i++) {
        const bd_form *c = &BDOTS[i];
        nest_value x = PS(b, t, &c->a, g), y = PS(b, t, &c->b, g);
        nest_value r = nest_batch_dot(f, M(b, x), M(b, y));
        if (exact)
            R(b, r, R_EXACT, "batch_dot %s x %s", SHS(t, &c->a), SHS(t, &c->b));
        else
            RS(b, r, bd_k(c), "batch_dot %s x %s", SHS(t, &c->a), SHS(t, &c->b));
    }
    /* two batch axes that do not merge (a transposed view of them) by a shared second factor:
     * on one core the sum in blocks of k, a group of products at a time, each tile asking for
     * its rows' next block (its C once declared the tile's indexes twice) */
    shp a4 = {4, {3, 2, 128, 300}}, b2 = {2, {300, 128}};
    nest_value x4 = PS(b, t, &a4, g), y2 = PS(b, t, &b2, g);
    nest_value xv = nest_reshape(f, x4, SHAPE(1, 0, 2, 3), 4, SHAPE(2, 3, 128, 300));
    nest_value r4 = nest_batch_dot(f, M(b, xv), M(b, y2));
    if (exact)
        R(b, r4, R_EXACT, "batch_dot of a view of two batch axes by a shared factor");
    else
        RS(b, r4, 300, "batch_dot of a view of two batch axes by a shared factor");
    /* of expressions (stored first), with a bias and an activation after it (absorbed into the
     * tile's store), of a transpose (attention's q k^T) */
    shp q = {3, {4, 24, 16}}, k = {3, {4, 24, 16}}, bias = {1, {24}};
    nest_value xq = PS(b, t, &q, g), xk = PS(b, t, &k, g), bb = PS(b, t, &bias, g);
    nest_value kt = nest_reshape(f, xk, SHAPE(0, 2, 1), 3, SHAPE(4, 16, 24));
    nest_value s = nest_batch_dot(f, M(b, xq), M(b, kt));
    nest_value sb = nest_add(f, s, nest_broadcast(f, bb, 3, SHAPE(4, 24, 24), 2, SHAPE(0, 1)));
    nest_value act = nest_maximum(f, sb, nest_negative(f, sb));
    if (exact) {
        R(b, s, R_EXACT, "batch_dot(q, k^T)");
        R(b, act, R_EXACT, "|batch_dot + bias|");
        R(b, nest_batch_dot(f, nest_add(f, xq, xq), M(b, kt)), R_EXACT, "batch_dot(q + q, k^T)");
    } else {
        RS(b, s, 16, "batch_dot(q, k^T)");
        RS(b, act, 16, "|batch_dot + bias|");
        RS(b, nest_batch_dot(f, M(b, nest_add(f, xq, xq)), M(b, kt)), 16, "batch_dot(q + q, k^T)");
    }
}

static void test_softmax_batch_dot(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(FLOAT_TYPES); i++) {
        char name[40];
        snprintf(name, sizeof name, "softmax_%s", tname(FLOAT_TYPES[i]));
        check_case(name, build_softmax, &FLOAT_TYPES[i], V_STD | (i == 0 ? V_AOT | V_NOOMP : 0));
    }
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[40];
        bd_arg ba = {NUM_TYPES[i], false};
        unsigned more = i == 0 ? V_AOT | V_AOT_CLANG | V_NOOMP | V_MARCH | V_COL : 0;
        snprintf(name, sizeof name, "batch_dot_%s", tname(NUM_TYPES[i]));
        check_case(name, build_batch_dot, &ba, V_STD | more);
        if (is_float_t(NUM_TYPES[i])) {
            ba.exact = true;
            snprintf(name, sizeof name, "batch_dot_exact_%s", tname(NUM_TYPES[i]));
            check_case(name, build_batch_dot, &ba, V_STD | more);
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * topk
 * ------------------------------------------------------------------------------------------- */

static void build_topk(bctx *b, const void *arg)
{
    nest_type t = *(const nest_type *)arg;
    nest_function *f = b->f;
    static const struct {
        shp in;
        int axis;
        int64_t k;
    } forms[] = {
        {{1, {1}}, 0, 1},        {{1, {7}}, 0, 3},           {{1, {7}}, 0, 0},
        {{1, {33}}, 0, 33},      {{2, {5, 17}}, 1, 5},       {{2, {5, 17}}, 0, 2},
        {{2, {5, 17}}, 1, 17},   {{3, {3, 0, 2}}, 2, 1},     {{3, {3, 4, 5}}, 1, 4},
        {{2, {3, 1000}}, 1, 16}, {{2, {3, 1000}}, 1, 17},    {{2, {4096, 67}}, 1, 3},
        {{2, {2, 100003}}, 1, 40},
    };
    static const uint8_t kinds[2] = {R_EXACT, R_EXACT};
    for (size_t i = 0; i < countof_(forms); i++) {
        for (int largest = 1; largest >= 0; largest--) {
            /* G_SMALL: many ties (and NaN, infinities for floats) */
            nest_value x = PS(b, t, &forms[i].in, i % 2 ? G_SMALL : G_GENERAL);
            char label[64];
            snprintf(label, sizeof label, "topk %s k %lld axis %d %s", SHS(t, &forms[i].in),
                     (long long)forms[i].k, forms[i].axis, largest ? "largest" : "smallest");
            RT(b, nest_topk(f, x, forms[i].k, forms[i].axis, largest), 2, kinds, NULL, label);
        }
    }
    /* of an expression and of a reversed view (stored first / read backwards), the indices
     * feeding a gather, only the values used */
    shp m = {2, {5, 17}};
    nest_value x = PS(b, t, &m, G_SMALL), y = PS(b, t, &m, G_SMALL);
    RT(b, nest_topk(f, nest_maximum(f, x, y), 4, 1, 1), 2, kinds, NULL, "topk(maximum)");
    RT(b, nest_topk(f, nest_reverse(f, x, 1, SHAPE(1)), 17, 1, 0), 2, kinds, NULL,
       "topk(reverse) all");
    nest_value tk = nest_topk(f, y, 3, 1, 1);
    R(b, nest_gather(f, x, nest_reshape(f, nest_get(f, tk, 1), NULL, 1, SHAPE(15)), 1), R_EXACT,
      "gather by topk's indices");
    R(b, nest_get(f, nest_topk(f, x, 2, 0, 0), 0), R_EXACT, "topk's values alone");
}

static void test_topk(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof_(NUM_TYPES); i++) {
        char name[40];
        snprintf(name, sizeof name, "topk_%s", tname(NUM_TYPES[i]));
        check_case(name, build_topk, &NUM_TYPES[i],
                   V_STD | (i == 0 ? V_AOT | V_AOT_CLANG | V_COL | V_NOOMP : 0));
    }
}

/* ---------------------------------------------------------------------------------------------
 * The generated C of every op of the set compiles without warnings (gcc, clang; plain and -O3
 * with OpenMP)
 * ------------------------------------------------------------------------------------------- */

static void test_emit_warnings(void **state)
{
    (void)state;
    if (getenv("NEST_DIFF_ONLY"))
        return;
    static const nest_type f32 = NEST_F32, f64 = NEST_F64, i32 = NEST_I32, i64 = NEST_I64,
                           b8 = NEST_BOOL;
    static const bd_arg bf = {NEST_F32, false}, bi = {NEST_I64, false};
    const struct {
        const char *name;
        build_fn fn;
        const void *arg;
    } set[] = {
        {"w_math_f32", build_math, &f32},         {"w_math_f64", build_math, &f64},
        {"w_logic_i32", build_logic, &i32},       {"w_logic_bool", build_logic, &b8},
        {"w_product_i64", build_product, &i64},   {"w_arg_f32", build_arg, &f32},
        {"w_arg_i32", build_arg, &i32},           {"w_pad_f64", build_pad, &f64},
        {"w_pad_bool", build_pad, &b8},           {"w_reverse_i32", build_reverse, &i32},
        {"w_replace_f32", build_replace_slice, &f32}, {"w_one_hot_i64", build_one_hot, &i64},
        {"w_gather_f32", build_gather, &f32},     {"w_gather_bool", build_gather, &b8},
        {"w_softmax_f32", build_softmax, &f32},   {"w_batch_dot_f32", build_batch_dot, &bf},
        {"w_batch_dot_i64", build_batch_dot, &bi}, {"w_topk_f32", build_topk, &f32},
        {"w_topk_i32", build_topk, &i32},
    };
    enum { N = (int)countof_(set) };
    bctx *cases[N];
    nest_function *fns[N];
    for (int i = 0; i < N; i++) {
        cases[i] = build(set[i].name, set[i].fn, set[i].arg, NEST_ROW_MAJOR, false);
        fns[i] = cases[i]->f;
    }
    bool ok = true;
    for (int fuse = 1; fuse >= 0; fuse--) {
        nest_options o;
        nest_options_init(&o);
        o.fuse = fuse;
        char *c = nest_emit(fns, N, NEST_EMIT_C, &o);
        if (!c)
            print_error("nest_emit: %s\n", nest_errmsg(fns[0]));
        assert_non_null(c);
        char cpath[256], cmd[1200];
        temp_path(cpath, sizeof cpath, fuse ? "ops_fused" : "ops_unfused", ".c");
        assert_true(write_file(cpath, c));
        const char *ccs[] = {"gcc", "clang-14"};
        for (size_t k = 0; k < countof_(ccs); k++) {
            snprintf(cmd, sizeof cmd, "%s -std=c99 -Wall -Wextra -pedantic -Werror %s -c %s -o %s.o",
                     ccs[k], fuse ? "-O3 -fopenmp" : "", cpath, cpath);
            ok &= run_cmd(cmd);
        }
        char obj[300];
        snprintf(obj, sizeof obj, "%s.o", cpath);
        remove(obj);
        remove(cpath);
        nest_string_free(c);
    }
    for (int i = 0; i < N; i++)
        bctx_free(cases[i]);
    assert_true(ok);
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
        cmocka_unit_test(test_structural),
        cmocka_unit_test(test_softmax_batch_dot),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_emit_warnings),
        cmocka_unit_test(test_anchors),
    };
    return run_diff_tests(tests);
}
