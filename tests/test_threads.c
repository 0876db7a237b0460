/*
 * test_threads.c - what nest.h promises about threads: functions built, printed, emitted and
 * compiled in many threads at once with the compile cache shared; one kernel called from many
 * threads at once (its workspace taken by one call, the others making their own), and so one
 * function of a library built ahead of time (NAME_call keeps its last workspace); each thread
 * sees its own call errors. Every result is compared with the interpreter. State objects: calls,
 * saves and loads with one state object from several threads take turns (no update lost, every
 * save a snapshot between calls), and distinct state objects are called at once.
 *
 * Part of `make test`; `make tsan` runs it under ThreadSanitizer (with the JIT shim built with
 * -fsanitize=thread too: see the Makefile).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

enum { THREADS = 8 };

static char root[64];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/nest-threads-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    setenv("XDG_CACHE_HOME", root, 1);
    unsetenv("NEST_CACHE");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rm_rf(root);
    unsetenv("XDG_CACHE_HOME");
    return 0;
}

/* dense(x, w, b) = max(x . w + b, 0) with a per-variant scale, as text: variants 0..3 differ
 * (distinct cache entries), and each is compiled by two threads (a shared entry). */
static char *dense_text(int variant, int n)
{
    char *s = malloc(1024);
    assert_non_null(s);
    snprintf(s, 1024,
             "func dense%d(x: f32[%d,48], w: f32[48,40], b: f32[40]) -> f32[%d,40] {\n"
             "  h = dot(x, w)\n"
             "  z = add(h, broadcast(b, shape=[%d,40], axes=[0]))\n"
             "  s = multiply(z, broadcast(constant(f32[], %d), shape=[%d,40], axes=[0,1]))\n"
             "  return maximum(s, broadcast(constant(f32[], 0), shape=[%d,40], axes=[0,1]))\n"
             "}\n",
             variant, n, n, n, variant + 1, n, n);
    return s;
}

typedef struct job {
    int id;
    nest_kernel *shared; /* the kernel every thread calls, or NULL */
    int fails;
    char why[256];
} job;

static void fill(float *p, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((i * 7 + seed * 13) % 17) / 17.0f - 0.4f;
}

typedef int (*aot_call)(void *const *, void *const *);

/* Calls k (or, without it, NAME_call of a library) on inputs made from seed; compares with
 * the interpreter on f. */
static bool check_call(nest_function *f, nest_kernel *k, aot_call aot, int n, int seed, char *why)
{
    int64_t nx = (int64_t)n * 48, nw = 48 * 40, nb = 40, nr = (int64_t)n * 40;
    float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), *b = malloc((size_t)nb * 4);
    float *want = malloc((size_t)nr * 4), *got = malloc((size_t)nr * 4);
    bool ok = x && w && b && want && got;
    if (ok) {
        fill(x, nx, seed), fill(w, nw, seed + 1), fill(b, nb, seed + 2);
        void *args[3] = {x, w, b}, *rw[1] = {want}, *rg[1] = {got};
        if (nest_evaluate(f, args, 3, rw, 1) != NEST_OK) {
            snprintf(why, 256, "evaluate: %s", nest_errmsg(f));
            ok = false;
        } else if (k ? nest_call(k, args, 3, rg, 1) != NEST_OK : aot(args, rg) != 0) {
            snprintf(why, 256, "call: %s", k ? nest_kernel_errmsg(k) : "non-zero");
            ok = false;
        } else {
            for (int64_t i = 0; i < nr && ok; i++)
                if (fabsf(got[i] - want[i]) > 1e-4f + 1e-4f * fabsf(want[i])) {
                    snprintf(why, 256, "element %lld: %g, want %g", (long long)i, got[i],
                             want[i]);
                    ok = false;
                }
        }
    }
    free(x), free(w), free(b), free(want), free(got);
    return ok;
}

/* Each thread parses its own text, prints it, emits C, compiles (two threads per variant:
 * the cache is shared) and calls the kernel. */
