/*
 * emit_conv_kernels.c - the kernels of convolutions (plans of passes/conv.c): one static
 * function per convolution, before the function's entry points, that computes one register
 * tile, ti output channels by nv vectors of positions (or, with channels in lanes, ti positions
 * by nv vectors of output channels), with the sum over the group's input channels and the
 * window's taps; and for the dense form's tail, one that sums the last positions with the
 * channels and taps in the lanes. The fast paths use GNU C vector types (gcc and clang), one
 * named accumulator per vector, so that no compiler has to unroll anything to keep them in
 * registers; a plain loop handles partial tiles and other compilers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ---- the preamble's vector types ---- */

static int vec_helper(int etype, int vb)
{
    return H_VEC + 3 * (etype == NEST_F64) + (vb >= 64 ? 2 : vb >= 32 ? 1 : 0);
}

static void vec_name(char *s, size_t n, int etype, int vb)
{
    snprintf(s, n, "nest_%sx%d", nest_type_name((nest_type)etype),
             vb / (int)nest_type_size((nest_type)etype));
}

void em_contract_macro(buf *b)
{
    buf_puts(b, "/* gcc fuses multiply-adds in ISO C mode only when asked; and it would load a\n"
                    " * vector again for every multiply-add that uses it (on x86 a memory operand,\n"
                    " * an unaligned load each): NEST_KEEP holds it in a register */\n"
                    "#if defined(__GNUC__) && !defined(__clang__)\n"
                    "#define NEST_CONTRACT __attribute__((optimize(\"fp-contract=fast\")))\n"
                    "#if defined(__x86_64__)\n#define NEST_KEEP(v) __asm__(\"\" : \"+v\"(v))\n#endif\n"
                    "#else\n#define NEST_CONTRACT\n#endif\n"
                    "#ifndef NEST_KEEP\n#define NEST_KEEP(v) (void)0\n#endif\n");
}

void em_vec_helper(buf *b, int h)
{
    int et, vb;
    em_helper_width(h - H_VEC, &et, &vb);
    char v[32];
    vec_name(v, sizeof v, et, vb);
    buf_printf(b,
               "#ifdef __GNUC__\n/* %d bytes of %s, loaded and stored at any address */\n"
               "typedef %s %s __attribute__((vector_size(%d), aligned(%d), may_alias));\n#endif\n",
               vb, em_ctype(et), em_ctype(et), v, vb, (int)nest_type_size((nest_type)et));
}

/* ---- kernels ---- */

/* Kernels of at most this many taps run them as straight code, each with its offsets as
 * constants (no loop counter, no table: 3% of a 3x3 kernel's instructions); longer windows
 * loop over the taps, axis by axis. */
#define UNROLL_TAPS 64

const char *em_conv_kernel_name(ctx *c, int32_t k, char *s, size_t n)
{
    snprintf(s, n, "nest_conv_%s_%d", c->f->name, (int)k);
    return s;
}

/* What each kernel of convolution nest k starts from: its plan; the C names of its element
 * type (T), of its vector type (V, 32 bytes; the preamble's helper marked used) and of the
 * kernel (name, IR_MAX_NAME + 32 bytes). */
static const wplan *kernel_start(ctx *c, int32_t k, const char **T, char *V, char *name)
{
    const wplan *w = c->p->nests[k].win;
    int et = c->p->bufs[c->p->nests[k].outs[0].buf].etype;
    *T = em_ctype(et);
    vec_name(V, 32, et, w->vb);
    em_conv_kernel_name(c, k, name, IR_MAX_NAME + 32);
    *c->helpers |= 1ull << vec_helper(et, w->vb);
    return w;
}

/* The tables of the taps' offsets, one per axis of the window (a tap reads at the sum of its
 * axes' entries: conv.c's conv_tapoff), for the loops over the taps (tap_loops): a window of
 * 1000 x 1000 takes 2,000 entries, not a million. */
