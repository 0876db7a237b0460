/*
 * tile.c - register tiles for matrix products.
 *
 * A contracting dot lowers to a nest over [I, K, J] (after flatten: rows of the result, the
 * contracted axis, columns) that folds sum_k A[i,k] * B[k,j]; a batch_dot to one over
 * [batch..., I, K, J], whose batch axes (those flatten could not merge into I) run outermost. Computed element by element it
 * reloads B from memory for every row. Tiled, the nest keeps a TI x TJ block of the result in
 * registers while k runs, reads B from a packed panel (TJ columns, contiguous, built once per
 * column block and reused by every row block), and reads each A[i,k] once per TJ columns. Every
 * element is still summed in k order, so the result is the same as the untiled nest's. A
 * product with fewer columns than a tile's takes a thin tile (tile_thin_shape): the vectors that
 * cover its columns, and more rows. A product of few blocks of rows reads B's columns where
 * they lie instead of packing them (b_direct) when B is a plain load along them; with
 * symbolic rows that is decided at run time (b_direct_rt).
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

/* Whether a product's nest has a symbolic columns J (the emitter counts I's blocks at run
 * time, K is a bound of the k loops and of the panel, which the workspace places at run time,
 * and batch axes are bounds of the loops around the tiles; a symbolic J is not tiled yet). */
static bool symbolic(const nest *n) { return dim_is_sym(n->dims[n->rank - 1]); }

static bool ignores(plan *p, fx *e, int axis)
{
    indep d = {axis, true};
    return fx_visit(p, &e, 1, NULL, ignores_axis, &d) && d.ok;
}

/* Splits value = A * B over [batch..., I, K, J] (rank r) into the factor that ignores the
 * columns (a plain load) and the one that ignores the rows; false unless the product has that
 * form. */
static bool factors(plan *p, fx *v, int r, fx **a, fx **b)
{
    if (v->kind != FX_OP || v->op != OP_MULTIPLY)
        return false;
    for (int s = 0; s < 2; s++) {
        fx *x = v->args[s], *y = v->args[1 - s];
        if (x->kind == FX_LOAD && x->nargs == 0 && x->buf != FX_IOTA && ignores(p, x, r - 1) &&
            ignores(p, y, r - 3)) {
            *a = x;
            *b = y;
            return true;
        }
    }
    return false;
}

/* The element-wise nest right after n, if it reads n's product only where n writes it and its
 * space is n's [batch..., I, J] (a product computed transposed: [batch..., J, I], the order of
 * its result in memory, which it is then permuted from): its outputs, lifted into n's
 * [batch..., I, K, J] space, join n. `readers` counts, per buffer, the nests that read it
 * (before any absorption: only nests after a product read it, and absorbing one into its
 * product leaves the others as they are). */
