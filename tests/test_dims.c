/*
 * test_dims.c - symbolic dimensions: named dims in the text form and the C API, their
 * arithmetic (derived dims compare by expression), the type rules' unification (N against M is
 * an error naming both, at its location), the printer's round trip, and functions evaluated at
 * given sizes (0, 1 and more) against closed forms computed here; bad sizes (negative,
 * overflowing, a slice past N) are errors and write nothing.
 */
#include <dlfcn.h>
#include <unistd.h>

#include "testutil.h"
#include "internal.h"

#define parse_ok(text) tu_parse((text), "d.nest")
/* The text form's error for `text` contains `part`. */
#define parse_fails(text, part) tu_parse_fails((text), "d.nest", (part))

/* element i of parameter p: small multiples of 1/8, so that sums are exact */
static void fill(void *data, nest_type t, int64_t n, int p)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t v = (7 * i + 3 * p) % 11 - 5;
        if (t == NEST_F32)
            ((float *)data)[i] = (float)v / 8;
        else if (t == NEST_I32)
            ((int32_t *)data)[i] = (int32_t)v;
        else if (t == NEST_I64) /* indices: negative ones count from the end */
            ((int64_t *)data)[i] = v;
    }
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
    assert_non_null(strstr(once, "shape=[M*N*2-M*2]"));
    nest_module *m2 = parse_ok(once);
    nest_function *g = nest_module_function(m2, 0);
    char *twice = nest_print(&g, 1);
    assert_string_equal(once, twice);
    nest_string_free(once);
    nest_string_free(twice);
    nest_module_free(m);
    nest_module_free(m2);
}

/* The canonical form orders an expression's terms by the names they hold, not by the order the
 * names were declared in (which parsing the printed text changes): printing twice gives the
 * same text, and the dims keep their order through the round trip; a term with a positive
 * coefficient leads (a type's dim cannot start with a minus). Found by fuzz_parse: b declared
 * before a printed as a+b, which parsed back declared a first and printed b+a; then -c*a+b. */
