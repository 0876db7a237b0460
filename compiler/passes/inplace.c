/*
 * inplace.c - where an assignment of state writes.
 *
 * Reads of a state tensor see its value at the call's entry, and fuse.c stores each assigned
 * value into a buffer of its own (BUF_STATE_NEW). Writing that store straight into the tensor
 * is safe when nothing reads the entry value after the store overwrote it:
 *   - no nest after the storing nest reads the tensor, and no other nest of its row group does
 *     (a row group interleaves its nests row by row);
 *   - inside the storing nest, every read of the tensor is of the very element being stored
 *     (the same view: off and strides), never under a concatenation (whose parts see shifted
 *     indexes), never in a fold or a tile's factors, and the store writes a different element
 *     at every step;
 *   - the nest's other outputs that read the tensor are emitted before the store: the outputs
 *     are reordered so (stores of state last, each after every output that reads its tensor).
 * Then w = w - lr * v is one loop over w, reading and writing each element in place. When the
 * stores of a nest read each other's tensors (a swap of two tensors), no order of the outputs
 * works: the nest then reads every value into a local before it stores any (values_first), so
 * the swap still runs in place, through registers; in a tiled or folding nest, whose outputs are
 * not computed together, one store of the cycle goes through a temporary. Otherwise (a read
 * after the store) the store goes to a temporary and a nest at the end copies it into the
 * tensor.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The views through which one nest's values load each state tensor, from one walk of the nest
 * (not a walk of every output for every store): per state buffer loaded, the first view seen,
 * whether every load has it, and whether a concat reads the tensor (its parts see shifted
 * indexes). */
typedef struct state_view {
    int32_t buf;
    int64_t off;
    const int64_t *st;
    int rank;
    bool same;   /* every load of buf has the view (off, st) */
    bool concat; /* a concat reads buf */
} state_view;

typedef struct view_scan {
    plan *p;
    int32_t *slot; /* per buffer (those known when the pass began): its entry in v, or -1 */
    int32_t nslots;
    state_view *v;
    size_t n, cap;
    fx **concats;
    size_t nc, capc;
    bool oom;
} view_scan;

static void scan_load(fx *e, void *ctx)
{
    view_scan *s = ctx;
    if (e->kind == FX_CONCAT) {
        fx **c = grow_array(s->concats, &s->capc, s->nc, sizeof *c);
        if (!c) {
            s->oom = true;
            return;
        }
        s->concats = c;
        s->concats[s->nc++] = e;
        return;
    }
    if (e->kind != FX_LOAD || e->buf < 0 || e->buf >= s->nslots ||
        s->p->bufs[e->buf].kind != BUF_STATE)
        return;
    int32_t i = s->slot[e->buf];
    if (i < 0) {
        state_view *v = grow_array(s->v, &s->cap, s->n, sizeof *v);
        if (!v) {
            s->oom = true;
            return;
        }
        s->v = v;
        s->slot[e->buf] = (int32_t)s->n;
        s->v[s->n++] = (state_view){e->buf, e->off, e->st, e->rank, true, false};
        return;
    }
    state_view *v = &s->v[i];
    if (e->off != v->off || e->rank != v->rank ||
        memcmp(e->st, v->st, (size_t)v->rank * sizeof *v->st) != 0)
        v->same = false;
}

/* Walks nest n's values once into s (emptied first); false when out of memory. */
static bool scan_views(view_scan *s, const nest *n)
{
    for (size_t i = 0; i < s->n; i++)
        s->slot[s->v[i].buf] = -1;
    s->n = s->nc = 0;
    bool ok = nest_visit(s->p, n, scan_load, s) && !s->oom;
    for (size_t c = 0; ok && c < s->nc; c++) { /* the tensors a concat reads */
        int32_t *loads;
        int32_t nl = fx_loads(s->p, &s->concats[c], 1, &loads);
        ok = nl >= 0;
        for (int32_t i = 0; i < nl; i++)
            if (loads[i] < s->nslots && s->slot[loads[i]] >= 0)
                s->v[s->slot[loads[i]]].concat = true;
        free(loads);
    }
    return ok;
}

/* Whether any output of nest n other than `except` (or n's tile factors) reads buffer b. */
static bool nest_reads(plan *p, const nest *n, int32_t b, int except)
{
    for (int i = 0; i < n->nouts; i++)
        if (i != except && fx_reads(p, n->outs[i].value, b))
            return true;
    return (n->tile_a && fx_reads(p, n->tile_a, b)) || (n->tile_b && fx_reads(p, n->tile_b, b));
}

/* The BUF_STATE buffer of state s (entry: per state, its buffer or -1), made if the function
 * never reads it. */
static int32_t state_buffer(plan *p, int32_t *entry, int32_t s, const pbuf *like)
{
    if (entry[s] < 0)
        entry[s] = plan_buffer(p, BUF_STATE, s, like->node, like->etype, like->count);
    return entry[s];
}

