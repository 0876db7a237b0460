/*
 * onnx_read.c - the ONNX importer: reads a ModelProto (protobuf-c over onnx.proto), checks the
 * graph (opsets, names, types, order, cycles), decodes initializers and external data, and
 * builds a nest function node by node with the lowerings of onnx_ops.c. A node whose inputs are
 * all known at import is evaluated then (the reference interpreter on a scratch function), so
 * the shape subgraphs PyTorch writes fold to constants.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.h"

/* ONNX TensorProto.DataType values nest reads, and names for messages. */
enum { DT_FLOAT = 1, DT_INT32 = 6, DT_INT64 = 7, DT_BOOL = 9, DT_DOUBLE = 11 };
static const char *const dt_names[] = {
    "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
    "bool", "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16",
};

static const char *dt_name(int32_t dt)
{
    return dt >= 0 && (size_t)dt < countof(dt_names) ? dt_names[dt] : "unknown";
}

/* The nest type of an ONNX data type, or -1. */
static int dt_type(int32_t dt)
{
    switch (dt) {
    case DT_FLOAT: return NEST_F32;
    case DT_DOUBLE: return NEST_F64;
    case DT_INT32: return NEST_I32;
    case DT_INT64: return NEST_I64;
    case DT_BOOL: return NEST_BOOL;
    default: return -1;
    }
}

struct ox_model {
    nest_function *f;
    arena a;                    /* entries, known tensors, names */
    const char *file;           /* for messages */
    const char *dir;            /* external data: the model's folder, or NULL */
    const nest_onnx_options *opts;
    Onnx__ModelProto *proto;
    int64_t opset;
    ox_entry *tab;              /* open addressing by name */
    size_t cap, n;
    int32_t node_index;         /* the node being lowered, for messages */
    const Onnx__GraphProto *g;
    bool *absorbed;             /* per node: computed by an earlier one (ox_absorb) */
};

/* ---- errors ---- */

/* Records "FILE: [node 3 'conv1' (Conv, opset 13): ]message" on the function (n may be NULL). */
static int report(ox_model *m, int32_t index, const Onnx__NodeProto *n, int status,
                  const char *fmt, va_list ap)
{
    buf b = {0};
    buf_printf(&b, "%s: ", m->file);
    if (n) {
        buf_printf(&b, "node %d", index);
        if (n->name && n->name[0])
            buf_printf(&b, " '%.200s'", n->name);
        buf_printf(&b, " (%.100s%s%.100s, opset %lld): ", n->op_type ? n->op_type : "?",
                   n->domain && n->domain[0] ? " of domain " : "", n->domain ? n->domain : "",
                   (long long)m->opset);
    }
    buf_vprintf(&b, fmt, ap);
    char *s = buf_finish(&b);
    ir_error(m->f, s ? status : NEST_ERR_NOMEM, "%s", s ? s : "out of memory");
    free(s);
    return status;
}

static int model_err(ox_model *m, int status, const char *fmt, ...) FORMAT(3, 4);
static int model_err(ox_model *m, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(m, 0, NULL, status, fmt, ap);
    va_end(ap);
    return status;
}

static int node_err(ox_model *m, int32_t index, const Onnx__NodeProto *n, int status,
                    const char *fmt, ...) FORMAT(5, 6);
static int node_err(ox_model *m, int32_t index, const Onnx__NodeProto *n, int status,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(m, index, n, status, fmt, ap);
    va_end(ap);
    return status;
}

int ox_err(ox *c, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(c->m, c->m->node_index, c->node, status, fmt, ap);
    va_end(ap);
    return status;
}

/* ---- the table of names ---- */

/* The entry of a name: found, or (with add) made; NULL when out of memory or not found. */
static ox_entry *entry(ox_model *m, const char *name, bool add)
{
    if (add && (m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        ox_entry *t = arena_array(&m->a, cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->tab[i].name)
                continue;
            size_t j = hash_bytes(m->tab[i].name, strlen(m->tab[i].name)) & (cap - 1);
            while (t[j].name)
                j = (j + 1) & (cap - 1);
            t[j] = m->tab[i];
        }
        m->tab = t;
        m->cap = cap;
    }
    if (!m->cap)
        return NULL;
    size_t j = hash_bytes(name, strlen(name)) & (m->cap - 1);
    while (m->tab[j].name) {
        if (strcmp(m->tab[j].name, name) == 0)
            return &m->tab[j];
        j = (j + 1) & (m->cap - 1);
    }
    if (!add)
        return NULL;
    m->n++;
    m->tab[j].name = name;
    m->tab[j].v = NEST_NONE;
    m->tab[j].user = -1;
    return &m->tab[j];
}

/* ---- names for the C ---- */

/* An identifier from the first n bytes of src (at most 200 of them) into s, which holds n + 4:
 * other bytes become '_', a name that starts with no letter gets `lead` in front, and one that
 * would be reserved, a keyword or a C library's name `lead` and '_'. */
