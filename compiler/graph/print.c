/* print.c - the canonical text form and Graphviz drawings of functions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- names ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool taken(const namer *nm, const char *s)
{
    return nm->ntaken && bsearch(&s, nm->taken, nm->ntaken, sizeof *nm->taken, cmp_str);
}

bool namer_init(namer *nm, const nest_function *f)
{
    memset(nm, 0, sizeof *nm);
    nm->f = f;
    nm->taken = calloc((size_t)f->nnodes + 1, sizeof *nm->taken);
    nm->made = calloc((size_t)f->nnodes + 1, sizeof *nm->made);
    if (!nm->taken || !nm->made)
        return false;
    for (int32_t i = 0; i < f->nnodes; i++) {
        const char *s = f->nodes[i].name;
        if (s && s[0] == '_' && s[1] >= '0' && s[1] <= '9')
            nm->taken[nm->ntaken++] = s;
    }
    qsort(nm->taken, nm->ntaken, sizeof *nm->taken, cmp_str);
    for (int32_t i = 0; i < f->nnodes; i++) {
        if (f->nodes[i].name)
            continue;
        char s[64];
        snprintf(s, sizeof s, "_%d", i);
        for (int k = 1; taken(nm, s); k++)
            snprintf(s, sizeof s, "_%d_%d", i, k);
        nm->made[i] = strdup(s);
        if (!nm->made[i])
            return false;
    }
    return true;
}

void namer_free(namer *nm)
{
    if (nm->made)
        for (int32_t i = 0; i < nm->f->nnodes; i++)
            free(nm->made[i]);
    free(nm->made);
    free(nm->taken);
}

const char *namer_name(const namer *nm, int32_t i)
{
    return nm->f->nodes[i].name ? nm->f->nodes[i].name : nm->made[i];
}

/* ---- scalars and lists ---- */

void format_float(char *s, size_t n, int etype, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, n, "%.*g", prec, v);
        double back = strtod(s, NULL);
        if (etype == NEST_F32 ? (float)back == (float)v : back == v)
            return;
    }
}

void print_scalar(buf *b, int etype, const void *data, int64_t i)
{
    switch (etype) {
    case NEST_F32:
    case NEST_F64: {
        double v = etype == NEST_F32 ? ((const float *)data)[i] : ((const double *)data)[i];
        if (isnan(v)) {
            buf_puts(b, "nan");
            return;
        }
        if (isinf(v)) {
            buf_puts(b, v < 0 ? "-inf" : "inf");
            return;
        }
        char s[40];
        format_float(s, sizeof s, etype, v);
        buf_puts(b, s);
        return;
    }
    case NEST_I32: buf_printf(b, "%d", ((const int32_t *)data)[i]); return;
    case NEST_I64: buf_printf(b, "%lld", (long long)((const int64_t *)data)[i]); return;
    case NEST_BOOL: buf_puts(b, ((const uint8_t *)data)[i] ? "true" : "false"); return;
    }
}

static void print_axes(buf *b, uint32_t mask)
{
    buf_putc(b, '[');
    bool first = true;
    for (int i = 0; i < NEST_MAX_RANK; i++)
        if (mask & (1u << i)) {
            buf_printf(b, "%s%d", first ? "" : ",", i);
            first = false;
        }
    buf_putc(b, ']');
}

static void print_tensor_type(buf *b, const nest_function *f, int etype, int rank,
                              const int64_t *shape, int layout)
{
    buf_puts(b, nest_type_name((nest_type)etype));
    ir_format_dims(b, f, rank, shape);
    if (layout == NEST_COL_MAJOR)
        buf_puts(b, " col");
}

/* ", name=[...]" of a list of plain integers, unless every entry is def. */
static void print_list_unless(buf *b, const char *name, int n, const int64_t *v, int64_t def)
{
    bool all = true;
    for (int i = 0; i < n; i++)
        all &= v[i] == def;
    if (all)
        return;
    buf_printf(b, ", %s=", name);
    ir_format_shape(b, n, v);
}

/* A convolution's or pooling's attributes that differ from the defaults (a pool's window
 * always). */
static void print_window(buf *b, const ir_node *n)
{
    const ir_window *w = n->a.win;
    if (n->op != OP_CONVOLUTION) {
        buf_puts(b, ", window=");
        ir_format_shape(b, w->nsp, w->window);
    }
    print_list_unless(b, "strides", w->nsp, w->stride, 1);
    print_list_unless(b, "dilation", w->nsp, w->dilation, 1);
    print_list_unless(b, "pad_below", w->nsp, w->pad_below, 0);
    print_list_unless(b, "pad_above", w->nsp, w->pad_above, 0);
    print_list_unless(b, "data_dilation", w->nsp, w->data_dilation, 1);
    if (w->groups != 1)
        buf_printf(b, ", groups=%lld", (long long)w->groups);
    if (w->include_pad)
        buf_puts(b, ", include_pad=true");
}

