/*
 * onnx_cases.c - runs ONNX test cases laid out as the ONNX backend tests are (DIR/CASE/model.onnx,
 * DIR/CASE/test_data_set_0/input_N.pb and output_N.pb): each model is imported, compiled in
 * process, called on the inputs and compared with the expected outputs (numpy's
 * assert_allclose: |got - want| <= abs_tol + rel_tol |want|, NaN equal to NaN; integers and bool
 * exactly).
 *
 *   onnx_cases [--rtol R] [--atol A] [--table FILE.md] [--quiet] DIR
 *
 * A case whose import is refused (an operator, type or attribute nest does not support) is
 * skipped and counted under its operator; a case that imports but compiles wrongly or computes
 * other values fails. Ends with "N passed, N failed, N skipped"; exit status 1 if any failed.
 */
#include <dirent.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nest.h"
#include "onnx.pb-c.h"

static double rel_tol = 1e-3, abs_tol = 1e-7;
static int quiet;

typedef struct opcount {
    char name[64];
    int passed, failed, skipped;
} opcount;
static opcount ops[512];
static int nops;

static opcount *count_for(const char *name)
{
    for (int i = 0; i < nops; i++)
        if (strcmp(ops[i].name, name) == 0)
            return &ops[i];
    if (nops == (int)(sizeof ops / sizeof ops[0]))
        return &ops[nops - 1];
    snprintf(ops[nops].name, sizeof ops[nops].name, "%s", name);
    return &ops[nops++];
}

static void *read_file(const char *path, size_t *len)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *data = malloc(cap);
    size_t r;
    while (data && (r = fread(data + n, 1, cap - n, in)) > 0) {
        n += r;
        if (n == cap) {
            char *d = realloc(data, cap *= 2);
            if (!d)
                free(data);
            data = d;
        }
    }
    fclose(in);
    *len = n;
    return data;
}

/* A TensorProto's values as a dense array of `type` (NULL if the file does not hold one). */
static void *tensor_values(const char *path, int *type, int64_t *count)
{
    size_t len;
    void *bytes = read_file(path, &len);
    if (!bytes)
        return NULL;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, bytes);
    free(bytes);
    if (!t)
        return NULL;
    int64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++)
        n *= t->dims[i];
    size_t esize;
    switch (t->data_type) {
    case 1: *type = NEST_F32, esize = 4; break;
    case 11: *type = NEST_F64, esize = 8; break;
    case 6: *type = NEST_I32, esize = 4; break;
    case 7: *type = NEST_I64, esize = 8; break;
    case 9: *type = NEST_BOOL, esize = 1; break;
    default: onnx__tensor_proto__free_unpacked(t, NULL); return NULL;
    }
    char *out = calloc((size_t)n + 1, esize);
    if (out && t->has_raw_data && t->raw_data.len == (size_t)n * esize) {
        memcpy(out, t->raw_data.data, t->raw_data.len);
    } else if (out) {
        for (int64_t i = 0; i < n; i++) {
            switch (t->data_type) {
            case 1: ((float *)out)[i] = t->float_data[i]; break;
            case 11: ((double *)out)[i] = t->double_data[i]; break;
            case 7: ((int64_t *)out)[i] = t->int64_data[i]; break;
            case 6: ((int32_t *)out)[i] = t->int32_data[i]; break;
            default: out[i] = t->int32_data[i] != 0; break;
            }
        }
    }
    onnx__tensor_proto__free_unpacked(t, NULL);
    *count = n;
    return out;
}

