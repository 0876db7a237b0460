/*
 * flatten.c - loop order and flattening of each nest.
 *
 * The axes are ordered so that the one with the smallest strides (stores weigh twice) runs
 * innermost; then adjacent axes whose strides agree for every access (outer stride = inner
 * stride x inner extent) merge into one, and axes of extent 1 disappear. An element-wise op
 * over contiguous [64,128,32] tensors becomes one loop of 262144.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct scan {
    int rank;
    int64_t weight[NEST_MAX_RANK + 1];
    uint32_t concat_axes;
    /* every load's strides, to test merges */
    const int64_t **st;
    size_t n, cap;
    bool oom;
} scan;

static void add_strides(scan *s, const int64_t *st, int w)
{
    for (int k = 0; k < s->rank; k++)
        s->weight[k] += w * (st[k] < 0 ? -st[k] : st[k]);
    const int64_t **q = grow_array(s->st, &s->cap, s->n, sizeof *q);
    if (!q) {
        s->oom = true;
        return;
    }
    s->st = q;
    s->st[s->n++] = st;
}

static void visit(fx *e, void *ctx)
{
    scan *s = ctx;
    if (e->kind == FX_LOAD)
        add_strides(s, e->st, 1);
    else if (e->kind == FX_CONCAT)
        s->concat_axes |= 1u << e->axis;
}

static bool scan_nest(plan *p, const nest *n, scan *s)
{
    memset(s, 0, sizeof *s);
    s->rank = n->rank;
    for (int i = 0; i < n->nouts; i++) {
        add_strides(s, n->outs[i].st, 2);
        if (!fx_visit(p, &n->outs[i].value, 1, NULL, visit, s))
            return false;
    }
    return !s->oom;
}

