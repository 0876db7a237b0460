/* test_ir.c - the type rules of every op through the public API: inferred types and shapes,
 * every kind of invalid operand or attribute, error codes and messages, results, inspection. */
#include "testutil.h"

static nest_value param(nest_function *f, const char *name, nest_type t, int rank,
                        const int64_t *shape)
{
    return nest_parameter(f, name, t, rank, shape, NEST_ROW_MAJOR);
}

/* v is a tensor of type t and the given shape. */
static void check_tensor(const nest_function *f, nest_value v, int t, int rank,
                         const int64_t *shape, const char *file, int line)
{
    if (v < 0) {
        print_error("builder failed: %s\n", nest_errmsg(f));
        _fail(file, line);
    }
    if (nest_value_type(f, v) != t || nest_value_rank(f, v) != rank) {
        print_error("value %d is type %d rank %d; want type %d rank %d\n", v,
                    nest_value_type(f, v), nest_value_rank(f, v), t, rank);
        _fail(file, line);
    }
    const int64_t *s = nest_value_shape(f, v);
    for (int i = 0; i < rank; i++) {
        if (s[i] != shape[i]) {
            print_error("dimension %d is %lld; want %lld\n", i, (long long)s[i],
                        (long long)shape[i]);
            _fail(file, line);
        }
    }
}
#define assert_tensor(f, v, t, rank, shape) check_tensor((f), (v), (t), (rank), (shape), __FILE__, __LINE__)

/* A builder failed with `code`, and its message holds `part`; the error is then cleared. */
#define assert_fails(f, v, code, part)                                                         \
    do {                                                                                       \
        assert_int_equal((v), NEST_NONE);                                                      \
        assert_error((f), (code), (part));                                                     \
        nest_clear_error(f);                                                                   \
    } while (0)

static const nest_type all_types[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_BOOL};

/* ---- status codes, type names, NULL handles ---- */

static void test_status_str(void **state)
{
    (void)state;
    assert_string_equal(nest_status_str(NEST_OK), "ok");
    assert_string_equal(nest_status_str(NEST_ERR_TYPE), "operand types or shapes do not fit the op");
    assert_string_equal(nest_status_str(NEST_ERR_ARG), "invalid argument");
    assert_string_equal(nest_status_str(NEST_ERR_SYNTAX), "syntax error in the text form");
    assert_string_equal(nest_status_str(NEST_ERR_LIMIT), "a size or depth limit is exceeded");
    assert_string_equal(nest_status_str(NEST_ERR_NOMEM), "out of memory");
    assert_string_equal(nest_status_str(NEST_ERR_CALL),
                        "wrong arguments to a compiled or evaluated function");
    assert_string_equal(nest_status_str(NEST_ERR_COMPILE), "compiling the generated C failed");
    assert_string_equal(nest_status_str(NEST_ERR_IO), "reading or writing a file failed");
    assert_string_equal(nest_status_str(NEST_ERR_UNAVAILABLE), "a needed component is not available");
    assert_int_equal(NEST_OK, 0);
    assert_int_equal(NEST_STATUS_COUNT, 10);
    assert_string_equal(nest_status_str(-1), "unknown status");
    assert_string_equal(nest_status_str(NEST_STATUS_COUNT), "unknown status");
    assert_string_equal(nest_status_str(1000), "unknown status");
}

static void test_type_names(void **state)
{
    (void)state;
    static const char *const names[] = {"f32", "f64", "i32", "i64", "bool"};
    static const size_t sizes[] = {4, 8, 4, 8, 1};
    for (int t = 0; t < 5; t++) {
        assert_string_equal(nest_type_name((nest_type)t), names[t]);
        assert_int_equal(nest_type_size((nest_type)t), sizes[t]);
    }
    assert_string_equal(nest_type_name((nest_type)5), "?");
    assert_string_equal(nest_type_name((nest_type)-1), "?");
    assert_int_equal(nest_type_size((nest_type)5), 0);
    assert_int_equal(nest_type_size((nest_type)-1), 0);
}

static void test_null_handles(void **state)
{
    (void)state;
    nest_function_free(NULL);
    nest_module_free(NULL);
    nest_string_free(NULL);
    nest_clear_error(NULL);
    assert_int_equal(nest_errcode(NULL), NEST_ERR_ARG);
    assert_non_null(nest_errmsg(NULL));
    assert_string_equal(nest_function_name(NULL), "");
    assert_int_equal(nest_param_count(NULL), -1);
    assert_int_equal(nest_result_count(NULL), -1);
    assert_int_equal(nest_value_type(NULL, 0), -1);
    assert_int_equal(nest_value_rank(NULL, 0), -1);
    assert_null(nest_value_shape(NULL, 0));
    assert_null(nest_value_name(NULL, 0));
    assert_int_equal(nest_param(NULL, 0), NEST_NONE);
    assert_int_equal(nest_result(NULL, 0), NEST_NONE);
    assert_int_equal(nest_add(NULL, 0, 1), NEST_NONE);
    assert_int_equal(nest_parameter(NULL, "x", NEST_F32, 0, NULL, NEST_ROW_MAJOR), NEST_NONE);
    assert_int_not_equal(nest_return(NULL, 0, NULL, NULL), NEST_OK);
    assert_int_not_equal(nest_evaluate(NULL, NULL, 0, NULL, 0), NEST_OK);
}

/* ---- names ---- */

static void test_function_names(void **state)
{
    (void)state;
    static const char *const good[] = {"f", "_x1", "Dense_2", "nestle", "x_nest_"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        nest_function *f = nest_function_new(good[i]);
        assert_non_null(f);
        assert_int_equal(nest_errcode(f), NEST_OK);
        assert_string_equal(nest_errmsg(f), "");
        assert_string_equal(nest_function_name(f), good[i]);
        nest_function_free(f);
    }
    static const struct {
        const char *name;
        int code;
        const char *part;
    } bad[] = {
        {"", NEST_ERR_ARG, "not an identifier"},
        {"1abc", NEST_ERR_ARG, "not an identifier"},
        {"a-b", NEST_ERR_ARG, "not an identifier"},
        {"x;system(\"id\")", NEST_ERR_ARG, "not an identifier"},
        {"a b", NEST_ERR_ARG, "not an identifier"},
        {"caf\xc3\xa9", NEST_ERR_ARG, "not an identifier"},
        {"int", NEST_ERR_ARG, "C keyword"},
        {"while", NEST_ERR_ARG, "C keyword"},
        {"return", NEST_ERR_ARG, "C keyword"},
        {"_Bool", NEST_ERR_ARG, "C keyword"},
        {"main", NEST_ERR_ARG, "C keyword"},
        {"nest_f", NEST_ERR_ARG, "reserved"},
        {"nest_", NEST_ERR_ARG, "reserved"},
        {"__x", NEST_ERR_ARG, "reserved"},
        {"_X", NEST_ERR_ARG, "reserved"},
        {NULL, NEST_ERR_ARG, "NULL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nest_function *f = nest_function_new(bad[i].name);
        assert_non_null(f);
        assert_error(f, bad[i].code, bad[i].part);
        assert_string_equal(nest_function_name(f), "");
        /* every builder fails on a function without a valid name */
        assert_int_equal(param(f, "x", NEST_F32, 0, NULL), NEST_NONE);
        assert_int_not_equal(nest_errcode(f), NEST_OK);
        assert_int_not_equal(nest_return(f, 0, NULL, NULL), NEST_OK);
        nest_function_free(f);
    }
}

static void test_name_lengths(void **state)
{
    (void)state;
    char name[20001];
    memset(name, 'a', sizeof name - 1);
    name[255] = '\0';
    nest_function *f = nest_function_new(name); /* 255 characters: the longest allowed */
    assert_int_equal(nest_errcode(f), NEST_OK);
    assert_value(f, param(f, name, NEST_F32, 0, NULL));
    nest_function_free(f);

    name[255] = 'a';
    name[256] = '\0';
    f = nest_function_new(name);
    assert_error(f, NEST_ERR_LIMIT, "256 characters long (the limit is 255)");
    nest_function_free(f);

    memset(name, 'b', sizeof name - 1);
    name[20000] = '\0';
    f = nest_function_new("f");
    assert_fails(f, param(f, name, NEST_F32, 0, NULL), NEST_ERR_LIMIT, "20000 characters");
    nest_function_free(f);
}

static void test_parameter_names(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 0, NULL);
    assert_value(f, x);
    assert_fails(f, param(f, "x", NEST_F64, 0, NULL), NEST_ERR_ARG, "parameter name 'x' is used twice");
    assert_fails(f, param(f, "x;system(\"id\")", NEST_F32, 0, NULL), NEST_ERR_ARG, "not an identifier");
    assert_fails(f, param(f, "for", NEST_F32, 0, NULL), NEST_ERR_ARG, "C keyword");
    assert_fails(f, param(f, "nest_x", NEST_F32, 0, NULL), NEST_ERR_ARG, "reserved");
    assert_fails(f, param(f, "", NEST_F32, 0, NULL), NEST_ERR_ARG, "not an identifier");
    assert_fails(f, param(f, NULL, NEST_F32, 0, NULL), NEST_ERR_ARG, "NULL");
    assert_fails(f, param(f, "9", NEST_F32, 0, NULL), NEST_ERR_ARG, "not an identifier");
    /* a parameter may not take a name a value already has */
    nest_value n = nest_negative(f, x);
    assert_ok(f, nest_set_name(f, n, "y"));
    assert_fails(f, param(f, "y", NEST_F32, 0, NULL), NEST_ERR_ARG, "'y' is used twice");
    /* failed builders added nothing */
    assert_int_equal(nest_param_count(f), 1);
    nest_value z = param(f, "z", NEST_F32, 0, NULL);
    assert_int_equal(z, n + 1);
    assert_int_equal(nest_param_count(f), 2);
    assert_int_equal(nest_param(f, 0), x);
    assert_int_equal(nest_param(f, 1), z);
    assert_string_equal(nest_value_name(f, z), "z");
    assert_string_equal(nest_value_name(f, n), "y");
    assert_null(nest_value_name(f, nest_abs(f, x)));
    assert_null(nest_value_name(f, 1000));
    assert_null(nest_value_name(f, NEST_NONE));
}

