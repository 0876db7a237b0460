/*
 * test_parse.c - the text form: the examples of DESIGN.md, canonical round trips of parsed and
 * built graphs, a corpus of malformed inputs with the exact position of each error, limits,
 * and Graphviz output. The command line nestc is tests/test_nestc.c.
 *
 * Every expected position below is counted by hand from its input (columns count bytes, from 1).
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

#define FILE_NAME "t.nest"

/* ---- helpers ---- */

/* Parses src, which must be valid. */
static nest_module *parse_at(const char *src, size_t len, const char *file, int line)
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

static char *print_module(const nest_module *m)
{
    char *s = nest_print(m->fns, m->nfns);
    assert_non_null(s);
    return s;
}

/* Parses src and prints it; the print must parse back and print to the same text. Returns the
 * canonical text (the caller frees it). */
static char *canon_at(const char *src, size_t len, const char *file, int line)
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
static void roundtrip_fns_at(nest_function *const *fns, int n, const char *want, const char *file,
                             int line)
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

static bool check_error(const char *src, size_t len, int status, int line, int col,
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

static void check_cases_at(const err_case *c, size_t n, const char *file, int line)
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
static char *repeat(const char *s, int n)
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
static char *cat(const char *a, ...)
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void assert_shape_at(const nest_function *f, nest_value v, int type, int rank,
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

/* ---- DESIGN.md, verbatim ---- */

static const char design_text[] =
    "# squared L2 distance, no temporaries after fusion\n"
    "func l2(x: f32[1048576], y: f32[1048576]) -> f32[] {\n"
    "  d = subtract(x, y)\n"
    "  r = dot(d, d)\n"
    "  return r\n"
    "}\n"
    "\n"
    "func dense(x: f32[64,256], w: f32[256,128], b: f32[128]) -> f32[64,128] {\n"
    "  h = dot(x, w)\n"
    "  bb = broadcast(b, shape=[64,128], axes=[0])\n"
    "  z = add(h, bb)\n"
    "  return maximum(z, broadcast(constant(f32[], 0), shape=[64,128], axes=[0,1]))\n"
    "}\n"
    "\n"
    "func two(a: f32[8,3]) -> (f32[3,8], f32[]) {\n"
    "  t = reshape(a, order=[1,0], shape=[3,8])\n"
    "  return t, sum(a, axes=[0,1])\n"
    "}\n";

/* The canonical form of design_text, written by hand: every op its own statement, unnamed
 * values called _N after their node number (parameters come first). */
static const char design_canon[] =
    "func l2(x: f32[1048576], y: f32[1048576]) -> f32[] {\n"
    "  d = subtract(x, y)\n"
    "  r = dot(d, d)\n"
    "  return r\n"
    "}\n"
    "\n"
    "func dense(x: f32[64,256], w: f32[256,128], b: f32[128]) -> f32[64,128] {\n"
    "  h = dot(x, w)\n"
    "  bb = broadcast(b, shape=[64,128], axes=[0])\n"
    "  z = add(h, bb)\n"
    "  _6 = constant(f32[], 0)\n"
    "  _7 = broadcast(_6, shape=[64,128], axes=[0,1])\n"
    "  _8 = maximum(z, _7)\n"
    "  return _8\n"
    "}\n"
    "\n"
    "func two(a: f32[8,3]) -> (f32[3,8], f32[]) {\n"
    "  t = reshape(a, order=[1,0], shape=[3,8])\n"
    "  _2 = sum(a, axes=[0,1])\n"
    "  return t, _2\n"
    "}\n";

static void test_design_example(void **state)
{
    (void)state;
    nest_module *m = parse_ok(design_text);
    assert_int_equal(nest_module_count(m), 3);

    nest_function *l2 = nest_module_find(m, "l2");
    assert_ptr_equal(l2, nest_module_function(m, 0));
    assert_string_equal(nest_function_name(l2), "l2");
    assert_int_equal(nest_param_count(l2), 2);
    assert_int_equal(nest_result_count(l2), 1);
    assert_shape(l2, nest_param(l2, 0), NEST_F32, 1, SHAPE(1048576));
    assert_shape(l2, nest_param(l2, 1), NEST_F32, 1, SHAPE(1048576));
    assert_shape(l2, nest_result(l2, 0), NEST_F32, 0, NOSHAPE);

    nest_function *dense = nest_module_find(m, "dense");
    assert_ptr_equal(dense, nest_module_function(m, 1));
    assert_int_equal(nest_param_count(dense), 3);
    assert_int_equal(nest_result_count(dense), 1);
    assert_shape(dense, nest_param(dense, 0), NEST_F32, 2, SHAPE(64, 256));
    assert_shape(dense, nest_param(dense, 1), NEST_F32, 2, SHAPE(256, 128));
    assert_shape(dense, nest_param(dense, 2), NEST_F32, 1, SHAPE(128));
    assert_shape(dense, nest_result(dense, 0), NEST_F32, 2, SHAPE(64, 128));

    nest_function *two = nest_module_find(m, "two");
    assert_ptr_equal(two, nest_module_function(m, 2));
    assert_int_equal(nest_param_count(two), 1);
    assert_int_equal(nest_result_count(two), 2);
    assert_shape(two, nest_param(two, 0), NEST_F32, 2, SHAPE(8, 3));
    assert_shape(two, nest_result(two, 0), NEST_F32, 2, SHAPE(3, 8));
    assert_shape(two, nest_result(two, 1), NEST_F32, 0, NOSHAPE);
    for (int i = 0; i < 3; i++)
        assert_int_equal(nest_errcode(nest_module_function(m, i)), NEST_OK);
    assert_null(nest_module_find(m, "nope"));
    assert_null(nest_module_function(m, 3));
    nest_module_free(m);

    char *c = canon(design_text);
    assert_string_equal(c, design_canon);
    free(c);

    /* the sample file holds the same text */
    FILE *in = fopen("samples/design.nest", "rb");
    if (in) {
        char text[4096];
        size_t n = fread(text, 1, sizeof text - 1, in);
        fclose(in);
        text[n] = '\0';
        assert_string_equal(text, design_text);
    }
}

/* Each example of the op table in DESIGN.md, verbatim inside a function around it. */
static void test_design_op_table(void **state)
{
    (void)state;
    static const char src[] =
        "func constants() -> (f32[], i32[2,2]) {\n"
        "  return constant(f32[], 0), constant(i32[2,2], [1, 2, 3, 4])\n"
        "}\n"
        "func literals() -> (f32[3], f64[2], bool[2]) {\n"
        "  return constant(f32[3], [inf, -inf, nan]), constant(f64[2], 1), constant(bool[2], [true, false])\n"
        "}\n"
        "func elementwise(a: f32[4], b: f32[4]) -> (f32[4], f32[4], f32[4]) {\n"
        "  return add(a, b), negative(a), select(less(a, b), a, b)\n"
        "}\n"
        "func conv(x: f32[2,3]) -> f64[2,3] {\n"
        "  return convert(x, type=f64)\n"
        "}\n"
        "func mm(a: f32[2,3], b: f32[3,5]) -> f32[2,5] {\n"
        "  return dot(a, b)\n"
        "}\n"
        "func bcast(v: f32[5]) -> f32[3,5,4] {\n"
        "  return broadcast(v, shape=[3,5,4], axes=[0,2])\n"
        "}\n"
        "func transpose(x: f32[4,5,6]) -> (f32[6,4,5], f32[120]) {\n"
        "  return reshape(x, order=[2,0,1], shape=[6,4,5]), reshape(x, shape=[120])\n"
        "}\n"
        "func slices(x: f32[10,12]) -> (f32[4,4], f32[8,10]) {\n"
        "  return slice(x, lower=[1,2], upper=[9,12], strides=[2,3]), slice(x, lower=[1,2], upper=[9,12])\n"
        "}\n"
        "func join(a: f32[2,3], b: f32[4,3]) -> f32[6,3] {\n"
        "  return concat(a, b, axis=0)\n"
        "}\n"
        "func reduce(x: f32[2,3]) -> (f32[2], f32[], f32[3]) {\n"
        "  return sum(x, axes=[1]), max(x, axes=[0,1]), min(x, axes=[0])\n"
        "}\n"
        "func tuples(a: f32[2], b: i32[3]) -> (f32[2], i32[3], i32[3]) {\n"
        "  t = tuple(a, b)\n"
        "  return a, b, get(t, 1)\n"
        "}\n"
        "func noparams() -> f32[] {\n"
        "  return constant(f32[], 1)\n"
        "}\n";
    nest_module *m = parse_ok(src);
    assert_int_equal(nest_module_count(m), 12);
    nest_function *f;

    f = nest_module_find(m, "constants");
    assert_shape(f, nest_result(f, 1), NEST_I32, 2, SHAPE(2, 2));
    f = nest_module_find(m, "literals");
    assert_int_equal(nest_result_count(f), 3);
    f = nest_module_find(m, "elementwise");
    assert_int_equal(nest_result_count(f), 3);
    f = nest_module_find(m, "conv");
    assert_shape(f, nest_result(f, 0), NEST_F64, 2, SHAPE(2, 3));
    f = nest_module_find(m, "bcast");
    assert_shape(f, nest_result(f, 0), NEST_F32, 3, SHAPE(3, 5, 4));
    f = nest_module_find(m, "transpose");
    assert_shape(f, nest_result(f, 0), NEST_F32, 3, SHAPE(6, 4, 5));
    f = nest_module_find(m, "slices");
    /* ceil((9 - 1) / 2) = 4, ceil((12 - 2) / 3) = 4 */
    assert_shape(f, nest_result(f, 0), NEST_F32, 2, SHAPE(4, 4));
    assert_shape(f, nest_result(f, 1), NEST_F32, 2, SHAPE(8, 10));
    f = nest_module_find(m, "join");
    assert_shape(f, nest_result(f, 0), NEST_F32, 2, SHAPE(6, 3));
    f = nest_module_find(m, "reduce");
    assert_shape(f, nest_result(f, 0), NEST_F32, 1, SHAPE(2));
    assert_shape(f, nest_result(f, 1), NEST_F32, 0, NOSHAPE);
    assert_shape(f, nest_result(f, 2), NEST_F32, 1, SHAPE(3));
    f = nest_module_find(m, "tuples");
    assert_int_equal(nest_result(f, 1), nest_param(f, 1)); /* get(t, 1) is b */
    assert_int_equal(nest_result(f, 2), nest_param(f, 1));
    f = nest_module_find(m, "noparams");
    assert_int_equal(nest_param_count(f), 0);
    nest_module_free(m);
    free(canon(src));
}

/* ---- round trips of text ---- */

static void test_canonical_form(void **state)
{
    (void)state;
    /* Names may be op and type words; `y = func` is another name of func; numbers in the forms
     * the lexer takes; comments and blank lines anywhere. */
    static const char src[] =
        "# leading comment\n"
        "\n"
        "func add(add: f32[2], f32: f32[2]) -> f32[2] {   # trailing comment\n"
        "  func = add(add, f32)\n"
        "  y = func\n"
        "  c = constant(f32[2], [.5, 5.])\n"
        "  d = constant(i32[3], [007, -0, -2147483648])\n"
        "  return add(y, c)\n"
        "}\n";
    static const char want[] =
        "func add(add: f32[2], f32: f32[2]) -> f32[2] {\n"
        "  func = add(add, f32)\n"
        "  c = constant(f32[2], [0.5, 5])\n"
        "  d = constant(i32[3], [7, 0, -2147483648])\n"
        "  _5 = add(func, c)\n"
        "  return _5\n"
        "}\n";
    char *c = canon(src);
    assert_string_equal(c, want);
    free(c);

    /* Layouts, zero results, a parameter returned as it is, tuples flattened in the signature. */
    static const char src2[] =
        "func lay(x: f32[2,3] col, y: f32[3] row) -> (f32[3,2] col, f32[3]) {\n"
        "  return reshape(x, order=[1,0], shape=[3,2]), y\n"
        "}\n"
        "func none() -> () {\n"
        "  return\n"
        "}\n"
        "func flat(x: f32[4]) -> (f32[4], f32[4], f32[4]) {\n"
        "  return tuple(x, tuple(x, x))\n"
        "}\n";
    static const char want2[] =
        "func lay(x: f32[2,3] col, y: f32[3]) -> (f32[3,2] col, f32[3]) {\n"
        "  _2 = reshape(x, order=[1,0], shape=[3,2])\n"
        "  return _2, y\n"
        "}\n"
        "\n"
        "func none() -> () {\n"
        "  return\n"
        "}\n"
        "\n"
        "func flat(x: f32[4]) -> (f32[4], f32[4], f32[4]) {\n"
        "  _1 = tuple(x, x)\n"
        "  _2 = tuple(x, _1)\n"
        "  return _2\n"
        "}\n";
    c = canon(src2);
    assert_string_equal(c, want2);
    free(c);

    nest_module *m = parse_ok(src2);
    nest_function *f = nest_module_find(m, "lay");
    assert_int_equal(f->nodes[f->params[0]].a.param.layout, NEST_COL_MAJOR);
    assert_int_equal(f->nodes[f->params[1]].a.param.layout, NEST_ROW_MAJOR);
    assert_int_equal(f->result_layout[0], NEST_COL_MAJOR);
    assert_int_equal(f->result_layout[1], NEST_ROW_MAJOR);
    f = nest_module_find(m, "none");
    assert_int_equal(nest_param_count(f), 0);
    assert_int_equal(nest_result_count(f), 0);
    f = nest_module_find(m, "flat");
    assert_int_equal(nest_result_count(f), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(nest_result(f, i), nest_param(f, 0));
    nest_module_free(m);

    /* CRLF line ends and tabs are white space. */
    static const char crlf[] = "func f(x: f32[4])\t-> f32[4] {\r\n\treturn x\r\n}\r\n";
    c = canon(crlf);
    assert_string_equal(c, "func f(x: f32[4]) -> f32[4] {\n  return x\n}\n");
    free(c);
}

/* Empty input, only comments, only white space: a valid module without functions. */
static void test_empty_inputs(void **state)
{
    (void)state;
    static const char *const srcs[] = {
        "", " \n\t\r\n", "# only a comment", "# c1\n# c2 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n\n",
        "# control characters are fine in comments: \x01\x7f\t\n",
    };
    for (size_t i = 0; i < countof(srcs); i++) {
        nest_module *m = parse_ok(srcs[i]);
        assert_int_equal(nest_module_count(m), 0);
        assert_int_equal(nest_module_errline(m), 0);
        assert_int_equal(nest_module_errcol(m), 0);
        assert_string_equal(nest_module_errmsg(m), "");
        char *s = print_module(m);
        assert_string_equal(s, "");
        free(s);
        nest_module_free(m);
    }
    nest_module *m = nest_parse(NULL, 0, NULL);
    assert_non_null(m);
    assert_int_equal(nest_module_errcode(m), NEST_OK);
    assert_int_equal(nest_module_count(m), 0);
    nest_module_free(m);
    nest_module_free(NULL);
    assert_int_equal(nest_module_count(NULL), 0);
}

/* ---- constants: every type and the values that are easy to lose ---- */

/* The node of the k-th constant of f. */
static const ir_node *nth_constant(const nest_function *f, int k)
{
    for (int32_t i = 0, seen = 0; i < f->nnodes; i++)
        if (f->nodes[i].op == OP_CONSTANT && seen++ == k)
            return &f->nodes[i];
    fail_msg("no constant %d", k);
    return NULL;
}

static void test_constant_values(void **state)
{
    (void)state;
    static const char src[] =
        "func c() -> () {\n"
        "  a = constant(f32[9], [inf, -inf, nan, -0, 0.1, 3.4028235e38, 1e-45, -1.5E+3, 16777216])\n"
        "  b = constant(f64[8], [inf, -inf, -nan, -0.0, 0.1, 1.7976931348623157e308, 5e-324, 1e-400])\n"
        "  i = constant(i32[4], [-2147483648, 2147483647, -0, 0])\n"
        "  j = constant(i64[3], [-9223372036854775808, 9223372036854775807, -1])\n"
        "  k = constant(bool[3], [true, false, true])\n"
        "  e = constant(f32[0], [])\n"
        "  z = constant(f32[0,3], 5)\n"
        "  return\n"
        "}\n";
    nest_module *m = parse_ok(src);
    nest_function *f = nest_module_function(m, 0);

    const float *a = nth_constant(f, 0)->a.constant.data;
    assert_int_equal(nth_constant(f, 0)->a.constant.count, 9);
    assert_true(isinf(a[0]) && a[0] > 0);
    assert_true(isinf(a[1]) && a[1] < 0);
    assert_true(isnan(a[2]));
    assert_true(a[3] == 0 && signbit(a[3]));
    assert_true(a[4] == 0.1f);
    assert_true(a[5] == FLT_MAX);
    assert_true(a[6] == 0x1p-149f); /* the smallest f32 denormal */
    assert_true(a[7] == -1500.0f);
    assert_true(a[8] == 16777216.0f);

    const double *b = nth_constant(f, 1)->a.constant.data;
    assert_true(isinf(b[0]) && b[0] > 0);
    assert_true(isinf(b[1]) && b[1] < 0);
    assert_true(isnan(b[2]));
    assert_true(b[3] == 0 && signbit(b[3]));
    assert_true(b[4] == 0.1);
    assert_true(b[5] == DBL_MAX);
    assert_true(b[6] == 0x1p-1074); /* the smallest f64 denormal */
    assert_true(b[7] == 0 && !signbit(b[7])); /* below every denormal: rounds to 0 */

    const int32_t *i = nth_constant(f, 2)->a.constant.data;
    assert_int_equal(i[0], INT32_MIN);
    assert_int_equal(i[1], INT32_MAX);
    assert_int_equal(i[2], 0);
    const int64_t *j = nth_constant(f, 3)->a.constant.data;
    assert_true(j[0] == INT64_MIN);
    assert_true(j[1] == INT64_MAX);
    assert_true(j[2] == -1);
    const uint8_t *k = nth_constant(f, 4)->a.constant.data;
    assert_int_equal(k[0], 1);
    assert_int_equal(k[1], 0);
    assert_int_equal(k[2], 1);
    assert_int_equal(nth_constant(f, 5)->a.constant.count, 0);
    assert_int_equal(nth_constant(f, 6)->a.constant.count, 1);
    assert_shape(f, 6, NEST_F32, 2, SHAPE(0, 3));
    nest_module_free(m);

    static const char want[] =
        "func c() -> () {\n"
        "  a = constant(f32[9], [inf, -inf, nan, -0, 0.1, 3.4028235e+38, 1e-45, -1.5e+03, 16777216])\n"
        "  b = constant(f64[8], [inf, -inf, nan, -0, 0.1, 1.7976931348623157e+308, 5e-324, 0])\n"
        "  i = constant(i32[4], [-2147483648, 2147483647, 0, 0])\n"
        "  j = constant(i64[3], [-9223372036854775808, 9223372036854775807, -1])\n"
        "  k = constant(bool[3], [true, false, true])\n"
        "  e = constant(f32[0], [])\n"
        "  z = constant(f32[0,3], 5)\n"
        "  return\n"
        "}\n";
    char *c = canon(src);
    assert_string_equal(c, want);
    free(c);
}

/* Constants built through the API keep every bit through print -> parse (NaN stays a NaN). */
static void test_constant_roundtrip_api(void **state)
{
    nest_function *f = *state;
    static const float fv[] = {INFINITY, -INFINITY, NAN, -0.0f, 0.1f, FLT_MAX, 0x1p-149f,
                               0x1.fffffep-127f, 1.0f / 3.0f, -16777215.0f, 1e-10f, 123456.789f};
    static const double dv[] = {INFINITY, -INFINITY, NAN, -0.0, 0.1, DBL_MAX, 0x1p-1074,
                                1.0 / 3.0, 0.30000000000000004, -1e300, 2.5e-308, 9007199254740993.0};
    static const int32_t iv[] = {INT32_MIN, INT32_MAX, -1, 0, 1};
    static const int64_t jv[] = {INT64_MIN, INT64_MAX, -1, 0, 4294967296};
    static const uint8_t bv[] = {1, 0, 1, 1};
    static const uint8_t bfalse = 0;
    int n = (int)countof(fv);
    for (int i = 0; i < n; i++) {
        assert_value(f, nest_constant(f, NEST_F32, 0, NULL, &fv[i], 1));
        assert_value(f, nest_constant(f, NEST_F64, 0, NULL, &dv[i], 1));
    }
    assert_value(f, nest_constant(f, NEST_F32, 1, SHAPE(12), fv, 12));
    assert_value(f, nest_constant(f, NEST_F64, 2, SHAPE(3, 4), dv, 12));
    assert_value(f, nest_constant(f, NEST_I32, 1, SHAPE(5), iv, 5));
    assert_value(f, nest_constant(f, NEST_I64, 1, SHAPE(5), jv, 5));
    assert_value(f, nest_constant(f, NEST_I32, 0, NULL, &iv[0], 1));
    assert_value(f, nest_constant(f, NEST_I64, 0, NULL, &jv[0], 1));
    assert_value(f, nest_constant(f, NEST_BOOL, 2, SHAPE(2, 2), bv, 4));
    assert_value(f, nest_constant(f, NEST_BOOL, 1, SHAPE(7), &bfalse, 1));
    assert_value(f, nest_constant(f, NEST_F32, 1, SHAPE(0), NULL, 0));
    assert_value(f, nest_constant(f, NEST_I64, 3, SHAPE(2, 0, 3), &jv[1], 1));
    assert_ok(f, nest_return(f, 0, NULL, NULL));

    char *text = nest_print(&f, 1);
    assert_non_null(text);
    nest_module *m = parse_ok(text);
    nest_function *g = nest_module_function(m, 0);
    /* no parameters: the nodes keep their numbers */
    assert_int_equal(g->nnodes, f->nnodes);
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *x = &f->nodes[i], *y = &g->nodes[i];
        assert_int_equal(y->op, OP_CONSTANT);
        assert_int_equal(y->etype, x->etype);
        assert_int_equal(y->rank, x->rank);
        if (x->rank > 0)
            assert_memory_equal(y->shape, x->shape, (size_t)x->rank * sizeof(int64_t));
        assert_int_equal(y->a.constant.count, x->a.constant.count);
        size_t size = nest_type_size((nest_type)x->etype);
        for (int64_t e = 0; e < x->a.constant.count; e++) {
            const char *p = (const char *)x->a.constant.data + (size_t)e * size;
            const char *q = (const char *)y->a.constant.data + (size_t)e * size;
            bool nan_x = x->etype == NEST_F32 ? isnan(*(const float *)p)
                         : x->etype == NEST_F64 ? isnan(*(const double *)p) : false;
            if (nan_x)
                assert_true(x->etype == NEST_F32 ? isnan(*(const float *)q) : isnan(*(const double *)q));
            else if (memcmp(p, q, size) != 0)
                fail_msg("node %d element %lld differs after the round trip", i, (long long)e);
        }
    }
    nest_module_free(m);
    free(text);
    roundtrip_fns(&f, 1, NULL);
}

/* ---- graphs built through the API ---- */

static void test_roundtrip_layouts(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("layouts");
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(2, 3), NEST_COL_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F32, 2, SHAPE(3, 2), NEST_ROW_MAJOR);
    nest_value z = nest_parameter(f, "z", NEST_I32, 1, SHAPE(4), NEST_COL_MAJOR);
    nest_value t = nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(3, 2));
    nest_value s = nest_add(f, y, y);
    static const nest_layout lay[] = {NEST_COL_MAJOR, NEST_ROW_MAJOR, NEST_COL_MAJOR};
    assert_ok(f, nest_return(f, 3, VALUES(t, s, z), lay));
    roundtrip_fns(&f, 1,
                  "func layouts(x: f32[2,3] col, y: f32[3,2], z: i32[4] col) -> "
                  "(f32[3,2] col, f32[3,2], i32[4] col) {\n"
                  "  _3 = reshape(x, order=[1,0], shape=[3,2])\n"
                  "  _4 = add(y, y)\n"
                  "  return _3, _4, z\n"
                  "}\n");
    nest_function_free(f);
}

