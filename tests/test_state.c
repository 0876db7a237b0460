/*
 * test_state.c - module state: variables and persistent tensors in the text form and the C API,
 * their initializers (against a Python implementation of the documented generator, bit for
 * bit), entry-value semantics of assignments (a swap in one call), in-place updates, state
 * objects side by side, save and load (round trips, truncated and mismatched files leave the
 * state unchanged), state objects over the caller's arrays (nest_state_wrap), the JIT through
 * nest_call_state and the AOT state functions of a .so.
 */
#include <dlfcn.h>
#include <unistd.h>

#include "testutil.h"
#include "internal.h"

static char tmproot[64];

typedef void *(*state_new_fn)(void);

static int group_setup(void **state)
{
    (void)state;
    return tu_tmp_cache(tmproot, sizeof tmproot, "nest-state");
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rm_rf(tmproot);
    return 0;
}

/* The functions of a module, for nest_print and nest_build_so (at most 8). */
static nest_function **fns_of(const nest_module *m)
{
    static nest_function *fns[8];
    for (int i = 0; i < nest_module_count(m) && i < 8; i++)
        fns[i] = nest_module_function(m, i);
    return fns;
}

#define parse(text) tu_parse((text), "model.nest")
#define parse_fails(text, part) tu_parse_fails((text), "bad.nest", (part))

/* ---- the text form ---- */

static const char sgd_text[] =
    "var w: f32[4,3] = uniform(-0.5, 0.5, seed=1)\n"
    "var b: f32[3] = 0.25\n"
    "persistent v: f32[4,3] = zeros\n"
    "persistent steps: i32[] = 0\n"
    "\n"
    "func step(x: f32[2,4], y: f32[2,3]) -> f32[] {\n"
    "  h = add(dot(x, w), broadcast(b, shape=[2,3], axes=[0]))\n"
    "  d = subtract(h, y)\n"
    "  loss = sum(multiply(d, d), axes=[0,1])\n"
    "  g = grad(loss, w, b)\n"
    "  vn = add(multiply(broadcast(constant(f32[], 0.9), shape=[4,3], axes=[0,1]), v), get(g, 0))\n"
    "  assign(v, vn)\n"
    "  assign(w, subtract(w, multiply(broadcast(constant(f32[], 0.1), shape=[4,3], axes=[0,1]), vn)))\n"
    "  assign(b, subtract(b, multiply(broadcast(constant(f32[], 0.1), shape=[3], axes=[0]), get(g, 1))))\n"
    "  assign(steps, add(steps, constant(i32[], 1)))\n"
    "  return loss\n"
    "}\n"
    "\n"
    "func predict(x: f32[2,4]) -> f32[2,3] {\n"
    "  return add(dot(x, w), broadcast(b, shape=[2,3], axes=[0]))\n"
    "}\n"
    "\n"
    "func swap() -> () {\n"
    "  assign(w, v)\n"
    "  assign(v, w)\n"
    "  return\n"
    "}\n";

static void test_text_round_trip(void **state)
{
    (void)state;
    nest_module *m = parse(sgd_text);
    assert_string_equal(nest_module_name(m), "model");
    assert_int_equal(nest_module_count(m), 3);
    char *a = nest_print(fns_of(m), nest_module_count(m));
    assert_non_null(a);
    assert_non_null(strstr(a, "var w: f32[4,3] = uniform(-0.5, 0.5, seed=1)\n"));
    assert_non_null(strstr(a, "persistent v: f32[4,3] = zeros\n"));
    assert_non_null(strstr(a, "persistent steps: i32[] = 0\n"));
    assert_non_null(strstr(a, "  assign(w, v)\n  assign(v, w)\n"));
    nest_module *m2 = parse(a);
    char *b = nest_print(fns_of(m2), nest_module_count(m2));
    nest_module *m3 = parse(b);
    char *c = nest_print(fns_of(m3), nest_module_count(m3));
    assert_string_equal(b, c);
    /* the module's own print is the same text; without functions, its declarations alone */
    char *d = nest_module_print(m3);
    assert_non_null(d);
    assert_string_equal(d, c);
    nest_module *e = parse("var w: f32[2,3] = uniform(-1, 1, seed=3)\npersistent s: i64[] = 7\n");
    char *et = nest_module_print(e);
    assert_non_null(et);
    assert_string_equal(et, "var w: f32[2,3] = uniform(-1, 1, seed=3)\npersistent s: i64[] = 7\n\n");
    nest_module *e2 = parse(et);
    assert_int_equal(nest_module_count(e2), 0);
    char *et2 = nest_module_print(e2);
    assert_string_equal(et, et2);
    assert_null(nest_module_print(NULL));
    free(a);
    free(b);
    free(c);
    free(d);
    free(et);
    free(et2);
    nest_module_free(m);
    nest_module_free(m2);
    nest_module_free(m3);
    nest_module_free(e);
    nest_module_free(e2);
}

static void test_text_errors(void **state)
{
    (void)state;
    parse_fails("var w: f32[2] = 0\nfunc f() -> () {\n  assign(w, w)\n  assign(w, w)\n  return\n}\n",
                "bad.nest:4:3: error: w is assigned twice in function f (first at line 3");
    parse_fails("var w: f32[2] = 0\nfunc f() -> () {\n  assign(w, constant(f32[3], 1))\n  return\n}\n",
                "bad.nest:3:3: error: assign(w: f32[2], value: f32[3]): the value's type differs");
    parse_fails("var w: f32[2] = 0\nfunc f() -> f32[2] {\n  w = add(w, w)\n  return w\n}\n",
                "bad.nest:3:3: error: w is a state tensor of the module (declared at line 1)");
    parse_fails("var w: f32[2] = 0\nfunc f(w: f32[2]) -> () {\n  return\n}\n",
                "parameter name 'w' is a state tensor of module bad");
    parse_fails("func f(x: f32[2]) -> () {\n  assign(x, x)\n  return\n}\n",
                "bad.nest:2:10: error: assign takes a state tensor of the module");
    parse_fails("var w: f32[2] = 0\nvar w: f32[2] = 0\n", "bad.nest:2:5: error: state tensor 'w' is already declared at line 1");
    parse_fails("var w: i32[2] = uniform(0, 1, seed=2)\n", "uniform initializers take f32 or f64, not i32");
    parse_fails("var w: i32[2] = 1.5\n", "i32 tensors start with an integer");
    parse_fails("var w: f32[2] = uniform(1, 0, seed=2)\n", "uniform(1, 0) is not a valid distribution");
    parse_fails("var w: f32[2] = normal(0, 1)\n", "expected seed=N");
    parse_fails("var w: f32[2] = 1e39\n", "the initial value 1e+39 does not fit f32");
    parse_fails("persistent w: f32[] = 0\nfunc f(x: f32[]) -> () {\n  g = grad(x, w)\n  return\n}\n",
                "grad: w is a persistent tensor, which is not trained");
    parse_fails("func f(x: i32[]) -> () {\n  g = grad(convert(x, type=f32), x)\n  return\n}\n",
                "grad: x is i32, which has no gradient");
    parse_fails("func f(x: f32[2]) -> () {\n  g = grad(x, x)\n  return\n}\n",
                "grad: the loss must be an f32 or f64 scalar, not f32[2]");
    parse_fails("func f(x: f32[]) -> () {\n  y = exp(x)\n  g = grad(x, y)\n  return\n}\n",
                "grad differentiates by variables and parameters; y is a value computed");
}

/* ---- initializers: element i of a tensor, from a Python implementation of the generator ---- */

