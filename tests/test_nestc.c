/*
 * test_nestc.c - the command line nestc: emitting, errors with their positions, usage errors,
 * --version, and `nestc run` on .npy inputs (its values checked against closed forms).
 * The tests run the nestc that $NESTC names (bin/nestc by default).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"
#include "cli.h"

/* The number of lines of s that contain `part` but not `not` (NULL: any). */
static int count_lines(const char *s, const char *part, const char *not)
{
    int n = 0;
    for (const char *line = s; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *tmp = strndup(line, len);
        assert_non_null(tmp);
        n += strstr(tmp, part) && (!not || !strstr(tmp, not));
        free(tmp);
        line = end ? end + 1 : NULL;
    }
    return n;
}

static char tmpdir[64];

static int cli_setup(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/nest_test_nestc_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int cli_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const char *text, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(text, 1, len, out), len);
    assert_int_equal(fclose(out), 0);
}

static char *read_file(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    char *s = tu_read_all(in);
    fclose(in);
    return s;
}

/* Runs nestc with `args` (a shell fragment; D in it stands for the temporary directory) and
 * the standard input `in`; returns the exit status, stdout and stderr. */
static int run_nestc(const char *args, const char *in, char **out, char **err)
{
    write_file("in", in ? in : "", in ? strlen(in) : 0);
    buf cmd = {0};
    buf_printf(&cmd, "%s ", tu_nestc());
    for (const char *p = args; *p; p++) {
        if (*p == 'D' && (p == args || p[-1] == ' ' || p[-1] == '=') && p[1] == '/')
            buf_puts(&cmd, tmpdir);
        else
            buf_putc(&cmd, *p);
    }
    buf_printf(&cmd, " <%s/in >%s/out 2>%s/err", tmpdir, tmpdir, tmpdir);
    char *c = buf_finish(&cmd);
    assert_non_null(c);
    int st = system(c);
    free(c);
    *out = read_file("out");
    *err = read_file("err");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char good_nest[] =
    "# two functions\n"
    "func l2(x: f32[3], y: f32[3]) -> f32[] {\n"
    "  return dot(subtract(x, y), subtract(x, y))\n"
    "}\n"
    "func id(x: i32[2] col) -> i32[2] col {\n"
    "  return x\n"
    "}\n";

static const char bad_nest[] =
    "func f(x: f32[4]) -> f32[4] {\n"
    "  z = frob(x)\n"
    "  return x\n"
    "}\n";

static void test_cli_emit(void **state)
{
    (void)state;
    write_file("good.nest", good_nest, strlen(good_nest));
    char *out, *err;
    assert_int_equal(run_nestc("--emit=ir D/good.nest", NULL, &out, &err), 0);
    nest_module *m = nest_parse(good_nest, strlen(good_nest), "good.nest");
    assert_non_null(m);
    char *want = nest_print(m->fns, m->nfns);
    nest_module_free(m);
    assert_non_null(want);
    assert_string_equal(out, want);
    assert_string_equal(err, "");
    free(out);
    free(err);

    /* the canonical text through standard input parses to itself */
    assert_int_equal(run_nestc("--emit=ir -", want, &out, &err), 0);
    assert_string_equal(out, want);
    free(out);
    free(err);
    free(want);

    assert_int_equal(run_nestc("--emit=dot D/good.nest", NULL, &out, &err), 0);
    assert_int_equal(strncmp(out, "digraph ", 8), 0);
    /* node statements: x, y, two subtracts and the dot; x; the two results */
    assert_int_equal(count_lines(out, " [label=\"", " -> "), 2 + 3 + 1 + 2);
    free(out);
    free(err);

    assert_int_equal(run_nestc("--help", NULL, &out, &err), 0);
    assert_non_null(strstr(out, "usage: nestc"));
    assert_non_null(strstr(out, "--emit"));
    free(out);
    free(err);
}

static void test_cli_input_errors(void **state)
{
    (void)state;
    write_file("bad.nest", bad_nest, strlen(bad_nest));
    char *out, *err;
    assert_int_equal(run_nestc("--emit=ir D/bad.nest", NULL, &out, &err), 1);
    assert_string_equal(out, "");
    /* the message, the source line, a caret under column 7 */
    char want[256];
    snprintf(want, sizeof want, "%s/bad.nest:2:7: error: unknown op 'frob'\n", tmpdir);
    assert_int_equal(strncmp(err, want, strlen(want)), 0);
    const char *line2 = err + strlen(want);
    const char *line3 = strchr(line2, '\n');
    assert_non_null(line3);
    line3++;
    const char *src_at = strstr(line2, "  z = frob(x)");
    assert_true(src_at && src_at < line3);
    const char *caret = strchr(line3, '^');
    assert_non_null(caret);
    /* the caret is under the 'f' of frob, the 7th column of the source line */
    assert_int_equal(caret - line3, (src_at + 6) - line2);
    for (const char *p = line3; p < caret; p++)
        assert_true(*p == ' ' || *p == '|');
    assert_string_equal(caret, "^\n");
    free(out);
    free(err);

    /* from standard input the file is <stdin> */
    assert_int_equal(run_nestc("--emit=ir -", bad_nest, &out, &err), 1);
    assert_int_equal(strncmp(err, "<stdin>:2:7: error: unknown op 'frob'\n", 38), 0);
    free(out);
    free(err);

    /* invalid UTF-8: reported, and the line shown without the raw bytes */
    static const char utf8[] = "func f() -> () {\n  return \xff\n}\n";
    write_file("utf8.nest", utf8, sizeof utf8 - 1);
    assert_int_equal(run_nestc("--emit=dot D/utf8.nest", NULL, &out, &err), 1);
    assert_non_null(strstr(err, "utf8.nest:2:10: error: invalid UTF-8 byte 0xff\n"));
    assert_null(strchr(err, '\xff'));
    free(out);
    free(err);

    /* a file that cannot be read */
    assert_int_equal(run_nestc("--emit=ir D/missing.nest", NULL, &out, &err), 1);
    assert_non_null(strstr(err, "missing.nest"));
    free(out);
    free(err);

    /* --run of a function that is not in the file is a usage error */
    write_file("good.nest", good_nest, strlen(good_nest));
    assert_int_equal(run_nestc("--run=nope D/good.nest", NULL, &out, &err), 2);
    free(out);
    free(err);
}

static void test_cli_usage(void **state)
{
    (void)state;
    write_file("good.nest", good_nest, strlen(good_nest));
    static const char *const bad[] = {
        "--frobnicate D/good.nest",        /* unknown option */
        "--emit=ir",                       /* no file */
        "",                                /* nothing at all */
        "--emit=ir D/good.nest D/good.nest", /* two files */
        "--emit=xml D/good.nest",          /* unknown form */
        "--emit= D/good.nest",             /* empty form */
        "D/good.nest",                     /* nothing to do */
        "--emit=ir -o",                    /* -o without its file */
    };
    for (size_t i = 0; i < countof(bad); i++) {
        char *out, *err;
        int st = run_nestc(bad[i], NULL, &out, &err);
        if (st != 2)
            fail_msg("nestc %s: exit %d, want 2 (stderr: %s)", bad[i], st, err);
        assert_non_null(strstr(err, "nestc: "));
        assert_string_equal(out, "");
        free(out);
        free(err);
    }
}

static void test_cli_run(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_nestc("--run samples/l2.nest", NULL, &out, &err), 0);
    static const char head[] = "l2 result 0: f32[] = [";
    assert_int_equal(strncmp(out, head, strlen(head)), 0);
    /* x[i] = ((7i mod 11) - 5) / 8 and y[i] = (((7i + 3) mod 11) - 5) / 8: over each 11
     * elements x - y is -3/8 eight times and 8/8 three times, a sum of squares of 264 / 64;
     * 1048576 = 11 * 95325 + 1 and the last element adds 9 / 64. */
    double want = (95325.0 * 264 + 9) / 64;
    double got = strtod(out + strlen(head), NULL);
    assert_true(fabs(got - want) <= 1e-5 * want);
    free(out);
    free(err);
}


