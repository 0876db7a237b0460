/*
 * conv.c - the convolution table of `make bench`: nest against PyTorch (its CPU convolutions are
 * oneDNN's) with matched threads, measured interleaved in one run.
 *
 *   conv [--quick] [--cpu-time] [--rounds] [--only TEXT]
 *                                    the whole table (from the repository root), as markdown on
 *                                    stdout; --only runs the workloads whose name holds TEXT;
 *                                    --cpu-time times the one-thread rows in the CPU time of
 *                                    each side's process (for a busy machine); --rounds shows
 *                                    each round's two times (and core) on standard error
 *
 * Workloads, float32, NCHW, at batch 1 and 8, on 1 and 2 threads: the convolution layers of
 * ResNet-50 (3x3 at 64, 128, 256 and 512 channels, and 512 again with the filters a constant of
 * the graph, as an ONNX model's weights are; its 1x1 layers; the 7x7 stride-2 stem), a
 * depthwise 3x3 (MobileNet), a 2x2 max pool, a LeNet-5 forward and a ResNet basic block (conv,
 * batch norm, ReLU, conv, batch norm, the residual, ReLU). nest builds each as a graph with the C
 * API and calls nest_compile's kernel (openmp = 0 for one thread, all cores otherwise);
 * PyTorch runs the same computation in eager mode under torch.no_grad() with
 * its threads matched (bench/conv_peers.py: torch.set_num_threads and its BLAS's). Both get the same inputs, and their
 * results must agree. nest's own product of 2048 x 2048 matrices is measured the same way: the
 * 3x3 layers with their filters a parameter are judged against it.
 *
 * Each round times a batch of calls (at least BATCH_SECONDS) of nest and then of PyTorch, in
 * alternating order; the ratio of a round is PyTorch's time over nest's, and the table gives the
 * medians. A one-thread round runs both sides on one core, the cores in turn from round to round
 * (benchutil.h, round_core: the two vCPUs of the machine measured differ in speed). GFLOP/s count the multiply-adds of the convolutions and products (2 per tap).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "blascore.h"
#include "peer.h"
#include "nest.h"

#define PEER "bench/conv_peers.py"
#define BATCH_SECONDS 0.03
#define MAX_ROUNDS 8 /* even: with the cores in turn, the medians take one of each */
#define PAUSE_MS 250 /* before two-thread batches: the other runtime's threads stop spinning */

typedef enum { W_CONV, W_POOL, W_BLOCK, W_LENET, W_DOT } wkind;

typedef struct workload {
    const char *name;
    wkind kind;
    int64_t c, h, k, r, s, p, g; /* channels, size, output channels, filter, stride, pad, groups */
    bool constant; /* W_CONV: the filters a constant of the graph (an ONNX model's initializer),
                    * not a parameter: nest packs them ahead of time where its tiles want them */
} workload;

