/*
 * tile.c - register tiles for matrix products.
 *
 * A contracting dot lowers to a nest over [I, K, J] (after flatten: rows of the result, the
 * contracted axis, columns) that folds sum_k A[i,k] * B[k,j]. Computed element by element it
 * reloads B from memory for every row. Tiled, the nest keeps a TI x TJ block of the result in
 * registers while k runs, reads B from a packed panel (TJ columns, contiguous, built once per
 * column block and reused by every row block), and reads each A[i,k] once per TJ columns. Every
 * element is still summed in k order, so the result is the same as the untiled nest's.
 *
 * The element-wise nest that follows and reads the product exactly where it is written (a bias
 * and a ReLU) is absorbed: it runs on the tile as it leaves the registers, and the product is
 * stored only if something else reads it.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
static int host_vector_bytes(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 64 : __builtin_cpu_supports("avx2") ? 32 : 16;
}
#else
static int host_vector_bytes(void) { return 16; }
#endif

int tile_vector_bytes(const nest_options *o)
{
    const char *m = o->march ? o->march : "native";
    if (strcmp(m, "native") == 0)
        return host_vector_bytes();
    if (strcmp(m, "x86-64") == 0 || strcmp(m, "x86-64-v2") == 0)
        return 16;
    if (strstr(m, "avx512") || strcmp(m, "x86-64-v4") == 0 || strstr(m, "sapphirerapids") ||
        strstr(m, "icelake") || strstr(m, "skylake-avx512") || strstr(m, "znver4"))
        return 64;
    return 32;
}

typedef struct indep {
    int axis;
    bool ok;
} indep;

/* Every load of the expression ignores `axis` (stride 0). */
static void ignores_axis(fx *e, void *ctx)
{
    indep *d = ctx;
    if (e->kind == FX_LOAD && e->st[d->axis] != 0)
        d->ok = false;
    if (e->kind == FX_CONCAT)
        d->ok = false;
}

static bool ignores(plan *p, fx *e, int axis)
{
    indep d = {axis, true};
    return fx_walk(p, &e, 1, ignores_axis, &d) && d.ok;
}

/* Splits value = A * B into the factor that ignores the columns (a plain load) and the one that
 * ignores the rows; false unless the product has that form. */
static bool factors(plan *p, fx *v, fx **a, fx **b)
{
    if (v->kind != FX_OP || v->op != OP_MULTIPLY)
        return false;
    for (int s = 0; s < 2; s++) {
        fx *x = v->args[s], *y = v->args[1 - s];
        if (x->kind == FX_LOAD && ignores(p, x, 2) && ignores(p, y, 0)) {
            *a = x;
            *b = y;
            return true;
        }
    }
    return false;
}

static void find_concat(fx *e, void *ctx)
{
    if (e->kind == FX_CONCAT)
        *(bool *)ctx = true;
}

/* The element-wise nest right after n, if it reads n's product only where n writes it and its
 * space is n's [I, J]: its outputs, lifted into n's [I, K, J] space, join n. */