/* ---- --version ---- */

static void test_cli_version(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_nestc("--version", NULL, &out, &err), 0);
    char want[64];
    snprintf(want, sizeof want, "nestc %d.%d.%d\n", NEST_VERSION_MAJOR, NEST_VERSION_MINOR,
             NEST_VERSION_PATCH);
    assert_int_equal(strncmp(out, want, strlen(want)), 0);
    assert_string_equal(nest_version(), NEST_VERSION);
    /* the LLVM the JIT library was built with, as llvm-config reports it */
    FILE *p = popen("/usr/lib/llvm-14/bin/llvm-config --version 2>/dev/null", "r");
    char llvm[64] = "";
    if (p) {
        if (!fgets(llvm, sizeof llvm, p))
            llvm[0] = '\0';
        pclose(p);
    }
    llvm[strcspn(llvm, "\n")] = '\0';
    if (llvm[0]) {
        char line[96];
        snprintf(line, sizeof line, "\nLLVM %s ", llvm);
        if (!strstr(out, line))
            fail_msg("nestc --version says \"%s\", llvm-config says %s", out, llvm);
        assert_string_equal(nest_llvm_version(), llvm);
    }
    free(out);
    free(err);
}

/* ---- nestc run ---- */

static void write_npy(const char *name, nest_type t, int rank, const int64_t *shape,
                      const void *data)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    if (npy_write(path, t, rank, shape, data, false, err, sizeof err) != 0)
        fail_msg("npy_write %s: %s", path, err);
}

