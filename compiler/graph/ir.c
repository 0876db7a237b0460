/* ir.c - the graph: the op table, type inference at construction, the verifier. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const ir_opinfo ir_ops[OP_COUNT] = {
#define OP(id, text, kind, arity, types, cf, ci) [OP_##id] = {text, K_##kind, arity, TY_##types, cf, ci},
#include "ops.def"
#undef OP
};

bool op_is_elementwise(ir_op op)
{
    ir_kind k = ir_ops[op].kind;
    return k == K_EW || k == K_CMP || k == K_SELECT || k == K_CONVERT;
}

ir_op ir_op_lookup(const char *name, size_t len)
{
    for (int op = 0; op < OP_COUNT; op++)
        if (strlen(ir_ops[op].name) == len && memcmp(ir_ops[op].name, name, len) == 0)
            return (ir_op)op;
    return OP_COUNT;
}

int ir_verror(char **errmsg, int *status, int code, const char *fmt, va_list ap)
{
    buf b = {0};
    buf_vprintf(&b, fmt, ap);
    free(*errmsg);
    *errmsg = buf_finish(&b); /* NULL when out of memory: the handle's errmsg then says so */
    *status = *errmsg ? code : NEST_ERR_NOMEM;
    return *status;
}

int ir_error(nest_function *f, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_verror(&f->errmsg, &f->status, status, fmt, ap);
    va_end(ap);
    return f->status;
}

void ir_function_destroy(nest_function *f)
{
    if (!f)
        return;
    ir_function_destroy(f->collapsed);
    arena_free(&f->arena);
    free(f->nodes);
    free(f->names);
    free(f->state_uses);
    free(f->errmsg);
    ir_dims_free(f->dims);
    free(f);
}

int64_t ir_count(const ir_node *n)
{
    int64_t c = 1;
    bool sym = false;
    for (int i = 0; i < n->rank; i++)
        if (dim_is_sym(n->shape[i]))
            sym = true;
        else
            c *= n->shape[i]; /* checked against IR_MAX_BYTES when the node was built */
    for (int i = 0; sym && c > 0 && i < n->rank; i++)
        if (dim_is_sym(n->shape[i]))
            c = c > IR_MAX_BYTES / DIM_NOMINAL ? IR_MAX_BYTES : c * DIM_NOMINAL;
    return c;
}

int ir_mask_axes(uint32_t mask, int64_t *axes)
{
    int k = 0;
    for (int i = 0; i < NEST_MAX_RANK; i++)
        if (mask & (1u << i))
            axes[k++] = i;
    return k;
}

int64_t ir_dims_count(nest_function *f, int rank, const int64_t *shape)
{
    int64_t c = 1;
    for (int i = 0; i < rank && c != DIM_NONE; i++)
        c = dim_mul(f, c, shape[i]);
    return c;
}

void ir_format_shape(buf *b, int rank, const int64_t *shape)
{
    buf_putc(b, '[');
    for (int i = 0; i < rank; i++)
        buf_printf(b, "%s%lld", i ? "," : "", (long long)shape[i]);
    buf_putc(b, ']');
}

void ir_format_type(buf *b, const nest_function *f, int32_t node)
{
    const ir_node *n = &f->nodes[ir_resolve(f, node)]; /* a get of a tuple has its elements */
    if (n->etype == IR_TUPLE) {
        /* A tuple can nest as deep as the graph or share elements exponentially often: show
         * only its first level, and at most 8 elements. */
        buf_putc(b, '(');
        for (int i = 0; i < n->nin; i++) {
            if (i == 8) {
                buf_puts(b, ", ...");
                break;
            }
            if (i)
                buf_puts(b, ", ");
            const ir_node *e = &f->nodes[ir_resolve(f, n->in[i])];
            if (e->etype == IR_TUPLE) {
                buf_puts(b, "(...)");
            } else {
                buf_puts(b, nest_type_name((nest_type)e->etype));
                ir_format_dims(b, f, e->rank, e->shape);
            }
        }
        buf_putc(b, ')');
        return;
    }
    buf_puts(b, nest_type_name((nest_type)n->etype));
    ir_format_dims(b, f, n->rank, n->shape);
}

/* The index's slot for name: the node that has it, or an empty slot (-1). A slot whose node was
 * renamed since, or dropped (a builder that failed rolls the nodes back), is passed over. */
static int32_t *name_slot(const nest_function *f, const char *name)
{
    size_t mask = f->capnames - 1;
    for (size_t i = hash_bytes(name, strlen(name)) & mask;; i = (i + 1) & mask) {
        int32_t v = f->names[i];
        if (v < 0 || (v < f->nnodes && f->nodes[v].name && strcmp(f->nodes[v].name, name) == 0))
            return &f->names[i];
    }
}

int32_t ir_find_name(const nest_function *f, const char *name)
{
    return f->capnames ? *name_slot(f, name) : -1;
}

void ir_renumber(nest_function *f, const int32_t *map, int32_t oldn)
{
    /* the names' index: its nodes, renumbered, entered again (a slot emptied in place would cut
     * the probe sequences through it) */
    int32_t *kept = f->capnames ? malloc(f->nnames * sizeof *kept + 1) : NULL;
    size_t nk = 0;
    for (size_t i = 0; kept && i < f->capnames; i++)
        if (f->names[i] >= 0 && f->names[i] < oldn && map[f->names[i]] >= 0 &&
            f->nodes[map[f->names[i]]].name)
            kept[nk++] = map[f->names[i]];
    for (size_t i = 0; i < f->capnames; i++)
        f->names[i] = -1;
    f->nnames = 0;
    if (nk > 1) /* the first node of a name is the one found */
        qsort(kept, nk, sizeof *kept, cmp_i32);
    for (size_t i = 0; i < nk; i++) {
        int32_t *slot = name_slot(f, f->nodes[kept[i]].name);
        if (*slot < 0) {
            *slot = kept[i];
            f->nnames++;
        }
    }
    if (f->capnames && !kept) { /* out of memory: the index starts again empty */
        free(f->names);
        f->names = NULL;
        f->capnames = 0;
    }
    free(kept);
    /* the state tensors' read nodes: a direct table */
    for (int32_t s = 0; s < f->capstateuses; s++) {
        int32_t r = f->state_uses[s].read;
        if (r >= 0)
            f->state_uses[s].read = r < oldn ? map[r] : -1;
    }
}

