/*
 * collapse.c - symbolic dims beyond the first axis, as the passes take them: a function whose
 * values share a leading run of axes with symbolic dims ([B,S,D] with B and S symbolic, the
 * "prefix") is compiled as the function whose values have that run merged into one axis
 * ([B*S,D]). Row-major, the merged axes are contiguous, so every array is the same memory and
 * the ABI is the function's own; and every symbolic dim is then the first axis of its value,
 * which the passes take (pipeline.c). Each node is built again through ir_build with its shape,
 * axes and bounds moved; an op that would take the prefix's axes apart (a sum over S alone, a
 * transpose that moves B, a product that sums over the prefix, a batch_dot over it) is
 * refused with a message naming the value and the prefix.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct collapser {
    nest_function *f, *g;
    int p;                      /* the prefix's length (2 or more) */
    int64_t pre[NEST_MAX_RANK]; /* its dims, in f */
    int64_t pg;                 /* their product, in g */
    int64_t *map;               /* per entry of f's table: its handle in g, 0 before */
    const char *why;            /* what is refused */
} collapser;

/* Whether n's shape has a symbolic dim further in than axis `from`. */
static bool sym_from(const ir_node *n, int from)
{
    for (int k = from; n->etype != IR_TUPLE && k < n->rank; k++)
        if (dim_is_sym(n->shape[k]))
            return true;
    return false;
}

/* Whether n's value begins with the prefix (and has no symbolic dim after it). */
static bool has_prefix(const collapser *c, const ir_node *n)
{
    if (n->etype == IR_TUPLE || n->rank < c->p || sym_from(n, c->p))
        return false;
    for (int k = 0; k < c->p; k++)
        if (n->shape[k] != c->pre[k])
            return false;
    return true;
}

/* Whether n begins a run of symbolic axes: its first axis and one further in are symbolic
 * (a transpose [D,N] of a batch is not: pipeline.c takes it as it is). */
static bool starts_run(const ir_node *n)
{
    return n->etype != IR_TUPLE && n->rank >= 2 && dim_is_sym(n->shape[0]) && sym_from(n, 1);
}

bool ir_collapse_needed(const nest_function *f)
{
    for (int32_t i = 0; i < f->nnodes; i++)
        if (starts_run(&f->nodes[i]))
            return true;
    return false;
}

/* Dim d of f as the same expression of g's names. */
static int64_t transfer(collapser *c, int64_t d) { return dim_transfer(c->f, c->g, c->map, d); }

/* mask over axes with the prefix's axes (all or none of them) merged into axis 0. */
static uint32_t merged_mask(const collapser *c, uint32_t mask)
{
    uint32_t pm = (1u << c->p) - 1;
    return ((mask & pm) ? 1u : 0u) | ((mask >> c->p) << 1);
}

/* Whether mask takes all the prefix's axes or none of them. */
static bool whole(const collapser *c, uint32_t mask)
{
    uint32_t pm = (1u << c->p) - 1;
    return (mask & pm) == 0 || (mask & pm) == pm;
}

/* A list over an operand with the prefix: entry 0 for the merged axis, then the rest. */
static void merge_list(const collapser *c, int64_t *v, int rank, int64_t first)
{
    v[0] = first;
    memmove(v + 1, v + c->p, (size_t)(rank - c->p) * sizeof *v);
}

/* Rebuilds node i of f into g with the prefix merged; false with the error on f (c->why set
 * when the node is refused). */
