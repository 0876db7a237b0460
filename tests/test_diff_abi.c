/* test_diff_abi.c - the boundary of the compiled code, through the harness of diffcase.c: the
 * typed entry points of an ahead-of-time library (with and without a workspace), dlclose of a
 * library whose kernels ran on threads, names (hostile ones refused with a clear error, ones
 * that collide with the emitter's own or a library's renamed), compiled results against values
 * worked out by hand (anchors, not the interpreter), and nest_call's checks of its arguments.
 *
 * NEST_DIFF_VERBOSE=1, NEST_DIFF_TEST=pattern, NEST_DIFF_ONLY=text and NEST_DIFF_DUMP=case work
 * as in test_diff.c.
 */
#include <dlfcn.h>
#include <float.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "diffcase.h"

/* ---------------------------------------------------------------------------------------------
 * Ahead of time: typed entry points, dlclose
 * ------------------------------------------------------------------------------------------- */


/* The typed entry points NAME(const float *x, ..., float *r), called through casts, for a
 * function without and one with a workspace (whose NAME allocates it). */
static void build_typed_plain(bctx *b, const void *arg)
{
    (void)arg;
    shp v = {1, {1000}};
    nest_value x = PS(b, NEST_F32, &v, G_GENERAL), y = PS(b, NEST_F32, &v, G_GENERAL);
    R(b, nest_subtract(b->f, nest_multiply(b->f, x, y), x), R_ARITH, "x * y - x");
}

static void build_typed_ws(bctx *b, const void *arg)
{
    (void)arg;
    nest_function *f = b->f;
    shp xs = {2, {8, 40}}, ws = {2, {40, 24}}, bs = {1, {24}};
    nest_value x = PS(b, NEST_F64, &xs, G_EXACT), w = PS(b, NEST_F64, &ws, G_EXACT);
    nest_value bias = PS(b, NEST_F64, &bs, G_EXACT);
    nest_value h = nest_dot(f, x, w);
    nest_value z = nest_add(f, h, nest_broadcast(f, bias, 2, SHAPE(8, 24), 1, SHAPE(0)));
    nest_value zero = nest_constant(f, NEST_F64, 0, NULL, (const double[]){0}, 1);
    R(b, nest_maximum(f, z, nest_broadcast(f, zero, 2, SHAPE(8, 24), 2, SHAPE(0, 1))), R_EXACT,
      "relu(x . w + b)");
    R(b, nest_sum(f, h, 1, SHAPE(0)), R_EXACT, "sum of x . w");
}

typedef int (*typed3_fn)(const float *, const float *, float *);
typedef int (*typed5_fn)(const double *, const double *, const double *, double *, double *);

static void test_aot_typed(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t vi = 0; vi < countof_(VARIANTS); vi++) {
        const variant *v = &VARIANTS[vi];
        if (!v->cc)
            continue;
        prepared pr;
        prepare(&pr, "typed_plain", build_typed_plain, NULL, NEST_ROW_MAJOR, false);
        void *h = build_and_load(&pr.b->f, 1, v);
        void *sym = h ? fn_sym(h, "typed_plain") : NULL;
        if (!sym) {
            print_error("%s: typed_plain is missing\n", v->what);
            bad++;
        } else {
            typed3_fn fn;
            memcpy(&fn, &sym, sizeof fn);
            arrays_poison(&pr.got);
            int rc = fn(pr.args.p[0], pr.args.p[1], pr.got.p[0]);
            bad += rc != 0 ? 1 : verify(&pr, v->what);
            /* the workspace entry points exist only where there is a workspace */
            bad += fn_sym(h, "typed_plain_call_ws") != NULL;
            bad += fn_sym(h, "typed_plain_workspace_size") != NULL;
        }
        release(&pr);

        prepare(&pr, "typed_ws", build_typed_ws, NULL, NEST_ROW_MAJOR, false);
        h = build_and_load(&pr.b->f, 1, v);
        sym = h ? fn_sym(h, "typed_ws") : NULL;
        void *wsz = h ? fn_sym(h, "typed_ws_workspace_size") : NULL;
        if (!sym || !wsz) {
            print_error("%s: typed_ws or typed_ws_workspace_size is missing\n", v->what);
            bad++;
        } else {
            typed5_fn fn;
            ws_size_fn size;
            memcpy(&fn, &sym, sizeof fn);
            memcpy(&size, &wsz, sizeof size);
            if (size() == 0) {
                print_error("%s: typed_ws_workspace_size() is 0\n", v->what);
                bad++;
            }
            arrays_poison(&pr.got);
            int rc = fn(pr.args.p[0], pr.args.p[1], pr.args.p[2], pr.got.p[0], pr.got.p[1]);
            bad += rc != 0 ? 1 : verify(&pr, v->what);
            arrays_poison(&pr.got);
            bad += so_call(h, pr.b->f, v->what, &pr.args, &pr.got) ? verify(&pr, v->what) : 1;
        }
        release(&pr);
    }
    assert_int_equal(bad, 0);
}

