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
#define REUSE_RECOMPUTE 4 /* ... and at any cost when a batch_dot reads it this many times */

typedef struct lower {
    plan *p;
    nest_function *f;
    fx **val;        /* per node: its expression over its own index space */
    int32_t *home;   /* per node: the buffer that stores it, or -1 */
    int32_t *users;  /* per node: how many live ops consume it (each op once) */
    int32_t *result; /* per node: the first result it is, or -1 */
    bool *live;
    int64_t *costs;  /* per expression node (by id): its cost when known exactly, else -1 */
    size_t capcosts;
} lower;

/* ---- costs ---- */

/* A leaf: a load without gather terms (whose index expressions cost), or an immediate. */
static bool is_load(const fx *e)
{
    return (e->kind == FX_LOAD && e->nargs == 0) || e->kind == FX_IMM;
}

/* The memo of exact costs: the slot of e, or NULL when out of memory. */
static int64_t *cost_slot(lower *lw, const fx *e)
{
    int64_t *c = fx_id_array(lw->costs, &lw->capcosts, e, sizeof *c, -1);
    if (!c) {
        lw->p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    lw->costs = c;
    return &c[e->id];
}

/* The cost of computing one element of e, shared subexpressions counted once; a cost above
 * `limit` is only known to be above it (the walk stops there, so a query costs at most about
 * `limit` nodes). A node whose operands are leaves but for one of known cost costs that plus its
 * weight, exactly: a chain is priced in constant time per link. */
static int64_t cost(lower *lw, fx *e, int64_t limit)
{
    plan *p = lw->p;
    if (is_load(e))
        return 0;
    int64_t *slot = cost_slot(lw, e);
    if (!slot)
        return limit + 1;
    if (*slot >= 0)
        return *slot;
    fx *inner = NULL;
    bool chain = true;
    for (int i = 0; i < e->nargs && chain; i++) {
        if (is_load(e->args[i]))
            continue;
        int64_t *s = cost_slot(lw, e->args[i]);
        chain = !inner && s && *s >= 0;
        inner = e->args[i];
    }
    if (chain) {
        int64_t c = fx_weight(e) + (inner ? lw->costs[inner->id] : 0);
        lw->costs[e->id] = c;
        return c;
    }
    /* a bounded walk, each node once */
    size_t sp = 0, cap = 64;
    fx **stack = malloc(cap * sizeof *stack);
    int64_t c = 0;
    bool exact = true;
    if (!stack) {
        p->status = NEST_ERR_NOMEM;
        return limit + 1;
    }
    fx_marks_clear(p);
    stack[sp++] = e;
    while (sp > 0) {
        fx *x = stack[--sp];
        if (!fx_mark(p, x))
            continue;
        c += fx_weight(x);
        if (c > limit) {
            exact = false;
            break;
        }
        for (int i = 0; i < x->nargs; i++) {
            if (is_load(x->args[i]))
                continue;
            fx **q = grow_array(stack, &cap, sp, sizeof *q);
            if (!q) {
                p->status = NEST_ERR_NOMEM;
                exact = false;
                break;
            }
            stack = q;
            stack[sp++] = x->args[i];
        }
    }
    free(stack);
    if (exact && !p->status)
        lw->costs[e->id] = c;
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
    n->special = -1;
    n->dims = arena_memdup(p->a, dims, (size_t)rank * sizeof *dims + 1);
    n->reduced = reduced;
    if (!n->dims) {
        p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    p->nnests++;
    return n;
}

bool nest_add_out(plan *p, nest *n, int32_t bufi, int64_t off, const int64_t *st, fx *value,
                  int reduce, int32_t node)
{
    nout *o = arena_grow(p->a, n->outs, (size_t)n->nouts, &n->capouts, sizeof *o);
    int32_t *nodes = arena_grow(p->a, n->nodes, (size_t)n->nnodes, &n->capnodes, sizeof *nodes);
    int64_t *s = arena_memdup(p->a, st, (size_t)n->rank * sizeof *st + 1);
    if (!o || !nodes || !s || !value) {
        if (!p->status)
            p->status = NEST_ERR_NOMEM;
        return false;
    }
    n->outs = o;
    n->nodes = nodes;
    o[n->nouts++] = (nout){bufi, off, s, value, (int16_t)reduce, node, false};
    nodes[n->nnodes++] = node;
    return true;
}

/* The buffer a node is stored in: its first result array if it is a result, else a new
 * temporary. Strides (over the node's shape) go to st. */
static int32_t home_of(lower *lw, int32_t node, int64_t *st)
{
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t i = lw->result[node];
    if (i >= 0) {
        layout_strides(n->rank, n->shape, f->result_layout[i], st);
        return plan_buffer(lw->p, BUF_RESULT, i, node, n->etype, ir_count(n));
    }
    layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
    return plan_buffer(lw->p, BUF_TEMP, -1, node, n->etype, ir_count(n));
}

/* Stores node's expression in its home with a nest of its own; the node is read from there
 * afterwards. */
static bool lower_reshape(lower *lw, int32_t node);

static bool store(lower *lw, int32_t node)
{
    if (lw->home[node] >= 0)
        return true;
    plan *p = lw->p;
    const ir_node *n = &lw->f->nodes[node];
    /* a transpose that moves a symbolic dim inward (x^T of a batch) would have symbolic
     * strides stored: its operand is stored instead, and it stays a view of that */
    bool inner_sym = false;
    for (int k = 1; n->etype != IR_TUPLE && k < n->rank; k++)
        inner_sym |= dim_is_sym(n->shape[k]);
    if (inner_sym && ir_kind_of(n) == K_RESHAPE && lw->result[node] < 0) {
        int32_t ia = ir_resolve(lw->f, n->in[0]);
        return store(lw, ia) && lower_reshape(lw, node);
    }
    int64_t st[NEST_MAX_RANK];
    int32_t b = home_of(lw, node, st);
    nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
    if (!ne || !nest_add_out(p, ne, b, 0, st, lw->val[node], -1, node))
        return false;
    lw->home[node] = b;
    lw->val[node] = fx_load(p, b, 0, n->rank, st, node);
    return lw->val[node] != NULL;
}

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
    if (!nest_add_out(p, ne, b, 0, st, value, reduce_op, node))
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
        free_a *= dim_is_sym(a->shape[k]) ? DIM_NOMINAL : a->shape[k];
    for (int k = 1; k < rb; k++)
        free_b *= dim_is_sym(b->shape[k]) ? DIM_NOMINAL : b->shape[k];
    /* an operand read once per element of the other's free axes is stored unless cheap */
    if (free_b > 1 && !is_load(lw->val[ia]) && cost(lw, lw->val[ia], REUSE_COST) >= REUSE_COST &&
        !store(lw, ia))
        return false;
    if (free_a > 1 && !is_load(lw->val[ib]) && cost(lw, lw->val[ib], REUSE_COST) >= REUSE_COST &&
        !store(lw, ib))
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
    int32_t i = lw->result[node]; /* the first one is its home */
    return i >= 0 && lw->f->result_layout[i] == NEST_COL_MAJOR;
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
    /* a view when strides can say it (a transpose that moves a symbolic dim inward is the
     * permuted operand, a concat's parts included: it cannot be stored) */
    bool inner_sym = false, same = n->rank == a->rank;
    for (int k = 0; k < n->rank; k++) {
        inner_sym |= k > 0 && dim_is_sym(n->shape[k]);
        same = same && pshape[k] == n->shape[k];
    }
    fx *perm = fx_permute(p, lw->val[ia], a->rank, n->a.order);
    fx *v = perm && inner_sym && same ? perm
            : perm                    ? fx_reshape(p, perm, a->rank, pshape, n->rank, n->shape)
                                      : NULL;
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
    if (!ne || !nest_add_out(p, ne, b, 0, pst, perm, -1, node))
        return false;
    if (!col_major_result(lw, node))
        lw->home[node] = b; /* else maybe_store copies it into the result */
    lw->val[node] = fx_load(p, b, 0, n->rank, st, node);
    return lw->val[node] != NULL;
}

/* A dense row-major copy of node's value in a temporary of its own; its load, or NULL. */
static fx *dense_copy(lower *lw, int32_t node)
{
    plan *p = lw->p;
    const ir_node *n = &lw->f->nodes[node];
    int64_t st[NEST_MAX_RANK];
    layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
    int32_t b = plan_buffer(p, BUF_TEMP, -1, node, n->etype, ir_count(n));
    nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
    if (!ne || !nest_add_out(p, ne, b, 0, st, lw->val[node], -1, node))
        return NULL;
    return fx_load(p, b, 0, n->rank, st, node);
}

/* Whether e is a load of a dense row-major tensor of node's shape. */
static bool is_dense(const lower *lw, int32_t node, const fx *e)
{
    const ir_node *n = &lw->f->nodes[node];
    int64_t st[NEST_MAX_RANK];
    layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
    if (e->kind != FX_LOAD)
        return false;
    for (int k = 0; k < n->rank; k++)
        if (n->shape[k] != 1 && e->st[k] != st[k])
            return false;
    return true;
}

/* A convolution or pooling: a nest with loops of its own (conv.c) into node's home. The filters
 * are read in place, so they are made a dense tensor first if they are not one. The input is an
 * expression evaluated where the nest reads it: it is stored first when it holds a concat (only
 * split loops read those) or when overlapping windows would recompute a costly one. */
static bool lower_window(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t ix = ir_resolve(f, n->in[0]);
    bool cat = fx_has_concat(p, &lw->val[ix], 1, -1), overlap = false;
    for (int i = 0; n->op != OP_CONVOLUTION && i < n->a.win->nsp; i++)
        overlap |= n->a.win->window[i] > n->a.win->stride[i];
    if ((cat || (overlap && cost(lw, lw->val[ix], SHARE_COST + 1) > SHARE_COST)) &&
        !store(lw, ix))
        return false;
    fx *filters = NULL;
    if (n->op == OP_CONVOLUTION) {
        int32_t iw = ir_resolve(f, n->in[1]);
        if (!is_dense(lw, iw, lw->val[iw]) && lw->home[iw] < 0 && !store(lw, iw))
            return false;
        filters = is_dense(lw, iw, lw->val[iw]) ? lw->val[iw] : dense_copy(lw, iw);
        if (!filters)
            return false;
        int64_t dims[NEST_MAX_RANK + 1];
        fx *prod = conv_as_product(p, node, lw->val[ix], filters, dims);
        if (prod) { /* a 1x1 convolution as products of matrices, for tile.c */
            if (!reduce_into_home(lw, node, n->rank + 1, dims, 1u << n->rank, prod, OP_SUM))
                return false;
            p->nests[p->nnests - 1].dot = true;
            return true;
        }
        if (p->status)
            return false;
    }
    int64_t st[NEST_MAX_RANK];
    int32_t b = home_of(lw, node, st);
    nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
    fx *args[2] = {lw->val[ix], filters};
    fx *v = ne ? fx_op(p, (ir_op)n->op, n->etype, filters ? 2 : 1, args, node) : NULL;
    if (!v || !nest_add_out(p, ne, b, 0, st, v, -1, node) ||
        !conv_plan(p, &p->nests[p->nnests - 1], node, lw->val[ix], filters))
        return false;
    lw->home[node] = b;
    lw->val[node] = fx_load(p, b, 0, n->rank, st, node);
    return lw->val[node] != NULL;
}

/* ---- the op set of real models ---- */

/* argmax, argmin: a fold over the operand's space with the searched axis moved innermost, where
 * it stays (flatten.c keeps the order of such nests) so that the loop's variable is the index. */
static bool lower_argreduce(lower *lw, int32_t node)
{
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t ia = ir_resolve(f, n->in[0]);
    const ir_node *a = &f->nodes[ia];
    uint8_t order[NEST_MAX_RANK];
    int64_t dims[NEST_MAX_RANK];
    for (int k = 0, j = 0; k < a->rank; k++)
        if (k != n->a.axis)
            order[j++] = (uint8_t)k;
    order[a->rank - 1] = (uint8_t)n->a.axis;
    for (int k = 0; k < a->rank; k++)
        dims[k] = a->shape[order[k]];
    fx *v = fx_permute(lw->p, lw->val[ia], a->rank, order);
    if (!v)
        return false;
    return reduce_into_home(lw, node, a->rank, dims, 1u << (a->rank - 1), v, n->op);
}

/* A rank-r expression that is 1 along axis k and 0 elsewhere: the index along k, from `off`. */
static fx *iota(plan *p, int r, int k, int64_t off)
{
    int64_t st[NEST_MAX_RANK] = {0};
    st[k] = 1;
    return fx_load(p, FX_IOTA, off, r, st, -1);
}

static fx *op2(plan *p, ir_op op, int etype, fx *a, fx *b)
{
    fx *args[2] = {a, b};
    return fx_op(p, op, etype, 2, args, -1);
}

static fx *imm64(plan *p, int64_t v) { return fx_imm(p, NEST_I64, 0, v); }

/* Along axis k, a dilated axis (n elements, each followed by s - 1 holes, so (n-1)s + 1 long)
 * starting at position lo of an axis of extent len: the condition "position p holds element
 * (p - lo) / s", and that index. Positions outside or on a hole fail the condition (the index is
 * then clamped by the gather that uses it: never read outside). */
static fx *lattice(plan *p, int r, int k, int64_t lo, int64_t s, int64_t n, fx **index)
{
    fx *q = iota(p, r, k, -lo);
    fx *qd = s == 1 ? q : op2(p, OP_DIVIDE, NEST_I64, q, imm64(p, s));
    int64_t span = n > 0 ? (n - 1) * s + 1 : 0;
    fx *in = op2(p, OP_AND, NEST_BOOL, op2(p, OP_GREATER_EQ, NEST_BOOL, q, imm64(p, 0)),
                 op2(p, OP_LESS, NEST_BOOL, q, imm64(p, span)));
    if (s > 1)
        in = op2(p, OP_AND, NEST_BOOL, in,
                 op2(p, OP_EQUAL, NEST_BOOL, op2(p, OP_MULTIPLY, NEST_I64, qd, imm64(p, s)), q));
    *index = qd;
    return in;
}

/* e over a space of extent cur along axis k, read along k at the positions index gives (an
 * expression over the new space, of the same rank); NULL with p->status clear when e cannot be
 * gathered (then the caller stores the operand). */
static fx *gather_axis(plan *p, fx *e, int r, int k, int64_t cur, fx *index)
{
    return fx_gather(p, e, r, k, cur, index, 1);
}

/* pad: axes with interior padding first, each a select between the gathered operand and the
 * value; then every other axis, innermost first, as a concat of the value, the (cropped) operand
 * and the value: the complex view that splits the loops at its boundaries. */
static fx *pad_expr(lower *lw, const ir_node *n, fx *x, fx *v)
{
    plan *p = lw->p;
    const ir_node *a = &lw->f->nodes[ir_resolve(lw->f, n->in[0])];
    int r = n->rank;
    int64_t cur[NEST_MAX_RANK];
    memcpy(cur, a->shape, (size_t)r * sizeof *cur);
    fx *vb = fx_broadcast(p, v, r, r ? (uint32_t)((1ull << r) - 1) : 0), *e = x;
    for (int k = 0; k < r && e && vb; k++) {
        if (n->a.pad.interior[k] == 0)
            continue;
        fx *index, *in = lattice(p, r, k, n->a.pad.below[k], n->a.pad.interior[k] + 1, a->shape[k],
                                 &index);
        fx *g = in ? gather_axis(p, e, r, k, cur[k], index) : NULL;
        fx *args[3] = {in, g, vb};
        e = g ? fx_op(p, OP_SELECT, n->etype, 3, args, -1) : NULL;
        cur[k] = n->shape[k];
    }
    /* inner axes first: the outer concat's value parts then hold no inner split */
    for (int k = r - 1; k >= 0 && e && vb; k--) {
        if (n->a.pad.interior[k] != 0)
            continue;
        int64_t lo = n->a.pad.below[k], len = n->shape[k];
        if (dim_is_sym(len) && lo == 0 && len == cur[k])
            continue; /* a symbolic axis, not padded (pipeline.c refuses the others) */
        /* positions [px, px + ext) hold elements [q0, q0 + ext) of the operand */
        int64_t px = lo > 0 ? lo : 0, q0 = px - lo, q1 = len - lo < cur[k] ? len - lo : cur[k];
        int64_t ext = q1 - q0 > 0 ? q1 - q0 : 0;
        fx *parts[3];
        int64_t starts[4] = {0};
        int np = 0;
        if (ext == 0) {
            parts[np++] = vb;
        } else {
            if (px > 0)
                parts[np++] = vb, starts[np] = px;
            parts[np++] = fx_shift(p, e, k, q0), starts[np] = px + ext;
            if (px + ext < len)
                parts[np++] = vb, starts[np] = len;
        }
        e = np == 1 ? parts[0] : fx_concat(p, r, k, np, parts, starts, -1);
        cur[k] = len;
    }
    return vb ? e : NULL;
}

/* replace_slice: with unit strides, nested concats: along axis k, x before the box, the box
 * (built for the axes after k) and x after it, each x shifted into place along the axes before
 * k. With strides, a select over the whole space between x and y gathered at
 * (position - lower) / stride. */
static fx *replace_slice_expr(lower *lw, const ir_node *n, fx *x, fx *y)
{
    plan *p = lw->p;
    int r = n->rank;
    const int64_t *lo = n->a.slice.lower, *up = n->a.slice.upper, *step = n->a.slice.step;
    bool unit = true;
    for (int k = 0; k < r; k++)
        unit &= step[k] == 1;
    if (!unit) {
        const ir_node *yn = &lw->f->nodes[ir_resolve(lw->f, n->in[1])];
        fx *cond = NULL, *g = y;
        for (int k = 0; k < r && g; k++) {
            fx *index, *in = lattice(p, r, k, lo[k], step[k], yn->shape[k], &index);
            /* the box ends at upper: the last element is at most upper - 1 */
            g = in ? gather_axis(p, g, r, k, yn->shape[k], index) : NULL;
            cond = cond ? op2(p, OP_AND, NEST_BOOL, cond, in) : in;
        }
        fx *args[3] = {cond, g, x};
        return g ? fx_op(p, OP_SELECT, n->etype, 3, args, -1) : NULL;
    }
    fx *e = y;
    for (int k = r - 1; k >= 0 && e; k--) {
        fx *xs = x;
        for (int j = 0; j < k && xs; j++)
            xs = fx_shift(p, xs, j, lo[j]);
        fx *parts[3];
        int64_t starts[4] = {0};
        int np = 0;
        if (lo[k] > 0)
            parts[np++] = xs, starts[np] = lo[k];
        if (up[k] > lo[k])
            parts[np++] = e, starts[np] = up[k];
        if (n->shape[k] > up[k])
            parts[np++] = xs ? fx_shift(p, xs, k, up[k]) : NULL, starts[np] = n->shape[k];
        if (np == 0) /* an empty axis: any part will do */
            parts[np++] = xs, starts[np] = 0;
        e = !xs ? NULL : np == 1 ? parts[0] : fx_concat(p, r, k, np, parts, starts, -1);
    }
    return e;
}

/* Stores node's operand i (its expression) so that a view can take it; false on error. */
static bool store_operand(lower *lw, const ir_node *n, int i)
{
    return store(lw, ir_resolve(lw->f, n->in[i]));
}

static bool lower_structural(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    for (int attempt = 0; attempt < 2; attempt++) {
        fx *x = operand(lw, n, 0), *v = NULL;
        switch (ir_kind_of(n)) {
        case K_PAD:
            v = pad_expr(lw, n, x, operand(lw, n, 1));
            break;
        case K_REVERSE:
            v = fx_reverse(p, x, n->rank, n->shape, n->a.axes);
            break;
        case K_REPLACE_SLICE:
            v = replace_slice_expr(lw, n, x, operand(lw, n, 1));
            break;
        case K_ONE_HOT: {
            int r = n->rank, axis = n->a.axis;
            fx *xb = fx_broadcast(p, x, r, 1u << axis), *k = iota(p, r, axis, 0), *eq;
            if (n->etype == NEST_F32 || n->etype == NEST_F64)
                eq = op2(p, OP_EQUAL, NEST_BOOL, xb, fx_op(p, OP_CONVERT, n->etype, 1, &k, -1));
            else
                eq = op2(p, OP_EQUAL, NEST_BOOL,
                         n->etype == NEST_I64 ? xb : fx_op(p, OP_CONVERT, NEST_I64, 1, &xb, -1), k);
            v = fx_op(p, OP_CONVERT, n->etype, 1, &eq, node);
            break;
        }
        case K_GATHER: {
            const ir_node *a = &f->nodes[ir_resolve(f, n->in[0])];
            const ir_node *ix = &f->nodes[ir_resolve(f, n->in[1])];
            /* an operand read more often than it has elements is stored unless cheap */
            if (attempt == 0 && ir_count(n) > ir_count(a) && !is_load(x) &&
                cost(lw, x, REUSE_COST) >= REUSE_COST && !store_operand(lw, n, 0))
                return false;
            if (attempt == 0 && ir_count(n) > ir_count(ix) && !is_load(operand(lw, n, 1)) &&
                cost(lw, operand(lw, n, 1), REUSE_COST) >= REUSE_COST && !store_operand(lw, n, 1))
                return false;
            x = operand(lw, n, 0);
            int axis = n->a.axis, ri = ix->rank;
            uint32_t mask = 0;
            for (int k = 0; k < n->rank; k++)
                if (k < axis || k >= axis + ri)
                    mask |= 1u << k;
            fx *ib = fx_broadcast(p, operand(lw, n, 1), n->rank, mask);
            v = ib ? fx_gather(p, x, a->rank, axis, a->shape[axis], ib, ri) : NULL;
            break;
        }
        default:
            return false;
        }
        if (v || p->status) {
            lw->val[node] = v;
            return v != NULL;
        }
        /* a view the operand's expression cannot take (a gather through a concatenation along
         * the same axis): store the operand, once */
        if (attempt == 1 || !store_operand(lw, n, 0))
            return false;
    }
    return false;
}

/* A temporary holding value (over rank/dims) folded by op over the axes in mask; returns its
 * load over the kept axes. */
static fx *fold_temp(lower *lw, int32_t node, int rank, const int64_t *dims, uint32_t mask,
                     fx *value, int op)
{
    plan *p = lw->p;
    int64_t kept[NEST_MAX_RANK] = {0}, kst[NEST_MAX_RANK], st[NEST_MAX_RANK];
    int rk = 0;
    for (int k = 0; k < rank; k++)
        if (!(mask & (1u << k)))
            kept[rk++] = dims[k];
    layout_strides(rk, kept, NEST_ROW_MAJOR, kst);
    int64_t count = ir_dims_count(p->f, rk, kept); /* N*64 when N is symbolic */
    if (count == DIM_NONE) {
        p->status = p->f->status;
        return NULL;
    }
    for (int k = 0, j = 0; k < rank; k++)
        st[k] = (mask & (1u << k)) ? 0 : kst[j++];
    int32_t b = plan_buffer(p, BUF_TEMP, -1, node, value->etype, count);
    nest *ne = b >= 0 ? new_nest(p, rank, dims, mask) : NULL;
    if (!ne || !nest_add_out(p, ne, b, 0, st, value, op, node))
        return NULL;
    return fx_load(p, b, 0, rk, kst, node);
}

/* softmax: the max over the axes (a fold into a temporary), exp(x - max) stored once, its sum
 * (which joins that store's loop), and the quotient, which fuses into the consumers. Row-wise,
 * the nests share one loop over the rows (rows.c) and the exponentials stay in a row. */
static bool lower_softmax(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t ia = ir_resolve(f, n->in[0]);
    int r = n->rank, et = n->etype;
    uint32_t mask = n->a.axes;
    if (!is_load(lw->val[ia]) && cost(lw, lw->val[ia], SHARE_COST) >= SHARE_COST &&
        !store(lw, ia))
        return false;
    fx *x = lw->val[ia];
    fx *m = fold_temp(lw, node, r, n->shape, mask, x, OP_MAX);
    fx *mb = m ? fx_broadcast(p, m, r, mask) : NULL;
    fx *d = mb ? op2(p, OP_SUBTRACT, et, x, mb) : NULL;
    fx *e = d ? fx_op(p, OP_EXP, et, 1, &d, -1) : NULL;
    int64_t st[NEST_MAX_RANK];
    layout_strides(r, n->shape, NEST_ROW_MAJOR, st);
    int32_t eb = e ? plan_buffer(p, BUF_TEMP, -1, node, et, ir_count(n)) : -1;
    nest *ne = eb >= 0 ? new_nest(p, r, n->shape, 0) : NULL;
    if (!ne || !nest_add_out(p, ne, eb, 0, st, e, -1, node))
        return false;
    fx *el = fx_load(p, eb, 0, r, st, node);
    fx *s = el ? fold_temp(lw, node, r, n->shape, mask, el, OP_SUM) : NULL;
    fx *sb = s ? fx_broadcast(p, s, r, mask) : NULL;
    fx *args[2] = {el, sb};
    lw->val[node] = sb ? fx_op(p, OP_DIVIDE, et, 2, args, node) : NULL;
    return lw->val[node] != NULL;
}

/* One operand of batch_dot over its iteration space [batch..., m, n, k]: its batch axes of
 * extent 1 dropped, then broadcast along every axis it does not have. The second operand's
 * [k, n] axes are swapped first. NULL (p->status clear) when the operand's expression cannot be
 * viewed so (a concat). */
static fx *batch_operand(plan *p, fx *v, const ir_node *x, bool second, int nb, int rank,
                         bool has_m)
{
    int rx = x->rank, bx = rx >= 2 ? rx - 2 : 0;
    uint8_t order[NEST_MAX_RANK];
    int64_t shape[NEST_MAX_RANK];
    for (int k = 0; k < rx; k++) {
        order[k] = (uint8_t)k;
        shape[k] = x->shape[k];
    }
    if (second && rx >= 2) {
        order[rx - 2] = (uint8_t)(rx - 1);
        order[rx - 1] = (uint8_t)(rx - 2);
        shape[rx - 2] = x->shape[rx - 1];
        shape[rx - 1] = x->shape[rx - 2];
        v = fx_permute(p, v, rx, order);
    }
    /* which axes of the space the operand covers, and its shape without batch axes of 1 */
    uint32_t covered = 0;
    int64_t cshape[NEST_MAX_RANK];
    int rc = 0;
    for (int k = 0; k < bx; k++) {
        if (shape[k] == 1)
            continue;
        covered |= 1u << (k + nb - bx);
        cshape[rc++] = shape[k];
    }
    for (int k = bx; k < rx; k++)
        cshape[rc++] = shape[k];
    int pos_m = nb, pos_n = nb + has_m;
    if (rx >= 2)
        covered |= 1u << (second ? pos_n : pos_m);
    covered |= 1u << (rank - 1);
    if (v && rc != rx)
        v = fx_reshape(p, v, rx, shape, rc, cshape);
    uint32_t all = rank >= 32 ? 0xffffffffu : (1u << rank) - 1;
    return v ? fx_broadcast(p, v, rank, all & ~covered) : NULL;
}

/* batch_dot: a sum over k of products over the space [batch..., m, n, k], like dot: tile.c
 * tiles it, its batch axes outermost. */
static bool lower_batch_dot(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t ia = ir_resolve(f, n->in[0]), ib = ir_resolve(f, n->in[1]);
    const ir_node *a = &f->nodes[ia], *b = &f->nodes[ib];
    bool has_m = a->rank >= 2, has_n = b->rank >= 2;
    int nb = n->rank - has_m - has_n, rank = n->rank + 1;
    int64_t m = has_m ? a->shape[a->rank - 2] : 1, nn = has_n ? b->shape[b->rank - 1] : 1;
    /* each element of a is read nn times, of b m times: an expression whose recomputation
     * costs more than storing it once (a bias added to attention's queries) is stored */
    if (nn > 1 && !is_load(lw->val[ia]) &&
        cost(lw, lw->val[ia], REUSE_COST) * (nn >= REUSE_RECOMPUTE ? REUSE_COST : 1) >= REUSE_COST &&
        !store(lw, ia))
        return false;
    if (m > 1 && !is_load(lw->val[ib]) &&
        cost(lw, lw->val[ib], REUSE_COST) * (m >= REUSE_RECOMPUTE ? REUSE_COST : 1) >= REUSE_COST &&
        !store(lw, ib))
        return false;
    fx *av = NULL, *bv = NULL;
    for (int attempt = 0; attempt < 2 && !(av && bv); attempt++) {
        av = batch_operand(p, lw->val[ia], a, false, nb, rank, has_m);
        bv = batch_operand(p, lw->val[ib], b, true, nb, rank, has_m);
        if (p->status)
            return false;
        if ((!av && !store(lw, ia)) || (!bv && !store(lw, ib)))
            return false;
    }
    fx *prod = av && bv ? op2(p, OP_MULTIPLY, n->etype, av, bv) : NULL;
    if (!prod) {
        if (!p->status)
            p->status = NEST_ERR_LIMIT;
        return false;
    }
    int64_t dims[NEST_MAX_RANK + 1];
    memcpy(dims, n->shape, (size_t)n->rank * sizeof *dims);
    dims[rank - 1] = a->shape[a->rank - 1];
    if (!reduce_into_home(lw, node, rank, dims, 1u << (rank - 1), prod, OP_SUM))
        return false;
    p->nests[p->nnests - 1].dot = m > 1 && nn > 1;
    return true;
}

/* topk: the values node and the indices node after it, lowered together into a nest of its own
 * (emitted by emit_topk) that reads the operand from memory, row by row along the axis. */
static bool lower_topk(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    int32_t nv = f->nodes[node].a.topk.which ? node - 1 : node, ni = nv + 1;
    if (lw->home[nv] >= 0)
        return true; /* lowered with its twin */
    const ir_node *n = &f->nodes[nv];
    int32_t ia = ir_resolve(f, n->in[0]);
    const ir_node *a = &f->nodes[ia];
    fx *x = lw->val[ia];
    if (!fx_is_view(x) && !store(lw, ia))
        return false;
    x = lw->val[ia];
    int64_t stv[NEST_MAX_RANK], sti[NEST_MAX_RANK];
    int32_t bv = home_of(lw, nv, stv), bi = bv >= 0 ? home_of(lw, ni, sti) : -1;
    nest *ne = bi >= 0 ? new_nest(p, a->rank, a->shape, 0) : NULL;
    if (!ne || !nest_add_out(p, ne, bv, 0, stv, x, -1, nv) || !nest_add_out(p, ne, bi, 0, sti, x, -1, ni))
        return false;
    ne->special = OP_TOPK;
    if (n->a.topk.k > TOPK_INSERT) { /* a merge sort: indices and their copy, a row each */
        ne->pack = plan_buffer(p, BUF_TEMP, -1, nv, NEST_I64, 2 * a->shape[n->a.topk.axis]);
        if (ne->pack < 0)
            return false;
    }
    lw->home[nv] = bv;
    lw->home[ni] = bi;
    lw->val[nv] = fx_load(p, bv, 0, n->rank, stv, nv);
    lw->val[ni] = fx_load(p, bi, 0, n->rank, sti, ni);
    return lw->val[nv] && lw->val[ni];
}

/* scatter_add: a nest stores the operand into the home, then a nest of its own (emit_scatter)
 * runs over the updates' space and adds each update where its index points. Its outs[0] is the
 * update's value; outs[1], never stored (drop), is the element it adds to: a load of the home
 * with the index as a gather term, so that every pass sees what the nest reads and writes. */
static bool lower_scatter_add(lower *lw, int32_t node)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    const ir_node *n = &f->nodes[node];
    int32_t ia = ir_resolve(f, n->in[0]), ii = ir_resolve(f, n->in[1]), iu = ir_resolve(f, n->in[2]);
    const ir_node *ix = &f->nodes[ii], *u = &f->nodes[iu];
    int axis = n->a.axis, ri = ix->rank, r = u->rank;
    /* indices read more often than they have elements are stored unless cheap; the nest's
     * loops do not split at concatenations, so neither operand holds one */
    if (ir_count(u) > ir_count(ix) && !is_load(lw->val[ii]) && cost(lw, lw->val[ii], REUSE_COST) >= REUSE_COST &&
        !store(lw, ii))
        return false;
    for (int k = 0; k < r; k++) {
        if (k < ri && fx_has_concat(p, &lw->val[ii], 1, k) && !store(lw, ii))
            return false;
        if (fx_has_concat(p, &lw->val[iu], 1, k) && !store(lw, iu))
            return false;
    }
    int64_t st[NEST_MAX_RANK], dst[NEST_MAX_RANK];
    int32_t b = home_of(lw, node, st);
    nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
    if (!ne || !nest_add_out(p, ne, b, 0, st, lw->val[ia], -1, node))
        return false;
    uint32_t others = 0; /* the axes of the updates that are not the indices' */
    for (int k = 0; k < r; k++) {
        bool taken = k >= axis && k < axis + ri;
        dst[k] = k < axis ? st[k] : taken ? 0 : st[k - ri + 1];
        others |= taken ? 0 : 1u << k;
    }
    fx *idx = fx_broadcast(p, lw->val[ii], r, others);
    int64_t gst = st[axis], gdim = n->shape[axis];
    fx *to = idx ? fx_gload(p, b, 0, r, dst, 1, &idx, &gst, &gdim, node) : NULL;
    ne = to ? new_nest(p, r, u->shape, 0) : NULL;
    if (!ne || !nest_add_out(p, ne, b, 0, dst, lw->val[iu], -1, node) ||
        !nest_add_out(p, ne, b, 0, dst, to, -1, node))
        return false;
    ne->special = OP_SCATTER_ADD;
    ne->outs[1].drop = true;
    ne->nnodes = 1;
    lw->home[node] = b;
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
    case K_STATE: { /* read like a parameter: the tensor's entry value */
        int64_t st[NEST_MAX_RANK];
        layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
        int32_t b = plan_buffer(p, BUF_STATE, n->a.state, node, n->etype, ir_count(n));
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
            cost(lw, lw->val[ia], REUSE_COST) >= REUSE_COST && !store(lw, ia))
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
    case K_CONV:
    case K_POOL:
        return lower_window(lw, node);
    case K_ARGREDUCE:
        return lower_argreduce(lw, node);
    case K_PAD:
    case K_REVERSE:
    case K_REPLACE_SLICE:
    case K_ONE_HOT:
    case K_GATHER:
        return lower_structural(lw, node);
    case K_SOFTMAX:
        return lower_softmax(lw, node);
    case K_BATCH_DOT:
        return lower_batch_dot(lw, node);
    case K_TOPK:
        return lower_topk(lw, node);
    case K_SCATTER_ADD:
        return lower_scatter_add(lw, node);
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
    if (k == K_PARAM || k == K_CONST || k == K_STATE || k == K_TUPLE || k == K_GET ||
        lw->home[node] >= 0)
        return true;
    bool is_result = lw->result[node] >= 0;
    bool is_op = op_is_elementwise((ir_op)n->op) || k == K_CONCAT || k == K_DOT || k == K_PAD ||
                 k == K_REPLACE_SLICE || k == K_ONE_HOT || k == K_GATHER;
    int64_t c = cost(lw, lw->val[node], FUSE_MAX_OPS);
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
    bool *done = calloc((size_t)f->nresults + 1, sizeof *done);
    if (!done) {
        p->status = NEST_ERR_NOMEM;
        return false;
    }
    for (int32_t b = 0; b < p->nbufs; b++)
        if (p->bufs[b].kind == BUF_RESULT)
            done[p->bufs[b].index] = true;
    for (int32_t i = 0; i < f->nresults; i++) {
        int32_t node = f->results[i];
        if (done[i])
            continue;
        const ir_node *n = &f->nodes[node];
        int64_t st[NEST_MAX_RANK];
        layout_strides(n->rank, n->shape, f->result_layout[i], st);
        int32_t b = plan_buffer(p, BUF_RESULT, i, node, n->etype, ir_count(n));
        nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
        if (!ne || !nest_add_out(p, ne, b, 0, st, lw->val[node], -1, node)) {
            free(done);
            return false;
        }
    }
    free(done);
    return true;
}