static void c_ident(char *s, const char *src, size_t n, char lead)
{
    size_t k = 0;
    if (n == 0 || !((src[0] >= 'a' && src[0] <= 'z') || (src[0] >= 'A' && src[0] <= 'Z')))
        s[k++] = lead;
    for (size_t i = 0; i < n && k < 200; i++) {
        char ch = src[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        s[k++] = ok ? ch : '_';
    }
    s[k] = '\0';
    if (is_c_keyword(s) || strncmp(s, "nest_", 5) == 0 || is_c_library_name(s)) {
        memmove(s + 2, s, k + 1);
        s[0] = lead, s[1] = '_';
    }
}

/* A valid, unused name for f from an ONNX name (c_ident's, with 'v'), a taken one with a number
 * behind. */
static char *c_name(ox_model *m, const char *onnx, const char *fallback)
{
    char s[IR_MAX_NAME + 1];
    const char *src = onnx && onnx[0] ? onnx : fallback;
    c_ident(s, src, strlen(src), 'v');
    char try[IR_MAX_NAME + 1];
    snprintf(try, sizeof try, "%.250s", s);
    for (int k = 2; ir_find_name(m->f, try) >= 0 || strcmp(try, m->f->name) == 0; k++)
        snprintf(try, sizeof try, "%.200s_%d", s, k);
    return arena_strdup(&m->a, try);
}

/* ---- tensors ---- */

int64_t ox_int_at(const ox_tensor *t, int64_t i)
{
    if (t->count == 1)
        i = 0;
    switch (t->etype) {
    case NEST_F32: return (int64_t)((const float *)t->data)[i];
    case NEST_F64: return (int64_t)((const double *)t->data)[i];
    case NEST_I32: return ((const int32_t *)t->data)[i];
    case NEST_I64: return ((const int64_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
    }
}

double ox_float_at(const ox_tensor *t, int64_t i)
{
    if (t->count == 1)
        i = 0;
    switch (t->etype) {
    case NEST_F32: return ((const float *)t->data)[i];
    case NEST_F64: return ((const double *)t->data)[i];
    default: return (double)ox_int_at(t, i);
    }
}

/* Reads `len` bytes at `offset` of an external data file: `location` is relative to the model's
 * folder and may not leave it. */
static void *read_external(ox *c, ox_model *m, const char *what, const char *location,
                           int64_t offset, int64_t len)
{
    if (!m->dir) {
        ox_err(c, NEST_ERR_ARG, "%s: external data '%.200s' needs the model's folder (import "
               "from a file, or give data_dir)", what, location);
        return NULL;
    }
    if (!location[0] || location[0] == '/' || strstr(location, "..") || strchr(location, '\\')) {
        ox_err(c, NEST_ERR_ARG, "%s: external data location '%.200s' is not a plain path "
               "inside the model's folder", what, location);
        return NULL;
    }
    buf p = {0};
    buf_printf(&p, "%s/%s", m->dir, location);
    char *path = buf_finish(&p);
    FILE *in = path ? fopen(path, "rb") : NULL;
    void *data = NULL;
    if (!in) {
        ox_err(c, NEST_ERR_IO, "%s: cannot open external data %s: %s", what,
               path ? path : location, path ? strerror(errno) : "out of memory");
        free(path);
        return NULL;
    }
    if (fseeko(in, 0, SEEK_END) != 0 || ftello(in) < offset + len) {
        ox_err(c, NEST_ERR_IO, "%s: external data %s holds fewer than %lld bytes from offset "
               "%lld", what, path, (long long)len, (long long)offset);
    } else if (!(data = arena_alloc(&m->a, (size_t)len + 1))) {
        ox_err(c, NEST_ERR_NOMEM, "%s: out of memory for %lld bytes", what, (long long)len);
    } else if (fseeko(in, offset, SEEK_SET) != 0 || fread(data, 1, (size_t)len, in) != (size_t)len) {
        ox_err(c, NEST_ERR_IO, "%s: reading external data %s failed", what, path);
        data = NULL;
    }
    fclose(in);
    free(path);
    return data;
}

ox_tensor *ox_decode(ox *c, const Onnx__TensorProto *t, const char *what)
{
    ox_model *m = c->m;
    int etype = dt_type(t->data_type);
    if (etype < 0) {
        ox_err(c, NEST_ERR_TYPE, "%s: element type %s is not supported (float, double, int32, "
               "int64, bool)", what, dt_name(t->data_type));
        return NULL;
    }
    if (t->n_dims > NEST_MAX_RANK) {
        ox_err(c, NEST_ERR_LIMIT, "%s: rank %zu is above %d", what, t->n_dims, NEST_MAX_RANK);
        return NULL;
    }
    ox_tensor *k = arena_alloc(&m->a, sizeof *k);
    if (!k) {
        ox_err(c, NEST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    k->etype = etype;
    k->rank = (int)t->n_dims;
    int64_t count = 1;
    size_t esize = nest_type_size((nest_type)etype);
    for (int i = 0; i < k->rank; i++) {
        k->shape[i] = t->dims[i];
        if (t->dims[i] < 0 || mul_overflows(count, t->dims[i], &count) ||
            count > IR_MAX_BYTES / 8) {
            ox_err(c, NEST_ERR_LIMIT, "%s: dimension %d is %lld (negative or too large)", what, i,
                   (long long)t->dims[i]);
            return NULL;
        }
    }
    k->count = count;
    const void *src = NULL;
    size_t have = 0; /* elements in the typed fields */
    const char *location = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value)
            continue;
        if (strcmp(e->key, "location") == 0)
            location = e->value;
        else if (strcmp(e->key, "offset") == 0)
            offset = strtoll(e->value, NULL, 10);
        else if (strcmp(e->key, "length") == 0)
            length = strtoll(e->value, NULL, 10);
    }
    size_t bytes = (size_t)count * esize;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (!location) {
            ox_err(c, NEST_ERR_ARG, "%s: external data without a location", what);
            return NULL;
        }
        if (offset < 0 || (length >= 0 && (uint64_t)length != bytes)) {
            ox_err(c, NEST_ERR_ARG, "%s: external data of %lld bytes at offset %lld; the tensor "
                   "holds %zu", what, (long long)length, (long long)offset, bytes);
            return NULL;
        }
        if (!(k->data = read_external(c, m, what, location, offset, (int64_t)bytes)))
            return NULL;
        return k;
    }
    if (t->has_raw_data) {
        if (t->raw_data.len != bytes) {
            ox_err(c, NEST_ERR_ARG, "%s: %zu bytes of data for %lld elements of %s", what,
                   t->raw_data.len, (long long)count, dt_name(t->data_type));
            return NULL;
        }
        src = t->raw_data.data;
    } else {
        switch (t->data_type) {
        case DT_FLOAT: src = t->float_data, have = t->n_float_data; break;
        case DT_DOUBLE: src = t->double_data, have = t->n_double_data; break;
        case DT_INT64: src = t->int64_data, have = t->n_int64_data; break;
        default: src = t->int32_data, have = t->n_int32_data; break; /* int32, bool */
        }
        if (have != (size_t)count) {
            ox_err(c, NEST_ERR_ARG, "%s: %zu values for %lld elements", what, have,
                   (long long)count);
            return NULL;
        }
    }
    if (!(k->data = arena_alloc(&m->a, bytes + 1))) {
        ox_err(c, NEST_ERR_NOMEM, "%s: out of memory for %zu bytes", what, bytes);
        return NULL;
    }
    if (etype == NEST_BOOL && !t->has_raw_data) {
        for (int64_t i = 0; i < count; i++)
            ((uint8_t *)k->data)[i] = ((const int32_t *)src)[i] != 0;
    } else if (etype == NEST_BOOL) {
        for (int64_t i = 0; i < count; i++)
            ((uint8_t *)k->data)[i] = ((const uint8_t *)src)[i] != 0;
    } else if (bytes) {
        memcpy(k->data, src, bytes);
    }
    return k;
}

/* ---- what the lowerings read ---- */

bool ox_has(const ox *c, int i) { return i >= 0 && i < c->nin && c->in[i]; }

/* The entry's value as a constant of f. */
static nest_value make_constant(nest_function *f, const ox_tensor *k)
{
    return nest_constant(f, (nest_type)k->etype, k->rank, k->shape, k->data, k->count);
}

/* Decodes an initializer on first use. */
static const ox_tensor *known(ox *c, ox_entry *e)
{
    if (!e->k && e->init) {
        char what[300];
        snprintf(what, sizeof what, "initializer '%.200s'", e->name);
        e->k = ox_decode(c, e->init, what);
        if (e->k)
            e->init = NULL;
    }
    return e->k;
}

nest_value ox_in(ox *c, int i)
{
    if (!ox_has(c, i)) {
        ox_err(c, NEST_ERR_ARG, "input %d is missing", i + 1);
        return NEST_NONE;
    }
    if (c->inv[i] != NEST_NONE)
        return c->inv[i];
    ox_entry *e = c->in[i];
    if (c->f == c->m->f && e->v != NEST_NONE)
        return c->inv[i] = e->v;
    const ox_tensor *k = known(c, e);
    if (!k)
        return NEST_NONE;
    nest_value v = make_constant(c->f, k);
    if (c->f == c->m->f && v != NEST_NONE) {
        e->v = v;
        const char *nm = c_name(c->m, e->name, "w");
        if (nm && nest_set_name(c->f, v, nm) != NEST_OK)
            return c->inv[i] = NEST_NONE;
    }
    return c->inv[i] = v;
}

const ox_tensor *ox_known(ox *c, int i)
{
    if (!ox_has(c, i)) {
        ox_err(c, NEST_ERR_ARG, "input %d is missing", i + 1);
        return NULL;
    }
    ox_entry *e = c->in[i];
    if (!e->k && !e->init) {
        ox_err(c, NEST_ERR_ARG, "input %d ('%.200s') must be known at import (an initializer, "
               "a Constant or computed from them); nest does not compute it at run time",
               i + 1, e->name);
        return NULL;
    }
    return known(c, e);
}

const ox_tensor *ox_peek(ox *c, int i)
{
    if (!ox_has(c, i) || (!c->in[i]->k && !c->in[i]->init))
        return NULL;
    return known(c, c->in[i]);
}

const ox_tensor *ox_peek_name(ox *c, const char *name)
{
    ox_entry *e = name && name[0] ? entry(c->m, name, false) : NULL;
    if (!e || !e->defined || (!e->k && !e->init))
        return NULL;
    return known(c, e);
}

nest_function *ox_dims_fn(const ox *c) { return c->m->f; }

const Onnx__NodeProto *ox_sole_user(ox *c, int out, int32_t *index)
{
    if (out >= c->nout || !c->node->output[out] || !c->node->output[out][0])
        return NULL;
    ox_entry *e = entry(c->m, c->node->output[out], false);
    if (!e || e->uses != 1 || e->user < 0)
        return NULL;
    *index = e->user;
    return c->m->g->node[e->user];
}

void ox_absorb(ox *c, int32_t index)
{
    if (c->f == c->m->f)
        c->absorb = index;
}

ox_tensor *ox_tensor_new(ox *c, int etype, int rank, const int64_t *shape)
{
    ox_tensor *k = arena_alloc(&c->m->a, sizeof *k);
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    size_t bytes = (size_t)n * nest_type_size((nest_type)etype);
    if (!k || !(k->data = arena_alloc(&c->m->a, bytes + 1))) {
        ox_err(c, NEST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    k->etype = etype;
    k->rank = rank;
    memcpy(k->shape, shape, (size_t)rank * sizeof *shape);
    k->count = n;
    return k;
}

nest_value ox_constant(ox *c, const ox_tensor *t, const char *onnx_name)
{
    nest_value v = make_constant(c->f, t);
    if (c->f == c->m->f && v != NEST_NONE) {
        const char *nm = c_name(c->m, onnx_name, "w");
        if (nm && nest_set_name(c->f, v, nm) != NEST_OK)
            return NEST_NONE;
    }
    return v;
}

int ox_known_ints(ox *c, int i, int64_t *out, int max)
{
    const ox_tensor *k = ox_known(c, i);
    if (!k)
        return -1;
    if (k->etype != NEST_I64 && k->etype != NEST_I32) {
        ox_err(c, NEST_ERR_TYPE, "input %d must be int64 or int32", i + 1);
        return -1;
    }
    int64_t n = 1;
    for (int d = 0; d < k->rank; d++)
        n *= k->shape[d];
    if (k->rank > 1 || n > max) {
        ox_err(c, NEST_ERR_LIMIT, "input %d holds %lld integers (at most %d in one dimension)",
               i + 1, (long long)n, max);
        return -1;
    }
    for (int64_t j = 0; j < n; j++)
        out[j] = ox_int_at(k, j);
    return (int)n;
}

const Onnx__AttributeProto *ox_attr(const ox *c, const char *name)
{
    for (size_t i = 0; i < c->node->n_attribute; i++)
        if (c->node->attribute[i]->name && strcmp(c->node->attribute[i]->name, name) == 0)
            return c->node->attribute[i];
    return NULL;
}

int64_t ox_attr_int(const ox *c, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = ox_attr(c, name);
    return a && a->has_i ? a->i : dflt;
}

float ox_attr_float(const ox *c, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = ox_attr(c, name);
    return a && a->has_f ? a->f : dflt;
}

const char *ox_attr_str(const ox *c, const char *name, const char *dflt)
{
    const Onnx__AttributeProto *a = ox_attr(c, name);
    if (!a || !a->has_s)
        return dflt;
    /* protobuf-c keeps bytes unterminated: copy them */
    char *s = arena_alloc(&c->m->a, a->s.len + 1);
    if (!s)
        return dflt;
    memcpy(s, a->s.data, a->s.len);
    return s;
}

int ox_attr_ints(ox *c, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = ox_attr(c, name);
    if (!a)
        return -1;
    if (a->n_ints > (size_t)max) {
        ox_err(c, NEST_ERR_LIMIT, "attribute %s has %zu values (at most %d)", name, a->n_ints,
               max);
        return -2;
    }
    for (size_t i = 0; i < a->n_ints; i++)
        out[i] = a->ints[i];
    return (int)a->n_ints;
}

/* ---- the graph ---- */

/* The size of a dimension named param (dim_param): the value the options give it (by the name
 * as written or as the identifier below), else a symbolic dim of f named param made an
 * identifier (c_ident's, with 'd'), one per name, into *out. NEST_OK or the error on m. */
static int named_dim(ox_model *m, const char *what, const char *name, size_t i,
                     const char *param, int64_t *out)
{
    char id[IR_MAX_NAME + 1];
    size_t len = strlen(param);
    c_ident(id, param, len < 200 ? len : 200, 'd');
    for (int j = 0; m->opts && j < m->opts->ndims; j++) {
        const char *given = m->opts->dims[j].name;
        if (!given || (strcmp(given, param) != 0 && strcmp(given, id) != 0))
            continue;
        *out = m->opts->dims[j].value;
        if (*out < 0)
            return model_err(m, NEST_ERR_ARG, "dimension '%.100s' is given as %lld", param,
                             (long long)*out);
        return NEST_OK;
    }
    if ((*out = dim_name(m->f, id, strlen(id))) != DIM_NONE)
        return NEST_OK;
    char why[300];
    snprintf(why, sizeof why, "%s", nest_errmsg(m->f));
    return model_err(m, m->f->status ? m->f->status : NEST_ERR_ARG, "%s '%.200s': dimension "
                     "%zu is '%.100s' (%s): give its value (nestc --dim %.100s=N)", what, name,
                     i, param, why, param);
}

/* The type and shape of a graph input or output; a dim named by dim_param takes its value
 * from the options, else it stays symbolic (named_dim). */
static int value_type(ox_model *m, const Onnx__ValueInfoProto *vi, const char *what, int *etype,
                      int *rank, int64_t *shape)
{
    const char *name = vi->name ? vi->name : "";
    const Onnx__TypeProto *t = vi->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
        !t->tensor_type->has_elem_type)
        return model_err(m, NEST_ERR_TYPE, "%s '%.200s' is not a tensor with an element type",
                         what, name);
    *etype = dt_type(t->tensor_type->elem_type);
    if (*etype < 0)
        return model_err(m, NEST_ERR_TYPE, "%s '%.200s': element type %s is not supported "
                         "(float, double, int32, int64, bool)", what, name,
                         dt_name(t->tensor_type->elem_type));
    const Onnx__TensorShapeProto *s = t->tensor_type->shape;
    if (!s)
        return model_err(m, NEST_ERR_ARG, "%s '%.200s' has no shape", what, name);
    if (s->n_dim > NEST_MAX_RANK)
        return model_err(m, NEST_ERR_LIMIT, "%s '%.200s' has rank %zu (at most %d)", what, name,
                         s->n_dim, NEST_MAX_RANK);
    *rank = (int)s->n_dim;
    for (size_t i = 0; i < s->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            shape[i] = d->dim_value;
            if (d->dim_value < 0)
                return model_err(m, NEST_ERR_ARG, "%s '%.200s': dimension %zu is %lld", what,
                                 name, i, (long long)d->dim_value);
            continue;
        }
        if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ||
            !d->dim_param || !d->dim_param[0])
            return model_err(m, NEST_ERR_ARG, "%s '%.200s': dimension %zu has no size", what,
                             name, i);
        int st = named_dim(m, what, name, i, d->dim_param, &shape[i]);
        if (st != NEST_OK)
            return st;
    }
    return NEST_OK;
}

/* The order the nodes run in: the file's when every input comes before its use (as ONNX
 * asks), else a topological one (Kahn's; finding the users scans the nodes, quadratic only for
 * files out of order). Undefined inputs and cycles are errors naming the node. On entry the
 * node outputs are marked undefined; on return defined. */
static int node_order(ox_model *m, const Onnx__GraphProto *g, int32_t *order)
{
    size_t nn = g->n_node;
    bool in_order = true;
    for (size_t i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j] || !n->input[j][0])
                continue;
            ox_entry *e = entry(m, n->input[j], false);
            if (!e)
                return node_err(m, (int32_t)i, n, NEST_ERR_ARG, "input '%.200s' is not a graph "
                                "input, an initializer or the output of a node", n->input[j]);
            if (!e->defined)
                in_order = false;
        }
        for (size_t j = 0; j < n->n_output; j++)
            if (n->output[j] && n->output[j][0])
                entry(m, n->output[j], false)->defined = true;
        order[i] = (int32_t)i;
    }
    if (in_order)
        return NEST_OK;
    for (size_t i = 0; i < nn; i++)
        for (size_t j = 0; j < g->node[i]->n_output; j++)
            if (g->node[i]->output[j] && g->node[i]->output[j][0])
                entry(m, g->node[i]->output[j], false)->defined = false;
    int32_t *missing = calloc(nn + 1, sizeof *missing); /* inputs not yet defined */
    int32_t *queue = calloc(nn + 1, sizeof *queue);
    if (!missing || !queue) {
        free(missing);
        free(queue);
        return model_err(m, NEST_ERR_NOMEM, "out of memory");
    }
    int32_t nq = 0, head = 0;
    for (size_t i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t j = 0; j < n->n_input; j++)
            if (n->input[j] && n->input[j][0] && !entry(m, n->input[j], false)->defined)
                missing[i]++;
        if (missing[i] == 0)
            queue[nq++] = (int32_t)i;
    }
    while (head < nq) {
        int32_t k = queue[head];
        order[head++] = k;
        const Onnx__NodeProto *n = g->node[k];
        for (size_t o = 0; o < n->n_output; o++) {
            if (!n->output[o] || !n->output[o][0])
                continue;
            for (size_t i = 0; i < nn; i++) {
                const Onnx__NodeProto *u = g->node[i];
                for (size_t j = 0; j < u->n_input; j++)
                    if (u->input[j] && strcmp(u->input[j], n->output[o]) == 0 &&
                        --missing[i] == 0)
                        queue[nq++] = (int32_t)i;
            }
        }
    }
    int st = NEST_OK;
    for (size_t i = 0; i < nn; i++) {
        for (size_t j = 0; j < g->node[i]->n_output; j++)
            if (g->node[i]->output[j] && g->node[i]->output[j][0])
                entry(m, g->node[i]->output[j], false)->defined = true;
        if (st == NEST_OK && missing[i] > 0)
            st = node_err(m, (int32_t)i, g->node[i], NEST_ERR_ARG,
                          "its inputs depend on its own outputs (a cycle in the graph)");
    }
    free(missing);
    free(queue);
    return st;
}