static void test_roundtrip_tuples(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("tuples");
    nest_value a = nest_parameter(f, "a", NEST_F32, 1, SHAPE(2), NEST_ROW_MAJOR);
    nest_value b = nest_parameter(f, "b", NEST_I32, 1, SHAPE(3), NEST_ROW_MAJOR);
    nest_value c = nest_parameter(f, "c", NEST_BOOL, 0, NULL, NEST_ROW_MAJOR);
    nest_value t1 = nest_tuple(f, 2, VALUES(a, b));
    nest_value t2 = nest_tuple(f, 2, VALUES(t1, c));
    assert_ok(f, nest_set_name(f, t2, "pair"));
    nest_value g = nest_get(f, t2, 0);
    nest_value h = nest_get(f, g, 1);
    nest_value e = nest_tuple(f, 0, NULL);
    nest_value n = nest_negative(f, h);
    assert_ok(f, nest_return(f, 4, VALUES(t2, h, e, n), NULL));
    assert_int_equal(nest_result_count(f), 5); /* a, b, c, b, n */
    roundtrip_fns(&f, 1,
                  "func tuples(a: f32[2], b: i32[3], c: bool[]) -> "
                  "(f32[2], i32[3], bool[], i32[3], i32[3]) {\n"
                  "  _3 = tuple(a, b)\n"
                  "  pair = tuple(_3, c)\n"
                  "  _5 = get(pair, 0)\n"
                  "  _6 = get(_5, 1)\n"
                  "  _7 = tuple()\n"
                  "  _8 = negative(_6)\n"
                  "  return pair, _6, _7, _8\n"
                  "}\n");
    nest_function_free(f);
}