int ir_set_name(nest_function *f, int32_t node, const char *name)
{
    if ((f->nnames + 1) * 2 > f->capnames) {
        size_t cap = f->capnames ? f->capnames * 2 : 64;
        int32_t *t = malloc(cap * sizeof *t);
        if (!t)
            return ir_error(f, NEST_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < cap; i++)
            t[i] = -1;
        int32_t *old = f->names;
        size_t oldcap = f->capnames;
        f->names = t;
        f->capnames = cap;
        f->nnames = 0;
        for (size_t i = 0; i < oldcap; i++) /* the nodes that still have the name they had */
            if (old[i] >= 0 && old[i] < f->nnodes && f->nodes[old[i]].name &&
                *name_slot(f, f->nodes[old[i]].name) < 0) {
                *name_slot(f, f->nodes[old[i]].name) = old[i];
                f->nnames++;
            }
        free(old);
    }
    f->nodes[node].name = name;
    int32_t *slot = name_slot(f, name);
    if (*slot < 0 || *slot > node) { /* the first node of a name is the one found */
        if (*slot < 0)
            f->nnames++;
        *slot = node;
    }
    return NEST_OK;
}

int ir_check_name(nest_function *f, const char *what, const char *name)
{
    if (!name)
        return ir_error(f, NEST_ERR_ARG, "%s name is NULL", what);
    size_t len = strlen(name);
    if (len > IR_MAX_NAME)
        return ir_error(f, NEST_ERR_LIMIT, "%s name is %zu characters long (the limit is %d)",
                        what, len, IR_MAX_NAME);
    if (!is_identifier(name, len))
        return ir_error(f, NEST_ERR_ARG,
                        "%s name '%.64s' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", what,
                        name);
    if (is_c_keyword(name))
        return ir_error(f, NEST_ERR_ARG, "%s name '%s' is a C keyword", what, name);
    if (strncmp(name, "nest_", 5) == 0 || strncmp(name, "__", 2) == 0 ||
        (name[0] == '_' && name[1] >= 'A' && name[1] <= 'Z'))
        return ir_error(f, NEST_ERR_ARG, "%s name '%s' is reserved (nest_, __ and _X prefixes)",
                        what, name);
    return NEST_OK;
}

/* ---- describing operands in messages ---- */

/* "x: f32[3,4]" for a named node, "f32[3,4]" otherwise; into a small static ring of buffers
 * would not be reentrant, so messages are built in one buf. */
static void describe(buf *b, const nest_function *f, int32_t node)
{
    const ir_node *n = &f->nodes[node];
    if (n->name)
        buf_printf(b, "%s: ", n->name);
    else if (ir_kind_of(n) != K_PARAM)
        buf_printf(b, "%s(...): ", ir_ops[n->op].name);
    ir_format_type(b, f, node);
}

/* Records "OP(operands): message" on f (op_error within this file). */
#define op_error ir_op_error
int ir_op_error(nest_function *f, int status, ir_op op, int nin, const int32_t *in,
                const char *fmt, ...)
{
    buf b = {0};
    buf_printf(&b, "%s(", ir_ops[op].name);
    for (int i = 0; i < nin; i++) {
        if (i)
            buf_puts(&b, ", ");
        describe(&b, f, in[i]);
    }
    buf_puts(&b, "): ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *msg = buf_finish(&b);
    if (!msg)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    ir_error(f, status, "%s", msg);
    free(msg);
    return status;
}

/* ---- building ---- */

static ir_node *append_node(nest_function *f)
{
    if (f->nnodes == f->capnodes) {
        if (f->capnodes > INT32_MAX / 2)
            return NULL;
        int32_t cap = f->capnodes ? f->capnodes * 2 : 64;
        ir_node *p = realloc(f->nodes, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        f->nodes = p;
        f->capnodes = cap;
    }
    ir_node *n = &f->nodes[f->nnodes];
    memset(n, 0, sizeof *n);
    return n;
}

static bool type_ok(ir_types t, int etype)
{
    switch (t) {
    case TY_NUM: return etype == NEST_F32 || etype == NEST_F64 || etype == NEST_I32 || etype == NEST_I64;
    case TY_FLOAT: return ir_is_float(etype);
    case TY_BOOL: return etype == NEST_BOOL;
    case TY_ANY: return etype >= 0 && etype < IR_TUPLE;
    }
    return false;
}

static const char *types_text(ir_types t)
{
    switch (t) {
    case TY_NUM: return "f32, f64, i32 or i64";
    case TY_FLOAT: return "f32 or f64";
    case TY_BOOL: return "bool";
    case TY_ANY: return "a tensor";
    }
    return "?";
}

static bool same_shape(const ir_node *a, const ir_node *b)
{
    return a->rank == b->rank && memcmp(a->shape, b->shape, (size_t)a->rank * sizeof(int64_t)) == 0;
}

/* Checks a shape given by the caller: rank, non-negative dims (or f's symbolic dims), total size.
 * Writes the element count to *count: -1 when a dim is symbolic (the limit then applies to the
 * plain dims; the rest is checked when the dims are known). */
static int check_shape(nest_function *f, const char *what, int rank, const int64_t *shape,
                       int etype, int64_t *count)
{
    if (rank < 0 || rank > NEST_MAX_RANK)
        return ir_error(f, rank < 0 ? NEST_ERR_ARG : NEST_ERR_LIMIT,
                        "%s: rank %d is out of range (0 to %d)", what, rank, NEST_MAX_RANK);
    if (rank > 0 && !shape)
        return ir_error(f, NEST_ERR_ARG, "%s: shape is NULL", what);
    /* The limit applies to the product of the non-zero dims, so that the strides of an empty
     * tensor fit as well. */
    int64_t c = 1;
    bool huge = false, empty = false, sym = false;
    for (int i = 0; i < rank; i++) {
        if (dim_is_sym(shape[i]) && dim_valid(f, shape[i])) {
            sym = true;
            continue;
        }
        if (dim_is_sym(shape[i]) || shape[i] == DIM_NONE)
            return ir_error(f, NEST_ERR_ARG, "%s: dimension %d is not a dim of function %s", what,
                            i, f->name);
        if (shape[i] < 0)
            return ir_error(f, NEST_ERR_ARG, "%s: dimension %d is negative (%lld)", what, i,
                            (long long)shape[i]);
        if (shape[i] == 0)
            empty = true;
        else if (mul_overflows(c, shape[i], &c))
            huge = true;
    }
    int64_t bytes;
    if (!huge && mul_overflows(c, (int64_t)nest_type_size((nest_type)etype), &bytes))
        huge = true;
    if (huge || bytes >= IR_MAX_BYTES) {
        buf b = {0};
        ir_format_dims(&b, f, rank, shape);
        char *s = buf_finish(&b);
        ir_error(f, NEST_ERR_LIMIT, "%s: shape %s is too large (the limit is 2^62 bytes)", what,
                 s ? s : "");
        free(s);
        return f->status;
    }
    *count = empty ? 0 : sym ? -1 : c;
    return NEST_OK;
}

/* Reads a list of distinct axes below `rank` into a bit mask. */
static int read_axes(nest_function *f, ir_op op, int nin, const int32_t *in, int naxes,
                     const int64_t *axes, int rank, uint32_t *mask)
{
    *mask = 0;
    if (naxes < 0 || naxes > NEST_MAX_RANK || (naxes > 0 && !axes))
        return op_error(f, NEST_ERR_ARG, op, nin, in, "invalid axes list");
    for (int i = 0; i < naxes; i++) {
        if (axes[i] < 0 || axes[i] >= rank)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %lld is out of range for rank %d",
                            (long long)axes[i], rank);
        if (*mask & (1u << axes[i]))
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %lld is repeated",
                            (long long)axes[i]);
        *mask |= 1u << axes[i];
    }
    return NEST_OK;
}

