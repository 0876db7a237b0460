/*
 * emit_conv.c - convolutions and pools in C (plans of passes/conv.c).
 *
 * A convolution is three pieces: a static kernel per convolution (emit_conv_kernels.c) that
 * computes one register tile; the copy of the input into zero-padded planes (unless it is read
 * in place), or with the dense form into a run of the output positions per input channel and
 * tap; and the loop over the tiles, which calls the kernel and stores the tile's positions that
 * are outputs, through the absorbed element-wise outputs.
 *
 * A pool is a loop over the output and the window, clamped to the input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ---- pieces of the nests ---- */

/* A C name for the nest's own use, unique against the function's and the graph's. */
static const char *nm(ctx *c, const char *base) { return em_unique(&c->local, base); }

/* The C name of buffer b, noted as written into the C. */
static const char *bufname(ctx *c, int32_t b)
{
    em_ref(c, b);
    return c->bufname[b];
}

/* Whether a loop of `items` iterations of `per_item` work each is worth several cores: at
 * least `min` of it (PAR_MIN elements copied or visited, PAR_MIN_MACS multiply-adds of the
 * tiles; the work an estimate in double: a window's taps times its positions may pass int64). */
static bool parallel(const ctx *c, int64_t items, double per_item, int64_t min)
{
    return c->p->opts->openmp && items >= 2 && (double)items * per_item >= (double)min;
}

/* The same for N (the batch) times per_image items: for a symbolic batch, decided at run time
 * (em_omp_for's if() on the nest's size). */
static bool parallel_n(const ctx *c, int64_t N, int64_t per_image, double per_item, int64_t min)
{
    if (dim_is_sym(N))
        return c->p->opts->openmp;
    return parallel(c, N * per_image, per_item, min);
}

/* Whether the tiles of convolution w run in parallel (emit_tiles_by_positions' loop over all
 * the tiles, or emit_tiles_by_channels'). */
static bool tiles_parallel(const ctx *c, const wplan *w)
{
    int ti = w->ti, tj = w->nv * w->lanes;
    int64_t kg = w->K / w->G, cg = w->C / w->G;
    int64_t tiles = w->by_channels ? w->kpad / tj * ((w->p + ti - 1) / ti)
                                   : (kg + ti - 1) / ti * conv_position_tiles(w);
    return parallel_n(c, w->N, w->G * tiles, (double)ti * tj * cg * w->taps, PAR_MIN_MACS);
}

/* The elements from which the copy of the input and the pack of the filters go on several
 * cores: PAR_MIN, or an eighth of it when the tiles that follow run in parallel anyway (the
 * threads are up: 3x3 at 128 channels of 28x28, one image, two threads, 0.81 -> 0.73 ms). */
static int64_t prep_min(const ctx *c, const wplan *w)
{
    return tiles_parallel(c, w) ? PAR_MIN / 8 : PAR_MIN;
}

/* A count as C into s: the number, or for a symbolic one its expression (of the dims) in
 * parentheses; with per, the count times per. */
static void count_text(ctx *c, char *s, size_t n, int64_t count, int64_t per)
{
    if (!dim_is_sym(count)) {
        snprintf(s, n, "%lld", (long long)(count * per));
        return;
    }
    char *d = em_dim_text(c, count);
    if (per == 1)
        snprintf(s, n, "(%.400s)", d ? d : "0");
    else
        snprintf(s, n, "(%.400s * %lld)", d ? d : "0", (long long)per);
    free(d);
}

/* The stores of one output element: outs[0] (unless dropped) and the absorbed outputs, with the
 * op's value in `value` and the element's indexes in c->expr. */
static void emit_stores(ctx *c, const nest *ne, const char *value)
{
    const nout *o = &ne->outs[0];
    c->tile_view = fx_load(c->mp, o->buf, o->off, ne->rank, o->st, -1);
    c->tile_text = value;
    if (!c->tile_view) {
        c->b->failed = true;
        return;
    }
    if (!o->drop && o != c->stream_to) { /* (streamed: it is in the tile already) */
        buf t = {0};
        buf_printf(&t, "%s[", bufname(c, o->buf));
        em_index(c, &t, o->buf, o->off, o->st, ne->rank);
        buf_putc(&t, ']');
        char *d = buf_finish(&t);
        em_line(c, "%s = %s;", d ? d : "", value);
        free(d);
    }
    if (ne->nouts > 1) {
        fx *vals[ne->nouts];
        for (int i = 1; i < ne->nouts; i++)
            vals[i - 1] = ne->outs[i].value;
        em_outputs(c, ne->outs + 1, vals, ne->nouts - 1);
    }
    c->tile_view = NULL;
    c->tile_text = NULL;
}

static void close_block(ctx *c)
{
    c->indent--;
    em_line(c, "}");
}

/* The image and the channel of a loop variable nc over both, as expressions (an input that
 * ignores either never names a variable left unused). */
static void image_channel(const char *nc, int64_t channels, char *n, char *ch, size_t size)
{
    snprintf(n, size, "%s / %lld", nc, (long long)channels);
    snprintf(ch, size, "%s %% %lld", nc, (long long)channels);
}

/* ---- convolution: the copy of the input ---- */

typedef struct copy_names {
    const char *p[IR_MAX_SPATIAL], *j[IR_MAX_SPATIAL], *u[IR_MAX_SPATIAL], *s[IR_MAX_SPATIAL];
    const char *r[IR_MAX_SPATIAL];
    char ph[IR_MAX_SPATIAL][IR_MAX_NAME + 32]; /* the phase along each axis, as C */
} copy_names;

/* The positions of axis i of a plane at `base`: position j holds x at
 * (j * stride + phase - pad_below) / data_dilation along i where that is a whole index of x. */
static void emit_copy_axis(ctx *c, const wplan *w, const copy_names *cn, int i, const char *base)
{
    const ir_window *win = w->win;
    int nsp = win->nsp;
    const char *T = em_ctype(w->x->etype);
    long long s = win->stride[i], pb = win->pad_below[i], dd = win->data_dilation[i];
    long long hq = w->hq[i], d = w->d[i], block = 1;
    for (int k = i + 1; k < nsp; k++)
        block *= w->hq[k];
    const char *j = cn->j[i];
    char dst[IR_MAX_NAME * 2 + 8];
    if (i == nsp - 1 && dd == 1) {
        /* zeros, a run of x, zeros: with stride 1 the bounds are constants */
        snprintf(dst, sizeof dst, "%s[%s]", base, j);
        char lo[IR_MAX_NAME + 32], hi[IR_MAX_NAME + 32];
        const char *start = NULL;
        if (w->nph[i] == 1 && s == 1) {
            long long l = pb < 0 ? 0 : pb > hq ? hq : pb;
            long long h = pb + d < l ? l : pb + d > hq ? hq : pb + d;
            snprintf(lo, sizeof lo, "%lld", l);
            snprintf(hi, sizeof hi, "%lld", h);
        } else {
            start = nm(c, "start");
            snprintf(lo, sizeof lo, "%s", nm(c, "lo"));
            snprintf(hi, sizeof hi, "%s", nm(c, "hi"));
            em_line(c, "const int64_t %s = %lld - %s; /* position j reads x at j * %lld - %s */",
                    start, pb, cn->ph[i], s, start);
            em_line(c, "int64_t %s = %s + %lld >= 0 ? (%s + %lld) / %lld + 1 : 0;", hi, start,
                    d - 1, start, d - 1, s);
            em_line(c, "%s = %s < %lld ? %s : %lld;", hi, hi, hq, hi, hq);
            em_line(c, "const int64_t %s = %s > 0 ? ((%s + %lld) / %lld < %s ? (%s + %lld) / %lld "
                       ": %s) : 0;",
                    lo, start, start, s - 1, s, hi, start, s - 1, s, hi);
        }
        if (strcmp(lo, "0") != 0) {
            em_line(c, "for (int64_t %s = 0; %s < %s; %s++)", j, j, lo, j);
            em_line(c, "    %s = 0;", dst);
        }
        em_line(c, "for (int64_t %s = %s; %s < %s; %s++) {", j, lo, j, hi, j);
        c->indent++;
        if (start)
            em_line(c, "const int64_t %s = %s * %lld - %s;", cn->s[i], j, s, start);
        else
            em_line(c, "const int64_t %s = %s - %lld;", cn->s[i], j, pb);
        em_assign(c, dst, w->x);
        close_block(c);
        if (start || atoll(hi) < hq) {
            em_line(c, "for (int64_t %s = %s; %s < %lld; %s++)", j, hi, j, hq, j);
            em_line(c, "    %s = 0;", dst);
        }
        return;
    }
    em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", j, j, hq, j);
    c->indent++;
    em_line(c, "%s *restrict %s = %s + %s * %lld;", T, cn->r[i], base, j, block);
    em_line(c, "const int64_t %s = %s * %lld + %s - %lld;", cn->u[i], j, s, cn->ph[i], pb);
    if (dd == 1)
        em_line(c, "if (%s < 0 || %s >= %lld) {", cn->u[i], cn->u[i], d);
    else
        em_line(c, "if (%s < 0 || %s %% %lld != 0 || %s / %lld >= %lld) {", cn->u[i], cn->u[i], dd,
                cn->u[i], dd, d);
    em_line(c, "    for (int64_t e = 0; e < %lld; e++) /* no element of x: zeros */", block);
    em_line(c, "        %s[e] = 0;", cn->r[i]);
    em_line(c, "    continue;");
    em_line(c, "}");
    if (dd == 1)
        em_line(c, "const int64_t %s = %s;", cn->s[i], cn->u[i]);
    else
        em_line(c, "const int64_t %s = %s / %lld;", cn->s[i], cn->u[i], dd);
    if (i == nsp - 1) {
        snprintf(dst, sizeof dst, "%s[0]", cn->r[i]);
        em_assign(c, dst, w->x);
    } else {
        emit_copy_axis(c, w, cn, i + 1, cn->r[i]);
    }
    close_block(c);
}
/* The copy of x into the planes at xp (count elements with the slack), per image and channel:
 * one plane per phase of the stride along every axis (one plane when the strides are 1). With
 * nc0 (C text), only the group's channels of one image, from image-and-channel nc0 on, into xp
 * (the local planes of a thread: no loop of its own in parallel). With image (C text, one
 * core), the planes of that image and the next few that its last tile reads into. */