static void test_text_order_of_names(void **state)
{
    (void)state;
    const char *text =
        "func f(x: f32[b+a, c], y: f32[c*a+b+d+d, z*y], v: f32[b-c*a, 0-a-b]) -> f32[b+a, c] {\n"
        "  return x\n"
        "}\n";
    nest_module *m = parse_ok(text);
    nest_function *f = nest_module_function(m, 0);
    char *once = nest_print(&f, 1);
    assert_non_null(once);
    assert_non_null(strstr(once, "x: f32[a+b,c], y: f32[a*c+b+d*2,y*z], v: f32[b-a*c,0-a-b]"));
    /* the ABI meets the names of an expression in its canonical order */
    static const char *const abi[] = {"a", "b", "c", "d", "y", "z"};
    assert_int_equal(nest_dim_count(f), 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(nest_dim_name(f, i), abi[i]);
    nest_module *m2 = parse_ok(once);
    nest_function *g = nest_module_function(m2, 0);
    char *twice = nest_print(&g, 1);
    assert_string_equal(once, twice);
    assert_int_equal(nest_dim_count(g), 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(nest_dim_name(g, i), abi[i]);
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
    parse_fails("func f(x: f32[B,N,K], w: f32[B,M,3]) -> f32[B,N,3] {\n  return batch_dot(x, w)\n}\n",
                "the last axis of the first operand (K) differs from the second-to-last axis of "
                "the second (M)");
    parse_fails("func f(x: f32[B,N,4], w: f32[C,4,3]) -> f32[B,N,3] {\n  return batch_dot(x, w)\n}\n",
                "batch axes do not broadcast: B against C (axis 0 of the result)");
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
    /* symbolic functions are interpreted at given sizes */
    float in[2 * 256], out[2 * 256];
    for (int i = 0; i < 2 * 256; i++)
        in[i] = (float)i;
    assert_int_equal(evaluate(f, (void *[]){in}, (void *[]){out}), NEST_ERR_CALL);
    assert_error(f, NEST_ERR_CALL, "give their sizes with nest_evaluate_dims");
    assert_ok(f, nest_evaluate_dims(f, SHAPE(2), 1, (void *[]){in}, 1, (void *[]){out}, 1));
    assert_exact(NEST_F32, out, in, 2 * 256);
    /* and compiled once for every size */
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    memset(out, 0, sizeof out);
    assert_int_equal(nest_call_dims(k, SHAPE(2), 1, (void *[]){in}, 1, (void *[]){out}, 1), NEST_OK);
    assert_exact(NEST_F32, out, in, 2 * 256);
    assert_int_equal(nest_call(k, (void *[]){in}, 1, (void *[]){out}, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "call it with nest_call_dims"));
    nest_kernel_free(k);
}

/* Exact division (the ONNX importer's Div of a Shape's dims): every coefficient divided, else
 * an error that says why not. */
static void test_div_exact(void **state)
{
    nest_function *f = *state;
    int64_t N = nest_named_dim(f, "N"), M = nest_named_dim(f, "M");
    int64_t e = dim_add(f, dim_mul(f, N, 4), 2), nm = dim_mul(f, N, M); /* N*4+2, M*N */
    assert_int_equal(dim_div_exact(f, e, 2), dim_add(f, dim_mul(f, N, 2), 1));
    assert_int_equal(dim_div_exact(f, e, -2), dim_sub(f, -1, dim_mul(f, N, 2)));
    assert_int_equal(dim_div_exact(f, dim_mul(f, nm, 6), 3), dim_mul(f, nm, 2));
    assert_int_equal(dim_div_exact(f, e, 1), e);
    assert_int_equal(dim_div_exact(f, 12, -4), -3);
    assert_int_equal(dim_div_exact(f, e, 4), DIM_NONE);
    assert_error(f, NEST_ERR_ARG, "N*4+2 divided by 4 is not exact");
    assert_int_equal(dim_div_exact(f, 7, 2), DIM_NONE);
    assert_error(f, NEST_ERR_ARG, "7 divided by 2 is not exact");
    assert_int_equal(dim_div_exact(f, e, N), DIM_NONE);
    assert_error(f, NEST_ERR_ARG, "N*4+2 divided by N is not computed (the divisor is symbolic)");
    assert_int_equal(dim_div_exact(f, N, 0), DIM_NONE);
    assert_error(f, NEST_ERR_ARG, "N divided by 0 is not computed");
    assert_int_equal(dim_div_exact(f, N - 1000, 2), DIM_NONE);
    assert_error(f, NEST_ERR_ARG, "dim_div_exact: an operand is not a dim of function f");
    /* by one term of names, as the compiler splits an axis of N*M*6 into N and M*6 */
    int64_t q;
    assert_true(dim_quotient(f, dim_mul(f, nm, 6), N, &q));
    assert_int_equal(q, dim_mul(f, M, 6));
    assert_true(dim_quotient(f, dim_mul(f, nm, 6), dim_mul(f, nm, 3), &q));
    assert_int_equal(q, 2);
    assert_true(dim_quotient(f, dim_add(f, dim_mul(f, nm, 4), dim_mul(f, N, 2)), dim_mul(f, N, 2),
                             &q));
    assert_int_equal(q, dim_add(f, dim_mul(f, M, 2), 1));
    assert_true(dim_quotient(f, e, e, &q));
    assert_int_equal(q, 1);
    assert_false(dim_quotient(f, e, N, &q));      /* the 2 has no N */
    assert_false(dim_quotient(f, nm, dim_mul(f, M, 2), &q));
    assert_false(dim_quotient(f, N, M, &q));
    assert_false(dim_quotient(f, 6, e, &q));      /* a sum divides only itself */
    assert_false(dim_quotient(f, 7, 2, &q));
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

/* A convolution and a pool over a symbolic batch: the type rules pass N through, the
 * interpreter runs them at any N (against the same graph specialized, computed image by image
 * at N = 1: a batch is its images side by side); the compiler refuses them so far. A symbolic
 * spatial dim is an error. */
static void test_windows(void **state)
{
    (void)state;
    nest_module *m = parse_ok("func c(x: f32[N,2,5,5], w: f32[3,2,3,3]) -> f32[N,3,1,1] {\n"
                              "  y = convolution(x, w, strides=[2,2])\n"
                              "  return max_pool(y, window=[2,2], strides=[1,1])\n"
                              "}\n");
    nest_function *f = nest_module_function(m, 0);
    float x[3 * 50], w[54], r[3 * 3], one[3];
    fill(x, NEST_F32, 150, 0);
    fill(w, NEST_F32, 54, 1);
    assert_ok(f, nest_evaluate_dims(f, SHAPE(3), 1, (void *[]){x, w}, 2, (void *[]){r}, 1));
    for (int i = 0; i < 3; i++) {
        assert_ok(f, nest_evaluate_dims(f, SHAPE(1), 1, (void *[]){x + 50 * i, w}, 2,
                                        (void *[]){one}, 1));
        assert_close(NEST_F32, r + 3 * i, one, 3, 0, 0);
    }
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    float kr[3 * 3];
    assert_int_equal(nest_call_dims(k, SHAPE(3), 1, (void *[]){x, w}, 2, (void *[]){kr}, 1),
                     NEST_OK);
    assert_close(NEST_F32, kr, r, 9, 1e-6, 1e-6);
    nest_kernel_free(k);
    nest_module_free(m);
    parse_fails("func c(x: f32[1,2,H,5], w: f32[3,2,3,3]) -> f32[1,3,1,1] {\n"
                "  return convolution(x, w)\n}\n",
                "only the batch (axis 0 of the input) may be a symbolic dim");
}

/* A call with symbolic dims checks its arrays at the sizes given: NULL only for an array that
 * is empty at them, results distinct from the arguments and from each other. */
static void test_call_checks(void **state)
{
    (void)state;
    nest_module *m = parse_ok("func f(x: f32[N,3]) -> (f32[N,3], f32[3]) {\n"
                              "  return negative(x), sum(x, axes=[0])\n"
                              "}\n");
    nest_function *f = nest_module_function(m, 0);
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    float x[6] = {1, 2, 3, 4, 5, 6}, r[6], s[3];
    int64_t two = 2, zero = 0;
    assert_int_equal(nest_call_dims(k, &two, 1, (void *[]){NULL}, 1, (void *[]){r, s}, 2),
                     NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "argument 1 is NULL"));
    assert_int_equal(nest_call_dims(k, &two, 1, (void *[]){x}, 1, (void *[]){x, s}, 2),
                     NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "result 1 is the array of argument 1"));
    assert_int_equal(nest_call_dims(k, &two, 1, (void *[]){x}, 1, (void *[]){r, NULL}, 2),
                     NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "result 2 is NULL"));
    /* at N = 0 x and the first result are empty: NULL is taken; the sum of nothing is 0 */
    s[0] = s[1] = s[2] = 7;
    assert_int_equal(nest_call_dims(k, &zero, 1, (void *[]){NULL}, 1, (void *[]){NULL, s}, 2),
                     NEST_OK);
    assert_true(s[0] == 0 && s[1] == 0 && s[2] == 0);
    assert_int_equal(nest_call_dims(k, &two, 1, (void *[]){x}, 1, (void *[]){r, s}, 2), NEST_OK);
    assert_true(r[5] == -6 && s[0] == 5 && s[2] == 9);
    nest_kernel_free(k);
    nest_module_free(m);
}

/* The kernel's check of its sizes returns at once below the dims at which every shape fits
 * (2^18 for rows of 2^40 floats: 2^60 bytes), and checks every shape above them (2^20 rows:
 * 2^62 bytes, refused before anything is read); a function with a slice, whose bound depends
 * on the sizes, never skips the checks. */
static void test_small_dims_check(void **state)
{
    (void)state;
    nest_module *m = parse_ok("func f(x: f32[N,1099511627776]) -> f32[] {\n"
                              "  return sum(x, axes=[0,1])\n"
                              "}\n"
                              "func g(x: f32[N,4]) -> f32[N-1,4] {\n"
                              "  return slice(x, lower=[1,0], upper=[N,4])\n"
                              "}\n");
    nest_function *fs[2] = {nest_module_function(m, 0), nest_module_function(m, 1)};
    char *c = nest_emit(fs, 1, NEST_EMIT_C, NULL);
    assert_non_null(c);
    assert_non_null(strstr(c, "if (N <= 262144)\n        return nest_ws; /* every shape fits"));
    free(c);
    c = nest_emit(fs + 1, 1, NEST_EMIT_C, NULL);
    assert_non_null(c);
    assert_null(strstr(c, "every shape fits"));
    free(c);
    nest_kernel *k = nest_compile(fs[0], NULL);
    assert_non_null(k);
    float x[4] = {0}, r = 7;
    int64_t big = (int64_t)1 << 20;
    assert_int_equal(nest_call_dims(k, &big, 1, (void *[]){x}, 1, (void *[]){&r}, 1),
                     NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "the sizes do not fit its shapes"));
    assert_true(r == 7);
    nest_kernel_free(k);
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

