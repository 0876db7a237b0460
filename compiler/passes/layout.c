/*
 * layout.c - tensor descriptions. A stored tensor is a buffer; every value a nest reads is an
 * element expression (fx) whose leaves are strided views of buffers over the index space of
 * the value: element i of a load is buf[off + sum(i_k * st[k])]. Broadcast (stride 0), slice
 * (offset, scaled strides), transpose (permuted strides) and contiguous reshape (merged or split
 * strides) transform the leaves and never copy; a reshape that strides cannot express returns
 * NULL and the caller stores the operand.
 *
 * Expressions are hash-consed, so equal subexpressions are one node and the emitter computes
 * them once. Every expression a nest holds has at most FUSE_MAX_OPS ops (fuse.c), which bounds
 * the depth of the recursive transforms below.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* s times a dim d: DIM_NONE once a symbolic dim is in it. */
static int64_t stride_times(int64_t s, int64_t d)
{
    return s == DIM_NONE || dim_is_sym(d) ? DIM_NONE : s * d;
}

void layout_strides(int rank, const int64_t *shape, int layout, int64_t *st)
{
    /* no stride takes the outermost dim, which may be symbolic; a symbolic dim further in
     * makes the strides outside it DIM_NONE: such a value is a view of a stored tensor
     * (pipeline.c), never stored itself (plan_buffer) */
    int64_t s = 1;
    if (layout == NEST_COL_MAJOR) {
        for (int k = 0; k < rank; k++) {
            st[k] = s;
            if (k + 1 < rank)
                s = stride_times(s, shape[k]);
        }
    } else {
        for (int k = rank - 1; k >= 0; k--) {
            st[k] = s;
            if (k > 0)
                s = stride_times(s, shape[k]);
        }
    }
}

static void plan_failv(plan *p, int status, const char *fmt, va_list ap)
{
    if (p->status)
        return;
    p->status = status;
    vsnprintf(p->why, sizeof p->why, fmt, ap);
}

bool plan_limit(plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plan_failv(p, NEST_ERR_LIMIT, fmt, ap);
    va_end(ap);
    return false;
}

bool plan_fail(plan *p, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plan_failv(p, status, fmt, ap);
    va_end(ap);
    return false;
}

int32_t plan_buffer(plan *p, pbuf_kind kind, int32_t index, int32_t node, int etype, int64_t count)
{
    pbuf *grown = arena_grow(p->a, p->bufs, (size_t)p->nbufs, &p->capbufs, sizeof *grown);
    if (!grown) {
        p->status = NEST_ERR_NOMEM;
        return -1;
    }
    p->bufs = grown;
    pbuf *b = &p->bufs[p->nbufs];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->index = index;
    b->node = node;
    b->etype = (uint8_t)etype;
    b->count = count;
    /* a symbolic shape's count is its expression (N*64), not ir_count's nominal figure */
    const ir_node *n = node >= 0 ? &p->f->nodes[node] : NULL;
    if (n && n->etype != IR_TUPLE && count == ir_count(n)) {
        bool sym = false;
        for (int k = 0; k < n->rank; k++) {
            sym |= dim_is_sym(n->shape[k]);
            /* stored, a symbolic dim further in would make the strides symbolic */
            if (k > 0 && dim_is_sym(n->shape[k]) && (kind == BUF_TEMP || kind == BUF_RESULT)) {
                namer nm;
                bool named = namer_init(&nm, p->f);
                buf t = {0};
                ir_format_type(&t, p->f, node);
                char *ts = buf_finish(&t);
                plan_fail(p, NEST_ERR_ARG,
                          "value %s (%s: %s) would be stored with a symbolic dim other than the "
                          "first axis, which is not compiled yet; nest_specialize or nestc "
                          "--dim NAME=N give plain sizes",
                          named ? namer_name(&nm, node) : "?", ir_ops[n->op].name,
                          ts ? ts : "?");
                free(ts);
                namer_free(&nm);
                return -1;
            }
        }
        if (sym && (b->count = ir_dims_count(p->f, n->rank, n->shape)) == DIM_NONE) {
            p->status = p->f->status;
            return -1;
        }
    }
    return p->nbufs++;
}

