/*
 * test_sizes.c - 64-bit sizes: shapes whose element count or byte size overflows are errors
 * that name the shape; graphs whose logical tensors exceed 2^31 elements (through broadcast
 * views) compile with 64-bit loops and run correctly, checked against closed forms (the
 * interpreter would materialize them); strides that would overflow are never taken.
 */
#include "testutil.h"

#define BIG ((int64_t)1 << 40)

/* The element count overflows int64, or the byte size passes the limit: an error naming the
 * shape, from every builder that makes a shape. */
static void overflowing_shapes(void **state)
{
    nest_function *f = *state;
    nest_value p = nest_parameter(f, "x", NEST_F32, 2, SHAPE(BIG, BIG), NEST_ROW_MAJOR);
    assert_int_equal(p, NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "[1099511627776,1099511627776]");
    nest_clear_error(f);
    /* 2^60 f32 elements: the count fits in 64 bits, the bytes reach the limit of 2^62 */
    p = nest_parameter(f, "x", NEST_F32, 2, SHAPE((int64_t)1 << 30, (int64_t)1 << 30),
                       NEST_ROW_MAJOR);
    assert_int_equal(p, NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "[1073741824,1073741824]");
    nest_clear_error(f);
    /* 2^62 elements: the bytes overflow 64 bits */
    p = nest_parameter(f, "x", NEST_F32, 3, SHAPE((int64_t)1 << 30, (int64_t)1 << 30, 4),
                       NEST_ROW_MAJOR);
    assert_int_equal(p, NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "[1073741824,1073741824,4]");
    nest_clear_error(f);
    nest_value v = nest_parameter(f, "v", NEST_F64, 1, SHAPE(8), NEST_ROW_MAJOR);
    assert_value(f, v);
    nest_value b = nest_broadcast(f, v, 4, SHAPE(BIG, BIG, BIG, 8), 3, SHAPE(0, 1, 2));
    assert_int_equal(b, NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "[1099511627776,1099511627776,1099511627776,8]");
    nest_clear_error(f);
    static const double one = 1;
    nest_value c = nest_constant(f, NEST_F64, 2, SHAPE(INT64_MAX, 2), &one, 1);
    assert_int_equal(c, NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "[9223372036854775807,2]");
    nest_clear_error(f);
    nest_value r = nest_reshape(f, v, NULL, 3, SHAPE(BIG, BIG, 0));
    /* the limit is on the product of the non-zero dims, so that the strides of an empty tensor
     * fit too */
    assert_int_equal(r, NEST_NONE);
    assert_error(f, NEST_ERR_LIMIT, "[1099511627776,1099511627776,0]");
    nest_clear_error(f);
    /* the largest tensor: just under 2^62 bytes is accepted */
    p = nest_parameter(f, "y", NEST_I64, 2, SHAPE((int64_t)1 << 29, ((int64_t)1 << 30) - 1),
                       NEST_ROW_MAJOR);
    assert_value(f, p);
    /* a concat whose axis overflows when summed */
    nest_value h = nest_parameter(f, "h", NEST_I64, 2, SHAPE(INT64_MAX / 2 / 8, 0), NEST_ROW_MAJOR);
    assert_value(f, h);
    nest_value hh = nest_concat(f, 3, VALUES(h, h, h), 0);
    assert_int_equal(hh, NEST_NONE);
    assert_int_equal(nest_errcode(f), NEST_ERR_LIMIT);
}

/* Sums over [65537, 32769] (2^31 + 98305 elements) of two broadcast vectors, the whole and by
 * rows: 64-bit loops, exact values (small integers in f64), compared with closed forms. */
