/*
 * test_npy.c - driver/npy.c, the .npy reader and writer of `nestc run`.
 *
 * The reference files are bytes numpy 1.24 wrote (np.save, np.lib.format.write_array), pasted
 * here; the values are the arrays they were made from. Malformed files are each a small edit of
 * a valid one, and every prefix and every one-byte change of a valid file is read as well: each
 * gives an error with a message or an array, never a crash (ASan in make sanitize).
 */
#include "testutil.h"
#include "cli.h"

/* np.save(np.array([[1.5, -2], [3, 0.25]], dtype=np.float32)) */
static const char f32_file[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
    "                                                          \n"
    "\x00\x00\xc0?\x00\x00\x00\xc0\x00\x00@@\x00\x00\x80>";

/* np.save(np.array([1, -2, 3], dtype=np.int64)) */
static const char i64_file[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n"
    "\x01\x00\x00\x00\x00\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff\x03\x00\x00\x00\x00\x00\x00\x00";

/* np.save(np.array(True)) */
static const char bool_file[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'shape': (), }"
    "                                                              \n\x01";

/* np.lib.format.write_array(f, np.array([1, 2], dtype=np.int32), version=(2, 0)) and (3, 0) */
static const char i32_v2_file[] =
    "\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }"
    "                                                          \n\x01\x00\x00\x00\x02\x00\x00\x00";
static const char i32_v3_file[] =
    "\x93NUMPY\x03\x00t\x00\x00\x00{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }"
    "                                                          \n\x01\x00\x00\x00\x02\x00\x00\x00";

#define LEN(s) (sizeof(s) - 1)

static void parse_ok(const char *bytes, size_t len, npy_array *a)
{
    char err[512] = "";
    int rc = npy_parse(bytes, len, a, err, sizeof err);
    if (rc != 0)
        fail_msg("npy_parse: %s", err);
    assert_non_null(a->data);
}

/* The message of a file that must not parse, which must contain `part`. */
static void parse_fails(const char *bytes, size_t len, const char *part)
{
    npy_array a;
    char err[512] = "";
    int rc = npy_parse(bytes, len, &a, err, sizeof err);
    if (rc == 0) {
        npy_free(&a);
        fail_msg("npy_parse took a file that should fail with \"%s\"", part);
    }
    assert_null(a.data);
    if (!strstr(err, part))
        fail_msg("npy_parse: \"%s\" does not say \"%s\"", err, part);
}

/* A file with the given header text (padded as numpy pads it) and data. */
static char *make_file(const char *header, const void *data, size_t n, size_t *len)
{
    size_t h = strlen(header), total = (10 + h + 1 + 63) / 64 * 64;
    char *f = malloc(total + n + 1);
    assert_non_null(f);
    memcpy(f, "\x93NUMPY\x01\x00", 8);
    f[8] = (char)((total - 10) & 0xff);
    f[9] = (char)((total - 10) >> 8);
    memcpy(f + 10, header, h);
    memset(f + 10 + h, ' ', total - 10 - h);
    f[total - 1] = '\n';
    if (n)
        memcpy(f + total, data, n);
    *len = total + n;
    return f;
}

static void header_fails(const char *header, size_t ndata, const char *part)
{
    static const char zeros[64];
    size_t len;
    char *f = make_file(header, zeros, ndata, &len);
    parse_fails(f, len, part);
    free(f);
}

static void header_ok(const char *header, const void *data, size_t n, npy_array *a)
{
    size_t len;
    char *f = make_file(header, data, n, &len);
    parse_ok(f, len, a);
    free(f);
}

static void test_numpy_files(void **state)
{
    (void)state;
    npy_array a;
    parse_ok(f32_file, LEN(f32_file), &a);
    assert_int_equal(a.type, NEST_F32);
    assert_int_equal(a.rank, 2);
    assert_int_equal(a.shape[0], 2);
    assert_int_equal(a.shape[1], 2);
    assert_int_equal(a.count, 4);
    assert_exact(NEST_F32, a.data, ((const float[]){1.5f, -2, 3, 0.25f}), 4);
    assert_int_equal((uintptr_t)a.data % 64, 0);
    npy_free(&a);
    npy_free(&a); /* twice is harmless */

    parse_ok(i64_file, LEN(i64_file), &a);
    assert_int_equal(a.type, NEST_I64);
    assert_int_equal(a.rank, 1);
    assert_exact(NEST_I64, a.data, ((const int64_t[]){1, -2, 3}), 3);
    npy_free(&a);

    parse_ok(bool_file, LEN(bool_file), &a);
    assert_int_equal(a.type, NEST_BOOL);
    assert_int_equal(a.rank, 0);
    assert_int_equal(a.count, 1);
    assert_int_equal(((uint8_t *)a.data)[0], 1);
    npy_free(&a);

    parse_ok(i32_v2_file, LEN(i32_v2_file), &a);
    assert_exact(NEST_I32, a.data, ((const int32_t[]){1, 2}), 2);
    npy_free(&a);
    parse_ok(i32_v3_file, LEN(i32_v3_file), &a);
    assert_exact(NEST_I32, a.data, ((const int32_t[]){1, 2}), 2);
    npy_free(&a);
}

static void test_header_forms(void **state)
{
    (void)state;
    npy_array a;
    /* keys in any order, double quotes, no trailing comma, Python 2's long integers */
    const int32_t v[6] = {1, 2, 3, 4, 5, 6};
    header_ok("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i4\"}", v, sizeof v,
              &a);
    assert_int_equal(a.rank, 2);
    assert_int_equal(a.shape[1], 3);
    assert_exact(NEST_I32, a.data, v, 6);
    npy_free(&a);

    /* column-major data comes back row-major: [[1, 2, 3], [4, 5, 6]] stored as 1 4 2 5 3 6 */
    const int32_t colmajor[6] = {1, 4, 2, 5, 3, 6};
    header_ok("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", colmajor,
              sizeof colmajor, &a);
    assert_exact(NEST_I32, a.data, v, 6);
    npy_free(&a);

    /* three axes in Fortran order: element (i, j, k) at i + 2j + 4k */
    float c3[2 * 2 * 3], r3[2 * 2 * 3];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) {
                c3[i + 2 * j + 4 * k] = (float)(100 * i + 10 * j + k);
                r3[6 * i + 3 * j + k] = (float)(100 * i + 10 * j + k);
            }
    header_ok("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2, 3), }", c3, sizeof c3, &a);
    assert_exact(NEST_F32, a.data, r3, 12);
    npy_free(&a);

    /* big-endian data is swapped: 1.0 as a big-endian double */
    const unsigned char be[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
    header_ok("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", be, 8, &a);
    assert_int_equal(a.type, NEST_F64);
    assert_true(((double *)a.data)[0] == 1.0);
    npy_free(&a);
    const unsigned char be32[4] = {0xff, 0xff, 0xff, 0xfe};
    header_ok("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }", be32, 4, &a);
    assert_int_equal(((int32_t *)a.data)[0], -2);
    npy_free(&a);

    /* bool bytes other than 0 and 1 read as true */
    const unsigned char bools[3] = {0, 7, 1};
    header_ok("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3, &a);
    assert_memory_equal(a.data, ((const uint8_t[]){0, 1, 1}), 3);
    npy_free(&a);

    /* empty arrays, any axis 0 */
    header_ok("{'descr': '<f8', 'fortran_order': True, 'shape': (0, 3), }", NULL, 0, &a);
    assert_int_equal(a.count, 0);
    assert_int_equal(a.rank, 2);
    npy_free(&a);
}

static void test_malformed(void **state)
{
    (void)state;
    parse_fails("", 0, "not a .npy file");
    parse_fails("\x93NUMPZ\x01\x00\x00\x00", 10, "not a .npy file");
    parse_fails("PK\x03\x04 a zip archive of .npy files", LEN("PK\x03\x04 a zip archive of .npy files"),
                "not a .npy file");
    parse_fails("\x93NUMPY\x04\x00\x00\x00", 10, "version 4.0");
    parse_fails("\x93NUMPY\x01\x01\x00\x00", 10, "version 1.1");
    parse_fails("\x93NUMPY\x02\x00\x00", 9, "not a .npy file");
    parse_fails("\x93NUMPY\x02\x00\x00\x00", 10, "ends inside its header");
    parse_fails("\x93NUMPY\x01\x00\xff\x00{", 11, "ends inside its header");
    parse_fails("\x93NUMPY\x02\x00\x00\x00\x00\x01", 12, "more than");
    parse_fails(f32_file, LEN(f32_file) - 1, "truncated: its shape (2, 2) needs 16 bytes");
    parse_fails(i64_file, 100, "ends inside its header");

    char longer[sizeof f32_file + 3];
    memcpy(longer, f32_file, LEN(f32_file));
    memcpy(longer + LEN(f32_file), "abc", 3);
    parse_fails(longer, LEN(f32_file) + 3, "3 bytes after the data");

    header_fails("", 0, "not a dict");
    header_fails("[1, 2]", 0, "not a dict");
    header_fails("{'descr': '<f4', 'fortran_order': False}", 0, "no 'shape'");
    header_fails("{'descr': '<f4', 'shape': (1,)}", 4, "no 'fortran_order'");
    header_fails("{'fortran_order': False, 'shape': (1,)}", 4, "no 'descr'");
    header_fails("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4,
                 "'descr' twice");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", 4,
                 "unknown key 'extra'");
    header_fails("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", 4, "True or False");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", 8, "tuple");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", 8, "tuple");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", 8, "tuple");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", 24, "tuple");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8, "after its dict");
    header_fails("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", 8, "not one nest reads");
    header_fails("{'descr': 3, 'fortran_order': False, 'shape': (2,)}", 8, "not a string");
    header_fails("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}", 8, "not a string");

    /* dtypes nest has no type for: named as numpy names them */
    header_fails("{'descr': '<f2', 'fortran_order': False, 'shape': (1,)}", 2, "(float16)");
    header_fails("{'descr': '|u1', 'fortran_order': False, 'shape': (1,)}", 1, "(uint8)");
    header_fails("{'descr': '<i2', 'fortran_order': False, 'shape': (1,)}", 2, "(int16)");
    header_fails("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8, "(complex64)");
    header_fails("{'descr': '<U3', 'fortran_order': False, 'shape': (1,)}", 12, "unicode");
    header_fails("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", 8, "not one nest reads");
    header_fails("{'descr': '|O8', 'fortran_order': False, 'shape': (1,)}", 8, "Python objects");
    header_fails("{'descr': '|f4', 'fortran_order': False, 'shape': (1,)}", 4, "no byte order");
    header_fails("{'descr': 'float32', 'fortran_order': False, 'shape': (1,)}", 4,
                 "not one nest reads");
    header_fails("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4,
                 "structured");
    header_fails("{'descr': '\x01\xff', 'fortran_order': False, 'shape': (1,)}", 4,
                 "'\\x01\\xff'");

    /* sizes */
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,"
                 "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}", 4, "more than 32 axes");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4,
                 "too large");
    header_fails("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
                 0, "overflows");
    header_fails("{'descr': '<f8', 'fortran_order': False, 'shape': (2000000000000000000,)}",
                 0, "larger than memory");
    header_fails("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000,)}", 8,
                 "needs 8000000 bytes of data, it has 8");
}

