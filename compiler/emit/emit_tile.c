/*
 * emit_tile.c - the loops of a product of matrices tiled by tile.c: the second factor packed
 * into panels (or read in place), the micro-kernel's call per block of the result, and the
 * absorbed element-wise outputs applied to the block as it leaves the registers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* Values of k a transposed panel is packed by at a time: PACK_BLOCK rows of the panel (of up to
 * 64 floats each) and PACK_BLOCK values of each of its columns stay in L1. */
#define PACK_BLOCK 16

/* The lanes of the squares nest_transpose_* moves for the tiles of ne in type et (they come
 * with the tile of tile_shape: thin tiles have none), or 0. */
static int square_lanes(const nest *ne, int et)
{
    int lanes = ne->tile_vb / (int)nest_type_size((nest_type)et);
    return et == ne->outs[0].value->etype && ne->tile_j == tile_vectors(et, ne->tile_vb) * lanes
               ? lanes
               : 0;
}

/* The C of the address of view v's element at the batch c->var[0 .. nb), index `row` along
 * `axis` (NULL: 0) and 0 along every other axis. */
static char *view_base(ctx *c, const fx *v, int nb, const char *row, int axis)
{
    buf t = {0};
    buf_printf(&t, "%s + %lld", c->bufname[v->buf], (long long)v->off);
    em_ref(c, v->buf);
    for (int d = 0; d < nb; d++)
        if (v->st[d])
            buf_printf(&t, " + %s * %lld", c->var[d], (long long)v->st[d]);
    if (row && v->st[axis])
        buf_printf(&t, " + %s * %lld", row, (long long)v->st[axis]);
    return em_finish(c, &t);
}

/* The panel `panel` of B's columns j0 .. j0 + nj (j0 and nj named by c->var[nb + 2] and nj),
 * k-major, zero past the edge; KS is the sum's extent as C (symbolic: a sum over a batch). */
static void emit_pack_panel(ctx *c, const nest *ne, const char *KS, const char *panel,
                            const char *nj)
{
    int tj = ne->tile_j, nb = ne->rank - 3;
    long long J = ne->dims[nb + 2];
    const char *kv = c->var[nb + 1];
    char jexpr[64], dst[128];
    snprintf(jexpr, sizeof jexpr, "%s + jj", c->var[nb + 2]);
    c->expr[nb] = "0";
    c->expr[nb + 1] = kv;
    c->expr[nb + 2] = jexpr;
    snprintf(dst, sizeof dst, "%s[%s * %d + jj]", panel, kv, tj);
    const fx *b = ne->tile_b;
    if (fx_is_view(b) && b->st[nb + 1] == 1 && b->st[nb + 2] != 1) {
        /* B read transposed (a weight's transpose in a backward pass): blocks of PACK_BLOCK
         * values of k, read along k and written across the panel's rows, which stay in cache */
        const char *k0 = em_unique(&c->local, "k0"), *k1 = em_unique(&c->local, "k1");
        /* a whole block of columns as squares of the tile's lanes (emit_transpose_fn), each
         * strip of them along k (a few rows of B read in order, which the prefetchers follow):
         * the tile's own shape (thin tiles come without the helper), B of the product's type;
         * the rest of k, and a last block of fewer columns, as before */
        int lanes = square_lanes(ne, b->etype);
        bool squares = lanes > 0;
        const char *kw = "0";
        if (squares) { /* one statement, as callers take it (the body of an if) */
            em_line(c, "{");
            c->indent++;
            char *base = view_base(c, b, nb, c->var[nb + 2], nb + 2);
            kw = em_unique(&c->local, "kw");
            em_line(c, "const int64_t %s = %s == %d ? (%s) / %d * %d : 0;", kw, nj, tj, KS, lanes,
                    lanes);
            em_line(c, "for (int jj = 0; jj < %d; jj += %d)", tj, lanes);
            em_line(c, "    for (int64_t %s = 0; %s < %s; %s += %d)", kv, kv, kw, kv, lanes);
            em_line(c, "        nest_transpose_%s_%d(%s + %s * %d + jj, %d, %s + jj * %lld + %s, %lld);",
                    nest_type_name((nest_type)b->etype), lanes, panel, kv, tj, tj,
                    base ? base : "0", (long long)b->st[nb + 2], kv, (long long)b->st[nb + 2]);
            free(base);
        }
        em_line(c, "for (int64_t %s = %s; %s < %s; %s += %d) {", k0, kw, k0, KS, k0, PACK_BLOCK);
        c->indent++;
        em_line(c, "const int64_t %s = %s + %d < %s ? %s + %d : %s;", k1, k0, PACK_BLOCK, KS, k0,
                PACK_BLOCK, KS);
        em_line(c, "for (int jj = 0; jj < %s; jj++)", nj);
        em_line(c, "    for (int64_t %s = %s; %s < %s; %s++)", kv, k0, kv, k1, kv);
        c->indent += 2;
        em_assign(c, dst, ne->tile_b);
        c->indent -= 2;
        if (J % tj) {
            em_line(c, "for (int64_t %s = %s; %s < %s; %s++)", kv, k0, kv, k1, kv);
            em_line(c, "    for (int jj = %s; jj < %d; jj++)", nj, tj);
            em_line(c, "        %s = 0;", dst);
        }
        c->indent--;
        em_line(c, "}");
        if (squares) {
            c->indent--;
            em_line(c, "}");
        }
    } else {
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", kv, kv, KS, kv);
        c->indent++;
        em_line(c, "for (int jj = 0; jj < %s; jj++) {", nj);
        c->indent++;
        em_assign(c, dst, ne->tile_b);
        c->indent--;
        em_line(c, "}");
        if (J % tj) {
            em_line(c, "for (int jj = %s; jj < %d; jj++)", nj, tj);
            em_line(c, "    %s = 0;", dst);
        }
        c->indent--;
        em_line(c, "}");
    }
}

