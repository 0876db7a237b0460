/*
 * onnx_cases.c - runs ONNX test cases laid out as the ONNX backend tests are (DIR/CASE/model.onnx,
 * DIR/CASE/test_data_set_0/input_N.pb and output_N.pb, and DIR/CASE/operator naming the operator
 * the case tests, as tests/onnx_gen.py writes it): each model is imported, compiled in process,
 * called on the inputs and compared with the expected outputs (numpy's assert_allclose:
 * |got - want| <= abs_tol + rel_tol |want|, NaN equal to NaN; integers and bool exactly).
 *
 *   onnx_cases [--rtol R] [--atol A] [--table FILE.md] [--quiet] [--required] [--all] DIR
 *
 * A case may have more data sets (test_data_set_1, ...): each runs through the one kernel; for a
 * model with symbolic dims (a dim_param kept symbolic) at the sizes its inputs give, so that one
 * compiled kernel is checked at every size (a case with inputs fixed at import runs set 0 only).
 *
 * Graph inputs that nest needs known at import (a shape, axes, pads given as inputs): when the
 * import refuses a case for that, it is imported again with the input the error names fixed to
 * the case's value (nest_onnx_options.inputs), or, when the error names a value computed from
 * inputs, its integer and bool inputs, then all of them; until it imports or nothing is left.
 *
 * A case that imports but compiles wrongly or computes other values fails. A case whose import
 * is refused is skipped, except with --required for the operators the ONNX issue lists: a
 * refused case of one of those fails, unless it uses what nest does not have (element types
 * other than float, double, int32, int64 and bool; sequences and optionals; training mode) or is
 * an expansion into operators outside the list (CASE_expanded). With --all (whole models) every
 * case must pass. Ends with the counts; exit status 1 if any failed.
 */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nest.h"
#include "onnx.pb-c.h"

static double rel_tol = 1e-3, abs_tol = 1e-7;
static bool quiet, required, all_required;

/* The operators the ONNX issue lists: with --required each of their cases passes. */
static const char *const listed[] = {
    "Abs", "Add", "And", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "Cast", "Ceil",
    "Clip", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "Div", "Dropout",
    "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "Gemm",
    "GlobalAveragePool", "GlobalMaxPool", "Greater", "GreaterOrEqual", "HardSigmoid", "Identity",
    "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max",
    "MaxPool", "Mean", "Min", "Mul", "Neg", "Not", "Or", "Pad", "Pow", "Range", "Reciprocal",
    "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "Relu", "Reshape", "Shape",
    "Sigmoid", "Sign", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile",
    "TopK", "Transpose", "Unsqueeze", "Where",
};

/* Import errors that say the case needs what nest does not have. */
static const char *const lacks[] = {
    "is not supported (float, double, int32, int64, bool)", /* element types */
    "is not a tensor with an element type",                  /* sequences, optionals, maps */
    "training mode is not supported",
};

static bool in_list(const char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}
#define IN(list, s) in_list(list, sizeof list / sizeof list[0], s)

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

/* A tensor of a .pb file, dense. */
typedef struct tensor {
    int type, rank;
    int64_t shape[NEST_MAX_RANK];
    int64_t count;
    void *data; /* NULL: the file does not hold a tensor nest has a type for */
} tensor;