/* Every prefix, and every byte changed to a few values, of each reference file: an array or a
 * message, never a crash (the sanitizers watch the reads). */
static void test_every_prefix_and_byte(void **state)
{
    (void)state;
    const struct { const char *p; size_t n; } files[] = {
        {f32_file, LEN(f32_file)}, {i64_file, LEN(i64_file)}, {bool_file, LEN(bool_file)},
        {i32_v2_file, LEN(i32_v2_file)}};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        for (size_t n = 0; n < files[f].n; n++) {
            char *copy = malloc(n + 1); /* exactly n bytes readable: ASan catches a read past */
            memcpy(copy, files[f].p, n);
            npy_array a;
            char err[256] = "";
            assert_int_equal(npy_parse(copy, n, &a, err, sizeof err), -1);
            assert_true(err[0] != '\0');
            free(copy);
        }
        char *copy = malloc(files[f].n);
        for (size_t i = 0; i < files[f].n; i++) {
            static const unsigned char vals[] = {0, '\'', ',', ')', '}', '9', 0xff};
            for (size_t v = 0; v < sizeof vals; v++) {
                memcpy(copy, files[f].p, files[f].n);
                copy[i] = (char)vals[v];
                npy_array a;
                char err[256] = "";
                if (npy_parse(copy, files[f].n, &a, err, sizeof err) == 0)
                    npy_free(&a);
                else
                    assert_true(err[0] != '\0');
            }
        }
        free(copy);
    }
}