/* Whether evaluating the scratch function of a node would make more than OX_FOLD_BYTES. */
static bool fold_too_large(const nest_function *scratch)
{
    int64_t bytes = 0;
    for (int32_t i = 0; i < scratch->nnodes; i++) {
        const ir_node *r = &scratch->nodes[i];
        if (r->etype == IR_TUPLE)
            continue;
        bytes += ir_count(r) * (int64_t)nest_type_size((nest_type)r->etype);
        if (bytes > OX_FOLD_BYTES)
            return true;
    }
    return false;
}

/* Integers holding the function's symbolic dims (a Shape of a symbolic value, ox_tensor's
 * dims) are used at import only, by a node whose inputs are all known, its outputs then
 * holding dims too: moved (Concat, Identity, a Cast to int64, and Gather, Unsqueeze, Squeeze,
 * Slice of them as their data), or computed (Add, Sub, Mul, Div and Neg: their lowerings do
 * the dims' arithmetic when c->dims is set); or they are given as a Reshape's shape. Any other
 * use, which would compute with the dims' handles as numbers, is an error that says to give
 * the sizes. */
static int dims_use(ox *c, bool all_known)
{
    const char *op = c->node->op_type ? c->node->op_type : "";
    int first = -1;
    bool data_only = true; /* no input but the first holds dims */
    for (int i = 0; i < c->nin; i++)
        if (c->in[i] && c->in[i]->k && c->in[i]->k->dims) {
            first = first < 0 ? i : first;
            data_only &= i == 0;
        }
    if (first < 0)
        return NEST_OK;
    /* the ops that take dims in any input, and those that take them as their data only */
    static const char *const any[] = {"Concat", "Identity", "Add", "Sub", "Mul", "Div", "Neg"};
    static const char *const data[] = {"Gather", "Unsqueeze", "Squeeze", "Slice"};
    bool used = strcmp(op, "Cast") == 0 && ox_attr_int(c, "to", 0) == 7; /* to int64 */
    for (size_t i = 0; i < countof(any); i++)
        used |= strcmp(op, any[i]) == 0;
    for (size_t i = 0; data_only && i < countof(data); i++)
        used |= strcmp(op, data[i]) == 0;
    used &= all_known;
    if (used) {
        c->dims = true;
        return NEST_OK;
    }
    if (strcmp(op, "Reshape") == 0 && first == 1)
        return NEST_OK;
    return ox_err(c, NEST_ERR_ARG, "input %d ('%.200s') holds the model's symbolic dims (a "
                  "Shape's): %s of them is not computed; give the dims their sizes (nestc --dim "
                  "NAME=N)", first + 1, c->in[first]->name, op);
}