static void read_tensor(const char *path, tensor *out)
{
    memset(out, 0, sizeof *out);
    size_t len;
    void *bytes = read_file(path, &len);
    Onnx__TensorProto *t = bytes ? onnx__tensor_proto__unpack(NULL, len, bytes) : NULL;
    free(bytes);
    if (!t)
        return;
    int64_t n = 1;
    for (size_t i = 0; i < t->n_dims && i < NEST_MAX_RANK; i++) {
        if (t->dims[i] < 0 || (t->dims[i] && n > (INT64_C(1) << 40) / t->dims[i])) {
            onnx__tensor_proto__free_unpacked(t, NULL); /* not a tensor this runner reads */
            return;
        }
        n *= t->dims[i];
        out->shape[i] = t->dims[i];
    }
    out->rank = (int)t->n_dims;
    size_t esize;
    switch (t->data_type) {
    case 1: out->type = NEST_F32, esize = 4; break;
    case 11: out->type = NEST_F64, esize = 8; break;
    case 6: out->type = NEST_I32, esize = 4; break;
    case 7: out->type = NEST_I64, esize = 8; break;
    case 9: out->type = NEST_BOOL, esize = 1; break;
    default: onnx__tensor_proto__free_unpacked(t, NULL); return;
    }
    size_t have = t->data_type == 1 ? t->n_float_data : t->data_type == 11 ? t->n_double_data
                  : t->data_type == 7 ? t->n_int64_data : t->n_int32_data;
    bool raw = t->has_raw_data && t->raw_data.len == (size_t)n * esize;
    char *d = t->n_dims <= NEST_MAX_RANK && n >= 0 && (raw || have == (size_t)n)
                  ? calloc((size_t)n + 1, esize) : NULL;
    if (d && raw) {
        if (t->raw_data.len)
            memcpy(d, t->raw_data.data, t->raw_data.len);
    } else if (d) {
        for (int64_t i = 0; i < n; i++) {
            switch (t->data_type) {
            case 1: ((float *)d)[i] = t->float_data[i]; break;
            case 11: ((double *)d)[i] = t->double_data[i]; break;
            case 7: ((int64_t *)d)[i] = t->int64_data[i]; break;
            case 6: ((int32_t *)d)[i] = t->int32_data[i]; break;
            default: d[i] = t->int32_data[i] != 0; break;
            }
        }
    }
    onnx__tensor_proto__free_unpacked(t, NULL);
    out->count = n;
    out->data = d;
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

/* One case: its operator, graph inputs (those that are not initializers, in order) and their
 * values. */
typedef struct tcase {
    char op[64];
    int ninputs;
    char **names;
    tensor *inputs;
} tcase;

static void case_free(tcase *tc)
{
    for (int i = 0; i < tc->ninputs; i++) {
        free(tc->names[i]);
        free(tc->inputs[i].data);
    }
    free(tc->names);
    free(tc->inputs);
    memset(tc, 0, sizeof *tc);
}

/* Loads a case with the inputs of its data set `set`. */
static void case_load(const char *dir, const char *casename, tcase *tc, int set)
{
    memset(tc, 0, sizeof *tc);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/operator", dir, casename);
    FILE *in = fopen(path, "r");
    if (in) {
        if (fgets(tc->op, sizeof tc->op, in))
            tc->op[strcspn(tc->op, "\n")] = '\0';
        fclose(in);
    }
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, casename);
    size_t len;
    void *bytes = read_file(path, &len);
    Onnx__ModelProto *m = bytes ? onnx__model_proto__unpack(NULL, len, bytes) : NULL;
    free(bytes);
    if (!m || !m->graph) {
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        return;
    }
    const Onnx__GraphProto *g = m->graph;
    if (!in) /* no operator file: a whole model */
        snprintf(tc->op, sizeof tc->op, "model");
    tc->names = calloc(g->n_input + 1, sizeof *tc->names);
    tc->inputs = calloc(g->n_input + 1, sizeof *tc->inputs);
    for (size_t i = 0; tc->names && tc->inputs && i < g->n_input && tc->ninputs < 64; i++) {
        bool init = false;
        for (size_t j = 0; j < g->n_initializer && !init; j++)
            init = strcmp(g->initializer[j]->name, g->input[i]->name) == 0;
        if (init)
            continue;
        snprintf(path, sizeof path, "%s/%s/test_data_set_%d/input_%d.pb", dir, casename, set,
                 tc->ninputs);
        read_tensor(path, &tc->inputs[tc->ninputs]);
        tc->names[tc->ninputs++] = strdup(g->input[i]->name);
    }
    onnx__model_proto__free_unpacked(m, NULL);
}

/* Data set `set` of a case, when it has one. */
static bool case_inputs(const char *dir, const char *casename, tcase *tc, int set)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/test_data_set_%d", dir, casename, set);
    DIR *d = opendir(path);
    if (!d)
        return false;
    closedir(d);
    case_load(dir, casename, tc, set);
    return true;
}

enum { PASS, FAIL, SKIP };

