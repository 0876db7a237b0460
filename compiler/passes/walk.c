/*
 * walk.c - walks over the plan's element expressions, and the indexes the passes and the
 * emitter build from them, so that each expression is visited a bounded number of times.
 *
 * Expressions are hash-consed DAGs whose nodes have dense ids in creation order (layout.c), so a
 * set of nodes is an array of marks indexed by id: a walk visits each node it reaches once,
 * however many paths lead to it, and costs the size of the DAG it reaches, not of the tree the
 * DAG unfolds to. The marks are stamped with an epoch, so starting a new set costs nothing; the
 * arrays live in the plan's arena and grow with the number of nodes. Buffers have marks the
 * same way.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- marks ---- */

/* Grows an epoch-stamped mark array to hold index i; false (p->status set) out of memory. */
static bool marks_fit(plan *p, uint32_t **v, size_t *cap, size_t i)
{
    if (i < *cap)
        return true;
    size_t c = *cap ? *cap : 256;
    while (c <= i)
        c *= 2;
    uint32_t *n = arena_array(p->a, c, sizeof *n);
    if (!n) {
        p->status = NEST_ERR_NOMEM;
        return false;
    }
    if (*cap)
        memcpy(n, *v, *cap * sizeof *n);
    *v = n;
    *cap = c;
    return true;
}

void fx_marks_clear(plan *p)
{
    if (++p->fxepoch == 0) { /* wrapped: every old stamp must go */
        if (p->capfxmark)
            memset(p->fxmark, 0, p->capfxmark * sizeof *p->fxmark);
        p->fxepoch = 1;
    }
}

bool fx_mark(plan *p, const fx *e)
{
    if (!marks_fit(p, &p->fxmark, &p->capfxmark, (size_t)e->id))
        return false;
    if (p->fxmark[e->id] == p->fxepoch)
        return false;
    p->fxmark[e->id] = p->fxepoch;
    return true;
}

void buf_marks_clear(plan *p)
{
    if (++p->bufepoch == 0) {
        if (p->capbufmark)
            memset(p->bufmark, 0, p->capbufmark * sizeof *p->bufmark);
        p->bufepoch = 1;
    }
}

bool buf_mark(plan *p, int32_t b)
{
    if (!marks_fit(p, &p->bufmark, &p->capbufmark, (size_t)b))
        return false;
    if (p->bufmark[b] == p->bufepoch)
        return false;
    p->bufmark[b] = p->bufepoch;
    return true;
}

void *fx_id_array(void *v, size_t *cap, const fx *e, size_t size, int fill)
{
    size_t id = (size_t)e->id;
    if (id < *cap)
        return v;
    size_t c = *cap ? *cap : 1024;
    while (c <= id)
        c *= 2;
    unsigned char *n = realloc(v, c * size);
    if (!n)
        return NULL;
    memset(n + *cap * size, fill, (c - *cap) * size);
    *cap = c;
    return n;
}

/* ---- walks ---- */

static int by_id(const void *a, const void *b)
{
    int32_t x = (*(fx *const *)a)->id, y = (*(fx *const *)b)->id;
    return (x > y) - (x < y);
}

/* Every node reachable from the roots, each once, sorted by id (args before users): malloc'd,
 * *n of them. Nodes for which enter() is false are visited but their args are not entered
 * (unless another path reaches them). NULL with p->status set when out of memory; NULL with
 * *n 0 when there is nothing. */
static fx **gather(plan *p, fx *const *roots, int nroots, bool (*enter)(const fx *e, void *ctx),
                   void *ctx, size_t *n, bool sorted)
{
    size_t cap = 0, sp = 0, scap = 0;
    fx **seen = NULL, **stack = NULL;
    *n = 0;
    fx_marks_clear(p);
    for (int r = 0; r < nroots && !p->status; r++) {
        if (!roots[r])
            continue;
        fx **q = grow_array(stack, &scap, sp, sizeof *q);
        if (!q)
            goto oom;
        stack = q;
        stack[sp++] = roots[r];
        while (sp > 0) {
            fx *e = stack[--sp];
            if (!fx_mark(p, e))
                continue;
            if (!(q = grow_array(seen, &cap, *n, sizeof *q)))
                goto oom;
            seen = q;
            seen[(*n)++] = e;
            if (enter && !enter(e, ctx))
                continue;
            for (int i = 0; i < e->nargs; i++) {
                if (!(q = grow_array(stack, &scap, sp, sizeof *q)))
                    goto oom;
                stack = q;
                stack[sp++] = e->args[i];
            }
        }
    }
    free(stack);
    if (p->status) {
        free(seen);
        *n = 0;
        return NULL;
    }
    if (sorted && *n > 1)
        qsort(seen, *n, sizeof *seen, by_id);
    return seen;
oom:
    p->status = NEST_ERR_NOMEM;
    free(stack);
    free(seen);
    *n = 0;
    return NULL;
}