/* const int nj = the columns of the block at j0 (c->var[nb + 2]). */
static void emit_block_cols(ctx *c, const nest *ne, const char *nj)
{
    int tj = ne->tile_j, nb = ne->rank - 3;
    long long J = ne->dims[nb + 2];
    const char *j0 = c->var[nb + 2];
    if (J % tj) /* a last block of fewer columns */
        em_line(c, "const int %s = %lld - %s < %d ? (int)(%lld - %s) : %d;", nj, J, j0, tj, J, j0, tj);
    else
        em_line(c, "const int %s = %d;", nj, tj);
}

/* A loop of the parallel region shared out among its threads in equal ranges. */
static void emit_omp_for_static(ctx *c)
{
    em_line(c, "#ifdef _OPENMP");
    em_line(c, "#pragma omp for schedule(static)");
    em_line(c, "#endif");
}

/* Where a block of the product comes from (names in the generated C, or NULL). */
typedef struct tile_src {
    const char *panel; /* B's columns from j0: the packed panel, or B where it lies */
    const char *sp;    /* the distance of the panel's rows k (C text) */
    const char *small; /* flag: the block reads B in place element by element (symbolic rows
                        * fewer than a tile's; a last block of fewer columns than a tile's
                        * when B is read in place) */
    const char *few;   /* flag: the block is copied from `rows`, the whole product of a few
                        * rows computed before the blocks (emit_few_rows) */
    const char *rows;
    const nout *stream; /* the output written past the caches (stream_target), or NULL */
    /* the sum in blocks of k (k_block): the block's partial sums (C text: where they are
     * kept), its block of k (from k0, kn of them) and whether blocks of k follow (the block
     * is not stored yet); else NULL */
    const char *part, *k0, *kn, *more;
    /* with part: whether a product follows whose rows of A the tile's next (the C condition
     * next_if), and the distance to them (C text), or NULL */
    const char *next_if, *next_off;
} tile_src;

/* A result of a product of at least this many bytes is written past the caches: it cannot
 * stay in them, and a plain store reads each line before it writes it (a 1x1 convolution of
 * 64 to 256 channels on 56x56 at batch 8, 25.7 MB of result: 22.4 ms a call with plain stores,
 * 13.2 with these, one thread). */
#define STREAM_MIN_BYTES (8 << 20)

/* The output a tiled product writes past the caches (nest_stream_*), or NULL: the one output
 * its tiles store (the product, or the absorbed value that leaves), floats along the tile's
 * columns, of STREAM_MIN_BYTES or more at plain sizes, rows of the tile whole cache lines. */
static const nout *stream_target(const nest *ne)
{
    int nb = ne->rank - 3;
    const nout *o = ne->outs[0].drop ? NULL : &ne->outs[0];
    for (int i = 1; i < ne->nouts; i++) {
        if (o || ne->outs[i].reduce >= 0) /* a second store, or a fold */
            return NULL;
        o = &ne->outs[i];
    }
    if (!o)
        return NULL;
    int et = o->value->etype;
    double bytes = (double)nest_type_size((nest_type)et);
    for (int d = 0; d < ne->rank; d++)
        if (d != nb + 1) {
            if (dim_is_sym(ne->dims[d]))
                return NULL;
            bytes *= (double)ne->dims[d];
        }
    if ((et != NEST_F32 && et != NEST_F64) || o->st[nb + 2] != 1 || bytes < STREAM_MIN_BYTES ||
        (ne->tile_j * (int)nest_type_size((nest_type)et)) % 64)
        return NULL;
    return o;
}

/* The rows of the block leave from its tile past the caches: the whole cache lines of a row
 * of a full block, the rest plainly. */
static void emit_stream_rows(ctx *c, const nest *ne, const nout *o, const char *acc,
                             const char *ni, const char *nj)
{
    int nb = ne->rank - 3, tj = ne->tile_j, et = o->value->etype;
    const char *T = em_ctype(et);
    char iexpr[64];
    snprintf(iexpr, sizeof iexpr, "%s + ii", c->var[nb]);
    c->expr[nb] = iexpr;
    c->expr[nb + 1] = "0";
    c->expr[nb + 2] = c->var[nb + 2];
    buf t = {0};
    em_store_text(c, &t, o);
    char *d = em_finish(c, &t);
    *c->helpers |= 1ull << (H_STREAM + (et == NEST_F64));
    int L = 64 / (int)nest_type_size((nest_type)et); /* elements per cache line */
    em_line(c, "for (int ii = 0; ii < %s; ii++) {", ni);
    c->indent++;
    em_line(c, "%s *nest_d = &%s;", T, d ? d : "");
    em_line(c, "/* the whole lines past the caches; the parts of lines at the ends (a result not");
    em_line(c, " * aligned to 64 bytes) plainly: the next block writes the rest of them */");
    em_line(c, "const int nest_h = %s == %d ? (int)((64 - ((size_t)nest_d & 63)) & 63) / %d : %s;",
            nj, tj, (int)nest_type_size((nest_type)et), nj);
    em_line(c, "const int nest_m = (%s - nest_h) / %d * %d;", nj, L, L);
    em_line(c, "for (int jj = 0; jj < nest_h; jj++)");
    em_line(c, "    nest_d[jj] = %s[ii * %d + jj];", acc, tj);
    em_line(c, "nest_stream_%s(nest_d + nest_h, %s + ii * %d + nest_h, nest_m);",
            et == NEST_F64 ? "f64" : "f32", acc, tj);
    em_line(c, "for (int jj = nest_h + nest_m; jj < %s; jj++)", nj);
    em_line(c, "    nest_d[jj] = %s[ii * %d + jj];", acc, tj);
    c->indent--;
    em_line(c, "}");
    free(d);
}