static void test_initializers(void **state)
{
    (void)state;
    nest_module *m = nest_module_new("init");
    nest_init u = {NEST_INIT_UNIFORM, -0.5, 0.5, 1}, u64 = {NEST_INIT_UNIFORM, -2, 3, 7};
    nest_init n64 = {NEST_INIT_NORMAL, 1, 2, 42}, n32 = {NEST_INIT_NORMAL, 0, 1, 3};
    nest_init k = {NEST_INIT_CONSTANT, -7, 0, 0};
    assert_int_equal(nest_variable(m, "a", NEST_F32, 1, SHAPE(6), &u), NEST_OK);
    assert_int_equal(nest_variable(m, "b", NEST_F64, 2, SHAPE(2, 2), &u64), NEST_OK);
    assert_int_equal(nest_variable(m, "c", NEST_F64, 1, SHAPE(4), &n64), NEST_OK);
    assert_int_equal(nest_variable(m, "d", NEST_F32, 1, SHAPE(4), &n32), NEST_OK);
    assert_int_equal(nest_persistent(m, "e", NEST_I64, 0, NULL, &k), NEST_OK);
    assert_int_equal(nest_persistent(m, "z", NEST_F32, 1, SHAPE(0), NULL), NEST_OK);
    nest_init big = {NEST_INIT_NORMAL, 0, 1, 5};
    assert_int_equal(nest_variable(m, "s", NEST_F64, 1, SHAPE(100000), &big), NEST_OK);
    nest_state *st = nest_state_new(m);
    assert_non_null(st);
    assert_int_equal(nest_state_count(st), 7);
    assert_int_equal(nest_state_size(st), 6 * 4 + 4 * 8 + 4 * 8 + 4 * 4 + 8 + 0 + 800000);
    const float a[6] = {0.06656157225370407f, 0.2457817643880844f, 0.4710027575492859f,
                        -0.05564078316092491f, -0.05573529750108719f, 0.2628943920135498f};
    const double b[4] = {-0x1.a092d14840bc0p-5, -0x1.ea82cfc83ad22p+0, 0x1.407ca141d2baep+1,
                         0x1.d44d3264086d8p-1};
    const double c[4] = {0x1.61db1077280aep+1, 0x1.92a3480c37f50p-4, 0x1.606fc1a749692p+0,
                         0x1.706da03a8af18p+0};
    const float d[4] = {-0.1507893055677414f, 1.235966682434082f, -0.45784690976142883f,
                        0.41243278980255127f};
    assert_exact(NEST_F32, nest_state_tensor(st, "a"), a, 6);
    assert_exact(NEST_F64, nest_state_tensor(st, "b"), b, 4);
    assert_exact(NEST_F64, nest_state_tensor(st, "c"), c, 4);
    assert_exact(NEST_F32, nest_state_tensor(st, "d"), d, 4);
    assert_int_equal(*(int64_t *)nest_state_tensor(st, "e"), -7);
    assert_int_equal((uintptr_t)nest_state_data(st, 0) % 64, 0);
    /* a normal(0, 1) sample of 100000: mean and variance within 5 standard errors */
    const double *s = nest_state_tensor(st, "s");
    double mean = 0, var = 0;
    for (int i = 0; i < 100000; i++)
        mean += s[i] / 100000;
    for (int i = 0; i < 100000; i++)
        var += (s[i] - mean) * (s[i] - mean) / 100000;
    assert_true(fabs(mean) < 5 / sqrt(100000.0));
    assert_true(fabs(var - 1) < 5 * sqrt(2 / 100000.0));
    /* inspection */
    assert_string_equal(nest_state_name(st, 1), "b");
    assert_int_equal(nest_state_type(st, 1), NEST_F64);
    assert_int_equal(nest_state_rank(st, 1), 2);
    assert_int_equal(nest_state_shape(st, 1)[1], 2);
    assert_int_equal(nest_state_find(st, "e"), 4);
    assert_null(nest_state_tensor(st, "nope"));
    assert_null(nest_state_name(st, 7));
    assert_int_equal(nest_state_type(st, -1), -1);
    /* API errors */
    assert_int_equal(nest_variable(m, "a", NEST_F32, 0, NULL, NULL), NEST_ERR_ARG);
    assert_non_null(strstr(nest_module_errmsg(m), "already has a state tensor a"));
    nest_init bad = {NEST_INIT_CONSTANT, 2, 0, 0};
    assert_int_equal(nest_persistent(m, "flag", NEST_BOOL, 0, NULL, &bad), NEST_ERR_TYPE);
    assert_int_equal(nest_variable(m, "neg", NEST_F32, 1, SHAPE(-1), NULL), NEST_ERR_ARG);
    assert_int_equal(nest_variable(m, "nest_x", NEST_F32, 0, NULL, NULL), NEST_ERR_ARG);
    nest_state_free(st);
    nest_module_free(m);
}

/* ---- initial values: the library's nest_state_new (interpreter and JIT) and a .so's
 * NAME_state_new agree bit for bit, for every initializer and type; arrays land as given ---- */

static const char init_text[] =
    "var a: f32[5] = uniform(-0.5, 0.5, seed=1)\n"
    "var b: f64[3] = normal(1, 2, seed=42)\n"
    "var c: f32[40] = normal(0, 1, seed=3)\n"
    "var u: f64[20] = uniform(-3, 1e-3, seed=9007199254740993)\n"
    "persistent z: f64[4] = zeros\n"
    "persistent k: i32[3] = -7\n"
    "persistent t: bool[2] = true\n"
    "var w: f32[2,3] = [1, -2.5, 0.003, -0, inf, -1e-45]\n"
    "persistent n: i64[3] = [-9223372036854775808, 0, 7]\n"
    "var big: f64[2,20] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,\n"
    "  -0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 1e300, 11.5, 12.5, 13.5, 14.5, 15.5,\n"
    "  16.5, 17.5, 18.5, 4.9e-324]\n"
    "persistent f: bool[3] = [true, false, true]\n"
    "persistent i: i32[70] = [" /* 280 bytes: linked into the .so as data */
    "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, "
    "25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, "
    "48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, -2147483648]\n"
    "persistent e: f32[0] = []\n"
    "\n"
    "func reads() -> (f32[5], f64[3], f32[40], f64[20], f64[4], i32[3], bool[2], f32[2,3], i64[3],\n"
    "                 f64[2,20], bool[3], i32[70]) {\n"
    "  return a, b, c, u, z, k, t, w, n, big, f, i\n"
    "}\n";

enum { INIT_TENSORS = 13, INIT_READS = 12 };

typedef int (*call_fn)(void *, void *const *, void *const *);