static void emit_copy(ctx *c, const wplan *w, const char *xp, int64_t count, const char *nc0,
                      const char *image)
{
    const ir_window *win = w->win;
    int nsp = win->nsp;
    const char *T = em_ctype(w->x->etype);
    /* a symbolic batch: nc and count are dims, the loops' bounds their C */
    bool sym = !nc0 && dim_is_sym(w->N);
    long long nc = nc0 ? w->C / w->G : sym ? 1 : w->N * w->C;
    char ncs[512], counts[512], ends[512];
    count_text(c, ncs, sizeof ncs, nc0 ? nc : w->N, nc0 ? 1 : w->C);
    count_text(c, counts, sizeof counts, count, 1);
    count_text(c, ends, sizeof ends, nc0 ? nc : w->N, (nc0 ? 1 : w->C) * w->cstride);
    bool dil = false;
    for (int i = 0; i < nsp; i++)
        dil |= win->data_dilation[i] > 1;
    buf dims = {0};
    for (int i = 0; i < nsp; i++)
        buf_printf(&dims, "%s%lld", i ? " x " : "", (long long)w->hq[i]);
    char *ds = buf_finish(&dims);
    em_line(c, "/* x into planes of %s per image and channel: zero-padded%s%s */", ds ? ds : "",
            w->cstride != w->plane ? ", one plane per phase of the stride" : "",
            dil ? ", dilated" : "");
    free(ds);
    int64_t elements = nc * (sym ? w->C : 1);
    for (int i = 0; i < nsp; i++)
        elements *= w->d[i];
    if (elements == 0) { /* nothing of x: zeros throughout */
        const char *e = nm(c, "e");
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++)", e, e, counts, e);
        em_line(c, "    %s[%s] = 0;", xp, e);
        return;
    }
    em_line(c, "{");
    c->indent++;
    /* the copy's names live in its block */
    names outer = c->local;
    c->local = (names){.outer = &outer};
    copy_names cn;
    static const char *const base[][IR_MAX_SPATIAL] = {
        {"p0", "p1", "p2"}, {"j0", "j1", "j2"}, {"u0", "u1", "u2"}, {"i0", "i1", "i2"},
        {"r0", "r1", "r2"}, {"ph0", "ph1", "ph2"}};
    for (int i = 0; i < nsp; i++) {
        cn.p[i] = nm(c, base[0][i]);
        cn.j[i] = nm(c, base[1][i]);
        cn.u[i] = nm(c, base[2][i]);
        cn.s[i] = nm(c, base[3][i]);
        cn.r[i] = nm(c, base[4][i]);
        if (w->nph[i] == 1) {
            snprintf(cn.ph[i], sizeof cn.ph[i], "%lld", (long long)w->ph[i][0]);
            continue;
        }
        const char *ph = nm(c, base[5][i]);
        snprintf(cn.ph[i], sizeof cn.ph[i], "%s[%s]", ph, cn.p[i]);
        buf t = {0};
        for (int j = 0; j < w->nph[i]; j++)
            buf_printf(&t, "%s%lld", j ? ", " : "", (long long)w->ph[i][j]);
        char *ts = buf_finish(&t);
        em_line(c, "static const int64_t %s[%d] = {%s}; /* the phases taps use */", ph, w->nph[i],
                ts ? ts : "");
        free(ts);
    }
    const char *ncv = nm(c, "nc"), *pl = nm(c, "pl"), *cc = nc0 ? nm(c, "cc") : ncv;
    char n[IR_MAX_NAME * 2 + 64], ch[IR_MAX_NAME * 2 + 64], one[IR_MAX_NAME * 2 + 16];
    if (nc0) { /* image and channel: nc0 + cc */
        snprintf(one, sizeof one, "(%s + %s)", nc0, cc);
        ncv = one;
    }
    image_channel(ncv, w->C, n, ch, sizeof n);
    if (image) {
        /* image `image`'s planes, and the next planes its last tile reads a little of (copied
         * again, the same values, with the next image) */
        long long cs = w->cstride, C = w->C;
        long long extra = cs > 0 ? (w->nv * w->lanes + cs - 1) / cs : 0;
        const char *hi = nm(c, "hi");
        em_line(c, "const int64_t %s = %s * %lld + %lld < %s ? %s * %lld + %lld : %s;", hi, image,
                C, C + extra, ncs, image, C, C + extra, ncs);
        em_line(c, "for (int64_t %s = %s * %lld; %s < %s; %s++) { /* image and channel */", cc,
                image, C, cc, hi, cc);
    } else {
        if (!nc0 && parallel_n(c, w->N, w->C, w->cstride, prep_min(c, w)))
            em_omp_for(c);
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++) { /* %s */", cc, cc, ncs, cc,
                nc0 ? "the group's channels" : "image and channel");
    }
    c->indent++;
    c->expr[0] = n;
    c->expr[1] = ch;
    for (int i = 0; i < nsp; i++)
        c->expr[2 + i] = cn.s[i];
    /* a loop over the phases of each axis that has several */
    int loops = 0;
    buf q = {0};
    buf_printf(&q, "%s + %s * %lld", xp, cc, (long long)w->cstride);
    for (int i = 0; i < nsp; i++) {
        if (w->nph[i] == 1)
            continue;
        long long after = w->plane;
        for (int k = i + 1; k < nsp; k++)
            after *= w->nph[k];
        buf_printf(&q, " + %s * %lld", cn.p[i], after);
        em_line(c, "for (int %s = 0; %s < %d; %s++) {", cn.p[i], cn.p[i], w->nph[i], cn.p[i]);
        c->indent++;
        loops++;
    }
    char *qs = buf_finish(&q);
    em_line(c, "%s *restrict %s = %s;", T, pl, qs ? qs : "");
    free(qs);
    emit_copy_axis(c, w, &cn, 0, pl);
    while (loops--)
        close_block(c);
    close_block(c);
    if (sym || count > nc * w->cstride) { /* (with no channel, nothing reads the slack) */
        const char *e = nm(c, "e");
        em_line(c, "for (int64_t %s = %s; %s < %s; %s++) /* read by the last tile */", e, ends,
                e, counts, e);
        em_line(c, "    %s[%s] = 0;", xp, e);
    }
    em_names_free(&c->local);
    c->local = outer;
    close_block(c);
}

/* The copy of the dense form (conv.c, make_dense: one image) at xp, up to tailoff with the
 * slack (where the tail's copy, then the partial sums, start): per input channel and tap, the
 * value the tap reads for each output position (row-major), zero where it reads the padding or
 * between the dilated input's elements. With a tail, the last positions' values again,
 * [tail][channels x taps], at tailoff. Every channel (in parallel when worth it), or with lo
 * the channels lo .. hi (C text: a chunk's). */