static void test_roundtrip_empty_shapes(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("empty");
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(0, 5), NEST_ROW_MAJOR);
    nest_value s = nest_sum(f, x, 1, SHAPE(0));
    nest_value mx = nest_max(f, x, 1, SHAPE(1));
    nest_value sl = nest_slice(f, s, SHAPE(2), SHAPE(2), NULL);
    nest_value c = nest_concat(f, 2, VALUES(mx, sl), 0);
    nest_value bc = nest_broadcast(f, c, 2, SHAPE(3, 0), 1, SHAPE(0));
    nest_value rs = nest_reshape(f, bc, NULL, 2, SHAPE(0, 7));
    assert_ok(f, nest_return(f, 2, VALUES(s, rs), NULL));
    roundtrip_fns(&f, 1,
                  "func empty(x: f32[0,5]) -> (f32[5], f32[0,7]) {\n"
                  "  _1 = sum(x, axes=[0])\n"
                  "  _2 = max(x, axes=[1])\n"
                  "  _3 = slice(_1, lower=[2], upper=[2])\n"
                  "  _4 = concat(_2, _3, axis=0)\n"
                  "  _5 = broadcast(_4, shape=[3,0], axes=[0])\n"
                  "  _6 = reshape(_5, shape=[0,7])\n"
                  "  return _1, _6\n"
                  "}\n");
    nest_function_free(f);
}

/* Every op with its attributes, unnamed, including a parameter added after other nodes. */
static void test_roundtrip_every_op(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("ops");
    nest_value p = nest_parameter(f, "p", NEST_F32, 2, SHAPE(2, 3), NEST_ROW_MAJOR);   /* 0 */
    nest_value q = nest_parameter(f, "q", NEST_F32, 1, SHAPE(3), NEST_ROW_MAJOR);      /* 1 */
    nest_value one = nest_constant(f, NEST_F32, 0, NULL, (const float[]){1}, 1);       /* 2 */
    nest_value k = nest_parameter(f, "k", NEST_I64, 2, SHAPE(2, 3), NEST_ROW_MAJOR);   /* 3 */
    nest_value v[40];
    int n = 0;
    v[n++] = nest_convert(f, k, NEST_F32);                                /* 4 */
    v[n++] = nest_dot(f, p, q);                                           /* 5 */
    v[n++] = nest_dot(f, one, p);                                         /* 6 */
    nest_value bq = v[n++] = nest_broadcast(f, q, 2, SHAPE(2, 3), 1, SHAPE(0)); /* 7 */
    v[n++] = nest_reshape(f, p, SHAPE(1, 0), 2, SHAPE(3, 2));             /* 8 */
    v[n++] = nest_reshape(f, p, SHAPE(0, 1), 1, SHAPE(6));                /* 9: identity order */
    v[n++] = nest_slice(f, p, SHAPE(0, 1), SHAPE(2, 3), SHAPE(2, 1));     /* 10 */
    v[n++] = nest_slice(f, p, SHAPE(1, 0), SHAPE(2, 3), SHAPE(1, 1));     /* 11: unit strides */
    v[n++] = nest_concat(f, 3, VALUES(p, bq, p), 1);                      /* 12 */
    v[n++] = nest_sum(f, p, 1, SHAPE(1));                                 /* 13 */
    v[n++] = nest_max(f, p, 2, SHAPE(1, 0));                              /* 14 */
    v[n++] = nest_min(f, p, 0, NULL);                                     /* 15 */
    nest_value lt = v[n++] = nest_less(f, p, bq);                         /* 16 */
    v[n++] = nest_greater(f, p, bq);                                      /* 17 */
    v[n++] = nest_equal(f, lt, lt);                                       /* 18 */
    v[n++] = nest_select(f, lt, p, bq);                                   /* 19 */
    v[n++] = nest_add(f, p, bq);                                          /* 20 */
    v[n++] = nest_subtract(f, p, bq);                                     /* 21 */
    v[n++] = nest_multiply(f, p, bq);                                     /* 22 */
    v[n++] = nest_divide(f, p, bq);                                       /* 23 */
    v[n++] = nest_maximum(f, p, bq);                                      /* 24 */
    v[n++] = nest_minimum(f, p, bq);                                      /* 25 */
    v[n++] = nest_power(f, p, bq);                                        /* 26 */
    v[n++] = nest_negative(f, p);                                         /* 27 */
    v[n++] = nest_abs(f, p);                                              /* 28 */
    v[n++] = nest_exp(f, p);                                              /* 29 */
    v[n++] = nest_log(f, p);                                              /* 30 */
    v[n++] = nest_sqrt(f, p);                                             /* 31 */
    v[n++] = nest_tanh(f, p);                                             /* 32 */
    v[n++] = nest_convert(f, lt, NEST_I32);                               /* 33 */
    v[n++] = nest_broadcast(f, one, 0, NULL, 0, NULL);                    /* 34 */
    for (int i = 0; i < n; i++)
        assert_value(f, v[i]);
    assert_ok(f, nest_return(f, 1, &v[1], NULL));
    roundtrip_fns(&f, 1,
                  "func ops(p: f32[2,3], q: f32[3], k: i64[2,3]) -> f32[2] {\n"
                  "  _2 = constant(f32[], 1)\n"
                  "  _4 = convert(k, type=f32)\n"
                  "  _5 = dot(p, q)\n"
                  "  _6 = dot(_2, p)\n"
                  "  _7 = broadcast(q, shape=[2,3], axes=[0])\n"
                  "  _8 = reshape(p, order=[1,0], shape=[3,2])\n"
                  "  _9 = reshape(p, shape=[6])\n"
                  "  _10 = slice(p, lower=[0,1], upper=[2,3], strides=[2,1])\n"
                  "  _11 = slice(p, lower=[1,0], upper=[2,3])\n"
                  "  _12 = concat(p, _7, p, axis=1)\n"
                  "  _13 = sum(p, axes=[1])\n"
                  "  _14 = max(p, axes=[0,1])\n"
                  "  _15 = min(p, axes=[])\n"
                  "  _16 = less(p, _7)\n"
                  "  _17 = greater(p, _7)\n"
                  "  _18 = equal(_16, _16)\n"
                  "  _19 = select(_16, p, _7)\n"
                  "  _20 = add(p, _7)\n"
                  "  _21 = subtract(p, _7)\n"
                  "  _22 = multiply(p, _7)\n"
                  "  _23 = divide(p, _7)\n"
                  "  _24 = maximum(p, _7)\n"
                  "  _25 = minimum(p, _7)\n"
                  "  _26 = power(p, _7)\n"
                  "  _27 = negative(p)\n"
                  "  _28 = abs(p)\n"
                  "  _29 = exp(p)\n"
                  "  _30 = log(p)\n"
                  "  _31 = sqrt(p)\n"
                  "  _32 = tanh(p)\n"
                  "  _33 = convert(_16, type=i32)\n"
                  "  _34 = broadcast(_2, shape=[], axes=[])\n"
                  "  return _5\n"
                  "}\n");
    nest_function_free(f);
}

/* User names that look generated: the printer picks names nobody uses. */
static void test_roundtrip_name_clash(void **state)
{
    (void)state;
    nest_function *f = nest_function_new("names");
    nest_value x = nest_parameter(f, "x", NEST_F32, 1, SHAPE(2), NEST_ROW_MAJOR); /* 0 */
    nest_value a = nest_abs(f, x);                                                /* 1 */
    assert_ok(f, nest_set_name(f, a, "_2"));
    nest_value b = nest_negative(f, x);                                           /* 2 */
    nest_value c = nest_add(f, a, b);                                             /* 3 */
    nest_value d = nest_add(f, c, c);                                             /* 4 */
    assert_ok(f, nest_set_name(f, d, "_3_1"));
    assert_ok(f, nest_return(f, 1, &d, NULL));
    roundtrip_fns(&f, 1,
                  "func names(x: f32[2]) -> f32[2] {\n"
                  "  _2 = abs(x)\n"
                  "  _2_1 = negative(x)\n"
                  "  _3 = add(_2, _2_1)\n"
                  "  _3_1 = add(_3, _3)\n"
                  "  return _3_1\n"
                  "}\n");
    nest_function_free(f);

    /* a parameter called _1 and a value _1_1 */
    f = nest_function_new("params");
    x = nest_parameter(f, "_1", NEST_F32, 1, SHAPE(2), NEST_ROW_MAJOR); /* 0 */
    a = nest_abs(f, x);                                                 /* 1 */
    b = nest_abs(f, a);                                                 /* 2 */
    assert_ok(f, nest_set_name(f, b, "_1_1"));
    assert_ok(f, nest_return(f, 2, VALUES(a, b), NULL));
    roundtrip_fns(&f, 1,
                  "func params(_1: f32[2]) -> (f32[2], f32[2]) {\n"
                  "  _1_2 = abs(_1)\n"
                  "  _1_1 = abs(_1_2)\n"
                  "  return _1_2, _1_1\n"
                  "}\n");
    nest_function_free(f);
}

