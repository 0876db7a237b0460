/* test_parse_ops.c - the text form of the op set of real models: DESIGN.md's table parses as
 * written and prints back to itself; every attribute that is missing, unknown, malformed or of
 * the wrong length is an error at its position; nestc refuses such a file with status 1 and
 * emits nothing. */
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* Parses src, which must succeed; prints it, parses and prints again: both texts equal. Returns
 * the module (the caller frees it). */
static nest_module *roundtrip_at(const char *src, const char *file, int line)
{
    nest_module *m = nest_parse(src, strlen(src), "t.nest");
    if (!m || nest_module_errcode(m)) {
        print_error("parse failed: %s\n", m ? nest_module_errmsg(m) : "out of memory");
        nest_module_free(m);
        _fail(file, line);
    }
    int n = nest_module_count(m);
    nest_function *fns[16];
    for (int i = 0; i < n && i < 16; i++)
        fns[i] = nest_module_function(m, i);
    char *once = nest_print(fns, n);
    nest_module *m2 = nest_parse(once, strlen(once), "printed");
    if (nest_module_errcode(m2)) {
        print_error("the printed text does not parse: %s\n%s", nest_module_errmsg(m2), once);
        _fail(file, line);
    }
    for (int i = 0; i < n && i < 16; i++)
        fns[i] = nest_module_function(m2, i);
    char *twice = nest_print(fns, n);
    if (strcmp(once, twice) != 0) {
        print_error("printed twice:\n%s\nand\n%s", once, twice);
        _fail(file, line);
    }
    nest_string_free(once);
    nest_string_free(twice);
    nest_module_free(m2);
    return m;
}
#define roundtrip(src) roundtrip_at((src), __FILE__, __LINE__)

/* The shape of result i of function `name` in m. */
static void result_shape_at(nest_module *m, const char *name, int i, int type, int rank,
                            const int64_t *shape, const char *file, int line)
{
    nest_function *f = nest_module_find(m, name);
    nest_value v = f ? nest_result(f, i) : NEST_NONE;
    bool ok = v >= 0 && nest_value_type(f, v) == type && nest_value_rank(f, v) == rank;
    for (int k = 0; ok && k < rank; k++)
        ok = nest_value_shape(f, v)[k] == shape[k];
    if (!ok) {
        print_error("%s result %d: not the expected type and shape\n", name, i);
        _fail(file, line);
    }
}
#define result_shape(m, name, i, t, r, s)                                                      \
    result_shape_at((m), (name), (i), (t), (r), (s), __FILE__, __LINE__)

static void test_design_table(void **state)
{
    (void)state;
    /* the examples of DESIGN.md's "Ops for real models", in functions */
    nest_module *m = roundtrip(
        "func ew(x: f32[3,4], p: bool[3,4], q: bool[3,4]) -> (f32[3,4], bool[3,4], bool[3,4], bool[3,4]) {\n"
        "  return erf(x), and(p, q), not(or(p, q)), greater_eq(x, sigmoid(x))\n"
        "}\n"
        "func red(x: f32[3,4]) -> (f32[4], i64[3], i64[4]) {\n"
        "  return product(x, axes=[0]), argmax(x, axis=1), argmin(x, axis=0)\n"
        "}\n"
        "func structural(x: f32[3,4], y: f32[2,3], i: i64[3], t: f32[5,4], w: f32[4,6]) -> (f32[6,7], f32[3,4], f32[4,6], i64[3,4], f32[3,4]) {\n"
        "  p = pad(x, constant(f32[], 0), below=[1,2], above=[2,1], interior=[0,0])\n"
        "  r = reverse(x, axes=[1])\n"
        "  s = replace_slice(w, y, lower=[1,2], upper=[3,5], strides=[1,1])\n"
        "  return p, r, s, one_hot(i, shape=[3,4], axis=1), gather(t, i, axis=0)\n"
        "}\n"
        "func k(x: f32[2,10]) -> (f32[2,3], i64[2,3]) {\n"
        "  return topk(x, k=3, axis=1, largest=true)\n"
        "}\n"
        "func attention(q: f32[3,4,5], kt: f32[3,5,6], v: f32[3,6,2]) -> f32[3,4,2] {\n"
        "  return batch_dot(softmax(batch_dot(q, kt), axes=[2]), v)\n"
        "}\n");
    result_shape(m, "red", 1, NEST_I64, 1, SHAPE(3));
    result_shape(m, "structural", 0, NEST_F32, 2, SHAPE(6, 7));
    result_shape(m, "structural", 3, NEST_I64, 2, SHAPE(3, 4));
    result_shape(m, "structural", 4, NEST_F32, 2, SHAPE(3, 4));
    result_shape(m, "k", 1, NEST_I64, 2, SHAPE(2, 3));
    result_shape(m, "attention", 0, NEST_F32, 3, SHAPE(3, 4, 2));
    nest_module_free(m);
    /* defaults: interior [0...], strides [1...], largest true; printed forms leave them out */
    m = roundtrip("func d(x: f32[4], y: f32[2]) -> (f32[6], f32[4], f32[2], i64[2]) {\n"
                  "  return pad(x, constant(f32[], 1), below=[1], above=[1]),\n"
                  "         replace_slice(x, y, lower=[1], upper=[3]), topk(x, k=2, axis=0)\n"
                  "}\n");
    nest_function *f = nest_module_find(m, "d");
    char *text = nest_print(&f, 1);
    assert_non_null(strstr(text, "below=[1], above=[1])"));
    assert_non_null(strstr(text, "upper=[3])"));
    assert_non_null(strstr(text, "topk(x, k=2, axis=0, largest=true)"));
    nest_string_free(text);
    nest_module_free(m);
    /* gather's adjoint */
    m = roundtrip("func s(x: f32[5,4], i: i64[3], u: f32[3,4]) -> f32[5,4] {\n"
                  "  return scatter_add(x, i, u, axis=0)\n"
                  "}\n");
    result_shape(m, "s", 0, NEST_F32, 2, SHAPE(5, 4));
    nest_module_free(m);
}