static void test_set_name(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(3));
    nest_value a = nest_negative(f, x), b = nest_abs(f, x);
    assert_ok(f, nest_set_name(f, a, "a"));
    assert_ok(f, nest_set_name(f, a, "a")); /* the same name again */
    assert_int_equal(nest_set_name(f, b, "a"), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "'a' is already used");
    assert_int_equal(nest_set_name(f, b, "x"), NEST_ERR_ARG);
    assert_int_equal(nest_set_name(f, x, "w"), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "parameter x keeps its name");
    assert_int_equal(nest_set_name(f, b, "if"), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "C keyword");
    assert_int_equal(nest_set_name(f, b, "b c"), NEST_ERR_ARG);
    assert_int_equal(nest_set_name(f, 99, "q"), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "99 is not a value of function f");
    assert_int_equal(nest_set_name(f, NEST_NONE, "q"), NEST_ERR_ARG);
    assert_ok(f, nest_set_name(f, b, "b"));
    /* names appear in messages */
    nest_value bad = nest_add(f, a, param(f, "y", NEST_F32, 1, SHAPE(4)));
    assert_fails(f, bad, NEST_ERR_TYPE, "add(a: f32[3], y: f32[4])");
}

/* ---- parameter and constant shapes ---- */

static void test_parameter_shapes(void **state)
{
    nest_function *f = *state;
    assert_tensor(f, param(f, "s", NEST_F64, 0, NULL), NEST_F64, 0, NULL);
    assert_tensor(f, param(f, "e", NEST_I32, 2, SHAPE(0, 3)), NEST_I32, 2, SHAPE(0, 3));
    int64_t ones[NEST_MAX_RANK + 1];
    for (int i = 0; i <= NEST_MAX_RANK; i++)
        ones[i] = 1;
    ones[0] = 2;
    assert_tensor(f, param(f, "r32", NEST_BOOL, 32, ones), NEST_BOOL, 32, ones);
    assert_fails(f, param(f, "r33", NEST_BOOL, 33, ones), NEST_ERR_LIMIT, "rank 33 is out of range");
    assert_fails(f, param(f, "rn", NEST_F32, -1, ones), NEST_ERR_ARG, "rank -1");
    assert_fails(f, param(f, "neg", NEST_F32, 2, SHAPE(3, -1)), NEST_ERR_ARG,
                 "dimension 1 is negative (-1)");
    assert_fails(f, param(f, "nul", NEST_F32, 2, NULL), NEST_ERR_ARG, "shape is NULL");
    assert_fails(f, param(f, "ty", (nest_type)5, 0, NULL), NEST_ERR_ARG, "invalid element type 5");
    assert_fails(f, param(f, "ty", (nest_type)-1, 0, NULL), NEST_ERR_ARG, "invalid element type");
    assert_fails(f, nest_parameter(f, "lay", NEST_F32, 0, NULL, (nest_layout)2), NEST_ERR_ARG,
                 "invalid layout 2");
    /* sizes: the limit is 2^62 bytes */
    const int64_t p60 = (int64_t)1 << 60, p61 = (int64_t)1 << 61, p62 = (int64_t)1 << 62;
    assert_value(f, param(f, "big", NEST_F32, 1, SHAPE(p60 - 1))); /* 2^62 - 4 bytes */
    assert_value(f, param(f, "bigb", NEST_BOOL, 2, SHAPE(p61, 1)));
    assert_fails(f, param(f, "h1", NEST_F32, 1, SHAPE(p60)), NEST_ERR_LIMIT, "[1152921504606846976] is too large");
    assert_fails(f, param(f, "h2", NEST_F32, 1, SHAPE(p62)), NEST_ERR_LIMIT, "too large");
    assert_fails(f, param(f, "h3", NEST_F32, 2, SHAPE(p62, 4)), NEST_ERR_LIMIT, "too large");
    assert_fails(f, param(f, "h4", NEST_BOOL, 2, SHAPE(p62, 2)), NEST_ERR_LIMIT, "too large");
    assert_fails(f, param(f, "h5", NEST_BOOL, 1, SHAPE(INT64_MAX)), NEST_ERR_LIMIT, "too large");
    assert_fails(f, param(f, "h6", NEST_F64, 3, SHAPE(1 << 21, 1 << 21, 1 << 21)), NEST_ERR_LIMIT,
                 "too large");
    /* an empty tensor's other dims still have to fit, or its strides would overflow */
    assert_fails(f, param(f, "h7", NEST_F32, 3, SHAPE(0, p62, 4)), NEST_ERR_LIMIT, "too large");
    assert_value(f, param(f, "e2", NEST_F32, 3, SHAPE(0, 1 << 20, 0)));
    assert_int_equal(nest_param_count(f), 6);
}

static void test_constant(void **state)
{
    nest_function *f = *state;
    const float one = 1, four[4] = {1, 2, 3, 4};
    assert_tensor(f, nest_constant(f, NEST_F32, 0, NULL, &one, 1), NEST_F32, 0, NULL);
    assert_tensor(f, nest_constant(f, NEST_F32, 2, SHAPE(2, 2), &one, 1), NEST_F32, 2, SHAPE(2, 2));
    assert_tensor(f, nest_constant(f, NEST_F32, 2, SHAPE(2, 2), four, 4), NEST_F32, 2, SHAPE(2, 2));
    assert_tensor(f, nest_constant(f, NEST_F32, 1, SHAPE(0), NULL, 0), NEST_F32, 1, SHAPE(0));
    assert_tensor(f, nest_constant(f, NEST_F32, 1, SHAPE(0), &one, 1), NEST_F32, 1, SHAPE(0));
    const uint8_t t = 1;
    assert_tensor(f, nest_constant(f, NEST_BOOL, 1, SHAPE(3), &t, 1), NEST_BOOL, 1, SHAPE(3));
    assert_fails(f, nest_constant(f, NEST_I32, 2, SHAPE(2, 2), four, 3), NEST_ERR_TYPE,
                 "constant of type i32: 3 values given, expected 1 or 4");
    assert_fails(f, nest_constant(f, NEST_I32, 2, SHAPE(2, 2), four, 0), NEST_ERR_TYPE,
                 "0 values given");
    assert_fails(f, nest_constant(f, NEST_I32, 1, SHAPE(4), four, 5), NEST_ERR_TYPE, "5 values given");
    assert_fails(f, nest_constant(f, NEST_I32, 1, SHAPE(4), NULL, 4), NEST_ERR_ARG, "data is NULL");
    assert_fails(f, nest_constant(f, (nest_type)7, 0, NULL, four, 1), NEST_ERR_ARG, "invalid element type 7");
    assert_fails(f, nest_constant(f, NEST_F32, 33, SHAPE(1), four, 1), NEST_ERR_LIMIT, "rank 33");
    assert_fails(f, nest_constant(f, NEST_F32, 1, SHAPE(-2), four, 1), NEST_ERR_ARG, "negative");
    assert_fails(f, nest_constant(f, NEST_F64, 1, SHAPE((int64_t)1 << 59), four, 1),
                 NEST_ERR_LIMIT, "too large");
}

/* ---- element-wise ops ---- */

typedef nest_value (*binary_fn)(nest_function *, nest_value, nest_value);
typedef nest_value (*unary_fn)(nest_function *, nest_value);

static const struct {
    const char *name;
    binary_fn fn;
} arith[] = {
    {"add", nest_add},         {"subtract", nest_subtract}, {"multiply", nest_multiply},
    {"divide", nest_divide},   {"maximum", nest_maximum},   {"minimum", nest_minimum},
    {"power", nest_power},
};

static void test_binary_arithmetic(void **state)
{
    nest_function *f = *state;
    nest_value x[5], y[5], s[5], tup;
    char name[16];
    for (int t = 0; t < 5; t++) {
        snprintf(name, sizeof name, "x%d", t);
        x[t] = param(f, name, all_types[t], 2, SHAPE(3, 4));
        snprintf(name, sizeof name, "y%d", t);
        y[t] = param(f, name, all_types[t], 2, SHAPE(4, 3));
        snprintf(name, sizeof name, "s%d", t);
        s[t] = param(f, name, all_types[t], 0, NULL);
    }
    tup = nest_tuple(f, 1, &x[0]);
    char want[128];
    for (size_t k = 0; k < sizeof arith / sizeof *arith; k++) {
        binary_fn op = arith[k].fn;
        for (int t = 0; t < 4; t++) {
            assert_tensor(f, op(f, x[t], x[t]), all_types[t], 2, SHAPE(3, 4));
            assert_tensor(f, op(f, s[t], s[t]), all_types[t], 0, NULL);
        }
        /* bool is not arithmetic */
        snprintf(want, sizeof want, "%s(x4: bool[3,4], x4: bool[3,4]): operand 1 must be f32, "
                 "f64, i32 or i64, not bool", arith[k].name);
        assert_fails(f, op(f, x[4], x[4]), NEST_ERR_TYPE, want);
        /* operand types must agree */
        snprintf(want, sizeof want, "%s(x0: f32[3,4], x1: f64[3,4]): operand element types differ",
                 arith[k].name);
        assert_fails(f, op(f, x[0], x[1]), NEST_ERR_TYPE, want);
        assert_fails(f, op(f, x[2], x[3]), NEST_ERR_TYPE, "differ");
        assert_fails(f, op(f, x[2], x[0]), NEST_ERR_TYPE, "differ");
        /* shapes must agree: no implicit broadcasting */
        snprintf(want, sizeof want, "%s(x0: f32[3,4], y0: f32[4,3]): operand shapes differ",
                 arith[k].name);
        assert_fails(f, op(f, x[0], y[0]), NEST_ERR_TYPE, want);
        assert_fails(f, op(f, s[0], x[0]), NEST_ERR_TYPE, "f32[], x0: f32[3,4]");
        /* tuples are not tensors */
        assert_fails(f, op(f, x[0], tup), NEST_ERR_TYPE, "operand 2 is a tuple");
        assert_fails(f, op(f, tup, x[0]), NEST_ERR_TYPE, "operand 1 is a tuple");
    }
    /* rank 1 against rank 2 of the same element count */
    nest_value v = param(f, "v", NEST_F32, 1, SHAPE(12));
    assert_fails(f, nest_add(f, v, x[0]), NEST_ERR_TYPE, "add(v: f32[12], x0: f32[3,4])");
    nest_value one = param(f, "one", NEST_F32, 1, SHAPE(1));
    assert_fails(f, nest_add(f, s[0], one), NEST_ERR_TYPE, "shapes differ");
}