/* Puts the heaviest axes outside: stable, so equal weights keep the graph's order. */
static bool reorder(plan *p, nest *n)
{
    scan s;
    bool ok = scan_nest(p, n, &s);
    uint8_t order[NEST_MAX_RANK];
    for (int k = 0; k < n->rank; k++)
        order[k] = (uint8_t)k;
    int fixed = n->rowed ? 1 : 0; /* a row group's shared axis stays outermost */
    if (nest_has_arg(n))
        fixed = n->rank; /* an argmax's index is its innermost loop's variable */
    for (int i = fixed + 1; ok && i < n->rank; i++)
        for (int j = i; j > fixed && s.weight[order[j - 1]] < s.weight[order[j]]; j--) {
            uint8_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    /* a batch of products runs product by product: its batch axes (which every operand and
     * the result step along) outside the rest, whatever their strides. PyTorch's attention
     * keeps the heads' rows 64 floats apart ([S,B*H,D]): by strides alone, the sum over the
     * keys went outermost, through the whole batch of results for each key. */
    uint32_t batch = 0;
    for (int k = 0; ok && n->dot && n->rank >= 4 && k < n->rank; k++) {
        bool all = !(n->reduced & (1u << k));
        for (size_t i = 0; i < s.n && all; i++)
            all = s.st[i][k] != 0;
        batch |= all ? 1u << k : 0;
    }
    if (batch) {
        uint8_t by[NEST_MAX_RANK];
        int m = fixed;
        memcpy(by, order, (size_t)fixed);
        for (int pass = 0; pass < 2; pass++)
            for (int i = fixed; i < n->rank; i++)
                if (((batch >> order[i]) & 1u) == (pass == 0))
                    by[m++] = order[i];
        memcpy(order, by, (size_t)n->rank);
    }
    free(s.st);
    return ok && nest_permute(p, n, order);
}

bool nest_permute(plan *p, nest *n, const uint8_t *order)
{
    bool identity = true;
    for (int k = 0; k < n->rank; k++)
        identity &= order[k] == k;
    if (identity)
        return true;
    int64_t dims[NEST_MAX_RANK];
    uint32_t reduced = 0;
    for (int k = 0; k < n->rank; k++) {
        dims[k] = n->dims[order[k]];
        if (n->reduced & (1u << order[k]))
            reduced |= 1u << k;
    }
    for (int i = 0; i < n->nouts; i++) {
        nout *o = &n->outs[i];
        int64_t st[NEST_MAX_RANK];
        for (int k = 0; k < n->rank; k++)
            st[k] = o->st[order[k]];
        memcpy(o->st, st, (size_t)n->rank * sizeof *st);
        if (!(o->value = fx_permute(p, o->value, n->rank, order)))
            return false;
    }
    memcpy(n->dims, dims, (size_t)n->rank * sizeof *dims);
    n->reduced = reduced;
    return true;
}

/* Resolves concats along axes of extent 1 (one part covers the whole axis). */
static bool resolve_unit_concats(plan *p, nest *n, uint32_t concat_axes)
{
    for (int k = 0; k < n->rank; k++) {
        if (!(concat_axes & (1u << k)) || n->dims[k] != 1)
            continue;
        for (int i = 0; i < n->nouts; i++)
            if (!(n->outs[i].value = fx_select(p, n->outs[i].value, k, 0, 1)))
                return false;
    }
    return true;
}

static bool flatten_nest(plan *p, nest *n)
{
    scan s;
    if (!scan_nest(p, n, &s)) {
        free(s.st);
        return false;
    }
    if (!resolve_unit_concats(p, n, s.concat_axes)) {
        free(s.st);
        return false;
    }
    /* groups of old axes: from[g] .. from[g+1]-1 */
    int from[NEST_MAX_RANK + 1], ng = 0;
    int64_t dims[NEST_MAX_RANK];
    uint32_t reduced = 0;
    int prev = -1; /* the last kept axis */
    for (int k = 0; k < n->rank; k++) {
        if (n->dims[k] == 1 && !(n->rowed && k == 0))
            continue;
        bool merge = prev >= 0 && !(n->rowed && prev == 0) && !((s.concat_axes >> prev) & 1) && !((s.concat_axes >> k) & 1) &&
                     ((n->reduced >> prev) & 1) == ((n->reduced >> k) & 1) && n->dims[k] > 0 &&
                     (n->dims[prev] > 0 || dim_is_sym(n->dims[prev]));
        for (size_t a = 0; merge && a < s.n; a++)
            merge = s.st[a][prev] == s.st[a][k] * n->dims[k];
        if (merge) {
            /* a symbolic outer extent merges into a product (N*256) */
            dims[ng - 1] = dim_is_sym(dims[ng - 1]) ? dim_mul(p->f, dims[ng - 1], n->dims[k])
                                                    : dims[ng - 1] * n->dims[k];
            if (dims[ng - 1] == DIM_NONE) {
                free(s.st);
                p->status = p->f->status;
                return false;
            }
        } else {
            from[ng] = k;
            dims[ng] = n->dims[k];
            if (n->reduced & (1u << k))
                reduced |= 1u << ng;
            ng++;
        }
        prev = k;
    }
    free(s.st);
    /* group g's strides are those of its innermost axis of extent > 1 */
    int last[NEST_MAX_RANK + 1], rg[NEST_MAX_RANK + 1];
    rg[0] = 0;
    for (int g = 0; g < ng; g++) {
        int end = g + 1 < ng ? from[g + 1] : n->rank;
        last[g] = from[g];
        for (int k = from[g]; k < end; k++)
            if (n->dims[k] != 1)
                last[g] = k;
        rg[g + 1] = last[g] + 1;
    }
    if (ng == n->rank)
        return true; /* nothing merged or dropped */
    for (int i = 0; i < n->nouts; i++) {
        nout *o = &n->outs[i];
        int64_t st[NEST_MAX_RANK];
        for (int g = 0; g < ng; g++)
            st[g] = o->st[last[g]];
        memcpy(o->st, st, (size_t)ng * sizeof *st);
        if (!(o->value = fx_regroup(p, o->value, ng, rg)))
            return false;
    }
    memcpy(n->dims, dims, (size_t)ng * sizeof *dims);
    n->rank = ng;
    n->reduced = reduced;
    return true;
}

int pass_flatten(plan *p)
{
    for (int32_t k = 0; k < p->nnests; k++) {
        nest *n = &p->nests[k];
        if (n->dead || n->win || n->special >= 0)
            continue; /* convolutions, pools (conv.c) and special nests know their own axes */
        if (!reorder(p, n) || !flatten_nest(p, n)) {
            if (!p->status)
                p->status = NEST_ERR_NOMEM;
            return p->status;
        }
    }
    return NEST_OK;
}
