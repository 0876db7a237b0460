/*
 * pipeline.c - the passes in order, and the public entry points that run them.
 *
 *   pass_fuse      what is stored, the loop nests and their expressions   (fuse.c, layout.c)
 *   pass_conv      convolutions and pools absorb the element-wise work after them (conv.c)
 *   pass_rows      nests that proceed row by row share their outer loop    (rows.c)
 *   pass_flatten   loop order and merged axes                             (flatten.c)
 *   pass_tile      register tiles for products of matrices                (tile.c)
 *   pass_inplace   assignments of state written in place when safe        (inplace.c)
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
    {"conv", pass_conv},
    {"rows", pass_rows},
    {"flatten", pass_flatten},
    {"tile", pass_tile},
    {"inplace", pass_inplace},
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
        if (e->buf == FX_IOTA)
            buf_printf(b, "iota[%lld", (long long)e->off);
        else
            buf_printf(b, "b%d[%lld", e->buf, (long long)e->off);
        for (int k = 0; k < e->rank; k++)
            buf_printf(b, "%s%lld", k ? "," : ";", (long long)e->st[k]);
        for (int j = 0; j < e->nargs; j++) {
            buf_printf(b, " + %lld*take(", (long long)e->gst[j]);
            dump_fx(b, p, e->args[j]);
            buf_printf(b, ", %lld)", (long long)e->gdim[j]);
        }
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
    static const char *const kinds[] = {"param", "result", "temp", "const", "state", "state-new"};
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
        else if (ne->special >= 0)
            buf_printf(b, "  nest %d (%s) over [", k, ir_ops[ne->special].name);
        else
            buf_printf(b, "  nest %d over [", k);
        for (int d = 0; d < ne->rank; d++)
            buf_printf(b, "%s%lld%s", d ? "," : "", (long long)ne->dims[d],
                       (ne->reduced & (1u << d)) ? "r" : "");
        buf_puts(b, "]\n");
        if (ne->win)
            conv_describe(b, ne);
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

/* Whether node n's shape names a dim; in *outer_only, whether only its first axis does. */
static bool symbolic_shape(const ir_node *n, bool *outer_only)
{
    bool any = false;
    *outer_only = true;
    for (int k = 0; k < n->rank; k++)
        if (dim_is_sym(n->shape[k])) {
            any = true;
            *outer_only &= k == 0;
        }
    return any;
}

/* Whether node n is a reshape that only permutes its operand a's axes (a transpose: a view). */
static bool is_transpose(const ir_node *n, const ir_node *a)
{
    if (ir_kind_of(n) != K_RESHAPE || n->rank != a->rank)
        return false;
    for (int k = 0; k < n->rank; k++)
        if (n->shape[k] != a->shape[n->a.order[k]])
            return false;
    return true;
}

/* What the passes take of symbolic dims so far: every value's symbolic dim is its first axis
 * (so that every stored tensor, row-major, has plain strides; a symbolic extent is a loop
 * bound), except transposes (views, with plain strides, that plan_buffer refuses to store)
 * read by a dot, a batch_dot or a reduction (the weights' gradient of a dense layer, x^T . g,
 * folds over the batch); and no view moves an offset by a symbolic amount. NEST_OK, or an
 * error on f that names the value and says how to compile it at plain sizes. */