static void test_initial_values_everywhere(void **state)
{
    (void)state;
    nest_module *m = parse(init_text);
    nest_function *f = nest_module_find(m, "reads");
    nest_state *st = nest_state_new(m);
    assert_non_null(st);
    assert_int_equal(nest_state_count(st), INIT_TENSORS);
    /* the arrays, as written */
    const float w[6] = {1, -2.5f, 0.003f, -0.0f, INFINITY, -1e-45f};
    const int64_t n[3] = {INT64_MIN, 0, 7};
    assert_memory_equal(nest_state_tensor(st, "w"), w, sizeof w);
    assert_memory_equal(nest_state_tensor(st, "n"), n, sizeof n);
    const double *big = nest_state_tensor(st, "big");
    assert_true(big[19] == 19 && big[20] == -0.5 && big[30] == 1e300 && big[39] == 4.9e-324);
    const int32_t *iv = nest_state_tensor(st, "i");
    assert_true(iv[68] == 68 && iv[69] == INT32_MIN);
    const unsigned char *fb = nest_state_tensor(st, "f");
    assert_true(fb[0] == 1 && fb[1] == 0 && fb[2] == 1);
    /* the reads of a call, by the interpreter and by the JIT, are the state's bytes */
    void *want[INIT_READS], *got[INIT_READS];
    for (int r = 0; r < INIT_READS; r++) {
        size_t bytes = tu_state_tensor_bytes(st, r);
        want[r] = malloc(bytes + 1);
        got[r] = malloc(bytes + 1);
        assert_true(want[r] && got[r]);
    }
    assert_ok(f, nest_evaluate_state(f, st, NULL, 0, want, INIT_READS));
    for (int r = 0; r < INIT_READS; r++)
        assert_memory_equal(want[r], nest_state_data(st, r), tu_state_tensor_bytes(st, r));
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    nest_state *fresh = nest_state_new(m);
    assert_int_equal(nest_call_state(k, fresh, NULL, 0, got, INIT_READS), NEST_OK);
    for (int r = 0; r < INIT_READS; r++)
        assert_memory_equal(got[r], want[r], tu_state_tensor_bytes(st, r));
    /* a .so built by nestc: its NAME_state_new, and a call of reads on it */
    char path[128], so[128], cmd[512];
    snprintf(path, sizeof path, "%s/inits.nest", tmproot);
    snprintf(so, sizeof so, "%s/inits.so", tmproot);
    tu_write_file(path, init_text);
    snprintf(cmd, sizeof cmd, "%s %s -o %s", tu_nestc(), path, so);
    assert_int_equal(system(cmd), 0);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    state_new_fn snew;
    void (*sfree)(void *);
    void *(*sdata)(void *, int);
    call_fn reads;
    *(void **)&snew = dlsym(lib, "inits_state_new");
    *(void **)&sfree = dlsym(lib, "inits_state_free");
    *(void **)&sdata = dlsym(lib, "inits_state_data");
    *(void **)&reads = dlsym(lib, "reads_call");
    assert_true(snew && sfree && sdata && reads);
    void *sa = snew();
    assert_non_null(sa);
    for (int i = 0; i < INIT_TENSORS; i++)
        if (tu_state_tensor_bytes(st, i))
            assert_memory_equal(sdata(sa, i), nest_state_data(st, i), tu_state_tensor_bytes(st, i));
    for (int r = 0; r < INIT_READS; r++)
        memset(got[r], 0x55, tu_state_tensor_bytes(st, r));
    assert_int_equal(reads(sa, NULL, got), 0);
    for (int r = 0; r < INIT_READS; r++)
        assert_memory_equal(got[r], want[r], tu_state_tensor_bytes(st, r));
    sfree(sa);
    dlclose(lib);
    for (int r = 0; r < INIT_READS; r++) {
        free(want[r]);
        free(got[r]);
    }
    /* the text form gives the arrays back */
    char *text = nest_module_print(m);
    assert_non_null(text);
    assert_non_null(strstr(text, "var w: f32[2,3] = [1, -2.5, 0.003, -0, inf, -1e-45]\n"));
    assert_non_null(strstr(text, "persistent e: f32[0] = []\n"));
    nest_module *m2 = parse(text);
    nest_state *st2 = nest_state_new(m2);
    unsigned char *b1 = tu_state_bytes(st), *b2 = tu_state_bytes(st2);
    assert_memory_equal(b1, b2, nest_state_size(st));
    free(b1);
    free(b2);
    free(text);
    nest_state_free(st2);
    nest_module_free(m2);
    nest_kernel_free(k);
    nest_state_free(fresh);
    nest_state_free(st);
    nest_module_free(m);
}

/* nest_variable_data and nest_persistent_data: the data is copied when declared; errors. */
static void test_array_initializers_api(void **state)
{
    (void)state;
    nest_module *m = nest_module_new("arr");
    double d[4] = {0.5, -1, 2, 1e-300};
    int32_t k[2] = {3, -4};
    unsigned char flags[3] = {1, 0, 2};
    assert_int_equal(nest_variable_data(m, "d", NEST_F64, 2, SHAPE(2, 2), d), NEST_OK);
    assert_int_equal(nest_persistent_data(m, "k", NEST_I32, 1, SHAPE(2), k), NEST_OK);
    assert_int_equal(nest_persistent_data(m, "none", NEST_F32, 1, SHAPE(0), NULL), NEST_OK);
    d[0] = 99; /* copied: the caller's array is free again */
    nest_state *st = nest_state_new(m);
    assert_non_null(st);
    const double dw[4] = {0.5, -1, 2, 1e-300};
    assert_memory_equal(nest_state_tensor(st, "d"), dw, sizeof dw);
    assert_memory_equal(nest_state_tensor(st, "k"), k, sizeof k);
    /* errors, on the module */
    assert_int_equal(nest_persistent_data(m, "flags", NEST_BOOL, 1, SHAPE(3), flags), NEST_ERR_ARG);
    assert_non_null(strstr(nest_module_errmsg(m),
                           "persistent tensor flags: element 2 of the initial value is byte 2, not "
                           "a bool (0 or 1)"));
    assert_int_equal(nest_variable_data(m, "v", NEST_F32, 1, SHAPE(2), NULL), NEST_ERR_ARG);
    assert_non_null(strstr(nest_module_errmsg(m), "given by nest_variable_data, with its data"));
    nest_init bad = {NEST_INIT_DATA, 0, 0, 0};
    assert_int_equal(nest_variable(m, "v", NEST_F32, 1, SHAPE(2), &bad), NEST_ERR_ARG);
    assert_int_equal(nest_variable_data(m, "d", NEST_F64, 0, NULL, d), NEST_ERR_ARG);
    assert_int_equal(nest_variable_data(NULL, "x", NEST_F64, 0, NULL, d), NEST_ERR_ARG);
    assert_int_equal(nest_state_count(st), 3);
    nest_state_free(st);
    nest_module_free(m);
    /* the text form */
    parse_fails("var w: f32[2,2] = [1, 2, 3]\n",
                "bad.nest:1:20: error: variable w: 3 values given, expected 4");
    parse_fails("var w: f32[2] = [1, [2]]\n", "nested lists are not allowed");
    parse_fails("persistent w: i32[2] = [1, 2.5]\n", "i32 constants take integer literals");
    parse_fails("persistent w: i32[1] = [2147483648]\n", "out of range for i32");
    parse_fails("persistent w: bool[2] = [true, 1]\n", "bool constants take true or false");
    parse_fails("var w: f32[1] = [1e39]\n", "number is out of range for f32");
    parse_fails("var w: f32[2] = []\n", "variable w: 0 values given, expected 2");
}

/* ---- semantics in the interpreter ---- */

static void test_swap_and_entry_values(void **state)
{
    (void)state;
    nest_module *m = parse(sgd_text);
    nest_state *st = nest_state_new(m);
    float w0[12], v0[12];
    memcpy(w0, nest_state_tensor(st, "w"), sizeof w0);
    for (int i = 0; i < 12; i++)
        ((float *)nest_state_tensor(st, "v"))[i] = v0[i] = (float)i;
    nest_function *swap = nest_module_find(m, "swap");
    assert_int_equal(nest_evaluate(swap, NULL, 0, NULL, 0), NEST_ERR_CALL);
    assert_non_null(strstr(nest_errmsg(swap), "use nest_evaluate_state"));
    assert_ok(swap, nest_evaluate_state(swap, st, NULL, 0, NULL, 0));
    assert_exact(NEST_F32, nest_state_tensor(st, "w"), v0, 12);
    assert_exact(NEST_F32, nest_state_tensor(st, "v"), w0, 12);
    nest_state_free(st);
    nest_module_free(m);
}

/* One step of sgd_text by hand, in double: w, b, v, steps updated, the loss returned. */
static double sgd_reference(float *w, float *b, float *v, int32_t *steps, const float *x,
                            const float *y)
{
    double d[2][3], loss = 0, gw[4][3] = {{0}}, gb[3] = {0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double h = b[j];
            for (int k = 0; k < 4; k++)
                h += (double)x[i * 4 + k] * w[k * 3 + j];
            d[i][j] = h - y[i * 3 + j];
            loss += d[i][j] * d[i][j];
        }
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++)
                gw[k][j] += 2 * d[i][j] * x[i * 4 + k];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 2; i++)
            gb[j] += 2 * d[i][j];
    for (int k = 0; k < 12; k++) {
        double vn = 0.9f * v[k] + gw[k / 3][k % 3];
        v[k] = (float)vn;
        w[k] = (float)(w[k] - 0.1f * vn);
    }
    for (int j = 0; j < 3; j++)
        b[j] = (float)(b[j] - 0.1f * gb[j]);
    (*steps)++;
    return loss;
}