/* ---- the canonical form ---- */

static void print_op(buf *b, const namer *nm, const ir_node *n, int64_t maxvals)
{
    const nest_function *f = nm->f;
    buf_printf(b, "%s(", ir_ops[n->op].name);
    const char *sep = "";
    if (n->op == OP_CONSTANT) {
        print_tensor_type(b, f, n->etype, n->rank, n->shape, NEST_ROW_MAJOR);
        buf_puts(b, ", ");
        bool list = n->a.constant.count != 1;
        if (list)
            buf_putc(b, '[');
        for (int64_t i = 0; i < n->a.constant.count; i++) {
            if (i)
                buf_puts(b, ", ");
            if (i == maxvals) {
                buf_puts(b, "...");
                break;
            }
            print_scalar(b, n->etype, n->a.constant.data, i);
        }
        if (list)
            buf_putc(b, ']');
        buf_putc(b, ')');
        return;
    }
    for (int i = 0; i < n->nin; i++) {
        buf_printf(b, "%s%s", sep, namer_name(nm, n->in[i]));
        sep = ", ";
    }
    const ir_node *a = n->nin ? &f->nodes[n->in[0]] : NULL;
    switch (ir_kind_of(n)) {
    case K_CONVERT:
        buf_printf(b, ", type=%s", nest_type_name((nest_type)n->etype));
        break;
    case K_BROADCAST:
        buf_puts(b, ", shape=");
        ir_format_dims(b, f, n->rank, n->shape);
        buf_puts(b, ", axes=");
        print_axes(b, n->a.axes);
        break;
    case K_RESHAPE: {
        bool identity = true;
        for (int i = 0; i < a->rank; i++)
            identity &= n->a.order[i] == i;
        if (!identity) {
            buf_puts(b, ", order=[");
            for (int i = 0; i < a->rank; i++)
                buf_printf(b, "%s%d", i ? "," : "", n->a.order[i]);
            buf_putc(b, ']');
        }
        buf_puts(b, ", shape=");
        ir_format_dims(b, f, n->rank, n->shape);
        break;
    }
    case K_SLICE:
    case K_REPLACE_SLICE:
        buf_puts(b, ", lower=");
        ir_format_dims(b, f, n->rank, n->a.slice.lower);
        buf_puts(b, ", upper=");
        ir_format_dims(b, f, n->rank, n->a.slice.upper);
        print_list_unless(b, "strides", n->rank, n->a.slice.step, 1); /* plain: ir.c */
        break;
    case K_GET:
        buf_printf(b, ", %d", n->a.get.index);
        break;
    case K_CONV:
    case K_POOL:
        print_window(b, n);
        break;
    case K_CONCAT:
    case K_ARGREDUCE:
    case K_GATHER:
    case K_SCATTER_ADD:
        buf_printf(b, ", axis=%d", n->a.axis);
        break;
    case K_PAD:
        buf_puts(b, ", below=");
        ir_format_dims(b, f, n->rank, n->a.pad.below);
        buf_puts(b, ", above=");
        ir_format_dims(b, f, n->rank, n->a.pad.above);
        print_list_unless(b, "interior", n->rank, n->a.pad.interior, 0); /* plain: ir.c */
        break;
    case K_REDUCE:
    case K_REVERSE:
    case K_SOFTMAX:
        buf_puts(b, ", axes=");
        print_axes(b, n->a.axes);
        break;
    case K_ONE_HOT:
        buf_puts(b, ", shape=");
        ir_format_dims(b, f, n->rank, n->shape);
        buf_printf(b, ", axis=%d", n->a.axis);
        break;
    case K_TOPK:
        buf_printf(b, ", k=%lld, axis=%d, largest=%s", (long long)n->a.topk.k, n->a.topk.axis,
                   n->a.topk.largest ? "true" : "false");
        break;
    default:
        break;
    }
    buf_putc(b, ')');
}

void print_node(buf *b, const namer *nm, int32_t node, int64_t maxvals)
{
    buf_printf(b, "%s = ", namer_name(nm, node));
    print_op(b, nm, &nm->f->nodes[node], maxvals);
}

