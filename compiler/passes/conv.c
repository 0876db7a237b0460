/*
 * conv.c - convolution and pooling nests: their plans, and the element-wise work absorbed into
 * their stores.
 *
 * A convolution runs in the direct form, as a product of matrices whose rows are output
 * channels and whose columns are output positions. The input is copied once into *planes*
 * (zero-padded, dilated, and split by the phase of the stride along each axis), laid out so that
 * every tap of the window reads a run of consecutive positions: output position o (a
 * multi-index) is q = sum o_i * qst[i], and tap t of channel c reads the copy at
 * c * cstride + conv_tapoff(t) + q. A register tile holds, in one of two forms:
 *   - positions in lanes: `ti` output channels by `nv` vectors of consecutive positions while
 *     the sum runs over the input channels of the group and the taps; the filters are read in
 *     place (a broadcast of one weight per channel and tap), the input as whole vectors.
 *     Positions of the planes' margins are computed too and never stored (a 56-wide row padded
 *     to 58 spends 2 of 58 lanes);
 *   - channels in lanes: `ti` positions by `nv` vectors of output channels; the filters are
 *     packed once per call into panels of a tile's channels (ahead of time when they are a
 *     constant that nothing else reads: prepack.c), the input broadcast. No margin is
 *     computed: on small images (7x7: 49 positions of 61 in the planes, 64 lanes) the packing
 *     pays for itself once a batch has a few images.
 * When nothing needs padding, dilating or splitting and x is a dense buffer, x is read in place
 * (a 1x1 convolution is then a plain product; fuse.c lowers those whose positions fill at
 * least three quarters of the columns of tile.c's tiles as products of matrices, and only the
 * others come here). The form and the tile's shape are those that
 * take the fewest cycles by a small model: the lanes computed, the FMA units' latency, the
 * loads per FMA, the store and the packing.
 *
 * A pooling nest loops over the output and its window directly; its input may be any
 * element-wise expression (an activation before it is computed there, never stored).
 *
 * The pass: the element-wise nest right after a convolution or pooling nest, over the same
 * space, that reads its value only where it is written (a bias, a batch norm's scale and shift,
 * a residual, an activation) is absorbed into its store, and the value itself is stored only if
 * something else reads it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The images a symbolic batch is planned for: a few, as a server's batches are (the filters'
 * pack, once per call, then weighs as it would for 8 images; a batch of 1 pays it whole). */
#define CONV_SYM_BATCH 8

/* Cycles an element of the filters takes to pack, as measured (Zen 5, 512 channels' 3x3
 * filters): by squares of a vector's lanes (whole panels), and element by element (the rest). */
#define CONV_PACK_SQUARES 1.1
#define CONV_PACK_ELEMENTS 5.6

/* The dense form's copy of one image (and group) takes at most this many bytes: it is read
 * again by every tile of output channels, from the second-level cache (512 channels at 7x7:
 * 9 taps x 49 positions a channel, 903 KB). */
#define CONV_DENSE_BYTES (1024 * 1024)

/* The dense form's sum runs over blocks of input channels whose copy takes at most this many
 * bytes: a block stays in the second-level cache while every tile of output channels reads it,
 * and each tile's filters for the block stay there for its tail (512 channels at 7x7: 4 blocks
 * of 128). */
#define CONV_DENSE_BLOCK (256 * 1024)

/* On several cores the dense form splits its input channels into this many chunks (their
 * partial sums a set each in the workspace), in parallel: a chunk's thread copies its channels
 * and reads them from its own cache, where a parallel loop over the tiles read half of every
 * block from the other core's (512@7x7 for one image on two threads: 0.57 -> 0.52 ms a call).
 * A number of chunks fixed here, not the number of threads, keeps the result the same on any
 * number of threads; 8 serves up to 8 cores (on two, 2% slower than 2 chunks). */
#define CONV_DENSE_SPLITS 8

