/*
 * test_scale.c - large graphs: 20,000-node graphs compiled in process and run against the
 * reference interpreter, and the generated C growing with the graph, not faster. (Times belong
 * to the benchmark, `make bench`'s compile-scale table; these tests check results and sizes.)
 *
 *   chain   t_i = op(t_{i-1}, y) over f32[1024], 20,000 ops cycling through add, multiply,
 *           subtract and maximum: fusion must store intermediates so that each loop body stays
 *           small enough to compile
 *   wide    6,664 sums of op(p_a, p_b) over f32[64], added up in a chain: many small folds,
 *           merged a few per loop; values are small multiples of powers of two, so every
 *           correct evaluation gives the exact result, whatever the order of the sums
 *   shared  t_{i+1} = max(t_i * y, t_i - y): each value used twice, so the expression tree
 *           doubles with every op while the DAG grows by two nodes: the C must follow the DAG
 *   sgd     a training step of 40 dense layers with momentum (160 state tensors assigned, in
 *           place where safe): the kernel and the interpreter train two copies of the model
 */
#include "testutil.h"

static nest_value binop(nest_function *f, int k, nest_value a, nest_value b)
{
    switch (k % 4) {
    case 0: return nest_add(f, a, b);
    case 1: return nest_multiply(f, a, b);
    case 2: return nest_subtract(f, a, b);
    default: return nest_maximum(f, a, b);
    }
}

/* Compiles f, runs it and the interpreter on args, and compares the one f32 result. */
static void check_against_interpreter(nest_function *f, void *const *args, int64_t count,
                                      double atol, double rtol)
{
    float *got = calloc((size_t)count, sizeof *got), *want = calloc((size_t)count, sizeof *want);
    assert_true(got && want);
    void *res[1] = {want};
    assert_ok(f, evaluate(f, args, res));
    nest_options o;
    nest_options_init(&o);
    o.cache = 0; /* the compile itself is under test */
    nest_kernel *k = nest_compile(f, &o);
    if (!k)
        fail_msg("nest_compile: %s", nest_errmsg(f));
    res[0] = got;
    assert_int_equal(nest_call(k, args, nest_param_count(f), res, 1), NEST_OK);
    assert_close(NEST_F32, got, want, count, atol, rtol);
    nest_kernel_free(k);
    free(got);
    free(want);
}

static void chain_of_20000(void **state)
{
    nest_function *f = *state;
    nest_value x = nest_parameter(f, "x", NEST_F32, 1, SHAPE(1024), NEST_ROW_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F32, 1, SHAPE(1024), NEST_ROW_MAJOR);
    nest_value t = x;
    for (int i = 0; i < 20000; i++)
        t = binop(f, i, t, y);
    assert_value(f, t);
    assert_ok(f, nest_return(f, 1, &t, NULL));
    assert_int_equal(nest_param_count(f) + 20000, 20002);
    /* |y| < 1: the chain contracts, and stays in range */
    float *xs = malloc(1024 * sizeof *xs), *ys = malloc(1024 * sizeof *ys);
    assert_true(xs && ys);
    for (int i = 0; i < 1024; i++) {
        xs[i] = (float)((i * 37 % 101) - 50) / 16;
        ys[i] = (float)((i * 53 % 97) - 48) / 64;
    }
    void *args[2] = {xs, ys};
    /* each op is rounded once in either (the interpreter rounds each to f32): they agree up to
     * the contraction of a multiply and a subtract into one rounding */
    check_against_interpreter(f, args, 1024, 1e-5, 1e-4);
    free(xs);
    free(ys);
}