static npy_array read_npy(const char *name)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    npy_array a;
    if (npy_read(path, &a, err, sizeof err) != 0)
        fail_msg("npy_read %s: %s", path, err);
    return a;
}

static const char run_nest[] =
    "func l2(x: f32[3], y: f32[3]) -> f32[] {\n"
    "  return dot(subtract(x, y), subtract(x, y))\n"
    "}\n"
    "func tr(a: i32[2,3] col) -> (i32[2,3], i32[2,3] col, i64[3], bool[2,3]) {\n"
    "  s = sum(convert(a, type=i64), axes=[0])\n"
    "  return a, a, s, greater(a, broadcast(constant(i32[], 2), shape=[2,3], axes=[0,1]))\n"
    "}\n"
    "func big(v: f64[1000]) -> f64[] {\n"
    "  return sum(v, axes=[0])\n"
    "}\n";

static void test_run_values(void **state)
{
    (void)state;
    write_file("run.nest", run_nest, strlen(run_nest));
    write_npy("x.npy", NEST_F32, 1, SHAPE(3), (const float[]){1, 2, 3});
    write_npy("y.npy", NEST_F32, 1, SHAPE(3), (const float[]){0.5f, 0.5f, 0.5f});
    char *out, *err;
    /* 0.5^2 + 1.5^2 + 2.5^2 */
    int st = run_nestc("run D/run.nest --func l2 --in x=D/x.npy --in=y=D/y.npy --out D/res "
                       "--check", NULL, &out, &err);
    if (st != 0)
        fail_msg("nestc run: exit %d: %s", st, err);
    assert_non_null(strstr(out, "l2.0: f32[] = 8.75\n"));
    assert_non_null(strstr(out, "check: l2.0 matches the reference interpreter"));
    npy_array a = read_npy("res/l2.0.npy");
    assert_int_equal(a.type, NEST_F32);
    assert_int_equal(a.rank, 0);
    assert_true(((float *)a.data)[0] == 8.75f);
    npy_free(&a);
    free(out);
    free(err);

    /* a column-major parameter and result: the .npy files are row-major (or say they are
     * not), so [[1, 2, 3], [4, 5, 6]] comes back as it went in */
    write_npy("a.npy", NEST_I32, 2, SHAPE(2, 3), (const int32_t[]){1, 2, 3, 4, 5, 6});
    st = run_nestc("run D/run.nest --func=tr --in a=D/a.npy --out=D/res/sub", NULL, &out, &err);
    if (st != 0)
        fail_msg("nestc run: exit %d: %s", st, err);
    assert_non_null(strstr(out, "tr.0: i32[2,3]  min 1  max 6  mean 3.5\n  [1, 2, 3, 4, 5, 6]\n"));
    assert_non_null(strstr(out, "tr.1: i32[2,3] col  min 1  max 6  mean 3.5\n  [1, 2, 3, 4, 5, 6]\n"));
    assert_non_null(strstr(out, "tr.2: i64[3]  min 5  max 9  mean 7\n  [5, 7, 9]\n"));
    assert_non_null(strstr(out, "tr.3: bool[2,3]  true 4 of 6\n  [false, false, true, true, true, true]\n"));
    const int32_t rows[6] = {1, 2, 3, 4, 5, 6};
    for (int r = 0; r < 2; r++) {
        char name[32];
        snprintf(name, sizeof name, "res/sub/tr.%d.npy", r);
        a = read_npy(name);
        assert_int_equal(a.type, NEST_I32);
        assert_int_equal(a.rank, 2);
        assert_int_equal(a.shape[0], 2);
        assert_int_equal(a.shape[1], 3);
        assert_exact(NEST_I32, a.data, rows, 6);
        npy_free(&a);
    }
    a = read_npy("res/sub/tr.3.npy");
    assert_int_equal(a.type, NEST_BOOL);
    assert_memory_equal(a.data, ((const uint8_t[]){0, 0, 1, 1, 1, 1}), 6);
    npy_free(&a);
    free(out);
    free(err);

    /* the interpreter instead of the compiler; random inputs; timing */
    st = run_nestc("run D/run.nest --func tr --random --seed=7 --interp --time=5", NULL, &out,
                   &err);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "time: the reference interpreter; call "));
    assert_non_null(strstr(out, " of 5 calls"));
    free(out);
    free(err);
    st = run_nestc("run D/run.nest --func big --random --time --check -v", NULL, &out, &err);
    if (st != 0)
        fail_msg("nestc run: exit %d: %s", st, err);
    assert_non_null(strstr(out, "time: compile "));
    assert_non_null(strstr(out, " median, "));
    assert_non_null(strstr(out, "check: big.0 matches"));
    assert_non_null(strstr(err, "nestc: v: f64[1000], random\n"));
    free(out);
    free(err);

    /* the same seed gives the same values, another seed others */
    char *o1, *o2, *o3;
    assert_int_equal(run_nestc("run D/run.nest --func big --random --seed=3", NULL, &o1, &err), 0);
    free(err);
    assert_int_equal(run_nestc("run D/run.nest --func big --random --seed=3", NULL, &o2, &err), 0);
    free(err);
    assert_int_equal(run_nestc("run D/run.nest --func big --random --seed=4", NULL, &o3, &err), 0);
    free(err);
    assert_string_equal(o1, o2);
    assert_string_not_equal(o1, o3);
    free(o1);
    free(o2);
    free(o3);
}

