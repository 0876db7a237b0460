/*
 * bind.c - a function with symbolic dims at given sizes: each node built again through ir_build
 * with its shape and attributes evaluated, so that every type rule is checked with the sizes
 * (a slice bound past N, a pad that leaves fewer than no elements, a size past the limit).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct binder {
    nest_function *f, *g;
    int64_t *vals; /* per entry of f's table: the values of the names */
} binder;

/* The value of dim d at the binder's sizes; false with the error on f. */
static bool eval_dim(void *ctx, int64_t d, int64_t *out, const char *what, int32_t node, int i)
{
    binder *b = ctx;
    int st = dim_eval(b->f, d, b->vals, out);
    if (st == NEST_OK && *out <= DIM_SYM0)
        st = NEST_ERR_LIMIT;
    if (st != NEST_OK) {
        char *t = dim_text(b->f, d);
        ir_error(b->f, NEST_ERR_ARG, "%s (node %d, %s %d): %s overflows at these dims",
                 b->f->name, node, what, i, t ? t : "");
        free(t);
        return false;
    }
    return true;
}

/* n entries of a list of node `node` mapped into out; false with the error on f. */
static bool map_list(ir_dim_map map, void *ctx, int n, const int64_t *v, int64_t *out,
                     const char *what, int32_t node)
{
    for (int i = 0; i < n; i++)
        if (!map(ctx, v[i], &out[i], what, node, i))
            return false;
    return true;
}

bool ir_node_attrs_of(const nest_function *f, int32_t i, ir_dim_map map, void *ctx,
                      ir_node_attrs *s)
{
    const ir_node *n = &f->nodes[i];
    ir_kind k = ir_kind_of(n);
    memset(&s->at, 0, sizeof s->at);
    ir_attrs *at = &s->at;
    at->rank = n->rank;
    at->shape = s->shape;
    const ir_node *a = n->nin > 0 ? &f->nodes[n->in[0]] : NULL;
    if (!map_list(map, ctx, n->rank, n->shape, s->shape, "dimension", i))
        return false;
    switch (k) {
    case K_PARAM:
        at->type = n->etype;
        at->name = n->name;
        at->layout = n->a.param.layout;
        break;
    case K_CONST:
        at->type = n->etype;
        at->data = n->a.constant.data;
        at->count = n->a.constant.count;
        break;
    case K_STATE: at->state = n->a.state; break;
    case K_CONVERT: at->type = n->etype; break;
    case K_BROADCAST:
    case K_REDUCE:
    case K_REVERSE:
    case K_SOFTMAX:
        at->naxes = ir_mask_axes(n->a.axes, s->axes);
        at->axes = s->axes;
        break;
    case K_RESHAPE:
        for (int j = 0; j < a->rank; j++)
            s->order[j] = n->a.order[j];
        at->order = s->order;
        break;
    case K_SLICE:
    case K_REPLACE_SLICE:
    case K_PAD: { /* three lists: the box's bounds and strides, or the padding */
        bool pad = k == K_PAD;
        const int64_t *l[3] = {n->a.slice.lower, n->a.slice.upper, n->a.slice.step};
        if (pad) {
            l[0] = n->a.pad.below;
            l[1] = n->a.pad.above;
            l[2] = n->a.pad.interior;
        }
        if (!map_list(map, ctx, a->rank, l[0], s->lo, pad ? "below" : "lower bound", i) ||
            !map_list(map, ctx, a->rank, l[1], s->up, pad ? "above" : "upper bound", i) ||
            !map_list(map, ctx, a->rank, l[2], s->step, pad ? "interior" : "stride", i))
            return false;
        at->lower = at->below = s->lo;
        at->upper = at->above = s->up;
        at->step = at->interior = s->step;
        break;
    }
    case K_CONCAT:
    case K_ARGREDUCE:
    case K_ONE_HOT:
    case K_GATHER:
    case K_SCATTER_ADD: at->index = n->a.axis; break;
    case K_GET: at->index = n->a.get.index; break;
    case K_CONV:
    case K_POOL: {
        const ir_window *w = n->a.win;
        at->window = w->window;
        at->step = w->stride;
        at->dilation = w->dilation;
        at->pad_below = w->pad_below;
        at->pad_above = w->pad_above;
        at->data_dilation = w->data_dilation;
        at->groups = w->groups;
        at->include_pad = w->include_pad;
        break;
    }
    case K_TOPK:
        at->k = n->a.topk.k;
        at->index = n->a.topk.axis;
        at->largest = n->a.topk.largest;
        at->which = n->a.topk.which;
        break;
    case K_EW: /* operands only: every kind is listed, so a new one must say what it takes */
    case K_CMP:
    case K_SELECT:
    case K_DOT:
    case K_TUPLE:
    case K_BATCH_DOT: break;
    }
    return true;
}

