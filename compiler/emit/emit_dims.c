/*
 * emit_dims.c - the C of a function's symbolic dims: their names, the check of given sizes
 * (nest_NAME_dims: every dim expression computed without overflow, every shape's size within
 * the limit, the bounds that depend on the sizes), and the places of the temporaries whose
 * sizes they set, in the workspace after the others.
 *
 * The check runs before anything is written: a negative or overflowing size makes every entry
 * point return 1 and leaves the arrays alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

bool em_dims_init(ctx *c)
{
    const nest_function *f = c->f;
    int32_t ne = dim_entry_count(f);
    c->dimname = calloc((size_t)ne + 1, sizeof *c->dimname);
    c->dimabi = calloc((size_t)ne + 1, sizeof *c->dimabi);
    if (!c->dimname || !c->dimabi)
        return false;
    c->ndims = dim_params(f, c->dimabi);
    if (c->ndims < 0)
        return false;
    for (int i = 0; i < c->ndims; i++)
        c->dimname[c->dimabi[i]] = em_unique(&c->fn, dim_entry(f, DIM_SYM0 - c->dimabi[i])->name);
    if (c->helpers)
        *c->helpers |= 1ull << H_DIMS;
    return true;
}

void em_dims_free(ctx *c)
{
    free(c->dimname);
    free(c->dimabi);
    c->dimname = NULL;
    c->dimabi = NULL;
}

void em_dims_params(ctx *c, buf *b, const char *from)
{
    for (int i = 0; i < c->ndims; i++) {
        const char *n = c->dimname[c->dimabi[i]];
        if (from)
            buf_printf(b, "%s%s[%d]", i ? ", " : "", from, i);
        else
            buf_printf(b, "%sint64_t %s", i ? ", " : "", n);
    }
}

/* Whether buffer b is a temporary placed at run time. */
static bool run_time_temp(const pbuf *pb)
{
    return pb->kind == BUF_TEMP && !pb->dead && !pb->row && dim_is_sym(pb->count);
}

bool emit_dims_have_ws(const plan *p)
{
    if (p->ws_size > 0)
        return true;
    for (int32_t b = 0; b < p->nbufs; b++)
        if (run_time_temp(&p->bufs[b]))
            return true;
    return false;
}

void em_dims_offsets(ctx *c)
{
    const plan *p = c->p;
    bool any = false;
    for (int i = 0; i < c->ndims; i++) /* a dim only the check reads */
        em_line(c, "(void)%s;", c->dimname[c->dimabi[i]]);
    for (int32_t b = 0; b < p->nbufs; b++) {
        const pbuf *pb = &p->bufs[b];
        if (!run_time_temp(pb))
            continue;
        if (!any)
            em_line(c, "int64_t nest_wsp = %lld;", (long long)p->ws_size);
        any = true;
        char *n = em_dim_text(c, pb->count);
        em_line(c, "const int64_t nest_off%d = nest_wsp;", b);
        em_line(c, "nest_wsp += (%s * %d + 63) & ~(int64_t)63;", n ? n : "0",
                (int)nest_type_size((nest_type)pb->etype));
        free(n);
    }
    if (any)
        em_line(c, "(void)nest_wsp;");
}

/* ---- the check ---- */

/* The C of dim d computed into a checked local: for an expression, the statements that compute
 * it (each term's product and the sum, any overflow returning -1); its text into out. */
static void checked(ctx *c, int64_t d, bool *done, char *out, size_t n)
{
    const nest_function *f = c->f;
    const dim_expr *e = dim_entry(f, d);
    if (!e) {
        snprintf(out, n, "%lld", (long long)d);
        return;
    }
    int32_t k = (int32_t)(DIM_SYM0 - d);
    if (e->name) {
        snprintf(out, n, "%s", c->dimname[k]);
        return;
    }
    snprintf(out, n, "nest_e%d", k);
    if (done[k])
        return;
    done[k] = true;
    buf t = {0};
    dim_format(&t, f, d);
    char *s = em_finish(c, &t);
    em_line(c, "int64_t nest_e%d = 0; /* %s */", k, s ? s : "");
    free(s);
    for (int i = 0; i < e->nterms; i++) {
        buf l = {0};
        buf_printf(&l, "nest_t = %lld;", (long long)e->terms[i].coef);
        buf_puts(&l, " if (");
        for (int j = 0; j < e->terms[i].nf; j++)
            buf_printf(&l, "!nest_dim_mul(&nest_t, %s) || ", c->dimname[e->terms[i].f[j]]);
        buf_printf(&l, "!nest_dim_add(&nest_e%d, nest_t)) return -1;", k);
        char *ls = em_finish(c, &l);
        em_line(c, "%s", ls ? ls : "");
        free(ls);
    }
}