static void emit_copy_dense(ctx *c, const wplan *w, const char *xp, const char *lo,
                            const char *hi)
{
    const ir_window *win = w->win;
    int nsp = win->nsp;
    const char *T = em_ctype(w->x->etype);
    long long P = w->p, taps = w->taps, C = w->C;
    em_line(c, "/* x into runs of the %lld output positions per channel and tap: the values each "
               "tap reads (zero in the padding) */",
            P);
    em_line(c, "{");
    c->indent++;
    names outer = c->local;
    c->local = (names){.outer = &outer};
    static const char *const base[][IR_MAX_SPATIAL] = {
        {"a0", "a1", "a2"}, {"o0", "o1", "o2"}, {"u0", "u1", "u2"}, {"i0", "i1", "i2"}};
    const char *av[IR_MAX_SPATIAL], *ov[IR_MAX_SPATIAL], *uv[IR_MAX_SPATIAL], *iv[IR_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) {
        av[i] = nm(c, base[0][i]);
        ov[i] = nm(c, base[1][i]);
        uv[i] = nm(c, base[2][i]);
        iv[i] = nm(c, base[3][i]);
    }
    const char *ch = nm(c, "ch"), *d = nm(c, "d");
    if (!lo && parallel(c, C, w->cstride, prep_min(c, w)))
        em_omp_for(c);
    if (lo)
        em_line(c, "for (int64_t %s = %s; %s < %s; %s++) { /* channel */", ch, lo, ch, hi, ch);
    else
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) { /* channel */", ch, ch, C, ch);
    c->indent++;
    /* the tap (row-major over the window) and the position along the output (row-major): C
     * text of at most 3 terms of a name and a number each */
    char tap[3 * (IR_MAX_NAME + 32)] = "", at[3 * (IR_MAX_NAME + 32)] = "";
    long long after = taps;
    for (int i = 0; i < nsp; i++) {
        after /= win->window[i];
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s++)", av[i], av[i],
                (long long)win->window[i], av[i]);
        snprintf(tap + strlen(tap), sizeof tap - strlen(tap), "%s%s * %lld", i ? " + " : "",
                 av[i], after);
    }
    em_line(c, "{");
    c->indent++;
    em_line(c, "%s *restrict %s = %s + %s * %lld + (%s) * %lld;", T, d, xp, ch, taps * P, tap, P);
    c->expr[0] = "0";
    c->expr[1] = ch;
    for (int i = 0; i < nsp; i++) {
        long long s = win->stride[i], dil = win->dilation[i], pb = win->pad_below[i];
        long long dd = win->data_dilation[i], dn = w->d[i], block = 1;
        for (int k = i + 1; k < nsp; k++)
            block *= w->o[k];
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", ov[i], ov[i], (long long)w->o[i],
                ov[i]);
        c->indent++;
        snprintf(at + strlen(at), sizeof at - strlen(at), "%s%s * %lld", i ? " + " : "", ov[i],
                 block);
        em_line(c, "const int64_t %s = %s * %lld + %s * %lld - %lld;", uv[i], ov[i], s, av[i], dil,
                pb);
        if (dd == 1)
            em_line(c, "if (%s < 0 || %s >= %lld) { /* no element of x: zeros */", uv[i], uv[i],
                    dn);
        else
            em_line(c, "if (%s < 0 || %s %% %lld != 0 || %s / %lld >= %lld) { /* no element of x: "
                       "zeros */",
                    uv[i], uv[i], dd, uv[i], dd, dn);
        if (i < nsp - 1) {
            const char *e = nm(c, "e");
            em_line(c, "    for (int64_t %s = 0; %s < %lld; %s++)", e, e, block, e);
            em_line(c, "        %s[%s + %s] = 0;", d, at, e);
        } else {
            em_line(c, "    %s[%s] = 0;", d, at);
        }
        em_line(c, "    continue;");
        em_line(c, "}");
        em_line(c, "const int64_t %s = %s / %lld;", iv[i], uv[i], dd);
        c->expr[2 + i] = iv[i];
    }
    char dst[IR_MAX_NAME + sizeof at + 8];
    snprintf(dst, sizeof dst, "%s[%s]", d, at);
    em_assign(c, dst, w->x);
    for (int i = 0; i < nsp; i++)
        close_block(c);
    close_block(c); /* the tap */
    close_block(c); /* channel */
    const char *e = nm(c, "e");
    if (lo)
        em_line(c, "if (%s == %lld) /* the last chunk */", hi, C);
    em_line(c, "%sfor (int64_t %s = %lld; %s < %lld; %s++) /* read by the last tile */",
            lo ? "    " : "", e, C * taps * P, e, (long long)w->tailoff, e);
    em_line(c, "%s    %s[%s] = 0;", lo ? "    " : "", xp, e);
    if (w->tail) {
        const char *tl = nm(c, "tl"), *pp = nm(c, "pp"), *k = nm(c, "k");
        long long ct = C * taps, tail = w->tail;
        char k0[IR_MAX_NAME + 32] = "0", k1[IR_MAX_NAME + 32];
        snprintf(k1, sizeof k1, "%lld", ct);
        if (lo) {
            snprintf(k0, sizeof k0, "%s * %lld", lo, taps);
            snprintf(k1, sizeof k1, "%s * %lld", hi, taps);
        }
        em_line(c, "/* the last %lld position%s again, the channels and taps consecutive */", tail,
                tail > 1 ? "s" : "");
        em_line(c, "%s *restrict %s = %s + %lld;", T, tl, xp, (long long)w->tailoff);
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s++)", pp, pp, tail, pp);
        em_line(c, "    for (int64_t %s = %s; %s < %s; %s++)", k, k0, k, k1, k);
        em_line(c, "        %s[%s * %lld + %s] = %s[%s * %lld + %lld + %s];", tl, pp, ct, k, xp, k,
                P, (long long)w->q, pp);
    }
    em_names_free(&c->local);
    c->local = outer;
    close_block(c);
}

/* ---- convolution: the tiles ---- */

/* A result of a convolution of at least this many bytes whose tiles lie in one row each
 * (row_tiles) is written past the caches: it does not stay in the second-level cache, and a
 * plain store reads each line before it writes it (the 7x7 stem, 3.2 MB for one image, with
 * the tiles along its rows: 1.39 -> 1.31 ms, one core). */
#define CONV_STREAM_MIN_BYTES (2 << 20)

/* The output a convolution's tiles write past the caches (nest_stream_*), or NULL: with
 * row_tiles, the one output its tiles store (the convolution, or the absorbed value that
 * leaves), floats contiguous along the rows, of CONV_STREAM_MIN_BYTES or more, each tile's
 * piece of a row whole cache lines when the result starts on one (rows, pieces and their
 * distances whole lines). */
static const nout *conv_stream_target(const nest *ne)
{
    const wplan *w = ne->win;
    const nout *o = ne->outs[0].drop ? NULL : &ne->outs[0];
    for (int i = 1; i < ne->nouts; i++) {
        if (o || ne->outs[i].reduce >= 0) /* a second store, or a fold */
            return NULL;
        o = &ne->outs[i];
    }
    if (!o || !w->row_tiles || dim_is_sym(w->N))
        return NULL;
    int et = o->value->etype, es = (int)nest_type_size((nest_type)et);
    double bytes = (double)w->N * (double)w->K * (double)w->p * es;
    if ((et != NEST_F32 && et != NEST_F64) || o->st[ne->rank - 1] != 1 ||
        bytes < CONV_STREAM_MIN_BYTES || (w->nv * w->lanes * es) % 64 ||
        (o->st[ne->rank - 2] * es) % 64 || (w->o[1] * es) % 64)
        return NULL;
    return o;
}

/* The rows of the tile's piece of a row (lo .. hi, whole cache lines) leave from acc past the
 * caches when the result is aligned to 64 bytes, else plainly. (Stores of the parts of lines
 * at a row's ends, as a product's tiles do, cost 5% of the stem: their copies became calls of
 * memcpy, around which the loop kept less in registers.) */
static void emit_stream_piece(ctx *c, const nest *ne, const nout *o, const char *ii,
                              const char *rows, const char *lo, const char *hi, const char *acc)
{
    int et = o->value->etype, tj = ne->win->nv * ne->win->lanes;
    const char *T = em_ctype(et);
    *c->helpers |= 1ull << (H_STREAM + (et == NEST_F64));
    buf t = {0};
    em_store_text(c, &t, o);
    char *d = em_finish(c, &t);
    em_line(c, "for (int %s = 0; %s < %s; %s++) {", ii, ii, rows, ii);
    c->indent++;
    em_line(c, "%s *nest_d = &%s;", T, d ? d : "");
    em_line(c, "if (((size_t)nest_d & 63) == 0)");
    em_line(c, "    nest_stream_%s(nest_d, %s + %s * %d, (int)(%s - %s));",
            et == NEST_F64 ? "f64" : "f32", acc, ii, tj, hi, lo);
    em_line(c, "else");
    em_line(c, "    for (int jj = 0; jj < %s - %s; jj++)", hi, lo);
    em_line(c, "        nest_d[jj] = %s[%s * %d + jj];", acc, ii, tj);
    close_block(c);
    free(d);
}

/* Stores the tile in `acc` (rows x tj, positions q0 ..) at the positions that are outputs;
 * `stream` (conv_stream_target), when not NULL, leaves past the caches. */