static nest_function *import_case(const char *path, const tcase *tc, const bool *fixed)
{
    nest_onnx_input fix[64];
    nest_onnx_options o = {.inputs = fix};
    for (int i = 0; i < tc->ninputs && o.ninputs < 64; i++) {
        const tensor *t = &tc->inputs[i];
        if (fixed[i])
            fix[o.ninputs++] = (nest_onnx_input){tc->names[i], (nest_type)t->type, t->rank,
                                                 t->shape, t->data};
    }
    return nest_import_onnx(path, &o);
}

/* After an import refused for "input N ('NAME') must be known at import": fixes NAME if it is a
 * graph input, else the integer and bool inputs, else all. False when nothing more can be. */
static bool fix_more(const tcase *tc, const char *why, bool *fixed)
{
    const char *at = strstr(why, "must be known at import");
    const char *q = at ? strstr(why, "('") : NULL;
    while (q && strstr(q + 1, "('") && strstr(q + 1, "('") < at)
        q = strstr(q + 1, "('");
    for (int i = 0; q && i < tc->ninputs; i++) {
        size_t n = strlen(tc->names[i]);
        if (!fixed[i] && tc->inputs[i].data && strncmp(q + 2, tc->names[i], n) == 0 &&
            strncmp(q + 2 + n, "')", 2) == 0)
            return fixed[i] = true;
    }
    for (int pass = 0; pass < 2; pass++) {
        bool more = false;
        for (int i = 0; i < tc->ninputs; i++) {
            int t = tc->inputs[i].type;
            if (!fixed[i] && tc->inputs[i].data &&
                (pass == 1 || t == NEST_I32 || t == NEST_I64 || t == NEST_BOOL))
                more = fixed[i] = true;
        }
        if (more)
            return true;
    }
    return false;
}

/* The sizes of f's symbolic dims for the inputs of a data set (each dim read from the first
 * parameter axis it sizes) into dims; false when an input is missing. */
static bool dims_of(nest_function *f, const tcase *tc, const bool *fix, int64_t *dims)
{
    int nd = nest_dim_count(f);
    for (int d = 0; d < nd; d++) {
        int64_t h = nest_named_dim(f, nest_dim_name(f, d));
        dims[d] = -1;
        for (int i = 0, p = 0; i < tc->ninputs && dims[d] < 0; i++) {
            if (fix[i])
                continue;
            nest_value v = nest_param(f, p++);
            for (int a = 0; a < nest_value_rank(f, v) && a < tc->inputs[i].rank; a++)
                if (nest_value_shape(f, v)[a] == h) {
                    dims[d] = tc->inputs[i].shape[a];
                    break;
                }
        }
        if (dims[d] < 0)
            return false;
    }
    return true;
}