/* Every op the compiler takes with symbolic dims, compiled once and called at several sizes
 * (0 where the function allows it, 1, and more) against the interpreter at the same sizes. */
static const char ops_text[] =
    "func dense(x: f32[N,64], w: f32[64,32], b: f32[32]) -> f32[N,32] {\n"
    "  y = dot(x, w)\n"
    "  return maximum(add(y, broadcast(b, shape=[N,32], axes=[0])), constant(f32[N,32], 0))\n"
    "}\n"
    "func l2(x: f32[N,256], y: f32[N,256]) -> f32[] {\n"
    "  d = subtract(x, y)\n"
    "  r = reshape(d, shape=[N*256])\n"
    "  return dot(r, r)\n"
    "}\n"
    "func chain(x: f32[N,256], y: f32[N,256]) -> f32[N,256] {\n"
    "  h = constant(f32[N,256], 0.5)\n"
    "  return tanh(add(multiply(x, h), y))\n"
    "}\n"
    "func views(x: f32[N,8], v: f32[N]) -> (f32[N-1,4], f32[N,2,4], f32[N*8], f32[N,8,3]) {\n"
    "  s = slice(x, lower=[1,0], upper=[N,8], strides=[1,2])\n"
    "  r = reshape(x, shape=[N,2,4])\n"
    "  f = reshape(r, shape=[N*8])\n"
    "  b = broadcast(x, shape=[N,8,3], axes=[2])\n"
    "  return s, r, f, add(b, broadcast(v, shape=[N,8,3], axes=[1,2]))\n"
    "}\n"
    "func folds(x: f32[N,8]) -> (f32[8], f32[N], f32[], i64[8], f32[N,8]) {\n"
    "  return sum(x, axes=[0]), max(x, axes=[1]), min(x, axes=[0,1]), argmax(x, axis=0), "
    "softmax(x, axes=[1])\n"
    "}\n"
    "func mixed(x: f32[N,4], k: i32[N,4], y: f32[N,3]) -> (f32[N,7], i32[N,4], f32[N,4]) {\n"
    "  c = concat(x, y, axis=1)\n"
    "  z = convert(k, type=i32)\n"
    "  m = select(less(x, constant(f32[N,4], 0)), negative(x), x)\n"
    "  return c, add(z, z), reverse(m, axes=[1])\n"
    "}\n"
    "func take(t: f32[6,3], i: i64[N]) -> f32[N,3] {\n"
    "  return gather(t, i, axis=0)\n"
    "}\n"
    "func two(x: f32[N*2,4], y: f32[M,4]) -> (f32[N*2,4], f32[M]) {\n"
    "  return add(x, x), sum(y, axes=[1])\n"
    "}\n";

static int64_t count_at(nest_function *f, nest_value v, const int64_t *dims, int ndims)
{
    /* the value's shape at these sizes, from the specialized function */
    nest_function *g = nest_specialize(f, dims, ndims);
    assert_non_null(g);
    int64_t n = 1;
    const int64_t *shape = nest_value_shape(g, v);
    for (int k = 0; k < nest_value_rank(g, v); k++)
        n *= shape[k];
    nest_function_free(g);
    return n;
}

/* Each function of text compiled once and called at each size (N, and M = N/2 + 3) against
 * the interpreter at that size. */
static void compile_at_sizes(const char *text, const int64_t *sizes, size_t nsizes)
{
    nest_module *m = parse_ok(text);
    for (int fi = 0; fi < nest_module_count(m); fi++) {
        nest_function *f = nest_module_function(m, fi);
        nest_kernel *k = nest_compile(f, NULL);
        if (!k)
            fail_msg("%s: %s", nest_function_name(f), nest_errmsg(f));
        int np = nest_param_count(f), nr = nest_result_count(f), nd = nest_dim_count(f);
        for (size_t s = 0; s < nsizes; s++) {
            int64_t dims[2] = {sizes[s], sizes[s] / 2 + 3};
            /* views takes a row off, take_rows and add_rows index rows of N: N = 0 is
             * refused by both */
            static const char *const not_empty[] = {"views", "folds", "take_rows", "add_rows"};
            bool empty_ok = true;
            for (size_t e = 0; e < sizeof not_empty / sizeof *not_empty; e++)
                empty_ok &= strcmp(nest_function_name(f), not_empty[e]) != 0;
            void *args[4], *res[8], *ref[8];
            int64_t cnt[8];
            for (int i = 0; i < np; i++) {
                nest_value pv = nest_param(f, i);
                int64_t n = dims[0] == 0 && !empty_ok ? 1 : count_at(f, pv, dims, nd);
                args[i] = calloc((size_t)n + 1, 8);
                fill(args[i], nest_value_type(f, pv), n, i);
            }
            if (dims[0] == 0 && !empty_ok) {
                int64_t before = 0x5a5a5a5a;
                res[0] = &before;
                for (int i = 1; i < nr; i++)
                    res[i] = &before;
                assert_int_equal(nest_call_dims(k, dims, nd, args, np, res, nr), NEST_ERR_CALL);
                assert_int_not_equal(nest_evaluate_dims(f, dims, nd, args, np, res, nr), NEST_OK);
                assert_true(before == 0x5a5a5a5a);
                for (int i = 0; i < np; i++)
                    free(args[i]);
                continue;
            }
            for (int i = 0; i < nr; i++) {
                cnt[i] = count_at(f, nest_result(f, i), dims, nd);
                res[i] = calloc((size_t)cnt[i] + 1, 8);
                ref[i] = calloc((size_t)cnt[i] + 1, 8);
            }
            assert_ok(f, nest_evaluate_dims(f, dims, nd, args, np, ref, nr));
            int rc = nest_call_dims(k, dims, nd, args, np, res, nr);
            if (rc != NEST_OK)
                fail_msg("%s at N=%lld: %s", nest_function_name(f), (long long)dims[0],
                         nest_kernel_errmsg(k));
            for (int i = 0; i < nr; i++) {
                nest_type t = nest_value_type(f, nest_result(f, i));
                assert_close(t, res[i], ref[i], cnt[i], 1e-6, 1e-5);
                free(res[i]);
                free(ref[i]);
            }
            for (int i = 0; i < np; i++)
                free(args[i]);
        }
        nest_kernel_free(k);
    }
    nest_module_free(m);
}

