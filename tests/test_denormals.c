/* test_denormals.c - nest_options.flush_denormals: a flushing call reads denormal floats as
 * zero and writes zero for results below the normal range, on every thread of its parallel
 * regions, and leaves the caller's mode as it found it; a keeping call is IEEE arithmetic, as
 * the reference interpreter; by default only the functions that assign state flush. Only x86
 * and AArch64 flush; elsewhere (and under valgrind) the flushing tests are skipped. */
#include <dlfcn.h>
#include <float.h>

#include "testutil.h"

/* The smallest normal float is FLT_MIN, 2^-126 (1.18e-38). */
#define TINY 1.5e-38f /* normal; half of it is not */
#define DENORMAL 3e-39f

static bool denormal(float v) { return v != 0 && fabsf(v) < FLT_MIN; }

/* Half of TINY in the thread's mode: a call, which the compiler cannot move past the mode's
 * changes */
__attribute__((noinline)) static float half_of_tiny(void)
{
    volatile float a = TINY, half = 0.5f;
    return a * half;
}

/* Whether this machine flushes when told to: only x86 and AArch64 do, and valgrind, for one,
 * runs the code with denormals whatever the mode says (it does not emulate FTZ and DAZ). The
 * flushing tests skip elsewhere. */
static bool machine_flushes(void)
{
#if ((defined(__x86_64__) || defined(__i386__)) && defined(__SSE__))
    unsigned csr = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(csr | 0x8040u);
    float h = half_of_tiny();
    __builtin_ia32_ldmxcsr(csr);
    return h == 0;
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr | (1u << 24)));
    float h = half_of_tiny();
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
    return h == 0;
#else
    return false;
#endif
}

static const char *const module_text =
    "persistent s: f32[4] = zeros\n"
    "func halve(x: f32[4]) -> f32[4] {\n"
    "  return multiply(x, broadcast(constant(f32[], 0.5), shape=[4], axes=[0]))\n"
    "}\n"
    "func halve_into_state(x: f32[4]) -> f32[4] {\n"
    "  h = multiply(x, broadcast(constant(f32[], 0.5), shape=[4], axes=[0]))\n"
    "  assign(s, h)\n"
    "  return h\n"
    "}\n"
    "func plus(x: f32[4], y: f32[4]) -> f32[4] {\n"
    "  return add(x, y)\n"
    "}\n";

static nest_kernel *compile(nest_module *m, const char *name, int flush, int openmp)
{
    nest_options o;
    nest_options_init(&o);
    o.flush_denormals = flush;
    o.openmp = openmp;
    nest_function *f = nest_module_find(m, name);
    assert_non_null(f);
    nest_kernel *k = nest_compile(f, &o);
    if (!k)
        print_error("%s\n", nest_errmsg(f));
    assert_non_null(k);
    return k;
}

/* Calls halve (or halve_into_state, with a state) on x and returns its results in r. */
static void call_halve(nest_kernel *k, nest_state *st, const float *x, float *r)
{
    void *args[1] = {(void *)x}, *res[1] = {r};
    int rc = st ? nest_call_state(k, st, args, 1, res, 1) : nest_call(k, args, 1, res, 1);
    assert_int_equal(rc, NEST_OK);
}

/* The caller's arithmetic keeps denormals before and after a flushing call. */
static void assert_caller_keeps(void) { assert_true(denormal(half_of_tiny())); }

/* Keeping: the results are the interpreter's, denormals included. */
static void keep_is_ieee(void **state)
{
    (void)state;
    nest_module *m = tu_parse(module_text, "denormals.nest");
    nest_kernel *k = compile(m, "halve", 0, 0);
    const float x[4] = {TINY, -TINY, DENORMAL, 3.0f};
    float got[4], want[4];
    call_halve(k, NULL, x, got);
    void *args[1] = {(void *)x}, *res[1] = {want};
    assert_int_equal(nest_evaluate(nest_module_find(m, "halve"), args, 1, res, 1), NEST_OK);
    assert_memory_equal(got, want, sizeof got);
    assert_true(got[0] > 0 && denormal(got[0]));
    assert_true(got[2] == DENORMAL * 0.5f);
    nest_kernel_free(k);
    nest_module_free(m);
}

/* Flushing: a result below the normal range is zero (of its sign), a denormal argument reads
 * as zero, and normal arithmetic is untouched; the caller's mode is back after the call. */
