/* test_interp_ops.c - the reference interpreter on the op set of real models (element-wise math
 * and logic, product, argmax and argmin, ...), against values worked out by hand or by closed
 * forms written here (never by the interpreter's own functions). */
#include "testutil.h"

#define F32(...) ((float[]){__VA_ARGS__})
#define F64(...) ((double[]){__VA_ARGS__})
#define I32(...) ((int32_t[]){__VA_ARGS__})
#define I64(...) ((int64_t[]){__VA_ARGS__})
#define B8(...) ((uint8_t[]){__VA_ARGS__})
#define ARGS(...) ((void *[]){__VA_ARGS__})

typedef nest_value (*unary_fn)(nest_function *, nest_value);
typedef nest_value (*binary_fn)(nest_function *, nest_value, nest_value);

static nest_value param(nest_function *f, const char *name, nest_type t, int rank,
                        const int64_t *shape)
{
    return nest_parameter(f, name, t, rank, shape, NEST_ROW_MAJOR);
}

static int64_t count_of(const nest_function *f, nest_value v)
{
    int64_t c = 1;
    for (int i = 0; i < nest_value_rank(f, v); i++)
        c *= nest_value_shape(f, v)[i];
    return c;
}

/* Returns v as f's one result, evaluates it with args into a buffer first filled with garbage,
 * and compares with want (the result's element type); frees f. */
static void check_at(nest_function *f, nest_value v, void *const *args, const void *want,
                     double atol, double rtol, const char *file, int line)
{
    if (v < 0 || nest_return(f, 1, &v, NULL) != NEST_OK) {
        print_error("building failed: %s\n", nest_errmsg(f));
        nest_function_free(f);
        _fail(file, line);
    }
    nest_type t = (nest_type)nest_value_type(f, v);
    int64_t n = count_of(f, v);
    size_t bytes = (size_t)n * nest_type_size(t);
    unsigned char *out = malloc(bytes + 1);
    memset(out, 0xA5, bytes + 1);
    int st = evaluate(f, args, (void *[]){out});
    if (st != NEST_OK || out[bytes] != 0xA5) {
        print_error("evaluate: %s\n", st ? nest_errmsg(f) : "written past the end");
        free(out);
        nest_function_free(f);
        _fail(file, line);
    }
    tu_assert_close(t, out, want, n, atol, rtol, file, line);
    free(out);
    nest_function_free(f);
}
#define check(f, v, args, want) check_at((f), (v), (args), (want), 0.0, 0.0, __FILE__, __LINE__)
#define check_near(f, v, args, want, rtol)                                                    \
    check_at((f), (v), (args), (want), 1e-15, (rtol), __FILE__, __LINE__)

/* op over the n values x of type t, against want (relative tolerance rtol). */
static void unary_at(unary_fn op, nest_type t, int64_t n, void *x, const void *want, double rtol,
                     const char *file, int line)
{
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "x", t, 1, SHAPE(n));
    check_at(f, op(f, a), ARGS(x), want, rtol > 0 ? 1e-15 : 0, rtol, file, line);
}
#define unary(op, t, x, want, rtol)                                                            \
    unary_at((op), (t), (int64_t)(sizeof(x) / sizeof((x)[0])), (x), (want), (rtol), __FILE__,  \
             __LINE__)

static void binary_at(binary_fn op, nest_type t, int64_t n, void *x, void *y, const void *want,
                      const char *file, int line)
{
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "x", t, 1, SHAPE(n)), b = param(f, "y", t, 1, SHAPE(n));
    check_at(f, op(f, a, b), ARGS(x, y), want, 0, 0, file, line);
}
#define binary(op, t, x, y, want)                                                               \
    binary_at((op), (t), (int64_t)(sizeof(x) / sizeof((x)[0])), (x), (y), (want), __FILE__,    \
              __LINE__)

/* ---- element-wise math ---- */

