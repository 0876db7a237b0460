/*
 * bench.c - the driver of `make bench`: nest against hand-fused C, Eigen, numpy and numexpr,
 * measured interleaved in one run, and the compile latencies of the JIT.
 *
 *   bench [-o FILE.md] [--quick] [--no-mem] [--no-latency]   the whole run (from the repo root)
 *   bench --only W ...       one workload only, for trying things out
 *   bench --mem W N C        one contender's extra memory, in this fresh process
 *   bench --latency          the JIT latencies, in this fresh process
 *
 * Everything is printed as markdown on stdout and written to FILE.md (default build/bench.md).
 *
 * Workloads, float32, at N = 1K, 64K, 1M, 16M elements of the main input:
 *   l2       sum((x - y)^2)                     x, y [N]            -> scalar
 *   chain    (a + b) * c - d                    a, b, c, d [N]      -> [N]
 *   badd     m + broadcast(v)                   m [N/1024, 1024], v [1024] -> [N/1024, 1024]
 *   msum     sum over the middle axis           x [N/4096, 64, 64] -> [N/4096, 64]
 *                                               (N = 1K: x [1, 16, 64])
 *   softmax  exp(x - max) / sum(exp(x - max))   rows of x [N/1024, 1024] -> same shape
 *
 * Throughput is the bytes a workload must read and write once (inputs + outputs) divided by the
 * median time per call. Every contender's inputs are page-aligned anonymous mappings with
 * MADV_HUGEPAGE from 4 MiB (numpy's own policy for its arrays), filled before timing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eigen.h"
#include "blascore.h"
#include "handfused.h"
#include "nest.h"
#include "benchutil.h"
#include "peer.h"

extern char **environ;

#define PEERS "bench/peers.py"
#define NESTC "bin/nestc"
#define WORKDIR "build/bench"

#define MAX_ROUNDS 15
#define BATCH_SECONDS 0.03 /* each timed batch lasts at least this long: at 16M, >= 8 calls */
#define PAUSE_MS 250        /* between processes: spinning OpenMP (200 ms) and BLAS threads sleep */

static bool quick;

/* ---------------------------------------------------------------------------------------------
 * Small helpers (the clock, medians, arrays and their values are in benchutil.c)
 * ------------------------------------------------------------------------------------------- */

/* One line of a command's standard output (trailing newline removed), or "?" */
static void command_line(const char *cmd, char *out, size_t size)
{
    snprintf(out, size, "?");
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (fgets(out, (int)size, p))
        out[strcspn(out, "\n")] = '\0';
    else
        snprintf(out, size, "?");
    pclose(p);
}

/* Runs argv (searched in PATH) with standard output to out_path (NULL: /dev/null) and standard
 * error to /dev/null. Returns the exit status (-1 if it could not run); *seconds gets the wall
 * time from spawn to exit. */
static int run_command(char *const argv[], const char *out_path, double *seconds)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    double t0 = now_s();
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (seconds)
        *seconds = now_s() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Median wall time in ms of `runs` runs of argv; negative if any run failed. */
static double time_command(char *const argv[], const char *out_path, int runs)
{
    double t[32];
    if (runs > 32)
        runs = 32;
    for (int i = 0; i < runs; i++)
        if (run_command(argv, out_path, &t[i]) != 0)
            return -1;
    return median(t, runs) * 1e3;
}

/* ---------------------------------------------------------------------------------------------
 * Output: markdown on stdout and in the report file
 * ------------------------------------------------------------------------------------------- */

static FILE *report;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (report) {
        va_start(ap, fmt);
        vfprintf(report, fmt, ap);
        va_end(ap);
    }
    fflush(stdout);
}

/* "1K", "64K", "1M", "16M" */
static const char *size_name(int64_t n)
{
    static char b[4][32];
    static int k;
    char *s = b[k++ % 4];
    if (n >= (1 << 20) && n % (1 << 20) == 0)
        snprintf(s, 32, "%lldM", (long long)(n >> 20));
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(s, 32, "%lldK", (long long)(n >> 10));
    else
        snprintf(s, 32, "%lld", (long long)n);
    return s;
}

static const char *bytes_name(double b)
{
    static char buf[8][24];
    static int k;
    char *s = buf[k++ % 8];
    if (b < 0)
        snprintf(s, 24, "?");
    else if (b < 1024)
        snprintf(s, 24, "%.0f B", b);
    else if (b < 1024 * 1024)
        snprintf(s, 24, "%.0f KiB", b / 1024);
    else
        snprintf(s, 24, "%.1f MiB", b / (1024 * 1024));
    return s;
}

static const char *num(double v)
{
    static char buf[16][24];
    static int k;
    char *s = buf[k++ % 16];
    if (!(v > 0))
        snprintf(s, 24, "-");
    else if (v >= 100)
        snprintf(s, 24, "%.0f", v);
    else if (v >= 10)
        snprintf(s, 24, "%.1f", v);
    else
        snprintf(s, 24, "%.2f", v);
    return s;
}

