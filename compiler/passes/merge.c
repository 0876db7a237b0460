/*
 * merge.c - the end of fuse: nests that fuse.c lowered one by one join where they can.
 * Adjacent nests over the same space merge, values forwarded instead of read back; each nest of
 * assignments moves up to right after the nest that computes what it reads; stores nothing reads
 * any more are dropped. Split from fuse.c, which calls these after lowering.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MERGE_MAX_FOLDS 8 /* folds in one nest: each keeps a vector's worth of partial sums */

/* ---- merging adjacent nests ---- */

/* The nest others merge into, and what merging needs to know of it, kept up to date as nests
 * join it, so that each nest is looked at a bounded number of times. */
typedef struct merger {
    plan *p;
    int32_t last;      /* the nest merged into, or -1 */
    fx_map fwd;        /* its stores: the view each writes (one load node) -> the value */
    int32_t *writer;   /* per buffer: the last nest that writes it (-1) */
    int32_t *inbody;   /* per expression node (by id): the nest whose body holds it (-1) */
    size_t capbody;
    uint32_t zero;     /* axes on which one of its stores has stride 0 */
    bool folds;        /* one of its outputs folds */
    int nfolds;        /* how many */
    int64_t ops;       /* weight of its body: ops (each once) and outputs */
} merger;

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

/* The slot of e in m->inbody, or NULL when out of memory. */
static int32_t *body_slot(merger *m, const fx *e)
{
    int32_t *v = fx_id_array(m->inbody, &m->capbody, e, sizeof *v, -1);
    if (!v) {
        m->p->status = NEST_ERR_NOMEM;
        return NULL;
    }
    m->inbody = v;
    return &v[e->id];
}

typedef struct body_walk {
    merger *m;
    int64_t added;
} body_walk;

static bool outside_body(const fx *e, void *ctx)
{
    body_walk *bw = ctx;
    int32_t *s = body_slot(bw->m, e);
    return s && *s != bw->m->last;
}

static void add_to_body(fx *e, void *ctx)
{
    body_walk *bw = ctx;
    int32_t *s = body_slot(bw->m, e);
    if (s && *s != bw->m->last) {
        *s = bw->m->last;
        bw->added += fx_weight(e);
    }
}

/* Marks the nodes of the values as in the body of m->last: the weight of those not in it
 * yet (only they are walked). */
static int64_t body_take(merger *m, fx *const *vals, int n)
{
    body_walk bw = {m, 0};
    fx_visit(m->p, vals, n, outside_body, add_to_body, &bw);
    return bw.added;
}

/* Adds the outputs of nest k (already in it) to the merger's view of it. */
static bool merger_take(merger *m, const nest *k, int from)
{
    plan *p = m->p;
    for (int i = from; i < k->nouts; i++) {
        const nout *o = &k->outs[i];
        m->writer[o->buf] = m->last;
        m->ops++;
        if (o->reduce >= 0) {
            m->folds = true;
            m->nfolds++;
            continue;
        }
        for (int d = 0; d < k->rank; d++)
            if (o->st[d] == 0)
                m->zero |= 1u << d;
        fx *view = fx_load(p, o->buf, o->off, k->rank, o->st, -1);
        fx **slot = view ? fx_map_slot(p, &m->fwd, view) : NULL;
        if (!slot)
            return false;
        if (!*slot) /* the first store of a view is the one read */
            *slot = o->value;
    }
    return true;
}

/* Makes nest k the one others merge into. */
static bool merger_start(merger *m, int32_t k)
{
    const nest *n = &m->p->nests[k];
    fx_map_free(&m->fwd);
    m->last = k;
    m->zero = 0;
    m->folds = false;
    m->nfolds = 0;
    m->ops = 0;
    fx *vals[n->nouts > 0 ? n->nouts : 1];
    for (int i = 0; i < n->nouts; i++)
        vals[i] = n->outs[i].value;
    m->ops = body_take(m, vals, n->nouts);
    return merger_take(m, n, 0) && !m->p->status;
}

/* Whether nest b may join m->last, a just before b: into vals, b's values as they read in a
 * (a's stores forwarded). Both run over the same dims; stores may join a reduction when they
 * write a distinct element at every step of its folded axes. b reads a's stores only where a
 * writes them (the values are forwarded), and never a's reductions, which are ready only after
 * the whole nest; and the merged body stays within PLAN_MAX_BODY. */