static void test_trigonometry(void **state)
{
    (void)state;
    const double pi = 3.14159265358979323846;
    double x[] = {0, pi / 6, pi / 4, pi / 2, pi, -pi / 3};
    unary(nest_sin, NEST_F64, x, F64(0, 0.5, sqrt(0.5), 1, 0, -sqrt(3) / 2), 1e-15);
    unary(nest_cos, NEST_F64, x, F64(1, sqrt(3) / 2, sqrt(0.5), 0, -1, 0.5), 1e-15);
    double t[] = {0, pi / 4, -pi / 4, pi / 3};
    unary(nest_tan, NEST_F64, t, F64(0, 1, -1, sqrt(3)), 1e-15);
    double a[] = {0, 0.5, 1, -1, 2};
    unary(nest_asin, NEST_F64, a, F64(0, pi / 6, pi / 2, -pi / 2, NAN), 1e-15);
    unary(nest_acos, NEST_F64, a, F64(pi / 2, pi / 3, 0, pi, NAN), 1e-15);
    double u[] = {0, 1, -1, INFINITY, -INFINITY, NAN};
    unary(nest_atan, NEST_F64, u, F64(0, pi / 4, -pi / 4, pi / 2, -pi / 2, NAN), 1e-15);
    /* sinh and cosh against (e^x -+ e^-x) / 2 */
    double h[] = {0, 1, -2, 0.5};
    double sh[4], ch[4];
    for (int i = 0; i < 4; i++) {
        sh[i] = (exp(h[i]) - exp(-h[i])) / 2;
        ch[i] = (exp(h[i]) + exp(-h[i])) / 2;
    }
    unary(nest_sinh, NEST_F64, h, sh, 1e-15);
    unary(nest_cosh, NEST_F64, h, ch, 1e-15);
    /* f32: rounded once from the exact value */
    float xf[] = {0, 0.5f, -1};
    unary(nest_sin, NEST_F32, xf, F32(0, (float)sin(0.5), (float)sin(-1.0)), 0);
}

static void test_rounding_and_sign(void **state)
{
    (void)state;
    double x[] = {1.5, -1.5, -0.5, 2, -0.0, INFINITY, NAN, 1e300};
    unary(nest_floor, NEST_F64, x, F64(1, -2, -1, 2, -0.0, INFINITY, NAN, 1e300), 0);
    unary(nest_ceiling, NEST_F64, x, F64(2, -1, -0.0, 2, -0.0, INFINITY, NAN, 1e300), 0);
    float s[] = {-3, 0, -0.0f, 2.5f, NAN, -INFINITY, 1e-40f};
    unary(nest_sign, NEST_F32, s, F32(-1, 0, -0.0f, 1, NAN, -1, 1), 0);
    unary(nest_relu, NEST_F32, s, F32(0, 0, -0.0f, 2.5f, NAN, 0, 1e-40f), 0);
    /* relu keeps -0 as -0: it is equal to 0 and x < 0 is false for it */
    float r[] = {-0.0f};
    unary(nest_relu, NEST_F32, r, F32(0), 0);
}

static void test_erf_sigmoid(void **state)
{
    (void)state;
    /* erf(0.5) and erf(1) to 17 digits (Abramowitz and Stegun, table 7.1) */
    double e[] = {0, 0.5, -1, INFINITY, -INFINITY, NAN};
    unary(nest_erf, NEST_F64, e, F64(0, 0.52049987781304654, -0.84270079294971487, 1, -1, NAN),
          1e-15);
    double g[] = {0, 2, -2, INFINITY, -INFINITY, -1000, NAN};
    unary(nest_sigmoid, NEST_F64, g,
          F64(0.5, 1 / (1 + exp(-2.0)), 1 / (1 + exp(2.0)), 1, 0, 0, NAN), 1e-15);
    float gf[] = {0, 100, -100};
    unary(nest_sigmoid, NEST_F32, gf, F32(0.5f, 1, (float)(1 / (1 + exp(100.0)))), 0);
}

/* ---- logic and comparisons ---- */

static void test_logic(void **state)
{
    (void)state;
    uint8_t a[] = {0, 0, 1, 1}, b[] = {0, 1, 0, 1};
    unary(nest_not, NEST_BOOL, a, B8(1, 1, 0, 0), 0);
    binary(nest_and, NEST_BOOL, a, b, B8(0, 0, 0, 1));
    binary(nest_or, NEST_BOOL, a, b, B8(0, 1, 1, 1));
    /* bool arguments are 0 or 1 whatever byte the caller gives */
    uint8_t c[] = {2, 0, 255, 7}, d[] = {4, 4, 0, 1};
    binary(nest_and, NEST_BOOL, c, d, B8(1, 0, 0, 1));
    unary(nest_not, NEST_BOOL, c, B8(0, 1, 0, 0), 0);
}

