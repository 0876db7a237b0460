/*
 * test_dims_train.c - training with a symbolic batch: a function with state whose parameters
 * have a symbolic batch N, with the gradients of a loss over the batch (nest_grad of a
 * symbolic function: the weights' gradients are folds over N). One kernel, called at N = 0, 1,
 * 7 and 32 for several steps in a row, against the interpreter at that size
 * (nest_evaluate_state_dims) and against the kernel compiled for that exact N
 * (nest_specialize): the loss and every state tensor after each step. Also the AOT ABI of such
 * a function (the state first, then the dims) and the rules that are still refused.
 */
#include <dlfcn.h>
#include <unistd.h>

#include "testutil.h"

static char tmproot[64];

static int group_setup(void **state)
{
    (void)state;
    return tu_tmp_cache(tmproot, sizeof tmproot, "nest-dtrain");
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rm_rf(tmproot);
    return 0;
}

#define parse_ok(text) tu_parse((text), "train.nest")

/* A 16-24-10 perceptron trained by SGD with momentum on a batch of N: softmax cross-entropy
 * summed over the batch and scaled by `scale` (the caller's 1/N), the velocity of w1 kept. */
static const char mlp_text[] =
    "var w1: f32[16,24] = uniform(-0.25, 0.25, seed=1)\n"
    "var b1: f32[24] = zeros\n"
    "var w2: f32[24,10] = uniform(-0.2, 0.2, seed=2)\n"
    "var b2: f32[10] = 0.01\n"
    "persistent v1: f32[16,24] = zeros\n"
    "persistent steps: i32[] = 0\n"
    "\n"
    "func step(x: f32[N,16], y: f32[N,10], scale: f32[]) -> (f32[], f32[N,10]) {\n"
    "  h = maximum(add(dot(x, w1), broadcast(b1, shape=[N,24], axes=[0])),\n"
    "              broadcast(constant(f32[], 0), shape=[N,24], axes=[0,1]))\n"
    "  z = add(dot(h, w2), broadcast(b2, shape=[N,10], axes=[0]))\n"
    "  p = softmax(z, axes=[1])\n"
    "  zs = subtract(z, broadcast(max(z, axes=[1]), shape=[N,10], axes=[1]))\n"
    "  lse = broadcast(log(sum(exp(zs), axes=[1])), shape=[N,10], axes=[1])\n"
    "  loss = multiply(negative(sum(multiply(y, subtract(zs, lse)), axes=[0,1])), scale)\n"
    "  g = grad(loss, w1, b1, w2, b2)\n"
    "  nv1 = add(multiply(broadcast(constant(f32[], 0.9), shape=[16,24], axes=[0,1]), v1),\n"
    "            get(g, 0))\n"
    "  lr = constant(f32[], 0.5)\n"
    "  assign(v1, nv1)\n"
    "  assign(w1, subtract(w1, multiply(broadcast(lr, shape=[16,24], axes=[0,1]), nv1)))\n"
    "  assign(b1, subtract(b1, multiply(broadcast(lr, shape=[24], axes=[0]), get(g, 1))))\n"
    "  assign(w2, subtract(w2, multiply(broadcast(lr, shape=[24,10], axes=[0,1]), get(g, 2))))\n"
    "  assign(b2, subtract(b2, multiply(broadcast(lr, shape=[10], axes=[0]), get(g, 3))))\n"
    "  assign(steps, add(steps, constant(i32[], 1)))\n"
    "  return loss, p\n"
    "}\n";

/* Batch s of N examples: inputs in [-1, 1) and one-hot labels, different at each step. */
static void batch(float *x, float *y, int64_t n, int s)
{
    uint64_t r = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
    for (int64_t i = 0; i < n * 16; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((int64_t)(r >> 40) % 2048 - 1024) / 1024.0f;
    }
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < 10; j++)
            y[i * 10 + j] = (float)(j == (i * 7 + s * 3) % 10);
}

