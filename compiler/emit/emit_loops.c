/*
 * emit_loops.c - loop nests in C: one block per nest opening with a comment naming the graph
 * nodes it computes; loops with constant bounds split at concat boundaries; folds into partial
 * accumulators or in parallel chunks; row groups under one loop.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ---- nests ---- */

void em_store_text(ctx *c, buf *b, const nout *o)
{
    buf_printf(b, "%s[", c->bufname[o->buf]);
    em_ref(c, o->buf);
    em_index(c, b, o->buf, o->off, o->st, c->ne->rank);
    buf_putc(b, ']');
}

/* The body at the innermost level: evaluate, then store or fold each output. */
void em_outputs(ctx *c, const nout *outs, fx *const *vals, int nouts);

static void emit_body(ctx *c, fx *const *vals) { em_outputs(c, c->ne->outs, vals, c->ne->nouts); }

/* One step of an argmax or argmin (output i, the element's value v): a better element, or the
 * first NaN, takes the lead; ties keep the lower index. The index is the innermost loop's
 * variable when the nest folds that axis (flatten.c dropped it when its extent is 1). */
static void emit_arg_step(ctx *c, const nout *o, int i, const char *v)
{
    const nest *ne = c->ne;
    int et = o->value->etype;
    bool folded = ne->rank > 0 && (ne->reduced & (1u << (ne->rank - 1)));
    const char *at = folded ? c->expr[ne->rank - 1] : "0", *best = c->best[i];
    const char *cmp = o->reduce == OP_ARGMAX ? ">" : "<";
    char nb[IR_MAX_NAME + 8];
    snprintf(nb, sizeof nb, "%s_v", o->node >= 0 ? namer_name(&c->nm, o->node) : "arg");
    const char *x = em_unique(c->body_names, nb);
    buf cm = {0};
    em_node_comment(c, &cm, o->node);
    char *cs = em_finish(c, &cm);
    em_line(c, "const %s %s = %s;%s", em_ctype(et), x, v, cs ? cs : "");
    free(cs);
    if (em_is_float(et))
        em_line(c, "if (%s %s %s || (%s != %s && %s == %s)) {", x, cmp, best, x, x, best, best);
    else
        em_line(c, "if (%s %s %s) {", x, cmp, best);
    em_line(c, "    %s = %s;", best, x);
    em_line(c, "    %s = %s;", c->acc[i], at);
    em_line(c, "}");
}

/* The line d = d op v (v the text of val) with node's comment. An op inlined into the fold is
 * one operand of its template: acc + (a - b), not acc + a - b, and never acc + a > b ? a : b.
 * (Out of memory fails c->b: em_finish.) */
static void emit_fold(ctx *c, int op, int et, const fx *val, const char *d, const char *v,
                      int32_t node)
{
    char *pv = NULL;
    if (val->kind == FX_OP && !is_identifier(v, strlen(v))) {
        buf t = {0};
        buf_printf(&t, "(%s)", v);
        v = pv = em_finish(c, &t);
    }
    char *s = v ? em_combine(c, op, et, d, v) : NULL;
    buf cm = {0};
    em_node_comment(c, &cm, node);
    char *cs = em_finish(c, &cm);
    if (s)
        em_line(c, "%s = %s;%s", d, s, cs ? cs : "");
    free(pv);
    free(s);
    free(cs);
}

/* Evaluates vals and stores or folds each into its output. */
void em_outputs(ctx *c, const nout *outs, fx *const *vals, int nouts)
{
    body bd = {.c = c};
    /* the body's locals live in a scope of their own: every copy of the body reuses names */
    names scope = {.outer = &c->local}, *saved = c->body_names;
    c->body_names = &scope;
    em_values(c, &bd, vals, nouts);
    for (int i = 0; i < nouts && !bd.oom; i++) {
        const nout *o = &outs[i];
        char *v = em_value_text(&bd, vals[i]);
        buf dst = {0};
        if (o->reduce >= 0 && c->acc && c->acc[i]) {
            if (c->accs > 1)
                buf_printf(&dst, "%s[%s]", c->acc[i], c->unrolled ? "u" : "0");
            else
                buf_puts(&dst, c->acc[i]);
        } else if (o == c->stream_to) { /* into the tile, which leaves after the block */
            buf_puts(&dst, c->tile_text);
        } else {
            em_store_text(c, &dst, o);
        }
        char *d = em_finish(c, &dst);
        if (!v || !d) {
            bd.oom = true;
        } else if (em_is_arg(o->reduce)) {
            emit_arg_step(c, o, i, v);
        } else if (o->reduce >= 0) {
            emit_fold(c, o->reduce, o->value->etype, vals[i], d, v, o->node);
        } else {
            buf cm = {0};
            em_node_comment(c, &cm, vals[i]->kind == FX_OP ? -1 : o->node);
            char *cs = em_finish(c, &cm);
            em_line(c, "%s = %s;%s", d, v, cs ? cs : "");
            free(cs);
        }
        free(v);
        free(d);
    }
    free(bd.v);
    if (bd.oom || scope.oom)
        c->b->failed = true;
    em_names_free(&scope);
    c->body_names = saved;
}

/* The boundaries of concats on axis k that lie strictly inside (lo, hi), not counting concats
 * nested in another concat's part on the same axis (they surface when the outer resolves). */
typedef struct bounds {
    int axis;
    int64_t lo, hi;
    int64_t *v;
    size_t n, cap;
    bool oom;
} bounds;

static void add_bound(bounds *bs, int64_t x)
{
    if (x <= bs->lo || x >= bs->hi)
        return;
    int64_t *v = grow_array(bs->v, &bs->cap, bs->n, sizeof *v);
    if (!v) {
        bs->oom = true;
        return;
    }
    bs->v = v;
    bs->v[bs->n++] = x;
}