/* Lowers one node: into the function, or, when every input is known, into a scratch function
 * that the reference interpreter evaluates at once (the outputs become known tensors). */
static int lower_node(ox_model *m, const Onnx__NodeProto *n)
{
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return node_err(m, m->node_index, n, NEST_ERR_ARG, "operators of domain '%.100s' are "
                        "not supported (only the default domain)", n->domain);
    ox_lower_fn fn = ox_lookup(op);
    if (!fn) {
        buf b = {0};
        ox_supported(&b);
        char *list = buf_finish(&b);
        node_err(m, m->node_index, n, NEST_ERR_ARG, "operator %.100s is not supported; "
                 "supported: %s", op, list ? list : "?");
        free(list);
        return m->f->status;
    }
    if (n->n_input > 64 || n->n_output > 64)
        return node_err(m, m->node_index, n, NEST_ERR_LIMIT, "%zu inputs and %zu outputs (at "
                        "most 64 each)", n->n_input, n->n_output);
    for (size_t i = 0; i < n->n_attribute; i++)
        if (m->opset < 7 && n->attribute[i]->name && strcmp(n->attribute[i]->name, "broadcast") == 0)
            return node_err(m, m->node_index, n, NEST_ERR_ARG, "the legacy broadcast attribute "
                            "(before opset 7) is not supported");
    if (m->absorbed[m->node_index])
        return NEST_OK; /* an earlier node computed it */
    ox_entry *in[64];
    nest_value inv[64], out[64];
    ox c = {m, m->f, n, m->opset, (int)n->n_input, (int)n->n_output, in, inv, out, -1, false};
    bool all_known = true;
    int st0;
    for (size_t i = 0; i < n->n_input; i++) {
        in[i] = NULL;
        inv[i] = NEST_NONE;
        if (!n->input[i] || !n->input[i][0])
            continue;
        in[i] = entry(m, n->input[i], false);
        if (!in[i] || !in[i]->defined)
            return node_err(m, m->node_index, n, NEST_ERR_ARG, "input '%.200s' is not defined",
                            n->input[i]);
        if (!in[i]->k && !in[i]->init)
            all_known = false;
    }
    for (size_t i = 0; i < n->n_output; i++)
        out[i] = NEST_NONE;
    if ((st0 = dims_use(&c, all_known)) != NEST_OK)
        return st0;
    nest_function *scratch = NULL;
    if (all_known) {
        if (!(scratch = nest_function_new("fold")))
            return model_err(m, NEST_ERR_NOMEM, "out of memory");
        c.f = scratch;
    }
    int st = fn(&c);
    if (scratch && st == NEST_OK && scratch->status == NEST_OK && fold_too_large(scratch)) {
        /* at run time instead: lowered again into the function */
        nest_function_free(scratch);
        scratch = NULL;
        c.f = m->f;
        for (size_t i = 0; i < n->n_input; i++)
            inv[i] = NEST_NONE;
        for (size_t i = 0; i < n->n_output; i++)
            out[i] = NEST_NONE;
        st = fn(&c);
    }
    /* a builder failed (its message names the op and its operands, not the node): say where,
     * whether the converter went on or gave up (CHECK) */
    if (c.f->status != NEST_OK && strncmp(nest_errmsg(c.f), m->file, strlen(m->file)) != 0)
        st = ox_err(&c, c.f->status, "%s", nest_errmsg(c.f));
    if (st == NEST_OK && m->f->status != NEST_OK)
        st = m->f->status;
    for (size_t i = 0; st == NEST_OK && i < n->n_output; i++) {
        if (!n->output[i] || !n->output[i][0])
            continue;
        if (out[i] == NEST_NONE) {
            st = ox_err(&c, NEST_ERR_ARG, "output %zu is not supported", i + 1);
            break;
        }
        ox_entry *e = entry(m, n->output[i], false);
        const ir_node *r = &c.f->nodes[out[i]];
        if (!scratch) {
            e->v = out[i];
            if (r->op != OP_CONSTANT)
                continue;
        }
        /* known now: a constant (Shape of a run-time value), or evaluated */
        if (r->etype == IR_TUPLE) {
            st = ox_err(&c, NEST_ERR_ARG, "output %zu is a tuple", i + 1);
            break;
        }
        /* a constant may hold one value that fills its shape */
        ox_tensor *k = arena_alloc(&m->a, sizeof *k);
        int64_t count = r->op == OP_CONSTANT ? r->a.constant.count : ir_count(r);
        size_t bytes = (size_t)count * nest_type_size((nest_type)r->etype);
        if (!k || !(k->data = arena_alloc(&m->a, bytes + 1))) {
            st = model_err(m, NEST_ERR_NOMEM, "out of memory");
            break;
        }
        k->etype = r->etype;
        k->rank = r->rank;
        memcpy(k->shape, r->shape, (size_t)r->rank * sizeof *k->shape);
        k->count = count;
        k->dims = c.dims;
        if (r->op == OP_CONSTANT) {
            memcpy(k->data, r->a.constant.data, bytes);
        } else { /* in the scratch function */
            nest_value rv = out[i];
            void *res[1] = {k->data};
            if (nest_return(scratch, 1, &rv, NULL) != NEST_OK ||
                nest_evaluate(scratch, NULL, 0, res, 1) != NEST_OK) {
                st = ox_err(&c, nest_errcode(scratch), "evaluating at import: %s",
                            nest_errmsg(scratch));
                break;
            }
        }
        /* dims moved out of a Shape may all be plain (the model's width, by Gather): numbers */
        if (k->dims && k->etype == NEST_I64) {
            bool any = false;
            for (int64_t j = 0; j < count && !any; j++)
                any = dim_is_sym(((const int64_t *)k->data)[j]);
            k->dims = any;
        }
        e->k = k;
    }
    nest_function_free(scratch);
    if (st == NEST_OK && c.absorb >= 0) {
        /* the absorbed node's output is this node's */
        const Onnx__NodeProto *u = m->g->node[c.absorb];
        ox_entry *from = entry(m, n->output[0], false), *to = entry(m, u->output[0], false);
        to->v = from->v;
        to->k = from->k;
        m->absorbed[c.absorb] = true;
    }
    return st;
}