static void check_sgd(nest_state *st, float *w, float *b, float *v, int32_t steps, double tol)
{
    assert_close(NEST_F32, nest_state_tensor(st, "w"), w, 12, tol, tol);
    assert_close(NEST_F32, nest_state_tensor(st, "b"), b, 3, tol, tol);
    assert_close(NEST_F32, nest_state_tensor(st, "v"), v, 12, tol, tol);
    assert_int_equal(*(int32_t *)nest_state_tensor(st, "steps"), steps);
}

static void test_sgd_interpreter(void **state)
{
    (void)state;
    nest_module *m = parse(sgd_text);
    nest_state *st = nest_state_new(m);
    nest_function *step = nest_module_find(m, "step");
    float w[12], b[3], v[12] = {0}, x[8], y[6], loss;
    int32_t steps = 0;
    memcpy(w, nest_state_tensor(st, "w"), sizeof w);
    memcpy(b, nest_state_tensor(st, "b"), sizeof b);
    for (int i = 0; i < 8; i++)
        x[i] = (float)((i * 7) % 5 - 2) / 4;
    for (int i = 0; i < 6; i++)
        y[i] = (float)(i % 3) / 2;
    for (int it = 0; it < 5; it++) {
        void *args[2] = {x, y}, *res[1] = {&loss};
        assert_ok(step, nest_evaluate_state(step, st, args, 2, res, 1));
        double want = sgd_reference(w, b, v, &steps, x, y);
        assert_close(NEST_F64, &(double){loss}, &want, 1, 1e-6, 1e-5);
        check_sgd(st, w, b, v, steps, 1e-5);
    }
    /* argument arrays may not be state tensors; the state must fit the module */
    void *args[2] = {nest_state_tensor(st, "w"), y}, *res[1] = {&loss};
    assert_int_equal(nest_evaluate_state(step, st, args, 2, res, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_errmsg(step), "argument 1 is state tensor w"));
    nest_module *other = nest_module_new("other");
    nest_variable(other, "w", NEST_F32, 2, SHAPE(4, 3), NULL);
    nest_state *wrong = nest_state_new(other);
    args[0] = x;
    assert_int_equal(nest_evaluate_state(step, wrong, args, 2, res, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_errmsg(step), "the state object does not fit"));
    assert_int_equal(nest_evaluate_state(step, NULL, args, 2, res, 1), NEST_ERR_CALL);
    nest_state_free(wrong);
    nest_module_free(other);
    nest_state_free(st);
    nest_module_free(m);
}

/* ---- the C API builds the same module ---- */

static void test_api(void **state)
{
    (void)state;
    nest_module *m = nest_module_new("api");
    nest_init k = {NEST_INIT_CONSTANT, 2, 0, 0};
    assert_int_equal(nest_variable(m, "w", NEST_F64, 1, SHAPE(3), &k), NEST_OK);
    assert_int_equal(nest_persistent(m, "count", NEST_F64, 0, NULL, NULL), NEST_OK);
    nest_function *f = nest_module_add_function(m, "f");
    assert_non_null(f);
    assert_null(nest_module_add_function(m, "f"));
    assert_non_null(strstr(nest_module_errmsg(m), "already has a function f"));
    nest_value x = nest_parameter(f, "x", NEST_F64, 1, SHAPE(3), NEST_ROW_MAJOR);
    nest_value w = nest_read(f, "w");
    assert_int_equal(nest_read(f, "w"), w);
    assert_int_equal(nest_read(f, "nope"), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "module api has no state tensor 'nope'");
    nest_value c = nest_read(f, "count");
    nest_value loss = nest_dot(f, nest_multiply(f, x, w), w); /* sum x w^2 */
    nest_value g = nest_grad(f, loss, 1, &w);
    assert_value(f, g);
    assert_ok(f, nest_assign(f, w, nest_get(f, g, 0)));
    assert_int_equal(nest_assign(f, w, x), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "w is assigned twice in function f");
    assert_int_equal(nest_assign(f, x, x), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "the target must be a state tensor");
    assert_int_equal(nest_grad(f, loss, 1, &c), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "count is a persistent tensor");
    assert_int_equal(nest_set_name(f, loss, "count"), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "the name 'count' is a state tensor of module api");
    assert_ok(f, nest_return(f, 1, &loss, NULL));
    nest_function *free_fn = nest_function_new("g");
    assert_int_equal(nest_read(free_fn, "w"), NEST_NONE);
    assert_error(free_fn, NEST_ERR_ARG, "it is not in a module");
    nest_function_free(free_fn);
    nest_function_free(f); /* the module's: a no-op */
    nest_state *st = nest_state_new(m);
    double xs[3] = {1, -2, 0.5}, out;
    void *args[1] = {xs}, *res[1] = {&out};
    assert_ok(f, nest_evaluate_state(f, st, args, 1, res, 1));
    assert_true(out == 2 * 2 * (1 - 2 + 0.5));
    const double want[3] = {2 * 1 * 2, 2 * -2 * 2, 2 * 0.5 * 2}; /* d/dw sum x w^2 = 2 x w */
    assert_exact(NEST_F64, nest_state_tensor(st, "w"), want, 3);
    nest_state_free(st);
    nest_module_free(m);
}

/* The read node of each state tensor comes from a table (f->state_uses): it must follow the
 * nodes when pruning renumbers them, pass over a read that a failed builder rolled back, and
 * serve a copy (ir_bind) that has read nodes and no table yet. */
static void test_state_reads_table(void **state)
{
    (void)state;
    nest_module *m = nest_module_new("reads");
    const char *names[] = {"s0", "s1", "s2", "s3", "s4"};
    for (int i = 0; i < 5; i++)
        assert_int_equal(nest_variable(m, names[i], NEST_F32, 1, SHAPE(2), NULL), NEST_OK);
    nest_function *f = nest_module_add_function(m, "f");
    nest_value x = nest_parameter(f, "x", NEST_F32, 1, SHAPE(2), NEST_ROW_MAJOR);
    nest_value dead = nest_exp(f, x); /* pruned: the reads after it move down */
    nest_value r3 = nest_read(f, "s3"), r0 = nest_read(f, "s0");
    nest_value r1 = nest_read(f, "s1"); /* read, never used: pruned */
    assert_int_equal(nest_read(f, "s3"), r3);
    assert_true(dead >= 0 && r1 >= 0);
    nest_value sum = nest_add(f, nest_multiply(f, x, r3), r0);
    assert_ok(f, nest_assign(f, r0, nest_add(f, r0, x)));
    assert_ok(f, nest_return(f, 1, &sum, NULL));
    int32_t before = f->nnodes;
    assert_true(ir_prune(f) > 0);
    assert_true(f->nnodes < before);
    /* each kept read is found where it is now, by name and through the table */
    for (int s = 0; s < 5; s++) {
        int32_t v = ir_state_read(f, s), again = nest_read(f, names[s]);
        assert_int_equal(v, again);
        assert_true(v >= 0 && v < f->nnodes);
        assert_int_equal(f->nodes[v].op, OP_STATE);
        assert_int_equal(f->nodes[v].a.state, s);
        int reads = 0;
        for (int32_t i = 0; i < f->nnodes; i++)
            reads += f->nodes[i].op == OP_STATE && f->nodes[i].a.state == s;
        assert_int_equal(reads, 1); /* one read node per tensor, the pruned ones made anew */
    }
    /* a read made and then rolled back (as grad does when it fails) is made again */
    int32_t top = f->nnodes;
    nest_value late = nest_variable(m, "s5", NEST_F32, 1, SHAPE(2), NULL) == NEST_OK
                          ? nest_read(f, "s5")
                          : NEST_NONE;
    assert_int_equal(late, top);
    f->nnodes = top;
    nest_value cmul = nest_multiply(f, x, x); /* another node takes its place */
    assert_int_equal(cmul, top);
    nest_value r5 = nest_read(f, "s5");
    assert_true(r5 > cmul);
    assert_int_equal(f->nodes[r5].op, OP_STATE);
    /* the values are still right: s0 and s3 are 0 (zeros), s0 += x */
    nest_state *st = nest_state_new(m);
    assert_non_null(st);
    float xs[2] = {1.5f, -2}, out[2];
    void *args[1] = {xs}, *res[1] = {out};
    assert_ok(f, nest_evaluate_state(f, st, args, 1, res, 1));
    assert_exact(NEST_F32, out, ((float[]){0, 0}), 2);
    assert_exact(NEST_F32, nest_state_tensor(st, "s0"), xs, 2);
    nest_state_free(st);
    nest_module_free(m);
}