static void emit_offsets(ctx *c, const wplan *w)
{
    const ir_window *win = w->win;
    for (int i = 0; i < win->nsp; i++) {
        buf_printf(c->b, "    static const int64_t off%d[%lld] = {", i, (long long)win->window[i]);
        for (int64_t f = 0; f < win->window[i]; f++)
            buf_printf(c->b, "%s%lld", f ? (f % 12 ? ", " : ",\n        ") : "",
                       (long long)w->axoff[i][f]);
        buf_puts(c->b, "};\n");
    }
}

/* Opens the loops over the taps, row-major over the window's axes, at `indent`: inside, t is
 * the tap and ot its offset (emit_offsets' tables); one brace to close. */
static void tap_loops(ctx *c, const wplan *w, int indent)
{
    const ir_window *win = w->win;
    int nsp = win->nsp;
    buf_printf(c->b, "%*s", indent, "");
    for (int i = 0; i < nsp; i++)
        buf_printf(c->b, "for (int64_t a%d = 0; a%d < %lld; a%d++) ", i, i,
                   (long long)win->window[i], i);
    buf_printf(c->b, "{\n%*s    const int64_t t = ", indent, "");
    for (int i = 0; i < nsp; i++) {
        long long after = 1;
        for (int j = i + 1; j < nsp; j++)
            after *= win->window[j];
        buf_printf(c->b, "%sa%d * %lld", i ? " + " : "", i, after);
    }
    buf_printf(c->b, ", ot = ");
    for (int i = 0; i < nsp; i++)
        buf_printf(c->b, "%soff%d[a%d]", i ? " + " : "", i, i);
    buf_puts(c->b, ";\n");
}

/* The fast path of a kernel, at `in` spaces: the ti x nv vector accumulators, the sum over the
 * group's input channels c and the taps (straight code up to UNROLL_TAPS taps, else tap_loops),
 * and the stores of the tile into out. Each tap loads nv vectors at p and multiplies them by one
 * scalar a per row i: with positions in lanes, p is the input at the tap and a the filter
 * wc[i][t]; with channels in lanes, p is the tap's packed filters and a the input x<i>[o]. */
static void vec_tile(ctx *c, const wplan *w, const char *T, const char *V, int in, int nv)
{
    buf *b = c->b;
    bool by_ch = w->by_channels;
    int ti = w->ti, L = w->lanes, tj = w->nv * L;
    long long cg = w->C / w->G, taps = w->taps, crs = cg * taps, cs = w->cstride;
    buf_printf(b, "%*s%s", in, "", V);
    for (int i = 0; i < ti; i++)
        for (int j = 0; j < nv; j++)
            buf_printf(b, "%s s%d_%d = {0}", i || j ? "," : "", i, j);
    if (w->dense) { /* a block of the sum, c0 .. c1, added to out's sums when add */
        buf_printf(b, ";\n%*sif (add) {\n", in, "");
        for (int i = 0; i < ti; i++)
            for (int j = 0; j < nv; j++)
                buf_printf(b, "%*s    s%d_%d = *(const %s *)(out + %d);\n", in, "", i, j, V,
                           i * tj + j * L);
        buf_printf(b, "%*s}\n%*sfor (int64_t c = c0; c < c1; c++) {\n%*s", in, "", in, "",
                   in + 4, "");
    } else {
        buf_printf(b, ";\n%*sfor (int64_t c = 0; c < %lld; c++) {\n%*s", in, "", cg, in + 4, "");
    }
    if (by_ch)
        buf_printf(b, "const %s *restrict wc = w + c * %lld;\n", T, taps * tj);
    else
        buf_printf(b, "const %s *restrict xc = x + c * %lld, *restrict wc = w + c * %lld;\n", T,
                   cs, taps);
    bool unroll = w->taps <= UNROLL_TAPS;
    if (!unroll)
        tap_loops(c, w, in + 4);
    for (int64_t t = 0; t < (unroll ? w->taps : 1); t++) {
        char tt[32], ot[32];
        snprintf(tt, sizeof tt, unroll ? "%lld" : "t", (long long)t);
        snprintf(ot, sizeof ot, unroll ? "%lld" : "ot", (long long)conv_tapoff(w, t));
        buf_printf(b, "%*s%s ", in + 4, "", unroll ? "{" : "   ");
        if (by_ch)
            buf_printf(b, "const int64_t o = c * %lld + %s;\n"
                          "%*sconst %s *restrict p = wc + %s * %d;\n",
                       cs, ot, in + 8, "", T, tt, tj);
        else
            buf_printf(b, "const %s *restrict p = xc + %s;\n", T, ot);
        buf_printf(b, "%*s%s", in + 8, "", V);
        for (int j = 0; j < nv; j++)
            buf_printf(b, "%s b%d = *(const %s *)(p + %d)", j ? "," : "", j, V, j * L);
        buf_printf(b, ";\n%*s", in + 7, "");
        for (int j = 0; j < nv; j++)
            buf_printf(b, " NEST_KEEP(b%d);", j);
        buf_printf(b, "\n%*s%s a;\n", in + 8, "", T);
        for (int i = 0; i < ti; i++) {
            if (by_ch)
                buf_printf(b, "%*sa = x%d[o];", in + 8, "", i);
            else
                buf_printf(b, "%*sa = wc[%lld + %s];", in + 8, "", (long long)i * crs, tt);
            for (int j = 0; j < nv; j++)
                buf_printf(b, " s%d_%d += a * b%d;", i, j, j);
            buf_putc(b, '\n');
        }
        buf_printf(b, "%*s}\n", in + 4, "");
    }
    buf_printf(b, "%*s}\n", in, "");
    for (int i = 0; i < ti; i++)
        for (int j = 0; j < nv; j++)
            buf_printf(b, "%*s*(%s *)(out + %d) = s%d_%d;\n", in, "", V, i * tj + j * L, i, j);
}