/* Counts the uses of every name (node inputs, graph outputs) and remembers a user. */
static void count_uses(ox_model *m, const Onnx__GraphProto *g)
{
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t j = 0; j < n->n_input; j++) {
            ox_entry *e = n->input[j] && n->input[j][0] ? entry(m, n->input[j], false) : NULL;
            if (e) {
                e->uses++;
                e->user = (int32_t)i;
            }
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        ox_entry *e = g->output[i]->name ? entry(m, g->output[i]->name, false) : NULL;
        if (e) {
            e->uses++;
            e->user = -1;
        }
    }
}

/* The value the options give a graph input, or NULL. */
static const nest_onnx_input *fixed_input(const ox_model *m, const char *name)
{
    for (int i = 0; m->opts && i < m->opts->ninputs; i++)
        if (m->opts->inputs[i].name && strcmp(m->opts->inputs[i].name, name) == 0)
            return &m->opts->inputs[i];
    return NULL;
}

/* A graph input's given value as a known tensor, checked against its declared type and shape
 * (a named dim takes any size); NULL with the error. */
static ox_tensor *fixed_value(ox_model *m, const Onnx__ValueInfoProto *vi,
                              const nest_onnx_input *fix)
{
    const char *name = vi->name;
    int64_t count = 1;
    if ((unsigned)fix->type > NEST_BOOL || fix->rank < 0 || fix->rank > NEST_MAX_RANK ||
        (fix->rank > 0 && !fix->shape)) {
        model_err(m, NEST_ERR_ARG, "the value given for graph input '%.200s' has an invalid "
                  "type or rank", name);
        return NULL;
    }
    for (int i = 0; i < fix->rank; i++) {
        if (fix->shape[i] < 0 || mul_overflows(count, fix->shape[i], &count) ||
            count > IR_MAX_BYTES / 8) {
            model_err(m, NEST_ERR_ARG, "the value given for graph input '%.200s': dimension %d "
                      "is %lld", name, i, (long long)fix->shape[i]);
            return NULL;
        }
    }
    if (count > 0 && !fix->data) {
        model_err(m, NEST_ERR_ARG, "the value given for graph input '%.200s' has no data", name);
        return NULL;
    }
    const Onnx__TypeProto *t = vi->type;
    if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type) {
        const Onnx__TypeProto__Tensor *tt = t->tensor_type;
        if (tt->has_elem_type && dt_type(tt->elem_type) != (int)fix->type) {
            model_err(m, NEST_ERR_TYPE, "graph input '%.200s' is declared %s; the value given "
                      "is %s", name, dt_name(tt->elem_type), nest_type_name(fix->type));
            return NULL;
        }
        const Onnx__TensorShapeProto *sh = tt->shape;
        bool fits = !sh || sh->n_dim == (size_t)fix->rank;
        for (size_t i = 0; fits && sh && i < sh->n_dim; i++)
            fits = sh->dim[i]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
                   sh->dim[i]->dim_value == fix->shape[i];
        if (!fits) {
            buf b = {0};
            ir_format_shape(&b, fix->rank, fix->shape);
            char *given = buf_finish(&b);
            model_err(m, NEST_ERR_TYPE, "the value given for graph input '%.200s' has shape %s, "
                      "not the declared one", name, given ? given : "?");
            free(given);
            return NULL;
        }
    }
    size_t bytes = (size_t)count * nest_type_size(fix->type);
    ox_tensor *k = arena_alloc(&m->a, sizeof *k);
    if (!k || !(k->data = arena_alloc(&m->a, bytes + 1))) {
        model_err(m, NEST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    k->etype = (int)fix->type;
    k->rank = fix->rank;
    memcpy(k->shape, fix->shape, (size_t)fix->rank * sizeof *k->shape);
    k->count = count;
    if (bytes)
        memcpy(k->data, fix->data, bytes);
    if (fix->type == NEST_BOOL)
        for (int64_t i = 0; i < count; i++)
            ((uint8_t *)k->data)[i] = ((uint8_t *)k->data)[i] != 0;
    return k;
}

static int import_graph(ox_model *m)
{
    const Onnx__ModelProto *mp = m->proto;
    const Onnx__GraphProto *g = mp->graph;
    if (!g)
        return model_err(m, NEST_ERR_ARG, "the model has no graph");
    for (int i = 0; m->opts && i < m->opts->ninputs; i++) {
        const char *name = m->opts->inputs[i].name;
        bool found = false;
        for (size_t j = 0; name && !found && j < g->n_input; j++)
            found = g->input[j]->name && strcmp(g->input[j]->name, name) == 0;
        if (!found)
            return model_err(m, NEST_ERR_ARG, "a value is given for '%.200s', which is not a "
                             "graph input", name ? name : "(NULL)");
    }
    m->opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0)
            m->opset = o->has_version ? o->version : -1;
    }
    if (mp->n_opset_import == 0)
        return model_err(m, NEST_ERR_ARG, "the model names no opset (truncated, or older than "
                         "IR version 3)");
    if (m->opset < OX_MIN_OPSET || m->opset > OX_MAX_OPSET)
        return model_err(m, NEST_ERR_ARG, "opset %lld of the default domain is not supported "
                         "(%d to %d)", (long long)m->opset, OX_MIN_OPSET, OX_MAX_OPSET);

    /* initializers, then inputs, then node outputs: each name defined once */
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0])
            return model_err(m, NEST_ERR_ARG, "initializer %zu has no name", i);
        ox_entry *e = entry(m, t->name, true);
        if (!e)
            return model_err(m, NEST_ERR_NOMEM, "out of memory");
        if (e->defined)
            return model_err(m, NEST_ERR_ARG, "initializer '%.200s' is given twice", t->name);
        e->defined = true;
        e->init = t;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi->name || !vi->name[0])
            return model_err(m, NEST_ERR_ARG, "graph input %zu has no name", i);
        ox_entry *e = entry(m, vi->name, true);
        if (!e)
            return model_err(m, NEST_ERR_NOMEM, "out of memory");
        if (e->defined && !e->init)
            return model_err(m, NEST_ERR_ARG, "graph input '%.200s' is given twice", vi->name);
        const nest_onnx_input *fix = fixed_input(m, vi->name);
        if (fix) {
            if (!(e->k = fixed_value(m, vi, fix)))
                return m->f->status;
            e->init = NULL;
            e->defined = true;
            continue;
        }
        if (e->defined)
            continue; /* an initializer listed as an input (IR version 3): a weight */
        int etype = 0, rank = 0;
        int64_t shape[NEST_MAX_RANK];
        int st = value_type(m, vi, "graph input", &etype, &rank, shape);
        if (st != NEST_OK)
            return st;
        const char *nm = c_name(m, vi->name, "x");
        if (!nm)
            return model_err(m, NEST_ERR_NOMEM, "out of memory");
        e->v = nest_parameter(m->f, nm, (nest_type)etype, rank, shape, NEST_ROW_MAJOR);
        if (e->v == NEST_NONE)
            return model_err(m, m->f->status, "graph input '%.200s': %s", vi->name,
                             nest_errmsg(m->f));
        e->defined = true;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t j = 0; j < n->n_output; j++) {
            if (!n->output[j] || !n->output[j][0])
                continue;
            ox_entry *e = entry(m, n->output[j], true);
            if (!e)
                return model_err(m, NEST_ERR_NOMEM, "out of memory");
            if (e->defined)
                return node_err(m, (int32_t)i, n, NEST_ERR_ARG, "output '%.200s' is already "
                                "defined", n->output[j]);
            e->defined = true;
        }
    }
    /* the nodes, in an order where every input comes first */
    int32_t *order = calloc(g->n_node + 1, sizeof *order);
    if (!order)
        return model_err(m, NEST_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < g->n_node; i++) /* in node_order, defined means "made by now" */
        for (size_t j = 0; j < g->node[i]->n_output; j++)
            if (g->node[i]->output[j] && g->node[i]->output[j][0])
                entry(m, g->node[i]->output[j], false)->defined = false;
    int st = node_order(m, g, order);
    m->g = g;
    if (st == NEST_OK && !(m->absorbed = arena_array(&m->a, g->n_node + 1, sizeof *m->absorbed)))
        st = model_err(m, NEST_ERR_NOMEM, "out of memory");
    if (st == NEST_OK)
        count_uses(m, g);
    for (size_t i = 0; st == NEST_OK && i < g->n_node; i++) {
        m->node_index = order[i];
        st = lower_node(m, g->node[order[i]]);
    }
    free(order);
    if (st != NEST_OK)
        return st;

    /* the results: the graph outputs in order */
    if (g->n_output == 0)
        return model_err(m, NEST_ERR_ARG, "the graph has no outputs");
    nest_value *res = calloc(g->n_output, sizeof *res);
    if (!res)
        return model_err(m, NEST_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == NEST_OK && i < g->n_output; i++) {
        const char *name = g->output[i]->name ? g->output[i]->name : "";
        ox_entry *e = entry(m, name, false);
        if (!e || !e->defined) {
            st = model_err(m, NEST_ERR_ARG, "graph output '%.200s' is not computed by any node",
                           name);
            break;
        }
        res[i] = NEST_NONE;
        if (e->k && e->k->dims) {
            st = model_err(m, NEST_ERR_ARG, "graph output '%.200s' holds the model's symbolic "
                           "dims (a Shape's): give them their sizes (nestc --dim NAME=N)", name);
            break;
        }
        ox c = {m, m->f, NULL, m->opset, 1, 0, &e, &res[i], NULL, -1, false};
        Onnx__NodeProto none = ONNX__NODE_PROTO__INIT;
        none.op_type = "output";
        c.node = &none;
        res[i] = ox_in(&c, 0);
        if (res[i] == NEST_NONE)
            st = m->f->status ? m->f->status : NEST_ERR_NOMEM;
        int etype;
        const Onnx__TypeProto *t = g->output[i]->type;
        if (st == NEST_OK && t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
            t->tensor_type && t->tensor_type->has_elem_type &&
            (etype = dt_type(t->tensor_type->elem_type)) != m->f->nodes[res[i]].etype)
            st = model_err(m, NEST_ERR_TYPE, "graph output '%.200s' is declared %s but computes "
                           "%s", name, dt_name(t->tensor_type->elem_type),
                           nest_type_name((nest_type)m->f->nodes[res[i]].etype));
    }
    if (st == NEST_OK && nest_return(m->f, (int)g->n_output, res, NULL) != NEST_OK)
        st = model_err(m, m->f->status, "the results: %s", nest_errmsg(m->f));
    /* what only folded nodes used (a Shape's constant, weights rewritten at import) goes */
    if (st == NEST_OK)
        ir_prune(m->f);
    free(res);
    return st;
}

