/*
 * test_dims.c - symbolic dimensions: named dims in the text form and the C API, their
 * arithmetic (derived dims compare by expression), the type rules' unification (N against M is
 * an error naming both, at its location), the printer's round trip, and functions evaluated at
 * given sizes (0, 1 and more) against closed forms computed here; bad sizes (negative,
 * overflowing, a slice past N) are errors and write nothing.
 */
#include "testutil.h"

static nest_module *parse_ok(const char *text)
{
    nest_module *m = nest_parse(text, strlen(text), "d.nest");
    assert_non_null(m);
    if (nest_module_errcode(m) != NEST_OK)
        print_error("%s\n", nest_module_errmsg(m));
    assert_int_equal(nest_module_errcode(m), NEST_OK);
    return m;
}

/* The text form's error for `text` contains `part`. */
static void parse_fails(const char *text, const char *part)
{
    nest_module *m = nest_parse(text, strlen(text), "d.nest");
    assert_non_null(m);
    assert_int_not_equal(nest_module_errcode(m), NEST_OK);
    if (!strstr(nest_module_errmsg(m), part))
        fail_msg("error \"%s\" does not contain \"%s\"", nest_module_errmsg(m), part);
    nest_module_free(m);
}

static const char dense_text[] =
    "func dense(x: f32[N,4], w: f32[4,3], b: f32[3]) -> f32[N,3] {\n"
    "  y = dot(x, w)\n"
    "  bb = broadcast(b, shape=[N,3], axes=[0])\n"
    "  return add(y, bb)\n"
    "}\n";

/* x * 0.5 + 1 over [N, 3], then the sum of squares of the difference to y: a chain and an L2
 * with a slice whose bound is relative to N. */
static const char chain_text[] =
    "func chain(x: f32[N,3], y: f32[N,3]) -> (f32[N,3], f32[]) {\n"
    "  h = constant(f32[N,3], 0.5)\n"
    "  one = constant(f32[], 1)\n"
    "  ones = broadcast(one, shape=[N,3], axes=[0,1])\n"
    "  c = add(multiply(x, h), ones)\n"
    "  d = subtract(c, y)\n"
    "  flat = reshape(d, shape=[N*3])\n"
    "  return c, dot(flat, flat)\n"
    "}\n";

static void test_text_round_trip(void **state)
{
    (void)state;
    const char *text =
        "func f(x: f32[N*2,M], y: f32[2*N,M]) -> (f32[N*M*2-M*2], f32[N-1,M]) {\n"
        "  d = subtract(x, y)\n"
        "  s = slice(d, lower=[1,0], upper=[2*N-1,M])\n"
        "  r = reshape(s, shape=[(N-1)*2*M])\n"
        "  t = slice(d, lower=[0,0], upper=[N-1,M])\n"
        "  return r, t\n"
        "}\n";
    nest_module *m = parse_ok(text);
    nest_function *f = nest_module_function(m, 0);
    assert_int_equal(nest_dim_count(f), 2);
    assert_string_equal(nest_dim_name(f, 0), "N");
    assert_string_equal(nest_dim_name(f, 1), "M");
    assert_null(nest_dim_name(f, 2));
    char *once = nest_print(&f, 1);
    assert_non_null(once);
    /* N*2 and 2*N are one dim, printed one way */
    assert_non_null(strstr(once, "f32[N*2,M], y: f32[N*2,M]"));
    assert_non_null(strstr(once, "upper=[N*2-1,M]"));
    assert_non_null(strstr(once, "shape=[N*M*2-M*2]"));
    nest_module *m2 = parse_ok(once);
    nest_function *g = nest_module_function(m2, 0);
    char *twice = nest_print(&g, 1);
    assert_string_equal(once, twice);
    nest_string_free(once);
    nest_string_free(twice);
    nest_module_free(m);
    nest_module_free(m2);
}