static void emit_tile_store(ctx *c, const nest *ne, const char *n, const char *k0,
                            const char *q0, const char *rows, const char *acc, const nout *stream)
{
    const wplan *w = ne->win;
    int nsp = w->win->nsp, tj = w->nv * w->lanes;
    const char *ii = nm(c, "ii"), *ol = nm(c, nsp == 1 ? "o0" : nsp == 2 ? "o1" : "o2");
    char kexpr[IR_MAX_NAME * 2 + 8], value[IR_MAX_NAME * 6 + 64];
    snprintf(kexpr, sizeof kexpr, "%s + %s", k0, ii);
    c->expr[0] = n;
    c->expr[1] = kexpr;
    c->expr[1 + nsp] = ol;
    if (nsp == 1) {
        em_line(c, "for (int %s = 0; %s < %s; %s++)", ii, ii, rows, ii);
        em_line(c, "    for (int64_t %s = %s; %s < %s + %d && %s < %lld; %s++) {", ol, q0, ol, q0,
                tj, ol, (long long)(w->tail ? w->q : w->o[0]), ol);
        c->indent += 2;
        snprintf(value, sizeof value, "%s[%s * %d + %s - %s]", acc, ii, tj, ol, q0);
        emit_stores(c, ne, value);
        close_block(c);
        c->indent--;
        return;
    }
    /* rows of positions: the last axis runs within a row */
    long long W = w->hq[nsp - 1];
    const char *r = nm(c, "r"), *lo = nm(c, "lo"), *hi = nm(c, "hi");
    if (w->row_tiles) { /* the tile is a piece of one row */
        em_line(c, "{");
        em_line(c, "    const int64_t %s = %s / %lld;", r, q0, W);
    } else {
        em_line(c, "for (int64_t %s = %s / %lld; %s * %lld < %s + %d && %s * %lld < %lld; %s++) {", r,
                q0, W, r, W, q0, tj, r, W, (long long)w->q, r);
    }
    c->indent++;
    const char *o0 = nm(c, "o0"), *o1 = nsp == 3 ? nm(c, "o1") : NULL;
    if (nsp == 2) {
        em_line(c, "const int64_t %s = %s;", o0, r);
    } else {
        em_line(c, "const int64_t %s = %s / %lld, %s = %s %% %lld;", o0, r, (long long)w->hq[1],
                o1, r, (long long)w->hq[1]);
        em_line(c, "if (%s >= %lld)", o1, (long long)w->o[1]);
        em_line(c, "    continue; /* a row of the planes' margin */");
        c->expr[3] = o1;
    }
    c->expr[2] = o0;
    em_line(c, "const int64_t %s = %s * %lld < %s ? %s - %s * %lld : 0;", lo, r, W, q0, q0, r, W);
    em_line(c, "const int64_t %s = %s + %d - %s * %lld < %lld ? %s + %d - %s * %lld : %lld;", hi,
            q0, tj, r, W, (long long)w->o[nsp - 1], q0, tj, r, W, (long long)w->o[nsp - 1]);
    if (w->tail) { /* (the tail's positions are not the tiles') */
        const char *end = nm(c, "end");
        em_line(c, "const int64_t %s = %lld - %s * %lld < %s ? %lld - %s * %lld : %s;", end,
                (long long)w->q, r, W, hi, (long long)w->q, r, W, hi);
        hi = end;
    }
    /* streamed: what leaves is computed into the tile first (nothing to do when that is the
     * convolution itself) */
    bool elements = !stream || ne->nouts > 1;
    snprintf(value, sizeof value, "%s[%s * %d + %s * %lld + %s - %s]", acc, ii, tj, r, W, ol, q0);
    if (elements) {
        em_line(c, "for (int %s = 0; %s < %s; %s++)", ii, ii, rows, ii);
        em_line(c, "    for (int64_t %s = %s; %s < %s; %s++) {", ol, lo, ol, hi, ol);
        c->indent += 2;
        c->stream_to = stream;
        emit_stores(c, ne, value);
        c->stream_to = NULL;
        close_block(c);
        c->indent--;
    }
    if (stream) { /* (row_tiles: the piece starts the tile, at acc's row ii) */
        c->expr[1 + nsp] = lo;
        emit_stream_piece(c, ne, stream, ii, rows, lo, hi, acc);
    }
    close_block(c);
}

/* The indexes of tile t: image n, group g, tile of channels kt (of kn) and of positions pt (of
 * pn). The images run outermost (an image's planes stay in the cache for all its tiles); then
 * the channels' tile runs innermost (a tile of positions stays in the cache for all of them),
 * or with filters_outer the positions' (a tile of channels' filters stays in the cache for
 * every position), and with images_inner the images run inside each tile of channels too (its
 * packed filters stay in the cache for every image). */
static void emit_tile_indexes(ctx *c, const wplan *w, const char *t, const char *n, const char *g,
                              const char *kt, const char *pt, long long kn, long long pn)
{
    long long G = w->G;
    if (!w->filters_outer) {
        em_line(c, "const int64_t %s = %s %% %lld, %s = %s / %lld %% %lld;", kt, t, kn, pt, t, kn,
                pn);
        em_line(c, "const int64_t %s = %s / %lld %% %lld, %s = %s / %lld;", g, t, kn * pn, G, n, t,
                kn * pn * G);
    } else if (w->images_inner) {
        long long N = w->N;
        em_line(c, "const int64_t %s = %s %% %lld, %s = %s / %lld %% %lld;", pt, t, pn, n, t, pn, N);
        em_line(c, "const int64_t %s = %s / %lld %% %lld, %s = %s / %lld;", kt, t, pn * N, kn, g, t,
                pn * N * kn);
    } else {
        em_line(c, "const int64_t %s = %s %% %lld, %s = %s / %lld %% %lld;", pt, t, pn, kt, t, pn, kn);
        em_line(c, "const int64_t %s = %s / %lld %% %lld, %s = %s / %lld;", g, t, pn * kn, G, n, t,
                pn * kn * G);
    }
}

/* One core, image by image (the tiles of image `image`, t the tile, `per` an image's): the
 * next image's input is fetched toward the cache a few lines a tile while this image's tiles
 * run, when x is a dense load, so that its planes' copy finds it there (the stem at batch 8:
 * a cold input cost about 0.1 ms of 1.5 an image; fetched ahead, 2-4% faster). */
static void emit_prefetch_next(ctx *c, const wplan *w, const char *image, const char *t,
                               long long per)
{
    const fx *x = w->x;
    int nsp = w->win->nsp;
    if (x->kind != FX_LOAD || x->nargs || x->buf == FX_IOTA || x->rank != 2 + nsp || per < 1)
        return;
    long long dense = 1; /* the elements of an image, which lie together */
    for (int i = x->rank - 1; i >= 1; i--) {
        if (x->st[i] != dense)
            return;
        dense *= i == 1 ? w->C : w->d[i - 2];
    }
    long long es = (long long)nest_type_size((nest_type)x->etype);
    long long lines = (dense * es + 63) / 64, each = (lines + per - 1) / per;
    if (lines < 1)
        return;
    const char *pf = nm(c, "pf"), *l = nm(c, "l");
    em_line(c, "#ifdef __GNUC__");
    em_line(c, "if (%s < %lld) { /* the next image's input toward the cache, %lld lines a tile */",
            image, (long long)w->N - 1, each);
    em_line(c, "    const char *%s = (const char *)(%s + %lld + (%s + 1) * %lld);", pf,
            bufname(c, x->buf), (long long)x->off, image, (long long)x->st[0]);
    em_line(c, "    for (int64_t %s = (%s - %s * %lld) * %lld;", l, t, image, per, each);
    em_line(c, "         %s < (%s - %s * %lld + 1) * %lld && %s < %lld; %s++)", l, t, image, per,
            each, l, lines, l);
    em_line(c, "        __builtin_prefetch(%s + %s * 64);", pf, l);
    em_line(c, "}");
    em_line(c, "#endif");
}

/* The index along each spatial axis of output position p (C text pexpr, row-major over the
 * output's spatial axes) into oexpr, and into c->expr[2 ..] for the stores. */
static void position_indexes(ctx *c, const wplan *w, const char *pexpr,
                             char oexpr[][IR_MAX_NAME * 2 + 64])
{
    int nsp = w->win->nsp;
    int64_t div = 1;
    for (int i = nsp - 1; i >= 0; i--) {
        if (i == nsp - 1 && nsp == 1)
            snprintf(oexpr[i], IR_MAX_NAME * 2 + 64, "%s", pexpr);
        else if (i == nsp - 1)
            snprintf(oexpr[i], IR_MAX_NAME * 2 + 64, "(%s) %% %lld", pexpr, (long long)w->o[i]);
        else if (i == 0)
            snprintf(oexpr[i], IR_MAX_NAME * 2 + 64, "(%s) / %lld", pexpr, (long long)div);
        else
            snprintf(oexpr[i], IR_MAX_NAME * 2 + 64, "(%s) / %lld %% %lld", pexpr,
                     (long long)div, (long long)w->o[i]);
        c->expr[2 + i] = oexpr[i];
        div *= w->o[i];
    }
}

/* The dense form's tail (conv.c, make_dense) for the tile of output channels k0 .. k0 + rows, the
 * block of input channels c0 .. c1 (added to tacc's sums when add, C text): the last positions
 * of the image, from their copy at xp + tailoff (emit_copy_dense), summed into tacc. Called by
 * the tile that has just read those channels' filters for the block, still in the cache (a
 * pass of its own read the 9.4 MB of 512 channels' 3x3 filters again). */
static void emit_tail_call(ctx *c, const nest *ne, const char *xp, const char *k0,
                           const char *rows, const char *tacc, const char *add, const char *c0,
                           const char *c1)
{
    const wplan *w = ne->win;
    char kern[IR_MAX_NAME + 32];
    em_conv_kernel_name(c, (int32_t)(ne - c->p->nests), kern, sizeof kern);
    em_line(c, "%s_tail(%s, %s + %lld + %s * %lld, %s + %lld, %s, %s, %s, %s);", kern, rows,
            bufname(c, w->wbuf), (long long)w->woff, k0, (long long)(w->C * w->taps), xp,
            (long long)w->tailoff, tacc, add, c0, c1);
}

/* The stores of the dense form's tail for the tile of output channels k0 .. k0 + rows, its sums
 * in tacc ([rows][tail]), when the C condition `when` holds (NULL: always). */