static void *compile_job(void *arg)
{
    job *j = arg;
    char *text = dense_text(j->id % 4, 16);
    nest_module *m = nest_parse(text, strlen(text), "dense.nest");
    free(text);
    if (!m || nest_module_errcode(m) != NEST_OK) {
        snprintf(j->why, sizeof j->why, "parse: %s", m ? nest_module_errmsg(m) : "NULL");
        j->fails++;
        nest_module_free(m);
        return NULL;
    }
    nest_function *f = nest_module_function(m, 0);
    char *s = nest_print(&f, 1), *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    if (!s || !c) {
        snprintf(j->why, sizeof j->why, "print or emit: %s", nest_errmsg(f));
        j->fails++;
    }
    free(s);
    free(c);
    nest_options o;
    nest_options_init(&o);
    o.openmp = j->id % 2; /* half with OpenMP teams */
    nest_kernel *k = nest_compile(f, &o);
    if (!k) {
        snprintf(j->why, sizeof j->why, "compile: %s", nest_errmsg(f));
        j->fails++;
    } else if (!check_call(f, k, NULL, 16, j->id, j->why)) {
        j->fails++;
    }
    nest_kernel_free(k);
    nest_module_free(m);
    return NULL;
}

static void run_jobs(void *(*fn)(void *), job *jobs)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fn, &jobs[i]), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < THREADS; i++)
        if (jobs[i].fails)
            fail_msg("thread %d: %d failures, the last: %s", i, jobs[i].fails, jobs[i].why);
}

static void threads_compile(void **state)
{
    (void)state;
    /* the JIT library loads once, whichever thread comes first: no warm-up here */
    job jobs[THREADS] = {{0}};
    for (int i = 0; i < THREADS; i++)
        jobs[i].id = i;
    run_jobs(compile_job, jobs);
    /* and again, every compile now a cache hit */
    run_jobs(compile_job, jobs);
}

static nest_function *shared_f;

/* Many calls on the one shared kernel, each with its own arrays; then a wrong call, whose
 * message this thread sees as its own. */
static void *call_job(void *arg)
{
    job *j = arg;
    for (int r = 0; r < 6; r++)
        if (!check_call(shared_f, j->shared, NULL, 64, j->id * 10 + r, j->why))
            j->fails++;
    void *none[1] = {NULL};
    char want[64];
    snprintf(want, sizeof want, "given %d and 1", j->id % 3);
    for (int r = 0; r < 50; r++) {
        if (nest_call(j->shared, none, j->id % 3, none, 1) != NEST_ERR_CALL ||
            !strstr(nest_kernel_errmsg(j->shared), want)) {
            snprintf(j->why, sizeof j->why, "error message \"%s\", want \"%s\"",
                     nest_kernel_errmsg(j->shared), want);
            j->fails++;
        }
    }
    return NULL;
}

/* The module of dense_text(variant, 64), its function shared_f. */
static nest_module *parse_shared(int variant)
{
    char *text = dense_text(variant, 64);
    nest_module *m = nest_parse(text, strlen(text), "dense.nest");
    free(text);
    assert_int_equal(nest_module_errcode(m), NEST_OK);
    shared_f = nest_module_function(m, 0);
    return m;
}

static void threads_call_one_kernel(void **state)
{
    (void)state;
    nest_module *m = parse_shared(0);
    nest_options o;
    nest_options_init(&o);
    o.openmp = 0;
    nest_kernel *k = nest_compile(shared_f, &o);
    if (!k && nest_errcode(shared_f) == NEST_ERR_UNAVAILABLE)
        skip();
    assert_non_null(k);
    assert_true(nest_kernel_workspace_size(k) > 0); /* the workspace is what is shared */
    job jobs[THREADS] = {{0}};
    for (int i = 0; i < THREADS; i++)
        jobs[i].id = i, jobs[i].shared = k;
    run_jobs(call_job, jobs);
    assert_string_equal(nest_kernel_errmsg(k), ""); /* this thread made no failing call */
    nest_kernel_free(k);
    nest_module_free(m);
}

