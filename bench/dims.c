/*
 * dims.c - `make bench`'s "symbolic dims" table: a dense layer, an L2 distance and a fused
 * element-wise chain, each compiled once with a symbolic batch N and called at N = 1, 7, 64,
 * 1000, 4096, a convolution layer at N = 1, 7, 64, and a training step (an MLP's forward,
 * backward and SGD update of its weights, in place in a state object) at N = 1 to 4096,
 * and a layer norm and projection over a batch of 4 sequences of S (x f32[B,S,256], both dims
 * symbolic; the "N" column is B x S) at S = 1 to 1000, a batch of N products of 64 x 64
 * matrices at N = 1 to 1000, and PyTorch's self-attention (the batch second inside: values
 * stored batch-first, outer.c) at N = 1 to 1000,
 * against the same function compiled for that exact N (nest_specialize). The training step's
 * two kernels each update a state object of their own; they are compared after one call from
 * the same initial weights.
 *
 * Both kernels run on one thread (OpenMP off). They take turns, five rounds of: symbolic,
 * exact; each the best of five batches of calls of at least 20 ms; the table keeps each one's
 * best round and gives the ratio symbolic / exact (1.00 is parity; the goal is within
 * 1.10). The results of both are compared (within 1e-5 relative) before timing.
 *
 *   dims [-o FILE.md] [--rounds R] [--openmp] [--cpu-time] [--only NAME]
 *       appends the table to FILE.md (default: standard output); --openmp: both on the
 *       machine's cores; --cpu-time: each batch timed in the process's CPU time instead of
 *       wall time (on one thread, what other processes of a busy machine take from it does
 *       not count); --only: that function alone
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "nest.h"

static const char TEXT[] =
    "var w1: f32[64,256] = uniform(-0.125, 0.125, seed=1)\n"
    "var b1: f32[256] = zeros\n"
    "var w2: f32[256,10] = uniform(-0.0625, 0.0625, seed=2)\n"
    "var b2: f32[10] = zeros\n"
    "func dense(x: f32[N,256], w: f32[256,256], b: f32[256]) -> f32[N,256] {\n"
    "  y = dot(x, w)\n"
    "  return maximum(add(y, broadcast(b, shape=[N,256], axes=[0])), constant(f32[N,256], 0))\n"
    "}\n"
    "func l2(x: f32[N,1024], y: f32[N,1024]) -> f32[] {\n"
    "  d = subtract(x, y)\n"
    "  r = reshape(d, shape=[N*1024])\n"
    "  return dot(r, r)\n"
    "}\n"
    "func chain(x: f32[N,1024], y: f32[N,1024]) -> f32[N,1024] {\n"
    "  return tanh(add(multiply(x, constant(f32[N,1024], 0.5)), y))\n"
    "}\n"
    "func conv(x: f32[N,32,28,28], w: f32[32,32,3,3], b: f32[32]) -> f32[N,32,28,28] {\n"
    "  y = convolution(x, w, pad_below=[1,1], pad_above=[1,1])\n"
    "  z = add(y, broadcast(b, shape=[N,32,28,28], axes=[0,2,3]))\n"
    "  return maximum(z, constant(f32[N,32,28,28], 0))\n"
    "}\n"
    "func train(x: f32[N,64], y: f32[N,10], scale: f32[]) -> f32[] {\n"
    "  h = maximum(add(dot(x, w1), broadcast(b1, shape=[N,256], axes=[0])),\n"
    "              constant(f32[N,256], 0))\n"
    "  z = add(dot(h, w2), broadcast(b2, shape=[N,10], axes=[0]))\n"
    "  zs = subtract(z, broadcast(max(z, axes=[1]), shape=[N,10], axes=[1]))\n"
    "  lse = broadcast(log(sum(exp(zs), axes=[1])), shape=[N,10], axes=[1])\n"
    "  loss = multiply(negative(sum(multiply(y, subtract(zs, lse)), axes=[0,1])), scale)\n"
    "  g = grad(loss, w1, b1, w2, b2)\n"
    "  lr = constant(f32[], 0.01)\n"
    "  assign(w1, subtract(w1, multiply(broadcast(lr, shape=[64,256], axes=[0,1]), get(g, 0))))\n"
    "  assign(b1, subtract(b1, multiply(broadcast(lr, shape=[256], axes=[0]), get(g, 1))))\n"
    "  assign(w2, subtract(w2, multiply(broadcast(lr, shape=[256,10], axes=[0,1]), get(g, 2))))\n"
    "  assign(b2, subtract(b2, multiply(broadcast(lr, shape=[10], axes=[0]), get(g, 3))))\n"
    "  return loss\n"
    "}\n"
    "func seq(x: f32[B,S,256], g: f32[256], w: f32[256,256]) -> f32[B,S,256] {\n"
    "  m = multiply(sum(x, axes=[2]), constant(f32[B,S], 0.00390625))\n"
    "  xc = subtract(x, broadcast(m, shape=[B,S,256], axes=[2]))\n"
    "  v = multiply(sum(multiply(xc, xc), axes=[2]), constant(f32[B,S], 0.00390625))\n"
    "  r = divide(constant(f32[B,S], 1), sqrt(add(v, constant(f32[B,S], 0.00001))))\n"
    "  y = multiply(multiply(xc, broadcast(r, shape=[B,S,256], axes=[2])),\n"
    "               broadcast(g, shape=[B,S,256], axes=[0,1]))\n"
    "  return maximum(dot(y, w), constant(f32[B,S,256], 0))\n"
    "}\n"
    "func bdot(a: f32[N,64,64], b: f32[N,64,64]) -> f32[N,64,64] {\n"
    "  return batch_dot(a, b)\n"
    "}\n"
    "func attn(x: f32[N,16,64], w: f32[64,192], b: f32[192], wo: f32[64,64]) -> f32[N,16,64] {\n"
    "  t = reshape(x, order=[1,0,2], shape=[16,N,64])\n"
    "  qkv = add(dot(t, w), broadcast(b, shape=[16,N,192], axes=[0,1]))\n"
    "  q = slice(qkv, lower=[0,0,0], upper=[16,N,64])\n"
    "  k = slice(qkv, lower=[0,0,64], upper=[16,N,128])\n"
    "  v = slice(qkv, lower=[0,0,128], upper=[16,N,192])\n"
    "  qh = reshape(reshape(q, shape=[16,N*4,16]), order=[1,0,2], shape=[N*4,16,16])\n"
    "  kh = reshape(reshape(k, shape=[16,N*4,16]), order=[1,2,0], shape=[N*4,16,16])\n"
    "  vh = reshape(reshape(v, shape=[16,N*4,16]), order=[1,0,2], shape=[N*4,16,16])\n"
    "  s = multiply(batch_dot(qh, kh), constant(f32[N*4,16,16], 0.25))\n"
    "  o = batch_dot(softmax(s, axes=[2]), vh)\n"
    "  m = reshape(o, order=[1,0,2], shape=[16*N,64])\n"
    "  y = reshape(reshape(dot(m, wo), shape=[16,N,64]), order=[1,0,2], shape=[N,16,64])\n"
    "  return add(x, y)\n"
    "}\n";

static const char *const WHAT[] = {
    "dense: relu(x W + b), x f32[N,256], W f32[256,256]",
    "l2: sum((x - y)^2), x, y f32[N,1024]",
    "chain: tanh(0.5 x + y), f32[N,1024]",
    "conv: relu(conv3x3(x, W) + b), x f32[N,32,28,28], W f32[32,32,3,3], padded",
    "train: an SGD step of a 64-256-10 perceptron (ReLU, softmax cross-entropy), x f32[N,64]",
    "seq: relu(layernorm(x) W), x f32[B,S,256] at B = 4 (N is B x S), W f32[256,256]",
    "bdot: batch_dot(a, b), a, b f32[N,64,64] (a batch of N products of 64 x 64 matrices)",
    "attn: PyTorch's self-attention over x f32[N,16,64] (4 heads), the batch second inside "
    "([16,N,64], heads [16,N*4,16], merged back as [16*N,64]), plus x",
};
/* the largest N each is called at */
static const int64_t MAXN[] = {4096, 4096, 4096, 64, 4096, 1000, 1000, 1000};
static const int64_t SIZES[] = {1, 7, 64, 1000, 4096};
#define NS ((int)(sizeof SIZES / sizeof *SIZES))