static bool absorb(plan *p, int32_t k, const int32_t *readers, bool trans)
{
    nest *n = &p->nests[k];
    int32_t e = next_live_nest(p, k);
    if (e >= p->nnests)
        return true;
    nest *ep = &p->nests[e];
    const nout *prod = &n->outs[0];
    int r = n->rank, nb = r - 3;
    /* the product's own space: [batch..., I, J] */
    int64_t bij[NEST_MAX_RANK], count = 1, ecount = 1;
    for (int d = 0; d < nb; d++)
        bij[d] = n->dims[d];
    bij[nb] = n->dims[nb];
    bij[nb + 1] = n->dims[nb + 2];
    for (int d = 0; d < nb + 2; d++) /* N*J when the rows are symbolic */
        count = dim_mul(p->f, count, bij[d]);
    for (int d = 0; d < ep->rank; d++)
        ecount = dim_mul(p->f, ecount, ep->dims[d]);
    if (count == DIM_NONE || ecount == DIM_NONE) {
        p->status = p->f->status;
        return false;
    }
    if (ep->reduced || ep->rowed || ep->tile_i || ep->rank < 1 || ecount != count ||
        nest_has_arg(ep) || ep->special >= 0 || ep->win)
        return true;
    /* lift each output: its space regroups into [batch..., I, J] (a flat one splits), then K
     * gets stride 0 */
    nout lifted[ep->nouts];
    int64_t mem[NEST_MAX_RANK]; /* the result's order in memory */
    uint8_t swap[NEST_MAX_RANK];
    for (int d = 0; d < nb + 2; d++) {
        mem[d] = bij[d];
        swap[d] = (uint8_t)d;
    }
    if (trans) {
        mem[nb] = bij[nb + 1];
        mem[nb + 1] = bij[nb];
        swap[nb] = (uint8_t)(nb + 1);
        swap[nb + 1] = (uint8_t)nb;
    }
    for (int i = 0; i < ep->nouts; i++) {
        const nout *o = &ep->outs[i];
        fx *v = fx_reshape(p, o->value, ep->rank, ep->dims, nb + 2, mem);
        fx *ov = fx_load(p, o->buf, o->off, ep->rank, o->st, -1);
        fx *os = ov ? fx_reshape(p, ov, ep->rank, ep->dims, nb + 2, mem) : NULL;
        if (trans) {
            v = v ? fx_permute(p, v, nb + 2, swap) : NULL;
            os = os ? fx_permute(p, os, nb + 2, swap) : NULL;
        }
        fx *v3 = v ? fx_broadcast(p, v, r, 1u << (nb + 1)) : NULL;
        int64_t *st3 = arena_array(p->a, (size_t)r, sizeof *st3);
        if (!v3 || !os || !st3)
            return p->status == NEST_OK; /* not expressible: leave it */
        /* the tile's store runs whole blocks: it cannot split at a concat's boundaries */
        if (fx_has_concat(p, &v3, 1, -1))
            return p->status == NEST_OK;
        for (int d = 0; d <= nb; d++)
            st3[d] = os->st[d];
        st3[nb + 1] = 0;
        st3[nb + 2] = os->st[nb + 1];
        lifted[i] = (nout){o->buf, o->off, st3, v3, -1, o->node, false};
    }
    /* it may read the product only where the product is written */
    fx *vals[ep->nouts];
    for (int i = 0; i < ep->nouts; i++)
        vals[i] = lifted[i].value;
    if (!reads_only_view(p, prod, r, vals, ep->nouts))
        return p->status == NEST_OK;
    return nest_absorb(p, k, e, lifted, readers);
}

void tile_shape(int etype, int vector_bytes, int *ti, int *tj)
{
    /* 16 vector accumulators with 512-bit vectors, 12 with narrower ones */
    int lanes = vector_bytes / (int)nest_type_size((nest_type)etype);
    *ti = vector_bytes >= 64 ? 4 : 6;
    *tj = tile_vectors(etype, vector_bytes) * lanes;
}

int tile_vectors(int etype, int vector_bytes)
{
    (void)etype;
    return vector_bytes >= 64 ? 4 : 2;
}

/* A product with fewer columns than a tile's (the ten scores of a classifier, their
 * gradients) holds as many vectors of columns as cover them and more rows: the same number
 * of accumulators (16 with 512-bit vectors, 12 with narrower ones) over the short side. */
void tile_thin_shape(int etype, int vector_bytes, int nv, int *ti, int *tj)
{
    int lanes = vector_bytes / (int)nest_type_size((nest_type)etype);
    *ti = (vector_bytes >= 64 ? 16 : 12) / nv;
    *tj = nv * lanes;
}

int tile_thin_vectors(int etype, int vector_bytes, int64_t J)
{
    int64_t lanes = vector_bytes / (int64_t)nest_type_size((nest_type)etype);
    int64_t nv = (J + lanes - 1) / lanes;
    return nv < tile_vectors(etype, vector_bytes) ? (int)nv : 0;
}

/* A product whose folded axis is the outermost (a^T . b: the weights' gradient in the backward
 * of a dense layer) is put in [I, K, J] order, J the result's contiguous axis, so that it tiles
 * like any other (one folded innermost is swapped by tile_nest). */
