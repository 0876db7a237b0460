/*
 * memplan.c - the workspace. Each temporary lives from the first nest that writes it to the
 * last that reads it; temporaries of one element type whose lives do not overlap share bytes.
 * (Not of two types: C compilers' type-based alias analysis lets them move a load of a double
 * below a store of an int32_t to the same bytes, which then reads the int.) Placement is
 * greedy: largest first, each at the lowest 64-byte-aligned offset free for its whole life.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct life {
    int32_t buf;
    int32_t first, last; /* nest indexes */
    int64_t size;        /* bytes, rounded up to 64 */
} life;

static int by_size(const void *a, const void *b)
{
    const life *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->buf - y->buf;
}

int pass_memplan(plan *p)
{
    life *lives = calloc((size_t)p->nbufs + 1, sizeof *lives);
    if (!lives)
        return p->status = NEST_ERR_NOMEM;
    /* the nests of a row group (rows.c) run interleaved, row by row: a temporary that one of
     * them touches lives from the group's first nest to its last */
    int32_t *glast = malloc(((size_t)p->nnests + 1) * sizeof *glast);
    if (!glast) {
        free(lives);
        return p->status = NEST_ERR_NOMEM;
    }
    for (int32_t k = 0; k < p->nnests; k++)
        if (!p->nests[k].dead)
            glast[p->nests[k].group] = k;
    int n = 0;
    for (int32_t b = 0; b < p->nbufs; b++) {
        pbuf *pb = &p->bufs[b];
        if (pb->kind != BUF_TEMP || pb->dead || pb->row)
            continue;
        life l = {b, -1, -1, 0};
        for (int32_t k = 0; k < p->nnests; k++) {
            const nest *ne = &p->nests[k];
            if (ne->dead)
                continue;
            if (ne->pack == b) { /* a tiled product's panel lives during its nest */
                if (l.first < 0)
                    l.first = ne->group;
                if (glast[ne->group] > l.last)
                    l.last = glast[ne->group];
            }
            for (int i = 0; i < ne->nouts; i++) {
                bool reads = fx_reads(p, ne->outs[i].value, b);
                if (p->status) {
                    free(lives);
                    free(glast);
                    return p->status;
                }
                if (ne->outs[i].buf == b && l.first < 0)
                    l.first = ne->group;
                if ((reads || ne->outs[i].buf == b) && glast[ne->group] > l.last)
                    l.last = glast[ne->group];
            }
        }
        if (l.first < 0)
            continue; /* never written: never read either (the plan reads only what it wrote) */
        l.size = (pb->count * (int64_t)nest_type_size((nest_type)pb->etype) + 63) & ~(int64_t)63;
        if (l.size == 0) /* an empty temporary is still named by the code around it */
            l.size = 64;
        lives[n++] = l;
    }
    qsort(lives, (size_t)n, sizeof *lives, by_size);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        /* the lowest offset that no placed, overlapping-in-time buffer covers */
        int64_t off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int j = 0; j < i; j++) {
                const life *o = &lives[j];
                if ((o->last < lives[i].first || lives[i].last < o->first) &&
                    p->bufs[o->buf].etype == p->bufs[lives[i].buf].etype)
                    continue;
                int64_t ooff = p->bufs[o->buf].offset;
                if (off < ooff + o->size && ooff < off + lives[i].size) {
                    off = ooff + o->size;
                    moved = true;
                }
            }
        }
        p->bufs[lives[i].buf].offset = off;
        if (off + lives[i].size > total)
            total = off + lives[i].size;
    }
    p->ws_size = total;
    free(lives);
    free(glast);
    return NEST_OK;
}
