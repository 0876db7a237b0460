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

/* ---- structural ops ---- */

static void test_pad(void **state)
{
    (void)state;
    float xv[] = {1, 2, 3, 4, 5, 6}; /* [[1,2,3],[4,5,6]] */
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(2, 3));
    nest_value c = nest_constant(f, NEST_F32, 0, NULL, (float[]){9}, 1);
    check(f, nest_pad(f, x, c, SHAPE(1, 0), SHAPE(0, 2), NULL), ARGS(xv),
          F32(9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9));
    /* negative padding crops; interior padding between neighbours */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 2, SHAPE(2, 3));
    c = nest_constant(f, NEST_F32, 0, NULL, (float[]){0}, 1);
    check(f, nest_pad(f, x, c, SHAPE(-1, -1), SHAPE(0, 1), NULL), ARGS(xv), F32(5, 6, 0));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 2, SHAPE(2, 3));
    c = nest_constant(f, NEST_F32, 0, NULL, (float[]){0}, 1);
    check(f, nest_pad(f, x, c, SHAPE(0, 1), SHAPE(0, 0), SHAPE(1, 1)), ARGS(xv),
          F32(0, 1, 0, 2, 0, 3, /* row 0 */ 0, 0, 0, 0, 0, 0, /* hole */ 0, 4, 0, 5, 0, 6));
    /* interior and cropping together: [1,2,3] dilated by 2 is [1,_,_,2,_,_,3]; crop 2 below and
     * 1 above: [_,2,_,_] */
    f = nest_function_new("f");
    x = param(f, "x", NEST_I32, 1, SHAPE(3));
    nest_value ci = nest_constant(f, NEST_I32, 0, NULL, (int32_t[]){-7}, 1);
    check(f, nest_pad(f, x, ci, SHAPE(-2), SHAPE(-2), SHAPE(2)), ARGS(I32(1, 2, 3)),
          I32(-7, 2, -7));
    /* cropping past the data into the padding above */
    f = nest_function_new("f");
    x = param(f, "x", NEST_I32, 1, SHAPE(2));
    ci = nest_constant(f, NEST_I32, 0, NULL, (int32_t[]){5}, 1);
    check(f, nest_pad(f, x, ci, SHAPE(-3), SHAPE(4), NULL), ARGS(I32(1, 2)), I32(5, 5, 5));
    /* a scalar pads to itself; an empty operand is all padding; the value may be computed */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 0, NULL);
    check(f, nest_pad(f, x, x, NULL, NULL, NULL), ARGS(F64(2.5)), F64(2.5));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 1, SHAPE(0));
    nest_value s = param(f, "s", NEST_F64, 0, NULL);
    check(f, nest_pad(f, x, nest_negative(f, s), SHAPE(2), SHAPE(1), SHAPE(3)),
          ARGS(NULL, F64(1.5)), F64(-1.5, -1.5, -1.5));
}

static void test_reverse(void **state)
{
    (void)state;
    int64_t xv[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; /* [2,2,3] */
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_I64, 3, SHAPE(2, 2, 3));
    check(f, nest_reverse(f, x, 1, SHAPE(2)), ARGS(xv), I64(3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10));
    f = nest_function_new("f");
    x = param(f, "x", NEST_I64, 3, SHAPE(2, 2, 3));
    check(f, nest_reverse(f, x, 2, SHAPE(0, 1)), ARGS(xv),
          I64(10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3));
    f = nest_function_new("f");
    x = param(f, "x", NEST_I64, 3, SHAPE(2, 2, 3));
    check(f, nest_reverse(f, x, 0, NULL), ARGS(xv), xv);
    /* a reverse of a concatenation, and of a reverse */
    f = nest_function_new("f");
    nest_value a = param(f, "a", NEST_F32, 1, SHAPE(2)), b = param(f, "b", NEST_F32, 1, SHAPE(3));
    check(f, nest_reverse(f, nest_concat(f, 2, VALUES(a, b), 0), 1, SHAPE(0)),
          ARGS(F32(1, 2), F32(3, 4, 5)), F32(5, 4, 3, 2, 1));
    f = nest_function_new("f");
    a = param(f, "a", NEST_F32, 1, SHAPE(3));
    check(f, nest_reverse(f, nest_reverse(f, a, 1, SHAPE(0)), 1, SHAPE(0)), ARGS(F32(1, 2, 3)),
          F32(1, 2, 3));
}