static const workload WORKLOADS[] = {
    {"ResNet 3x3, 64 ch, 56x56", W_CONV, 64, 56, 64, 3, 1, 1, 1, false},
    {"ResNet 3x3, 128 ch, 28x28", W_CONV, 128, 28, 128, 3, 1, 1, 1, false},
    {"ResNet 3x3, 256 ch, 14x14", W_CONV, 256, 14, 256, 3, 1, 1, 1, false},
    {"ResNet 3x3, 512 ch, 7x7", W_CONV, 512, 7, 512, 3, 1, 1, 1, false},
    {"ResNet stem 7x7/2, 3 -> 64, 224x224", W_CONV, 3, 224, 64, 7, 2, 3, 1, false},
    {"ResNet 3x3, 512 ch, 7x7, filters constant", W_CONV, 512, 7, 512, 3, 1, 1, 1, true},
    {"ResNet 1x1, 256 -> 64, 56x56", W_CONV, 256, 56, 64, 1, 1, 0, 1, false},
    {"ResNet 1x1, 64 -> 256, 56x56", W_CONV, 64, 56, 256, 1, 1, 0, 1, false},
    {"ResNet 1x1/2, 256 -> 512, 56x56", W_CONV, 256, 56, 512, 1, 2, 0, 1, false},
    {"ResNet 1x1, 512 -> 128, 28x28", W_CONV, 512, 28, 128, 1, 1, 0, 1, false},
    {"ResNet 1x1, 128 -> 512, 28x28", W_CONV, 128, 28, 512, 1, 1, 0, 1, false},
    {"ResNet 1x1, 1024 -> 256, 14x14", W_CONV, 1024, 14, 256, 1, 1, 0, 1, false},
    {"ResNet 1x1, 256 -> 1024, 14x14", W_CONV, 256, 14, 1024, 1, 1, 0, 1, false},
    {"ResNet 1x1, 2048 -> 512, 7x7", W_CONV, 2048, 7, 512, 1, 1, 0, 1, false},
    {"ResNet 1x1, 512 -> 2048, 7x7", W_CONV, 512, 7, 2048, 1, 1, 0, 1, false},
    {"MobileNet depthwise 3x3, 32 ch, 112x112", W_CONV, 32, 112, 32, 3, 1, 1, 32, false},
    {"max pool 2x2/2, 64 ch, 112x112", W_POOL, 64, 112, 64, 2, 2, 0, 1, false},
    {"LeNet-5 forward, 32x32", W_LENET, 1, 32, 0, 0, 0, 0, 1, false},
    {"ResNet basic block, 64 ch, 56x56", W_BLOCK, 64, 56, 64, 3, 1, 1, 1, false},
};
#define NW (sizeof WORKLOADS / sizeof *WORKLOADS)

static const int BATCHES[2] = {1, 8};
static bool quick, cpu_time, show_rounds;

/* ---------------------------------------------------------------------------------------------
 * The nest side: graphs, inputs, checksums
 * ------------------------------------------------------------------------------------------- */

#define MAXIN 8

typedef struct side {
    nest_function *f;
    nest_kernel *k[2]; /* one thread, all cores */
    float *in[MAXIN], *out;
    int64_t count[MAXIN], out_count;
    int nin;
    double flops;
    char err[512];
} side;

/* A parameter filled as conv_peers.py's fill(shape, seed, scale) fills its tensor; with
 * constant, a constant of those values. */
static nest_value value(side *s, int rank, const int64_t *shape, int seed, float scale,
                        float shift, bool constant)
{
    char name[16];
    snprintf(name, sizeof name, "p%d", s->nin);
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    float *a = alloc_f32(n);
    fill(a, n, seed);
    for (int64_t i = 0; i < n; i++)
        a[i] = a[i] * scale + shift;
    if (constant) {
        nest_value v = nest_constant(s->f, NEST_F32, rank, shape, a, n);
        free_f32(a, n);
        return v;
    }
    s->in[s->nin] = a;
    s->count[s->nin++] = n;
    return nest_parameter(s->f, name, NEST_F32, rank, shape, NEST_ROW_MAJOR);
}

static nest_value input(side *s, int rank, const int64_t *shape, int seed, float scale,
                        float shift)
{
    return value(s, rank, shape, seed, scale, shift, false);
}

static float inv_sqrt(int64_t n) { return (float)(1.0 / sqrt((double)n)); }

static nest_value zeros_like(nest_function *f, int rank, const int64_t *shape)
{
    float z = 0;
    int64_t axes[4] = {0, 1, 2, 3};
    return nest_broadcast(f, nest_constant(f, NEST_F32, 0, NULL, &z, 1), rank, shape, rank, axes);
}

static nest_value relu(nest_function *f, nest_value v)
{
    return nest_maximum(f, v, zeros_like(f, nest_value_rank(f, v), nest_value_shape(f, v)));
}

