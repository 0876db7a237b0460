/*
 * test_dims_axes.c - symbolic dims beyond the first axis: values over [B,S,D] with B and S
 * symbolic (a batch of sequences) through element-wise ops, reductions over the last axes and
 * over the whole run [B,S], softmax over the last axis, dot, reshapes and transposes that keep
 * [B,S] in front, a training step with state; values with the batch behind a plain axis
 * (PyTorch's attention over [S,B,E], stored batch-first); each compiled once and called at
 * several (B, S), zeros among them, against the interpreter at those sizes; and what is still
 * refused says which value and which dims.
 */
#include "testutil.h"

#define parse_ok(text) tu_parse((text), "axes.nest")

static const int64_t SIZES[][2] = {{1, 1}, {2, 5}, {3, 1}, {1, 7}, {4, 33}, {0, 3}, {2, 0}};
#define NSIZES ((int)(sizeof SIZES / sizeof *SIZES))

/* element i of parameter p: small multiples of 1/8 */
static void fill(float *a, int64_t n, int p)
{
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)((7 * i + 3 * p) % 11 - 5) / 8;
}

static int64_t count_of(nest_function *g, nest_value v)
{
    int64_t c = 1;
    for (int d = 0; d < nest_value_rank(g, v); d++)
        c *= nest_value_shape(g, v)[d];
    return c;
}

/* Each function of text (float parameters and results; its dims B then S) compiled once and
 * called at each size against the interpreter (with the module's state when it has one: three
 * calls in a row, the state compared after each). */
static void compile_at_sizes(const char *text)
{
    nest_module *m = parse_ok(text);
    for (int fi = 0; fi < nest_module_count(m); fi++) {
        nest_function *f = nest_module_function(m, fi);
        int nd = nest_dim_count(f); /* B, or B and S */
        assert_true(nd == 1 || nd == 2);
        assert_string_equal(nest_dim_name(f, 0), "B");
        if (nd == 2)
            assert_string_equal(nest_dim_name(f, 1), "S");
        nest_kernel *k = nest_compile(f, NULL);
        if (!k)
            fail_msg("%s: %s", nest_function_name(f), nest_errmsg(f));
        int np = nest_param_count(f), nr = nest_result_count(f);
        for (int si = 0; si < NSIZES; si++) {
            const int64_t *dims = SIZES[si];
            if (nd == 1 && si > 0 && dims[0] == SIZES[si - 1][0])
                continue; /* the same size again */
            nest_function *g = nest_specialize(f, dims, nd);
            assert_non_null(g);
            void *args[4], *res[4], *ref[4];
            int64_t cnt[8];
            for (int i = 0; i < np; i++) {
                cnt[i] = count_of(g, nest_param(g, i));
                args[i] = calloc((size_t)cnt[i] + 1, sizeof(float));
                fill(args[i], cnt[i], i);
            }
            for (int i = 0; i < nr; i++) {
                cnt[np + i] = count_of(g, nest_result(g, i));
                res[i] = calloc((size_t)cnt[np + i] + 1, sizeof(float));
                ref[i] = calloc((size_t)cnt[np + i] + 1, sizeof(float));
            }
            nest_state *sk = strstr(text, "var ") ? nest_state_new(m) : NULL;
            nest_state *si_ = sk ? nest_state_new(m) : NULL;
            for (int step = 0; step < (sk ? 3 : 1); step++) {
                assert_ok(f, sk ? nest_evaluate_state_dims(f, si_, dims, nd, args, np, ref, nr)
                                : nest_evaluate_dims(f, dims, nd, args, np, ref, nr));
                int rc = sk ? nest_call_state_dims(k, sk, dims, nd, args, np, res, nr)
                            : nest_call_dims(k, dims, nd, args, np, res, nr);
                if (rc != NEST_OK)
                    fail_msg("%s at B=%lld S=%lld: %s", nest_function_name(f), (long long)dims[0],
                             (long long)dims[1], nest_kernel_errmsg(k));
                for (int i = 0; i < nr; i++)
                    assert_close(NEST_F32, res[i], ref[i], cnt[np + i], 1e-5, 1e-4);
                for (int t = 0; sk && t < nest_state_count(sk); t++) {
                    int64_t c = 1;
                    for (int d = 0; d < nest_state_rank(sk, t); d++)
                        c *= nest_state_shape(sk, t)[d];
                    assert_close(NEST_F32, nest_state_data(sk, t), nest_state_data(si_, t), c,
                                 1e-5, 1e-4);
                }
            }
            nest_state_free(sk);
            nest_state_free(si_);
            for (int i = 0; i < np; i++)
                free(args[i]);
            for (int i = 0; i < nr; i++) {
                free(res[i]);
                free(ref[i]);
            }
            nest_function_free(g);
        }
        nest_kernel_free(k);
    }
    nest_module_free(m);
}