/* dlclose of a .so built with OpenMP, in a fresh process (this program run again): the process
 * must go on living. With gcc's -fopenmp the .so brings libgomp, and dlclose unloads it while
 * the worker threads of its pool still spin in it. */
#define DLCLOSE_N 4194304

static void build_dlclose(bctx *b, const void *arg)
{
    (void)arg;
    shp v = {1, {DLCLOSE_N}};
    nest_value x = PS(b, NEST_F32, &v, G_GENERAL), y = PS(b, NEST_F32, &v, G_GENERAL);
    R(b, nest_add(b->f, x, y), R_ARITH, "x + y");
}

/* The child: loads the .so, calls it, closes it, lives on a little. Exit status 0 if it got
 * there (a crash shows as a signal). */
static int dlclose_child(const char *so)
{
    float *x = calloc(DLCLOSE_N, sizeof *x), *r = calloc(DLCLOSE_N, sizeof *r);
    if (!x || !r)
        return 3;
    for (int round = 0; round < 3; round++) {
        void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 2;
        }
        void *c = dlsym(h, "dlclose_case_call");
        if (!c)
            return 2;
        call_fn call;
        memcpy(&call, &c, sizeof call);
        for (int k = 0; k < 4; k++)
            if (call((void *[]){x, x}, (void *[]){r}) != 0)
                return 4;
        dlclose(h);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    free(x);
    free(r);
    return 0;
}