static bool walk(plan *p, fx *const *roots, int nroots, bool (*enter)(const fx *e, void *ctx),
                 void (*fn)(fx *e, void *ctx), void *ctx, bool sorted)
{
    size_t n;
    fx **seen = gather(p, roots, nroots, enter, ctx, &n, sorted);
    if (!seen && p->status)
        return false;
    for (size_t i = 0; i < n; i++)
        fn(seen[i], ctx);
    free(seen);
    return true;
}

bool fx_walk_pruned(plan *p, fx *const *roots, int nroots, bool (*enter)(const fx *e, void *ctx),
                    void (*fn)(fx *e, void *ctx), void *ctx)
{
    return walk(p, roots, nroots, enter, fn, ctx, true);
}

bool fx_walk(plan *p, fx *const *roots, int nroots, void (*fn)(fx *e, void *ctx), void *ctx)
{
    return walk(p, roots, nroots, NULL, fn, ctx, true);
}

bool fx_visit(plan *p, fx *const *roots, int nroots, bool (*enter)(const fx *e, void *ctx),
              void (*fn)(fx *e, void *ctx), void *ctx)
{
    return walk(p, roots, nroots, enter, fn, ctx, false);
}

/* The values of a nest's outputs, the roots of its walks: malloc'd (a merged nest may have many),
 * NULL when out of memory (p->status). */
static fx **nest_values(plan *p, const nest *ne)
{
    fx **vals = malloc(((size_t)ne->nouts + 1) * sizeof *vals);
    if (!vals) {
        p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    for (int i = 0; i < ne->nouts; i++)
        vals[i] = ne->outs[i].value;
    return vals;
}

bool nest_visit(plan *p, const nest *ne, void (*fn)(fx *e, void *ctx), void *ctx)
{
    fx **vals = nest_values(p, ne);
    bool ok = vals && fx_visit(p, vals, ne->nouts, NULL, fn, ctx);
    free(vals);
    return ok;
}

typedef struct find_buf {
    int32_t buf;
    bool found;
} find_buf;

static void find_load(fx *e, void *ctx)
{
    find_buf *fb = ctx;
    if (e->kind == FX_LOAD && e->buf == fb->buf)
        fb->found = true;
}

bool fx_reads(plan *p, fx *e, int32_t bufi)
{
    find_buf fb = {bufi, false};
    return !fx_visit(p, &e, 1, NULL, find_load, &fb) || fb.found;
}

typedef struct find_concat {
    int axis;
    bool found;
} find_concat;

static void find_concat_on(fx *e, void *ctx)
{
    find_concat *fc = ctx;
    if (e->kind == FX_CONCAT && (e->axis == fc->axis || fc->axis < 0))
        fc->found = true;
}

bool fx_has_concat(plan *p, fx *const *roots, int nroots, int axis)
{
    find_concat fc = {axis, false};
    return !fx_visit(p, roots, nroots, NULL, find_concat_on, &fc) || fc.found;
}

/* ---- weights ---- */

int fx_weight(const fx *e)
{
    if (e->kind == FX_CONCAT)
        return 1;
    if (e->kind != FX_OP)
        return 0;
    switch (e->op) {
    case OP_EXP: case OP_LOG: case OP_TANH: case OP_POWER: return 10;
    case OP_SIN: case OP_COS: case OP_TAN: case OP_ASIN: case OP_ACOS: case OP_ATAN:
    case OP_SINH: case OP_COSH: case OP_ERF: case OP_SIGMOID: return 10;
    case OP_DIVIDE: case OP_SQRT: return 3;
    default: return 1;
    }
}

static void add_weight(fx *e, void *ctx) { *(int64_t *)ctx += fx_weight(e); }

int64_t nest_weight(plan *p, const nest *ne)
{
    int64_t w = ne->nouts;
    nest_visit(p, ne, add_weight, &w);
    return w;
}

/* ---- the buffers expressions load ---- */

typedef struct loads {
    plan *p;
    int32_t *v;
    size_t n, cap;
    bool oom;
} loads;

static void add_load(fx *e, void *ctx)
{
    loads *l = ctx;
    if (e->kind != FX_LOAD || e->buf == FX_IOTA || l->oom || !buf_mark(l->p, e->buf))
        return;
    int32_t *v = grow_array(l->v, &l->cap, l->n, sizeof *v);
    if (!v) {
        l->oom = true;
        return;
    }
    l->v = v;
    l->v[l->n++] = e->buf;
}

int32_t fx_loads(plan *p, fx *const *roots, int nroots, int32_t **out)
{
    loads l = {.p = p};
    buf_marks_clear(p);
    bool ok = fx_visit(p, roots, nroots, NULL, add_load, &l) && !l.oom && !p->status;
    if (!ok) {
        if (!p->status)
            p->status = NEST_ERR_NOMEM;
        free(l.v);
        *out = NULL;
        return -1;
    }
    if (l.n > 1)
        qsort(l.v, l.n, sizeof *l.v, cmp_i32);
    *out = l.v;
    return (int32_t)l.n;
}

int32_t nest_loads(plan *p, const nest *ne, int32_t **out)
{
    fx **vals = nest_values(p, ne);
    int32_t n = vals ? fx_loads(p, vals, ne->nouts, out) : -1;
    if (!vals)
        *out = NULL;
    free(vals);
    return n;
}

/* ---- maps from expression nodes to expression nodes ---- */

fx **fx_map_slot(plan *p, fx_map *m, const fx *e)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        const fx **k = calloc(cap, sizeof *k);
        fx **v = calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            p->status = NEST_ERR_NOMEM;
            return NULL;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t j = m->keys[i]->hash & (cap - 1);
            while (k[j])
                j = (j + 1) & (cap - 1);
            k[j] = m->keys[i];
            v[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = k;
        m->vals = v;
        m->cap = cap;
    }
    size_t j = e->hash & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != e)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) {
        m->keys[j] = e;
        m->vals[j] = NULL;
        m->n++;
    }
    return &m->vals[j];
}