static void wide_of_20000(void **state)
{
    nest_function *f = *state;
    nest_value p[8];
    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        p[i] = nest_parameter(f, name, NEST_F32, 1, SHAPE(64), NEST_ROW_MAJOR);
    }
    nest_value acc = NEST_NONE;
    int terms = (20000 - 8) / 3;
    for (int i = 0; i < terms; i++) {
        nest_value e = binop(f, i, p[i % 8], p[(i / 8 + i) % 8]);
        nest_value s = nest_sum(f, e, 1, SHAPE(0));
        acc = i ? nest_add(f, acc, s) : s;
    }
    assert_value(f, acc);
    assert_ok(f, nest_return(f, 1, &acc, NULL));
    /* elements in {-1, -1/2, 0, 1/2, 1}: every op's result is a multiple of 1/4 below 2^21 in
     * magnitude, exact in f32 in any order */
    float *ps[8];
    void *args[8];
    for (int k = 0; k < 8; k++) {
        ps[k] = malloc(64 * sizeof *ps[k]);
        assert_non_null(ps[k]);
        for (int i = 0; i < 64; i++)
            ps[k][i] = (float)((i * 7 + k * 3) % 5 - 2) / 2;
        args[k] = ps[k];
    }
    check_against_interpreter(f, args, 1, 0, 0);
    for (int k = 0; k < 8; k++)
        free(ps[k]);
}

/* The C of the `shared` graph of n ops. */
static size_t shared_c_size(int n)
{
    nest_function *f = nest_function_new("shared");
    assert_non_null(f);
    nest_value y = nest_parameter(f, "y", NEST_F32, 1, SHAPE(256), NEST_ROW_MAJOR);
    nest_value t = y;
    for (int i = 0; i < n; i++)
        t = nest_maximum(f, nest_multiply(f, t, y), nest_subtract(f, t, y));
    assert_value(f, t);
    assert_ok(f, nest_return(f, 1, &t, NULL));
    char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    if (!c)
        fail_msg("nest_emit: %s", nest_errmsg(f));
    size_t len = strlen(c);
    nest_string_free(c);
    nest_function_free(f);
    return len;
}

static void shared_values_once(void **state)
{
    (void)state;
    size_t a = shared_c_size(2000), b = shared_c_size(4000);
    /* linear: twice the ops, about twice the C (and a few hundred bytes an op at most) */
    print_message("C of 6,000 and 12,000 ops: %zu and %zu bytes\n", a, b);
    assert_true(b < a * 5 / 2);
    assert_true(b < (size_t)12000 * 400);
}

/* The same graph for its values: a DAG of 3,000 ops, compiled and run. */
static void shared_values_run(void **state)
{
    nest_function *f = *state;
    nest_value y = nest_parameter(f, "y", NEST_F32, 1, SHAPE(256), NEST_ROW_MAJOR);
    nest_value t = y;
    for (int i = 0; i < 1000; i++)
        t = nest_maximum(f, nest_multiply(f, t, y), nest_subtract(f, t, y));
    assert_value(f, t);
    assert_ok(f, nest_return(f, 1, &t, NULL));
    float ys[256];
    for (int i = 0; i < 256; i++)
        ys[i] = (float)((i * 29 % 61) - 30) / 64;
    void *args[1] = {ys};
    check_against_interpreter(f, args, 256, 1e-5, 1e-4);
}

/* Appends to a growing text. */
static void put(char **t, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char **t, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if (*len + (size_t)n + 1 > *cap) {
        *cap = (*len + (size_t)n + 1) * 2;
        *t = realloc(*t, *cap);
        assert_non_null(*t);
    }
    va_start(ap, fmt);
    vsnprintf(*t + *len, *cap - *len, fmt, ap);
    va_end(ap);
    *len += (size_t)n;
}

/* SGD with momentum over L dense layers: v = 0.9 v + g, w = w - lr v for every weight and bias,
 * the loss a sum of squares of the last layer. Weights uniform in +-0.3 keep the activations'
 * scale through the layers (each multiplies it by about 8 * 0.17, the relu by 1 / sqrt 2). */
