/* nestc.c - the command line: parse a .nest file or import an .onnx model, then print, run or
 * compile it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };

static const char usage[] =
    "usage: nestc [options] FILE.nest        (FILE may be - for standard input)\n"
    "       nestc [options] MODEL.onnx       (an ONNX model, opsets 7 to 17)\n"
    "\n"
    "  -o OUT.so          compile every function to OUT.so and write OUT.h\n"
    "  -O0 .. -O3         optimization level of the C compiler (default -O3)\n"
    "  --march=CPU        target CPU (default native: this machine; x86-64-v2, x86-64-v3, ...\n"
    "                     for a .so that runs elsewhere)\n"
    "  --cc=CC            C compiler for -o (default cc; e.g. gcc, clang-14, \"ccache gcc\")\n"
    "  --no-openmp        do not run large loops on several cores\n"
    "  -v                 show the compile command and its time\n"
    "  --emit=FORM        print FORM to standard output: ir (the canonical text form),\n"
    "                     dot (Graphviz), c (the generated C), h (its header)\n"
    "  --no-fuse          store every op's result (no fusion), for comparison and bisection\n"
    "  --dump-after=PASS  print the plan after a pass (" PIPELINE_PASSES ")\n"
    "  --run[=FUNC]       evaluate FUNC (default: every function) with the reference\n"
    "                     interpreter on generated inputs and print the results; parameter p's\n"
    "                     element i is ((7i + 3p) mod 11 - 5) / 8 (integers: without / 8;\n"
    "                     bool: (i + p) mod 2)\n"
    "  --jit              with --run: compile in process and run the compiled code, checked\n"
    "                     against the interpreter (-v: compile time and compile-cache hit)\n"
    "  --name=NAME        ONNX: the function's name (default: the file's stem)\n"
    "  --dim NAME=N       ONNX: the value of the dynamic dimension NAME (repeatable)\n"
    "  --help             show this text\n"
    "\n"
    "Exit status: 0 success, 1 an error in the input, 2 wrong usage.\n";

static int fail_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "nestc: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(nestc --help shows the options)\n");
    return EXIT_USAGE;
}

/* Reads all of a file (or stdin for "-"); NULL with errno on failure. */
static char *read_all(const char *path, size_t *len)
{
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!in)
        return NULL;
    buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, in)) > 0)
        buf_write(&b, chunk, n);
    int err = ferror(in) ? EIO : 0;
    if (in != stdin)
        fclose(in);
    *len = b.len;
    char *s = buf_finish(&b);
    if (err) {
        free(s);
        errno = err;
        return NULL;
    }
    if (!s)
        errno = ENOMEM;
    return s;
}

/* Shows the line of an error with a caret under its column. Bytes that are not printable
 * ASCII show as '?'; long lines show a window around the column. */
static void show_line(const char *src, size_t len, int line, int col)
{
    if (line < 1 || col < 1)
        return;
    const char *p = src, *end = src + len;
    for (int l = 1; l < line && p < end; p++)
        if (*p == '\n')
            l++;
    const char *e = p;
    while (e < end && *e != '\n')
        e++;
    size_t n = (size_t)(e - p), c = (size_t)col - 1;
    size_t from = c > 60 ? c - 60 : 0, to = n < from + 120 ? n : from + 120;
    fprintf(stderr, "%5d | %s", line, from ? "..." : "");
    for (size_t i = from; i < to; i++)
        fputc(p[i] >= 0x20 && p[i] < 0x7f ? p[i] : (p[i] == '\t' ? ' ' : '?'), stderr);
    fprintf(stderr, "%s\n      | %*s^\n", to < n ? "..." : "", (int)(c - from + (from ? 3 : 0)), "");
}

/* ---- --run ---- */

static void fill_input(void *data, int etype, int64_t count, int p)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t k = (7 * (i % 11) + 3 * p) % 11 - 5;
        switch (etype) {
        case NEST_F32: ((float *)data)[i] = (float)k / 8; break;
        case NEST_F64: ((double *)data)[i] = (double)k / 8; break;
        case NEST_I32: ((int32_t *)data)[i] = (int32_t)k; break;
        case NEST_I64: ((int64_t *)data)[i] = k; break;
        case NEST_BOOL: ((uint8_t *)data)[i] = (uint8_t)((i + p) % 2); break;
        }
    }
}