/* Every state tensor of a and b agree (floats within atol + rtol |b|, integers exactly). */
static void states_close(nest_state *a, nest_state *b, double atol, double rtol)
{
    assert_int_equal(nest_state_count(a), nest_state_count(b));
    for (int i = 0; i < nest_state_count(a); i++) {
        const int64_t *shape = nest_state_shape(a, i);
        int64_t n = 1;
        for (int k = 0; k < nest_state_rank(a, i); k++)
            n *= shape[k];
        nest_type t = nest_state_type(a, i);
        if (t == NEST_F32)
            assert_close(t, nest_state_data(a, i), nest_state_data(b, i), n, atol, rtol);
        else
            assert_exact(t, nest_state_data(a, i), nest_state_data(b, i), n);
    }
}

/* The step compiled once with a symbolic N, called at several sizes for three steps each:
 * against the interpreter at that N, and against the kernel compiled for that N. */
static void test_train_sizes(void **state)
{
    (void)state;
    nest_module *m = parse_ok(mlp_text);
    nest_function *f = nest_module_find(m, "step");
    assert_non_null(f);
    assert_int_equal(nest_dim_count(f), 1);
    nest_kernel *k = nest_compile(f, NULL);
    if (!k)
        fail_msg("%s", nest_errmsg(f));
    static const int64_t sizes[] = {1, 7, 32, 0};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int64_t n = sizes[si];
        nest_function *g = nest_specialize(f, &n, 1);
        assert_non_null(g);
        nest_kernel *ks = nest_compile(g, NULL);
        if (!ks)
            fail_msg("N=%lld: %s", (long long)n, nest_errmsg(g));
        nest_state *si_ = nest_state_new(m), *sk = nest_state_new(m), *ss = nest_state_new(m);
        assert_true(si_ && sk && ss);
        float *x = calloc((size_t)n * 16 + 1, sizeof *x), *y = calloc((size_t)n * 10 + 1, sizeof *y);
        float *p[3] = {calloc((size_t)n * 10 + 1, 4), calloc((size_t)n * 10 + 1, 4),
                       calloc((size_t)n * 10 + 1, 4)};
        float scale = n ? 1.0f / (float)n : 1.0f, loss[3];
        for (int s = 0; s < 3; s++) {
            batch(x, y, n, s);
            void *args[3] = {x, y, &scale};
            void *ri[2] = {&loss[0], p[0]}, *rk[2] = {&loss[1], p[1]}, *rs[2] = {&loss[2], p[2]};
            assert_ok(f, nest_evaluate_state_dims(f, si_, &n, 1, args, 3, ri, 2));
            if (nest_call_state_dims(k, sk, &n, 1, args, 3, rk, 2) != NEST_OK)
                fail_msg("N=%lld: %s", (long long)n, nest_kernel_errmsg(k));
            if (nest_call_state(ks, ss, args, 3, rs, 2) != NEST_OK)
                fail_msg("N=%lld: %s", (long long)n, nest_kernel_errmsg(ks));
            /* against the interpreter (in double), and the static kernel (the same floats) */
            assert_close(NEST_F32, &loss[1], &loss[0], 1, 1e-5, 1e-4);
            assert_close(NEST_F32, p[1], p[0], n * 10, 1e-6, 1e-4);
            states_close(sk, si_, 1e-5, 1e-4);
            assert_close(NEST_F32, &loss[1], &loss[2], 1, 1e-6, 1e-5);
            assert_close(NEST_F32, p[1], p[2], n * 10, 1e-6, 1e-5);
            states_close(sk, ss, 1e-6, 1e-5);
        }
        assert_int_equal(*(int32_t *)nest_state_tensor(sk, "steps"), 3);
        if (n > 0) { /* the weights moved */
            nest_state *fresh = nest_state_new(m);
            const float *w0 = nest_state_tensor(fresh, "w1"), *w1 = nest_state_tensor(sk, "w1");
            double moved = 0;
            for (int i = 0; i < 16 * 24; i++)
                moved += fabs((double)w1[i] - w0[i]);
            assert_true(moved > 1e-3);
            nest_state_free(fresh);
        }
        for (int i = 0; i < 3; i++)
            free(p[i]);
        free(x);
        free(y);
        nest_state_free(si_);
        nest_state_free(sk);
        nest_state_free(ss);
        nest_kernel_free(ks);
        nest_function_free(g);
    }
    nest_kernel_free(k);
    nest_module_free(m);
}