/* A projection, a layer norm, a softmax over the last axis, reshapes that keep [B,S] (heads
 * split, transposed within a position, merged back), sums over [B,S] and over everything. */
static void test_sequences(void **state)
{
    (void)state;
    compile_at_sizes(
        "func proj(x: f32[B,S,16], w: f32[16,24], b: f32[24]) -> f32[B,S,24] {\n"
        "  y = add(dot(x, w), broadcast(b, shape=[B,S,24], axes=[0,1]))\n"
        "  return maximum(y, constant(f32[B,S,24], 0))\n"
        "}\n"
        "func norm(x: f32[B,S,16], g: f32[16]) -> f32[B,S,16] {\n"
        "  mean = multiply(sum(x, axes=[2]), constant(f32[B,S], 0.0625))\n"
        "  xc = subtract(x, broadcast(mean, shape=[B,S,16], axes=[2]))\n"
        "  var = multiply(sum(multiply(xc, xc), axes=[2]), constant(f32[B,S], 0.0625))\n"
        "  r = divide(constant(f32[B,S], 1), sqrt(add(var, constant(f32[B,S], 0.001))))\n"
        "  y = multiply(xc, broadcast(r, shape=[B,S,16], axes=[2]))\n"
        "  return multiply(y, broadcast(g, shape=[B,S,16], axes=[0,1]))\n"
        "}\n"
        "func soft(x: f32[B,S,10]) -> (f32[B,S,10], f32[10], f32[]) {\n"
        "  p = softmax(x, axes=[2])\n"
        "  return p, sum(p, axes=[0,1]), sum(x, axes=[0,1,2])\n"
        "}\n"
        "func heads(x: f32[B,S,16]) -> (f32[B,S,16], f32[B,S], f32[B,S,4]) {\n"
        "  h = reshape(x, shape=[B,S,4,4])\n"
        "  t = reshape(h, order=[0,1,3,2], shape=[B,S,4,4])\n"
        "  flat = reshape(t, shape=[B*S,16])\n"
        "  back = reshape(exp(flat), shape=[B,S,16])\n"
        "  return back, max(x, axes=[2]), sum(h, axes=[3])\n"
        "}\n"
        "func within(x: f32[B,S,4,8], y: f32[B,S,8,3]) -> f32[B,S,4,3] {\n"
        "  return batch_dot(x, y)\n"
        "}\n");
}

/* Attention's heads with a symbolic batch in front: a reshape through an axis order that
 * regroups the plain axes behind B (a copy per batch element), batch_dot of transposed views,
 * the heads merged back through an order. */
static void test_heads_regrouped(void **state)
{
    (void)state;
    compile_at_sizes(
        "func att(x: f32[B,6,16], w: f32[16,16]) -> f32[B,6,16] {\n"
        "  q = reshape(x, shape=[B,6,4,4])\n"
        "  t = reshape(q, order=[0,2,1,3], shape=[B,4,6,4])\n"
        "  k = reshape(q, order=[0,2,3,1], shape=[B,4,4,6])\n"
        "  p = softmax(batch_dot(t, k), axes=[3])\n"
        "  o = batch_dot(p, t)\n"
        "  r = reshape(o, order=[0,2,1,3], shape=[B,6,16])\n"
        "  return dot(r, w)\n"
        "}\n"
        "func flat(x: f32[B,3,5]) -> f32[B,15] {\n"
        "  return reshape(x, order=[0,2,1], shape=[B,15])\n"
        "}\n");
}

/* PyTorch's attention: the batch second ([S,B,E]), heads split by a reshape to [S,B*H,D] and
 * moved in front, the heads merged back as [S*B,E]; each value stored with B outermost. */