static char tmpdir[64];

static int dir_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nest-npy-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int dir_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Written files read back with their types, shapes and values, and hold what numpy writes. */
static void test_write_read(void **state)
{
    (void)state;
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/a.npy", tmpdir);

    /* the bytes numpy writes for the same array */
    const float v[4] = {1.5f, -2, 3, 0.25f};
    assert_int_equal(npy_write(path, NEST_F32, 2, SHAPE(2, 2), v, false, err, sizeof err), 0);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    char got[256];
    size_t n = fread(got, 1, sizeof got, in);
    fclose(in);
    assert_int_equal(n, LEN(f32_file));
    assert_memory_equal(got, f32_file, n);

    /* every type, ranks 0 to 3, both orders */
    const nest_type types[] = {NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_BOOL};
    const int64_t shapes[4][3] = {{0}, {5}, {2, 3}, {2, 1, 3}};
    for (size_t t = 0; t < 5; t++)
        for (int rank = 0; rank < 4; rank++)
            for (int fortran = 0; fortran < 2; fortran++) {
                int64_t count = 1;
                for (int k = 0; k < rank; k++)
                    count *= shapes[rank][k];
                size_t size = nest_type_size(types[t]);
                unsigned char data[6 * 8];
                for (size_t i = 0; i < (size_t)count * size; i++)
                    data[i] = types[t] == NEST_BOOL ? (unsigned char)(i % 2)
                                                    : (unsigned char)(i * 37 + 11);
                assert_int_equal(npy_write(path, types[t], rank, shapes[rank], data, fortran != 0,
                                           err, sizeof err), 0);
                npy_array a;
                if (npy_read(path, &a, err, sizeof err) != 0)
                    fail_msg("npy_read: %s", err);
                assert_int_equal(a.type, types[t]);
                assert_int_equal(a.rank, rank);
                assert_int_equal(a.count, count);
                for (int k = 0; k < rank; k++)
                    assert_int_equal(a.shape[k], shapes[rank][k]);
                unsigned char want_rows[6 * 8];
                if (fortran && rank > 1)
                    npy_reorder(want_rows, data, size, rank, shapes[rank], false);
                else
                    memcpy(want_rows, data, (size_t)count * size);
                assert_memory_equal(a.data, want_rows, (size_t)count * size);
                npy_free(&a);
            }

    /* reading: a missing file, a directory, a pipe-like path, a file cut short */
    npy_array a;
    snprintf(path, sizeof path, "%s/missing.npy", tmpdir);
    assert_int_equal(npy_read(path, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(npy_read(tmpdir, &a, err, sizeof err), -1);
    snprintf(path, sizeof path, "%s/short.npy", tmpdir);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    fwrite(f32_file, 1, LEN(f32_file) - 5, out);
    fclose(out);
    assert_int_equal(npy_read(path, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "truncated"));
    assert_null(a.data);

    /* writing where it cannot: a message, no file */
    snprintf(path, sizeof path, "%s/no/such/dir.npy", tmpdir);
    assert_int_equal(npy_write(path, NEST_F32, 0, NULL, v, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot create"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numpy_files),
        cmocka_unit_test(test_header_forms),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_every_prefix_and_byte),
        cmocka_unit_test(test_write_read),
    };
    return cmocka_run_group_tests(tests, dir_setup, dir_teardown);
}