static void broadcast_beyond_2_31(void **state)
{
    nest_function *f = *state;
    enum { R = 65537, C = 32769 };
    nest_value x = nest_parameter(f, "x", NEST_F64, 1, SHAPE(C), NEST_ROW_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F64, 1, SHAPE(R), NEST_ROW_MAJOR);
    nest_value a = nest_broadcast(f, x, 2, SHAPE(R, C), 1, SHAPE(0));
    nest_value b = nest_broadcast(f, y, 2, SHAPE(R, C), 1, SHAPE(1));
    nest_value s = nest_add(f, a, b);
    nest_value total = nest_sum(f, s, 2, SHAPE(0, 1));
    nest_value rows = nest_sum(f, s, 1, SHAPE(1));
    assert_ok(f, nest_return(f, 2, VALUES(total, rows), NULL));
    assert_true((int64_t)R * C > ((int64_t)1 << 31));

    char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    assert_non_null(c);
    /* the loops over the big axes count in 64 bits */
    assert_non_null(strstr(c, "for (int64_t i0 = 0; i0 < 65537; i0++)"));
    assert_null(strstr(c, "for (int i0"));
    assert_null(strstr(c, "for (int i1"));
    free(c);

    double *xs = malloc(C * sizeof *xs), *ys = malloc(R * sizeof *ys), *got_rows = malloc(R * 8);
    assert_true(xs && ys && got_rows);
    double sx = 0, sy = 0;
    for (int i = 0; i < C; i++)
        sx += xs[i] = (double)(i % 7) - 3;
    for (int i = 0; i < R; i++)
        sy += ys[i] = (double)(i % 5);
    double got_total = -1;
    nest_kernel *k = nest_compile(f, NULL);
    if (!k && nest_errcode(f) == NEST_ERR_UNAVAILABLE)
        skip();
    assert_non_null(k);
    void *args[2] = {xs, ys}, *res[2] = {&got_total, got_rows};
    assert_int_equal(nest_call(k, args, 2, res, 2), NEST_OK);
    /* every partial sum is an integer below 2^53: exact in any order */
    assert_true(got_total == (double)R * sx + (double)C * sy);
    for (int i = 0; i < R; i++)
        if (got_rows[i] != sx + (double)C * ys[i])
            fail_msg("row %d: %.17g, want %.17g", i, got_rows[i], sx + (double)C * ys[i]);
    nest_kernel_free(k);
    free(xs), free(ys), free(got_rows);
}

/* A slice stride of 2^63 - 1 is valid (one element per axis): the views and the interpreter never
 * multiply it into a stride (they overflowed; found by fuzz_build). */
static void slice_stride_never_taken(void **state)
{
    nest_function *f = *state;
    nest_value x = nest_parameter(f, "x", NEST_I32, 2, SHAPE(3, 5), NEST_ROW_MAJOR);
    nest_value s = nest_slice(f, x, SHAPE(1, 2), SHAPE(3, 5), SHAPE(INT64_MAX, INT64_MAX));
    assert_value(f, s);
    assert_int_equal(nest_value_shape(f, s)[0], 1);
    nest_value t = nest_slice(f, x, SHAPE(0, 1), SHAPE(3, 5), SHAPE(2, INT64_MAX));
    assert_value(f, t);
    assert_ok(f, nest_return(f, 2, VALUES(s, t), NULL));
    int32_t xs[15], want_s[1] = {7}, want_t[2] = {1, 11}, got_s[1], got_t[2];
    for (int i = 0; i < 15; i++)
        xs[i] = i;
    void *args[1] = {xs}, *res[2] = {got_s, got_t};
    assert_ok(f, nest_evaluate(f, args, 1, res, 2));
    assert_exact(NEST_I32, got_s, want_s, 1);
    assert_exact(NEST_I32, got_t, want_t, 2);
    nest_kernel *k = nest_compile(f, NULL);
    if (!k && nest_errcode(f) == NEST_ERR_UNAVAILABLE)
        skip();
    assert_non_null(k);
    memset(got_s, 0, sizeof got_s), memset(got_t, 0, sizeof got_t);
    assert_int_equal(nest_call(k, args, 1, res, 2), NEST_OK);
    assert_exact(NEST_I32, got_s, want_s, 1);
    assert_exact(NEST_I32, got_t, want_t, 2);
    nest_kernel_free(k);
}

/* An ONNX Reshape whose target shape's element count overflows int64 is an error, not an
 * overflow (found by fuzz_onnx; the file is its crashing input). */
static void onnx_reshape_overflow(void **state)
{
    (void)state;
    nest_function *f = nest_import_onnx("tests/corpus/onnx/crash-reshape-overflow.onnx", NULL);
    assert_non_null(f);
    assert_error(f, NEST_ERR_LIMIT, "element count overflows");
    nest_function_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(overflowing_shapes, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(broadcast_beyond_2_31, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(slice_stride_never_taken, fn_setup, fn_teardown),
        cmocka_unit_test(onnx_reshape_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