static void emit_tail_store(ctx *c, const nest *ne, const char *k0, const char *rows,
                            const char *tacc, const char *when)
{
    const wplan *w = ne->win;
    long long tail = w->tail;
    const char *ii = nm(c, "ii"), *pp = nm(c, "pp");
    char kexpr[IR_MAX_NAME * 2 + 8], pexpr[IR_MAX_NAME + 32];
    char oexpr[IR_MAX_SPATIAL][IR_MAX_NAME * 2 + 64], value[IR_MAX_NAME * 3 + 32];
    snprintf(kexpr, sizeof kexpr, "%s + %s", k0, ii);
    snprintf(pexpr, sizeof pexpr, "%lld + %s", (long long)w->q, pp);
    c->expr[0] = "0";
    c->expr[1] = kexpr;
    position_indexes(c, w, pexpr, oexpr);
    if (when)
        em_line(c, "if (%s)", when);
    c->indent += when != NULL;
    em_line(c, "for (int %s = 0; %s < %s; %s++)", ii, ii, rows, ii);
    em_line(c, "    for (int %s = 0; %s < %lld; %s++) {", pp, pp, tail, pp);
    c->indent += 2;
    snprintf(value, sizeof value, "%s[%s * %lld + %s]", tacc, ii, tail, pp);
    emit_stores(c, ne, value);
    close_block(c);
    c->indent -= 1 + (when != NULL);
}

/* The names of a dense tile's indexes (emit_dense_tile_start). */
typedef struct dense_tile {
    const char *t, *kt, *qb, *k0, *q0, *rows, *lanes;
} dense_tile;

/* The start of dense tile d->t: its tile of output channels kt (from k0, rows of them) and of
 * positions qb (from q0, lanes of them). */
static void emit_dense_tile_start(ctx *c, const wplan *w, const dense_tile *d)
{
    int ti = w->ti, tj = w->nv * w->lanes, edge = conv_edge_vectors(w);
    long long kg = w->K, qn = conv_position_tiles(w);
    em_line(c, "const int64_t %s = %s / %lld, %s = %s %% %lld;", d->kt, d->t, qn, d->qb, d->t, qn);
    em_line(c, "const int64_t %s = %s * %d, %s = %s * %d;", d->k0, d->kt, ti, d->q0, d->qb, tj);
    em_line(c, "const int %s = %lld - %s < %d ? (int)(%lld - %s) : %d;", d->rows, kg, d->k0, ti,
            kg, d->k0, ti);
    if (edge)
        em_line(c, "const int %s = %s + %d > %lld ? %d : %d;", d->lanes, d->q0, tj,
                (long long)w->q, edge * w->lanes, tj);
    else
        em_line(c, "const int %s = %d;", d->lanes, tj);
}

/* The opening of the tail's block in dense tile d (its last tile of positions) and its sums in
 * the set of partial sums at part, named by the return value. */
static const char *emit_tail_start(ctx *c, const wplan *w, const char *part, const dense_tile *d)
{
    int ti = w->ti, tj = w->nv * w->lanes;
    long long qn = conv_position_tiles(w), kt = (w->K + ti - 1) / ti;
    const char *tacc = nm(c, "tacc");
    em_line(c, "if (%s == %lld) { /* the last tile of positions: the tail */", d->qb, qn - 1);
    c->indent++;
    em_line(c, "%s *restrict %s = %s + %lld + %s * %lld;", em_ctype(w->x->etype), tacc, part,
            kt * qn * ti * tj, d->kt, (long long)ti * w->tail);
    return tacc;
}

/* The loops of the dense form's sum over the blocks of input channels from lo to hi (C text),
 * every tile on each block (its copy stays in the cache for all of them), the tiles' sums in
 * the set of partial sums at part (added to unless the block starts at lo). With `last`, the
 * last block's tiles store. */
static void emit_dense_blocks(ctx *c, int32_t k, const char *xp, const char *part,
                              const char *lo, const char *hi, bool last)
{
    const nest *ne = &c->p->nests[k];
    const wplan *w = ne->win;
    const char *T = em_ctype(w->x->etype);
    int ti = w->ti, tj = w->nv * w->lanes;
    long long C = w->C, kt = (w->K + ti - 1) / ti, qn = conv_position_tiles(w), cb = w->cblock;
    char kern[IR_MAX_NAME + 32];
    em_conv_kernel_name(c, k, kern, sizeof kern);
    const char *c0 = nm(c, "c0"), *c1 = nm(c, "c1"), *acc = nm(c, "acc");
    dense_tile d = {nm(c, "t"),  nm(c, "kt"),   nm(c, "qb"),   nm(c, "k0"),
                    nm(c, "q0"), nm(c, "rows"), nm(c, "lanes")};
    em_line(c, "for (int64_t %s = %s; %s < %s; %s += %lld) {", c0, lo, c0, hi, c0, cb);
    c->indent++;
    em_line(c, "const int64_t %s = %s + %lld < %s ? %s + %lld : %s;", c1, c0, cb, hi, c0, cb, hi);
    if (last && parallel(c, kt * qn, (double)ti * tj * cb * w->taps, PAR_MIN_MACS))
        em_omp_for(c);
    em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", d.t, d.t, kt * qn, d.t);
    c->indent++;
    emit_dense_tile_start(c, w, &d);
    char add[IR_MAX_NAME * 2 + 8], when[IR_MAX_NAME + 32]; /* (when: the last block) */
    snprintf(add, sizeof add, "%s > %s", c0, lo);
    snprintf(when, sizeof when, "%s == %lld", c1, C);
    em_line(c, "%s *restrict %s = %s + %s * %d;", T, acc, part, d.t, ti * tj);
    em_line(c, "%s(%s, %s, %s + %lld + %s * %lld, %s + %s, %s, %s, %s, %s);", kern, d.rows,
            d.lanes, bufname(c, w->wbuf), (long long)w->woff, d.k0, C * w->taps, xp, d.q0, acc,
            add, c0, c1);
    if (last) {
        em_line(c, "if (%s) {", when);
        c->indent++;
        emit_tile_store(c, ne, "0", d.k0, d.q0, d.rows, acc, NULL);
        close_block(c);
    }
    if (w->tail) {
        const char *tacc = emit_tail_start(c, w, part, &d);
        emit_tail_call(c, ne, xp, d.k0, d.rows, tacc, add, c0, c1);
        if (last)
            emit_tail_store(c, ne, d.k0, d.rows, tacc, when);
        close_block(c);
    }
    close_block(c);
    close_block(c);
}

/* The dense form split over the threads (splits > 1, conv.c): `splits` chunks of the input
 * channels, chunk s the channels s * C / splits .. (s + 1) * C / splits, in parallel (each
 * thread's chunks together): a chunk's channels copied and every tile summed over them into
 * the chunk's set of partial sums (its copy read from its own core's cache; a parallel loop
 * over the tiles read half of each block from the other core's); then, in parallel over the
 * tiles, each tile adds the sets in order and stores. The chunks do not depend on the number
 * of threads, nor does the result. */
static void emit_dense_split(ctx *c, int32_t k, const char *xp, const char *part)
{
    const nest *ne = &c->p->nests[k];
    const wplan *w = ne->win;
    const char *T = em_ctype(w->x->etype);
    int ti = w->ti, tj = w->nv * w->lanes;
    long long C = w->C, kt = (w->K + ti - 1) / ti, qn = conv_position_tiles(w);
    long long set = w->setsize, splits = w->splits, tail = w->tail;
    const char *sc = nm(c, "sc"), *lo = nm(c, "lo"), *hi = nm(c, "hi"), *ps = nm(c, "ps");
    const char *s = nm(c, "s"), *ii = nm(c, "ii"), *jj = nm(c, "jj");
    const char *acc = nm(c, "acc"), *o = nm(c, "o");
    em_line(c, "/* the input channels in %lld chunks, each summing every tile over its channels "
               "into a set of partial sums of its own at %s + its number * %lld */",
            splits, part, set);
    em_omp_region(c);
    em_line(c, "{");
    c->indent++;
    em_line(c, "#ifdef _OPENMP");
    em_line(c, "#pragma omp for schedule(static)");
    em_line(c, "#endif");
    em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) { /* chunk */", sc, sc, splits, sc);
    c->indent++;
    em_line(c, "const int64_t %s = %s * %lld / %lld, %s = (%s + 1) * %lld / %lld;", lo, sc, C,
            splits, hi, sc, C, splits);
    em_line(c, "%s *restrict %s = %s + %s * %lld;", T, ps, part, sc, set);
    emit_copy_dense(c, w, xp, lo, hi);
    emit_dense_blocks(c, k, xp, ps, lo, hi, false);
    close_block(c);
    em_line(c, "#ifdef _OPENMP");
    em_line(c, "#pragma omp for schedule(static)");
    em_line(c, "#endif");
    dense_tile d = {nm(c, "t"),  nm(c, "kt"),   nm(c, "qb"),   nm(c, "k0"),
                    nm(c, "q0"), nm(c, "rows"), nm(c, "lanes")};
    em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) { /* the tiles: the sets added, stored */",
            d.t, d.t, kt * qn, d.t);
    c->indent++;
    emit_dense_tile_start(c, w, &d);
    em_line(c, "%s *restrict %s = %s + %s * %d;", T, acc, part, d.t, ti * tj);
    em_line(c, "for (int64_t %s = 1; %s < %lld; %s++) { /* the sets in order */", s, s, splits,
            s);
    em_line(c, "    const %s *restrict %s = %s + %s * %lld;", T, o, acc, s, set);
    em_line(c, "    for (int %s = 0; %s < %s; %s++)", ii, ii, d.rows, ii);
    em_line(c, "        for (int %s = 0; %s < %s; %s++)", jj, jj, d.lanes, jj);
    em_line(c, "            %s[%s * %d + %s] += %s[%s * %d + %s];", acc, ii, tj, jj, o, ii, tj,
            jj);
    em_line(c, "}");
    emit_tile_store(c, ne, "0", d.k0, d.q0, d.rows, acc, NULL);
    if (tail) {
        const char *tacc = emit_tail_start(c, w, part, &d);
        em_line(c, "for (int64_t %s = 1; %s < %lld; %s++)", s, s, splits, s);
        em_line(c, "    for (int %s = 0; %s < %s * %lld; %s++)", ii, ii, d.rows, tail, ii);
        em_line(c, "        %s[%s] += %s[%s * %lld + %s];", tacc, ii, tacc, s, set, ii);
        emit_tail_store(c, ne, d.k0, d.rows, tacc, NULL);
        close_block(c);
    }
    close_block(c);
    close_block(c);
}

