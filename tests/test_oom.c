/*
 * test_oom.c - out of memory at every allocation, SQLite style.
 *
 * Each test runs one operation (a parse, a graph build, printing and emitting C, a JIT compile,
 * a call, the compile cache) once for every k = 1, 2, ... with the k-th allocation failing
 * (tests/faults.h), until a run sees no failure; and again with the k-th and every later
 * allocation failing. Every run either succeeds with exactly the result of a run without
 * failures (the reference, taken first) or fails with NEST_ERR_NOMEM and a message; afterwards
 * the handle is still usable: the same operation without failures gives the reference. Under
 * `make sanitize` LeakSanitizer checks that no failure leaks.
 *
 * NEST_OOM_VERBOSE=1 prints the allocation points tried per operation.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "faults.h"
#include "util.h"
#include "rt.h"

/* ---- the sweep ---- */

/* One run of an operation under the armed hook: it disarms (failalloc_disarm) as soon as the
 * operation returns, checks what it got against the reference and frees it. Returns NEST_OK
 * when the operation succeeded, else its status (which it has checked is NEST_ERR_NOMEM). */
typedef int (*oom_op)(void *ctx);

static long points_total;

/* Runs op for k = 1, 2, ... (the k-th allocation failing; with persistent, also every later
 * one) until a run makes no allocation fail; that last run must succeed. */
static void sweep(const char *what, oom_op op, void *ctx)
{
    long points = 0;
    for (int persistent = 0; persistent < 2; persistent++) {
        for (long k = 1;; k++) {
            failalloc_arm(k, persistent);
            int st = op(ctx);
            failalloc_disarm();
            if (!failalloc_fired()) {
                if (st != NEST_OK)
                    fail_msg("%s: failed with status %d and no allocation failing", what, st);
                break;
            }
            if (st != NEST_OK && st != NEST_ERR_NOMEM)
                fail_msg("%s: allocation %ld failing (%s): status %d (%s), not NEST_ERR_NOMEM",
                         what, k, persistent ? "and all after" : "alone", st, nest_status_str(st));
            points++;
        }
    }
    points_total += points;
    if (getenv("NEST_OOM_VERBOSE"))
        print_message("oom: %-40s %6ld failing allocations tried\n", what, points);
}

/* An error message of an out-of-memory failure: present and saying so. */
static void check_nomem_msg(const char *what, const char *msg)
{
    if (!msg || !strstr(msg, "out of memory"))
        fail_msg("%s: out-of-memory message \"%s\"", what, msg ? msg : "(null)");
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* The graphs: every op, tuples, the samples, constants, row groups and a concat. */
static const char *const files[] = {
    "samples/dense.nest", "samples/l2.nest", "tests/corpus/parse/design.nest",
    "tests/corpus/parse/ops.nest", "tests/corpus/parse/tuples.nest",
    "tests/corpus/parse/consts.nest", "tests/corpus/parse/rows.nest",
    "tests/corpus/parse/state.nest",
    "tests/corpus/parse/dims_batch.nest",
};

static nest_module *parse_file(const char *path)
{
    char *text = read_text(path);
    nest_module *m = tu_parse(text, path);
    free(text);
    return m;
}

static nest_function **module_fns(nest_module *m)
{
    int n = nest_module_count(m);
    nest_function **fns = calloc((size_t)n + 1, sizeof *fns);
    assert_non_null(fns);
    for (int i = 0; i < n; i++)
        fns[i] = nest_module_function(m, i);
    return fns;
}

/* ---- parsing ---- */

typedef struct parse_case {
    const char *path;
    char *text;
    char *ref; /* the canonical text of its functions */
} parse_case;

/* its state declarations and functions */
static char *print_module(nest_module *m) { return nest_module_print(m); }

static int op_parse(void *ctx)
{
    parse_case *c = ctx;
    nest_module *m = nest_parse(c->text, strlen(c->text), c->path);
    failalloc_disarm();
    if (!m)
        return NEST_ERR_NOMEM; /* documented: NULL only when out of memory */
    int st = nest_module_errcode(m);
    if (st == NEST_OK) {
        char *s = print_module(m);
        assert_non_null(s);
        assert_string_equal(s, c->ref);
        free(s);
    } else {
        assert_int_equal(st, NEST_ERR_NOMEM);
        check_nomem_msg(c->path, nest_module_errmsg(m));
    }
    nest_module_free(m);
    return st;
}

static void oom_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < countof(files); i++) {
        parse_case c = {files[i], read_text(files[i]), NULL};
        nest_module *m = parse_file(files[i]);
        c.ref = print_module(m);
        nest_module_free(m);
        assert_non_null(c.ref);
        char what[128];
        snprintf(what, sizeof what, "parse %s", files[i]);
        sweep(what, op_parse, &c);
        free(c.text);
        free(c.ref);
    }
}

