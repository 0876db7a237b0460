/*
 * test_sizes.c - 64-bit sizes: shapes whose element count or byte size overflows are errors
 * that name the shape; graphs whose logical tensors exceed 2^31 elements (through broadcast
 * views) compile with 64-bit loops and run correctly, checked against closed forms (the
 * interpreter would materialize them); strides that would overflow are never taken; empty
 * tensors through the ops of real models give empty (or sum-of-nothing) results or an error.
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

/* Empty and zero-sized tensors through the ops of real models: each a correct result (empty,
 * or what a sum of nothing gives), compiled and called with guards around every result, equal
 * to the interpreter and to the closed form; or a clear error. */
static const char EMPTY_OPS[] =
    "func conv_no_channels(x: f32[2,0,5,5], w: f32[3,0,3,3]) -> f32[2,3,3,3] {\n"
    "  return convolution(x, w)\n}\n"
    "func conv_groups_no_channels(x: f32[1,0,5,5], w: f32[4,0,3,3]) -> f32[1,4,3,3] {\n"
    "  return convolution(x, w, groups=2)\n}\n"
    "func conv_no_filters(x: f32[2,2,5,5], w: f32[0,2,3,3]) -> f32[2,0,3,3] {\n"
    "  return convolution(x, w)\n}\n"
    "func conv_no_batch(x: f64[0,2,5,5], w: f64[4,2,3,3]) -> f64[0,4,2,3] {\n"
    "  return convolution(x, w, strides=[2,1])\n}\n"
    "func pools_no_batch(x: f32[0,3,5,5]) -> (f32[0,3,4,4], f32[0,3,3,3]) {\n"
    "  return max_pool(x, window=[2,2]), avg_pool(x, window=[2,2], strides=[2,2], "
    "pad_below=[1,1], pad_above=[1,1])\n}\n"
    "func gather_no_index(x: f32[4,3], i: i32[0]) -> f32[0,3] {\n"
    "  return gather(x, i, axis=0)\n}\n"
    "func gather_empty(x: f32[0,3], i: i64[2,0]) -> f32[2,0,3] {\n"
    "  return gather(x, i, axis=0)\n}\n"
    "func scatter_nothing(x: f32[4,3], i: i32[0], u: f32[0,3]) -> f32[4,3] {\n"
    "  return scatter_add(x, i, u, axis=0)\n}\n"
    "func pad_to_nothing(x: f32[4,3]) -> f32[0,0] {\n"
    "  return pad(x, constant(f32[], 2.5), below=[-2,0], above=[-2,-3])\n}\n"
    "func pad_of_nothing(x: f32[0,3]) -> f32[3,5] {\n"
    "  return pad(x, constant(f32[], 2.5), below=[2,0], above=[1,0], interior=[3,1])\n}\n"
    "func concat_empty(x: f32[0,3], y: f32[2,3], z: f32[0,3]) -> f32[2,3] {\n"
    "  return concat(x, y, z, axis=0)\n}\n"
    "func topk_none(x: f32[4,3], e: f32[0,3]) -> (f32[4,0], i64[4,0], f32[0,2], i64[0,2]) {\n"
    "  t = topk(x, k=0, axis=1, largest=true)\n"
    "  u = topk(e, k=2, axis=1, largest=false)\n"
    "  return get(t, 0), get(t, 1), get(u, 0), get(u, 1)\n}\n"
    "func batch_dot_empty(x: f32[2,3,0], w: f32[2,0,4], a: f32[0,3,5], b: f32[0,5,4]) -> "
    "(f32[2,3,4], f32[0,3,4]) {\n"
    "  return batch_dot(x, w), batch_dot(a, b)\n}\n"
    "func logic_empty(x: f32[2,0,5]) -> (bool[2,0,5], f32[2,0,5]) {\n"
    "  return or(less(x, x), not(greater_eq(x, x))), sigmoid(x)\n}\n";

