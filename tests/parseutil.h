/*
 * parseutil.h - the helpers of the text-form suites (test_parse.c, test_parse_errors.c): parse
 * and print, canonical round trips, the table of malformed inputs with the position of each
 * error (E, check_cases), and shape assertions.
 */
#ifndef NEST_TESTS_PARSEUTIL_H
#define NEST_TESTS_PARSEUTIL_H

#include <string.h>
#include <time.h>

#include "internal.h"
#include "testutil.h"

#define FILE_NAME "t.nest"

/* ---- helpers ---- */

/* Parses src, which must be valid. */
static inline nest_module *parse_at(const char *src, size_t len, const char *file, int line)
{
    nest_module *m = nest_parse(src, len, FILE_NAME);
    if (!m) {
        print_error("nest_parse returned NULL\n");
        _fail(file, line);
    }
    if (nest_module_errcode(m) != NEST_OK) {
        print_error("unexpected parse error: %.500s\n", nest_module_errmsg(m));
        _fail(file, line);
    }
    return m;
}
#define parse_ok(src) parse_at((src), strlen(src), __FILE__, __LINE__)

static inline char *print_module(const nest_module *m)
{
    char *s = nest_print(m->fns, m->nfns);
    assert_non_null(s);
    return s;
}

/* Parses src and prints it; the print must parse back and print to the same text. Returns the
 * canonical text (the caller frees it). */
static inline char *canon_at(const char *src, size_t len, const char *file, int line)
{
    nest_module *m = parse_at(src, len, file, line);
    char *t1 = print_module(m);
    nest_module_free(m);
    m = parse_at(t1, strlen(t1), file, line);
    char *t2 = print_module(m);
    nest_module_free(m);
    if (strcmp(t1, t2) != 0) {
        print_error("print -> parse -> print changed the text:\n--- first\n%s--- second\n%s", t1, t2);
        _fail(file, line);
    }
    free(t2);
    return t1;
}
#define canon(src) canon_at((src), strlen(src), __FILE__, __LINE__)

/* Prints n built functions, compares with `want` (if not NULL), and checks that the print parses
 * back to n functions that print the same. */
static inline void roundtrip_fns_at(nest_function *const *fns, int n, const char *want,
                                    const char *file, int line)
{
    char *t1 = nest_print(fns, n);
    if (!t1) {
        print_error("nest_print failed: %s\n", n ? nest_errmsg(fns[0]) : "");
        _fail(file, line);
    }
    if (want && strcmp(t1, want) != 0) {
        print_error("printed:\n%s--- expected:\n%s", t1, want);
        _fail(file, line);
    }
    char *t2 = canon_at(t1, strlen(t1), file, line);
    if (strcmp(t1, t2) != 0) {
        print_error("print -> parse -> print changed the text:\n--- first\n%s--- second\n%s", t1, t2);
        _fail(file, line);
    }
    free(t1);
    free(t2);
}
#define roundtrip_fns(fns, n, want) roundtrip_fns_at((fns), (n), (want), __FILE__, __LINE__)

/* A malformed input: the status, line, column and a part of the message after the prefix. */
typedef struct err_case {
    const char *src;
    size_t len;
    int status, line, col;
    const char *part;
    int at; /* the line of this file that lists the case */
} err_case;
#define E(src, st, l, c, part) {(src), sizeof(src) - 1, NEST_ERR_##st, (l), (c), (part), __LINE__}

static inline bool check_error(const char *src, size_t len, int status, int line, int col,
                               const char *part, int at)
{
    nest_module *m = nest_parse(src, len, FILE_NAME);
    if (!m) {
        print_error("case at line %d: nest_parse returned NULL\n", at);
        return false;
    }
    char prefix[80];
    snprintf(prefix, sizeof prefix, FILE_NAME ":%d:%d: error: ", line, col);
    const char *msg = nest_module_errmsg(m);
    bool ok = nest_module_errcode(m) == status && nest_module_errline(m) == line &&
              nest_module_errcol(m) == col && strncmp(msg, prefix, strlen(prefix)) == 0 &&
              strstr(msg + strlen(prefix), part) != NULL && nest_module_count(m) == 0 &&
              nest_module_function(m, 0) == NULL;
    if (!ok)
        print_error("case at line %d:\n  got  %s at %d:%d: \"%.300s\"\n  want %s at %d:%d "
                    "containing \"%s\"\n",
                    at, nest_status_str(nest_module_errcode(m)), nest_module_errline(m),
                    nest_module_errcol(m), msg, nest_status_str(status), line, col, part);
    nest_module_free(m);
    return ok;
}

static inline void check_cases_at(const err_case *c, size_t n, const char *file, int line)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !check_error(c[i].src, c[i].len, c[i].status, c[i].line, c[i].col, c[i].part, c[i].at);
    if (bad) {
        print_error("%d of %zu cases failed\n", bad, n);
        _fail(file, line);
    }
}
#define check_cases(c) check_cases_at((c), countof(c), __FILE__, __LINE__)

/* A malloc'd string: s repeated n times. */
static inline char *repeat(const char *s, int n)
{
    size_t len = strlen(s);
    char *r = malloc(len * (size_t)n + 1);
    assert_non_null(r);
    for (int i = 0; i < n; i++)
        memcpy(r + len * (size_t)i, s, len);
    r[len * (size_t)n] = '\0';
    return r;
}

/* A malloc'd concatenation of up to 8 strings (NULL ends the list). */
static inline char *cat(const char *a, ...)
{
    buf b = {0};
    va_list ap;
    va_start(ap, a);
    for (const char *s = a; s; s = va_arg(ap, const char *))
        buf_puts(&b, s);
    va_end(ap);
    char *r = buf_finish(&b);
    assert_non_null(r);
    return r;
}

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void assert_shape_at(const nest_function *f, nest_value v, int type, int rank,
                                   const int64_t *shape, const char *file, int line)
{
    const int64_t *s = nest_value_shape(f, v);
    bool ok = nest_value_type(f, v) == type && nest_value_rank(f, v) == rank && s &&
              (rank == 0 || memcmp(s, shape, (size_t)rank * sizeof *s) == 0);
    if (!ok) {
        print_error("value %d: type %d rank %d; want type %d rank %d (or the dims differ)\n", v,
                    nest_value_type(f, v), nest_value_rank(f, v), type, rank);
        _fail(file, line);
    }
}
#define assert_shape(f, v, type, rank, shape) \
    assert_shape_at((f), (v), (type), (rank), (shape), __FILE__, __LINE__)
#define NOSHAPE ((const int64_t *)NULL)


#endif /* NEST_TESTS_PARSEUTIL_H */