static void print_values(const void *data, int etype, int64_t count)
{
    buf b = {0};
    int64_t shown = count < 8 ? count : 8;
    buf_putc(&b, '[');
    for (int64_t i = 0; i < shown; i++) {
        if (i)
            buf_puts(&b, ", ");
        print_scalar(&b, etype, data, i);
    }
    if (shown < count)
        buf_printf(&b, ", ... (%lld values)", (long long)count);
    buf_putc(&b, ']');
    char *s = buf_finish(&b);
    printf("%s", s ? s : "?");
    free(s);
}

/* The largest difference between two result arrays, relative to the reference's magnitude
 * (exact 0 or 1 for integers and bool: whether any element differs). */
static double difference(const void *ref, const void *got, int etype, int64_t count)
{
    double worst = 0;
    for (int64_t i = 0; i < count; i++) {
        double a, b;
        switch (etype) {
        case NEST_F32: a = ((const float *)ref)[i], b = ((const float *)got)[i]; break;
        case NEST_F64: a = ((const double *)ref)[i], b = ((const double *)got)[i]; break;
        case NEST_I32: a = ((const int32_t *)ref)[i], b = ((const int32_t *)got)[i]; break;
        case NEST_I64: a = (double)((const int64_t *)ref)[i], b = (double)((const int64_t *)got)[i]; break;
        default: a = ((const uint8_t *)ref)[i], b = ((const uint8_t *)got)[i]; break;
        }
        if (a != a && b != b)
            continue; /* both NaN */
        double d = a == b ? 0 : (a != a || b != b) ? 1 : fabs(a - b) / (fabs(a) > 1 ? fabs(a) : 1);
        if (d > worst)
            worst = d;
    }
    return worst;
}

/* --run: the interpreter's results; with jit, the compiled kernel's, checked against them. */
static int run_function(nest_function *f, const nest_options *opts, bool jit)
{
    int np = nest_param_count(f), nr = nest_result_count(f);
    void **args = calloc((size_t)np + 1, sizeof *args);
    void **res = calloc((size_t)nr + 1, sizeof *res), **got = calloc((size_t)nr + 1, sizeof *got);
    nest_kernel *k = NULL;
    int status = args && res && got ? NEST_OK : NEST_ERR_NOMEM;
    for (int i = 0; status == NEST_OK && i < np; i++) {
        const ir_node *p = &f->nodes[f->params[i]];
        int64_t count = ir_count(p);
        args[i] = malloc((size_t)count * nest_type_size((nest_type)p->etype) + 1);
        if (!args[i])
            status = NEST_ERR_NOMEM;
        else
            fill_input(args[i], p->etype, count, i);
    }
    for (int i = 0; status == NEST_OK && i < nr; i++) {
        const ir_node *r = &f->nodes[f->results[i]];
        res[i] = calloc((size_t)ir_count(r) + 1, nest_type_size((nest_type)r->etype));
        got[i] = calloc((size_t)ir_count(r) + 1, nest_type_size((nest_type)r->etype));
        if (!res[i] || !got[i])
            status = NEST_ERR_NOMEM;
    }
    if (status == NEST_OK)
        status = nest_evaluate(f, args, np, res, nr);
    if (status == NEST_OK && jit) {
        k = nest_compile(f, opts);
        if (!k)
            status = nest_errcode(f);
        else if (opts->verbose)
            fprintf(stderr, "nestc: %s: %s in %.1f ms, workspace %zu bytes\n", f->name,
                    nest_kernel_cache_hit(k) ? "taken from the compile cache" : "compiled",
                    nest_kernel_compile_ms(k), nest_kernel_workspace_size(k));
        if (k && nest_kernel_cache_note(k)[0])
            fprintf(stderr, "nestc: warning: %s\n", nest_kernel_cache_note(k));
        if (k && nest_call(k, args, np, got, nr) != NEST_OK) {
            fprintf(stderr, "nestc: %s: %s\n", f->name, nest_kernel_errmsg(k));
            status = NEST_ERR_CALL;
        }
    }
    if (status == NEST_OK) {
        for (int i = 0; i < nr; i++) {
            const ir_node *r = &f->nodes[f->results[i]];
            buf b = {0};
            ir_format_type(&b, f, f->results[i]);
            char *t = buf_finish(&b);
            printf("%s result %d: %s = ", f->name, i, t ? t : "?");
            free(t);
            print_values(jit ? got[i] : res[i], r->etype, ir_count(r));
            if (jit)
                printf("  (compiled; the reference interpreter differs by %.2g)",
                       difference(res[i], got[i], r->etype, ir_count(r)));
            printf("\n");
        }
    } else if (status != NEST_ERR_CALL) {
        fprintf(stderr, "nestc: %s: %s\n", f->name,
                status == NEST_ERR_NOMEM && !f->errmsg ? "out of memory" : nest_errmsg(f));
    }
    nest_kernel_free(k);
    for (int i = 0; args && i < np; i++)
        free(args[i]);
    for (int i = 0; res && got && i < nr; i++) {
        free(res[i]);
        free(got[i]);
    }
    free(args);
    free(res);
    free(got);
    return status == NEST_OK ? 0 : EXIT_INPUT;
}