/* Data set `set` of a case through kernel k of f: PASS or FAIL with why. */
static int run_set(nest_function *f, nest_kernel *k, const char *dir, const char *casename,
                   int set, const tcase *tc, const bool *fix, char *why, size_t nwhy)
{
    char path[4096];
    int nd = nest_dim_count(f), np = nest_param_count(f), nr = nest_result_count(f), st = PASS;
    int64_t dims[NEST_MAX_RANK * 4];
    nest_function *g = f; /* f at the set's sizes: its shapes are plain */
    if (nd > (int)(sizeof dims / sizeof dims[0]) || (nd > 0 && !dims_of(f, tc, fix, dims))) {
        snprintf(why, nwhy, "data set %d: the inputs do not give the model's dims", set);
        return FAIL;
    }
    if (nd > 0 && (!(g = nest_specialize(f, dims, nd)) || nest_errcode(f) != NEST_OK)) {
        snprintf(why, nwhy, "data set %d: at its sizes: %.900s", set, nest_errmsg(f));
        nest_function_free(g);
        return FAIL;
    }
    void **args = calloc((size_t)np + 1, sizeof *args), **want = calloc((size_t)nr + 1, sizeof *want);
    void **got = calloc((size_t)nr + 1, sizeof *got);
    for (int i = 0, p = 0; i < tc->ninputs && st == PASS; i++) {
        if (fix[i])
            continue;
        const tensor *t = &tc->inputs[i];
        if (p >= np) {
            snprintf(why, nwhy, "%d parameters for %d inputs", np, tc->ninputs);
            st = FAIL;
            break;
        }
        nest_value v = nest_param(g, p);
        const int64_t *shape = nest_value_shape(g, v);
        int64_t n = 1;
        for (int d = 0; d < nest_value_rank(g, v); d++)
            n *= shape[d];
        if (!t->data || t->type != nest_value_type(g, v) || t->count != n) {
            snprintf(why, nwhy, "input %d ('%.200s'): unreadable, or it does not fit the "
                     "parameter", i, tc->names[i]);
            st = FAIL;
        }
        args[p++] = t->data;
    }
    int types[64];
    int64_t counts[64];
    for (int i = 0; i < nr && st == PASS; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_%d/output_%d.pb", dir, casename, set, i);
        nest_value r = nest_result(g, i);
        tensor t;
        read_tensor(path, &t);
        want[i] = t.data, types[i] = t.type, counts[i] = t.count;
        int64_t n = 1;
        for (int d = 0; d < nest_value_rank(g, r); d++)
            n *= nest_value_shape(g, r)[d];
        if (i >= 64 || !want[i] || types[i] != nest_value_type(g, r) || counts[i] != n) {
            snprintf(why, nwhy, "output %d: the model computes %s[%lld], expected %s", i,
                     nest_type_name((nest_type)nest_value_type(g, r)), (long long)n,
                     want[i] ? "another type or count" : "(unreadable)");
            st = FAIL;
            break;
        }
        got[i] = calloc((size_t)n + 1, nest_type_size((nest_type)types[i]));
    }
    if (st == PASS && nest_call_dims(k, dims, nd, args, np, got, nr) != NEST_OK) {
        snprintf(why, nwhy, "call: %.900s", nest_kernel_errmsg(k));
        st = FAIL;
    }
    for (int i = 0; i < nr && st == PASS; i++) {
        for (int64_t j = 0; j < counts[i]; j++) {
            double w = value_at(want[i], types[i], j), v = value_at(got[i], types[i], j);
            bool ok = types[i] == NEST_F32 || types[i] == NEST_F64
                          ? (isnan(w) ? isnan(v)
                             : isinf(w) ? v == w
                                        : fabs(v - w) <= abs_tol + rel_tol * fabs(w))
                          : v == w;
            if (!ok) {
                snprintf(why, nwhy, "data set %d: output %d element %lld: %.9g, expected %.9g",
                         set, i, (long long)j, v, w);
                st = FAIL;
                break;
            }
        }
    }
    for (int i = 0; i < nr; i++) {
        free(want[i]);
        free(got[i]);
    }
    free(args);
    free(want);
    free(got);
    if (g != f)
        nest_function_free(g);
    return st;
}

/* Runs one case; *fixed says whether inputs were fixed at import: 1 some, 2 all of them (the
 * function then has no parameters: computed at import entirely). */
static int run_case(const char *dir, const char *casename, const tcase *tc, int *fixed,
                    char *why, size_t nwhy)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, casename);
    bool fix[64] = {false};
    nest_function *f = import_case(path, tc, fix);
    *fixed = 0;
    while (f && nest_errcode(f) != NEST_OK && fix_more(tc, nest_errmsg(f), fix)) {
        nest_function_free(f);
        f = import_case(path, tc, fix);
        *fixed = 1;
    }
    if (!f) {
        snprintf(why, nwhy, "out of memory");
        return FAIL;
    }
    if (nest_errcode(f) != NEST_OK) {
        snprintf(why, nwhy, "%.1000s", nest_errmsg(f));
        nest_function_free(f);
        return SKIP;
    }
    int np = nest_param_count(f), st = PASS;
    if (*fixed && np == 0)
        *fixed = 2;
    nest_kernel *k = nest_compile(f, NULL);
    if (!k) {
        snprintf(why, nwhy, "compile: %.400s", nest_errmsg(f));
        st = FAIL;
    }
    /* every data set the case has, through the one kernel (of every size, for symbolic dims) */
    tcase more = {0};
    for (int set = 0; st == PASS && (set == 0 || !*fixed); set++) {
        const tcase *t = tc;
        if (set > 0) {
            case_free(&more);
            if (!case_inputs(dir, casename, &more, set))
                break;
            t = &more;
        }
        st = run_set(f, k, dir, casename, set, t, fix, why, nwhy);
    }
    case_free(&more);
    nest_kernel_free(k);
    nest_function_free(f);
    return st;
}

