/*
 * prepack.c - constants packed ahead of time.
 *
 * Two kinds of nests pack an operand into panels on every call: a convolution with output
 * channels in the vectors packs its filters (conv.c, emit_conv.c), and a tiled product packs
 * its second factor (tile.c, emit_tile.c). When that operand is a constant of the graph (an
 * ONNX model's weights) that no other nest reads, the constant itself is stored as the panels:
 * its buffer gets a const_pack, the nest reads the panels from it, and the call packs nothing.
 * The data are packed where they are given: the AOT file's tables (emit_c.c), the linked data
 * of nest_build_so and the JIT's copies (driver.c, through pipeline_const_data).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int64_t const_pack_count(const const_pack *pk)
{
    switch (pk->kind) {
    case CONST_PACK_CONV: return pk->G * pk->kpad * pk->ct;
    case CONST_PACK_PANELS: return (pk->J + pk->tj - 1) / pk->tj * pk->K * pk->tj;
    default: return 0;
    }
}

/* The filters [K, C/G, f..] as panels: per group and tile of tj output channels, [ct][tj]. */
static void pack_conv(const const_pack *pk, size_t esize, const char *s, char *d)
{
    int64_t kg = pk->K / pk->G, kt = pk->kpad / pk->tj;
    for (int64_t gb = 0; gb < pk->G * kt; gb++) { /* a panel: group gb / kt, its tile gb % kt */
        int64_t k0 = gb % kt * pk->tj, rows = kg - k0 < pk->tj ? kg - k0 : pk->tj;
        const char *from = s + (size_t)((gb / kt * kg + k0) * pk->ct) * esize;
        char *to = d + (size_t)(gb * pk->ct * pk->tj) * esize;
        for (int64_t e = 0; e < pk->ct; e++)
            for (int64_t j = 0; j < pk->tj; j++) {
                char *at = to + (size_t)(e * pk->tj + j) * esize;
                if (j < rows)
                    memcpy(at, from + (size_t)(j * pk->ct + e) * esize, esize);
                else
                    memset(at, 0, esize);
            }
    }
}

/* A K x J view as panels: per block of tj columns, [K][tj]. */
static void pack_panels(const const_pack *pk, size_t esize, const char *s, char *d)
{
    for (int64_t j0 = 0; j0 < pk->J; j0 += pk->tj)
        for (int64_t k = 0; k < pk->K; k++)
            for (int64_t jj = 0; jj < pk->tj; jj++, d += esize) {
                if (j0 + jj < pk->J)
                    memcpy(d, s + (size_t)(pk->off + k * pk->stk + (j0 + jj) * pk->stj) * esize,
                           esize);
                else
                    memset(d, 0, esize);
            }
}

void const_pack_data(const const_pack *pk, size_t esize, const void *src, void *dst)
{
    if (pk->kind == CONST_PACK_CONV)
        pack_conv(pk, esize, src, dst);
    else if (pk->kind == CONST_PACK_PANELS)
        pack_panels(pk, esize, src, dst);
}

void *const_pack_copy(const const_pack *pk, size_t esize, const void *src)
{
    void *dst = malloc((size_t)const_pack_count(pk) * esize + 1);
    if (dst)
        const_pack_data(pk, esize, src, dst);
    return dst;
}

void const_pack_describe(buf *b, const char *name, const const_pack *pk)
{
    if (pk->kind == CONST_PACK_CONV)
        buf_printf(b, "/* %s packed for its convolution: per group and %lld output channels, "
                      "[%lld: input channel x tap][%lld] */\n",
                   name, (long long)pk->tj, (long long)pk->ct, (long long)pk->tj);
    else if (pk->kind == CONST_PACK_PANELS)
        buf_printf(b, "/* %s packed for its product: per block of %lld columns, [%lld][%lld] */\n",
                   name, (long long)pk->tj, (long long)pk->K, (long long)pk->tj);
}

bool prepack_whole(const plan *p, int32_t b, int64_t off)
{
    const pbuf *pb = &p->bufs[b];
    return pb->kind == BUF_CONST && !pb->pack && off == 0 &&
           pb->count == ir_count(&p->f->nodes[pb->node]);
}

/* Whether buffer b is a constant, not packed yet, that nest ne alone reads. */
static bool alone_reads(const plan *p, int32_t b, const int32_t *readers)
{
    const pbuf *pb = &p->bufs[b];
    return pb->kind == BUF_CONST && !pb->pack && readers[b] == 1;
}

/* Gives constant buffer b the packing pk. */
static bool set_pack(plan *p, int32_t b, const const_pack *pk)
{
    const_pack *at = arena_alloc(p->a, sizeof *at);
    if (!at) {
        p->status = NEST_ERR_NOMEM;
        return false;
    }
    *at = *pk;
    p->bufs[b].pack = at;
    p->bufs[b].count = const_pack_count(at);
    return true;
}

bool prepack_conv(plan *p, nest *ne, const int32_t *readers)
{
    wplan *w = ne->win;
    if (!w->by_channels || !prepack_whole(p, w->wbuf, w->woff) ||
        !alone_reads(p, w->wbuf, readers) || fx_reads(p, w->x, w->wbuf))
        return p->status == NEST_OK;
    const_pack pk = {.kind = CONST_PACK_CONV, .tj = (int64_t)w->nv * w->lanes, .K = w->K,
                     .G = w->G, .ct = w->C / w->G * w->taps, .kpad = w->kpad};
    if (!set_pack(p, w->wbuf, &pk))
        return false;
    w->prepacked = true;
    return true;
}

bool prepack_panels(plan *p, nest *n, const int32_t *readers)
{
    const fx *b = n->tile_b;
    int r = n->rank, nb = r - 3;
    int64_t I = n->dims[nb], K = n->dims[nb + 1], J = n->dims[nb + 2];
    if (!fx_is_view(b) || !alone_reads(p, b->buf, readers) ||
        b->etype != n->outs[0].value->etype || dim_is_sym(I) || dim_is_sym(K) ||
        dim_is_sym(J) || fx_reads(p, n->tile_a, b->buf))
        return false;
    for (int d = 0; d < nb; d++)
        if (b->st[d] != 0) /* the same panels for every product of the batch */
            return false;
    const_pack pk = {.kind = CONST_PACK_PANELS, .tj = n->tile_j, .off = b->off,
                     .stk = b->st[nb + 1], .stj = b->st[nb + 2], .K = K, .J = J};
    /* at most a block of padding more than the constant: a view that repeats it (a broadcast,
     * stride 0) would store K x J elements for a few, where a call packs K x tj at a time */
    if (const_pack_count(&pk) > p->bufs[b->buf].count + K * n->tile_j)
        return false;
    if (!set_pack(p, b->buf, &pk))
        return false;
    n->b_packed = true;
    return true;
}