static void test_replace_slice(void **state)
{
    (void)state;
    int32_t xv[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; /* [3,4] */
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_I32, 2, SHAPE(3, 4)), y = param(f, "y", NEST_I32, 2, SHAPE(2, 2));
    check(f, nest_replace_slice(f, x, y, SHAPE(1, 1), SHAPE(3, 3), NULL),
          ARGS(xv, I32(-1, -2, -3, -4)), I32(0, 1, 2, 3, 4, -1, -2, 7, 8, -3, -4, 11));
    /* strided: rows 0 and 2, columns 1 and 3 */
    f = nest_function_new("f");
    x = param(f, "x", NEST_I32, 2, SHAPE(3, 4));
    y = param(f, "y", NEST_I32, 2, SHAPE(2, 2));
    check(f, nest_replace_slice(f, x, y, SHAPE(0, 1), SHAPE(3, 4), SHAPE(2, 2)),
          ARGS(xv, I32(-1, -2, -3, -4)), I32(0, -1, 2, -2, 4, 5, 6, 7, 8, -3, 10, -4));
    /* an empty box changes nothing; the whole box is y */
    f = nest_function_new("f");
    x = param(f, "x", NEST_I32, 2, SHAPE(3, 4));
    y = param(f, "y", NEST_I32, 2, SHAPE(0, 4));
    check(f, nest_replace_slice(f, x, y, SHAPE(2, 0), SHAPE(2, 4), NULL), ARGS(xv, NULL), xv);
    f = nest_function_new("f");
    nest_value u = param(f, "u", NEST_F32, 1, SHAPE(2)), w = param(f, "w", NEST_F32, 1, SHAPE(2));
    check(f, nest_replace_slice(f, u, w, SHAPE(0), SHAPE(2), NULL), ARGS(F32(1, 2), F32(3, 4)),
          F32(3, 4));
}

static void test_one_hot(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("f");
    nest_value i = param(f, "i", NEST_I32, 1, SHAPE(4));
    /* 3 is out of range, -1 too: zero rows */
    check(f, nest_one_hot(f, i, 2, SHAPE(4, 3), 1), ARGS(I32(0, 2, 3, -1)),
          I32(1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0));
    f = nest_function_new("f");
    i = param(f, "i", NEST_I64, 1, SHAPE(2));
    check(f, nest_one_hot(f, i, 2, SHAPE(3, 2), 0), ARGS(I64(2, 0)), I64(0, 1, 0, 0, 1, 0));
    /* float indices: only integral ones are hot */
    f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(3));
    check(f, nest_one_hot(f, x, 2, SHAPE(3, 2), 1), ARGS(F32(1, 0.5f, NAN)), F32(0, 1, 0, 0, 0, 0));
}

static void test_gather(void **state)
{
    (void)state;
    float ev[] = {0, 1, 10, 11, 20, 21}; /* an embedding table [3,2] */
    nest_function *f = nest_function_new("f");
    nest_value e = param(f, "e", NEST_F32, 2, SHAPE(3, 2)), i = param(f, "i", NEST_I64, 1, SHAPE(4));
    check(f, nest_gather(f, e, i, 0), ARGS(ev, I64(2, 0, 2, 1)), F32(20, 21, 0, 1, 20, 21, 10, 11));
    /* negative indices count from the end; out of range ones clamp */
    f = nest_function_new("f");
    e = param(f, "e", NEST_F32, 2, SHAPE(3, 2));
    nest_value j = param(f, "j", NEST_I32, 1, SHAPE(5));
    check(f, nest_gather(f, e, j, 0), ARGS(ev, I32(-1, -3, -4, 3, INT32_MAX)),
          F32(20, 21, 0, 1, 0, 1, 20, 21, 20, 21));
    /* along axis 1, with 2-d indices: the result is [3, 2, 2] */
    f = nest_function_new("f");
    e = param(f, "e", NEST_F32, 2, SHAPE(3, 2));
    nest_value k = param(f, "k", NEST_I64, 2, SHAPE(2, 2));
    check(f, nest_gather(f, e, k, 1), ARGS(ev, I64(1, 0, 0, 0)),
          F32(1, 0, 0, 0, 11, 10, 10, 10, 21, 20, 20, 20));
    /* a scalar index removes the axis */
    f = nest_function_new("f");
    e = param(f, "e", NEST_F32, 2, SHAPE(3, 2));
    nest_value s = param(f, "s", NEST_I32, 0, NULL);
    check(f, nest_gather(f, e, s, 0), ARGS(ev, I32(1)), F32(10, 11));
}