/* ---- importing ONNX ---- */

typedef struct onnx_case {
    const char *path;
    char *bytes;
    size_t len;
    int code;  /* the import's status without failures */
    char *ref; /* its canonical text, or its error message */
} onnx_case;

static char *import_result(nest_function *f, int *code)
{
    *code = nest_errcode(f);
    return *code == NEST_OK ? nest_print(&f, 1) : strdup(nest_errmsg(f));
}

static int op_onnx(void *ctx)
{
    onnx_case *c = ctx;
    nest_function *f = nest_import_onnx_mem(c->bytes, c->len, NULL);
    failalloc_disarm();
    if (!f)
        return NEST_ERR_NOMEM; /* documented: NULL only when out of memory */
    int st = nest_errcode(f);
    if (st == NEST_ERR_NOMEM) {
        check_nomem_msg(c->path, nest_errmsg(f));
    } else {
        int code;
        char *got = import_result(f, &code);
        assert_non_null(got);
        assert_int_equal(code, c->code);
        assert_string_equal(got, c->ref);
        free(got);
        st = NEST_OK;
    }
    nest_function_free(f);
    return st;
}

static void oom_onnx(void **state)
{
    (void)state;
    /* three that import, one that fails with a message (an input nest needs at import) */
    static const char *const models[] = {
        "tests/corpus/onnx/gemm_all_attributes.onnx", "tests/corpus/onnx/softmax_axis_1.onnx",
        "tests/corpus/onnx/add_bcast.onnx", "tests/corpus/onnx/slice.onnx"};
    for (size_t i = 0; i < countof(models); i++) {
        FILE *fp = fopen(models[i], "rb");
        assert_non_null(fp);
        onnx_case c = {models[i], malloc(65536), 0, 0, NULL};
        assert_non_null(c.bytes);
        c.len = fread(c.bytes, 1, 65536, fp);
        fclose(fp);
        nest_function *f = nest_import_onnx_mem(c.bytes, c.len, NULL);
        assert_non_null(f);
        c.ref = import_result(f, &c.code);
        assert_non_null(c.ref);
        nest_function_free(f);
        char what[128];
        snprintf(what, sizeof what, "import %s", models[i]);
        sweep(what, op_onnx, &c);
        free(c.bytes);
        free(c.ref);
    }
}

/* ---- building a graph with the C API ---- */

#define NSTEPS 24

/* Step i of a graph that calls every kind of builder; values in v. Returns the value, or for
 * steps that make none NEST_OK / a status as a negative number. */
static int32_t build_step(nest_function *f, int i, nest_value *v)
{
    static const float w[6] = {1, 2, 3, 4, 5, 6};
    switch (i) {
    case 0: return nest_parameter(f, "x", NEST_F32, 2, SHAPE(2, 3), NEST_ROW_MAJOR);
    case 1: return nest_parameter(f, "y", NEST_F32, 1, SHAPE(3), NEST_COL_MAJOR);
    case 2: return nest_constant(f, NEST_F32, 2, SHAPE(3, 2), w, 6);
    case 3: return nest_broadcast(f, v[1], 2, SHAPE(2, 3), 1, SHAPE(0));
    case 4: return nest_add(f, v[0], v[3]);
    case 5: return nest_exp(f, nest_negative(f, v[4]));
    case 6: return nest_dot(f, v[5], v[2]);
    case 7: return nest_reshape(f, v[6], SHAPE(1, 0), 2, SHAPE(2, 2));
    case 8: return nest_slice(f, v[0], SHAPE(0, 1), SHAPE(2, 3), SHAPE(1, 2));
    case 9: return nest_concat(f, 2, VALUES(v[8], v[7]), 1);
    case 10: return nest_sum(f, v[9], 1, SHAPE(1));
    case 11: return nest_max(f, v[0], 2, SHAPE(0, 1));
    case 12: return nest_less(f, v[0], v[3]);
    case 13: return nest_select(f, v[12], v[0], v[3]);
    case 14: return nest_convert(f, v[13], NEST_I64);
    case 15: return nest_min(f, v[14], 1, SHAPE(0));
    case 16: return nest_tuple(f, 3, VALUES(v[10], v[11], v[15]));
    case 17: return nest_get(f, v[16], 1);
    case 18: return -nest_set_name(f, v[4], "sum_xy");
    case 19: return -nest_set_name(f, v[9], "joined");
    case 20: return nest_power(f, v[5], nest_sqrt(f, v[5]));
    case 21: return nest_equal(f, v[20], v[5]);
    case 22: return nest_tuple(f, 2, VALUES(v[16], v[21]));
    case 23: return -nest_return(f, 3, VALUES(v[22], v[17], v[6]), NULL);
    }
    return NEST_NONE;
}