/* The tiles of the dense form (one image, one group: conv.c, make_dense), after its copy: the
 * sum over blocks of cblock input channels, each block's copy read by every tile while it is
 * in the cache, the tiles' partial sums kept in the workspace at part; the last block's tiles
 * store. A tile's tiles of positions run together, the last with the tail. */
static void emit_tiles_dense(ctx *c, int32_t k, const char *xp, const char *part)
{
    const wplan *w = c->p->nests[k].win;
    if (w->splits > 1) {
        emit_dense_split(c, k, xp, part);
        return;
    }
    long long C = w->C, cb = w->cblock, blocks = (C + cb - 1) / cb;
    long long tiles = (w->K + w->ti - 1) / w->ti * conv_position_tiles(w);
    emit_copy_dense(c, w, xp, NULL, NULL);
    if (blocks > 1)
        em_line(c, "/* %lld tiles: positions x output channels, the sum over %lld blocks of %lld input "
                   "channels (partial sums in %s) */",
                tiles, blocks, cb, part);
    else
        em_line(c, "/* %lld tiles: positions x output channels, the sum over the %lld input channels "
                   "in one block */",
                tiles, C);
    char hi[32];
    snprintf(hi, sizeof hi, "%lld", C);
    emit_dense_blocks(c, k, xp, part, "0", hi, true);
}

/* The tiles with output channels in rows and positions in lanes. With local planes, a
 * parallel loop over images and groups copies the group's planes into a local array and runs
 * its tiles in turn. */
static void emit_tiles_by_positions(ctx *c, int32_t k, const char *xp, const char *image)
{
    const nest *ne = &c->p->nests[k];
    const wplan *w = ne->win;
    const char *T = em_ctype(w->x->etype);
    int ti = w->ti, tj = w->nv * w->lanes;
    long long kg = w->K / w->G, cg = w->C / w->G, cs = w->cstride;
    long long kt = (kg + ti - 1) / ti, qb = conv_position_tiles(w);
    char tiles[512], images[512];
    count_text(c, tiles, sizeof tiles, w->N, w->G * kt * qb);
    count_text(c, images, sizeof images, w->N, w->G);
    char kern[IR_MAX_NAME + 32];
    em_conv_kernel_name(c, k, kern, sizeof kern);
    const char *t = nm(c, "t"), *ktv = nm(c, "kt"), *qbv = nm(c, "qb"), *g = nm(c, "g");
    const char *n = nm(c, "n"), *k0 = nm(c, "k0"), *q0 = nm(c, "q0"), *rows = nm(c, "rows");
    const char *lanes = nm(c, "lanes"), *acc = nm(c, "acc");
    bool par = false; /* the tiles' loop in parallel (not by images and groups) */
    em_line(c, "/* %s tiles: images x groups x positions x output channels */", tiles);
    if (w->local_planes) {
        const char *ng = nm(c, "ng"), *nc0 = nm(c, "nc0");
        long long count = cg * cs + tj;
        if (parallel_n(c, w->N, w->G, (double)kg * w->q * cg * w->taps, PAR_MIN_MACS))
            em_omp_for(c);
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++) { /* image and group */", ng, ng, images,
                ng);
        c->indent++;
        em_line(c, "const int64_t %s = %s / %lld, %s = %s %% %lld, %s = %s * %lld;", n, ng,
                (long long)w->G, g, ng, (long long)w->G, nc0, ng, cg);
        em_line(c, "%s %s[%lld];", T, xp, count);
        emit_copy(c, w, xp, count, nc0, NULL);
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", t, t, kt * qb, t);
        c->indent++;
        em_line(c, "const int64_t %s = %s %% %lld, %s = %s / %lld;", ktv, t, kt, qbv, t, kt);
    } else if (image) { /* the tiles of image `image` (one core) */
        long long per = w->G * kt * qb;
        em_line(c, "for (int64_t %s = %s * %lld; %s < %s * %lld + %lld; %s++) {", t, image, per, t,
                image, per, per, t);
        c->indent++;
        emit_tile_indexes(c, w, t, n, g, ktv, qbv, kt, qb);
        emit_prefetch_next(c, w, image, t, per);
    } else {
        par = parallel_n(c, w->N, w->G * kt * qb, (double)ti * tj * cg * w->taps, PAR_MIN_MACS);
        if (par)
            em_omp_for(c);
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", t, t, tiles, t);
        c->indent++;
        emit_tile_indexes(c, w, t, n, g, ktv, qbv, kt, qb);
    }
    /* with row_tiles, the pieces of a row (the last of `edge` vectors when edge > 0) */
    long long pieces = w->row_tiles ? qb / w->o[0] : 0;
    int edge = conv_edge_vectors(w);
    if (pieces > 1)
        em_line(c, "const int64_t %s = %s * %lld + %s * %d, %s = %s / %lld * %lld + %s %% %lld * %d;",
                k0, g, kg, ktv, ti, q0, qbv, pieces, (long long)w->qst[0], qbv, pieces, tj);
    else if (pieces == 1) /* a tile a row */
        em_line(c, "const int64_t %s = %s * %lld + %s * %d, %s = %s * %lld;", k0, g, kg, ktv, ti,
                q0, qbv, (long long)w->qst[0]);
    else
        em_line(c, "const int64_t %s = %s * %lld + %s * %d, %s = %s * %d;", k0, g, kg, ktv, ti, q0,
                qbv, tj);
    em_line(c, "const int %s = %lld - %s * %d < %d ? (int)(%lld - %s * %d) : %d;", rows, kg, ktv, ti,
            ti, kg, ktv, ti, ti);
    if (w->in_place) {
        /* the last tile of positions of the last channels would read past x's end */
        int64_t have = c->p->bufs[w->xbuf].count; /* a dim for a symbolic batch */
        char limit[512];
        if (dim_is_sym(have)) {
            char *d = em_dim_text(c, have);
            snprintf(limit, sizeof limit, "(%.400s - %lld)", d ? d : "0", (long long)w->xoff);
            free(d);
        } else {
            snprintf(limit, sizeof limit, "%lld", (long long)(have - w->xoff));
        }
        em_line(c, "const int %s = (%s * %lld + %s * %lld + %lld) * %lld + %lld + %s + %d > %s",
                lanes, n, (long long)w->C, g, cg, cg - 1, cs, (long long)w->maxoff, q0, tj, limit);
        em_line(c, "    ? (int)(%lld - %s < %d ? %lld - %s : %d) : %d;", (long long)w->q, q0, tj,
                (long long)w->q, q0, tj, tj);
    } else if (edge && pieces == 1) {
        em_line(c, "const int %s = %d; /* the kernel's fast path for a row */", lanes,
                edge * w->lanes);
    } else if (edge && w->row_tiles) { /* the kernel's fast path for a row's end */
        em_line(c, "const int %s = %s %% %lld == %lld ? %d : %d;", lanes, qbv, pieces, pieces - 1,
                edge * w->lanes, tj);
    } else if (edge) { /* the kernel's fast path for the last positions */
        em_line(c, "const int %s = %s + %d > %lld ? %d : %d;", lanes, q0, tj, (long long)w->q,
                edge * w->lanes, tj);
    } else {
        em_line(c, "const int %s = %d;", lanes, tj);
    }
    em_line(c, "%s %s[%d];", T, acc, ti * tj);
    char xt[IR_MAX_NAME * 3 + 64];
    if (w->local_planes)
        snprintf(xt, sizeof xt, "%s + %s", xp, q0);
    else
        snprintf(xt, sizeof xt, "%s + (%s * %lld + %s * %lld) * %lld + %s", xp, n,
                 (long long)w->C, g, cg, cs, q0);
    em_line(c, "%s(%s, %s, %s + %lld + %s * %lld, %s, %s);", kern, rows, lanes,
            bufname(c, w->wbuf), (long long)w->woff, k0, cg * w->taps, xt, acc);
    /* past the caches: the stores fenced after the tiles, or in parallel (each thread its own)
     * after each tile */
    const nout *stream = w->local_planes ? NULL : conv_stream_target(ne);
    emit_tile_store(c, ne, n, k0, q0, rows, acc, stream);
    if (stream && par)
        em_line(c, "NEST_STREAM_FENCE();");
    close_block(c);
    if (stream && !par)
        em_line(c, "NEST_STREAM_FENCE();");
    if (w->local_planes)
        close_block(c);
}

