/*
 * testutil.h - small helpers shared by the cmocka tests.
 *
 *   SHAPE(2, 3)              a const int64_t array literal (shapes, axes, orders, bounds)
 *   fn_setup / fn_teardown   a fixture: *state is a fresh nest_function named "f"
 *   assert_close(...)        compares arrays of one element type: integers and bool exactly,
 *                            floats within |got - want| <= atol + rtol * |want|, NaN equal to NaN,
 *                            infinities exactly; reports the first mismatching index
 *   assert_error(f, code, s) the function's last error is `code` and its message contains s
 *   assert_ok(f, call)       the call returned NEST_OK (prints the function's message if not)
 *   evaluate(f, args, res)   nest_evaluate with the counts the function declares
 *   tu_parse(text, file)     the module of a text that must parse (file names it)
 *   tu_parse_fails(t, f, s)  the text does not parse and the error contains s
 *   tu_write_file(path, s)   writes a string to a file
 *   tu_under_valgrind()      under make valgrind: skip bounds on time
 *   tu_rm_rf(path)           removes a test's temporary directory
 *   tu_tmp_cache(root, n, p) makes a temporary directory /tmp/p-XXXXXX into root, with the
 *                            compile cache (XDG_CACHE_HOME) under it
 */
#ifndef NEST_TESTUTIL_H
#define NEST_TESTUTIL_H

#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "nest.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALUES(...) ((const nest_value[]){__VA_ARGS__})

static inline int fn_setup(void **state)
{
    nest_function *f = nest_function_new("f");
    *state = f;
    return f ? 0 : -1;
}

static inline int fn_teardown(void **state)
{
    nest_function_free(*state);
    return 0;
}

/* The element i of an array of type t, as a double (integers above 2^53 compare through
 * tu_int instead). */