/* ---- compiled: the JIT and a .so ---- */

static void test_jit(void **state)
{
    (void)state;
    nest_module *m = parse(sgd_text);
    nest_function *step = nest_module_find(m, "step"), *predict = nest_module_find(m, "predict");
    nest_kernel *ks = nest_compile(step, NULL), *kp = nest_compile(predict, NULL);
    if (!ks)
        print_error("%s\n", nest_errmsg(step));
    assert_non_null(ks);
    assert_non_null(kp);
    /* two models side by side: one trained by the kernel, one by the interpreter */
    nest_state *a = nest_state_new(m), *b = nest_state_new(m);
    float x[8], y[6], la, lb, pa[6], pb[6];
    for (int i = 0; i < 8; i++)
        x[i] = (float)((i * 3) % 7 - 3) / 4;
    for (int i = 0; i < 6; i++)
        y[i] = (float)(i % 2);
    void *args[2] = {x, y}, *ra[1] = {&la}, *rb[1] = {&lb};
    assert_int_equal(nest_call(ks, args, 2, ra, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(ks), "call it with nest_call_state"));
    for (int it = 0; it < 4; it++) {
        assert_int_equal(nest_call_state(ks, a, args, 2, ra, 1), NEST_OK);
        assert_ok(step, nest_evaluate_state(step, b, args, 2, rb, 1));
        assert_close(NEST_F32, &la, &lb, 1, 1e-5, 1e-5);
    }
    assert_close(NEST_F32, nest_state_tensor(a, "w"), nest_state_tensor(b, "w"), 12, 1e-5, 1e-5);
    assert_int_equal(*(int32_t *)nest_state_tensor(a, "steps"), 4);
    void *pargs[1] = {x}, *pra[1] = {pa}, *prb[1] = {pb};
    assert_int_equal(nest_call_state(kp, a, pargs, 1, pra, 1), NEST_OK);
    assert_ok(predict, nest_evaluate_state(predict, b, pargs, 1, prb, 1));
    assert_close(NEST_F32, pa, pb, 6, 1e-5, 1e-5);
    /* a state of another layout is refused */
    nest_module *other = nest_module_new("other");
    nest_state *wrong = nest_state_new(other);
    assert_int_equal(nest_call_state(ks, wrong, args, 2, ra, 1), NEST_ERR_CALL);
    assert_int_equal(nest_call_state(ks, NULL, args, 2, ra, 1), NEST_ERR_CALL);
    /* the swap: entry values, in one compiled call */
    nest_function *swap = nest_module_find(m, "swap");
    nest_kernel *kw = nest_compile(swap, NULL);
    assert_non_null(kw);
    float w0[12], v0[12];
    memcpy(w0, nest_state_tensor(a, "w"), sizeof w0);
    memcpy(v0, nest_state_tensor(a, "v"), sizeof v0);
    assert_int_equal(nest_call_state(kw, a, NULL, 0, NULL, 0), NEST_OK);
    assert_exact(NEST_F32, nest_state_tensor(a, "w"), v0, 12);
    assert_exact(NEST_F32, nest_state_tensor(a, "v"), w0, 12);
    nest_state_free(wrong);
    nest_module_free(other);
    nest_kernel_free(kw);
    nest_kernel_free(ks);
    nest_kernel_free(kp);
    nest_state_free(a);
    nest_state_free(b);
    nest_module_free(m);
}

/* The update w = w - lr * v runs in place: one loop that writes w, no copy of it. */
static void test_in_place(void **state)
{
    (void)state;
    nest_module *m = parse("var w: f32[256,64] = 1\npersistent v: f32[256,64] = 2\n"
                           "func sgd(lr: f32[]) -> () {\n"
                           "  assign(w, subtract(w, multiply(broadcast(lr, shape=[256,64], "
                           "axes=[0,1]), v)))\n  return\n}\n");
    nest_function *f = nest_module_find(m, "sgd");
    char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    assert_non_null(c);
    assert_non_null(strstr(c, "w[i0] = w[i0] - "));
    assert_null(strstr(c, "workspace_size")); /* no temporary at all */
    free(c);
    nest_module_free(m);
}

/* Assignments that read each other's tensors (a swap; a rotation through a result) still run
 * in place: each element's values are read into registers before any store, no workspace. */
static void test_swap_in_registers(void **state)
{
    (void)state;
    nest_module *m = parse("var w: f32[64,3] = uniform(-0.5, 0.5, seed=1)\n"
                           "persistent v: f32[64,3] = normal(0, 1, seed=2)\n"
                           "func swap() -> () {\n  assign(w, v)\n  assign(v, w)\n  return\n}\n"
                           "func rot(x: f32[64,3]) -> f32[64,3] {\n"
                           "  assign(w, add(v, x))\n  assign(v, multiply(w, v))\n"
                           "  return add(w, v)\n}\n");
    char *c = nest_emit(fns_of(m), 2, NEST_EMIT_C, NULL);
    assert_non_null(c);
    assert_null(strstr(c, "workspace_size"));
    free(c);
    nest_state *a = nest_state_new(m), *b = nest_state_new(m);
    float x[192], ra[192], rb[192];
    for (int i = 0; i < 192; i++)
        x[i] = (float)(i % 7) - 3;
    for (int k = 0; k < 2; k++) {
        nest_function *f = nest_module_function(m, k);
        nest_kernel *kf = nest_compile(f, NULL);
        assert_non_null(kf);
        int np = k ? 1 : 0;
        void *args[1] = {x}, *resa[1] = {ra}, *resb[1] = {rb};
        for (int it = 0; it < 3; it++) {
            assert_int_equal(nest_call_state(kf, a, args, np, resa, np), NEST_OK);
            assert_ok(f, nest_evaluate_state(f, b, args, np, resb, np));
            if (k)
                assert_exact(NEST_F32, ra, rb, 192);
            assert_exact(NEST_F32, nest_state_tensor(a, "w"), nest_state_tensor(b, "w"), 192);
            assert_exact(NEST_F32, nest_state_tensor(a, "v"), nest_state_tensor(b, "v"), 192);
        }
        nest_kernel_free(kf);
    }
    nest_state_free(a);
    nest_state_free(b);
    nest_module_free(m);
}

typedef void (*state_free_fn)(void *);
typedef int (*state_file_fn)(void *, const char *);
typedef void *(*state_tensor_fn)(void *, const char *);
typedef int (*step_fn)(void *, void *const *, void *const *);

