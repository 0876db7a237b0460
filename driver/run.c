/*
 * run.c - `nestc run FILE`: compile one function of a file in process, call it on inputs read
 * from .npy files (or random ones), print a summary of each result and write it as .npy, time
 * the compile and the call, and check the results against the reference interpreter.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "internal.h"

static const char run_usage[] =
    "usage: nestc run FILE [options]          (FILE: a .nest file, or an ONNX model)\n"
    "\n"
    "Compiles one function of FILE in process, calls it and prints a summary of each result\n"
    "(type and shape, min, max, mean, the first values).\n"
    "\n"
    "  --func NAME        the function to run (needed when FILE has several)\n"
    "  --in NAME=X.npy    parameter NAME's value, from a numpy file of its dtype and shape\n"
    "                     (float32, float64, int32, int64 or bool)\n"
    "  --random           random values for the parameters no --in gives: floats uniform in\n"
    "                     [-1, 1), integers in [-10, 10], bool 0 or 1\n"
    "  --seed=N           the seed of --random (default 1)\n"
    "  --out DIR          write result i of function NAME to DIR/NAME.i.npy (DIR is created)\n"
    "  --time[=N]         time the compile and N calls (default: as many as fit in about a\n"
    "                     second, 3 at least; short calls are timed in batches) and print the\n"
    "                     median call\n"
    "  --check[=TOL]      compare each result with the reference interpreter's: floats may\n"
    "                     differ by TOL times max(|reference|, 1) (default 1e-4 for f32, 1e-9\n"
    "                     for f64), integers and bool not at all; a difference fails the run\n"
    "  --interp           run the reference interpreter instead of compiled code\n"
    "  --name=NAME, --dim NAME=N\n"
    "                     as for compiling (nestc --help): --dim gives the sizes of symbolic\n"
    "                     dims; a dim no --dim gives takes its size from the --in array of a\n"
    "                     parameter it sizes\n"
    "  -O0 .. -O3, --march=CPU, --no-openmp, --flush-denormals,\n"
    "  --keep-denormals, --no-fuse, --no-cache, -v\n"
    "                     as for compiling (nestc --help); -v also shows where inputs come from\n"
    "\n"
    "Exit status: 0 success, 1 an error in the input (the file, an input array, the compile) or\n"
    "a result that fails --check, 2 wrong usage.\n";

typedef struct input {
    const char *name, *path;
} input;

typedef struct run_args {
    const char *file, *func, *outdir;
    input *ins;
    int nin;
    bool random, check, interp;
    int64_t time_runs; /* 0 without --time, -1 adaptive */
    double tol;    /* --check=TOL, or < 0: by type */
    uint64_t seed;
    nest_options opts;
    cli_import imp;
} run_args;

/* ---- generated values, printing, differences (also nestc --run's) ---- */

static uint64_t next_random(uint64_t *s)
{
    /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

void run_fill(void *data, nest_type t, int64_t count, int p, bool random, uint64_t *seed)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t k = (7 * (i % 11) + 3 * p) % 11 - 5;
        double u = 0;
        if (random) {
            uint64_t r = next_random(seed);
            u = (double)(r >> 11) / 9007199254740992.0 * 2 - 1; /* [-1, 1) */
            k = (int64_t)(r >> 32) % 21 - 10;
        }
        switch (t) {
        case NEST_F32: ((float *)data)[i] = random ? (float)u : (float)k / 8; break;
        case NEST_F64: ((double *)data)[i] = random ? u : (double)k / 8; break;
        case NEST_I32: ((int32_t *)data)[i] = (int32_t)k; break;
        case NEST_I64: ((int64_t *)data)[i] = k; break;
        case NEST_BOOL: ((uint8_t *)data)[i] = (uint8_t)(random ? (k & 1) : (i + p) % 2); break;
        }
    }
}

