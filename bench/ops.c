/*
 * ops.c - `make bench`'s table of the op set of real models: nest's softmax and batch_dot
 * against numpy and PyTorch (bench/ops_peers.py), on one and two threads, in one run.
 *
 * Each workload is compiled twice by the JIT (OpenMP off: one thread; on: the machine's two).
 * The contenders take turns, three rounds of: nest 1t, numpy 1t, PyTorch 1t, nest 2t, numpy 2t,
 * PyTorch 2t, each the best of five batches of calls of at least 0.2 s (a pause of 250 ms
 * between contenders lets OpenMP's and OpenBLAS's worker threads stop spinning); the table
 * keeps each contender's best round. Inputs are the same values on both sides, and every
 * result's checksum must agree with nest's within 1e-3 relative.
 *
 *   ops [-o FILE.md]   appends the table to FILE.md (default: standard output only)
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "blascore.h"
#include "nest.h"
#include "peer.h"

#ifndef OPS_PEERS
#define OPS_PEERS "bench/ops_peers.py"
#endif

typedef struct workload {
    const char *name, *what;
    int kind;               /* 0: softmax over the last axis; 1: batch_dot */
    int ranks[2];
    int64_t shapes[2][3];
    double flops;           /* per call (batch_dot), or 0 */
} workload;

static const workload WORKLOADS[] = {
    {"softmax_64k", "softmax f32[64,1024] over rows", 0, {2, 0}, {{64, 1024}}, 0},
    {"softmax_1m", "softmax f32[1024,1024] over rows", 0, {2, 0}, {{1024, 1024}}, 0},
    {"softmax_16m", "softmax f32[16384,1024] over rows", 0, {2, 0}, {{16384, 1024}}, 0},
    {"attn_scores", "batch_dot [96,128,64] x [96,64,128] (attention q k^T)", 1, {3, 3},
     {{96, 128, 64}, {96, 64, 128}}, 2.0 * 96 * 128 * 64 * 128},
    {"attn_context", "batch_dot [96,128,128] x [96,128,64] (attention p v)", 1, {3, 3},
     {{96, 128, 128}, {96, 128, 64}}, 2.0 * 96 * 128 * 128 * 64},
    {"bmm_512", "batch_dot [8,512,512] x [8,512,512]", 1, {3, 3},
     {{8, 512, 512}, {8, 512, 512}}, 2.0 * 8 * 512 * 512 * 512},
    {"linear_batch", "batch_dot [32,128,768] x [768,768] (a linear layer)", 1, {3, 2},
     {{32, 128, 768}, {768, 768}}, 2.0 * 32 * 128 * 768 * 768},
};
#define NW ((int)(sizeof WORKLOADS / sizeof *WORKLOADS))

/* the contenders, in the order they take turns and the table's columns */
enum { NEST1, NUMPY1, TORCH1, NEST2, NUMPY2, TORCH2, NC };

static double checksum(const float *r, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)r[i] * (1 + (double)(i % 7) / 8.0);
    return s;
}

/* ---- nest's side ---- */

typedef struct compiled {
    nest_kernel *k[2]; /* one thread, two */
    float *in[2], *out;
    int64_t nin[2], nout;
} compiled;

static int64_t count3(int rank, const int64_t *s)
{
    int64_t c = 1;
    for (int i = 0; i < rank; i++)
        c *= s[i];
    return c;
}

static void compile_workload(const workload *w, compiled *c)
{
    nest_function *f = nest_function_new(w->name);
    int nparams = w->kind == 0 ? 1 : 2;
    nest_value p[2];
    for (int i = 0; i < nparams; i++) {
        char name[8];
        snprintf(name, sizeof name, "x%d", i);
        p[i] = nest_parameter(f, name, NEST_F32, w->ranks[i], w->shapes[i], NEST_ROW_MAJOR);
        c->nin[i] = count3(w->ranks[i], w->shapes[i]);
        c->in[i] = malloc((size_t)c->nin[i] * sizeof(float));
        if (!c->in[i])
            die("out of memory");
        fill(c->in[i], c->nin[i], i + 1);
    }
    nest_value r = w->kind == 0 ? nest_softmax(f, p[0], 1, (const int64_t[]){w->ranks[0] - 1})
                                : nest_batch_dot(f, p[0], p[1]);
    if (nest_return(f, 1, &r, NULL) != NEST_OK)
        die("%s: %s", w->name, nest_errmsg(f));
    c->nout = count3(nest_value_rank(f, r), nest_value_shape(f, r));
    c->out = malloc((size_t)c->nout * sizeof(float));
    if (!c->out)
        die("out of memory");
    for (int t = 0; t < 2; t++) {
        nest_options o;
        nest_options_init(&o);
        o.openmp = t;
        c->k[t] = nest_compile(f, &o);
        if (!c->k[t])
            die("%s: %s", w->name, nest_errmsg(f));
    }
    nest_function_free(f);
}