/* ---- hash-consing ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
    return h;
}

static uint64_t hash_of(const fx *e)
{
    uint64_t h = mix(e->kind, ((uint64_t)e->etype << 16) | e->op);
    h = mix(h, (uint64_t)e->nargs);
    for (int i = 0; i < e->nargs; i++)
        h = mix(h, (uint64_t)(uintptr_t)e->args[i]);
    switch (e->kind) {
    case FX_LOAD:
        h = mix(h, (uint64_t)e->buf);
        h = mix(h, (uint64_t)e->off);
        h = mix(h, (uint64_t)e->rank);
        for (int k = 0; k < e->rank; k++)
            h = mix(h, (uint64_t)e->st[k]);
        for (int j = 0; j < e->nargs; j++)
            h = mix(mix(h, (uint64_t)e->gst[j]), (uint64_t)e->gdim[j]);
        break;
    case FX_IMM:
        h = mix(h, (uint64_t)e->imm.i);
        break;
    case FX_CONCAT:
        h = mix(h, (uint64_t)e->axis);
        h = mix(h, (uint64_t)e->rank);
        for (int i = 0; i <= e->nargs; i++)
            h = mix(h, (uint64_t)e->starts[i]);
        break;
    case FX_OP:
        break;
    }
    return h;
}

static bool same(const fx *a, const fx *b)
{
    if (a->kind != b->kind || a->etype != b->etype || a->op != b->op || a->nargs != b->nargs)
        return false;
    for (int i = 0; i < a->nargs; i++)
        if (a->args[i] != b->args[i])
            return false;
    switch (a->kind) {
    case FX_LOAD:
        return a->buf == b->buf && a->off == b->off && a->rank == b->rank &&
               memcmp(a->st, b->st, (size_t)a->rank * sizeof *a->st) == 0 &&
               (a->nargs == 0 ||
                (memcmp(a->gst, b->gst, (size_t)a->nargs * sizeof *a->gst) == 0 &&
                 memcmp(a->gdim, b->gdim, (size_t)a->nargs * sizeof *a->gdim) == 0));
    case FX_IMM:
        return a->imm.i == b->imm.i; /* the bits, so -0.0 and NaNs stay distinct */
    case FX_CONCAT:
        return a->axis == b->axis && a->rank == b->rank &&
               memcmp(a->starts, b->starts, (size_t)(a->nargs + 1) * sizeof *a->starts) == 0;
    case FX_OP:
        return true;
    }
    return false;
}