static int check_symbolic(nest_function *f)
{
    int32_t *ids, nd;
    if (ir_dims_of(f, &ids, &nd) != NEST_OK)
        return f->status;
    free(ids);
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        const ir_node *a = n->nin > 0 ? &f->nodes[ir_resolve(f, n->in[0])] : NULL;
        bool outer, aouter, sym = n->etype != IR_TUPLE && symbolic_shape(n, &outer);
        bool asym = a && a->etype != IR_TUPLE && symbolic_shape(a, &aouter);
        bool inner_in = false; /* an operand with a symbolic dim further in than its first */
        for (int j = 0; j < n->nin; j++) {
            const ir_node *x = &f->nodes[ir_resolve(f, n->in[j])];
            bool xo;
            inner_in |= x->etype != IR_TUPLE && symbolic_shape(x, &xo) && !xo;
        }
        ir_kind kind = ir_kind_of(n);
        const char *why = NULL;
        if (sym && !outer && !is_transpose(n, a))
            why = "a symbolic dim other than the first axis";
        else if (inner_in && kind != K_DOT && kind != K_BATCH_DOT && kind != K_REDUCE &&
                 !is_transpose(n, a))
            why = "an operand with a symbolic dim other than the first axis";
        else if (!sym && !asym)
            continue;
        else if (n->op == OP_PARAMETER && n->a.param.layout == NEST_COL_MAJOR)
            why = "a column-major parameter";
        else
            switch (ir_kind_of(n)) {
            case K_RESHAPE: /* a copy through the permuted operand: its symbolic dim first */
                for (int k = 1; k < a->rank && !why && !is_transpose(n, a); k++)
                    if (dim_is_sym(a->shape[n->a.order[k]]))
                        why = "a reshape that moves a symbolic dim inward";
                break;
            case K_SLICE:
                if (n->rank > 0 && dim_is_sym(n->a.slice.lower[0]))
                    why = "a slice with a symbolic lower bound";
                break;
            case K_CONCAT:
                if (n->a.axis == 0)
                    why = "a concat along a symbolic axis";
                break;
            case K_REVERSE:
                if (n->a.axes & 1u)
                    why = "a reverse of a symbolic axis";
                break;
            case K_PAD: /* a symbolic axis passes through unpadded */
                for (int k = 0; k < a->rank && !why; k++)
                    if (dim_is_sym(a->shape[k]) &&
                        (n->a.pad.below[k] || n->a.pad.above[k] || n->a.pad.interior[k]))
                        why = "a pad of a symbolic axis";
                break;
            case K_REPLACE_SLICE: why = "a replace_slice"; break;
            case K_ONE_HOT: why = "a one_hot"; break;
            case K_TOPK: why = "a topk"; break;
            /* convolution and pooling: a symbolic batch alone (window.c), a loop bound */
            default: break;
            }
        if (why)
            return ir_refuse_dims(f, i, why, "");
    }
    for (int32_t i = 0; i < f->nresults; i++) {
        bool outer;
        if (f->result_layout[i] == NEST_COL_MAJOR && symbolic_shape(&f->nodes[f->results[i]], &outer))
            return ir_error(f, NEST_ERR_ARG,
                            "compiling %s: a column-major result with symbolic dims is not "
                            "compiled yet; nest_specialize or nestc --dim NAME=N give plain sizes",
                            f->name);
    }
    return NEST_OK;
}

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
    /* symbolic dims beyond the first axis: the leading run of them merged into one axis (the
     * copy is f's until the next plan of f or its free) */
    ir_function_destroy(f->collapsed);
    f->collapsed = NULL;
    if (ir_is_symbolic(f) && ir_outer_needed(f)) {
        /* symbolic dims behind plain ones: the values stored with them outermost */
        if (!(f->collapsed = ir_outer(f)))
            return f->status;
        p->f = f->collapsed;
    }
    if (ir_is_symbolic(p->f) && ir_collapse_needed(p->f)) {
        nest_function *c = ir_collapse(p->f);
        if (!c)
            return p->f == f ? f->status : ir_error(f, p->f->status, "%s", p->f->errmsg);
        c->origin = f;
        if (p->f == f)
            f->collapsed = c;
        else
            p->f->collapsed = c; /* the copy owns the copy of it */
        p->f = c;
    }
    if (ir_is_symbolic(p->f) && check_symbolic(p->f) != NEST_OK)
        return p->f == f ? f->status : ir_error(f, p->f->status, "%s", p->f->errmsg);
    for (size_t i = 0; i < countof(passes); i++) {
        if (passes[i].run(p) != NEST_OK) {
            int st = p->status ? p->status : NEST_ERR_NOMEM;
            free(p->table);
            p->table = NULL;
            if (p->f != f && p->f->status && !p->why[0])
                return ir_error(f, st, "%s", p->f->errmsg);
            return ir_error(f, st, "compiling %s: %s (in pass %s)", f->name,
                            p->why[0] ? p->why : nest_status_str(st), passes[i].name);
        }
        if (dump_after && dump && strcmp(dump_after, passes[i].name) == 0)
            plan_dump(dump, p);
    }
    return NEST_OK;
}

