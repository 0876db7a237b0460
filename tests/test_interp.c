/* test_interp.c - values computed by the reference interpreter, against values worked out by
 * hand or by closed forms written here: every op, every element type it takes, the integer and
 * floating corner cases nest.h documents, views, layouts, results and calling errors. */
#include "testutil.h"

#define F32(...) ((float[]){__VA_ARGS__})
#define F64(...) ((double[]){__VA_ARGS__})
#define I32(...) ((int32_t[]){__VA_ARGS__})
#define I64(...) ((int64_t[]){__VA_ARGS__})
#define B8(...) ((uint8_t[]){__VA_ARGS__})
#define ARGS(...) ((void *[]){__VA_ARGS__})
#define N(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

#define I32MIN INT32_MIN
#define I32MAX INT32_MAX
#define I64MIN INT64_MIN
#define I64MAX INT64_MAX

/* Under AddressSanitizer, a huge malloc returns NULL as it does without it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

typedef nest_value (*binary_fn)(nest_function *, nest_value, nest_value);
typedef nest_value (*unary_fn)(nest_function *, nest_value);

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

/* Returns `values` as f's one result, evaluates it with args into a buffer first filled with
 * garbage, and compares with want (element type of the result). */
static void check_at(nest_function *f, nest_value v, void *const *args, const void *want,
                     double atol, double rtol, const char *file, int line)
{
    if (v < 0 || nest_return(f, 1, &v, NULL) != NEST_OK) {
        print_error("building failed: %s\n", nest_errmsg(f));
        _fail(file, line);
    }
    nest_type t = (nest_type)nest_value_type(f, v);
    int64_t n = count_of(f, v);
    size_t bytes = (size_t)n * nest_type_size(t);
    unsigned char *out = malloc(bytes + 1);
    memset(out, 0xA5, bytes + 1);
    int st = evaluate(f, args, (void *[]){out});
    if (st != NEST_OK) {
        print_error("evaluate: %s\n", nest_errmsg(f));
        free(out);
        _fail(file, line);
    }
    if (out[bytes] != 0xA5) {
        print_error("the result was written past its end\n");
        free(out);
        _fail(file, line);
    }
    if (t == NEST_F32 || t == NEST_F64)
        tu_assert_close(t, out, want, n, atol, rtol, file, line);
    else
        tu_assert_close(t, out, want, n, 0, 0, file, line);
    free(out);
}
#define check(f, v, args, want) check_at((f), (v), (args), (want), 0.0, 0.0, __FILE__, __LINE__)
#define check_near(f, v, args, want, atol, rtol)                                              \
    check_at((f), (v), (args), (want), (atol), (rtol), __FILE__, __LINE__)

/* op(x, y) on n elements of type t, in a fresh function. */
static void binary_at(binary_fn op, nest_type t, int64_t n, void *x, void *y, const void *want,
                      const char *file, int line)
{
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "x", t, 1, SHAPE(n)), b = param(f, "y", t, 1, SHAPE(n));
    check_at(f, op(f, a, b), ARGS(x, y), want, 0, 0, file, line);
    nest_function_free(f);
}
#define binary(op, t, x, y, want) binary_at(op, t, N(x), x, y, want, __FILE__, __LINE__)

static void unary_at(unary_fn op, nest_type t, int64_t n, void *x, const void *want, double rtol,
                     const char *file, int line)
{
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "x", t, 1, SHAPE(n));
    check_at(f, op(f, a), ARGS(x), want, 0, rtol, file, line);
    nest_function_free(f);
}
#define unary(op, t, x, want) unary_at(op, t, N(x), x, want, 0.0, __FILE__, __LINE__)
#define unary_near(op, t, x, want, rtol) unary_at(op, t, N(x), x, want, rtol, __FILE__, __LINE__)

static void convert_at(nest_type from, nest_type to, int64_t n, void *x, const void *want,
                       const char *file, int line)
{
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "x", from, 1, SHAPE(n));
    check_at(f, nest_convert(f, a, to), ARGS(x), want, 0, 0, file, line);
    nest_function_free(f);
}
#define convert(from, to, x, want) convert_at(from, to, N(x), x, want, __FILE__, __LINE__)

/* 0, 1, 2, ... of type t */
static void *iota(nest_type t, int64_t n, double start)
{
    void *p = malloc((size_t)(n ? n : 1) * nest_type_size(t));
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i;
        switch (t) {
        case NEST_F32: ((float *)p)[i] = (float)v; break;
        case NEST_F64: ((double *)p)[i] = v; break;
        case NEST_I32: ((int32_t *)p)[i] = (int32_t)v; break;
        case NEST_I64: ((int64_t *)p)[i] = (int64_t)v; break;
        case NEST_BOOL: ((uint8_t *)p)[i] = (uint8_t)((int64_t)v & 1); break;
        }
    }
    return p;
}

static const nest_type num_types[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64};
static const nest_type all_types[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_BOOL};

/* ---- element-wise arithmetic ---- */

static void test_add(void **state)
{
    (void)state;
    /* f32 rounds once, to nearest even: 1 + 2^-24 is a tie (to 1), 1 + 1.5 ulp goes up */
    binary(nest_add, NEST_F32, F32(1.5f, -2, 0x1p127f, 1, 1, -0x1p127f),
           F32(2.25f, 2, 0x1p127f, 0x1p-24f, 0x1.8p-23f, -0x1p127f),
           F32(3.75f, 0, INFINITY, 1, 0x1.000004p0f, -INFINITY));
    binary(nest_add, NEST_F64, F64(1.5, 0x1p1023, 1, 0.1, NAN), F64(2.25, 0x1p1023, 0x1p-53, 0.2, 1),
           F64(3.75, INFINITY, 1, 0.30000000000000004, NAN));
    binary(nest_add, NEST_I32, I32(I32MAX, I32MIN, -5, 7), I32(1, -1, 3, -7),
           I32(I32MIN, I32MAX, -2, 0));
    binary(nest_add, NEST_I64, I64(I64MAX, I64MIN, (int64_t)1 << 40, -3),
           I64(1, -1, (int64_t)1 << 40, 3), I64(I64MIN, I64MAX, (int64_t)1 << 41, 0));
}

static void test_subtract(void **state)
{
    (void)state;
    binary(nest_subtract, NEST_F32, F32(5, 1, -0x1p127f), F32(7.5f, 0x1p-25f, 0x1p127f),
           F32(-2.5f, 1, -INFINITY));
    binary(nest_subtract, NEST_F64, F64(5, 0.3, INFINITY), F64(7.5, 0.1, INFINITY),
           F64(-2.5, 0.19999999999999998, NAN));
    binary(nest_subtract, NEST_I32, I32(I32MIN, 5, 0, I32MAX), I32(1, 7, I32MIN, -1),
           I32(I32MAX, -2, I32MIN, I32MIN));
    binary(nest_subtract, NEST_I64, I64(I64MIN, 0, 10), I64(1, I64MIN, 3), I64(I64MAX, I64MIN, 7));
}

static void test_multiply(void **state)
{
    (void)state;
    /* (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: a tie, to even; the second is above the tie */
    binary(nest_multiply, NEST_F32, F32(3, 0x1p100f, 0x1p-100f, 0x1.001p0f, 0x1.001p0f),
           F32(-2.5f, 0x1p100f, 0x1p-100f, 0x1.001p0f, 0x1.001002p0f),
           F32(-7.5f, INFINITY, 0, 0x1.002p0f, 0x1.002004p0f));
    binary(nest_multiply, NEST_F64, F64(3, 0x1p1000, 0, 0.1), F64(-2.5, 0x1p100, INFINITY, 3),
           F64(-7.5, INFINITY, NAN, 0.30000000000000004));
    /* 46341^2 = 2147488281 wraps to 2147488281 - 2^32 */
    binary(nest_multiply, NEST_I32, I32(65536, -3, I32MAX, 46341), I32(65536, 4, 2, 46341),
           I32(0, -12, -2, -2147479015));
    binary(nest_multiply, NEST_I64, I64((int64_t)1 << 32, 3, I64MAX, -1),
           I64((int64_t)1 << 32, -5, 2, I64MIN), I64(0, -15, -2, I64MIN));
}

static void test_divide(void **state)
{
    (void)state;
    binary(nest_divide, NEST_F32, F32(1, -1, 0, 1, 7), F32(0, 0, 0, 3, -2),
           F32(INFINITY, -INFINITY, NAN, 1.0f / 3.0f, -3.5f));
    binary(nest_divide, NEST_F64, F64(1, 0, 1), F64(3, 0, -0.0), F64(1.0 / 3.0, NAN, -INFINITY));
    /* truncation toward zero, x / 0 = 0, INT_MIN / -1 wraps */
    binary(nest_divide, NEST_I32, I32(7, -7, 7, -7, 5, I32MIN, I32MIN, 0, I32MAX, -5),
           I32(2, 2, -2, -2, 0, -1, 1, 0, -1, 0),
           I32(3, -3, -3, 3, 0, I32MIN, I32MIN, 0, -I32MAX, 0));
    binary(nest_divide, NEST_I64, I64(7, -7, 5, I64MIN, I64MIN, -9, I64MAX),
           I64(2, 2, 0, -1, 2, 4, I64MAX), I64(3, -3, 0, I64MIN, -((int64_t)1 << 62), -2, 1));
}