bool ir_rebuild_node(nest_function *f, nest_function *g, int32_t i, const ir_attrs *at)
{
    const ir_node *n = &f->nodes[i];
    int32_t v = ir_build(g, (ir_op)n->op, n->nin, n->in, at);
    if (v < 0) {
        ir_error(f, g->status, "%s", g->errmsg ? g->errmsg : "out of memory");
        return false;
    }
    assert(v == i);
    ir_node *m = &g->nodes[v];
    m->line = n->line;
    m->col = n->col;
    if (n->name && ir_kind_of(n) != K_PARAM && ir_set_name(g, v, n->name) != NEST_OK) {
        ir_error(f, NEST_ERR_NOMEM, "out of memory");
        return false;
    }
    return true;
}

/* Builds node i of f into g (as node i); false with the error on f. */
static bool bind_node(binder *b, int32_t i)
{
    ir_node_attrs s;
    return ir_node_attrs_of(b->f, i, eval_dim, b, &s) && ir_rebuild_node(b->f, b->g, i, &s.at);
}

/* The function's dims must all appear in its parameters' shapes: a size no argument has is a
 * size no caller can give. */
static int check_dims(nest_function *f, int32_t *ids, int32_t *nparams)
{
    int32_t ne = dim_entry_count(f);
    int32_t *all = calloc((size_t)ne + 1, sizeof *all);
    if (!all)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    int32_t np = dim_params(f, ids), nn = dim_names(f, all);
    if (np < 0) {
        free(all);
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < nn; i++) {
        bool found = false;
        for (int32_t j = 0; j < np; j++)
            found = found || ids[j] == all[i];
        if (!found) {
            const char *name = dim_entry(f, DIM_SYM0 - all[i])->name;
            free(all);
            return ir_error(f, NEST_ERR_TYPE,
                            "function %s: dim %s appears in no parameter's shape, so no call "
                            "gives its size",
                            f->name, name);
        }
    }
    free(all);
    *nparams = np;
    return NEST_OK;
}

int ir_dims_of(nest_function *f, int32_t **ids, int32_t *n)
{
    *ids = calloc((size_t)dim_entry_count(f) + 1, sizeof **ids);
    if (!*ids)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    int st = check_dims(f, *ids, n);
    if (st) {
        free(*ids);
        *ids = NULL;
    }
    return st;
}

/* size bytes of p (NULL when size is 0) in g's arena; NULL only when out of memory. */
static void *dup(nest_function *g, const void *p, size_t size)
{
    void *q = arena_alloc(&g->arena, size + 1);
    if (q && size)
        memcpy(q, p, size);
    return q;
}

nest_function *ir_bind(nest_function *f, const int64_t *vals, int nvals)
{
    if (!f->has_return)
        return ir_error(f, NEST_ERR_ARG, "function %s has no results (nest_return was not called)",
                        f->name),
               NULL;
    int32_t *ids, np;
    if (ir_dims_of(f, &ids, &np))
        return NULL;
    if (nvals != np || (np > 0 && !vals)) {
        free(ids);
        ir_error(f, NEST_ERR_CALL, "function %s takes %d dim%s; given %d", f->name, np,
                 np == 1 ? "" : "s", nvals);
        return NULL;
    }
    binder b = {.f = f};
    b.vals = calloc((size_t)dim_entry_count(f) + 1, sizeof *b.vals);
    b.g = b.vals ? calloc(1, sizeof *b.g) : NULL;
    if (b.g && !(b.g->name = arena_strdup(&b.g->arena, f->name))) {
        ir_function_destroy(b.g);
        b.g = NULL;
    }
    if (!b.g) {
        free(ids);
        free(b.vals);
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NULL;
    }
    for (int32_t i = 0; i < np; i++) {
        if (vals[i] < 0) {
            ir_error(f, NEST_ERR_ARG, "function %s: dim %s is negative (%lld)", f->name,
                     dim_entry(f, DIM_SYM0 - ids[i])->name, (long long)vals[i]);
            goto fail;
        }
        b.vals[ids[i]] = vals[i];
    }
    b.g->module = f->module;
    b.g->detached = true;
    b.g->line = f->line;
    b.g->col = f->col;
    for (int32_t i = 0; i < f->nnodes; i++)
        if (!bind_node(&b, i))
            goto fail;
    nest_function *g = b.g;
    g->results = dup(g, f->results, (size_t)f->nresults * sizeof *f->results);
    g->result_layout = dup(g, f->result_layout, (size_t)f->nresults);
    g->returned = dup(g, f->returned, (size_t)f->nreturned * sizeof *f->returned);
    g->assigns = dup(g, f->assigns, (size_t)f->nassigns * sizeof *f->assigns);
    if (!g->results || !g->result_layout || !g->returned || !g->assigns) {
        ir_error(f, NEST_ERR_NOMEM, "out of memory");
        goto fail;
    }
    g->nresults = f->nresults;
    g->nreturned = f->nreturned;
    g->nassigns = f->nassigns;
    g->capassigns = (size_t)f->nassigns;
    g->has_return = true;
    free(ids);
    free(b.vals);
    return g;
fail:
    free(ids);
    free(b.vals);
    ir_function_destroy(b.g);
    return NULL;
}