/* --check reports a difference beyond its tolerance and fails. The f32 sum of 2^20 tenths is
 * rounded at every step in the compiled code and once, from a double, in the interpreter: a
 * tolerance of 0 holds only when they agree to the last bit, and the exit status says which. */
static void test_run_check_tolerance(void **state)
{
    (void)state;
    static const char sum_nest[] = "func s(v: f32[1048576]) -> f32[] {\n"
                                   "  return sum(v, axes=[0])\n}\n";
    write_file("sum.nest", sum_nest, strlen(sum_nest));
    float *v = malloc((1 << 20) * sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < 1 << 20; i++)
        v[i] = 0.1f;
    write_npy("tenths.npy", NEST_F32, 1, SHAPE(1 << 20), v);
    free(v);
    char *out, *err;
    int st = run_nestc("run D/sum.nest --in v=D/tenths.npy --check=0", NULL, &out, &err);
    if (strstr(out, "DIFFERS")) {
        assert_int_equal(st, 1);
        assert_non_null(strstr(out, "check: s.0 DIFFERS from the reference interpreter at "
                                    "element 0 (in memory order): "));
        assert_non_null(strstr(out, "tolerance 0)"));
    } else {
        assert_int_equal(st, 0);
        assert_non_null(strstr(out, "(largest difference 0, tolerance 0)"));
    }
    free(out);
    free(err);
    assert_int_equal(run_nestc("run D/sum.nest --in v=D/tenths.npy --check=0.01", NULL, &out,
                               &err), 0);
    free(out);
    free(err);
}