static const char *ratio(double v)
{
    static char buf[16][24];
    static int k;
    char *s = buf[k++ % 16];
    if (!(v > 0))
        snprintf(s, 24, "-");
    else
        snprintf(s, 24, "%.2f", v);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Workloads
 * ------------------------------------------------------------------------------------------- */

typedef enum { W_L2, W_CHAIN, W_BADD, W_MSUM, W_SOFTMAX, W_COUNT } workload;

static const char *const wl_name[W_COUNT] = {"l2", "chain", "badd", "msum", "softmax"};
static const char *const wl_title[W_COUNT] = {
    "L2 distance: dot(x - y, x - y), scalar result",
    "Element-wise chain: (a + b) * c - d",
    "Broadcast add: m [rows, 1024] + v [1024] along the rows",
    "Sum over the middle axis: x [n/4096, 64, 64] -> [n/4096, 64] (1K: [1, 16, 64] -> [1, 64])",
    "Row softmax: exp(x - max) / sum(exp(x - max)) over rows of [n/1024, 1024]",
};

static const int64_t sizes[] = {1 << 10, 1 << 16, 1 << 20, 1 << 24};
#define NSIZES 4

typedef struct {
    workload w;
    int64_t n;
    int nin;
    int rank[4];
    int64_t shape[4][3];
    int64_t count[4];
    int out_rank; /* 0: a scalar */
    int64_t out_shape[3];
    int64_t out_count;
    int64_t rows, cols;  /* badd, softmax */
    int64_t a, l, d;     /* msum */
    double bytes;        /* read and written once */
} shape_info;

static void set_in(shape_info *s, int i, int rank, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t d[3] = {d0, d1, d2};
    s->rank[i] = rank;
    s->count[i] = 1;
    for (int k = 0; k < rank; k++) {
        s->shape[i][k] = d[k];
        s->count[i] *= d[k];
    }
    if (i + 1 > s->nin)
        s->nin = i + 1;
}

static void set_out(shape_info *s, int rank, int64_t d0, int64_t d1)
{
    int64_t d[2] = {d0, d1};
    s->out_rank = rank;
    s->out_count = 1;
    for (int k = 0; k < rank; k++) {
        s->out_shape[k] = d[k];
        s->out_count *= d[k];
    }
}

static shape_info describe(workload w, int64_t n)
{
    shape_info s;
    memset(&s, 0, sizeof s);
    s.w = w;
    s.n = n;
    switch (w) {
    case W_L2:
        set_in(&s, 0, 1, n, 0, 0);
        set_in(&s, 1, 1, n, 0, 0);
        set_out(&s, 0, 0, 0);
        break;
    case W_CHAIN:
        for (int i = 0; i < 4; i++)
            set_in(&s, i, 1, n, 0, 0);
        set_out(&s, 1, n, 0);
        break;
    case W_BADD:
        s.rows = n / 1024;
        s.cols = 1024;
        set_in(&s, 0, 2, s.rows, s.cols, 0);
        set_in(&s, 1, 1, s.cols, 0, 0);
        set_out(&s, 2, s.rows, s.cols);
        break;
    case W_MSUM:
        s.a = n < 4096 ? 1 : n / 4096;
        s.l = n < 4096 ? n / 64 : 64;
        s.d = 64;
        set_in(&s, 0, 3, s.a, s.l, s.d);
        set_out(&s, 2, s.a, s.d);
        break;
    case W_SOFTMAX:
        s.rows = n / 1024;
        s.cols = 1024;
        set_in(&s, 0, 2, s.rows, s.cols, 0);
        set_out(&s, 2, s.rows, s.cols);
        break;
    default:
        break;
    }
    double elems = (double)s.out_count;
    for (int i = 0; i < s.nin; i++)
        elems += (double)s.count[i];
    s.bytes = 4 * elems;
    return s;
}

/* The nest graph of a workload, built with the C API. */
static nest_function *build_graph(const shape_info *s)
{
    nest_function *f = nest_function_new(wl_name[s->w]);
    if (!f)
        die("out of memory");
    static const char *const pname[W_COUNT][4] = {
        {"x", "y"}, {"a", "b", "c", "d"}, {"m", "v"}, {"x"}, {"x"}};
    nest_value p[4];
    for (int i = 0; i < s->nin; i++)
        p[i] = nest_parameter(f, pname[s->w][i], NEST_F32, s->rank[i], s->shape[i],
                              NEST_ROW_MAJOR);
    nest_value r = NEST_NONE;
    int64_t ax0[1] = {0}, ax1[1] = {1};
    switch (s->w) {
    case W_L2: {
        nest_value d = nest_subtract(f, p[0], p[1]);
        r = nest_dot(f, d, d);
        break;
    }
    case W_CHAIN:
        r = nest_subtract(f, nest_multiply(f, nest_add(f, p[0], p[1]), p[2]), p[3]);
        break;
    case W_BADD:
        r = nest_add(f, p[0], nest_broadcast(f, p[1], 2, s->shape[0], 1, ax0));
        break;
    case W_MSUM:
        r = nest_sum(f, p[0], 1, ax1);
        break;
    case W_SOFTMAX: {
        const int64_t *shp = s->shape[0];
        nest_value m = nest_max(f, p[0], 1, ax1);
        nest_value e = nest_exp(f, nest_subtract(f, p[0], nest_broadcast(f, m, 2, shp, 1, ax1)));
        nest_value sum = nest_sum(f, e, 1, ax1);
        r = nest_divide(f, e, nest_broadcast(f, sum, 2, shp, 1, ax1));
        break;
    }
    default:
        break;
    }
    if (nest_return(f, 1, &r, NULL) != NEST_OK)
        die("building %s: %s", wl_name[s->w], nest_errmsg(f));
    return f;
}

/* ---------------------------------------------------------------------------------------------
 * Contenders
 * ------------------------------------------------------------------------------------------- */

typedef enum {
    C_NEST,  /* nest, default options (OpenMP on) */
    C_NEST1, /* nest, openmp = 0 */
    C_HF1,   /* hand-fused C, 1 thread */
    C_HF2,   /* hand-fused C, 2 OpenMP threads (1M and 16M only) */
    C_EIGEN,
    C_NUMPY,     /* peers.py: numpy expression */
    C_NUMPY_OUT, /* numpy with out= */
    C_NE1,       /* numexpr, 1 thread */
    C_NE2,       /* numexpr, 2 threads */
    C_COUNT
} contender;

static const char *const c_title[C_COUNT] = {"nest",  "nest 1t", "C 1t",       "C 2t",      "Eigen",
                                             "numpy", "numpy out=", "numexpr 1t", "numexpr 2t"};
/* names on the command line of --mem and in peers.py */
static const char *const c_id[C_COUNT] = {"nest",  "nest1t",    "c1t", "c2t", "eigen",
                                          "numpy", "numpy_out", "ne1", "ne2"};

static bool is_python(contender c)
{
    return c >= C_NUMPY;
}

static bool c_active(contender c, int64_t n)
{
    return c != C_HF2 || n >= (1 << 20);
}

typedef struct {
    shape_info s;
    float *in[4];
    float *out;
    float scalar; /* the result of l2 */
    nest_kernel *k[2]; /* C_NEST, C_NEST1 */
    char nest_err[2][512];
} bench_case;

static void case_setup(bench_case *bc, workload w, int64_t n)
{
    memset(bc, 0, sizeof *bc);
    bc->s = describe(w, n);
    for (int i = 0; i < bc->s.nin; i++) {
        bc->in[i] = alloc_f32(bc->s.count[i]);
        fill(bc->in[i], bc->s.count[i], i + 1);
    }
    bc->out = alloc_f32(bc->s.out_count);
}

/* Compiles the nest kernel of contender c (C_NEST or C_NEST1); on failure keeps the message. */
static void case_compile(bench_case *bc, contender c)
{
    nest_function *f = build_graph(&bc->s);
    nest_options o;
    nest_options_init(&o);
    o.openmp = c == C_NEST;
    int i = c == C_NEST ? 0 : 1;
    bc->k[i] = nest_compile(f, &o);
    if (!bc->k[i])
        snprintf(bc->nest_err[i], sizeof bc->nest_err[i], "%s", nest_errmsg(f));
    nest_function_free(f);
}

static void case_free(bench_case *bc)
{
    for (int i = 0; i < bc->s.nin; i++)
        free_f32(bc->in[i], bc->s.count[i]);
    free_f32(bc->out, bc->s.out_count);
    nest_kernel_free(bc->k[0]);
    nest_kernel_free(bc->k[1]);
}

/* One call of an in-process contender; false if it is unavailable or failed. */
static bool run_local(bench_case *bc, contender c)
{
    const shape_info *s = &bc->s;
    float **x = bc->in;
    size_t n = (size_t)s->n;
    switch (c) {
    case C_NEST:
    case C_NEST1: {
        nest_kernel *k = bc->k[c == C_NEST ? 0 : 1];
        void *res[1] = {s->w == W_L2 ? (void *)&bc->scalar : (void *)bc->out};
        return k && nest_call(k, (void *const *)x, s->nin, res, 1) == NEST_OK;
    }
    case C_HF1:
    case C_HF2: {
        bool two = c == C_HF2;
        switch (s->w) {
        case W_L2:
            bc->scalar = two ? hf_l2_2t(x[0], x[1], n) : hf_l2(x[0], x[1], n);
            break;
        case W_CHAIN:
            (two ? hf_chain_2t : hf_chain)(x[0], x[1], x[2], x[3], bc->out, n);
            break;
        case W_BADD:
            (two ? hf_badd_2t : hf_badd)(x[0], x[1], bc->out, (size_t)s->rows, (size_t)s->cols);
            break;
        case W_MSUM:
            (two ? hf_msum_2t : hf_msum)(x[0], bc->out, (size_t)s->a, (size_t)s->l, (size_t)s->d);
            break;
        case W_SOFTMAX:
            (two ? hf_softmax_2t : hf_softmax)(x[0], bc->out, (size_t)s->rows, (size_t)s->cols);
            break;
        default:
            return false;
        }
        return true;
    }
    case C_EIGEN:
        switch (s->w) {
        case W_L2:
            bc->scalar = eg_l2(x[0], x[1], n);
            break;
        case W_CHAIN:
            eg_chain(x[0], x[1], x[2], x[3], bc->out, n);
            break;
        case W_BADD:
            eg_badd(x[0], x[1], bc->out, (size_t)s->rows, (size_t)s->cols);
            break;
        case W_MSUM:
            eg_msum(x[0], bc->out, (size_t)s->a, (size_t)s->l, (size_t)s->d);
            break;
        case W_SOFTMAX:
            eg_softmax(x[0], bc->out, (size_t)s->rows, (size_t)s->cols);
            break;
        default:
            return false;
        }
        return true;
    default:
        return false;
    }
}

/* The weight of element i in checksums (peers.py uses the same). */
static double weight(int64_t i)
{
    return (double)(1 + i % 7);
}

/* The result of the last call: the scalar, or the sum of |out[i]| * weight(i). */
static double checksum(const bench_case *bc)
{
    if (bc->s.w == W_L2)
        return bc->scalar;
    double sum = 0;
    for (int64_t i = 0; i < bc->s.out_count; i++)
        sum += fabs((double)bc->out[i]) * weight(i);
    return sum;
}

/* The checksum of the exact result, computed in double. */
static double reference(const bench_case *bc)
{
    const shape_info *s = &bc->s;
    float *const *x = bc->in;
    double sum = 0;
    switch (s->w) {
    case W_L2:
        for (int64_t i = 0; i < s->n; i++) {
            double d = (double)x[0][i] - (double)x[1][i];
            sum += d * d;
        }
        break;
    case W_CHAIN:
        for (int64_t i = 0; i < s->n; i++)
            sum += fabs(((double)x[0][i] + x[1][i]) * x[2][i] - x[3][i]) * weight(i);
        break;
    case W_BADD:
        for (int64_t i = 0; i < s->n; i++)
            sum += fabs((double)x[0][i] + x[1][i % s->cols]) * weight(i);
        break;
    case W_MSUM:
        for (int64_t i = 0; i < s->a; i++)
            for (int64_t k = 0; k < s->d; k++) {
                double t = 0;
                for (int64_t j = 0; j < s->l; j++)
                    t += x[0][(i * s->l + j) * s->d + k];
                sum += fabs(t) * weight(i * s->d + k);
            }
        break;
    case W_SOFTMAX:
        for (int64_t r = 0; r < s->rows; r++) {
            const float *row = x[0] + r * s->cols;
            double m = -INFINITY, t = 0;
            for (int64_t j = 0; j < s->cols; j++)
                m = row[j] > m ? row[j] : m;
            for (int64_t j = 0; j < s->cols; j++)
                t += exp(row[j] - m);
            for (int64_t j = 0; j < s->cols; j++)
                sum += exp(row[j] - m) / t * weight(r * s->cols + j);
        }
        break;
    default:
        break;
    }
    return sum;
}

/* Seconds per call over one batch of at least BATCH_SECONDS; *iters is found (after a warm-up
 * call) the first time. Negative if the contender failed. */
static double time_local(bench_case *bc, contender c, int *iters)
{
    if (*iters == 0) {
        if (!run_local(bc, c))
            return -1;
        double t0 = now_s();
        run_local(bc, c);
        double one = now_s() - t0;
        *iters = one >= BATCH_SECONDS ? 1 : (int)(BATCH_SECONDS / (one > 1e-9 ? one : 1e-9)) + 1;
    }
    double t0 = now_s();
    for (int i = 0; i < *iters; i++)
        run_local(bc, c);
    return (now_s() - t0) / *iters;
}

/* ---------------------------------------------------------------------------------------------
 * Throughput
 * ------------------------------------------------------------------------------------------- */

typedef struct {
    double gbs[NSIZES][C_COUNT];   /* 0: not measured */
    double t[NSIZES][C_COUNT][MAX_ROUNDS]; /* seconds per call in each round */
    int rounds[NSIZES];
    double mem[NSIZES][C_COUNT];   /* extra bytes; negative: not measured */
    bool mismatch[NSIZES][C_COUNT];
} results;

static results res[W_COUNT];
static bool measured[W_COUNT];

static bool agree(double a, double b)
{
    return fabs(a - b) <= 1e-2 * fmax(fabs(a), fabs(b)) + 1e-6;
}

/* The contenders of a round: the ones in this process, a pause, the Python peers, a pause. Each
 * round rotates both lists by one, so that every contender takes every place in turn (the
 * place in a round measurably changes the speed at small sizes). */
static const contender local_order[] = {C_NEST1, C_HF1, C_EIGEN, C_NEST, C_HF2};
static const contender python_order[] = {C_NUMPY, C_NUMPY_OUT, C_NE1, C_NE2};
#define NLOCAL (sizeof local_order / sizeof *local_order)
#define NPYTHON (sizeof python_order / sizeof *python_order)

static void measure(peer *py, workload w, int si)
{
    int64_t n = sizes[si];
    bench_case bc;
    case_setup(&bc, w, n);
    case_compile(&bc, C_NEST);
    case_compile(&bc, C_NEST1);
    for (int i = 0; i < 2; i++)
        if (!bc.k[i])
            note("- %s %s: nest_compile failed: %.300s\n", wl_name[w], size_name(n),
                 bc.nest_err[i]);
    const char *reply = peer_cmd(py, "setup %s %lld", wl_name[w], (long long)n);
    if (strcmp(reply, "ok") != 0)
        die("peers.py setup %s: %s", wl_name[w], reply);

    /* Every contender's result against the exact one. */
    double ref = reference(&bc);
    for (int c = 0; c < C_COUNT; c++) {
        if (!c_active((contender)c, n))
            continue;
        double v;
        if (is_python((contender)c)) {
            v = atof(peer_cmd(py, "check %s", c_id[c]));
        } else {
            if (!run_local(&bc, (contender)c))
                continue;
            v = checksum(&bc);
        }
        if (!agree(v, ref)) {
            res[w].mismatch[si][c] = true;
            note("- %s %s: %s's checksum is %.9g, the exact one %.9g (relative error %.1e)\n",
                 wl_name[w], size_name(n), c_title[c], v, ref, fabs(v - ref) / fabs(ref));
        }
    }

    int rounds = quick ? 3 : n >= (1 << 24) ? 9 : 15;
    double t[C_COUNT][MAX_ROUNDS];
    int iters[C_COUNT] = {0};
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < NLOCAL; i++) {
            contender c = local_order[(i + (size_t)r) % NLOCAL];
            t[c][r] = c_active(c, n) ? time_local(&bc, c, &iters[c]) : -1;
        }
        sleep_ms(PAUSE_MS);
        for (size_t i = 0; i < NPYTHON; i++) {
            contender c = python_order[(i + (size_t)r) % NPYTHON];
            t[c][r] = atof(peer_cmd(py, "time %s %g", c_id[c], BATCH_SECONDS));
        }
        sleep_ms(PAUSE_MS);
    }
    res[w].rounds[si] = rounds;
    for (int c = 0; c < C_COUNT; c++) {
        memcpy(res[w].t[si][c], t[c], sizeof t[c]);
        res[w].gbs[si][c] = t[c][0] > 0 ? bc.s.bytes / median(t[c], rounds) / 1e9 : 0;
    }
    case_free(&bc);
    measured[w] = true;
}