/* The output shape of broadcast or one_hot without its new axes (mask) must be the operand's. */
static int check_kept_dims(nest_function *f, ir_op op, int nin, const int32_t *in, int rank,
                           const int64_t *shape, uint32_t mask)
{
    const ir_node *a = &f->nodes[in[0]];
    for (int i = 0, j = 0; i < rank; i++) {
        if (mask & (1u << i))
            continue;
        if (shape[i] != a->shape[j]) {
            char *x = dim_text(f, shape[i]), *y = dim_text(f, a->shape[j]);
            op_error(f, NEST_ERR_TYPE, op, nin, in,
                     "output dimension %d is %s but the operand's dimension %d is %s", i,
                     x ? x : "", j, y ? y : "");
            free(x);
            free(y);
            return f->status;
        }
        j++;
    }
    return NEST_OK;
}

static int64_t *dup_shape(nest_function *f, int rank, const int64_t *shape)
{
    int64_t *s = arena_alloc(&f->arena, (size_t)rank * sizeof(int64_t)); /* never NULL for rank 0 */
    if (s && rank > 0)
        memcpy(s, shape, (size_t)rank * sizeof(int64_t));
    return s;
}

/* ---- the type rules of the op set of real models ---- */

/* Checks an axis attribute of operand a. */
static int check_axis(nest_function *f, ir_op op, int nin, const int32_t *in, int64_t axis,
                      int rank)
{
    if (axis < 0 || axis >= rank)
        return op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %lld is out of range for rank %d",
                        (long long)axis, rank);
    return NEST_OK;
}

/* The shape of a with one axis removed, into shape; returns the rank. */
static int drop_axis(const ir_node *a, int axis, int64_t *shape)
{
    int r = 0;
    for (int i = 0; i < a->rank; i++)
        if (i != axis)
            shape[r++] = a->shape[i];
    return r;
}

/* A list of rank entries, copied into f's arena (NULL: all `fill`). */
static int64_t *dup_list(nest_function *f, int rank, const int64_t *v, int64_t fill)
{
    int64_t *d = arena_array(&f->arena, (size_t)rank + 1, sizeof *d);
    for (int i = 0; d && i < rank; i++)
        d[i] = v ? v[i] : fill;
    return d;
}

/* "[1,2]" of a list, for messages (malloc'd, or NULL). */
static char *list_text(const nest_function *f, int n, const int64_t *v)
{
    buf b = {0};
    ir_format_dims(&b, f, n, v);
    return buf_finish(&b);
}

static int infer_pad(nest_function *f, ir_node *n, ir_op op, int nin, const int32_t *in,
                     const ir_attrs *at)
{
    const ir_node *a = &f->nodes[in[0]], *v = &f->nodes[in[1]];
    int r = a->rank;
    if (v->rank != 0) {
        char *t = list_text(f, v->rank, v->shape);
        op_error(f, NEST_ERR_TYPE, op, nin, in, "the padding value must be a scalar, not %s%s",
                 nest_type_name((nest_type)v->etype), t ? t : "");
        free(t);
        return f->status;
    }
    if (v->etype != a->etype)
        return op_error(f, NEST_ERR_TYPE, op, nin, in,
                        "the padding value is %s but the operand is %s",
                        nest_type_name((nest_type)v->etype), nest_type_name((nest_type)a->etype));
    if (r > 0 && (!at->below || !at->above))
        return op_error(f, NEST_ERR_ARG, op, nin, in, "below or above is NULL");
    int64_t *lo = dup_list(f, r, at->below, 0), *hi = dup_list(f, r, at->above, 0);
    int64_t *mid = dup_list(f, r, at->interior, 0), shape[NEST_MAX_RANK], count;
    if (!lo || !hi || !mid)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    for (int i = 0; i < r; i++) {
        if (mid[i] < 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "axis %d: interior padding %lld is negative", i, (long long)mid[i]);
        if (dim_is_sym(lo[i]) || dim_is_sym(hi[i]) || dim_is_sym(mid[i]))
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "axis %d: below, above and interior are integers, not dims", i);
        if (dim_is_sym(a->shape[i])) { /* a symbolic extent: padded without interior */
            if (mid[i] != 0)
                return op_error(f, NEST_ERR_TYPE, op, nin, in,
                                "axis %d: interior padding of a symbolic dimension", i);
            int64_t len = dim_add(f, a->shape[i], lo[i]);
            if (len == DIM_NONE || (len = dim_add(f, len, hi[i])) == DIM_NONE)
                return f->status;
            if (dim_compare(f, len, 0) == -1)
                return op_error(f, NEST_ERR_TYPE, op, nin, in,
                                "axis %d: below %lld and above %lld leave no elements", i,
                                (long long)lo[i], (long long)hi[i]);
            shape[i] = len;
            continue;
        }
        /* the operand with `interior` elements between neighbours, then below and above */
        int64_t d = 0, step, len;
        bool huge = a->shape[i] > 0 &&
                    (add_overflows(mid[i], 1, &step) || mul_overflows(a->shape[i] - 1, step, &d) ||
                     add_overflows(d, 1, &d));
        huge = huge || add_overflows(d, lo[i], &len) || add_overflows(len, hi[i], &len);
        if (huge || len >= IR_MAX_BYTES)
            return op_error(f, NEST_ERR_LIMIT, op, nin, in, "axis %d: the padded extent is too large",
                            i);
        if (len < 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "axis %d: below %lld and above %lld leave %lld elements of %lld", i,
                            (long long)lo[i], (long long)hi[i], (long long)len, (long long)d);
        shape[i] = len;
    }
    int st = check_shape(f, ir_ops[op].name, r, shape, a->etype, &count);
    if (st)
        return st;
    n->etype = a->etype;
    n->rank = (uint8_t)r;
    n->shape = dup_shape(f, r, shape);
    n->a.pad.below = lo;
    n->a.pad.above = hi;
    n->a.pad.interior = mid;
    return n->shape ? NEST_OK : ir_error(f, NEST_ERR_NOMEM, "out of memory");
}