/* Returns the table's node equal to *e, or a new copy of *e in the arena. */
static fx *intern(plan *p, const fx *e)
{
    if (p->status)
        return NULL;
    uint64_t h = hash_of(e);
    if ((p->nfx + 1) * 2 > p->tabcap) {
        size_t cap = p->tabcap ? p->tabcap * 2 : 256;
        fx **t = calloc(cap, sizeof *t);
        if (!t) {
            p->status = NEST_ERR_NOMEM;
            return NULL;
        }
        for (size_t i = 0; i < p->tabcap; i++)
            for (fx *x = p->table[i], *next; x; x = next) {
                next = x->chain;
                x->chain = t[x->hash & (cap - 1)];
                t[x->hash & (cap - 1)] = x;
            }
        free(p->table);
        p->table = t;
        p->tabcap = cap;
    }
    for (fx *x = p->table[h & (p->tabcap - 1)]; x; x = x->chain)
        if (x->hash == h && same(x, e))
            return x;
    fx *n = arena_memdup(p->a, e, sizeof *e);
    if (!n || (e->nargs && !(n->args = arena_memdup(p->a, e->args, (size_t)e->nargs * sizeof *e->args))) ||
        (e->kind == FX_LOAD && e->rank && !(n->st = arena_memdup(p->a, e->st, (size_t)e->rank * sizeof *e->st))) ||
        (e->kind == FX_LOAD && e->nargs && (!(n->gst = arena_memdup(p->a, e->gst, (size_t)e->nargs * sizeof *e->gst)) ||
                                            !(n->gdim = arena_memdup(p->a, e->gdim, (size_t)e->nargs * sizeof *e->gdim)))) ||
        (e->kind == FX_CONCAT && !(n->starts = arena_memdup(p->a, e->starts, (size_t)(e->nargs + 1) * sizeof *e->starts)))) {
        p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    n->hash = h;
    n->id = (int32_t)p->nfx++;
    n->chain = p->table[h & (p->tabcap - 1)];
    p->table[h & (p->tabcap - 1)] = n;
    return n;
}

fx *fx_load(plan *p, int32_t bufi, int64_t off, int rank, const int64_t *st, int32_t node)
{
    return fx_gload(p, bufi, off, rank, st, 0, NULL, NULL, NULL, node);
}

fx *fx_gload(plan *p, int32_t bufi, int64_t off, int rank, const int64_t *st, int nterms,
             fx *const *idx, const int64_t *gst, const int64_t *gdim, int32_t node)
{
    for (int j = 0; j < nterms; j++)
        if (!idx[j])
            return NULL;
    fx e = {.kind = FX_LOAD, .etype = bufi == FX_IOTA ? NEST_I64 : p->bufs[bufi].etype,
            .node = node, .rank = rank, .buf = bufi, .off = off, .st = (int64_t *)st,
            .nargs = nterms, .args = (fx **)idx, .gst = (int64_t *)gst, .gdim = (int64_t *)gdim};
    return intern(p, &e);
}

fx *fx_imm(plan *p, int etype, double f, int64_t i)
{
    fx e = {.kind = FX_IMM, .etype = (uint8_t)etype, .node = -1};
    if (etype == NEST_F32 || etype == NEST_F64)
        e.imm.f = etype == NEST_F32 ? (double)(float)f : f;
    else
        e.imm.i = i;
    return intern(p, &e);
}

fx *fx_op(plan *p, ir_op op, int etype, int nargs, fx *const *args, int32_t node)
{
    for (int i = 0; i < nargs; i++)
        if (!args[i])
            return NULL;
    fx e = {.kind = FX_OP, .etype = (uint8_t)etype, .op = (uint16_t)op, .node = node,
            .nargs = nargs, .args = (fx **)args};
    return intern(p, &e);
}

fx *fx_concat(plan *p, int rank, int axis, int nargs, fx *const *args, const int64_t *starts,
              int32_t node)
{
    for (int i = 0; i < nargs; i++)
        if (!args[i])
            return NULL;
    fx e = {.kind = FX_CONCAT, .etype = args[0]->etype, .node = node, .rank = rank, .axis = axis,
            .nargs = nargs, .args = (fx **)args, .starts = (int64_t *)starts};
    return intern(p, &e);
}

/* ---- transforms ---- */

/* A transform rewrites the leaves (and concat nodes) of an expression and rebuilds the ops
 * above them; shared nodes are rewritten once (a memo keyed by node). */
typedef struct xform xform;
struct xform {
    plan *p;
    /* leaf: the new load for e (NULL: inexpressible) */
    fx *(*load)(xform *x, const fx *e);
    /* concat: the new concat node given its rewritten parts (NULL: inexpressible) */
    fx *(*concat)(xform *x, const fx *e, fx **parts);
    int rank;                 /* the new index space's rank */
    const int64_t *a, *b;     /* parameters of the transform */
    const uint8_t *order;
    const int *from;
    const fx *old;            /* substitute: this node ... */
    fx *new_;                 /* ... becomes this one */
    const fx_map *subst;      /* forward: loads to replace, and by what */
    uint32_t mask;
    int axis;
    int64_t delta;
    int in_rank, out_rank;
    const int64_t *in_shape, *out_shape;
    fx_map memo;
    bool failed;
};

static fx **memo_slot(xform *x, const fx *e) { return fx_map_slot(x->p, &x->memo, e); }

static fx *rewrite(xform *x, const fx *e);

/* A load with gather terms: its index expressions are over the same space as the load, so they
 * take the same transform; the base (offset and strides) is the handler's, whose own gather
 * terms (fx_gather adds one) follow the load's. */
static fx *rewrite_gload(xform *x, const fx *e)
{
    fx *base = x->load(x, e);
    if (!base)
        return NULL;
    int n = e->nargs + base->nargs;
    if (n > FX_MAX_TERMS)
        return NULL;
    fx *idx[2 * FX_MAX_TERMS];
    int64_t gst[2 * FX_MAX_TERMS], gdim[2 * FX_MAX_TERMS];
    for (int j = 0; j < e->nargs; j++) {
        if (!(idx[j] = rewrite(x, e->args[j])))
            return NULL;
        gst[j] = e->gst[j];
        gdim[j] = e->gdim[j];
    }
    for (int j = 0; j < base->nargs; j++) {
        idx[e->nargs + j] = base->args[j];
        gst[e->nargs + j] = base->gst[j];
        gdim[e->nargs + j] = base->gdim[j];
    }
    return fx_gload(x->p, base->buf, base->off, base->rank, base->st, n, idx, gst, gdim, e->node);
}

static fx *rewrite(xform *x, const fx *e)
{
    if (x->failed || x->p->status)
        return NULL;
    if (e->kind == FX_IMM)
        return (fx *)e;
    fx **slot = memo_slot(x, e);
    if (!slot)
        return NULL;
    if (*slot)
        return *slot;
    fx *r = NULL;
    switch (e->kind) {
    case FX_LOAD:
        r = e->nargs ? rewrite_gload(x, e) : x->load(x, e);
        break;
    case FX_OP:
    case FX_CONCAT: {
        fx *args[e->nargs > 0 ? e->nargs : 1];
        for (int i = 0; i < e->nargs; i++)
            if (!(args[i] = rewrite(x, e->args[i])))
                return NULL;
        r = e->kind == FX_OP ? fx_op(x->p, (ir_op)e->op, e->etype, e->nargs, args, e->node)
                             : x->concat ? x->concat(x, e, args) : NULL;
        break;
    }
    case FX_IMM:
        break;
    }
    if (!r) {
        x->failed = true;
        return NULL;
    }
    /* the slot may have moved if the memo grew */
    *memo_slot(x, e) = r;
    return r;
}

static fx *run(xform *x, fx *e)
{
    fx *r = e ? rewrite(x, e) : NULL;
    fx_map_free(&x->memo);
    return x->failed || x->p->status ? NULL : r;
}

/* broadcast: new axes (x->mask) of the output get stride 0 */
static fx *bc_load(xform *x, const fx *e)
{
    int64_t st[NEST_MAX_RANK];
    for (int k = 0, j = 0; k < x->rank; k++)
        st[k] = (x->mask & (1u << k)) ? 0 : e->st[j++];
    return fx_load(x->p, e->buf, e->off, x->rank, st, e->node);
}

/* The new position of old axis `axis` after inserting the axes in mask. */
static int bc_axis(uint32_t mask, int rank, int axis)
{
    for (int k = 0, j = 0; k < rank; k++) {
        if (mask & (1u << k))
            continue;
        if (j++ == axis)
            return k;
    }
    return -1;
}

static fx *bc_concat(xform *x, const fx *e, fx **parts)
{
    return fx_concat(x->p, x->rank, bc_axis(x->mask, x->rank, e->axis), e->nargs, parts, e->starts,
                     e->node);
}

fx *fx_broadcast(plan *p, fx *e, int rank, uint32_t new_axes)
{
    xform x = {.p = p, .load = bc_load, .concat = bc_concat, .rank = rank, .mask = new_axes};
    return run(&x, e);
}

/* slice: offset by lower, strides scaled by step */
static fx *sl_load(xform *x, const fx *e)
{
    int64_t st[NEST_MAX_RANK], off = e->off;
    for (int k = 0; k < e->rank; k++) {
        off += x->a[k] * e->st[k];
        st[k] = e->st[k] * x->b[k];
    }
    return fx_load(x->p, e->buf, off, e->rank, st, e->node);
}

fx *fx_slice(plan *p, fx *e, const int64_t *lower, const int64_t *step)
{
    xform x = {.p = p, .load = sl_load, .concat = NULL, .a = lower, .b = step};
    return run(&x, e);
}

/* permute: new axis j is old axis order[j] */
static fx *pm_load(xform *x, const fx *e)
{
    int64_t st[NEST_MAX_RANK];
    for (int j = 0; j < x->rank; j++)
        st[j] = e->st[x->order[j]];
    return fx_load(x->p, e->buf, e->off, x->rank, st, e->node);
}

static fx *pm_concat(xform *x, const fx *e, fx **parts)
{
    int axis = 0;
    for (int j = 0; j < x->rank; j++)
        if (x->order[j] == e->axis)
            axis = j;
    return fx_concat(x->p, x->rank, axis, e->nargs, parts, e->starts, e->node);
}

fx *fx_permute(plan *p, fx *e, int rank, const uint8_t *order)
{
    xform x = {.p = p, .load = pm_load, .concat = pm_concat, .rank = rank, .order = order};
    return run(&x, e);
}

/* reshape: numpy's no-copy reshape of each leaf's strides */
static bool nocopy_reshape(nest_function *f, int ord, const int64_t *odims, const int64_t *ost,
                           int nrd, const int64_t *ndims, int64_t *nst)
{
    int64_t od[NEST_MAX_RANK], os[NEST_MAX_RANK];
    int oldnd = 0;
    for (int k = 0; k < nrd; k++)
        if (ndims[k] == 0) { /* no elements: any strides will do */
            for (int j = 0; j < nrd; j++)
                nst[j] = 0;
            return true;
        }
    for (int k = 0; k < ord; k++)
        if (odims[k] != 1) {
            od[oldnd] = odims[k];
            os[oldnd++] = ost[k];
        }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nrd && oi < oldnd) {
        int64_t np = ndims[ni], op = od[oi];
        while (np != op) {
            /* a symbolic extent (the outermost, N) groups as a product: [N,256] is [N*256];
             * a new axis of extent 1 joins the next whatever it is ([N,1] as [1,N]) */
            int c = np == 1                            ? -1
                    : dim_is_sym(np) || dim_is_sym(op) ? dim_compare(f, np, op)
                    : np < op                          ? -1
                                                       : 1;
            bool grow_new = c == -1 || c == DIM_LE;
            if (c == DIM_UNKNOWN || (grow_new ? nj >= nrd : oj >= oldnd))
                return false;
            if (grow_new)
                np = dim_mul(f, np, ndims[nj++]);
            else
                op = dim_mul(f, op, od[oj++]);
            if (np == DIM_NONE || op == DIM_NONE)
                return false;
        }
        for (int ok = oi; ok < oj - 1; ok++)
            if (dim_is_sym(od[ok + 1]) || os[ok] != od[ok + 1] * os[ok + 1])
                return false;
        nst[nj - 1] = os[oj - 1];
        for (int nk = nj - 1; nk > ni; nk--) { /* outside a symbolic extent, only an axis of
                                                   * extent 1, which takes any stride */
            if (ndims[nk - 1] != 1 && dim_is_sym(ndims[nk]))
                return false;
            nst[nk - 1] = dim_is_sym(ndims[nk]) ? 0 : nst[nk] * ndims[nk];
        }
        ni = nj++;
        oi = oj++;
    }
    for (int k = ni; k < nrd; k++) /* trailing dims of extent 1 */
        nst[k] = 0;
    return true;
}