static void test_compile_sizes(void **state)
{
    (void)state;
    static const int64_t sizes[] = {0, 1, 7, 64, 300, 1100}; /* 1100: in parallel */
    compile_at_sizes(ops_text, sizes, sizeof sizes / sizeof *sizes);
}

/* Products over symbolic rows in each of their ways: the second factor read in place up to
 * TILE_DIRECT_BLOCKS blocks of rows and packed past them (the switch at 32 rows of f32), every
 * count of rows in the last block, fewer rows than a tile's computed whole, a last block of
 * fewer columns than a tile's, a thin tile (read in place only for fewer rows than its own),
 * f64, and a second factor read transposed (packed at every N). */
static const char products_text[] =
    "func dense(x: f32[N,40], w: f32[40,200], b: f32[200]) -> f32[N,200] {\n"
    "  y = add(dot(x, w), broadcast(b, shape=[N,200], axes=[0]))\n"
    "  return maximum(y, constant(f32[N,200], 0))\n"
    "}\n"
    "func thin(x: f32[N,50], w: f32[50,10]) -> f32[N,10] {\n"
    "  return dot(x, w)\n"
    "}\n"
    "func dense64(x: f64[N,24], w: f64[24,70]) -> f64[N,70] {\n"
    "  return dot(x, w)\n"
    "}\n"
    "func transposed(x: f32[N,30], w: f32[130,30]) -> f32[N,130] {\n"
    "  return dot(x, reshape(w, order=[1,0], shape=[30,130]))\n"
    "}\n";

static void test_compile_products(void **state)
{
    (void)state;
    static const int64_t sizes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 67};
    compile_at_sizes(products_text, sizes, sizeof sizes / sizeof *sizes);
}

/* Convolutions and pools over a symbolic batch, in each of the direct form's ways (planes
 * copied per image into a local array, copied into the workspace at a size set by N, read in
 * place; positions or channels in the lanes), grouped, with a bias and a ReLU absorbed, and a
 * pad of the spatial axes: one kernel at every N against the interpreter. */
static const char windows_text[] =
    "func local(x: f32[N,2,9,9], w: f32[3,2,3,3]) -> f32[N,3,5,5] {\n"
    "  return convolution(x, w, strides=[2,2], pad_below=[1,1], pad_above=[1,1])\n"
    "}\n"
    "func copied(x: f32[N,4,72,72], w: f32[8,4,3,3], b: f32[8]) -> f32[N,8,72,72] {\n"
    "  y = convolution(x, w, pad_below=[1,1], pad_above=[1,1])\n"
    "  z = add(y, broadcast(b, shape=[N,8,72,72], axes=[0,2,3]))\n"
    "  return maximum(z, constant(f32[N,8,72,72], 0))\n"
    "}\n"
    "func in_place(x: f32[N,3,10,10], w: f32[4,3,3,3]) -> f32[N,4,8,8] {\n"
    "  return convolution(x, w)\n"
    "}\n"
    "func by_channels(x: f32[N,32,5,5], w: f32[128,32,3,3]) -> f32[N,128,5,5] {\n"
    "  return convolution(x, w, pad_below=[1,1], pad_above=[1,1])\n"
    "}\n"
    "func depthwise(x: f32[N,4,12,12], w: f32[4,1,3,3]) -> f32[N,4,6,6] {\n"
    "  return convolution(x, w, strides=[2,2], pad_below=[1,1], pad_above=[0,0], groups=4)\n"
    "}\n"
    "func pools(x: f32[N,3,11,11]) -> (f32[N,3,5,5], f32[N,3,6,6], f32[N,3,13,14]) {\n"
    "  p = pad(x, constant(f32[], 0.5), below=[0,0,1,2], above=[0,0,1,1])\n"
    "  return max_pool(x, window=[3,3], strides=[2,2]), "
    "avg_pool(x, window=[2,2], strides=[2,2], pad_above=[1,1]), p\n"
    "}\n";

static void test_compile_windows(void **state)
{
    (void)state;
    static const int64_t sizes[] = {0, 1, 7, 20};
    compile_at_sizes(windows_text, sizes, sizeof sizes / sizeof *sizes);
    /* each way was taken: the emitted C says which */
    nest_module *m = parse_ok(windows_text);
    static const char *const ways[][2] = {
        {"local", "image and group"},
        {"copied", "(ws + nest_off"},
        {"by_channels", "the filters packed"},
        {"depthwise", "image and group"},
    };
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        nest_function *f = nest_module_find(m, ways[i][0]);
        char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
        assert_non_null(c);
        if (!strstr(c, ways[i][1]))
            fail_msg("%s: no '%s' in its C:\n%s", ways[i][0], ways[i][1], c);
        nest_string_free(c);
    }
    nest_function *f = nest_module_find(m, "in_place");
    char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    assert_non_null(c);
    assert_null(strstr(c, "x into planes"));
    nest_string_free(c);
    nest_module_free(m);
}

/* Constant filters packed ahead of time over a symbolic batch (channels in lanes, costed for
 * a few images): the text gives every value of the constant. */
static void test_compile_const_filters(void **state)
{
    (void)state;
    static const char head[] = "func packed(x: f32[N,32,5,5]) -> f32[N,128,5,5] {\n"
                               "  w = constant(f32[128,32,3,3], [";
    static const char tail[] = "])\n  return convolution(x, w, pad_below=[1,1], "
                               "pad_above=[1,1])\n}\n";
    size_t n = 128 * 32 * 9, len = sizeof head + n * 3 + sizeof tail;
    char *text = malloc(len), *at = text;
    assert_non_null(text);
    at += sprintf(at, "%s", head);
    for (size_t i = 0; i < n; i++)
        at += sprintf(at, "%s%d", i ? "," : "", (int)(i * 7919 % 5) - 2);
    sprintf(at, "%s", tail);
    static const int64_t sizes[] = {0, 1, 3, 9};
    compile_at_sizes(text, sizes, sizeof sizes / sizeof *sizes);
    nest_module *m = parse_ok(text);
    nest_function *f = nest_module_find(m, "packed");
    nest_options o;
    nest_options_init(&o);
    o.march = "x86-64-v4";
    char *c = nest_emit(&f, 1, NEST_EMIT_C, &o);
    assert_non_null(c);
    if (!strstr(c, "the filters, packed ahead of time"))
        fail_msg("no filters packed ahead of time in:\n%.4000s", c);
    nest_string_free(c);
    nest_module_free(m);
    free(text);
}