static bool to_ikj(plan *p, nest *n)
{
    if (!n->dot || n->rank != 3 || n->reduced != 1u || n->nouts != 1)
        return true;
    int r = __builtin_ctz(n->reduced), j = -1, i = -1;
    for (int d = 0; d < 3; d++)
        if (d != r && n->outs[0].st[d] == 1)
            j = d;
    for (int d = 0; d < 3; d++)
        if (d != r && d != j)
            i = d;
    if (j < 0 || i < 0)
        return true;
    uint8_t order[3] = {(uint8_t)i, (uint8_t)r, (uint8_t)j};
    return nest_permute(p, n, order);
}

/* Swaps the last two axes of a product's nest (its one output, dims, folded axis). */
static bool swap_last_axes(plan *p, nest *n)
{
    int r = n->rank;
    uint8_t order[NEST_MAX_RANK];
    for (int d = 0; d < r; d++)
        order[d] = (uint8_t)d;
    order[r - 2] = (uint8_t)(r - 1);
    order[r - 1] = (uint8_t)(r - 2);
    nout *o = &n->outs[0];
    fx *v = fx_permute(p, o->value, r, order);
    if (!v)
        return false;
    int64_t t = n->dims[r - 1];
    n->dims[r - 1] = n->dims[r - 2];
    n->dims[r - 2] = t;
    t = o->st[r - 1];
    o->st[r - 1] = o->st[r - 2];
    o->st[r - 2] = t;
    o->value = v;
    uint32_t last = 1u << (r - 1), mid = 1u << (r - 2);
    n->reduced = (n->reduced & ~(last | mid)) | (n->reduced & last ? mid : 0) |
                 (n->reduced & mid ? last : 0);
    return true;
}

/* The lanes that ti x tj tiles compute over I x J (the partial tiles' whole). */
static double tiled_lanes(int64_t I, int64_t J, int ti, int tj)
{
    return (double)((I + ti - 1) / ti * ti) * (double)((J + tj - 1) / tj * tj);
}

/* The bytes of B (per product of a batch) that the transposed product reads in place, across
 * its rows, as its first factor, for which any saving of lanes pays: past them (half a 1 MiB
 * second-level cache) those reads come from beyond it, and only a saving of a tenth does.
 * 1x1 convolutions at 28x28 (784 positions in 832 columns), one core, batch 8: 128 -> 512
 * channels (B 401 KB an image) 5-7% faster transposed, 512 -> 128 (1.6 MB) 5-10% slower. */
#define TILE_B_ACROSS (512 * 1024)

/* Whether the transposed product computes fewer lanes: J wastes some of its tiles' columns
 * where I fills its rows (a 1x1 convolution on 14x14: 196 positions in 256 columns). B must
 * be a plain load (the transposed product reads it in place as its first factor). */
static bool fewer_lanes(const nest *n, const fx *B, int vb)
{
    int r = n->rank, ti, tj;
    int64_t I = n->dims[r - 3], K = n->dims[r - 2], J = n->dims[r - 1];
    if (B->kind != FX_LOAD || B->nargs || B->buf == FX_IOTA || dim_is_sym(I) || dim_is_sym(J) ||
        dim_is_sym(K))
        return false;
    nest_type et = (nest_type)n->outs[0].value->etype;
    tile_shape(et, vb, &ti, &tj);
    /* (7x7, 49 positions, stays: with 2048 channels to sum it ran 1.25 times slower
     * transposed, one core) */
    if (I < tj || J < tj)
        return false;
    double bytes = (double)K * (double)J * (double)nest_type_size(et);
    double saving = bytes <= TILE_B_ACROSS ? 1.0 : 1.1;
    return tiled_lanes(I, J, ti, tj) > saving * tiled_lanes(J, I, ti, tj);
}

/* A product whose second factor is read across its rows (B = w^T: dot(g, w^T), the backward of
 * a dense layer) and has more columns than the first has rows is computed transposed, C^T =
 * B^T . A^T, its rows and columns swapped: the panel packs A (I x K, the batch's gradient)
 * rather than B (K x J, the weight, read across its rows once per call), and w is read in place,
 * each row of the tile along a row of w. So is one that computes fewer lanes transposed
 * (fewer_lanes). *a and *b become its factors; false when out of memory. */
