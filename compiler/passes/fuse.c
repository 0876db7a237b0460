/*
 * fuse.c - which values are stored, and the loop nests that compute them.
 *
 * Every value starts as an r-tensor: an element expression (fx) over its own index space,
 * built from its operands' expressions. A value becomes an l-tensor (a buffer written by a nest
 * of its own) only when it must:
 *   - it is a result (written into the caller's array);
 *   - it is a reduction (sum, max, min, or a dot that contracts), whose nest folds an axis;
 *   - several ops consume it and recomputing it costs more than storing it;
 *   - its expression grew past FUSE_MAX_OPS ops;
 *   - a view cannot express it by strides (a reshape that merges non-contiguous axes), or a dot
 *     or broadcast would recompute an expensive operand many times;
 *   - fusion is off (then every op is stored, and views stay views).
 * Then adjacent nests over the same iteration space merge, forwarding values instead of
 * reading them back, so a value feeding several outputs is computed once.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FUSE_MAX_OPS 200  /* ops in one expression */
#define SHARE_COST 8      /* a value with several consumers is stored from this cost on */
#define REUSE_COST 2      /* an operand read many times (broadcast, dot) is stored from this on */

typedef struct lower {
    plan *p;
    nest_function *f;
    fx **val;        /* per node: its expression over its own index space */
    int32_t *home;   /* per node: the buffer that stores it, or -1 */
    int32_t *users;  /* per node: how many live ops consume it (each op once) */
    bool *live;
} lower;

/* ---- costs ---- */

static int op_weight(ir_op op)
{
    switch (op) {
    case OP_EXP: case OP_LOG: case OP_TANH: case OP_POWER: return 10;
    case OP_DIVIDE: case OP_SQRT: return 3;
    default: return 1;
    }
}

static void weigh(fx *e, void *ctx)
{
    if (e->kind == FX_OP)
        *(int64_t *)ctx += op_weight((ir_op)e->op);
    else if (e->kind == FX_CONCAT)
        *(int64_t *)ctx += 1;
}

/* The cost of computing one element of e, shared subexpressions counted once. */
static int64_t cost(plan *p, fx *e)
{
    int64_t c = 0;
    fx_walk(p, &e, 1, weigh, &c);
    return c;
}

/* ---- nests ---- */

