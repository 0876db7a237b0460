/* cli.c - what the commands of nestc share: usage errors, the options of compiling and of
 * importing, and reading an input file (a .nest file, with its errors shown at a caret, or an
 * ONNX model). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "internal.h"

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "nestc: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(nestc --help shows the options)\n");
    va_end(ap);
    return EXIT_USAGE;
}

int cli_common_option(const char *a, nest_options *o)
{
    if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && a[3] == '\0')
        o->opt_level = a[2] - '0';
    else if (strncmp(a, "--march=", 8) == 0 && a[8])
        o->march = a + 8;
    else if (strcmp(a, "--no-openmp") == 0)
        o->openmp = 0;
    else if (strcmp(a, "--flush-denormals") == 0)
        o->flush_denormals = 1;
    else if (strcmp(a, "--keep-denormals") == 0)
        o->flush_denormals = 0;
    else if (strcmp(a, "--no-fuse") == 0)
        o->fuse = 0;
    else if (strcmp(a, "--no-cache") == 0)
        o->cache = 0;
    else if (strcmp(a, "-v") == 0)
        o->verbose = 1;
    else
        return 0;
    return 1;
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

int cli_import_option(int argc, char **argv, int *i, cli_import *imp)
{
    const char *a = argv[*i];
    if (strncmp(a, "--name=", 7) == 0 || strcmp(a, "--name") == 0) {
        if (!a[6] && ++*i == argc)
            return -cli_usage_error("%s needs a name", a);
        imp->name = a[6] ? a + 7 : argv[*i];
        return 1;
    }
    if (strncmp(a, "--dim=", 6) != 0 && strcmp(a, "--dim") != 0)
        return 0;
    if (!a[5] && ++*i == argc)
        return -cli_usage_error("%s needs NAME=N", a);
    const char *d = a[5] ? a + 6 : argv[*i], *eq = strchr(d, '=');
    char *end = NULL;
    errno = 0;
    long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
    if (!eq || eq == d || !eq[1] || *end || errno || v < 0)
        return -cli_usage_error("--dim takes NAME=N with N >= 0, not '%s'", d);
    if (imp->ndims == (int)countof(imp->dims))
        return -cli_usage_error("too many --dim options");
    if ((size_t)(eq - d) >= sizeof imp->names[0])
        return -cli_usage_error("--dim: the name in '%s' is too long", d);
    memcpy(imp->names[imp->ndims], d, (size_t)(eq - d));
    imp->names[imp->ndims][eq - d] = '\0';
    imp->dims[imp->ndims].value = v;
    imp->dims[imp->ndims].name = imp->names[imp->ndims];
    imp->ndims++;
    return 1;
}

/* An ONNX model: imported as one function. */
static int load_onnx(const char *path, const cli_import *imp, cli_input *in)
{
    nest_onnx_options o = {.name = imp->name, .dims = imp->dims, .ndims = imp->ndims};
    in->f = nest_import_onnx(path, &o);
    if (!in->f) {
        fprintf(stderr, "nestc: out of memory\n");
        return EXIT_INPUT;
    }
    if (nest_errcode(in->f) != NEST_OK) {
        fprintf(stderr, "nestc: %s\n", nest_errmsg(in->f));
        return EXIT_INPUT;
    }
    in->fns = &in->f;
    in->n = 1;
    return 0;
}

/* --dim for a .nest file: each function whose symbolic dims are all given becomes its copy at
 * those sizes (the others stay symbolic), and every --dim must name a dim of some function. */
static int specialize(const cli_import *imp, cli_input *in)
{
    bool used[countof(imp->dims)] = {false};
    in->spec = calloc((size_t)in->n + 1, sizeof *in->spec);
    if (!in->spec) {
        fprintf(stderr, "nestc: out of memory\n");
        return EXIT_INPUT;
    }
    for (int i = 0; i < in->n; i++) {
        nest_function *f = in->m->fns[i];
        int nd = nest_dim_count(f);
        int64_t vals[64];
        if (nd > (int)countof(vals)) {
            fprintf(stderr, "nestc: function %s has more than %d dims\n", nest_function_name(f),
                    (int)countof(vals));
            return EXIT_INPUT;
        }
        int k = 0;
        for (; k < nd; k++) {
            const char *name = nest_dim_name(f, k);
            int j = 0;
            while (j < imp->ndims && strcmp(imp->dims[j].name, name) != 0)
                j++;
            if (j == imp->ndims)
                break; /* not all given: it stays symbolic, one kernel for every size */
            used[j] = true;
            vals[k] = imp->dims[j].value;
        }
        if (nd == 0 || k < nd) {
            in->spec[i] = f;
            continue;
        }
        in->spec[i] = nest_specialize(f, vals, nd);
        in->whole = NULL;
        if (!in->spec[i]) {
            fprintf(stderr, "nestc: %s\n", nest_errmsg(f));
            return EXIT_INPUT;
        }
    }
    for (int j = 0; j < imp->ndims; j++)
        if (!used[j])
            return cli_usage_error("--dim %s: no function has that dim", imp->dims[j].name);
    in->fns = in->spec;
    return 0;
}

int cli_load(const char *path, const cli_import *imp, cli_input *in)
{
    memset(in, 0, sizeof *in);
    size_t plen = strlen(path);
    if (plen > 5 && strcmp(path + plen - 5, ".onnx") == 0)
        return load_onnx(path, imp, in);
    size_t len;
    char *src = read_all(path, &len);
    if (!src) {
        fprintf(stderr, "nestc: cannot read %s: %s\n", path, strerror(errno));
        return EXIT_INPUT;
    }
    in->m = nest_parse(src, len, strcmp(path, "-") == 0 ? "<stdin>" : path);
    int rc = 0;
    if (!in->m) {
        fprintf(stderr, "nestc: out of memory\n");
        rc = EXIT_INPUT;
    } else if (nest_module_errcode(in->m) != NEST_OK) {
        fprintf(stderr, "%s\n", nest_module_errmsg(in->m));
        show_line(src, len, nest_module_errline(in->m), nest_module_errcol(in->m));
        rc = EXIT_INPUT;
    } else if (imp->name && nest_module_set_name(in->m, imp->name) != NEST_OK) {
        fprintf(stderr, "nestc: --name: %s\n", nest_module_errmsg(in->m));
        rc = EXIT_USAGE;
    } else {
        in->fns = in->m->fns;
        in->n = in->m->nfns;
        in->whole = in->m;
        if (imp->ndims)
            rc = specialize(imp, in);
    }
    free(src);
    return rc;
}

void cli_input_free(cli_input *in)
{
    for (int i = 0; in->spec && i < in->n; i++)
        if (in->spec[i] != in->m->fns[i])
            nest_function_free(in->spec[i]);
    free(in->spec);
    nest_module_free(in->m);
    nest_function_free(in->f);
    memset(in, 0, sizeof *in);
}