/* Gathers and scatter_adds along and across a symbolic batch (indices into N rows clamped to
 * them at run time; none to take from N = 0 is refused), and batch_dot over it. */
static const char indexed_text[] =
    "func take_rows(t: f32[N,3], i: i64[4]) -> f32[4,3] {\n"
    "  return gather(t, i, axis=0)\n"
    "}\n"
    "func permute(t: f32[N,3], i: i64[N]) -> f32[N,3] {\n"
    "  return gather(tanh(t), i, axis=0)\n"
    "}\n"
    "func take_cols(t: f32[N,3], i: i64[2]) -> f32[N,2] {\n"
    "  return gather(t, i, axis=1)\n"
    "}\n"
    "func add_cols(x: f32[N,4], j: i64[2], m: f32[N,2]) -> f32[N,4] {\n"
    "  return scatter_add(x, j, m, axis=1)\n"
    "}\n"
    "func add_rows(x: f32[N,4], j: i64[3], m: f32[3,4]) -> f32[N,4] {\n"
    "  return scatter_add(x, j, m, axis=0)\n"
    "}\n"
    "func batches(y: f32[N,3,4], z: f32[4,5], a: f32[N,2,8,16], b: f32[N,2,16,8]) -> "
    "(f32[N,3,5], f32[N,2,8,8]) {\n"
    "  return batch_dot(y, z), batch_dot(a, b)\n"
    "}\n";

static void test_compile_indexed(void **state)
{
    (void)state;
    static const int64_t sizes[] = {0, 1, 7, 64, 300};
    compile_at_sizes(indexed_text, sizes, sizeof sizes / sizeof *sizes);
}

/* Sizes the kernel refuses, before it writes anything. */
static void test_compile_bad_sizes(void **state)
{
    (void)state;
    nest_module *m = parse_ok(ops_text);
    nest_function *f = nest_module_find(m, "chain");
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    float x[256] = {0}, y[256] = {0}, r[256];
    for (int i = 0; i < 256; i++)
        r[i] = 42;
    void *args[2] = {x, y}, *res[1] = {r};
    assert_int_equal(nest_call_dims(k, SHAPE(-1), 1, args, 2, res, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "dim 1 is negative"));
    /* N*256 floats pass 2^62 bytes */
    assert_int_equal(nest_call_dims(k, SHAPE((int64_t)1 << 54), 1, args, 2, res, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "do not fit"));
    assert_int_equal(nest_call_dims(k, SHAPE(INT64_MAX), 1, args, 2, res, 1), NEST_ERR_CALL);
    assert_int_equal(nest_call_dims(k, SHAPE(1, 1), 2, args, 2, res, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "takes 1 dim; given 2"));
    assert_int_equal(nest_call_dims(k, SHAPE(1), 1, (void *[]){x, NULL}, 2, res, 1), NEST_ERR_CALL);
    for (int i = 0; i < 256; i++)
        assert_true(r[i] == 42);
    nest_kernel_free(k);
    nest_module_free(m);
}

/* What the compiler does not take yet says so, and how to get plain sizes. */
static void test_compile_refused(void **state)
{
    (void)state;
    nest_module *m = parse_ok("func t(x: f32[N,4]) -> f32[4,N] {\n"
                              "  return reshape(x, order=[1,0], shape=[4,N])\n}\n");
    nest_function *f = nest_module_function(m, 0);
    assert_null(nest_compile(f, NULL));
    assert_error(f, NEST_ERR_ARG, "a symbolic dim other than the first axis");
    assert_non_null(strstr(nest_errmsg(f), "nest_specialize or nestc --dim NAME=N"));
    nest_module_free(m);
}

/* The ahead-of-time ABI: the dims first, by value and by array, and the header's list. */
static void test_aot(void **state)
{
    (void)state;
    nest_module *m = parse_ok(dense_text);
    nest_function *f = nest_module_function(m, 0);
    char dir[] = "/tmp/nest-dims-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char so[64], h[64];
    snprintf(so, sizeof so, "%s/dense.so", dir);
    snprintf(h, sizeof h, "%s/dense.h", dir);
    if (nest_build_so(&f, 1, so, h, NULL, NULL) != NEST_OK)
        fail_msg("%s", nest_errmsg(f));
    FILE *in = fopen(h, "r");
    assert_non_null(in);
    char *hs = tu_read_all(in);
    fclose(in);
    assert_non_null(strstr(hs, "/* symbolic dims, in this order: N */"));
    assert_non_null(strstr(hs, "int dense(int64_t N, const float *x, const float *w, const float "
                               "*b, float *result0);"));
    assert_non_null(strstr(hs, "int dense_call_dims(const int64_t *dims, void *const *args, "
                               "void *const *results);"));
    assert_non_null(strstr(hs, "size_t dense_workspace_size_dims(const int64_t *dims);"));
    free(hs);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    int (*typed)(int64_t, const float *, const float *, const float *, float *);
    int (*by_dims)(const int64_t *, void *const *, void *const *);
    size_t (*wsz)(const int64_t *);
    int (*with_ws)(const int64_t *, void *const *, void *const *, void *);
    *(void **)&typed = dlsym(lib, "dense");
    *(void **)&by_dims = dlsym(lib, "dense_call_dims");
    *(void **)&wsz = dlsym(lib, "dense_workspace_size_dims");
    *(void **)&with_ws = dlsym(lib, "dense_call_ws_dims");
    assert_true(typed && by_dims && wsz && with_ws);
    float x[9 * 4], w[12], b[3], r[9 * 3], want[9 * 3];
    fill(x, NEST_F32, 9 * 4, 0);
    fill(w, NEST_F32, 12, 1);
    fill(b, NEST_F32, 3, 2);
    /* larger, then smaller: a workspace kept from a call too small for the next is
     * replaced, one larger serves */
    static const int64_t sizes[] = {0, 3, 9, 6, 3};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int64_t n = sizes[si];
        assert_ok(f, nest_evaluate_dims(f, &n, 1, (void *[]){x, w, b}, 3, (void *[]){want}, 1));
        memset(r, 0, sizeof r);
        assert_int_equal(typed(n, x, w, b, r), 0);
        assert_close(NEST_F32, r, want, n * 3, 1e-6, 1e-6);
        memset(r, 0, sizeof r);
        assert_int_equal(by_dims(&n, (void *[]){x, w, b}, (void *[]){r}), 0);
        assert_close(NEST_F32, r, want, n * 3, 1e-6, 1e-6);
        size_t bytes = wsz(&n);
        void *ws = malloc(bytes + 1);
        memset(r, 0, sizeof r);
        assert_int_equal(with_ws(&n, (void *[]){x, w, b}, (void *[]){r}, ws), 0);
        assert_close(NEST_F32, r, want, n * 3, 1e-6, 1e-6);
        free(ws);
    }
    for (int i = 0; i < 27; i++)
        r[i] = 7;
    assert_int_equal(typed(-3, x, w, b, r), 1);
    int64_t huge = (int64_t)1 << 61;
    assert_int_equal(by_dims(&huge, (void *[]){x, w, b}, (void *[]){r}), 1);
    assert_int_equal(wsz(&huge), 0);
    for (int i = 0; i < 27; i++)
        assert_true(r[i] == 7);
    dlclose(lib);
    tu_rm_rf(dir);
    nest_module_free(m);
}