/* Cycles per step of the sum for a tile of ti rows by nv vectors: one FMA per accumulator, at
 * least 8 accumulators' worth (the FMA units' latency), and a quarter cycle per load (ti
 * broadcasts and nv vectors: a tall thin tile loads more per FMA). */
static double step_cycles(int ti, int nv) { return (ti * nv > 8 ? ti * nv : 8) + (ti + nv) / 4.0; }

/* The positions that the dense form computes with the sum in the lanes (its tail): the last
 * p % lanes when they are at most a quarter of a vector (1 of 49 at 7x7), else none. */
static int64_t dense_tail(const wplan *w, int lanes)
{
    int64_t r = w->p % lanes;
    return lanes >= 4 && r * 4 <= lanes ? r : 0;
}

/* Whether the dense form may compute the convolution: positions in lanes over a copy of its own
 * (not in place, one group, one image) of at most CONV_DENSE_BYTES, with a vector's positions
 * or more. With a batch, the channels in lanes pack the filters once for all the images, where
 * the dense form would read them from beyond the cache once per image (512@7x7 for 8 images,
 * one core: 13.5 ms in the dense form before its blocks of channels, 11.9 packed). */
static bool dense_fits(const wplan *w, int etype, int lanes)
{
    double bytes = (double)w->C * (double)w->taps * (double)w->p *
                   (double)nest_type_size((nest_type)etype);
    for (int i = 0; i < w->win->nsp; i++)
        if (w->d[i] < 1) /* (an input of no elements: the planes' copy writes zeros alone) */
            return false;
    return !w->in_place && w->G == 1 && w->N == 1 && w->C >= 1 &&
           w->p >= lanes && bytes <= CONV_DENSE_BYTES;
}

/* The dense form: the planes become one run of the output positions per tap (see wplan). */
static void make_dense(wplan *w, int64_t tail, int etype)
{
    int nsp = w->win->nsp;
    int64_t after = 1; /* taps of the axes after axis i */
    double bytes = (double)w->taps * (double)w->p * (double)nest_type_size((nest_type)etype);
    int64_t blocks = (int64_t)((double)w->C * bytes / CONV_DENSE_BLOCK) + 1;
    w->cblock = ceil_div(w->C, blocks < w->C ? blocks : w->C);
    w->dense = true;
    w->tail = tail;
    w->plane = w->p;
    w->cstride = w->taps * w->p;
    w->q = w->p - tail;
    w->maxoff = (w->taps - 1) * w->p;
    int64_t s = 1; /* output positions of the axes after axis i */
    for (int i = nsp - 1; i >= 0; i--) {
        w->hq[i] = w->o[i];
        w->qst[i] = s;
        s *= w->o[i];
        for (int64_t f = 0; f < w->win->window[i]; f++)
            w->axoff[i][f] = f * after * w->p;
        after *= w->win->window[i];
    }
}

/* The register tile of a convolution, in the form that computes it in the fewest cycles:
 * - positions in lanes: ti output channels by nv vectors of consecutive positions (the planes'
 *   margins computed too), the filters read in place;
 * - channels in lanes: ti output positions by nv vectors of output channels, the filters packed
 *   once per call so that each tap's channels are consecutive (no margin is computed: it wins
 *   on small images, 7x7 and 14x14, where the margins and a partial vector cost a quarter of
 *   the lanes).
 * Costs are cycles of the whole convolution: tiles x (steps x cycles per step + the store).
 * Constant filters (const_filters) are packed ahead of time: their pack costs nothing. */
