/*
 * test_parse.c - the text form: the examples of DESIGN.md, canonical round trips of parsed and
 * built graphs, constants of every type, and Graphviz output. Malformed inputs and limits are
 * tests/test_parse_errors.c; the command line nestc is tests/test_nestc.c.
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

#include "parseutil.h"

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
        cmocka_unit_test(test_dot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