/* Checks the bounds of axis i of a slice of extent n (any of them may be symbolic: a check
 * fails here only when it fails for every size) and gives the slice's extent. */
static int slice_axis(nest_function *f, ir_op op, int nin, const int32_t *in, int i, int64_t n,
                      int64_t lo, int64_t up, int64_t step, int64_t *extent)
{
    if ((dim_is_sym(lo) && !dim_valid(f, lo)) || (dim_is_sym(up) && !dim_valid(f, up)) ||
        (dim_is_sym(step) && !dim_valid(f, step)) || lo == DIM_NONE || up == DIM_NONE ||
        step == DIM_NONE)
        return op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %d: a bound is not a dim of function %s",
                        i, f->name);
    if (!dim_is_sym(lo) && !dim_is_sym(up) && !dim_is_sym(n)) {
        if (lo < 0 || up < lo || up > n)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "axis %d: bounds [%lld, %lld) are not within [0, %lld]", i,
                            (long long)lo, (long long)up, (long long)n);
    } else if (dim_compare(f, lo, 0) == -1 || dim_compare(f, up, lo) == -1 ||
               dim_compare(f, up, n) == 1) {
        char *x = dim_text(f, lo), *y = dim_text(f, up), *z = dim_text(f, n);
        op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %d: bounds [%s, %s) are not within [0, %s]",
                 i, x ? x : "", y ? y : "", z ? z : "");
        free(x);
        free(y);
        free(z);
        return f->status;
    }
    if (dim_is_sym(step))
        return op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %d: a stride is an integer, not a dim",
                        i);
    if (step < 1)
        return op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %d: stride %lld must be at least 1", i,
                        (long long)step);
    if (!dim_is_sym(lo) && !dim_is_sym(up)) {
        *extent = (up - lo) / step + ((up - lo) % step != 0);
        return NEST_OK;
    }
    if (step != 1)
        return op_error(f, NEST_ERR_TYPE, op, nin, in,
                        "axis %d: a stride other than 1 between symbolic bounds", i);
    *extent = dim_sub(f, up, lo);
    return *extent == DIM_NONE ? f->status : NEST_OK;
}

static int infer_replace_slice(nest_function *f, ir_node *n, ir_op op, int nin, const int32_t *in,
                               const ir_attrs *at)
{
    const ir_node *a = &f->nodes[in[0]], *y = &f->nodes[in[1]];
    int r = a->rank;
    if (y->etype != a->etype)
        return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand element types differ");
    if (y->rank != r)
        return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand ranks differ");
    if (r > 0 && (!at->lower || !at->upper))
        return op_error(f, NEST_ERR_ARG, op, nin, in, "lower or upper is NULL");
    int64_t *lo = dup_list(f, r, at->lower, 0), *up = dup_list(f, r, at->upper, 0);
    int64_t *step = dup_list(f, r, at->step, 1), box[NEST_MAX_RANK];
    if (!lo || !up || !step)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    for (int i = 0; i < r; i++) {
        int st = slice_axis(f, op, nin, in, i, a->shape[i], lo[i], up[i], step[i], &box[i]);
        if (st)
            return st;
    }
    if (memcmp(box, y->shape, (size_t)r * sizeof *box) != 0) {
        char *t = list_text(f, r, box);
        op_error(f, NEST_ERR_TYPE, op, nin, in,
                 "the box selects a slice of shape %s; the replacement must have that shape",
                 t ? t : "");
        free(t);
        return f->status;
    }
    n->etype = a->etype;
    n->rank = (uint8_t)r;
    n->shape = a->shape;
    n->a.slice.lower = lo;
    n->a.slice.upper = up;
    n->a.slice.step = step;
    return NEST_OK;
}

/* numpy's matmul: [..., m, k] x [..., k, n] -> [..., m, n], the leading (batch) axes
 * broadcast (aligned at the right, extents equal or 1); a vector operand is a matrix of one row
 * (first) or one column (second) whose axis leaves the result. */
static int infer_batch_dot(nest_function *f, ir_node *n, ir_op op, int nin, const int32_t *in)
{
    const ir_node *a = &f->nodes[in[0]], *b = &f->nodes[in[1]];
    if (a->etype != b->etype)
        return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand element types differ");
    if (a->rank == 0 || b->rank == 0)
        return op_error(f, NEST_ERR_TYPE, op, nin, in,
                        "operand %d is a scalar: batch_dot takes vectors, matrices and batches of "
                        "them",
                        a->rank == 0 ? 1 : 2);
    int64_t ka = a->shape[a->rank - 1], kb = b->shape[b->rank >= 2 ? b->rank - 2 : 0];
    if (ka != kb) {
        char *x = dim_text(f, ka), *y = dim_text(f, kb);
        op_error(f, NEST_ERR_TYPE, op, nin, in,
                 "the last axis of the first operand (%s) differs from the %s axis of the second "
                 "(%s)",
                 x ? x : "", b->rank >= 2 ? "second-to-last" : "only", y ? y : "");
        free(x);
        free(y);
        return f->status;
    }
    int ba = a->rank >= 2 ? a->rank - 2 : 0, bb = b->rank >= 2 ? b->rank - 2 : 0;
    int nb = ba > bb ? ba : bb, r = 0;
    int64_t shape[NEST_MAX_RANK + 2], count;
    for (int i = 0; i < nb; i++) { /* batch axis i, counted from the left of the longer */
        int ia = i - (nb - ba), ib = i - (nb - bb);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char *x = dim_text(f, da), *y = dim_text(f, db);
            op_error(f, NEST_ERR_TYPE, op, nin, in,
                     "batch axes do not broadcast: %s against %s (axis %d of the result)",
                     x ? x : "", y ? y : "", i);
            free(x);
            free(y);
            return f->status;
        }
        shape[r++] = da == 1 ? db : da;
    }
    if (a->rank >= 2)
        shape[r++] = a->shape[a->rank - 2];
    if (b->rank >= 2)
        shape[r++] = b->shape[b->rank - 1];
    int st = check_shape(f, ir_ops[op].name, r, shape, a->etype, &count);
    if (st)
        return st;
    n->etype = a->etype;
    n->rank = (uint8_t)r;
    n->shape = dup_shape(f, r, shape);
    return n->shape ? NEST_OK : ir_error(f, NEST_ERR_NOMEM, "out of memory");
}