static void test_unary(void **state)
{
    nest_function *f = *state;
    static const struct {
        const char *name;
        unary_fn fn;
        bool ints;
    } ops[] = {
        {"negative", nest_negative, true}, {"abs", nest_abs, true}, {"exp", nest_exp, false},
        {"log", nest_log, false},          {"sqrt", nest_sqrt, false}, {"tanh", nest_tanh, false},
    };
    nest_value x[5];
    char name[16], want[128];
    for (int t = 0; t < 5; t++) {
        snprintf(name, sizeof name, "x%d", t);
        x[t] = param(f, name, all_types[t], 3, SHAPE(2, 0, 5));
    }
    nest_value tup = nest_tuple(f, 2, x);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        for (int t = 0; t < 5; t++) {
            nest_value v = ops[k].fn(f, x[t]);
            bool ok = t < 2 || (ops[k].ints && t < 4);
            if (ok) {
                assert_tensor(f, v, all_types[t], 3, SHAPE(2, 0, 5));
            } else {
                snprintf(want, sizeof want, "%s(x%d: %s[2,0,5]): operand 1 must be %s, not %s",
                         ops[k].name, t, nest_type_name(all_types[t]),
                         ops[k].ints ? "f32, f64, i32 or i64" : "f32 or f64",
                         nest_type_name(all_types[t]));
                assert_fails(f, v, NEST_ERR_TYPE, want);
            }
        }
        assert_fails(f, ops[k].fn(f, tup), NEST_ERR_TYPE, "is a tuple");
    }
}

static void test_compare_select(void **state)
{
    nest_function *f = *state;
    nest_value x[5], y[5];
    char name[16];
    for (int t = 0; t < 5; t++) {
        snprintf(name, sizeof name, "x%d", t);
        x[t] = param(f, name, all_types[t], 1, SHAPE(4));
        snprintf(name, sizeof name, "y%d", t);
        y[t] = param(f, name, all_types[t], 1, SHAPE(5));
    }
    binary_fn cmps[] = {nest_less, nest_greater, nest_equal};
    for (int k = 0; k < 3; k++) {
        for (int t = 0; t < 4; t++)
            assert_tensor(f, cmps[k](f, x[t], x[t]), NEST_BOOL, 1, SHAPE(4));
        assert_fails(f, cmps[k](f, x[0], y[0]), NEST_ERR_TYPE, "shapes differ");
        assert_fails(f, cmps[k](f, x[0], x[2]), NEST_ERR_TYPE, "types differ");
    }
    assert_fails(f, nest_less(f, x[4], x[4]), NEST_ERR_TYPE,
                 "less(x4: bool[4], x4: bool[4]): operand 1 must be f32, f64, i32 or i64, not bool");
    assert_fails(f, nest_greater(f, x[4], x[4]), NEST_ERR_TYPE, "not bool");
    assert_tensor(f, nest_equal(f, x[4], x[4]), NEST_BOOL, 1, SHAPE(4));
    assert_fails(f, nest_equal(f, x[4], x[2]), NEST_ERR_TYPE, "types differ");

    nest_value c = nest_less(f, x[0], x[0]);
    for (int t = 0; t < 5; t++)
        assert_tensor(f, nest_select(f, c, x[t], x[t]), all_types[t], 1, SHAPE(4));
    assert_fails(f, nest_select(f, x[0], x[0], x[0]), NEST_ERR_TYPE,
                 "select(x0: f32[4], x0: f32[4], x0: f32[4]): operand 1 must be bool, not f32");
    assert_fails(f, nest_select(f, x[2], x[0], x[0]), NEST_ERR_TYPE, "must be bool, not i32");
    assert_fails(f, nest_select(f, c, x[0], x[1]), NEST_ERR_TYPE, "types differ");
    assert_fails(f, nest_select(f, c, x[0], y[0]), NEST_ERR_TYPE, "shapes differ");
    assert_fails(f, nest_select(f, y[4], x[0], x[0]), NEST_ERR_TYPE, "shapes differ");
    nest_value tup = nest_tuple(f, 1, &c);
    assert_fails(f, nest_select(f, tup, x[0], x[0]), NEST_ERR_TYPE, "operand 1 is a tuple");
}

static void test_convert(void **state)
{
    nest_function *f = *state;
    for (int s = 0; s < 5; s++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", s);
        nest_value x = param(f, name, all_types[s], 2, SHAPE(2, 3));
        for (int t = 0; t < 5; t++)
            assert_tensor(f, nest_convert(f, x, all_types[t]), all_types[t], 2, SHAPE(2, 3));
        assert_fails(f, nest_convert(f, x, (nest_type)5), NEST_ERR_ARG, "invalid target type 5");
        assert_fails(f, nest_convert(f, x, (nest_type)-1), NEST_ERR_ARG, "invalid target type -1");
    }
    nest_value tup = nest_tuple(f, 0, NULL);
    assert_fails(f, nest_convert(f, tup, NEST_F32), NEST_ERR_TYPE, "operand 1 is a tuple");
}

/* ---- failed builders ---- */

static void test_none_propagation(void **state)
{
    nest_function *f = *state;
    nest_value i = param(f, "i", NEST_I32, 1, SHAPE(3));
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(3));
    nest_value bad = nest_exp(f, i);
    assert_int_equal(bad, NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "exp(i: i32[3])");
    char first[256];
    snprintf(first, sizeof first, "%s", nest_errmsg(f));
    /* every builder fed NEST_NONE returns NEST_NONE and keeps the first error */
    assert_int_equal(nest_add(f, bad, x), NEST_NONE);
    assert_int_equal(nest_add(f, x, bad), NEST_NONE);
    assert_int_equal(nest_negative(f, bad), NEST_NONE);
    assert_int_equal(nest_select(f, bad, x, x), NEST_NONE);
    assert_int_equal(nest_convert(f, bad, NEST_F64), NEST_NONE);
    assert_int_equal(nest_dot(f, bad, x), NEST_NONE);
    assert_int_equal(nest_broadcast(f, bad, 2, SHAPE(2, 3), 1, SHAPE(0)), NEST_NONE);
    assert_int_equal(nest_reshape(f, bad, NULL, 1, SHAPE(3)), NEST_NONE);
    assert_int_equal(nest_slice(f, bad, SHAPE(0), SHAPE(3), NULL), NEST_NONE);
    assert_int_equal(nest_concat(f, 2, VALUES(x, bad), 0), NEST_NONE);
    assert_int_equal(nest_sum(f, bad, 1, SHAPE(0)), NEST_NONE);
    assert_int_equal(nest_max(f, bad, 0, NULL), NEST_NONE);
    assert_int_equal(nest_min(f, bad, 0, NULL), NEST_NONE);
    assert_int_equal(nest_tuple(f, 2, VALUES(x, bad)), NEST_NONE);
    assert_int_equal(nest_get(f, bad, 0), NEST_NONE);
    /* nested builders: the error is checked once at the end */
    assert_int_equal(nest_sum(f, nest_multiply(f, nest_add(f, x, nest_exp(f, i)), x), 0, NULL),
                     NEST_NONE);
    assert_int_equal(nest_return(f, 1, &bad, NULL), NEST_ERR_TYPE);
    assert_int_equal(nest_errcode(f), NEST_ERR_TYPE);
    assert_string_equal(nest_errmsg(f), first);
    /* the function stays usable */
    nest_clear_error(f);
    assert_int_equal(nest_errcode(f), NEST_OK);
    assert_string_equal(nest_errmsg(f), "");
    nest_value ok = nest_add(f, x, x);
    assert_int_equal(ok, x + 1);
    /* a value that is not of the function */
    assert_fails(f, nest_add(f, x, 1234), NEST_ERR_ARG, "operand 2 (1234) is not a value of function f");
    assert_fails(f, nest_negative(f, ok + 1), NEST_ERR_ARG, "is not a value");
    /* returning NEST_NONE without an earlier error */
    assert_int_equal(nest_return(f, 1, VALUES(NEST_NONE), NULL), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "NEST_NONE");
}

static void test_message_operands(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(3, 4));
    nest_value y = param(f, "y", NEST_F32, 2, SHAPE(4, 3));
    assert_fails(f, nest_add(f, x, y), NEST_ERR_TYPE, "add(x: f32[3,4], y: f32[4,3])");
    nest_value n = nest_negative(f, x);
    assert_fails(f, nest_subtract(f, n, y), NEST_ERR_TYPE, "subtract(negative(...): f32[3,4], y: f32[4,3])");
    nest_value t = nest_tuple(f, 2, VALUES(x, nest_tuple(f, 1, &y)));
    assert_fails(f, nest_exp(f, t), NEST_ERR_TYPE, "exp(tuple(...): (f32[3,4], (...)))");
    nest_value g = nest_get(f, t, 1);
    assert_fails(f, nest_exp(f, g), NEST_ERR_TYPE, "exp(get(...): (f32[4,3]))");
}

/* Tuples deep or exponentially wide keep messages short and never recurse deeply. */
static void test_large_tuples(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 0, NULL);
    nest_value t = x;
    for (int i = 0; i < 20000; i++)
        t = nest_tuple(f, 1, &t);
    assert_value(f, t);
    assert_fails(f, nest_add(f, t, x), NEST_ERR_TYPE, "add(tuple(...): ((...)), x: f32[])");
    assert_ok(f, nest_return(f, 1, &t, NULL));
    assert_int_equal(nest_result_count(f), 1);
    assert_int_equal(nest_result(f, 0), x);
    nest_value g = t;
    for (int i = 0; i < 20000; i++)
        g = nest_get(f, g, 0);
    assert_tensor(f, g, NEST_F32, 0, NULL);

    nest_value d = x; /* d_k stands for 2^k tensors */
    for (int i = 0; i < 40; i++)
        d = nest_tuple(f, 2, VALUES(d, d));
    assert_fails(f, nest_negative(f, d), NEST_ERR_TYPE, "negative(tuple(...): ((...), (...)))");
    assert_int_equal(nest_return(f, 1, &d, NULL), NEST_ERR_LIMIT);
    assert_error(f, NEST_ERR_LIMIT, "too many results");
    assert_int_equal(nest_result_count(f), 1); /* the earlier results stay */

    nest_value z = nest_tuple(f, 0, NULL); /* 2^60 empty tuples: no tensor at all */
    for (int i = 0; i < 60; i++)
        z = nest_tuple(f, 2, VALUES(z, z));
    assert_ok(f, nest_return(f, 3, VALUES(z, x, z), NULL));
    assert_int_equal(nest_result_count(f), 1);
    assert_int_equal(nest_result(f, 0), x);
}

/* ---- dot ---- */