static void choose_tile(wplan *w, int etype, int vb, bool const_filters)
{
    int lanes = vb / (int)nest_type_size((nest_type)etype);
    /* (constant filters, packed ahead of time, are read by the channels in lanes from the
     * cache: 512@7x7 for one image 1.18 ms on one core and 0.60 on two, the dense form 1.34
     * and 0.84) */
    bool try_dense = dense_fits(w, etype, lanes) && !const_filters, dense = false;
    int64_t tail = try_dense ? dense_tail(w, lanes) : 0;
    /* vector accumulators: with 32 registers, 24 leave room for the tile's 4 vectors of filters
     * (or input) and a broadcast; with 16, 12 */
    int budget = vb >= 64 ? 24 : 12;
    int64_t kg = w->G ? w->K / w->G : 0, cg = w->G ? w->C / w->G : 0;
    /* a symbolic batch is costed as CONV_SYM_BATCH images */
    double steps = (double)cg * (double)w->taps, best[2] = {-1, -1};
    int bti[2] = {1, 1}, bnv[2] = {1, 1};
    double images = (double)(dim_is_sym(w->N) ? CONV_SYM_BATCH : w->N) * (double)w->G;
    w->lanes = lanes;
    w->vb = vb;
    for (int form = 0; form < 2; form++)
        for (int nv = 1; nv <= 4; nv++)
            for (int ti = 1; ti * nv <= budget; ti++) {
                double tiles, cost;
                bool cand_dense = false;
                if (form == 0) {
                    if (ti > kg && ti > 1)
                        break;
                    double cols = (double)ceil_div(w->q, (int64_t)nv * lanes);
                    tiles = (double)ceil_div(kg, ti) * cols;
                    cost = tiles * (steps * step_cycles(ti, nv) + 16.0 * ti * nv);
                    if (kg % ti) /* the last channels' tiles run the general loop */
                        cost += cols * steps * step_cycles(ti, nv) * 2;
                    if (try_dense) {
                        /* no margins; the tail's sums a vector of taps at a time, 4 output
                         * channels by `tail` positions; the copy an element a cycle */
                        double dc = (double)ceil_div(w->p - tail, (int64_t)nv * lanes), dcost;
                        dcost = (double)ceil_div(kg, ti) * dc *
                                    (steps * step_cycles(ti, nv) + 16.0 * ti * nv) +
                                (double)ceil_div(kg, 4) * (steps / lanes + 1) *
                                    step_cycles(4, (int)tail) +
                                steps * (double)w->p;
                        if (kg % ti)
                            dcost += dc * steps * step_cycles(ti, nv) * 2;
                        cand_dense = dcost < cost * 0.97;
                        cost = cand_dense ? dcost : cost;
                    }
                } else {
                    /* ti positions, each a pointer of its own: at most 10 (general registers) */
                    if (ti > 10 || (ti > w->p && ti > 1) || kg < 1)
                        break;
                    tiles = (double)ceil_div(w->p, ti) * (double)ceil_div(kg, (int64_t)nv * lanes);
                    /* each step reads nv vectors of the packed filters, which come from the
                     * third-level cache when a tile's panel is past half the second (a cycle
                     * a cache line); the store goes by position (a division each); the pack
                     * transposes every filter, by squares where a panel is whole */
                    double panel = steps * (double)nv * vb;
                    double l3 = panel > L2_HALF ? nv * vb / 64.0 : 0;
                    double pack = const_filters                               ? 0
                                  : kg >= (int64_t)nv * lanes && steps >= lanes ? CONV_PACK_SQUARES
                                                                                : CONV_PACK_ELEMENTS;
                    cost = tiles * (steps * (step_cycles(ti, nv) + l3) + 4.0 * ti * nv * lanes) +
                           pack * (double)w->K * steps / images;
                }
                cost *= images;
                if (best[form] < 0 || cost < best[form] ||
                    (cost == best[form] && ti * nv > bti[form] * bnv[form])) {
                    best[form] = cost;
                    bti[form] = ti;
                    bnv[form] = nv;
                    dense = form == 0 ? cand_dense : dense;
                }
            }
    /* the channels in lanes must win by 3%: the model of their pack and of their store by
     * position is the rougher (before, the margin was 5% and held against the best tile of
     * either form: the first with channels in lanes that passed it could stay chosen over a
     * cheaper one) */
    int form = best[1] >= 0 && (best[0] < 0 || best[1] < best[0] * 0.97);
    w->ti = bti[form];
    w->nv = bnv[form];
    w->by_channels = form == 1;
    if (!w->by_channels && dense)
        make_dense(w, tail, etype);
    int64_t tj = (int64_t)w->nv * lanes, ktiles, ptiles;
    if (w->by_channels) { /* each group's channels padded to whole tiles in the packed filters */
        w->kpad = ceil_div(kg, tj) * tj;
        ktiles = w->kpad / tj;
        ptiles = ceil_div(w->p, w->ti);
    } else {
        ktiles = ceil_div(kg, w->ti);
        ptiles = ceil_div(w->q, tj);
    }
    /* The order of the tiles: the bytes read from beyond the cache are about the filters once
     * per tile of positions (the channels' tiles innermost), or the input once per tile of
     * channels (the positions' innermost). When the filters stay in half the second-level
     * cache and an image's input does not, the channels' tiles run innermost: the filters
     * then come from beyond it once, where the input would come once per tile of channels
     * (the 7x7 stem: 38 KB of filters beside 635 KB of planes, 5% faster). */
    double filters = (double)kg * steps, input = (double)cg * (double)w->cstride;
    double es = (double)nest_type_size((nest_type)etype);
    if (filters * es <= L2_HALF && input * es > L2_HALF)
        w->filters_outer = false;
    else
        w->filters_outer = filters * (double)ptiles > input * (double)ktiles;
    /* With the filters packed, the images may run inside each tile of channels: its packed
     * filters then come from beyond the cache once per call instead of once per image, and
     * the images' planes once per tile of channels instead of once (512 channels at 7x7,
     * batch 8: 9.4 MB of packed filters a call against 1.3 MB of planes; 1.4x faster). */
    double n = (double)w->N;
    w->images_inner = w->by_channels && w->filters_outer && !dim_is_sym(w->N) && w->N > 1 &&
                      filters + (double)ktiles * n * input < n * (filters + input);
}

