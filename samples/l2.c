/*
 * l2.c - build the squared L2 distance of DESIGN.md with nest's C API, compile it in process,
 * call it, and print the result with the time to compile and the time to run.
 *
 *   cc -Iinclude samples/l2.c build/lib/libnest.a -lm -ldl -lpthread -o l2 && ./l2
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nest.h"

#define N (1 << 20)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(void)
{
    /* l2(x: f32[N], y: f32[N]) -> f32[]: d = subtract(x, y); r = dot(d, d) */
    nest_function *f = nest_function_new("l2");
    if (!f)
        return 1;
    int64_t shape[1] = {N};
    nest_value x = nest_parameter(f, "x", NEST_F32, 1, shape, NEST_ROW_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F32, 1, shape, NEST_ROW_MAJOR);
    nest_value d = nest_subtract(f, x, y);
    nest_value r = nest_dot(f, d, d);
    if (nest_return(f, 1, &r, NULL) != NEST_OK) {
        fprintf(stderr, "l2: %s\n", nest_errmsg(f));
        nest_function_free(f);
        return 1;
    }

    double t0 = now_ms();
    nest_kernel *k = nest_compile(f, NULL);
    double t1 = now_ms();
    if (!k) {
        fprintf(stderr, "l2: %s\n", nest_errmsg(f));
        nest_function_free(f);
        return 1;
    }

    /* x[i] = i / N and y[i] = 0: the sum of (i / N)^2 is about N / 3 */
    float *xs = malloc(N * sizeof *xs), *ys = malloc(N * sizeof *ys), result = 0;
    if (!xs || !ys)
        return 1;
    double expect = 0;
    for (int i = 0; i < N; i++) {
        xs[i] = (float)i / N;
        ys[i] = 0;
        expect += (double)xs[i] * xs[i];
    }
    void *args[2] = {xs, ys}, *results[1] = {&result};
    double first = 0, best = 1e9;
    for (int rep = 0; rep < 20; rep++) {
        double t2 = now_ms();
        if (nest_call(k, args, 2, results, 1) != NEST_OK) {
            fprintf(stderr, "l2: %s\n", nest_kernel_errmsg(k));
            return 1;
        }
        double t = now_ms() - t2;
        if (rep == 0)
            first = t;
        else if (t < best)
            best = t;
    }
    printf("l2 of %d floats = %.6g (expected %.6g)\n", N, result, expect);
    printf("compile %.1f ms (%s; the first compile of a process also loads the JIT)\n", t1 - t0,
           nest_kernel_cache_hit(k) ? "from the cache" : "compiled");
    printf("run %.3f ms the first time (threads start, pages fault in), %.3f ms after (%.1f GB/s)\n",
           first, best, 2.0 * N * sizeof(float) / (best * 1e6));

    free(xs);
    free(ys);
    nest_kernel_free(k);
    nest_function_free(f);
    return 0;
}