/* Per buffer, the last live nest that reads it (its values or a tile's factors), or -1: a
 * malloc'd array of p->nbufs, NULL when out of memory (p->status). The pass changes no nest's
 * reads of state (the copies it adds read temporaries, the state buffers it adds nothing), so
 * one look serves it. */
static int32_t *last_readers(plan *p)
{
    int32_t *last = malloc(((size_t)p->nbufs + 1) * sizeof *last);
    if (!last) {
        p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    for (int32_t b = 0; b < p->nbufs; b++)
        last[b] = -1;
    for (int32_t m = 0; m < p->nnests; m++) {
        const nest *x = &p->nests[m];
        fx *tile[2] = {x->tile_a, x->tile_b};
        for (int part = 0; part < 2 && !x->dead; part++) {
            int32_t *bufs;
            int32_t nb = part ? fx_loads(p, tile, 2, &bufs) : nest_loads(p, x, &bufs);
            if (nb < 0) {
                free(last);
                return NULL;
            }
            for (int32_t i = 0; i < nb; i++)
                last[bufs[i]] = m;
            free(bufs);
        }
    }
    return last;
}

/* Whether the store of output j of nest k into state buffer bs, which nest `last` reads last,
 * may write bs in place, apart from the order of the nest's outputs. */
static bool safe_in_place(plan *p, const view_scan *vs, int32_t k, int j, int32_t bs,
                          int32_t last)
{
    const nest *n = &p->nests[k];
    const nout *o = &n->outs[j];
    if (last > k)
        return false; /* a nest after k reads bs */
    for (int32_t m = 0; n->rowed && m < p->nnests; m++) {
        const nest *x = &p->nests[m];
        if (m != k && !x->dead && x->rowed && x->group == n->group && nest_reads(p, x, bs, -1))
            return false;
    }
    if (o->reduce >= 0 && fx_reads(p, o->value, bs))
        return false;
    if ((n->tile_a && fx_reads(p, n->tile_a, bs)) || (n->tile_b && fx_reads(p, n->tile_b, bs)))
        return false;
    for (int d = 0; d < n->rank; d++)
        if (o->st[d] == 0 && n->dims[d] > 1 && !(n->tile_i && d == 1))
            return false; /* the same element stored at several steps (a tile's epilogue runs
                           * once per element, after its sum over axis 1) */
    if (bs >= vs->nslots || vs->slot[bs] < 0)
        return true; /* the nest's values do not read the tensor */
    const state_view *v = &vs->v[vs->slot[bs]];
    return v->same && !v->concat && v->off == o->off && v->rank == n->rank &&
           memcmp(v->st, o->st, (size_t)n->rank * sizeof *o->st) == 0;
}

/* The store into bnew goes to a temporary instead; a nest at the end copies it into bs. */
static bool through_temporary(plan *p, int32_t bnew, int32_t bs)
{
    pbuf *pb = &p->bufs[bnew];
    pb->kind = BUF_TEMP;
    pb->index = -1;
    int64_t count = pb->count, one = 1;
    int32_t node = pb->node;
    fx *src = fx_load(p, bnew, 0, 1, &one, node);
    nest *grown = arena_grow(p->a, p->nests, (size_t)p->nnests, &p->capnests, sizeof *grown);
    nout *o = arena_array(p->a, 1, sizeof *o);
    int64_t *dims = arena_array(p->a, 1, sizeof *dims), *st = arena_array(p->a, 1, sizeof *st);
    int32_t *nodes = arena_array(p->a, 1, sizeof *nodes);
    if (!src || !grown || !o || !dims || !st || !nodes) {
        p->status = NEST_ERR_NOMEM;
        return false;
    }
    p->nests = grown;
    dims[0] = count;
    st[0] = 1;
    nodes[0] = node;
    *o = (nout){bs, 0, st, src, -1, node, false};
    int32_t me = p->nnests++;
    p->nests[me] = (nest){.rank = 1, .dims = dims, .nouts = 1, .outs = o, .nodes = nodes,
                          .nnodes = 1, .pack = -1, .group = me};
    return true;
}

/* Orders the outputs of nest k (the first stays first in a tiled nest): the stores into state
 * tensors in place come last, each after every output that reads its tensor. A cycle (a swap)
 * sends one store through a temporary. `inplace[i]` marks the outputs that store in place;
 * `bs[i]` is their state buffer. */
static bool order_outputs(plan *p, int32_t k, bool *inplace, const int32_t *bs, const int32_t *bnew)
{
    nest *n = &p->nests[k];
    int no = n->nouts;
    nout *sorted = arena_array(p->a, (size_t)no, sizeof *sorted);
    bool *placed = calloc((size_t)no, sizeof *placed);
    if (!sorted || !placed) {
        free(placed);
        p->status = NEST_ERR_NOMEM;
        return false;
    }
    int m = 0;
    for (int i = 0; i < no; i++)
        if (!inplace[i] || (n->tile_i && i == 0)) {
            sorted[m++] = n->outs[i];
            placed[i] = true;
        }
    while (m < no) {
        int pick = -1;
        for (int i = 0; i < no && pick < 0; i++) {
            if (placed[i])
                continue;
            bool ready = true; /* no unplaced output still to read i's tensor */
            for (int x = 0; x < no && ready; x++)
                if (x != i && !placed[x] && fx_reads(p, n->outs[x].value, bs[i]))
                    ready = false;
            if (ready)
                pick = i;
        }
        if (pick < 0 && !n->tile_i && !nest_folds(n)) {
            /* a cycle: every value is read before any store, so the rest go in their order */
            n->values_first = true;
            for (int i = 0; i < no; i++)
                if (!placed[i]) {
                    sorted[m++] = n->outs[i];
                    placed[i] = true;
                }
            break;
        }
        if (pick < 0) { /* a cycle in a tile: the first waiting store goes through a temporary */
            for (int i = 0; i < no && pick < 0; i++)
                if (!placed[i])
                    pick = i;
            inplace[pick] = false;
            if (!through_temporary(p, bnew[pick], bs[pick])) {
                free(placed);
                return false;
            }
            n = &p->nests[k]; /* the nests may have moved */
        }
        sorted[m++] = n->outs[pick];
        placed[pick] = true;
    }
    free(placed);
    n->outs = sorted;
    return true;
}

int pass_inplace(plan *p)
{
    int32_t nnests = p->nnests, nbufs = p->nbufs; /* copy nests added below need no look */
    int32_t ns = p->f->module ? p->f->module->nstates : 0;
    int32_t *last = last_readers(p), *entry = malloc(((size_t)ns + 1) * sizeof *entry);
    view_scan vs = {.p = p, .nslots = nbufs};
    vs.slot = malloc(((size_t)nbufs + 1) * sizeof *vs.slot);
    if (!entry || !vs.slot)
        p->status = NEST_ERR_NOMEM;
    for (int32_t b = 0; b < nbufs && vs.slot; b++)
        vs.slot[b] = -1;
    for (int32_t s = 0; s < ns && entry; s++)
        entry[s] = -1;
    for (int32_t b = 0; b < nbufs && entry; b++)
        if (p->bufs[b].kind == BUF_STATE && entry[p->bufs[b].index] < 0)
            entry[p->bufs[b].index] = b;
    for (int32_t k = 0; last && entry && k < nnests && !p->status; k++) {
        nest *n = &p->nests[k];
        int no = n->nouts, assigns = 0;
        for (int j = 0; j < no && !n->dead; j++)
            assigns += p->bufs[n->outs[j].buf].kind == BUF_STATE_NEW;
        if (!assigns)
            continue;
        bool *inplace = calloc((size_t)no + 1, sizeof *inplace);
        int32_t *bs = calloc((size_t)no + 1, sizeof *bs), *bnew = calloc((size_t)no + 1, sizeof *bnew);
        if (!inplace || !bs || !bnew) {
            free(inplace);
            free(bs);
            free(bnew);
            p->status = NEST_ERR_NOMEM;
            break;
        }
        int any = 0;
        if (!scan_views(&vs, n))
            p->status = NEST_ERR_NOMEM;
        for (int j = 0; j < no && !p->status; j++) {
            int32_t b = p->nests[k].outs[j].buf;
            if (p->bufs[b].kind != BUF_STATE_NEW)
                continue;
            pbuf like = p->bufs[b];
            int32_t s = state_buffer(p, entry, like.index, &like);
            if (s < 0)
                break;
            bnew[j] = b;
            bs[j] = s;
            if (safe_in_place(p, &vs, k, j, s, s < nbufs ? last[s] : -1)) {
                inplace[j] = true;
                any++;
            } else if (!through_temporary(p, b, s)) {
                break;
            }
        }
        if (any && !p->status && order_outputs(p, k, inplace, bs, bnew)) {
            n = &p->nests[k];
            for (int j = 0; j < n->nouts; j++) {
                int32_t b = n->outs[j].buf;
                if (p->bufs[b].kind != BUF_STATE_NEW)
                    continue;
                /* in place: the output writes the state buffer; its own buffer goes */
                n->outs[j].buf = entry[p->bufs[b].index];
                p->bufs[b].kind = BUF_TEMP;
                p->bufs[b].index = -1;
                p->bufs[b].dead = true;
            }
        }
        free(inplace);
        free(bs);
        free(bnew);
    }
    free(last);
    free(entry);
    free(vs.slot);
    free(vs.v);
    free(vs.concats);
    return p->status;
}