/* Prints text made from the functions and frees it; NULL means it failed: says why. */
static bool put_text(char *text, nest_function *const *fns, int n)
{
    if (!text) {
        fprintf(stderr, "nestc: %s\n", n ? nest_errmsg(fns[0]) : "out of memory");
        return false;
    }
    fputs(text, stdout);
    free(text);
    return true;
}

typedef struct action {
    const char *emit, *out, *dump;
    bool do_run;
    const char *run;
    bool jit;
    const char *file;
} action;

/* What the options ask of the functions: dump, emit, build, run. Returns the exit status. */
static int act(nest_function *const *fns, int n, const action *ac, const nest_options *opts)
{
    const char *emit = ac->emit, *out = ac->out, *dump = ac->dump, *run = ac->run;
    int rc = 0;
    if (dump && !put_text(pipeline_dump(fns, n, opts, dump), fns, n))
        return EXIT_INPUT;
    if (emit && !put_text(strcmp(emit, "ir") == 0    ? nest_print(fns, n)
                          : strcmp(emit, "dot") == 0 ? pipeline_dot(fns, n, opts)
                          : nest_emit(fns, n, strcmp(emit, "c") == 0 ? NEST_EMIT_C : NEST_EMIT_H,
                                      opts),
                          fns, n))
        return EXIT_INPUT;
    if (out) {
        /* OUT.so and OUT.h: the header replaces a .so suffix, or is appended */
        size_t ol = strlen(out);
        char *hdr = malloc(ol + 4);
        if (!hdr)
            return EXIT_INPUT;
        memcpy(hdr, out, ol + 1);
        if (ol > 3 && strcmp(out + ol - 3, ".so") == 0)
            strcpy(hdr + ol - 3, ".h");
        else
            strcat(hdr, ".h");
        char *log = NULL;
        if (nest_build_so(fns, n, out, hdr, opts, &log) != NEST_OK) {
            fprintf(stderr, "nestc: %s\n", n ? nest_errmsg(fns[0]) : "nothing to compile");
            rc = EXIT_INPUT;
        } else if (log) {
            fprintf(stderr, "%s%s", log, log[0] && log[strlen(log) - 1] != '\n' ? "\n" : "");
        }
        if (rc == 0 && opts->verbose)
            fprintf(stderr, "nestc: wrote %s and %s\n", out, hdr);
        free(log);
        free(hdr);
    }
    if (ac->do_run) {
        bool found = false;
        for (int i = 0; i < n; i++) {
            if (run && strcmp(run, fns[i]->name) != 0)
                continue;
            found = true;
            if (run_function(fns[i], opts, ac->jit))
                rc = EXIT_INPUT;
        }
        if (run && !found) {
            fprintf(stderr, "nestc: %s has no function '%s'\n", ac->file, run);
            rc = EXIT_USAGE;
        }
    }
    return rc;
}

/* An ONNX model: imported, then acted on as a .nest file's functions. */
static int onnx_main(const char *file, const char *name, const nest_dim *dims, int ndims,
                     const action *ac, const nest_options *opts)
{
    nest_onnx_options o = {.name = name, .dims = dims, .ndims = ndims};
    nest_function *f = nest_import_onnx(file, &o);
    if (!f) {
        fprintf(stderr, "nestc: out of memory\n");
        return EXIT_INPUT;
    }
    int rc = EXIT_INPUT;
    if (nest_errcode(f) != NEST_OK)
        fprintf(stderr, "nestc: %s\n", nest_errmsg(f));
    else
        rc = act(&f, 1, ac, opts);
    nest_function_free(f);
    return rc;
}