static void test_dot(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 3, SHAPE(2, 3, 4));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(4, 5));
    nest_value v3 = param(f, "v3", NEST_F32, 1, SHAPE(3));
    nest_value m23 = param(f, "m23", NEST_F32, 2, SHAPE(2, 3));
    nest_value m34 = param(f, "m34", NEST_F32, 2, SHAPE(3, 4));
    nest_value s = param(f, "s", NEST_F32, 0, NULL);
    nest_value e = param(f, "e", NEST_F32, 2, SHAPE(0, 3));
    nest_value z = param(f, "z", NEST_F32, 2, SHAPE(2, 0));
    nest_value z2 = param(f, "z2", NEST_F32, 2, SHAPE(0, 3));
    assert_tensor(f, nest_dot(f, a, b), NEST_F32, 3, SHAPE(2, 3, 5));
    assert_tensor(f, nest_dot(f, v3, v3), NEST_F32, 0, NULL);
    assert_tensor(f, nest_dot(f, m23, v3), NEST_F32, 1, SHAPE(2));
    assert_tensor(f, nest_dot(f, v3, m34), NEST_F32, 1, SHAPE(4));
    assert_tensor(f, nest_dot(f, m23, m34), NEST_F32, 2, SHAPE(2, 4));
    assert_tensor(f, nest_dot(f, s, a), NEST_F32, 3, SHAPE(2, 3, 4));
    assert_tensor(f, nest_dot(f, a, s), NEST_F32, 3, SHAPE(2, 3, 4));
    assert_tensor(f, nest_dot(f, s, s), NEST_F32, 0, NULL);
    assert_tensor(f, nest_dot(f, e, m34), NEST_F32, 2, SHAPE(0, 4));
    assert_tensor(f, nest_dot(f, z, z2), NEST_F32, 2, SHAPE(2, 3));
    for (int t = 0; t < 4; t++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", t);
        nest_value x = param(f, name, all_types[t], 1, SHAPE(3));
        assert_tensor(f, nest_dot(f, x, x), all_types[t], 0, NULL);
    }
    nest_value bb = param(f, "bb", NEST_BOOL, 1, SHAPE(3));
    assert_fails(f, nest_dot(f, bb, bb), NEST_ERR_TYPE, "dot(bb: bool[3], bb: bool[3]): operand 1 must be");
    assert_fails(f, nest_dot(f, m23, b), NEST_ERR_TYPE,
                 "dot(m23: f32[2,3], b: f32[4,5]): the last axis of the first operand (3) differs "
                 "from the first axis of the second (4)");
    assert_fails(f, nest_dot(f, b, a), NEST_ERR_TYPE, "(5) differs");
    nest_value d = param(f, "d", NEST_F64, 1, SHAPE(3));
    assert_fails(f, nest_dot(f, v3, d), NEST_ERR_TYPE, "dot(v3: f32[3], d: f64[3]): operand element types differ");
    assert_fails(f, nest_dot(f, s, d), NEST_ERR_TYPE, "types differ");
    nest_value tup = nest_tuple(f, 1, &v3);
    assert_fails(f, nest_dot(f, tup, v3), NEST_ERR_TYPE, "is a tuple");
    /* rank of the result above 32 */
    int64_t ones[20];
    for (int i = 0; i < 20; i++)
        ones[i] = 1;
    nest_value r20 = param(f, "r20", NEST_F32, 20, ones);
    assert_fails(f, nest_dot(f, r20, r20), NEST_ERR_LIMIT, "result rank 38 exceeds 32");
    /* a result too large though both operands fit */
    const int64_t p31 = (int64_t)1 << 31;
    nest_value tall = param(f, "tall", NEST_F32, 2, SHAPE(p31, 1));
    nest_value wide = param(f, "wide", NEST_F32, 2, SHAPE(1, p31));
    assert_tensor(f, nest_dot(f, wide, tall), NEST_F32, 2, SHAPE(1, 1));
    assert_fails(f, nest_dot(f, tall, wide), NEST_ERR_LIMIT, "too large");
}

/* ---- broadcast ---- */

static void test_broadcast(void **state)
{
    nest_function *f = *state;
    nest_value v = param(f, "v", NEST_F32, 1, SHAPE(5));
    nest_value s = param(f, "s", NEST_I64, 0, NULL);
    nest_value m = param(f, "m", NEST_BOOL, 2, SHAPE(2, 3));
    assert_tensor(f, nest_broadcast(f, v, 3, SHAPE(3, 5, 4), 2, SHAPE(0, 2)), NEST_F32, 3, SHAPE(3, 5, 4));
    assert_tensor(f, nest_broadcast(f, v, 3, SHAPE(3, 5, 4), 2, SHAPE(2, 0)), NEST_F32, 3, SHAPE(3, 5, 4));
    assert_tensor(f, nest_broadcast(f, v, 2, SHAPE(5, 7), 1, SHAPE(1)), NEST_F32, 2, SHAPE(5, 7));
    assert_tensor(f, nest_broadcast(f, v, 1, SHAPE(5), 0, NULL), NEST_F32, 1, SHAPE(5));
    assert_tensor(f, nest_broadcast(f, s, 2, SHAPE(2, 2), 2, SHAPE(0, 1)), NEST_I64, 2, SHAPE(2, 2));
    assert_tensor(f, nest_broadcast(f, s, 0, NULL, 0, NULL), NEST_I64, 0, NULL);
    assert_tensor(f, nest_broadcast(f, m, 3, SHAPE(2, 0, 3), 1, SHAPE(1)), NEST_BOOL, 3, SHAPE(2, 0, 3));
    /* wrong rank for the number of new axes */
    assert_fails(f, nest_broadcast(f, v, 2, SHAPE(3, 5), 0, NULL), NEST_ERR_TYPE,
                 "broadcast(v: f32[5]): the shape has rank 2 with 0 new axes, so the operand must have rank 2");
    assert_fails(f, nest_broadcast(f, v, 3, SHAPE(3, 5, 4), 1, SHAPE(0)), NEST_ERR_TYPE, "must have rank 2");
    /* kept dims must match */
    assert_fails(f, nest_broadcast(f, v, 2, SHAPE(5, 4), 1, SHAPE(0)), NEST_ERR_TYPE,
                 "output dimension 1 is 4 but the operand's dimension 0 is 5");
    /* bad axes */
    assert_fails(f, nest_broadcast(f, v, 2, SHAPE(5, 4), 1, SHAPE(2)), NEST_ERR_TYPE,
                 "axis 2 is out of range for rank 2");
    assert_fails(f, nest_broadcast(f, v, 2, SHAPE(5, 4), 1, SHAPE(-1)), NEST_ERR_TYPE, "axis -1 is out of range");
    assert_fails(f, nest_broadcast(f, s, 2, SHAPE(5, 4), 2, SHAPE(1, 1)), NEST_ERR_TYPE, "axis 1 is repeated");
    assert_fails(f, nest_broadcast(f, v, 2, SHAPE(5, 4), -1, SHAPE(1)), NEST_ERR_ARG, "invalid axes list");
    assert_fails(f, nest_broadcast(f, v, 2, SHAPE(5, 4), 1, NULL), NEST_ERR_ARG, "invalid axes list");
    /* bad shapes */
    assert_fails(f, nest_broadcast(f, v, 2, SHAPE(5, -4), 1, SHAPE(1)), NEST_ERR_ARG, "negative");
    int64_t big[33];
    for (int i = 0; i < 33; i++)
        big[i] = 1;
    assert_fails(f, nest_broadcast(f, s, 33, big, 0, NULL), NEST_ERR_LIMIT, "rank 33");
    assert_fails(f, nest_broadcast(f, s, 2, SHAPE((int64_t)1 << 31, (int64_t)1 << 31), 2, SHAPE(0, 1)),
                 NEST_ERR_LIMIT, "too large");
    nest_value tup = nest_tuple(f, 1, &v);
    assert_fails(f, nest_broadcast(f, tup, 1, SHAPE(5), 0, NULL), NEST_ERR_TYPE, "is a tuple");
}

/* ---- reshape ---- */

static void test_reshape(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(2, 3));
    nest_value c = param(f, "c", NEST_I32, 3, SHAPE(2, 3, 4));
    nest_value s = param(f, "s", NEST_F64, 0, NULL);
    nest_value e = param(f, "e", NEST_F64, 2, SHAPE(0, 3));
    assert_tensor(f, nest_reshape(f, a, NULL, 2, SHAPE(3, 2)), NEST_F32, 2, SHAPE(3, 2));
    assert_tensor(f, nest_reshape(f, a, SHAPE(1, 0), 2, SHAPE(3, 2)), NEST_F32, 2, SHAPE(3, 2));
    assert_tensor(f, nest_reshape(f, a, SHAPE(0, 1), 1, SHAPE(6)), NEST_F32, 1, SHAPE(6));
    assert_tensor(f, nest_reshape(f, c, SHAPE(2, 0, 1), 3, SHAPE(4, 2, 3)), NEST_I32, 3, SHAPE(4, 2, 3));
    assert_tensor(f, nest_reshape(f, c, SHAPE(2, 0, 1), 2, SHAPE(8, 3)), NEST_I32, 2, SHAPE(8, 3));
    assert_tensor(f, nest_reshape(f, s, NULL, 2, SHAPE(1, 1)), NEST_F64, 2, SHAPE(1, 1));
    nest_value one = nest_reshape(f, s, NULL, 1, SHAPE(1));
    assert_tensor(f, nest_reshape(f, one, SHAPE(0), 0, NULL), NEST_F64, 0, NULL);
    assert_tensor(f, nest_reshape(f, e, SHAPE(1, 0), 3, SHAPE(3, 0, 7)), NEST_F64, 3, SHAPE(3, 0, 7));
    assert_fails(f, nest_reshape(f, a, NULL, 2, SHAPE(4, 2)), NEST_ERR_TYPE,
                 "reshape(a: f32[2,3]): shape [4,2] has 8 elements but the operand has 6");
    assert_fails(f, nest_reshape(f, a, NULL, 0, NULL), NEST_ERR_TYPE, "1 elements but the operand has 6");
    assert_fails(f, nest_reshape(f, a, SHAPE(0, 0), 2, SHAPE(3, 2)), NEST_ERR_TYPE,
                 "order must be a permutation of 0..1 (entry 1 is 0)");
    assert_fails(f, nest_reshape(f, a, SHAPE(0, 2), 2, SHAPE(3, 2)), NEST_ERR_TYPE, "(entry 1 is 2)");
    assert_fails(f, nest_reshape(f, a, SHAPE(-1, 0), 2, SHAPE(3, 2)), NEST_ERR_TYPE, "(entry 0 is -1)");
    assert_fails(f, nest_reshape(f, a, NULL, 2, SHAPE(-2, -3)), NEST_ERR_ARG, "negative");
    assert_fails(f, nest_reshape(f, a, NULL, 33, SHAPE(6)), NEST_ERR_LIMIT, "rank 33");
    nest_value tup = nest_tuple(f, 1, &a);
    assert_fails(f, nest_reshape(f, tup, NULL, 2, SHAPE(2, 3)), NEST_ERR_TYPE, "is a tuple");
}