/* A batch's tiles summed in blocks of k (src->part): the tile in the first block of columns
 * asks for the next block of k of its rows of A (at base, ni rows; after the last block, the
 * first of the same rows of the next group's product) toward the cache, when A's rows or its k
 * are contiguous, so that the tiles of the next block read it from there, not from memory a
 * line at a time (1x1 1024 -> 256 at 14x14, 8 images, one core, after 48 MB of other data:
 * the first call 3.99-4.30 -> 3.68-3.69 ms, the next 3.63-4.02 -> 3.46-3.52, with the next
 * product's first block too 3.35-3.47). */
static void emit_prefetch_next_k(ctx *c, const nest *ne, const tile_src *src, const char *base,
                                 const char *ni)
{
    int nb = ne->rank - 3, et = ne->outs[0].value->etype;
    long long si = (long long)ne->tile_a->st[nb], sk = (long long)ne->tile_a->st[nb + 1];
    long long K = (long long)ne->dims[nb + 1], line = 64 / (long long)nest_type_size((nest_type)et);
    if (si != 1 && sk != 1)
        return;
    const char *T = em_ctype(et);
    em_line(c, "#ifdef __GNUC__");
    if (src->next_if) /* after the last block of k, the first of the next group's product */
        em_line(c, "if (%s == 0 && (%s || %s)) { /* the rows' next block of k toward the cache */",
                c->var[nb + 2], src->more, src->next_if);
    else
        em_line(c, "if (%s == 0 && %s) { /* the rows' next block of k toward the cache */",
                c->var[nb + 2], src->more);
    c->indent++;
    em_line(c, "const int64_t nest_p0 = %s ? %s + %s : 0;", src->more, src->k0, src->kn);
    long long kb = (long long)ne->k_block; /* (every block of k but the last) */
    em_line(c, "const int64_t nest_p1 = nest_p0 + %lld < %lld ? nest_p0 + %lld : %lld;", kb, K,
            kb, K);
    buf pa = {0};
    buf_printf(&pa, "%s", base);
    if (src->next_if)
        buf_printf(&pa, " + (%s ? 0 : %s)", src->more, src->next_off);
    char *pas = em_finish(c, &pa);
    em_line(c, "const %s *nest_pa = %s;", T, pas);
    free(pas);
    em_line(c, "for (int64_t nest_pk = nest_p0; nest_pk < nest_p1; nest_pk++) {");
    if (si == 1) { /* a row of ni elements for each k */
        em_line(c, "    for (int nest_o = 0; nest_o < %s; nest_o += %lld)", ni, line);
        em_line(c, "        __builtin_prefetch(nest_pa + nest_pk * %lld + nest_o);", sk);
        em_line(c, "    __builtin_prefetch(nest_pa + nest_pk * %lld + %s - 1);", sk, ni);
    } else { /* k contiguous in each row: a line at a time */
        em_line(c, "    if ((nest_pk - nest_p0) %% %lld == 0 || nest_pk + 1 == nest_p1)", line);
        em_line(c, "        for (int nest_o = 0; nest_o < %s; nest_o++)", ni);
        em_line(c, "            __builtin_prefetch(nest_pa + nest_o * %lld + nest_pk);", si);
    }
    em_line(c, "}");
    c->indent--;
    em_line(c, "}");
    em_line(c, "#endif");
}

/* One tile: the block of rows i0 .. i0 + ni by columns j0 .. j0 + nj (c->var[nb], c->var[nb +
 * 2]) accumulates in registers over the KS values of k from the panel (src), then leaves
 * through the absorbed outputs and into the product if it is kept. */