static void test_unification_errors(void **state)
{
    (void)state;
    parse_fails("func f(x: f32[N,4], y: f32[M,4]) -> f32[N,4] {\n  return add(x, y)\n}\n",
                "d.nest:2:10: error: add(x: f32[N,4], y: f32[M,4]): operand shapes differ");
    /* f32[1,4] against f32[N,4] broadcasts only where explicit */
    parse_fails("func f(x: f32[N,4], y: f32[1,4]) -> f32[N,4] {\n  return add(x, y)\n}\n",
                "y: f32[1,4]): operand shapes differ");
    parse_fails("func f(x: f32[N,K], w: f32[M,3]) -> f32[N,3] {\n  return dot(x, w)\n}\n",
                "the last axis of the first operand (K) differs from the first axis of the "
                "second (M)");
    parse_fails("func f(x: f32[N,4]) -> f32[N,4] {\n"
                "  return broadcast(x, shape=[M,N,4], axes=[0])\n}\n",
                "2:30: error: M is not a dim of the parameters' shapes");
    parse_fails("func f(x: f32[N,4]) -> f32[N*4] {\n  return reshape(x, shape=[N*5])\n}\n",
                "shape [N*5] has N*5 elements but the operand has N*4");
    parse_fails("func f(x: f32[N]) -> f32[N] {\n  return slice(x, lower=[0], upper=[N+1])\n}\n",
                "bounds [0, N+1) are not within [0, N]");
    parse_fails("func f(x: f32[N]) -> f32[N] {\n"
                "  return slice(x, lower=[0], upper=[N], strides=[2])\n}\n",
                "a stride other than 1 between symbolic bounds");
    parse_fails("func f(x: f32[N]) -> f32[M] {\n  return x\n}\n",
                "M is not a dim of the parameters' shapes");
    parse_fails("func f(x: f32[N,4]) -> f32[N,4] {\n  return constant(f32[N,4], [1, 2])\n}\n",
                "constant f32 of a symbolic shape: 2 values given, expected 1");
}

static void test_api_dims(void **state)
{
    nest_function *f = *state;
    int64_t N = nest_named_dim(f, "N");
    assert_true(N < 0);
    assert_int_equal(nest_named_dim(f, "N"), N);
    /* derived dims compare by their expression */
    int64_t a = nest_dim_mul(f, N, 64), b = nest_dim_mul(f, 64, N);
    assert_int_equal(a, b);
    assert_int_equal(nest_dim_add(f, nest_dim_add(f, N, 1), -1), N);
    assert_int_equal(nest_dim_mul(f, nest_dim_add(f, N, 1), 0), 0);
    assert_int_equal(nest_dim_add(f, 3, 4), 7);
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(N, 256), NEST_ROW_MAJOR);
    assert_value(f, x);
    nest_value r = nest_reshape(f, x, NULL, 3, SHAPE(N, 64, 4));
    assert_value(f, r);
    nest_value flat = nest_reshape(f, r, NULL, 1, SHAPE(nest_dim_mul(f, 256, N)));
    assert_value(f, flat);
    assert_ok(f, nest_return(f, 1, &flat, NULL));
    assert_int_equal(nest_dim_count(f), 1);
    assert_string_equal(nest_dim_name(f, 0), "N");
    /* a handle of no table, a name that is no identifier, an element type */
    assert_int_equal(nest_parameter(f, "y", NEST_F32, 1, SHAPE(N - 5), NEST_ROW_MAJOR), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "dimension 0 is not a dim of function f");
    assert_int_equal(nest_named_dim(f, "3x"), NEST_DIM_NONE);
    assert_int_equal(nest_named_dim(f, "f32"), NEST_DIM_NONE);
    assert_error(f, NEST_ERR_ARG, "'f32' is an element type");
    assert_int_equal(nest_dim_mul(f, NEST_DIM_NONE, 2), NEST_DIM_NONE);
    /* symbolic functions are interpreted at given sizes; the compiler refuses them so far */
    float in[2 * 256], out[2 * 256];
    for (int i = 0; i < 2 * 256; i++)
        in[i] = (float)i;
    assert_int_equal(evaluate(f, (void *[]){in}, (void *[]){out}), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "give their sizes with nest_evaluate_dims");
    assert_ok(f, nest_evaluate_dims(f, SHAPE(2), 1, (void *[]){in}, 1, (void *[]){out}, 1));
    assert_exact(NEST_F32, out, in, 2 * 256);
    char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    assert_null(c);
    assert_error(f, NEST_ERR_ARG, "function f has symbolic dims");
}