/* The positions that one run of tiles covers: an output row with row_tiles, else the planes. */
static int64_t run_positions(const wplan *w) { return w->row_tiles ? w->o[1] : w->q; }

int64_t conv_position_tiles(const wplan *w)
{
    int64_t tiles = ceil_div(run_positions(w), (int64_t)w->nv * w->lanes);
    return w->row_tiles ? w->o[0] * tiles : tiles;
}

int conv_edge_vectors(const wplan *w)
{
    int64_t tj = (int64_t)w->nv * w->lanes, run = run_positions(w);
    int nv = (int)ceil_div(run % tj, w->lanes);
    double all = (double)ceil_div(run, tj) * w->nv;
    return !w->by_channels && nv < w->nv && (w->nv - nv) >= 0.01 * all ? nv : 0;
}

/* Tiles of positions along each output row when they compute fewer vectors than along the
 * planes, whose tiles run through the margins between rows (the 7x7 stem: rows of 112 as 48,
 * 48 and 16, 784 vectors an image and channel tile against 807 in tiles of 48 over 12,877
 * positions). Each tile's stores then lie in one row of the result. */
static void choose_row_tiles(wplan *w)
{
    /* (a row's pieces, the last of the vectors it needs: the vectors that cover the row) */
    double rows = (double)w->o[0] * (double)ceil_div(w->o[1], w->lanes),
           planes = (double)ceil_div(w->q, (int64_t)w->nv * w->lanes) * w->nv;
    w->row_tiles = w->win->nsp == 2 && !w->by_channels && !w->in_place && !w->dense &&
                  rows < planes;
}

/* Whether e is a load of a dense row-major tensor of `shape` (any offset). */
static bool dense_load(const fx *e, int rank, const int64_t *shape)
{
    if (e->kind != FX_LOAD || e->rank != rank)
        return false;
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (shape[i] != 1 && e->st[i] != s)
            return false;
        if (i > 0) /* (axis 0 may be a symbolic batch: no stride after it) */
            s *= shape[i];
    }
    return true;
}