/* ---- softmax and batch_dot ---- */

static void test_softmax(void **state)
{
    (void)state;
    /* rows: [0, ln 2, ln 3] -> [1, 2, 3] / 6; a row shifted by 1000 gives the same (up to the
     * rounding of 1000 + ln 2, 1e-13 relative); -inf is 0 */
    double l2 = log(2.0), l3 = log(3.0);
    double xv[] = {0, l2, l3, 1000, 1000 + l2, 1000 + l3, -INFINITY, 0, 0};
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F64, 2, SHAPE(3, 3));
    check_near(f, nest_softmax(f, x, 1, SHAPE(1)), ARGS(xv),
               F64(1. / 6, 2. / 6, 3. / 6, 1. / 6, 2. / 6, 3. / 6, 0, 0.5, 0.5), 1e-12);
    /* columns; and over both axes */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 2, SHAPE(2, 2));
    check_near(f, nest_softmax(f, x, 1, SHAPE(0)), ARGS(F64(0, 5, l3, 5)),
               F64(0.25, 0.5, 0.75, 0.5), 1e-14);
    f = nest_function_new("f");
    x = param(f, "x", NEST_F64, 2, SHAPE(2, 2));
    check_near(f, nest_softmax(f, x, 2, SHAPE(0, 1)), ARGS(F64(0, l2, l2, 0)),
               F64(1. / 6, 2. / 6, 2. / 6, 1. / 6), 1e-14);
    /* a NaN, or only -inf, makes the group NaN; over no axes every element is 1 */
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 2, SHAPE(2, 2));
    check(f, nest_softmax(f, x, 1, SHAPE(1)), ARGS(F32(NAN, 1, -INFINITY, -INFINITY)),
          F32(NAN, NAN, NAN, NAN));
    f = nest_function_new("f");
    x = param(f, "x", NEST_F32, 1, SHAPE(3));
    check(f, nest_softmax(f, x, 0, NULL), ARGS(F32(-7, 0, 1e30f)), F32(1, 1, 1));
}

static void test_batch_dot(void **state)
{
    (void)state;
    /* two 2x2 products in a batch: [[1,2],[3,4]] x [[5,6],[7,8]] and [[1,0],[0,1]] x [[1,2],[3,4]] */
    float av[] = {1, 2, 3, 4, 1, 0, 0, 1}, bv[] = {5, 6, 7, 8, 1, 2, 3, 4};
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "a", NEST_F32, 3, SHAPE(2, 2, 2)), b = param(f, "b", NEST_F32, 3, SHAPE(2, 2, 2));
    check(f, nest_batch_dot(f, a, b), ARGS(av, bv), F32(19, 22, 43, 50, 1, 2, 3, 4));
    /* the second operand broadcast over the batch; a vector on either side */
    f = nest_function_new("f");
    a = param(f, "a", NEST_F32, 3, SHAPE(2, 2, 2));
    b = param(f, "b", NEST_F32, 2, SHAPE(2, 2));
    check(f, nest_batch_dot(f, a, b), ARGS(av, F32(5, 6, 7, 8)), F32(19, 22, 43, 50, 5, 6, 7, 8));
    f = nest_function_new("f");
    a = param(f, "a", NEST_F32, 3, SHAPE(2, 2, 2));
    b = param(f, "b", NEST_F32, 1, SHAPE(2));
    check(f, nest_batch_dot(f, a, b), ARGS(av, F32(1, -1)), F32(-1, -1, 1, -1));
    f = nest_function_new("f");
    a = param(f, "a", NEST_F32, 1, SHAPE(2));
    b = param(f, "b", NEST_F32, 3, SHAPE(2, 2, 2));
    check(f, nest_batch_dot(f, a, b), ARGS(F32(1, -1), bv), F32(-2, -2, -2, -2));
    /* batch axes of 1 broadcast on both sides: [2,1] x [1,3] batches give [2,3] */
    f = nest_function_new("f");
    a = param(f, "a", NEST_I32, 4, SHAPE(2, 1, 1, 1));
    b = param(f, "b", NEST_I32, 4, SHAPE(1, 3, 1, 1));
    check(f, nest_batch_dot(f, a, b), ARGS(I32(2, 3), I32(1, 10, 100)), I32(2, 20, 200, 3, 30, 300));
    /* integers wrap; k = 0 gives zeros */
    f = nest_function_new("f");
    a = param(f, "a", NEST_I32, 2, SHAPE(1, 2));
    b = param(f, "b", NEST_I32, 2, SHAPE(2, 1));
    check(f, nest_batch_dot(f, a, b), ARGS(I32(INT32_MAX, 1), I32(2, 2)), I32(0));
    f = nest_function_new("f");
    a = param(f, "a", NEST_F64, 3, SHAPE(2, 1, 0));
    b = param(f, "b", NEST_F64, 2, SHAPE(0, 2));
    check(f, nest_batch_dot(f, a, b), ARGS(NULL, NULL), F64(0, 0, 0, 0));
}

