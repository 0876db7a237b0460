/* nestc.c - the command line: read a .nest file or an .onnx model (cli.c), then print, run or
 * compile it; `nestc run` is run.c. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "internal.h"

static const char usage[] =
    "usage: nestc [options] FILE.nest        (FILE may be - for standard input)\n"
    "       nestc [options] MODEL.onnx       (an ONNX model, opsets 7 to 17)\n"
    "       nestc run FILE [run options]      (nestc run --help lists them)\n"
    "\n"
    "  -o OUT.so          compile every function to OUT.so and write OUT.h\n"
    "  -O0 .. -O3         optimization level of the C compiler (default -O3)\n"
    "  --march=CPU        target CPU (default native: this machine; x86-64-v2, x86-64-v3, ...\n"
    "                     for a .so that runs elsewhere)\n"
    "  --cc=CC            C compiler for -o (default cc; e.g. gcc, clang-14, \"ccache gcc\")\n"
    "  --no-openmp        do not run large loops on several cores\n"
    "  --flush-denormals  read and write denormal floats as zero during every call\n"
    "  --keep-denormals   IEEE denormals in every function (default: flushed only in the\n"
    "                     functions that assign state, training steps)\n"
    "  --no-cache         do not use the compile cache of the in-process compiler\n"
    "  -v                 show the compile command and its time\n"
    "  --emit=FORM        print FORM to standard output: ir (the canonical text form),\n"
    "                     dot (Graphviz), c (the generated C), h (its header)\n"
    "  --no-fuse          store every op's result (no fusion), for comparison and bisection\n"
    "  --dump-after=PASS  print the plan after a pass (" PIPELINE_PASSES ")\n"
    "  --run[=FUNC]       evaluate FUNC (default: every function) with the reference\n"
    "                     interpreter on generated inputs and print the results; parameter p's\n"
    "                     element i is ((7i + 3p) mod 11 - 5) / 8 (integers: without / 8;\n"
    "                     bool: (i + p) mod 2); a function with state runs on a new state\n"
    "  --jit              with --run: compile in process and run the compiled code, checked\n"
    "                     against the interpreter (-v: compile time and compile-cache hit)\n"
    "  --name=NAME        the module's name, which names its state in the C (NAME_state_new,\n"
    "                     ...); ONNX: the function's name (default: the file's stem)\n"
    "  --dim NAME=N       the size of the symbolic dim NAME (.nest), or the value of the\n"
    "                     dynamic dimension NAME (ONNX); repeatable\n"
    "  --help, -h         show this text\n"
    "  --version          show the version of nestc and of the LLVM it compiles with\n"
    "\n"
    "Exit status: 0 success, 1 an error in the input, 2 wrong usage.\n";

static int version(void)
{
    printf("nestc %s\n", NEST_VERSION);
    const char *llvm = nest_llvm_version();
    if (llvm)
        printf("LLVM %s (in process: nest_compile, nestc run)\n", llvm);
    else
        printf("LLVM: the in-process compiler (libnest_jit.so) cannot be loaded; nestc run "
               "and nest_compile say why\n");
    return 0;
}

/* ---- --run ---- */

/* --run: the interpreter's results; with jit, the compiled kernel's, checked against them. */
static int run_generated(nest_function *f, const nest_options *opts, bool jit)
{
    int np = nest_param_count(f), nr = nest_result_count(f);
    void **args = calloc((size_t)np + 1, sizeof *args);
    void **res = calloc((size_t)nr + 1, sizeof *res), **got = calloc((size_t)nr + 1, sizeof *got);
    nest_kernel *k = NULL;
    /* a function with state runs on a fresh state of its module, one for each path */
    bool state = f->module && f->module->nstates > 0;
    nest_state *si = state ? nest_state_new(f->module) : NULL,
               *sj = state && jit ? nest_state_new(f->module) : NULL;
    int status = args && res && got && (!state || (si && (!jit || sj))) ? NEST_OK : NEST_ERR_NOMEM;
    for (int i = 0; status == NEST_OK && i < np; i++) {
        const ir_node *p = &f->nodes[f->params[i]];
        int64_t count = ir_count(p);
        args[i] = malloc((size_t)count * nest_type_size((nest_type)p->etype) + 1);
        if (!args[i])
            status = NEST_ERR_NOMEM;
        else
            run_fill(args[i], (nest_type)p->etype, count, i, false, NULL);
    }
    for (int i = 0; status == NEST_OK && i < nr; i++) {
        const ir_node *r = &f->nodes[f->results[i]];
        res[i] = calloc((size_t)ir_count(r) + 1, nest_type_size((nest_type)r->etype));
        got[i] = calloc((size_t)ir_count(r) + 1, nest_type_size((nest_type)r->etype));
        if (!res[i] || !got[i])
            status = NEST_ERR_NOMEM;
    }
    if (status == NEST_OK)
        status = nest_evaluate_state(f, si, args, np, res, nr);
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
        if (k && nest_call_state(k, sj, args, np, got, nr) != NEST_OK) {
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
            run_print_values(jit ? got[i] : res[i], (nest_type)r->etype, ir_count(r), 8);
            int64_t at;
            if (jit)
                printf("  (compiled; the reference interpreter differs by %.2g)",
                       run_difference(res[i], got[i], (nest_type)r->etype, ir_count(r), &at));
            printf("\n");
        }
    } else if (status != NEST_ERR_CALL) {
        fprintf(stderr, "nestc: %s: %s\n", f->name,
                status == NEST_ERR_NOMEM && !f->errmsg ? "out of memory" : nest_errmsg(f));
    }
    nest_kernel_free(k);
    nest_state_free(si);
    nest_state_free(sj);
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
/* Prints text, or when it is NULL the error: the first function's that has one, else the
 * module's. */
