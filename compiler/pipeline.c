/*
 * pipeline.c - the passes in order, and the public entry points that run them.
 *
 *   pass_fuse      what is stored, the loop nests and their expressions   (fuse.c, layout.c)
 *   pass_rows      nests that proceed row by row share their outer loop    (rows.c)
 *   pass_flatten   loop order and merged axes                             (flatten.c)
 *   pass_tile      register tiles for products of matrices                (tile.c)
 *   pass_memplan   the workspace                                          (memplan.c)
 *   emit_function  C text                                                 (emit/)
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const struct {
    const char *name;
    int (*run)(plan *p);
} passes[] = {
    {"fuse", pass_fuse},
    {"rows", pass_rows},
    {"flatten", pass_flatten},
    {"tile", pass_tile},
    {"memplan", pass_memplan},
};

bool pipeline_has_pass(const char *name)
{
    for (size_t i = 0; i < countof(passes); i++)
        if (strcmp(passes[i].name, name) == 0)
            return true;
    return false;
}

/* ---- dumps ---- */

static void dump_fx(buf *b, const plan *p, const fx *e)
{
    switch (e->kind) {
    case FX_LOAD:
        buf_printf(b, "b%d[%lld", e->buf, (long long)e->off);
        for (int k = 0; k < e->rank; k++)
            buf_printf(b, "%s%lld", k ? "," : ";", (long long)e->st[k]);
        buf_putc(b, ']');
        return;
    case FX_IMM:
        if (e->etype == NEST_F32 || e->etype == NEST_F64)
            buf_printf(b, "%g", e->imm.f);
        else
            buf_printf(b, "%lld", (long long)e->imm.i);
        return;
    case FX_OP:
    case FX_CONCAT:
        buf_printf(b, "%s(", e->kind == FX_OP ? ir_ops[e->op].name : "concat");
        for (int i = 0; i < e->nargs; i++) {
            if (i)
                buf_puts(b, ", ");
            if (b->len > 200000) { /* deep expressions: keep the dump readable */
                buf_puts(b, "...");
                break;
            }
            dump_fx(b, p, e->args[i]);
        }
        if (e->kind == FX_CONCAT)
            buf_printf(b, "; axis %d", e->axis);
        buf_putc(b, ')');
        return;
    }
}

void plan_dump(buf *b, const plan *p)
{
    static const char *const kinds[] = {"param", "result", "temp", "const"};
    buf_printf(b, "plan %s: %d buffers, workspace %lld bytes\n", p->f->name, p->nbufs,
               (long long)p->ws_size);
    for (int32_t i = 0; i < p->nbufs; i++) {
        const pbuf *pb = &p->bufs[i];
        buf_printf(b, "  b%d: %s %d, %s x %lld", i, kinds[pb->kind], pb->index,
                   nest_type_name((nest_type)pb->etype), (long long)pb->count);
        if (pb->kind == BUF_TEMP && pb->row)
            buf_printf(b, " (one row of %lld, local)", (long long)pb->row);
        else if (pb->kind == BUF_TEMP)
            buf_printf(b, pb->dead ? " (unused)" : " at %lld", (long long)pb->offset);
        buf_putc(b, '\n');
    }
    for (int32_t k = 0; k < p->nnests; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead)
            continue;
        if (ne->rowed)
            buf_printf(b, "  nest %d (rows with nest %d) over [", k, ne->group);
        else
            buf_printf(b, "  nest %d over [", k);
        for (int d = 0; d < ne->rank; d++)
            buf_printf(b, "%s%lld%s", d ? "," : "", (long long)ne->dims[d],
                       (ne->reduced & (1u << d)) ? "r" : "");
        buf_puts(b, "]\n");
        for (int i = 0; i < ne->nouts; i++) {
            const nout *o = &ne->outs[i];
            buf_printf(b, "    b%d[%lld", o->buf, (long long)o->off);
            for (int d = 0; d < ne->rank; d++)
                buf_printf(b, "%s%lld", d ? "," : ";", (long long)o->st[d]);
            buf_printf(b, "] %s ", o->reduce >= 0 ? ir_ops[o->reduce].name : "=");
            dump_fx(b, p, o->value);
            buf_putc(b, '\n');
        }
    }
}

/* ---- planning ---- */

int pipeline_plan(plan *p, nest_function *f, arena *a, const nest_options *opts,
                  const char *dump_after, buf *dump)
{
    memset(p, 0, sizeof *p);
    p->f = f;
    p->a = a;
    p->opts = opts;
    if (!f->has_return)
        return ir_error(f, NEST_ERR_ARG, "function %s has no results (nest_return was not called)",
                        f->name);
    for (size_t i = 0; i < countof(passes); i++) {
        if (passes[i].run(p) != NEST_OK) {
            int st = p->status ? p->status : NEST_ERR_NOMEM;
            free(p->table);
            p->table = NULL;
            return ir_error(f, st, "compiling %s: %s (in pass %s)", f->name, nest_status_str(st),
                            passes[i].name);
        }
        if (dump_after && dump && strcmp(dump_after, passes[i].name) == 0)
            plan_dump(dump, p);
    }
    return NEST_OK;
}