/* ---- slice ---- */

static void test_slice(void **state)
{
    nest_function *f = *state;
    nest_value v = param(f, "v", NEST_F32, 1, SHAPE(10));
    nest_value m = param(f, "m", NEST_BOOL, 2, SHAPE(10, 12));
    nest_value s = param(f, "s", NEST_I32, 0, NULL);
    assert_tensor(f, nest_slice(f, v, SHAPE(2), SHAPE(8), NULL), NEST_F32, 1, SHAPE(6));
    /* ceil((8 - 2) / stride) */
    assert_tensor(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(1)), NEST_F32, 1, SHAPE(6));
    assert_tensor(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(3)), NEST_F32, 1, SHAPE(2));
    assert_tensor(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(4)), NEST_F32, 1, SHAPE(2));
    assert_tensor(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(5)), NEST_F32, 1, SHAPE(2));
    assert_tensor(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(6)), NEST_F32, 1, SHAPE(1));
    assert_tensor(f, nest_slice(f, v, SHAPE(2), SHAPE(8), SHAPE(100)), NEST_F32, 1, SHAPE(1));
    assert_tensor(f, nest_slice(f, v, SHAPE(0), SHAPE(10), SHAPE(3)), NEST_F32, 1, SHAPE(4));
    assert_tensor(f, nest_slice(f, v, SHAPE(4), SHAPE(4), NULL), NEST_F32, 1, SHAPE(0));
    assert_tensor(f, nest_slice(f, v, SHAPE(10), SHAPE(10), SHAPE(2)), NEST_F32, 1, SHAPE(0));
    assert_tensor(f, nest_slice(f, m, SHAPE(1, 2), SHAPE(9, 12), SHAPE(2, 3)), NEST_BOOL, 2, SHAPE(4, 4));
    assert_tensor(f, nest_slice(f, s, NULL, NULL, NULL), NEST_I32, 0, NULL);
    assert_fails(f, nest_slice(f, v, SHAPE(2), SHAPE(11), NULL), NEST_ERR_TYPE,
                 "slice(v: f32[10]): axis 0: bounds [2, 11) are not within [0, 10]");
    assert_fails(f, nest_slice(f, v, SHAPE(-1), SHAPE(3), NULL), NEST_ERR_TYPE, "bounds [-1, 3)");
    assert_fails(f, nest_slice(f, v, SHAPE(5), SHAPE(4), NULL), NEST_ERR_TYPE, "bounds [5, 4)");
    assert_fails(f, nest_slice(f, v, SHAPE(0), SHAPE(4), SHAPE(0)), NEST_ERR_TYPE,
                 "axis 0: stride 0 must be at least 1");
    assert_fails(f, nest_slice(f, m, SHAPE(0, 0), SHAPE(4, 4), SHAPE(1, -2)), NEST_ERR_TYPE,
                 "axis 1: stride -2 must be at least 1");
    assert_fails(f, nest_slice(f, m, SHAPE(0, 0), SHAPE(11, 4), NULL), NEST_ERR_TYPE, "axis 0: bounds");
    assert_fails(f, nest_slice(f, v, NULL, SHAPE(4), NULL), NEST_ERR_ARG, "lower or upper is NULL");
    assert_fails(f, nest_slice(f, v, SHAPE(0), NULL, NULL), NEST_ERR_ARG, "lower or upper is NULL");
    nest_value tup = nest_tuple(f, 1, &v);
    assert_fails(f, nest_slice(f, tup, SHAPE(0), SHAPE(1), NULL), NEST_ERR_TYPE, "is a tuple");
}

/* ---- concat ---- */

static void test_concat(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(2, 3));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(4, 3));
    nest_value c = param(f, "c", NEST_F32, 2, SHAPE(2, 5));
    nest_value e = param(f, "e", NEST_F32, 2, SHAPE(0, 3));
    nest_value i = param(f, "i", NEST_I32, 2, SHAPE(2, 3));
    nest_value s = param(f, "s", NEST_F32, 0, NULL);
    nest_value v = param(f, "v", NEST_F32, 1, SHAPE(6));
    assert_tensor(f, nest_concat(f, 2, VALUES(a, b), 0), NEST_F32, 2, SHAPE(6, 3));
    assert_tensor(f, nest_concat(f, 2, VALUES(a, c), 1), NEST_F32, 2, SHAPE(2, 8));
    assert_tensor(f, nest_concat(f, 3, VALUES(a, b, a), 0), NEST_F32, 2, SHAPE(8, 3));
    assert_tensor(f, nest_concat(f, 3, VALUES(a, c, a), 1), NEST_F32, 2, SHAPE(2, 11));
    assert_tensor(f, nest_concat(f, 1, VALUES(a), 1), NEST_F32, 2, SHAPE(2, 3));
    assert_tensor(f, nest_concat(f, 2, VALUES(e, a), 0), NEST_F32, 2, SHAPE(2, 3));
    assert_fails(f, nest_concat(f, 2, VALUES(s, s), 0), NEST_ERR_TYPE,
                 "concat(s: f32[], s: f32[]): scalars cannot be concatenated");
    assert_fails(f, nest_concat(f, 2, VALUES(a, v), 0), NEST_ERR_TYPE,
                 "concat(a: f32[2,3], v: f32[6]): operand ranks differ");
    assert_fails(f, nest_concat(f, 2, VALUES(a, c), 0), NEST_ERR_TYPE,
                 "operand 2 differs in dimension 1, which is not the concatenation axis");
    assert_fails(f, nest_concat(f, 3, VALUES(a, a, b), 1), NEST_ERR_TYPE, "operand 3 differs in dimension 0");
    assert_fails(f, nest_concat(f, 2, VALUES(a, a), 2), NEST_ERR_TYPE, "axis 2 is out of range for rank 2");
    assert_fails(f, nest_concat(f, 2, VALUES(a, a), -1), NEST_ERR_TYPE, "axis -1 is out of range");
    assert_fails(f, nest_concat(f, 2, VALUES(a, i), 0), NEST_ERR_TYPE, "types differ");
    assert_fails(f, nest_concat(f, 0, NULL, 0), NEST_ERR_ARG, "at least one operand");
    assert_fails(f, nest_concat(f, 2, NULL, 0), NEST_ERR_ARG, "invalid operand list");
    nest_value tup = nest_tuple(f, 1, &a);
    assert_fails(f, nest_concat(f, 2, VALUES(a, tup), 0), NEST_ERR_TYPE, "operand 2 is a tuple");
    /* the joined axis may overflow though each operand fits */
    const int64_t big = (int64_t)1 << 61;
    nest_value h = param(f, "h", NEST_BOOL, 1, SHAPE(big));
    assert_fails(f, nest_concat(f, 2, VALUES(h, h), 0), NEST_ERR_LIMIT, "too large");
}

/* ---- reductions ---- */

static void test_reductions(void **state)
{
    nest_function *f = *state;
    typedef nest_value (*reduce_fn)(nest_function *, nest_value, int, const int64_t *);
    static const struct {
        const char *name;
        reduce_fn fn;
    } ops[] = {{"sum", nest_sum}, {"max", nest_max}, {"min", nest_min}};
    nest_value x = param(f, "x", NEST_F64, 3, SHAPE(2, 3, 4));
    nest_value s = param(f, "s", NEST_I32, 0, NULL);
    nest_value b = param(f, "b", NEST_BOOL, 1, SHAPE(3));
    nest_value tup = nest_tuple(f, 1, &x);
    char want[128];
    for (int k = 0; k < 3; k++) {
        reduce_fn op = ops[k].fn;
        assert_tensor(f, op(f, x, 1, SHAPE(1)), NEST_F64, 2, SHAPE(2, 4));
        assert_tensor(f, op(f, x, 2, SHAPE(0, 2)), NEST_F64, 1, SHAPE(3));
        assert_tensor(f, op(f, x, 2, SHAPE(2, 0)), NEST_F64, 1, SHAPE(3));
        assert_tensor(f, op(f, x, 3, SHAPE(2, 1, 0)), NEST_F64, 0, NULL);
        assert_tensor(f, op(f, x, 0, NULL), NEST_F64, 3, SHAPE(2, 3, 4));
        assert_tensor(f, op(f, s, 0, NULL), NEST_I32, 0, NULL);
        snprintf(want, sizeof want, "%s(x: f64[2,3,4]): axis 3 is out of range for rank 3", ops[k].name);
        assert_fails(f, op(f, x, 1, SHAPE(3)), NEST_ERR_TYPE, want);
        assert_fails(f, op(f, x, 1, SHAPE(-1)), NEST_ERR_TYPE, "axis -1 is out of range");
        assert_fails(f, op(f, x, 2, SHAPE(1, 1)), NEST_ERR_TYPE, "axis 1 is repeated");
        assert_fails(f, op(f, s, 1, SHAPE(0)), NEST_ERR_TYPE, "axis 0 is out of range for rank 0");
        assert_fails(f, op(f, x, -1, NULL), NEST_ERR_ARG, "invalid axes list");
        assert_fails(f, op(f, x, 33, SHAPE(0)), NEST_ERR_ARG, "invalid axes list");
        assert_fails(f, op(f, x, 1, NULL), NEST_ERR_ARG, "invalid axes list");
        snprintf(want, sizeof want, "%s(b: bool[3]): operand 1 must be f32, f64, i32 or i64, not bool",
                 ops[k].name);
        assert_fails(f, op(f, b, 1, SHAPE(0)), NEST_ERR_TYPE, want);
        assert_fails(f, op(f, tup, 0, NULL), NEST_ERR_TYPE, "is a tuple");
    }
}

/* ---- tuples ---- */