static void call(compiled *c, int t)
{
    void *args[2] = {c->in[0], c->in[1]}, *res[1] = {c->out};
    if (nest_call(c->k[t], args, c->in[1] ? 2 : 1, res, 1) != NEST_OK)
        die("nest_call: %s", nest_kernel_errmsg(c->k[t]));
}

/* Seconds per call: the best of five batches of at least `at_least` seconds. */
static double nest_seconds(compiled *c, int t, double at_least)
{
    call(c, t);
    double best = INFINITY;
    for (int b = 0; b < 5; b++) {
        int n = 0;
        double t0 = now_s(), dt;
        do {
            call(c, t);
            n++;
            dt = now_s() - t0;
        } while (dt < at_least);
        if (dt / n < best)
            best = dt / n;
    }
    return best;
}

static void free_compiled(compiled *c)
{
    for (int t = 0; t < 2; t++)
        nest_kernel_free(c->k[t]);
    free(c->in[0]);
    free(c->in[1]);
    free(c->out);
}

/* ---- the table ---- */

static FILE *md;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (md) {
        va_start(ap, fmt);
        vfprintf(md, fmt, ap);
        va_end(ap);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            md = fopen(argv[++i], "a");
            if (!md)
                die("cannot append to %s: %s", argv[i], strerror(errno));
        } else {
            die("usage: ops [-o FILE.md]");
        }
    }
    char blas_note[512];
    blascore_force(blas_note, sizeof blas_note); /* before the peers load OpenBLAS */
    peer py[2];
    peer_start(&py[0], OPS_PEERS, "1");
    peer_start(&py[1], OPS_PEERS, "2");
    char info[2][256];
    for (int t = 0; t < 2; t++)
        snprintf(info[t], sizeof info[t], "%s", peer_cmd(&py[t], "info"));
    double sec[NW][NC];
    bool agree[NW];
    for (int wi = 0; wi < NW; wi++) {
        const workload *w = &WORKLOADS[wi];
        fprintf(stderr, "ops: %s\n", w->name);
        compiled c = {0};
        compile_workload(w, &c);
        call(&c, 1);
        double want = checksum(c.out, c.nout);
        agree[wi] = true;
        for (int t = 0; t < 2; t++) {
            peer_cmd(&py[t], "setup %s", w->name);
            for (int k = 0; k < 2; k++) {
                double got = atof(peer_cmd(&py[t], "check %s", k ? "torch" : "numpy"));
                agree[wi] &= fabs(got - want) <= 1e-3 * fmax(fabs(want), 1.0);
            }
        }
        for (int ci = 0; ci < NC; ci++)
            sec[wi][ci] = INFINITY;
        for (int round = 0; round < 3; round++)
            for (int ci = 0; ci < NC; ci++) {
                int t = ci >= NEST2; /* the thread count's index */
                double s;
                if (ci == NEST1 || ci == NEST2)
                    s = nest_seconds(&c, t, 0.2);
                else
                    s = atof(peer_cmd(&py[t], "time %s 0.2",
                                      ci == NUMPY1 || ci == NUMPY2 ? "numpy" : "torch"));
                if (s < sec[wi][ci])
                    sec[wi][ci] = s;
                sleep_ms(250);
            }
        free_compiled(&c);
    }
    for (int t = 0; t < 2; t++)
        peer_stop(&py[t]);

    out("\n## The op set of real models: softmax and batch_dot\n\n");
    out("Milliseconds per call, best of three rounds taken in turn (GFLOP/s for batch_dot); the\n"
        "last columns divide PyTorch's time by nest's (above 1: nest is faster). Peers: %s; %s.\n"
        "numpy's OpenBLAS: %s.\n\n",
        info[0], info[1], blas_note);
    out("| workload | nest 1t | numpy 1t | PyTorch 1t | nest 2t | numpy 2t | PyTorch 2t | "
        "vs PyTorch 1t | vs PyTorch 2t |\n");
    out("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int wi = 0; wi < NW; wi++) {
        const workload *w = &WORKLOADS[wi];
        out("| %s%s |", w->what, agree[wi] ? "" : " (results differ!)");
        for (int ci = 0; ci < NC; ci++) {
            if (w->flops > 0)
                out(" %.3f (%.0f) |", sec[wi][ci] * 1e3, w->flops / sec[wi][ci] * 1e-9);
            else
                out(" %.3f |", sec[wi][ci] * 1e3);
        }
        out(" %.2f | %.2f |\n", sec[wi][TORCH1] / sec[wi][NEST1], sec[wi][TORCH2] / sec[wi][NEST2]);
    }
    out("\n");
    if (md)
        fclose(md);
    return 0;
}