typedef struct call {
    nest_kernel *k;
    nest_state *st; /* a function with state: its own state object */
    const int64_t *dims;
    int ndims, np, nr;
    void **args, **res;
} call;

static void run(const call *c)
{
    int st = c->st     ? nest_call_state_dims(c->k, c->st, c->dims, c->ndims, c->args, c->np,
                                              c->res, c->nr)
             : c->ndims ? nest_call_dims(c->k, c->dims, c->ndims, c->args, c->np, c->res, c->nr)
                        : nest_call(c->k, c->args, c->np, c->res, c->nr);
    if (st != NEST_OK)
        die("call: %s", nest_kernel_errmsg(c->k));
}

/* The clock of a batch: wall time, or the process's CPU time (--cpu-time). */
static double (*clock_s)(void) = now_s;

/* Seconds per call: the best of five batches of at least 20 ms. */
static double time_call(const call *c)
{
    long reps = 1;
    double best = INFINITY;
    for (;;) {
        double t0 = clock_s();
        for (long i = 0; i < reps; i++)
            run(c);
        if (clock_s() - t0 >= 0.02)
            break;
        reps *= 2;
    }
    for (int b = 0; b < 5; b++) {
        double t0 = clock_s();
        for (long i = 0; i < reps; i++)
            run(c);
        double t = (clock_s() - t0) / (double)reps;
        if (t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL;
    int rounds = 5, openmp = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out_path = argv[++i];
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--openmp") == 0)
            openmp = 1;
        else if (strcmp(argv[i], "--cpu-time") == 0)
            clock_s = cpu_s;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else
            die("usage: dims [-o FILE.md] [--rounds R] [--openmp] [--cpu-time] [--only NAME]");
    }
    nest_module *m = nest_parse(TEXT, strlen(TEXT), "dims.nest");
    if (!m || nest_module_errcode(m))
        die("%s", m ? nest_module_errmsg(m) : "out of memory");
    nest_options o;
    nest_options_init(&o);
    o.openmp = openmp;
    char line[256];
    size_t cap = 1 << 16, len = 0;
    char *table = malloc(cap);
    if (!table)
        die("out of memory");
    table[0] = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        snprintf(line, sizeof line, __VA_ARGS__);                                                  \
        fputs(line, stdout);                                                                       \
        fflush(stdout);                                                                            \
        size_t l_ = strlen(line);                                                                  \
        if (len + l_ < cap) {                                                                      \
            memcpy(table + len, line, l_ + 1);                                                     \
            len += l_;                                                                             \
        }                                                                                          \
    } while (0)
    double l0 = load_1min();
    ADD("\n## Symbolic dims: compiled once for every N against compiled for that N\n\n");
    ADD("%s, best of %d interleaved rounds; %s per call; ratio symbolic / exact.\n\n",
        openmp ? "OpenMP on (the machine's cores)" : "One thread (OpenMP off)", rounds,
        clock_s == cpu_s ? "CPU time" : "time");
    ADD("| function | N | symbolic | exact N | ratio |\n|---|---:|---:|---:|---:|\n");
    for (int fi = 0; fi < nest_module_count(m); fi++) {
        nest_function *f = nest_module_function(m, fi);
        if (only && strcmp(only, nest_function_name(f)) != 0)
            continue;
        nest_kernel *ks = nest_compile(f, &o);
        if (!ks)
            die("%s: %s", nest_function_name(f), nest_errmsg(f));
        for (int s = 0; s < NS; s++) {
            int64_t n = SIZES[s];
            if (n > MAXN[fi])
                continue;
            /* two dims: a batch of 4 sequences of n */
            int nd = nest_dim_count(f);
            int64_t dv[2] = {nd == 2 ? 4 : n, n};
            nest_function *g = nest_specialize(f, dv, nd);
            nest_kernel *ke = g ? nest_compile(g, &o) : NULL;
            if (!ke)
                die("%s at N=%lld: %s", nest_function_name(f), (long long)n,
                    nest_errmsg(g ? g : f));
            int np = nest_param_count(g), nr = nest_result_count(g);
            void *args[4], *res[2][2];
            if (np > 4 || nr > 2)
                die("%s: too many parameters or results", nest_function_name(f));
            for (int i = 0; i < np; i++) {
                nest_value v = nest_param(g, i);
                int64_t c = 1;
                for (int k = 0; k < nest_value_rank(g, v); k++)
                    c *= nest_value_shape(g, v)[k];
                float *a = malloc((size_t)c * sizeof *a + 4);
                if (!a)
                    die("out of memory");
                fill(a, c, i);
                args[i] = a;
            }
            int64_t rc[2];
            for (int i = 0; i < nr; i++) {
                nest_value v = nest_result(g, i);
                rc[i] = 1;
                for (int k = 0; k < nest_value_rank(g, v); k++)
                    rc[i] *= nest_value_shape(g, v)[k];
                res[0][i] = calloc((size_t)rc[i] + 1, sizeof(float));
                res[1][i] = calloc((size_t)rc[i] + 1, sizeof(float));
            }
            /* a training step's kernels each update a state of their own, from the same start */
            bool state = strcmp(nest_function_name(f), "train") == 0;
            nest_state *sts = state ? nest_state_new(m) : NULL, *ste = state ? nest_state_new(m) : NULL;
            if (state && (!sts || !ste))
                die("out of memory");
            if (state) /* the scale of the loss: 1/N */
                *(float *)args[2] = 1.0f / (float)n;
            call cs = {ks, sts, dv, nd, np, nr, args, res[0]},
                 ce = {ke, ste, NULL, 0, np, nr, args, res[1]};
            run(&cs);
            run(&ce);
            for (int i = 0; state && i < nest_state_count(sts); i++) {
                int64_t c = 1;
                for (int k = 0; k < nest_state_rank(sts, i); k++)
                    c *= nest_state_shape(sts, i)[k];
                const float *a = nest_state_data(sts, i), *b = nest_state_data(ste, i);
                for (int64_t j = 0; j < c; j++)
                    if (fabsf(a[j] - b[j]) > 1e-5f * fmaxf(fabsf(b[j]), 1.0f))
                        die("%s at N=%lld: state %s differs at %lld: %g and %g",
                            nest_function_name(f), (long long)n, nest_state_name(sts, i),
                            (long long)j, a[j], b[j]);
            }
            for (int i = 0; i < nr; i++)
                for (int64_t j = 0; j < rc[i]; j++) {
                    float a = ((float *)res[0][i])[j], b = ((float *)res[1][i])[j];
                    if (fabsf(a - b) > 1e-5f * fmaxf(fabsf(b), 1.0f))
                        die("%s at N=%lld: results differ at %lld: %g and %g",
                            nest_function_name(f), (long long)n, (long long)j, a, b);
                }
            double best[2] = {INFINITY, INFINITY};
            for (int r = 0; r < rounds; r++) {
                double t = time_call(&cs);
                best[0] = t < best[0] ? t : best[0];
                t = time_call(&ce);
                best[1] = t < best[1] ? t : best[1];
            }
            char nt[48];
            snprintf(nt, sizeof nt, nd == 2 ? "%lld x %lld" : "%lld", (long long)dv[0],
                     (long long)n);
            ADD("| %s | %s | %.3g us | %.3g us | %.2f |\n", nest_function_name(f), nt,
                best[0] * 1e6, best[1] * 1e6, best[0] / best[1]);
            for (int i = 0; i < np; i++)
                free(args[i]);
            for (int i = 0; i < nr; i++) {
                free(res[0][i]);
                free(res[1][i]);
            }
            nest_state_free(sts);
            nest_state_free(ste);
            nest_kernel_free(ke);
            nest_function_free(g);
        }
        nest_kernel_free(ks);
    }
    ADD("\n");
    for (int i = 0; i < nest_module_count(m); i++)
        if (!only || strcmp(only, nest_function_name(nest_module_function(m, i))) == 0)
            ADD("- %s\n", WHAT[i]);
    ADD("\nLoad average %.2f at the start, %.2f at the end.\n", l0, load_1min());
    if (out_path) {
        FILE *out = fopen(out_path, "a");
        if (!out)
            die("cannot write %s", out_path);
        fputs(table, out);
        fclose(out);
    }
    free(table);
    nest_module_free(m);
    return 0;
}