static void test_maximum_minimum(void **state)
{
    (void)state;
    /* a > b ? a : b: a NaN in a gives b, a NaN in b gives b */
    binary(nest_maximum, NEST_F32, F32(1, NAN, 3, -INFINITY, 2), F32(2, 5, NAN, -INFINITY, -1),
           F32(2, 5, NAN, -INFINITY, 2));
    binary(nest_minimum, NEST_F32, F32(1, NAN, 3, -INFINITY, 2), F32(2, 5, NAN, -INFINITY, -1),
           F32(1, 5, NAN, -INFINITY, -1));
    binary(nest_maximum, NEST_F64, F64(NAN, 1, 0.5), F64(-1, NAN, 0.25), F64(-1, NAN, 0.5));
    binary(nest_minimum, NEST_F64, F64(NAN, 1, 0.5), F64(-1, NAN, 0.25), F64(-1, NAN, 0.25));
    binary(nest_maximum, NEST_I32, I32(I32MIN, 3, -4), I32(I32MAX, 3, -5), I32(I32MAX, 3, -4));
    binary(nest_minimum, NEST_I32, I32(I32MIN, 3, -4), I32(I32MAX, 3, -5), I32(I32MIN, 3, -5));
    binary(nest_maximum, NEST_I64, I64(I64MIN, (int64_t)1 << 40), I64(-1, (int64_t)1 << 41),
           I64(-1, (int64_t)1 << 41));
    binary(nest_minimum, NEST_I64, I64(I64MIN, (int64_t)1 << 40), I64(-1, (int64_t)1 << 41),
           I64(I64MIN, (int64_t)1 << 40));

    /* equal operands give b: maximum(-0, +0) is +0, minimum(+0, -0) is -0 */
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F64, 0, NULL), y = param(f, "y", NEST_F64, 0, NULL);
    assert_ok(f, nest_return(f, 2, VALUES(nest_maximum(f, x, y), nest_minimum(f, y, x)), NULL));
    double mx, mn;
    assert_ok(f, evaluate(f, ARGS(F64(-0.0), F64(0.0)), ARGS(&mx, &mn)));
    assert_true(mx == 0 && !signbit(mx));
    assert_true(mn == 0 && signbit(mn));
    nest_function_free(f);
}

static void test_power(void **state)
{
    (void)state;
    /* 3^20 = 3486784401 wraps to 3486784401 - 2^32; b < 0 gives 1 / a^-b truncated */
    binary(nest_power, NEST_I32, I32(2, -2, 2, 1, -1, -1, 0, 0, 3, 2, 5, -3, 2, 3, 0, 7, 0),
           I32(10, 3, -1, -5, -3, -4, 0, -2, 0, 31, 1, 3, 32, 20, 5, -1, 1),
           I32(1024, -8, 0, 1, -1, 1, 1, 0, 1, I32MIN, 5, -27, 0, -808182895, 0, 0, 0));
    /* 3^40 = 12157665459056928801 wraps to 3^40 - 2^64 */
    binary(nest_power, NEST_I64, I64(2, 2, -2, 10, 2, -1, 7, 3, -1, 1),
           I64(62, 63, 63, 18, 64, -3, -2, 40, I64MIN, I64MIN),
           I64((int64_t)1 << 62, I64MIN, I64MIN, 1000000000000000000, 0, -1, 0,
               -6289078614652622815, 1, 1));
    binary(nest_power, NEST_F32, F32(2, 2, 9, 0, -8, 4, 0, 2, -2),
           F32(10, -1, 0.5f, 0, 1.0f / 3, -0.5f, -1, 200, 3),
           F32(1024, 0.5f, 3, 1, NAN, 0.5f, INFINITY, INFINITY, -8));
    binary(nest_power, NEST_F64, F64(2, 2, 9, -8, 10, -2, 2), F64(10, -1, 0.5, 1.0 / 3, -1, 3, 0.5),
           F64(1024, 0.5, 3, NAN, 0.1, -8, 1.4142135623730951));
}

static void test_negative_abs(void **state)
{
    (void)state;
    unary(nest_negative, NEST_F32, F32(1, -2.5f, INFINITY, NAN, 0), F32(-1, 2.5f, -INFINITY, NAN, 0));
    unary(nest_negative, NEST_F64, F64(1, -2.5, -INFINITY), F64(-1, 2.5, INFINITY));
    unary(nest_negative, NEST_I32, I32(I32MIN, 5, 0, I32MAX), I32(I32MIN, -5, 0, -I32MAX));
    unary(nest_negative, NEST_I64, I64(I64MIN, -7, I64MAX), I64(I64MIN, 7, -I64MAX));
    unary(nest_abs, NEST_F32, F32(-2.5f, 2.5f, -INFINITY, NAN, -0.0f), F32(2.5f, 2.5f, INFINITY, NAN, 0));
    unary(nest_abs, NEST_F64, F64(-2.5, -0x1p-1074), F64(2.5, 0x1p-1074));
    unary(nest_abs, NEST_I32, I32(I32MIN, -5, 5, 0, I32MAX), I32(I32MIN, 5, 5, 0, I32MAX));
    unary(nest_abs, NEST_I64, I64(I64MIN, -5, I64MAX), I64(I64MIN, 5, I64MAX));

    /* the sign of zero: negative(0) is -0, abs(-0) is +0 */
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(2));
    assert_ok(f, nest_return(f, 2, VALUES(nest_negative(f, x), nest_abs(f, x)), NULL));
    float in[2] = {0.0f, -0.0f}, neg[2], ab[2];
    assert_ok(f, evaluate(f, ARGS(in), ARGS(neg, ab)));
    assert_true(signbit(neg[0]) && !signbit(neg[1]));
    assert_true(!signbit(ab[0]) && !signbit(ab[1]));
    nest_function_free(f);
}

static void test_transcendental(void **state)
{
    (void)state;
    unary_near(nest_exp, NEST_F64, F64(0, 1, -INFINITY, INFINITY, 710, NAN),
               F64(1, 2.718281828459045, 0, INFINITY, INFINITY, NAN), 1e-15);
    unary_near(nest_exp, NEST_F32, F32(0, 1, 89, -110), F32(1, 2.7182817f, INFINITY, 0), 1e-7);
    unary_near(nest_log, NEST_F64, F64(1, 0, -1, INFINITY, 2, 0x1p-1074),
               F64(0, -INFINITY, NAN, INFINITY, 0.6931471805599453, -744.4400719213812), 1e-15);
    unary_near(nest_log, NEST_F32, F32(1, 0, -1, 2), F32(0, -INFINITY, NAN, 0.6931472f), 1e-7);
    /* sqrt is exactly rounded in both types */
    unary(nest_sqrt, NEST_F32, F32(4, 2, 0, -1, INFINITY, 0x1p-148f),
          F32(2, 0x1.6a09e6p0f, 0, NAN, INFINITY, 0x1p-74f));
    unary(nest_sqrt, NEST_F64, F64(4, 2, -1, 0x1p-1074), F64(2, 0x1.6a09e667f3bcdp0, NAN, 0x1p-537));
    unary_near(nest_tanh, NEST_F64, F64(0, INFINITY, -INFINITY, 1, 20, NAN),
               F64(0, 1, -1, 0.7615941559557649, 1, NAN), 1e-15);
    unary_near(nest_tanh, NEST_F32, F32(0, 1, -1), F32(0, 0.7615942f, -0.7615942f), 1e-7);
}

/* Every arithmetic op on rank 0, size 1 and zero-size shapes, for each numeric type. */
static void test_elementwise_shapes(void **state)
{
    (void)state;
    static const struct {
        int rank;
        int64_t shape[3];
        int64_t n;
    } shapes[] = {{0, {0}, 1}, {1, {1}, 1}, {1, {0}, 0}, {3, {2, 0, 3}, 0}, {3, {1, 1, 1}, 1},
                  {2, {2, 3}, 6}, {3, {2, 1, 3}, 6}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        for (int k = 0; k < 4; k++) {
            nest_type t = num_types[k];
            int64_t n = shapes[s].n;
            nest_function *f = nest_function_new("f");
            nest_value x = param(f, "x", t, shapes[s].rank, shapes[s].shape);
            nest_value y = param(f, "y", t, shapes[s].rank, shapes[s].shape);
            /* x_i = i + 1, y_i = i + 3: (x + y) * y - x = (2i + 4)(i + 3) - (i + 1) */
            nest_value r = nest_subtract(f, nest_multiply(f, nest_add(f, x, y), y), x);
            void *xv = iota(t, n, 1), *yv = iota(t, n, 3), *want = iota(t, n, 0);
            for (int64_t i = 0; i < n; i++) {
                double w = (2.0 * (double)i + 4) * ((double)i + 3) - ((double)i + 1);
                if (t == NEST_F32)
                    ((float *)want)[i] = (float)w;
                else if (t == NEST_F64)
                    ((double *)want)[i] = w;
                else if (t == NEST_I32)
                    ((int32_t *)want)[i] = (int32_t)w;
                else
                    ((int64_t *)want)[i] = (int64_t)w;
            }
            check(f, r, ARGS(xv, yv), want);
            free(xv);
            free(yv);
            free(want);
            nest_function_free(f);
        }
    }
}