static void test_aot_dlclose(void **state)
{
    (void)state;
    if (getenv("NEST_DIFF_ONLY"))
        return;
    int failed = 0;
    for (size_t vi = 0; vi < countof_(VARIANTS); vi++) {
        const variant *v = &VARIANTS[vi];
        if (!v->cc)
            continue;
        bctx *b = build("dlclose_case", build_dlclose, NULL, NEST_ROW_MAJOR, false);
        nest_options o;
        nest_options_init(&o);
        o.cc = v->cc;
        char so[256], cmd[600];
        temp_path(so, sizeof so, "dlclose_case", ".so");
        int st = nest_build_so(&b->f, 1, so, NULL, &o, NULL);
        if (st != NEST_OK)
            print_error("%s: nest_build_so: %s\n", v->what, nest_errmsg(b->f));
        assert_int_equal(st, NEST_OK);
        bctx_free(b);
        snprintf(cmd, sizeof cmd, "NEST_DIFF_CHILD_DLCLOSE='%s' exec /proc/%d/exe", so,
                 (int)getpid());
        int rc = system(cmd);
        /* the shell execs the child: its status is the child's */
        if (rc != 0) {
            failed++;
            if (WIFSIGNALED(rc))
                print_error("%s: a process that dlopen()s, calls and dlclose()s a nest .so built "
                            "with OpenMP (cc %s) was killed by signal %d\n",
                            v->what, v->cc, WTERMSIG(rc));
            else
                print_error("%s: the dlclose child (cc %s) exited with status %d\n", v->what,
                            v->cc, WEXITSTATUS(rc));
        }
        remove(so);
    }
    assert_int_equal(failed, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Names: hostile ones are refused with a clear error; ones that collide with the emitter's own
 * identifiers (or the C library's) give correct code or a clear error
 * ------------------------------------------------------------------------------------------- */

static void test_hostile_names(void **state)
{
    (void)state;
    char longname[301];
    memset(longname, 'a', 300);
    longname[300] = '\0';
    struct {
        const char *name;
        int code;
        const char *part;
    } bad[] = {
        {"x;system(\"id\")", NEST_ERR_ARG, "not an identifier"},
        {"int", NEST_ERR_ARG, "keyword"},
        {"nest_x", NEST_ERR_ARG, "reserved"},
        {longname, NEST_ERR_LIMIT, "300 characters"},
        {"", NEST_ERR_ARG, "identifier"},
        {"a b", NEST_ERR_ARG, "identifier"},
        {"x*/", NEST_ERR_ARG, "identifier"},
        {"__x", NEST_ERR_ARG, "reserved"},
        {"_X", NEST_ERR_ARG, "reserved"},
        {"_OPENMP", NEST_ERR_ARG, "reserved"},
        {"restrict", NEST_ERR_ARG, "keyword"},
        {"\xc3\xa9t\xc3\xa9", NEST_ERR_ARG, "identifier"},
    };
    for (size_t i = 0; i < countof_(bad); i++) {
        /* as a function name: the error stays on the handle; every builder fails after it */
        nest_function *f = nest_function_new(bad[i].name);
        assert_non_null(f);
        assert_error(f, bad[i].code, bad[i].part);
        assert_int_equal(nest_parameter(f, "x", NEST_F32, 0, NULL, NEST_ROW_MAJOR), NEST_NONE);
        assert_null(nest_compile(f, NULL));
        assert_null(nest_emit(&f, 1, NEST_EMIT_C, NULL));
        nest_function_free(f);
        /* as a parameter name and as a value name */
        f = nest_function_new("f");
        assert_int_equal(nest_parameter(f, bad[i].name, NEST_F32, 0, NULL, NEST_ROW_MAJOR),
                         NEST_NONE);
        assert_error(f, bad[i].code, bad[i].part);
        nest_clear_error(f);
        nest_value x = nest_parameter(f, "x", NEST_F32, 0, NULL, NEST_ROW_MAJOR);
        assert_value(f, x);
        nest_value y = nest_negative(f, x);
        assert_int_not_equal(nest_set_name(f, y, bad[i].name), NEST_OK);
        assert_error(f, bad[i].code, bad[i].part);
        nest_function_free(f);
    }
}

/* The same with values named exactly like the emitter's identifiers (no parameters of those
 * names). */
static void build_value_names(bctx *b, const void *arg)
{
    (void)arg;
    nest_function *f = b->f;
    shp v = {1, {300}}, m = {2, {30, 10}};
    nest_value x = PS(b, NEST_F32, &v, G_GENERAL), y = PS(b, NEST_I32, &m, G_GENERAL);
    nest_value prev = x, iprev = y;
    for (size_t i = 0; i < NCOLLIDING; i++) {
        nest_value w = i % 2 ? nest_add(f, prev, x) : nest_multiply(f, prev, nest_tanh(f, x));
        nest_value iw = nest_add(f, iprev, nest_sum(f, nest_reshape(f, iprev, NULL, 2,
                                                                   SHAPE(30, 10)), 0, NULL));
        if (nest_set_name(f, i % 3 ? w : iw, COLLIDING[i]) != NEST_OK)
            return;
        prev = w;
        iprev = iw;
    }
    R(b, prev, R_TRANS, "float chain");
    R(b, iprev, R_EXACT, "integer chain");
    R(b, nest_sum(f, iprev, 2, SHAPE(0, 1)), R_EXACT, "integer sum");
}

/* Tiled products whose parameters are named like the block loops' indexes (ii, jj, s): a
 * bias and a residual absorbed into the stores, read inside those loops; a transposed product
 * in blocks of several tiles (tile.c) whose first factor is s. */
static void build_tile_names(bctx *b, const void *arg)
{
    (void)arg;
    nest_function *f = b->f;
    nest_value a = P(b, NEST_F32, 2, SHAPE(40, 300), G_GENERAL);
    nest_value w = P(b, NEST_F32, 2, SHAPE(300, 128), G_GENERAL);
    nest_value ii = nest_parameter(f, "ii", NEST_F32, 2, SHAPE(40, 128), NEST_ROW_MAJOR);
    nest_value jj = nest_parameter(f, "jj", NEST_F32, 2, SHAPE(40, 128), NEST_ROW_MAJOR);
    nest_value s = nest_parameter(f, "s", NEST_F32, 2, SHAPE(901, 300), NEST_ROW_MAJOR);
    for (int i = 0; i < 3 && b->np < MAXP; i++) /* ii, jj and s, as P registers its own */
        b->gen[b->np++] = G_GENERAL;
    nest_value h = nest_dot(f, M(b, a), M(b, w));
    nest_value bias = b->mag ? nest_abs(f, ii) : ii, res = b->mag ? nest_abs(f, jj) : jj;
    RS(b, nest_add(f, nest_add(f, h, bias), res), 302, "dot(a, w) + ii + jj");
    nest_value st = nest_reshape(f, s, SHAPE(1, 0), 2, SHAPE(300, 901));
    RS(b, nest_dot(f, M(b, a), M(b, st)), 300, "dot(a, s^T)");
}

static void test_colliding_names(void **state)
{
    (void)state;
    check_case("emit_names", build_emit_names, NULL, V_STD | V_AOT | V_AOT_CLANG);
    check_case("tile_names", build_tile_names, NULL, V_STD | V_AOT);
    check_case("value_names", build_value_names, NULL, V_STD | V_AOT);
    /* function names that are the emitter's (or a parameter's) identifiers */
    const char *fnames[] = {"ws", "u", "i0", "args", "results", "workspace", "rc", "acc",
                            "result0", "x", "f_call_ws", "t"};
    for (size_t i = 0; i < countof_(fnames); i++)
        check_case(fnames[i], build_typed_ws, NULL, V_FUSE | V_AOT);
}

/* Functions named like what the C library headers of the generated C declare (or C++): a clear
 * error from every path that makes C, not broken C. */
static void test_library_function_names(void **state)
{
    (void)state;
    const char *names[] = {"exp", "expf", "sqrtl", "malloc", "free", "memcpy", "abs", "NAN",
                           "INFINITY", "NULL", "INT32_MIN", "int32_t", "size_t", "class",
                           "new", "linux", "errno", "isnan"};
    for (size_t i = 0; i < countof_(names); i++) {
        nest_function *f = nest_function_new(names[i]);
        nest_value x = nest_parameter(f, "x", NEST_F32, 1, SHAPE(3), NEST_ROW_MAJOR);
        assert_ok(f, nest_return(f, 1, VALUES(nest_negative(f, x)), NULL));
        assert_null(nest_compile(f, NULL));
        assert_error(f, NEST_ERR_ARG, "cannot be compiled");
        assert_non_null(strstr(nest_errmsg(f), names[i]));
        nest_clear_error(f);
        assert_null(nest_emit(&f, 1, NEST_EMIT_H, NULL));
        assert_error(f, NEST_ERR_ARG, "cannot be compiled");
        nest_clear_error(f);
        char so[256];
        temp_path(so, sizeof so, "libname", ".so");
        assert_int_equal(nest_build_so(&f, 1, so, NULL, NULL, NULL), NEST_ERR_ARG);
        assert_error(f, NEST_ERR_ARG, "cannot be compiled");
        nest_function_free(f);
    }
}

/* Two functions whose entry points collide in one C file: a clear error, not broken C. */
static void test_colliding_functions(void **state)
{
    (void)state;
    const char *pairs[][2] = {{"f", "f_call"}, {"g", "g_impl"}, {"h", "h_call_ws"},
                              {"k", "k_workspace_size"}, {"m", "m"}};
    for (size_t i = 0; i < countof_(pairs); i++) {
        nest_function *fns[2];
        for (int j = 0; j < 2; j++) {
            fns[j] = nest_function_new(pairs[i][j]);
            nest_value x = nest_parameter(fns[j], "x", NEST_F32, 1, SHAPE(3), NEST_ROW_MAJOR);
            assert_ok(fns[j], nest_return(fns[j], 1, VALUES(nest_negative(fns[j], x)), NULL));
        }
        char *c = nest_emit(fns, 2, NEST_EMIT_C, NULL);
        if (c) {
            /* if the emitter accepts the pair, the C must compile */
            char path[256], cmd[600];
            temp_path(path, sizeof path, "pair", ".c");
            assert_true(write_file(path, c));
            snprintf(cmd, sizeof cmd, "gcc -std=c99 -Wall -Wextra -pedantic -Werror -c %s -o %s.o",
                     path, path);
            assert_true(run_cmd(cmd));
            snprintf(cmd, sizeof cmd, "%s.o", path);
            remove(cmd);
            remove(path);
            nest_string_free(c);
        } else {
            assert_true(nest_errcode(fns[0]) == NEST_ERR_ARG || nest_errcode(fns[1]) == NEST_ERR_ARG);
            const char *msg = nest_errcode(fns[1]) ? nest_errmsg(fns[1]) : nest_errmsg(fns[0]);
            assert_non_null(strstr(msg, pairs[i][1]));
        }
        /* one at a time, each is fine */
        for (int j = 0; j < 2; j++) {
            nest_clear_error(fns[j]);
            nest_kernel *k = nest_compile(fns[j], NULL);
            if (!k)
                print_error("%s: %s\n", pairs[i][j], nest_errmsg(fns[j]));
            assert_non_null(k);
            nest_kernel_free(k);
            nest_function_free(fns[j]);
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Anchors: compiled results against values worked out by hand (not by the interpreter)
 * ------------------------------------------------------------------------------------------- */

static void test_anchors(void **state)
{
    (void)state;
    /* integers: wrapping, x / 0 = 0, INT_MIN / -1, power with negative exponents */
    nest_function *f = nest_function_new("anchor_int");
    nest_value a = nest_parameter(f, "a", NEST_I32, 1, SHAPE(6), NEST_ROW_MAJOR);
    nest_value b = nest_parameter(f, "b", NEST_I32, 1, SHAPE(6), NEST_ROW_MAJOR);
    assert_ok(f, nest_return(f, 5,
                             VALUES(nest_add(f, a, b), nest_multiply(f, a, b), nest_divide(f, a, b),
                                    nest_power(f, a, b), nest_sum(f, a, 1, SHAPE(0))),
                             NULL));
    int32_t av[6] = {INT32_MAX, INT32_MIN, 7, -7, 2, -1}, bv[6] = {1, -1, 0, 2, -2, -3};
    anchor(f, (void *[]){av, bv},
           (const void *[]){(int32_t[]){INT32_MIN, INT32_MAX, 7, -5, 0, -4},
                            (int32_t[]){INT32_MAX, INT32_MIN, 0, -14, -4, 3},
                            (int32_t[]){INT32_MAX, INT32_MIN, 0, -3, -1, 0},
                            (int32_t[]){INT32_MAX, 0, 1, 49, 0, -1},
                            (int32_t[]){0}});
    nest_function_free(f);

    /* conversions: truncation, saturation, NaN to 0, to bool */
    f = nest_function_new("anchor_convert");
    nest_value x = nest_parameter(f, "x", NEST_F64, 1, SHAPE(7), NEST_ROW_MAJOR);
    assert_ok(f, nest_return(f, 3,
                             VALUES(nest_convert(f, x, NEST_I32), nest_convert(f, x, NEST_I64),
                                    nest_convert(f, x, NEST_BOOL)),
                             NULL));
    double xv[7] = {-1.9, 2.9, NAN, 3e9, -3e9, 1e300, -0.0};
    anchor(f, (void *[]){xv},
           (const void *[]){(int32_t[]){-1, 2, 0, INT32_MAX, INT32_MIN, INT32_MAX, 0},
                            (int64_t[]){-1, 2, 0, 3000000000, -3000000000, INT64_MAX, 0},
                            (uint8_t[]){1, 1, 1, 1, 1, 1, 0}});
    nest_function_free(f);

    /* a product of matrices, a transpose, a broadcast, max and min over NaN */
    f = nest_function_new("anchor_struct");
    nest_value m = nest_parameter(f, "m", NEST_F32, 2, SHAPE(2, 3), NEST_ROW_MAJOR);
    nest_value n = nest_parameter(f, "n", NEST_F32, 2, SHAPE(3, 2), NEST_ROW_MAJOR);
    nest_value v = nest_parameter(f, "v", NEST_F32, 1, SHAPE(4), NEST_ROW_MAJOR);
    assert_ok(f, nest_return(f, 6,
                             VALUES(nest_dot(f, m, n), nest_reshape(f, m, SHAPE(1, 0), 2, SHAPE(3, 2)),
                                    nest_add(f, m, nest_broadcast(f, nest_slice(f, v, SHAPE(0),
                                                                                SHAPE(3), NULL),
                                                                  2, SHAPE(2, 3), 1, SHAPE(0))),
                                    nest_max(f, v, 1, SHAPE(0)), nest_min(f, v, 1, SHAPE(0)),
                                    nest_concat(f, 2, VALUES(v, nest_negative(f, v)), 0)),
                             NULL));
    float mv[6] = {1, 2, 3, 4, 5, 6}, nv[6] = {7, 8, 9, 10, 11, 12}, vv[4] = {NAN, -2, 5, NAN};
    anchor(f, (void *[]){mv, nv, vv},
           (const void *[]){(float[]){58, 64, 139, 154}, (float[]){1, 4, 2, 5, 3, 6},
                            (float[]){NAN, 0, 8, NAN, 3, 11}, (float[]){5}, (float[]){-2},
                            (float[]){NAN, -2, 5, NAN, NAN, 2, -5, NAN}});
    nest_function_free(f);
}

/* ---------------------------------------------------------------------------------------------
 * nest_call's checks of its arguments
 * ------------------------------------------------------------------------------------------- */

static void test_call_errors(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("callee");
    nest_value x = nest_parameter(f, "x", NEST_F32, 1, SHAPE(4), NEST_ROW_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F32, 1, SHAPE(4), NEST_ROW_MAJOR);
    nest_value e = nest_parameter(f, "e", NEST_I32, 1, SHAPE(0), NEST_ROW_MAJOR);
    assert_ok(f, nest_return(f, 3, VALUES(nest_add(f, x, y), nest_sum(f, x, 1, SHAPE(0)),
                                          nest_negative(f, e)),
                             NULL));
    nest_kernel *k = nest_compile(f, NULL);
    if (!k)
        print_error("%s\n", nest_errmsg(f));
    assert_non_null(k);
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, r[4], s[1], keep[4];
    int32_t ev[1], er[1];
    memcpy(keep, a, sizeof a);
    void *args[3] = {a, b, ev}, *res[3] = {r, s, er};
#define CALL_FAILS(call, part)                                                                  \
    do {                                                                                        \
        assert_int_equal((call), NEST_ERR_CALL);                                                \
        if (!strstr(nest_kernel_errmsg(k), (part)))                                             \
            print_error("message \"%s\" lacks \"%s\"\n", nest_kernel_errmsg(k), (part));        \
        assert_non_null(strstr(nest_kernel_errmsg(k), (part)));                                 \
    } while (0)
    CALL_FAILS(nest_call(k, args, 2, res, 3), "3 arguments");
    CALL_FAILS(nest_call(k, args, 4, res, 3), "given 4");
    CALL_FAILS(nest_call(k, args, 3, res, 2), "3 results");
    CALL_FAILS(nest_call(k, args, 3, res, 0), "given 3 and 0");
    CALL_FAILS(nest_call(k, NULL, 3, res, 3), "NULL");
    CALL_FAILS(nest_call(k, args, 3, NULL, 3), "NULL");
    CALL_FAILS(nest_call(k, (void *[]){a, NULL, ev}, 3, res, 3), "argument 2 is NULL");
    CALL_FAILS(nest_call(k, args, 3, (void *[]){r, NULL, er}, 3), "result 2 is NULL");
    CALL_FAILS(nest_call(k, args, 3, (void *[]){a, s, er}, 3), "result 1 is the array of argument 1");
    CALL_FAILS(nest_call(k, args, 3, (void *[]){r, b, er}, 3), "result 2 is the array of argument 2");
    CALL_FAILS(nest_call(k, args, 3, (void *[]){r, r, er}, 3), "results 1 and 2 are the same");
#undef CALL_FAILS
    /* nothing was written by the refused calls */
    assert_memory_equal(a, keep, sizeof a);
    /* empty arrays may be NULL, and may be the same */
    assert_int_equal(nest_call(k, (void *[]){a, b, NULL}, 3, (void *[]){r, s, NULL}, 3), NEST_OK);
    assert_int_equal(nest_call(k, (void *[]){a, b, ev}, 3, (void *[]){r, s, ev}, 3), NEST_OK);
    /* hand-computed anchors */
    assert_true(r[0] == 11 && r[1] == 22 && r[2] == 33 && r[3] == 44 && s[0] == 10);
    /* one array for both arguments */
    assert_int_equal(nest_call(k, (void *[]){b, b, ev}, 3, res, 3), NEST_OK);
    assert_true(r[0] == 20 && r[3] == 80 && s[0] == 100);
    assert_int_equal(nest_call(NULL, args, 3, res, 3), NEST_ERR_ARG);
    nest_kernel_free(k);
    nest_function_free(f);
}

/* ---------------------------------------------------------------------------------------------
 * The suite
 * ------------------------------------------------------------------------------------------- */

int main(void)
{
    const char *child = getenv("NEST_DIFF_CHILD_DLCLOSE");
    if (child)
        return dlclose_child(child);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aot_typed),
        cmocka_unit_test(test_aot_dlclose),
        cmocka_unit_test(test_hostile_names),
        cmocka_unit_test(test_colliding_names),
        cmocka_unit_test(test_colliding_functions),
        cmocka_unit_test(test_library_function_names),
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_call_errors),
    };
    return run_diff_tests(tests);
}