/* Several functions in one file, one of them without parameters or results. */
static void test_roundtrip_several_functions(void **state)
{
    (void)state;
    nest_function *fns[4];
    fns[0] = nest_function_new("first");
    nest_value x = nest_parameter(fns[0], "x", NEST_F64, 0, NULL, NEST_ROW_MAJOR);
    assert_ok(fns[0], nest_return(fns[0], 1, VALUES(nest_exp(fns[0], x)), NULL));
    fns[1] = nest_function_new("nothing");
    assert_ok(fns[1], nest_return(fns[1], 0, NULL, NULL));
    fns[2] = nest_function_new("third");
    x = nest_parameter(fns[2], "x", NEST_I64, 1, SHAPE(3), NEST_COL_MAJOR);
    assert_ok(fns[2], nest_return(fns[2], 2, VALUES(x, x), (const nest_layout[]){NEST_COL_MAJOR, NEST_ROW_MAJOR}));
    fns[3] = nest_function_new("x");
    x = nest_parameter(fns[3], "x", NEST_BOOL, 1, SHAPE(2), NEST_ROW_MAJOR);
    assert_ok(fns[3], nest_return(fns[3], 1, VALUES(nest_equal(fns[3], x, x)), NULL));
    roundtrip_fns(fns, 4,
                  "func first(x: f64[]) -> f64[] {\n"
                  "  _1 = exp(x)\n"
                  "  return _1\n"
                  "}\n"
                  "\n"
                  "func nothing() -> () {\n"
                  "  return\n"
                  "}\n"
                  "\n"
                  "func third(x: i64[3] col) -> (i64[3] col, i64[3]) {\n"
                  "  return x, x\n"
                  "}\n"
                  "\n"
                  "func x(x: bool[2]) -> bool[2] {\n"
                  "  _1 = equal(x, x)\n"
                  "  return _1\n"
                  "}\n");
    char *text = nest_print(fns, 4);
    nest_module *m = parse_ok(text);
    assert_int_equal(nest_module_count(m), 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(nest_function_name(nest_module_function(m, i)), nest_function_name(fns[i]));
    nest_module_free(m);
    free(text);
    for (int i = 0; i < 4; i++)
        nest_function_free(fns[i]);
}

/* A 20,000-deep chain built through the API prints as 20,000 statements, quickly. */
static void test_roundtrip_long_api_chain(void **state)
{
    nest_function *f = *state;
    nest_value v = nest_parameter(f, "x", NEST_F32, 1, SHAPE(4), NEST_ROW_MAJOR);
    for (int i = 0; i < 20000; i++)
        v = nest_negative(f, v);
    assert_value(f, v);
    assert_ok(f, nest_return(f, 1, &v, NULL));
    double t0 = now();
    char *text = nest_print(&f, 1);
    assert_non_null(text);
    nest_module *m = parse_ok(text);
    assert_int_equal(nest_module_function(m, 0)->nnodes, 20001);
    char *again = print_module(m);
    assert_string_equal(text, again);
    double t = now() - t0;
    assert_true(t < 2.0 || tu_under_valgrind());
    assert_non_null(strstr(text, "  _20000 = negative(_19999)\n  return _20000\n}\n"));
    free(again);
    free(text);
    nest_module_free(m);
}

/* ---- malformed inputs ---- */

/* Four parameters; every statement below is on line 2, after "  z = " (6 columns). */
#define H "func f(x: f32[4], y: f32[3], i: i32[4], b: bool[4]) -> f32[4] {\n"
#define T "\n  return x\n}\n"
#define F "func f(x: f32[4]) -> f32[4] {\n"

static void test_errors_truncated(void **state)
{
    (void)state;
    static const err_case cases[] = {
        E("func", SYNTAX, 1, 5, "expected a function name, found end of file"),
        E("func f", SYNTAX, 1, 7, "expected '(', found end of file"),
        E("func f(x", SYNTAX, 1, 9, "expected ':', found end of file"),
        E("func f(x: f32[4", SYNTAX, 1, 16, "expected ']', found end of file"),
        E("func f(x: f32[4], ", SYNTAX, 1, 19, "expected a parameter name, found end of file"),
        E("func f(x: f32[4]) ->", SYNTAX, 1, 21, "expected a type (f32, f64, i32, i64 or bool), found end of file"),
        E("func f(x: f32[4]) -> f32[4]", SYNTAX, 1, 28, "expected '{', found end of file"),
        E(F, SYNTAX, 2, 1, "expected '}' to end the function, found end of file"),
        E(F "  z = add(x,", SYNTAX, 2, 13, "expected a value or an op, found end of file"),
        E(F "  z = add(x", SYNTAX, 2, 12, "expected ',' or ')', found end of file"),
        E(F "  z = broadcast(x, shape=[4,", SYNTAX, 2, 29, "expected an integer, found end of file"),
        E(F "  z = constant(f32[2], [1, ", SYNTAX, 2, 28, "expected a number, inf, nan, true or false, found end of file"),
        E(F "  z =", SYNTAX, 2, 6, "expected a value or an op, found end of file"),
        E(F "  return", SYNTAX, 2, 9, "expected a value or an op, found end of file"),
        E(F "  return x\n", SYNTAX, 3, 1, "expected '}' to end the function, found end of file"),
        E(F "  return x\n}\nfunc", SYNTAX, 4, 5, "expected a function name, found end of file"),
    };
    check_cases(cases);
}

static void test_errors_lexical(void **state)
{
    (void)state;
    static const err_case cases[] = {
        /* invalid UTF-8, in code and in comments */
        E("\xff", SYNTAX, 1, 1, "invalid UTF-8 byte 0xff"),
        E("# bad \xc3\x28\n", SYNTAX, 1, 7, "invalid UTF-8 byte 0xc3"),
        E("# \xc0\xaf overlong '/'\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xc0"),
        E("# \xc1\xbf overlong\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xc1"),
        E("# \xe0\x80\xaf overlong\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xe0"),
        E("# \xf0\x80\x80\xaf overlong\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xf0"),
        E("# \xed\xa0\x80 surrogate\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xed"),
        E("# \xed\xbf\xbf surrogate\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xed"),
        E("# \xf4\x90\x80\x80 above U+10FFFF\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xf4"),
        E("# \xf5\x80\x80\x80\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xf5"),
        E("# \x80 lone continuation\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0x80"),
        E("# \xe2\x82", SYNTAX, 1, 3, "invalid UTF-8 byte 0xe2"), /* cut at the end */
        E("# \xe2\x82\n", SYNTAX, 1, 3, "invalid UTF-8 byte 0xe2"),
        E("# \xc3\xa9 \xff\n", SYNTAX, 1, 6, "invalid UTF-8 byte 0xff"), /* columns count bytes */
        E("# ok \xe2\x82\xac\n# bad \xfe\n", SYNTAX, 2, 7, "invalid UTF-8 byte 0xfe"),
        E("func f\xc3\xa9() -> () {\n  return\n}\n", SYNTAX, 1, 7,
          "unexpected character (non-ASCII text is allowed only in comments)"),
        E("\xef\xbb\xbf" "func f() -> () {\n  return\n}\n", SYNTAX, 1, 1, "non-ASCII text is allowed only in comments"),
        E(F "  z = abs(x) \xe2\x80\x94 dash\n", SYNTAX, 2, 14, "non-ASCII text is allowed only in comments"),
        E(F "  z = abs(\xc3)\n", SYNTAX, 2, 11, "invalid UTF-8 byte 0xc3"),
        /* NUL bytes */
        E("\0", SYNTAX, 1, 1, "NUL byte in the input"),
        E("func f\0() -> () {}", SYNTAX, 1, 7, "NUL byte in the input"),
        E("# a\0b\n", SYNTAX, 1, 4, "NUL byte in the input"),
        E(F "  return x\n}\n\0", SYNTAX, 4, 1, "NUL byte in the input"),
        /* control characters */
        E("\x01", SYNTAX, 1, 1, "unexpected control character 0x01"),
        E("func\x0b" "f() -> () {}", SYNTAX, 1, 5, "unexpected control character 0x0b"),
        E("func\x0c" "f() -> () {}", SYNTAX, 1, 5, "unexpected control character 0x0c"),
        E("func f\x7f", SYNTAX, 1, 7, "unexpected control character 0x7f"),
        E(F "  z = abs(x)\x1b[31m\n", SYNTAX, 2, 13, "unexpected control character 0x1b"),
        /* stray characters */
        E("@", SYNTAX, 1, 1, "unexpected character '@'"),
        E(F "  z = abs(x);\n", SYNTAX, 2, 13, "unexpected character ';'"),
        E(F "  z = \"x\"\n", SYNTAX, 2, 7, "unexpected character '\"'"),
        E(F "  z = `id`\n", SYNTAX, 2, 7, "unexpected character '`'"),
        E(F "  z = x.y\n", SYNTAX, 2, 8, "unexpected character '.'"),
        /* CRLF files and tabs: a tab is one column, \r is white space */
        E("func f(x: f32[4]) -> f32[4] {\r\n  z = frob(x)\r\n", SYNTAX, 2, 7, "unknown op 'frob'"),
        E(F "\tz = frob(x)\n", SYNTAX, 2, 6, "unknown op 'frob'"),
    };
    check_cases(cases);
}

static void test_errors_junk(void **state)
{
    (void)state;
    static const err_case cases[] = {
        E("x;system(\"id\")", SYNTAX, 1, 1, "expected 'func', 'var' or 'persistent', found 'x'"),
        E("func x;system(\"id\")", SYNTAX, 1, 7, "unexpected character ';'"),
        E(F "  x;system(\"id\")\n", SYNTAX, 2, 4, "unexpected character ';'"),
        E(F "  z = x;system(\"id\")\n", SYNTAX, 2, 8, "unexpected character ';'"),
        E(F "  z = $(id)\n", SYNTAX, 2, 7, "unexpected character '$'"),
        E("}", SYNTAX, 1, 1, "expected 'func', 'var' or 'persistent', found '}'"),
        E("func f() -> () {\n  return\n}\n}\n", SYNTAX, 4, 1, "expected 'func', 'var' or 'persistent', found '}'"),
        E("func f() -> () {\n  return\n}\n42", SYNTAX, 4, 1, "expected 'func', 'var' or 'persistent', found '42'"),
        E("function f() -> () {}", SYNTAX, 1, 1, "expected 'func', 'var' or 'persistent', found 'function'"),
        E("func f() -> () {\n  return\n};", SYNTAX, 3, 2, "unexpected character ';'"),
        E(F "  1 = x\n", SYNTAX, 2, 3, "expected a statement (NAME = expression, or return), found '1'"),
        E(F "  add(x, x)\n", SYNTAX, 2, 3, "the value of this op is unused: name it (x = add(...))"),
        E(F "  z abs(x)\n", SYNTAX, 2, 5, "expected '=', found 'abs'"),
        E(F "  z = = abs(x)\n", SYNTAX, 2, 7, "expected a value or an op, found '='"),
        E(F "  z = (x)\n", SYNTAX, 2, 7, "expected a value or an op, found '('"),
        E(F "  z = abs((x))\n", SYNTAX, 2, 11, "expected a value or an op, found '('"),
        E(F "  z = abs(x) abs(x)\n", SYNTAX, 2, 14, "the value of this op is unused: name it (x = abs(...))"),
        E(F "  z = abs(x)\n  return x y\n}\n", SYNTAX, 3, 12, "statement after return"),
        E(F "  return -x\n}\n", SYNTAX, 2, 10, "expected a value or an op, found '-'"),
        E("func f(x: f32[4] colx) -> f32[4] {\n  return x\n}\n", SYNTAX, 1, 18, "expected ')', found 'colx'"),
        E("func f(x: f32[4]) -> f32[4] row row {\n  return x\n}\n", SYNTAX, 1, 33, "expected '{', found 'row'"),
        E("func f(x f32[4]) -> f32[4] {}", SYNTAX, 1, 10, "expected ':', found 'f32'"),
        E("func f(x: f32[4]) f32[4] {}", SYNTAX, 1, 19, "expected '->', found 'f32'"),
        E("func f(x: f32[4]) - > f32[4] {}", SYNTAX, 1, 19, "expected '->', found '-'"),
        E("func f(x: f32[4]) -> f32[4], f32[4] {}", SYNTAX, 1, 28, "expected '{', found ','"),
        E("func f(x: f32[4]) -> (f32[4] {}", SYNTAX, 1, 30, "expected ')', found '{'"),
        E("func (x: f32[4]) -> f32[4] {}", SYNTAX, 1, 6, "expected a function name, found '('"),
    };
    check_cases(cases);
}

static void test_errors_types_and_dims(void **state)
{
    (void)state;
    static const err_case cases[] = {
        E("func f(x: f16[4]) -> f32[4] {}", SYNTAX, 1, 11,
          "expected a type (f32, f64, i32, i64 or bool), found 'f16'"),
        E("func f(x: float[4]) -> f32[4] {}", SYNTAX, 1, 11, "found 'float'"),
        E("func f(x: f32) -> f32[4] {}", SYNTAX, 1, 14, "expected '[', found ')'"),
        E("func f(x: f32[4,]) -> f32[4] {}", SYNTAX, 1, 17,
          "expected a dimension (a non-negative integer or a dim name), found ']'"),
        E("func f(x: f32[,4]) -> f32[4] {}", SYNTAX, 1, 15, "expected a dimension"),
        E("func f(x: f32[-1]) -> f32[4] {}", SYNTAX, 1, 15, "a dimension cannot be negative"),
        E("func f(x: f32[1e3]) -> f32[4] {}", SYNTAX, 1, 15,
          "expected a dimension (a non-negative integer or a dim name), found '1e3'"),
        E("func f(x: f32[4.0]) -> f32[4] {}", SYNTAX, 1, 15, "found '4.0'"),
        /* a name is a dim when a parameter's shape declares it */
        E("func f() -> f32[n] {}", SYNTAX, 1, 17, "n is not a dim of the parameters' shapes"),
        E("func f(x: f32[n+]) -> f32[4] {}", SYNTAX, 1, 17, "found ']'"),
        E("func f(x: f32[f32]) -> f32[4] {}", SYNTAX, 1, 15, "'f32' is an element type"),
        E("func f(x: f32[[4]]) -> f32[4] {}", SYNTAX, 1, 15, "found '['"),
        E("func f(x: f32[12abc]) -> f32[4] {}", SYNTAX, 1, 17, "malformed number"),
        /* 2^63 does not fit an int64 */
        E("func f(x: f32[9223372036854775808]) -> f32[4] {}", SYNTAX, 1, 15,
          "integer 9223372036854775808 is too large (the limit is 2^63 - 1)"),
        E("func f(x: f32[99999999999999999999999]) -> f32[4] {}", SYNTAX, 1, 15, "is too large"),
        /* sizes: 2^62 f32 elements, 2^40 x 2^40, 2^60 f32 = 2^62 bytes, 2^62 bools */
        E("func f(x: f32[4611686018427387904]) -> f32[4] {}", LIMIT, 1, 11,
          "this shape is too large (the limit is 2^62 bytes)"),
        E("func f(x: f32[1099511627776,1099511627776]) -> f32[4] {}", LIMIT, 1, 11,
          "the limit is 2^62 bytes"),
        E("func f(x: f32[1152921504606846976]) -> f32[4] {}", LIMIT, 1, 11, "the limit is 2^62 bytes"),
        E("func f(x: bool[4611686018427387904]) -> f32[4] {}", LIMIT, 1, 11, "the limit is 2^62 bytes"),
        E("func f(x: f64[4611686018427387903]) -> f32[4] {}", LIMIT, 1, 11, "the limit is 2^62 bytes"),
        E("func f(x: f32[9223372036854775807,2]) -> f32[4] {}", LIMIT, 1, 11, "the limit is 2^62 bytes"),
        /* a zero dim does not hide the size of the others */
        E("func f(x: f32[0,4611686018427387904]) -> f32[4] {}", LIMIT, 1, 11, "the limit is 2^62 bytes"),
        E("func f(x: f32[4611686018427387904,0]) -> f32[4] {}", LIMIT, 1, 11, "the limit is 2^62 bytes"),
        E("func f() -> f32[4611686018427387904] {}", LIMIT, 1, 13, "the limit is 2^62 bytes"),
        E(F "  z = constant(f32[4611686018427387904], 0)\n", LIMIT, 2, 16, "the limit is 2^62 bytes"),
        E(F "  z = broadcast(x, shape=[4,4611686018427387904], axes=[1])\n", LIMIT, 2, 7,
          "broadcast: shape [4,4611686018427387904] is too large"),
        E(F "  z = reshape(x, shape=[4611686018427387904,0])\n", LIMIT, 2, 7,
          "reshape: shape [4611686018427387904,0] is too large"),
    };
    check_cases(cases);

    /* 32 dims are fine, 33 are not: the 33rd is at column 15 + 32 * 2 */
    char *ones = repeat("1,", 32);
    char *src = cat("func f(x: f32[", ones, "1]) -> f32[4] {}", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 1, 79, "more than 32 dimensions", __LINE__));
    free(src);
    src = cat("func f(x: f32[", ones, "]) -> f32[4] {\n  return x\n}\n", NULL);
    /* a 33rd dim is refused before it is read */
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 1, 79, "more than 32 dimensions", __LINE__));
    free(src);
    ones[63] = '\0'; /* 32 ones */
    src = cat("func f(x: f32[", ones, "]) -> f32[", ones, "] {\n  return x\n}\n", NULL);
    nest_module *m = parse_ok(src);
    nest_function *f = nest_module_function(m, 0);
    assert_int_equal(nest_value_rank(f, nest_param(f, 0)), 32);
    nest_module_free(m);
    free(canon(src));
    free(src);
    free(ones);

    /* just below the limits */
    static const char *const big[] = {
        "func f(x: f32[1152921504606846975], y: bool[4611686018427387903], "
        "z: f32[0,1152921504606846975], w: f64[0,0,576460752303423487]) -> f32[1152921504606846975] {\n"
        "  return x\n}\n",
        "func f(x: i64[1024,1024,1024,1024,1024,511]) -> () {\n  return\n}\n", /* 511 * 2^53 bytes */
    };
    for (size_t i = 0; i < countof(big); i++) {
        m = parse_ok(big[i]);
        nest_module_free(m);
        free(canon(big[i]));
    }
}

