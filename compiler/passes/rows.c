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
    if (n->dead || n->rank < 1 || (n->reduced & 1u) || n->dims[0] < 2 || n->dot || n->win ||
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
        if (st[j] != count)
            return -1;
        count *= d[j];
    }
    return count;
}

typedef struct check {
    plan *p;
    const nest *group_first;  /* the group's nests: [first, last] in p->nests, live ones */
    const nest *group_last;
    const nest *reader;
    bool ok;
} check;

/* A load of a buffer the group writes must read the row the current iteration writes. */
static void check_load(fx *e, void *ctx)
{
    check *ck = ctx;
    if (e->kind != FX_LOAD || !ck->ok)
        return;
    for (const nest *w = ck->group_first; w <= ck->group_last; w++) {
        if (w->dead)
            continue;
        for (int i = 0; i < w->nouts; i++) {
            const nout *o = &w->outs[i];
            if (o->buf != e->buf)
                continue;
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
}

static bool can_join(plan *p, int32_t first, int32_t k)
{
    const nest *n = &p->nests[k];
    if (!eligible(p, n) || n->dims[0] != p->nests[first].dims[0])
        return false;
    check ck = {p, &p->nests[first], &p->nests[k - 1], n, true};
    for (int i = 0; i < n->nouts && ck.ok; i++)
        if (!fx_walk(p, &n->outs[i].value, 1, check_load, &ck))
            return false;
    return ck.ok;
}

/* Shrinks the temporaries that live only inside one group to a row each. */
static void contract(plan *p)
{
    for (int32_t b = 0; b < p->nbufs; b++) {
        pbuf *pb = &p->bufs[b];
        if (pb->kind != BUF_TEMP || pb->dead)
            continue;
        int32_t writer = -1;
        int64_t row = -1;
        for (int32_t k = 0; k < p->nnests && writer < 0; k++)
            for (int i = 0; !p->nests[k].dead && i < p->nests[k].nouts; i++)
                if (p->nests[k].outs[i].buf == b) {
                    writer = k;
                    row = dense_row(&p->nests[k], &p->nests[k].outs[i]);
                }
        if (writer < 0 || row <= 0 || !p->nests[writer].rowed ||
            row * (int64_t)nest_type_size((nest_type)pb->etype) > ROW_MAX_BYTES)
            continue;
        int32_t g = p->nests[writer].group;
        bool inside = true;
        for (int32_t k = 0; k < p->nnests && inside; k++) {
            const nest *n = &p->nests[k];
            if (n->dead || n->group == g)
                continue;
            for (int i = 0; i < n->nouts && inside; i++)
                inside = !fx_reads(p, n->outs[i].value, b) && n->outs[i].buf != b;
        }
        if (inside)
            pb->row = row;
    }
}

int pass_rows(plan *p)
{
    int32_t first = -1;
    for (int32_t k = 0; k < p->nnests; k++)
        p->nests[k].group = k;
    if (!p->opts->fuse)
        return NEST_OK; /* --no-fuse: every op in a nest of its own, no loop shared */
    for (int32_t k = 0; k < p->nnests; k++) {
        nest *n = &p->nests[k];
        if (n->dead)
            continue;
        if (first >= 0 && can_join(p, first, k)) {
            n->group = first;
            n->rowed = p->nests[first].rowed = true;
            continue;
        }
        if (p->status)
            return p->status;
        first = eligible(p, n) ? k : -1;
    }
    contract(p);
    return p->status;
}