static fx *rs_load(xform *x, const fx *e)
{
    int64_t st[NEST_MAX_RANK];
    if (!nocopy_reshape(x->p->f, x->in_rank, x->in_shape, e->st, x->out_rank, x->out_shape, st))
        return NULL;
    return fx_load(x->p, e->buf, e->off, x->out_rank, st, e->node);
}

fx *fx_reshape(plan *p, fx *e, int in_rank, const int64_t *in_shape, int rank,
               const int64_t *shape)
{
    xform x = {.p = p, .load = rs_load, .concat = NULL, .in_rank = in_rank, .in_shape = in_shape,
               .out_rank = rank, .out_shape = shape};
    return run(&x, e);
}

/* substitute: one node replaced by another (only plain loads are replaced: a load with gather
 * terms keeps its base, and its index expressions are substituted) */
static fx *sub_load(xform *x, const fx *e)
{
    if (e->nargs)
        return fx_load(x->p, e->buf, e->off, e->rank, e->st, e->node);
    return e == x->old ? x->new_ : (fx *)e;
}

static fx *sub_concat(xform *x, const fx *e, fx **parts)
{
    return fx_concat(x->p, e->rank, e->axis, e->nargs, parts, e->starts, e->node);
}

fx *fx_substitute(plan *p, fx *e, fx *from, fx *to)
{
    if (from->kind != FX_LOAD)
        return NULL; /* only leaves are substituted */
    xform x = {.p = p, .load = sub_load, .concat = sub_concat, .old = from, .new_ = to};
    return run(&x, e);
}