static void test_tuples(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 1, SHAPE(2));
    nest_value b = param(f, "b", NEST_I64, 2, SHAPE(3, 4));
    nest_value c = param(f, "c", NEST_BOOL, 0, NULL);
    nest_value t = nest_tuple(f, 2, VALUES(a, b));
    assert_value(f, t);
    assert_int_equal(nest_value_type(f, t), -1);
    assert_int_equal(nest_value_rank(f, t), -1);
    assert_null(nest_value_shape(f, t));
    assert_tensor(f, nest_get(f, t, 0), NEST_F32, 1, SHAPE(2));
    assert_tensor(f, nest_get(f, t, 1), NEST_I64, 2, SHAPE(3, 4));
    nest_value t2 = nest_tuple(f, 3, VALUES(c, t, a));
    nest_value g = nest_get(f, t2, 1);
    assert_value(f, g);
    assert_int_equal(nest_value_type(f, g), -1); /* a tuple */
    assert_tensor(f, nest_get(f, g, 1), NEST_I64, 2, SHAPE(3, 4));
    assert_tensor(f, nest_get(f, nest_get(f, t2, 1), 0), NEST_F32, 1, SHAPE(2));
    assert_tensor(f, nest_get(f, t2, 0), NEST_BOOL, 0, NULL);
    assert_tensor(f, nest_get(f, t2, 2), NEST_F32, 1, SHAPE(2));
    assert_fails(f, nest_get(f, t, 2), NEST_ERR_TYPE, "get(tuple(...): (f32[2], i64[3,4])): index 2 is out of range for a tuple of 2");
    assert_fails(f, nest_get(f, t, -1), NEST_ERR_TYPE, "index -1 is out of range");
    assert_fails(f, nest_get(f, g, 2), NEST_ERR_TYPE, "out of range for a tuple of 2");
    assert_fails(f, nest_get(f, a, 0), NEST_ERR_TYPE, "get(a: f32[2]): the operand is not a tuple");
    nest_value empty = nest_tuple(f, 0, NULL);
    assert_value(f, empty);
    assert_fails(f, nest_get(f, empty, 0), NEST_ERR_TYPE, "out of range for a tuple of 0");
    assert_fails(f, nest_tuple(f, 2, NULL), NEST_ERR_ARG, "invalid operand list");
    assert_fails(f, nest_tuple(f, -1, NULL), NEST_ERR_ARG, "invalid operand list");
    assert_fails(f, nest_add(f, t, t), NEST_ERR_TYPE, "operand 1 is a tuple; use get to take an element");
}

/* ---- results ---- */

static void test_return(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(2));
    nest_value y = param(f, "y", NEST_I32, 0, NULL);
    nest_value z = param(f, "z", NEST_F64, 2, SHAPE(2, 3));
    nest_value w = param(f, "w", NEST_BOOL, 1, SHAPE(0));
    assert_int_equal(nest_result_count(f), 0);
    assert_ok(f, nest_return(f, 1, &x, NULL));
    assert_int_equal(nest_result_count(f), 1);
    assert_int_equal(nest_result(f, 0), x);
    /* nested tuples flatten depth first, in order */
    nest_value inner = nest_tuple(f, 2, VALUES(z, w));
    nest_value mid = nest_tuple(f, 2, VALUES(y, inner));
    const nest_layout lay[5] = {NEST_ROW_MAJOR, NEST_COL_MAJOR, NEST_ROW_MAJOR, NEST_COL_MAJOR, NEST_ROW_MAJOR};
    assert_ok(f, nest_return(f, 3, VALUES(x, mid, nest_tuple(f, 0, NULL)), lay));
    assert_int_equal(nest_result_count(f), 4);
    assert_int_equal(nest_result(f, 0), x);
    assert_int_equal(nest_result(f, 1), y);
    assert_int_equal(nest_result(f, 2), z);
    assert_int_equal(nest_result(f, 3), w);
    assert_int_equal(nest_result(f, 4), NEST_NONE);
    assert_int_equal(nest_result(f, -1), NEST_NONE);
    /* a get of a tuple flattens to that tuple's elements; a get of a tensor is the tensor */
    assert_ok(f, nest_return(f, 3, VALUES(nest_get(f, mid, 1), nest_get(f, mid, 0), x), NULL));
    assert_int_equal(nest_result_count(f), 4);
    assert_int_equal(nest_result(f, 0), z);
    assert_int_equal(nest_result(f, 1), w);
    assert_int_equal(nest_result(f, 2), y);
    assert_int_equal(nest_result(f, 3), x);
    assert_int_equal(nest_value_type(f, nest_result(f, 2)), NEST_I32);
    /* the same value twice */
    assert_ok(f, nest_return(f, 2, VALUES(x, x), NULL));
    assert_int_equal(nest_result_count(f), 2);
    /* no results at all */
    assert_ok(f, nest_return(f, 0, NULL, NULL));
    assert_int_equal(nest_result_count(f), 0);
    /* errors leave the results as they were */
    assert_ok(f, nest_return(f, 1, &z, NULL));
    assert_int_equal(nest_return(f, 2, VALUES(x, y), (const nest_layout[]){NEST_ROW_MAJOR, (nest_layout)7}),
                     NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "result 2 has an invalid layout 7");
    assert_int_equal(nest_return(f, 1, VALUES(77), NULL), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "77 is not a value of function f");
    assert_int_equal(nest_return(f, 1, NULL, NULL), NEST_ERR_ARG);
    assert_int_equal(nest_return(f, -1, NULL, NULL), NEST_ERR_ARG);
    assert_int_equal(nest_result_count(f), 1);
    assert_int_equal(nest_result(f, 0), z);
}

static void test_inspection(void **state)
{
    nest_function *f = *state;
    assert_string_equal(nest_function_name(f), "f");
    assert_int_equal(nest_param_count(f), 0);
    assert_int_equal(nest_param(f, 0), NEST_NONE);
    nest_value x = param(f, "x", NEST_I64, 3, SHAPE(4, 0, 6));
    nest_value y = nest_parameter(f, "y", NEST_F32, 2, SHAPE(2, 3), NEST_COL_MAJOR);
    assert_int_equal(nest_param_count(f), 2);
    assert_int_equal(nest_param(f, 0), x);
    assert_int_equal(nest_param(f, 1), y);
    assert_int_equal(nest_param(f, 2), NEST_NONE);
    assert_int_equal(nest_param(f, -1), NEST_NONE);
    assert_int_equal(nest_value_type(f, x), NEST_I64);
    assert_int_equal(nest_value_rank(f, x), 3);
    const int64_t *s = nest_value_shape(f, x);
    assert_non_null(s);
    assert_int_equal(s[0], 4);
    assert_int_equal(s[1], 0);
    assert_int_equal(s[2], 6);
    assert_int_equal(nest_value_type(f, 2), -1);
    assert_int_equal(nest_value_rank(f, -1), -1);
    assert_null(nest_value_shape(f, 100));
    /* evaluating needs results */
    assert_int_equal(nest_evaluate(f, NULL, 0, NULL, 0), NEST_ERR_ARG);
    assert_error(f, NEST_ERR_ARG, "function f has no results");
}

/* ---- the op set of real models ---- */

static void test_model_elementwise(void **state)
{
    nest_function *f = *state;
    static const struct {
        const char *name;
        unary_fn fn;
    } math[] = {
        {"sin", nest_sin},     {"cos", nest_cos},         {"tan", nest_tan},
        {"asin", nest_asin},   {"acos", nest_acos},       {"atan", nest_atan},
        {"sinh", nest_sinh},   {"cosh", nest_cosh},       {"floor", nest_floor},
        {"ceiling", nest_ceiling}, {"erf", nest_erf},     {"sign", nest_sign},
        {"relu", nest_relu},   {"sigmoid", nest_sigmoid},
    };
    nest_value x[5], y[5];
    char name[16], want[160];
    for (int t = 0; t < 5; t++) {
        snprintf(name, sizeof name, "x%d", t);
        x[t] = param(f, name, all_types[t], 2, SHAPE(3, 0));
        snprintf(name, sizeof name, "y%d", t);
        y[t] = param(f, name, all_types[t], 1, SHAPE(7));
    }
    nest_value tup = nest_tuple(f, 1, x);
    for (size_t k = 0; k < sizeof math / sizeof *math; k++) {
        for (int t = 0; t < 5; t++) {
            nest_value v = math[k].fn(f, x[t]);
            if (t < 2) {
                assert_tensor(f, v, all_types[t], 2, SHAPE(3, 0));
                continue;
            }
            snprintf(want, sizeof want, "%s(x%d: %s[3,0]): operand 1 must be f32 or f64, not %s",
                     math[k].name, t, nest_type_name(all_types[t]), nest_type_name(all_types[t]));
            assert_fails(f, v, NEST_ERR_TYPE, want);
        }
        assert_fails(f, math[k].fn(f, tup), NEST_ERR_TYPE, "is a tuple");
    }
    /* logic takes bool only */
    assert_tensor(f, nest_not(f, y[4]), NEST_BOOL, 1, SHAPE(7));
    assert_tensor(f, nest_and(f, y[4], y[4]), NEST_BOOL, 1, SHAPE(7));
    assert_tensor(f, nest_or(f, x[4], x[4]), NEST_BOOL, 2, SHAPE(3, 0));
    for (int t = 0; t < 4; t++) {
        snprintf(want, sizeof want, "not(y%d: %s[7]): operand 1 must be bool, not %s", t,
                 nest_type_name(all_types[t]), nest_type_name(all_types[t]));
        assert_fails(f, nest_not(f, y[t]), NEST_ERR_TYPE, want);
        assert_fails(f, nest_and(f, y[4], y[t]), NEST_ERR_TYPE, "operand 2 must be bool");
        assert_fails(f, nest_or(f, y[t], y[4]), NEST_ERR_TYPE, "operand 1 must be bool");
    }
    assert_fails(f, nest_and(f, y[4], x[4]), NEST_ERR_TYPE,
                 "and(y4: bool[7], x4: bool[3,0]): operand shapes differ");
    /* comparisons: not_equal of any type, less_eq and greater_eq of numbers */
    for (int t = 0; t < 5; t++) {
        assert_tensor(f, nest_not_equal(f, y[t], y[t]), NEST_BOOL, 1, SHAPE(7));
        if (t < 4) {
            assert_tensor(f, nest_less_eq(f, y[t], y[t]), NEST_BOOL, 1, SHAPE(7));
            assert_tensor(f, nest_greater_eq(f, x[t], x[t]), NEST_BOOL, 2, SHAPE(3, 0));
        } else {
            assert_fails(f, nest_less_eq(f, y[t], y[t]), NEST_ERR_TYPE,
                         "less_eq(y4: bool[7], y4: bool[7]): operand 1 must be f32, f64, i32 or "
                         "i64, not bool");
            assert_fails(f, nest_greater_eq(f, x[t], x[t]), NEST_ERR_TYPE,
                         "greater_eq(x4: bool[3,0], x4: bool[3,0])");
        }
    }
    assert_fails(f, nest_not_equal(f, y[0], y[1]), NEST_ERR_TYPE, "operand element types differ");
    assert_fails(f, nest_less_eq(f, y[0], x[0]), NEST_ERR_TYPE, "operand shapes differ");
    assert_fails(f, nest_greater_eq(f, y[2], tup), NEST_ERR_TYPE, "operand 2 is a tuple");
}

