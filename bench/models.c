/*
 * models.c - the nest side of `make bench`'s models table (bench/models.py drives it): a server
 * that imports an ONNX model, compiles it in process (JIT) or ahead of time (a .so built with
 * the system compiler, then dlopened), and times calls on fixed inputs.
 *
 *   models --serve jit|aot       commands on stdin, one reply line each on stdout:
 *       load FILE.onnx           import and compile (without the compile cache) ->
 *                                "<import ms> <compile ms>", or "error <message>"
 *       time SECONDS             calls in batches of at least SECONDS / 5, five batches ->
 *                                "<median seconds per call>"
 *       quit
 *
 * Threads are OpenMP's: the driver sets OMP_NUM_THREADS for the process. The JIT's code runs on
 * clang's libomp and the .so's on gcc's libgomp, so the two modes live in separate processes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blascore.h"
#include "nest.h"

typedef int (*call_fn)(void *const *args, void *const *results);

typedef struct model {
    nest_function *f;
    nest_kernel *k;       /* jit */
    void *so;             /* aot */
    call_fn call;
    int nargs, nres;
    void **args, **res;
} model;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void model_free(model *m)
{
    nest_kernel_free(m->k);
    if (m->so)
        dlclose(m->so);
    for (int i = 0; i < m->nargs; i++)
        free(m->args[i]);
    for (int i = 0; i < m->nres; i++)
        free(m->res[i]);
    free(m->args);
    free(m->res);
    nest_function_free(m->f);
    memset(m, 0, sizeof *m);
}

static void *values(nest_function *f, nest_value v, bool fill)
{
    int64_t n = 1;
    for (int d = 0; d < nest_value_rank(f, v); d++)
        n *= nest_value_shape(f, v)[d];
    size_t esize = nest_type_size((nest_type)nest_value_type(f, v));
    unsigned char *p = calloc((size_t)n + 1, esize);
    if (p && fill && nest_value_type(f, v) == NEST_F32) /* the same values as models.py feeds */
        for (int64_t i = 0; i < n; i++)
            ((float *)p)[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
    return p;
}

static int calls(model *m)
{
    return m->k ? nest_call(m->k, m->args, m->nargs, m->res, m->nres)
                : m->call(m->args, m->res);
}

/* Imports and compiles; prints the reply. */
static void load(model *m, const char *path, bool aot)
{
    model_free(m);
    double t0 = now();
    m->f = nest_import_onnx(path, &(nest_onnx_options){.name = "net"});
    double t1 = now();
    if (!m->f || nest_errcode(m->f) != NEST_OK) {
        printf("error %s\n", m->f ? nest_errmsg(m->f) : "out of memory");
        return;
    }
    nest_options o;
    nest_options_init(&o);
    o.cache = 0;
    if (aot) {
        /* a new name per model: dlopen hands back a library still loaded under the same
         * name (one with OpenMP's threads is never unloaded), whatever the file holds now */
        static int loads;
        char so[256];
        snprintf(so, sizeof so, "/tmp/nest-models-%d-%d.so", (int)getpid(), loads++);
        if (nest_build_so(&m->f, 1, so, NULL, &o, NULL) != NEST_OK) {
            printf("error %s\n", nest_errmsg(m->f));
            return;
        }
        m->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        unlink(so);
        m->call = m->so ? (call_fn)(uintptr_t)dlsym(m->so, "net_call") : NULL;
        if (!m->call) {
            printf("error %s\n", dlerror());
            return;
        }
    } else if (!(m->k = nest_compile(m->f, &o))) {
        printf("error %s\n", nest_errmsg(m->f));
        return;
    }
    double t2 = now();
    m->nargs = nest_param_count(m->f);
    m->nres = nest_result_count(m->f);
    m->args = calloc((size_t)m->nargs + 1, sizeof *m->args);
    m->res = calloc((size_t)m->nres + 1, sizeof *m->res);
    for (int i = 0; i < m->nargs; i++)
        m->args[i] = values(m->f, nest_param(m->f, i), true);
    for (int i = 0; i < m->nres; i++)
        m->res[i] = values(m->f, nest_result(m->f, i), false);
    if (calls(m) != 0) { /* the first call also touches the memory */
        printf("error the call failed\n");
        return;
    }
    printf("%.1f %.1f\n", (t1 - t0) * 1e3, (t2 - t1) * 1e3);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void time_calls(model *m, double seconds)
{
    if (!m->f || (!m->k && !m->call)) {
        printf("error nothing loaded\n");
        return;
    }
    double per[5];
    for (int b = 0; b < 5; b++) {
        int n = 0;
        double t0 = now(), t;
        do {
            if (calls(m) != 0) {
                printf("error the call failed\n");
                return;
            }
            n++;
        } while ((t = now()) - t0 < seconds / 5);
        per[b] = (t - t0) / n;
    }
    qsort(per, 5, sizeof *per, by_value);
    printf("%.9f\n", per[2]);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--openblas-core") == 0) {
        /* the OpenBLAS kernel PyTorch is to run with: the variable to set, then what it means */
        char note[320];
        blascore_force(note, sizeof note);
        const char *core = getenv("OPENBLAS_CORETYPE");
        printf("%s\n%s\n", core ? core : "", note);
        return 0;
    }
    if (argc != 3 || strcmp(argv[1], "--serve") != 0 ||
        (strcmp(argv[2], "jit") != 0 && strcmp(argv[2], "aot") != 0)) {
        fprintf(stderr, "usage: models --serve jit|aot | --openblas-core\n");
        return 2;
    }
    bool aot = strcmp(argv[2], "aot") == 0;
    model m = {0};
    char line[4096];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "load ", 5) == 0)
            load(&m, line + 5, aot);
        else if (strncmp(line, "time ", 5) == 0)
            time_calls(&m, atof(line + 5));
        else if (strcmp(line, "quit") == 0)
            break;
        else
            printf("error unknown command\n");
    }
    model_free(&m);
    return 0;
}