/* Records that node's window or planes are over a limit: what, with the filters' type. */
static bool window_limit(plan *p, int32_t node, const char *what)
{
    const nest_function *f = p->f;
    buf b = {0};
    ir_format_type(&b, f, ir_resolve(f, f->nodes[node].in[1]));
    char *t = buf_finish(&b);
    plan_limit(p, "convolution (filters %s): %s", t ? t : "?", what);
    free(t);
    return false;
}

int64_t conv_tapoff(const wplan *w, int64_t t)
{
    int64_t off = 0;
    for (int i = w->win->nsp - 1; i >= 0; i--) {
        off += w->axoff[i][t % w->win->window[i]];
        t /= w->win->window[i];
    }
    return off;
}

/* The planes of the direct form: phases, extents, tap offsets; and whether x is read in place.
 * False when out of memory, or (p->status says which) over a limit. */
static bool plan_planes(plan *p, wplan *w, const ir_node *xn)
{
    const ir_window *win = w->win;
    int nsp = win->nsp;
    bool trivial = true;
    char what[160];
    w->taps = 1;
    for (int i = 0; i < nsp; i++) {
        int64_t s = win->stride[i], f = win->window[i], dil = win->dilation[i];
        if (f > CONV_MAX_WINDOW) {
            snprintf(what, sizeof what,
                     "its window has %lld taps along spatial axis %d, more than the %d the "
                     "generated code takes",
                     (long long)f, i, CONV_MAX_WINDOW);
            return window_limit(p, w->node, what);
        }
        w->taps *= f; /* below 2^62: checked when the node was built */
        /* the phases (tap * dilation) mod stride that taps use, ascending */
        int64_t n = f < s ? f : s;
        w->ph[i] = arena_array(p->a, (size_t)n + 1, sizeof(int64_t));
        if (!w->ph[i])
            return false;
        w->nph[i] = 0;
        /* tap t's phase repeats with t + s: the first n taps give them all (a window of 2^16
         * taps at stride 1 has one phase, found at once) */
        int64_t step = dil % s, ph = -step;
        for (int64_t t = 0; t < n; t++) {
            ph = ph + step >= s ? ph + step - s : ph + step;
            int j = 0;
            while (j < w->nph[i] && w->ph[i][j] < ph)
                j++;
            if (j < w->nph[i] && w->ph[i][j] == ph)
                continue;
            memmove(w->ph[i] + j + 1, w->ph[i] + j, (size_t)(w->nph[i] - j) * sizeof(int64_t));
            w->ph[i][j] = ph;
            w->nph[i]++;
        }
        w->hq[i] = w->o[i] + (f - 1) * dil / s;
        trivial &= s == 1 && win->data_dilation[i] == 1 && win->pad_below[i] == 0 &&
                   win->pad_above[i] == 0;
    }
    /* the planes hold the padded and dilated input: huge padding makes them too large to
     * address, however small x is */
    int64_t nplanes = 1;
    bool over = false;
    w->plane = 1;
    for (int i = nsp - 1; i >= 0; i--) {
        w->qst[i] = w->plane;
        over |= mul_overflows(w->plane, w->hq[i], &w->plane);
        nplanes *= w->nph[i];
    }
    if (over || mul_overflows(w->plane, nplanes, &w->cstride) || w->cstride >= IR_MAX_BYTES / 8)
        return window_limit(p, w->node, "the padded and dilated input is too large to copy "
                                        "(2^59 elements or more per channel)");
    w->q = w->p = 1;
    for (int i = 0; i < nsp; i++) {
        w->q += (w->o[i] - 1) * w->qst[i];
        w->p *= w->o[i];
    }
    /* each axis' part of the taps' offsets: the row of its phase's planes, the plane's row */
    int64_t scale = 1; /* planes per phase of axis i: those of the axes after it */
    w->maxoff = 0;
    for (int i = nsp - 1; i >= 0; i--) {
        w->axoff[i] = arena_array(p->a, (size_t)win->window[i], sizeof(int64_t));
        if (!w->axoff[i])
            return false;
        int64_t most = 0;
        for (int64_t f = 0; f < win->window[i]; f++) {
            int64_t u = f * win->dilation[i];
            int k = 0;
            while (w->ph[i][k] != u % win->stride[i])
                k++;
            w->axoff[i][f] = u / win->stride[i] * w->qst[i] + k * scale * w->plane;
            most = w->axoff[i][f] > most ? w->axoff[i][f] : most;
        }
        w->maxoff += most;
        scale *= w->nph[i];
    }
    w->in_place = trivial && dense_load(w->x, xn->rank, xn->shape);
    if (w->in_place) {
        w->xbuf = w->x->buf;
        w->xoff = w->x->off;
    }
    return true;
}