static aot_call shared_aot;

static void *aot_job(void *arg)
{
    job *j = arg;
    for (int r = 0; r < 20; r++)
        if (!check_call(shared_f, NULL, shared_aot, 64, j->id * 10 + r, j->why))
            j->fails++;
    return NULL;
}

/* NAME_call of a library built ahead of time from many threads at once: it keeps the
 * workspace of a call for the next (taken and given back by atomic exchanges) and a call that
 * finds it taken allocates its own; each call's results are its own. */
static void threads_call_one_library(void **state)
{
    (void)state;
    nest_module *m = parse_shared(1);
    nest_options o;
    nest_options_init(&o);
    o.openmp = 0;
    char so[128];
    snprintf(so, sizeof so, "%s/dense1.so", root);
    if (nest_build_so(&shared_f, 1, so, NULL, &o, NULL) != NEST_OK)
        fail_msg("%s", nest_errmsg(shared_f));
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    size_t (*wsz)(void);
    *(void **)&wsz = dlsym(lib, "dense1_workspace_size");
    *(void **)&shared_aot = dlsym(lib, "dense1_call");
    assert_true(wsz && shared_aot);
    assert_true(wsz() > 0); /* the workspace is what is kept */
    job jobs[THREADS] = {{0}};
    for (int i = 0; i < THREADS; i++)
        jobs[i].id = i;
    run_jobs(aot_job, jobs);
    dlclose(lib); /* (frees the kept workspace: the sanitizers' leak check sees it) */
    nest_module_free(m);
}

/* ---- state objects ---- */

/* Each call scales w by 0.99, adds x (all ones) and counts itself: the state after k calls is
 * the same whatever threads made them, so ref_w[k] (k calls in one thread) is the value of a
 * state whose steps is k. */
static const char step_text[] = "var w: f32[16384] = uniform(-1, 1, seed=5)\n"
                                "persistent steps: i64[] = 0\n"
                                "func step(x: f32[16384]) -> f32[] {\n"
                                "  h = multiply(w, broadcast(constant(f32[], 0.99), shape=[16384], axes=[0]))\n"
                                "  assign(w, add(h, x))\n"
                                "  assign(steps, add(steps, constant(i64[], 1)))\n"
                                "  return sum(w, axes=[0])\n"
                                "}\n";

enum { STATE_N = 16384, STATE_CALLS = 60, SHARED = THREADS / 2, SAVE_EVERY = 10 };

typedef struct state_job {
    job j;
    nest_module *m;
    nest_kernel *k;
    nest_state *shared; /* called by this thread and one other */
    nest_state *own;    /* this thread's alone */
    nest_state *probe;  /* this thread's, loaded from the files it saves of `shared` */
    float (*ref_w)[STATE_N]; /* ref_w[k]: w after k calls */
} state_job;

static float state_x[STATE_N]; /* the argument of every call: ones */

/* Whether st holds the state of `steps` calls exactly (else why, into j). */
static bool state_is(state_job *s, nest_state *st, int64_t *steps_out)
{
    int64_t steps = *(int64_t *)nest_state_tensor(st, "steps");
    if (steps_out)
        *steps_out = steps;
    if (steps < 0 || steps > 2 * STATE_CALLS) {
        snprintf(s->j.why, sizeof s->j.why, "steps %lld out of range", (long long)steps);
        return false;
    }
    if (memcmp(nest_state_tensor(st, "w"), s->ref_w[steps], sizeof s->ref_w[0]) != 0) {
        snprintf(s->j.why, sizeof s->j.why, "w is not the value of %lld calls", (long long)steps);
        return false;
    }
    return true;
}