/* Each assignment stores its value into the state tensor's new value (inplace.c decides where
 * that is), in a nest at the end: every read of the entry values comes before it. Assignments
 * of one shape are placed side by side, so that they merge into one nest (a velocity and its
 * weight: the weight's update reads the velocity before its store, in place). */
static bool finish_assigns(lower *lw)
{
    plan *p = lw->p;
    nest_function *f = lw->f;
    int32_t *order = malloc(((size_t)f->nassigns + 1) * sizeof *order);
    bool *done = calloc((size_t)f->nassigns + 1, sizeof *done);
    int32_t norder = 0;
    if (!order || !done) {
        free(order);
        free(done);
        p->status = NEST_ERR_NOMEM;
        return false;
    }
    for (int32_t i = 0; i < f->nassigns; i++) {
        if (done[i])
            continue;
        const ir_node *a = &f->nodes[f->assigns[i].node];
        for (int32_t j = i; j < f->nassigns; j++) {
            const ir_node *b = &f->nodes[f->assigns[j].node];
            if (!done[j] && a->rank == b->rank &&
                memcmp(a->shape, b->shape, (size_t)a->rank * sizeof *a->shape) == 0) {
                done[j] = true;
                order[norder++] = j;
            }
        }
    }
    free(done);
    for (int32_t k = 0; k < f->nassigns; k++) {
        int32_t i = order[k];
        int32_t node = f->assigns[i].node;
        const ir_node *n = &f->nodes[node];
        int64_t st[NEST_MAX_RANK];
        layout_strides(n->rank, n->shape, NEST_ROW_MAJOR, st);
        int32_t b = plan_buffer(p, BUF_STATE_NEW, f->assigns[i].state, node, n->etype, ir_count(n));
        nest *ne = b >= 0 ? new_nest(p, n->rank, n->shape, 0) : NULL;
        if (!ne || !nest_add_out(p, ne, b, 0, st, lw->val[node], -1, node)) {
            free(order);
            return false;
        }
    }
    free(order);
    return true;
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
    lw.result = malloc(nn * sizeof *lw.result);
    lw.live = calloc(nn, sizeof *lw.live);
    int32_t *seen = malloc(nn * sizeof *seen); /* per node: the last op that counted it a user */
    if (!lw.val || !lw.home || !lw.users || !lw.result || !lw.live || !seen) {
        p->status = NEST_ERR_NOMEM;
        goto out;
    }
    for (int32_t i = 0; i < f->nnodes; i++)
        lw.home[i] = lw.result[i] = seen[i] = -1;
    for (int32_t i = f->nresults - 1; i >= 0; i--)
        lw.result[f->results[i]] = i; /* the first result a node is */
    /* liveness: results, then backwards through operands (get and tuple resolved) */
    for (int32_t i = 0; i < f->nresults; i++)
        lw.live[f->results[i]] = true;
    for (int32_t i = 0; i < f->nassigns; i++) { /* an assignment consumes its value */
        lw.live[f->assigns[i].node] = true;
        lw.users[f->assigns[i].node]++;
    }
    for (int32_t i = f->nnodes - 1; i >= 0; i--) {
        const ir_node *n = &f->nodes[i];
        if (!lw.live[i] || n->etype == IR_TUPLE)
            continue;
        for (int j = 0; j < n->nin; j++) {
            int32_t a = ir_resolve(f, n->in[j]);
            lw.live[a] = true;
            if (seen[a] != i) /* an op using a value twice is one user */
                lw.users[a]++;
            seen[a] = i;
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
    if (!p->status)
        finish_assigns(&lw);
    if (!p->status && p->opts->fuse) /* without fusion every op keeps its nest */
        merge_adjacent(p);
    if (!p->status && p->opts->fuse)
        merge_schedule_assigns(p);
    if (!p->status)
        merge_drop_dead_stores(p);
out:
    free(lw.val);
    free(lw.home);
    free(lw.users);
    free(lw.result);
    free(lw.live);
    free(lw.costs);
    free(seen);
    if (p->status == NEST_OK && p->nnests >= 0)
        return NEST_OK;
    if (!p->status)
        p->status = NEST_ERR_NOMEM;
    return p->status;
}