fx *conv_as_product(plan *p, int32_t node, const fx *x, const fx *filters, int64_t *dims)
{
    const nest_function *f = p->f;
    const ir_node *n = &f->nodes[node], *xn = &f->nodes[ir_resolve(f, n->in[0])];
    const ir_node *wn = &f->nodes[ir_resolve(f, n->in[1])];
    const ir_window *win = n->a.win;
    int nsp = win->nsp, r = n->rank + 1;
    int64_t P = 1, C = xn->shape[1], K = n->shape[1];
    for (int i = 0; i < nsp; i++) {
        if (win->window[i] != 1 || win->stride[i] != 1 || win->data_dilation[i] != 1 ||
            win->pad_below[i] != 0 || win->pad_above[i] != 0)
            return NULL;
        P *= n->shape[2 + i];
    }
    int ti, tj;
    tile_shape(n->etype, tile_vector_bytes(p->opts), &ti, &tj);
    /* the columns the tiles compute: at most a quarter of them wasted (7x7 and 14x14 waste
     * 23% of 64-wide tiles and still run faster as products than in the direct form) */
    int64_t cols = (P + tj - 1) / tj * tj;
    /* (a symbolic batch goes to the direct form, which counts its images at run time) */
    if (win->groups != 1 || K < 2 || P < 2 || C < 1 || dim_is_sym(n->shape[0]) ||
        n->shape[0] < 1 || cols * 3 > P * 4 ||
        !dense_load(x, xn->rank, xn->shape) || x->nargs || x->buf < 0 ||
        !dense_load(filters, wn->rank, wn->shape) || filters->nargs || filters->buf < 0)
        return NULL;
    /* [N, K, o.., C]: w[k, c] ignores the image and the positions, x[n, c, o..] the channel k */
    int64_t stw[NEST_MAX_RANK + 1] = {0}, stx[NEST_MAX_RANK + 1] = {0}, s = 1;
    for (int i = nsp - 1; i >= 0; i--) {
        stx[2 + i] = s;
        s *= xn->shape[2 + i];
    }
    stx[0] = s * C;
    stx[r - 1] = s;
    stw[1] = C;
    stw[r - 1] = 1;
    memcpy(dims, n->shape, (size_t)n->rank * sizeof *dims);
    dims[r - 1] = C;
    fx *args[2] = {fx_load(p, filters->buf, filters->off, r, stw, -1),
                   fx_load(p, x->buf, x->off, r, stx, -1)};
    return args[0] && args[1] ? fx_op(p, OP_MULTIPLY, n->etype, 2, args, node) : NULL;
}