static bool transposed_rather(plan *p, nest *n, int vb, fx **a, fx **b, bool *trans)
{
    int r = n->rank;
    const fx *B = *b;
    int64_t I = n->dims[r - 3], J = n->dims[r - 1];
    bool across = fx_is_view(B) && B->st[r - 2] == 1 && B->st[r - 1] != 1 && !dim_is_sym(I) &&
                  I < J;
    if (!across && !fewer_lanes(n, B, vb))
        return true;
    uint8_t order[NEST_MAX_RANK];
    for (int d = 0; d < r; d++)
        order[d] = (uint8_t)d;
    order[r - 3] = (uint8_t)(r - 1);
    order[r - 1] = (uint8_t)(r - 3);
    if (!nest_permute(p, n, order))
        return false;
    if (factors(p, n->outs[0].value, r, a, b)) {
        *trans = true;
        return true;
    }
    /* (not expected: the factors swap roles) back, the factors found again */
    return nest_permute(p, n, order) && factors(p, n->outs[0].value, r, a, b);
}

int64_t tile_k_block_len(const nest *n)
{
    int es = (int)nest_type_size((nest_type)n->outs[0].value->etype);
    return TILE_K_BLOCK_BYTES / ((int64_t)n->tile_j * es);
}

bool tile_transposed(const nest *n)
{
    const int64_t *st = n->outs[0].st;
    int r = n->rank;
    return st[r - 3] == 1 && st[r - 1] != 1;
}

bool tile_few_rows(const nest *n)
{
    int et = n->outs[0].value->etype;
    return n->rank == 3 && dim_is_sym(n->dims[0]) && !dim_is_sym(n->dims[2]) &&
           (double)n->tile_i * (double)n->dims[2] * (double)nest_type_size((nest_type)et) <=
               TILE_LOCAL_PANEL;
}