/* ---- comparisons and select ---- */

static void test_compare(void **state)
{
    (void)state;
    float fx[] = {1, 2, NAN, -0.0f, 3, NAN}, fy[] = {2, 2, 1, 0, -INFINITY, NAN};
    binary(nest_less, NEST_F32, fx, fy, B8(1, 0, 0, 0, 0, 0));
    binary(nest_greater, NEST_F32, fx, fy, B8(0, 0, 0, 0, 1, 0));
    binary(nest_equal, NEST_F32, fx, fy, B8(0, 1, 0, 1, 0, 0));
    double dx[] = {1, 2, NAN, -0.0, 3, NAN}, dy[] = {2, 2, 1, 0, -INFINITY, NAN};
    binary(nest_less, NEST_F64, dx, dy, B8(1, 0, 0, 0, 0, 0));
    binary(nest_greater, NEST_F64, dx, dy, B8(0, 0, 0, 0, 1, 0));
    binary(nest_equal, NEST_F64, dx, dy, B8(0, 1, 0, 1, 0, 0));
    int32_t ix[] = {I32MIN, 5, 7}, iy[] = {I32MAX, 5, -7};
    binary(nest_less, NEST_I32, ix, iy, B8(1, 0, 0));
    binary(nest_greater, NEST_I32, ix, iy, B8(0, 0, 1));
    binary(nest_equal, NEST_I32, ix, iy, B8(0, 1, 0));
    /* neighbours above 2^53 compare exactly */
    const int64_t p53 = (int64_t)1 << 53;
    int64_t lx[] = {p53 + 1, p53, I64MIN, 3}, ly[] = {p53, p53 + 1, I64MAX, 3};
    binary(nest_less, NEST_I64, lx, ly, B8(0, 1, 1, 0));
    binary(nest_greater, NEST_I64, lx, ly, B8(1, 0, 0, 0));
    binary(nest_equal, NEST_I64, lx, ly, B8(0, 0, 0, 1));
    binary(nest_equal, NEST_BOOL, B8(0, 1, 0, 1), B8(0, 0, 1, 1), B8(1, 0, 0, 1));
}

static void test_select(void **state)
{
    (void)state;
    uint8_t c[] = {1, 0, 1, 0};
    void *a[5] = {F32(1, 2, 3, 4), F64(1, 2, 3, 4), I32(I32MIN, 2, 3, 4), I64(1, I64MAX, 3, 4),
                  B8(1, 1, 0, 0)};
    void *b[5] = {F32(-1, -2, -3, NAN), F64(-1, -2, NAN, NAN), I32(-1, -2, -3, I32MAX),
                  I64(-1, I64MIN, -3, -4), B8(0, 1, 1, 0)};
    const void *want[5] = {F32(1, -2, 3, NAN), F64(1, -2, 3, NAN), I32(I32MIN, -2, 3, I32MAX),
                           I64(1, I64MIN, 3, -4), B8(1, 1, 0, 0)};
    for (int k = 0; k < 5; k++) {
        nest_function *f = nest_function_new("f");
        nest_value cv = param(f, "c", NEST_BOOL, 2, SHAPE(2, 2));
        nest_value av = param(f, "a", all_types[k], 2, SHAPE(2, 2));
        nest_value bv = param(f, "b", all_types[k], 2, SHAPE(2, 2));
        check(f, nest_select(f, cv, av, bv), ARGS(c, a[k], b[k]), want[k]);
        nest_function_free(f);
    }
    /* a condition computed by a comparison; scalars */
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_I64, 0, NULL), y = param(f, "y", NEST_I64, 0, NULL);
    check(f, nest_select(f, nest_less(f, x, y), x, y), ARGS(I64(-3), I64(-9)), I64(-9));
    nest_function_free(f);
}

/* ---- convert ---- */

static void test_convert_float_to_int(void **state)
{
    (void)state;
    /* truncation toward zero, saturation at both ends, NaN gives 0 */
    convert(NEST_F32, NEST_I32,
            F32(1.9f, -1.9f, 3e9f, -3e9f, NAN, INFINITY, -INFINITY, 2147483520.0f, -2147483648.0f,
                -0.5f, 2147483648.0f),
            I32(1, -1, I32MAX, I32MIN, 0, I32MAX, I32MIN, 2147483520, I32MIN, 0, I32MAX));
    convert(NEST_F64, NEST_I32,
            F64(2147483647.9, -2147483648.9, 2147483648.0, -2147483649.0, -0.5, 1e300, NAN, -1e300),
            I32(I32MAX, I32MIN, I32MAX, I32MIN, 0, I32MAX, 0, I32MIN));
    convert(NEST_F64, NEST_I64,
            F64(9.3e18, -9.3e18, 9223372036854774784.0, -9223372036854775808.0, NAN, 1.5, -1.5,
                INFINITY, 9223372036854775808.0),
            I64(I64MAX, I64MIN, 9223372036854774784, I64MIN, 0, 1, -1, I64MAX, I64MAX));
    convert(NEST_F32, NEST_I64, F32(1e19f, -1e19f, NAN, 123.75f, -INFINITY),
            I64(I64MAX, I64MIN, 0, 123, I64MIN));
}

static void test_convert_to_float(void **state)
{
    (void)state;
    convert(NEST_F32, NEST_F64, F32(0.1f, INFINITY, NAN, -0x1p-149f),
            F64(0.100000001490116119384765625, INFINITY, NAN, -0x1p-149));
    /* one rounding to nearest even; overflow to infinity, underflow to zero */
    convert(NEST_F64, NEST_F32,
            F64(0.1, 1e39, -1e39, 1e-50, NAN, 1 + 0x1p-24, 1 + 0x1.8p-23, 1 + 0x1p-24 + 0x1p-50),
            F32(0.1f, INFINITY, -INFINITY, 0, NAN, 1, 0x1.000004p0f, 0x1.000002p0f));
    convert(NEST_I32, NEST_F32, I32(16777217, -16777217, I32MAX, I32MIN, 3),
            F32(16777216.0f, -16777216.0f, 2147483648.0f, -2147483648.0f, 3));
    convert(NEST_I32, NEST_F64, I32(I32MAX, I32MIN), F64(2147483647.0, -2147483648.0));
    /* i64 to f32 rounds once: 2^60 + 2^36 + 1 is above the tie, so it rounds up (rounding
     * through f64 first would give 2^60) */
    if (!tu_under_valgrind()) /* valgrind converts int64 to float through double */
        convert(NEST_I64, NEST_F32,
                I64(((int64_t)1 << 60) + ((int64_t)1 << 36) + 1, I64MAX, I64MIN, 16777217),
                F32(0x1.000002p60f, 0x1p63f, -0x1p63f, 16777216.0f));
    convert(NEST_I64, NEST_F64, I64(((int64_t)1 << 53) + 1, I64MAX, I64MIN, -7),
            F64(0x1p53, 0x1p63, -0x1p63, -7));
}

static void test_convert_ints_and_bool(void **state)
{
    (void)state;
    /* integer narrowing wraps */
    convert(NEST_I64, NEST_I32, I64(((int64_t)1 << 32) + 5, (int64_t)1 << 31, -((int64_t)1 << 31) - 1, -1),
            I32(5, I32MIN, I32MAX, -1));
    convert(NEST_I32, NEST_I64, I32(I32MIN, -1, I32MAX), I64(I32MIN, -1, I32MAX));
    convert(NEST_I32, NEST_I32, I32(I32MIN, 7), I32(I32MIN, 7));
    convert(NEST_F64, NEST_F64, F64(NAN, 0.1), F64(NAN, 0.1));
    /* anything to bool is x != 0 (NaN is not 0) */
    convert(NEST_F32, NEST_BOOL, F32(0, -0.0f, 0.5f, NAN, -INFINITY, 0x1p-149f), B8(0, 0, 1, 1, 1, 1));
    convert(NEST_F64, NEST_BOOL, F64(1e-300, 0, NAN), B8(1, 0, 1));
    convert(NEST_I32, NEST_BOOL, I32(0, -1, 2, I32MIN), B8(0, 1, 1, 1));
    convert(NEST_I64, NEST_BOOL, I64(0, (int64_t)1 << 40, I64MIN), B8(0, 1, 1));
    convert(NEST_BOOL, NEST_BOOL, B8(0, 1), B8(0, 1));
    /* bool to numbers is 0 or 1 */
    convert(NEST_BOOL, NEST_F32, B8(0, 1), F32(0, 1));
    convert(NEST_BOOL, NEST_F64, B8(1, 0), F64(1, 0));
    convert(NEST_BOOL, NEST_I32, B8(0, 1), I32(0, 1));
    convert(NEST_BOOL, NEST_I64, B8(1, 1), I64(1, 1));
}