int main(int argc, char **argv)
{
    const char *file = NULL, *emit = NULL, *out = NULL, *run = NULL, *dump = NULL, *name = NULL;
    nest_dim dims[64];
    static char dimnames[64][256];
    int ndims = 0;
    bool do_run = false, jit = false;
    nest_options opts;
    nest_options_init(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strncmp(a, "--emit=", 7) == 0) {
            emit = a + 7;
            if (strcmp(emit, "ir") && strcmp(emit, "dot") && strcmp(emit, "c") && strcmp(emit, "h"))
                return fail_usage("unknown form '%s' for --emit (ir, dot, c or h)", emit);
        } else if (strcmp(a, "-o") == 0) {
            if (++i == argc)
                return fail_usage("%s needs a file name", a);
            out = argv[i];
        } else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && a[3] == '\0') {
            opts.opt_level = a[2] - '0';
        } else if (strncmp(a, "--march=", 8) == 0 && a[8]) {
            opts.march = a + 8;
        } else if (strncmp(a, "--cc=", 5) == 0 && a[5]) {
            opts.cc = a + 5;
        } else if (strcmp(a, "--no-openmp") == 0) {
            opts.openmp = 0;
        } else if (strcmp(a, "-v") == 0) {
            opts.verbose = 1;
        } else if (strcmp(a, "--no-fuse") == 0) {
            opts.fuse = 0;
        } else if (strncmp(a, "--dump-after=", 13) == 0) {
            dump = a + 13;
            if (!pipeline_has_pass(dump))
                return fail_usage("unknown pass '%s' for --dump-after (" PIPELINE_PASSES ")", dump);
        } else if (strncmp(a, "--name=", 7) == 0 || strcmp(a, "--name") == 0) {
            if (!a[6] && ++i == argc)
                return fail_usage("%s needs a name", a);
            name = a[6] ? a + 7 : argv[i];
        } else if (strncmp(a, "--dim=", 6) == 0 || strcmp(a, "--dim") == 0) {
            if (!a[5] && ++i == argc)
                return fail_usage("%s needs NAME=N", a);
            const char *d = a[5] ? a + 6 : argv[i], *eq = strchr(d, '=');
            char *end = NULL;
            errno = 0;
            long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
            if (!eq || eq == d || !eq[1] || *end || errno || v < 0)
                return fail_usage("--dim takes NAME=N with N >= 0, not '%s'", d);
            if (ndims == (int)countof(dims))
                return fail_usage("%s", "too many --dim options");
            if ((size_t)(eq - d) >= sizeof dimnames[0])
                return fail_usage("--dim: the name in '%s' is too long", d);
            memcpy(dimnames[ndims], d, (size_t)(eq - d));
            dimnames[ndims][eq - d] = '\0';
            dims[ndims].value = v;
            dims[ndims].name = dimnames[ndims];
            ndims++;
        } else if (strcmp(a, "--jit") == 0) {
            jit = true;
        } else if (strcmp(a, "--run") == 0) {
            do_run = true;
        } else if (strncmp(a, "--run=", 6) == 0) {
            do_run = true;
            run = a + 6;
        } else if (a[0] == '-' && a[1] != '\0') {
            return fail_usage("unknown option '%s'", a);
        } else if (file) {
            return fail_usage("only one input file is allowed (also given: '%s')", a);
        } else {
            file = a;
        }
    }
    if (!file)
        return fail_usage("%s", "no input file");
    if (jit && !do_run)
        return fail_usage("%s", "--jit goes with --run");
    if (!emit && !out && !do_run && !dump)
        return fail_usage("%s", "nothing to do: give --emit=FORM, -o OUT.so, --dump-after=PASS or --run");
    if (out && strlen(out) < 1)
        return fail_usage("%s", "-o needs a file name");

    size_t flen = strlen(file);
    bool onnx = flen > 5 && strcmp(file + flen - 5, ".onnx") == 0;
    if (!onnx && (name || ndims))
        return fail_usage("%s", "--name and --dim apply to ONNX models (FILE.onnx)");
    if (onnx)
        return onnx_main(file, name, dims, ndims,
                         &(action){emit, out, dump, do_run, run, jit, file}, &opts);

    size_t len;
    char *src = read_all(file, &len);
    if (!src) {
        fprintf(stderr, "nestc: cannot read %s: %s\n", file, strerror(errno));
        return EXIT_INPUT;
    }
    nest_module *m = nest_parse(src, len, strcmp(file, "-") == 0 ? "<stdin>" : file);
    if (!m) {
        fprintf(stderr, "nestc: out of memory\n");
        free(src);
        return EXIT_INPUT;
    }
    int rc = 0;
    if (nest_module_errcode(m) != NEST_OK) {
        fprintf(stderr, "%s\n", nest_module_errmsg(m));
        show_line(src, len, nest_module_errline(m), nest_module_errcol(m));
        rc = EXIT_INPUT;
        goto done;
    }
    rc = act(m->fns, m->nfns, &(action){emit, out, dump, do_run, run, jit, file}, &opts);
done:
    nest_module_free(m);
    free(src);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "nestc: writing the output failed: %s\n", strerror(errno));
        return EXIT_INPUT;
    }
    return rc;
}