/* The calls' checks: the sizes, and the entry points that do not fit the function. */
static void test_train_calls(void **state)
{
    (void)state;
    nest_module *m = parse_ok(mlp_text);
    nest_function *f = nest_module_find(m, "step");
    nest_kernel *k = nest_compile(f, NULL);
    if (!k)
        fail_msg("%s", nest_errmsg(f));
    nest_state *st = nest_state_new(m);
    unsigned char *before = tu_state_bytes(st);
    int64_t n = 2, neg = -1;
    float x[32] = {0}, y[20] = {0}, scale = 1, loss = 7, p[20];
    void *args[3] = {x, y, &scale}, *res[2] = {&loss, p};
    assert_int_equal(nest_call_state(k, st, args, 3, res, 2), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "nest_call_state_dims"));
    assert_int_equal(nest_call_dims(k, &n, 1, args, 3, res, 2), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "nest_call_state_dims"));
    assert_int_equal(nest_call_state_dims(k, st, &neg, 1, args, 3, res, 2), NEST_ERR_CALL);
    assert_int_equal(nest_call_state_dims(k, st, &n, 0, args, 3, res, 2), NEST_ERR_CALL);
    assert_int_equal(nest_call_state_dims(k, NULL, &n, 1, args, 3, res, 2), NEST_ERR_CALL);
    /* an argument in a state tensor, sized at these dims */
    void *bad[3] = {nest_state_tensor(st, "w1"), y, &scale};
    assert_int_equal(nest_call_state_dims(k, st, &n, 1, bad, 3, res, 2), NEST_ERR_CALL);
    assert_non_null(strstr(nest_kernel_errmsg(k), "state tensor w1"));
    unsigned char *after = tu_state_bytes(st);
    assert_memory_equal(before, after, nest_state_size(st));
    assert_true(loss == 7);
    free(after);
    assert_int_equal(nest_evaluate_dims(f, &n, 1, args, 3, res, 2), NEST_ERR_CALL);
    assert_int_equal(nest_evaluate_state_dims(f, st, &neg, 1, args, 3, res, 2), NEST_ERR_ARG);
    if (nest_call_state_dims(k, st, &n, 1, args, 3, res, 2) != NEST_OK)
        fail_msg("%s", nest_kernel_errmsg(k));
    free(before);
    nest_state_free(st);
    nest_kernel_free(k);
    nest_module_free(m);
}

/* Ahead of time: NAME(M_state *st, int64_t N, arrays...), NAME_call_dims(st, dims, args,
 * results) and the workspace's entry points, against the JIT's kernel. */
static void test_train_aot(void **state)
{
    (void)state;
    nest_module *m = parse_ok(mlp_text);
    nest_function *f = nest_module_find(m, "step");
    char so[128], h[128];
    snprintf(so, sizeof so, "%s/train.so", tmproot);
    snprintf(h, sizeof h, "%s/train.h", tmproot);
    char *log = NULL;
    if (nest_module_build_so(m, so, h, NULL, &log) != NEST_OK)
        fail_msg("%s", nest_module_errmsg(m));
    free(log);
    FILE *hf = fopen(h, "r");
    assert_non_null(hf);
    char *ht = tu_read_all(hf);
    fclose(hf);
    assert_non_null(strstr(ht, "int step(train_state *st, int64_t N, const float *x"));
    assert_non_null(strstr(ht, "int step_call_dims(train_state *st, const int64_t *dims, "));
    assert_non_null(strstr(ht, "size_t step_workspace_size_dims(const int64_t *dims);"));
    assert_non_null(strstr(ht, "/* symbolic dims, in this order: N */"));
    free(ht);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    void *(*state_new)(void);
    void (*state_free)(void *);
    void *(*tensor)(void *, const char *);
    int (*call_dims)(void *, const int64_t *, void *const *, void *const *);
    int (*typed)(void *, int64_t, const float *, const float *, const float *, float *, float *);
    *(void **)&state_new = dlsym(lib, "train_state_new");
    *(void **)&state_free = dlsym(lib, "train_state_free");
    *(void **)&tensor = dlsym(lib, "train_state_tensor");
    *(void **)&call_dims = dlsym(lib, "step_call_dims");
    *(void **)&typed = dlsym(lib, "step");
    assert_true(state_new && state_free && tensor && call_dims && typed);
    nest_kernel *k = nest_compile(f, NULL);
    if (!k)
        fail_msg("%s", nest_errmsg(f));
    int64_t n = 7;
    float x[7 * 16], y[70], scale = 1.0f / 7, loss[2], p[2][70];
    void *sa = state_new(), *sb = state_new();
    nest_state *sj = nest_state_new(m);
    for (int s = 0; s < 2; s++) {
        batch(x, y, n, s);
        void *args[3] = {x, y, &scale}, *ra[2] = {&loss[0], p[0]}, *rj[2] = {&loss[1], p[1]};
        assert_int_equal(call_dims(sa, &n, args, ra), 0);
        assert_int_equal(typed(sb, n, x, y, &scale, &loss[0], p[0]), 0);
        assert_ok(f, nest_call_state_dims(k, sj, &n, 1, args, 3, rj, 2));
        assert_close(NEST_F32, &loss[0], &loss[1], 1, 1e-6, 1e-5);
        assert_close(NEST_F32, p[0], p[1], 70, 1e-6, 1e-5);
    }
    const char *names[] = {"w1", "b1", "w2", "b2", "v1"};
    int64_t counts[] = {16 * 24, 24, 24 * 10, 10, 16 * 24};
    for (int i = 0; i < 5; i++) {
        assert_close(NEST_F32, tensor(sa, names[i]), nest_state_tensor(sj, names[i]), counts[i],
                     1e-6, 1e-5);
        assert_close(NEST_F32, tensor(sb, names[i]), nest_state_tensor(sj, names[i]), counts[i],
                     1e-6, 1e-5);
    }
    int64_t neg = -3;
    assert_int_not_equal(call_dims(sa, &neg, (void *[]){x, y, &scale}, (void *[]){loss, p[0]}), 0);
    state_free(sa);
    state_free(sb);
    nest_state_free(sj);
    nest_kernel_free(k);
    dlclose(lib);
    nest_module_free(m);
}