static bool tile_nest(plan *p, int32_t k, int vbytes, const int32_t *readers)
{
    nest *n = &p->nests[k];
    if (!n->dead && !n->rowed && !to_ikj(p, n))
        return false;
    int r = n->rank;
    if (!n->dot || n->dead || n->rowed || r < 3 || n->nouts != 1)
        return true;
    /* a product whose summed axis flatten put innermost ([.., I, J, K]: the second factor is
     * contiguous along k, as a transposed weight or attention's k^T) is tiled as [.., I, K, J]
     * (the panel packs the factor whatever its layout); back if it cannot be tiled */
    bool swapped = n->reduced == (1u << (r - 1)) && n->outs[0].st[r - 2] == 1;
    if (swapped && !swap_last_axes(p, n))
        return p->status == NEST_OK;
    const nout *o = &n->outs[0];
    int et = o->value->etype;
    fx *a, *b;
    if (n->reduced != (1u << (r - 2)) || (et != NEST_F32 && et != NEST_F64) ||
        o->reduce != OP_SUM || o->st[r - 2] != 0 || o->st[r - 1] != 1 ||
        (n->dims[r - 3] < 2 && !dim_is_sym(n->dims[r - 3])) ||
        n->dims[r - 1] < 2 || symbolic(n) || !factors(p, o->value, r, &a, &b)) {
        if (swapped) /* either order is correct: this one only when tiled */
            swap_last_axes(p, n);
        return p->status == NEST_OK;
    }
    bool trans = false;
    if (!transposed_rather(p, n, vbytes, &a, &b, &trans))
        return false;
    o = &n->outs[0];
    n->tile_a = a;
    n->tile_b = b;
    n->a_first = o->value->args[0] == a;
    n->tile_vb = vbytes >= 64 ? 64 : vbytes >= 32 ? 32 : 16;
    int thin = tile_thin_vectors(et, n->tile_vb, n->dims[r - 1]);
    if (thin)
        tile_thin_shape(et, n->tile_vb, thin, &n->tile_i, &n->tile_j);
    else
        tile_shape(et, n->tile_vb, &n->tile_i, &n->tile_j);
    /* a transposed product (I is the result's contiguous axis) stores a tile's columns as runs
     * of tile_i elements, each a part of a cache line that the next tiles down I fill: the
     * lines of one column block lie a row of the result apart, in the same few sets of the
     * first-level cache, and were written back and read again for every tile (11% of a
     * 784-1024-1024 MLP's training step). A block of several tiles down I stores a line's
     * worth or more. */
    int64_t es = (int64_t)nest_type_size((nest_type)et);
    int line = (int)(64 / es);
    n->tile_rows = n->tile_i;
    if (tile_transposed(n) && n->tile_i < line &&
        (dim_is_sym(n->dims[r - 3]) || n->dims[r - 3] >= line))
        n->tile_rows = (line + n->tile_i - 1) / n->tile_i * n->tile_i;
    /* a batch of products packs its panels into a local array of each thread when they are
     * small (the emitter runs the batch in parallel then), else into the workspace */
    bool ksym = dim_is_sym(n->dims[r - 2]); /* a symbolic K: the panel is in the workspace */
    int64_t nbatch = 1, bytes = ksym ? 0 : n->dims[r - 2] * n->tile_j * (int64_t)nest_type_size((nest_type)et);
    bool bsym = false; /* a symbolic batch counts as many products */
    for (int d = 0; d < r - 3; d++) {
        bsym |= dim_is_sym(n->dims[d]);
        nbatch = bsym ? nbatch : nbatch * n->dims[d];
    }
    int64_t I = n->dims[r - 3], K = n->dims[r - 2], J = n->dims[r - 1];
    int64_t jblocks = (J + n->tile_j - 1) / n->tile_j;
    /* a B that every product of a plain batch shares is packed once for all of them (per
     * product it was packed again for each: 8 times per call, at batch 8, the 1 MiB of a 1x1
     * convolution's filters) */
    n->b_shared = !bsym && !ksym && nbatch >= 2 && !dim_is_sym(I) &&
                  (double)K * (double)jblocks * n->tile_j * es <= TILE_SHARED_PANEL;
    for (int d = 0; d < r - 3 && n->b_shared; d++)
        n->b_shared = ignores(p, b, d);
    if (!ksym && (bsym || nbatch >= 2) && bytes <= TILE_LOCAL_PANEL && !n->b_shared)
        return absorb(p, k, readers, trans);
    bool b_plain = nbatch == 1 && !bsym && !ksym && fx_is_view(b) && b->st[r - 1] == 1 &&
                   b->etype == et;
    if (b_plain && J >= n->tile_j && !dim_is_sym(I) &&
        (I + n->tile_i - 1) / n->tile_i <= TILE_DIRECT_BLOCKS) {
        n->b_direct = true;
        return absorb(p, k, readers, trans);
    }
    /* symbolic rows: the same choice, made at run time (fewer columns than a tile's: in place
     * only for fewer rows than a tile's, computed whole); the panel is kept for many rows */
    n->b_direct_rt = b_plain && r == 3 && dim_is_sym(I) && (J >= n->tile_j || tile_few_rows(n));
    /* the tiles of one product on several cores when it is worth a parallel region (its rows
     * and sum known, more than one tile): then B is packed whole first, each panel by one
     * thread */
    int64_t iblocks = dim_is_sym(I) ? 0 : (I + n->tile_rows - 1) / n->tile_rows;
    double products = n->b_shared ? (double)nbatch : 1;
    n->tile_par = p->opts->openmp && !dim_is_sym(I) && !ksym && !bsym &&
                  products * (double)(jblocks * iblocks) >= 2 &&
                  products * (double)I * (double)K * (double)J >= (double)PAR_MIN_MACS;
    /* on several cores a shared B's batch runs its products outermost when that reads fewer
     * bytes from beyond the second-level cache (TILE_SHARED_PANEL): each thread then reads
     * its own products' A once, where by blocks of columns both read all of A, each for its
     * blocks (1x1 1024 -> 256 at 14x14, 8 images, two threads: 6.0-7.6 -> 5.0-5.1 ms of CPU a
     * call). On one core the panel staying in cache across the batch wins (4.4-4.7 against
     * 4.9-5.2 ms). */
    n->batch_outer = false;
    if (n->b_shared && n->tile_par) {
        double abytes = (double)nbatch * (double)I * (double)K * es,
               panels = (double)K * (double)jblocks * n->tile_j * es;
        double by_cols = abytes * (double)jblocks + panels,
               by_products = abytes + (panels > L2_HALF ? panels * (double)nbatch : panels);
        n->batch_outer = by_products < by_cols;
    }
    /* on one core a shared B's batch whose A is read from beyond the second-level cache once
     * per block of columns sums over k in blocks, a group of products at a time: each block
     * of A then serves every block of columns while it is in that cache, and the block of a
     * panel every block of rows while it is in the first (TILE_K_BLOCK_BYTES); the group's
     * partial sums (a block of the result each) stay in the second-level cache with them.
     * Every element is still summed in k order: the tile starts from its partial sums. */
    n->k_block = n->k_group = 0;
    if (n->b_shared && !n->tile_par && jblocks >= 2) {
        int64_t kb = tile_k_block_len(n);
        double sums = (double)iblocks * n->tile_rows * (double)jblocks * n->tile_j * es,
               ablock = (double)I * (double)kb * es,
               slice = (double)kb * (double)jblocks * n->tile_j * es,
               abytes = (double)nbatch * (double)I * (double)K * es;
        double g = ((double)L2_HALF - slice) / (sums + ablock); /* products a group */
        if (K >= 2 * kb && abytes > L2_HALF && g >= 1) {
            n->k_block = kb;
            n->k_group = g < (double)nbatch ? (int64_t)g : nbatch;
        }
    }
    /* row by row when B packed whole stays in the second-level cache and the result is
     * beyond it: a block's stores (and the absorbed outputs', as a training step's update of
     * its weights and velocities) then run along the result's rows. Column block by column
     * block they were short runs a row apart, each in a page of its own, where the hardware
     * prefetchers stop (a 784-1024-1024 MLP's training step: 3.9 -> 3.5 ms, one core). */
    n->tile_rowwise = !dim_is_sym(I) && !ksym && !bsym && nbatch == 1 && jblocks >= 2 &&
                      !tile_transposed(n) && (double)K * (double)jblocks * n->tile_j * es <=
                                               TILE_WHOLE_PANEL &&
                      (double)I * (double)J * es >= TILE_ROWS_RESULT;
    /* the partial sums of a group's products summed over k in blocks: after the panels */
    int64_t partials = n->k_block ? n->k_group * iblocks * n->tile_rows * jblocks * n->tile_j : 0;
    /* a constant B that only this product reads is stored as its panels: none packed here */
    if (prepack_panels(p, n, readers)) {
        if (partials && (n->pack = plan_buffer(p, BUF_TEMP, -1, o->node, et, partials)) < 0)
            return false;
        return absorb(p, k, readers, trans);
    }
    if (p->status)
        return false;
    bool whole = n->tile_par || n->tile_rowwise || n->b_shared;
    int64_t panel = dim_mul(p->f, n->dims[r - 2], n->tile_j * (whole ? jblocks : 1));
    if (panel == DIM_NONE) {
        p->status = p->f->status;
        return false;
    }
    n->pack = plan_buffer(p, BUF_TEMP, -1, o->node, et, panel + partials);
    if (n->pack < 0)
        return false;
    return absorb(p, k, readers, trans);
}

int pass_tile(plan *p)
{
    int vbytes = tile_vector_bytes(p->opts);
    int32_t *readers = NULL;
    for (int32_t k = 0; k < p->nnests; k++) {
        /* a convolution's is its copy of the input (conv.c), a special nest's its scratch */
        if (!p->nests[k].win && p->nests[k].special < 0)
            p->nests[k].pack = -1;
        if (!p->opts->fuse || !p->nests[k].dot || p->nests[k].dead)
            continue; /* --no-fuse shows the plain nests */
        if (!readers && !(readers = nest_readers(p))) /* how many nests read each buffer, once */
            return p->status;
        if (!tile_nest(p, k, vbytes, readers)) {
            free(readers);
            if (!p->status)
                p->status = NEST_ERR_NOMEM;
            return p->status;
        }
    }
    free(readers);
    return p->status;
}