/* y * scale + shift with per-channel vectors: a batch norm for inference, folded */
static nest_value batch_norm(side *s, nest_value y, int64_t c, int seed)
{
    nest_function *f = s->f;
    int64_t axes[3] = {0, 2, 3};
    const int64_t *shape = nest_value_shape(f, y);
    nest_value g = input(s, 1, &c, seed, 0.5f, 1.0f), b = input(s, 1, &c, seed + 1, 0.5f, 0);
    return nest_add(f, nest_multiply(f, y, nest_broadcast(f, g, 4, shape, 3, axes)),
                    nest_broadcast(f, b, 4, shape, 3, axes));
}

static double conv_flops(nest_function *f, nest_value y, int64_t cg, int64_t r)
{
    double n = 1;
    for (int i = 0; i < 4; i++)
        n *= (double)nest_value_shape(f, y)[i];
    return 2 * n * (double)cg * (double)(r * r);
}

static void build(side *s, const workload *w, int64_t n)
{
    memset(s, 0, sizeof *s);
    nest_function *f = s->f = nest_function_new("bench");
    nest_value y = NEST_NONE;
    int64_t pad[2] = {w->p, w->p}, st[2] = {w->s, w->s}, win[2] = {w->r, w->r};
    switch (w->kind) {
    case W_CONV: {
        int64_t xs[4] = {n, w->c, w->h, w->h}, ks[4] = {w->k, w->c / w->g, w->r, w->r};
        nest_value x = input(s, 4, xs, 1, 1, 0);
        nest_value k = value(s, 4, ks, 2, inv_sqrt(w->c / w->g * w->r * w->r), 0, w->constant);
        y = nest_convolution(f, x, k, st, NULL, pad, pad, NULL, w->g);
        s->flops = conv_flops(f, y, w->c / w->g, w->r);
        break;
    }
    case W_POOL: {
        int64_t xs[4] = {n, w->c, w->h, w->h};
        y = nest_max_pool(f, input(s, 4, xs, 1, 1, 0), win, st, NULL, NULL);
        break;
    }
    case W_BLOCK: {
        int64_t xs[4] = {n, w->c, w->h, w->h}, ks[4] = {w->c, w->c, 3, 3};
        nest_value x = input(s, 4, xs, 1, 1, 0);
        nest_value k1 = input(s, 4, ks, 2, inv_sqrt(9 * w->c), 0);
        nest_value k2 = input(s, 4, ks, 3, inv_sqrt(9 * w->c), 0);
        y = nest_convolution(f, x, k1, NULL, NULL, pad, pad, NULL, 1);
        s->flops = 2 * conv_flops(f, y, w->c, 3);
        y = relu(f, batch_norm(s, y, w->c, 4));
        y = batch_norm(s, nest_convolution(f, y, k2, NULL, NULL, pad, pad, NULL, 1), w->c, 6);
        y = relu(f, nest_add(f, y, x));
        break;
    }
    case W_LENET: {
        int64_t xs[4] = {n, 1, 32, 32}, k1s[4] = {6, 1, 5, 5}, k2s[4] = {16, 6, 5, 5};
        int64_t f1s[2] = {400, 120}, f2s[2] = {120, 84}, f3s[2] = {84, 10}, two[2] = {2, 2};
        nest_value x = input(s, 4, xs, 1, 1, 0);
        nest_value k1 = input(s, 4, k1s, 2, 0.2f, 0), k2 = input(s, 4, k2s, 3, 0.08f, 0);
        nest_value f1 = input(s, 2, f1s, 4, 0.05f, 0), f2 = input(s, 2, f2s, 5, 0.09f, 0);
        nest_value f3 = input(s, 2, f3s, 6, 0.1f, 0);
        y = nest_convolution(f, x, k1, NULL, NULL, NULL, NULL, NULL, 1);
        s->flops = conv_flops(f, y, 1, 5);
        y = nest_max_pool(f, relu(f, y), two, two, NULL, NULL);
        y = nest_convolution(f, y, k2, NULL, NULL, NULL, NULL, NULL, 1);
        s->flops += conv_flops(f, y, 6, 5) + 2.0 * (double)n * (400 * 120 + 120 * 84 + 84 * 10);
        y = nest_max_pool(f, relu(f, y), two, two, NULL, NULL);
        y = nest_reshape(f, y, NULL, 2, (int64_t[]){n, 400});
        y = relu(f, nest_dot(f, y, f1));
        y = relu(f, nest_dot(f, y, f2));
        y = nest_dot(f, y, f3);
        break;
    }
    case W_DOT: {
        int64_t sh[2] = {w->h, w->h};
        y = nest_dot(f, input(s, 2, sh, 1, 1, 0), input(s, 2, sh, 2, 1, 0));
        s->flops = 2.0 * (double)w->h * (double)w->h * (double)w->h;
        break;
    }
    }
    if (nest_return(f, 1, &y, NULL) != NEST_OK)
        die("%s: %s", w->name, nest_errmsg(f));
    s->out_count = 1;
    for (int i = 0; i < nest_value_rank(f, y); i++)
        s->out_count *= nest_value_shape(f, y)[i];
    s->out = alloc_f32(s->out_count);
    for (int t = 0; t < 2; t++) {
        nest_options o;
        nest_options_init(&o);
        o.openmp = t;
        s->k[t] = nest_compile(f, &o);
        if (!s->k[t])
            snprintf(s->err, sizeof s->err, "%s", nest_errmsg(f));
    }
}