static void test_model_reductions(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_I64, 3, SHAPE(2, 3, 4));
    nest_value e = param(f, "e", NEST_F32, 3, SHAPE(2, 0, 4));
    nest_value z = param(f, "z", NEST_F32, 2, SHAPE(0, 5));
    nest_value s = param(f, "s", NEST_F64, 0, NULL);
    nest_value b = param(f, "b", NEST_BOOL, 1, SHAPE(3));
    /* product: like sum */
    assert_tensor(f, nest_product(f, x, 2, SHAPE(2, 0)), NEST_I64, 1, SHAPE(3));
    assert_tensor(f, nest_product(f, e, 1, SHAPE(1)), NEST_F32, 2, SHAPE(2, 4));
    assert_tensor(f, nest_product(f, s, 0, NULL), NEST_F64, 0, NULL);
    assert_fails(f, nest_product(f, x, 1, SHAPE(3)), NEST_ERR_TYPE,
                 "product(x: i64[2,3,4]): axis 3 is out of range for rank 3");
    assert_fails(f, nest_product(f, x, 2, SHAPE(0, 0)), NEST_ERR_TYPE, "axis 0 is repeated");
    assert_fails(f, nest_product(f, b, 1, SHAPE(0)), NEST_ERR_TYPE, "not bool");
    assert_fails(f, nest_product(f, x, 1, NULL), NEST_ERR_ARG, "invalid axes list");
    /* argmax and argmin: i64, the axis removed */
    typedef nest_value (*arg_fn)(nest_function *, nest_value, int64_t);
    static const struct {
        const char *name;
        arg_fn fn;
    } ops[] = {{"argmax", nest_argmax}, {"argmin", nest_argmin}};
    char want[160];
    for (int k = 0; k < 2; k++) {
        arg_fn op = ops[k].fn;
        assert_tensor(f, op(f, x, 0), NEST_I64, 2, SHAPE(3, 4));
        assert_tensor(f, op(f, x, 1), NEST_I64, 2, SHAPE(2, 4));
        assert_tensor(f, op(f, x, 2), NEST_I64, 2, SHAPE(2, 3));
        assert_tensor(f, op(f, e, 0), NEST_I64, 2, SHAPE(0, 4));
        assert_tensor(f, op(f, z, 1), NEST_I64, 1, SHAPE(0)); /* an empty axis, no result */
        assert_fails(f, op(f, z, 0), NEST_ERR_TYPE, "axis 0 is empty");
        snprintf(want, sizeof want, "%s(x: i64[2,3,4]): axis 3 is out of range for rank 3",
                 ops[k].name);
        assert_fails(f, op(f, x, 3), NEST_ERR_TYPE, want);
        assert_fails(f, op(f, x, -1), NEST_ERR_TYPE, "axis -1 is out of range for rank 3");
        snprintf(want, sizeof want, "%s(s: f64[]): a scalar has no axis to search", ops[k].name);
        assert_fails(f, op(f, s, 0), NEST_ERR_TYPE, want);
        snprintf(want, sizeof want, "%s(e: f32[2,0,4]): axis 1 is empty: there is no element to "
                 "index", ops[k].name);
        assert_fails(f, op(f, e, 1), NEST_ERR_TYPE, want);
        assert_fails(f, op(f, b, 0), NEST_ERR_TYPE, "operand 1 must be f32, f64, i32 or i64");
    }
}

static void test_model_structural(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(3, 4));
    nest_value z = param(f, "z", NEST_F32, 0, NULL);
    nest_value d = param(f, "d", NEST_F64, 0, NULL);
    nest_value v = param(f, "v", NEST_F32, 1, SHAPE(2));
    nest_value e = param(f, "e", NEST_I64, 2, SHAPE(0, 5));
    nest_value i = param(f, "i", NEST_I32, 2, SHAPE(2, 6));
    nest_value b = param(f, "b", NEST_BOOL, 1, SHAPE(4));
    /* pad */
    assert_tensor(f, nest_pad(f, x, z, SHAPE(1, 2), SHAPE(0, 3), NULL), NEST_F32, 2, SHAPE(4, 9));
    assert_tensor(f, nest_pad(f, x, z, SHAPE(-1, 0), SHAPE(0, -4), NULL), NEST_F32, 2, SHAPE(2, 0));
    assert_tensor(f, nest_pad(f, x, z, SHAPE(0, 1), SHAPE(0, 1), SHAPE(1, 2)), NEST_F32, 2,
                  SHAPE(5, 12));
    assert_tensor(f, nest_pad(f, x, z, SHAPE(-5, 0), SHAPE(4, 0), NULL), NEST_F32, 2, SHAPE(2, 4));
    assert_tensor(f, nest_pad(f, z, z, NULL, NULL, NULL), NEST_F32, 0, NULL);
    assert_tensor(f, nest_pad(f, e, nest_constant(f, NEST_I64, 0, NULL, (int64_t[]){3}, 1),
                              SHAPE(1, 0), SHAPE(1, 0), SHAPE(5, 5)),
                  NEST_I64, 2, SHAPE(2, 25));
    assert_fails(f, nest_pad(f, x, v, SHAPE(1, 1), SHAPE(1, 1), NULL), NEST_ERR_TYPE,
                 "pad(x: f32[3,4], v: f32[2]): the padding value must be a scalar, not f32[2]");
    assert_fails(f, nest_pad(f, x, d, SHAPE(1, 1), SHAPE(1, 1), NULL), NEST_ERR_TYPE,
                 "the padding value is f64 but the operand is f32");
    assert_fails(f, nest_pad(f, x, z, NULL, SHAPE(1, 1), NULL), NEST_ERR_ARG, "below or above is NULL");
    assert_fails(f, nest_pad(f, x, z, SHAPE(0, 0), SHAPE(0, 0), SHAPE(0, -1)), NEST_ERR_TYPE,
                 "axis 1: interior padding -1 is negative");
    assert_fails(f, nest_pad(f, x, z, SHAPE(-2, 0), SHAPE(-2, 0), NULL), NEST_ERR_TYPE,
                 "axis 0: below -2 and above -2 leave -1 elements of 3");
    assert_fails(f, nest_pad(f, x, z, SHAPE(0, INT64_MAX), SHAPE(0, 1), NULL), NEST_ERR_LIMIT,
                 "axis 1: the padded extent is too large");
    assert_fails(f, nest_pad(f, x, z, SHAPE(0, 0), SHAPE(0, 0), SHAPE(INT64_MAX, 0)),
                 NEST_ERR_LIMIT, "the padded extent is too large");
    assert_fails(f, nest_pad(f, x, z, SHAPE(0, 1 << 30), SHAPE(1 << 30, 1 << 30), NULL),
                 NEST_ERR_LIMIT, "too large");
    /* reverse */
    assert_tensor(f, nest_reverse(f, x, 2, SHAPE(1, 0)), NEST_F32, 2, SHAPE(3, 4));
    assert_tensor(f, nest_reverse(f, b, 0, NULL), NEST_BOOL, 1, SHAPE(4));
    assert_fails(f, nest_reverse(f, x, 1, SHAPE(2)), NEST_ERR_TYPE,
                 "reverse(x: f32[3,4]): axis 2 is out of range for rank 2");
    assert_fails(f, nest_reverse(f, x, 2, SHAPE(0, 0)), NEST_ERR_TYPE, "axis 0 is repeated");
    /* replace_slice */
    nest_value y = param(f, "y", NEST_F32, 2, SHAPE(2, 2));
    assert_tensor(f, nest_replace_slice(f, x, y, SHAPE(1, 1), SHAPE(3, 3), NULL), NEST_F32, 2,
                  SHAPE(3, 4));
    assert_tensor(f, nest_replace_slice(f, x, y, SHAPE(0, 0), SHAPE(3, 4), SHAPE(2, 3)), NEST_F32,
                  2, SHAPE(3, 4));
    assert_fails(f, nest_replace_slice(f, x, y, SHAPE(0, 0), SHAPE(3, 3), NULL), NEST_ERR_TYPE,
                 "replace_slice(x: f32[3,4], y: f32[2,2]): the box selects a slice of shape "
                 "[3,3]; the replacement must have that shape");
    assert_fails(f, nest_replace_slice(f, x, y, SHAPE(2, 0), SHAPE(4, 2), NULL), NEST_ERR_TYPE,
                 "axis 0: bounds [2, 4) are not within [0, 3]");
    assert_fails(f, nest_replace_slice(f, x, y, SHAPE(0, 0), SHAPE(2, 2), SHAPE(1, 0)),
                 NEST_ERR_TYPE, "axis 1: stride 0 must be at least 1");
    assert_fails(f, nest_replace_slice(f, x, v, SHAPE(0, 0), SHAPE(2, 2), NULL), NEST_ERR_TYPE,
                 "operand ranks differ");
    assert_fails(f, nest_replace_slice(f, x, i, SHAPE(0, 0), SHAPE(2, 2), NULL), NEST_ERR_TYPE,
                 "operand element types differ");
    assert_fails(f, nest_replace_slice(f, x, y, NULL, SHAPE(2, 2), NULL), NEST_ERR_ARG,
                 "lower or upper is NULL");
    /* one_hot */
    nest_value k = param(f, "k", NEST_I64, 1, SHAPE(3));
    assert_tensor(f, nest_one_hot(f, k, 2, SHAPE(3, 10), 1), NEST_I64, 2, SHAPE(3, 10));
    assert_tensor(f, nest_one_hot(f, k, 2, SHAPE(7, 3), 0), NEST_I64, 2, SHAPE(7, 3));
    assert_tensor(f, nest_one_hot(f, x, 3, SHAPE(3, 0, 4), 1), NEST_F32, 3, SHAPE(3, 0, 4));
    assert_tensor(f, nest_one_hot(f, z, 1, SHAPE(5), 0), NEST_F32, 1, SHAPE(5));
    assert_fails(f, nest_one_hot(f, k, 2, SHAPE(4, 10), 1), NEST_ERR_TYPE,
                 "one_hot(k: i64[3]): output dimension 0 is 4 but the operand's dimension 0 is 3");
    assert_fails(f, nest_one_hot(f, k, 1, SHAPE(3), 0), NEST_ERR_TYPE,
                 "the shape has rank 1, so the operand must have rank 0");
    assert_fails(f, nest_one_hot(f, k, 2, SHAPE(3, 10), 2), NEST_ERR_TYPE,
                 "axis 2 is out of range for rank 2");
    assert_fails(f, nest_one_hot(f, b, 2, SHAPE(4, 2), 1), NEST_ERR_TYPE,
                 "operand 1 must be f32, f64, i32 or i64, not bool");
    assert_fails(f, nest_one_hot(f, k, 2, SHAPE(3, -1), 1), NEST_ERR_ARG, "dimension 1 is negative");
    /* gather */
    nest_value t = param(f, "t", NEST_F64, 3, SHAPE(5, 7, 2));
    assert_tensor(f, nest_gather(f, t, i, 0), NEST_F64, 4, SHAPE(2, 6, 7, 2));
    assert_tensor(f, nest_gather(f, t, i, 1), NEST_F64, 4, SHAPE(5, 2, 6, 2));
    assert_tensor(f, nest_gather(f, t, k, 2), NEST_F64, 3, SHAPE(5, 7, 3));
    assert_tensor(f, nest_gather(f, t, nest_constant(f, NEST_I64, 0, NULL, (int64_t[]){1}, 1), 1),
                  NEST_F64, 2, SHAPE(5, 2));
    assert_tensor(f, nest_gather(f, e, nest_constant(f, NEST_I32, 1, SHAPE(0), NULL, 0), 0),
                  NEST_I64, 2, SHAPE(0, 5));
    assert_fails(f, nest_gather(f, e, k, 0), NEST_ERR_TYPE,
                 "gather(e: i64[0,5], k: i64[3]): axis 0 is empty: there is no element to take");
    assert_fails(f, nest_gather(f, t, x, 0), NEST_ERR_TYPE, "the indices must be i32 or i64, not f32");
    assert_fails(f, nest_gather(f, t, i, 3), NEST_ERR_TYPE, "axis 3 is out of range for rank 3");
    assert_fails(f, nest_gather(f, d, i, 0), NEST_ERR_TYPE, "a scalar has no axis to take along");
    int64_t big[32] = {0};
    for (int j = 0; j < 32; j++)
        big[j] = 1;
    nest_value wide = param(f, "wide", NEST_I32, 32, big);
    assert_fails(f, nest_gather(f, t, wide, 0), NEST_ERR_LIMIT, "result rank 34 exceeds 32");
    /* scatter_add: the updates have gather's result shape */
    nest_value u = param(f, "u", NEST_F64, 4, SHAPE(5, 2, 6, 2));
    assert_tensor(f, nest_scatter_add(f, t, i, u, 1), NEST_F64, 3, SHAPE(5, 7, 2));
    assert_tensor(f, nest_scatter_add(f, e, nest_constant(f, NEST_I32, 1, SHAPE(0), NULL, 0),
                                      nest_constant(f, NEST_I64, 2, SHAPE(0, 5), NULL, 0), 0),
                  NEST_I64, 2, SHAPE(0, 5));
    assert_fails(f, nest_scatter_add(f, t, i, u, 0), NEST_ERR_TYPE,
                 "scatter_add(t: f64[5,7,2], i: i32[2,6], u: f64[5,2,6,2]): the updates must have "
                 "shape [2,6,7,2] (the operand's with axis 0 replaced by the indices' shape)");
    assert_fails(f, nest_scatter_add(f, t, u, u, 1), NEST_ERR_TYPE,
                 "the indices must be i32 or i64, not f64");
    assert_fails(f, nest_scatter_add(f, t, i, nest_convert(f, u, NEST_F32), 1), NEST_ERR_TYPE,
                 "the updates are f32 but the operand is f64");
    assert_fails(f, nest_scatter_add(f, t, i, u, 3), NEST_ERR_TYPE, "axis 3 is out of range for rank 3");
    assert_fails(f, nest_scatter_add(f, d, i, u, 0), NEST_ERR_TYPE, "a scalar has no axis to add along");
    assert_fails(f, nest_scatter_add(f, e, k, nest_constant(f, NEST_I64, 2, SHAPE(3, 5), (int64_t[]){0}, 1), 0),
                 NEST_ERR_TYPE, "axis 0 is empty: there is no element to add to");
    assert_fails(f, nest_scatter_add(f, b, k, b, 0), NEST_ERR_TYPE,
                 "operand 1 must be f32, f64, i32 or i64, not bool");
}