/* The entry points of the generated C of one function, to check names against each other. */
static const char *const suffixes[] = {"", "_call", "_impl", "_workspace_size", "_call_ws"};

/* The module whose state the C of fns declares: mod if it has state, else the first of the
 * functions' with state, or NULL. */
const nest_module *pipeline_state_module(const nest_module *mod, nest_function *const *fns, int n)
{
    if (mod && mod->nstates > 0)
        return mod;
    for (int i = 0; i < n; i++)
        if (fns[i]->module && fns[i]->module->nstates > 0)
            return fns[i]->module;
    return NULL;
}

static int check_names(const nest_module *mod, nest_function *const *fns, int n)
{
    const nest_module *m = pipeline_state_module(mod, fns, n);
    for (int i = 0; m && i < n; i++) {
        if (fns[i]->module && fns[i]->module != m && fns[i]->module->nstates > 0)
            return ir_error(fns[i], NEST_ERR_ARG,
                            "function %s cannot be in one C file with %s: their modules %s and "
                            "%s have states of their own",
                            fns[i]->name, m->fns[0]->name, fns[i]->module->name, m->name);
        if (emit_state_name_taken(m, fns[i]->name))
            return ir_error(fns[i], NEST_ERR_ARG,
                            "function %s cannot be compiled: the state of module %s takes the "
                            "name (rename the module with --name or the function)",
                            fns[i]->name, m->name);
    }
    for (int i = 0; i < n; i++)
        if (is_c_library_name(fns[i]->name))
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

/* Emits the C (or the header) of n functions into out, with the state of module mod (NULL: of
 * the functions' module), which may have no functions. */
static int emit_all(const nest_module *mod, nest_function *const *fns, int n, nest_emit_kind kind,
                    emit_mode mode, const nest_options *opts, buf *out, jit_info *info)
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
    if (check_names(mod, fns, n))
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
            info->ws_dims = emit_dims_have_ws(&p);
            info->nconsts = p.nconsts;
            info->const_fn = p.f;
            info->const_nodes = calloc((size_t)p.nconsts + 1, sizeof *info->const_nodes);
            info->const_packs = calloc((size_t)p.nconsts + 1, sizeof *info->const_packs);
            if (!info->const_nodes || !info->const_packs)
                st = ir_error(fns[i], NEST_ERR_NOMEM, "out of memory");
            for (int32_t b = 0; st == NEST_OK && b < p.nbufs; b++)
                if (p.bufs[b].kind == BUF_CONST) {
                    info->const_nodes[p.bufs[b].index] = p.bufs[b].node;
                    if (p.bufs[b].pack)
                        info->const_packs[p.bufs[b].index] = *p.bufs[b].pack;
                }
        }
        free(p.table);
        arena_free(&a);
        if (st != NEST_OK) {
            buf_reset(&body);
            return st;
        }
    }
    const nest_module *m = pipeline_state_module(mod, fns, n);
    const char *guard = n ? fns[0]->name : m ? m->name : "EMPTY";
    if (kind == NEST_EMIT_C) {
        emit_preamble(out, helpers, mode);
        if (m)
            emit_state(out, m, mode, false);
    } else {
        buf_puts(out, "/* Generated by nest: the entry points of the generated C. Arrays are dense "
                      "and row-major\n * unless marked col; bool elements are one byte 0 or 1. Each "
                      "entry returns 0 on success. */\n");
        buf_printf(out, "#ifndef NEST_GENERATED_%s_H\n#define NEST_GENERATED_%s_H\n\n", guard,
                   guard);
        buf_puts(out, "#include <stddef.h>\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
        if (m)
            emit_state(out, m, mode, true);
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
        else if (mod)
            ir_module_error((nest_module *)mod, NEST_ERR_NOMEM, "emitting C: out of memory");
        return NEST_ERR_NOMEM;
    }
    return NEST_OK;
}

int64_t pipeline_const_count(const jit_info *info, int32_t i)
{
    const const_pack *pk = &info->const_packs[i];
    return pk->kind == CONST_PACK_NONE
               ? info->const_fn->nodes[info->const_nodes[i]].a.constant.count
               : const_pack_count(pk);
}