typedef struct build_case {
    char *ref;
} build_case;

static bool step_failed(int i, int32_t r)
{
    return (i == 18 || i == 19 || i == 23) ? r != 0 : r < 0;
}

static int op_build(void *ctx)
{
    build_case *c = ctx;
    nest_function *f = nest_function_new("g");
    if (!f) {
        failalloc_disarm();
        return NEST_ERR_NOMEM; /* documented: NULL only when out of memory */
    }
    nest_value v[NSTEPS];
    int st = NEST_OK;
    for (int i = 0; i < NSTEPS; i++) {
        int32_t r = build_step(f, i, v);
        if (step_failed(i, r)) {
            failalloc_disarm();
            if (st == NEST_OK)
                st = nest_errcode(f);
            if (nest_errcode(f) != NEST_ERR_NOMEM)
                fail_msg("build step %d: status %d: %s", i, nest_errcode(f), nest_errmsg(f));
            check_nomem_msg("build", nest_errmsg(f));
            /* the function is still usable: the same step, without failures, works */
            nest_clear_error(f);
            r = build_step(f, i, v);
            if (step_failed(i, r))
                fail_msg("build step %d after a failure: %s", i, nest_errmsg(f));
        }
        v[i] = r;
    }
    failalloc_disarm();
    assert_int_equal(nest_errcode(f), NEST_OK);
    char *s = nest_print(&f, 1);
    assert_non_null(s);
    assert_string_equal(s, c->ref);
    free(s);
    nest_function_free(f);
    return st;
}

static void oom_build(void **state)
{
    (void)state;
    build_case c = {0};
    nest_function *f = nest_function_new("g");
    nest_value v[NSTEPS];
    for (int i = 0; i < NSTEPS; i++) {
        v[i] = build_step(f, i, v);
        if (step_failed(i, v[i]))
            fail_msg("build step %d: %s", i, nest_errmsg(f));
    }
    c.ref = nest_print(&f, 1);
    assert_non_null(c.ref);
    nest_function_free(f);
    sweep("build (C API)", op_build, &c);
    free(c.ref);
}

/* ---- printing and emitting ---- */

typedef enum out_kind { OUT_C, OUT_H, OUT_TEXT, OUT_DOT, OUT_NOFUSE_C } out_kind;

typedef struct emit_case {
    nest_function **fns;
    int n;
    out_kind kind;
    char *ref;
} emit_case;

static char *make_output(emit_case *c)
{
    nest_options o;
    nest_options_init(&o);
    switch (c->kind) {
    case OUT_C: return nest_emit(c->fns, c->n, NEST_EMIT_C, NULL);
    case OUT_H: return nest_emit(c->fns, c->n, NEST_EMIT_H, NULL);
    case OUT_TEXT: return nest_print(c->fns, c->n);
    case OUT_DOT: return nest_print_dot(c->fns, c->n);
    case OUT_NOFUSE_C: o.fuse = 0; return nest_emit(c->fns, c->n, NEST_EMIT_C, &o);
    }
    return NULL;
}

static int op_emit(void *ctx)
{
    emit_case *c = ctx;
    char *s = make_output(c);
    failalloc_disarm();
    if (s) {
        if (strcmp(s, c->ref) != 0) {
            FILE *o = fopen("/tmp/nest-oom-got.c", "w");
            if (o)
                fputs(s, o), fclose(o);
            fail_msg("emit kind %d succeeded with a different text (/tmp/nest-oom-got.c)",
                     (int)c->kind);
        }
        free(s);
        return NEST_OK;
    }
    /* the error is on one of the functions; afterwards the same call works */
    int st = NEST_ERR_NOMEM;
    bool found = false;
    for (int i = 0; i < c->n; i++)
        if (nest_errcode(c->fns[i]) != NEST_OK) {
            assert_int_equal(nest_errcode(c->fns[i]), NEST_ERR_NOMEM);
            check_nomem_msg("emit", nest_errmsg(c->fns[i]));
            nest_clear_error(c->fns[i]);
            found = true;
        }
    if (!found)
        fail_msg("emit kind %d failed with no error on any function", (int)c->kind);
    s = make_output(c);
    assert_non_null(s);
    assert_string_equal(s, c->ref);
    free(s);
    return st;
}