bool conv_plan(plan *p, nest *ne, int32_t node, fx *x, fx *filters)
{
    const nest_function *f = p->f;
    const ir_node *n = &f->nodes[node], *xn = &f->nodes[ir_resolve(f, n->in[0])];
    wplan *w = arena_alloc(p->a, sizeof *w);
    if (!w) {
        p->status = NEST_ERR_NOMEM;
        return false;
    }
    w->node = node;
    w->win = n->a.win;
    w->x = x;
    w->N = xn->shape[0];
    w->C = xn->shape[1];
    w->K = n->shape[1];
    w->G = n->a.win->groups;
    for (int i = 0; i < IR_MAX_SPATIAL; i++)
        w->d[i] = w->o[i] = 1;
    for (int i = 0; i < w->win->nsp; i++) {
        w->d[i] = xn->shape[2 + i];
        w->o[i] = n->shape[2 + i];
    }
    w->wbuf = w->xbuf = -1;
    w->by_channels = w->prepacked = w->dense = false;
    w->tail = w->tailoff = w->cblock = w->partoff = w->splits = w->setsize = 0;
    ne->win = w;
    if (n->op != OP_CONVOLUTION)
        return true;
    w->wbuf = filters->buf;
    w->woff = filters->off;
    if (!plan_planes(p, w, xn)) {
        if (!p->status)
            p->status = NEST_ERR_NOMEM;
        return false;
    }
    /* filters that are a whole constant may be packed ahead of time (pass_conv decides, once it
     * knows that nothing else reads them; when something does, they are packed per call) */
    choose_tile(w, n->etype, tile_vector_bytes(p->opts),
                prepack_whole(p, filters->buf, filters->off));
    choose_row_tiles(w);
    /* the planes of one image and group, with the slack of the last tile */
    double bytes = ((double)(w->C / w->G) * (double)w->cstride + (double)(w->nv * w->lanes)) *
                   (double)nest_type_size((nest_type)n->etype);
    /* (a symbolic batch takes them when they fit: no copy of its size in the workspace) */
    w->local_planes = !w->in_place && !w->by_channels && !w->dense && bytes <= CONV_LOCAL_PLANES &&
                      (dim_is_sym(w->N) || w->N * w->G >= 8 || !p->opts->openmp);
    return true;
}

/* The workspace private to a convolution (made after fuse.c, which drops the temporaries no
 * expression reads): the copy of its input, with a tile's worth of slack (the last tile of
 * positions reads past the last plane), then its packed filters. With a symbolic batch the
 * copy's size is a dim (a temporary placed at run time), and so is packoff. */
static bool make_private(plan *p, nest *ne)
{
    wplan *w = ne->win;
    int64_t copy = 0, filters = 0, one = 0; /* one: the planes of one image */
    int64_t slack = (int64_t)w->nv * w->lanes;
    bool over = false;
    if (!w->in_place && !w->local_planes) {
        over = mul_overflows(w->C, w->cstride, &one);
        if (!over && dim_is_sym(w->N))
            over = (copy = dim_add(p->f, dim_mul(p->f, w->N, one), slack)) == DIM_NONE;
        else if (!over)
            over = mul_overflows(w->N, one, &copy) || add_overflows(copy, slack, &copy);
    }
    if (w->dense && !over) { /* the tail's copy; the tiles' partial sums, then the tails' */
        int64_t rows = ceil_div(w->K, w->ti) * w->ti, part = 0, tails = 0, sets = 0;
        double macs = (double)w->K * (double)w->C * (double)w->taps * (double)w->p;
        w->splits = p->opts->openmp && w->C >= 2 && macs >= (double)PAR_MIN_MACS
                        ? (w->C < CONV_DENSE_SPLITS ? w->C : CONV_DENSE_SPLITS)
                        : 1;
        w->tailoff = copy;
        over = add_overflows(copy, w->C * w->taps * w->tail, &copy); /* (at most 1 MiB) */
        w->partoff = copy;
        over = over ||
               mul_overflows(rows, conv_position_tiles(w) * w->nv * w->lanes, &part) ||
               mul_overflows(rows, w->tail, &tails) || add_overflows(part, tails, &w->setsize) ||
               mul_overflows(w->setsize, w->splits, &sets) || add_overflows(copy, sets, &copy);
    }
    if (w->by_channels && !w->prepacked)
        over |= mul_overflows(w->C, w->taps, &filters) ||
                mul_overflows(filters, w->kpad, &filters);
    w->packoff = copy;
    if (!over && dim_is_sym(copy))
        over = (copy = dim_add(p->f, copy, filters)) == DIM_NONE;
    else if (!over)
        over = add_overflows(copy, filters, &copy) || copy > IR_MAX_BYTES / 8;
    if (over)
        return window_limit(p, w->node, "its copy of the input and packed filters would take "
                                        "2^59 elements or more");
    if (copy == 0)
        return true;
    ne->pack = plan_buffer(p, BUF_TEMP, -1, w->node, w->x->etype, copy);
    return ne->pack >= 0;
}