static int infer_model_op(nest_function *f, ir_node *n, ir_op op, int nin, const int32_t *in,
                          const ir_attrs *at)
{
    const ir_node *a = nin > 0 ? &f->nodes[in[0]] : NULL;
    int64_t shape[2 * NEST_MAX_RANK], count;
    int st;
    switch (ir_ops[op].kind) {
    case K_ARGREDUCE: {
        if (a->rank == 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "a scalar has no axis to search");
        if ((st = check_axis(f, op, nin, in, at->index, a->rank)))
            return st;
        int axis = (int)at->index, r = drop_axis(a, axis, shape);
        if ((st = check_shape(f, ir_ops[op].name, r, shape, NEST_I64, &count)))
            return st;
        if (a->shape[axis] == 0 && count > 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "axis %d is empty: there is no element to index", axis);
        n->etype = NEST_I64;
        n->rank = (uint8_t)r;
        n->shape = dup_shape(f, r, shape);
        n->a.axis = axis;
        return NEST_OK;
    }
    case K_PAD:
        return infer_pad(f, n, op, nin, in, at);
    case K_REVERSE:
    case K_SOFTMAX: { /* the shape of the operand; a list of its axes */
        uint32_t mask;
        if ((st = read_axes(f, op, nin, in, at->naxes, at->axes, a->rank, &mask)))
            return st;
        n->etype = a->etype;
        n->rank = a->rank;
        n->shape = a->shape;
        n->a.axes = mask;
        return NEST_OK;
    }
    case K_REPLACE_SLICE:
        return infer_replace_slice(f, n, op, nin, in, at);
    case K_ONE_HOT: {
        int r = at->rank;
        if ((st = check_shape(f, ir_ops[op].name, r, at->shape, a->etype, &count)))
            return st;
        if (r != a->rank + 1)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "the shape has rank %d, so the operand must have rank %d", r, r - 1);
        if ((st = check_axis(f, op, nin, in, at->index, r)))
            return st;
        if ((st = check_kept_dims(f, op, nin, in, r, at->shape, 1u << at->index)))
            return st;
        n->etype = a->etype;
        n->rank = (uint8_t)r;
        n->shape = dup_shape(f, r, at->shape);
        n->a.axis = (int32_t)at->index;
        return NEST_OK;
    }
    case K_GATHER:
    case K_SCATTER_ADD: {
        /* gather's result, and scatter_add's updates, have x's shape with the axis replaced by
         * the indices' shape */
        const ir_node *ix = &f->nodes[in[1]];
        bool scatter = ir_ops[op].kind == K_SCATTER_ADD;
        if (ix->etype != NEST_I32 && ix->etype != NEST_I64)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "the indices must be i32 or i64, not %s",
                            nest_type_name((nest_type)ix->etype));
        if (a->rank == 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "a scalar has no axis to %s",
                            scatter ? "add along" : "take along");
        if ((st = check_axis(f, op, nin, in, at->index, a->rank)))
            return st;
        int axis = (int)at->index, r = a->rank - 1 + ix->rank;
        if (r > NEST_MAX_RANK)
            return op_error(f, NEST_ERR_LIMIT, op, nin, in, "%s rank %d exceeds %d",
                            scatter ? "the updates'" : "result", r, NEST_MAX_RANK);
        memcpy(shape, a->shape, (size_t)axis * sizeof *shape);
        memcpy(shape + axis, ix->shape, (size_t)ix->rank * sizeof *shape);
        memcpy(shape + axis + ix->rank, a->shape + axis + 1,
               (size_t)(a->rank - axis - 1) * sizeof *shape);
        if ((st = check_shape(f, ir_ops[op].name, r, shape, a->etype, &count)))
            return st;
        if (a->shape[axis] == 0 && count > 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "axis %d is empty: there is no element to %s", axis,
                            scatter ? "add to" : "take");
        n->a.axis = axis;
        if (scatter) {
            const ir_node *u = &f->nodes[in[2]];
            if (u->etype != a->etype)
                return op_error(f, NEST_ERR_TYPE, op, nin, in,
                                "the updates are %s but the operand is %s",
                                nest_type_name((nest_type)u->etype),
                                nest_type_name((nest_type)a->etype));
            if (u->rank != r || memcmp(u->shape, shape, (size_t)r * sizeof *shape) != 0) {
                char *t = list_text(f, r, shape);
                op_error(f, NEST_ERR_TYPE, op, nin, in,
                         "the updates must have shape %s (the operand's with axis %d replaced by "
                         "the indices' shape)",
                         t ? t : "", axis);
                free(t);
                return f->status;
            }
            n->etype = a->etype;
            n->rank = a->rank;
            n->shape = a->shape;
            return NEST_OK;
        }
        n->etype = a->etype;
        n->rank = (uint8_t)r;
        n->shape = dup_shape(f, r, shape);
        return NEST_OK;
    }
    case K_BATCH_DOT:
        return infer_batch_dot(f, n, op, nin, in);
    case K_TOPK: {
        if (a->rank == 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "a scalar has no axis to search");
        if ((st = check_axis(f, op, nin, in, at->index, a->rank)))
            return st;
        int axis = (int)at->index;
        if (at->k < 0 || dim_is_sym(at->k) || dim_compare(f, at->k, a->shape[axis]) == 1)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "k = %lld is not within [0, %lld], the extent of axis %d",
                            (long long)at->k, (long long)a->shape[axis], axis);
        memcpy(shape, a->shape, (size_t)a->rank * sizeof *shape);
        shape[axis] = at->k;
        int etype = at->which ? NEST_I64 : a->etype;
        if ((st = check_shape(f, ir_ops[op].name, a->rank, shape, etype, &count)))
            return st;
        n->etype = (uint8_t)etype;
        n->rank = a->rank;
        n->shape = dup_shape(f, a->rank, shape);
        n->a.topk.k = at->k;
        n->a.topk.axis = axis;
        n->a.topk.largest = at->largest != 0;
        n->a.topk.which = at->which != 0;
        return n->shape ? NEST_OK : ir_error(f, NEST_ERR_NOMEM, "out of memory");
    }
    default:
        break;
    }
    return ir_error(f, NEST_ERR_ARG, "unknown op");
}