/* forward: the loads that are keys of a map replaced by their values, over several roots (a
 * load with gather terms keeps its base, as in substitute: rewrite_gload adds its terms, which
 * the load itself returned would have carried twice) */
static fx *fw_load(xform *x, const fx *e)
{
    fx *to = fx_map_get(x->subst, e);
    if (!to && e->nargs)
        return fx_load(x->p, e->buf, e->off, e->rank, e->st, e->node);
    return to ? to : (fx *)e;
}

bool fx_forward(plan *p, fx **vals, int n, const fx_map *subst)
{
    xform x = {.p = p, .load = fw_load, .concat = sub_concat, .subst = subst};
    for (int i = 0; i < n && !x.failed && !p->status; i++)
        vals[i] = vals[i] ? rewrite(&x, vals[i]) : NULL;
    fx_map_free(&x.memo);
    return !x.failed && !p->status;
}

/* shift: e'(i) = e(i + delta along axis) */
static fx *sh_load(xform *x, const fx *e)
{
    return fx_load(x->p, e->buf, e->off + x->delta * e->st[x->axis], e->rank, e->st, e->node);
}

static fx *sh_concat(xform *x, const fx *e, fx **parts)
{
    if (e->axis != x->axis)
        return fx_concat(x->p, e->rank, e->axis, e->nargs, parts, e->starts, e->node);
    /* along its own axis a concat shifts its boundaries, and its parts stay as they were */
    int64_t starts[e->nargs + 1];
    for (int i = 0; i <= e->nargs; i++)
        starts[i] = e->starts[i] - x->delta;
    return fx_concat(x->p, e->rank, e->axis, e->nargs, e->args, starts, e->node);
}