static void test_errors_names(void **state)
{
    (void)state;
    static const err_case cases[] = {
        E("func int() -> () {\n  return\n}\n", ARG, 1, 6, "function name 'int' is a C keyword"),
        E("func main() -> () {\n  return\n}\n", ARG, 1, 6, "function name 'main' is a C keyword"),
        E("func nest_f() -> () {\n  return\n}\n", ARG, 1, 6, "function name 'nest_f' is reserved"),
        E("func f(nest_x: f32[4]) -> f32[4] {}", ARG, 1, 8, "parameter name 'nest_x' is reserved"),
        E("func f(__x: f32[4]) -> f32[4] {}", ARG, 1, 8, "parameter name '__x' is reserved"),
        E("func f(while: f32[4]) -> f32[4] {}", ARG, 1, 8, "parameter name 'while' is a C keyword"),
        E(F "  __x = abs(x)\n", ARG, 2, 3, "value name '__x' is reserved"),
        E(F "  _Y = abs(x)\n", ARG, 2, 3, "value name '_Y' is reserved"),
        E(F "  int = abs(x)\n", ARG, 2, 3, "value name 'int' is a C keyword"),
        E(F "  true = abs(x)\n", ARG, 2, 3, "value name 'true' is a C keyword"),
        E(F "  return = abs(x)\n", SYNTAX, 2, 10, "expected a value or an op, found '='"),
        /* duplicates: parameters, values, functions */
        E("func f(x: f32[4], x: f32[4]) -> f32[4] {}", SYNTAX, 1, 19,
          "'x' is already defined at line 1, column 8"),
        E(F "  z = abs(x)\n  z = abs(x)\n", SYNTAX, 3, 3, "'z' is already defined at line 2, column 3"),
        E(F "  x = abs(x)\n", SYNTAX, 2, 3, "'x' is already defined at line 1, column 8"),
        E(F "  z = abs(x)\n  y = z\n  y = z\n", SYNTAX, 4, 3, "'y' is already defined at line 3, column 3"),
        E("func g() -> () {\n  return\n}\nfunc g() -> () {\n  return\n}\n", SYNTAX, 4, 6,
          "function 'g' is already defined at line 1"),
        /* use before definition, and scopes are per function */
        E(H "  z = add(x, w)\n  w = abs(x)" T, SYNTAX, 2, 14, "use of undefined value 'w'"),
        E(F "  z = abs(z)\n", SYNTAX, 2, 11, "use of undefined value 'z'"),
        E(F "  z = add(x, abs)\n", SYNTAX, 2, 14, "op 'abs' needs operands in parentheses"),
        E(F "  return y\n}\n", SYNTAX, 2, 10, "use of undefined value 'y'"),
        E("func g(a: f32[4]) -> f32[4] {\n  return a\n}\nfunc h() -> f32[4] {\n  return a\n}\n", SYNTAX,
          5, 10, "use of undefined value 'a'"),
    };
    check_cases(cases);

    /* long names: 255 characters are fine, 256 and 20,000 are not */
    char *n255 = repeat("a", 255), *n256 = repeat("b", 256), *n20k = repeat("c", 20000);
    char *src = cat("func ", n255, "(", n255, ": f32[4]) -> f32[4] {\n  return ", n255, "\n}\n", NULL);
    nest_module *m = parse_ok(src);
    assert_int_equal(strlen(nest_function_name(nest_module_function(m, 0))), 255);
    nest_module_free(m);
    free(canon(src));
    free(src);
    src = cat("func ", n256, "() -> () {\n  return\n}\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 1, 6,
                            "name is 256 characters long (the limit is 255)", __LINE__));
    free(src);
    src = cat("func ", n20k, "() -> () {\n  return\n}\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 1, 6,
                            "name is 20000 characters long (the limit is 255)", __LINE__));
    free(src);
    src = cat("func f(", n20k, ": f32[4]) -> f32[4] {}", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 1, 8, "name is 20000 characters long", __LINE__));
    free(src);
    src = cat(F "  ", n20k, " = abs(x)\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 2, 3, "name is 20000 characters long", __LINE__));
    free(src);
    /* a long undefined name shows its first 40 characters */
    src = cat(F "  z = abs(", n20k, ")\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_SYNTAX, 2, 11,
                            "use of undefined value 'cccccccccccccccccccccccccccccccccccccccc...'",
                            __LINE__));
    nest_module *m2 = nest_parse(src, strlen(src), FILE_NAME);
    assert_true(strlen(nest_module_errmsg(m2)) < 200);
    nest_module_free(m2);
    free(src);
    src = cat(F "  z = ", n20k, "(x)\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_SYNTAX, 2, 7, "unknown op 'cccc", __LINE__));
    free(src);
    free(n255);
    free(n256);
    free(n20k);
}