/* The C and header of symbolic functions (names that the emitter's own would take among them)
 * compile without a warning under gcc and clang, with and without OpenMP, and the header under
 * g++. */
static void test_emit_warnings(void **state)
{
    (void)state;
    static const char hostile[] =
        "func f(N: f32[N], i0: f32[i0,3], ws: f32[ws,4]) -> (f32[N], f32[i0,3], f32[ws]) {\n"
        "  return N, add(i0, i0), sum(ws, axes=[1])\n"
        "}\n"
        "func dims(t: f32[t,2], u0: f32[u0]) -> f32[t] {\n"
        "  return max(t, axes=[1])\n"
        "}\n";
    char dir[] = "/tmp/nest-dims-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *texts[] = {ops_text, hostile};
    for (int t = 0; t < 2; t++) {
        nest_module *m = parse_ok(texts[t]);
        nest_function *fns[16];
        int n = nest_module_count(m);
        for (int i = 0; i < n; i++)
            fns[i] = nest_module_function(m, i);
        char *c = nest_emit(fns, n, NEST_EMIT_C, NULL), *h = nest_emit(fns, n, NEST_EMIT_H, NULL);
        assert_true(c && h);
        char cp[64], hp[64], cmd[512];
        snprintf(cp, sizeof cp, "%s/f%d.c", dir, t);
        snprintf(hp, sizeof hp, "%s/f%d.h", dir, t);
        tu_write_file(cp, c);
        tu_write_file(hp, h);
        static const char *const ccs[] = {"gcc", "clang-14"};
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof cmd, "%s -std=c99 -Wall -Wextra -pedantic -Werror -O2 -c %s -o "
                     "%s.o && %s -std=c99 -Wall -Wextra -pedantic -Werror -fopenmp -c %s -o %s.o "
                     "&& %s -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only -x c %s",
                     ccs[k], cp, cp, ccs[k], cp, cp, ccs[k], hp);
            if (system(cmd) != 0)
                fail_msg("warnings: %s", cmd);
        }
        snprintf(cmd, sizeof cmd, "g++ -Wall -Wextra -pedantic -Werror -fsyntax-only -x c++ %s", hp);
        if (system(cmd) != 0)
            fail_msg("warnings: %s", cmd);
        nest_string_free(c);
        nest_string_free(h);
        nest_module_free(m);
    }
    tu_rm_rf(dir);
}

/* The type rules of every op with a symbolic N, against the same text with N written as a
 * number: the symbolic function evaluated at that N (nest_evaluate_dims, through ir_bind) and
 * the plain one built from the text give the same values, exactly (one interpreter, two
 * constructions of the graph). Sizes 1, 2 and 5; pad along N and slices relative to N too. */
static const char every_op_text[] =
    "func g(x: f32[N,4], i: i64[N], t: f32[6,3], y: f32[N,3,4], z: f32[4,5], m: f32[N,2], "
    "j: i64[2]) -> "
    "(f32[N+3,5], f32[N,3], i64[N,4], f32[N,2], i64[N,2], f32[N,3,5], f32[N,4], f32[N], i64[4], "
    "f32[N-1,4], f32[N,6], f32[N,4], f32[N,4]) {\n"
    "  p = pad(x, constant(f32[], 0), below=[1,0], above=[2,1])\n"
    "  gt = gather(t, i, axis=0)\n"
    "  oh = one_hot(i, shape=[N,4], axis=1)\n"
    "  tk = topk(x, k=2, axis=1, largest=true)\n"
    "  bd = batch_dot(y, z)\n"
    "  rs = replace_slice(x, m, lower=[0,1], upper=[N,3])\n"
    "  pr = product(x, axes=[1])\n"
    "  am = argmin(x, axis=0)\n"
    "  s = slice(x, lower=[1,0], upper=[N,4])\n"
    "  c = concat(m, power(abs(m), m), m, axis=1)\n"
    "  r = reverse(x, axes=[0])\n"
    "  sa = scatter_add(x, j, m, axis=1)\n"
    "  return p, gt, oh, get(tk, 0), get(tk, 1), bd, rs, pr, am, s, c, r, sa\n"
    "}\n";