static bool collapse_node(collapser *c, int32_t i)
{
    const nest_function *f = c->f;
    const ir_node *n = &f->nodes[i];
    ir_kind kind = ir_kind_of(n);
    ir_node_attrs s;
    dim_move mv = {c->f, c->g, c->map};
    if (!ir_node_attrs_of(f, i, dim_transfer_map, &mv, &s))
        return false;
    bool np = has_prefix(c, n), any = np;
    for (int j = 0; j < n->nin; j++)
        any |= has_prefix(c, &f->nodes[ir_resolve(f, n->in[j])]);
    /* a value with symbolic dims further in but not the prefix (x^T as [D,B*S] in a
     * gradient) is built as it is: ir_build checks it against its operands' merged shapes,
     * and pipeline.c what the passes take of it */
    if (!any)
        return ir_rebuild_node(c->f, c->g, i, &s.at);
    const ir_node *a = n->nin > 0 ? &f->nodes[ir_resolve(f, n->in[0])] : NULL;
    bool ap = a && has_prefix(c, a);
    ir_attrs *at = &s.at;
    if (np) {
        merge_list(c, s.shape, n->rank, c->pg);
        at->rank = n->rank - c->p + 1;
    }
    uint32_t mask = n->a.axes, pm = (1u << c->p) - 1;
    switch (kind) {
    case K_PARAM:
        if (n->a.param.layout == NEST_COL_MAJOR)
            c->why = "a column-major parameter";
        break;
    case K_CONST:
    case K_EW:
    case K_CMP:
    case K_SELECT:
    case K_CONVERT: break; /* operands of the value's shape */
    case K_BROADCAST:
        /* the new axes take the whole prefix (to a value with it) or none of it */
        if (!np || (ap ? (mask & pm) != 0 : (mask & pm) != pm))
            c->why = "a broadcast along part of the leading symbolic axes";
        at->naxes = ir_mask_axes(merged_mask(c, mask), s.axes);
        break;
    case K_REDUCE:
    case K_SOFTMAX:
    case K_REVERSE:
        if (!whole(c, mask) || (kind == K_REVERSE && (mask & pm)))
            c->why = kind == K_REVERSE ? "a reverse of a leading symbolic axis"
                                       : "a reduction over part of the leading symbolic axes";
        at->naxes = ir_mask_axes(merged_mask(c, mask), s.axes);
        break;
    case K_ARGREDUCE:
        if (n->a.axis < c->p)
            c->why = "an argmax or argmin along a leading symbolic axis";
        at->index = n->a.axis - c->p + 1;
        break;
    case K_DOT: { /* x [prefix.., K] . w [K, J..]: the prefix stays free */
        const ir_node *b = &f->nodes[ir_resolve(f, n->in[1])];
        if ((has_prefix(c, b) && a->rank > 0) || (ap && a->rank == c->p && b->rank > 0))
            c->why = "a dot that sums over a leading symbolic axis";
        break;
    }
    case K_RESHAPE: { /* the prefix's axes stay together and in order: it is one axis */
        int m = 0;
        for (int k = 0; k < a->rank; k++) {
            int o = n->a.order[k];
            if (!ap && o != k)
                c->why = "a reshape that moves a leading symbolic axis";
            else if (ap && o == 0) {
                for (int j = 1; j < c->p; j++)
                    if (k + j >= a->rank || n->a.order[k + j] != j)
                        c->why = "a reshape that moves a leading symbolic axis";
                s.order[m++] = 0;
            } else if (ap && o >= c->p)
                s.order[m++] = o - c->p + 1;
        }
        if (np && ap && s.order[0] != 0)
            c->why = "a reshape that moves a leading symbolic axis";
        break;
    }
    case K_SLICE:
        for (int k = 0; k < c->p; k++)
            if (n->a.slice.lower[k] != 0 || n->a.slice.upper[k] != c->pre[k] ||
                n->a.slice.step[k] != 1)
                c->why = "a slice of a leading symbolic axis";
        merge_list(c, s.lo, a->rank, 0);
        merge_list(c, s.up, a->rank, c->pg);
        merge_list(c, s.step, a->rank, 1);
        break;
    case K_PAD:
        for (int k = 0; k < c->p; k++)
            if (n->a.pad.below[k] || n->a.pad.above[k] || n->a.pad.interior[k])
                c->why = "a pad of a leading symbolic axis";
        merge_list(c, s.lo, a->rank, 0);
        merge_list(c, s.up, a->rank, 0);
        merge_list(c, s.step, a->rank, 0);
        break;
    case K_CONCAT:
        if (n->a.axis < c->p)
            c->why = "a concat along a leading symbolic axis";
        at->index = n->a.axis - c->p + 1;
        break;
    case K_TUPLE:
    case K_GET: break;
    case K_STATE:
    case K_REPLACE_SLICE:
    case K_ONE_HOT:
    case K_GATHER:
    case K_SCATTER_ADD:
    case K_TOPK:
    case K_CONV:
    case K_POOL: c->why = "this op with leading symbolic axes"; break;
    case K_BATCH_DOT: { /* the prefix among the batch axes of both: a batch of B*S products */
        const ir_node *b = &f->nodes[ir_resolve(f, n->in[1])];
        if (!ap || !has_prefix(c, b) || a->rank < c->p + 2 || b->rank < c->p + 2)
            c->why = "a batch_dot over a leading symbolic axis";
        break;
    }
    }
    return !c->why && ir_rebuild_node(c->f, c->g, i, at);
}

/* The refusal of node i: an error on f naming the value, its type and the prefix. */
static void refuse(collapser *c, int32_t i)
{
    buf b = {0};
    buf_puts(&b, " over ");
    ir_format_dims(&b, c->f, c->p, c->pre);
    char *t = buf_finish(&b);
    ir_refuse_dims(c->f, i, c->why, t ? t : "");
    free(t);
}

int ir_refuse_dims(nest_function *f, int32_t i, const char *why, const char *after)
{
    namer nm;
    bool named = namer_init(&nm, f);
    buf b = {0};
    ir_format_type(&b, f, i);
    buf_puts(&b, after);
    char *t = buf_finish(&b);
    ir_error(f, NEST_ERR_ARG,
             "compiling %s: %s (value %s: %s) with symbolic dims is not compiled yet; "
             "nest_specialize or nestc --dim NAME=N give plain sizes",
             f->name, why, named ? namer_name(&nm, i) : "?", t ? t : "?");
    free(t);
    namer_free(&nm);
    return f->status;
}