/* The kernel of convolution nest k: out[ii * tj + jj] = sum over the group's input channels c
 * and taps t of w[ii][c][t] * x[c * cstride + conv_tapoff(w, t) + jj], for ii < rows, jj < lanes
 * (the dense form: over channels c0 .. c1, added to out's sums when add). */
static void emit_kernel(ctx *c, int32_t k)
{
    char V[32], name[IR_MAX_NAME + 32];
    const char *T;
    const wplan *w = kernel_start(c, k, &T, V, name);
    int ti = w->ti, tj = w->nv * w->lanes;
    long long cg = w->C / w->G, taps = w->taps, crs = cg * taps, cs = w->cstride;
    buf *b = c->b;
    buf_printf(b,
               "/* out[%d x %d] = the sum over %lld input channels and %lld taps of filters times input,\n"
               " * for `rows` output channels and `lanes` positions: one register tile of %s */\n",
               ti, tj, cg, taps, namer_name(&c->nm, w->node));
    buf_printf(b,
               "static NEST_CONTRACT void %s(int rows, int lanes, const %s *restrict w,\n"
               "    const %s *restrict x, %s *restrict out%s)\n{\n",
               name, T, T, T, w->dense ? ", int add, int64_t c0, int64_t c1" : "");
    emit_offsets(c, w);
    buf_puts(b, "#ifdef __GNUC__\n");
    int edge = conv_edge_vectors(w);
    /* (tiles along rows shorter than a tile are all the last positions of a row) */
    if (!edge || !w->row_tiles || w->o[1] > tj) {
        buf_printf(b, "    if (rows == %d && lanes == %d) {\n", ti, tj);
        vec_tile(c, w, T, V, 8, w->nv);
        buf_puts(b, "        return;\n    }\n");
    }
    if (edge) {
        buf_printf(b, "    if (rows == %d && lanes == %d) { /* the last positions%s */\n", ti,
                   edge * w->lanes, w->row_tiles ? " of a row" : "");
        vec_tile(c, w, T, V, 8, edge);
        buf_puts(b, "        return;\n    }\n");
    }
    buf_puts(b, "#endif\n");
    if (w->dense)
        buf_printf(b, "    if (!add)\n        for (int i = 0; i < %d; i++)\n            out[i] = 0;\n"
                      "    for (int64_t c = c0; c < c1; c++)\n", ti * tj);
    else
        buf_printf(b, "    for (int i = 0; i < %d; i++)\n        out[i] = 0;\n"
                      "    for (int64_t c = 0; c < %lld; c++)\n", ti * tj, cg);
    tap_loops(c, w, 8);
    buf_printf(b,
               "            for (int ii = 0; ii < rows; ii++) {\n"
               "                const %s a = w[ii * %lld + c * %lld + t];\n"
               "                const %s *restrict p = x + c * %lld + ot;\n"
               "                for (int jj = 0; jj < lanes; jj++)\n"
               "                    out[ii * %d + jj] += a * p[jj];\n"
               "            }\n        }\n}\n\n",
               T, crs, taps, T, cs, tj);
}