void print_function(buf *b, const nest_function *f)
{
    namer nm;
    if (!namer_init(&nm, f)) {
        namer_free(&nm);
        b->failed = true;
        return;
    }
    buf_printf(b, "func %s(", f->name);
    for (int32_t i = 0; i < f->nparams; i++) {
        const ir_node *p = &f->nodes[f->params[i]];
        buf_printf(b, "%s%s: ", i ? ", " : "", p->name);
        print_tensor_type(b, f, p->etype, p->rank, p->shape, p->a.param.layout);
    }
    buf_puts(b, ") -> ");
    bool paren = f->nresults != 1;
    if (paren)
        buf_putc(b, '(');
    for (int32_t i = 0; i < f->nresults; i++) {
        const ir_node *r = &f->nodes[f->results[i]];
        if (i)
            buf_puts(b, ", ");
        print_tensor_type(b, f, r->etype, r->rank, r->shape, f->result_layout[i]);
    }
    if (paren)
        buf_putc(b, ')');
    buf_puts(b, " {\n");
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        if (n->op == OP_PARAMETER || n->op == OP_STATE || n->op == OP_TOPK)
            continue; /* a topk's two nodes print as the call that makes their tuple */
        buf_printf(b, "  %s = ", namer_name(&nm, i));
        print_op(b, &nm, ir_is_topk_tuple(f, i) ? &f->nodes[n->in[0]] : n, INT64_MAX);
        buf_putc(b, '\n');
    }
    for (int32_t i = 0; i < f->nassigns; i++)
        buf_printf(b, "  assign(%s, %s)\n", f->module->states[f->assigns[i].state].name,
                   namer_name(&nm, f->assigns[i].node));
    buf_puts(b, "  return");
    for (int32_t i = 0; i < f->nreturned; i++)
        buf_printf(b, "%s %s", i ? "," : "", namer_name(&nm, f->returned[i]));
    buf_puts(b, "\n}\n");
    namer_free(&nm);
}

/* A number of an initializer: the shortest text that reads back as the same double. */
static void print_init_number(buf *b, int etype, double v)
{
    if (etype == NEST_BOOL) {
        buf_puts(b, v != 0 ? "true" : "false");
        return;
    }
    if (etype == NEST_I32 || etype == NEST_I64) {
        buf_printf(b, "%lld", (long long)v); /* a whole number in range: checked when declared */
        return;
    }
    print_scalar(b, NEST_F64, &v, 0);
}

/* "var w: f32[3,4] = uniform(-0.5, 0.5, seed=7)" for each state tensor of m. */
static void print_states(buf *b, const nest_module *m)
{
    for (int32_t i = 0; i < m->nstates; i++) {
        const ir_state *s = &m->states[i];
        buf_printf(b, "%s %s: ", s->trainable ? "var" : "persistent", s->name);
        print_tensor_type(b, NULL, s->etype, s->rank, s->shape, NEST_ROW_MAJOR);
        buf_puts(b, " = ");
        switch (s->init.kind) {
        case NEST_INIT_ZEROS: buf_puts(b, "zeros"); break;
        case NEST_INIT_CONSTANT: print_init_number(b, s->etype, s->init.a); break;
        case NEST_INIT_UNIFORM:
        case NEST_INIT_NORMAL:
            buf_puts(b, s->init.kind == NEST_INIT_UNIFORM ? "uniform(" : "normal(");
            print_init_number(b, s->etype, s->init.a);
            buf_puts(b, ", ");
            print_init_number(b, s->etype, s->init.b);
            buf_printf(b, ", seed=%llu)", (unsigned long long)s->init.seed);
            break;
        case NEST_INIT_DATA:
            buf_putc(b, '[');
            for (int64_t k = 0; k < s->count; k++) {
                if (k)
                    buf_puts(b, ", ");
                print_scalar(b, s->etype, s->data, k);
            }
            buf_putc(b, ']');
            break;
        }
        buf_putc(b, '\n');
    }
    if (m->nstates)
        buf_putc(b, '\n');
}

char *nest_print(nest_function *const *fns, int n)
{
    if (n < 0 || (n > 0 && !fns))
        return NULL;
    buf b = {0};
    /* the state of the functions' module first, so that every function sees it */
    for (int i = 0; i < n; i++)
        if (fns[i] && fns[i]->module && fns[i]->module->nstates) {
            print_states(&b, fns[i]->module);
            break;
        }
    for (int i = 0; i < n; i++) {
        if (!fns[i] || !fns[i]->name) {
            if (fns[i])
                ir_error(fns[i], NEST_ERR_ARG, "print: the function has no valid name");
            buf_reset(&b);
            return NULL;
        }
        if (i)
            buf_putc(&b, '\n');
        print_function(&b, fns[i]);
    }
    char *s = buf_finish(&b);
    if (!s && n > 0)
        ir_error(fns[0], NEST_ERR_NOMEM, "print: out of memory");
    return s;
}