/* ---- topk ---- */

/* The values and indices of topk(x, k, axis, largest) of a f32[rows, n] row by row. */
static void topk_at(const float *x, int64_t rows, int64_t n, int64_t k, int largest,
                    const float *wv, const int64_t *wi, const char *file, int line)
{
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "x", NEST_F32, 2, SHAPE(rows, n));
    nest_value t = nest_topk(f, a, k, 1, largest);
    nest_value v[2] = {nest_get(f, t, 0), nest_get(f, t, 1)};
    if (nest_return(f, 2, v, NULL) != NEST_OK) {
        print_error("%s\n", nest_errmsg(f));
        nest_function_free(f);
        _fail(file, line);
    }
    float gv[64];
    int64_t gi[64];
    int st = evaluate(f, (void *[]){(void *)x}, (void *[]){gv, gi});
    nest_function_free(f);
    if (st != NEST_OK)
        _fail(file, line);
    tu_assert_close(NEST_F32, gv, wv, rows * k, 0, 0, file, line);
    tu_assert_close(NEST_I64, gi, wi, rows * k, 0, 0, file, line);
}
#define topk(x, rows, n, k, largest, wv, wi)                                                   \
    topk_at((x), (rows), (n), (k), (largest), (wv), (wi), __FILE__, __LINE__)

static void test_topk(void **state)
{
    (void)state;
    float x[] = {3, 1, 4, 1, 5, 9, 2, 6, /* row 0 */ 5, NAN, 5, -INFINITY, NAN, 0, -0.0f, 7};
    /* the largest: ties in index order (the two 5s of row 1 after its NaNs) */
    topk(x, 2, 8, 3, 1, F32(9, 6, 5, NAN, NAN, 7), I64(5, 7, 4, 1, 4, 7));
    /* the smallest: NaN last; 0 and -0 tie, in index order */
    topk(x, 2, 8, 3, 0, F32(1, 1, 2, -INFINITY, 0, -0.0f), I64(1, 3, 6, 3, 5, 6));
    /* all of them: a full stable sort; none */
    topk(x, 1, 8, 8, 0, F32(1, 1, 2, 3, 4, 5, 6, 9), I64(1, 3, 6, 0, 2, 4, 7, 5));
    topk(x, 2, 8, 0, 1, F32(0), I64(0));
    /* k beyond the insertion limit: 20 of 24 equal values keep their order */
    float eq[24];
    int64_t wi[20];
    float wv[20];
    for (int i = 0; i < 24; i++)
        eq[i] = i == 5 ? 2.0f : 1.0f;
    for (int i = 0; i < 20; i++) {
        wv[i] = i == 0 ? 2.0f : 1.0f;
        wi[i] = i == 0 ? 5 : i <= 5 ? i - 1 : i;
    }
    topk(eq, 1, 24, 20, 1, wv, wi);
    /* along the first axis of a matrix */
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "a", NEST_I32, 2, SHAPE(3, 2));
    nest_value t = nest_topk(f, a, 2, 0, 1);
    check(f, nest_get(f, t, 1), ARGS(I32(1, 9, 7, 9, 7, 0)), I64(1, 0, 2, 1));
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
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_reverse),
        cmocka_unit_test(test_replace_slice),
        cmocka_unit_test(test_one_hot),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_batch_dot),
        cmocka_unit_test(test_topk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