/* The type rules. Each fills n->etype, n->rank, n->shape and the attributes. */
static int infer(nest_function *f, ir_node *n, ir_op op, int nin, const int32_t *in,
                 const ir_attrs *at)
{
    const ir_opinfo *info = &ir_ops[op];
    const ir_node *a = nin > 0 ? &f->nodes[in[0]] : NULL;
    int64_t count;
    int st;

    /* operand types, for every kind that takes tensors */
    if (info->kind != K_TUPLE && info->kind != K_GET) {
        for (int i = 0; i < nin; i++) {
            const ir_node *x = &f->nodes[in[i]];
            if (x->etype == IR_TUPLE)
                return op_error(f, NEST_ERR_TYPE, op, nin, in,
                                "operand %d is a tuple; use get to take an element", i + 1);
            bool cond = info->kind == K_SELECT && i == 0;
            if (cond ? x->etype != NEST_BOOL : !type_ok(info->types, x->etype))
                return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand %d must be %s, not %s",
                                i + 1, cond ? "bool" : types_text(info->types),
                                nest_type_name((nest_type)x->etype));
        }
    }

    switch (info->kind) {
    case K_PARAM:
    case K_CONST:
        if (at->type < 0 || at->type >= IR_TUPLE)
            return ir_error(f, NEST_ERR_ARG, "%s: invalid element type %d", info->name, at->type);
        if ((st = check_shape(f, info->name, at->rank, at->shape, at->type, &count)))
            return st;
        n->etype = (uint8_t)at->type;
        n->rank = (uint8_t)at->rank;
        n->shape = dup_shape(f, at->rank, at->shape);
        if (info->kind == K_PARAM) {
            if (at->layout != NEST_ROW_MAJOR && at->layout != NEST_COL_MAJOR)
                return ir_error(f, NEST_ERR_ARG, "parameter %s: invalid layout %d", at->name,
                                at->layout);
            n->a.param.index = f->nparams;
            n->a.param.layout = (uint8_t)at->layout;
            return NEST_OK;
        }
        if (at->count != 1 && (at->count != count || count < 0))
            return ir_error(f, NEST_ERR_TYPE,
                            "constant of type %s: %lld values given, expected 1 or %lld",
                            nest_type_name((nest_type)at->type), (long long)at->count,
                            (long long)count);
        if (!at->data && at->count > 0)
            return ir_error(f, NEST_ERR_ARG, "constant: data is NULL");
        n->a.constant.count = at->count;
        n->a.constant.data =
            arena_memdup(&f->arena, at->data, (size_t)at->count * nest_type_size((nest_type)at->type));
        if (!n->a.constant.data)
            return ir_error(f, NEST_ERR_NOMEM, "constant: out of memory");
        if (at->type == NEST_BOOL) {
            uint8_t *v = n->a.constant.data;
            for (int64_t i = 0; i < at->count; i++)
                v[i] = v[i] != 0;
        }
        return NEST_OK;

    case K_STATE: {
        const nest_module *m = f->module;
        if (!m || at->state < 0 || at->state >= m->nstates)
            return ir_error(f, NEST_ERR_ARG, "state: %d is not a state tensor of the module of %s",
                            at->state, f->name);
        const ir_state *s = &m->states[at->state];
        n->etype = s->etype;
        n->rank = s->rank;
        n->shape = dup_shape(f, s->rank, s->shape);
        n->a.state = at->state;
        return NEST_OK;
    }

    case K_EW:
    case K_CMP:
    case K_SELECT: {
        int first = info->kind == K_SELECT ? 1 : 0; /* the first value operand */
        for (int i = 1; i < nin; i++) {
            const ir_node *x = &f->nodes[in[i]];
            if (!same_shape(a, x))
                return op_error(f, NEST_ERR_TYPE, op, nin, in,
                                "operand shapes differ (element-wise ops do not broadcast; use "
                                "broadcast)");
            if (i > first && x->etype != f->nodes[in[first]].etype)
                return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand element types differ");
        }
        n->etype = info->kind == K_CMP ? NEST_BOOL : f->nodes[in[first]].etype;
        n->rank = a->rank;
        n->shape = a->shape;
        return NEST_OK;
    }

    case K_CONVERT:
        if (at->type < 0 || at->type >= IR_TUPLE)
            return op_error(f, NEST_ERR_ARG, op, nin, in, "invalid target type %d", at->type);
        n->etype = (uint8_t)at->type;
        n->rank = a->rank;
        n->shape = a->shape;
        return NEST_OK;

    case K_DOT: {
        const ir_node *b = &f->nodes[in[1]];
        if (a->etype != b->etype)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand element types differ");
        n->etype = a->etype;
        if (a->rank == 0 || b->rank == 0) {
            const ir_node *t = a->rank == 0 ? b : a;
            n->rank = t->rank;
            n->shape = t->shape;
            return NEST_OK;
        }
        if (a->shape[a->rank - 1] != b->shape[0]) {
            char *x = dim_text(f, a->shape[a->rank - 1]), *y = dim_text(f, b->shape[0]);
            op_error(f, NEST_ERR_TYPE, op, nin, in,
                     "the last axis of the first operand (%s) differs from the first axis of the "
                     "second (%s)",
                     x ? x : "", y ? y : "");
            free(x);
            free(y);
            return f->status;
        }
        int rank = a->rank - 1 + b->rank - 1;
        if (rank > NEST_MAX_RANK)
            return op_error(f, NEST_ERR_LIMIT, op, nin, in, "result rank %d exceeds %d", rank,
                            NEST_MAX_RANK);
        int64_t shape[2 * NEST_MAX_RANK];
        memcpy(shape, a->shape, (size_t)(a->rank - 1) * sizeof(int64_t));
        memcpy(shape + a->rank - 1, b->shape + 1, (size_t)(b->rank - 1) * sizeof(int64_t));
        if ((st = check_shape(f, info->name, rank, shape, a->etype, &count)))
            return st;
        n->rank = (uint8_t)rank;
        n->shape = dup_shape(f, rank, shape);
        return NEST_OK;
    }

    case K_BROADCAST: {
        if ((st = check_shape(f, info->name, at->rank, at->shape, a->etype, &count)))
            return st;
        uint32_t mask;
        if ((st = read_axes(f, op, nin, in, at->naxes, at->axes, at->rank, &mask)))
            return st;
        if (at->rank - at->naxes != a->rank)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "the shape has rank %d with %d new axes, so the operand must have "
                            "rank %d",
                            at->rank, at->naxes, at->rank - at->naxes);
        if ((st = check_kept_dims(f, op, nin, in, at->rank, at->shape, mask)))
            return st;
        n->etype = a->etype;
        n->rank = (uint8_t)at->rank;
        n->shape = dup_shape(f, at->rank, at->shape);
        n->a.axes = mask;
        return NEST_OK;
    }

    case K_RESHAPE: {
        if ((st = check_shape(f, info->name, at->rank, at->shape, a->etype, &count)))
            return st;
        int64_t want = ir_dims_count(f, at->rank, at->shape), have = ir_dims_count(f, a->rank, a->shape);
        if (want == DIM_NONE || have == DIM_NONE)
            return f->status;
        if (want != have) {
            buf b = {0};
            ir_format_dims(&b, f, at->rank, at->shape);
            buf_puts(&b, " has ");
            dim_format(&b, f, want);
            buf_puts(&b, " elements but the operand has ");
            dim_format(&b, f, have);
            char *s = buf_finish(&b);
            op_error(f, NEST_ERR_TYPE, op, nin, in, "shape %s", s ? s : "");
            free(s);
            return f->status;
        }
        n->a.order = arena_alloc(&f->arena, (size_t)a->rank + 1);
        if (!n->a.order)
            return ir_error(f, NEST_ERR_NOMEM, "out of memory");
        uint32_t seen = 0;
        for (int i = 0; i < a->rank; i++) {
            int64_t o = at->order ? at->order[i] : i;
            if (o < 0 || o >= a->rank || (seen & (1u << o)))
                return op_error(f, NEST_ERR_TYPE, op, nin, in,
                                "order must be a permutation of 0..%d (entry %d is %lld)",
                                a->rank - 1, i, (long long)o);
            seen |= 1u << o;
            n->a.order[i] = (uint8_t)o;
        }
        n->etype = a->etype;
        n->rank = (uint8_t)at->rank;
        n->shape = dup_shape(f, at->rank, at->shape);
        return NEST_OK;
    }

    case K_SLICE: {
        int r = a->rank;
        if (r > 0 && (!at->lower || !at->upper))
            return op_error(f, NEST_ERR_ARG, op, nin, in, "lower or upper is NULL");
        int64_t *lo = arena_array(&f->arena, (size_t)r + 1, sizeof(int64_t));
        int64_t *up = arena_array(&f->arena, (size_t)r + 1, sizeof(int64_t));
        int64_t *step = arena_array(&f->arena, (size_t)r + 1, sizeof(int64_t));
        int64_t *shape = arena_array(&f->arena, (size_t)r + 1, sizeof(int64_t));
        if (!lo || !up || !step || !shape)
            return ir_error(f, NEST_ERR_NOMEM, "out of memory");
        for (int i = 0; i < r; i++) {
            lo[i] = at->lower[i];
            up[i] = at->upper[i];
            step[i] = at->step ? at->step[i] : 1;
            if ((st = slice_axis(f, op, nin, in, i, a->shape[i], lo[i], up[i], step[i], &shape[i])))
                return st;
        }
        n->etype = a->etype;
        n->rank = (uint8_t)r;
        n->shape = shape;
        n->a.slice.lower = lo;
        n->a.slice.upper = up;
        n->a.slice.step = step;
        return NEST_OK;
    }

    case K_CONCAT: {
        if (nin < 1)
            return ir_error(f, NEST_ERR_ARG, "concat: needs at least one operand");
        if (a->rank == 0)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "scalars cannot be concatenated");
        if (at->index < 0 || at->index >= a->rank)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "axis %lld is out of range for rank %d",
                            (long long)at->index, a->rank);
        int axis = (int)at->index;
        int64_t total = 0;
        for (int i = 0; i < nin; i++) {
            const ir_node *x = &f->nodes[in[i]];
            if (x->etype != a->etype)
                return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand element types differ");
            if (x->rank != a->rank)
                return op_error(f, NEST_ERR_TYPE, op, nin, in, "operand ranks differ");
            for (int d = 0; d < a->rank; d++)
                if (d != axis && x->shape[d] != a->shape[d])
                    return op_error(f, NEST_ERR_TYPE, op, nin, in,
                                    "operand %d differs in dimension %d, which is not the "
                                    "concatenation axis",
                                    i + 1, d);
            if (dim_is_sym(total) || dim_is_sym(x->shape[axis])) {
                if ((total = dim_add(f, total, x->shape[axis])) == DIM_NONE)
                    return f->status;
            } else if (add_overflows(total, x->shape[axis], &total)) {
                return op_error(f, NEST_ERR_LIMIT, op, nin, in, "the result is too large");
            }
        }
        int64_t shape[NEST_MAX_RANK];
        memcpy(shape, a->shape, (size_t)a->rank * sizeof(int64_t));
        shape[axis] = total;
        if ((st = check_shape(f, info->name, a->rank, shape, a->etype, &count)))
            return st;
        n->etype = a->etype;
        n->rank = a->rank;
        n->shape = dup_shape(f, a->rank, shape);
        n->a.axis = axis;
        return NEST_OK;
    }

    case K_REDUCE: {
        uint32_t mask;
        if ((st = read_axes(f, op, nin, in, at->naxes, at->axes, a->rank, &mask)))
            return st;
        int64_t shape[NEST_MAX_RANK];
        int r = 0;
        for (int i = 0; i < a->rank; i++)
            if (!(mask & (1u << i)))
                shape[r++] = a->shape[i];
        n->etype = a->etype;
        n->rank = (uint8_t)r;
        n->shape = dup_shape(f, r, shape);
        n->a.axes = mask;
        return NEST_OK;
    }

    case K_TUPLE:
        n->etype = IR_TUPLE;
        return NEST_OK;

    case K_CONV:
    case K_POOL:
        return ir_infer_window(f, n, op, nin, in, at);

    case K_ARGREDUCE:
    case K_PAD:
    case K_REVERSE:
    case K_REPLACE_SLICE:
    case K_ONE_HOT:
    case K_GATHER:
    case K_SOFTMAX:
    case K_BATCH_DOT:
    case K_TOPK:
    case K_SCATTER_ADD:
        return infer_model_op(f, n, op, nin, in, at);

    case K_GET: {
        if (a->etype != IR_TUPLE)
            return op_error(f, NEST_ERR_TYPE, op, nin, in, "the operand is not a tuple");
        const ir_node *t = &f->nodes[ir_resolve(f, in[0])];
        if (at->index < 0 || at->index >= t->nin)
            return op_error(f, NEST_ERR_TYPE, op, nin, in,
                            "index %lld is out of range for a tuple of %d", (long long)at->index,
                            t->nin);
        int32_t target = ir_resolve(f, t->in[at->index]);
        const ir_node *e = &f->nodes[target];
        n->etype = e->etype;
        n->rank = e->rank;
        n->shape = e->shape;
        n->a.get.index = (int32_t)at->index;
        n->a.get.target = target;
        return NEST_OK;
    }
    }
    return ir_error(f, NEST_ERR_ARG, "unknown op");
}