static void test_every_op_interpreted(void **state)
{
    (void)state;
    nest_module *m = parse_ok(every_op_text);
    nest_function *f = nest_module_function(m, 0);
    for (int64_t n = 1; n <= 5; n += n == 2 ? 3 : 1) {
        /* the text with N as a number (N appears only as a dim here) */
        char num[32], text[4096];
        snprintf(num, sizeof num, "%lld", (long long)n);
        size_t o = 0;
        for (const char *q = every_op_text; *q && o + 32 < sizeof text; q++) {
            if (*q == 'N' && !(q > every_op_text && (q[-1] == '_' || (q[-1] >= 'a' && q[-1] <= 'z'))))
                o += (size_t)snprintf(text + o, sizeof text - o, "%s", num);
            else
                text[o++] = *q;
        }
        text[o] = 0;
        nest_module *ms = parse_ok(text);
        nest_function *g = nest_module_function(ms, 0);
        int np = nest_param_count(g), nr = nest_result_count(g);
        void *args[8], *a[16], *b[16];
        int64_t cnt[16];
        for (int k = 0; k < np; k++) {
            nest_value v = nest_param(g, k);
            int64_t c = 1;
            for (int d = 0; d < nest_value_rank(g, v); d++)
                c *= nest_value_shape(g, v)[d];
            args[k] = calloc((size_t)c + 1, 8);
            if (nest_value_type(g, v) == NEST_I64) /* indices within [0, 4) */
                for (int64_t j = 0; j < c; j++)
                    ((int64_t *)args[k])[j] = (7 * j + 1) % 4;
            else
                fill(args[k], NEST_F32, c, k);
        }
        for (int k = 0; k < nr; k++) {
            nest_value v = nest_result(g, k);
            cnt[k] = 1;
            for (int d = 0; d < nest_value_rank(g, v); d++)
                cnt[k] *= nest_value_shape(g, v)[d];
            a[k] = calloc((size_t)cnt[k] + 1, 8);
            b[k] = calloc((size_t)cnt[k] + 1, 8);
        }
        assert_ok(f, nest_evaluate_dims(f, &n, 1, args, np, a, nr));
        assert_ok(g, nest_evaluate(g, args, np, b, nr));
        for (int k = 0; k < nr; k++) {
            assert_exact(nest_value_type(g, nest_result(g, k)), a[k], b[k], cnt[k]);
            free(a[k]);
            free(b[k]);
        }
        for (int k = 0; k < np; k++)
            free(args[k]);
        nest_module_free(ms);
    }
    nest_module_free(m);
}

/* ---- random graphs over a symbolic batch ---- */

typedef struct rgen {
    uint64_t s;
    nest_function *f;
    int64_t N;
    nest_value v[64];
    int64_t k[64]; /* each value is [N, k] (k > 0), a vector [k] (k < 0: [-k]), or [N] (k 0) */
    int n;
} rgen;