static void release(side *s)
{
    for (int i = 0; i < s->nin; i++)
        free_f32(s->in[i], s->count[i]);
    free_f32(s->out, s->out_count);
    nest_kernel_free(s->k[0]);
    nest_kernel_free(s->k[1]);
    nest_function_free(s->f);
}

static void call(side *s, int threads)
{
    void *res[1] = {s->out};
    if (nest_call(s->k[threads > 1], (void *const *)s->in, s->nin, res, 1) != NEST_OK)
        die("nest_call: %s", nest_kernel_errmsg(s->k[threads > 1]));
}

/* The sum of y[i] * (1 + i % 7) / 7, in double (conv_peers.py's checksum), and of |y[i]| so. */
static double checksum(const side *s, double *scale)
{
    double sum = 0, abs_sum = 0;
    for (int64_t i = 0; i < s->out_count; i++) {
        double w = (double)(1 + i % 7) / 7.0;
        sum += s->out[i] * w;
        abs_sum += fabs(s->out[i]) * w;
    }
    *scale = abs_sum;
    return sum;
}

/* Seconds per call over a batch of at least BATCH_SECONDS (*iters found the first time). */
/* The clock of a batch: wall time, or with --cpu-time on one thread the process's CPU time
 * (what the other processes of a busy machine take from it is not counted). */
static double clock_s(int threads)
{
    return cpu_time && threads == 1 ? cpu_s() : now_s();
}

static double time_nest(side *s, int threads, int *iters)
{
    if (*iters == 0) {
        call(s, threads);
        double t0 = now_s();
        call(s, threads);
        double one = now_s() - t0;
        *iters = (int)(BATCH_SECONDS / (one > 1e-9 ? one : 1e-9)) + 1;
    }
    double t0 = clock_s(threads);
    for (int i = 0; i < *iters; i++)
        call(s, threads);
    return (clock_s(threads) - t0) / *iters;
}

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------- */

typedef struct row {
    const workload *w;
    int batch, threads;
    double nest_s, torch_s, ratio, flops;
    bool differs, failed;
} row;

static row rows[NW * 4 + 2];
static int nrows;
static double dot_gflops[2];