/* ---------------------------------------------------------------------------------------------
 * Extra memory: one contender in a fresh process
 * ------------------------------------------------------------------------------------------- */

/* bench --mem W N C: prints the bytes of the call's RSS high-water mark above the RSS before
 * it (after a warm-up call), plus for nest the workspace the kernel keeps. */
static int mem_main(const char *wname, const char *nstr, const char *cname)
{
    int w = -1, c = -1;
    for (int i = 0; i < W_COUNT; i++)
        if (strcmp(wname, wl_name[i]) == 0)
            w = i;
    for (int i = 0; i < C_COUNT; i++)
        if (strcmp(cname, c_id[i]) == 0 && !is_python((contender)i))
            c = i;
    if (w < 0 || c < 0)
        die("--mem: unknown workload or contender");
    bench_case bc;
    case_setup(&bc, (workload)w, atoll(nstr));
    size_t ws = 0;
    if (c == C_NEST || c == C_NEST1) {
        case_compile(&bc, (contender)c);
        nest_kernel *k = bc.k[c == C_NEST ? 0 : 1];
        if (!k)
            die("%s", bc.nest_err[c == C_NEST ? 0 : 1]);
        ws = nest_kernel_workspace_size(k);
    }
    if (!run_local(&bc, (contender)c))
        die("%s failed", cname);
    FILE *f = fopen("/proc/self/clear_refs", "w"); /* "5": reset the high-water mark */
    if (!f || fputs("5", f) < 0 || fclose(f) != 0)
        die("cannot reset the RSS high-water mark: %s", strerror(errno));
    long base = status_kib("VmRSS");
    run_local(&bc, (contender)c);
    long peak = status_kib("VmHWM");
    printf("%lld\n", (long long)(peak - base) * 1024 + (long long)ws);
    case_free(&bc);
    return 0;
}