char *nest_module_print(nest_module *m)
{
    if (!m)
        return NULL;
    buf b = {0};
    print_states(&b, m);
    for (int i = 0; i < m->nfns; i++) {
        if (!m->fns[i]->name) {
            ir_error(m->fns[i], NEST_ERR_ARG, "print: the function has no valid name");
            buf_reset(&b);
            return NULL;
        }
        if (i)
            buf_putc(&b, '\n');
        print_function(&b, m->fns[i]);
    }
    char *s = buf_finish(&b);
    if (!s)
        ir_module_error(m, NEST_ERR_NOMEM, "print: out of memory");
    return s;
}

/* ---- Graphviz ---- */

/* Cluster c of function k and the clusters inside it: the loop nests, each with the ops it
 * computes. */
static void dot_cluster(buf *b, int k, int32_t nnodes, const dot_marks *m, int c, int indent)
{
    bool group = false;
    for (int d = 0; d < m->nclusters && !group; d++)
        group = m->parent[d] == c;
    buf_printf(b, "%*ssubgraph cluster_%d_%d {\n%*slabel=\"%s\";\n", indent, "", k, c, indent + 2,
               "", m->labels && m->labels[c] ? m->labels[c] : "");
    if (group)
        buf_printf(b, "%*sstyle=\"rounded,dashed\";\n%*scolor=\"#7f9cc7\";\n", indent + 2, "",
                   indent + 2, "");
    else
        buf_printf(b, "%*sstyle=\"rounded,filled\";\n%*sfillcolor=\"#eef3fb\";\n"
                      "%*scolor=\"#7f9cc7\";\n",
                   indent + 2, "", indent + 2, "", indent + 2, "");
    for (int d = 0; d < m->nclusters; d++)
        if (m->parent[d] == c)
            dot_cluster(b, k, nnodes, m, d, indent + 2);
    for (int32_t i = 0; i < nnodes; i++)
        if (m->cluster[i] == c)
            buf_printf(b, "%*sf%d_n%d;\n", indent + 2, "", k, i);
    buf_printf(b, "%*s}\n", indent, "");
}

void print_dot_function(buf *b, const nest_function *f, int k, const dot_marks *marks)
{
    namer nm;
    if (!namer_init(&nm, f)) {
        namer_free(&nm);
        b->failed = true;
        return;
    }
    buf_printf(b, "  subgraph cluster_%d {\n    label=\"%s\";\n    fontsize=18;\n", k, f->name);
    for (int c = 0; marks && c < marks->nclusters; c++)
        if (marks->parent[c] < 0)
            dot_cluster(b, k, f->nnodes, marks, c, 4);
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *nd = &f->nodes[i];
        ir_kind kind = ir_kind_of(nd);
        int store = marks ? marks->store[i] : DOT_FUSED;
        buf_printf(b, "    f%d_n%d [label=\"", k, i);
        if (kind == K_PARAM) {
            buf_printf(b, "%s: ", namer_name(&nm, i));
            ir_format_type(b, f, i);
        } else if (kind == K_CONST) {
            print_node(b, &nm, i, 4);
        } else {
            buf_printf(b, "%s = %s", namer_name(&nm, i), ir_ops[nd->op].name);
        }
        if (store == DOT_WORKSPACE)
            buf_puts(b, "\\nstored in the workspace");
        else if (store == DOT_ROW)
            buf_puts(b, "\\nstored one row at a time");
        buf_puts(b, "\"");
        if (kind == K_PARAM)
            buf_puts(b, ", style=\"rounded,filled\"");
        else if (kind == K_CONST)
            buf_puts(b, ", style=\"rounded,filled\", color=gray40");
        else if (store == DOT_VIEW)
            buf_puts(b, ", style=\"dashed,filled\"");
        if (store == DOT_WORKSPACE || store == DOT_ROW)
            buf_puts(b, ", peripheries=2");
        buf_puts(b, "];\n");
        for (int j = 0; j < nd->nin; j++) {
            int32_t src = nd->in[j];
            buf_printf(b, "    f%d_n%d -> f%d_n%d [label=\"", k, src, k, i);
            ir_format_type(b, f, src);
            buf_puts(b, "\"");
            if (marks && (marks->store[src] == DOT_WORKSPACE || marks->store[src] == DOT_ROW))
                buf_puts(b, ", style=bold, color=\"#b03030\"");
            buf_puts(b, "];\n");
        }
    }
    for (int32_t i = 0; i < f->nresults; i++) {
        buf_printf(b, "    f%d_r%d [label=\"result %d\", shape=plaintext];\n"
                      "    f%d_n%d -> f%d_r%d [label=\"",
                   k, i, i, k, f->results[i], k, i);
        ir_format_type(b, f, f->results[i]);
        buf_puts(b, "\"];\n");
    }
    buf_puts(b, "  }\n");
    namer_free(&nm);
}