static bool absorb(plan *p, int32_t k)
{
    nest *n = &p->nests[k];
    int32_t e = k + 1;
    while (e < p->nnests && p->nests[e].dead)
        e++;
    if (e >= p->nnests)
        return true;
    nest *ep = &p->nests[e];
    const nout *prod = &n->outs[0];
    int64_t ij[2] = {n->dims[0], n->dims[2]};
    if (ep->reduced || ep->rowed || ep->tile_i || ep->win || ep->rank < 1 || ep->rank > 2 ||
        ep->dims[0] * (ep->rank == 2 ? ep->dims[1] : 1) != ij[0] * ij[1] ||
        (ep->rank == 2 && (ep->dims[0] != ij[0] || ep->dims[1] != ij[1])))
        return true;
    /* lift each output: a flat space splits back into [I, J], then K gets stride 0 */
    int64_t in_shape[1] = {ij[0] * ij[1]};
    nout lifted[ep->nouts];
    for (int i = 0; i < ep->nouts; i++) {
        const nout *o = &ep->outs[i];
        fx *v = o->value;
        int64_t st2[2];
        if (ep->rank == 1) {
            v = fx_reshape(p, v, 1, in_shape, 2, ij);
            st2[0] = o->st[0] * ij[1];
            st2[1] = o->st[0];
        } else {
            st2[0] = o->st[0];
            st2[1] = o->st[1];
        }
        fx *v3 = v ? fx_broadcast(p, v, 3, 1u << 1) : NULL;
        int64_t *st3 = arena_array(p->a, 3, sizeof *st3);
        if (!v3 || !st3)
            return p->status == NEST_OK; /* not expressible: leave it */
        /* the tile's store runs whole blocks: it cannot split at a concat's boundaries */
        bool cat = false;
        if (!fx_walk(p, &v3, 1, find_concat, &cat))
            return false;
        if (cat)
            return true;
        st3[0] = st2[0];
        st3[1] = 0;
        st3[2] = st2[1];
        lifted[i] = (nout){o->buf, o->off, st3, v3, -1, o->node, false};
    }
    /* it may read the product only where the product is written: with that view (one node,
     * expressions being hash-consed) replaced, no read of the product's buffer may remain */
    fx *view = fx_load(p, prod->buf, prod->off, 3, prod->st, -1);
    fx *zero = fx_imm(p, prod->value->etype, 0, 0);
    if (!view || !zero)
        return false;
    for (int i = 0; i < ep->nouts; i++) {
        fx *r = fx_substitute(p, lifted[i].value, view, zero);
        if (!r)
            return p->status == NEST_OK;
        if (fx_reads(p, r, prod->buf))
            return true;
    }
    nout *outs = arena_array(p->a, (size_t)(n->nouts + ep->nouts), sizeof *outs);
    int32_t *nodes = arena_array(p->a, (size_t)(n->nnodes + ep->nnodes) + 1, sizeof *nodes);
    if (!outs || !nodes)
        return false;
    memcpy(outs, n->outs, (size_t)n->nouts * sizeof *outs);
    memcpy(outs + n->nouts, lifted, (size_t)ep->nouts * sizeof *outs);
    memcpy(nodes, n->nodes, (size_t)n->nnodes * sizeof *nodes);
    memcpy(nodes + n->nnodes, ep->nodes, (size_t)ep->nnodes * sizeof *nodes);
    n->outs = outs;
    n->nouts += ep->nouts;
    n->nodes = nodes;
    n->nnodes += ep->nnodes;
    ep->dead = true;
    /* the product itself is stored only if a nest other than this one reads it */
    bool read = p->bufs[prod->buf].kind != BUF_TEMP;
    for (int32_t j = 0; j < p->nnests && !read; j++)
        for (int i = 0; j != k && !p->nests[j].dead && i < p->nests[j].nouts && !read; i++)
            read = fx_reads(p, p->nests[j].outs[i].value, prod->buf);
    if (!read) {
        n->outs[0].drop = true;
        p->bufs[prod->buf].dead = true;
    }
    return true;
}

void tile_shape(int etype, int vector_bytes, int *ti, int *tj)
{
    /* 16 vector accumulators with 512-bit vectors, 12 with narrower ones */
    int lanes = vector_bytes / (int)nest_type_size((nest_type)etype);
    *ti = vector_bytes >= 64 ? 4 : 6;
    *tj = vector_bytes >= 64 ? 4 * lanes : 2 * lanes;
}

static bool tile_nest(plan *p, int32_t k, int vbytes)
{
    nest *n = &p->nests[k];
    if (!n->dot || n->dead || n->rowed || n->rank != 3 || n->reduced != (1u << 1) ||
        n->nouts != 1)
        return true;
    const nout *o = &n->outs[0];
    int et = o->value->etype;
    fx *a, *b;
    if ((et != NEST_F32 && et != NEST_F64) || o->reduce != OP_SUM || o->st[1] != 0 ||
        o->st[2] != 1 || n->dims[0] < 2 || n->dims[2] < 16 || !factors(p, o->value, &a, &b))
        return !p->status;
    n->tile_a = a;
    n->tile_b = b;
    n->a_first = o->value->args[0] == a;
    n->tile_vb = vbytes >= 64 ? 64 : vbytes >= 32 ? 32 : 16;
    tile_shape(et, n->tile_vb, &n->tile_i, &n->tile_j);
    n->pack = plan_buffer(p, BUF_TEMP, -1, o->node, et, n->dims[1] * n->tile_j);
    if (n->pack < 0)
        return false;
    return absorb(p, k);
}

int pass_tile(plan *p)
{
    int vbytes = tile_vector_bytes(p->opts);
    for (int32_t k = 0; k < p->nnests; k++) {
        if (!p->nests[k].win)
            p->nests[k].pack = -1; /* a convolution's is its copy of the input (conv.c) */
        if (!p->opts->fuse)
            continue; /* --no-fuse shows the plain nests */
        if (!tile_nest(p, k, vbytes)) {
            if (!p->status)
                p->status = NEST_ERR_NOMEM;
            return p->status;
        }
    }
    return p->status;
}