static double value_at(const void *p, int type, int64_t i)
{
    switch (type) {
    case NEST_F32: return ((const float *)p)[i];
    case NEST_F64: return ((const double *)p)[i];
    case NEST_I32: return ((const int32_t *)p)[i];
    case NEST_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

/* The operator a case tests: the node whose op type begins the case's name (test_reduce_sum_*
 * is ReduceSum), else the first node's. */
static void case_op(const char *dir, const char *casename, char *op, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, casename);
    snprintf(op, n, "?");
    size_t len;
    void *bytes = read_file(path, &len);
    Onnx__ModelProto *m = bytes ? onnx__model_proto__unpack(NULL, len, bytes) : NULL;
    free(bytes);
    if (!m || !m->graph || !m->graph->n_node) {
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        return;
    }
    char want[256];
    size_t k = 0;
    for (const char *s = casename + (strncmp(casename, "test_", 5) ? 0 : 5); *s && k < 255; s++)
        if (*s != '_')
            want[k++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
    want[k] = '\0';
    snprintf(op, n, "%s", m->graph->node[0]->op_type);
    size_t best = 0;
    for (size_t i = 0; i < m->graph->n_node; i++) {
        const char *t = m->graph->node[i]->op_type;
        char low[256];
        size_t j = 0;
        for (; t[j] && j < 255; j++)
            low[j] = (char)(t[j] >= 'A' && t[j] <= 'Z' ? t[j] - 'A' + 'a' : t[j]);
        low[j] = '\0';
        if (j > best && strncmp(want, low, j) == 0) {
            best = j;
            snprintf(op, n, "%s", t);
        }
    }
    onnx__model_proto__free_unpacked(m, NULL);
}

enum { PASS, FAIL, SKIP };

static int run_case(const char *dir, const char *casename, char *why, size_t nwhy)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, casename);
    nest_function *f = nest_import_onnx(path, NULL);
    if (!f) {
        snprintf(why, nwhy, "out of memory");
        return FAIL;
    }
    if (nest_errcode(f) != NEST_OK) {
        snprintf(why, nwhy, "%.1000s", nest_errmsg(f));
        nest_function_free(f);
        return SKIP;
    }
    int np = nest_param_count(f), nr = nest_result_count(f), st = PASS;
    void **args = calloc((size_t)np + 1, sizeof *args), **want = calloc((size_t)nr + 1, sizeof *want);
    void **got = calloc((size_t)nr + 1, sizeof *got);
    nest_kernel *k = NULL;
    for (int i = 0; i < np && st == PASS; i++) {
        int type;
        int64_t count;
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, casename, i);
        args[i] = tensor_values(path, &type, &count);
        nest_value p = nest_param(f, i);
        const int64_t *shape = nest_value_shape(f, p);
        int64_t n = 1;
        for (int d = 0; d < nest_value_rank(f, p); d++)
            n *= shape[d];
        if (!args[i] || type != nest_value_type(f, p) || count != n) {
            snprintf(why, nwhy, "input %d: cannot read %.600s, or it does not fit the parameter", i,
                     path);
            st = FAIL;
        }
    }
    int types[64];
    int64_t counts[64];
    for (int i = 0; i < nr && st == PASS; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_%d.pb", dir, casename, i);
        nest_value r = nest_result(f, i);
        want[i] = tensor_values(path, &types[i], &counts[i]);
        int64_t n = 1;
        for (int d = 0; d < nest_value_rank(f, r); d++)
            n *= nest_value_shape(f, r)[d];
        if (i >= 64 || !want[i] || types[i] != nest_value_type(f, r) || counts[i] != n) {
            snprintf(why, nwhy, "output %d: the model computes %s[%lld], expected %s", i,
                     nest_type_name((nest_type)nest_value_type(f, r)), (long long)n,
                     want[i] ? "another type or count" : "(unreadable)");
            st = FAIL;
            break;
        }
        got[i] = calloc((size_t)n + 1, nest_type_size((nest_type)types[i]));
    }
    if (st == PASS && !(k = nest_compile(f, NULL))) {
        snprintf(why, nwhy, "compile: %.400s", nest_errmsg(f));
        st = FAIL;
    }
    if (st == PASS && nest_call(k, args, np, got, nr) != NEST_OK) {
        snprintf(why, nwhy, "call: %.900s", nest_kernel_errmsg(k));
        st = FAIL;
    }
    for (int i = 0; i < nr && st == PASS; i++) {
        for (int64_t j = 0; j < counts[i]; j++) {
            double w = value_at(want[i], types[i], j), g = value_at(got[i], types[i], j);
            bool ok = types[i] == NEST_F32 || types[i] == NEST_F64
                          ? (isnan(w) ? isnan(g)
                             : isinf(w) ? g == w
                                        : fabs(g - w) <= abs_tol + rel_tol * fabs(w))
                          : g == w;
            if (!ok) {
                snprintf(why, nwhy, "output %d element %lld: %.9g, expected %.9g", i,
                         (long long)j, g, w);
                st = FAIL;
                break;
            }
        }
    }
    nest_kernel_free(k);
    for (int i = 0; i < np; i++)
        free(args[i]);
    for (int i = 0; i < nr; i++) {
        free(want[i]);
        free(got[i]);
    }
    free(args);
    free(want);
    free(got);
    nest_function_free(f);
    return st;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int op_order(const void *a, const void *b)
{
    return strcmp(((const opcount *)a)->name, ((const opcount *)b)->name);
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *table = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rtol") == 0 && i + 1 < argc)
            rel_tol = atof(argv[++i]);
        else if (strcmp(argv[i], "--atol") == 0 && i + 1 < argc)
            abs_tol = atof(argv[++i]);
        else if (strcmp(argv[i], "--table") == 0 && i + 1 < argc)
            table = argv[++i];
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else
            dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: onnx_cases [--rtol R] [--atol A] [--table FILE.md] [--quiet] DIR\n");
        return 2;
    }
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 2;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? 2 * cap : 256) * sizeof *names);
            if (!p)
                return 2;
            names = p;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        char why[1024] = "", op[64];
        case_op(dir, names[i], op, sizeof op);
        int st = run_case(dir, names[i], why, sizeof why);
        opcount *oc = count_for(op);
        if (st == PASS) {
            passed++, oc->passed++;
        } else if (st == FAIL) {
            failed++, oc->failed++;
            printf("FAIL %s: %s\n", names[i], why);
        } else {
            skipped++, oc->skipped++;
            if (!quiet)
                printf("skip %s: %.300s%s\n", names[i], why, strlen(why) > 300 ? "..." : "");
        }
        free(names[i]);
    }
    free(names);
    if (table) {
        FILE *out = fopen(table, "w");
        if (out) {
            qsort(ops, (size_t)nops, sizeof ops[0], op_order);
            fprintf(out, "| operator | passed | failed | skipped |\n|---|---|---|---|\n");
            for (int i = 0; i < nops; i++)
                fprintf(out, "| %s | %d | %d | %d |\n", ops[i].name, ops[i].passed,
                        ops[i].failed, ops[i].skipped);
            fprintf(out, "| **all** | %d | %d | %d |\n", passed, failed, skipped);
            fclose(out);
        }
    }
    printf("onnx: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