/* The kernel of convolution nest k with channels in lanes: out[ii * tj + jj] = sum over the
 * group's input channels c and taps t of x[q[ii] + c * cstride + conv_tapoff(w, t)] * the packed filters
 * [c][t][jj], for every ii < ti and jj < tj (the caller repeats a position to fill a tile, and
 * the packed filters hold zeros past the group's channels). */
static void emit_kernel_by_channels(ctx *c, int32_t k)
{
    char V[32], name[IR_MAX_NAME + 32];
    const char *T;
    const wplan *w = kernel_start(c, k, &T, V, name);
    int ti = w->ti, tj = w->nv * w->lanes;
    long long cg = w->C / w->G, taps = w->taps, cs = w->cstride;
    buf *b = c->b;
    buf_printf(b,
               "/* out[%d x %d] = the sum over %lld input channels and %lld taps of input times "
               "filters,\n * for %d positions (at x + q[i]) and %d output channels: one "
               "register tile of %s */\n",
               ti, tj, cg, taps, ti, tj, namer_name(&c->nm, w->node));
    buf_printf(b,
               "static NEST_CONTRACT void %s(const int64_t *restrict q, const %s *restrict w,\n"
               "    const %s *restrict x, %s *restrict out)\n{\n",
               name, T, T, T);
    buf_puts(b, "#ifdef __GNUC__\n");
    if (w->taps > UNROLL_TAPS)
        emit_offsets(c, w);
    buf_printf(b, "    const %s", T);
    for (int i = 0; i < ti; i++)
        buf_printf(b, "%s *restrict x%d = x + q[%d]", i ? "," : "", i, i);
    buf_puts(b, ";\n");
    vec_tile(c, w, T, V, 4, w->nv);
    buf_puts(b, "#else\n");
    emit_offsets(c, w);
    buf_printf(b, "    for (int i = 0; i < %d; i++)\n        out[i] = 0;\n"
                  "    for (int64_t c = 0; c < %lld; c++)\n", ti * tj, cg);
    tap_loops(c, w, 8);
    buf_printf(b,
               "            for (int ii = 0; ii < %d; ii++) {\n"
               "                const %s a = x[q[ii] + c * %lld + ot];\n"
               "                for (int jj = 0; jj < %d; jj++)\n"
               "                    out[ii * %d + jj] += a * w[(c * %lld + t) * %d + jj];\n"
               "            }\n        }\n#endif\n}\n\n",
               ti, T, cs, tj, tj, taps, tj);
}

/* The output channels the dense form's tail sums at a time (its kernel's fast path). */
#define TAIL_ROWS 4

/* The tail kernel of convolution nest k (dense form): out[ii * tail + pp] += the sum over the
 * input channels c0 .. c1 and the taps, e, of w[ii][e] * x[pp][e] (out set unless add), for
 * ii < rows (at most a tile's), pp < tail. The fast path takes TAIL_ROWS channels at a time, the
 * sum a vector of channels and taps per step (two, each into accumulators of its own, when
 * there would be fewer than 8: the FMA units' latency), the accumulators' lanes added at the
 * end. */