/* Reads an integer printed by a child command; negative on failure. */
static double read_number(const char *cmd)
{
    char line[128];
    command_line(cmd, line, sizeof line);
    char *end;
    double v = strtod(line, &end);
    return end == line ? -1 : v;
}

static void measure_memory(const char *self, workload w, int si)
{
    char cmd[512];
    for (int c = 0; c < C_COUNT; c++) {
        res[w].mem[si][c] = -1;
        if (!c_active((contender)c, sizes[si]))
            continue;
        if (is_python((contender)c))
            snprintf(cmd, sizeof cmd, "%s %s --mem %s %lld %s 2>/dev/null", peer_python(), PEERS,
                     wl_name[w], (long long)sizes[si], c_id[c]);
        else
            snprintf(cmd, sizeof cmd, "%s --mem %s %lld %s 2>/dev/null", self, wl_name[w],
                     (long long)sizes[si], c_id[c]);
        res[w].mem[si][c] = read_number(cmd);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Compile latency
 * ------------------------------------------------------------------------------------------- */

/* A function of a .nest file (parsed; the module is leaked on purpose: the process is short). */
static nest_function *load_function(const char *path, const char *name)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    nest_module *m = nest_parse(text, len, path);
    if (!m || nest_module_errcode(m) != NEST_OK)
        die("%s: %s", path, m ? nest_module_errmsg(m) : "out of memory");
    return nest_module_find(m, name);
}

static const char *dense_source(void)
{
    struct stat st;
    return stat("samples/dense.nest", &st) == 0 ? "samples/dense.nest" : "samples/design.nest";
}

static int latency_openmp = 1; /* the openmp option of the compiles below */

/* ms of one nest_compile; negative on failure. *hit gets whether it came from the cache. */
static double compile_ms(nest_function *f, int cache, bool *hit)
{
    nest_options o;
    nest_options_init(&o);
    o.cache = cache;
    o.openmp = latency_openmp;
    double t0 = now_s();
    nest_kernel *k = nest_compile(f, &o);
    double ms = (now_s() - t0) * 1e3;
    if (!k) {
        fprintf(stderr, "bench: nest_compile %s: %s\n", nest_function_name(f), nest_errmsg(f));
        return -1;
    }
    if (hit)
        *hit = nest_kernel_cache_hit(k) != 0;
    nest_kernel_free(k);
    return ms;
}

static double median_compile(nest_function *f, int cache, int runs, bool *all_hit)
{
    double t[64];
    if (all_hit)
        *all_hit = true;
    for (int i = 0; i < runs; i++) {
        bool hit = false;
        t[i] = compile_ms(f, cache, &hit);
        if (t[i] < 0)
            return -1;
        if (all_hit && !hit)
            *all_hit = false;
    }
    return median(t, runs);
}

/* bench --latency: in this fresh process, with a cache directory of its own. Prints
 * "key value" lines. */
static int latency_main(void)
{
    char dir[] = "/tmp/nest-bench-cache-XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp: %s", strerror(errno));
    setenv("XDG_CACHE_HOME", dir, 1);
    nest_function *l2 = load_function("samples/l2.nest", "l2");
    nest_function *dense = load_function(dense_source(), "dense");
    if (!l2 || !dense)
        die("samples/l2.nest or %s (dense) not found", dense_source());

    printf("first_l2 %.2f\n", compile_ms(l2, 0, NULL)); /* loads the JIT library too */
    printf("cold_l2 %.2f\n", median_compile(l2, 0, quick ? 3 : 11, NULL));
    printf("cold_dense %.2f\n", median_compile(dense, 0, quick ? 3 : 7, NULL));
    latency_openmp = 0;
    printf("cold1_l2 %.2f\n", median_compile(l2, 0, quick ? 3 : 11, NULL));
    printf("cold1_dense %.2f\n", median_compile(dense, 0, quick ? 3 : 7, NULL));
    latency_openmp = 1;
    bool hit_l2, hit_dense;
    compile_ms(l2, 1, NULL); /* fills the cache */
    compile_ms(dense, 1, NULL);
    printf("hit_l2 %.3f\n", median_compile(l2, 1, 51, &hit_l2));
    printf("hit_dense %.3f\n", median_compile(dense, 1, 51, &hit_dense));
    printf("hits_were_hits %d\n", hit_l2 && hit_dense);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench: could not remove %s\n", dir);
    return 0;
}