static nest *new_nest(plan *p, int rank, const int64_t *dims, uint32_t reduced)
{
    nest *grown = arena_grow(p->a, p->nests, (size_t)p->nnests, &p->capnests, sizeof *grown);
    if (!grown) {
        p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    p->nests = grown;
    nest *n = &p->nests[p->nnests];
    memset(n, 0, sizeof *n);
    n->rank = rank;
    n->pack = -1;
    n->dims = arena_memdup(p->a, dims, (size_t)rank * sizeof *dims + 1);
    n->reduced = reduced;
    if (!n->dims) {
        p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    p->nnests++;
    return n;
}

static bool add_out(plan *p, nest *n, int32_t bufi, int64_t off, const int64_t *st, fx *value,
                    int reduce, int32_t node)
{
    nout *o = arena_array(p->a, (size_t)n->nouts + 1, sizeof *o);
    int32_t *nodes = arena_array(p->a, (size_t)n->nnodes + 1, sizeof *nodes);
    int64_t *s = arena_memdup(p->a, st, (size_t)n->rank * sizeof *st + 1);
    if (!o || !nodes || !s || !value) {
        if (!p->status)
            p->status = NEST_ERR_NOMEM;
        return false;
    }
    if (n->nouts)
        memcpy(o, n->outs, (size_t)n->nouts * sizeof *o);
    o[n->nouts++] = (nout){bufi, off, s, value, (int16_t)reduce, node, false};
    n->outs = o;
    if (n->nnodes)
        memcpy(nodes, n->nodes, (size_t)n->nnodes * sizeof *nodes);
    nodes[n->nnodes++] = node;
    n->nodes = nodes;
    return true;
}

/* The buffer a node is stored in: its first result array if it is a result, else a new
 * temporary. Strides (over the node's shape) go to st. */
static int32_t home_of(lower *lw, int32_t node, int64_t *st)
{
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    for (int32_t i = 0; i < f->nresults; i++)
        if (f->results[i] == node) {
            layout_strides(n->rank, n->shape, f->result_layout[i], st);
            return plan_buffer(lw->p, BUF_RESULT, i, node, n->etype, ir_count(n));
        }
    layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
    return plan_buffer(lw->p, BUF_TEMP, -1, node, n->etype, ir_count(n));
}

/* Stores node's expression in its home with a nest of its own; the node is read from there
 * afterwards. */
static bool store(lower *lw, int32_t node)
{
    if (lw->home[node] >= 0)
        return true;
    plan *p = lw->p;
    const ir_node *n = &lw->f->nodes[node];
    int64_t st[NEST_MAX_RANK];
    int32_t b = home_of(lw, node, st);
    nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
    if (!ne || !add_out(p, ne, b, 0, st, lw->val[node], -1, node))
        return false;
    lw->home[node] = b;
    lw->val[node] = fx_load(p, b, 0, n->rank, st, node);
    return lw->val[node] != NULL;
}

static bool is_load(const fx *e) { return e->kind == FX_LOAD || e->kind == FX_IMM; }

/* ---- lowering each kind of op ---- */

static fx *operand(lower *lw, const ir_node *n, int i) { return lw->val[ir_resolve(lw->f, n->in[i])]; }

/* A reduction nest over `value` (iteration space rank/dims, reduced axes) into node's home. */
static bool reduce_into_home(lower *lw, int32_t node, int rank, const int64_t *dims,
                             uint32_t reduced, fx *value, int reduce_op)
{
    plan *p = lw->p;
    const ir_node *n = &lw->f->nodes[node];
    int64_t ost[NEST_MAX_RANK], st[NEST_MAX_RANK];
    int32_t b = home_of(lw, node, ost);
    nest *ne = b >= 0 ? new_nest(p, rank, dims, reduced) : NULL;
    if (!ne)
        return false;
    for (int k = 0, j = 0; k < rank; k++)
        st[k] = (reduced & (1u << k)) ? 0 : ost[j++];
    if (!add_out(p, ne, b, 0, st, value, reduce_op, node))
        return false;
    lw->home[node] = b;
    lw->val[node] = fx_load(p, b, 0, n->rank, ost, node);
    return lw->val[node] != NULL;
}

static bool lower_dot(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t ia = ir_resolve(f, n->in[0]), ib = ir_resolve(f, n->in[1]);
    const ir_node *a = &f->nodes[ia], *b = &f->nodes[ib];
    if (a->rank == 0 || b->rank == 0) { /* a scalar scales the other operand */
        fx *s = a->rank == 0 ? lw->val[ia] : lw->val[ib];
        fx *t = a->rank == 0 ? lw->val[ib] : lw->val[ia];
        fx *sb = fx_broadcast(p, s, n->rank, n->rank ? (1u << n->rank) - 1 : 0);
        fx *args[2] = {a->rank == 0 ? sb : t, a->rank == 0 ? t : sb};
        lw->val[node] = fx_op(p, OP_MULTIPLY, n->etype, 2, args, node);
        return lw->val[node] != NULL;
    }
    /* sum over k of a[i.., k] * b[k, j..]: iteration space [i.., j.., k], k reduced */
    int ra = a->rank, rb = b->rank, rank = ra - 1 + rb - 1 + 1;
    int64_t free_a = 1, free_b = 1;
    for (int k = 0; k < ra - 1; k++)
        free_a *= a->shape[k];
    for (int k = 1; k < rb; k++)
        free_b *= b->shape[k];
    /* an operand read once per element of the other's free axes is stored unless cheap */
    if (free_b > 1 && !is_load(lw->val[ia]) && cost(p, lw->val[ia]) >= REUSE_COST && !store(lw, ia))
        return false;
    if (free_a > 1 && !is_load(lw->val[ib]) && cost(p, lw->val[ib]) >= REUSE_COST && !store(lw, ib))
        return false;
    int64_t dims[NEST_MAX_RANK + 1];
    memcpy(dims, n->shape, (size_t)n->rank * sizeof *dims);
    dims[rank - 1] = a->shape[ra - 1];
    uint32_t a_new = 0, b_new = 0;
    for (int k = ra - 1; k < ra - 1 + rb - 1; k++)
        a_new |= 1u << k;
    for (int k = 0; k < ra - 1; k++)
        b_new |= 1u << k;
    uint8_t order[NEST_MAX_RANK];
    for (int k = 0; k < rb - 1; k++)
        order[k] = (uint8_t)(k + 1);
    order[rb - 1] = 0;
    fx *av = fx_broadcast(p, lw->val[ia], rank, a_new);
    fx *bp = fx_permute(p, lw->val[ib], rb, order);
    fx *bv = bp ? fx_broadcast(p, bp, rank, b_new) : NULL;
    fx *args[2] = {av, bv};
    fx *prod = av && bv ? fx_op(p, OP_MULTIPLY, n->etype, 2, args, node) : NULL;
    if (!prod) {
        if (!p->status)
            p->status = NEST_ERR_LIMIT; /* broadcast of a concat cannot fail; this is a bug */
        return false;
    }
    if (!reduce_into_home(lw, node, rank, dims, 1u << (rank - 1), prod, OP_SUM))
        return false;
    p->nests[p->nnests - 1].dot = free_a > 1 && free_b > 1;
    return true;
}

/* Whether node is returned into a column-major array (its home then has that layout). */
static bool col_major_result(const lower *lw, int32_t node)
{
    for (int32_t i = 0; i < lw->f->nresults; i++)
        if (lw->f->results[i] == node)
            return lw->f->result_layout[i] == NEST_COL_MAJOR; /* the first one is its home */
    return false;
}

static bool lower_reshape(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t ia = ir_resolve(f, n->in[0]);
    const ir_node *a = &f->nodes[ia];
    int64_t pshape[NEST_MAX_RANK];
    for (int k = 0; k < a->rank; k++)
        pshape[k] = a->shape[n->a.order[k]];
    /* a view when strides can say it */
    fx *perm = fx_permute(p, lw->val[ia], a->rank, n->a.order);
    fx *v = perm ? fx_reshape(p, perm, a->rank, pshape, n->rank, n->shape) : NULL;
    if (v || p->status) {
        lw->val[node] = v;
        return v != NULL;
    }
    /* else a copy: iterating over the permuted operand and writing densely gives the
     * reshape's row-major order (a column-major result is copied from it afterwards). The
     * operand's expression goes into the copy: storing it first would only add a store. */
    int64_t st[NEST_MAX_RANK], pst[NEST_MAX_RANK];
    int32_t b = col_major_result(lw, node)
                    ? plan_buffer(p, BUF_TEMP, -1, node, n->etype, ir_count(n))
                    : home_of(lw, node, st);
    if (!perm || b < 0)
        return false;
    layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
    layout_strides(a->rank, pshape, NEST_ROW_MAJOR, pst);
    nest *ne = new_nest(p, a->rank, pshape, 0);
    if (!ne || !add_out(p, ne, b, 0, pst, perm, -1, node))
        return false;
    if (!col_major_result(lw, node))
        lw->home[node] = b; /* else maybe_store copies it into the result */
    lw->val[node] = fx_load(p, b, 0, n->rank, st, node);
    return lw->val[node] != NULL;
}

static bool lower_node(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    switch (ir_kind_of(n)) {
    case K_PARAM: {
        int64_t st[NEST_MAX_RANK];
        layout_strides(n->rank, n->shape, n->a.param.layout, st);
        int32_t b = plan_buffer(p, BUF_PARAM, n->a.param.index, node, n->etype, ir_count(n));
        if (b < 0)
            return false;
        lw->home[node] = b;
        lw->val[node] = fx_load(p, b, 0, n->rank, st, node);
        break;
    }
    case K_CONST: {
        if (n->a.constant.count == 1) {
            const void *d = n->a.constant.data;
            switch (n->etype) {
            case NEST_F32: lw->val[node] = fx_imm(p, n->etype, *(const float *)d, 0); break;
            case NEST_F64: lw->val[node] = fx_imm(p, n->etype, *(const double *)d, 0); break;
            case NEST_I32: lw->val[node] = fx_imm(p, n->etype, 0, *(const int32_t *)d); break;
            case NEST_I64: lw->val[node] = fx_imm(p, n->etype, 0, *(const int64_t *)d); break;
            default: lw->val[node] = fx_imm(p, n->etype, 0, *(const uint8_t *)d); break;
            }
            break;
        }
        int64_t st[NEST_MAX_RANK];
        layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
        int32_t b = plan_buffer(p, BUF_CONST, p->nconsts++, node, n->etype, ir_count(n));
        if (b < 0)
            return false;
        lw->home[node] = b;
        lw->val[node] = fx_load(p, b, 0, n->rank, st, node);
        break;
    }
    case K_EW:
    case K_CMP:
    case K_SELECT:
    case K_CONVERT: {
        fx *args[3];
        for (int i = 0; i < n->nin; i++)
            args[i] = operand(lw, n, i);
        lw->val[node] = fx_op(p, (ir_op)n->op, n->etype, n->nin, args, node);
        break;
    }
    case K_BROADCAST: {
        int32_t ia = ir_resolve(f, n->in[0]);
        if (ir_count(n) > ir_count(&f->nodes[ia]) && !is_load(lw->val[ia]) &&
            cost(p, lw->val[ia]) >= REUSE_COST && !store(lw, ia))
            return false;
        lw->val[node] = fx_broadcast(p, lw->val[ia], n->rank, n->a.axes);
        break;
    }
    case K_SLICE: {
        int32_t ia = ir_resolve(f, n->in[0]);
        /* along an axis of at most one element the stride is never taken: 1 keeps the strides
         * of the view from overflowing (a stride of 2^63 - 1 is valid) */
        int64_t step[NEST_MAX_RANK];
        for (int k = 0; k < n->rank; k++)
            step[k] = n->shape[k] <= 1 ? 1 : n->a.slice.step[k];
        lw->val[node] = fx_slice(p, lw->val[ia], n->a.slice.lower, step);
        if (!lw->val[node] && !p->status) { /* a slice of a concat: store the concat */
            if (!store(lw, ia))
                return false;
            lw->val[node] = fx_slice(p, lw->val[ia], n->a.slice.lower, step);
        }
        break;
    }
    case K_RESHAPE:
        return lower_reshape(lw, node);
    case K_CONCAT: {
        fx **parts = arena_array(p->a, (size_t)n->nin, sizeof *parts);
        int64_t *starts = arena_array(p->a, (size_t)n->nin + 1, sizeof *starts);
        if (!parts || !starts) {
            p->status = NEST_ERR_NOMEM;
            return false;
        }
        for (int i = 0; i < n->nin; i++) {
            parts[i] = operand(lw, n, i);
            starts[i + 1] = starts[i] + f->nodes[ir_resolve(f, n->in[i])].shape[n->a.axis];
        }
        lw->val[node] = fx_concat(p, n->rank, n->a.axis, n->nin, parts, starts, node);
        break;
    }
    case K_REDUCE: {
        int32_t ia = ir_resolve(f, n->in[0]);
        const ir_node *a = &f->nodes[ia];
        return reduce_into_home(lw, node, a->rank, a->shape, n->a.axes, lw->val[ia], n->op);
    }
    case K_DOT:
        return lower_dot(lw, node);
    case K_TUPLE:
    case K_GET:
        return true;
    }
    return lw->val[node] != NULL;
}

/* After lowering a node: store it if it must be. */
static bool maybe_store(lower *lw, int32_t node)
{
    plan *p = lw->p;
    const ir_node *n = &lw->f->nodes[node];
    ir_kind k = ir_kind_of(n);
    if (k == K_PARAM || k == K_CONST || k == K_TUPLE || k == K_GET || lw->home[node] >= 0)
        return true;
    bool is_result = false;
    for (int32_t i = 0; i < lw->f->nresults; i++)
        is_result |= lw->f->results[i] == node;
    bool is_op = op_is_elementwise((ir_op)n->op) || k == K_CONCAT || k == K_DOT;
    int64_t c = cost(p, lw->val[node]);
    if (is_result || (!p->opts->fuse && is_op) || c > FUSE_MAX_OPS ||
        (lw->users[node] > 1 && c >= SHARE_COST))
        return store(lw, node);
    return true;
}

/* Every result array gets its value: results stored in place already have it; the others
 * (parameters, constants, a value returned twice) are copied. */
static bool finish_results(lower *lw)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    for (int32_t i = 0; i < f->nresults; i++) {
        int32_t node = f->results[i];
        bool done = false;
        for (int32_t b = 0; b < p->nbufs; b++)
            done |= p->bufs[b].kind == BUF_RESULT && p->bufs[b].index == i;
        if (done)
            continue;
        const ir_node *n = &f->nodes[node];
        int64_t st[NEST_MAX_RANK];
        layout_strides(n->rank, n->shape, f->result_layout[i], st);
        int32_t b = plan_buffer(p, BUF_RESULT, i, node, n->etype, ir_count(n));
        nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
        if (!ne || !add_out(p, ne, b, 0, st, lw->val[node], -1, node))
            return false;
    }
    return true;
}

/* ---- merging adjacent nests ---- */

/* e with every load of `from`'s stores, through the very view they were written with, replaced
 * by the value stored. Expressions are hash-consed, so each such view is one load node. */
static fx *forward_loads(plan *p, const nest *from, fx *e)
{
    for (int j = 0; j < from->nouts && e; j++) {
        const nout *o = &from->outs[j];
        if (o->reduce >= 0)
            continue;
        fx *view = fx_load(p, o->buf, o->off, from->rank, o->st, -1);
        e = view ? fx_substitute(p, e, view, o->value) : NULL;
    }
    return e;
}


/* Whether every output of n, a nest that folds nothing, is a store that writes a different
 * element at each step of the axes in mask. A reduction over no axes is not: joined to a nest
 * that folds mask, it would fold those axes too. */
static bool stores_vary(const nest *n, uint32_t mask)
{
    for (int i = 0; i < n->nouts; i++) {
        if (n->outs[i].reduce >= 0)
            return false;
        for (int k = 0; k < n->rank; k++)
            if ((mask & (1u << k)) && n->outs[i].st[k] == 0)
                return false;
    }
    return true;
}

/* Whether nest b may join nest a (a just before b). Both run over the same dims; stores may
 * join a reduction when they write a distinct element at every step of its folded axes. b reads
 * a's stores only where a writes them (the values are forwarded), and never a's reductions,
 * which are ready only after the whole nest. */
static bool can_merge(plan *p, const nest *a, const nest *b)
{
    if (a->rank != b->rank || memcmp(a->dims, b->dims, (size_t)a->rank * sizeof *a->dims) != 0)
        return false;
    if (a->reduced != b->reduced &&
        !(a->reduced == 0 && stores_vary(a, b->reduced)) &&
        !(b->reduced == 0 && stores_vary(b, a->reduced)))
        return false;
    for (int i = 0; i < b->nouts; i++) {
        fx *v = nest_folds(a) ? b->outs[i].value : forward_loads(p, a, b->outs[i].value);
        if (!v)
            return false;
        for (int j = 0; j < a->nouts; j++)
            if (fx_reads(p, v, a->outs[j].buf))
                return false;
    }
    return true;
}

static void merge_adjacent(plan *p)
{
    int32_t last = -1;
    for (int32_t k = 0; k < p->nnests && !p->status; k++) {
        nest *b = &p->nests[k];
        if (last >= 0 && can_merge(p, &p->nests[last], b)) {
            nest *a = &p->nests[last];
            for (int i = 0; i < b->nouts; i++) {
                nout *o = &b->outs[i];
                fx *v = nest_folds(a) ? o->value : forward_loads(p, a, o->value);
                if (!v || !add_out(p, a, o->buf, o->off, o->st, v, o->reduce, o->node))
                    return;
            }
            a->reduced |= b->reduced;
            b->dead = true;
            continue;
        }
        last = k;
    }
}

/* Drops stores into temporaries that no nest reads any more. */
static void drop_dead_stores(plan *p)
{
    bool changed = true;
    while (changed && !p->status) {
        changed = false;
        for (int32_t b = 0; b < p->nbufs; b++) {
            if (p->bufs[b].kind != BUF_TEMP || p->bufs[b].dead)
                continue;
            bool read = false;
            for (int32_t k = 0; k < p->nnests && !read; k++)
                for (int i = 0; !p->nests[k].dead && i < p->nests[k].nouts && !read; i++)
                    read = fx_reads(p, p->nests[k].outs[i].value, b);
            if (read)
                continue;
            p->bufs[b].dead = true;
            changed = true;
            for (int32_t k = 0; k < p->nnests; k++) {
                nest *n = &p->nests[k];
                int j = 0;
                for (int i = 0; i < n->nouts; i++)
                    if (n->outs[i].buf != b)
                        n->outs[j++] = n->outs[i];
                n->nouts = j;
                if (j == 0)
                    n->dead = true;
            }
        }
    }
}

/* ---- the pass ---- */

int pass_fuse(plan *p)
{
    nest_function *f = p->f;
    size_t nn = (size_t)f->nnodes + 1;
    lower lw = {.p = p, .f = f};
    lw.val = calloc(nn, sizeof *lw.val);
    lw.home = malloc(nn * sizeof *lw.home);
    lw.users = calloc(nn, sizeof *lw.users);
    lw.live = calloc(nn, sizeof *lw.live);
    if (!lw.val || !lw.home || !lw.users || !lw.live) {
        p->status = NEST_ERR_NOMEM;
        goto out;
    }
    for (int32_t i = 0; i < f->nnodes; i++)
        lw.home[i] = -1;
    /* liveness: results, then backwards through operands (get and tuple resolved) */
    for (int32_t i = 0; i < f->nresults; i++)
        lw.live[f->results[i]] = true;
    for (int32_t i = f->nnodes - 1; i >= 0; i--) {
        const ir_node *n = &f->nodes[i];
        if (!lw.live[i] || n->etype == IR_TUPLE)
            continue;
        int32_t *seen = n->in;
        for (int j = 0; j < n->nin; j++) {
            int32_t a = ir_resolve(f, n->in[j]);
            bool dup = false;
            for (int k = 0; k < j; k++)
                dup |= ir_resolve(f, seen[k]) == a;
            lw.live[a] = true;
            if (!dup)
                lw.users[a]++;
        }
    }
    /* every parameter gets its buffer, live or not, so that argument positions hold */
    for (int32_t i = 0; i < f->nnodes && !p->status; i++) {
        if (!lw.live[i] && f->nodes[i].op != OP_PARAMETER)
            continue;
        if (!lower_node(&lw, i) || !maybe_store(&lw, i))
            break;
    }
    if (!p->status)
        finish_results(&lw);
    if (!p->status && p->opts->fuse) /* without fusion every op keeps its nest */
        merge_adjacent(p);
    if (!p->status)
        drop_dead_stores(p);
out:
    free(lw.val);
    free(lw.home);
    free(lw.users);
    free(lw.live);
    if (p->status == NEST_OK && p->nnests >= 0)
        return NEST_OK;
    if (!p->status)
        p->status = NEST_ERR_NOMEM;
    return p->status;
}