static void test_comparisons(void **state)
{
    (void)state;
    float x[] = {1, 2, NAN, 3, -0.0f, INFINITY}, y[] = {2, 2, NAN, NAN, 0, INFINITY};
    binary(nest_not_equal, NEST_F32, x, y, B8(1, 0, 1, 1, 0, 0));
    binary(nest_less_eq, NEST_F32, x, y, B8(1, 1, 0, 0, 1, 1));
    binary(nest_greater_eq, NEST_F32, x, y, B8(0, 1, 0, 0, 1, 1));
    int64_t i[] = {INT64_MIN, -1, 5, INT64_MAX}, j[] = {INT64_MAX, -1, 4, INT64_MAX};
    binary(nest_not_equal, NEST_I64, i, j, B8(1, 0, 1, 0));
    binary(nest_less_eq, NEST_I64, i, j, B8(1, 1, 0, 1));
    binary(nest_greater_eq, NEST_I64, i, j, B8(0, 1, 1, 1));
    uint8_t p[] = {0, 1, 1}, q[] = {1, 1, 0};
    binary(nest_not_equal, NEST_BOOL, p, q, B8(1, 0, 1));
}

/* ---- product, argmax, argmin ---- */

static void test_product(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F64, 2, SHAPE(2, 3));
    double xv[] = {1, 2, 3, 4, 5, -6};
    check(f, nest_product(f, x, 1, SHAPE(1)), ARGS(xv), F64(6, -120));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 2, SHAPE(2, 3));
    check(f, nest_product(f, x, 2, SHAPE(0, 1)), ARGS(xv), F64(-720));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 2, SHAPE(2, 3));
    check(f, nest_product(f, x, 1, SHAPE(0)), ARGS(xv), F64(4, 10, -18));
    /* of nothing: 1 */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 2, SHAPE(3, 0));
    check(f, nest_product(f, x, 1, SHAPE(1)), ARGS(NULL), F32(1, 1, 1));
    /* integers wrap: 65536^2 in i32 is 0, INT32_MAX * 2 is -2 */
    f = nest_function_new("f");
    x = param(f, "x", NEST_I32, 2, SHAPE(2, 2));
    int32_t iv[] = {65536, 65536, INT32_MAX, 2};
    check(f, nest_product(f, x, 1, SHAPE(1)), ARGS(iv), I32(0, -2));
    /* an infinity times 0 is NaN */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 1, SHAPE(3));
    float fv[] = {INFINITY, 0, 2};
    check(f, nest_product(f, x, 1, SHAPE(0)), ARGS(fv), F32(NAN));
}

static void test_argmax_argmin(void **state)
{
    (void)state;
    /* rows of a matrix: ties give the lowest index; a NaN wins for both; -inf and inf */
    float xv[] = {1, 3, 3, 2,              /* max at 1 (tie with 2), min at 0 */
                  NAN, 1, NAN, 0,          /* the first NaN: 0 for both */
                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, /* all equal: 0 */
                  5, -1, INFINITY, NAN};   /* NaN at 3 beats inf and -1 */
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(4, 4));
    check(f, nest_argmax(f, x, 1), ARGS(xv), I64(1, 0, 0, 3));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 2, SHAPE(4, 4));
    check(f, nest_argmin(f, x, 1), ARGS(xv), I64(0, 0, 0, 3));
    /* columns: axis 0 */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 2, SHAPE(4, 4));
    check(f, nest_argmax(f, x, 0), ARGS(xv), I64(1, 0, 1, 3));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 2, SHAPE(4, 4));
    check(f, nest_argmin(f, x, 0), ARGS(xv), I64(1, 2, 1, 3));
    /* integers, and the middle axis of a 3-d tensor */
    int32_t iv[] = {INT32_MIN, 7, 7, INT32_MAX, -3, INT32_MAX,   /* [0][0..2][0..1] */
                    0, 0, 0, 0, 0, 0};
    f = nest_function_new("f");
    x = param(f, "x", NEST_I32, 3, SHAPE(2, 3, 2));
    check(f, nest_argmax(f, x, 1), ARGS(iv), I64(1, 1, 0, 0));
    f = nest_function_new("f");
    x = param(f, "x", NEST_I32, 3, SHAPE(2, 3, 2));
    check(f, nest_argmin(f, x, 1), ARGS(iv), I64(0, 0, 0, 0));
    /* an axis of extent 1: index 0; a whole vector */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 2, SHAPE(3, 1));
    check(f, nest_argmax(f, x, 1), ARGS(F64(3, 1, 2)), I64(0, 0, 0));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 1, SHAPE(5));
    check(f, nest_argmin(f, x, 0), ARGS(F64(3, -1, 2, -1, 9)), I64(1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trigonometry),
        cmocka_unit_test(test_rounding_and_sign),
        cmocka_unit_test(test_erf_sigmoid),
        cmocka_unit_test(test_logic),
        cmocka_unit_test(test_comparisons),
        cmocka_unit_test(test_product),
        cmocka_unit_test(test_argmax_argmin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