static void empty_through_ops(void **state)
{
    (void)state;
    nest_module *m = tu_parse(EMPTY_OPS, "empty.nest");
    for (int fi = 0; fi < nest_module_count(m); fi++) {
        nest_function *f = nest_module_function(m, fi);
        int np = nest_param_count(f), nr = nest_result_count(f);
        void *args[4], *want[4], *got[4];
        int64_t nres[4];
        for (int p = 0; p < np; p++) {
            nest_value v = nest_param(f, p);
            int64_t n = 1;
            for (int k = 0; k < nest_value_rank(f, v); k++)
                n *= nest_value_shape(f, v)[k];
            int t = nest_value_type(f, v);
            args[p] = calloc((size_t)n + 1, 8);
            for (int64_t i = 0; i < n; i++) { /* the indexes are all empty */
                double x = (double)((7 * i + 3 * p) % 11 - 5) / 8;
                if (t == NEST_F32)
                    ((float *)args[p])[i] = (float)x;
                else
                    ((double *)args[p])[i] = x;
            }
        }
        for (int r = 0; r < nr; r++) {
            nest_value v = nest_result(f, r);
            nres[r] = 1;
            for (int k = 0; k < nest_value_rank(f, v); k++)
                nres[r] *= nest_value_shape(f, v)[k];
            want[r] = malloc((size_t)nres[r] * 8 + 8);
            got[r] = malloc((size_t)nres[r] * 8 + 8);
            memset(want[r], 0x5a, (size_t)nres[r] * 8 + 8);
            memset(got[r], 0x5a, (size_t)nres[r] * 8 + 8);
        }
        assert_ok(f, nest_evaluate(f, args, np, want, nr));
        nest_kernel *k = nest_compile(f, NULL);
        if (!k)
            fail_msg("%s: %s", nest_function_name(f), nest_errmsg(f));
        assert_int_equal(nest_call(k, args, np, got, nr), NEST_OK);
        for (int r = 0; r < nr; r++) {
            nest_type t = (nest_type)nest_value_type(f, nest_result(f, r));
            size_t bytes = (size_t)nres[r] * nest_type_size(t);
            assert_memory_equal(got[r], want[r], bytes);
            for (size_t b = bytes; b < (size_t)nres[r] * 8 + 8; b++) /* the guard */
                assert_int_equal(((unsigned char *)got[r])[b], 0x5a);
            /* the closed forms of the results that are not empty */
            const char *name = nest_function_name(f);
            for (int64_t i = 0; i < nres[r]; i++) {
                double v = tu_float(t, got[r], i);
                if (strncmp(name, "conv", 4) == 0 || strcmp(name, "batch_dot_empty") == 0)
                    assert_true(v == 0); /* a sum of nothing */
                else if (strcmp(name, "scatter_nothing") == 0)
                    assert_true(v == tu_float(t, args[0], i));
                else if (strcmp(name, "pad_of_nothing") == 0)
                    assert_true(v == 2.5);
                else if (strcmp(name, "concat_empty") == 0)
                    assert_true(v == tu_float(t, args[1], i));
            }
        }
        nest_kernel_free(k);
        for (int p = 0; p < np; p++)
            free(args[p]);
        for (int r = 0; r < nr; r++)
            free(want[r]), free(got[r]);
    }
    nest_module_free(m);

    /* what has no result is an error naming the op */
    nest_function *f = nest_function_new("bad");
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(4, 3), NEST_ROW_MAJOR);
    nest_value e = nest_parameter(f, "e", NEST_F32, 2, SHAPE(0, 3), NEST_ROW_MAJOR);
    nest_value i = nest_parameter(f, "i", NEST_I64, 1, SHAPE(2), NEST_ROW_MAJOR);
    nest_value c = nest_constant(f, NEST_F32, 0, NULL, (const float[]){0}, 1);
    assert_int_equal(nest_concat(f, 0, NULL, 0), NEST_NONE);
    assert_error(f, NEST_ERR_ARG, "concat: needs at least one operand");
    assert_int_equal(nest_gather(f, e, i, 0), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "gather(e: f32[0,3], i: i64[2]): axis 0 is empty");
    assert_int_equal(nest_pad(f, x, c, SHAPE(-3, 0), SHAPE(-3, 0), NULL), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "axis 0: below -3 and above -3 leave -2 elements of 4");
    assert_int_equal(nest_topk(f, e, 4, 1, 1), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "k = 4 is not within [0, 3], the extent of axis 1");
    int64_t w1[2] = {1, 1};
    nest_value x4 = nest_parameter(f, "x4", NEST_F32, 4, SHAPE(1, 1, 0, 2), NEST_ROW_MAJOR);
    assert_int_equal(nest_max_pool(f, x4, w1, NULL, NULL, NULL), NEST_NONE);
    assert_error(f, NEST_ERR_TYPE, "spatial axis 0 is empty");
    nest_function_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(overflowing_shapes, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(broadcast_beyond_2_31, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(slice_stride_never_taken, fn_setup, fn_teardown),
        cmocka_unit_test(onnx_reshape_overflow),
        cmocka_unit_test(empty_through_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