/* ---- the public calls ---- */

/* protobuf-c allocates through nest's allocator, so that running out of memory while decoding
 * is told apart from a malformed file (unpack returns NULL for both). */
static void *pb_alloc(void *oom, size_t n)
{
    void *p = malloc(n);
    if (!p)
        *(bool *)oom = true;
    return p;
}

static void pb_free(void *oom, void *p)
{
    (void)oom;
    free(p);
}

/* The file's stem as a function name (c_ident's, with 'm'). */
static char *stem_name(const char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".onnx") == 0)
        n -= 5;
    char *s = malloc(n + 4);
    if (s)
        c_ident(s, base, n, 'm');
    return s;
}

static nest_function *import(const void *data, size_t len, const char *file, const char *dir,
                             const char *dflt_name, const nest_onnx_options *opts)
{
    const char *name = opts && opts->name ? opts->name : dflt_name;
    nest_function *f = nest_function_new(name);
    if (!f || f->status != NEST_OK)
        return f;
    ox_model m = {.f = f, .file = file, .dir = dir, .opts = opts};
    if (opts && (opts->ndims < 0 || opts->ninputs < 0 || (opts->ndims > 0 && !opts->dims) ||
                 (opts->ninputs > 0 && !opts->inputs))) {
        model_err(&m, NEST_ERR_ARG, "ndims or ninputs is negative, or its array is NULL");
        return f;
    }
    if (!data && len) {
        model_err(&m, NEST_ERR_ARG, "no data");
        return f;
    }
    bool pb_oom = false;
    ProtobufCAllocator pa = {pb_alloc, pb_free, &pb_oom};
    m.proto = onnx__model_proto__unpack(&pa, len, data);
    if (!m.proto) {
        if (pb_oom)
            model_err(&m, NEST_ERR_NOMEM, "out of memory decoding the protobuf");
        else
            model_err(&m, NEST_ERR_SYNTAX, "not an ONNX model: the protobuf does not decode "
                      "(truncated, or another kind of file)");
        return f;
    }
    if (import_graph(&m) != NEST_OK && f->status == NEST_OK)
        ir_error(f, NEST_ERR_NOMEM, "%s: out of memory", file);
    onnx__model_proto__free_unpacked(m.proto, &pa);
    arena_free(&m.a);
    return f;
}