/* Whether value node's shape (or a bound) names a dim. */
static bool symbolic_list(int n, const int64_t *v)
{
    for (int k = 0; k < n; k++)
        if (dim_is_sym(v[k]))
            return true;
    return false;
}

/* The largest power of two up to 2^31 below which every dim makes every check pass, when the
 * checks are only of shapes whose extents grow with the dims (no slice bound, arg search or
 * index, no temporary placed at run time, every coefficient positive); else 0. The check then
 * returns at once for such sizes: a call of 60 ns paid a tenth of it in overflow checks. */
static int64_t small_dims(ctx *c)
{
    const nest_function *f = c->f;
    for (int32_t b = 0; b < c->p->nbufs; b++)
        if (run_time_temp(&c->p->bufs[b]))
            return 0;
    int64_t best = (int64_t)1 << 31;
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        ir_kind kind = ir_kind_of(n);
        if (kind == K_SLICE || kind == K_ARGREDUCE || kind == K_GATHER || kind == K_SCATTER_ADD)
            return 0;
        if (n->etype == IR_TUPLE || !symbolic_list(n->rank, n->shape))
            continue;
        /* the bytes at every name = best, halved until below 2^62 (as doubles: a bound) */
        for (;;) {
            double bytes = (double)nest_type_size((nest_type)n->etype);
            for (int k = 0; k < n->rank; k++) {
                const dim_expr *e = dim_entry(f, n->shape[k]);
                double v = 0;
                for (int t = 0; e && t < e->nterms; t++) {
                    if (e->terms[t].coef <= 0)
                        return 0;
                    double term = (double)e->terms[t].coef;
                    for (int j = 0; j < e->terms[t].nf; j++)
                        term *= (double)best;
                    v += term;
                }
                bytes *= e ? v : n->shape[k] > 1 ? (double)n->shape[k] : 1.0;
            }
            if (bytes < 0x1p61)
                break;
            if ((best /= 2) < 1)
                return 0;
        }
    }
    return best;
}