void run_print_values(const void *data, nest_type t, int64_t count, int64_t limit)
{
    buf b = {0};
    int64_t shown = count < limit ? count : limit;
    buf_putc(&b, '[');
    for (int64_t i = 0; i < shown; i++) {
        if (i)
            buf_puts(&b, ", ");
        print_scalar(&b, t, data, i);
    }
    if (shown < count)
        buf_printf(&b, ", ... (%lld values)", (long long)count);
    buf_putc(&b, ']');
    char *s = buf_finish(&b);
    fputs(s ? s : "?", stdout);
    free(s);
}

static double value_at(const void *p, nest_type t, int64_t i)
{
    switch (t) {
    case NEST_F32: return ((const float *)p)[i];
    case NEST_F64: return ((const double *)p)[i];
    case NEST_I32: return ((const int32_t *)p)[i];
    case NEST_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

double run_difference(const void *ref, const void *got, nest_type t, int64_t count,
                      int64_t *where)
{
    double worst = 0;
    *where = 0;
    for (int64_t i = 0; i < count; i++) {
        double d;
        if (t == NEST_I64) {
            d = ((const int64_t *)ref)[i] != ((const int64_t *)got)[i];
        } else {
            double a = value_at(ref, t, i), b = value_at(got, t, i);
            if (isnan(a) || isnan(b))
                d = isnan(a) && isnan(b) ? 0 : INFINITY;
            else if (isinf(a) || isinf(b))
                d = a == b ? 0 : INFINITY;
            else if (t == NEST_F32 || t == NEST_F64)
                d = fabs(a - b) / (fabs(a) > 1 ? fabs(a) : 1);
            else
                d = a != b;
        }
        if (d > worst) {
            worst = d;
            *where = i;
        }
    }
    return worst;
}

/* ---- the command ---- */

static bool takes_value(const char *a, const char *opt, int *i, int argc, char **argv,
                        const char **value)
{
    size_t n = strlen(opt);
    if (strncmp(a, opt, n) != 0)
        return false;
    if (a[n] == '=') {
        *value = a + n + 1;
        return true;
    }
    if (a[n] != '\0')
        return false;
    *value = *i + 1 < argc ? argv[++*i] : NULL;
    return true;
}

/* Reads the arguments; 0 or the exit status of a usage error (-1 after --help). */
static int parse_args(int argc, char **argv, run_args *r)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int common = cli_common_option(a, &r->opts);
        int import = common ? 0 : cli_import_option(argc, argv, &i, &r->imp);
        if (common != 0 || import != 0) {
            if (common < 0 || import < 0)
                return EXIT_USAGE;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(run_usage, stdout);
            return -1;
        } else if (takes_value(a, "--func", &i, argc, argv, &v)) {
            if (!v || !*v)
                return cli_usage_error("--func needs a function name");
            r->func = v;
        } else if (takes_value(a, "--in", &i, argc, argv, &v)) {
            const char *eq = v ? strchr(v, '=') : NULL;
            if (!eq || eq == v || !eq[1])
                return cli_usage_error("--in needs NAME=FILE.npy (given: '%s')", v ? v : "");
            input *in = &r->ins[r->nin++];
            in->path = eq + 1;
            char *name = strndup(v, (size_t)(eq - v));
            if (!name)
                return cli_usage_error("out of memory");
            in->name = name;
            for (int j = 0; j < r->nin - 1; j++)
                if (strcmp(r->ins[j].name, name) == 0)
                    return cli_usage_error("--in gives parameter '%s' twice", name);
        } else if (strcmp(a, "--random") == 0) {
            r->random = true;
        } else if (strncmp(a, "--seed=", 7) == 0) {
            char *end;
            errno = 0;
            r->seed = strtoull(a + 7, &end, 10);
            if (!a[7] || *end || errno || a[7] == '-')
                return cli_usage_error("--seed needs a number from 0 to 2^64-1 (given: '%s')",
                                       a + 7);
        } else if (takes_value(a, "--out", &i, argc, argv, &v)) {
            if (!v || !*v)
                return cli_usage_error("--out needs a directory");
            r->outdir = v;
        } else if (strcmp(a, "--time") == 0) {
            r->time_runs = -1;
        } else if (strncmp(a, "--time=", 7) == 0) {
            char *end;
            long long n = strtoll(a + 7, &end, 10);
            if (!a[7] || *end || n < 1 || n > 1000000000)
                return cli_usage_error("--time=N needs a count of calls from 1 to 10^9 "
                                       "(given: '%s')", a + 7);
            r->time_runs = n;
        } else if (strcmp(a, "--check") == 0) {
            r->check = true;
        } else if (strncmp(a, "--check=", 8) == 0) {
            char *end;
            r->tol = strtod(a + 8, &end);
            if (!a[8] || *end || !(r->tol >= 0) || isinf(r->tol))
                return cli_usage_error("--check=TOL needs a tolerance, a number >= 0 (given: "
                                       "'%s')", a + 8);
            r->check = true;
        } else if (strcmp(a, "--interp") == 0) {
            r->interp = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error("unknown option '%s' for nestc run", a);
        } else if (r->file) {
            return cli_usage_error("only one input file is allowed (also given: '%s')", a);
        } else {
            r->file = a;
        }
    }
    if (!r->file)
        return cli_usage_error("nestc run needs a file");
    if (r->interp && r->check)
        return cli_usage_error("--check compares compiled code with the interpreter: it does "
                               "not go with --interp");
    return 0;
}