/* Each function of text compiled once and called at N = 0, 1, 5, 33 and 130 against the
 * interpreter at that N (one symbolic dim N; float parameters and results). */
static void compile_at_sizes(const char *text)
{
    nest_module *m = parse_ok(text);
    static const int64_t sizes[] = {0, 1, 5, 33, 130};
    for (int fi = 0; fi < nest_module_count(m); fi++) {
        nest_function *f = nest_module_function(m, fi);
        nest_kernel *k = nest_compile(f, NULL);
        if (!k)
            fail_msg("%s: %s", nest_function_name(f), nest_errmsg(f));
        int np = nest_param_count(f), nr = nest_result_count(f);
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            int64_t n = sizes[si];
            nest_function *g = nest_specialize(f, &n, 1);
            assert_non_null(g);
            void *args[4], *res[4], *ref[4];
            int64_t cnt[4];
            for (int i = 0; i < np + nr; i++) {
                nest_value v = i < np ? nest_param(g, i) : nest_result(g, i - np);
                cnt[i] = 1;
                for (int d = 0; d < nest_value_rank(g, v); d++)
                    cnt[i] *= nest_value_shape(g, v)[d];
                float *a = calloc((size_t)cnt[i] + 1, sizeof *a);
                for (int64_t j = 0; i < np && j < cnt[i]; j++)
                    a[j] = (float)((7 * j + 3 * i) % 11 - 5) / 8;
                if (i < np) {
                    args[i] = a;
                } else {
                    res[i - np] = a;
                    ref[i - np] = calloc((size_t)cnt[i] + 1, sizeof(float));
                }
            }
            assert_ok(f, nest_evaluate_dims(f, &n, 1, args, np, ref, nr));
            if (nest_call_dims(k, &n, 1, args, np, res, nr) != NEST_OK)
                fail_msg("%s at N=%lld: %s", nest_function_name(f), (long long)n,
                         nest_kernel_errmsg(k));
            for (int i = 0; i < nr; i++) {
                assert_close(NEST_F32, res[i], ref[i], cnt[np + i], 1e-5, 1e-5);
                free(res[i]);
                free(ref[i]);
            }
            for (int i = 0; i < np; i++)
                free(args[i]);
            nest_function_free(g);
        }
        nest_kernel_free(k);
    }
    nest_module_free(m);
}

/* Transposes of a batch read by products and reductions: x^T . g (tiled: K is N), with a
 * bias-like store after it, a narrow one (not tiled), a sum over the transposed batch, and
 * a batch_dot whose summed axis is N. */