static void oom_emit(void **state)
{
    (void)state;
    static const char *const kinds[] = {"C", "header", "text", "dot", "C unfused"};
    for (size_t i = 0; i < countof(files); i++) {
        nest_module *m = parse_file(files[i]);
        emit_case c = {module_fns(m), nest_module_count(m), OUT_C, NULL};
        for (int kind = OUT_C; kind <= OUT_NOFUSE_C; kind++) {
            c.kind = (out_kind)kind;
            c.ref = make_output(&c);
            assert_non_null(c.ref);
            char what[128];
            snprintf(what, sizeof what, "%s %s", kinds[kind], files[i]);
            sweep(what, op_emit, &c);
            free(c.ref);
        }
        free(c.fns);
        nest_module_free(m);
    }
}

/* ---- compiling in process and calling ---- */

typedef struct jit_case {
    nest_module *m;
    nest_function *f;
    nest_options opts;
    void *args[3], *results[1];
    float *x, *w, *b, *want, *got;
    int64_t nout;
    const char *cache; /* when set, emptied before each compile: always a miss */
    bool recompile;    /* after a failure, check that the function still compiles (a cache hit
                        * in the cached sweep; the others would run clang at every point) */
} jit_case;

static int op_compile(void *ctx)
{
    jit_case *c = ctx;
    if (c->cache) {
        long seen = failalloc_disarm();
        tu_rm_rf(c->cache);
        failalloc_resume(seen);
    }
    nest_kernel *k = nest_compile(c->f, &c->opts);
    failalloc_disarm();
    if (!k) {
        int st = nest_errcode(c->f);
        if (st != NEST_ERR_NOMEM)
            fail_msg("compile: status %d: %s", st, nest_errmsg(c->f));
        check_nomem_msg("compile", nest_errmsg(c->f));
        nest_clear_error(c->f);
        if (c->recompile) {
            k = nest_compile(c->f, &c->opts);
            assert_non_null(k);
            assert_true(nest_kernel_cache_hit(k));
            nest_kernel_free(k);
        }
        return st;
    }
    memset(c->got, 0, (size_t)c->nout * sizeof *c->got);
    assert_int_equal(nest_call(k, c->args, 3, c->results, 1), NEST_OK);
    assert_close(NEST_F32, c->got, c->want, c->nout, 1e-5, 1e-5);
    nest_kernel_free(k);
    return NEST_OK;
}

/* A call: the wrong way (its message is made) and the right way (nothing to allocate). */
typedef struct call_case {
    jit_case *jc;
    nest_kernel *k;
} call_case;

static int op_call(void *ctx)
{
    call_case *c = ctx;
    int bad = nest_call(c->k, c->jc->args, 2, c->jc->results, 1);
    memset(c->jc->got, 0, (size_t)c->jc->nout * sizeof *c->jc->got);
    int good = nest_call(c->k, c->jc->args, 3, c->jc->results, 1);
    failalloc_disarm();
    assert_int_equal(bad, NEST_ERR_CALL);
    assert_true(strlen(nest_kernel_errmsg(c->k)) > 0);
    assert_int_equal(good, NEST_OK);
    assert_close(NEST_F32, c->jc->got, c->jc->want, c->jc->nout, 1e-5, 1e-5);
    return NEST_OK;
}

static int op_evaluate(void *ctx)
{
    jit_case *c = ctx;
    memset(c->got, 0, (size_t)c->nout * sizeof *c->got);
    int st = nest_evaluate(c->f, c->args, 3, c->results, 1);
    failalloc_disarm();
    if (st != NEST_OK) {
        assert_int_equal(st, NEST_ERR_NOMEM);
        check_nomem_msg("evaluate", nest_errmsg(c->f));
        nest_clear_error(c->f);
        return st;
    }
    assert_close(NEST_F32, c->got, c->want, c->nout, 0, 0);
    return NEST_OK;
}

