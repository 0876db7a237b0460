/*
 * test_parse_errors.c - the text form's malformed inputs, each with the exact position of its
 * error (truncated, lexical, junk, types and dims, names, attributes, operands, type rules,
 * results and statements, numbers), and its limits: deep nesting (also on a small stack), long
 * chains, shared tuples. The well-formed text is tests/test_parse.c.
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

#include "parseutil.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