static void test_model_softmax_batch_dot(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 3, SHAPE(2, 3, 4));
    nest_value i = param(f, "i", NEST_I32, 2, SHAPE(2, 3));
    assert_tensor(f, nest_softmax(f, x, 1, SHAPE(2)), NEST_F32, 3, SHAPE(2, 3, 4));
    assert_tensor(f, nest_softmax(f, x, 2, SHAPE(0, 2)), NEST_F32, 3, SHAPE(2, 3, 4));
    assert_tensor(f, nest_softmax(f, x, 0, NULL), NEST_F32, 3, SHAPE(2, 3, 4));
    assert_fails(f, nest_softmax(f, x, 1, SHAPE(3)), NEST_ERR_TYPE,
                 "softmax(x: f32[2,3,4]): axis 3 is out of range for rank 3");
    assert_fails(f, nest_softmax(f, i, 1, SHAPE(1)), NEST_ERR_TYPE,
                 "softmax(i: i32[2,3]): operand 1 must be f32 or f64, not i32");
    /* batch_dot: numpy's matmul shapes */
    nest_value a = param(f, "a", NEST_F64, 3, SHAPE(3, 4, 5)), b = param(f, "b", NEST_F64, 3, SHAPE(3, 5, 6));
    nest_value w = param(f, "w", NEST_F64, 2, SHAPE(5, 6)), v = param(f, "v", NEST_F64, 1, SHAPE(5));
    nest_value u = param(f, "u", NEST_F64, 1, SHAPE(4));
    nest_value c = param(f, "c", NEST_F64, 4, SHAPE(2, 1, 5, 7)), s = param(f, "s", NEST_F64, 0, NULL);
    assert_tensor(f, nest_batch_dot(f, a, b), NEST_F64, 3, SHAPE(3, 4, 6));
    assert_tensor(f, nest_batch_dot(f, a, w), NEST_F64, 3, SHAPE(3, 4, 6));
    assert_tensor(f, nest_batch_dot(f, a, v), NEST_F64, 2, SHAPE(3, 4));
    assert_tensor(f, nest_batch_dot(f, v, b), NEST_F64, 2, SHAPE(3, 6));
    assert_tensor(f, nest_batch_dot(f, v, v), NEST_F64, 0, NULL);
    assert_tensor(f, nest_batch_dot(f, u, a), NEST_F64, 2, SHAPE(3, 5));
    assert_tensor(f, nest_batch_dot(f, a, c), NEST_F64, 4, SHAPE(2, 3, 4, 7));
    assert_fails(f, nest_batch_dot(f, b, a), NEST_ERR_TYPE,
                 "batch_dot(b: f64[3,5,6], a: f64[3,4,5]): the last axis of the first operand (6) "
                 "differs from the second-to-last axis of the second (4)");
    assert_fails(f, nest_batch_dot(f, a, u), NEST_ERR_TYPE,
                 "the last axis of the first operand (5) differs from the only axis of the second (4)");
    nest_value d = param(f, "d", NEST_F64, 3, SHAPE(2, 5, 6));
    assert_fails(f, nest_batch_dot(f, a, d), NEST_ERR_TYPE,
                 "batch axes do not broadcast: 3 against 2 (axis 0 of the result)");
    assert_fails(f, nest_batch_dot(f, a, s), NEST_ERR_TYPE, "operand 2 is a scalar");
    assert_fails(f, nest_batch_dot(f, x, w), NEST_ERR_TYPE, "operand element types differ");
    nest_value bb = param(f, "bb", NEST_BOOL, 2, SHAPE(2, 2));
    assert_fails(f, nest_batch_dot(f, bb, bb), NEST_ERR_TYPE, "must be f32, f64, i32 or i64, not bool");
}

static void test_model_topk(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(3, 10));
    nest_value t = nest_topk(f, x, 4, 1, 1);
    assert_int_equal(nest_value_type(f, t), -1); /* a tuple */
    assert_tensor(f, nest_get(f, t, 0), NEST_F32, 2, SHAPE(3, 4));
    assert_tensor(f, nest_get(f, t, 1), NEST_I64, 2, SHAPE(3, 4));
    assert_fails(f, nest_get(f, t, 2), NEST_ERR_TYPE, "index 2 is out of range for a tuple of 2");
    nest_value u = nest_topk(f, x, 0, 0, 0);
    assert_tensor(f, nest_get(f, u, 1), NEST_I64, 2, SHAPE(0, 10));
    assert_tensor(f, nest_get(f, nest_topk(f, x, 3, 0, 0), 0), NEST_F32, 2, SHAPE(3, 10));
    assert_fails(f, nest_topk(f, x, 11, 1, 1), NEST_ERR_TYPE,
                 "topk(x: f32[3,10]): k = 11 is not within [0, 10], the extent of axis 1");
    assert_fails(f, nest_topk(f, x, -1, 1, 1), NEST_ERR_TYPE, "k = -1 is not within [0, 10]");
    assert_fails(f, nest_topk(f, x, 1, 2, 1), NEST_ERR_TYPE, "axis 2 is out of range for rank 2");
    nest_value s = param(f, "s", NEST_F64, 0, NULL), b = param(f, "b", NEST_BOOL, 1, SHAPE(4));
    assert_fails(f, nest_topk(f, s, 0, 0, 1), NEST_ERR_TYPE, "a scalar has no axis to search");
    assert_fails(f, nest_topk(f, b, 1, 0, 1), NEST_ERR_TYPE, "operand 1 must be f32, f64, i32 or i64");
    assert_int_equal(nest_topk(f, NEST_NONE, 1, 0, 1), NEST_NONE);
    /* it returns as two results */
    assert_ok(f, nest_return(f, 1, &t, NULL));
    assert_int_equal(nest_result_count(f), 2);
    /* and prints as one call that parses back */
    char *text = nest_print(&f, 1);
    assert_non_null(text);
    assert_non_null(strstr(text, " = topk(x, k=4, axis=1, largest=true)\n"));
    nest_module *m = tu_parse(text, "topk");
    nest_function *g = nest_module_function(m, 0);
    char *again = nest_print(&g, 1);
    assert_string_equal(text, again);
    nest_string_free(again);
    nest_module_free(m);
    nest_string_free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_str),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_null_handles),
        cmocka_unit_test(test_function_names),
        cmocka_unit_test(test_name_lengths),
        cmocka_unit_test_setup_teardown(test_parameter_names, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_set_name, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_parameter_shapes, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_constant, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_binary_arithmetic, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_unary, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_compare_select, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_convert, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_none_propagation, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_message_operands, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_large_tuples, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_dot, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_reshape, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_slice, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_concat, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_reductions, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_tuples, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_return, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_inspection, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_model_elementwise, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_model_reductions, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_model_structural, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_model_softmax_batch_dot, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(test_model_topk, fn_setup, fn_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