static void test_batch_second(void **state)
{
    (void)state;
    compile_at_sizes(
        "func mha(x: f32[B,6,16], w: f32[16,48], wo: f32[16,16], b: f32[48]) -> f32[B,6,16] {\n"
        "  t = reshape(x, order=[1,0,2], shape=[6,B,16])\n"
        "  qkv = add(dot(t, w), broadcast(b, shape=[6,B,48], axes=[0,1]))\n"
        "  q = slice(qkv, lower=[0,0,0], upper=[6,B,16])\n"
        "  k = slice(qkv, lower=[0,0,16], upper=[6,B,32])\n"
        "  v = slice(qkv, lower=[0,0,32], upper=[6,B,48])\n"
        "  qh = reshape(reshape(q, shape=[6,B*4,4]), order=[1,0,2], shape=[B*4,6,4])\n"
        "  kh = reshape(reshape(k, shape=[6,B*4,4]), order=[1,2,0], shape=[B*4,4,6])\n"
        "  vh = reshape(reshape(v, shape=[6,B*4,4]), order=[1,0,2], shape=[B*4,6,4])\n"
        "  s = multiply(batch_dot(qh, kh), constant(f32[B*4,6,6], 0.5))\n"
        "  p = softmax(s, axes=[2])\n"
        "  o = batch_dot(p, vh)\n"
        "  m = reshape(o, order=[1,0,2], shape=[6*B,16])\n"
        "  y = dot(m, wo)\n"
        "  r = reshape(reshape(y, shape=[6,B,16]), order=[1,0,2], shape=[B,6,16])\n"
        "  return add(r, x)\n"
        "}\n"
        "func seq(a: f32[B,3,5], g: f32[5]) -> (f32[B,3,5], f32[B,5], f32[B,3], f32[B,2]) {\n"
        "  x = reshape(a, order=[1,0,2], shape=[3,B,5])\n"
        "  c5 = constant(f32[5], [0.5, -1, 2, 0.25, -0.75])\n"
        "  y = multiply(x, broadcast(add(g, c5), shape=[3,B,5], axes=[0,1]))\n"
        "  z = reverse(concat(y, x, axis=2), axes=[0,2])\n"
        "  w = slice(z, lower=[0,0,2], upper=[3,B,7])\n"
        "  m = max(y, axes=[2])\n"
        "  i = convert(argmax(reshape(x, shape=[3,B*5]), axis=0), type=f32)\n"
        "  p = pad(slice(x, lower=[1,0,0], upper=[3,B,5]), constant(f32[], 2), below=[0,0,1],\n"
        "          above=[1,0,0])\n"
        "  c = sum(reshape(p, shape=[3,B*6]), axes=[0])\n"
        "  q = slice(p, lower=[0,0,1], upper=[3,B,6])\n"
        "  return reshape(add(w, q), order=[1,0,2], shape=[B,3,5]), sum(x, axes=[0]),\n"
        "         reshape(m, order=[1,0], shape=[B,3]),\n"
        "         add(slice(reshape(i, shape=[B,5]), lower=[0,0], upper=[B,2]),\n"
        "             slice(reshape(c, shape=[B,6]), lower=[0,3], upper=[B,5]))\n"
        "}\n");
}

/* A sequence model's training step: the loss over [B,S], its gradients (x^T . g over the
 * merged B*S), the weights updated in the state. */
static void test_sequence_training(void **state)
{
    (void)state;
    compile_at_sizes(
        "var w: f32[16,24] = uniform(-0.25, 0.25, seed=5)\n"
        "var v: f32[24,10] = uniform(-0.25, 0.25, seed=6)\n"
        "func step(x: f32[B,S,16], y: f32[B,S,10]) -> f32[] {\n"
        "  h = tanh(dot(x, w))\n"
        "  p = softmax(dot(h, v), axes=[2])\n"
        "  d = subtract(p, y)\n"
        "  loss = multiply(sum(multiply(d, d), axes=[0,1,2]), constant(f32[], 0.5))\n"
        "  g = grad(loss, w, v)\n"
        "  lr = constant(f32[], 0.1)\n"
        "  assign(w, subtract(w, multiply(broadcast(lr, shape=[16,24], axes=[0,1]), get(g, 0))))\n"
        "  assign(v, subtract(v, multiply(broadcast(lr, shape=[24,10], axes=[0,1]), get(g, 1))))\n"
        "  return loss\n"
        "}\n");
}

/* Structural ops along the trailing axes (concat, slice, pad, reverse, select), and their
 * gradients into a state: each moves or cuts the last axis only. */
static void test_trailing_ops(void **state)
{
    (void)state;
    compile_at_sizes(
        "var w: f32[6,4] = uniform(-0.5, 0.5, seed=7)\n"
        "func mix(x: f32[B,S,4], y: f32[B,S,2]) -> (f32[B,S,8], f32[]) {\n"
        "  c = concat(x, y, axis=2)\n"
        "  s = slice(c, lower=[0,0,1], upper=[B,S,6])\n"
        "  p = pad(s, constant(f32[], 0.5), below=[0,0,2], above=[0,0,1])\n"
        "  r = reverse(p, axes=[2])\n"
        "  h = dot(c, w)\n"
        "  m = select(greater(h, constant(f32[B,S,4], 0)), h, multiply(h, h))\n"
        "  loss = sum(multiply(m, m), axes=[0,1,2])\n"
        "  g = grad(loss, w)\n"
        "  assign(w, subtract(w, multiply(broadcast(constant(f32[], 0.05), shape=[6,4], axes=[0,1]),\n"
        "                                 get(g, 0))))\n"
        "  return r, loss\n"
        "}\n");
}