static void collect_bounds(fx *e, void *ctx_)
{
    bounds *bs = ctx_;
    if (e->kind == FX_CONCAT && e->axis == bs->axis)
        for (int j = 0; j <= e->nargs; j++)
            add_bound(bs, e->starts[j]);
}

/* The walk for the boundaries does not enter the parts of a concat on the axis. */
static bool outside_concat(const fx *e, void *ctx_)
{
    const bounds *bs = ctx_;
    return !(e->kind == FX_CONCAT && e->axis == bs->axis);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void emit_level(ctx *c, int lvl, fx **vals);
static void emit_loop(ctx *c, int lvl, const char *lo, const char *hi, int64_t n, fx **sel);

/* Loop level lvl over [lo, hi), split at concat boundaries. Concats nested in a part are only
 * seen once their outer concat resolves, so every segment is checked again. */
static void emit_range(ctx *c, int lvl, int64_t lo, int64_t hi, fx **vals)
{
    const nest *ne = c->ne;
    bounds bs = {.axis = lvl, .lo = lo, .hi = hi};
    if (!(c->concat_axes & (1u << lvl)) && dim_is_sym(hi)) { /* a symbolic extent: from 0 */
        char *h = em_dim_text(c, hi);
        if (h)
            emit_loop(c, lvl, "0", h, -1, vals);
        free(h);
        return;
    }
    if (!(c->concat_axes & (1u << lvl))) { /* no concat splits this loop */
        if (lo < hi) {
            char l[32], h[32];
            snprintf(l, sizeof l, "%lld", (long long)lo);
            snprintf(h, sizeof h, "%lld", (long long)hi);
            emit_loop(c, lvl, l, h, hi - lo, vals);
        }
        return;
    }
    /* only concats not inside another concat on this axis: resolve the outer ones first by
     * selecting [lo, hi), which keeps the straddling ones */
    fx *sel[ne->nouts];
    for (int i = 0; i < ne->nouts; i++) {
        sel[i] = fx_select(c->mp, vals[i], lvl, lo, hi);
        if (!sel[i]) {
            c->b->failed = true;
            return;
        }
    }
    /* boundaries of the concats that remain at the top (not inside a part of another concat
     * on this axis): those straddle [lo, hi) */
    if (!fx_visit(c->mp, sel, ne->nouts, outside_concat, collect_bounds, &bs) || bs.oom) {
        free(bs.v);
        c->b->failed = true;
        return;
    }
    if (bs.n > 0) {
        qsort(bs.v, (size_t)bs.n, sizeof *bs.v, cmp_i64);
        size_t m = 1; /* each boundary once */
        for (size_t i = 1; i < bs.n; i++)
            if (bs.v[i] != bs.v[m - 1])
                bs.v[m++] = bs.v[i];
        bs.n = m;
        int64_t a = lo;
        for (size_t i = 0; i <= bs.n; i++) {
            int64_t z = i < bs.n ? bs.v[i] : hi;
            if (z > a)
                emit_range(c, lvl, a, z, sel);
            a = z;
        }
        free(bs.v);
        return;
    }
    free(bs.v);
    if (lo >= hi)
        return;
    char l[32], h[32];
    snprintf(l, sizeof l, "%lld", (long long)lo);
    snprintf(h, sizeof h, "%lld", (long long)hi);
    emit_loop(c, lvl, l, h, hi - lo, sel);
}

static void omp_parallel_for(ctx *c)
{
    /* a nest with a symbolic extent decides at run time: in parallel from PAR_MIN elements */
    buf w = {0};
    bool sym = false;
    for (int k = 0; c->ne && k < c->ne->rank; k++)
        sym |= dim_is_sym(c->ne->dims[k]);
    for (int k = 0; sym && k < c->ne->rank; k++) {
        buf_puts(&w, k ? " * " : "");
        em_dim(c, &w, c->ne->dims[k]);
    }
    if (sym)
        buf_printf(&w, " >= %lld", (long long)PAR_MIN);
    char *cond = em_finish(c, &w);
    em_omp_for_if(c, sym ? cond : NULL);
    free(cond);
}

/* The one statement a parallel region runs when denormals are flushed: a loop of one pass that
 * sets the thread's mode and restores it after the construct below it (nest_flush_enter) */
static void flush_region(ctx *c)
{
    const char *csr = em_unique(&c->local, "nest_csr"), *once = em_unique(&c->local, "nest_once");
    em_line(c, "for (uint64_t %s = nest_flush_enter(), %s = 1; %s; %s = 0, nest_flush_leave(%s))",
            csr, once, once, once, csr);
}

void em_omp_for_if(ctx *c, const char *cond)
{
    buf w = {0};
    if (cond)
        buf_printf(&w, " if(%s)", cond);
    char *clause = em_finish(c, &w);
    em_line(c, "#ifdef _OPENMP");
    if (!c->flush) {
        em_line(c, "#pragma omp parallel for schedule(static)%s", clause ? clause : "");
        em_line(c, "#endif");
        free(clause);
        return;
    }
    em_line(c, "#pragma omp parallel%s", clause ? clause : "");
    em_line(c, "#endif");
    flush_region(c);
    em_line(c, "#ifdef _OPENMP");
    em_line(c, "#pragma omp for schedule(static) nowait");
    em_line(c, "#endif");
    free(clause);
}

void em_omp_region(ctx *c)
{
    em_line(c, "#ifdef _OPENMP");
    em_line(c, "#pragma omp parallel");
    em_line(c, "#endif");
    if (c->flush)
        flush_region(c);
}

/* The loop of level lvl over [lo, hi), bounds as C text, n its trip count when the bounds are
 * constants (else -1). The innermost folded axis runs `accs` lanes at a time, then the rest. */
typedef struct hoist_scan {
    ctx *c;
    int lvl;
} hoist_scan;

static bool nest_writes(const nest *ne, int32_t b)
{
    for (int i = 0; i < ne->nouts; i++)
        if (ne->outs[i].buf == b)
            return true;
    return false;
}

static void hoist_one(fx *e, void *ctx_)
{
    hoist_scan *hs = ctx_;
    ctx *c = hs->c;
    if (!fx_is_view(e) || e == c->tile_view || nest_writes(c->ne, e->buf) || c->b->failed)
        return;
    for (int k = hs->lvl; k < c->ne->rank; k++)
        if (e->st[k] != 0)
            return;
    int32_t *at = em_id_int(c, &c->hoisted, e);
    if (!at)
        return;
    if (*at > 0 && (size_t)*at <= c->nhoist && c->hoist[*at - 1].e == e)
        return; /* read before an outer loop already */
    struct hoisted *h = grow_array(c->hoist, &c->caphoist, c->nhoist, sizeof *h);
    if (!h) {
        c->b->failed = true;
        return;
    }
    c->hoist = h;
    buf t = {0};
    body bd = {.c = c};
    em_operand(&bd, &t, e);
    char *text = em_finish(c, &t);
    const char *base = e->node >= 0 ? namer_name(&c->nm, e->node) : "v";
    char nb[IR_MAX_NAME + 8];
    snprintf(nb, sizeof nb, "%s_%s", base, base[0] == '_' ? "v" : "value");
    const char *name = em_unique(&c->local, nb);
    em_line(c, "const %s %s = %s;", em_ctype(e->etype), name, text ? text : "0");
    free(text);
    c->hoist[c->nhoist++] = (struct hoisted){e, name};
    if ((at = em_id_int(c, &c->hoisted, e))) /* (again: the index may have moved) */
        *at = (int32_t)c->nhoist;
}

/* Reads once, before the loop of level lvl, every load that no loop from lvl inward moves and
 * that the nest does not write. Compilers take restrict on block-scope pointers as a hint at
 * most, so such a load inside a loop that stores through another workspace pointer would be
 * reloaded at every step, and keep the loop scalar. Only when every loop runs at least once:
 * a hoisted load must not read what the loops would not. Returns the previous table size. */
static size_t hoist_loads(ctx *c, int lvl, int64_t n, fx *const *vals)
{
    size_t saved = c->nhoist;
    if (n <= 0) /* none, or a symbolic count that may be none */
        return saved;
    for (int k = lvl + 1; k < c->ne->rank; k++)
        if (c->ne->dims[k] == 0 || dim_is_sym(c->ne->dims[k]))
            return saved;
    hoist_scan hs = {c, lvl};
    fx_walk(c->mp, vals, c->ne->nouts, hoist_one, &hs);
    return saved;
}

static void emit_loop(ctx *c, int lvl, const char *lo, const char *hi, int64_t n, fx **sel)
{
    const nest *ne = c->ne;
    const char *v = c->var[lvl];
    bool fold_inner = c->acc && lvl == ne->rank - 1 && c->accs > 1;
    size_t hoisted = hoist_loads(c, lvl, n, sel);
    if (!fold_inner) {
        if (c->par_outer && lvl == 0)
            omp_parallel_for(c);
        em_line(c, "for (int64_t %s = %s; %s < %s; %s++) {", v, lo, v, hi, v);
        c->indent++;
        emit_level(c, lvl + 1, sel);
        c->indent--;
        em_line(c, "}");
        c->nhoist = hoisted;
        return;
    }
    int w = c->accs;
    char mid[96];
    bool has_main = true, has_rest = true;
    if (n >= 0) {
        long long lo_v = atoll(lo);
        snprintf(mid, sizeof mid, "%lld", lo_v + n / w * w);
        has_main = n >= w;
        has_rest = n % w != 0;
    } else {
        snprintf(mid, sizeof mid, "%s_lanes", v);
        em_line(c, "const int64_t %s = %s + (%s - %s) / %d * %d;", mid, lo, hi, lo, w, w);
    }
    if (has_main) {
        em_line(c, "for (int64_t %s = %s; %s < %s; %s += %d) {", v, lo, v, mid, v, w);
        c->indent++;
        em_line(c, "for (int u = 0; u < %d; u++) {", w);
        c->indent++;
        char e[64];
        snprintf(e, sizeof e, "%s + u", v);
        c->expr[lvl] = e;
        c->unrolled = true;
        emit_body(c, sel);
        c->unrolled = false;
        c->expr[lvl] = v;
        c->indent--;
        em_line(c, "}");
        c->indent--;
        em_line(c, "}");
    }
    if (has_rest) {
        em_line(c, "for (int64_t %s = %s; %s < %s; %s++) {", v, mid, v, hi, v);
        c->indent++;
        emit_body(c, sel);
        c->indent--;
        em_line(c, "}");
    }
    c->nhoist = hoisted;
}

/* The first reduced axis of the nest, or its rank. */
static int first_reduced(const nest *ne)
{
    for (int k = 0; k < ne->rank; k++)
        if (ne->reduced & (1u << k))
            return k;
    return ne->rank;
}

/* Whether every axis from the first reduced one on is reduced: the outputs then fold into
 * accumulators (case A); otherwise they fold in memory (case B). */
static bool folds_in_registers(const nest *ne)
{
    for (int k = first_reduced(ne); k < ne->rank; k++)
        if (!(ne->reduced & (1u << k)))
            return false;
    return true;
}

static void emit_fold_start(ctx *c, int lvl)
{
    const nest *ne = c->ne;
    if (folds_in_registers(ne)) {
        /* partial accumulators when a float reduction folds its innermost axis */
        int innermost = ne->rank - 1, lanes = ACC_BYTES;
        bool wide = innermost >= lvl && (ne->reduced & (1u << innermost));
        /* a chunk of a parallel fold is at least PAR_CHUNK long */
        int64_t extent = c->par_chunks && innermost == 0 ? PAR_CHUNK : ne->dims[innermost];
        bool sym = dim_is_sym(ne->dims[innermost]); /* a symbolic extent is taken as large */
        if (dim_is_sym(extent))
            extent = INT64_MAX / 16;
        for (int i = 0; i < ne->nouts; i++) {
            int et = ne->outs[i].value->etype;
            if (ne->outs[i].reduce < 0)
                continue;
            wide &= em_is_float(et);
            int size = (int)nest_type_size((nest_type)et);
            int bytes = extent * size < ACC_SMALL_DATA ? ACC_BYTES / 2 : ACC_BYTES;
            if (bytes / size < lanes)
                lanes = bytes / size;
        }
        wide &= (sym || ne->dims[innermost] >= 2 * lanes) && !nest_has_arg(ne);
        c->accs = wide ? lanes : 1;
        for (int i = 0; i < ne->nouts; i++) {
            const nout *o = &ne->outs[i];
            c->acc[i] = c->best[i] = NULL;
            if (o->reduce < 0)
                continue;
            if (em_is_arg(o->reduce)) { /* the best value so far and its index */
                const char *base = o->node >= 0 ? namer_name(&c->nm, o->node) : "arg";
                char nb[IR_MAX_NAME + 8];
                snprintf(nb, sizeof nb, "%s_best", base);
                c->best[i] = em_unique(&c->local, nb);
                snprintf(nb, sizeof nb, "%s_at", base);
                c->acc[i] = em_unique(&c->local, nb);
                buf t = {0};
                em_init_text(&t, o->reduce, o->value->etype);
                char *init = em_finish(c, &t);
                em_line(c, "%s %s = %s;", em_ctype(o->value->etype), c->best[i], init ? init : "0");
                em_line(c, "int64_t %s = 0;", c->acc[i]);
                free(init);
                continue;
            }
            const char *base = o->node >= 0 ? namer_name(&c->nm, o->node) : "acc";
            char nb[IR_MAX_NAME + 8];
            snprintf(nb, sizeof nb, "%s_acc", base);
            c->acc[i] = em_unique(&c->local, nb);
            buf t = {0};
            em_init_text(&t, o->reduce, o->value->etype);
            char *init = em_finish(c, &t);
            if (!init) {
                c->b->failed = true;
                return;
            }
            if (c->accs > 1) {
                em_line(c, "%s %s[%d];", em_ctype(o->value->etype), c->acc[i], c->accs);
                em_line(c, "for (int u = 0; u < %d; u++)", c->accs);
                em_line(c, "    %s[u] = %s;", c->acc[i], init);
            } else {
                em_line(c, "%s %s = %s;", em_ctype(o->value->etype), c->acc[i], init);
            }
            free(init);
        }
        return;
    }
    /* case B: the outputs start at the identity over the kept axes from lvl inward */
    for (int i = 0; i < ne->nouts; i++) {
        if (ne->outs[i].reduce < 0)
            continue;
        int opened = 0;
        for (int k = lvl; k < ne->rank; k++) {
            if (ne->reduced & (1u << k))
                continue;
            char *h = em_dim_text(c, ne->dims[k]);
            em_line(c, "for (int64_t %s = 0; %s < %s; %s++)", c->var[k], c->var[k], h ? h : "0",
                    c->var[k]);
            free(h);
            c->indent++;
            opened++;
        }
        buf t = {0};
        em_store_text(c, &t, &ne->outs[i]);
        buf_puts(&t, " = ");
        em_init_text(&t, ne->outs[i].reduce, ne->outs[i].value->etype);
        char *s = em_finish(c, &t);
        em_line(c, "%s;", s ? s : "");
        free(s);
        c->indent -= opened;
    }
}

static void emit_fold_end(ctx *c)
{
    const nest *ne = c->ne;
    if (!folds_in_registers(ne))
        return;
    for (int i = 0; i < ne->nouts; i++) {
        const nout *o = &ne->outs[i];
        const char *a = c->acc[i];
        int et = o->value->etype;
        if (o->reduce < 0)
            continue;
        /* pairwise: lane u takes lane u + w for halving widths, each width in an array of
         * its own (rewriting the lanes in place, compilers keep them in memory), in a helper in
         * large functions; sums in nest_hsum, in vectors */
        const char *v = a;
        char nb[IR_MAX_NAME + 32];
        int h = c->fold_calls && c->accs > 1 ? em_fold_helper(o->reduce, et, c->accs) : -1;
        int hs = c->accs > 1 && o->reduce == OP_SUM ? em_hsum_helper(et, c->accs) : -1;
        if (hs >= 0)
            *c->helpers |= 1ull << hs;
        if (h >= 0 || hs >= 0) {
            if (h >= 0)
                *c->helpers |= 1ull << h;
            snprintf(nb, sizeof nb, "%s_1", a);
            v = em_unique(&c->local, nb);
            em_line(c, "const %s %s = nest_%s%s_%s_%d(%s);", em_ctype(et), v,
                    h >= 0 ? "fold_" : "hsum", h >= 0 ? ir_ops[o->reduce].name : "",
                    nest_type_name((nest_type)et), c->accs, a);
        }
        for (int w = h >= 0 || hs >= 0 ? 0 : c->accs / 2; w >= 1; w /= 2) {
            char l[IR_MAX_NAME + 64], r[IR_MAX_NAME + 64];
            snprintf(l, sizeof l, w > 1 ? "%s[u]" : "%s[0]", v);
            snprintf(r, sizeof r, w > 1 ? "%s[u + %d]" : "%s[1]", v, w);
            char *cs = em_combine(c, o->reduce, et, l, r);
            snprintf(nb, sizeof nb, "%s_%d", a, w);
            v = em_unique(&c->local, nb);
            if (cs && w > 1) {
                em_line(c, "%s %s[%d];", em_ctype(et), v, w);
                em_line(c, "for (int u = 0; u < %d; u++) %s[u] = %s;", w, v, cs);
            } else if (cs) {
                em_line(c, "const %s %s = %s;", em_ctype(et), v, cs);
            }
            free(cs);
        }
        buf t = {0};
        if (c->fold_dst)
            buf_puts(&t, c->fold_dst[i]);
        else
            em_store_text(c, &t, o);
        char *d = em_finish(c, &t);
        buf cm = {0};
        em_node_comment(c, &cm, c->fold_dst ? -1 : o->node);
        char *cs = em_finish(c, &cm);
        if (d)
            em_line(c, "%s = %s;%s", d, v, cs ? cs : "");
        free(d);
        free(cs);
    }
}

/* A whole-array fold in parallel chunks: each chunk folds into its partial result, then the
 * partial results combine in chunk order. */
static void emit_level(ctx *c, int lvl, fx **vals);

static void emit_chunks(ctx *c, fx **vals)
{
    const nest *ne = c->ne;
    bool sym = dim_is_sym(ne->dims[0]);
    int64_t n = sym ? 2 * PAR_CHUNK : ne->dims[0], nch = n / PAR_CHUNK;
    if (nch > PAR_CHUNKS)
        nch = PAR_CHUNKS;
    if (nch < 2)
        nch = 2;
    int64_t len = (n + nch - 1) / nch;
    len = (len + ACC_BYTES - 1) / ACC_BYTES * ACC_BYTES; /* whole lanes in every chunk */
    nch = (n + len - 1) / len;
    /* the counts as C: numbers, or for a symbolic extent the same arithmetic at run time, the
     * chunks only from 2 * PAR_CHUNK elements (as a kernel for that size would have them) */
    char ns[48], nchs[48], lens[48];
    snprintf(ns, sizeof ns, "%lld", (long long)n);
    snprintf(nchs, sizeof nchs, "%lld", (long long)nch);
    snprintf(lens, sizeof lens, "%lld", (long long)len);
    if (sym) {
        char *e = em_dim_text(c, ne->dims[0]);
        snprintf(ns, sizeof ns, "%s", em_unique(&c->local, "n"));
        snprintf(nchs, sizeof nchs, "%s", em_unique(&c->local, "nch"));
        snprintf(lens, sizeof lens, "%s", em_unique(&c->local, "len"));
        em_line(c, "const int64_t %s = %s;", ns, e ? e : "0");
        free(e);
        buf w = {0}; /* the nest's elements, as nest_work counts them */
        for (int k = 0; k < ne->rank; k++) {
            buf_puts(&w, k ? " * " : "");
            em_dim(c, &w, ne->dims[k]);
        }
        char *ws = em_finish(c, &w);
        em_line(c, "if (%s < %lld || %s < %lld) {", ns, (long long)(2 * PAR_CHUNK), ws ? ws : "0",
                (long long)PAR_MIN);
        free(ws);
        c->indent++;
        c->par_chunks = false;
        emit_level(c, 0, vals);
        c->par_chunks = true;
        c->indent--;
        em_line(c, "} else {");
        c->indent++;
        em_line(c, "int64_t %s = %s / %lld < %d ? %s / %lld : %d;", nchs, ns, (long long)PAR_CHUNK,
                PAR_CHUNKS, ns, (long long)PAR_CHUNK, PAR_CHUNKS);
        em_line(c, "int64_t %s = (%s + %s - 1) / %s;", lens, ns, nchs, nchs);
        em_line(c, "%s = (%s + %d - 1) / %d * %d;", lens, lens, ACC_BYTES, ACC_BYTES, ACC_BYTES);
        em_line(c, "%s = (%s + %s - 1) / %s;", nchs, ns, lens, lens);
        nch = PAR_CHUNKS; /* the partial results' room */
    }
    const char *part[ne->nouts], *dst[ne->nouts];
    char *dsts[ne->nouts];
    const char *ch = em_unique(&c->local, "chunk"), *lo = em_unique(&c->local, "lo"),
               *hi = em_unique(&c->local, "hi");
    for (int i = 0; i < ne->nouts; i++) {
        const nout *o = &ne->outs[i];
        part[i] = dst[i] = NULL;
        dsts[i] = NULL;
        if (o->reduce < 0)
            continue;
        char nb[IR_MAX_NAME + 8];
        snprintf(nb, sizeof nb, "%s_part", o->node >= 0 ? namer_name(&c->nm, o->node) : "acc");
        part[i] = em_unique(&c->local, nb);
        /* (symbolic: zeros only for compilers that cannot see that chunk 0 always runs) */
        em_line(c, "%s %s[%lld]%s;", em_ctype(o->value->etype), part[i], (long long)nch,
                sym ? " = {0}" : "");
        buf t = {0};
        buf_printf(&t, "%s[%s]", part[i], ch);
        dsts[i] = em_finish(c, &t);
        dst[i] = dsts[i] ? dsts[i] : "?";
    }
    omp_parallel_for(c);
    em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", ch, ch, nchs, ch);
    c->indent++;
    em_line(c, "const int64_t %s = %s * %s, %s = %s + %s < %s ? %s + %s : %s;", lo, ch, lens, hi, lo,
            lens, ns, lo, lens, ns);
    c->fold_dst = dst;
    emit_fold_start(c, 0);
    emit_loop(c, 0, lo, hi, -1, vals);
    emit_fold_end(c);
    c->fold_dst = NULL;
    c->indent--;
    em_line(c, "}");
    for (int i = 0; i < ne->nouts; i++) {
        const nout *o = &ne->outs[i];
        if (o->reduce < 0)
            continue;
        char l[IR_MAX_NAME + 64], r[IR_MAX_NAME + 64];
        snprintf(l, sizeof l, "%s[0]", part[i]);
        snprintf(r, sizeof r, "%s[%s]", part[i], ch);
        char *comb = em_combine(c, o->reduce, o->value->etype, l, r);
        em_line(c, "for (int64_t %s = 1; %s < %s; %s++)", ch, ch, nchs, ch);
        em_line(c, "    %s = %s;", l, comb ? comb : "");
        free(comb);
        buf t = {0};
        em_store_text(c, &t, o);
        char *d = em_finish(c, &t);
        buf cm = {0};
        em_node_comment(c, &cm, o->node);
        char *cs = em_finish(c, &cm);
        em_line(c, "%s = %s;%s", d ? d : "", l, cs ? cs : "");
        free(d);
        free(cs);
        free(dsts[i]);
    }
    if (sym) {
        c->indent--;
        em_line(c, "}");
    }
}

static void emit_level(ctx *c, int lvl, fx **vals)
{
    const nest *ne = c->ne;
    if (lvl == 0 && c->par_chunks) {
        emit_chunks(c, vals);
        return;
    }
    bool reduce = nest_folds(ne);
    /* the fold's accumulators need a block, unless the nest's own block is right there */
    bool block = reduce && lvl == first_reduced(ne) && lvl > c->from;
    if (block) {
        em_line(c, "{");
        c->indent++;
    }
    if (reduce && lvl == first_reduced(ne))
        emit_fold_start(c, lvl);
    if (lvl == ne->rank)
        emit_body(c, vals);
    else
        emit_range(c, lvl, 0, ne->dims[lvl], vals);
    if (reduce && lvl == first_reduced(ne))
        emit_fold_end(c);
    if (block) {
        c->indent--;
        em_line(c, "}");
    }
}

/* Every graph node a nest computes, in graph order, for its comment. */
typedef struct nodeset {
    int32_t *v;
    size_t n, cap;
    uint8_t *in;      /* per graph node: in v */
    bool oom;
} nodeset;

static void add_node(nodeset *s, int32_t node)
{
    if (node < 0 || s->in[node])
        return;
    int32_t *v = grow_array(s->v, &s->cap, s->n, sizeof *v);
    if (!v) {
        s->oom = true;
        return;
    }
    s->v = v;
    s->v[s->n++] = node;
    s->in[node] = 1;
}

static void collect_node(fx *e, void *ctx_)
{
    if (e->kind == FX_OP || e->kind == FX_CONCAT)
        add_node(ctx_, e->node);
}

void em_nest_comment(ctx *c)
{
    const nest *ne = c->ne;
    nodeset s = {.in = c->node_in};
    nest_visit(c->mp, ne, collect_node, &s);
    for (int i = 0; i < ne->nnodes; i++)
        add_node(&s, ne->nodes[i]);
    for (size_t i = 0; i < s.n; i++)
        s.in[s.v[i]] = 0; /* for the next nest */
    if (s.oom)
        c->b->failed = true; /* (a failed walk is in c->mp->status, checked at the end) */
    if (s.n > 1)
        qsort(s.v, (size_t)s.n, sizeof *s.v, cmp_i32);
    for (size_t i = 0; i < s.n; i++) {
        buf t = {0};
        print_node(&t, &c->nm, s.v[i], 4);
        buf_puts(&t, ": ");
        ir_format_type(&t, c->f, s.v[i]);
        char *x = em_finish(c, &t);
        if (x) {
            if (strlen(x) > 110)
                strcpy(x + 106, "...");
            for (char *q = x; (q = strstr(q, "*/")); q++)
                q[1] = '|';
        }
        em_line(c, "%s %s", i == 0 ? "/*" : " *", x ? x : "");
        free(x);
    }
    buf t = {0};
    buf_printf(&t, " * loops over [");
    for (int k = 0; k < ne->rank; k++) {
        buf_puts(&t, k ? "," : "");
        dim_format(&t, c->f, ne->dims[k]);
        buf_puts(&t, (ne->reduced & (1u << k)) ? "r" : "");
    }
    buf_puts(&t, "]");
    if (ne->reduced)
        buf_puts(&t, " (r: folded)");
    buf_puts(&t, " */");
    char *x = em_finish(c, &t);
    em_line(c, "%s", x ? x : " */");
    free(x);
    free(s.v);
}

bool em_nest_runs(const nest *ne)
{
    /* a fold over nothing still writes its initial values, unless its outputs are empty too */
    bool folds = nest_folds(ne);
    for (int k = 0; k < ne->rank; k++)
        if (ne->dims[k] == 0 && !(folds && (ne->reduced & (1u << k))))
            return false;
    return true;
}

/* Declares the temporaries that nests [first, last] of a group (or one nest) touch: pointers
 * into the workspace, or with `rows`, the local row arrays of contracted ones. */
static void declare_temps(ctx *c, int32_t first, int32_t last, int32_t group, bool rows)
{
    int32_t *used = NULL, nused = 0, stamp = ++c->ntouch;
    size_t cap = 0;
    for (int32_t k = first; k <= last; k++) {
        const nest *ne = &c->p->nests[k];
        if (ne->dead || (ne->group != group && group >= 0))
            continue;
        int32_t *bufs;
        int32_t nb = nest_loads(c->mp, ne, &bufs);
        if (nb < 0) {
            c->b->failed = true;
            break;
        }
        for (int i = 0; i < ne->nouts + nb; i++) {
            int32_t b = i < ne->nouts ? ne->outs[i].buf : bufs[i - ne->nouts];
            int32_t *v = c->touched[b] == stamp ? used : grow_array(used, &cap, (size_t)nused, sizeof *v);
            if (!v) {
                c->b->failed = true;
                break;
            }
            used = v;
            if (c->touched[b] != stamp)
                used[nused++] = b;
            c->touched[b] = stamp;
        }
        free(bufs);
    }
    if (nused > 1)
        qsort(used, (size_t)nused, sizeof *used, cmp_i32);
    for (int32_t i = 0; i < nused; i++) {
        int32_t b = used[i];
        const pbuf *pb = &c->p->bufs[b];
        if (pb->kind != BUF_TEMP || pb->dead || (pb->row != 0) != rows)
            continue;
        int32_t *d = grow_array(c->decl, &c->capdecl, c->ndecl, sizeof *d);
        if (!d) {
            c->b->failed = true;
            break;
        }
        c->decl = d;
        c->decl[c->ndecl++] = b;
        const char *name = em_unique(&c->local, namer_name(&c->nm, pb->node));
        c->bufname[b] = name;
        c->refd[b] = false;
        if (rows)
            em_line(c, "%s %s[%lld];", em_ctype(pb->etype), name, (long long)pb->row);
        else
            em_ws_pointer(c, b, name);
    }
    free(used);
}

/* Casts away the temporaries declared for the block being closed that its code never names
 * (their only reads were in loops without iterations, or folded into constants). Their names
 * die with the block's scope: a later block that fails (out of memory) before declaring them
 * again reads "_", never a freed name. */
static void cast_unused_temps(ctx *c)
{
    for (size_t i = 0; i < c->ndecl; i++) {
        if (!c->refd[c->decl[i]])
            em_line(c, "(void)%s;", c->bufname[c->decl[i]]);
        c->bufname[c->decl[i]] = "_";
    }
    c->ndecl = 0;
}

int64_t em_nest_work(const nest *ne)
{
    int64_t work = 1;
    for (int k = 0; k < ne->rank; k++)
        work = work > INT64_MAX / (ne->dims[k] + 1) ? INT64_MAX : work * ne->dims[k];
    return work;
}

/* The loops of one nest from level `from` (0, or 1 inside a row group whose loop is var[0]). */
static void concat_axis(fx *e, void *ctx_)
{
    if (e->kind == FX_CONCAT)
        *(uint32_t *)ctx_ |= 1u << e->axis;
}

static void emit_nest_loops(ctx *c, const nest *ne, int from, bool may_par)
{
    c->ne = ne;
    for (int k = from; k < ne->rank; k++) {
        char v[16];
        snprintf(v, sizeof v, "i%d", k);
        c->var[k] = c->expr[k] = em_unique(&c->local, v);
    }
    const char *accs[ne->nouts > 0 ? ne->nouts : 1], *best[ne->nouts > 0 ? ne->nouts : 1];
    c->acc = nest_folds(ne) && folds_in_registers(ne) ? accs : NULL;
    c->best = best;
    c->accs = 1;
    fx *vals[ne->nouts > 0 ? ne->nouts : 1];
    for (int i = 0; i < ne->nouts; i++)
        vals[i] = ne->outs[i].value;
    c->concat_axes = 0;
    if (!fx_visit(c->mp, vals, ne->nouts, NULL, concat_axis, &c->concat_axes))
        c->b->failed = true;
    /* several cores for big nests: over the outermost loop when it is kept, else in chunks of
     * a whole-array fold */
    bool par = may_par && c->p->opts->openmp && em_nest_work(ne) >= PAR_MIN && ne->rank > 0;
    c->par_outer = par && !(ne->reduced & 1u) && (ne->dims[0] >= 2 || dim_is_sym(ne->dims[0]));
    c->par_chunks = par && nest_folds(ne) && (ne->reduced & 1u) && folds_in_registers(ne) &&
                    !nest_has_arg(ne) &&
                    (ne->dims[0] >= 2 * PAR_CHUNK || dim_is_sym(ne->dims[0])) &&
                    !(c->concat_axes & 1u);
    c->from = from;
    emit_level(c, from, vals);
    c->par_outer = c->par_chunks = false;
    c->acc = c->best = NULL;
}

/* dst = value, the value's statements first. */
static void emit_assign(ctx *c, const char *dst, fx *value)
{
    body bd = {.c = c};
    names scope = {.outer = &c->local}, *saved = c->body_names;
    c->body_names = &scope;
    em_values(c, &bd, &value, 1);
    char *v = bd.oom ? NULL : em_value_text(&bd, value);
    if (v)
        em_line(c, "%s = %s;", dst, v);
    else
        c->b->failed = true;
    free(v);
    free(bd.v);
    em_names_free(&scope);
    c->body_names = saved;
}

void em_nest_start(ctx *c, int32_t k)
{
    c->ne = &c->p->nests[k];
    memset(&c->local, 0, sizeof c->local);
    c->local.outer = &c->fn;
    em_nest_comment(c);
}

void em_nest_enter(ctx *c, int32_t k)
{
    em_line(c, "{");
    c->indent++;
    declare_temps(c, k, k, -1, false);
}

void em_nest_open(ctx *c, int32_t k)
{
    em_nest_start(c, k);
    em_nest_enter(c, k);
}

void em_nest_close(ctx *c)
{
    cast_unused_temps(c);
    c->indent--;
    em_line(c, "}");
    em_names_free(&c->local);
}

/* scatter_add (fuse.c): loops over the updates' space, each update added to the element its
 * index points at. The axes before the indices' run in parallel: they add to distinct elements,
 * and each element takes its updates in their order whatever the threads. */
static void emit_scatter(ctx *c, int32_t k)
{
    const nest *ne = &c->p->nests[k];
    const ir_node *n = &c->f->nodes[ne->outs[0].node];
    int r = ne->rank, et = ne->outs[0].value->etype;
    em_nest_open(c, k);
    /* (a symbolic batch: in parallel as decided at run time, by omp_parallel_for's if()) */
    bool sym0 = r > 0 && dim_is_sym(ne->dims[0]);
    bool par = c->p->opts->openmp && n->a.axis > 0 &&
               (sym0 || (em_nest_work(ne) >= PAR_MIN && ne->dims[0] >= 2));
    for (int d = 0; d < r; d++) {
        char v[16];
        snprintf(v, sizeof v, "i%d", d);
        c->var[d] = c->expr[d] = em_unique(&c->local, v);
        if (par && d == 0)
            omp_parallel_for(c);
        char *ext = em_dim_text(c, ne->dims[d]);
        em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", c->var[d], c->var[d],
                ext ? ext : "0", c->var[d]);
        free(ext);
        c->indent++;
    }
    body bd = {.c = c};
    names scope = {.outer = &c->local}, *saved = c->body_names;
    c->body_names = &scope;
    fx *vals[2] = {ne->outs[0].value, ne->outs[1].value};
    em_values(c, &bd, vals, 2);
    char *v = bd.oom ? NULL : em_value_text(&bd, vals[0]);
    char *d = bd.oom ? NULL : em_value_text(&bd, vals[1]);
    if (v && d)
        emit_fold(c, OP_SUM, et, vals[0], d, v, ne->outs[0].node);
    else
        c->b->failed = true;
    free(v);
    free(d);
    free(bd.v);
    if (bd.oom || scope.oom)
        c->b->failed = true;
    em_names_free(&scope);
    c->body_names = saved;
    for (int i = 0; i < r; i++) {
        c->indent--;
        em_line(c, "}");
    }
    em_nest_close(c);
}