/* ---- constants ---- */

static void test_constant(void **state)
{
    nest_function *f = *state;
    float splat = 2.5f;
    check(f, nest_constant(f, NEST_F32, 2, SHAPE(2, 3), &splat, 1), NULL, F32(2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f));
    check(f, nest_constant(f, NEST_I32, 2, SHAPE(2, 2), I32(1, 2, 3, I32MIN), 4), NULL, I32(1, 2, 3, I32MIN));
    check(f, nest_constant(f, NEST_F64, 0, NULL, F64(-0.125), 1), NULL, F64(-0.125));
    check(f, nest_constant(f, NEST_I64, 1, SHAPE(3), I64(I64MIN), 1), NULL, I64(I64MIN, I64MIN, I64MIN));
    /* bool values are 0 or 1 whatever bytes were given */
    check(f, nest_constant(f, NEST_BOOL, 1, SHAPE(4), B8(0, 2, 1, 255), 4), NULL, B8(0, 1, 1, 1));
    check(f, nest_constant(f, NEST_BOOL, 1, SHAPE(3), B8(7), 1), NULL, B8(1, 1, 1));
    check(f, nest_constant(f, NEST_F32, 1, SHAPE(0), NULL, 0), NULL, F32(0));
    check(f, nest_constant(f, NEST_F32, 2, SHAPE(3, 0), &splat, 1), NULL, F32(0));
    /* the data is copied */
    float data[2] = {1, 2};
    nest_value c = nest_constant(f, NEST_F32, 1, SHAPE(2), data, 2);
    data[0] = 100;
    check(f, c, NULL, F32(1, 2));
}

/* ---- dot ---- */

static void test_dot_small(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        nest_type t = num_types[k];
        nest_function *f = nest_function_new("f");
        nest_value a = param(f, "a", t, 1, SHAPE(3)), m = param(f, "m", t, 2, SHAPE(2, 3));
        nest_value n = param(f, "n", t, 2, SHAPE(3, 2)), s = param(f, "s", t, 0, NULL);
        nest_value b = param(f, "b", t, 1, SHAPE(3));
        nest_value r[] = {nest_dot(f, a, b), nest_dot(f, m, b), nest_dot(f, a, n), nest_dot(f, m, n),
                          nest_dot(f, s, a), nest_dot(f, m, s), nest_dot(f, s, s)};
        assert_ok(f, nest_return(f, 7, r, NULL));
        /* a = 1 2 3, m = 1..6, n = 7..12, s = 3, b = -1 0 1 */
        void *av = iota(t, 3, 1), *mv = iota(t, 6, 1), *nv = iota(t, 6, 7), *sv = iota(t, 1, 3);
        void *bv = iota(t, 3, -1);
        void *out[7];
        for (int i = 0; i < 7; i++)
            out[i] = calloc(6, 8);
        assert_ok(f, evaluate(f, ARGS(av, mv, nv, sv, bv), out));
        /* a.b = -1 + 3 = 2; m.b = (2, 2); a.n = (7+18+33, 8+20+36); m.n = (58 64; 139 154) */
        void *want[7];
        double wd[7][6] = {{2}, {2, 2}, {58, 64}, {58, 64, 139, 154}, {3, 6, 9},
                           {3, 6, 9, 12, 15, 18}, {9}};
        int64_t counts[7] = {1, 2, 2, 4, 3, 6, 1};
        for (int i = 0; i < 7; i++) {
            want[i] = iota(t, counts[i], 0);
            for (int j = 0; j < counts[i]; j++) {
                if (t == NEST_F32)
                    ((float *)want[i])[j] = (float)wd[i][j];
                else if (t == NEST_F64)
                    ((double *)want[i])[j] = wd[i][j];
                else if (t == NEST_I32)
                    ((int32_t *)want[i])[j] = (int32_t)wd[i][j];
                else
                    ((int64_t *)want[i])[j] = (int64_t)wd[i][j];
            }
            assert_exact(t, out[i], want[i], counts[i]);
            free(want[i]);
            free(out[i]);
        }
        free(av);
        free(mv);
        free(nv);
        free(sv);
        free(bv);
        nest_function_free(f);
    }
}

/* [2,3,4].[4,5] with a[i,j,k] = 12i + 4j + k and b[k,l] = 5k + l:
 * sum over k of (12i + 4j + k)(5k + l) = (12i + 4j)(30 + 4l) + 70 + 6l. */
static void test_dot_3d(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        nest_type t = num_types[k];
        nest_function *f = nest_function_new("f");
        nest_value a = param(f, "a", t, 3, SHAPE(2, 3, 4)), b = param(f, "b", t, 2, SHAPE(4, 5));
        void *av = iota(t, 24, 0), *bv = iota(t, 20, 0), *want = iota(t, 30, 0);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int l = 0; l < 5; l++) {
                    int64_t w = (12 * i + 4 * j) * (30 + 4 * l) + 70 + 6 * l, at = (i * 3 + j) * 5 + l;
                    if (t == NEST_F32)
                        ((float *)want)[at] = (float)w;
                    else if (t == NEST_F64)
                        ((double *)want)[at] = (double)w;
                    else if (t == NEST_I32)
                        ((int32_t *)want)[at] = (int32_t)w;
                    else
                        ((int64_t *)want)[at] = w;
                }
        check(f, nest_dot(f, a, b), ARGS(av, bv), want);
        free(av);
        free(bv);
        free(want);
        nest_function_free(f);
    }
}

static void test_dot_edges(void **state)
{
    (void)state;
    /* a zero-length contraction gives zeros */
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(2, 0)), b = param(f, "b", NEST_F32, 2, SHAPE(0, 3));
    check(f, nest_dot(f, a, b), ARGS(NULL, NULL), F32(0, 0, 0, 0, 0, 0));
    nest_function_free(f);
    f = nest_function_new("f");
    a = param(f, "a", NEST_I64, 1, SHAPE(0));
    check(f, nest_dot(f, a, a), ARGS(NULL), I64(0));
    nest_function_free(f);
    /* zero-size results */
    f = nest_function_new("f");
    a = param(f, "a", NEST_F64, 2, SHAPE(0, 3));
    b = param(f, "b", NEST_F64, 2, SHAPE(3, 2));
    nest_value c = param(f, "c", NEST_F64, 2, SHAPE(2, 3));
    nest_value e = param(f, "e", NEST_F64, 2, SHAPE(3, 0));
    assert_ok(f, nest_return(f, 2, VALUES(nest_dot(f, a, b), nest_dot(f, c, e)), NULL));
    double six[6] = {0};
    assert_ok(f, evaluate(f, ARGS(NULL, six, six, NULL), ARGS(NULL, NULL)));
    nest_function_free(f);
    /* integer dot products wrap */
    f = nest_function_new("f");
    a = param(f, "a", NEST_I32, 1, SHAPE(2));
    check(f, nest_dot(f, a, a), ARGS(I32(65536, 65536)), I32(0));
    nest_function_free(f);
    f = nest_function_new("f");
    a = param(f, "a", NEST_I32, 1, SHAPE(2));
    b = param(f, "b", NEST_I32, 1, SHAPE(2));
    check(f, nest_dot(f, a, b), ARGS(I32(I32MAX, 1), I32(2, 2)), I32(0));
    nest_function_free(f);
    f = nest_function_new("f");
    a = param(f, "a", NEST_I64, 1, SHAPE(2));
    check(f, nest_dot(f, a, a), ARGS(I64((int64_t)1 << 32, (int64_t)1 << 31)), I64((int64_t)1 << 62));
    nest_function_free(f);
    /* floats accumulate in double: 1e8 + 1 - 1e8 is 1 (f32 accumulation would lose the 1) */
    f = nest_function_new("f");
    a = param(f, "a", NEST_F32, 1, SHAPE(3));
    b = param(f, "b", NEST_F32, 1, SHAPE(3));
    check(f, nest_dot(f, a, b), ARGS(F32(1e8f, 1, -1e8f), F32(1, 1, 1)), F32(1));
    nest_function_free(f);
    /* NaN and infinity propagate */
    f = nest_function_new("f");
    a = param(f, "a", NEST_F64, 2, SHAPE(2, 2));
    b = param(f, "b", NEST_F64, 1, SHAPE(2));
    check(f, nest_dot(f, a, b), ARGS(F64(1, NAN, INFINITY, 1), F64(1, 1)), F64(NAN, INFINITY));
    nest_function_free(f);
}

