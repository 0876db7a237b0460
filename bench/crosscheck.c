/*
 * crosscheck.c - nest against the hand-fused loops on two threads at 16M elements, measured the
 * plain way: in one process, the two called in turn, the best of 10 calls each, five times.
 * `make bench` reports medians of paired batches, which on a shared two-vCPU machine swing
 * from run to run at this size; this program is the second opinion docs/performance.md cites.
 *
 *   make build/bench/crosscheck && build/bench/crosscheck
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "handfused.h"
#include "nest.h"

#define N (1 << 24)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *alloc(size_t count)
{
    size_t bytes = count * sizeof(float);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    float *f = p;
    for (size_t i = 0; i < count; i++)
        f[i] = (float)(i % 1021) / 1021.0f - 0.5f;
    return f;
}

static nest_kernel *compile(const char *text)
{
    nest_module *m = nest_parse(text, strlen(text), "crosscheck");
    nest_function *f = m ? nest_module_function(m, 0) : NULL;
    nest_kernel *k = f ? nest_compile(f, NULL) : NULL;
    if (!k) {
        fprintf(stderr, "crosscheck: %s\n", f ? nest_errmsg(f) : nest_module_errmsg(m));
        exit(1);
    }
    nest_module_free(m);
    return k;
}

int main(void)
{
    float *x = alloc(N), *y = alloc(N), *c = alloc(N), *d = alloc(N), *v = alloc(1024),
          *out = alloc(N), s = 0;
    static const char *const texts[] = {
        "func l2(x: f32[16777216], y: f32[16777216]) -> f32[] {\n"
        "  d = subtract(x, y)\n  return dot(d, d)\n}\n",
        "func chain(a: f32[16777216], b: f32[16777216], c: f32[16777216], d: f32[16777216]) "
        "-> f32[16777216] {\n  return subtract(multiply(add(a, b), c), d)\n}\n",
        "func badd(m: f32[16384,1024], v: f32[1024]) -> f32[16384,1024] {\n"
        "  return add(m, broadcast(v, shape=[16384,1024], axes=[0]))\n}\n",
        "func msum(x: f32[4096,64,64]) -> f32[4096,64] {\n  return sum(x, axes=[1])\n}\n",
        "func softmax(x: f32[16384,1024]) -> f32[16384,1024] {\n"
        "  m = max(x, axes=[1])\n"
        "  e = exp(subtract(x, broadcast(m, shape=[16384,1024], axes=[1])))\n"
        "  return divide(e, broadcast(sum(e, axes=[1]), shape=[16384,1024], axes=[1]))\n}\n",
    };
    static const char *const names[] = {"l2", "chain", "badd", "msum", "softmax"};
    /* bytes each call must move: inputs and outputs once */
    static const double bytes[] = {2.0 * N * 4, 5.0 * N * 4, 2.0 * N * 4 + 4096,
                                   (N + N / 64) * 4.0, 2.0 * N * 4};
    printf("GB/s on two threads at 16M, best of 10 calls in turn, five times:\n");
    for (int w = 0; w < 5; w++) {
        nest_kernel *k = compile(texts[w]);
        void *args[4], *res[1] = {w == 0 ? (void *)&s : (void *)out};
        int nargs = w == 1 ? 4 : w == 2 ? 2 : w == 0 ? 2 : 1;
        float *ins[4] = {x, y, c, d};
        if (w == 2)
            ins[1] = v;
        for (int i = 0; i < nargs; i++)
            args[i] = ins[i];
        printf("%-8s", names[w]);
        for (int round = 0; round < 5; round++) {
            double tn = 1e9, tc = 1e9;
            for (int rep = 0; rep < 10; rep++) {
                double t0 = now();
                if (nest_call(k, args, nargs, res, 1) != NEST_OK)
                    return 1;
                double t1 = now();
                switch (w) {
                case 0: s = hf_l2_2t(x, y, N); break;
                case 1: hf_chain_2t(x, y, c, d, out, N); break;
                case 2: hf_badd_2t(x, v, out, N / 1024, 1024); break;
                case 3: hf_msum_2t(x, out, N / 4096, 64, 64); break;
                default: hf_softmax_2t(x, out, N / 1024, 1024); break;
                }
                double t2 = now();
                if (t1 - t0 < tn)
                    tn = t1 - t0;
                if (t2 - t1 < tc)
                    tc = t2 - t1;
            }
            printf("  nest %5.1f / C %5.1f", bytes[w] / tn / 1e9, bytes[w] / tc / 1e9);
        }
        printf("\n");
        nest_kernel_free(k);
    }
    return 0;
}