typedef struct {
    double first_l2, cold_l2, cold_dense, cold1_l2, cold1_dense, hit_l2, hit_dense;
    bool hits_were_hits;
    double aot[2], clang[2], gcc[2]; /* l2, dense */
    char startup[4096];
} latency;

static latency lat;

static double latency_value(const char *text, const char *key)
{
    const char *p = text;
    size_t k = strlen(key);
    while ((p = strstr(p, key)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[k] == ' ')
            return atof(p + k + 1);
        p += k;
    }
    return -1;
}

/* The trivial program's start time, with and without libnest.so: hyperfine when installed,
 * else a loop of 200 runs of each. */
static void measure_startup(void)
{
    const char *plain = WORKDIR "/trivial_plain", *linked = WORKDIR "/trivial_nest";
    if (system("command -v hyperfine >/dev/null 2>&1") == 0) {
        char cmd[512];
        snprintf(cmd, sizeof cmd,
                 "hyperfine -N --warmup 20 --runs 200 --style none --export-markdown %s/startup.md "
                 "%s %s >/dev/null 2>&1",
                 WORKDIR, plain, linked);
        if (system(cmd) == 0) {
            FILE *f = fopen(WORKDIR "/startup.md", "r");
            size_t len = f ? fread(lat.startup, 1, sizeof lat.startup - 1, f) : 0;
            lat.startup[len] = '\0';
            if (f)
                fclose(f);
            if (len)
                return;
        }
    }
    double t[2][200];
    char *const argv_p[] = {(char *)plain, NULL}, *const argv_l[] = {(char *)linked, NULL};
    for (int i = 0; i < 200; i++) {
        run_command(argv_p, NULL, &t[0][i]);
        run_command(argv_l, NULL, &t[1][i]);
    }
    double mp = median(t[0], 200) * 1e3, ml = median(t[1], 200) * 1e3;
    snprintf(lat.startup, sizeof lat.startup,
             "| Command | Median [ms] (200 runs, hyperfine not installed) |\n|:---|---:|\n"
             "| `%s` | %.2f |\n| `%s` | %.2f |\n",
             plain, mp, linked, ml);
}