/* ---- broadcast ---- */

static void test_broadcast(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("f");
    nest_value v = param(f, "v", NEST_F32, 1, SHAPE(3));
    check(f, nest_broadcast(f, v, 2, SHAPE(2, 3), 1, SHAPE(0)), ARGS(F32(1, 2, 3)), F32(1, 2, 3, 1, 2, 3));
    check(f, nest_broadcast(f, v, 2, SHAPE(3, 2), 1, SHAPE(1)), ARGS(F32(1, 2, 3)), F32(1, 1, 2, 2, 3, 3));
    check(f, nest_broadcast(f, v, 1, SHAPE(3), 0, NULL), ARGS(F32(1, 2, 3)), F32(1, 2, 3));
    nest_function_free(f);

    f = nest_function_new("f");
    nest_value s = param(f, "s", NEST_I64, 0, NULL);
    check(f, nest_broadcast(f, s, 2, SHAPE(2, 2), 2, SHAPE(0, 1)), ARGS(I64(I64MIN)),
          I64(I64MIN, I64MIN, I64MIN, I64MIN));
    check(f, nest_broadcast(f, s, 0, NULL, 0, NULL), ARGS(I64(-4)), I64(-4));
    nest_function_free(f);

    f = nest_function_new("f");
    nest_value bv = param(f, "b", NEST_BOOL, 1, SHAPE(2));
    check(f, nest_broadcast(f, bv, 2, SHAPE(2, 3), 1, SHAPE(1)), ARGS(B8(1, 0)), B8(1, 1, 1, 0, 0, 0));
    check(f, nest_broadcast(f, bv, 3, SHAPE(2, 0, 2), 2, SHAPE(0, 1)), ARGS(B8(1, 0)), B8(0));
    nest_function_free(f);

    /* v[5] to [3,5,4] on new axes 0 and 2: out[i,j,k] = v[j]; m[2,3] to [2,4,3] on axis 1:
     * out[i,j,k] = m[i,k]; axes given in any order */
    for (int t = 0; t < 5; t++) {
        f = nest_function_new("f");
        v = param(f, "v", all_types[t], 1, SHAPE(5));
        nest_value m = param(f, "m", all_types[t], 2, SHAPE(2, 3));
        nest_value r1 = nest_broadcast(f, v, 3, SHAPE(3, 5, 4), 2, SHAPE(2, 0));
        nest_value r2 = nest_broadcast(f, m, 3, SHAPE(2, 4, 3), 1, SHAPE(1));
        assert_ok(f, nest_return(f, 2, VALUES(r1, r2), NULL));
        size_t size = nest_type_size(all_types[t]);
        unsigned char *vv = iota(all_types[t], 5, 1), *mv = iota(all_types[t], 6, 1);
        unsigned char *o1 = malloc(60 * size), *o2 = malloc(24 * size);
        unsigned char *w1 = malloc(60 * size), *w2 = malloc(24 * size);
        assert_ok(f, evaluate(f, ARGS(vv, mv), ARGS(o1, o2)));
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++)
                for (int k = 0; k < 4; k++)
                    memcpy(w1 + ((i * 5 + j) * 4 + k) * size, vv + j * size, size);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 3; k++)
                    memcpy(w2 + ((i * 4 + j) * 3 + k) * size, mv + (i * 3 + k) * size, size);
        assert_exact(all_types[t], o1, w1, 60);
        assert_exact(all_types[t], o2, w2, 24);
        free(vv);
        free(mv);
        free(o1);
        free(o2);
        free(w1);
        free(w2);
        nest_function_free(f);
    }
}

/* ---- reshape ---- */

static void test_reshape(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(2, 3));
    float av[] = {1, 2, 3, 4, 5, 6};
    check(f, nest_reshape(f, a, NULL, 2, SHAPE(3, 2)), ARGS(av), F32(1, 2, 3, 4, 5, 6));
    check(f, nest_reshape(f, a, SHAPE(0, 1), 1, SHAPE(6)), ARGS(av), F32(1, 2, 3, 4, 5, 6));
    /* a 2-d transpose */
    check(f, nest_reshape(f, a, SHAPE(1, 0), 2, SHAPE(3, 2)), ARGS(av), F32(1, 4, 2, 5, 3, 6));
    check(f, nest_reshape(f, a, SHAPE(1, 0), 1, SHAPE(6)), ARGS(av), F32(1, 4, 2, 5, 3, 6));
    nest_function_free(f);

    f = nest_function_new("f");
    nest_value s = param(f, "s", NEST_I32, 0, NULL);
    nest_value one = nest_reshape(f, s, NULL, 3, SHAPE(1, 1, 1));
    check(f, nest_reshape(f, one, SHAPE(2, 1, 0), 0, NULL), ARGS(I32(-5)), I32(-5));
    nest_function_free(f);

    f = nest_function_new("f");
    nest_value e = param(f, "e", NEST_F64, 2, SHAPE(0, 3));
    check(f, nest_reshape(f, e, SHAPE(1, 0), 2, SHAPE(3, 0)), ARGS(NULL), F64(0));
    nest_function_free(f);

    /* order [2,0,1] of a[2,3,4] (a[i,j,k] = 12i + 4j + k): out[k,i,j] = a[i,j,k], whatever shape
     * the sequence is laid out in */
    for (int t = 0; t < 5; t++) {
        nest_type ty = all_types[t];
        f = nest_function_new("f");
        nest_value c = param(f, "c", ty, 3, SHAPE(2, 3, 4));
        nest_value r1 = nest_reshape(f, c, SHAPE(2, 0, 1), 3, SHAPE(4, 2, 3));
        nest_value r2 = nest_reshape(f, c, SHAPE(2, 0, 1), 2, SHAPE(2, 12));
        nest_value r3 = nest_reshape(f, c, SHAPE(1, 2, 0), 1, SHAPE(24));
        assert_ok(f, nest_return(f, 3, VALUES(r1, r2, r3), NULL));
        size_t size = nest_type_size(ty);
        unsigned char *cv = iota(ty, 24, 0), *o[3], *w[2];
        for (int i = 0; i < 3; i++)
            o[i] = malloc(24 * size);
        w[0] = malloc(24 * size);
        w[1] = malloc(24 * size);
        assert_ok(f, evaluate(f, ARGS(cv), ARGS(o[0], o[1], o[2])));
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++)
                    memcpy(w[0] + ((k * 2 + i) * 3 + j) * size, cv + (12 * i + 4 * j + k) * size, size);
        /* order [1,2,0]: out[j,k,i] = a[i,j,k] */
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                for (int i = 0; i < 2; i++)
                    memcpy(w[1] + ((j * 4 + k) * 2 + i) * size, cv + (12 * i + 4 * j + k) * size, size);
        assert_exact(ty, o[0], w[0], 24);
        assert_exact(ty, o[1], w[0], 24);
        assert_exact(ty, o[2], w[1], 24);
        free(cv);
        for (int i = 0; i < 3; i++)
            free(o[i]);
        free(w[0]);
        free(w[1]);
        nest_function_free(f);
    }
}

/* Rank 32: reversing the axes of [2,1,...,1,3] is the 2-d transpose of its 6 elements. */
static void test_rank32(void **state)
{
    nest_function *f = *state;
    int64_t shape[32], rshape[32], order[32];
    for (int i = 0; i < 32; i++) {
        shape[i] = 1;
        order[i] = 31 - i;
    }
    shape[0] = 2;
    shape[31] = 3;
    for (int i = 0; i < 32; i++)
        rshape[i] = shape[31 - i];
    nest_value x = nest_parameter(f, "x", NEST_I32, 32, shape, NEST_ROW_MAJOR);
    nest_value t = nest_reshape(f, x, order, 32, rshape);
    nest_value s = nest_sum(f, nest_broadcast(f, t, 32, rshape, 0, NULL), 1, SHAPE(0));
    assert_ok(f, nest_return(f, 2, VALUES(t, s), NULL));
    int32_t out[6], sum[2];
    assert_ok(f, evaluate(f, ARGS(I32(1, 2, 3, 4, 5, 6)), ARGS(out, sum)));
    assert_exact(NEST_I32, out, I32(1, 4, 2, 5, 3, 6), 6);
    assert_exact(NEST_I32, sum, I32(6, 15), 2);
}

/* ---- slice ---- */