/* The function to run: --func, or the file's only one. */
static nest_function *choose(const cli_input *in, const run_args *r, int *status)
{
    if (r->func) {
        for (int i = 0; i < in->n; i++)
            if (strcmp(nest_function_name(in->fns[i]), r->func) == 0)
                return in->fns[i];
        fprintf(stderr, "nestc: %s has no function '%s'", r->file, r->func);
        for (int i = 0; i < in->n; i++)
            fprintf(stderr, "%s%s", i ? ", " : " (it has: ", nest_function_name(in->fns[i]));
        fprintf(stderr, "%s\n", in->n ? ")" : "");
        *status = EXIT_USAGE;
        return NULL;
    }
    if (in->n == 1)
        return in->fns[0];
    if (in->n == 0) {
        fprintf(stderr, "nestc: %s has no function to run\n", r->file);
        *status = EXIT_INPUT;
        return NULL;
    }
    fprintf(stderr, "nestc: %s has %d functions: choose one with --func (", r->file, in->n);
    for (int i = 0; i < in->n; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", nest_function_name(in->fns[i]));
    fprintf(stderr, ")\n");
    *status = EXIT_USAGE;
    return NULL;
}

/* "f32[3,4]" (with " col" for a column-major array), malloc'd. */
static char *type_text(nest_type t, int rank, const int64_t *shape, bool col)
{
    buf b = {0};
    buf_puts(&b, nest_type_name(t));
    ir_format_shape(&b, rank, shape);
    if (col)
        buf_puts(&b, " col");
    return buf_finish(&b);
}

static void *alloc_array(nest_type t, int64_t count)
{
    size_t bytes = (size_t)count * nest_type_size(t);
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (p)
        memset(p, 0, bytes);
    return p;
}

/* The arrays of one call: the parameters' and the results', each in its declared layout. */
typedef struct arrays {
    int np, nr;
    void **args, **res, **ref;
    nest_state *st;      /* a function with state: the state its calls read and update */
} arrays;

static void free_arrays(arrays *a)
{
    for (int i = 0; a->args && i < a->np; i++)
        free(a->args[i]);
    for (int i = 0; a->res && i < a->nr; i++) {
        free(a->res[i]);
        free(a->ref ? a->ref[i] : NULL);
    }
    free(a->args);
    free(a->res);
    free(a->ref);
    nest_state_free(a->st);
}

/* Parameter i's value: its --in file, converted to the parameter's layout, or random values. */
static int load_input(nest_function *f, int i, const run_args *r, uint64_t *seed, void **out)
{
    const ir_node *p = &f->nodes[f->params[i]];
    nest_type t = (nest_type)p->etype;
    bool col = p->a.param.layout == NEST_COL_MAJOR && p->rank > 1;
    const input *in = NULL;
    for (int j = 0; j < r->nin; j++)
        if (strcmp(r->ins[j].name, p->name) == 0)
            in = &r->ins[j];
    char *want = type_text(t, p->rank, p->shape, col);
    int status = 0;
    if (!in) {
        if (!r->random) {
            fprintf(stderr, "nestc: parameter %s: %s of %s has no value: give --in %s=FILE.npy "
                            "or --random\n", p->name, want ? want : "?", f->name, p->name);
            status = EXIT_USAGE;
        } else if (!(*out = alloc_array(t, ir_count(p)))) {
            fprintf(stderr, "nestc: out of memory for parameter %s\n", p->name);
            status = EXIT_INPUT;
        } else {
            run_fill(*out, t, ir_count(p), i, true, seed);
            if (r->opts.verbose)
                fprintf(stderr, "nestc: %s: %s, random\n", p->name, want ? want : "?");
        }
        free(want);
        return status;
    }
    npy_array a;
    char err[512];
    if (npy_read(in->path, &a, err, sizeof err) != 0) {
        fprintf(stderr, "nestc: %s: %s\n", in->path, err);
        free(want);
        return EXIT_INPUT;
    }
    bool fits = a.type == t && a.rank == p->rank;
    for (int k = 0; fits && k < p->rank; k++)
        fits = a.shape[k] == p->shape[k];
    if (!fits) {
        char *got = type_text(a.type, a.rank, a.shape, false);
        fprintf(stderr, "nestc: %s: parameter %s of %s is %s; the file holds %s", in->path,
                p->name, f->name, want ? want : "?", got ? got : "?");
        if (a.type != t)
            fprintf(stderr, " (convert it with .astype(numpy.%s))",
                    t == NEST_F32   ? "float32"
                    : t == NEST_F64 ? "float64"
                    : t == NEST_I32 ? "int32"
                    : t == NEST_I64 ? "int64"
                                    : "bool_");
        fputc('\n', stderr);
        free(got);
        status = EXIT_INPUT;
    } else if (col) {
        void *c = alloc_array(t, a.count);
        if (!c) {
            fprintf(stderr, "nestc: out of memory for parameter %s\n", p->name);
            status = EXIT_INPUT;
        } else {
            npy_reorder(c, a.data, nest_type_size(t), a.rank, a.shape, true);
            *out = c;
        }
    } else {
        *out = a.data;
        a.data = NULL;
    }
    if (status == 0 && r->opts.verbose)
        fprintf(stderr, "nestc: %s: %s, from %s\n", p->name, want ? want : "?", in->path);
    npy_free(&a);
    free(want);
    return status;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int call_once(nest_kernel *k, nest_function *f, arrays *a)
{
    if (a->st)
        return k ? nest_call_state(k, a->st, a->args, a->np, a->res, a->nr)
                 : nest_evaluate_state(f, a->st, a->args, a->np, a->res, a->nr);
    return k ? nest_call(k, a->args, a->np, a->res, a->nr)
             : nest_evaluate(f, a->args, a->np, a->res, a->nr);
}

/* --check: the interpreter's results of the first call (for a function with state, on a new
 * state of its own) into a->ref. */
static int reference(nest_function *f, arrays *a)
{
    if (!a->st)
        return nest_evaluate(f, a->args, a->np, a->ref, a->nr);
    nest_state *st = nest_state_new(f->module);
    int rc = st ? nest_evaluate_state(f, st, a->args, a->np, a->ref, a->nr) : NEST_ERR_NOMEM;
    nest_state_free(st);
    return rc;
}

/* --time: n calls (n < 0: as many as fit in about a second, 3 at least). Calls shorter than a
 * tenth of a millisecond are timed in batches, so that the clock's cost does not count; the
 * median and the best are of the batches' means. */
static int time_calls(nest_kernel *k, nest_function *f, arrays *a, int64_t n, double *median,
                      double *best, int64_t *calls, int64_t *batch)
{
    /* the cost of a warm call, from batches of 1, 4, 16, ... calls until one lasts 0.1 ms */
    int64_t b = 1;
    double per;
    for (;;) {
        double t0 = clock_ms();
        for (int64_t i = 0; i < b; i++) {
            int st = call_once(k, f, a);
            if (st != NEST_OK)
                return st;
        }
        per = (clock_ms() - t0) / (double)b;
        if (per * (double)b >= 0.1 || b >= (1 << 20))
            break;
        b *= 4;
    }
    if (n < 0) {
        double fit = 1000 / (per > 1e-6 ? per : 1e-6);
        n = fit < 3 ? 3 : (int64_t)fit;
    }
    if (b > n)
        b = n;
    int64_t samples = n / b > 0 ? n / b : 1;
    double *t = malloc((size_t)samples * sizeof *t);
    if (!t)
        return NEST_ERR_NOMEM;
    int st = NEST_OK;
    for (int64_t s = 0; s < samples && st == NEST_OK; s++) {
        double t0 = clock_ms();
        for (int64_t i = 0; i < b && st == NEST_OK; i++)
            st = call_once(k, f, a);
        t[s] = (clock_ms() - t0) / (double)b;
    }
    if (st == NEST_OK) {
        qsort(t, (size_t)samples, sizeof *t, cmp_double);
        *median = samples % 2 ? t[samples / 2] : (t[samples / 2 - 1] + t[samples / 2]) / 2;
        *best = t[0];
        *calls = samples * b;
        *batch = b;
    }
    free(t);
    return st;
}

/* A time for people: "41.2 ns", "3.05 us", "12.4 ms", "2.31 s". */
static const char *show_ms(char *s, size_t n, double ms)
{
    if (ms < 1e-3)
        snprintf(s, n, "%.3g ns", ms * 1e6);
    else if (ms < 1)
        snprintf(s, n, "%.3g us", ms * 1e3);
    else if (ms < 1000)
        snprintf(s, n, "%.3g ms", ms);
    else
        snprintf(s, n, "%.3g s", ms / 1000);
    return s;
}

/* Creates dir and its parents (mkdir -p). */
static int make_dirs(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return -1;
    int rc = 0;
    for (char *s = p + 1; rc == 0; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = -1;
        *s = c;
        if (!c)
            break;
    }
    struct stat st;
    if (rc == 0 && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        errno = ENOTDIR;
        rc = -1;
    }
    free(p);
    return rc;
}

/* One result: its summary line, its first values, and its file. */
static int show_result(nest_function *f, int i, const void *data, const run_args *r)
{
    const ir_node *n = &f->nodes[f->results[i]];
    nest_type t = (nest_type)n->etype;
    int64_t count = ir_count(n);
    bool col = f->result_layout[i] == NEST_COL_MAJOR && n->rank > 1;
    const void *rows = data;
    void *copy = NULL;
    if (col) { /* shown in row-major order */
        if (!(copy = alloc_array(t, count))) {
            fprintf(stderr, "nestc: out of memory\n");
            return EXIT_INPUT;
        }
        npy_reorder(copy, data, nest_type_size(t), n->rank, n->shape, false);
        rows = copy;
    }
    char *tt = type_text(t, n->rank, n->shape, col);
    printf("%s.%d: %s", f->name, i, tt ? tt : "?");
    free(tt);
    if (n->rank == 0) {
        buf b = {0};
        print_scalar(&b, t, rows, 0);
        char *v = buf_finish(&b);
        printf(" = %s\n", v ? v : "?");
        free(v);
    } else if (t == NEST_BOOL) {
        int64_t on = 0;
        for (int64_t j = 0; j < count; j++)
            on += ((const uint8_t *)rows)[j];
        printf("  true %lld of %lld\n  ", (long long)on, (long long)count);
        run_print_values(rows, t, count, 8);
        printf("\n");
    } else {
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        int64_t nans = 0;
        for (int64_t j = 0; j < count; j++) {
            double v = value_at(rows, t, j);
            if (isnan(v)) {
                nans++;
                continue;
            }
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
        }
        if (count > nans)
            printf("  min %.7g  max %.7g  mean %.7g", lo, hi, sum / (double)(count - nans));
        if (nans)
            printf("  %lld NaN", (long long)nans);
        printf("\n  ");
        run_print_values(rows, t, count, 8);
        printf("\n");
    }
    free(copy);
    if (r->outdir) {
        buf path = {0};
        buf_printf(&path, "%s/%s.%d.npy", r->outdir, f->name, i);
        char *p = buf_finish(&path), err[512];
        if (!p || npy_write(p, t, n->rank, n->shape, data, col, err, sizeof err) != 0) {
            fprintf(stderr, "nestc: %s: %s\n", p ? p : r->outdir, p ? err : "out of memory");
            free(p);
            return EXIT_INPUT;
        }
        if (r->opts.verbose)
            fprintf(stderr, "nestc: wrote %s\n", p);
        free(p);
    }
    return 0;
}

/* --check: each result against the interpreter's. */
static int check_results(nest_function *f, const arrays *a, const run_args *r)
{
    int rc = 0;
    for (int i = 0; i < a->nr; i++) {
        const ir_node *n = &f->nodes[f->results[i]];
        nest_type t = (nest_type)n->etype;
        bool fl = t == NEST_F32 || t == NEST_F64;
        double tol = !fl ? 0 : r->tol >= 0 ? r->tol : t == NEST_F32 ? 1e-4 : 1e-9;
        int64_t at;
        double d = run_difference(a->ref[i], a->res[i], t, ir_count(n), &at);
        if (d <= tol) {
            printf("check: %s.%d matches the reference interpreter", f->name, i);
            if (fl)
                printf(" (largest difference %.2g, tolerance %.2g)", d, tol);
            printf("\n");
            continue;
        }
        buf b = {0};
        print_scalar(&b, t, a->res[i], at);
        buf_puts(&b, " where the interpreter has ");
        print_scalar(&b, t, a->ref[i], at);
        char *s = buf_finish(&b);
        printf("check: %s.%d DIFFERS from the reference interpreter at element %lld (in memory "
               "order): %s", f->name, i, (long long)at, s ? s : "?");
        if (fl)
            printf(" (difference %.2g, tolerance %.2g)", d, tol);
        printf("\n");
        free(s);
        rc = EXIT_INPUT;
    }
    return rc;
}

static int run_function(nest_function *f, const run_args *r)
{
    arrays a = {nest_param_count(f), nest_result_count(f), NULL, NULL, NULL, NULL};
    nest_kernel *k = NULL;
    int rc = 0;
    if (a.np < 0 || a.nr < 0) {
        fprintf(stderr, "nestc: %s: %s\n", f->name, nest_errmsg(f));
        return EXIT_INPUT;
    }
    for (int j = 0; j < r->nin; j++) {
        bool found = false;
        for (int i = 0; i < a.np && !found; i++)
            found = strcmp(f->nodes[f->params[i]].name, r->ins[j].name) == 0;
        if (!found) {
            fprintf(stderr, "nestc: --in %s: %s has no parameter '%s'", r->ins[j].name,
                    f->name, r->ins[j].name);
            for (int i = 0; i < a.np; i++)
                fprintf(stderr, "%s%s", i ? ", " : " (it has: ", f->nodes[f->params[i]].name);
            fprintf(stderr, "%s\n", a.np ? ")" : "");
            return EXIT_USAGE;
        }
    }
    a.args = calloc((size_t)a.np + 1, sizeof *a.args);
    a.res = calloc((size_t)a.nr + 1, sizeof *a.res);
    a.ref = calloc((size_t)a.nr + 1, sizeof *a.ref);
    /* a function with state runs on a new state of its module, which each call updates */
    bool state = f->module && f->module->nstates > 0;
    a.st = state ? nest_state_new(f->module) : NULL;
    if (!a.args || !a.res || !a.ref || (state && !a.st)) {
        free_arrays(&a);
        fprintf(stderr, "nestc: out of memory\n");
        return EXIT_INPUT;
    }
    /* the seed through splitmix64's finalizer: every seed (0 too) gives a well-mixed state */
    uint64_t seed = r->seed + 0x9E3779B97F4A7C15ULL;
    seed = (seed ^ (seed >> 30)) * 0xBF58476D1CE4E5B9ULL;
    seed = (seed ^ (seed >> 27)) * 0x94D049BB133111EBULL;
    seed = (seed ^ (seed >> 31)) | 1;
    for (int i = 0; i < a.np && rc == 0; i++)
        rc = load_input(f, i, r, &seed, &a.args[i]);
    for (int i = 0; i < a.nr && rc == 0; i++) {
        const ir_node *n = &f->nodes[f->results[i]];
        a.res[i] = alloc_array((nest_type)n->etype, ir_count(n));
        a.ref[i] = r->check ? alloc_array((nest_type)n->etype, ir_count(n)) : NULL;
        if (!a.res[i] || (r->check && !a.ref[i])) {
            fprintf(stderr, "nestc: out of memory for the results\n");
            rc = EXIT_INPUT;
        }
    }
    double compile_ms = 0;
    if (rc == 0 && !r->interp) {
        if (!(k = nest_compile(f, &r->opts))) {
            fprintf(stderr, "nestc: %s\n", nest_errmsg(f));
            rc = EXIT_INPUT;
        } else {
            compile_ms = nest_kernel_compile_ms(k);
            if (r->opts.verbose)
                fprintf(stderr, "nestc: %s: %s in %.1f ms, workspace %zu bytes\n", f->name,
                        nest_kernel_cache_hit(k) ? "taken from the compile cache" : "compiled",
                        compile_ms, nest_kernel_workspace_size(k));
        }
    }
    if (rc == 0) {
        int st = call_once(k, f, &a);
        if (st != NEST_OK) {
            fprintf(stderr, "nestc: %s\n", k ? nest_kernel_errmsg(k) : nest_errmsg(f));
            rc = EXIT_INPUT;
        }
    }
    if (rc == 0 && r->check && reference(f, &a) != NEST_OK) {
        fprintf(stderr, "nestc: the reference interpreter: %s\n", nest_errmsg(f));
        rc = EXIT_INPUT;
    }
    if (rc == 0 && r->outdir && make_dirs(r->outdir) != 0) {
        fprintf(stderr, "nestc: cannot create the directory %s: %s\n", r->outdir,
                strerror(errno));
        rc = EXIT_INPUT;
    }
    for (int i = 0; i < a.nr && rc == 0; i++)
        rc = show_result(f, i, a.res[i], r);
    if (rc == 0 && r->check) /* before the timed calls, which update a function's state */
        rc = check_results(f, &a, r);
    if (rc == 0 && r->time_runs) {
        double median = 0, best = 0;
        int64_t calls = 0, batch = 1;
        char t1[32], t2[32], t3[32];
        if (time_calls(k, f, &a, r->time_runs, &median, &best, &calls, &batch) != NEST_OK) {
            fprintf(stderr, "nestc: %s\n", k ? nest_kernel_errmsg(k) : nest_errmsg(f));
            rc = EXIT_INPUT;
        } else {
            if (k)
                printf("time: compile %s%s; ", show_ms(t1, sizeof t1, compile_ms),
                       nest_kernel_cache_hit(k) ? " (from the compile cache)" : "");
            else
                printf("time: the reference interpreter; ");
            printf("call %s median, %s best, of %lld calls", show_ms(t2, sizeof t2, median),
                   show_ms(t3, sizeof t3, best), (long long)calls);
            if (batch > 1)
                printf(" timed in batches of %lld", (long long)batch);
            printf("\n");
        }
    }
    nest_kernel_free(k);
    free_arrays(&a);
    return rc;
}

/* f at the sizes of its symbolic dims that the --in arrays give (each dim read from the first
 * parameter axis it sizes that an --in array fills), or NULL when one is not given (*status 0)
 * or the sizes do not fit (*status EXIT_INPUT, with the message). The caller frees the copy. */
static nest_function *sized_by_inputs(nest_function *f, const run_args *r, int *status)
{
    int nd = nest_dim_count(f);
    int64_t *dims = calloc((size_t)nd + 1, sizeof *dims);
    *status = 0;
    if (!dims)
        return NULL;
    bool all = true;
    for (int d = 0; d < nd && all; d++) {
        int64_t h = nest_named_dim(f, nest_dim_name(f, d));
        dims[d] = -1;
        for (int i = 0; i < f->nparams && dims[d] < 0; i++) {
            const ir_node *p = &f->nodes[f->params[i]];
            int axis = -1;
            for (int k = 0; k < p->rank && axis < 0; k++)
                axis = p->shape[k] == h ? k : -1;
            for (int j = 0; axis >= 0 && j < r->nin; j++) {
                npy_array a;
                char err[512];
                if (strcmp(r->ins[j].name, p->name) != 0 ||
                    npy_read(r->ins[j].path, &a, err, sizeof err) != 0)
                    continue; /* an unreadable file is reported where it is loaded */
                if (a.rank == p->rank)
                    dims[d] = a.shape[axis];
                npy_free(&a);
                break;
            }
        }
        all = dims[d] >= 0;
    }
    nest_function *g = all ? nest_specialize(f, dims, nd) : NULL;
    if (all && (!g || nest_errcode(f) != NEST_OK)) {
        fprintf(stderr, "nestc: function %s at the sizes of its --in arrays (", f->name);
        for (int d = 0; d < nd; d++)
            fprintf(stderr, "%s%s=%lld", d ? ", " : "", nest_dim_name(f, d), (long long)dims[d]);
        fprintf(stderr, "): %s\n", g ? nest_errmsg(f) : "out of memory");
        nest_function_free(g);
        g = NULL;
        *status = EXIT_INPUT;
    } else if (g && r->opts.verbose) {
        for (int d = 0; d < nd; d++)
            fprintf(stderr, "nestc: %s = %lld, from the --in arrays\n", nest_dim_name(f, d),
                    (long long)dims[d]);
    }
    free(dims);
    return g;
}

int run_main(int argc, char **argv)
{
    static run_args r;
    nest_options_init(&r.opts);
    r.seed = 1;
    r.tol = -1;
    r.ins = calloc((size_t)argc + 1, sizeof *r.ins);
    if (!r.ins)
        return EXIT_INPUT;
    int rc = parse_args(argc, argv, &r);
    cli_input in = {0};
    if (rc == 0)
        rc = cli_load(r.file, &r.imp, &in);
    if (rc == 0) {
        nest_function *f = choose(&in, &r, &rc), *g = NULL;
        if (f && nest_dim_count(f) > 0 && (g = sized_by_inputs(f, &r, &rc))) {
            rc = run_function(g, &r);
            nest_function_free(g);
        } else if (f && nest_dim_count(f) > 0 && rc == 0) {
            fprintf(stderr, "nestc: function %s has symbolic dims (", nest_function_name(f));
            for (int i = 0; i < nest_dim_count(f); i++)
                fprintf(stderr, "%s%s", i ? ", " : "", nest_dim_name(f, i));
            fprintf(stderr, "): give each its size with --dim NAME=SIZE, or an --in array of a "
                            "parameter it sizes\n");
            rc = EXIT_USAGE;
        } else if (f && rc == 0) {
            rc = run_function(f, &r);
        }
    }
    cli_input_free(&in);
    for (int i = 0; i < r.nin; i++)
        free((char *)r.ins[i].name);
    free(r.ins);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "nestc: writing the output failed: %s\n", strerror(errno));
        return EXIT_INPUT;
    }
    return rc < 0 ? 0 : rc;
}