static void test_fold_over_batch(void **state)
{
    (void)state;
    compile_at_sizes("func xtg(x: f32[N,20], g: f32[N,40], b: f32[20,40]) -> f32[20,40] {\n"
                     "  xt = reshape(x, order=[1,0], shape=[20,N])\n"
                     "  return add(dot(xt, g), b)\n"
                     "}\n"
                     "func narrow(x: f32[N,6], g: f32[N,3]) -> f32[6,3] {\n"
                     "  return dot(reshape(x, order=[1,0], shape=[6,N]), g)\n"
                     "}\n"
                     "func tsum(x: f32[N,5]) -> f32[5] {\n"
                     "  return sum(reshape(x, order=[1,0], shape=[5,N]), axes=[1])\n"
                     "}\n"
                     "func bdot(a: f32[N,3,4], b: f32[N,3,5]) -> f32[4,5] {\n"
                     "  at = reshape(a, order=[1,2,0], shape=[3,4,N])\n"
                     "  bt = reshape(b, order=[1,0,2], shape=[3,N,5])\n"
                     "  return sum(batch_dot(at, bt), axes=[0])\n"
                     "}\n");
}

/* batch_dot over a symbolic batch, tiled: one batch axis, two (the products of the batch in
 * parallel, their index split from one loop), a bias absorbed, a summed K of N. */
static void test_batch_tiled(void **state)
{
    (void)state;
    compile_at_sizes("func one(a: f32[N,8,32], b: f32[N,32,40]) -> f32[N,8,40] {\n"
                     "  return batch_dot(a, b)\n"
                     "}\n"
                     "func two(a: f32[N,3,9,20], b: f32[N,3,20,33], c: f32[33]) -> f32[N,3,9,33] {\n"
                     "  y = batch_dot(a, b)\n"
                     "  return add(y, broadcast(c, shape=[N,3,9,33], axes=[0,1,2]))\n"
                     "}\n"
                     "func ksum(a: f32[N,3,5], b: f32[N,3,24]) -> f32[3,5,24] {\n"
                     "  at = reshape(a, order=[1,2,0], shape=[3,5,N])\n"
                     "  bt = reshape(b, order=[1,0,2], shape=[3,N,24])\n"
                     "  return batch_dot(at, bt)\n"
                     "}\n");
}

/* Gradients whose rule does not take a symbolic axis yet are errors naming the op and the dim;
 * the transposed views the compiler takes are read, never stored. */
static void test_train_refused(void **state)
{
    (void)state;
    tu_parse_fails("var w: f32[4] = 0.5\n"
                   "func f(x: f32[N,4]) -> f32[] {\n"
                   "  s = slice(multiply(x, broadcast(w, shape=[N,4], axes=[0])),\n"
                   "            lower=[1,0], upper=[N,4])\n"
                   "  l = sum(s, axes=[0,1])\n"
                   "  g = grad(l, w)\n"
                   "  return l\n"
                   "}\n",
                   "t.nest", "t.nest:6:7: error: grad: a slice of s (node 4) along the symbolic dim N");
    tu_parse_fails("func f(x: f32[N,1,4,4], w: f32[2,1,3,3]) -> f32[] {\n"
                   "  c = convolution(x, w)\n"
                   "  l = sum(c, axes=[0,1,2,3])\n"
                   "  g = grad(l, w)\n"
                   "  return l\n"
                   "}\n",
                   "t.nest", "grad: the filters of a convolution of c (node 2) along the symbolic dim N");
    /* a transposed value that would be stored (a result) */
    nest_module *m3 = parse_ok("func t(x: f32[N,4]) -> f32[4,N] {\n"
                               "  return reshape(x, order=[1,0], shape=[4,N])\n"
                               "}\n");
    nest_function *f3 = nest_module_find(m3, "t");
    assert_null(nest_compile(f3, NULL));
    assert_error(f3, NEST_ERR_ARG, "symbolic dim other than the first axis");
    nest_module_free(m3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_sizes),
        cmocka_unit_test(test_train_calls),
        cmocka_unit_test(test_train_aot),
        cmocka_unit_test(test_train_refused),
        cmocka_unit_test(test_fold_over_batch),
        cmocka_unit_test(test_batch_tiled),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