int32_t ir_build(nest_function *f, ir_op op, int nin, const int32_t *in, const ir_attrs *at)
{
    static const ir_attrs none = {0};
    if (!f)
        return NEST_NONE;
    if (!f->name)
        return ir_error(f, NEST_ERR_ARG, "the function has no valid name"), NEST_NONE;
    if (!at)
        at = &none;
    if ((unsigned)op >= OP_COUNT)
        return ir_error(f, NEST_ERR_ARG, "unknown op %d", (int)op), NEST_NONE;
    const ir_opinfo *info = &ir_ops[op];
    if (nin < 0 || (nin > 0 && !in))
        return ir_error(f, NEST_ERR_ARG, "%s: invalid operand list", info->name), NEST_NONE;
    for (int i = 0; i < nin; i++) {
        if (in[i] < 0)
            return NEST_NONE; /* an operand failed: its error stands */
        if (in[i] >= f->nnodes)
            return ir_error(f, NEST_ERR_ARG, "%s: operand %d (%d) is not a value of function %s",
                            info->name, i + 1, in[i], f->name),
                   NEST_NONE;
    }
    if (info->arity >= 0 && nin != info->arity)
        return ir_error(f, NEST_ERR_ARG, "%s takes %d operand%s, not %d", info->name, info->arity,
                        info->arity == 1 ? "" : "s", nin),
               NEST_NONE;
    if (op == OP_PARAMETER) {
        if (ir_check_name(f, "parameter", at->name))
            return NEST_NONE;
        if (ir_find_name(f, at->name) >= 0) /* parameters and named values share one scope */
            return ir_error(f, NEST_ERR_ARG, "parameter name '%s' is used twice", at->name),
                   NEST_NONE;
        if (f->module && ir_state_find(f->module, at->name, strlen(at->name)) >= 0)
            return ir_error(f, NEST_ERR_ARG, "parameter name '%s' is a state tensor of module %s",
                            at->name, f->module->name),
                   NEST_NONE;
        int32_t *p = arena_grow(&f->arena, f->params, (size_t)f->nparams, &f->capparams,
                                sizeof *p);
        if (!p)
            return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NEST_NONE;
        f->params = p;
    }

    ir_node *n = append_node(f);
    if (!n)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NEST_NONE;
    n->op = (uint16_t)op;
    if (infer(f, n, op, nin, in, at) != NEST_OK)
        return NEST_NONE;
    if (nin) {
        n->in = arena_memdup(&f->arena, in, (size_t)nin * sizeof *in);
        if (!n->in)
            return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NEST_NONE;
    }
    n->nin = nin;
    if (!n->shape)
        n->shape = dup_shape(f, 0, NULL);
    if (!n->shape)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NEST_NONE;
    if (op == OP_PARAMETER) {
        const char *name = arena_strdup(&f->arena, at->name);
        if (!name || ir_set_name(f, f->nnodes, name) != NEST_OK)
            return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NEST_NONE;
        f->params[f->nparams++] = f->nnodes;
    }
    return f->nnodes++;
}