static void test_slice(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("f");
    nest_value v = param(f, "v", NEST_I64, 1, SHAPE(10));
    void *vv = iota(NEST_I64, 10, 0);
    check(f, nest_slice(f, v, SHAPE(2), SHAPE(8), NULL), ARGS(vv), I64(2, 3, 4, 5, 6, 7));
    check(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(3)), ARGS(vv), I64(2, 5));
    check(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(4)), ARGS(vv), I64(2, 6));
    check(f, nest_slice(f, v, SHAPE(0), SHAPE(10), SHAPE(3)), ARGS(vv), I64(0, 3, 6, 9));
    check(f, nest_slice(f, v, SHAPE(9), SHAPE(10), SHAPE(5)), ARGS(vv), I64(9));
    check(f, nest_slice(f, v, SHAPE(10), SHAPE(10), NULL), ARGS(vv), I64(0));
    free(vv);
    nest_function_free(f);

    /* m[10,12] with m[i,j] = 12i + j, lower [1,2], upper [9,12], strides [2,3]:
     * out[i,j] = 12(1 + 2i) + 2 + 3j for i, j < 4 */
    for (int t = 0; t < 5; t++) {
        nest_type ty = all_types[t];
        f = nest_function_new("f");
        nest_value m = param(f, "m", ty, 2, SHAPE(10, 12));
        unsigned char *mv = iota(ty, 120, 0), *want = malloc(16 * 8);
        size_t size = nest_type_size(ty);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                memcpy(want + (i * 4 + j) * size, mv + (12 * (1 + 2 * i) + 2 + 3 * j) * size, size);
        check(f, nest_slice(f, m, SHAPE(1, 2), SHAPE(9, 12), SHAPE(2, 3)), ARGS(mv), want);
        nest_function_free(f);
        /* without strides: rows 3..4, columns 5..7 */
        f = nest_function_new("f");
        m = param(f, "m", ty, 2, SHAPE(10, 12));
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                memcpy(want + (i * 3 + j) * size, mv + (12 * (3 + i) + 5 + j) * size, size);
        check(f, nest_slice(f, m, SHAPE(3, 5), SHAPE(5, 8), NULL), ARGS(mv), want);
        nest_function_free(f);
        free(mv);
        free(want);
    }

    f = nest_function_new("f");
    nest_value s = param(f, "s", NEST_F32, 0, NULL);
    check(f, nest_slice(f, s, NULL, NULL, NULL), ARGS(F32(7.5f)), F32(7.5f));
    nest_function_free(f);
}

/* ---- concat ---- */

static void test_concat_2d(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("f");
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(2, 2));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(1, 2));
    nest_value c = param(f, "c", NEST_F32, 2, SHAPE(2, 1));
    nest_value e = param(f, "e", NEST_F32, 2, SHAPE(0, 2));
    void *args[] = {F32(1, 2, 3, 4), F32(5, 6), F32(7, 8), NULL};
    check(f, nest_concat(f, 2, VALUES(a, b), 0), args, F32(1, 2, 3, 4, 5, 6));
    check(f, nest_concat(f, 2, VALUES(b, a), 0), args, F32(5, 6, 1, 2, 3, 4));
    check(f, nest_concat(f, 2, VALUES(a, c), 1), args, F32(1, 2, 7, 3, 4, 8));
    check(f, nest_concat(f, 3, VALUES(c, a, c), 1), args, F32(7, 1, 2, 7, 8, 3, 4, 8));
    check(f, nest_concat(f, 3, VALUES(a, e, b), 0), args, F32(1, 2, 3, 4, 5, 6));
    check(f, nest_concat(f, 1, VALUES(a), 1), args, F32(1, 2, 3, 4));
    /* the same operand twice */
    check(f, nest_concat(f, 2, VALUES(b, b), 1), args, F32(5, 6, 5, 6));
    nest_function_free(f);

    f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_BOOL, 1, SHAPE(2)), y = param(f, "y", NEST_BOOL, 1, SHAPE(3));
    check(f, nest_concat(f, 2, VALUES(x, y), 0), ARGS(B8(1, 0), B8(0, 1, 1)), B8(1, 0, 0, 1, 1));
    nest_function_free(f);
}

/* Three operands of shape [2,3,4] except along the axis, where operand t has t + 1 entries;
 * operand t holds 100 t + its row-major index. */
static void test_concat_3d(void **state)
{
    (void)state;
    for (int axis = 0; axis < 3; axis++) {
        for (int ty = 0; ty < 4; ty++) {
            nest_type t = num_types[ty];
            nest_function *f = nest_function_new("f");
            nest_value in[3];
            int64_t shapes[3][3], base[3] = {2, 3, 4};
            void *vals[3];
            for (int k = 0; k < 3; k++) {
                memcpy(shapes[k], base, sizeof base);
                shapes[k][axis] = k + 1;
                char name[4] = {'x', (char)('0' + k), 0};
                in[k] = param(f, name, t, 3, shapes[k]);
                vals[k] = iota(t, shapes[k][0] * shapes[k][1] * shapes[k][2], 100 * k);
            }
            int64_t oshape[3] = {2, 3, 4};
            oshape[axis] = 6;
            void *want = iota(t, 6 * 24 / base[axis], 0);
            int64_t at = 0;
            for (int64_t i = 0; i < oshape[0]; i++)
                for (int64_t j = 0; j < oshape[1]; j++)
                    for (int64_t l = 0; l < oshape[2]; l++, at++) {
                        int64_t idx[3] = {i, j, l};
                        int64_t p = idx[axis], k = p < 1 ? 0 : p < 3 ? 1 : 2;
                        idx[axis] = p - (k == 0 ? 0 : k == 1 ? 1 : 3);
                        int64_t local = (idx[0] * shapes[k][1] + idx[1]) * shapes[k][2] + idx[2];
                        double v = 100.0 * (double)k + (double)local;
                        if (t == NEST_F32)
                            ((float *)want)[at] = (float)v;
                        else if (t == NEST_F64)
                            ((double *)want)[at] = v;
                        else if (t == NEST_I32)
                            ((int32_t *)want)[at] = (int32_t)v;
                        else
                            ((int64_t *)want)[at] = (int64_t)v;
                    }
            check(f, nest_concat(f, 3, in, axis), ARGS(vals[0], vals[1], vals[2]), want);
            for (int k = 0; k < 3; k++)
                free(vals[k]);
            free(want);
            nest_function_free(f);
        }
    }
}

/* ---- reductions ---- */

static void test_reduce_small(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("f");
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(2, 3));
    void *xv = F32(1, 2, 3, 4, 5, 6);
    check(f, nest_sum(f, x, 1, SHAPE(0)), ARGS(xv), F32(5, 7, 9));
    check(f, nest_sum(f, x, 1, SHAPE(1)), ARGS(xv), F32(6, 15));
    check(f, nest_sum(f, x, 2, SHAPE(0, 1)), ARGS(xv), F32(21));
    check(f, nest_sum(f, x, 2, SHAPE(1, 0)), ARGS(xv), F32(21));
    check(f, nest_sum(f, x, 0, NULL), ARGS(xv), F32(1, 2, 3, 4, 5, 6));
    check(f, nest_max(f, x, 1, SHAPE(0)), ARGS(F32(1, 9, -3, 4, 5, -6)), F32(4, 9, -3));
    check(f, nest_min(f, x, 1, SHAPE(1)), ARGS(F32(1, 9, -3, 4, 5, -6)), F32(-3, -6));
    check(f, nest_max(f, x, 2, SHAPE(0, 1)), ARGS(F32(-INFINITY, -7, -3, -4, -5, -6)), F32(-3));
    nest_function_free(f);

    /* integer sums wrap; max and min of the extremes */
    f = nest_function_new("f");
    nest_value i = param(f, "i", NEST_I32, 1, SHAPE(3));
    check(f, nest_sum(f, i, 1, SHAPE(0)), ARGS(I32(I32MAX, 1, 0)), I32(I32MIN));
    check(f, nest_sum(f, i, 1, SHAPE(0)), ARGS(I32(I32MIN, -1, -1)), I32(I32MAX - 1));
    check(f, nest_sum(f, i, 1, SHAPE(0)), ARGS(I32(I32MIN, -1, 5)), I32(I32MIN + 4));
    check(f, nest_max(f, i, 1, SHAPE(0)), ARGS(I32(I32MIN, I32MIN, I32MIN)), I32(I32MIN));
    check(f, nest_min(f, i, 1, SHAPE(0)), ARGS(I32(I32MAX, 3, I32MAX)), I32(3));
    nest_function_free(f);
    f = nest_function_new("f");
    nest_value l = param(f, "l", NEST_I64, 1, SHAPE(2));
    check(f, nest_sum(f, l, 1, SHAPE(0)), ARGS(I64(I64MAX, I64MAX)), I64(-2));
    check(f, nest_max(f, l, 1, SHAPE(0)), ARGS(I64(I64MIN, I64MIN + 1)), I64(I64MIN + 1));
    check(f, nest_min(f, l, 1, SHAPE(0)), ARGS(I64(I64MAX, I64MAX - 1)), I64(I64MAX - 1));
    nest_function_free(f);

    /* float sums accumulate in double: 1e8 + 1 - 1e8 is 1 */
    f = nest_function_new("f");
    nest_value g = param(f, "g", NEST_F32, 1, SHAPE(3));
    check(f, nest_sum(f, g, 1, SHAPE(0)), ARGS(F32(1e8f, 1, -1e8f)), F32(1));
    check(f, nest_sum(f, g, 1, SHAPE(0)), ARGS(F32(0x1p127f, 0x1p127f, -0x1p127f)), F32(0x1p127f));
    check(f, nest_sum(f, g, 1, SHAPE(0)), ARGS(F32(1, NAN, 2)), F32(NAN));
    check(f, nest_sum(f, g, 1, SHAPE(0)), ARGS(F32(INFINITY, -INFINITY, 2)), F32(NAN));
    /* max and min fold with `x > acc ? x : acc` (ops.def): a NaN element never wins */
    check(f, nest_max(f, g, 1, SHAPE(0)), ARGS(F32(1, NAN, 3)), F32(3));
    check(f, nest_min(f, g, 1, SHAPE(0)), ARGS(F32(NAN, 2, 1)), F32(1));
    nest_function_free(f);
    f = nest_function_new("f");
    nest_value d = param(f, "d", NEST_F64, 1, SHAPE(4));
    check(f, nest_sum(f, d, 1, SHAPE(0)), ARGS(F64(0.1, 0.2, 0.3, -0.6)), F64(0.1 + 0.2 + 0.3 - 0.6));
    check(f, nest_max(f, d, 1, SHAPE(0)), ARGS(F64(-1, -0.5, -2, -3)), F64(-0.5));
    nest_function_free(f);
}

