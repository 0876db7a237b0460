/*
 * rows.c - outer-loop fusion of nests that proceed row by row.
 *
 * Consecutive nests whose outermost axis is kept and has the same extent, and which read each
 * other's outputs only within the same row, run under one loop over the rows: row i of every
 * nest is computed before row i + 1 of any. A row softmax (max of a row, exp and its sum, the
 * division) then reads its input once while the row is in cache. A temporary written and read
 * only inside such a group shrinks to one row, a local array of the loop body (one per thread),
 * and never reaches memory.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Rows of at most this many bytes shrink into local arrays. */
#define ROW_MAX_BYTES (64 * 1024)

/* A nest may share its outer loop unless it folds that axis or splits it at concat
 * boundaries (the emitter splits a nest's own loops, never a group's shared one). */
static bool eligible(plan *p, const nest *n)
{
    /* rank 1 too: a per-row scalar step (a mean, 1/sqrt of a variance) joins its row */
    /* symbolic rows (N) share their loop too: its bound is the dim */
    if (n->dead || n->rank < 1 || (n->reduced & 1u) || (n->dims[0] < 2 && !dim_is_sym(n->dims[0])) ||
        n->dot || n->win ||
        n->special >= 0)
        return false; /* products of matrices, convolutions and pools have loops of their own */
    for (int k = 1; k < n->rank; k++)
        if (n->dims[k] == 0)
            return false; /* no iterations: nothing to share (and no temporaries to declare) */
    fx *vals[n->nouts > 0 ? n->nouts : 1];
    for (int i = 0; i < n->nouts; i++)
        vals[i] = n->outs[i].value;
    return !fx_has_concat(p, vals, n->nouts, 0);
}

/* The number of elements a store writes in one row (axes 1.. with a nonzero stride), if they
 * are exactly the addresses off + 0 .. count-1 (a dense row); else -1. */
static int64_t dense_row(const nest *n, const nout *o)
{
    int64_t st[NEST_MAX_RANK], d[NEST_MAX_RANK];
    int m = 0;
    for (int k = 1; k < n->rank; k++) {
        if (o->st[k] == 0 || n->dims[k] == 1)
            continue;
        if (n->dims[k] == 0)
            return 0;
        /* insert sorted by stride */
        int j = m++;
        while (j > 0 && st[j - 1] > o->st[k]) {
            st[j] = st[j - 1];
            d[j] = d[j - 1];
            j--;
        }
        st[j] = o->st[k];
        d[j] = n->dims[k];
    }
    int64_t count = 1;
    for (int j = 0; j < m; j++) {
        if (st[j] != count || dim_is_sym(d[j]))
            return -1;
        count *= d[j];
    }
    return count;
}

/* The outputs the nests of the group being built write, by buffer: a list per buffer, valid
 * for the buffers whose stamp is the group's first nest. */
typedef struct group_writes {
    int32_t *head;  /* per buffer: its first entry, or -1 */
    int32_t *stamp; /* per buffer: the group whose list head[] is */
    struct gw_entry {
        const nest *w;
        const nout *o;
        int32_t next;
    } *e;
    size_t n, cap;
} group_writes;

static bool gw_add(plan *p, group_writes *gw, int32_t first, const nest *w)
{
    for (int i = 0; i < w->nouts; i++) {
        int32_t b = w->outs[i].buf;
        struct gw_entry *e = grow_array(gw->e, &gw->cap, gw->n, sizeof *e);
        if (!e) {
            p->status = NEST_ERR_NOMEM;
            return false;
        }
        gw->e = e;
        if (gw->stamp[b] != first) {
            gw->stamp[b] = first;
            gw->head[b] = -1;
        }
        gw->e[gw->n] = (struct gw_entry){w, &w->outs[i], gw->head[b]};
        gw->head[b] = (int32_t)gw->n++;
    }
    return true;
}

typedef struct check {
    const group_writes *gw;
    int32_t first;            /* the group's first nest */
    const nest *reader;
    bool ok;
} check;

/* A load of a buffer the group writes must read the row the current iteration writes. */
static void check_load(fx *e, void *ctx)
{
    check *ck = ctx;
    if (e->kind != FX_LOAD || e->buf == FX_IOTA || !ck->ok || ck->gw->stamp[e->buf] != ck->first)
        return;
    for (int32_t x = ck->gw->head[e->buf]; x >= 0; x = ck->gw->e[x].next) {
        const nest *w = ck->gw->e[x].w;
        const nout *o = ck->gw->e[x].o;
        int64_t row = dense_row(w, o);
        /* a gathered read may land in any row */
        if (row < 0 || o->st[0] <= 0 || e->st[0] != o->st[0] || e->nargs) {
            ck->ok = false;
            return;
        }
        /* the read's addresses within the row, relative to the row's start */
        int64_t lo = e->off - o->off, hi = lo;
        for (int k = 1; k < ck->reader->rank; k++) {
            if (ck->reader->dims[k] == 0)
                return; /* reads nothing */
            if (e->st[k] < 0) /* read backwards (reverse) */
                lo += (ck->reader->dims[k] - 1) * e->st[k];
            else
                hi += (ck->reader->dims[k] - 1) * e->st[k];
        }
        if (lo < 0 || hi >= row)
            ck->ok = false;
    }
}