static void test_errors_attributes(void **state)
{
    (void)state;
    static const err_case cases[] = {
        /* missing */
        E(H "  z = sum(x)" T, SYNTAX, 2, 7, "sum needs axes=[...]"),
        E(H "  z = max(x)" T, SYNTAX, 2, 7, "max needs axes=[...]"),
        E(H "  z = broadcast(x, shape=[4])" T, SYNTAX, 2, 7, "broadcast needs axes=[...]"),
        E(H "  z = broadcast(x, axes=[])" T, SYNTAX, 2, 7, "broadcast needs shape=[...]"),
        E(H "  z = reshape(x, order=[0])" T, SYNTAX, 2, 7, "reshape needs shape=[...]"),
        E(H "  z = slice(x, upper=[1])" T, SYNTAX, 2, 7, "slice needs lower=[...]"),
        E(H "  z = slice(x, lower=[1])" T, SYNTAX, 2, 7, "slice needs upper=[...]"),
        E(H "  z = concat(x, y)" T, SYNTAX, 2, 7, "concat needs axis=N"),
        E(H "  z = convert(x)" T, SYNTAX, 2, 7, "convert needs type=T"),
        /* wrong or unknown */
        E(H "  z = sum(x, shape=[4])" T, SYNTAX, 2, 14, "sum has no attribute 'shape'"),
        E(H "  z = sum(x, foo=[0])" T, SYNTAX, 2, 14, "sum has no attribute 'foo'"),
        E(H "  z = add(x, x, axis=0)" T, SYNTAX, 2, 17, "add has no attribute 'axis'"),
        E(H "  z = broadcast(x, order=[0], shape=[4], axes=[])" T, SYNTAX, 2, 20,
          "broadcast has no attribute 'order'"),
        E(H "  z = get(tuple(x), index=0)" T, SYNTAX, 2, 21, "get has no attribute 'index'"),
        E(H "  z = constant(x=1)" T, SYNTAX, 2, 16, "constant has no attribute 'x'"),
        E(H "  z = convert(x, type=f16)" T, SYNTAX, 2, 23,
          "expected an element type (f32, f64, i32, i64 or bool), found 'f16'"),
        E(H "  z = convert(x, type=[f64])" T, SYNTAX, 2, 23, "expected an element type"),
        /* duplicated */
        E(H "  z = sum(x, axes=[0], axes=[0])" T, SYNTAX, 2, 24, "attribute 'axes' is given twice"),
        E(H "  z = convert(x, type=f64, type=f64)" T, SYNTAX, 2, 28, "attribute 'type' is given twice"),
        /* malformed values */
        E(H "  z = sum(x, axes=0)" T, SYNTAX, 2, 19, "expected '[', found '0'"),
        E(H "  z = sum(x, axes=[0.5])" T, SYNTAX, 2, 20, "expected an integer, found '0.5'"),
        E(H "  z = sum(x, axes=[-1])" T, SYNTAX, 2, 21, "axes entries cannot be negative"),
        E(H "  z = broadcast(x, shape=[-4], axes=[])" T, SYNTAX, 2, 27, "shape entries cannot be negative"),
        E(H "  z = sum(x, axes=[99999999999999999999])" T, SYNTAX, 2, 20,
          "integer 99999999999999999999 is too large"),
        E(H "  z = concat(x, x, axis=-1)" T, SYNTAX, 2, 25, "axis cannot be negative"),
        E(H "  z = concat(x, x, axis=[0])" T, SYNTAX, 2, 25, "expected an integer"),
        E(H "  z = sum(x, axes=[0,])" T, SYNTAX, 2, 22, "expected an integer, found ']'"),
        E(H "  z = sum(x, axes=[0 1])" T, SYNTAX, 2, 22, "expected ']', found '1'"),
        /* lists of the wrong length */
        E(H "  z = slice(x, lower=[0,0], upper=[1,1])" T, SYNTAX, 2, 16,
          "lower has 2 entries but the operand has rank 1"),
        E(H "  z = slice(x, lower=[0], upper=[1,2])" T, SYNTAX, 2, 27, "upper has 2 entries but lower has 1"),
        E(H "  z = slice(x, lower=[0], upper=[4], strides=[1,1])" T, SYNTAX, 2, 38,
          "strides has 2 entries but lower has 1"),
        E(H "  z = slice(x, lower=[], upper=[])" T, SYNTAX, 2, 16, "lower has 0 entries but the operand has rank 1"),
        E(H "  z = reshape(x, order=[0,1], shape=[4])" T, SYNTAX, 2, 18,
          "order has 2 entries but the operand has rank 1"),
        E(H "  z = broadcast(x, shape=[4,4], axes=[0,1])" T, TYPE, 2, 7,
          "the shape has rank 2 with 2 new axes, so the operand must have rank 0"),
    };
    check_cases(cases);
    /* broadcast without new axes is fine */
    free(canon(H "  z = broadcast(x, shape=[4], axes=[])\n  return z\n}\n"));

    /* 33 entries: the 33rd is at column 20 + 32 * 2 */
    char *zeros = repeat("0,", 32);
    char *src = cat(H "  z = sum(x, axes=[", zeros, "0])" T, NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 2, 84, "more than 32 entries", __LINE__));
    free(src);
    free(zeros);
}

static void test_errors_operands(void **state)
{
    (void)state;
    static const err_case cases[] = {
        E(H "  z = frob(x)" T, SYNTAX, 2, 7, "unknown op 'frob'"),
        E(H "  z = parameter(x)" T, SYNTAX, 2, 7, "unknown op 'parameter'"),
        E(H "  z = Add(x, x)" T, SYNTAX, 2, 7, "unknown op 'Add'"),
        E(H "  z = add(x)" T, SYNTAX, 2, 7, "add takes 2 operands, not 1"),
        E(H "  z = add(x, x, x)" T, SYNTAX, 2, 7, "add takes 2 operands, not 3"),
        E(H "  z = add()" T, SYNTAX, 2, 7, "add takes 2 operands, not 0"),
        E(H "  z = negative(x, x)" T, SYNTAX, 2, 7, "negative takes 1 operand, not 2"),
        E(H "  z = select(b, x)" T, SYNTAX, 2, 7, "select takes 3 operands, not 2"),
        E(H "  z = sum(x, x, axes=[0])" T, SYNTAX, 2, 7, "sum takes 1 operand, not 2"),
        E(H "  z = concat(axis=0)" T, SYNTAX, 2, 7, "concat needs at least one operand"),
        E(H "  z = get(tuple(x))" T, SYNTAX, 2, 7, "get needs a tuple and an index, as in get(t, 0)"),
        E(H "  z = get(tuple(x), 0, 1)" T, SYNTAX, 2, 24, "get takes a tuple and an index"),
        E(H "  z = get(tuple(x), x)" T, SYNTAX, 2, 21, "expected the index of the tuple element, found 'x'"),
        E(H "  z = get(tuple(x), -1)" T, SYNTAX, 2, 21, "expected the index of the tuple element, found '-'"),
        E(H "  z = get(0, tuple(x))" T, SYNTAX, 2, 11, "expected a value or an op, found '0'"),
        E(H "  z = constant(f32[])" T, SYNTAX, 2, 7, "constant needs a type and values"),
        E(H "  z = constant()" T, SYNTAX, 2, 7, "constant needs a type and values"),
        E(H "  z = constant(f32[], 1, 2)" T, SYNTAX, 2, 26, "constant takes a type and its values"),
        E(H "  z = constant(1)" T, SYNTAX, 2, 16, "expected a type (f32, f64, i32, i64 or bool), found '1'"),
        E(H "  z = constant(f32[3], [1, 2])" T, SYNTAX, 2, 25, "constant f32: 2 values given, expected 1 or 3"),
        E(H "  z = constant(f32[3], [])" T, SYNTAX, 2, 26, "constant f32: 0 values given, expected 1 or 3"),
        E(H "  z = constant(f32[2], [[1, 2]])" T, SYNTAX, 2, 25, "nested lists are not allowed"),
        E(H "  z = constant(f32[2], x)" T, SYNTAX, 2, 24, "expected a number, inf, nan, true or false, found 'x'"),
        E(H "  z = constant(f32[2] col, 1)" T, SYNTAX, 2, 23, "expected ',' or ')', found 'col'"),
    };
    check_cases(cases);
}

/* Type errors are reported at the op, with the op, its operands and their shapes. */
static void test_errors_type_rules(void **state)
{
    (void)state;
    static const err_case cases[] = {
        E(H "  z = add(x, y)" T, TYPE, 2, 7,
          "add(x: f32[4], y: f32[3]): operand shapes differ (element-wise ops do not broadcast; use broadcast)"),
        E(H "  z = add(x, i)" T, TYPE, 2, 7, "add(x: f32[4], i: i32[4]): operand element types differ"),
        E(H "  z = exp(i)" T, TYPE, 2, 7, "exp(i: i32[4]): operand 1 must be f32 or f64, not i32"),
        E(H "  z = add(x, exp(i))" T, TYPE, 2, 14, "exp(i: i32[4]): operand 1 must be f32 or f64"),
        E(H "  z = add(x, negative(y))" T, TYPE, 2, 7, "add(x: f32[4], negative(...): f32[3]): operand shapes differ"),
        E(H "  return add(x, y)\n}\n", TYPE, 2, 10, "add(x: f32[4], y: f32[3])"),
        E(H "  z = less(b, b)" T, TYPE, 2, 7, "less(b: bool[4], b: bool[4]): operand 1 must be f32, f64, i32 or i64, not bool"),
        E(H "  z = dot(b, b)" T, TYPE, 2, 7, "dot(b: bool[4], b: bool[4]): operand 1 must be f32, f64, i32 or i64, not bool"),
        E(H "  z = select(x, x, x)" T, TYPE, 2, 7, "select(x: f32[4], x: f32[4], x: f32[4]): operand 1 must be bool, not f32"),
        E(H "  z = select(b, x, i)" T, TYPE, 2, 7, "select(b: bool[4], x: f32[4], i: i32[4]): operand element types differ"),
        E(H "  z = select(b, y, y)" T, TYPE, 2, 7, "operand shapes differ"),
        E(H "  z = dot(x, y)" T, TYPE, 2, 7,
          "dot(x: f32[4], y: f32[3]): the last axis of the first operand (4) differs from the first axis of the second (3)"),
        E(H "  z = dot(x, i)" T, TYPE, 2, 7, "dot(x: f32[4], i: i32[4]): operand element types differ"),
        E(H "  z = reshape(x, shape=[5])" T, TYPE, 2, 7, "reshape(x: f32[4]): shape [5] has 5 elements but the operand has 4"),
        E(H "  z = reshape(x, order=[1], shape=[4])" T, TYPE, 2, 7, "order must be a permutation of 0..0 (entry 0 is 1)"),
        E(H "  z = slice(x, lower=[1], upper=[5])" T, TYPE, 2, 7, "slice(x: f32[4]): axis 0: bounds [1, 5) are not within [0, 4]"),
        E(H "  z = slice(x, lower=[3], upper=[1])" T, TYPE, 2, 7, "axis 0: bounds [3, 1) are not within [0, 4]"),
        E(H "  z = slice(x, lower=[-1], upper=[4])" T, TYPE, 2, 7, "axis 0: bounds [-1, 4) are not within [0, 4]"),
        E(H "  z = slice(x, lower=[0], upper=[4], strides=[0])" T, TYPE, 2, 7, "axis 0: stride 0 must be at least 1"),
        E(H "  z = broadcast(y, shape=[4,4], axes=[0])" T, TYPE, 2, 7,
          "broadcast(y: f32[3]): output dimension 1 is 4 but the operand's dimension 0 is 3"),
        E(H "  z = broadcast(x, shape=[4,4], axes=[2])" T, TYPE, 2, 7, "axis 2 is out of range for rank 2"),
        E(H "  z = broadcast(x, shape=[4,4,4], axes=[1,1])" T, TYPE, 2, 7, "axis 1 is repeated"),
        E(H "  z = sum(x, axes=[1])" T, TYPE, 2, 7, "sum(x: f32[4]): axis 1 is out of range for rank 1"),
        E(H "  z = sum(x, axes=[0,0])" T, TYPE, 2, 7, "axis 0 is repeated"),
        E(H "  z = max(b, axes=[0])" T, TYPE, 2, 7, "max(b: bool[4]): operand 1 must be f32, f64, i32 or i64, not bool"),
        E(H "  z = concat(x, y, axis=1)" T, TYPE, 2, 7, "concat(x: f32[4], y: f32[3]): axis 1 is out of range for rank 1"),
        E(H "  z = concat(x, i, axis=0)" T, TYPE, 2, 7, "operand element types differ"),
        E(H "  z = concat(x, broadcast(x, shape=[4,4], axes=[0]), axis=0)" T, TYPE, 2, 7, "operand ranks differ"),
        E(H "  z = concat(sum(x, axes=[0]), axis=0)" T, TYPE, 2, 7, "scalars cannot be concatenated"),
        E(H "  z = get(x, 0)" T, TYPE, 2, 7, "get(x: f32[4]): the operand is not a tuple"),
        E(H "  z = get(tuple(x, y), 2)" T, TYPE, 2, 7, "index 2 is out of range for a tuple of 2"),
        E(H "  z = add(tuple(x), x)" T, TYPE, 2, 7, "add(tuple(...): (f32[4]), x: f32[4]): operand 1 is a tuple; use get to take an element"),
        E(H "  z = convert(tuple(x), type=f64)" T, TYPE, 2, 7, "operand 1 is a tuple"),
        E(H "  t = tuple(x, y)\n  z = negative(t)" T, TYPE, 3, 7, "negative(t: (f32[4], f32[3])): operand 1 is a tuple"),
    };
    check_cases(cases);
}