static void emit_tile_block(ctx *c, const nest *ne, const char *KS, const tile_src *src,
                            const char *nj)
{
    const char *small = src->small;
    const nout *prod = &ne->outs[0];
    int et = prod->value->etype, ti = ne->tile_i, tj = ne->tile_j, nb = ne->rank - 3;
    int brows = ne->tile_rows; /* the block's: tile_i, or several tiles down I */
    int64_t I = ne->dims[nb];
    bool Isym = dim_is_sym(I);
    const char *T = em_ctype(et), *i0 = c->var[nb], *kv = c->var[nb + 1], *j0 = c->var[nb + 2];
    const char *ni = em_unique(&c->local, "ni"), *acc = em_unique(&c->local, "acc");
    char *Is = em_dim_text(c, I);
    if (Isym || I % brows)
        em_line(c, "const int %s = %s - %s < %d ? (int)(%s - %s) : %d;", ni, Is ? Is : "0", i0,
                brows, Is ? Is : "0", i0, brows);
    else
        em_line(c, "const int %s = %d;", ni, brows);
    free(Is);
    /* aligned: the micro-kernel sums into it, and a vector split across two cache lines is
     * neither stored nor read back at full speed (the partial sums are: tile.c sizes them in
     * whole blocks, after the panels) */
    if (src->part)
        em_line(c, "%s *restrict %s = %s;", T, acc, src->part);
    else
        em_line(c, "%s %s[%d] NEST_ALIGNED;", T, acc, brows * tj);
    char iexpr[64], jexpr[64];
    snprintf(iexpr, sizeof iexpr, "%s + ii", i0);
    snprintf(jexpr, sizeof jexpr, "%s + jj", j0);
    {
        /* the first factor's rows start at a[off + batch + i0 * si] and step k by sk */
        const fx *a = ne->tile_a;
        int h = em_tile_helper(et, ne->tile_vb, tj);
        *c->helpers |= 1ull << h;
        char *base = view_base(c, a, nb, i0, nb);
        if (src->part && base)
            emit_prefetch_next_k(c, ne, src, base, ni);
        if (src->few) { /* rows of the product computed whole */
            em_line(c, "if (%s) {", src->few);
            em_line(c, "    for (int ii = 0; ii < %s; ii++)", ni);
            em_line(c, "        for (int jj = 0; jj < %s; jj++)", nj);
            em_line(c, "            %s[ii * %d + jj] = %s[(%s + ii) * %lld + %s + jj];", acc, tj,
                    src->rows, i0, (long long)ne->dims[nb + 2], j0);
            em_line(c, "} else%s", small ? "" : " {");
            if (!small)
                c->indent++;
        }
        if (small) { /* the product of ni rows by B read in place, k outermost */
            em_line(c, "if (%s) {", small);
            c->indent++;
            em_line(c, "for (int u = 0; u < %s * %d; u++)", ni, tj);
            em_line(c, "    %s[u] = 0;", acc);
            em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", kv, kv, KS, kv);
            c->indent++;
            em_line(c, "for (int ii = 0; ii < %s; ii++) {", ni);
            c->indent++;
            em_line(c, "const %s nest_a = (%s)[ii * %lld + %s * %lld];", T, base ? base : "0",
                    (long long)a->st[nb], kv, (long long)a->st[nb + 1]);
            em_line(c, "for (int jj = 0; jj < %s; jj++) {", nj);
            c->indent++;
            em_line(c, "%s nest_b;", T);
            c->expr[nb] = "0";
            c->expr[nb + 1] = kv;
            c->expr[nb + 2] = jexpr;
            em_assign(c, "nest_b", ne->tile_b);
            em_line(c, "%s[ii * %d + jj] += %s;", acc, tj,
                    ne->a_first ? "nest_a * nest_b" : "nest_b * nest_a");
            for (int close = 0; close < 3; close++) {
                c->indent--;
                em_line(c, "}");
            }
            c->indent--;
            em_line(c, "} else {");
            c->indent++;
        }
        /* a block of several tiles down I sums over k in blocks (TILE_K_BLOCK_BYTES of the
         * panel): each block of the panel serves all the block's tiles from the first-level
         * cache, where the whole panel (64 KiB for 256 k) came from the second for every tile
         * (1x1 256 -> 1024 channels at 14x14, 8 images, one core: 4.76 -> 4.41 ms) */
        int64_t K = ne->dims[nb + 1], kblk = tile_k_block_len(ne);
        bool kblocks = brows != ti && !src->part && !dim_is_sym(K) && K > kblk;
        char kn[128], kpanel[128];
        if (kblocks) {
            em_line(c, "for (int64_t nest_kb = 0; nest_kb < %lld; nest_kb += %lld)", (long long)K,
                    (long long)kblk);
            c->indent++;
            snprintf(kn, sizeof kn, "%lld - nest_kb < %lld ? %lld - nest_kb : %lld", (long long)K,
                     (long long)kblk, (long long)K, (long long)kblk);
            snprintf(kpanel, sizeof kpanel, "%s + nest_kb * %s", src->panel, src->sp);
        }
        /* the block's tiles down I, each into its rows of acc, when it has several */
        char nrows[96] = "", aoff[96] = "", accoff[32] = "";
        if (brows != ti) {
            em_line(c, "for (int nest_s = 0; nest_s < %s; nest_s += %d)", ni, ti);
            c->indent++;
            snprintf(nrows, sizeof nrows, "%s - nest_s < %d ? %s - nest_s : %d", ni, ti, ni, ti);
            snprintf(aoff, sizeof aoff, " + nest_s * %lld", (long long)a->st[nb]);
            snprintf(accoff, sizeof accoff, " + nest_s * %d", tj);
        }
        char add[64] = "0"; /* the kernel starts from acc: a block of k after the first */
        if (src->part || kblocks) { /* the block of k: A's columns from k0 (the panel's rows:
                                     * src->panel, or kpanel) */
            const char *k0 = kblocks ? "nest_kb" : src->k0;
            snprintf(aoff + strlen(aoff), sizeof aoff - strlen(aoff), " + %s * %lld", k0,
                     (long long)a->st[nb + 1]);
            snprintf(add, sizeof add, "%s > 0", k0);
        }
        /* a last block of fewer columns than the tile's, from a panel (which the tile may
         * read whole), computes only the vectors that cover them */
        int64_t J = ne->dims[nb + 2];
        int lanes = ne->tile_vb / (int)nest_type_size((nest_type)et),
            nv = (int)(J % tj + lanes - 1) / lanes;
        bool edge = !ne->b_direct && !ne->b_direct_rt && !dim_is_sym(J) && J % tj &&
                    tj == tile_vectors(et, ne->tile_vb) * lanes && nv < tj / lanes;
        buf at = {0}; /* the arguments after the rows (base is of any length) */
        buf_printf(&at, "%s, %s%s, %lld, %lld, %s, %s, %s%s, %s",
                   kblocks ? kn : src->part ? src->kn : KS, base ? base : "0", aoff,
                   (long long)a->st[nb], (long long)a->st[nb + 1], kblocks ? kpanel : src->panel,
                   src->sp, acc, accoff, add);
        char *args = em_finish(c, &at);
        const char *tn = nest_type_name((nest_type)et), *rows = brows != ti ? nrows : ni;
        if (edge) {
            em_line(c, "if (%s < %d)", nj, tj);
            em_line(c, "    nest_tile_%s_%dx%d_edge(%s, %d, %s);", tn, ti, tj, rows, nv,
                    args ? args : "");
            em_line(c, "else");
            c->indent++;
        }
        em_line(c, "nest_tile_%s_%dx%d(%s, %s);", tn, ti, tj, rows, args ? args : "");
        free(args);
        if (edge)
            c->indent--;
        if (brows != ti)
            c->indent--;
        if (kblocks)
            c->indent--;
        if (src->part) {
            em_line(c, "if (%s)", src->more);
            em_line(c, "    continue; /* stored after the last block of k */");
        }
        if (small || src->few) {
            c->indent--;
            em_line(c, "}");
        }
        free(base);
    }
    c->expr[nb] = iexpr;
    /* the block leaves: through the absorbed outputs, and into the product if it is kept;
     * along the product's rows when they are its contiguous axis (a transposed product) */
    bool cols_outer = tile_transposed(ne);
    const nout *stream = src->stream;
    /* nothing to do element by element when the product alone leaves, past the caches */
    bool elements = ne->nouts > 1 || (!prod->drop && stream != prod);
    /* a transposed product that leaves alone: a whole block as squares of the tile's lanes
     * (emit_transpose_fn; element by element its stores were gathers from acc, a fifth of a
     * 1x1 convolution of 256 to 1024 channels on 14x14) */
    int lanes = square_lanes(ne, et);
    bool square = cols_outer && elements && lanes && brows == lanes;
    bool squares = square && ne->nouts == 1;
    char tile[96];
    snprintf(tile, sizeof tile, "%s[ii * %d + jj]", acc, tj);
    if (square && !squares) {
        /* absorbed outputs: the block transposed first (the rows a last block lacks zero), so
         * that they read it along the result's rows, as they store it */
        const char *acct = em_unique(&c->local, "acct");
        em_line(c, "%s %s[%d] NEST_ALIGNED;", T, acct, brows * tj);
        em_line(c, "for (int u = %s * %d; u < %d; u++)", ni, tj, brows * tj);
        em_line(c, "    %s[u] = 0;", acc);
        em_line(c, "for (int jj = 0; jj < %d; jj += %d)", tj, lanes);
        em_line(c, "    nest_transpose_%s_%d(%s + jj * %d, %d, %s + jj, %d);",
                nest_type_name((nest_type)et), lanes, acct, brows, brows, acc, tj);
        snprintf(tile, sizeof tile, "%s[jj * %d + ii]", acct, brows);
    }
    if (squares) {
        c->expr[nb] = i0;
        c->expr[nb + 1] = "0";
        c->expr[nb + 2] = j0;
        buf t = {0};
        em_store_text(c, &t, prod);
        char *d = em_finish(c, &t);
        long long sj = (long long)prod->st[nb + 2];
        em_line(c, "if (%s == %d && %s == %d) {", ni, brows, nj, tj);
        em_line(c, "    for (int jj = 0; jj < %d; jj += %d)", tj, lanes);
        em_line(c, "        nest_transpose_%s_%d(&%s + jj * %lld, %lld, %s + jj, %d);",
                nest_type_name((nest_type)et), lanes, d ? d : "", sj, sj, acc, tj);
        em_line(c, "} else {");
        c->indent++;
        free(d);
        c->expr[nb] = iexpr;
    }
    const char *loop[2][2] = {{"ii", ni}, {"jj", nj}}; /* index and extent, outer first */
    for (int l = 0; l < 2 && elements; l++) {
        const char *v = loop[l ^ cols_outer][0], *n = loop[l ^ cols_outer][1];
        em_line(c, "for (int %s = 0; %s < %s; %s++) {", v, v, n, v);
        c->indent++;
    }
    c->expr[nb + 1] = "0";
    c->expr[nb + 2] = jexpr;
    c->tile_view = fx_load(c->mp, prod->buf, prod->off, ne->rank, prod->st, -1);
    if (!c->tile_view)
        c->b->failed = true; /* out of memory: reads of the product would find no name */
    c->tile_text = tile;
    c->stream_to = stream;
    if (ne->nouts > 1) {
        fx *vals[ne->nouts];
        for (int i = 1; i < ne->nouts; i++)
            vals[i - 1] = ne->outs[i].value;
        em_outputs(c, ne->outs + 1, vals, ne->nouts - 1);
    }
    if (!prod->drop && stream != prod) {
        buf t = {0};
        em_store_text(c, &t, prod);
        char *d = em_finish(c, &t);
        em_line(c, "%s = %s;", d ? d : "", tile);
        free(d);
    }
    c->tile_view = NULL;
    c->tile_text = NULL;
    for (int close = 0; close < 2 && elements; close++) {
        c->indent--;
        em_line(c, "}");
    }
    if (squares) {
        c->indent--;
        em_line(c, "}");
    }
    c->stream_to = NULL;
    if (stream)
        emit_stream_rows(c, ne, stream, acc, ni, nj);
}