static void test_aot(void **state)
{
    (void)state;
    nest_module *m = parse(sgd_text);
    char so[128], h[128], cmd[512], hc[128];
    snprintf(so, sizeof so, "%s/model.so", tmproot);
    snprintf(h, sizeof h, "%s/model.h", tmproot);
    assert_int_equal(nest_build_so(fns_of(m), nest_module_count(m), so, h, NULL, NULL), NEST_OK);
    /* the header compiles in C and C++, and declares the state's functions */
    snprintf(hc, sizeof hc, "%s/h.c", tmproot);
    tu_write_file(hc, "#include \"model.h\"\nint main(void) { model_state *st = model_state_new(); "
                      "float x[8] = {0}, y[6] = {0}, l; int r = step(st, x, y, &l); "
                      "model_state_free(st); return r; }\n");
    snprintf(cmd, sizeof cmd, "cc -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only -I%s %s",
             tmproot, hc);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "g++ -Wall -Wextra -Werror -fsyntax-only -x c++ %s", h);
    assert_int_equal(system(cmd), 0);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    state_new_fn snew;
    state_free_fn sfree;
    state_file_fn ssave, sload;
    state_tensor_fn stensor;
    step_fn call;
    size_t (*ssize)(void);
    int (*scount)(void);
    const char *(*sname)(int);
    *(void **)&snew = dlsym(lib, "model_state_new");
    *(void **)&sfree = dlsym(lib, "model_state_free");
    *(void **)&ssave = dlsym(lib, "model_state_save");
    *(void **)&sload = dlsym(lib, "model_state_load");
    *(void **)&stensor = dlsym(lib, "model_state_tensor");
    *(void **)&call = dlsym(lib, "step_call");
    *(void **)&ssize = dlsym(lib, "model_state_size");
    *(void **)&scount = dlsym(lib, "model_state_count");
    *(void **)&sname = dlsym(lib, "model_state_name");
    assert_true(snew && sfree && ssave && sload && stensor && call && ssize && scount && sname);
    assert_int_equal(scount(), 4);
    assert_int_equal(ssize(), 12 * 4 + 3 * 4 + 12 * 4 + 4);
    assert_string_equal(sname(2), "v");
    /* the .so's initial state is the library's */
    void *sa = snew();
    nest_state *ref = nest_state_new(m);
    assert_exact(NEST_F32, stensor(sa, "w"), nest_state_tensor(ref, "w"), 12);
    assert_exact(NEST_F32, stensor(sa, "b"), nest_state_tensor(ref, "b"), 3);
    /* steps of the .so against the interpreter */
    nest_function *step = nest_module_find(m, "step");
    float x[8], y[6], l1, l2;
    for (int i = 0; i < 8; i++)
        x[i] = (float)(i % 3) - 1;
    for (int i = 0; i < 6; i++)
        y[i] = (float)i / 6;
    void *args[2] = {x, y}, *r1[1] = {&l1}, *r2[1] = {&l2};
    for (int it = 0; it < 3; it++) {
        assert_int_equal(call(sa, args, r1), 0);
        assert_ok(step, nest_evaluate_state(step, ref, args, 2, r2, 1));
        assert_close(NEST_F32, &l1, &l2, 1, 1e-5, 1e-5);
    }
    assert_close(NEST_F32, stensor(sa, "w"), nest_state_tensor(ref, "w"), 12, 1e-5, 1e-5);
    /* files written by the .so load into the library's state and back */
    char path[128];
    snprintf(path, sizeof path, "%s/a.state", tmproot);
    assert_int_equal(ssave(sa, path), 0);
    nest_state *back = nest_state_new(m);
    assert_int_equal(nest_state_load(back, path), NEST_OK);
    assert_exact(NEST_F32, nest_state_tensor(back, "w"), stensor(sa, "w"), 12);
    assert_int_equal(*(int32_t *)nest_state_tensor(back, "steps"), 3);
    void *sb = snew();
    assert_int_equal(nest_state_save(back, path), NEST_OK);
    assert_int_equal(sload(sb, path), 0);
    assert_exact(NEST_F32, stensor(sb, "v"), stensor(sa, "v"), 12);
    assert_int_equal(sload(sb, "/nonexistent/x.state"), 1);
    sfree(sa);
    sfree(sb);
    sfree(NULL);
    dlclose(lib);
    nest_state_free(ref);
    nest_state_free(back);
    nest_module_free(m);
}

/* A module of state alone (no functions): its C, header and shared object hold the state's
 * functions, for a host that keeps, saves and loads weights; nestc emits and builds it. */
static void test_state_only(void **state)
{
    (void)state;
    static const char text[] = "var w: f32[2,3] = uniform(-1, 1, seed=3)\n"
                               "persistent n: i64[] = 7\n";
    nest_module *m = parse(text);
    assert_int_equal(nest_module_count(m), 0);
    char *c = nest_module_emit(m, NEST_EMIT_C, NULL), *h = nest_module_emit(m, NEST_EMIT_H, NULL);
    assert_non_null(c);
    assert_non_null(h);
    assert_non_null(strstr(c, "model_state *model_state_new(void)"));
    assert_non_null(strstr(h, "model_state *model_state_new(void);"));
    assert_non_null(strstr(h, "#ifndef NEST_GENERATED_model_H"));
    nest_string_free(c);
    nest_string_free(h);
    char so[128], hp[128], path[128], cmd[512];
    snprintf(so, sizeof so, "%s/weights.so", tmproot);
    snprintf(hp, sizeof hp, "%s/weights.h", tmproot);
    snprintf(path, sizeof path, "%s/weights.state", tmproot);
    assert_int_equal(nest_module_build_so(m, so, hp, NULL, NULL), NEST_OK);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    state_new_fn snew;
    state_free_fn sfree;
    state_file_fn ssave;
    state_tensor_fn stensor;
    *(void **)&snew = dlsym(lib, "model_state_new");
    *(void **)&sfree = dlsym(lib, "model_state_free");
    *(void **)&ssave = dlsym(lib, "model_state_save");
    *(void **)&stensor = dlsym(lib, "model_state_tensor");
    assert_true(snew && sfree && ssave && stensor);
    void *st = snew();
    nest_state *ref = nest_state_new(m);
    assert_exact(NEST_F32, stensor(st, "w"), nest_state_tensor(ref, "w"), 6);
    assert_int_equal(*(int64_t *)stensor(st, "n"), 7);
    /* a file the .so writes loads into the library's state */
    *(int64_t *)stensor(st, "n") = 12;
    assert_int_equal(ssave(st, path), 0);
    assert_int_equal(nest_state_load(ref, path), NEST_OK);
    assert_int_equal(*(int64_t *)nest_state_tensor(ref, "n"), 12);
    sfree(st);
    dlclose(lib);
    nest_state_free(ref);
    nest_module_free(m);
    /* nestc: --emit=c and -o of the file */
    const char *nestc = tu_nestc();
    snprintf(path, sizeof path, "%s/weights.nest", tmproot);
    tu_write_file(path, text);
    snprintf(cmd, sizeof cmd, "%s --emit=c %s | grep -q 'weights_state \\*weights_state_new(void)'",
             nestc, path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s %s -o %s && nm -D %s | grep -q ' T weights_state_load$'", nestc,
             path, so, so);
    assert_int_equal(system(cmd), 0);
}

/* ---- entry points bind to their own library ---- */

/* Builds the module of `text` (named "model") into TMP/tag.so and loads it with dlopen's `mode`. */
static void *load_module_so(const char *text, const char *tag, int mode)
{
    nest_module *m = parse(text);
    char so[128];
    snprintf(so, sizeof so, "%s/%s.so", tmproot, tag);
    int st = nest_build_so(fns_of(m), nest_module_count(m), so, NULL, NULL, NULL);
    if (st != NEST_OK)
        print_error("%s\n", nest_errmsg(fns_of(m)[0]));
    assert_int_equal(st, NEST_OK);
    nest_module_free(m);
    void *lib = dlopen(so, RTLD_NOW | mode);
    if (!lib)
        print_error("dlopen: %s\n", dlerror());
    assert_non_null(lib);
    return lib;
}

typedef int (*plain_call_fn)(void *const *, void *const *);

/* Calls NAME_call of lib on x (4 floats) into r. */
static void call_plain(void *lib, const char *name, float *x, float *r)
{
    char sym[64];
    snprintf(sym, sizeof sym, "%s_call", name);
    plain_call_fn fn;
    *(void **)&fn = dlsym(lib, sym);
    assert_non_null(fn);
    assert_int_equal(fn((void *[]){x}, (void *[]){r}), 0);
}

