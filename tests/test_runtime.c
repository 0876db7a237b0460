/* test_runtime.c - the runtime: the JIT shim, rt_jit through the compile cache, the cache's
 * file handling, and rt_build_so. Every test runs with a fresh cache directory of its own. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "nest.h"
#include "rt.h"

/* ---- fixture: a temporary directory, XDG_CACHE_HOME inside it ---- */

typedef struct fixture {
    char root[64];   /* mkdtemp */
    char cache[128]; /* root/xdg/nest: what rt_cache_dir() gives */
} fixture;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    chmod(path, 0700);
    return remove(path);
}

static void rm_rf(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    const char *tmpdir = getenv("TMPDIR");
    snprintf(fx->root, sizeof fx->root, "%s/nest-test-XXXXXX",
             tmpdir && tmpdir[0] == '/' && strlen(tmpdir) < 40 ? tmpdir : "/tmp");
    if (!mkdtemp(fx->root)) {
        free(fx);
        return -1;
    }
    char xdg[96];
    snprintf(xdg, sizeof xdg, "%s/xdg", fx->root);
    snprintf(fx->cache, sizeof fx->cache, "%s/nest", xdg);
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("NEST_CACHE");
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    rm_rf(fx->root);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("NEST_CACHE");
    free(fx);
    return 0;
}

/* ---- helpers ---- */

static const rt_opts O3 = {.opt_level = 3, .march = "native", .openmp = false, .cache = true};

/* Captures what the process writes to stdout and stderr between begin and end. */
typedef struct capture {
    int saved_out, saved_err;
    FILE *file;
} capture;

static void capture_begin(capture *c)
{
    fflush(stdout);
    fflush(stderr);
    c->file = tmpfile();
    assert_non_null(c->file);
    c->saved_out = dup(1);
    c->saved_err = dup(2);
    dup2(fileno(c->file), 1);
    dup2(fileno(c->file), 2);
}

/* Restores the streams; returns the number of bytes written meanwhile. */
static long capture_end(capture *c)
{
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, 1);
    dup2(c->saved_err, 2);
    close(c->saved_out);
    close(c->saved_err);
    fseek(c->file, 0, SEEK_END);
    long n = ftell(c->file);
    fclose(c->file);
    return n;
}

/* rt_jit that must succeed; prints the error if not. */
static rt_code *jit(const char *src, const rt_opts *o, bool *hit)
{
    rt_code *c = NULL;
    char *err = NULL;
    bool h = false;
    int st = rt_jit(src, strlen(src), o, &c, &h, &err);
    if (st != NEST_OK)
        print_error("rt_jit: %d (%s): %s\n", st, nest_status_str(st), err ? err : "(no message)");
    assert_int_equal(st, NEST_OK);
    assert_non_null(c);
    assert_null(err);
    if (hit)
        *hit = h;
    return c;
}