/* The prefix: the leading axes up to the last symbolic one of the first value whose first
 * axis and one further in are symbolic. */
static void find_prefix(collapser *c)
{
    const nest_function *f = c->f;
    for (int32_t i = 0; i < f->nnodes && !c->p; i++) {
        const ir_node *n = &f->nodes[i];
        for (int k = n->rank - 1; k >= 1 && !c->p && starts_run(n); k--)
            if (dim_is_sym(n->shape[k])) {
                c->p = k + 1;
                memcpy(c->pre, n->shape, (size_t)c->p * sizeof *c->pre);
            }
    }
}

nest_function *ir_collapse(nest_function *f)
{
    collapser c = {.f = f};
    find_prefix(&c);
    assert(c.p >= 2);
    int32_t *ids = NULL, np = 0;
    if (ir_dims_of(f, &ids, &np))
        return NULL;
    c.map = calloc((size_t)dim_entry_count(f) + 1, sizeof *c.map);
    c.g = c.map ? calloc(1, sizeof *c.g) : NULL;
    nest_function *g = c.g;
    if (!g || !(g->name = arena_strdup(&g->arena, f->name))) {
        free(ids);
        free(c.map);
        ir_function_destroy(g);
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NULL;
    }
    g->module = f->module;
    g->detached = true;
    g->origin = f;
    g->line = f->line;
    g->col = f->col;
    /* the names first, in the order of the ABI, so that g's order is f's */
    for (int32_t k = 0; k < np; k++)
        transfer(&c, DIM_SYM0 - ids[k]);
    c.pg = 1;
    for (int k = 0; k < c.p && c.pg != DIM_NONE; k++)
        c.pg = dim_mul(g, c.pg, transfer(&c, c.pre[k]));
    bool ok = c.pg != DIM_NONE;
    if (!ok)
        ir_error(f, g->status, "%s", g->errmsg ? g->errmsg : "out of memory");
    for (int32_t i = 0; ok && i < f->nnodes; i++)
        if (!collapse_node(&c, i)) {
            if (c.why)
                refuse(&c, i);
            ok = false;
        }
    /* the same dims in the same order */
    int32_t *gids = ok ? calloc((size_t)dim_entry_count(g) + 1, sizeof *gids) : NULL;
    int32_t ng = gids ? dim_params(g, gids) : -1;
    for (int32_t k = 0; ok && k < np; k++)
        if (ng != np || strcmp(dim_entry(f, DIM_SYM0 - ids[k])->name,
                               dim_entry(g, DIM_SYM0 - gids[k])->name) != 0) {
            ir_error(f, NEST_ERR_ARG,
                     "compiling %s: its dims in the order of the parameters' shapes change when "
                     "the leading symbolic axes merge; nest_specialize or nestc --dim NAME=N "
                     "give plain sizes",
                     f->name);
            ok = false;
        }
    free(gids);
    free(ids);
    free(c.map);
    if (ok) {
        size_t rb = (size_t)f->nresults * sizeof *f->results;
        g->results = arena_alloc(&g->arena, rb + 1);
        g->result_layout = arena_alloc(&g->arena, (size_t)f->nresults + 1);
        g->returned = arena_alloc(&g->arena, (size_t)f->nreturned * sizeof *f->returned + 1);
        g->assigns = arena_alloc(&g->arena, (size_t)f->nassigns * sizeof *f->assigns + 1);
        ok = g->results && g->result_layout && g->returned && g->assigns;
        if (!ok)
            ir_error(f, NEST_ERR_NOMEM, "out of memory");
    }
    if (!ok) {
        ir_function_destroy(g);
        return NULL;
    }
    if (f->nresults) {
        memcpy(g->results, f->results, (size_t)f->nresults * sizeof *f->results);
        memcpy(g->result_layout, f->result_layout, (size_t)f->nresults);
    }
    if (f->nreturned)
        memcpy(g->returned, f->returned, (size_t)f->nreturned * sizeof *f->returned);
    if (f->nassigns)
        memcpy(g->assigns, f->assigns, (size_t)f->nassigns * sizeof *f->assigns);
    g->nresults = f->nresults;
    g->nreturned = f->nreturned;
    g->nassigns = f->nassigns;
    g->capassigns = (size_t)f->nassigns;
    g->has_return = true;
    for (int32_t i = 0; i < f->nresults; i++)
        if (f->result_layout[i] == NEST_COL_MAJOR && has_prefix(&c, &f->nodes[f->results[i]])) {
            c.why = "a column-major result";
            refuse(&c, f->results[i]);
            ir_function_destroy(g);
            return NULL;
        }
    return g;
}