static bool put_text(char *text, nest_function *const *fns, int n, nest_module *m)
{
    if (!text) {
        const char *msg = m && nest_module_errcode(m) ? nest_module_errmsg(m) : "out of memory";
        for (int i = n - 1; i >= 0; i--)
            if (nest_errcode(fns[i]))
                msg = nest_errmsg(fns[i]);
        fprintf(stderr, "nestc: %s\n", msg);
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
    nest_module *module; /* the module emitted and built whole (cli_input.whole), or NULL */
} action;

/* What the options ask of the functions: dump, emit, build, run. Returns the exit status. */
static int act(nest_function *const *fns, int n, const action *ac, const nest_options *opts)
{
    const char *emit = ac->emit, *out = ac->out, *dump = ac->dump, *run = ac->run;
    nest_emit_kind kind = emit && strcmp(emit, "c") == 0 ? NEST_EMIT_C : NEST_EMIT_H;
    int rc = 0;
    if (dump && !put_text(pipeline_dump(fns, n, opts, dump), fns, n, ac->module))
        return EXIT_INPUT;
    if (emit && !put_text(strcmp(emit, "ir") == 0
                              ? (ac->module ? nest_module_print(ac->module) : nest_print(fns, n))
                          : strcmp(emit, "dot") == 0 ? pipeline_dot(fns, n, opts)
                          : ac->module ? nest_module_emit(ac->module, kind, opts)
                                       : nest_emit(fns, n, kind, opts),
                          fns, n, ac->module))
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
        int st = ac->module ? nest_module_build_so(ac->module, out, hdr, opts, &log)
                            : nest_build_so(fns, n, out, hdr, opts, &log);
        if (st != NEST_OK) {
            fprintf(stderr, "nestc: %s\n", ac->module ? nest_module_errmsg(ac->module)
                                            : n         ? nest_errmsg(fns[0])
                                                        : "nothing to compile");
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
            if (run_generated(fns[i], opts, ac->jit))
                rc = EXIT_INPUT;
        }
        if (run && !found) {
            fprintf(stderr, "nestc: %s has no function '%s'\n", ac->file, run);
            rc = EXIT_USAGE;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "run") == 0)
        return run_main(argc - 1, argv + 1);
    const char *file = NULL, *emit = NULL, *out = NULL, *run = NULL, *dump = NULL;
    static cli_import imp;
    bool do_run = false, jit = false;
    nest_options opts;
    nest_options_init(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int common = cli_common_option(a, &opts);
        int import = common ? 0 : cli_import_option(argc, argv, &i, &imp);
        if (common != 0 || import != 0) {
            if (common < 0 || import < 0)
                return EXIT_USAGE;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            return version();
        } else if (strncmp(a, "--emit=", 7) == 0) {
            emit = a + 7;
            if (strcmp(emit, "ir") && strcmp(emit, "dot") && strcmp(emit, "c") && strcmp(emit, "h"))
                return cli_usage_error("unknown form '%s' for --emit (ir, dot, c or h)", emit);
        } else if (strcmp(a, "-o") == 0) {
            if (++i == argc)
                return cli_usage_error("%s needs a file name", a);
            out = argv[i];
        } else if (strncmp(a, "--cc=", 5) == 0 && a[5]) {
            opts.cc = a + 5;
        } else if (strncmp(a, "--dump-after=", 13) == 0) {
            dump = a + 13;
            if (!pipeline_has_pass(dump))
                return cli_usage_error("unknown pass '%s' for --dump-after (" PIPELINE_PASSES ")",
                                       dump);
        } else if (strcmp(a, "--jit") == 0) {
            jit = true;
        } else if (strcmp(a, "--run") == 0) {
            do_run = true;
        } else if (strncmp(a, "--run=", 6) == 0) {
            do_run = true;
            run = a + 6;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error("unknown option '%s'", a);
        } else if (file) {
            return cli_usage_error("only one input file is allowed (also given: '%s')", a);
        } else {
            file = a;
        }
    }
    if (!file)
        return cli_usage_error("no input file");
    if (jit && !do_run)
        return cli_usage_error("--jit goes with --run");
    if (!emit && !out && !do_run && !dump)
        return cli_usage_error("nothing to do: give --emit=FORM, -o OUT.so, --dump-after=PASS or "
                               "--run (or use nestc run FILE)");
    if (out && strlen(out) < 1)
        return cli_usage_error("-o needs a file name");

    cli_input in;
    int rc = cli_load(file, &imp, &in);
    if (rc == 0)
        rc = act(in.fns, in.n, &(action){emit, out, dump, do_run, run, jit, file, in.whole}, &opts);
    cli_input_free(&in);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "nestc: writing the output failed: %s\n", strerror(errno));
        return EXIT_INPUT;
    }
    return rc;
}