fx *fx_map_get(const fx_map *m, const fx *e)
{
    if (!m->cap)
        return NULL;
    size_t j = e->hash & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != e)
        j = (j + 1) & (m->cap - 1);
    return m->keys[j] ? m->vals[j] : NULL;
}

void fx_map_free(fx_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- nests that read a buffer, and one nest joining another ---- */

int32_t *nest_readers(plan *p)
{
    int32_t *readers = calloc((size_t)p->nbufs + 1, sizeof *readers);
    for (int32_t j = 0; readers && j < p->nnests; j++) {
        int32_t *bufs;
        int32_t nb = p->nests[j].dead ? 0 : nest_loads(p, &p->nests[j], &bufs);
        for (int32_t i = 0; i < nb; i++)
            readers[bufs[i]]++;
        if (nb > 0)
            free(bufs);
        if (nb < 0)
            break;
    }
    if (!readers || p->status) {
        free(readers);
        if (!p->status)
            p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    return readers;
}

int32_t next_live_nest(const plan *p, int32_t k)
{
    int32_t e = k + 1;
    while (e < p->nnests && p->nests[e].dead)
        e++;
    return e;
}

bool reads_only_view(plan *p, const nout *o, int rank, fx *const *vals, int nvals)
{
    fx *view = fx_load(p, o->buf, o->off, rank, o->st, -1);
    fx *zero = fx_imm(p, o->value->etype, 0, 0);
    if (!view || !zero)
        return false;
    for (int i = 0; i < nvals; i++) {
        fx *rest = fx_substitute(p, vals[i], view, zero);
        if (!rest || fx_reads(p, rest, o->buf))
            return false;
    }
    return true;
}

bool nest_absorb(plan *p, int32_t k, int32_t e, const nout *outs, const int32_t *readers)
{
    nest *n = &p->nests[k], *ep = &p->nests[e];
    int32_t value = n->outs[0].buf, *bufs;
    int32_t nl = nest_loads(p, ep, &bufs);
    bool ep_reads = false;
    for (int32_t i = 0; i < nl; i++)
        ep_reads |= bufs[i] == value;
    free(bufs);
    if (nl < 0)
        return false;
    nout *o = arena_array(p->a, (size_t)(n->nouts + ep->nouts), sizeof *o);
    int32_t *nodes = arena_array(p->a, (size_t)(n->nnodes + ep->nnodes) + 1, sizeof *nodes);
    if (!o || !nodes)
        return false;
    memcpy(o, n->outs, (size_t)n->nouts * sizeof *o);
    memcpy(o + n->nouts, outs, (size_t)ep->nouts * sizeof *o);
    memcpy(nodes, n->nodes, (size_t)n->nnodes * sizeof *nodes);
    memcpy(nodes + n->nnodes, ep->nodes, (size_t)ep->nnodes * sizeof *nodes);
    n->outs = o;
    n->nouts += ep->nouts;
    n->capouts = (size_t)n->nouts;
    n->nodes = nodes;
    n->nnodes += ep->nnodes;
    n->capnodes = (size_t)n->nnodes;
    ep->dead = true;
    /* the value itself is stored only if a nest other than e reads it */
    if (p->bufs[value].kind == BUF_TEMP && readers[value] <= (ep_reads ? 1 : 0)) {
        n->outs[0].drop = true;
        p->bufs[value].dead = true;
    }
    return true;
}