/* The one cache entry of dir (its path, malloc'd); fails unless there is exactly one. */
static char *only_entry(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s/*.obj 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512], *path = NULL;
    int n = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        free(path);
        path = strdup(line);
        n++;
    }
    pclose(p);
    assert_int_equal(n, 1);
    return path;
}

static int count_files(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls -A %s 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = -1;
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

#define SYM(c, type, name) ((type)(uintptr_t)rt_code_symbol((c), (name)))

/* ---- the shim ---- */

static void shim_loads(void **state)
{
    (void)state;
    char *err = NULL;
    const rt_shim_api *api = rt_shim(&err);
    assert_non_null(api);
    assert_null(err);
    assert_int_equal(api->abi(), RT_SHIM_ABI);
    assert_true(strlen(api->host()) > 0);
    assert_ptr_equal(rt_shim(NULL), api); /* loaded once */
}

/* The loader in a fresh process (it loads once per process): this program again, with
 * NEST_TEST_LOADER_CHILD set, runs loader_child and reports through its exit status. */
static int loader_child(void)
{
    char *err = NULL;
    const rt_shim_api *api = rt_shim(&err);
    const char *want = getenv("NEST_TEST_LOADER_WANT"); /* "ok" or a part of the message */
    int rc;
    if (strcmp(want, "ok") == 0)
        rc = api && !err && api->abi() == RT_SHIM_ABI ? 0 : 1;
    else
        rc = !api && err && strstr(err, want) && strstr(err, getenv("NEST_JIT_LIB")) ? 0 : 1;
    if (rc)
        fprintf(stderr, "loader child: %s\n", err ? err : "(no message)");
    free(err);
    return rc;
}

static int run_loader_child(const char *lib, const char *want)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("NEST_TEST_LOADER_CHILD", "1", 1);
        setenv("NEST_TEST_LOADER_WANT", want, 1);
        setenv("NEST_JIT_LIB", lib, 1);
        execl("/proc/self/exe", "test_runtime", (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void loader_env(void **state)
{
    (void)state;
    /* where this process found the shim: any of its functions names the file */
    const rt_shim_api *api = rt_shim(NULL);
    assert_non_null(api);
    void *fn;
    memcpy(&fn, &api->abi, sizeof fn);
    Dl_info info;
    assert_true(dladdr(fn, &info) && info.dli_fname);
    char *shim = strdup(info.dli_fname);
    assert_int_equal(run_loader_child(shim, "ok"), 0);
    /* NEST_JIT_LIB is the only place looked at when set */
    assert_int_equal(run_loader_child("/nonexistent/libnest_jit.so", "not found"), 0);
    /* a library that is not the shim */
    void *m = dlsym(RTLD_DEFAULT, "cos");
    assert_true(m && dladdr(m, &info) && info.dli_fname);
    assert_int_equal(run_loader_child(info.dli_fname, "no nest_jit_shim entry point"), 0);
    free(shim);
}

/* ---- rt_jit: compiled code computes the right values ---- */

static const char *ADD1 = "int add1(const float *x, float *y, long n)\n"
                          "{\n"
                          "    for (long i = 0; i < n; i++)\n"
                          "        y[i] = x[i] + 1.0f;\n"
                          "    return (int)n;\n"
                          "}\n"
                          "int nest_test_data = 41;\n";

static void jit_add1(void **state)
{
    (void)state;
    bool hit = true;
    rt_code *c = jit(ADD1, &O3, &hit);
    assert_false(hit);
    int (*add1)(const float *, float *, long) = SYM(c, int (*)(const float *, float *, long), "add1");
    assert_non_null(add1);
    float x[37], y[37];
    for (int i = 0; i < 37; i++)
        x[i] = (float)i * 0.5f;
    assert_int_equal(add1(x, y, 37), 37);
    for (int i = 0; i < 37; i++)
        assert_true(y[i] == (float)i * 0.5f + 1.0f);
    int *data = SYM(c, int *, "nest_test_data");
    assert_non_null(data);
    assert_int_equal(*data, 41);
    assert_null(rt_code_symbol(c, "no_such_symbol"));
    assert_null(rt_code_symbol(c, "add"));
    rt_code_free(c);
    rt_code_free(NULL);
}

static void jit_opt_levels(void **state)
{
    (void)state;
    for (int level = 0; level <= 3; level++) {
        rt_opts o = O3;
        o.opt_level = level;
        o.march = level == 2 ? "x86-64-v2" : "native";
        rt_code *c = jit(ADD1, &o, NULL);
        int (*add1)(const float *, float *, long) =
            SYM(c, int (*)(const float *, float *, long), "add1");
        float x[3] = {1, 2, 3}, y[3];
        assert_int_equal(add1(x, y, 3), 3);
        assert_true(y[0] == 2.0f && y[1] == 3.0f && y[2] == 4.0f);
        rt_code_free(c);
    }
}

/* A vectorized reduction: the sum of i^2 for i < n is n(n-1)(2n-1)/6, exact in doubles. */
static const char *SUMSQ = "double sumsq(const double *x, long n)\n"
                           "{\n"
                           "    double s = 0.0;\n"
                           "    #pragma omp simd reduction(+:s)\n"
                           "    for (long i = 0; i < n; i++)\n"
                           "        s += x[i] * x[i];\n"
                           "    return s;\n"
                           "}\n"
                           "float l2(const float *x, const float *y, long n)\n"
                           "{\n"
                           "    float acc = 0.0f;\n"
                           "    #pragma omp simd reduction(+:acc)\n"
                           "    for (long i = 0; i < n; i++) {\n"
                           "        float d = x[i] - y[i];\n"
                           "        acc += d * d;\n"
                           "    }\n"
                           "    return acc;\n"
                           "}\n";

static void jit_simd_reduction(void **state)
{
    (void)state;
    rt_code *c = jit(SUMSQ, &O3, NULL);
    double (*sumsq)(const double *, long) = SYM(c, double (*)(const double *, long), "sumsq");
    float (*l2)(const float *, const float *, long) =
        SYM(c, float (*)(const float *, const float *, long), "l2");
    assert_non_null(sumsq);
    assert_non_null(l2);
    enum { N = 1001 };
    static double x[N];
    static float a[N], b[N];
    for (int i = 0; i < N; i++) {
        x[i] = i;
        a[i] = (float)(i % 7) + 0.5f;
        b[i] = (float)(i % 7) - 0.5f; /* every difference is 1 */
    }
    for (long n = 0; n <= N; n += 77) {
        double want = (double)n * (double)(n - 1) * (double)(2 * n - 1) / 6.0;
        assert_true(sumsq(x, n) == (n ? want : 0.0));
        assert_true(l2(a, b, n) == (float)n); /* integers below 2^24: exact in any order */
    }
    rt_code_free(c);
}

/* expf and logf come from the process (libm) or libmvec when the loop is vectorized. */
static const char *EXPF = "#include <math.h>\n"
                          "void ex(const float *restrict x, float *restrict y, long n)\n"
                          "{\n"
                          "    for (long i = 0; i < n; i++)\n"
                          "        y[i] = expf(x[i]) + logf(x[i] + 2.0f);\n"
                          "}\n";

static void jit_expf(void **state)
{
    (void)state;
    rt_code *c = jit(EXPF, &O3, NULL);
    void (*ex)(const float *, float *, long) = SYM(c, void (*)(const float *, float *, long), "ex");
    assert_non_null(ex);
    enum { N = 1000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i / 100.0f - 1.5f; /* -1.5 .. 8.49 */
    ex(x, y, N);
    for (int i = 0; i < N; i++) {
        double want = exp((double)x[i]) + log((double)x[i] + 2.0);
        assert_true(fabs(y[i] - want) <= 4e-6 * fabs(want) + 1e-6);
    }
    /* closed forms: x = -1 gives 1/e + 0, x = 0 gives 1 + ln 2 */
    float x2[2] = {-1.0f, 0.0f}, y2[2];
    ex(x2, y2, 2);
    assert_true(fabs(y2[0] - 0.36787944117144233) < 1e-6);
    assert_true(fabs(y2[1] - 1.6931471805599453) < 1e-6);
    rt_code_free(c);
}

/* A row loop that stores a reduction and reads it back: LLVM 14's loop vectorizer hoisted a
 * load of an interleave group above the store to the same address (llvm/llvm-project#63602)
 * and computed m[3] = 3 instead of 4, unless the runtime turns interleaved accesses off. */
static const char *ROWS =
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "int rows(const int64_t *restrict x, int64_t *restrict m, float *restrict r)\n"
    "{\n"
    "    for (int64_t i0 = 0; i0 < 4; i0++) {\n"
    "        for (int64_t i2 = 0; i2 < 3; i2++)\n"
    "            m[i0 * 3 + i2] = INT64_MIN;\n"
    "        for (int64_t i1 = 0; i1 < 2; i1++)\n"
    "            for (int64_t i2 = 0; i2 < 3; i2++)\n"
    "                m[i0 * 3 + i2] = x[i0 * 6 + i1 * 3 + i2] > m[i0 * 3 + i2]\n"
    "                                     ? x[i0 * 6 + i1 * 3 + i2] : m[i0 * 3 + i2];\n"
    "        float acc = 0.0f;\n"
    "        for (int64_t i1 = 0; i1 < 3; i1++) {\n"
    "            float v = (float)m[i0 * 3 + i1];\n"
    "            acc += expf(logf(v > 0.5f ? v : 0.5f));\n"
    "        }\n"
    "        r[i0] = acc;\n"
    "    }\n"
    "    return 0;\n"
    "}\n";

static void jit_rows_store_then_load(void **state)
{
    (void)state;
    const char *marchs[] = {"native", "x86-64-v3"};
    for (int k = 0; k < 2; k++) {
        rt_opts o = O3;
        o.march = marchs[k];
        rt_code *c = jit(ROWS, &o, NULL);
        int (*rows)(const int64_t *, int64_t *, float *) =
            SYM(c, int (*)(const int64_t *, int64_t *, float *), "rows");
        assert_non_null(rows);
        int64_t x[24], m[12];
        float r[4];
        for (int i = 0; i < 24; i++)
            x[i] = (7 * i) % 11 - 5;
        assert_int_equal(rows(x, m, r), 0);
        for (int i0 = 0; i0 < 4; i0++) {
            double want_r = 0;
            for (int i2 = 0; i2 < 3; i2++) {
                int64_t a = x[i0 * 6 + i2], b = x[i0 * 6 + 3 + i2], want = a > b ? a : b;
                if (m[i0 * 3 + i2] != want)
                    print_error("%s: m[%d] = %lld, want %lld\n", marchs[k], i0 * 3 + i2,
                                (long long)m[i0 * 3 + i2], (long long)want);
                assert_int_equal(m[i0 * 3 + i2], want);
                want_r += want > 0 ? (double)want : 0.5;
            }
            assert_true(fabs(r[i0] - want_r) < 1e-5 * want_r);
        }
        rt_code_free(c);
    }
}

/* OpenMP: the loop runs on a team of libomp threads. */
static const char *PARALLEL = "#include <omp.h>\n"
                              "long tri(long *y, long n)\n"
                              "{\n"
                              "    long s = 0;\n"
                              "    #pragma omp parallel for reduction(+:s) schedule(static)\n"
                              "    for (long i = 0; i < n; i++) {\n"
                              "        y[i] = 2 * i;\n"
                              "        s += i;\n"
                              "    }\n"
                              "    return s;\n"
                              "}\n"
                              "int team(void)\n"
                              "{\n"
                              "    int n = 0;\n"
                              "    #pragma omp parallel\n"
                              "    {\n"
                              "        #pragma omp single\n"
                              "        n = omp_get_num_threads();\n"
                              "    }\n"
                              "    return n;\n"
                              "}\n";

static void jit_openmp(void **state)
{
    (void)state;
    rt_opts o = O3;
    o.openmp = true;
    rt_code *c = jit(PARALLEL, &o, NULL);
    long (*tri)(long *, long) = SYM(c, long (*)(long *, long), "tri");
    int (*team)(void) = SYM(c, int (*)(void), "team");
    assert_non_null(tri);
    assert_non_null(team);
    enum { N = 100000 };
    long *y = calloc(N, sizeof *y);
    assert_non_null(y);
    assert_int_equal(tri(y, N), (long)N * (N - 1) / 2);
    for (long i = 0; i < N; i++)
        assert_int_equal(y[i], 2 * i);
    free(y);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int t = team();
    assert_true(t >= 1);
    if (cpus > 1 && !getenv("OMP_NUM_THREADS"))
        assert_true(t > 1);
    rt_code_free(c);
}

/* Threads compile, load, call and free at the same time (each with its own source). */
static void *jit_thread(void *arg)
{
    long id = (long)(intptr_t)arg;
    for (int round = 0; round < 3; round++) {
        char src[256], name[32];
        snprintf(name, sizeof name, "tri%ld", id);
        snprintf(src, sizeof src,
                 "long %s(long n) { long s = 0; for (long i = 0; i < n; i++) s += %d * i; "
                 "return s; }\n",
                 name, round + 1);
        rt_code *c = NULL;
        if (rt_jit(src, strlen(src), &O3, &c, NULL, NULL) != NEST_OK)
            return "rt_jit failed";
        long (*tri)(long) = SYM(c, long (*)(long), name);
        bool ok = tri && tri(100) == (round + 1) * 4950L;
        rt_code_free(c);
        if (!ok)
            return "wrong result";
    }
    return NULL;
}

static void jit_threads(void **state)
{
    (void)state;
    enum { T = 4 };
    pthread_t th[T];
    for (long i = 0; i < T; i++)
        assert_int_equal(pthread_create(&th[i], NULL, jit_thread, (void *)(intptr_t)i), 0);
    for (int i = 0; i < T; i++) {
        void *why;
        assert_int_equal(pthread_join(th[i], &why), 0);
        if (why)
            print_error("thread %d: %s\n", i, (const char *)why);
        assert_null(why);
    }
}

/* ---- rt_jit: errors are returned, never printed ---- */

static void jit_syntax_error(void **state)
{
    (void)state;
    const char *src = "int f(int x)\n"
                      "{\n"
                      "    return x +;\n"
                      "}\n";
    rt_code *c = NULL;
    char *err = NULL;
    capture cap;
    capture_begin(&cap);
    int st = rt_jit(src, strlen(src), &O3, &c, NULL, &err);
    long printed = capture_end(&cap);
    assert_int_equal(st, NEST_ERR_COMPILE);
    assert_null(c);
    assert_non_null(err);
    assert_non_null(strstr(err, "nest.c:3:15: error:"));
    assert_null(strstr(err, "generated")); /* no "1 error generated." */
    assert_int_equal(printed, 0);
    free(err);
    /* nothing of a failed compile is cached */
    fixture *fx = *state;
    assert_true(count_files(fx->cache) <= 0);
}

static void jit_unresolved_symbol(void **state)
{
    (void)state;
    const char *src = "void nest_test_missing(void);\n"
                      "void f(void) { nest_test_missing(); }\n";
    rt_code *c = NULL;
    char *err = NULL;
    capture cap;
    capture_begin(&cap);
    int st = rt_jit(src, strlen(src), &O3, &c, NULL, &err);
    long printed = capture_end(&cap);
    assert_int_equal(st, NEST_ERR_COMPILE);
    assert_null(c);
    assert_non_null(err);
    assert_non_null(strstr(err, "nest_test_missing"));
    assert_int_equal(printed, 0);
    free(err);
}

static void jit_bad_options(void **state)
{
    (void)state;
    rt_code *c = NULL;
    char *err = NULL;
    rt_opts o = O3;
    o.opt_level = 7;
    assert_int_equal(rt_jit(ADD1, strlen(ADD1), &o, &c, NULL, &err), NEST_ERR_ARG);
    assert_non_null(strstr(err, "7"));
    free(err);
    o = O3;
    o.march = "native -fplugin=x.so";
    assert_int_equal(rt_jit(ADD1, strlen(ADD1), &o, &c, NULL, &err), NEST_ERR_ARG);
    assert_non_null(strstr(err, "-march"));
    free(err);
    o.march = "nosuchcpu";
    capture cap;
    capture_begin(&cap);
    int st = rt_jit(ADD1, strlen(ADD1), &o, &c, NULL, &err);
    long printed = capture_end(&cap);
    assert_int_equal(st, NEST_ERR_COMPILE);
    assert_non_null(strstr(err, "nosuchcpu"));
    assert_int_equal(printed, 0);
    free(err);
    assert_null(c);
    assert_int_equal(rt_jit(ADD1, strlen(ADD1), NULL, &c, NULL, NULL), NEST_ERR_ARG);
}

/* ---- the cache ---- */

static void call_add1(rt_code *c, float base)
{
    int (*add1)(const float *, float *, long) = SYM(c, int (*)(const float *, float *, long), "add1");
    assert_non_null(add1);
    float x[4] = {base, base + 1, base + 2, base + 3}, y[4];
    assert_int_equal(add1(x, y, 4), 4);
    for (int i = 0; i < 4; i++)
        assert_true(y[i] == x[i] + 1.0f);
}

static void cache_hit(void **state)
{
    fixture *fx = *state;
    char *dir = rt_cache_dir();
    assert_string_equal(dir, fx->cache);
    free(dir);

    bool hit;
    rt_code *a = jit(ADD1, &O3, &hit);
    assert_false(hit);
    char *entry = only_entry(fx->cache);
    free(entry);
    rt_code *b = jit(ADD1, &O3, &hit);
    assert_true(hit);
    /* two live copies of the same code, each with its own symbols */
    assert_ptr_not_equal(rt_code_symbol(a, "add1"), rt_code_symbol(b, "add1"));
    call_add1(a, 1.0f);
    call_add1(b, 5.0f);
    rt_code_free(a);
    call_add1(b, -3.0f); /* freeing one leaves the other */
    rt_code_free(b);

    /* other options are another entry */
    rt_opts o = O3;
    o.opt_level = 1;
    rt_code *c = jit(ADD1, &o, &hit);
    assert_false(hit);
    call_add1(c, 2.0f);
    rt_code_free(c);
    assert_int_equal(count_files(fx->cache), 2);
    /* cache off in the options: neither read nor written */
    o.opt_level = 2;
    o.cache = false;
    c = jit(ADD1, &o, &hit);
    assert_false(hit);
    rt_code_free(c);
    assert_int_equal(count_files(fx->cache), 2);
}

/* Damages the entry with f, then checks: a miss that compiles again, then a hit again. */
static void damaged_entry_is_rebuilt(fixture *fx, void (*damage)(const char *path))
{
    bool hit;
    rt_code_free(jit(SUMSQ, &O3, &hit));
    assert_false(hit);
    char *path = only_entry(fx->cache);
    damage(path);
    rt_code *c = jit(SUMSQ, &O3, &hit);
    assert_false(hit);
    double (*sumsq)(const double *, long) = SYM(c, double (*)(const double *, long), "sumsq");
    double x[3] = {1, 2, 3};
    assert_true(sumsq(x, 3) == 14.0);
    rt_code_free(c);
    c = jit(SUMSQ, &O3, &hit);
    assert_true(hit);
    sumsq = SYM(c, double (*)(const double *, long), "sumsq");
    assert_true(sumsq(x, 3) == 14.0);
    rt_code_free(c);
    free(path);
}

static void truncate_half(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
}

static void flip_last_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    int ch = fgetc(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    fputc(ch ^ 0x10, f);
    fclose(f);
}

static void cache_truncated(void **state)
{
    damaged_entry_is_rebuilt(*state, truncate_half);
}

static void cache_corrupt_byte(void **state)
{
    damaged_entry_is_rebuilt(*state, flip_last_byte);
}

static void cache_get_put(void **state)
{
    fixture *fx = *state;
    const char key[] = "key one\0with a NUL", other[] = "key two\0with a NUL";
    const unsigned char obj[] = {0x7f, 'E', 'L', 'F', 1, 2, 3, 0, 4, 5};
    size_t n = 99;
    assert_null(rt_cache_get(fx->cache, key, sizeof key, &n)); /* no directory yet */
    assert_int_equal(n, 0);
    rt_cache_put(fx->cache, key, sizeof key, obj, sizeof obj); /* creates it */
    struct stat st;
    assert_int_equal(stat(fx->cache, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    unsigned char *got = rt_cache_get(fx->cache, key, sizeof key, &n);
    assert_non_null(got);
    assert_int_equal(n, sizeof obj);
    assert_memory_equal(got, obj, sizeof obj);
    free(got);
    assert_null(rt_cache_get(fx->cache, other, sizeof other, &n));
    assert_null(rt_cache_get(fx->cache, key, sizeof key - 1, &n));

    /* A hash collision: the entry of `key` under the name of `other` is a miss for `other`
     * (the whole key is compared) and is not removed. */
    char *mine = only_entry(fx->cache);
    char other_dir[160];
    snprintf(other_dir, sizeof other_dir, "%s/other", fx->root);
    rt_cache_put(other_dir, other, sizeof other, obj, sizeof obj);
    char *theirs = only_entry(other_dir);
    char target[300];
    snprintf(target, sizeof target, "%s/%s", fx->cache, strrchr(theirs, '/') + 1);
    assert_int_equal(rename(mine, target), 0);
    assert_null(rt_cache_get(fx->cache, other, sizeof other, &n));
    assert_int_equal(access(target, F_OK), 0);
    free(mine);
    free(theirs);

    /* no temporary files are left behind */
    assert_int_equal(count_files(fx->cache), 1);
    rt_cache_get(NULL, key, sizeof key, &n);
    rt_cache_put(NULL, key, sizeof key, obj, sizeof obj);
}

static void cache_unwritable(void **state)
{
    fixture *fx = *state;
    /* A directory below a regular file can be neither made nor written, even by root. */
    char file[128], xdg[160];
    snprintf(file, sizeof file, "%s/plainfile", fx->root);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(xdg, sizeof xdg, "%s/sub", file);
    setenv("XDG_CACHE_HOME", xdg, 1);
    for (int i = 0; i < 2; i++) {
        bool hit = true;
        capture cap;
        capture_begin(&cap);
        rt_code *c = jit(ADD1, &O3, &hit);
        assert_int_equal(capture_end(&cap), 0);
        assert_false(hit);
        call_add1(c, 0.5f);
        rt_code_free(c);
    }
    char dir[200];
    snprintf(dir, sizeof dir, "%s/nest", xdg);
    size_t n;
    rt_cache_put(dir, "k", 1, "o", 1);
    assert_null(rt_cache_get(dir, "k", 1, &n));
}

static void cache_disabled(void **state)
{
    fixture *fx = *state;
    setenv("NEST_CACHE", "0", 1);
    assert_null(rt_cache_dir());
    for (int i = 0; i < 2; i++) {
        bool hit = true;
        rt_code *c = jit(ADD1, &O3, &hit);
        assert_false(hit);
        call_add1(c, 3.0f);
        rt_code_free(c);
    }
    struct stat st;
    assert_int_not_equal(stat(fx->cache, &st), 0); /* never created */
    setenv("NEST_CACHE", "1", 1);
    char *dir = rt_cache_dir();
    assert_string_equal(dir, fx->cache);
    free(dir);
}

static void cache_dir_from_env(void **state)
{
    (void)state;
    char *saved = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/nonexistent-home", 1);
    char *dir = rt_cache_dir();
    assert_string_equal(dir, "/nonexistent-home/.cache/nest");
    free(dir);
    setenv("XDG_CACHE_HOME", "relative/path", 1); /* ignored, as the XDG spec says */
    dir = rt_cache_dir();
    assert_string_equal(dir, "/nonexistent-home/.cache/nest");
    free(dir);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_null(rt_cache_dir());
    if (saved) {
        setenv("HOME", saved, 1);
        free(saved);
    }
}


/* ---- rt_build_so ---- */

static const char *SO_SRC = "#include <math.h>\n"
                            "#ifndef NEST_TEST_K\n"
                            "#define NEST_TEST_K 1\n"
                            "#endif\n"
                            "int scale(const float *restrict x, float *restrict y, long n)\n"
                            "{\n"
                            "    #pragma omp simd\n"
                            "    for (long i = 0; i < n; i++)\n"
                            "        y[i] = NEST_TEST_K * sqrtf(x[i]);\n"
                            "    return 0;\n"
                            "}\n";

static void build_so(void **state, const char *cc, float k)
{
    fixture *fx = *state;
    static int serial;
    char so[160];
    snprintf(so, sizeof so, "%s/lib%d.so", fx->root, serial++); /* unique: dlopen caches by path */
    char *log = NULL, *err = NULL;
    rt_opts o = O3;
    o.openmp = true;
    int st = rt_build_so(SO_SRC, strlen(SO_SRC), so, cc, &o, &log, &err);
    if (st != NEST_OK)
        print_error("rt_build_so: %s\n", err);
    assert_int_equal(st, NEST_OK);
    assert_null(err);
    assert_non_null(log);
    assert_non_null(strstr(log, "-shared"));
    assert_non_null(strstr(log, "-march=native"));
    assert_non_null(strstr(log, " ms)"));
    free(log);
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    int (*scale)(const float *, float *, long);
    *(void **)&scale = dlsym(h, "scale");
    assert_non_null(scale);
    float x[5] = {0, 1, 4, 9, 16}, y[5];
    assert_int_equal(scale(x, y, 5), 0);
    for (int i = 0; i < 5; i++)
        assert_true(y[i] == k * (float)i);
    dlclose(h);
}

static void aot_build(void **state)
{
    build_so(state, "cc", 1.0f);
    /* the compiler command is split on spaces into argv words */
    build_so(state, "  cc   -DNEST_TEST_K=3 ", 3.0f);
    build_so(state, NULL, 1.0f);
}

/* A .so with a parallel region survives dlclose(): the OpenMP runtime's threads stay parked in
 * it after the call returns, so neither it nor the runtime may be unmapped. */
static const char *PAR_SRC = "void par(double *y, long n)\n"
                             "{\n"
                             "    #pragma omp parallel for\n"
                             "    for (long i = 0; i < n; i++)\n"
                             "        y[i] = 0.5 * (double)i;\n"
                             "}\n";

static void aot_openmp_dlclose(void **state)
{
    fixture *fx = *state;
    const char *ccs[] = {"cc", "clang-14"};
    for (int k = 0; k < 2; k++) {
        char so[160];
        snprintf(so, sizeof so, "%s/par%d.so", fx->root, k);
        rt_opts o = O3;
        o.openmp = true;
        char *err = NULL;
        int st = rt_build_so(PAR_SRC, strlen(PAR_SRC), so, ccs[k], &o, NULL, &err);
        if (st == NEST_ERR_UNAVAILABLE && k > 0) { /* no clang-14 on this machine */
            free(err);
            continue;
        }
        if (st != NEST_OK)
            print_error("rt_build_so: %s\n", err);
        assert_int_equal(st, NEST_OK);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            enum { N = 1 << 16 };
            static double y[N];
            for (int round = 0; round < 3; round++) {
                void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
                if (!h)
                    _exit(2);
                void (*par)(double *, long);
                *(void **)&par = dlsym(h, "par");
                if (!par)
                    _exit(3);
                par(y, N);
                if (y[N - 1] != 0.5 * (N - 1))
                    _exit(4);
                dlclose(h);
                struct timespec ts = {0, 30 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            _exit(0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status))
            print_error("%s: the child was killed by signal %d\n", ccs[k], WTERMSIG(status));
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

static void aot_no_compiler(void **state)
{
    fixture *fx = *state;
    char so[160];
    snprintf(so, sizeof so, "%s/x.so", fx->root);
    char *err = NULL, *log = NULL;
    int st = rt_build_so(SO_SRC, strlen(SO_SRC), so, "nest-no-such-cc -O2", &O3, &log, &err);
    assert_int_equal(st, NEST_ERR_UNAVAILABLE);
    assert_non_null(err);
    assert_non_null(strstr(err, "nest-no-such-cc: not found"));
    free(err);
    free(log);
    assert_int_not_equal(access(so, F_OK), 0);
}

static void aot_compile_error(void **state)
{
    fixture *fx = *state;
    char so[160];
    snprintf(so, sizeof so, "%s/bad.so", fx->root);
    const char *src = "int f(void)\n{\n    return 1 +;\n}\n";
    char *err = NULL;
    capture cap;
    capture_begin(&cap);
    int st = rt_build_so(src, strlen(src), so, "cc", &O3, NULL, &err);
    assert_int_equal(capture_end(&cap), 0);
    assert_int_equal(st, NEST_ERR_COMPILE);
    assert_non_null(err);
    assert_non_null(strstr(err, ":3:")); /* the compiler's own message, with the line */
    assert_non_null(strstr(err, "error"));
    assert_non_null(strstr(err, "exit status"));
    free(err);
    /* bad arguments */
    rt_opts o = O3;
    o.opt_level = -1;
    assert_int_equal(rt_build_so(src, strlen(src), so, "cc", &o, NULL, &err), NEST_ERR_ARG);
    free(err);
    assert_int_equal(rt_build_so(src, strlen(src), NULL, "cc", &O3, NULL, NULL), NEST_ERR_ARG);
}

/* In a child process (NEST_TEST_FATAL_CHILD): a compile that makes LLVM report a fatal error
 * (an -mllvm option naming no pass; the option stays set for the rest of the process) returns
 * NEST_ERR_COMPILE with LLVM's reason instead of ending the process. */
static int fatal_child(void)
{
    const rt_shim_api *api = rt_shim(NULL);
    if (!api)
        return 10;
    static const char src[] = "int one(void) { return 1; }\n";
    const char *args[] = {"-O2", "-mllvm", "-stop-after=no-such-pass"};
    void *obj = NULL;
    size_t len = 0;
    char *err = NULL;
    int st = api->compile(src, sizeof src - 1, "fatal.c", args, 3, &obj, &len, &err);
    int rc = st == NEST_ERR_COMPILE && !obj && err && strstr(err, "internal error") &&
                     strstr(err, "no-such-pass")
                 ? 0
                 : 1;
    if (rc)
        fprintf(stderr, "fatal_child: status %d, message: %s\n", st, err ? err : "(none)");
    free(err);
    free(obj);
    return rc;
}

static void jit_fatal_error_recovered(void **state)
{
    (void)state;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("NEST_TEST_FATAL_CHILD", "1", 1);
        /* after a fatal error the compile's objects are leaked by design (LLVM's state is not
         * fit to free): LeakSanitizer must not count them in this child */
        char opts[512];
        const char *asan = getenv("ASAN_OPTIONS");
        snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", asan ? asan : "", asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        execl("/proc/self/exe", "test_runtime", (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status)); /* the process survived LLVM's fatal error */
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    if (getenv("NEST_TEST_LOADER_CHILD"))
        return loader_child();
    if (getenv("NEST_TEST_FATAL_CHILD"))
        return fatal_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(shim_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(loader_env, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_add1, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_opt_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_simd_reduction, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_expf, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_rows_store_then_load, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_syntax_error, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_unresolved_symbol, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_fatal_error_recovered, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_corrupt_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_get_put, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_unwritable, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_disabled, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_dir_from_env, setup, teardown),
        cmocka_unit_test_setup_teardown(jit_openmp, setup, teardown),
        cmocka_unit_test_setup_teardown(aot_build, setup, teardown),
        cmocka_unit_test_setup_teardown(aot_openmp_dlclose, setup, teardown),
        cmocka_unit_test_setup_teardown(aot_no_compiler, setup, teardown),
        cmocka_unit_test_setup_teardown(aot_compile_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