/* x[2,3,4] with x[i,j,k] = 12i + 4j + k: sum over axes 0 and 2 is 60 + 32j; max over axis 1 is
 * 12i + 8 + k; min over axes 1 and 2 is 12i; sum over all is 276. For every numeric type. */
static void test_reduce_3d(void **state)
{
    (void)state;
    for (int ty = 0; ty < 4; ty++) {
        nest_type t = num_types[ty];
        nest_function *f = nest_function_new("f");
        nest_value x = param(f, "x", t, 3, SHAPE(2, 3, 4));
        nest_value r[] = {nest_sum(f, x, 2, SHAPE(2, 0)), nest_max(f, x, 1, SHAPE(1)),
                          nest_min(f, x, 2, SHAPE(1, 2)), nest_sum(f, x, 3, SHAPE(0, 1, 2)),
                          nest_min(f, x, 0, NULL)};
        assert_ok(f, nest_return(f, 5, r, NULL));
        void *xv = iota(t, 24, 0), *out[5], *want[5];
        int64_t counts[5] = {3, 8, 2, 1, 24};
        for (int k = 0; k < 5; k++) {
            out[k] = malloc(24 * 8);
            want[k] = iota(t, 24, 0);
        }
        for (int j = 0; j < 3; j++) {
            double v = 60 + 32 * j;
            if (t == NEST_F32) ((float *)want[0])[j] = (float)v;
            else if (t == NEST_F64) ((double *)want[0])[j] = v;
            else if (t == NEST_I32) ((int32_t *)want[0])[j] = (int32_t)v;
            else ((int64_t *)want[0])[j] = (int64_t)v;
        }
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++) {
                double v = 12 * i + 8 + k;
                int at = i * 4 + k;
                if (t == NEST_F32) ((float *)want[1])[at] = (float)v;
                else if (t == NEST_F64) ((double *)want[1])[at] = v;
                else if (t == NEST_I32) ((int32_t *)want[1])[at] = (int32_t)v;
                else ((int64_t *)want[1])[at] = (int64_t)v;
            }
        for (int i = 0; i < 2; i++) {
            double v = 12 * i;
            if (t == NEST_F32) ((float *)want[2])[i] = (float)v;
            else if (t == NEST_F64) ((double *)want[2])[i] = v;
            else if (t == NEST_I32) ((int32_t *)want[2])[i] = (int32_t)v;
            else ((int64_t *)want[2])[i] = (int64_t)v;
        }
        if (t == NEST_F32) ((float *)want[3])[0] = 276;
        else if (t == NEST_F64) ((double *)want[3])[0] = 276;
        else if (t == NEST_I32) ((int32_t *)want[3])[0] = 276;
        else ((int64_t *)want[3])[0] = 276;
        assert_ok(f, evaluate(f, ARGS(xv), out));
        for (int k = 0; k < 5; k++) {
            assert_exact(t, out[k], want[k], counts[k]);
            free(out[k]);
            free(want[k]);
        }
        free(xv);
        nest_function_free(f);
    }
}

/* Reductions over zero elements: sum is 0, max is the lowest value, min the highest. */
static void test_reduce_empty(void **state)
{
    (void)state;
    const void *zero[4] = {F32(0, 0, 0), F64(0, 0, 0), I32(0, 0, 0), I64(0, 0, 0)};
    const void *low[4] = {F32(-INFINITY, -INFINITY, -INFINITY), F64(-INFINITY, -INFINITY, -INFINITY),
                          I32(I32MIN, I32MIN, I32MIN), I64(I64MIN, I64MIN, I64MIN)};
    const void *high[4] = {F32(INFINITY, INFINITY, INFINITY), F64(INFINITY, INFINITY, INFINITY),
                           I32(I32MAX, I32MAX, I32MAX), I64(I64MAX, I64MAX, I64MAX)};
    for (int ty = 0; ty < 4; ty++) {
        nest_type t = num_types[ty];
        nest_function *f = nest_function_new("f");
        nest_value x = param(f, "x", t, 2, SHAPE(0, 3));
        check(f, nest_sum(f, x, 1, SHAPE(0)), ARGS(NULL), zero[ty]);
        check(f, nest_max(f, x, 1, SHAPE(0)), ARGS(NULL), low[ty]);
        check(f, nest_min(f, x, 1, SHAPE(0)), ARGS(NULL), high[ty]);
        check(f, nest_sum(f, x, 2, SHAPE(0, 1)), ARGS(NULL), zero[ty]);
        check(f, nest_max(f, x, 2, SHAPE(0, 1)), ARGS(NULL), low[ty]);
        check(f, nest_min(f, x, 2, SHAPE(1, 0)), ARGS(NULL), high[ty]);
        /* reducing the non-empty axis leaves an empty result */
        check(f, nest_sum(f, x, 1, SHAPE(1)), ARGS(NULL), zero[ty]);
        nest_function_free(f);
    }
}

/* ---- tuples, results, layouts ---- */

static void test_tuples_results(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F64, 1, SHAPE(2)), b = param(f, "b", NEST_I32, 0, NULL);
    nest_value t = nest_tuple(f, 2, VALUES(a, b));
    nest_value t2 = nest_tuple(f, 2, VALUES(nest_add(f, nest_get(f, t, 0), a), t));
    nest_value g = nest_get(f, nest_get(f, t2, 1), 1); /* b */
    nest_value twice = nest_multiply(f, g, nest_get(f, t, 1));
    /* results: a + a, a, b, b * b, b */
    assert_ok(f, nest_return(f, 3, VALUES(t2, twice, g), NULL));
    assert_int_equal(nest_result_count(f), 5);
    double r0[2], r1[2];
    int32_t r2, r3, r4;
    double av[2] = {1.5, -2};
    int32_t bv = -7;
    assert_ok(f, evaluate(f, ARGS(av, &bv), ARGS(r0, r1, &r2, &r3, &r4)));
    assert_exact(NEST_F64, r0, F64(3, -4), 2);
    assert_exact(NEST_F64, r1, F64(1.5, -2), 2);
    assert_int_equal(r2, -7);
    assert_int_equal(r3, 49);
    assert_int_equal(r4, -7);
    /* the arguments are not changed, and a second evaluation gives the same */
    assert_exact(NEST_F64, av, F64(1.5, -2), 2);
    memset(r0, 0, sizeof r0);
    assert_ok(f, evaluate(f, ARGS(av, &bv), ARGS(r0, r1, &r2, &r3, &r4)));
    assert_exact(NEST_F64, r0, F64(3, -4), 2);
}

static void test_one_array_two_arguments(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_I32, 1, SHAPE(3)), y = param(f, "y", NEST_I32, 1, SHAPE(3));
    nest_value r = nest_subtract(f, nest_multiply(f, x, y), y);
    int32_t p[3] = {2, -3, 4};
    check(f, r, ARGS(p, p), I32(2, 12, 12));
}