static uint64_t rnd(rgen *g)
{
    uint64_t z = (g->s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int pick(rgen *g, int n) { return (int)(rnd(g) % (uint64_t)n); }

static void push(rgen *g, nest_value v, int64_t k)
{
    assert_value(g->f, v);
    if (g->n < 64) {
        g->v[g->n] = v;
        g->k[g->n++] = k;
    }
}

/* A random batch-shaped value [N, k] (any k when want is 0) */
static int batch_value(rgen *g, int64_t want)
{
    int c[64], n = 0;
    for (int i = 0; i < g->n; i++)
        if (g->k[i] > 0 && (!want || g->k[i] == want))
            c[n++] = i;
    return n ? c[pick(g, n)] : -1;
}

/* One step of the generator: element-wise ops, broadcasts of vectors and of rows, products
 * with weights, reductions over either axis, reshapes through [N*k] and [N, a, b], slices and
 * concats along the plain axis, values with N behind a plain axis. Values stay in [-1, 1]
 * through tanh. */
static void step(rgen *g, int *nparams)
{
    nest_function *f = g->f;
    int64_t N = g->N;
    int a = batch_value(g, 0);
    int64_t k = g->k[a];
    nest_value x = g->v[a];
    char name[16];
    switch (pick(g, 10)) {
    case 0: { /* a binary op with another value of the same shape, or a new parameter */
        int b = batch_value(g, k);
        nest_value y = g->v[b];
        if (b == a) {
            snprintf(name, sizeof name, "p%d", (*nparams)++);
            y = nest_parameter(f, name, NEST_F32, 2, SHAPE(N, k), NEST_ROW_MAJOR);
        }
        nest_value r = pick(g, 2) ? nest_add(f, x, y) : nest_multiply(f, x, y);
        push(g, nest_tanh(f, r), k);
        break;
    }
    case 1: { /* a vector broadcast over the rows */
        snprintf(name, sizeof name, "p%d", (*nparams)++);
        nest_value v = nest_parameter(f, name, NEST_F32, 1, SHAPE(k), NEST_ROW_MAJOR);
        push(g, nest_subtract(f, x, nest_broadcast(f, v, 2, SHAPE(N, k), 1, SHAPE(0))), k);
        break;
    }
    case 2: { /* a product with weights */
        static const int64_t js[] = {1, 5, 16, 24};
        int64_t j = js[pick(g, 4)];
        snprintf(name, sizeof name, "p%d", (*nparams)++);
        nest_value w = nest_parameter(f, name, NEST_F32, 2, SHAPE(k, j), NEST_ROW_MAJOR);
        push(g, nest_tanh(f, nest_dot(f, x, w)), j);
        break;
    }
    case 3: { /* a row's sum, broadcast back */
        nest_value r = nest_max(f, x, 1, SHAPE(1));
        push(g, r, 0);
        push(g, nest_subtract(f, x, nest_broadcast(f, r, 2, SHAPE(N, k), 1, SHAPE(1))), k);
        break;
    }
    case 4: /* a column's sum over the batch */
        push(g, nest_tanh(f, nest_sum(f, x, 1, SHAPE(0))), -k);
        break;
    case 5: { /* through [N*k] and back, or through [N, a, b] */
        nest_value flat = nest_reshape(f, x, NULL, 1, SHAPE(nest_dim_mul(f, N, k)));
        nest_value back = nest_reshape(f, nest_exp(f, flat), NULL, 2, SHAPE(N, k));
        if (k % 2 == 0)
            back = nest_reshape(f, nest_reshape(f, back, NULL, 3, SHAPE(N, 2, k / 2)), NULL, 2,
                                SHAPE(N, k));
        push(g, nest_tanh(f, back), k);
        break;
    }
    case 6: /* a slice of the columns */
        if (k > 1)
            push(g, nest_slice(f, x, SHAPE(0, 1), SHAPE(N, k), NULL), k - 1);
        break;
    case 7: { /* a concat of columns */
        int b = batch_value(g, 0);
        push(g, nest_concat(f, 2, VALUES(x, g->v[b]), 1), k + g->k[b]);
        break;
    }
    case 8: /* through the batch second, [2,N,k/2] (stored with N outermost): a product with
             * weights, a softmax over the rows of [2*N,k/2], back to [N,k] */
        if (k % 2 == 0) {
            int64_t h = k / 2;
            snprintf(name, sizeof name, "p%d", (*nparams)++);
            nest_value w = nest_parameter(f, name, NEST_F32, 2, SHAPE(h, h), NEST_ROW_MAJOR);
            nest_value t = nest_reshape(f, nest_reshape(f, x, NULL, 3, SHAPE(N, 2, h)),
                                        SHAPE(1, 0, 2), 3, SHAPE(2, N, h));
            nest_value y = nest_tanh(f, nest_dot(f, t, w));
            nest_value m = nest_reshape(f, y, NULL, 2, SHAPE(nest_dim_mul(f, N, 2), h));
            nest_value sm = nest_softmax(f, m, 1, SHAPE(1));
            nest_value b = nest_reshape(f, sm, NULL, 3, SHAPE(2, N, h));
            push(g, nest_reshape(f, b, SHAPE(1, 0, 2), 2, SHAPE(N, k)), k);
        }
        break;
    default: /* a unary op */
        push(g, pick(g, 2) ? nest_abs(f, x) : nest_negative(f, x), k);
        break;
    }
}

/* A graph of the generator from seed s: x: f32[N, k0] and 2 to 11 steps. */
static void random_graph(rgen *g, uint64_t s)
{
    *g = (rgen){.s = s};
    g->f = nest_function_new("r");
    g->N = nest_named_dim(g->f, "N");
    int np = 0;
    static const int64_t ks[] = {1, 3, 8, 16};
    int64_t k0 = ks[pick(g, 4)];
    push(g, nest_parameter(g->f, "x", NEST_F32, 2, SHAPE(g->N, k0), NEST_ROW_MAJOR), k0);
    int steps = 2 + pick(g, 10);
    for (int i = 0; i < steps; i++)
        step(g, &np);
}

/* Compiles g's function (whose nr results are returned) once and compares its f32 results at
 * N = 0, 1, 5, 33 with the interpreter's, within atol and rtol; frees the function. */
static void compare_at_sizes(rgen *g, int seed, int nr, double atol, double rtol)
{
    nest_kernel *k = nest_compile(g->f, NULL);
    if (!k) {
        char *t = nest_print(&g->f, 1);
        fail_msg("seed %d: %s\n%s", seed, nest_errmsg(g->f), t ? t : "");
    }
    int nparams = nest_param_count(g->f);
    static const int64_t sizes[] = {0, 1, 5, 33};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int64_t n = sizes[si];
        void *args[64], *out[65], *ref[65];
        int64_t cnt[65];
        for (int i = 0; i < nparams; i++) {
            int64_t c = count_at(g->f, nest_param(g->f, i), &n, 1);
            args[i] = malloc((size_t)c * sizeof(float) + 4);
            fill(args[i], NEST_F32, c, i);
        }
        for (int i = 0; i < nr; i++) {
            cnt[i] = count_at(g->f, nest_result(g->f, i), &n, 1);
            out[i] = calloc((size_t)cnt[i] + 1, sizeof(float));
            ref[i] = calloc((size_t)cnt[i] + 1, sizeof(float));
        }
        assert_ok(g->f, nest_evaluate_dims(g->f, &n, 1, args, nparams, ref, nr));
        if (nest_call_dims(k, &n, 1, args, nparams, out, nr) != NEST_OK)
            fail_msg("seed %d, N = %lld: %s", seed, (long long)n, nest_kernel_errmsg(k));
        for (int i = 0; i < nr; i++) {
            if (nest_value_type(g->f, nest_result(g->f, i)) == NEST_F32)
                assert_close(NEST_F32, out[i], ref[i], cnt[i], atol, rtol);
            free(out[i]);
            free(ref[i]);
        }
        for (int i = 0; i < nparams; i++)
            free(args[i]);
    }
    nest_kernel_free(k);
    nest_function_free(g->f);
}

static void test_random_graphs(void **state)
{
    (void)state;
    int seeds = getenv("NEST_DIMS_SEEDS") ? atoi(getenv("NEST_DIMS_SEEDS")) : 40;
    for (int seed = 1; seed <= seeds; seed++) {
        rgen g;
        random_graph(&g, (uint64_t)seed * 7919);
        /* the last value and one other are the results */
        nest_value res[2] = {g.v[g.n - 1], g.v[pick(&g, g.n)]};
        assert_ok(g.f, nest_return(g.f, 2, res, NULL));
        compare_at_sizes(&g, seed, 2, 1e-4, 1e-4);
    }
}

/* The generator's graphs differentiated: the sum of the last value as the loss, its gradient
 * by every parameter (folds over N where the batch is summed), one kernel at N = 0, 1, 5, 33
 * against the interpreter. */
static void test_random_gradients(void **state)
{
    (void)state;
    int seeds = getenv("NEST_DIMS_SEEDS") ? atoi(getenv("NEST_DIMS_SEEDS")) : 40;
    for (int seed = 1; seed <= seeds; seed++) {
        rgen g;
        random_graph(&g, (uint64_t)seed * 104729);
        nest_value last = g.v[g.n - 1];
        int r = nest_value_rank(g.f, last);
        nest_value loss = nest_sum(g.f, last, r, SHAPE(0, 1));
        int nparams = nest_param_count(g.f);
        nest_value wrt[64], res[65];
        for (int i = 0; i < nparams; i++)
            wrt[i] = nest_param(g.f, i);
        nest_value gr = nest_grad(g.f, loss, nparams, wrt);
        assert_value(g.f, gr);
        res[0] = loss;
        for (int i = 0; i < nparams; i++)
            res[i + 1] = nest_get(g.f, gr, i);
        assert_ok(g.f, nest_return(g.f, nparams + 1, res, NULL));
        compare_at_sizes(&g, seed, nparams + 1, 1e-4, 1e-3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_round_trip),
        cmocka_unit_test(test_text_order_of_names),
        cmocka_unit_test(test_unification_errors),
        cmocka_unit_test_setup_teardown(test_api_dims, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_div_exact, fn_setup, fn_teardown),
        cmocka_unit_test(test_dense_sizes),
        cmocka_unit_test(test_chain_and_l2),
        cmocka_unit_test(test_small_dims_check),
        cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_compile_sizes),
        cmocka_unit_test(test_compile_products),
        cmocka_unit_test(test_call_checks),
        cmocka_unit_test(test_compile_windows),
        cmocka_unit_test(test_compile_const_filters),
        cmocka_unit_test(test_compile_indexed),
        cmocka_unit_test(test_compile_bad_sizes),
        cmocka_unit_test(test_compile_refused),
        cmocka_unit_test(test_aot),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_random_gradients),
        cmocka_unit_test(test_emit_warnings),
        cmocka_unit_test(test_every_op_interpreted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