static inline double tu_float(nest_type t, const void *p, int64_t i)
{
    return t == NEST_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static inline int64_t tu_int(nest_type t, const void *p, int64_t i)
{
    switch (t) {
    case NEST_I32: return ((const int32_t *)p)[i];
    case NEST_I64: return ((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static inline void tu_assert_close(nest_type t, const void *got, const void *want, int64_t n,
                                   double atol, double rtol, const char *file, int line)
{
    for (int64_t i = 0; i < n; i++) {
        if (t == NEST_F32 || t == NEST_F64) {
            double g = tu_float(t, got, i), w = tu_float(t, want, i);
            bool ok = (isnan(g) && isnan(w)) || g == w ||
                      (isfinite(g) && isfinite(w) && fabs(g - w) <= atol + rtol * fabs(w));
            if (!ok) {
                print_error("element %lld of %lld: got %.17g, want %.17g (atol %g, rtol %g)\n",
                            (long long)i, (long long)n, g, w, atol, rtol);
                _fail(file, line);
            }
        } else {
            int64_t g = tu_int(t, got, i), w = tu_int(t, want, i);
            if (g != w) {
                print_error("element %lld of %lld: got %lld, want %lld\n", (long long)i,
                            (long long)n, (long long)g, (long long)w);
                _fail(file, line);
            }
        }
    }
}
#define assert_close(t, got, want, n, atol, rtol)                                              \
    tu_assert_close((t), (got), (want), (n), (atol), (rtol), __FILE__, __LINE__)
/* Exact comparison (floats: equal or both NaN). */
#define assert_exact(t, got, want, n) assert_close((t), (got), (want), (n), 0.0, 0.0)

static inline void tu_assert_error(const nest_function *f, int code, const char *part,
                                   const char *file, int line)
{
    const char *msg = nest_errmsg(f);
    if (nest_errcode(f) != code || (part && !strstr(msg, part))) {
        print_error("error %d (%s) \"%s\"; expected %d (%s) containing \"%s\"\n", nest_errcode(f),
                    nest_status_str(nest_errcode(f)), msg, code, nest_status_str(code),
                    part ? part : "");
        _fail(file, line);
    }
}
#define assert_error(f, code, part) tu_assert_error((f), (code), (part), __FILE__, __LINE__)

static inline void tu_assert_ok(const nest_function *f, int status, const char *call,
                                const char *file, int line)
{
    if (status != NEST_OK) {
        print_error("%s returned %d (%s): %s\n", call, status, nest_status_str(status),
                    nest_errmsg(f));
        _fail(file, line);
    }
}
#define assert_ok(f, call) tu_assert_ok((f), (call), #call, __FILE__, __LINE__)

/* A builder's value is valid; prints the function's error if not. */
static inline void tu_assert_value(const nest_function *f, nest_value v, const char *file, int line)
{
    if (v < 0) {
        print_error("builder failed: %s\n", nest_errmsg(f));
        _fail(file, line);
    }
}
#define assert_value(f, v) tu_assert_value((f), (v), __FILE__, __LINE__)

/* Under valgrind (make valgrind sets NEST_TEST_VALGRIND): code runs tens of times slower, so
 * bounds on time say nothing, and its CPU emulation converts int64 to float through double. */
static inline bool tu_under_valgrind(void) { return getenv("NEST_TEST_VALGRIND") != NULL; }

/* rm -rf path (a test's temporary directory), also through directories left unwritable. */
static inline int tu_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    chmod(path, 0700);
    return remove(path);
}
static inline void tu_rm_rf(const char *path) { nftw(path, tu_rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* A test's temporary directory /tmp/prefix-XXXXXX (its path into root), the compile cache
 * under it: 0, or -1 when it cannot be made. */
static inline int tu_tmp_cache(char *root, size_t size, const char *prefix)
{
    snprintf(root, size, "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(root))
        return -1;
    char xdg[4096];
    snprintf(xdg, sizeof xdg, "%s/xdg", root);
    return setenv("XDG_CACHE_HOME", xdg, 1);
}

/* The nestc under test: $NESTC (the build's, from make), or bin/nestc. */
static inline const char *tu_nestc(void)
{
    const char *s = getenv("NESTC");
    return s && *s ? s : "bin/nestc";
}

/* All that is left of a stream, as a malloc'd string (the test fails when memory runs out). */
static inline char *tu_read_all(FILE *in)
{
    size_t len = 0, cap = 4096;
    char *s = malloc(cap);
    assert_non_null(s);
    size_t n;
    while ((n = fread(s + len, 1, cap - len - 1, in)) > 0) {
        len += n;
        if (cap - len < 2048) {
            s = realloc(s, cap *= 2);
            assert_non_null(s);
        }
    }
    s[len] = '\0';
    return s;
}

/* The bytes of tensor i of a state. */
static inline size_t tu_state_tensor_bytes(const nest_state *st, int i)
{
    int64_t count = 1;
    for (int k = 0; k < nest_state_rank(st, i); k++)
        count *= nest_state_shape(st, i)[k];
    return (size_t)count * nest_type_size((nest_type)nest_state_type(st, i));
}

/* All the bytes of a state's tensors, in order (the caller frees them). */
static inline unsigned char *tu_state_bytes(nest_state *st)
{
    unsigned char *b = malloc(nest_state_size(st) + 1), *p = b;
    assert_non_null(b);
    for (int i = 0; i < nest_state_count(st); i++) {
        memcpy(p, nest_state_data(st, i), tu_state_tensor_bytes(st, i));
        p += tu_state_tensor_bytes(st, i);
    }
    return b;
}

/* The module of `text`, parsed as the file `file` (which names the module); the test fails with
 * the parser's message if it does not parse. */
static inline nest_module *tu_parse_at(const char *text, const char *file, const char *src,
                                       int line)
{
    nest_module *m = nest_parse(text, strlen(text), file);
    if (!m || nest_module_errcode(m) != NEST_OK) {
        print_error("%s: %s\n", file, m ? nest_module_errmsg(m) : "nest_parse returned NULL");
        _fail(src, line);
    }
    return m;
}
#define tu_parse(text, file) tu_parse_at((text), (file), __FILE__, __LINE__)

/* `text` does not parse, and the error contains `part`. */
static inline void tu_parse_fails_at(const char *text, const char *file, const char *part,
                                     const char *src, int line)
{
    nest_module *m = nest_parse(text, strlen(text), file);
    if (!m || nest_module_errcode(m) == NEST_OK || !strstr(nest_module_errmsg(m), part)) {
        print_error("wanted an error with \"%s\", got \"%s\"\n", part,
                    m ? nest_module_errmsg(m) : "(nest_parse returned NULL)");
        _fail(src, line);
    }
    nest_module_free(m);
}
#define tu_parse_fails(text, file, part)                                                           \
    tu_parse_fails_at((text), (file), (part), __FILE__, __LINE__)

/* Writes the string s to the file at path. */
static inline void tu_write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(s, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* nest_evaluate with the function's own counts. */
static inline int evaluate(nest_function *f, void *const *args, void *const *results)
{
    return nest_evaluate(f, args, nest_param_count(f), results, nest_result_count(f));
}

#endif /* NEST_TESTUTIL_H */