static void jit_setup(jit_case *c, const char *file, char *root)
{
    c->m = parse_file(file);
    c->f = nest_module_function(c->m, 0);
    nest_options_init(&c->opts);
    c->opts.openmp = 0;
    const int64_t *sx = nest_value_shape(c->f, nest_param(c->f, 0));
    const int64_t *sw = nest_value_shape(c->f, nest_param(c->f, 1));
    int64_t nx = sx[0] * sx[1], nw = sw[0] * sw[1], nb = sw[1];
    c->nout = sx[0] * sw[1];
    c->x = malloc((size_t)nx * sizeof(float));
    c->w = malloc((size_t)nw * sizeof(float));
    c->b = malloc((size_t)nb * sizeof(float));
    c->want = malloc((size_t)c->nout * sizeof(float));
    c->got = malloc((size_t)c->nout * sizeof(float));
    assert_true(c->x && c->w && c->b && c->want && c->got);
    for (int64_t i = 0; i < nx; i++)
        c->x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (int64_t i = 0; i < nw; i++)
        c->w[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    for (int64_t i = 0; i < nb; i++)
        c->b[i] = (float)(i % 3) - 1.0f;
    c->args[0] = c->x, c->args[1] = c->w, c->args[2] = c->b;
    c->results[0] = c->want;
    assert_int_equal(nest_evaluate(c->f, c->args, 3, c->results, 1), NEST_OK);
    c->results[0] = c->got;
    snprintf(root, 64, "/tmp/nest-oom-XXXXXX");
    assert_non_null(mkdtemp(root));
    setenv("XDG_CACHE_HOME", root, 1);
    unsetenv("NEST_CACHE");
}

static void jit_teardown(jit_case *c, const char *root)
{
    tu_rm_rf(root);
    unsetenv("XDG_CACHE_HOME");
    free(c->x), free(c->w), free(c->b), free(c->want), free(c->got);
    nest_module_free(c->m);
}

/* dense: a tiled product with a workspace, from the cache (every allocation of the path from
 * the graph to a called kernel but clang's own). */
static void oom_compile_cached(void **state)
{
    (void)state;
    jit_case c = {0};
    char root[64];
    jit_setup(&c, "samples/dense.nest", root);
    nest_kernel *k = nest_compile(c.f, &c.opts); /* fills the cache */
    if (!k) {
        if (nest_errcode(c.f) == NEST_ERR_UNAVAILABLE)
            skip();
        fail_msg("compile: %s", nest_errmsg(c.f));
    }
    assert_true(nest_kernel_workspace_size(k) > 0);
    c.recompile = true;
    sweep("compile samples/dense.nest (cached)", op_compile, &c);
    c.recompile = false;
    call_case cc = {&c, k};
    sweep("call samples/dense.nest (workspace)", op_call, &cc);
    sweep("evaluate samples/dense.nest", op_evaluate, &c);
    nest_kernel_free(k);
    /* the path of a miss: compiled, then stored */
    char cache[96];
    snprintf(cache, sizeof cache, "%s/nest", root);
    c.cache = cache;
    sweep("compile samples/dense.nest (cache miss)", op_compile, &c);
    c.cache = NULL;
    jit_teardown(&c, root);
}

/* dense unfused, without the cache. */
static void oom_compile_uncached(void **state)
{
    (void)state;
    jit_case c = {0};
    char root[64];
    jit_setup(&c, "samples/dense.nest", root);
    c.opts.cache = 0;
    c.opts.fuse = 0;
    nest_kernel *k = nest_compile(c.f, &c.opts);
    if (!k) {
        if (nest_errcode(c.f) == NEST_ERR_UNAVAILABLE)
            skip();
        fail_msg("compile: %s", nest_errmsg(c.f));
    }
    nest_kernel_free(k);
    sweep("compile samples/dense.nest (unfused, no cache)", op_compile, &c);
    jit_teardown(&c, root);
}

/* Two calls of one kernel at once: the second finds the kernel's workspace in use and must
 * allocate its own; when that fails, NEST_ERR_NOMEM with the message in its thread, nothing
 * written to its results, and the kernel still works. Only the second caller's allocations
 * fail (failalloc_arm_thread): the first thread calls the kernel in a loop, so it holds the
 * workspace nearly all the time, and the second retries until it found it taken. */
typedef struct overlap_case {
    nest_kernel *k;
    jit_case *jc;
    float *got;        /* the looping thread's results */
    atomic_bool stop;
    atomic_long calls;
    int failed_rc;     /* a failed call of the looping thread */
    char errmsg[64];   /* its nest_kernel_errmsg at the end: "" (the failure was another's) */
} overlap_case;

static void *call_loop(void *p)
{
    overlap_case *o = p;
    void *results[1] = {o->got};
    while (!atomic_load(&o->stop)) {
        int rc = nest_call(o->k, o->jc->args, 3, results, 1);
        if (rc != NEST_OK && !o->failed_rc)
            o->failed_rc = rc;
        atomic_fetch_add(&o->calls, 1);
    }
    snprintf(o->errmsg, sizeof o->errmsg, "%s", nest_kernel_errmsg(o->k));
    return NULL;
}

static void oom_call_overlapping(void **state)
{
    (void)state;
    jit_case c = {0};
    char root[64];
    jit_setup(&c, "samples/dense.nest", root);
    nest_kernel *k = nest_compile(c.f, &c.opts);
    if (!k) {
        if (nest_errcode(c.f) == NEST_ERR_UNAVAILABLE)
            skip();
        fail_msg("compile: %s", nest_errmsg(c.f));
    }
    size_t ws = nest_kernel_workspace_size(k);
    assert_true(ws > 0);
    overlap_case o = {.k = k, .jc = &c, .got = calloc((size_t)c.nout, sizeof(float))};
    assert_non_null(o.got);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_loop, &o), 0);
    while (atomic_load(&o.calls) < 1)
        sched_yield();

    /* results filled with a byte pattern: a failed call must leave it */
    const unsigned char mark = 0xA5;
    unsigned char *untouched = malloc((size_t)c.nout * sizeof(float));
    assert_non_null(untouched);
    memset(untouched, mark, (size_t)c.nout * sizeof(float));
    long tries = 0, nomem = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        memset(c.got, mark, (size_t)c.nout * sizeof(float));
        failalloc_arm_thread(1, false);
        int rc = nest_call(k, c.args, 3, c.results, 1);
        failalloc_disarm();
        tries++;
        if (rc == NEST_OK) { /* the workspace was free: this call had it */
            assert_false(failalloc_fired());
            assert_close(NEST_F32, c.got, c.want, c.nout, 1e-5, 1e-5);
        } else {
            assert_int_equal(rc, NEST_ERR_NOMEM);
            assert_true(failalloc_fired());
            const char *msg = nest_kernel_errmsg(k);
            check_nomem_msg("overlapping call", msg);
            char want_msg[160];
            snprintf(want_msg, sizeof want_msg,
                     "dense: out of memory for a workspace of %zu bytes (the kernel's own is in use "
                     "by a call in another thread)", ws);
            assert_string_equal(msg, want_msg);
            assert_memory_equal(c.got, untouched, (size_t)c.nout * sizeof(float));
            nomem++;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (nomem < 3 && now.tv_sec - t0.tv_sec < 30);
    if (getenv("NEST_OOM_VERBOSE"))
        print_message("oom: overlapping calls: %ld failed allocations in %ld calls\n", nomem, tries);
    assert_true(nomem > 0); /* the looping thread held the workspace at least once in 30 s */

    /* afterwards, with the other thread still calling, a call succeeds */
    memset(c.got, mark, (size_t)c.nout * sizeof(float));
    assert_int_equal(nest_call(k, c.args, 3, c.results, 1), NEST_OK);
    assert_close(NEST_F32, c.got, c.want, c.nout, 1e-5, 1e-5);
    atomic_store(&o.stop, true);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(o.failed_rc, NEST_OK);
    assert_string_equal(o.errmsg, "");
    assert_close(NEST_F32, o.got, c.want, c.nout, 1e-5, 1e-5);
    free(untouched);
    free(o.got);
    nest_kernel_free(k);
    jit_teardown(&c, root);
}