static void flush_results_and_arguments(void **state)
{
    (void)state;
    if (!machine_flushes())
        skip();
    nest_module *m = tu_parse(module_text, "denormals.nest");
    nest_kernel *k = compile(m, "halve", 1, 0);
    const float x[4] = {TINY, -TINY, DENORMAL, 3.0f};
    float got[4];
    assert_caller_keeps();
    call_halve(k, NULL, x, got);
    assert_caller_keeps();
    assert_true(got[0] == 0 && !signbit(got[0]));
    assert_true(got[1] == 0 && signbit(got[1]));
    assert_true(got[2] == 0);
    assert_true(got[3] == 1.5f);
    /* x + y with x denormal: x reads as zero, so the sum is y exactly */
    nest_kernel *p = compile(m, "plus", 1, 0);
    const float a[4] = {DENORMAL, DENORMAL, 1.0f, 0}, b[4] = {2e-38f, 1.0f, 2.0f, DENORMAL};
    float sum[4];
    void *args[2] = {(void *)a, (void *)b}, *res[1] = {sum};
    assert_int_equal(nest_call(p, args, 2, res, 1), NEST_OK);
    assert_true(sum[0] == 2e-38f);
    assert_true(sum[1] == 1.0f);
    assert_true(sum[2] == 3.0f);
    assert_true(sum[3] == 0);
    assert_caller_keeps();
    nest_kernel_free(p);
    nest_kernel_free(k);
    nest_module_free(m);
}

/* The default: the function that assigns state flushes, the other keeps. */
static void default_flushes_state_functions(void **state)
{
    (void)state;
    if (!machine_flushes())
        skip();
    nest_module *m = tu_parse(module_text, "denormals.nest");
    nest_kernel *plain = compile(m, "halve", -1, 0), *step = compile(m, "halve_into_state", -1, 0);
    nest_state *st = nest_state_new(m);
    assert_non_null(st);
    const float x[4] = {TINY, -TINY, 1.0f, 3.0f};
    float got[4];
    call_halve(plain, NULL, x, got);
    assert_true(got[0] > 0 && denormal(got[0]));
    call_halve(step, st, x, got);
    assert_true(got[0] == 0 && got[1] == 0 && got[2] == 0.5f && got[3] == 1.5f);
    const float *s = nest_state_tensor(st, "s");
    assert_non_null(s);
    assert_true(s[0] == 0 && s[2] == 0.5f);
    assert_caller_keeps();
    nest_state_free(st);
    nest_kernel_free(step);
    nest_kernel_free(plain);
    nest_module_free(m);
}

/* Parallel regions: every thread flushes. A loop of 2^20 elements and a 256^3 product (one
 * region of packs and tiles) run on several cores; each product of 1e-20 by 1e-20 is below the
 * normal range, so a flushing product is 0 and a keeping one 256e-40. The JIT's OpenMP (LLVM's)
 * hands the caller's mode to its threads at each region; gcc's, in a .so, does not: there each
 * thread must set its own. */
static const char *const parallel_text = "func big(x: f32[1048576]) -> f32[1048576] {\n"
                                         "  return multiply(x, broadcast(constant(f32[], 0.5), "
                                         "shape=[1048576], axes=[0]))\n"
                                         "}\n"
                                         "func prod(a: f32[256,256], b: f32[256,256]) -> "
                                         "f32[256,256] {\n"
                                         "  return dot(a, b)\n"
                                         "}\n";

enum { BIG = 1048576, SQ = 65536 };

typedef int (*big_fn)(const float *x, float *r);
typedef int (*prod_fn)(const float *a, const float *b, float *r);

/* The results of big and prod (given as kernels, or as a .so's functions) are flushed or
 * kept, and the caller's mode is its own again. */