static bool can_merge(merger *m, const nest *b, fx **vals)
{
    plan *p = m->p;
    const nest *a = &p->nests[m->last];
    if (a->win || b->win)
        return false; /* convolutions and pools run loops of their own */
    if (a->dot || b->dot)
        return false; /* a product of matrices keeps its nest: tile.c tiles it */
    if (a->special >= 0 || b->special >= 0)
        return false;
    if (a->rank != b->rank || memcmp(a->dims, b->dims, (size_t)a->rank * sizeof *a->dims) != 0)
        return false;
    bool a_varies = !m->folds && !(m->zero & b->reduced);
    if (a->reduced != b->reduced && !(a->reduced == 0 && a_varies) &&
        !(b->reduced == 0 && stores_vary(b, a->reduced)))
        return false;
    int folds = m->nfolds;
    for (int i = 0; i < b->nouts; i++) {
        vals[i] = b->outs[i].value;
        folds += b->outs[i].reduce >= 0;
    }
    if (folds > MERGE_MAX_FOLDS)
        return false;
    int32_t *bufs = NULL;
    int32_t nb = fx_loads(p, vals, b->nouts, &bufs);
    bool reads_a = false;
    for (int32_t i = 0; i < nb; i++)
        reads_a |= m->writer[bufs[i]] == m->last;
    free(bufs);
    if (nb < 0)
        return false;
    if (reads_a) {
        if (m->folds || !fx_forward(p, vals, b->nouts, &m->fwd))
            return false;
        nb = fx_loads(p, vals, b->nouts, &bufs);
        for (int32_t i = 0; i < nb; i++)
            if (m->writer[bufs[i]] == m->last)
                nb = -1;
        free(bufs);
        if (nb < 0)
            return false;
    }
    /* the body's weight: the new nodes of b's values, and b's outputs. They are marked in a's
     * body now: if b does not join, the next nest starts a body of its own anyway. */
    int64_t grow = body_take(m, vals, b->nouts);
    if (p->status || m->ops + grow + b->nouts > PLAN_MAX_BODY)
        return false;
    m->ops += grow;
    return true;
}

void merge_adjacent(plan *p)
{
    merger m = {.p = p, .last = -1};
    m.writer = malloc(((size_t)p->nbufs + 1) * sizeof *m.writer);
    fx **vals = NULL;
    size_t capvals = 0;
    if (!m.writer) {
        p->status = NEST_ERR_NOMEM;
        return;
    }
    for (int32_t b = 0; b < p->nbufs; b++)
        m.writer[b] = -1;
    for (int32_t k = 0; k < p->nnests && !p->status; k++) {
        nest *b = &p->nests[k];
        if ((size_t)b->nouts + 1 > capvals) {
            free(vals);
            capvals = (size_t)b->nouts + 1;
            if (!(vals = malloc(capvals * sizeof *vals))) {
                p->status = NEST_ERR_NOMEM;
                break;
            }
        }
        if (m.last >= 0 && can_merge(&m, b, vals)) {
            nest *a = &p->nests[m.last];
            int from = a->nouts;
            for (int i = 0; i < b->nouts; i++) {
                nout *o = &b->outs[i];
                if (!nest_add_out(p, a, o->buf, o->off, o->st, vals[i], o->reduce, o->node))
                    break;
            }
            a->reduced |= b->reduced;
            b->dead = true;
            if (!p->status)
                merger_take(&m, a, from);
            continue;
        }
        if (!p->status)
            merger_start(&m, k);
    }
    free(vals);
    free(m.writer);
    free(m.inbody);
    fx_map_free(&m.fwd);
}

/* The buffers each nest loads, gathered once per nest and moved with it. */
typedef struct load_cache {
    int32_t **of; /* per position: the ascending list (malloc'd) */
    int32_t *n;   /* how many, or -1: not gathered yet */
} load_cache;

/* How many buffers the nest at position k loads (their list in *out), or -1 with p->status
 * set when out of memory. */
static int32_t cached_loads(plan *p, load_cache *lc, int32_t k, const int32_t **out)
{
    if (lc->n[k] < 0)
        lc->n[k] = nest_loads(p, &p->nests[k], &lc->of[k]);
    *out = lc->of[k];
    return lc->n[k];
}

/* Whether the nest at position m reads the entry value of a state tensor marked in assigned
 * (by state index). False with p->status set when out of memory. */
static bool reads_assigned(plan *p, load_cache *lc, int32_t m, const bool *assigned)
{
    const int32_t *bufs;
    int32_t nb = cached_loads(p, lc, m, &bufs);
    for (int32_t i = 0; i < nb; i++)
        if (p->bufs[bufs[i]].kind == BUF_STATE && assigned[p->bufs[bufs[i]].index])
            return true;
    return false;
}

