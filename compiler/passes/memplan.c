/*
 * memplan.c - the workspace. Each temporary lives from the first nest that writes it to the
 * last that reads it; temporaries of one element type whose lives do not overlap share bytes.
 * (Not of two types: C compilers' type-based alias analysis lets them move a load of a double
 * below a store of an int32_t to the same bytes, which then reads the int.)
 *
 * Placement runs through the nests in order: when a temporary's life begins it takes the lowest
 * 64-byte-aligned free range of its type's region that fits it (those beginning at one nest,
 * largest first), and its range is free again after the last nest that reads it. Each type has
 * a region of its own, one after the other in the workspace. The lives come from one walk of
 * each nest's expressions; placing costs a look through the free ranges of a region, which
 * stay few (neighbours merge when freed).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct life {
    int32_t buf;
    int32_t first, last; /* nest indexes */
    int64_t size;        /* bytes, rounded up to 64 */
    int64_t off;         /* in its type's region */
} life;

/* The free ranges of one region, sorted by offset, and its top (every byte above is free). */
typedef struct region {
    struct range {
        int64_t off, size;
    } *free;
    size_t n, cap;
    int64_t top;
    bool oom;
} region;

/* The lowest offset of the region where size bytes are free; they are taken. */
static int64_t take(region *r, int64_t size)
{
    for (size_t i = 0; i < r->n; i++) {
        struct range *f = &r->free[i];
        if (f->size < size)
            continue;
        int64_t off = f->off;
        f->off += size;
        f->size -= size;
        if (f->size == 0) {
            memmove(f, f + 1, (r->n - i - 1) * sizeof *f);
            r->n--;
        }
        return off;
    }
    /* at the top, with the free range just below it if there is one */
    if (r->n > 0 && r->free[r->n - 1].off + r->free[r->n - 1].size == r->top) {
        int64_t off = r->free[--r->n].off;
        r->top = off + size;
        return off;
    }
    int64_t off = r->top;
    r->top += size;
    return off;
}

/* Gives [off, off + size) back, merged with its free neighbours (or into the top). */
static void give(region *r, int64_t off, int64_t size)
{
    size_t i = 0, lo = 0, hi = r->n;
    while (lo < hi) { /* the first free range above off */
        size_t mid = (lo + hi) / 2;
        if (r->free[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    i = lo;
    bool below = i > 0 && r->free[i - 1].off + r->free[i - 1].size == off;
    bool above = i < r->n && off + size == r->free[i].off;
    if (below && above) {
        r->free[i - 1].size += size + r->free[i].size;
        memmove(&r->free[i], &r->free[i + 1], (r->n - i - 1) * sizeof *r->free);
        r->n--;
    } else if (below) {
        r->free[i - 1].size += size;
    } else if (above) {
        r->free[i].off = off;
        r->free[i].size += size;
    } else {
        struct range *v = grow_array(r->free, &r->cap, r->n, sizeof *v);
        if (!v) {
            r->oom = true;
            return;
        }
        r->free = v;
        memmove(&r->free[i + 1], &r->free[i], (r->n - i) * sizeof *r->free);
        r->free[i] = (struct range){off, size};
        r->n++;
    }
}

static int by_first(const void *a, const void *b)
{
    const life *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->buf - y->buf;
}

static int by_last(const void *a, const void *b)
{
    const life *x = *(const life *const *)a, *y = *(const life *const *)b;
    if (x->last != y->last)
        return x->last < y->last ? -1 : 1;
    return x->buf - y->buf;
}

int pass_memplan(plan *p)
{
    size_t nb = (size_t)p->nbufs + 1;
    life *lives = malloc(nb * sizeof *lives);
    life **ends = malloc(nb * sizeof *ends);
    int32_t *first = malloc(nb * sizeof *first), *last = malloc(nb * sizeof *last);
    /* the nests of a row group (rows.c) run interleaved, row by row: a temporary that one of
     * them touches lives from the group's first nest to its last */
    int32_t *glast = malloc(((size_t)p->nnests + 1) * sizeof *glast);
    region regions[NEST_BOOL + 1];
    memset(regions, 0, sizeof regions);
    if (!lives || !ends || !first || !last || !glast) {
        p->status = NEST_ERR_NOMEM;
        goto out;
    }
    for (int32_t k = 0; k < p->nnests; k++)
        if (!p->nests[k].dead)
            glast[p->nests[k].group] = k;
    for (int32_t b = 0; b < p->nbufs; b++)
        first[b] = last[b] = -1;
    for (int32_t k = 0; k < p->nnests; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead)
            continue;
        int32_t g = ne->group, gl = glast[ne->group];
        if (ne->pack >= 0) { /* a tiled product's panel lives during its nest */
            if (first[ne->pack] < 0)
                first[ne->pack] = g;
            if (gl > last[ne->pack])
                last[ne->pack] = gl;
        }
        for (int i = 0; i < ne->nouts; i++) {
            int32_t b = ne->outs[i].buf;
            if (first[b] < 0)
                first[b] = g;
            if (gl > last[b])
                last[b] = gl;
        }
        int32_t *reads;
        int32_t nr = nest_loads(p, ne, &reads);
        if (nr < 0)
            goto out;
        for (int32_t j = 0; j < nr; j++)
            if (gl > last[reads[j]])
                last[reads[j]] = gl;
        free(reads);
    }
    int n = 0;
    for (int32_t b = 0; b < p->nbufs; b++) {
        pbuf *pb = &p->bufs[b];
        if (pb->kind != BUF_TEMP || pb->dead || pb->row || first[b] < 0)
            continue; /* never written: never read either (the plan reads only what it wrote) */
        if (dim_is_sym(pb->count)) { /* placed by the code at run time, after the rest */
            pb->offset = -1;
            continue;
        }
        life l = {b, first[b], last[b], 0, 0};
        l.size = (pb->count * (int64_t)nest_type_size((nest_type)pb->etype) + 63) & ~(int64_t)63;
        if (l.size == 0) /* an empty temporary is still named by the code around it */
            l.size = 64;
        lives[n++] = l;
    }
    qsort(lives, (size_t)n, sizeof *lives, by_first);
    for (int i = 0; i < n; i++)
        ends[i] = &lives[i];
    qsort(ends, (size_t)n, sizeof *ends, by_last);
    /* through the nests: free what ended before a life begins, then place it */
    int e = 0;
    for (int i = 0; i < n; i++) {
        life *l = &lives[i];
        for (; e < n && ends[e]->last < l->first; e++) /* placed: it began before it ended */
            give(&regions[p->bufs[ends[e]->buf].etype], ends[e]->off, ends[e]->size);
        l->off = take(&regions[p->bufs[l->buf].etype], l->size);
    }
    int64_t base[NEST_BOOL + 2] = {0};
    for (int t = 0; t <= NEST_BOOL; t++) {
        if (regions[t].oom)
            p->status = NEST_ERR_NOMEM;
        base[t + 1] = base[t] + regions[t].top;
    }
    for (int i = 0; i < n; i++)
        p->bufs[lives[i].buf].offset = base[p->bufs[lives[i].buf].etype] + lives[i].off;
    p->ws_size = base[NEST_BOOL + 1];
out:
    for (int t = 0; t <= NEST_BOOL; t++)
        free(regions[t].free);
    free(lives);
    free(ends);
    free(first);
    free(last);
    free(glast);
    return p->status;
}