static void *state_job_run(void *arg)
{
    state_job *s = arg;
    float sum;
    void *args[1] = {state_x}, *res[1] = {&sum};
    char path[128];
    snprintf(path, sizeof path, "%s/shared-%d.state", root, s->j.id);
    int64_t last = 0;
    for (int c = 0; c < STATE_CALLS; c++) {
        if (nest_call_state(s->k, s->shared, args, 1, res, 1) != NEST_OK ||
            nest_call_state(s->k, s->own, args, 1, res, 1) != NEST_OK) {
            snprintf(s->j.why, sizeof s->j.why, "call: %s", nest_kernel_errmsg(s->k));
            s->j.fails++;
        }
        if (c % SAVE_EVERY == SAVE_EVERY - 1) { /* a snapshot while the other thread calls */
            int64_t steps;
            if (nest_state_save(s->shared, path) != NEST_OK ||
                nest_state_load(s->probe, path) != NEST_OK) {
                snprintf(s->j.why, sizeof s->j.why, "save or load: %s / %s",
                         nest_state_errmsg(s->shared), nest_state_errmsg(s->probe));
                s->j.fails++;
            } else if (!state_is(s, s->probe, &steps)) {
                s->j.fails++;
            } else if (steps < last + SAVE_EVERY) { /* this thread's own calls came before */
                snprintf(s->j.why, sizeof s->j.why, "a snapshot of %lld calls after %lld",
                         (long long)steps, (long long)last);
                s->j.fails++;
            } else {
                last = steps;
            }
        }
    }
    return NULL;
}

static void threads_state_objects(void **state)
{
    (void)state;
    nest_module *m = nest_parse(step_text, strlen(step_text), "step.nest");
    assert_int_equal(nest_module_errcode(m), NEST_OK);
    nest_options o;
    nest_options_init(&o);
    o.openmp = 0;
    nest_kernel *k = nest_compile(nest_module_find(m, "step"), &o);
    if (!k && nest_errcode(nest_module_find(m, "step")) == NEST_ERR_UNAVAILABLE)
        skip();
    assert_non_null(k);
    /* the values after k calls, by the same kernel in this thread */
    float (*ref_w)[STATE_N] = malloc((2 * STATE_CALLS + 1) * sizeof *ref_w);
    assert_non_null(ref_w);
    nest_state *ref = nest_state_new(m);
    float *x = state_x, sum;
    for (int i = 0; i < STATE_N; i++)
        x[i] = 1;
    for (int c = 0; c <= 2 * STATE_CALLS; c++) {
        memcpy(ref_w[c], nest_state_tensor(ref, "w"), sizeof ref_w[c]);
        assert_int_equal(nest_call_state(k, ref, (void *[]){x}, 1, (void *[]){&sum}, 1), NEST_OK);
    }
    nest_state_free(ref);
    nest_state *shared[SHARED];
    for (int i = 0; i < SHARED; i++)
        assert_non_null(shared[i] = nest_state_new(m));
    state_job jobs[THREADS];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (state_job){{.id = i}, m, k, shared[i % SHARED], nest_state_new(m),
                              nest_state_new(m), ref_w};
        assert_true(jobs[i].own && jobs[i].probe);
    }
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, state_job_run, &jobs[i]), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < THREADS; i++)
        if (jobs[i].j.fails)
            fail_msg("thread %d: %d failures, the last: %s", i, jobs[i].j.fails, jobs[i].j.why);
    /* no call lost: each shared state saw both its threads' calls, each own state its thread's */
    for (int i = 0; i < THREADS; i++) {
        int64_t steps;
        assert_true(state_is(&jobs[i], jobs[i].own, &steps));
        assert_int_equal(steps, STATE_CALLS);
        nest_state_free(jobs[i].own);
        nest_state_free(jobs[i].probe);
    }
    for (int i = 0; i < SHARED; i++) {
        int64_t steps;
        assert_true(state_is(&jobs[i], shared[i], &steps));
        assert_int_equal(steps, 2 * STATE_CALLS);
        nest_state_free(shared[i]);
    }
    free(ref_w);
    nest_kernel_free(k);
    nest_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(threads_compile, setup, teardown),
        cmocka_unit_test_setup_teardown(threads_call_one_kernel, setup, teardown),
        cmocka_unit_test_setup_teardown(threads_call_one_library, setup, teardown),
        cmocka_unit_test_setup_teardown(threads_state_objects, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