static void test_errors_results_and_statements(void **state)
{
    (void)state;
    static const err_case cases[] = {
        E("func f(x: f32[4]) -> f32[3] {\n  return x\n}\n", TYPE, 2, 3,
          "result 1 is f32[4] but the function declares f32[3]"),
        E("func f(x: f32[4]) -> i32[4] {\n  return x\n}\n", TYPE, 2, 3,
          "result 1 is f32[4] but the function declares i32[4]"),
        E("func f(x: f32[4]) -> f32[] {\n  return x\n}\n", TYPE, 2, 3,
          "result 1 is f32[4] but the function declares f32[]"),
        E("func f(x: f32[4]) -> (f32[4], f32[2,2]) {\n  return x, x\n}\n", TYPE, 2, 3,
          "result 2 is f32[4] but the function declares f32[2,2]"),
        E("func f(x: f32[4]) -> (f32[4], f32[4]) {\n  return x\n}\n", TYPE, 2, 3,
          "the function declares 2 results but returns 1"),
        E("func f(x: f32[4]) -> () {\n  return x\n}\n", TYPE, 2, 3, "the function declares 0 results but returns 1"),
        E("func f(x: f32[4]) -> f32[4] {\n  return\n}\n", TYPE, 2, 3, "the function declares 1 result but returns 0"),
        E("func f(x: f32[4]) -> f32[4] {\n  return tuple(x, x)\n}\n", TYPE, 2, 3,
          "the function declares 1 result but returns 2"),
        E("func f(x: f32[4]) -> f32[4] {\n  return tuple()\n}\n", TYPE, 2, 3,
          "the function declares 1 result but returns 0"),
        E(F "  return x\n  z = abs(x)\n}\n", SYNTAX, 3, 3, "statement after return"),
        E(F "  return x\n  return x\n}\n", SYNTAX, 3, 3, "statement after return"),
        E(F "  z = abs(x)\n}\n", SYNTAX, 3, 1, "function 'f' has no return statement"),
        E("func f() -> () {\n}\n", SYNTAX, 2, 1, "function 'f' has no return statement"),
        E("func f() -> () {}", SYNTAX, 1, 17, "function 'f' has no return statement"),
        E(F "  return x,\n}\n", SYNTAX, 3, 1, "expected a value or an op, found '}'"),
        E(F "  return x\n}\nfunc g() -> f32[2] {\n  return constant(f32[2], [1, 2, 3])\n}\n", SYNTAX, 5, 28,
          "constant f32: 3 values given, expected 1 or 2"),
    };
    check_cases(cases);
}

static void test_errors_numbers(void **state)
{
    (void)state;
    /* the literal after "  z = constant(T[], " is at column 23 (24 for bool) */
    static const err_case cases[] = {
        E(F "  z = constant(f64[], 1e999)\n", SYNTAX, 2, 23, "number 1e999 is out of range (use inf for infinity)"),
        E(F "  z = constant(f64[], -1e999)\n", SYNTAX, 2, 24, "number 1e999 is out of range"),
        E(F "  z = constant(f32[], 1e39)\n", SYNTAX, 2, 23, "number is out of range for f32"),
        E(F "  z = constant(f32[], -3.5e38)\n", SYNTAX, 2, 23, "number is out of range for f32"),
        E(F "  z = constant(i32[], 2147483648)\n", SYNTAX, 2, 23, "integer literal is out of range for i32"),
        E(F "  z = constant(i32[], -2147483649)\n", SYNTAX, 2, 23, "integer literal is out of range for i32"),
        E(F "  z = constant(i64[], 9223372036854775808)\n", SYNTAX, 2, 23, "integer literal is out of range for i64"),
        E(F "  z = constant(i64[], -9223372036854775809)\n", SYNTAX, 2, 23, "integer literal is out of range for i64"),
        E(F "  z = constant(i64[], 18446744073709551616)\n", SYNTAX, 2, 23, "integer literal is out of range for i64"),
        E(F "  z = constant(i64[], 99999999999999999999999999)\n", SYNTAX, 2, 23, "out of range for i64"),
        E(F "  z = constant(i32[], 1.5)\n", SYNTAX, 2, 23, "i32 constants take integer literals"),
        E(F "  z = constant(i64[], 1e3)\n", SYNTAX, 2, 23, "i64 constants take integer literals"),
        E(F "  z = constant(i32[], inf)\n", SYNTAX, 2, 23, "i32 constants take integer literals"),
        E(F "  z = constant(f32[], true)\n", SYNTAX, 2, 23, "a bool literal in a f32 constant"),
        E(F "  z = constant(bool[], 1)\n", SYNTAX, 2, 24, "bool constants take true or false"),
        E(F "  z = constant(bool[], -true)\n", SYNTAX, 2, 25, "'-' before a bool"),
        E(F "  z = constant(f32[], --1)\n", SYNTAX, 2, 24, "expected a number, inf, nan, true or false, found '-'"),
        E(F "  z = constant(f32[], infinity)\n", SYNTAX, 2, 23, "found 'infinity'"),
        E(F "  z = constant(f32[], NaN)\n", SYNTAX, 2, 23, "found 'NaN'"),
        /* malformed: reported at the first character that cannot continue the number */
        E(F "  z = constant(f32[], 1e)\n", SYNTAX, 2, 24, "malformed number"),
        E(F "  z = constant(f32[], 1e+)\n", SYNTAX, 2, 24, "malformed number"),
        E(F "  z = constant(f32[], 1.2.3)\n", SYNTAX, 2, 26, "malformed number"),
        E(F "  z = constant(f32[], 12abc)\n", SYNTAX, 2, 25, "malformed number"),
        E(F "  z = constant(f32[], 0x10)\n", SYNTAX, 2, 24, "malformed number"),
        E(F "  z = constant(f32[], 1_000)\n", SYNTAX, 2, 24, "malformed number"),
        E(F "  z = constant(f32[], 1..2)\n", SYNTAX, 2, 25, "malformed number"),
        E(F "  z = constant(f32[], 1e5e5)\n", SYNTAX, 2, 26, "malformed number"),
        E(F "  z = constant(f32[], .)\n", SYNTAX, 2, 23, "unexpected character '.'"),
        E(F "  z = constant(f32[], +1)\n", SYNTAX, 2, 23, "found '+'"),
    };
    check_cases(cases);

    /* a literal of 128 characters or more is refused as a whole */
    char *zeros = repeat("0", 200);
    char *src = cat(F "  z = constant(f64[], 0.", zeros, "1)\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_SYNTAX, 2, 23, "number literal is too long", __LINE__));
    free(src);
    free(zeros);

    /* the edges of each type parse */
    static const char ok[] =
        "func f() -> (i32[2], i64[2], f32[2], f64[3]) {\n"
        "  return constant(i32[2], [-2147483648, 2147483647]), "
        "constant(i64[2], [-9223372036854775808, 9223372036854775807]), "
        "constant(f32[2], [-3.4028235e38, 3.4028235e38]), constant(f64[3], [-inf, -nan, 1e-400])\n"
        "}\n";
    free(canon(ok));
}

/* 20,000 nested calls: the parser stops at the 1001st, at its column, without recursing further. */
static void test_errors_deep_nesting(void **state)
{
    (void)state;
    char *open = repeat("negative(", 20000), *close = repeat(")", 20000);
    char *src = cat(F "  y = ", open, "x", close, "\n  return y\n}\n", NULL);
    /* the k-th call starts at column 7 + 9 (k - 1): the 1001st at 9007 */
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 2, 9007,
                            "calls nest deeper than 1000 levels", __LINE__));
    free(src);
    /* the same in a return statement: "  return " is 9 columns */
    src = cat(F "  return ", open, "x", close, "\n}\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 2, 10 + 9000, "deeper than 1000", __LINE__));
    free(src);
    free(open);
    free(close);

    /* 1000 levels are fine, in each of two statements (the depth comes back to 0) */
    open = repeat("negative(", 1000);
    close = repeat(")", 1000);
    src = cat(F "  y = ", open, "x", close, "\n  z = ", open, "y", close, "\n  return z\n}\n", NULL);
    nest_module *m = parse_ok(src);
    assert_int_equal(nest_module_function(m, 0)->nnodes, 2001);
    nest_module_free(m);
    free(canon(src));
    free(src);
    free(open);
    free(close);

    /* deep brackets of other kinds do not recurse at all */
    open = repeat("(", 20000);
    src = cat(F "  y = abs", open, "x\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_SYNTAX, 2, 11, "expected a value or an op, found '('",
                            __LINE__));
    free(src);
    free(open);
    open = repeat("[", 20000);
    src = cat(F "  y = constant(f32[1], ", open, "1\n", NULL);
    assert_true(check_error(src, strlen(src), NEST_ERR_SYNTAX, 2, 25, "nested lists are not allowed", __LINE__));
    free(src);
    free(open);
}

static void *parse_thread(void *src)
{
    nest_module *m = nest_parse(src, strlen(src), FILE_NAME);
    bool ok = m && nest_module_errcode(m) == NEST_OK && nest_module_count(m) == 1;
    nest_module_free(m);
    return ok ? src : NULL;
}

/* The nesting limit is reachable on a thread with a 2 MB stack (each level once took 3.3 KB). */
static void test_nesting_small_stack(void **state)
{
    (void)state;
    char *open = repeat("negative(", 1000), *close = repeat(")", 1000);
    char *src = cat(F "  y = ", open, "x", close, "\n  return y\n}\n", NULL);
    pthread_attr_t attr;
    pthread_t t;
    void *ret = NULL;
    assert_int_equal(pthread_attr_init(&attr), 0);
    assert_int_equal(pthread_attr_setstacksize(&attr, (size_t)2 << 20), 0);
    assert_int_equal(pthread_create(&t, &attr, parse_thread, src), 0);
    assert_int_equal(pthread_join(t, &ret), 0);
    pthread_attr_destroy(&attr);
    assert_ptr_equal(ret, src);
    free(src);
    free(open);
    free(close);
}