void em_omp_for(ctx *c) { omp_parallel_for(c); }

void em_assign(ctx *c, const char *dst, fx *value) { emit_assign(c, dst, value); }

void em_nest(ctx *c, int32_t k)
{
    if (c->p->nests[k].tile_i) {
        em_tiled(c, k);
        return;
    }
    if (c->p->nests[k].win) {
        em_window(c, k);
        return;
    }
    if (c->p->nests[k].special == OP_TOPK) {
        em_topk(c, k);
        return;
    }
    if (c->p->nests[k].special == OP_SCATTER_ADD) {
        emit_scatter(c, k);
        return;
    }
    em_nest_open(c, k);
    emit_nest_loops(c, c->ne, 0, true);
    em_nest_close(c);
}

/* A row group: one loop over the rows, each member nest's inner loops inside it. */
void em_group(ctx *c, int32_t lead)
{
    const plan *p = c->p;
    int32_t last = lead;
    int64_t work = 0;
    for (int32_t k = lead; k < p->nnests; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead)
            continue;
        if (ne->group != lead)
            break;
        last = k;
        int64_t w = em_nest_work(ne);
        work = work > INT64_MAX - w ? INT64_MAX : work + w;
    }
    const nest *head = &p->nests[lead];
    names group = {.outer = &c->fn};
    memset(&c->local, 0, sizeof c->local);
    c->local.outer = &c->fn;
    char *rows = em_dim_text(c, head->dims[0]);
    em_line(c, "/* %d nests proceed row by row over %s rows: */", 0 + (int)(last - lead + 1),
            rows ? rows : "?");
    em_line(c, "{");
    c->indent++;
    const char *row = em_unique(&c->local, "i0");
    declare_temps(c, lead, last, lead, false);
    c->ne = head; /* a symbolic group goes parallel at run time, by its first nest's size */
    if (c->p->opts->openmp && work >= PAR_MIN)
        omp_parallel_for(c);
    em_line(c, "for (int64_t %s = 0; %s < %s; %s++) {", row, row, rows ? rows : "0", row);
    free(rows);
    c->indent++;
    declare_temps(c, lead, last, lead, true);
    group = c->local; /* the group's names: the members' scopes chain to it */
    for (int32_t k = lead; k <= last; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead || ne->group != lead)
            continue;
        c->ne = ne;
        em_nest_comment(c);
        if (!em_nest_runs(ne)) {
            em_line(c, "/* (no elements) */");
            continue;
        }
        em_line(c, "{");
        c->indent++;
        memset(&c->local, 0, sizeof c->local);
        c->local.outer = &group;
        c->var[0] = c->expr[0] = row;
        emit_nest_loops(c, ne, 1, false);
        em_names_free(&c->local);
        c->indent--;
        em_line(c, "}");
    }
    cast_unused_temps(c);
    c->indent--;
    em_line(c, "}");
    c->indent--;
    em_line(c, "}");
    em_names_free(&group);
    memset(&c->local, 0, sizeof c->local);
}