/* The filters packed for the tiles with channels in lanes: per group and tile of tj output
 * channels, a panel [input channel x tap][tj] (zeros past the group's channels), so that a
 * tile reads its filters in sequence. */
static void emit_pack(ctx *c, const wplan *w, const char *wp)
{
    const char *T = em_ctype(w->x->etype);
    long long kg = w->K / w->G, ct = w->C / w->G * w->taps, tj = w->nv * w->lanes;
    long long blocks = w->G * (w->kpad / tj);
    const char *gb = nm(c, "gb"), *k0 = nm(c, "k0"), *src = nm(c, "src"), *dst = nm(c, "dst");
    const char *e0 = nm(c, "e0"), *e = nm(c, "e"), *jj = nm(c, "jj");
    em_line(c, "/* the filters packed: per group and %lld output channels, [%lld input channels x "
               "taps][%lld] */",
            tj, ct, tj);
    if (parallel(c, blocks, ct * tj, prep_min(c, w)))
        em_omp_for(c);
    em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", gb, gb, blocks, gb);
    c->indent++;
    em_line(c, "const int64_t %s = %s %% %lld * %lld; /* the first channel of the panel */", k0,
            gb, w->kpad / tj, tj);
    em_line(c, "const %s *restrict %s = %s + %lld + (%s / %lld * %lld + %s) * %lld;", T, src,
            bufname(c, w->wbuf), (long long)w->woff, gb, w->kpad / tj, kg, k0, ct);
    em_line(c, "%s *restrict %s = %s + %s * %lld;", T, dst, wp, gb, ct * tj);
    const char *blk = nm(c, "blk"), *ne = nm(c, "ne"), *rows = nm(c, "rows");
    em_line(c, "const int64_t %s = %lld - %s < %lld ? %lld - %s : %lld; /* the group's channels here */",
            rows, kg, k0, tj, kg, k0, tj);
    /* a whole panel by squares of a vector's lanes (emit_transpose_fn): element by element, the
     * pack of 512 channels' 3x3 filters took 1.75 ms, as long as the convolution at batch 1 */
    int L = w->lanes;
    long long sq = ct / L * L;
    char from[48] = "0";
    if (sq > 0 && L > 1) {
        const char *jq = nm(c, "jq");
        em_line(c, "if (%s == %lld)", rows, tj);
        em_line(c, "    for (int64_t %s = 0; %s < %lld; %s += %d)", e0, e0, sq, e0, L);
        em_line(c, "        for (int %s = 0; %s < %lld; %s += %d)", jq, jq, tj, jq, L);
        em_line(c, "            nest_transpose_%s_%d(%s + %s * %lld + %s, %lld, %s + %s * %lld + %s, %lld);",
                nest_type_name((nest_type)w->x->etype), L, dst, e0, tj, jq, tj, src, jq, ct, e0,
                ct);
        snprintf(from, sizeof from, "%s == %lld ? %lld : 0", rows, tj, sq);
    }
    /* the rest (a partial panel, the sum's last values), a block of 16 input channels x taps at
     * a time, through a local block: the rows are read and the panel written in sequence */
    em_line(c, "for (int64_t %s = %s; %s < %lld; %s += 16) {", e0, from, e0, ct, e0);
    c->indent++;
    em_line(c, "const int64_t %s = %lld - %s < 16 ? %lld - %s : 16;", ne, ct, e0, ct, e0);
    em_line(c, "%s %s[%lld][16];", T, blk, tj);
    em_line(c, "for (int64_t %s = 0; %s < %lld; %s++)", jj, jj, tj, jj);
    em_line(c, "    for (int64_t %s = 0; %s < 16; %s++)", e, e, e);
    em_line(c, "        %s[%s][%s] = %s < %s && %s < %s ? %s[%s * %lld + %s + %s] : (%s)0;", blk,
            jj, e, jj, rows, e, ne, src, jj, ct, e0, e, T);
    em_line(c, "for (int64_t %s = 0; %s < %s; %s++)", e, e, ne, e);
    em_line(c, "    for (int64_t %s = 0; %s < %lld; %s++)", jj, jj, tj, jj);
    em_line(c, "        %s[(%s + %s) * %lld + %s] = %s[%s][%s];", dst, e0, e, tj, jj, blk, jj, e);
    close_block(c);
    close_block(c);
}

/* The tiles with positions in rows and output channels in lanes (the filters packed). */
static void emit_tiles_by_channels(ctx *c, int32_t k, const char *xp, const char *wp)
{
    const nest *ne = &c->p->nests[k];
    const wplan *w = ne->win;
    const char *T = em_ctype(w->x->etype);
    int nsp = w->win->nsp, ti = w->ti, tj = w->nv * w->lanes;
    long long kg = w->K / w->G, cg = w->C / w->G, cs = w->cstride, P = w->p;
    long long kt = w->kpad / tj, pt = (P + ti - 1) / ti;
    char tiles[512];
    count_text(c, tiles, sizeof tiles, w->N, w->G * kt * pt);
    char kern[IR_MAX_NAME + 32];
    em_conv_kernel_name(c, k, kern, sizeof kern);
    const char *t = nm(c, "t"), *ktv = nm(c, "kt"), *ptv = nm(c, "pt"), *g = nm(c, "g");
    const char *n = nm(c, "n"), *k0 = nm(c, "k0"), *p0 = nm(c, "p0"), *rows = nm(c, "rows");
    const char *cols = nm(c, "cols"), *acc = nm(c, "acc"), *q = nm(c, "q"), *ii = nm(c, "ii");
    const char *jj = nm(c, "jj"), *pp = nm(c, "pos");
    em_line(c, "/* %s tiles: images x groups x positions x output channels */", tiles);
    if (parallel_n(c, w->N, w->G * kt * pt, (double)ti * tj * cg * w->taps, PAR_MIN_MACS))
        em_omp_for(c);
    em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", t, t, tiles, t);
    c->indent++;
    emit_tile_indexes(c, w, t, n, g, ktv, ptv, kt, pt);
    em_line(c, "const int64_t %s = %s * %d, %s = %s * %d;", k0, ktv, tj, p0, ptv, ti);
    em_line(c, "const int %s = %lld - %s < %d ? (int)(%lld - %s) : %d;", rows, P, p0, ti, P, p0, ti);
    em_line(c, "const int %s = %lld - %s < %d ? (int)(%lld - %s) : %d;", cols, kg, k0, tj, kg, k0,
            tj);
    /* where each position of the tile is in the planes (a partial tile repeats its last) */
    buf qe = {0};
    int64_t div = 1;
    for (int i = nsp - 1; i >= 0; i--) {
        buf_printf(&qe, "%s%s / %lld %% %lld * %lld", i == nsp - 1 ? "" : " + ", pp,
                   (long long)div, (long long)w->o[i], (long long)w->qst[i]);
        div *= w->o[i];
    }
    char *qs = buf_finish(&qe);
    em_line(c, "int64_t %s[%d];", q, ti);
    em_line(c, "for (int %s = 0; %s < %d; %s++) {", ii, ii, ti, ii);
    em_line(c, "    const int64_t %s = %s + (%s < %s ? %s : %s - 1);", pp, p0, ii, rows, ii, rows);
    em_line(c, "    %s[%s] = %s;", q, ii, qs ? qs : "0");
    em_line(c, "}");
    free(qs);
    em_line(c, "%s %s[%d];", T, acc, ti * tj);
    em_line(c, "%s(%s, %s + (%s * %lld + %s) * %lld, %s + (%s * %lld + %s * %lld) * %lld, %s);",
            kern, q, wp, g, kt, ktv, cg * w->taps * tj, xp, n, (long long)w->C, g, cg, cs, acc);
    /* the stores: position by position, each output channel's run */
    char kexpr[IR_MAX_NAME * 3 + 32], pexpr[IR_MAX_NAME * 2 + 8], oexpr[IR_MAX_SPATIAL][IR_MAX_NAME * 2 + 64];
    char value[IR_MAX_NAME * 4 + 32];
    snprintf(kexpr, sizeof kexpr, "%s * %lld + %s + %s", g, kg, k0, jj);
    snprintf(pexpr, sizeof pexpr, "%s + %s", p0, ii);
    c->expr[0] = n;
    c->expr[1] = kexpr;
    position_indexes(c, w, pexpr, oexpr);
    em_line(c, "for (int %s = 0; %s < %s; %s++)", jj, jj, cols, jj);
    em_line(c, "    for (int %s = 0; %s < %s; %s++) {", ii, ii, rows, ii);
    c->indent += 2;
    snprintf(value, sizeof value, "%s[%s * %d + %s]", acc, ii, tj, jj);
    emit_stores(c, ne, value);
    close_block(c);
    c->indent--;
    close_block(c);
}