static void emit_tail_kernel(ctx *c, int32_t k)
{
    char V[32], name[IR_MAX_NAME + 32];
    const char *T;
    const wplan *w = kernel_start(c, k, &T, V, name);
    int L = w->lanes, R = TAIL_ROWS, tail = (int)w->tail, U = R * tail < 8 ? 2 : 1;
    long long ct = w->C / w->G * w->taps, taps = w->taps;
    buf *b = c->b;
    buf_printf(b,
               "/* out[rows x %d] (+)= the sum over input channels c0 .. c1 and %lld taps of filters\n"
               " * times input, for `rows` output channels and the last %d position%s of %s: the sum\n"
               " * in the lanes */\n",
               tail, taps, tail, tail > 1 ? "s" : "", namer_name(&c->nm, w->node));
    buf_printf(b,
               "static NEST_CONTRACT void %s_tail(int rows, const %s *restrict w,\n"
               "    const %s *restrict x, %s *restrict out, int add, int64_t c0, int64_t c1)\n{\n"
               "    const int64_t e0 = c0 * %lld, e1 = c1 * %lld;\n    int i0 = 0;\n",
               name, T, T, T, taps, taps);
    buf_printf(b, "#ifdef __GNUC__\n    for (; i0 + %d <= rows; i0 += %d) {\n", R, R);
    buf_printf(b, "        const %s *restrict wr = w + i0 * %lld;\n        %s", T, ct, V);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < tail; j++)
            for (int u = 0; u < U; u++)
                buf_printf(b, "%s s%d_%d_%d = {0}", i || j || u ? "," : "", i, j, u);
    buf_printf(b, ";\n        int64_t e = e0;\n        for (; e + %d <= e1; e += %d) {\n", U * L,
               U * L);
    for (int u = 0; u < U; u++) {
        buf_printf(b, "            {\n                %s", V);
        for (int j = 0; j < tail; j++)
            buf_printf(b, "%s b%d = *(const %s *)(x + %lld + e + %d)", j ? "," : "", j, V,
                       (long long)j * ct, u * L);
        buf_printf(b, ";\n               ");
        for (int j = 0; j < tail; j++)
            buf_printf(b, " NEST_KEEP(b%d);", j);
        buf_printf(b, "\n                %s a;\n", V);
        for (int i = 0; i < R; i++) {
            buf_printf(b, "                a = *(const %s *)(wr + %lld + e + %d);", V,
                       (long long)i * ct, u * L);
            for (int j = 0; j < tail; j++)
                buf_printf(b, " s%d_%d_%d += a * b%d;", i, j, u, j);
            buf_putc(b, '\n');
        }
        buf_puts(b, "            }\n");
    }
    buf_puts(b, "        }\n");
    for (int i = 0; i < R; i++)
        for (int j = 0; j < tail; j++) {
            buf_printf(b, "        out[(i0 + %d) * %d + %d] = (add ? out[(i0 + %d) * %d + %d] : 0)",
                       i, tail, j, i, tail, j);
            for (int u = 0; u < U; u++)
                for (int l = 0; l < L; l++)
                    buf_printf(b, " + s%d_%d_%d[%d]", i, j, u, l);
            buf_puts(b, ";\n");
        }
    buf_printf(b,
               "        for (; e < e1; e++)\n"
               "            for (int ii = 0; ii < %d; ii++)\n"
               "                for (int pp = 0; pp < %d; pp++)\n"
               "                    out[(i0 + ii) * %d + pp] += wr[ii * %lld + e] * x[pp * %lld + e];\n"
               "    }\n#endif\n",
               R, tail, tail, ct, ct);
    buf_printf(b,
               "    for (int ii = i0; ii < rows; ii++)\n"
               "        for (int pp = 0; pp < %d; pp++) {\n"
               "            %s s = add ? out[ii * %d + pp] : 0;\n"
               "            for (int64_t e = e0; e < e1; e++)\n"
               "                s += w[ii * %lld + e] * x[pp * %lld + e];\n"
               "            out[ii * %d + pp] = s;\n"
               "        }\n}\n\n",
               tail, T, tail, ct, ct, tail);
}

void em_window_kernels(ctx *c)
{
    for (int32_t k = 0; k < c->p->nnests; k++) {
        const nest *ne = &c->p->nests[k];
        if (ne->dead || !ne->win || ne->win->wbuf < 0 || !em_nest_runs(ne))
            continue;
        if (ne->win->by_channels)
            emit_kernel_by_channels(c, k);
        else
            emit_kernel(c, k);
        if (ne->win->tail)
            emit_tail_kernel(c, k);
    }
}