static void test_run_errors(void **state)
{
    (void)state;
    write_file("run.nest", run_nest, strlen(run_nest));
    write_npy("x.npy", NEST_F32, 1, SHAPE(3), (const float[]){1, 2, 3});
    write_npy("x64.npy", NEST_F64, 1, SHAPE(3), (const double[]){1, 2, 3});
    write_npy("x4.npy", NEST_F32, 2, SHAPE(1, 3), (const float[]){1, 2, 3});
    write_file("junk.npy", "\x93NUMPY\x01\x00\x40\x00{'descr': '<f4'", 25);
    static const struct {
        const char *args;
        int status;
        const char *says; /* in stderr */
    } cases[] = {
        {"run", 2, "nestc run needs a file"},
        {"run D/run.nest --func l2 --frob", 2, "unknown option '--frob' for nestc run"},
        {"run D/run.nest --func", 2, "--func needs a function name"},
        {"run D/run.nest --func l2 --in x", 2, "--in needs NAME=FILE.npy (given: 'x')"},
        {"run D/run.nest --func l2 --in =D/x.npy", 2, "--in needs NAME=FILE.npy"},
        {"run D/run.nest --func l2 --in x=D/x.npy --in x=D/x.npy", 2, "parameter 'x' twice"},
        {"run D/run.nest", 2, "has 3 functions: choose one with --func (l2, tr, big)"},
        {"run D/run.nest --func nope --random", 2, "has no function 'nope' (it has: l2, tr, big)"},
        {"run D/run.nest --func l2 --in z=D/x.npy --random", 2,
         "--in z: l2 has no parameter 'z' (it has: x, y)"},
        {"run D/run.nest --func l2 --in x=D/x.npy", 2,
         "parameter y: f32[3] of l2 has no value: give --in y=FILE.npy or --random"},
        {"run D/run.nest --func l2 --random --time=0", 2, "--time=N needs a count"},
        {"run D/run.nest --func l2 --random --check=x", 2, "--check=TOL needs a tolerance"},
        {"run D/run.nest --func l2 --random --check=-1", 2, "--check=TOL needs a tolerance"},
        {"run D/run.nest --func l2 --random --seed=-1", 2, "--seed needs a number"},
        {"run D/run.nest --func l2 --random --interp --check", 2, "does not go with --interp"},
        {"run D/run.nest D/run.nest", 2, "only one input file"},
        {"run D/run.nest --func l2 --random --out", 2, "--out needs a directory"},
        {"run D/run.nest --func l2 --in x=D/x64.npy --random", 1,
         "x64.npy: parameter x of l2 is f32[3]; the file holds f64[3] (convert it with "
         ".astype(numpy.float32))"},
        {"run D/run.nest --func l2 --in x=D/x4.npy --random", 1,
         "x4.npy: parameter x of l2 is f32[3]; the file holds f32[1,3]\n"},
        {"run D/run.nest --func l2 --in x=D/junk.npy --random", 1,
         "junk.npy: the file ends inside its header"},
        {"run D/run.nest --func l2 --in x=D/none.npy --random", 1, "none.npy: cannot open it"},
        {"run D/run.nest --func l2 --random --out D/run.nest", 1, "cannot create the directory"},
        {"run D/missing.nest", 1, "cannot read"},
        {"run D/x.npy", 1, "error:"},
    };
    for (size_t i = 0; i < countof(cases); i++) {
        char *out, *err;
        int st = run_nestc(cases[i].args, NULL, &out, &err);
        if (st != cases[i].status || !strstr(err, cases[i].says))
            fail_msg("nestc %s: exit %d (want %d), stderr \"%s\" (want \"%s\")", cases[i].args,
                     st, cases[i].status, err, cases[i].says);
        free(out);
        free(err);
    }
    /* --help of the subcommand */
    char *out, *err;
    assert_int_equal(run_nestc("run --help", NULL, &out, &err), 0);
    assert_non_null(strstr(out, "usage: nestc run FILE"));
    free(out);
    free(err);
}