static void measure_latency(const char *self)
{
    char cmd[512], text[2048] = "";
    snprintf(cmd, sizeof cmd, "%s%s --latency", self, quick ? " --quick" : "");
    FILE *p = popen(cmd, "r");
    if (p) {
        size_t len = fread(text, 1, sizeof text - 1, p);
        text[len] = '\0';
        pclose(p);
    }
    lat.first_l2 = latency_value(text, "first_l2");
    lat.cold_l2 = latency_value(text, "cold_l2");
    lat.cold_dense = latency_value(text, "cold_dense");
    lat.cold1_l2 = latency_value(text, "cold1_l2");
    lat.cold1_dense = latency_value(text, "cold1_dense");
    lat.hit_l2 = latency_value(text, "hit_l2");
    lat.hit_dense = latency_value(text, "hit_dense");
    lat.hits_were_hits = latency_value(text, "hits_were_hits") == 1;

    /* The same functions as .nest files of their own, for nestc. */
    nest_function *fns[2] = {load_function("samples/l2.nest", "l2"),
                             load_function(dense_source(), "dense")};
    const char *names[2] = {"l2", "dense"};
    int runs = quick ? 3 : 7;
    for (int i = 0; i < 2; i++) {
        char nest_path[256], c_path[256], so_path[256];
        snprintf(nest_path, sizeof nest_path, WORKDIR "/%s.nest", names[i]);
        snprintf(c_path, sizeof c_path, WORKDIR "/%s.c", names[i]);
        snprintf(so_path, sizeof so_path, WORKDIR "/%s.so", names[i]);
        lat.aot[i] = lat.clang[i] = lat.gcc[i] = -1;
        char *text_form = fns[i] ? nest_print(&fns[i], 1) : NULL;
        FILE *f = text_form ? fopen(nest_path, "w") : NULL;
        if (!f)
            continue;
        fputs(text_form, f);
        fclose(f);
        nest_string_free(text_form);

        char *const aot[] = {NESTC, "-o", so_path, nest_path, NULL};
        lat.aot[i] = time_command(aot, NULL, runs);
        char *const emit[] = {NESTC, "--emit=c", nest_path, NULL};
        if (run_command(emit, c_path, NULL) != 0)
            continue;
        /* the JIT's flags (runtime/jit.c), and nestc -o's (runtime/aot.c) with gcc */
        char *const clang[] = {"clang-14", "-O3", "-march=native", "-mtune=generic", "-std=c99",
                               "-fPIC", "-fopenmp-simd", "-fopenmp", "-fno-math-errno",
                               "-fveclib=libmvec", "-shared", "-o", so_path, c_path, "-lm", NULL};
        char *const gcc[] = {"gcc", "-std=c99", "-shared", "-fPIC", "-O3", "-march=native",
                             "-fopenmp-simd", "-fopenmp", "-o", so_path, c_path, "-lm", NULL};
        lat.clang[i] = time_command(clang, NULL, runs);
        lat.gcc[i] = time_command(gcc, NULL, runs);
    }
    measure_startup();
}

/* ---------------------------------------------------------------------------------------------
 * The report
 * ------------------------------------------------------------------------------------------- */

/* The three load averages of /proc/loadavg. */
static const char *load_average(void)
{
    static char buf[64];
    command_line("cut -d' ' -f1-3 /proc/loadavg", buf, sizeof buf);
    return buf;
}

static char blas_note[512] = "not chosen";