/* The setup command of the peer for workload w at batch n. */
static const char *peer_setup(peer *py, const workload *w, int64_t n)
{
    switch (w->kind) {
    case W_CONV:
        return peer_cmd(py, "setup conv %lld %lld %lld %lld %lld %lld %lld %lld", (long long)n,
                        (long long)w->c, (long long)w->h, (long long)w->k, (long long)w->r,
                        (long long)w->s, (long long)w->p, (long long)w->g);
    case W_POOL:
        return peer_cmd(py, "setup pool %lld %lld %lld %lld %lld", (long long)n, (long long)w->c,
                        (long long)w->h, (long long)w->r, (long long)w->s);
    case W_BLOCK:
        return peer_cmd(py, "setup block %lld %lld %lld", (long long)n, (long long)w->c,
                        (long long)w->h);
    case W_LENET:
        return peer_cmd(py, "setup lenet %lld", (long long)n);
    case W_DOT:
        return peer_cmd(py, "setup dot 1 %lld", (long long)w->h);
    }
    return "?";
}

static void measure(peer *py, const workload *w, int64_t n)
{
    side s;
    build(&s, w, n);
    if (!s.k[0] || !s.k[1]) {
        note("- %s, batch %lld: nest_compile failed: %.300s\n", w->name, (long long)n, s.err);
        release(&s);
        return;
    }
    const char *reply = peer_setup(py, w, n);
    if (strcmp(reply, "ok") != 0)
        die("%s setup %s: %s", PEER, w->name, reply);
    /* both sides compute the same thing */
    call(&s, 1);
    double scale, mine = checksum(&s, &scale), theirs = atof(peer_cmd(py, "check"));
    bool differs = !(fabs(mine - theirs) <= 1e-3 * scale + 1e-6);
    if (differs)
        note("- %s, batch %lld: the checksums differ: nest %.9g, PyTorch %.9g\n", w->name,
             (long long)n, mine, theirs);
    int rounds = quick ? 4 : w->kind == W_DOT ? 6 : MAX_ROUNDS;
    for (int threads = 1; threads <= 2; threads++) {
        double tn[MAX_ROUNDS], tt[MAX_ROUNDS], ratio[MAX_ROUNDS];
        int iters = 0;
        for (int r = 0; r < rounds; r++) {
            bool nest_first = r % 2 == 0;
            char core_arg[32]; /* both sides on the round's core */
            pin_round(threads, r, core_arg, sizeof core_arg);
            for (int k = 0; k < 2; k++) {
                if (threads > 1)
                    sleep_ms(PAUSE_MS);
                if ((k == 0) == nest_first)
                    tn[r] = time_nest(&s, threads, &iters);
                else
                    tt[r] = atof(peer_cmd(py, "time %d %g%s%s", threads, BATCH_SECONDS,
                                          cpu_time && threads == 1 ? " cpu" : "", core_arg));
            }
            ratio[r] = tt[r] / tn[r];
            if (show_rounds)
                fprintf(stderr, "    round %d%s: nest %.3f ms, PyTorch %.3f ms\n", r, core_arg,
                        tn[r] * 1e3, tt[r] * 1e3);
        }
        pin_core(-1);
        row *rw = &rows[nrows++];
        *rw = (row){w, (int)n, threads, median(tn, rounds), median(tt, rounds),
                    median(ratio, rounds), s.flops, differs, false};
        fprintf(stderr, "  %-40s batch %lld, %d thread%s: nest %.3f ms, PyTorch %.3f ms\n",
                w->name, (long long)n, threads, threads > 1 ? "s" : "", rw->nest_s * 1e3,
                rw->torch_s * 1e3);
        if (w->kind == W_DOT)
            dot_gflops[threads - 1] = s.flops / rw->nest_s * 1e-9;
    }
    release(&s);
}

static const char *gflops(char *b, size_t n, double flops, double s)
{
    if (flops <= 0)
        snprintf(b, n, "-");
    else
        snprintf(b, n, "%.1f", flops / s * 1e-9);
    return b;
}