/* dense at N = 0, 1, 7, 64 against the sum written out here */
static void test_dense_sizes(void **state)
{
    (void)state;
    nest_module *m = parse_ok(dense_text);
    nest_function *f = nest_module_function(m, 0);
    float w[12], b[3];
    for (int i = 0; i < 12; i++)
        w[i] = (float)(i % 5) - 2.0f;
    for (int j = 0; j < 3; j++)
        b[j] = 0.25f * (float)j;
    static const int64_t sizes[] = {0, 1, 7, 64};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        float *x = malloc((size_t)(n * 4 + 1) * sizeof *x), *r = malloc((size_t)(n * 3 + 1) * sizeof *r);
        float *want = malloc((size_t)(n * 3 + 1) * sizeof *want);
        for (int64_t i = 0; i < n * 4; i++)
            x[i] = (float)((i * 7) % 11) - 5.0f;
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < 3; j++) {
                double acc = 0;
                for (int k = 0; k < 4; k++)
                    acc += (double)x[i * 4 + k] * w[k * 3 + j];
                want[i * 3 + j] = (float)(acc + b[j]);
            }
        assert_ok(f, nest_evaluate_dims(f, &n, 1, (void *[]){x, w, b}, 3, (void *[]){r}, 1));
        assert_close(NEST_F32, r, want, n * 3, 1e-6, 1e-6);
        /* the specialized copy is an ordinary function of plain sizes */
        nest_function *g = nest_specialize(f, &n, 1);
        assert_non_null(g);
        assert_int_equal(nest_dim_count(g), 0);
        char *t = nest_print(&g, 1);
        char head[64];
        snprintf(head, sizeof head, "func dense(x: f32[%lld,4]", (long long)n);
        assert_non_null(strstr(t, head));
        nest_string_free(t);
        nest_function_free(g);
        free(x);
        free(r);
        free(want);
    }
    nest_module_free(m);
}

static void test_chain_and_l2(void **state)
{
    (void)state;
    nest_module *m = parse_ok(chain_text);
    nest_function *f = nest_module_function(m, 0);
    static const int64_t sizes[] = {0, 1, 5, 33};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        size_t len = (size_t)(n * 3 + 1);
        float *x = malloc(len * sizeof *x), *y = malloc(len * sizeof *y);
        float *c = malloc(len * sizeof *c), *want = malloc(len * sizeof *want), l2 = -1;
        double acc = 0;
        for (int64_t i = 0; i < n * 3; i++) {
            x[i] = (float)(i % 9) - 4.0f;
            y[i] = (float)(i % 4);
            want[i] = x[i] * 0.5f + 1.0f;
            double d = (double)want[i] - y[i];
            acc += d * d;
        }
        assert_ok(f, nest_evaluate_dims(f, &n, 1, (void *[]){x, y}, 2, (void *[]){c, &l2}, 2));
        assert_close(NEST_F32, c, want, n * 3, 0, 0);
        float wl2 = (float)acc;
        assert_close(NEST_F32, &l2, &wl2, 1, 1e-6, 1e-6);
        free(x);
        free(y);
        free(c);
        free(want);
    }
    nest_module_free(m);
}

/* Bad sizes are errors that write nothing. */
static void test_bad_sizes(void **state)
{
    (void)state;
    nest_module *m = parse_ok(
        "func f(x: f32[N,M]) -> f32[N-1,M*M] {\n"
        "  s = slice(x, lower=[1,0], upper=[N,M])\n"
        "  b = broadcast(s, shape=[N-1,M,M], axes=[2])\n"
        "  return reshape(b, shape=[N-1,M*M])\n"
        "}\n");
    nest_function *f = nest_module_function(m, 0);
    float x[16] = {0}, r[64];
    memset(r, 0x7f, sizeof r);
    float before = r[0];
    assert_int_equal(nest_evaluate_dims(f, SHAPE(-1, 2), 2, (void *[]){x}, 1, (void *[]){r}, 1),
                     NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "dim N is negative (-1)");
    /* N - 1 < 0 at N = 0: the slice's bounds are checked with the sizes */
    assert_int_not_equal(nest_evaluate_dims(f, SHAPE(0, 2), 2, (void *[]){x}, 1, (void *[]){r}, 1),
                         NEST_OK);
    assert_non_null(strstr(nest_errmsg(f), "not within"));
    /* M*M overflows */
    assert_int_not_equal(
        nest_evaluate_dims(f, SHAPE(2, (int64_t)1 << 40), 2, (void *[]){x}, 1, (void *[]){r}, 1),
        NEST_OK);
    assert_non_null(strstr(nest_errmsg(f), "too large"));
    assert_int_equal(nest_evaluate_dims(f, SHAPE(2), 1, (void *[]){x}, 1, (void *[]){r}, 1),
                     NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "function f takes 2 dims; given 1");
    assert_true(r[0] == before && r[63] == before);
    /* and a good size works: N = 3, M = 2 */
    float xs[6] = {1, 2, 3, 4, 5, 6}, want[8] = {3, 3, 4, 4, 5, 5, 6, 6};
    assert_ok(f, nest_evaluate_dims(f, SHAPE(3, 2), 2, (void *[]){xs}, 1, (void *[]){r}, 1));
    assert_exact(NEST_F32, r, want, 8);
    nest_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_round_trip),
        cmocka_unit_test(test_unification_errors),
        cmocka_unit_test_setup_teardown(test_api_dims, fn_setup, fn_teardown),
        cmocka_unit_test(test_dense_sizes),
        cmocka_unit_test(test_chain_and_l2),
        cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