/* ---- state: objects, files, calls, gradients ---- */

/* tests/corpus/parse/state.nest: five state tensors (f32, f64, i32; uniform, normal, zeros, a
 * constant, an array) and `step`, which takes a gradient and assigns three of them. */
#define STATE_NEST "tests/corpus/parse/state.nest"

typedef struct state_case {
    nest_module *m;
    nest_function *f;      /* step */
    nest_state *ref;       /* as nest_state_new makes it */
    nest_state *st;        /* loaded into, called with */
    unsigned char *before; /* st's bytes before each run */
    unsigned char *after;  /* what a run that succeeds makes of them */
    char path[96];         /* a state file saved from ref */
    unsigned char *file;   /* its bytes */
    long file_len;
    float x[12], loss, want_loss;
} state_case;

/* A state's bytes (tu_state_bytes), back into the state. */
static void set_state_bytes(nest_state *st, const unsigned char *b)
{
    for (int i = 0; i < nest_state_count(st); i++) {
        memcpy(nest_state_data(st, i), b, tu_state_tensor_bytes(st, i));
        b += tu_state_tensor_bytes(st, i);
    }
}

static void assert_state_is(nest_state *st, const unsigned char *bytes)
{
    unsigned char *got = tu_state_bytes(st);
    assert_memory_equal(got, bytes, nest_state_size(st));
    free(got);
}