/* --dim gives the sizes of a .nest file's symbolic dims: the function is compiled (and run) at
 * those sizes; a missing, unknown or negative size is a usage error. */
static void test_cli_dims(void **state)
{
    (void)state;
    static const char text[] = "func sq(x: f32[N,2]) -> f32[N,2] {\n"
                               "  return multiply(x, x)\n"
                               "}\n";
    write_file("sym.nest", text, strlen(text));
    char *out, *err;
    assert_int_equal(run_nestc("--emit=ir D/sym.nest", NULL, &out, &err), 0);
    assert_non_null(strstr(out, "func sq(x: f32[N,2]) -> f32[N,2]"));
    free(out);
    free(err);
    /* one function for every N: the dims come first */
    assert_int_equal(run_nestc("--emit=c D/sym.nest", NULL, &out, &err), 0);
    assert_non_null(strstr(out, "int sq(int64_t N, const float *restrict x, float *restrict"));
    assert_non_null(strstr(out, "int sq_call_dims(const int64_t *dims"));
    free(out);
    free(err);
    assert_int_equal(run_nestc("--dim N=3 --emit=h D/sym.nest", NULL, &out, &err), 0);
    assert_non_null(strstr(out, "sq(x: f32[3,2]) -> f32[3,2]"));
    free(out);
    free(err);
    assert_int_equal(run_nestc("--dim N=3 --dim M=2 --emit=c D/sym.nest", NULL, &out, &err), 2);
    assert_non_null(strstr(err, "--dim M: no function has that dim"));
    free(out);
    free(err);
    assert_int_equal(run_nestc("--dim N=-1 --emit=c D/sym.nest", NULL, &out, &err), 2);
    free(out);
    free(err);
    static const char two[] = "func f(x: f32[N], y: f32[M]) -> f32[N] {\n  return x\n}\n";
    write_file("two.nest", two, strlen(two));
    /* a function whose dims are not all given stays symbolic; running it needs them all */
    assert_int_equal(run_nestc("--dim N=3 --emit=h D/two.nest", NULL, &out, &err), 0);
    assert_non_null(strstr(out, "int f(int64_t N, int64_t M, const float *x"));
    free(out);
    free(err);
    assert_int_equal(run_nestc("run D/two.nest --dim N=3 --random", NULL, &out, &err), 2);
    assert_non_null(strstr(err, "function f has symbolic dims (N, M): give each its size with "
                                "--dim NAME=SIZE"));
    free(out);
    free(err);
    /* run at N = 4, the values checked against the reference interpreter */
    assert_int_equal(run_nestc("run D/sym.nest --dim N=4 --random --check", NULL, &out, &err), 0);
    assert_non_null(strstr(out, "sq.0: f32[4,2]"));
    assert_non_null(strstr(out, "matches the reference interpreter"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_emit),
        cmocka_unit_test(test_cli_input_errors),
        cmocka_unit_test(test_cli_usage),
        cmocka_unit_test(test_cli_run),
        cmocka_unit_test(test_cli_version),
        cmocka_unit_test(test_run_values),
        cmocka_unit_test(test_run_check_tolerance),
        cmocka_unit_test(test_run_errors),
        cmocka_unit_test(test_cli_dims),
    };
    return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