/* x[2,3] col-major holds x[i,j] at j*2 + i. */
static void test_column_major(void **state)
{
    nest_function *f = *state;
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(2, 3), NEST_COL_MAJOR);
    nest_value y = param(f, "y", NEST_F32, 2, SHAPE(2, 3));
    nest_value c = nest_parameter(f, "c", NEST_I64, 3, SHAPE(2, 3, 4), NEST_COL_MAJOR);
    nest_value s = nest_parameter(f, "s", NEST_F64, 0, NULL, NEST_COL_MAJOR);
    nest_value v = nest_parameter(f, "v", NEST_BOOL, 1, SHAPE(3), NEST_COL_MAJOR);
    nest_value sum = nest_add(f, x, y);
    const nest_layout lay[] = {NEST_ROW_MAJOR, NEST_COL_MAJOR, NEST_ROW_MAJOR, NEST_COL_MAJOR,
                               NEST_COL_MAJOR, NEST_COL_MAJOR, NEST_ROW_MAJOR};
    assert_ok(f, nest_return(f, 7, VALUES(sum, sum, c, c, y, s, v), lay));
    float xv[6] = {1, 4, 2, 5, 3, 6}; /* x = 1 2 3; 4 5 6 */
    float yv[6] = {10, 20, 30, 40, 50, 60};
    int64_t cv[24]; /* c[i,j,k] = 12i + 4j + k, stored at i + 2j + 6k */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                cv[i + 2 * j + 6 * k] = 12 * i + 4 * j + k;
    double sv = 0.25;
    uint8_t vv[3] = {1, 0, 1};
    float r0[6], r1[6], r4[6];
    int64_t r2[24], r3[24];
    double r5;
    uint8_t r6[3];
    assert_ok(f, evaluate(f, ARGS(xv, yv, cv, &sv, vv), ARGS(r0, r1, r2, r3, r4, &r5, r6)));
    assert_exact(NEST_F32, r0, F32(11, 22, 33, 44, 55, 66), 6);
    assert_exact(NEST_F32, r1, F32(11, 44, 22, 55, 33, 66), 6);
    int64_t want[24];
    for (int i = 0; i < 24; i++)
        want[i] = i;
    assert_exact(NEST_I64, r2, want, 24);
    assert_exact(NEST_I64, r3, cv, 24);
    assert_exact(NEST_F32, r4, F32(10, 40, 20, 50, 30, 60), 6);
    assert_true(r5 == 0.25);
    assert_exact(NEST_BOOL, r6, B8(1, 0, 1), 3);
}

/* A col-major result of a transpose is the row-major array of the input. */
static void test_column_major_transpose(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_I32, 2, SHAPE(3, 2));
    nest_value t = nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(2, 3));
    assert_ok(f, nest_return(f, 1, &t, (const nest_layout[]){NEST_COL_MAJOR}));
    int32_t out[6];
    assert_ok(f, evaluate(f, ARGS(I32(1, 2, 3, 4, 5, 6)), ARGS(out)));
    assert_exact(NEST_I32, out, I32(1, 2, 3, 4, 5, 6), 6);
}

static void test_bool_arguments(void **state)
{
    nest_function *f = *state;
    /* results: a parameter returned as it is, and a constant */
    nest_value b = param(f, "b", NEST_BOOL, 1, SHAPE(3));
    nest_value k = nest_constant(f, NEST_I32, 0, NULL, I32(42), 1);
    assert_ok(f, nest_return(f, 2, VALUES(b, k), NULL));
    uint8_t out[3];
    int32_t kv = 0;
    assert_ok(f, evaluate(f, ARGS(B8(1, 0, 1)), ARGS(out, &kv)));
    assert_exact(NEST_BOOL, out, B8(1, 0, 1), 3);
    assert_int_equal(kv, 42);
}

/* ---- calling errors ---- */

static void test_call_errors(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(2)), y = param(f, "y", NEST_F32, 1, SHAPE(2));
    nest_value e = param(f, "e", NEST_F32, 1, SHAPE(0));
    assert_ok(f, nest_return(f, 2, VALUES(nest_add(f, x, y), e), NULL));
    float a[2] = {1, 2}, r[2];
    assert_int_equal(nest_evaluate(f, ARGS(a, a), 2, ARGS(r, NULL), 2), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "function f takes 3 arguments and 2 results; given 2 and 2");
    assert_int_equal(nest_evaluate(f, ARGS(a, a, NULL, a), 4, ARGS(r, NULL), 2), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "given 4 and 2");
    assert_int_equal(nest_evaluate(f, ARGS(a, a, NULL), 3, ARGS(r), 1), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "given 3 and 1");
    assert_int_equal(nest_evaluate(f, ARGS(a, a, NULL), 3, ARGS(r, NULL, r), 3), NEST_ERR_CALL);
    assert_int_equal(nest_evaluate(f, ARGS(a, a, NULL), -1, ARGS(r, NULL), 2), NEST_ERR_CALL);
    assert_int_equal(nest_evaluate(f, NULL, 3, ARGS(r, NULL), 2), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "argument array is NULL");
    assert_int_equal(nest_evaluate(f, ARGS(a, a, NULL), 3, NULL, 2), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "result array is NULL");
    assert_int_equal(nest_evaluate(f, ARGS(a, NULL, NULL), 3, ARGS(r, NULL), 2), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "argument 2 (y) is NULL");
    assert_int_equal(nest_evaluate(f, ARGS(a, a, NULL), 3, ARGS(NULL, NULL), 2), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "result 1 is NULL");
    /* empty arrays may be NULL; the error of an earlier call does not stop a good one */
    assert_ok(f, nest_evaluate(f, ARGS(a, a, NULL), 3, ARGS(r, NULL), 2));
    assert_exact(NEST_F32, r, F32(2, 4), 2);

    nest_function *g = nest_function_new("g");
    nest_value one = nest_constant(g, NEST_F32, 0, NULL, F32(1), 1);
    assert_ok(g, nest_return(g, 1, &one, NULL));
    assert_int_equal(nest_evaluate(g, NULL, 0, NULL, 0), NEST_ERR_CALL);
    assert_error(g, NEST_ERR_CALL, "function g takes 0 arguments and 1 result; given 0 and 0");
    float out = 0;
    assert_ok(g, nest_evaluate(g, NULL, 0, ARGS(&out), 1));
    assert_true(out == 1);
    nest_function_free(g);
}

/* ---- large graphs and memory ---- */

static void test_deep_chain(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(2));
    nest_value v = x;
    for (int i = 0; i < 20000; i++)
        v = nest_negative(f, v);
    nest_value odd = nest_negative(f, v);
    /* and as deep through tuples */
    nest_value t = v;
    for (int i = 0; i < 20000; i++)
        t = nest_tuple(f, 1, &t);
    nest_value g = t;
    for (int i = 0; i < 20000; i++)
        g = nest_get(f, g, 0);
    assert_ok(f, nest_return(f, 3, VALUES(v, odd, nest_add(f, g, x)), NULL));
    float r0[2], r1[2], r2[2];
    assert_ok(f, evaluate(f, ARGS(F32(1.5f, -2)), ARGS(r0, r1, r2)));
    assert_exact(NEST_F32, r0, F32(1.5f, -2), 2);
    assert_exact(NEST_F32, r1, F32(-1.5f, 2), 2);
    assert_exact(NEST_F32, r2, F32(3, -4), 2);
}

static void test_out_of_memory(void **state)
{
    nest_function *f = *state;
    nest_value s = param(f, "s", NEST_F32, 0, NULL);
    const int64_t big = (int64_t)1 << 28; /* 2^56 elements, 2^58 bytes: never allocated */
    nest_value huge = nest_broadcast(f, s, 2, SHAPE(big, big), 2, SHAPE(0, 1));
    assert_value(f, huge);
    /* a node no result needs is not evaluated */
    nest_value n = nest_negative(f, s);
    assert_ok(f, nest_return(f, 1, &n, NULL));
    float out;
    assert_ok(f, evaluate(f, ARGS(F32(2)), ARGS(&out)));
    assert_true(out == -2);
    /* a needed one fails cleanly */
    nest_value m = nest_max(f, huge, 2, SHAPE(0, 1));
    assert_ok(f, nest_return(f, 1, &m, NULL));
    assert_int_equal(evaluate(f, ARGS(F32(2)), ARGS(&out)), NEST_ERR_NOMEM);
    assert_error(f, NEST_ERR_NOMEM, "out of memory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_subtract),
        cmocka_unit_test(test_multiply),
        cmocka_unit_test(test_divide),
        cmocka_unit_test(test_maximum_minimum),
        cmocka_unit_test(test_power),
        cmocka_unit_test(test_negative_abs),
        cmocka_unit_test(test_transcendental),
        cmocka_unit_test(test_elementwise_shapes),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_convert_float_to_int),
        cmocka_unit_test(test_convert_to_float),
        cmocka_unit_test(test_convert_ints_and_bool),
        cmocka_unit_test_setup_teardown(test_constant, fn_setup, fn_teardown),
        cmocka_unit_test(test_dot_small),
        cmocka_unit_test(test_dot_3d),
        cmocka_unit_test(test_dot_edges),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test_setup_teardown(test_rank32, fn_setup, fn_teardown),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_concat_2d),
        cmocka_unit_test(test_concat_3d),
        cmocka_unit_test(test_reduce_small),
        cmocka_unit_test(test_reduce_3d),
        cmocka_unit_test(test_reduce_empty),
        cmocka_unit_test_setup_teardown(test_tuples_results, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_one_array_two_arguments, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_column_major, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_column_major_transpose, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_bool_arguments, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_call_errors, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_deep_chain, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_out_of_memory, fn_setup, fn_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