static bool can_join(plan *p, const group_writes *gw, int32_t first, int32_t k, int64_t *weight)
{
    const nest *n = &p->nests[k];
    if (!eligible(p, n) || n->dims[0] != p->nests[first].dims[0])
        return false;
    int64_t w = nest_weight(p, n);
    if (*weight + w > PLAN_MAX_BODY) /* the group's loop body would grow too large */
        return false;
    check ck = {gw, first, n, true};
    if (!nest_visit(p, n, check_load, &ck) || !ck.ok)
        return false;
    *weight += w;
    return true;
}

/* Shrinks the temporaries that live only inside one group to a row each: those whose first
 * writer is in a row group and that no nest outside that group reads or writes. */
static void contract(plan *p)
{
    int32_t *writer = malloc(((size_t)p->nbufs + 1) * sizeof *writer);
    int32_t *wout = malloc(((size_t)p->nbufs + 1) * sizeof *wout);
    int32_t *group = malloc(((size_t)p->nbufs + 1) * sizeof *group); /* -2: several */
    if (!writer || !wout || !group) {
        p->status = NEST_ERR_NOMEM;
        goto out;
    }
    for (int32_t b = 0; b < p->nbufs; b++)
        writer[b] = group[b] = -1;
    for (int32_t k = 0; k < p->nnests; k++) {
        const nest *n = &p->nests[k];
        if (n->dead)
            continue;
        int32_t *bufs;
        int32_t nb = nest_loads(p, n, &bufs);
        if (nb < 0)
            goto out;
        for (int i = 0; i < n->nouts + nb; i++) {
            int32_t b = i < n->nouts ? n->outs[i].buf : bufs[i - n->nouts];
            if (i < n->nouts && writer[b] < 0) {
                writer[b] = k;
                wout[b] = i;
            }
            group[b] = group[b] == -1 || group[b] == n->group ? n->group : -2;
        }
        free(bufs);
    }
    for (int32_t b = 0; b < p->nbufs; b++) {
        pbuf *pb = &p->bufs[b];
        if (pb->kind != BUF_TEMP || pb->dead || writer[b] < 0)
            continue;
        const nest *w = &p->nests[writer[b]];
        int64_t row = dense_row(w, &w->outs[wout[b]]);
        if (row <= 0 || !w->rowed ||
            row * (int64_t)nest_type_size((nest_type)pb->etype) > ROW_MAX_BYTES)
            continue;
        if (group[b] == w->group)
            pb->row = row;
    }
out:
    free(writer);
    free(wout);
    free(group);
}

int pass_rows(plan *p)
{
    int32_t first = -1;
    for (int32_t k = 0; k < p->nnests; k++)
        p->nests[k].group = k;
    if (!p->opts->fuse)
        return NEST_OK; /* --no-fuse: every op in a nest of its own, no loop shared */
    group_writes gw = {0};
    gw.head = malloc(((size_t)p->nbufs + 1) * sizeof *gw.head);
    gw.stamp = malloc(((size_t)p->nbufs + 1) * sizeof *gw.stamp);
    if (!gw.head || !gw.stamp) {
        p->status = NEST_ERR_NOMEM;
        goto out;
    }
    for (int32_t b = 0; b < p->nbufs; b++)
        gw.stamp[b] = -1;
    int64_t weight = 0; /* of the group's body */
    for (int32_t k = 0; k < p->nnests && !p->status; k++) {
        nest *n = &p->nests[k];
        if (n->dead)
            continue;
        if (first >= 0 && can_join(p, &gw, first, k, &weight)) {
            n->group = first;
            n->rowed = p->nests[first].rowed = true;
            gw_add(p, &gw, first, n);
            continue;
        }
        if (p->status)
            break;
        first = eligible(p, n) ? k : -1;
        if (first >= 0) {
            gw_add(p, &gw, first, n);
            weight = nest_weight(p, n);
        }
    }
    if (!p->status)
        contract(p);
out:
    free(gw.head);
    free(gw.stamp);
    free(gw.e);
    return p->status;
}