const void *pipeline_const_data(const jit_info *info, int32_t i, size_t *bytes, void **owned)
{
    const ir_node *n = &info->const_fn->nodes[info->const_nodes[i]];
    size_t esize = nest_type_size((nest_type)n->etype);
    *bytes = (size_t)pipeline_const_count(info, i) * esize;
    *owned = NULL;
    if (info->const_packs[i].kind == CONST_PACK_NONE)
        return n->a.constant.data;
    return *owned = const_pack_copy(&info->const_packs[i], esize, n->a.constant.data);
}

void pipeline_info_free(jit_info *info)
{
    free(info->const_nodes);
    free(info->const_packs);
    info->const_nodes = NULL;
    info->const_packs = NULL;
}

int pipeline_consts(nest_function *f, const nest_options *opts, jit_info *info)
{
    buf out = {0};
    memset(info, 0, sizeof *info);
    int st = emit_all(NULL, &f, 1, NEST_EMIT_H, EMIT_AOT, opts, &out, info);
    buf_reset(&out);
    if (st != NEST_OK)
        pipeline_info_free(info);
    return st;
}

char *nest_emit(nest_function *const *fns, int n, nest_emit_kind kind, const nest_options *opts)
{
    if (n < 0 || (n > 0 && !fns) || (kind != NEST_EMIT_C && kind != NEST_EMIT_H))
        return NULL;
    buf out = {0};
    if (emit_all(NULL, fns, n, kind, EMIT_AOT, opts, &out, NULL) != NEST_OK) {
        buf_reset(&out);
        return NULL;
    }
    return buf_finish(&out);
}

char *nest_module_emit(nest_module *m, nest_emit_kind kind, const nest_options *opts)
{
    if (!m || (kind != NEST_EMIT_C && kind != NEST_EMIT_H))
        return NULL;
    buf out = {0};
    if (emit_all(m, m->fns, m->nfns, kind, EMIT_AOT, opts, &out, NULL) != NEST_OK) {
        buf_reset(&out);
        ir_module_take_error(m);
        return NULL;
    }
    char *s = buf_finish(&out);
    if (!s)
        ir_module_error(m, NEST_ERR_NOMEM, "emitting C: out of memory");
    return s;
}