/* A shared object's entry points call their own code, never a function of the same name that
 * the process already has: the C library's (random, sync, time, and glibc's legacy step) or
 * another nest library's, loaded first with RTLD_GLOBAL (two modules of one name side by side:
 * each NAME_state_tensor looks in its own table). */
static void test_entry_points_bind_locally(void **state)
{
    (void)state;
    void *first = load_module_so("var a: f32[2] = 5\n"
                                 "func twice(x: f32[4]) -> f32[4] {\n"
                                 "  return multiply(x, broadcast(constant(f32[], 3), shape=[4], axes=[0]))\n"
                                 "}\n",
                                 "first", RTLD_GLOBAL);
    void *lib = load_module_so("var w: f32[4] = 1\n"
                               "var q: f32[2] = 7\n"
                               "func twice(x: f32[4]) -> f32[4] { return add(x, x) }\n"
                               "func random(x: f32[4]) -> f32[4] { return negative(x) }\n"
                               "func sync(x: f32[4]) -> f32[4] { return multiply(x, x) }\n"
                               "func step(x: f32[4]) -> f32[4] { return subtract(x, x) }\n"
                               "func time(x: f32[4]) -> f32[4] { return add(x, w) }\n",
                               "second", RTLD_LOCAL);
    float x[4] = {1, -2, 3, 0.5f}, r[4];
    call_plain(lib, "twice", x, r);
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == 2 * x[i]);
    call_plain(lib, "random", x, r);
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == -x[i]);
    call_plain(lib, "sync", x, r);
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == x[i] * x[i]);
    r[0] = 9;
    call_plain(lib, "step", x, r);
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == 0);
    /* the entry NAME itself, by its arrays */
    int (*twice)(const float *, float *);
    *(void **)&twice = dlsym(lib, "twice");
    assert_non_null(twice);
    assert_int_equal(twice(x, r), 0);
    assert_true(r[1] == -4);
    /* the state's functions and a function with state */
    state_new_fn snew;
    state_free_fn sfree;
    state_tensor_fn stensor;
    step_fn timecall;
    *(void **)&snew = dlsym(lib, "model_state_new");
    *(void **)&sfree = dlsym(lib, "model_state_free");
    *(void **)&stensor = dlsym(lib, "model_state_tensor");
    *(void **)&timecall = dlsym(lib, "time_call");
    assert_true(snew && sfree && stensor && timecall);
    void *st = snew();
    assert_non_null(st);
    assert_null(stensor(st, "a")); /* the first library's tensor */
    float *q = stensor(st, "q");
    assert_non_null(q);
    assert_true(q[0] == 7 && q[1] == 7);
    assert_int_equal(timecall(st, (void *[]){x}, (void *[]){r}), 0);
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == x[i] + 1);
    sfree(st);
    dlclose(lib);
    dlclose(first);
}

/* ---- state files ---- */

static long file_size(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 ? (long)s.st_size : -1;
}

static void test_save_load(void **state)
{
    (void)state;
    nest_module *m = parse(sgd_text);
    nest_state *a = nest_state_new(m), *b = nest_state_new(m);
    float *wa = nest_state_tensor(a, "w"), *wb = nest_state_tensor(b, "w");
    for (int i = 0; i < 12; i++)
        wa[i] = (float)i * 0.5f;
    *(int32_t *)nest_state_tensor(a, "steps") = 77;
    char path[128], bad[160];
    snprintf(path, sizeof path, "%s/s.state", tmproot);
    assert_int_equal(nest_state_save(a, path), NEST_OK);
    /* 16 header + per tensor (2 + name + 2 + 8 rank) + data + 8 checksum */
    long want = 16 + (2 + 1 + 2 + 16) + (2 + 1 + 2 + 8) + (2 + 1 + 2 + 16) + (2 + 5 + 2 + 0) +
                48 + 12 + 48 + 4 + 8;
    assert_int_equal(file_size(path), want);
    assert_int_equal(nest_state_load(b, path), NEST_OK);
    assert_exact(NEST_F32, wb, wa, 12);
    assert_int_equal(*(int32_t *)nest_state_tensor(b, "steps"), 77);
    /* every truncation is an error, and leaves the state as it was */
    FILE *in = fopen(path, "rb");
    unsigned char *data = malloc((size_t)want);
    assert_int_equal(fread(data, 1, (size_t)want, in), (size_t)want);
    fclose(in);
    float before[12];
    for (int i = 0; i < 12; i++)
        wb[i] = before[i] = -1;
    snprintf(bad, sizeof bad, "%s/bad.state", tmproot);
    for (long len = 0; len < want; len += len < 40 ? 1 : 7) {
        FILE *out = fopen(bad, "wb");
        fwrite(data, 1, (size_t)len, out);
        fclose(out);
        assert_int_equal(nest_state_load(b, bad), NEST_ERR_IO);
        assert_exact(NEST_F32, wb, before, 12);
    }
    assert_non_null(strstr(nest_state_errmsg(b), "truncated"));
    /* a flipped bit in the data: the checksum */
    data[want - 20] ^= 4;
    FILE *out = fopen(bad, "wb");
    fwrite(data, 1, (size_t)want, out);
    fclose(out);
    assert_int_equal(nest_state_load(b, bad), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(b), "checksum"));
    assert_exact(NEST_F32, wb, before, 12);
    /* trailing bytes */
    data[want - 20] ^= 4;
    out = fopen(bad, "wb");
    fwrite(data, 1, (size_t)want, out);
    fputc(0, out);
    fclose(out);
    assert_int_equal(nest_state_load(b, bad), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(b), "1 bytes follow"));
    /* the state of another module: other shapes */
    nest_module *m2 = parse("var w: f32[3,4] = 0\nvar b: f32[3] = 0\npersistent v: f32[4,3] = 0\n"
                            "persistent steps: i32[] = 0\n");
    nest_state *c = nest_state_new(m2);
    assert_int_equal(nest_state_load(c, path), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(c), "tensor 'w' has dimension 0 of 4 in the file, 3 in the state"));
    nest_module *m3 = parse("var w: f32[4,3] = 0\n");
    nest_state *d = nest_state_new(m3);
    assert_int_equal(nest_state_load(d, path), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(d), "the file's tensor 2, 'b', is not in the state"));
    assert_int_equal(nest_state_load(d, "/nonexistent/file"), NEST_ERR_IO);
    assert_int_equal(nest_state_save(d, "/nonexistent/dir/file"), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(d), "cannot create /nonexistent/dir/file.tmp"));
    /* a tensor of the state that the file lacks, and one named twice in a file (its checksum
     * made right again): each is named, nothing changes */
    nest_module *m4 = parse("var w: f32[4,3] = 0\nvar b: f32[3] = 0\npersistent v: f32[4,3] = 0\n"
                            "persistent steps: i32[] = 0\npersistent extra: f64[2] = 0\n");
    nest_state *e = nest_state_new(m4);
    ((double *)nest_state_tensor(e, "extra"))[1] = 4;
    assert_int_equal(nest_state_load(e, path), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(e), "tensor 'extra' of the state is not in the file"));
    assert_true(((double *)nest_state_tensor(e, "extra"))[1] == 4);
    nest_module *m5 = parse("var a: f32[2] = 1\nvar b: f32[2] = 2\n");
    nest_state *g = nest_state_new(m5);
    assert_int_equal(nest_state_save(g, bad), NEST_OK);
    long len = file_size(bad);
    unsigned char *twice = malloc((size_t)len);
    in = fopen(bad, "rb");
    assert_int_equal(fread(twice, 1, (size_t)len, in), (size_t)len);
    fclose(in);
    assert_true(twice[16 + 2] == 'a' && twice[16 + 2 + 1 + 2 + 8 + 2] == 'b');
    twice[16 + 2 + 1 + 2 + 8 + 2] = 'a';
    uint64_t h = 0xcbf29ce484222325u;
    for (long i = 0; i < len - 8; i++)
        h = (h ^ twice[i]) * 0x100000001b3u;
    for (int i = 0; i < 8; i++)
        twice[len - 8 + i] = (unsigned char)(h >> (8 * i));
    out = fopen(bad, "wb");
    fwrite(twice, 1, (size_t)len, out);
    fclose(out);
    ((float *)nest_state_tensor(g, "a"))[0] = 9;
    assert_int_equal(nest_state_load(g, bad), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(g), "tensor 'a' is in the file twice"));
    assert_true(((float *)nest_state_tensor(g, "a"))[0] == 9);
    free(twice);
    nest_state_free(e);
    nest_state_free(g);
    nest_module_free(m4);
    nest_module_free(m5);
    /* not a state file at all */
    out = fopen(bad, "wb");
    fputs("hello, this is not a state file", out);
    fclose(out);
    assert_int_equal(nest_state_load(a, bad), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(a), "not a state file"));
    free(data);
    nest_state_free(a);
    nest_state_free(b);
    nest_state_free(c);
    nest_state_free(d);
    nest_module_free(m);
    nest_module_free(m2);
    nest_module_free(m3);
}