/* The ResNet basic block's compile in the JIT, cache off: the median of 3, in ms. */
static double block_compile_ms(void)
{
    double t[3];
    for (int i = 0; i < 3; i++) {
        side s;
        build(&s, &WORKLOADS[NW - 1], 1); /* (compiles its two kernels): time a third compile */
        nest_options o;
        nest_options_init(&o);
        o.cache = 0;
        double t0 = now_s();
        nest_kernel *k = nest_compile(s.f, &o);
        t[i] = (now_s() - t0) * 1e3;
        nest_kernel_free(k);
        release(&s);
    }
    return median(t, 3);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--cpu-time") == 0)
            cpu_time = true;
        else if (strcmp(argv[i], "--rounds") == 0)
            show_rounds = true;
        else
            die("usage: conv [--quick] [--cpu-time] [--rounds] [--only TEXT]");
    }
    setenv("NEST_CACHE", "0", 0); /* every kernel compiled by this run */
    char blas_note[320];
    blascore_force(blas_note, sizeof blas_note); /* before PyTorch loads OpenBLAS */
    printf("PyTorch's OpenBLAS: %s.\n", blas_note);
    peer py;
    peer_start(&py, PEER, "--serve");
    const char *info = peer_cmd(&py, "info");
    char torch_info[128];
    snprintf(torch_info, sizeof torch_info, "%s", info);
    static const workload dot = {"nest's dot, 2048 x 2048 matrices", W_DOT, 0, 2048, 0, 0, 0, 0, 1, false};
    measure(&py, &dot, 1);
    for (size_t i = 0; i < NW; i++)
        for (int b = 0; b < 2; b++)
            if (!only || strstr(WORKLOADS[i].name, only))
                measure(&py, &WORKLOADS[i], BATCHES[b]);
    double compile_ms = only ? 0 : block_compile_ms();
    peer_stop(&py);

    printf("\n## Convolution: nest against PyTorch (oneDNN), matched threads\n\n");
    printf("%s; float32, NCHW; the median of %d rounds, each a batch of at least %.0f ms of each "
           "side. Speed: PyTorch's time over nest's, the median of the rounds' ratios (above 1: "
           "nest is faster). A one-thread round runs both sides on the same core, the cores in "
           "turn from round to round.%s\n\n",
           torch_info, quick ? 4 : MAX_ROUNDS, BATCH_SECONDS * 1e3,
           cpu_time ? " One-thread rows in CPU time of each side's process (--cpu-time), "
                      "two-thread rows in wall time." : "");
    printf("| workload | batch | threads | nest ms | PyTorch ms | nest GFLOP/s | PyTorch GFLOP/s "
           "| speed |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    int behind = 0, total = 0, below85 = 0, n3x3 = 0;
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        char a[32], b[32];
        printf("| %s | %d | %d | %.3f | %.3f | %s | %s | %.2f%s |\n", r->w->name, r->batch,
               r->threads, r->nest_s * 1e3, r->torch_s * 1e3, gflops(a, sizeof a, r->flops, r->nest_s),
               gflops(b, sizeof b, r->flops, r->torch_s), r->ratio, r->differs ? " (differs)" : "");
        if (r->w->kind == W_DOT)
            continue;
        total++;
        behind += r->ratio < 1;
        if (r->w->kind == W_CONV && r->w->r == 3 && r->w->g == 1 && !r->w->constant) {
            n3x3++;
            below85 += r->flops / r->nest_s * 1e-9 < 0.85 * dot_gflops[r->threads - 1];
        }
    }
    printf("\nTargets:\n\n");
    printf("- ahead of PyTorch: %d of %d rows%s\n", total - behind, total,
           behind ? "" : " (all)");
    printf("- ResNet 3x3 layers at >= 85%% of nest's dot (%.1f GFLOP/s on one thread, %.1f on "
           "two): %d of %d rows\n",
           dot_gflops[0], dot_gflops[1], n3x3 - below85, n3x3);
    if (compile_ms > 0)
        printf("- the ResNet basic block compiled by the JIT (cache off) in %.0f ms (target: "
               "under 2000)\n",
               compile_ms);
    if (notes()[0])
        printf("\nNotes:\n\n%s", notes());
    return 0;
}