nest_function *nest_import_onnx_mem(const void *data, size_t len, const nest_onnx_options *opts)
{
    return import(data, len, "<memory>", opts ? opts->data_dir : NULL, "model", opts);
}

nest_function *nest_import_onnx(const char *path, const nest_onnx_options *opts)
{
    if (!path) {
        nest_function *f = nest_function_new("model");
        if (f)
            ir_error(f, NEST_ERR_ARG, "nest_import_onnx: the path is NULL");
        return f;
    }
    char *stem = stem_name(path);
    FILE *in = fopen(path, "rb");
    buf b = {0};
    int err = 0;
    if (in) {
        char chunk[65536];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, in)) > 0)
            buf_write(&b, chunk, n);
        err = ferror(in) ? EIO : 0;
        fclose(in);
    } else {
        err = errno;
    }
    size_t len = b.len;
    char *data = buf_finish(&b);
    if (!err && !data)
        err = ENOMEM;
    nest_function *f;
    if (err) {
        f = nest_function_new(stem ? stem : "model");
        if (f && f->status == NEST_OK)
            ir_error(f, NEST_ERR_IO, "cannot read %s: %s", path, strerror(err));
    } else {
        /* external data lives beside the model */
        char *dir = NULL;
        if (opts && opts->data_dir)
            dir = strdup(opts->data_dir);
        else if (strrchr(path, '/'))
            dir = strndup(path, (size_t)(strrchr(path, '/') - path));
        else
            dir = strdup(".");
        f = import(data, len, path, dir, stem ? stem : "model", opts);
        free(dir);
    }
    free(data);
    free(stem);
    return f;
}