static void print_machine(peer *py)
{
    char model[256] = "?", date[64], clang[256], gcc[256], commit[64], dirty[8], thp[128] = "?";
    char family[32] = "?", cpu_model[32] = "?";
    command_line("lscpu | sed -n 's/^Model name: *//p' | head -1", model, sizeof model);
    command_line("lscpu | sed -n 's/^CPU family: *//p' | head -1", family, sizeof family);
    command_line("lscpu | sed -n 's/^Model: *//p' | head -1", cpu_model, sizeof cpu_model);
    command_line("date -u '+%Y-%m-%d %H:%M UTC'", date, sizeof date);
    command_line("clang-14 --version | head -1", clang, sizeof clang);
    command_line("gcc --version | head -1", gcc, sizeof gcc);
    command_line("git rev-parse --short HEAD 2>/dev/null", commit, sizeof commit);
    command_line("git status --porcelain --untracked-files=no 2>/dev/null | head -1 | wc -l",
                 dirty, sizeof dirty);
    command_line("cat /sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof thp);
    const char *info = peer_cmd(py, "info");
    out("## Machine and versions\n\n");
    out("- CPU: %s (family %s, model %s; %s), %ld cores online\n", model, family, cpu_model,
        blascore_best() && strcmp(blascore_best(), "Haswell") != 0 ? "AVX-512" : "no AVX-512",
        sysconf(_SC_NPROCESSORS_ONLN));
    out("- date: %s; nest commit %s%s\n", date, commit,
        strcmp(dirty, "0") != 0 ? " (with uncommitted changes in the work tree)" : "");
    out("- %s; %s; Eigen %s; %s (%s)\n", clang, gcc, eg_version(), info, peer_python());
    out("- OpenBLAS (numpy's dot and matmul): %s\n", blas_note);
    out("- transparent huge pages: %s\n", thp);
    out("- load average at the start: %s (the machine is shared: other work runs meanwhile)\n\n",
        load_average());
}

/* How many times faster contender a is than the faster (by median) of b and b2 (b2 may be
 * C_COUNT: none): the median over the rounds of the ratio of their times in the same round, so
 * that both sides of each ratio ran under the same load. NAN when either was not measured. */
static double speedup(workload w, int si, contender a, contender b, contender b2)
{
    const results *r = &res[w];
    if (b2 < C_COUNT && r->gbs[si][b2] > r->gbs[si][b])
        b = b2;
    if (!(r->gbs[si][a] > 0) || !(r->gbs[si][b] > 0))
        return NAN;
    double q[MAX_ROUNDS];
    for (int i = 0; i < r->rounds[si]; i++)
        q[i] = r->t[si][b][i] / r->t[si][a][i];
    return median(q, r->rounds[si]);
}

static void print_workload(workload w)
{
    out("### %s\n\n", wl_title[w]);
    out("GB/s of data touched (higher is better):\n\n| n |");
    for (int c = 0; c < C_COUNT; c++)
        out(" %s |", c_title[c]);
    out("\n|---|");
    for (int c = 0; c < C_COUNT; c++)
        out("---:|");
    out("\n");
    for (int si = 0; si < NSIZES; si++) {
        out("| %s |", size_name(sizes[si]));
        for (int c = 0; c < C_COUNT; c++)
            out(" %s%s |", num(res[w].gbs[si][c]), res[w].mismatch[si][c] ? " (differs)" : "");
        out("\n");
    }

    out("\nSpeed ratios, median of the per-round ratios (above 1: nest is faster):\n\n"
        "| n | nest 1t / C 1t | nest / best C | nest / Eigen | nest 1t / Eigen | "
        "nest / best numpy | nest / best numexpr |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (int si = 0; si < NSIZES; si++)
        out("| %s | %s | %s | %s | %s | %s | %s |\n", size_name(sizes[si]),
            ratio(speedup(w, si, C_NEST1, C_HF1, C_COUNT)),
            ratio(speedup(w, si, C_NEST, C_HF1, C_HF2)),
            ratio(speedup(w, si, C_NEST, C_EIGEN, C_COUNT)),
            ratio(speedup(w, si, C_NEST1, C_EIGEN, C_COUNT)),
            ratio(speedup(w, si, C_NEST, C_NUMPY, C_NUMPY_OUT)),
            ratio(speedup(w, si, C_NEST, C_NE1, C_NE2)));

    bool any = false;
    for (int si = 0; si < NSIZES; si++)
        for (int c = 0; c < C_COUNT; c++)
            any = any || res[w].mem[si][c] >= 0;
    if (any) {
        out("\nExtra memory beyond inputs and outputs, peak of one call:\n\n| n |");
        for (int c = 0; c < C_COUNT; c++)
            out(" %s |", c_title[c]);
        out("\n|---|");
        for (int c = 0; c < C_COUNT; c++)
            out("---:|");
        out("\n");
        for (int si = 0; si < NSIZES; si++) {
            out("| %s |", size_name(sizes[si]));
            for (int c = 0; c < C_COUNT; c++)
                out(" %s |", res[w].mem[si][c] < 0 && !c_active((contender)c, sizes[si])
                                 ? "-"
                                 : bytes_name(res[w].mem[si][c]));
            out("\n");
        }
    }
    out("\n");
}

static const char *ms(double v)
{
    static char buf[16][24];
    static int k;
    char *s = buf[k++ % 16];
    if (v < 0)
        snprintf(s, 24, "failed");
    else if (v < 1)
        snprintf(s, 24, "%.3f", v);
    else
        snprintf(s, 24, "%.1f", v);
    return s;
}

static void print_latency(void)
{
    out("## Compile latency\n\n");
    out("Milliseconds, median (source: samples/l2.nest `l2` and %s `dense`):\n\n",
        dense_source());
    out("| path | l2 | dense |\n|---|---:|---:|\n");
    out("| JIT, first compile in a process (loads libnest_jit.so), cache off | %s | |\n",
        ms(lat.first_l2));
    out("| JIT cold (cache off, JIT loaded) | %s | %s |\n", ms(lat.cold_l2), ms(lat.cold_dense));
    out("| JIT cold, openmp = 0 | %s | %s |\n", ms(lat.cold1_l2), ms(lat.cold1_dense));
    out("| JIT cache hit (JIT loaded)%s | %s | %s |\n",
        lat.hits_were_hits ? "" : " (NOT all hits)", ms(lat.hit_l2), ms(lat.hit_dense));
    out("| AOT: `nestc -o x.so` (cc, a process) | %s | %s |\n", ms(lat.aot[0]), ms(lat.aot[1]));
    out("| `nestc --emit=c` output, `clang-14` with the JIT's flags -> .so | %s | %s |\n",
        ms(lat.clang[0]), ms(lat.clang[1]));
    out("| `nestc --emit=c` output, `gcc` with `nestc -o`'s flags -> .so | %s | %s |\n\n",
        ms(lat.gcc[0]), ms(lat.gcc[1]));
    out("Start time of a trivial program linked with libnest.so (no JIT) against one without "
        "it:\n\n%s\n",
        lat.startup);
}

static const char *verdict(bool ok)
{
    return ok ? "met" : "**not met**";
}

static void print_targets(bool with_mem, bool with_latency)
{
    out("## Targets\n\n| target | measured | |\n|---|---|---|\n");
    for (int w = 0; w < W_COUNT; w++)
        for (int si = 2; si < NSIZES && measured[w]; si++) {
            double r1 = speedup((workload)w, si, C_NEST1, C_HF1, C_COUNT);
            double r = speedup((workload)w, si, C_NEST, C_HF1, C_HF2);
            out("| %s %s: within 10%% of hand-fused C | nest 1t / C 1t %.2f, nest / best C "
                "%.2f | %s |\n",
                wl_name[w], size_name(sizes[si]), r1, r, verdict(r1 >= 0.9 && r >= 0.9));
        }
    for (int si = 0; si < NSIZES && measured[W_L2]; si++) {
        double np = speedup(W_L2, si, C_NEST, C_NUMPY, C_NUMPY_OUT);
        double nx = speedup(W_L2, si, C_NEST, C_NE1, C_NE2);
        double eg = speedup(W_L2, si, C_NEST, C_EIGEN, C_COUNT);
        out("| l2 %s: >= 3x numpy, ahead of numexpr and Eigen | %.2fx numpy, %.2fx numexpr, "
            "%.2fx Eigen | %s |\n",
            size_name(sizes[si]), np, nx, eg, verdict(np >= 3 && nx > 1 && eg > 1));
    }
    workload ws[2] = {W_CHAIN, W_BADD};
    for (int i = 0; i < 2; i++)
        for (int si = 0; si < NSIZES && measured[ws[i]]; si++) {
            double np = speedup(ws[i], si, C_NEST, C_NUMPY, C_NUMPY_OUT);
            double nx = speedup(ws[i], si, C_NEST, C_NE1, C_NE2);
            out("| %s %s: >= 1.8x numpy, ahead of numexpr | %.2fx numpy, %.2fx numexpr | %s |\n",
                wl_name[ws[i]], size_name(sizes[si]), np, nx, verdict(np >= 1.8 && nx > 1));
        }
    for (int i = 0; i < 2 && with_mem; i++) {
        workload w = i == 0 ? W_L2 : W_CHAIN;
        double worst = 0;
        for (int si = 0; si < NSIZES && measured[w]; si++)
            for (int c = C_NEST; c <= C_NEST1; c++)
                worst = fmax(worst, res[w].mem[si][c]);
        /* a page or two of stack is not memory for data */
        if (measured[w])
            out("| %s: nest uses no memory beyond inputs and outputs | at most %s | %s |\n",
                wl_name[w], bytes_name(worst), verdict(worst <= 8192));
    }
    if (with_latency) {
        out("| JIT cold compile of l2 < 50 ms | %s ms | %s |\n", ms(lat.cold_l2),
            verdict(lat.cold_l2 >= 0 && lat.cold_l2 < 50));
        out("| JIT cold compile of dense < 250 ms | %s ms | %s |\n", ms(lat.cold_dense),
            verdict(lat.cold_dense >= 0 && lat.cold_dense < 250));
        out("| JIT cache hit < 1 ms | l2 %s ms, dense %s ms | %s |\n", ms(lat.hit_l2),
            ms(lat.hit_dense),
            verdict(lat.hits_were_hits && lat.hit_l2 >= 0 && lat.hit_l2 < 1 && lat.hit_dense < 1));
    }
    out("\n");
}

/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const char *md = WORKDIR "/bench.md";
    bool with_mem = true, with_latency = true;
    const char *only = NULL; /* one workload, for trying things out */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mem") == 0 && i + 3 < argc)
            return mem_main(argv[i + 1], argv[i + 2], argv[i + 3]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--latency") == 0)
            return latency_main();
        else if (strcmp(argv[i], "--no-mem") == 0)
            with_mem = false;
        else if (strcmp(argv[i], "--no-latency") == 0)
            with_latency = false;
        else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            md = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else
            die("usage: bench [-o FILE.md] [--quick] [--only WORKLOAD] [--no-mem] [--no-latency]");
    }
    mkdir("build", 0755);
    mkdir(WORKDIR, 0755);
    report = fopen(md, "w");
    if (!report)
        die("cannot write %s: %s", md, strerror(errno));
    const char *self = argv[0];

    blascore_force(blas_note, sizeof blas_note); /* before any peer loads OpenBLAS */
    peer py;
    peer_start(&py, PEERS, "--serve");
    print_machine(&py);
    double t0 = now_s();
    for (int w = 0; w < W_COUNT; w++)
        for (int si = 0; si < NSIZES; si++) {
            if (only && strcmp(only, wl_name[w]) != 0)
                continue;
            fprintf(stderr, "bench: %s %s\n", wl_name[w], size_name(sizes[si]));
            measure(&py, (workload)w, si);
        }
    peer_stop(&py);
    for (int w = 0; w < W_COUNT; w++)
        for (int si = 0; si < NSIZES; si++) {
            for (int c = 0; c < C_COUNT; c++)
                res[w].mem[si][c] = -1;
            if (with_mem && (!only || strcmp(only, wl_name[w]) == 0)) {
                fprintf(stderr, "bench: memory %s %s\n", wl_name[w], size_name(sizes[si]));
                measure_memory(self, (workload)w, si);
            }
        }
    if (with_latency) {
        fprintf(stderr, "bench: compile latency\n");
        measure_latency(self);
    }

    out("## Throughput\n\n");
    for (int w = 0; w < W_COUNT; w++)
        if (measured[w])
            print_workload((workload)w);
    if (notes()[0])
        out("Notes from this run (\"differs\": the result's checksum is off the exact one, "
            "computed in double, by more than 1e-2 relative):\n\n%s\n",
            notes());
    if (with_latency)
        print_latency();
    print_targets(with_mem, with_latency);
    out("Run time of the benchmark: %.0f s; load average at the end: %s.\n", now_s() - t0,
        load_average());
    fclose(report);
    fprintf(stderr, "bench: wrote %s\n", md);
    return 0;
}