/* What takes [B,S] apart is refused naming the value, its type and the run of dims. */
static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text, *part;
    } cases[] = {
        {"func f(x: f32[B,S,4]) -> f32[B,4] {\n  return sum(x, axes=[1])\n}\n",
         "a reduction over part of the leading symbolic axes (value _1: f32[B,4] over [B,S])"},
        {"func f(x: f32[B,S,4]) -> f32[B,S,S] {\n"
         "  t = reshape(x, order=[0,2,1], shape=[B,4,S])\n"
         "  return batch_dot(x, t)\n}\n",
         "a reshape that moves a leading symbolic axis (value t: f32[B,4,S] over [B,S])"},
        {"func f(x: f32[B,S,4], y: f32[4,S]) -> f32[B,4,4] {\n"
         "  return batch_dot(reshape(x, order=[0,2,1], shape=[B,4,S]), x)\n}\n",
         "a reshape that moves a leading symbolic axis"},
        {"func f(x: f32[B,S,4]) -> f32[S,B,4] {\n"
         "  return reshape(x, order=[1,0,2], shape=[S,B,4])\n}\n",
         "a reshape that moves a leading symbolic axis"},
        {"func f(x: f32[B,S,4], y: f32[B,4]) -> f32[B,S,4] {\n"
         "  return add(x, broadcast(y, shape=[B,S,4], axes=[1]))\n}\n",
         "a broadcast along part of the leading symbolic axes"},
        /* stored batch-first, [3,B,5] cannot be regrouped as [5,B,3] */
        {"func f(x: f32[B,3,5]) -> f32[B,15] {\n"
         "  t = reshape(x, order=[1,0,2], shape=[3,B,5])\n"
         "  r = reshape(t, shape=[5,B,3])\n"
         "  return reshape(reshape(r, order=[1,0,2], shape=[B,5,3]), shape=[B,15])\n}\n",
         "a reshape whose axes do not divide each other (value r: f32[5,B,3])"},
        /* a parameter keeps the ABI's order */
        {"func f(x: f32[3,B]) -> f32[B] {\n  return sum(x, axes=[0])\n}\n",
         "a symbolic dim other than the first axis (value x: f32[3,B])"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        nest_module *m = parse_ok(cases[i].text);
        nest_function *f = nest_module_function(m, 0);
        assert_null(nest_compile(f, NULL));
        if (!strstr(nest_errmsg(f), cases[i].part))
            fail_msg("case %zu: wanted \"%s\" in \"%s\"", i, cases[i].part, nest_errmsg(f));
        assert_non_null(strstr(nest_errmsg(f), "nest_specialize or nestc --dim NAME=N"));
        /* the interpreter takes it */
        int64_t dims[2] = {2, 3};
        float x[64] = {0}, y[64] = {0}, r[64];
        void *args[2] = {x, y}, *res[1] = {r};
        assert_ok(f, nest_evaluate_dims(f, dims, nest_dim_count(f), args, nest_param_count(f),
                                        res, 1));
        nest_module_free(m);
    }
}

/* The header of such a function: the dims first, the types as declared. */
static void test_header(void **state)
{
    (void)state;
    nest_module *m = parse_ok("func proj(x: f32[B,S,16], w: f32[16,24]) -> f32[B,S,24] {\n"
                              "  return dot(x, w)\n"
                              "}\n");
    nest_function *f = nest_module_function(m, 0);
    char *h = nest_emit(&f, 1, NEST_EMIT_H, NULL);
    assert_non_null(h);
    assert_non_null(strstr(h, "/* proj(x: f32[B,S,16], w: f32[16,24]) -> f32[B,S,24] */"));
    assert_non_null(strstr(h, "/* symbolic dims, in this order: B, S */"));
    assert_non_null(strstr(h, "int proj(int64_t B, int64_t S, const float *x, const float *w, "));
    free(h);
    nest_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequences),
        cmocka_unit_test(test_heads_regrouped),
        cmocka_unit_test(test_batch_second),
        cmocka_unit_test(test_sequence_training),
        cmocka_unit_test(test_trailing_ops),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