/* The tile inside the two innermost loops of the blocks, and their ends: the stores past the
 * caches of the blocks a thread ran (the inner loop's) are done before the outer loop goes on
 * or ends. */
static void emit_last_block(ctx *c, const nest *ne, const char *KS, const tile_src *src,
                            const char *nj)
{
    emit_tile_block(c, ne, KS, src, nj);
    c->indent--;
    em_line(c, "}");
    if (src->stream)
        em_line(c, "NEST_STREAM_FENCE();");
    c->indent--;
    em_line(c, "}");
}

/* Symbolic rows fewer than a tile's with B read in place (ne->b_direct_rt, no batch): the
 * whole product, one row at a time, into the local array `rows`: each row of B is read along
 * its length and added into the row, which the compiler may keep in registers across k, as
 * it does for a product of one row at a plain size (a tile's accumulators over blocks of B's
 * columns, read with B's long stride, ran 1.25 times that). k runs in order, as in the tiles. */
static void emit_few_rows(ctx *c, const nest *ne, const char *KS, const char *I, const char *few,
                          const char *rows)
{
    int et = ne->outs[0].value->etype, ti = ne->tile_i;
    long long J = ne->dims[2];
    const char *T = em_ctype(et), *kv = c->var[1];
    const fx *a = ne->tile_a, *b = ne->tile_b;
    em_ref(c, a->buf);
    em_ref(c, b->buf);
    em_line(c, "const int %s = %s < %d;", few, I, ti);
    em_line(c, "%s %s[%lld];", T, rows, (long long)ti * J);
    em_line(c, "if (%s) {", few);
    c->indent++;
    em_line(c, "for (int64_t ii = 0; ii < %s; ii++) {", I);
    c->indent++;
    em_line(c, "%s *restrict nest_r = %s + ii * %lld;", T, rows, J);
    em_line(c, "for (int64_t jj = 0; jj < %lld; jj++)", J);
    em_line(c, "    nest_r[jj] = 0;");
    em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", kv, kv, KS, kv);
    c->indent++;
    em_line(c, "const %s *restrict nest_br = %s + %lld + %s * %lld;", T, c->bufname[b->buf],
            (long long)b->off, kv, (long long)b->st[1]);
    em_line(c, "const %s nest_a = %s[%lld + ii * %lld + %s * %lld];", T, c->bufname[a->buf],
            (long long)a->off, (long long)a->st[0], kv, (long long)a->st[1]);
    em_line(c, "for (int64_t jj = 0; jj < %lld; jj++)", J);
    em_line(c, "    nest_r[jj] = nest_r[jj] + %s;",
            ne->a_first ? "nest_a * nest_br[jj]" : "nest_br[jj] * nest_a");
    for (int close = 0; close < 3; close++) {
        c->indent--;
        em_line(c, "}");
    }
}