static char *sgd_text(int layers)
{
    char *t = NULL;
    size_t len = 0, cap = 0;
    for (int l = 0; l < layers; l++)
        put(&t, &len, &cap,
            "var w%d: f32[64,64] = uniform(-0.3, 0.3, seed=%d)\nvar b%d: f32[64] = uniform(-0.1, "
            "0.1, seed=%d)\npersistent v%d: f32[64,64] = zeros\npersistent u%d: f32[64] = zeros\n",
            l, l + 1, l, l + 1001, l, l);
    put(&t, &len, &cap, "func step(x: f32[8,64], lr: f32[]) -> f32[] {\n");
    put(&t, &len, &cap, "  zero = broadcast(constant(f32[], 0), shape=[8,64], axes=[0,1])\n");
    for (int l = 0; l < layers; l++) {
        char in[16];
        snprintf(in, sizeof in, l ? "h%d" : "x", l - 1);
        put(&t, &len, &cap,
            "  h%d = maximum(add(dot(%s, w%d), broadcast(b%d, shape=[8,64], axes=[0])), zero)\n", l,
            in, l, l);
    }
    put(&t, &len, &cap, "  loss = sum(multiply(h%d, h%d), axes=[0,1])\n  g = grad(loss", layers - 1,
        layers - 1);
    for (int l = 0; l < layers; l++)
        put(&t, &len, &cap, ", w%d, b%d", l, l);
    put(&t, &len, &cap, ")\n");
    for (int l = 0; l < layers; l++) {
        put(&t, &len, &cap,
            "  nv%d = add(multiply(broadcast(constant(f32[], 0.9), shape=[64,64], axes=[0,1]), "
            "v%d), get(g, %d))\n  nu%d = add(multiply(broadcast(constant(f32[], 0.9), "
            "shape=[64], axes=[0]), u%d), get(g, %d))\n",
            l, l, 2 * l, l, l, 2 * l + 1);
        put(&t, &len, &cap,
            "  assign(v%d, nv%d)\n  assign(u%d, nu%d)\n  assign(w%d, subtract(w%d, "
            "multiply(broadcast(lr, shape=[64,64], axes=[0,1]), nv%d)))\n  assign(b%d, "
            "subtract(b%d, multiply(broadcast(lr, shape=[64], axes=[0]), nu%d)))\n",
            l, l, l, l, l, l, l, l, l, l);
    }
    put(&t, &len, &cap, "  return loss\n}\n");
    return t;
}
static void sgd_of_40_layers(void **state)
{
    (void)state;
    char *text = sgd_text(40);
    nest_module *m = nest_parse(text, strlen(text), "sgd.nest");
    free(text);
    assert_non_null(m);
    if (nest_module_errcode(m) != NEST_OK)
        fail_msg("%s", nest_module_errmsg(m));
    nest_function *f = nest_module_find(m, "step");
    nest_options o;
    nest_options_init(&o);
    o.cache = 0;
    nest_kernel *k = nest_compile(f, &o);
    if (!k)
        fail_msg("nest_compile: %s", nest_errmsg(f));
    nest_state *a = nest_state_new(m), *b = nest_state_new(m);
    assert_true(a && b);
    float x[8 * 64], lr = 0.01f, la, lb;
    for (int i = 0; i < 8 * 64; i++)
        x[i] = (float)((i * 37 % 101) - 50) / 50;
    void *args[2] = {x, &lr}, *ra[1] = {&la}, *rb[1] = {&lb};
    for (int it = 0; it < 3; it++) {
        assert_int_equal(nest_call_state(k, a, args, 2, ra, 1), NEST_OK);
        assert_ok(f, nest_evaluate_state(f, b, args, 2, rb, 1));
        assert_true(la > 1e-3f); /* the activations kept their scale through the layers */
        assert_close(NEST_F32, &la, &lb, 1, 1e-5, 1e-3);
    }
    /* every weight, bias and velocity: f32 sums in another order, through three steps */
    assert_int_equal(nest_state_count(a), 160);
    for (int i = 0; i < nest_state_count(a); i++) {
        int64_t n = 1;
        for (int d = 0; d < nest_state_rank(a, i); d++)
            n *= nest_state_shape(a, i)[d];
        assert_close(NEST_F32, nest_state_data(a, i), nest_state_data(b, i), n, 1e-5, 1e-3);
    }
    nest_state_free(a);
    nest_state_free(b);
    nest_kernel_free(k);
    nest_module_free(m);
}

int main(void)
{
    setenv("NEST_CACHE", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(chain_of_20000, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(wide_of_20000, fn_setup, fn_teardown),
        cmocka_unit_test(shared_values_once),
        cmocka_unit_test_setup_teardown(shared_values_run, fn_setup, fn_teardown),
        cmocka_unit_test(sgd_of_40_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