/* Moves each nest of assignments up to right after the last nest that writes what it reads,
 * when no nest in between reads the entry value of a tensor it assigns: an update then follows
 * the product of its gradient (tile.c runs it on the product's tiles, so the gradient is never
 * stored) and can still write in place. Each nest's loads are gathered once for the pass and
 * move with it, so a nest passed over by many updates is walked once, not once per update; what
 * is left is the scan back from each nest of assignments to its place (a few per layer of a
 * training step, each over the nests of the layers after it). */
void merge_schedule_assigns(plan *p)
{
    int32_t ns = p->f->module ? p->f->module->nstates : 0;
    if (ns == 0 || p->f->nassigns == 0 || p->nnests < 2)
        return;
    size_t nn = (size_t)p->nnests;
    load_cache lc = {calloc(nn, sizeof *lc.of), malloc(nn * sizeof *lc.n)};
    bool *assigned = calloc((size_t)ns, sizeof *assigned);
    bool *readby = calloc((size_t)p->nbufs + 1, sizeof *readby); /* the buffers a loads */
    if (!lc.of || !lc.n || !assigned || !readby) {
        p->status = NEST_ERR_NOMEM;
        goto out;
    }
    for (int32_t k = 0; k < p->nnests; k++)
        lc.n[k] = -1;
    for (int32_t k = p->nnests - 1; k > 0 && !p->status; k--) {
        nest *a = &p->nests[k];
        bool assigns = !a->dead && a->nouts > 0;
        for (int i = 0; assigns && i < a->nouts; i++)
            assigns = p->bufs[a->outs[i].buf].kind == BUF_STATE_NEW;
        if (!assigns)
            continue;
        int32_t prod = -1;
        const int32_t *reads;
        int32_t nr = cached_loads(p, &lc, k, &reads);
        if (nr < 0)
            break;
        for (int32_t i = 0; i < nr; i++)
            readby[reads[i]] = true;
        for (int i = 0; i < a->nouts; i++)
            assigned[p->bufs[a->outs[i].buf].index] = true;
        /* one scan back: the last nest that writes what a reads, unless a nest after it reads
         * the entry value of a tensor a assigns first (then a stays) */
        bool blocked = false;
        for (int32_t j = k - 1; j >= 0 && prod < 0 && !blocked; j--) {
            const nest *x = &p->nests[j];
            for (int i = 0; !x->dead && i < x->nouts && prod < 0; i++)
                if (readby[x->outs[i].buf])
                    prod = j;
            blocked = prod < 0 && !x->dead && reads_assigned(p, &lc, j, assigned);
        }
        bool ok = !blocked && prod >= 0 && prod < k - 1;
        for (int32_t i = 0; i < nr; i++)
            readby[reads[i]] = false;
        for (int i = 0; i < a->nouts; i++)
            assigned[p->bufs[a->outs[i].buf].index] = false;
        if (!ok || p->status)
            continue;
        nest moved = *a;
        int32_t *mof = lc.of[k], mn = lc.n[k];
        size_t len = (size_t)(k - prod - 1);
        memmove(&p->nests[prod + 2], &p->nests[prod + 1], len * sizeof *a);
        memmove(&lc.of[prod + 2], &lc.of[prod + 1], len * sizeof *lc.of);
        memmove(&lc.n[prod + 2], &lc.n[prod + 1], len * sizeof *lc.n);
        p->nests[prod + 1] = moved;
        lc.of[prod + 1] = mof;
        lc.n[prod + 1] = mn;
        k++; /* position k now holds the nest that was before it */
    }
out:
    for (size_t k = 0; lc.of && k < nn; k++)
        free(lc.of[k]);
    free(lc.of);
    free(lc.n);
    free(assigned);
    free(readby);
}

/* The loads of nest k's outputs that store into no dead temporary, as a new list in reads[k];
 * the buffers the old list had and the new one lacks lose a reader, and the temporaries left
 * without any go onto the worklist. */