void conv_describe(buf *b, const nest *ne)
{
    const wplan *w = ne->win;
    if (w->wbuf < 0) {
        buf_puts(b, "    (a pool: loops over the output and its window)\n");
        return;
    }
    if (w->by_channels)
        buf_printf(b, "    (direct: tiles of %d positions x %d channels, filters packed%s%s, ",
                   w->ti, w->nv * w->lanes, w->prepacked ? " ahead of time" : "",
                   w->images_inner ? ", images inside" : "");
    else
        buf_printf(b, "    (direct: tiles of %d channels x %d positions, %lld per image in ",
                   w->ti, w->nv * w->lanes, (long long)w->q);
    for (int i = 0; i < w->win->nsp; i++)
        buf_printf(b, "%s%lld", i ? " x " : "", (long long)w->hq[i]);
    if (w->in_place)
        buf_puts(b, " planes read in place)\n");
    else if (w->dense) {
        buf_printf(b, " positions x %lld taps per channel, copied into b%d; the sum in blocks of "
                      "%lld input channels",
                   (long long)w->taps, ne->pack, (long long)w->cblock);
        if (w->splits > 1)
            buf_printf(b, ", in %lld chunks over the threads", (long long)w->splits);
        buf_printf(b, "%s)\n", w->tail ? "; the last positions summed in the lanes" : "");
    } else if (w->local_planes)
        buf_printf(b, " planes x %lld per channel, copied per image and group into a local "
                      "array)\n",
                   (long long)(w->cstride / w->plane));
    else
        buf_printf(b, " planes x %lld per channel, copied into b%d)\n",
                   (long long)(w->cstride / w->plane), ne->pack);
}

/* ---- the pass: element-wise work absorbed into the store ---- */

/* Absorbs the element-wise nest after window nest k into its store, when it runs over the same
 * space and reads k's value only where k writes it. */
static bool absorb(plan *p, int32_t k, const int32_t *readers)
{
    nest *n = &p->nests[k];
    int32_t e = next_live_nest(p, k);
    if (e >= p->nnests)
        return true;
    nest *ep = &p->nests[e];
    if (ep->win || ep->special >= 0 || ep->reduced || ep->dot || ep->pack >= 0 ||
        ep->rank != n->rank ||
        memcmp(ep->dims, n->dims, (size_t)n->rank * sizeof *n->dims) != 0)
        return true;
    fx *vals[ep->nouts > 0 ? ep->nouts : 1];
    for (int i = 0; i < ep->nouts; i++) {
        if (ep->outs[i].reduce >= 0)
            return true;
        vals[i] = ep->outs[i].value;
    }
    /* the store runs over whole rows of positions: it cannot split at a concat's bounds */
    if (fx_has_concat(p, vals, ep->nouts, -1) ||
        !reads_only_view(p, &n->outs[0], n->rank, vals, ep->nouts))
        return p->status == NEST_OK;
    return nest_absorb(p, k, e, ep->outs, readers);
}

int pass_conv(plan *p)
{
    int32_t *readers = NULL;
    for (int32_t k = 0; k < p->nnests && !p->status; k++) {
        nest *ne = &p->nests[k];
        if (!ne->win || ne->dead)
            continue;
        if (ne->win->by_channels && p->bufs[ne->win->wbuf].kind == BUF_CONST &&
            (!(readers || (readers = nest_readers(p))) || !prepack_conv(p, ne, readers)))
            break;
        bool ok = ne->win->wbuf < 0 || make_private(p, ne);
        if (ok && p->opts->fuse) /* --no-fuse: every op keeps its nest */
            ok = (readers || (readers = nest_readers(p))) && absorb(p, k, readers);
        if (!ok && !p->status)
            p->status = NEST_ERR_NOMEM;
    }
    free(readers);
    return p->status;
}