/* nest_state_wrap: a state over the caller's arrays, read and assigned in place, shared by the
 * state objects of two modules (a training step and a prediction compiled apart). */
static void test_wrap(void **state)
{
    (void)state;
    nest_module *m = parse(sgd_text);
    nest_module *mp = parse("var w: f32[4,3] = 0\nvar b: f32[3] = 0\n"
                            "func predict2(x: f32[2,4]) -> f32[2,3] {\n"
                            "  return add(dot(x, w), broadcast(b, shape=[2,3], axes=[0]))\n}\n");
    nest_function *step = nest_module_find(m, "step"), *predict = nest_module_find(m, "predict");
    nest_kernel *ks = nest_compile(step, NULL), *kp = nest_compile(predict, NULL);
    nest_kernel *kp2 = nest_compile(nest_module_find(mp, "predict2"), NULL);
    assert_non_null(ks);
    assert_non_null(kp);
    assert_non_null(kp2);
    nest_state *ref = nest_state_new(m);
    float w[12], b[3], v[12];
    int32_t steps = 5;
    memcpy(w, nest_state_tensor(ref, "w"), sizeof w);
    memcpy(b, nest_state_tensor(ref, "b"), sizeof b);
    memcpy(v, nest_state_tensor(ref, "v"), sizeof v);
    *(int32_t *)nest_state_tensor(ref, "steps") = 5;
    void *data[4] = {w, b, v, &steps};
    nest_state *st = nest_state_wrap(m, data);
    assert_non_null(st);
    assert_ptr_equal(nest_state_tensor(st, "w"), w);
    assert_ptr_equal(nest_state_data(st, 3), &steps);
    assert_int_equal(nest_state_size(st), nest_state_size(ref));
    void *pdata[2] = {w, b};
    nest_state *sp = nest_state_wrap(mp, pdata);
    assert_non_null(sp);
    float x[8], y[6], la, lb;
    for (int i = 0; i < 8; i++)
        x[i] = (float)((i * 5) % 7 - 3) / 4;
    for (int i = 0; i < 6; i++)
        y[i] = (float)(i % 3);
    void *args[2] = {x, y}, *ra[1] = {&la}, *rb[1] = {&lb};
    for (int it = 0; it < 3; it++) { /* the same kernel on equal values: equal bits */
        assert_int_equal(nest_call_state(ks, st, args, 2, ra, 1), NEST_OK);
        assert_int_equal(nest_call_state(ks, ref, args, 2, rb, 1), NEST_OK);
        assert_exact(NEST_F32, &la, &lb, 1);
    }
    assert_exact(NEST_F32, w, nest_state_tensor(ref, "w"), 12);
    assert_exact(NEST_F32, v, nest_state_tensor(ref, "v"), 12);
    assert_int_equal(steps, 8);
    /* the other module's state sees the trained arrays */
    float pa[6], pb[6];
    void *pargs[1] = {x}, *pra[1] = {pa}, *prb[1] = {pb};
    assert_int_equal(nest_call_state(kp2, sp, pargs, 1, pra, 1), NEST_OK);
    assert_int_equal(nest_call_state(kp, ref, pargs, 1, prb, 1), NEST_OK);
    assert_exact(NEST_F32, pa, pb, 6);
    /* the two layouts differ: each state fits its own module's kernels only */
    assert_int_equal(nest_call_state(kp, sp, pargs, 1, pra, 1), NEST_ERR_CALL);
    /* an argument in a wrapped array is refused as for an allocated one */
    void *alias[1] = {w};
    assert_int_equal(nest_call_state(kp2, sp, alias, 1, pra, 1), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(kp2), "argument 1 is state tensor w"));
    /* save and load go through the arrays */
    char path[128];
    snprintf(path, sizeof path, "%s/wrap.state", tmproot);
    assert_int_equal(nest_state_save(st, path), NEST_OK);
    float w0[12];
    memcpy(w0, w, sizeof w0);
    for (int i = 0; i < 12; i++)
        w[i] = 0;
    assert_int_equal(nest_state_load(st, path), NEST_OK);
    assert_exact(NEST_F32, w, w0, 12);
    /* errors: no arrays, a NULL array, arrays that overlap; the module's error says which */
    assert_null(nest_state_wrap(m, NULL));
    assert_int_equal(nest_module_errcode(m), NEST_ERR_ARG);
    assert_non_null(strstr(nest_module_errmsg(m), "no arrays"));
    void *holes[4] = {w, NULL, v, &steps};
    assert_null(nest_state_wrap(m, holes));
    assert_non_null(strstr(nest_module_errmsg(m), "the array of b is NULL"));
    void *overlap[4] = {w, b, w + 11, &steps};
    assert_null(nest_state_wrap(m, overlap));
    assert_non_null(strstr(nest_module_errmsg(m), "the arrays of w and v overlap"));
    assert_null(nest_state_wrap(NULL, data));
    /* a module without state needs no arrays */
    nest_module *empty = nest_module_new("empty");
    nest_state *se = nest_state_wrap(empty, NULL);
    assert_non_null(se);
    assert_int_equal(nest_state_count(se), 0);
    nest_state_free(se);
    nest_module_free(empty);
    nest_state_free(st); /* leaves the arrays alone (ASan would see a free of the stack) */
    nest_state_free(sp);
    nest_state_free(ref);
    nest_kernel_free(ks);
    nest_kernel_free(kp);
    nest_kernel_free(kp2);
    nest_module_free(m);
    nest_module_free(mp);
}

/* nestc --run --jit runs a function with state on new states, interpreter against kernel. */
static void test_nestc_run(void **state)
{
    (void)state;
    char path[128], cmd[512], out[128];
    snprintf(path, sizeof path, "%s/run.nest", tmproot);
    snprintf(out, sizeof out, "%s/run.out", tmproot);
    tu_write_file(path, sgd_text);
    snprintf(cmd, sizeof cmd, "%s --run=step --jit %s > %s 2>&1", tu_nestc(), path, out);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(out, "r");
    char line[256] = "";
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_non_null(strstr(line, "step result 0: f32[] = ["));
    assert_non_null(strstr(line, "(compiled; the reference interpreter differs by"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_round_trip),
        cmocka_unit_test(test_text_errors),
        cmocka_unit_test(test_initializers),
        cmocka_unit_test(test_initial_values_everywhere),
        cmocka_unit_test(test_array_initializers_api),
        cmocka_unit_test(test_swap_and_entry_values),
        cmocka_unit_test(test_sgd_interpreter),
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_state_reads_table),
        cmocka_unit_test(test_jit),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_swap_in_registers),
        cmocka_unit_test(test_aot),
        cmocka_unit_test(test_state_only),
        cmocka_unit_test(test_entry_points_bind_locally),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_nestc_run),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