void em_dims_check(ctx *c)
{
    const nest_function *f = c->f;
    const plan *p = c->p;
    int32_t ne = dim_entry_count(f);
    bool *done = calloc((size_t)ne + 1, sizeof *done);
    bool *shape_done = calloc((size_t)f->nnodes + 1, sizeof *shape_done);
    if (!done || !shape_done) {
        free(done);
        free(shape_done);
        c->b->failed = true;
        return;
    }
    em_line(c, "/* -1 unless the sizes dims give fit every shape; else the workspace's bytes */");
    em_line(c, "static int64_t nest_%s_dims(const int64_t *dims)", f->name);
    em_line(c, "{");
    c->indent++;
    buf l = {0};
    for (int i = 0; i < c->ndims; i++)
        buf_printf(&l, "%s%s = dims[%d]", i ? ", " : "", c->dimname[c->dimabi[i]], i);
    char *ls = em_finish(c, &l);
    em_line(c, "const int64_t %s;", ls ? ls : "");
    free(ls);
    em_line(c, "int64_t nest_t, nest_ws = %lld;", (long long)p->ws_size);
    buf neg = {0};
    for (int i = 0; i < c->ndims; i++)
        buf_printf(&neg, "%s%s < 0", i ? " || " : "", c->dimname[c->dimabi[i]]);
    char *ns = em_finish(c, &neg);
    em_line(c, "if (%s)", ns ? ns : "1");
    free(ns);
    em_line(c, "    return -1;");
    int64_t small = small_dims(c);
    if (small > 0) {
        buf fast = {0};
        for (int i = 0; i < c->ndims; i++)
            buf_printf(&fast, "%s%s <= %lld", i ? " && " : "", c->dimname[c->dimabi[i]],
                       (long long)small);
        char *fs = em_finish(c, &fast);
        em_line(c, "if (%s)", fs ? fs : "0");
        em_line(c, "    return nest_ws; /* every shape fits at such sizes */");
        free(fs);
    }
    /* every symbolic shape: its dims computed and not negative, its bytes below 2^62 (the
     * product of the non-zero dims, as the type rules count) */
    char x[64];
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        if (n->etype == IR_TUPLE || !symbolic_list(n->rank, n->shape))
            continue;
        bool seen = false; /* the same shape and element size as an earlier node */
        for (int32_t j = 0; j < i && !seen; j++)
            seen = shape_done[j] && f->nodes[j].rank == n->rank &&
                   nest_type_size((nest_type)f->nodes[j].etype) ==
                       nest_type_size((nest_type)n->etype) &&
                   memcmp(f->nodes[j].shape, n->shape, (size_t)n->rank * sizeof *n->shape) == 0;
        if (seen)
            continue;
        shape_done[i] = true;
        em_line(c, "nest_t = %d;", (int)nest_type_size((nest_type)n->etype));
        for (int k = 0; k < n->rank; k++) {
            if (!dim_is_sym(n->shape[k])) {
                if (n->shape[k] > 1)
                    em_line(c, "if (!nest_dim_mul(&nest_t, %lld)) return -1;", (long long)n->shape[k]);
                continue;
            }
            checked(c, n->shape[k], done, x, sizeof x);
            em_line(c, "if (%s < 0 || (%s != 0 && !nest_dim_mul(&nest_t, %s))) return -1;", x, x,
                    x);
        }
        em_line(c, "if (nest_t >= ((int64_t)1 << 62)) return -1;");
    }
    /* what the type rules could not check without the sizes */
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        ir_kind kind = ir_kind_of(n);
        if (kind == K_SLICE) {
            const ir_node *a = &f->nodes[n->in[0]];
            for (int k = 0; k < a->rank; k++) {
                int cmp = dim_compare(f, n->a.slice.upper[k], a->shape[k]);
                if (cmp == -1 || cmp == 0 || cmp == DIM_LE)
                    continue;
                char up[64], ext[64];
                checked(c, n->a.slice.upper[k], done, up, sizeof up);
                checked(c, a->shape[k], done, ext, sizeof ext);
                em_line(c, "if (%s > %s) return -1; /* the bound of a slice */", up, ext);
            }
        } else if (kind == K_ARGREDUCE || kind == K_GATHER || kind == K_SCATTER_ADD) {
            /* a symbolic axis searched, or indexed (what reads it: the result, the updates),
             * must not be empty when there is something to compute */
            const ir_node *a = &f->nodes[n->in[0]];
            const ir_node *u = kind == K_SCATTER_ADD ? &f->nodes[n->in[2]] : n;
            if (!dim_is_sym(a->shape[n->a.axis]))
                continue;
            checked(c, a->shape[n->a.axis], done, x, sizeof x);
            buf t = {0};
            buf_printf(&t, "if (%s == 0 && 1", x);
            for (int k = 0; k < u->rank; k++) {
                char d[64];
                checked(c, u->shape[k], done, d, sizeof d);
                buf_printf(&t, " && %s != 0", d);
            }
            buf_puts(&t, kind == K_ARGREDUCE ? ") return -1; /* an arg search over nothing */"
                                             : ") return -1; /* an index into nothing */");
            char *s = em_finish(c, &t);
            em_line(c, "%s", s ? s : "");
            free(s);
        }
    }
    /* the temporaries placed at run time, as em_dims_offsets places them */
    for (int32_t b = 0; b < p->nbufs; b++) {
        const pbuf *pb = &p->bufs[b];
        if (!run_time_temp(pb))
            continue;
        checked(c, pb->count, done, x, sizeof x);
        em_line(c, "nest_t = %s;", x);
        em_line(c, "if (!nest_dim_mul(&nest_t, %d) || !nest_dim_add(&nest_t, 63) || "
                   "!nest_dim_add(&nest_ws, nest_t & ~(int64_t)63) || nest_ws >= ((int64_t)1 << 62))",
                (int)nest_type_size((nest_type)pb->etype));
        em_line(c, "    return -1;");
    }
    em_line(c, "(void)nest_t;");
    em_line(c, "(void)nest_dim_mul; /* used or not, by the sizes' expressions */");
    em_line(c, "(void)nest_dim_add;");
    em_line(c, "return nest_ws;");
    c->indent--;
    em_line(c, "}");
    em_line(c, "%s", "");
    free(done);
    free(shape_done);
}