/* A product of matrices tiled by tile.c: for each block of TJ columns, B's panel is packed;
 * for each block of TI rows, the block of the product accumulates in registers over k; then
 * the block leaves through the absorbed element-wise outputs (and the product's own store).
 * Batch axes (a batch_dot's) run outside: in parallel when there are several and the panel fits
 * a local array of each thread, else one after the other. A product worth several cores
 * (tile_par) runs one parallel region: every panel packed (one thread each), then the tiles. A
 * product of few blocks of rows (b_direct) packs nothing: its tiles read B where it lies, the
 * blocks of columns in parallel when it is worth it. */
void em_tiled(ctx *c, int32_t k)
{
    const nest *ne = &c->p->nests[k];
    const nout *prod = &ne->outs[0];
    int et = prod->value->etype, ti = ne->tile_i, tj = ne->tile_j, nb = ne->rank - 3;
    int brows = ne->tile_rows; /* a block's */
    long long J = ne->dims[nb + 2];
    /* the summed K may be symbolic (x^T . g sums over a batch): its C, and a panel of K rows
     * in the workspace placed at run time */
    int64_t K = ne->dims[nb + 1];
    char *Ks = em_dim_text(c, K);
    const char *KS = Ks ? Ks : "0";
    /* the rows I may be symbolic: their blocks are counted at run time */
    int64_t I = ne->dims[nb];
    bool Isym = dim_is_sym(I);
    char *Is = em_dim_text(c, I);
    const char *T = em_ctype(et);
    bool direct = ne->b_direct, packed = ne->b_packed;
    bool local_panel = ne->pack < 0 && !direct && !packed;
    bool par_batch = local_panel && c->p->opts->openmp && em_nest_work(ne) >= PAR_MIN_MACS;
    /* B read in place: the blocks of columns are independent, so they go in parallel */
    bool par_cols = direct && c->p->opts->openmp && em_nest_work(ne) >= PAR_MIN_MACS && J > tj;
    const nout *stream = stream_target(ne);
    em_nest_start(c, k);
    em_line(c, "/* in tiles of %d x %d held in registers over the %s-long sum, the second factor", ti,
         tj, KS);
    if (direct)
        em_line(c, " * read in place %d columns at a time%s */", tj,
                par_cols ? ", the blocks of columns in parallel" : "");
    else if (ne->b_direct_rt)
        em_line(c, " * read in place %d columns at a time up to %d rows, else packed */", tj,
                ti * TILE_DIRECT_BLOCKS);
    else if (packed)
        em_line(c, " * a constant packed ahead of time, %d columns a panel%s */", tj,
                ne->tile_par ? "; the tiles in parallel" : "");
    else
        em_line(c, " * packed %d columns at a time%s */", tj,
                par_batch      ? "; the products of the batch in parallel"
                : ne->b_shared && ne->tile_par ? "; all of it once for the batch, then the tiles, in parallel"
                : ne->b_shared     ? "; all of it once for the batch, then the tiles"
                : ne->tile_par && ne->tile_rowwise ? "; all of it, then the tiles row by row, in parallel"
                : ne->tile_par     ? "; the panels, then the tiles, in parallel"
                : ne->tile_rowwise ? "; all of it, then the tiles row by row"
                                   : "");
    if (brows != ti)
        em_line(c, "/* blocks of %d rows: the transposed result's stores fill cache lines */", brows);
    em_nest_enter(c, k);
    const char *panel = em_unique(&c->local, "panel");
    if (packed) {
        em_ref(c, ne->tile_b->buf);
        em_line(c, "const %s *restrict %s = %s;", T, panel, c->bufname[ne->tile_b->buf]);
    } else if (!local_panel && !direct) {
        em_ws_pointer(c, ne->pack, panel);
    }
    for (int d = 0; d < nb; d++) {
        char v[16];
        snprintf(v, sizeof v, "b%d", d);
        c->var[d] = c->expr[d] = em_unique(&c->local, v);
    }
    const char *i0 = em_unique(&c->local, "i0"), *kv = em_unique(&c->local, "k"),
               *j0 = em_unique(&c->local, "j0"), *nj = em_unique(&c->local, "nj");
    c->var[nb] = i0;
    c->var[nb + 1] = kv;
    c->var[nb + 2] = j0;
    if (par_batch)
        em_omp_for(c);
    /* the batch axes (they may be symbolic): in parallel, one loop over their product whose
     * index splits */
    const char *bflat = NULL;
    if (par_batch && nb > 1) {
        bflat = em_unique(&c->local, "b");
        buf all = {0};
        for (int d = 0; d < nb; d++) {
            buf_puts(&all, d ? " * " : "");
            em_dim(c, &all, ne->dims[d]);
        }
        char *alls = em_finish(c, &all);
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", bflat, bflat, alls ? alls : "0", bflat);
        free(alls);
        c->indent++;
        for (int d = 0; d < nb; d++) { /* b / (the extents inside d) % extent d */
            buf ix = {0};
            buf_printf(&ix, "const int64_t %s = %s", c->var[d], bflat);
            for (int e = d + 1; e < nb; e++) {
                buf_puts(&ix, " / ");
                em_dim(c, &ix, ne->dims[e]);
            }
            buf_puts(&ix, " % ");
            em_dim(c, &ix, ne->dims[d]);
            char *ixs = em_finish(c, &ix);
            em_line(c, "%s;", ixs ? ixs : "");
            free(ixs);
        }
    } else if (!ne->b_shared) { /* (shared: the batch runs inside the tiles' loop) */
        for (int d = 0; d < nb; d++) {
            char *ext = em_dim_text(c, ne->dims[d]);
            em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", c->var[d], c->var[d],
                    ext ? ext : "0", c->var[d]);
            free(ext);
            c->indent++;
        }
    }
    if (local_panel)
        em_line(c, "%s %s[%lld];", T, panel, (long long)K * tj); /* K is plain (tile.c) */
    if (ne->tile_par || ne->tile_rowwise || ne->b_shared) {
        /* the panels of every block of columns, then the tiles: j-major (a thread's tiles
         * read the panels it packed when the blocks divide evenly), or row by row
         * (tile_rowwise); on several cores, one parallel region. I and K are plain (tile.c).
         * B shared by a batch of products: the panels once, then the tiles of every product,
         * each block of columns across the batch (its panel stays in cache) */
        long long jblocks = (J + tj - 1) / tj, iblocks = (I + brows - 1) / brows, nbatch = 1;
        for (int d = 0; d < nb && ne->b_shared; d++)
            nbatch *= (long long)ne->dims[d];
        const char *jb = em_unique(&c->local, "jb"), *t = em_unique(&c->local, "t"),
                   *pj = em_unique(&c->local, "pj");
        char tjs[16];
        snprintf(tjs, sizeof tjs, "%d", tj);
        if (ne->tile_par)
            em_omp_region(c);
        em_line(c, "{");
        c->indent++;
        if (!packed) {
            if (ne->tile_par)
                emit_omp_for_static(c);
            em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", jb, jb, jblocks, jb);
            c->indent++;
            em_line(c, "const int64_t %s = %s * %d;", j0, jb, tj);
            emit_block_cols(c, ne, nj);
            em_line(c, "%s *restrict %s = %s + %s * %lld;", T, pj, panel, jb, (long long)K * tj);
            emit_pack_panel(c, ne, KS, pj, nj);
            c->indent--;
            em_line(c, "}");
        }
        if (ne->tile_par)
            emit_omp_for_static(c);
        /* the sum in blocks of k: a group of products (from g, gn of them) at a time, every
         * block of columns on one block of k (from kb, kn long) before the next, the partial
         * sums of the group's tiles (one block each, t's) after the panels */
        long long kblock = ne->k_block, kgroup = ne->k_group;
        const char *g = NULL, *gn = NULL, *kb = NULL, *kn = NULL, *part = NULL;
        char tiles[96], partk[96], more[96], krows[64] = "", next_if[96] = "", next_off[96] = "";
        snprintf(tiles, sizeof tiles, "%lld", nbatch * jblocks * iblocks);
        if (kblock) {
            g = em_unique(&c->local, "g"), gn = em_unique(&c->local, "gn");
            kb = em_unique(&c->local, "kb"), kn = em_unique(&c->local, "kn");
            part = em_unique(&c->local, "part");
            if (packed) /* (the panels are the constant's: the pack holds the sums alone) */
                em_ws_pointer(c, ne->pack, part);
            else
                em_line(c, "%s *restrict %s = %s + %lld;", T, part, panel, (long long)K * tj * jblocks);
            em_line(c, "for (int64_t %s = 0; %s < %lld; %s += %lld) {", g, g, nbatch, g, kgroup);
            c->indent++;
            em_line(c, "const int64_t %s = %lld - %s < %lld ? %lld - %s : %lld;", gn, nbatch, g,
                    kgroup, nbatch, g, kgroup);
            em_line(c, "for (int64_t %s = 0; %s < %lld; %s += %lld) {", kb, kb, (long long)K, kb, kblock);
            c->indent++;
            em_line(c, "const int64_t %s = %lld - %s < %lld ? %lld - %s : %lld;", kn, (long long)K,
                    kb, kblock, (long long)K, kb, kblock);
            snprintf(tiles, sizeof tiles, "%s * %lld", gn, jblocks * iblocks);
            snprintf(partk, sizeof partk, "%s + %s * %d", part, t, brows * tj);
            snprintf(more, sizeof more, "%s + %s < %lld", kb, kn, (long long)K);
            snprintf(krows, sizeof krows, " + %s * %d", kb, tj); /* the panel's rows from kb */
        }
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", t, t, tiles, t);
        c->indent++;
        if (ne->b_shared) { /* t: the block of columns, the product, the block of rows; with
                              * batch_outer the product, the block of columns, the block of rows */
            const char *bt = em_unique(&c->local, "bt");
            if (kblock) {
                em_line(c, "const int64_t %s = %s / (%s * %lld) * %d, %s = %s + %s / %lld %% %s, %s = %s %% %lld * %d;",
                        j0, t, gn, iblocks, tj, bt, g, t, iblocks, gn, i0, t, iblocks, brows);
                if (nb == 1) { /* the same rows of the next group's product */
                    snprintf(next_if, sizeof next_if, "%s + %s < %lld", bt, gn, nbatch);
                    snprintf(next_off, sizeof next_off, "%s * %lld", gn,
                             (long long)ne->tile_a->st[0]);
                }
            } else if (ne->batch_outer)
                em_line(c, "const int64_t %s = %s / %lld, %s = %s / %lld %% %lld * %d, %s = %s %% %lld * %d;",
                        bt, t, jblocks * iblocks, j0, t, iblocks, jblocks, tj, i0, t, iblocks, brows);
            else
                em_line(c, "const int64_t %s = %s / %lld * %d, %s = %s / %lld %% %lld, %s = %s %% %lld * %d;",
                        j0, t, nbatch * iblocks, tj, bt, t, iblocks, nbatch, i0, t, iblocks, brows);
            for (int d = 0; d < nb; d++) { /* bt / (the extents inside d) % extent d */
                long long inner = 1;
                for (int e = d + 1; e < nb; e++)
                    inner *= (long long)ne->dims[e];
                em_line(c, "const int64_t %s = %s / %lld %% %lld;", c->var[d], bt, inner,
                        (long long)ne->dims[d]);
            }
        } else if (ne->tile_rowwise)
            em_line(c, "const int64_t %s = %s / %lld * %d, %s = %s %% %lld * %d;", i0, t, jblocks,
                    brows, j0, t, jblocks, tj);
        else
            em_line(c, "const int64_t %s = %s / %lld * %d, %s = %s %% %lld * %d;", j0, t, iblocks,
                    tj, i0, t, iblocks, brows);
        emit_block_cols(c, ne, nj);
        em_line(c, "const %s *restrict %s = %s + %s / %d * %lld%s;", T, pj, panel, j0, tj,
                (long long)K * tj, krows);
        emit_last_block(c, ne, KS,
                        &(tile_src){pj, tjs, NULL, NULL, NULL, stream, kblock ? partk : NULL,
                                    kb, kn, more, next_if[0] ? next_if : NULL, next_off},
                        nj);
        for (int close = 0; close < (kblock ? 2 : 0); close++) { /* the groups, the blocks of k */
            c->indent--;
            em_line(c, "}");
        }
    } else {
        /* B read in place (direct; I, K and the batch are plain, tile.c): its rows k are its
         * stride along k apart, and a last block of fewer columns than a tile's takes the small
         * path (the micro-kernel would read past B's rows). Else packed, block by block, where
         * symbolic rows fewer than a tile's take the small path instead (packing all of B for
         * a row or two costs more than the product). Symbolic rows with B a plain load (rt)
         * choose at run time: in place up to TILE_DIRECT_BLOCKS blocks of rows, packed past
         * them, and fewer rows than a tile's computed whole first (few). */
        const fx *b = ne->tile_b;
        bool rt = ne->b_direct_rt;
        /* B in place (now or at run time): a last block of fewer columns; packed: fewer rows */
        bool has_small = direct || rt ? J % tj != 0 : Isym;
        const char *small = has_small ? em_unique(&c->local, "small") : NULL;
        /* rt: symbolic rows of at most TILE_DIRECT_BLOCKS blocks read B in place (as
         * b_direct), more pack it; the blocks of columns in parallel only in place (the
         * panel is one), and only if the rows can make the product worth it */
        const char *dir = rt ? em_unique(&c->local, "direct") : NULL;
        if (rt && J >= tj)
            em_line(c, "const int %s = %s <= %d;", dir, Is ? Is : "0", ti * TILE_DIRECT_BLOCKS);
        else if (rt) /* the tile would read past B's rows: in place only when computed whole */
            em_line(c, "const int %s = %s < %d;", dir, Is ? Is : "0", ti);
        if (small && !direct && !rt)
            em_line(c, "const int %s = %s < %d;", small, Is ? Is : "0", ti);
        const char *few = NULL, *rows = NULL;
        if (rt && tile_few_rows(ne)) {
            few = em_unique(&c->local, "few");
            rows = em_unique(&c->local, "rows");
            emit_few_rows(c, ne, KS, Is ? Is : "0", few, rows);
        }
        if (direct || rt)
            em_ref(c, b->buf);
        if (par_cols)
            em_omp_for(c);
        else if (rt && J >= tj && c->p->opts->openmp &&
                 (double)ti * TILE_DIRECT_BLOCKS * (double)K * (double)J >= (double)PAR_MIN_MACS) {
            buf w = {0};
            buf_printf(&w, "%s && %s * %lld >= %lld", dir, Is ? Is : "0", (long long)K * J,
                       (long long)PAR_MIN_MACS);
            char *cond = em_finish(c, &w);
            em_omp_for_if(c, cond);
            free(cond);
        }
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s += %d) {", j0, j0, J, j0, tj);
        c->indent++;
        emit_block_cols(c, ne, nj);
        char sp[64];
        const char *pb = panel;
        snprintf(sp, sizeof sp, "%d", tj);
        if (direct) {
            em_line(c, "const %s *restrict %s = %s + %lld + %s;", T, panel, c->bufname[b->buf],
                    (long long)b->off, j0);
            snprintf(sp, sizeof sp, "%lld", (long long)b->st[nb + 1]);
            if (small)
                em_line(c, "const int %s = %s < %d;", small, nj, tj);
        } else if (rt) {
            em_line(c, "if (!%s)", dir);
            emit_pack_panel(c, ne, KS, panel, nj);
            pb = em_unique(&c->local, "pb");
            em_line(c, "const %s *%s = %s ? %s + %lld + %s : %s;", T, pb, dir, c->bufname[b->buf],
                    (long long)b->off, j0, panel);
            snprintf(sp, sizeof sp, "(%s ? %lld : %d)", dir, (long long)b->st[nb + 1], tj);
            if (small)
                em_line(c, "const int %s = %s && %s < %d;", small, dir, nj, tj);
        } else if (packed) { /* (the rows are known: no small path) */
            pb = em_unique(&c->local, "pb");
            em_line(c, "const %s *restrict %s = %s + %s / %d * %lld;", T, pb, panel, j0, tj,
                    (long long)K * tj);
        } else {
            if (small)
                em_line(c, "if (!%s)", small);
            emit_pack_panel(c, ne, KS, panel, nj);
        }
        em_line(c, "for (int64_t %s = 0; %s < %s; %s += %d) {", i0, i0, Is ? Is : "0", i0, brows);
        c->indent++;
        emit_last_block(c, ne, KS,
                        &(tile_src){pb, sp, small, few, rows, stream, NULL, NULL, NULL, NULL, NULL, NULL},
                        nj);
    }
    free(Is);
    free(Ks);
    for (int close = 0; close < (bflat ? 1 : ne->b_shared ? 0 : nb); close++) {
        c->indent--;
        em_line(c, "}");
    }
    em_nest_close(c);
}