static void emit_conv(ctx *c, int32_t k)
{
    const nest *ne = &c->p->nests[k];
    const wplan *w = ne->win;
    const char *T = em_ctype(w->x->etype);
    int ti = w->ti, tj = w->nv * w->lanes;
    em_nest_open(c, k);
    if (w->by_channels)
        em_line(c, "/* direct: tiles of %d positions x %d output channels (%d vector%s of %d) in "
                   "registers,",
                ti, tj, w->nv, w->nv > 1 ? "s" : "", w->lanes);
    else
        em_line(c, "/* direct: tiles of %d output channels x %d positions (%d vector%s of %d) in "
                   "registers,",
                ti, tj, w->nv, w->nv > 1 ? "s" : "", w->lanes);
    em_line(c, " * the sum over %lld input channels x %lld taps%s */", (long long)(w->C / w->G),
            (long long)w->taps,
            w->by_channels ? ""
            : w->dense     ? "; positions dense, a run per input channel and tap"
            : w->win->nsp > 1 ? "; positions with the planes' margins"
                              : "");
    const char *xp = nm(c, "xp"), *wp = nm(c, "wp");
    const pbuf *pb = ne->pack >= 0 ? &c->p->bufs[ne->pack] : NULL;
    if (w->in_place) {
        em_line(c, "const %s *restrict %s = %s + %lld;", T, xp, bufname(c, w->xbuf),
                (long long)w->xoff);
    }
    /* the private workspace: placed at run time for a symbolic batch (emit_dims.c) */
    char at[64], packoff[512];
    if (pb && pb->offset < 0)
        snprintf(at, sizeof at, "nest_off%d", (int)ne->pack);
    else
        snprintf(at, sizeof at, "%lld", pb ? (long long)pb->offset : 0LL);
    count_text(c, packoff, sizeof packoff, w->packoff, 1);
    /* positions in lanes over a batch, on one core: image by image, its planes copied just
     * before its tiles read them, still in the cache (all copied first, the first images' had
     * left it: the stem at batch 8 2-4% faster). With OpenMP the copy and the tiles stay a
     * parallel loop each over the whole batch: two parallel regions an image made the stem
     * at batch 8 on two threads 7.7 -> 9.4 ms. */
    bool by_image = !c->p->opts->openmp && !w->in_place && !w->local_planes &&
                    !w->by_channels && !w->dense && !dim_is_sym(w->N) && w->N >= 2;
    const char *image = by_image ? nm(c, "n0") : NULL;
    if (!w->in_place && !w->local_planes) {
        em_line(c, "%s *restrict %s = (%s *)(ws + %s);", T, xp, T, at);
        em_ref_ws(c);
        if (by_image) {
            em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) { /* image by image */", image,
                    image, (long long)w->N, image);
            c->indent++;
        }
        if (!w->dense) /* (the dense form's copy: emit_tiles_dense) */
            emit_copy(c, w, xp, w->packoff, NULL, image);
    }
    if (w->by_channels && w->prepacked) {
        em_line(c, "const %s *restrict %s = %s; /* the filters, packed ahead of time */", T, wp,
                bufname(c, w->wbuf));
        emit_tiles_by_channels(c, k, xp, wp);
    } else if (w->by_channels) {
        em_line(c, "%s *restrict %s = (%s *)(ws + %s) + %s;", T, wp, T, at, packoff);
        em_ref_ws(c);
        emit_pack(c, w, wp);
        emit_tiles_by_channels(c, k, xp, wp);
    } else if (w->dense) {
        const char *part = nm(c, "part");
        em_line(c, "%s *restrict %s = (%s *)(ws + %s) + %lld;", T, part, T, at,
                (long long)w->partoff);
        emit_tiles_dense(c, k, xp, part);
    } else {
        emit_tiles_by_positions(c, k, xp, image);
    }
    if (by_image)
        close_block(c);
    em_nest_close(c);
}

/* ---- pooling ---- */

static void emit_pool(ctx *c, int32_t k)
{
    const nest *ne = &c->p->nests[k];
    const wplan *w = ne->win;
    const ir_window *win = w->win;
    int nsp = win->nsp, et = w->x->etype;
    bool max = ne->outs[0].value->op == OP_MAX_POOL;
    const char *T = em_ctype(et);
    /* per: the taps an image and channel visit (parallel's estimate); whole: the window's
     * taps, below 2^62 (ir_window) */
    double per = 1;
    long long whole = 1;
    char nc[512];
    count_text(c, nc, sizeof nc, w->N, w->C);
    for (int i = 0; i < nsp; i++) {
        per *= (double)w->o[i] * (double)win->window[i];
        whole *= win->window[i];
    }
    em_nest_open(c, k);
    const char *ncv = nm(c, "nc"), *acc = nm(c, "acc");
    char n[IR_MAX_NAME + 32], ch[IR_MAX_NAME + 32];
    image_channel(ncv, w->C, n, ch, sizeof n);
    const char *o[IR_MAX_SPATIAL], *a[IR_MAX_SPATIAL], *lo[IR_MAX_SPATIAL], *hi[IR_MAX_SPATIAL];
    const char *in[IR_MAX_SPATIAL];
    static const char *const base[][IR_MAX_SPATIAL] = {
        {"o0", "o1", "o2"}, {"a0", "a1", "a2"}, {"lo0", "lo1", "lo2"}, {"hi0", "hi1", "hi2"},
        {"i0", "i1", "i2"}};
    for (int i = 0; i < nsp; i++) {
        o[i] = nm(c, base[0][i]);
        a[i] = nm(c, base[1][i]);
        lo[i] = nm(c, base[2][i]);
        hi[i] = nm(c, base[3][i]);
        in[i] = nm(c, base[4][i]);
    }
    if (parallel_n(c, w->N, w->C, per, PAR_MIN))
        em_omp_for(c);
    em_line(c, "for (int64_t %s = 0; %s < %s; %s++) { /* image and channel */", ncv, ncv, nc,
            ncv);
    c->indent++;
    for (int i = 0; i < nsp; i++) {
        long long s = win->stride[i], pb = win->pad_below[i], f = win->window[i], d = w->d[i];
        if (i == nsp - 1 && s > 1) {
            /* clang vectorizes the outputs of a strided window with gathers (interleaved
             * accesses are off, runtime/: they miscompile); one at a time they run 6x faster
             * (a 2x2/2 max pool of 64 channels, 112x112, batch 8: 11.0 -> 1.9 ms a call) */
            em_line(c, "#if defined(__clang__)");
            em_line(c, "#pragma clang loop vectorize(disable)");
            em_line(c, "#endif");
        }
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", o[i], o[i], (long long)w->o[i], o[i]);
        c->indent++;
        em_line(c, "const int64_t %s = %s * %lld - %lld;", a[i], o[i], s, pb);
        em_line(c, "const int64_t %s = %s > 0 ? %s : 0, %s = %s + %lld < %lld ? %s + %lld : %lld;",
                lo[i], a[i], a[i], hi[i], a[i], f, d, a[i], f, d);
    }
    buf init = {0};
    em_init_text(&init, max ? OP_MAX : OP_SUM, et);
    char *is = buf_finish(&init);
    em_line(c, "%s %s = %s;", T, acc, is ? is : "0");
    free(is);
    for (int i = 0; i < nsp; i++) {
        em_line(c, "for (int64_t %s = %s; %s < %s; %s++)", in[i], lo[i], in[i], hi[i], in[i]);
        c->indent++;
    }
    em_line(c, "{");
    c->indent++;
    c->expr[0] = n;
    c->expr[1] = ch;
    for (int i = 0; i < nsp; i++)
        c->expr[2 + i] = in[i];
    const char *v = nm(c, "v");
    char dst[IR_MAX_NAME + 32];
    snprintf(dst, sizeof dst, "const %s %s", T, v);
    em_assign(c, dst, w->x);
    char *comb = em_combine(c, max ? OP_MAX : OP_SUM, et, acc, v);
    em_line(c, "%s = %s;", acc, comb ? comb : "");
    free(comb);
    c->indent--;
    em_line(c, "}");
    c->indent -= nsp;
    if (!max) {
        buf cnt = {0};
        if (win->include_pad)
            buf_printf(&cnt, "%lld", whole);
        for (int i = 0; !win->include_pad && i < nsp; i++)
            buf_printf(&cnt, "%s(%s - %s)", i ? " * " : "", hi[i], lo[i]);
        char *cs = buf_finish(&cnt);
        em_line(c, "%s /= (%s)(%s);", acc, T, cs ? cs : "1");
        free(cs);
    }
    for (int i = 0; i < nsp; i++)
        c->expr[2 + i] = o[i];
    emit_stores(c, ne, acc);
    for (int i = 0; i < nsp; i++)
        close_block(c);
    close_block(c);
    em_nest_close(c);
}

void em_window(ctx *c, int32_t k)
{
    if (c->p->nests[k].win->wbuf >= 0)
        emit_conv(c, k);
    else
        emit_pool(c, k);
}