/* value as an integer in [lo, hi]: truncated, saturated at the range, NaN 0 (nest_convert's
 * rule); a plain cast of an out-of-range double is undefined. */
static int64_t saturate(double value, int64_t lo, int64_t hi)
{
    if (value != value)
        return 0;
    if (value <= (double)lo)
        return lo;
    if (value >= (double)hi)
        return hi;
    return (int64_t)value;
}

int32_t ir_fill(nest_function *f, int etype, double v, int rank, const int64_t *shape)
{
    union {
        float f32;
        double f64;
        int32_t i32;
        int64_t i64;
        uint8_t b;
    } d;
    switch (etype) {
    case NEST_F32: d.f32 = (float)v; break;
    case NEST_F64: d.f64 = v; break;
    case NEST_I32: d.i32 = (int32_t)saturate(v, INT32_MIN, INT32_MAX); break;
    case NEST_I64: d.i64 = saturate(v, INT64_MIN, INT64_MAX); break;
    default: d.b = v != 0; break;
    }
    ir_attrs at = {.type = etype, .rank = rank, .shape = shape, .data = &d, .count = 1};
    return ir_build(f, OP_CONSTANT, 0, NULL, &at);
}

int32_t ir_topk(nest_function *f, int32_t x, int64_t k, int64_t axis, int largest)
{
    ir_attrs at = {.k = k, .index = axis, .largest = largest, .which = 0};
    int32_t v = ir_build(f, OP_TOPK, 1, &x, &at);
    if (v < 0)
        return NEST_NONE;
    at.which = 1;
    int32_t i = ir_build(f, OP_TOPK, 1, &x, &at);
    if (i < 0)
        return NEST_NONE;
    int32_t both[2] = {v, i};
    return ir_build(f, OP_TUPLE, 2, both, NULL);
}

/* ---- the verifier ---- */

bool ir_verify(const nest_function *f)
{
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        if (n->op >= OP_COUNT || n->rank > NEST_MAX_RANK || (n->rank && !n->shape))
            return false;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] < 0 || n->in[j] >= i)
                return false;
        if (ir_ops[n->op].arity >= 0 && n->nin != ir_ops[n->op].arity)
            return false;
        if (n->etype > IR_TUPLE)
            return false;
        if (n->op == OP_STATE && (!f->module || n->a.state < 0 || n->a.state >= f->module->nstates))
            return false;
        if (n->op == OP_GET) {
            const ir_node *t = &f->nodes[ir_resolve(f, n->in[0])];
            if (t->op != OP_TUPLE || t->in[n->a.get.index] < 0 ||
                ir_resolve(f, t->in[n->a.get.index]) != n->a.get.target)
                return false;
        } else if ((n->etype == IR_TUPLE) != (n->op == OP_TUPLE)) {
            return false;
        } else if (n->op == OP_TOPK && n->a.topk.which == 0 &&
                   (i + 1 >= f->nnodes || f->nodes[i + 1].op != OP_TOPK ||
                    f->nodes[i + 1].a.topk.which != 1 || f->nodes[i + 1].in[0] != n->in[0])) {
            return false; /* fuse.c lowers the pair together */
        }
    }
    for (int32_t i = 0; i < f->nparams; i++)
        if (f->params[i] < 0 || f->params[i] >= f->nnodes || f->nodes[f->params[i]].op != OP_PARAMETER)
            return false;
    for (int32_t i = 0; i < f->nresults; i++)
        if (f->results[i] < 0 || f->results[i] >= f->nnodes ||
            f->nodes[f->results[i]].etype == IR_TUPLE)
            return false;
    for (int32_t i = 0; i < f->nassigns; i++) {
        const ir_assign *as = &f->assigns[i];
        if (!f->module || as->state < 0 || as->state >= f->module->nstates || as->node < 0 ||
            as->node >= f->nnodes || f->nodes[as->node].etype == IR_TUPLE)
            return false;
        for (int32_t j = 0; j < i; j++)
            if (f->assigns[j].state == as->state)
                return false;
    }
    return true;
}