fx *fx_shift(plan *p, fx *e, int axis, int64_t delta)
{
    if (delta == 0)
        return e;
    xform x = {.p = p, .load = sh_load, .concat = sh_concat, .axis = axis, .delta = delta};
    return run(&x, e);
}

/* regroup: new axis k takes the stride of old axis from[k+1]-1 (the innermost of the axes it
 * merges); the other old axes either merged into it or had extent 1 */
static fx *rg_load(xform *x, const fx *e)
{
    int64_t st[NEST_MAX_RANK];
    for (int k = 0; k < x->rank; k++)
        st[k] = e->st[x->from[k + 1] - 1];
    return fx_load(x->p, e->buf, e->off, x->rank, st, e->node);
}

static fx *rg_concat(xform *x, const fx *e, fx **parts)
{
    for (int k = 0; k < x->rank; k++)
        if (x->from[k + 1] - 1 == e->axis)
            return fx_concat(x->p, x->rank, k, e->nargs, parts, e->starts, e->node);
    return NULL; /* flatten.c never merges or drops a concat axis */
}

fx *fx_regroup(plan *p, fx *e, int rank, const int *from)
{
    xform x = {.p = p, .load = rg_load, .concat = rg_concat, .rank = rank, .from = from};
    return run(&x, e);
}

/* reverse: along the axes in mask, offsets move to the last element and strides turn negative.
 * A concat along such an axis lists its parts in reverse order, each reversed within its own
 * extent: the rewrite reversed it within the whole extent n, which a shift by n - extent undoes. */
static fx *rv_load(xform *x, const fx *e)
{
    int64_t st[NEST_MAX_RANK], off = e->off;
    for (int k = 0; k < e->rank; k++) {
        st[k] = e->st[k];
        if ((x->mask & (1u << k)) && x->in_shape[k] > 0) {
            off += (x->in_shape[k] - 1) * e->st[k];
            st[k] = -e->st[k];
        }
    }
    return fx_load(x->p, e->buf, off, e->rank, st, e->node);
}

static fx *rv_concat(xform *x, const fx *e, fx **parts)
{
    if (!(x->mask & (1u << e->axis)))
        return fx_concat(x->p, e->rank, e->axis, e->nargs, parts, e->starts, e->node);
    int m = e->nargs;
    int64_t n = x->in_shape[e->axis], starts[m + 1];
    fx *rev[m > 0 ? m : 1];
    for (int j = 0; j < m; j++) {
        int64_t extent = e->starts[j + 1] - e->starts[j];
        rev[m - 1 - j] = fx_shift(x->p, parts[j], e->axis, n - extent);
        starts[m - 1 - j] = n - e->starts[j + 1];
        if (!rev[m - 1 - j])
            return NULL;
    }
    starts[m] = n - e->starts[0];
    return fx_concat(x->p, e->rank, e->axis, m, rev, starts, e->node);
}