/* The operator an import error says is unsupported, or "". */
static void unsupported_op(const char *why, char *op, size_t n)
{
    const char *at = strstr(why, "operator ");
    char name[64] = "";
    if (!at || sscanf(at, "operator %63s is not supported", name) != 1)
        name[0] = '\0';
    snprintf(op, n, "%s", name);
}

/* Why a refused case may be skipped under --required or --all (NULL: it may not). */
static const char *excuse(const char *casename, const char *why)
{
    if (all_required)
        return NULL;
    for (size_t i = 0; i < sizeof lacks / sizeof lacks[0]; i++)
        if (strstr(why, lacks[i]))
            return "needs what nest lacks";
    char other[64];
    unsupported_op(why, other, sizeof other);
    size_t n = strlen(casename);
    if (n > 9 && strcmp(casename + n - 9, "_expanded") == 0 && other[0] && !IN(listed, other))
        return "expands into an operator outside the list";
    return NULL;
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
            quiet = true;
        else if (strcmp(argv[i], "--required") == 0)
            required = true;
        else if (strcmp(argv[i], "--all") == 0)
            all_required = true;
        else
            dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: onnx_cases [--rtol R] [--atol A] [--table FILE.md] [--quiet] "
                "[--required] [--all] DIR\n");
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
    int passed = 0, failed = 0, skipped = 0, fixed_passed = 0, folded = 0, lacking = 0;
    int outside = 0;
    for (size_t i = 0; i < n; i++) {
        char why[1200] = "";
        tcase tc;
        case_load(dir, names[i], &tc, 0);
        int fixed;
        int st = run_case(dir, names[i], &tc, &fixed, why, sizeof why);
        const char *ok = NULL;
        if (st == SKIP && (all_required || (required && IN(listed, tc.op)))) {
            if (!(ok = excuse(names[i], why))) {
                char refused[sizeof why];
                snprintf(refused, sizeof refused, "refused, and it must pass: %.1150s", why);
                memcpy(why, refused, sizeof why);
                st = FAIL;
            }
        }
        opcount *oc = count_for(tc.op);
        if (st == PASS) {
            passed++, oc->passed++;
            fixed_passed += fixed > 0;
            folded += fixed == 2;
        } else if (st == FAIL) {
            failed++, oc->failed++;
            printf("FAIL %s (%s): %s\n", names[i], tc.op, why);
        } else {
            skipped++, oc->skipped++;
            if (ok && ok[0] == 'n')
                lacking++;
            else if (ok)
                outside++;
            if (!quiet)
                printf("skip %s (%s%s%s): %.300s%s\n", names[i], tc.op, ok ? ", " : "",
                       ok ? ok : "", why, strlen(why) > 300 ? "..." : "");
        }
        case_free(&tc);
        free(names[i]);
    }
    free(names);
    if (table) {
        FILE *out = fopen(table, "w");
        if (out) {
            qsort(ops, (size_t)nops, sizeof ops[0], op_order);
            fprintf(out, "| operator | passed | failed | skipped |\n|---|---|---|---|\n");
            for (int i = 0; i < nops; i++)
                if (IN(listed, ops[i].name))
                    fprintf(out, "| %s | %d | %d | %d |\n", ops[i].name, ops[i].passed,
                            ops[i].failed, ops[i].skipped);
            fprintf(out, "| **all** (the listed operators and the others) | %d | %d | %d |\n",
                    passed, failed, skipped);
            fclose(out);
        }
    }
    printf("onnx: %d passed (%d with inputs fixed at import, %d of them computed at import "
           "entirely), %d failed, %d skipped", passed, fixed_passed, folded, failed, skipped);
    if (required)
        printf(" (of listed operators: %d need what nest lacks, %d expand into other operators)",
               lacking, outside);
    printf("\n");
    return failed ? 1 : 0;
}