static long file_bytes(const char *path, unsigned char **data)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    assert_non_null(*data);
    assert_int_equal(fread(*data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return n;
}

/* nest_state_new: NULL with the error on the module, or a state equal to the reference. */
static int op_state_new(void *ctx)
{
    state_case *c = ctx;
    long seen = failalloc_disarm();
    nest_module *m = parse_file(STATE_NEST); /* a module of its own: its first error stays */
    failalloc_resume(seen);
    nest_state *st = nest_state_new(m);
    failalloc_disarm();
    int rc = NEST_OK;
    if (!st) {
        rc = nest_module_errcode(m);
        assert_int_equal(rc, NEST_ERR_NOMEM);
        check_nomem_msg("state_new", nest_module_errmsg(m));
    } else {
        unsigned char *want = tu_state_bytes(c->ref);
        assert_int_equal(nest_state_size(st), nest_state_size(c->ref));
        assert_state_is(st, want);
        free(want);
        nest_state_free(st);
    }
    nest_module_free(m);
    return rc;
}

/* nest_state_save: NEST_ERR_NOMEM with a message and no file (nor temporary), or the file. */
static int op_state_save(void *ctx)
{
    state_case *c = ctx;
    int rc = nest_state_save(c->ref, c->path);
    failalloc_disarm();
    char tmp[112];
    snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
    assert_int_equal(access(tmp, F_OK), -1);
    unsigned char *got = NULL;
    long n = file_bytes(c->path, &got);
    if (rc != NEST_OK) {
        assert_int_equal(rc, NEST_ERR_NOMEM);
        check_nomem_msg("state_save", nest_state_errmsg(c->ref));
        assert_int_equal(n, -1);
        return rc;
    }
    assert_string_equal(nest_state_errmsg(c->ref), "");
    assert_int_equal(n, c->file_len);
    assert_memory_equal(got, c->file, (size_t)n);
    free(got);
    unlink(c->path);
    return NEST_OK;
}

/* nest_state_load: NEST_ERR_NOMEM with a message and the state unchanged, or the file's
 * values. */
static int op_state_load(void *ctx)
{
    state_case *c = ctx;
    int rc = nest_state_load(c->st, c->path);
    failalloc_disarm();
    if (rc != NEST_OK) {
        assert_int_equal(rc, NEST_ERR_NOMEM);
        check_nomem_msg("state_load", nest_state_errmsg(c->st));
        assert_state_is(c->st, c->before);
        return rc;
    }
    assert_state_is(c->st, c->after);
    set_state_bytes(c->st, c->before);
    return NEST_OK;
}

/* nest_evaluate_state (the interpreter): NEST_ERR_NOMEM with the message on the function and
 * the state unchanged, or the loss and the assigned state of a run without failures. */
static int op_evaluate_state(void *ctx)
{
    state_case *c = ctx;
    void *args[1] = {c->x}, *res[1] = {&c->loss};
    c->loss = -1;
    int rc = nest_evaluate_state(c->f, c->st, args, 1, res, 1);
    failalloc_disarm();
    if (rc != NEST_OK) {
        assert_int_equal(rc, NEST_ERR_NOMEM);
        check_nomem_msg("evaluate_state", nest_errmsg(c->f));
        nest_clear_error(c->f);
        assert_state_is(c->st, c->before);
        return rc;
    }
    assert_true(c->loss == c->want_loss);
    assert_state_is(c->st, c->after);
    set_state_bytes(c->st, c->before);
    return NEST_OK;
}

static void oom_state(void **state)
{
    (void)state;
    state_case c = {0};
    c.m = parse_file(STATE_NEST);
    c.f = nest_module_function(c.m, 0);
    c.ref = nest_state_new(c.m);
    c.st = nest_state_new(c.m);
    assert_true(c.ref && c.st);
    sweep("state_new " STATE_NEST, op_state_new, &c);

    /* save: the reference file first */
    char root[64];
    snprintf(root, sizeof root, "/tmp/nest-oom-XXXXXX");
    assert_non_null(mkdtemp(root));
    snprintf(c.path, sizeof c.path, "%s/s.state", root);
    assert_int_equal(nest_state_save(c.ref, c.path), NEST_OK);
    c.file_len = file_bytes(c.path, &c.file);
    assert_true(c.file_len > 0);
    unlink(c.path);
    sweep("state_save " STATE_NEST, op_state_save, &c);

    /* load into a state of other values */
    assert_int_equal(nest_state_save(c.ref, c.path), NEST_OK);
    c.after = tu_state_bytes(c.ref);
    c.before = tu_state_bytes(c.st);
    for (size_t i = 0; i < nest_state_size(c.st); i++)
        c.before[i] = (unsigned char)(i * 37 + 11);
    set_state_bytes(c.st, c.before);
    sweep("state_load " STATE_NEST, op_state_load, &c);
    free(c.after);
    free(c.before);

    /* a call of step with state in the interpreter, from the initial values */
    for (int i = 0; i < 12; i++)
        c.x[i] = (float)(i % 5) * 0.25f - 0.5f;
    c.before = tu_state_bytes(c.ref);
    set_state_bytes(c.st, c.before);
    void *args[1] = {c.x}, *res[1] = {&c.want_loss};
    assert_int_equal(nest_evaluate_state(c.f, c.st, args, 1, res, 1), NEST_OK);
    c.after = tu_state_bytes(c.st);
    assert_true(memcmp(c.after, c.before, nest_state_size(c.st)) != 0);
    set_state_bytes(c.st, c.before);
    sweep("evaluate_state " STATE_NEST, op_evaluate_state, &c);

    tu_rm_rf(root);
    free(c.after);
    free(c.before);
    free(c.file);
    nest_state_free(c.ref);
    nest_state_free(c.st);
    nest_module_free(c.m);
}

/* ---- gradients ---- */

/* loss = sum(h * exp(h)) with h = dot(x, w), x a parameter and w a variable of the module;
 * with the gradients when `grad` (through nest_grad). */
typedef struct grad_case {
    nest_module *m;
    nest_function *f;
    nest_value loss, wrt[2];
    char *ref; /* the module's text with the gradients */
} grad_case;

static void grad_build(grad_case *c)
{
    nest_init init = {NEST_INIT_UNIFORM, -0.5, 0.5, 7};
    c->m = nest_module_new("g");
    assert_non_null(c->m);
    assert_int_equal(nest_variable(c->m, "w", NEST_F32, 2, SHAPE(3, 2), &init), NEST_OK);
    c->f = nest_module_add_function(c->m, "loss");
    assert_non_null(c->f);
    nest_function *f = c->f;
    c->wrt[0] = nest_read(f, "w");
    c->wrt[1] = nest_parameter(f, "x", NEST_F32, 2, SHAPE(4, 3), NEST_ROW_MAJOR);
    nest_value h = nest_dot(f, c->wrt[1], c->wrt[0]);
    c->loss = nest_sum(f, nest_multiply(f, h, nest_exp(f, h)), 2, SHAPE(0, 1));
    assert_int_equal(nest_errcode(f), NEST_OK);
}

/* The gradients, returned with the loss, and the module's text (the caller frees it). */
static char *grad_finish(grad_case *c, nest_value g)
{
    assert_int_equal(nest_return(c->f, 2, VALUES(c->loss, g), NULL), NEST_OK);
    char *s = nest_module_print(c->m);
    assert_non_null(s);
    return s;
}

/* nest_grad: NEST_NONE with NEST_ERR_NOMEM and a message, the function as it was (the same
 * call then gives the reference), or the reference. */
static int op_grad(void *ctx)
{
    grad_case *c = ctx;
    long seen = failalloc_disarm();
    grad_build(c);
    failalloc_resume(seen);
    nest_value g = nest_grad(c->f, c->loss, 2, c->wrt);
    failalloc_disarm();
    int rc = NEST_OK;
    if (g == NEST_NONE) {
        rc = nest_errcode(c->f);
        assert_int_equal(rc, NEST_ERR_NOMEM);
        check_nomem_msg("grad", nest_errmsg(c->f));
        nest_clear_error(c->f);
        g = nest_grad(c->f, c->loss, 2, c->wrt);
        assert_int_not_equal(g, NEST_NONE);
    }
    char *s = grad_finish(c, g);
    assert_string_equal(s, c->ref);
    free(s);
    nest_module_free(c->m);
    return rc;
}

static void oom_grad(void **state)
{
    (void)state;
    grad_case c = {0};
    grad_build(&c);
    c.ref = grad_finish(&c, nest_grad(c.f, c.loss, 2, c.wrt));
    nest_module_free(c.m);
    sweep("grad (C API)", op_grad, &c);
    free(c.ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(oom_parse),
        cmocka_unit_test(oom_build),
        cmocka_unit_test(oom_onnx),
        cmocka_unit_test(oom_emit),
        cmocka_unit_test(oom_compile_cached),
        cmocka_unit_test(oom_compile_uncached),
        cmocka_unit_test(oom_call_overlapping),
        cmocka_unit_test(oom_state),
        cmocka_unit_test(oom_grad),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    print_message("oom: %ld failing allocations tried in all\n", points_total);
    return rc;
}