fx *fx_reverse(plan *p, fx *e, int rank, const int64_t *shape, uint32_t mask)
{
    if (!mask)
        return e;
    xform x = {.p = p, .load = rv_load, .concat = rv_concat, .rank = rank, .in_shape = shape,
               .mask = mask};
    return run(&x, e);
}

/* gather: axis `axis` of the operand's space becomes the ri axes of the index, and each load
 * takes one more gather term: its stride along that axis times the index taken. A load that
 * does not move along the axis (a broadcast) needs no term. */
static fx *ga_load(xform *x, const fx *e)
{
    int64_t st[NEST_MAX_RANK];
    int out = 0;
    for (int k = 0; k < e->rank; k++) {
        if (k != x->axis) {
            st[out++] = e->st[k];
            continue;
        }
        for (int j = 0; j < x->out_rank - x->in_rank + 1; j++)
            st[out++] = 0;
    }
    int64_t gst = e->st[x->axis], gdim = x->delta;
    if (gst == 0)
        return fx_load(x->p, e->buf, e->off, out, st, e->node);
    return fx_gload(x->p, e->buf, e->off, out, st, 1, &x->new_, &gst, &gdim, e->node);
}

static fx *ga_concat(xform *x, const fx *e, fx **parts)
{
    if (e->axis == x->axis)
        return NULL; /* the parts would depend on the index's value */
    int axis = e->axis < x->axis ? e->axis : e->axis + x->out_rank - x->in_rank;
    return fx_concat(x->p, x->out_rank, axis, e->nargs, parts, e->starts, e->node);
}

fx *fx_gather(plan *p, fx *e, int in_rank, int axis, int64_t n, fx *idx, int ri)
{
    if (!idx)
        return NULL;
    xform x = {.p = p, .load = ga_load, .concat = ga_concat, .in_rank = in_rank,
               .out_rank = in_rank - 1 + ri, .axis = axis, .delta = n, .new_ = idx};
    return run(&x, e);
}

/* select: concats on `axis` resolved for the index range [lo, hi) */
static fx *select_rec(xform *x, const fx *e);

static fx *sel_concat_part(xform *x, const fx *e)
{
    /* the last part starting at or before lo (starts ascend) */
    int lo = 0, hi = e->nargs;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (e->starts[mid] <= x->a[0])
            lo = mid;
        else
            hi = mid;
    }
    for (int j = lo; j < e->nargs && e->starts[j] <= x->a[0]; j++) /* empty parts: the next */
        if (x->b[0] <= e->starts[j + 1]) {
            fx *part = fx_shift(x->p, e->args[j], x->axis, -e->starts[j]);
            return part ? select_rec(x, part) : NULL;
        }
    return (fx *)e; /* the range straddles a boundary: left for the caller to split further */
}

static fx *select_rec(xform *x, const fx *e)
{
    if (x->failed || x->p->status)
        return NULL;
    if (e->kind == FX_IMM || (e->kind == FX_LOAD && e->nargs == 0))
        return (fx *)e;
    fx **slot = memo_slot(x, e);
    if (!slot)
        return NULL;
    if (*slot)
        return *slot;
    fx *r;
    if (e->kind == FX_CONCAT && e->axis == x->axis) {
        r = sel_concat_part(x, e);
    } else {
        fx *args[e->nargs];
        for (int i = 0; i < e->nargs; i++)
            if (!(args[i] = select_rec(x, e->args[i])))
                return NULL;
        r = e->kind == FX_OP     ? fx_op(x->p, (ir_op)e->op, e->etype, e->nargs, args, e->node)
            : e->kind == FX_LOAD ? fx_gload(x->p, e->buf, e->off, e->rank, e->st, e->nargs, args,
                                            e->gst, e->gdim, e->node)
                                 : fx_concat(x->p, e->rank, e->axis, e->nargs, args, e->starts,
                                             e->node);
    }
    if (!r) {
        x->failed = true;
        return NULL;
    }
    *memo_slot(x, e) = r;
    return r;
}

fx *fx_select(plan *p, fx *e, int axis, int64_t lo, int64_t hi)
{
    xform x = {.p = p, .axis = axis, .a = &lo, .b = &hi};
    fx *r = select_rec(&x, e);
    fx_map_free(&x.memo);
    return x.failed || p->status ? NULL : r;
}