static bool reread(plan *p, int32_t k, int32_t **reads, int32_t *nreads, int32_t *readers,
                   int32_t *work, int32_t *nwork)
{
    const nest *n = &p->nests[k];
    fx **vals = malloc(((size_t)n->nouts + 1) * sizeof *vals);
    if (!vals)
        return false;
    int nv = 0;
    for (int i = 0; i < n->nouts; i++)
        if (!(p->bufs[n->outs[i].buf].kind == BUF_TEMP && p->bufs[n->outs[i].buf].dead))
            vals[nv++] = n->outs[i].value;
    int32_t *now;
    int32_t nn = fx_loads(p, vals, nv, &now);
    free(vals);
    if (nn < 0)
        return false;
    for (int32_t i = 0, j = 0; i < nreads[k]; i++) { /* both ascend */
        int32_t b = reads[k][i];
        while (j < nn && now[j] < b)
            j++;
        if (j < nn && now[j] == b)
            continue;
        if (--readers[b] == 0 && p->bufs[b].kind == BUF_TEMP && !p->bufs[b].dead)
            work[(*nwork)++] = b;
    }
    free(reads[k]);
    reads[k] = now;
    nreads[k] = nn;
    return true;
}

/* Drops stores into temporaries that no nest reads any more: per buffer, a count of the nests
 * reading it, and a worklist of the temporaries nobody reads. Dropping a store may leave the
 * buffers its value read unread in turn: the nest's loads are taken again. */
void merge_drop_dead_stores(plan *p)
{
    size_t nb = (size_t)p->nbufs + 1, nn = (size_t)p->nnests + 1;
    int32_t *readers = calloc(nb, sizeof *readers), *work = malloc(nb * sizeof *work);
    int32_t **reads = calloc(nn, sizeof *reads), *nreads = calloc(nn, sizeof *nreads);
    int32_t *writers = calloc(nb + 1, sizeof *writers); /* CSR: per buffer, the nests writing */
    int32_t *wnest = NULL, nwork = 0;
    if (!readers || !work || !reads || !nreads || !writers)
        goto oom;
    int64_t total = 0;
    for (int32_t k = 0; k < p->nnests; k++) {
        const nest *n = &p->nests[k];
        if (n->dead)
            continue;
        nreads[k] = nest_loads(p, n, &reads[k]);
        if (nreads[k] < 0)
            goto oom;
        for (int32_t j = 0; j < nreads[k]; j++)
            readers[reads[k][j]]++;
        /* a special nest's scratch, and every output of one (it writes them all, read or not),
         * stay: such a nest never dies here */
        if (n->pack >= 0)
            readers[n->pack]++;
        for (int i = 0; n->special >= 0 && i < n->nouts; i++)
            readers[n->outs[i].buf]++;
        for (int i = 0; i < n->nouts; i++, total++)
            writers[n->outs[i].buf + 1]++;
    }
    for (int32_t b = 0; b < p->nbufs; b++)
        writers[b + 1] += writers[b];
    if (!(wnest = malloc(((size_t)total + 1) * sizeof *wnest)))
        goto oom;
    for (int32_t k = 0; k < p->nnests; k++)
        for (int i = 0; !p->nests[k].dead && i < p->nests[k].nouts; i++)
            wnest[writers[p->nests[k].outs[i].buf]++] = k;
    for (int32_t b = p->nbufs; b > 0; b--) /* back to the starts */
        writers[b] = writers[b - 1];
    writers[0] = 0;
    for (int32_t b = 0; b < p->nbufs; b++)
        if (p->bufs[b].kind == BUF_TEMP && !p->bufs[b].dead && readers[b] == 0)
            work[nwork++] = b;
    while (nwork > 0) {
        int32_t b = work[--nwork];
        p->bufs[b].dead = true;
        for (int32_t w = writers[b]; w < writers[b + 1]; w++)
            if ((w == writers[b] || wnest[w] != wnest[w - 1]) &&
                !reread(p, wnest[w], reads, nreads, readers, work, &nwork))
                goto oom;
    }
    /* the stores of dead temporaries go; nests left without outputs too */
    for (int32_t k = 0; k < p->nnests; k++) {
        nest *n = &p->nests[k];
        if (n->dead)
            continue;
        int j = 0;
        for (int i = 0; i < n->nouts; i++)
            if (!(p->bufs[n->outs[i].buf].kind == BUF_TEMP && p->bufs[n->outs[i].buf].dead))
                n->outs[j++] = n->outs[i];
        n->nouts = j;
        if (j == 0)
            n->dead = true;
    }
    goto out;
oom:
    if (!p->status)
        p->status = NEST_ERR_NOMEM;
out:
    for (int32_t k = 0; reads && k < p->nnests; k++)
        free(reads[k]);
    free(reads);
    free(nreads);
    free(readers);
    free(work);
    free(writers);
    free(wnest);
}