/* For the JIT (driver/driver.c): the C of one function with constants passed as data. */
char *pipeline_emit_jit(nest_function *f, const nest_options *opts, jit_info *info)
{
    buf out = {0};
    memset(info, 0, sizeof *info);
    if (emit_all(NULL, &f, 1, NEST_EMIT_C, EMIT_JIT, opts, &out, info) != NEST_OK) {
        pipeline_info_free(info);
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

/* "nest 2: [64,Σ256,128], tiled 6 x 16": the loops, the summed axes marked, how it runs. */
static char *nest_label(const plan *p, int32_t k)
{
    const nest *ne = &p->nests[k];
    buf t = {0};
    buf_printf(&t, "nest %d: [", k);
    for (int d = 0; d < ne->rank; d++)
        buf_printf(&t, "%s%s%lld", d ? "," : "", (ne->reduced & (1u << d)) ? "\u03a3" : "",
                   (long long)ne->dims[d]);
    buf_puts(&t, "]");
    if (ne->tile_i)
        buf_printf(&t, ", tiled %d x %d", ne->tile_i, ne->tile_j);
    return buf_finish(&t);
}

/* The marks of one function's picture from its plan: a cluster per live nest, inside a cluster
 * per row group. labels and parent have room for two clusters per nest. False when out of
 * memory. */
static bool dot_plan(plan *p, dot_marks *m, int32_t *cluster, uint8_t *store, char **labels,
                     int *parent)
{
    int *group_cluster = malloc(((size_t)p->nnests + 1) * sizeof *group_cluster);
    if (!group_cluster)
        return false;
    for (int32_t k = 0; k < p->nnests; k++)
        group_cluster[k] = -1;
    clusters cl = {cluster, 0};
    int n = 0;
    bool ok = true;
    for (int32_t k = 0; k < p->nnests && ok; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead)
            continue;
        int up = -1;
        if (ne->rowed) {
            int32_t g = ne->group;
            if (group_cluster[g] < 0) {
                buf t = {0};
                buf_printf(&t, "one loop over %lld rows", (long long)p->nests[g].dims[0]);
                parent[n] = -1;
                group_cluster[g] = n;
                ok = (labels[n++] = buf_finish(&t)) != NULL;
            }
            up = group_cluster[g];
        }
        cl.c = n;
        for (int o = 0; ok && o < ne->nouts; o++) {
            if (ne->outs[o].node >= 0 && cluster[ne->outs[o].node] < 0)
                cluster[ne->outs[o].node] = n;
            ok = fx_visit(p, &ne->outs[o].value, 1, NULL, mark_cluster, &cl);
        }
        parent[n] = up;
        ok = ok && (labels[n++] = nest_label(p, k)) != NULL;
    }
    free(group_cluster);
    m->nclusters = n;
    /* views no nest computes: drawn in the one nest that reads them (their readers come later
     * in the node order, so each is placed before its own operands are looked at) */
    const nest_function *f = p->f;
    int32_t *readers = malloc(((size_t)f->nnodes + 1) * sizeof *readers);
    if (!readers)
        return false;
    for (int32_t i = 0; i < f->nnodes; i++)
        readers[i] = -1; /* -1 none yet, -2 several clusters or one outside every cluster */
    for (int32_t i = f->nnodes - 1; i >= 0; i--) {
        const ir_node *nd = &f->nodes[i];
        ir_kind kind = ir_kind_of(nd);
        if (cluster[i] < 0 && (kind == K_BROADCAST || kind == K_RESHAPE || kind == K_SLICE)) {
            store[i] = DOT_VIEW;
            cluster[i] = readers[i] >= 0 ? readers[i] : -1;
        }
        for (int j = 0; j < nd->nin; j++) {
            int32_t *r = &readers[nd->in[j]];
            *r = *r == -1 && cluster[i] >= 0 ? cluster[i] : *r == cluster[i] ? *r : -2;
        }
    }
    free(readers);
    for (int32_t b = 0; b < p->nbufs; b++) {
        const pbuf *pb = &p->bufs[b];
        bool pack = false;
        for (int32_t k = 0; k < p->nnests && !pack; k++)
            pack = !p->nests[k].dead && p->nests[k].tile_i && p->nests[k].pack == b;
        if (pb->kind == BUF_TEMP && !pb->dead && !pack && pb->node >= 0)
            store[pb->node] = pb->row ? DOT_ROW : DOT_WORKSPACE;
    }
    return ok;
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
    buf_puts(&out, "digraph nest {\n  graph [fontname=\"Helvetica\"];\n"
                   "  node [shape=box, fontname=\"monospace\", style=filled, fillcolor=white];\n"
                   "  edge [fontname=\"monospace\", fontsize=10];\n");
    for (int i = 0; i < n; i++) {
        nest_function *f = fns[i];
        if (!f || !f->name) {
            buf_reset(&out);
            return NULL;
        }
        arena a = {0};
        plan p;
        memset(&p, 0, sizeof p);
        int32_t *cluster = malloc(((size_t)f->nnodes + 1) * sizeof *cluster);
        uint8_t *store = calloc((size_t)f->nnodes + 1, 1);
        char **labels = NULL;
        int *parent = NULL;
        dot_marks m = {0, NULL, NULL, cluster, store};
        int st = cluster && store ? NEST_OK : ir_error(f, NEST_ERR_NOMEM, "out of memory");
        /* a function without results, or with symbolic dims, has no plan: its graph alone */
        bool planned = st == NEST_OK && f->has_return && !ir_is_symbolic(f);
        if (planned)
            st = pipeline_plan(&p, f, &a, opts, NULL, NULL);
        if (st == NEST_OK && planned) {
            for (int32_t j = 0; j < f->nnodes; j++)
                cluster[j] = -1;
            labels = calloc(2 * (size_t)p.nnests + 1, sizeof *labels);
            parent = calloc(2 * (size_t)p.nnests + 1, sizeof *parent);
            m.labels = labels;
            m.parent = parent;
            if (!labels || !parent || !dot_plan(&p, &m, cluster, store, labels, parent))
                st = ir_error(f, NEST_ERR_NOMEM, "print: out of memory");
        }
        if (st == NEST_OK)
            print_dot_function(&out, f, i, planned ? &m : NULL);
        for (int j = 0; labels && j < 2 * p.nnests; j++)
            free(labels[j]);
        free(labels);
        free(parent);
        free(cluster);
        free(store);
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