/* 20,000 statements in a chain parse and print quickly; the source is already canonical. */
static void test_long_chain(void **state)
{
    (void)state;
    buf b = {0};
    buf_puts(&b, F "  v1 = negative(x)\n");
    for (int i = 2; i <= 20000; i++)
        buf_printf(&b, "  v%d = negative(v%d)\n", i, i - 1);
    buf_puts(&b, "  return v20000\n}\n");
    char *src = buf_finish(&b);
    assert_non_null(src);
    double t0 = now();
    nest_module *m = parse_ok(src);
    char *text = print_module(m);
    double t = now() - t0;
    assert_string_equal(text, src);
    assert_int_equal(nest_module_function(m, 0)->nnodes, 20001);
    assert_true(t < 2.0 || tu_under_valgrind());
    free(text);
    nest_module_free(m);
    free(src);

    /* a wide tuple and a wide concat */
    buf_puts(&b, "func w(x: f32[1]) -> f32[20000] {\n  return concat(x");
    for (int i = 1; i < 20000; i++)
        buf_puts(&b, ", x");
    buf_puts(&b, ", axis=0)\n}\n");
    src = buf_finish(&b);
    assert_non_null(src);
    free(canon(src));
    free(src);
}

/* Tuples that share elements stand for exponentially many tensors: returning one is an error,
 * printing one (text and Graphviz) stays linear. */
static void test_shared_tuples(void **state)
{
    (void)state;
    buf b = {0};
    buf_puts(&b, F "  t0 = tuple(x, x)\n");
    for (int i = 1; i < 60; i++)
        buf_printf(&b, "  t%d = tuple(t%d, t%d)\n", i, i - 1, i - 1);
    size_t body = b.len;
    buf_puts(&b, "  return t59\n}\n");
    char *src = buf_finish(&b);
    assert_non_null(src);
    /* line 62, after the 60 tuples */
    assert_true(check_error(src, strlen(src), NEST_ERR_LIMIT, 62, 3, "too many results", __LINE__));
    src[body] = '\0';
    char *valid = cat(src, "  return x\n}\n", NULL);
    nest_module *m = parse_ok(valid);
    double t0 = now();
    char *dot = nest_print_dot(m->fns, 1);
    assert_non_null(dot);
    assert_true(now() - t0 < 2.0 || tu_under_valgrind());
    free(dot);
    nest_module_free(m);
    free(canon(valid));
    free(valid);
    free(src);

    /* 20,000 tuples, each inside the next */
    buf_puts(&b, F "  t0 = tuple(x)\n");
    for (int i = 1; i < 20000; i++)
        buf_printf(&b, "  t%d = tuple(t%d)\n", i, i - 1);
    buf_puts(&b, "  return t19999\n}\n");
    src = buf_finish(&b);
    assert_non_null(src);
    m = parse_ok(src);
    assert_int_equal(nest_result(nest_module_function(m, 0), 0), 0);
    dot = nest_print_dot(m->fns, 1);
    assert_non_null(dot);
    free(dot);
    nest_module_free(m);
    free(canon(src));
    free(src);
}

/* ---- Graphviz ---- */

/* The number of lines of s that contain `part` (and `also`, if not NULL; but not `not`). */
static int count_lines3(const char *s, const char *part, const char *also, const char *not)
{
    int n = 0;
    for (const char *line = s; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char tmp[512];
        size_t k = len < sizeof tmp - 1 ? len : sizeof tmp - 1;
        memcpy(tmp, line, k);
        tmp[k] = '\0';
        n += strstr(tmp, part) && (!also || strstr(tmp, also)) && (!not || !strstr(tmp, not));
        line = end ? end + 1 : NULL;
    }
    return n;
}

static int count_lines(const char *s, const char *part) { return count_lines3(s, part, NULL, NULL); }

/* Node statements of a Graphviz text: "f<k>_n<i> [label=...]" (results are f<k>_r<i>). */
static int count_dot_nodes(const char *s) { return count_lines3(s, "_n", " [label=\"", " -> "); }

/* The text between "subgraph NAME {" and its closing brace: the statements of a cluster. */
static char *dot_cluster(const char *dot, const char *name)
{
    char head[96];
    snprintf(head, sizeof head, "subgraph %s {", name);
    const char *p = strstr(dot, head);
    if (!p)
        return NULL;
    const char *q = p + strlen(head);
    for (int depth = 1; *q && depth > 0; q++)
        depth += *q == '{' ? 1 : *q == '}' ? -1 : 0;
    return strndup(p, (size_t)(q - p));
}

static void test_dot(void **state)
{
    (void)state;
    nest_module *m = parse_ok(design_text);
    char *dot = nest_print_dot(m->fns, m->nfns);
    assert_non_null(dot);
    assert_int_equal(strncmp(dot, "digraph ", 8), 0);
    assert_int_equal(dot[strlen(dot) - 2], '}');
    /* one node per op: l2 has 4 (x, y, d, r), dense 9, two 3 (a, t, the sum) */
    assert_int_equal(count_dot_nodes(dot), 16);
    assert_int_equal(count_lines(dot, "[label=\"result "), 4);
    /* edges: l2 2 + 2, dense 2 + 1 + 2 + 0 + 1 + 2, two 1 + 1, and one per result */
    assert_int_equal(count_lines(dot, "->"), 4 + 8 + 2 + 4);
    assert_int_equal(count_lines(dot, "label=\"l2\";"), 1);
    assert_int_equal(count_lines(dot, "label=\"dense\";"), 1);
    assert_int_equal(count_lines(dot, "label=\"two\";"), 1);
    /* labels: a parameter with its type, an op with its name; the type and shape on the edges */
    assert_non_null(strstr(dot, "f0_n0 [label=\"x: f32[1048576]\", style=\"rounded,filled\"]"));
    assert_non_null(strstr(dot, "f0_n3 [label=\"r = dot\"]"));
    assert_non_null(strstr(dot, "f0_n0 -> f0_n2 [label=\"f32[1048576]\"]"));
    assert_non_null(strstr(dot, "f0_n2 -> f0_n3 [label=\"f32[1048576]\"]"));
    assert_non_null(strstr(dot, "f0_n3 -> f0_r0 [label=\"f32[]\"]"));
    assert_non_null(strstr(dot, "f1_n4 [label=\"bb = broadcast\", style=\"dashed,filled\"]"));
    assert_non_null(strstr(dot, "f1_n2 -> f1_n4 [label=\"f32[128]\"]"));
    assert_non_null(strstr(dot, "f1_n6 [label=\"_6 = constant(f32[], 0)\""));
    assert_non_null(strstr(dot, "f2_n1 [label=\"t = reshape\"]"));
    assert_non_null(strstr(dot, "f2_n1 -> f2_r0 [label=\"f32[3,8]\"]"));
    /* l2 is one loop nest summing over x and y, with d and r in it and nothing stored */
    char *c = dot_cluster(dot, "cluster_0_0");
    assert_non_null(c);
    assert_non_null(strstr(c, "label=\"nest 0: [\u03a31048576]\";"));
    assert_non_null(strstr(c, "f0_n2;"));
    assert_non_null(strstr(c, "f0_n3;"));
    assert_null(strstr(c, "f0_n0;"));
    free(c);
    assert_null(dot_cluster(dot, "cluster_0_1"));
    assert_null(strstr(dot, "stored"));
    assert_null(strstr(dot, "style=bold"));
    /* dense: the product, the bias, the ReLU and the broadcasts they read are one nest */
    c = dot_cluster(dot, "cluster_1_0");
    assert_non_null(c);
    for (int i = 3; i <= 8; i++) {
        char node[16];
        snprintf(node, sizeof node, "f1_n%d;", i);
        if (i != 6 && !strstr(c, node))
            fail_msg("%s is not in the nest of dense:\n%s", node, c);
    }
    assert_null(strstr(c, "f1_n6;")); /* the constant is data */
    free(c);
    free(dot);

    /* without fusion every op has its nest, and the temporaries are stored and drawn bold */
    nest_options o;
    nest_options_init(&o);
    o.fuse = 0;
    dot = pipeline_dot(m->fns, 1, &o);
    assert_non_null(dot);
    assert_non_null(strstr(dot, "f0_n2 [label=\"d = subtract\\nstored in the workspace\", "
                                "peripheries=2]"));
    assert_non_null(strstr(dot, "f0_n2 -> f0_n3 [label=\"f32[1048576]\", style=bold"));
    c = dot_cluster(dot, "cluster_0_1"); /* d's nest, then r's */
    assert_non_null(c);
    assert_non_null(strstr(c, "f0_n3;"));
    free(c);
    free(dot);
    nest_module_free(m);

    /* a row softmax: three nests in one loop over the rows, each temporary one row long */
    m = parse_ok("func sm(x: f32[4,10]) -> f32[4,10] {\n"
                 "  m = max(x, axes=[1])\n"
                 "  e = exp(subtract(x, broadcast(m, shape=[4,10], axes=[1])))\n"
                 "  s = sum(e, axes=[1])\n"
                 "  return divide(e, broadcast(s, shape=[4,10], axes=[1]))\n}\n");
    dot = nest_print_dot(m->fns, 1);
    assert_non_null(dot);
    c = dot_cluster(dot, "cluster_0_0");
    assert_non_null(c);
    assert_non_null(strstr(c, "label=\"one loop over 4 rows\";"));
    assert_int_equal(count_lines(c, "subgraph cluster_0_"), 1 + 3);
    free(c);
    assert_int_equal(count_lines(dot, "stored one row at a time"), 3);
    free(dot);
    nest_module_free(m);

    /* tuples, bool, zero functions */
    m = parse_ok("func t(a: bool[2], b: i64[]) -> (bool[2], i64[]) {\n  p = tuple(a, b)\n  return p\n}\n");
    dot = nest_print_dot(m->fns, 1);
    assert_non_null(dot);
    assert_non_null(strstr(dot, "[label=\"p = tuple\"]"));
    assert_non_null(strstr(dot, "f0_n0 -> f0_n2 [label=\"bool[2]\"]"));
    assert_int_equal(count_dot_nodes(dot), 3);
    free(dot);
    nest_module_free(m);
    dot = nest_print_dot(NULL, 0);
    assert_non_null(dot);
    assert_int_equal(strncmp(dot, "digraph ", 8), 0);
    free(dot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_example),
        cmocka_unit_test(test_design_op_table),
        cmocka_unit_test(test_canonical_form),
        cmocka_unit_test(test_empty_inputs),
        cmocka_unit_test(test_constant_values),
        cmocka_unit_test_setup_teardown(test_constant_roundtrip_api, fn_setup, fn_teardown),
        cmocka_unit_test(test_roundtrip_layouts),
        cmocka_unit_test(test_roundtrip_tuples),
        cmocka_unit_test(test_roundtrip_empty_shapes),
        cmocka_unit_test(test_roundtrip_every_op),
        cmocka_unit_test(test_roundtrip_name_clash),
        cmocka_unit_test(test_roundtrip_several_functions),
        cmocka_unit_test_setup_teardown(test_roundtrip_long_api_chain, fn_setup, fn_teardown),
        cmocka_unit_test(test_errors_truncated),
        cmocka_unit_test(test_errors_lexical),
        cmocka_unit_test(test_errors_junk),
        cmocka_unit_test(test_errors_types_and_dims),
        cmocka_unit_test(test_errors_names),
        cmocka_unit_test(test_errors_attributes),
        cmocka_unit_test(test_errors_operands),
        cmocka_unit_test(test_errors_type_rules),
        cmocka_unit_test(test_errors_results_and_statements),
        cmocka_unit_test(test_errors_numbers),
        cmocka_unit_test(test_errors_deep_nesting),
        cmocka_unit_test(test_nesting_small_stack),
        cmocka_unit_test(test_long_chain),
        cmocka_unit_test(test_shared_tuples),
        cmocka_unit_test(test_dot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