/* The entry points of the generated C of one function, to check names against each other. */
static const char *const suffixes[] = {"", "_call", "_impl", "_workspace_size", "_call_ws"};

static int check_names(nest_function *const *fns, int n)
{
    for (int i = 0; i < n; i++)
        if (emit_name_taken(fns[i]->name))
            return ir_error(fns[i], NEST_ERR_ARG,
                            "function %s cannot be compiled: C library headers the generated C "
                            "includes, the C compiler or C++ already use the name %s",
                            fns[i]->name, fns[i]->name);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            const char *a = fns[i]->name, *b = fns[j]->name;
            size_t la = strlen(a);
            for (size_t s = 0; s < countof(suffixes); s++)
                if (strncmp(b, a, la) == 0 && strcmp(b + la, suffixes[s]) == 0)
                    return ir_error(fns[j], NEST_ERR_ARG,
                                    "functions %s and %s cannot be in one C file: %s is an entry "
                                    "point of %s",
                                    a, b, b, a);
        }
    return NEST_OK;
}

/* Emits the C (or the header) of n functions into out. */
static int emit_all(nest_function *const *fns, int n, nest_emit_kind kind, emit_mode mode,
                    const nest_options *opts, buf *out, jit_info *info)
{
    nest_options defaults;
    if (!opts) {
        nest_options_init(&defaults);
        opts = &defaults;
    }
    for (int i = 0; i < n; i++) {
        if (!fns[i])
            return NEST_ERR_ARG;
        if (!fns[i]->name)
            return ir_error(fns[i], NEST_ERR_ARG, "the function has no valid name");
    }
    if (check_names(fns, n))
        return NEST_ERR_ARG;
    buf body = {0};
    uint64_t helpers = 0;
    for (int i = 0; i < n; i++) {
        arena a = {0};
        plan p;
        int st = pipeline_plan(&p, fns[i], &a, opts, NULL, NULL);
        if (st == NEST_OK) {
            if (kind == NEST_EMIT_C)
                emit_function(&body, &p, mode, &helpers);
            else
                emit_header_decls(&body, &p);
        }
        if (st == NEST_OK && info) {
            info->ws_size = p.ws_size;
            info->nconsts = p.nconsts;
            info->const_nodes = calloc((size_t)p.nconsts + 1, sizeof *info->const_nodes);
            if (!info->const_nodes)
                st = ir_error(fns[i], NEST_ERR_NOMEM, "out of memory");
            for (int32_t b = 0; st == NEST_OK && b < p.nbufs; b++)
                if (p.bufs[b].kind == BUF_CONST)
                    info->const_nodes[p.bufs[b].index] = p.bufs[b].node;
        }
        free(p.table);
        arena_free(&a);
        if (st != NEST_OK) {
            buf_reset(&body);
            return st;
        }
    }
    if (kind == NEST_EMIT_C) {
        emit_preamble(out, helpers, mode);
    } else {
        buf_puts(out, "/* Generated by nest: the entry points of the generated C. Arrays are dense "
                      "and row-major\n * unless marked col; bool elements are one byte 0 or 1. Each "
                      "entry returns 0 on success. */\n");
        buf_printf(out, "#ifndef NEST_GENERATED_%s_H\n#define NEST_GENERATED_%s_H\n\n",
                   n ? fns[0]->name : "EMPTY", n ? fns[0]->name : "EMPTY");
        buf_puts(out, "#include <stddef.h>\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
    }
    if (body.data)
        buf_write(out, body.data, body.len);
    out->failed |= body.failed;
    buf_reset(&body);
    if (kind == NEST_EMIT_H)
        buf_puts(out, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
    if (out->failed) {
        if (n)
            ir_error(fns[0], NEST_ERR_NOMEM, "emitting C: out of memory");
        return NEST_ERR_NOMEM;
    }
    return NEST_OK;
}

int pipeline_consts(nest_function *f, const nest_options *opts, jit_info *info)
{
    buf out = {0};
    int st = emit_all(&f, 1, NEST_EMIT_H, EMIT_AOT, opts, &out, info);
    buf_reset(&out);
    return st;
}

char *nest_emit(nest_function *const *fns, int n, nest_emit_kind kind, const nest_options *opts)
{
    if (n < 0 || (n > 0 && !fns) || (kind != NEST_EMIT_C && kind != NEST_EMIT_H))
        return NULL;
    buf out = {0};
    if (emit_all(fns, n, kind, EMIT_AOT, opts, &out, NULL) != NEST_OK) {
        buf_reset(&out);
        return NULL;
    }
    return buf_finish(&out);
}

/* For the JIT (driver/driver.c): the C of one function with constants passed as data. */
char *pipeline_emit_jit(nest_function *f, const nest_options *opts, jit_info *info)
{
    buf out = {0};
    memset(info, 0, sizeof *info);
    if (emit_all(&f, 1, NEST_EMIT_C, EMIT_JIT, opts, &out, info) != NEST_OK) {
        free(info->const_nodes);
        info->const_nodes = NULL;
        buf_reset(&out);
        return NULL;
    }
    return buf_finish(&out);
}

/* For nestc --dump-after: the plan of each function after the named pass. */
char *pipeline_dump(nest_function *const *fns, int n, const nest_options *opts, const char *pass)
{
    if (!pipeline_has_pass(pass))
        return NULL;
    buf out = {0};
    for (int i = 0; i < n; i++) {
        arena a = {0};
        plan p;
        int st = pipeline_plan(&p, fns[i], &a, opts, pass, &out);
        free(p.table);
        arena_free(&a);
        if (st != NEST_OK) {
            buf_reset(&out);
            return NULL;
        }
    }
    return buf_finish(&out);
}

/* ---- Graphviz with fusion clusters ---- */

typedef struct clusters {
    int32_t *of; /* per graph node */
    int c;       /* the cluster being filled */
} clusters;

static void mark_cluster(fx *e, void *ctx)
{
    clusters *cl = ctx;
    if ((e->kind == FX_OP || e->kind == FX_CONCAT) && e->node >= 0 && cl->of[e->node] < 0)
        cl->of[e->node] = cl->c;
}

char *pipeline_dot(nest_function *const *fns, int n, const nest_options *opts)
{
    nest_options defaults;
    if (!opts) {
        nest_options_init(&defaults);
        opts = &defaults;
    }
    if (n < 0 || (n > 0 && !fns))
        return NULL;
    buf out = {0};
    buf_puts(&out, "digraph nest {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (int i = 0; i < n; i++) {
        nest_function *f = fns[i];
        if (!f || !f->name) {
            buf_reset(&out);
            return NULL;
        }
        arena a = {0};
        plan p;
        clusters cl = {calloc((size_t)f->nnodes + 1, sizeof *cl.of), 0};
        char **labels = NULL;
        int nlabels = 0;
        int st = cl.of ? NEST_OK : ir_error(f, NEST_ERR_NOMEM, "out of memory");
        /* a function without results has no plan: draw its graph alone */
        if (st == NEST_OK && f->has_return)
            st = pipeline_plan(&p, f, &a, opts, NULL, NULL);
        else
            memset(&p, 0, sizeof p);
        if (st == NEST_OK) {
            for (int32_t j = 0; j < f->nnodes; j++)
                cl.of[j] = -1;
            labels = calloc((size_t)p.nnests + 1, sizeof *labels);
            bool ok = labels != NULL;
            for (int32_t k = 0; ok && k < p.nnests; k++) {
                const nest *ne = &p.nests[k];
                if (ne->dead)
                    continue;
                cl.c = nlabels;
                for (int o = 0; ok && o < ne->nouts; o++) {
                    if (ne->outs[o].node >= 0 && cl.of[ne->outs[o].node] < 0)
                        cl.of[ne->outs[o].node] = nlabels;
                    ok = fx_walk(&p, &ne->outs[o].value, 1, mark_cluster, &cl);
                }
                buf t = {0};
                buf_printf(&t, "nest %d: loops over [", k);
                for (int d = 0; d < ne->rank; d++)
                    buf_printf(&t, "%s%lld%s", d ? "," : "", (long long)ne->dims[d],
                               (ne->reduced & (1u << d)) ? "r" : "");
                buf_puts(&t, "]");
                if (ne->rowed)
                    buf_printf(&t, ", rows with nest %d", ne->group);
                if (ok && !(labels[nlabels++] = buf_finish(&t)))
                    ok = false;
                buf_reset(&t);
            }
            if (!ok)
                st = ir_error(f, NEST_ERR_NOMEM, "print: out of memory");
        }
        if (st == NEST_OK)
            print_dot_function(&out, f, i, cl.of, nlabels, labels);
        for (int j = 0; j < nlabels; j++)
            free(labels[j]);
        free(labels);
        free(cl.of);
        free(p.table);
        arena_free(&a);
        if (st != NEST_OK) {
            buf_reset(&out);
            return NULL;
        }
    }
    buf_puts(&out, "}\n");
    char *s = buf_finish(&out);
    if (!s && n > 0)
        ir_error(fns[0], NEST_ERR_NOMEM, "print: out of memory");
    return s;
}

char *nest_print_dot(nest_function *const *fns, int n) { return pipeline_dot(fns, n, NULL); }