/* src must fail to parse with status at line:col, the message containing part. */
static void error_at(const char *src, int status, int line, int col, const char *part,
                     const char *file, int fline)
{
    nest_module *m = nest_parse(src, strlen(src), "t.nest");
    bool ok = m && nest_module_errcode(m) == status && nest_module_errline(m) == line &&
              nest_module_errcol(m) == col && strstr(nest_module_errmsg(m), part) &&
              nest_module_count(m) == 0;
    if (!ok) {
        print_error("%s\ngave %d at %d:%d \"%s\"; expected %d at %d:%d containing \"%s\"\n", src,
                    m ? nest_module_errcode(m) : -1, m ? nest_module_errline(m) : 0,
                    m ? nest_module_errcol(m) : 0, m ? nest_module_errmsg(m) : "", status, line,
                    col, part);
        nest_module_free(m);
        _fail(file, fline);
    }
    nest_module_free(m);
}
#define H "func f(x: f32[4], y: f32[2], i: i32[3], m: f32[2,3]) -> f32[4] {\n"
#define T "\n  return x\n}\n"
#define ERR(src, st, l, c, part) error_at((src), NEST_ERR_##st, (l), (c), (part), __FILE__, __LINE__)

static void test_errors(void **state)
{
    (void)state;
    /* missing attributes */
    ERR(H "  z = pad(x, constant(f32[], 0), above=[1])" T, SYNTAX, 2, 7, "pad needs below=[...]");
    ERR(H "  z = pad(x, constant(f32[], 0), below=[1])" T, SYNTAX, 2, 7, "pad needs above=[...]");
    ERR(H "  z = reverse(x)" T, SYNTAX, 2, 7, "reverse needs axes=[...]");
    ERR(H "  z = replace_slice(x, y, upper=[3])" T, SYNTAX, 2, 7, "replace_slice needs lower=[...]");
    ERR(H "  z = one_hot(i, axis=1)" T, SYNTAX, 2, 7, "one_hot needs shape=[...]");
    ERR(H "  z = one_hot(i, shape=[3,2])" T, SYNTAX, 2, 7, "one_hot needs axis=N");
    ERR(H "  z = gather(x, i)" T, SYNTAX, 2, 7, "gather needs axis=N");
    ERR(H "  z = scatter_add(x, i, m)" T, SYNTAX, 2, 7, "scatter_add needs axis=N");
    ERR(H "  z = scatter_add(x, i, axis=0)" T, SYNTAX, 2, 7, "scatter_add takes 3 operands, not 2");
    ERR(H "  z = topk(x, axis=0)" T, SYNTAX, 2, 7, "topk needs k=N");
    ERR(H "  z = topk(x, k=1)" T, SYNTAX, 2, 7, "topk needs axis=N");
    ERR(H "  z = argmax(x)" T, SYNTAX, 2, 7, "argmax needs axis=N");
    ERR(H "  z = softmax(x)" T, SYNTAX, 2, 7, "softmax needs axes=[...]");
    ERR(H "  z = product(x)" T, SYNTAX, 2, 7, "product needs axes=[...]");
    /* unknown, malformed, wrong length, out of range */
    ERR(H "  z = pad(x, constant(f32[], 0), below=[1], above=[1], strides=[1])" T, SYNTAX, 2, 56,
        "pad has no attribute 'strides'");
    ERR(H "  z = topk(x, k=1, axis=0, largest=1)" T, SYNTAX, 2, 36, "expected true or false, found '1'");
    ERR(H "  z = topk(x, k=-1, axis=0)" T, SYNTAX, 2, 17, "k cannot be negative");
    ERR(H "  z = pad(x, constant(f32[], 0), below=[1,1], above=[1])" T, SYNTAX, 2, 34,
        "below has 2 entries but the operand has rank 1");
    ERR(H "  z = pad(x, constant(f32[], 0), below=[0], above=[0], interior=[-1])" T, SYNTAX, 2, 67,
        "interior entries cannot be negative");
    ERR(H "  z = replace_slice(m, m, lower=[0], upper=[2,3])" T, SYNTAX, 2, 38,
        "upper has 2 entries but lower has 1");
    ERR(H "  z = replace_slice(m, m, lower=[0], upper=[2])" T, SYNTAX, 2, 27,
        "lower has 1 entries but the operand has rank 2");
    ERR(H "  z = reverse(x, axes=[1])" T, TYPE, 2, 7,
        "reverse(x: f32[4]): axis 1 is out of range for rank 1");
    ERR(H "  z = pad(x, y, below=[0], above=[0])" T, TYPE, 2, 7,
        "the padding value must be a scalar, not f32[2]");
    ERR(H "  z = pad(x, constant(f32[], 0), below=[-3], above=[-2])" T, TYPE, 2, 7,
        "axis 0: below -3 and above -2 leave -1 elements of 4");
    ERR(H "  z = gather(x, y, axis=0)" T, TYPE, 2, 7, "the indices must be i32 or i64, not f32");
    ERR(H "  z = scatter_add(x, i, y, axis=0)" T, TYPE, 2, 7,
        "scatter_add(x: f32[4], i: i32[3], y: f32[2]): the updates must have shape [3]");
    ERR(H "  z = topk(x, k=5, axis=0)" T, TYPE, 2, 7, "k = 5 is not within [0, 4]");
    ERR(H "  z = batch_dot(m, x)" T, TYPE, 2, 7,
        "batch_dot(m: f32[2,3], x: f32[4]): the last axis of the first operand (3) differs");
    ERR(H "  z = one_hot(i, shape=[4,2], axis=1)" T, TYPE, 2, 7,
        "output dimension 0 is 4 but the operand's dimension 0 is 3");
    ERR(H "  z = replace_slice(x, y, lower=[0], upper=[3])" T, TYPE, 2, 7,
        "the box selects a slice of shape [3]");
    ERR(H "  z = sin(i)" T, TYPE, 2, 7, "sin(i: i32[3]): operand 1 must be f32 or f64, not i32");
    ERR(H "  z = and(x, x)" T, TYPE, 2, 7, "and(x: f32[4], x: f32[4]): operand 1 must be bool");
    /* a topk is a tuple: the declared results must be its two arrays */
    ERR("func f(x: f32[4]) -> f32[2] {\n  return topk(x, k=2, axis=0)\n}\n", TYPE, 2, 3,
        "the function declares 1 result but returns 2");
}

/* nestc on a file with a bad attribute: status 1, the error with the line, nothing emitted. */
static void test_cli(void **state)
{
    (void)state;
    const char *nestc = tu_nestc();
    char path[] = "/tmp/nest-parse-ops-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char bad[] = "func f(x: f32[4]) -> f32[4] {\n  return pad(x, constant(f32[], 0), "
                              "below=[1], above=[-6])\n}\n";
    assert_int_equal(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --emit=c %s > %s.out 2> %s.err", nestc, path, path, path);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    char out[300], err[300];
    snprintf(out, sizeof out, "%s.out", path);
    snprintf(err, sizeof err, "%s.err", path);
    FILE *o = fopen(out, "r"), *e = fopen(err, "r");
    assert_true(o && e);
    assert_int_equal(fgetc(o), EOF); /* nothing emitted */
    char line[512] = "";
    assert_non_null(fgets(line, sizeof line, e));
    assert_non_null(strstr(line, ":2:10: error: pad(x: f32[4], "));
    assert_non_null(strstr(line, "axis 0: below 1 and above -6 leave -1 elements of 4"));
    fclose(o);
    fclose(e);
    remove(out);
    remove(err);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_table),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