static void check_parallel(int flush, nest_kernel *kbig, nest_kernel *kprod, big_fn big,
                           prod_fn prod)
{
    float *x = malloc(BIG * sizeof *x), *r = malloc(BIG * sizeof *r);
    float *a = malloc(SQ * sizeof *a), *c = malloc(SQ * sizeof *c);
    assert_true(x && r && a && c);
    for (int64_t i = 0; i < BIG; i++)
        x[i] = TINY;
    for (int i = 0; i < SQ; i++)
        a[i] = 1e-20f;
    void *args[2] = {x}, *res[1] = {r};
    assert_int_equal(kbig ? nest_call(kbig, args, 1, res, 1) : big(x, r), NEST_OK);
    int64_t zeros = 0;
    for (int64_t i = 0; i < BIG; i++)
        zeros += r[i] == 0;
    assert_int_equal(zeros, flush ? BIG : 0);
    args[0] = args[1] = a;
    res[0] = c;
    assert_int_equal(kprod ? nest_call(kprod, args, 2, res, 1) : prod(a, a, c), NEST_OK);
    float want = flush ? 0 : 1e-20f * 1e-20f * 256;
    for (int i = 0; i < SQ; i++)
        if (fabsf(c[i] - want) > 1e-44f) {
            print_error("element %d of the product: %g, want %g\n", i, (double)c[i],
                        (double)want);
            fail();
        }
    assert_caller_keeps();
    free(x);
    free(r);
    free(a);
    free(c);
}

static void parallel_jit(void **state)
{
    (void)state;
    nest_module *m = tu_parse(parallel_text, "parallel.nest");
    /* keeping first: the threads of the first region start in the caller's mode */
    for (int round = 0; round < 3; round++) {
        int flush = round % 2;
        if (flush && !machine_flushes())
            continue;
        nest_kernel *big = compile(m, "big", flush, 1), *prod = compile(m, "prod", flush, 1);
        check_parallel(flush, big, prod, NULL, NULL);
        nest_kernel_free(prod);
        nest_kernel_free(big);
    }
    nest_module_free(m);
}

static void parallel_so(void **state)
{
    (void)state;
    char root[64], path[2][128];
    assert_int_equal(tu_tmp_cache(root, sizeof root, "nest-denormals"), 0);
    nest_module *m = tu_parse(parallel_text, "parallel.nest");
    void *so[2] = {NULL, NULL};
    for (int flush = 0; flush < 2; flush++) {
        nest_options o;
        nest_options_init(&o);
        o.flush_denormals = flush;
        o.cc = "gcc";
        snprintf(path[flush], sizeof path[flush], "%s/par%d.so", root, flush);
        if (nest_module_build_so(m, path[flush], NULL, &o, NULL) != NEST_OK) {
            print_error("%s\n", nest_module_errmsg(m));
            fail();
        }
        so[flush] = dlopen(path[flush], RTLD_NOW | RTLD_LOCAL);
        assert_non_null(so[flush]);
    }
    /* keeping first (its region starts gcc's threads in the caller's mode), then flushing,
     * then keeping again: each thread put its mode back */
    for (int round = 0; round < 3; round++) {
        int flush = round % 2;
        if (flush && !machine_flushes())
            continue;
        big_fn big;
        prod_fn prod;
        *(void **)&big = dlsym(so[flush], "big");
        *(void **)&prod = dlsym(so[flush], "prod");
        assert_true(big && prod);
        check_parallel(flush, NULL, NULL, big, prod);
    }
    /* OpenMP's threads stay parked in the runtime: the objects stay mapped (test_runtime) */
    nest_module_free(m);
    tu_rm_rf(root);
}

/* The generated C names its mode: the helpers once however many functions flush, none when
 * nothing does. */
static void emitted_text(void **state)
{
    (void)state;
    nest_module *m = tu_parse(module_text, "denormals.nest");
    nest_options o;
    nest_options_init(&o);
    o.flush_denormals = 1;
    char *c = nest_module_emit(m, NEST_EMIT_C, &o);
    assert_non_null(c);
    const char *first = strstr(c, "Denormal floats are flushed during a call");
    assert_non_null(first);
    assert_null(strstr(first + 1, "Denormal floats are flushed during a call"));
    assert_non_null(strstr(c, "= nest_flush_enter();"));
    free(c);
    o.flush_denormals = 0;
    c = nest_module_emit(m, NEST_EMIT_C, &o);
    assert_non_null(c);
    assert_null(strstr(c, "nest_flush"));
    free(c);
    nest_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keep_is_ieee),
        cmocka_unit_test(flush_results_and_arguments),
        cmocka_unit_test(default_flushes_state_functions),
        cmocka_unit_test(parallel_jit),
        cmocka_unit_test(parallel_so),
        cmocka_unit_test(emitted_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
