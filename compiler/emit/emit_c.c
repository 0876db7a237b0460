/*
 * emit_c.c - C99 text of a planned function.
 *
 * Each nest becomes a block that opens with a comment naming the graph nodes it computes. The
 * loop nest runs the iteration space with constant bounds; its body evaluates the element
 * expressions once each (named after their graph nodes) and stores or folds them into the
 * outputs. Float reductions whose innermost axis folds keep several partial accumulators, so
 * that compilers vectorize them under strict IEEE rules and the sum is at least as accurate as
 * a sequential one. Concatenations split the loops at their boundaries. Integer arithmetic goes
 * through small helpers that wrap instead of overflowing. Everything the graph names reaches the
 * C only as a checked identifier, made unique against the emitter's own names.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ---- functions ---- */

/* Names the emitter uses at function scope (ii and jj: the rows and columns of a tiled
 * product's block, inside which its absorbed outputs read parameters). */
static const char *const reserved[] = {"ws", "args", "results", "workspace", "rc", "u", "st",
                                       "ii", "jj"};

/* Records the names a function's C cannot give to its parameters and values: the emitter's,
 * and the function's own entry points, which its wrappers call (em_unique also steers clear of
 * C's keywords and the C library's names). */
static void reserve_names(ctx *c)
{
    for (size_t i = 0; i < countof(reserved); i++)
        em_names_add(&c->fn, reserved[i]);
    char nm[IR_MAX_NAME + 32];
    static const char *const entry[] = {"_call", "_impl", "_workspace_size", "_call_ws"};
    for (size_t i = 0; i < countof(entry); i++) {
        snprintf(nm, sizeof nm, "%s%s", c->f->name, entry[i]);
        em_names_add(&c->fn, nm);
    }
    if (c->f->module && c->f->module->nstates > 0) { /* the state's type */
        snprintf(nm, sizeof nm, "%s_state", c->f->module->name);
        em_names_add(&c->fn, nm);
    }
}

/* The state tensors the function reads or assigns (ir_uses_state), in the state's order, into
 * c->nst, c->st_index and c->st_written; false when out of memory. */
static bool used_states(ctx *c)
{
    const nest_function *f = c->f;
    c->nst = 0;
    if (!ir_uses_state(f))
        return true;
    int32_t ns = f->module->nstates;
    c->st_index = calloc((size_t)ns + 1, sizeof *c->st_index);
    c->st_written = calloc((size_t)ns + 1, sizeof *c->st_written);
    unsigned char *use = calloc((size_t)ns + 1, 1); /* 1: read, 2: assigned */
    if (!c->st_index || !c->st_written || !use) {
        free(use);
        return false;
    }
    for (int32_t b = 0; c->p && b < c->p->nbufs; b++)
        if (c->p->bufs[b].kind == BUF_STATE && !c->p->bufs[b].dead)
            use[c->p->bufs[b].index] |= 1;
    for (int32_t i = 0; i < f->nassigns; i++)
        use[f->assigns[i].state] |= 2;
    for (int32_t s = 0; s < ns; s++) {
        if (!use[s])
            continue;
        c->st_index[c->nst] = s;
        c->st_written[c->nst++] = use[s] & 2;
    }
    free(use);
    return true;
}

/* The position of state tensor s among those used (c->st_index, ascending), or -1. */
static int st_pos(const ctx *c, int32_t s)
{
    const int32_t *at = c->nst ? bsearch(&s, c->st_index, (size_t)c->nst, sizeof s, cmp_i32) : NULL;
    return at ? (int)(at - c->st_index) : -1;
}

/* The C names of the parameters, the results and the state tensors used, in ABI order,
 * recorded in c->fn: the graph's names, and for results that are parameters or unnamed,
 * result<i>. */
static const char **abi_names(ctx *c)
{
    const nest_function *f = c->f;
    const char **abi = calloc((size_t)(f->nparams + f->nresults + c->nst) + 1, sizeof *abi);
    if (!abi)
        return NULL;
    for (int32_t i = 0; i < f->nparams; i++)
        abi[i] = em_unique(&c->fn, f->nodes[f->params[i]].name);
    for (int32_t i = 0; i < f->nresults; i++) {
        const ir_node *n = &f->nodes[f->results[i]];
        const char *base = n->op == OP_PARAMETER ? "_" : namer_name(&c->nm, f->results[i]);
        char nm[IR_MAX_NAME + 16];
        if (base[0] == '_')
            snprintf(nm, sizeof nm, "result%d", i);
        else
            snprintf(nm, sizeof nm, "%s", base);
        abi[f->nparams + i] = em_unique(&c->fn, nm);
    }
    for (int i = 0; i < c->nst; i++)
        abi[f->nparams + f->nresults + i] =
            em_unique(&c->fn, f->module->states[c->st_index[i]].name);
    return abi;
}

/* The declaration of the typed entry point's parameters: "const float *restrict x, ...", after
 * "M_state *st" (with st_first), and with the state tensors (with_states) and the workspace. */
static void param_list(ctx *c, buf *b, bool with_restrict, bool with_ws, bool with_states,
                       bool st_first)
{
    const nest_function *f = c->f;
    const char *r = with_restrict ? "restrict " : "";
    bool any = false;
    if (st_first) {
        buf_printf(b, "%s_state *%s", f->module->name, c->stn);
        any = true;
    }
    if (c->dimname && c->ndims > 0) { /* symbolic dims first, after the state */
        if (any)
            buf_puts(b, ", ");
        em_dims_params(c, b, NULL);
        any = true;
    }
    for (int32_t i = 0; i < f->nparams; i++) {
        const ir_node *n = &f->nodes[f->params[i]];
        buf_printf(b, "%sconst %s *%s%s", any ? ", " : "", em_ctype(n->etype), r, c->bufname[i]);
        any = true;
    }
    for (int32_t i = 0; i < f->nresults; i++) {
        const ir_node *n = &f->nodes[f->results[i]];
        buf_printf(b, "%s%s *%s%s", any ? ", " : "", em_ctype(n->etype), r,
                   c->bufname[f->nparams + i]);
        any = true;
    }
    for (int i = 0; with_states && i < c->nst; i++) {
        buf_printf(b, "%s%s%s *%s%s", any ? ", " : "", c->st_written[i] ? "" : "const ",
                   em_ctype(f->module->states[c->st_index[i]].etype), r,
                   c->bufname[f->nparams + f->nresults + i]);
        any = true;
    }
    if (with_ws) {
        buf_printf(b, "%sunsigned char *%sws", any ? ", " : "", r);
        any = true;
    }
    if (!any)
        buf_puts(b, "void");
}

/* "(const float *)args[0], ..., (float *)results[0]", with the arrays named args and res; after
 * "st, " (st_first), and with the state's tensors (with_states: "(float *)st->t[3]"). */
static void call_args(ctx *c, buf *b, const char *ws, const char *args, const char *res,
                      bool with_states, bool st_first)
{
    const nest_function *f = c->f;
    bool any = st_first;
    if (st_first)
        buf_puts(b, c->stn);
    if (c->dimname && c->ndims > 0) {
        em_dims_params(c, b, "dims");
        any = true;
    }
    for (int32_t i = 0; i < f->nparams; i++) {
        buf_printf(b, "%s(const %s *)%s[%d]", any ? ", " : "",
                   em_ctype(f->nodes[f->params[i]].etype), args, i);
        any = true;
    }
    for (int32_t i = 0; i < f->nresults; i++) {
        buf_printf(b, "%s(%s *)%s[%d]", any ? ", " : "", em_ctype(f->nodes[f->results[i]].etype), res,
                   i);
        any = true;
    }
    for (int i = 0; with_states && i < c->nst; i++) {
        buf_printf(b, "%s(%s%s *)%s->t[%d]", any ? ", " : "", c->st_written[i] ? "" : "const ",
                   em_ctype(f->module->states[c->st_index[i]].etype), c->stn, c->st_index[i]);
        any = true;
    }
    if (ws)
        buf_printf(b, "%s%s", any ? ", " : "", ws);
}

static void signature_comment(ctx *c)
{
    const nest_function *f = c->f->origin ? c->f->origin : c->f; /* as declared */
    buf t = {0};
    buf_printf(&t, "/* %s(", f->name);
    for (int32_t i = 0; i < f->nparams; i++) {
        const ir_node *n = &f->nodes[f->params[i]];
        buf_printf(&t, "%s%s: ", i ? ", " : "", n->name);
        ir_format_type(&t, f, f->params[i]);
        if (n->a.param.layout == NEST_COL_MAJOR)
            buf_puts(&t, " col");
    }
    buf_puts(&t, ") -> ");
    if (f->nresults != 1)
        buf_putc(&t, '(');
    for (int32_t i = 0; i < f->nresults; i++) {
        if (i)
            buf_puts(&t, ", ");
        ir_format_type(&t, f, f->results[i]);
        if (f->result_layout[i] == NEST_COL_MAJOR)
            buf_puts(&t, " col");
    }
    if (f->nresults != 1)
        buf_putc(&t, ')');
    buf_puts(&t, " */");
    char *s = em_finish(c, &t);
    em_line(c, "%s", s ? s : "");
    free(s);
}

static void emit_constants(ctx *c)
{
    const plan *p = c->p;
    for (int32_t b = 0; b < p->nbufs; b++) {
        const pbuf *pb = &p->bufs[b];
        if (pb->kind != BUF_CONST)
            continue;
        const ir_node *n = &c->f->nodes[pb->node];
        char nm[IR_MAX_NAME + 64];
        snprintf(nm, sizeof nm, "nest_const_%s_%d", c->f->name, pb->index);
        c->bufname[b] = em_unique(&c->fn, nm);
        if (c->mode == EMIT_JIT)
            continue;
        if (pb->pack)
            const_pack_describe(c->b, namer_name(&c->nm, pb->node), pb->pack);
        if (emit_const_is_data(pb->count, pb->etype)) {
            buf b2 = {0};
            ir_format_type(&b2, c->f, pb->node);
            char *t = buf_finish(&b2);
            buf_printf(c->b, "/* %s: %s%s, %lld bytes of data linked beside this C, not text */\n",
                       namer_name(&c->nm, pb->node), t ? t : "?", pb->pack ? " packed" : "",
                       (long long)(pb->count * (int64_t)nest_type_size((nest_type)pb->etype)));
            free(t);
            buf_printf(c->b, "extern const %s %s[%lld] __attribute__((visibility(\"hidden\"), "
                       "aligned(64)));\n", em_ctype(pb->etype), c->bufname[b], (long long)pb->count);
            continue;
        }
        if (!pb->pack) {
            emit_table(c->b, c->bufname[b], pb->etype, n->a.constant.data, pb->count);
            continue;
        }
        void *packed = const_pack_copy(pb->pack, nest_type_size((nest_type)pb->etype),
                                       n->a.constant.data);
        if (!packed) {
            c->b->failed = true;
            continue;
        }
        emit_table(c->b, c->bufname[b], pb->etype, packed, pb->count);
        free(packed);
    }
    if (c->mode == EMIT_JIT && p->nconsts > 0) {
        char nm[IR_MAX_NAME + 32];
        snprintf(nm, sizeof nm, "nest_consts_%s", c->f->name);
        buf_printf(c->b, "const void *%s[%d];\n", nm, p->nconsts);
    }
}

/* The opening of a wrapper over the arrays `args` and `res`: it casts away those a function
 * without parameters or without results leaves unread. */
static void open_wrapper(ctx *c, const char *args, const char *res)
{
    em_line(c, "{");
    if (c->f->nparams == 0)
        em_line(c, "    (void)%s;", args);
    if (c->f->nresults == 0)
        em_line(c, "    (void)%s;", res);
}

/* The workspace that the calls of a function which allocate their own (NAME, NAME_call and
 * their dims forms) leave for the next, in the C of a library built ahead of time: its size in
 * the block's first 64 bytes, the workspace after them. Allocated on every call, a workspace of
 * tens of megabytes (ResNet-18 at batch 16: 77 MB) was faulted in page by page at each: 585 ms
 * a call against 345 with NAME_call_ws. Under GNU C a call takes the kept block (an atomic
 * exchange: a call that finds none, or one too small, allocates its own) and leaves its own
 * (freeing the one it displaces); the library frees it when unloaded. Elsewhere, each call
 * allocates and frees. */
static void kept_workspace(ctx *c)
{
    em_line(c, "/* the workspace of %s's last call, kept for the next */", c->f->name);
    em_line(c, "static unsigned char *nest_kept_%s;", c->f->name);
    em_line(c, "#ifdef __GNUC__");
    em_line(c, "__attribute__((destructor)) static void nest_kept_%s_free(void)", c->f->name);
    em_line(c, "{");
    em_line(c, "    free(nest_kept_%s);", c->f->name);
    em_line(c, "}");
    em_line(c, "#endif");
    em_line(c, "%s", "");
}

/* The body of a wrapper that calls NAME_impl with the argument text `args` (ending with ws
 * when the function has a workspace: ws_bytes, the C of its size, which it allocates, or in
 * the C of a library takes from kept_workspace). */
static void impl_call(ctx *c, const char *ws_bytes, const char *args)
{
    const char *n = c->f->name;
    if (ws_bytes && c->mode == EMIT_AOT) {
        em_line(c, "    const size_t nest_need = %s;", ws_bytes);
        em_line(c, "    unsigned char *nest_block = NULL, *ws;");
        em_line(c, "    int rc;");
        em_line(c, "#ifdef __GNUC__");
        em_line(c, "    nest_block = __atomic_exchange_n(&nest_kept_%s, NULL, __ATOMIC_ACQ_REL);", n);
        em_line(c, "    if (nest_block && *(size_t *)nest_block < nest_need) {");
        em_line(c, "        free(nest_block);");
        em_line(c, "        nest_block = NULL;");
        em_line(c, "    }");
        em_line(c, "#endif");
        em_line(c, "    if (!nest_block) {");
        em_line(c, "        if (nest_need > SIZE_MAX - 128 || !(nest_block = malloc(nest_need + 128)))");
        em_line(c, "            return 1;");
        em_line(c, "        *(size_t *)nest_block = nest_need;");
        em_line(c, "    }");
        em_line(c, "    /* past the size, on a cache line (malloc's large blocks lie 16 bytes past one) */");
        em_line(c, "    ws = nest_block + 128 - ((size_t)nest_block & 63);");
        em_line(c, "    rc = %s_impl(%s);", n, args ? args : "");
        em_line(c, "#ifdef __GNUC__");
        em_line(c, "    nest_block = __atomic_exchange_n(&nest_kept_%s, nest_block, __ATOMIC_ACQ_REL);", n);
        em_line(c, "#endif");
        em_line(c, "    free(nest_block);");
        em_line(c, "    return rc;");
    } else if (ws_bytes) {
        em_line(c, "    unsigned char *ws = malloc(%s);", ws_bytes);
        em_line(c, "    int rc;");
        em_line(c, "    if (!ws)");
        em_line(c, "        return 1;");
        em_line(c, "    rc = %s_impl(%s);", n, args ? args : "");
        em_line(c, "    free(ws);");
        em_line(c, "    return rc;");
    } else {
        em_line(c, "    return %s_impl(%s);", c->f->name, args ? args : "");
    }
}

bool emit_const_is_data(int64_t count, int etype)
{
    return count * (int64_t)nest_type_size((nest_type)etype) > EMIT_DATA_BYTES;
}

void emit_table(buf *b, const char *name, int etype, const void *data, int64_t count)
{
    buf_printf(b, "static const %s %s[%lld] = {", em_ctype(etype), name,
               (long long)(count > 0 ? count : 1));
    for (int64_t i = 0; i < count; i++) {
        buf_puts(b, i % 8 ? ", " : (i ? ",\n    " : "\n    "));
        fx e = {.etype = etype};
        switch (etype) {
        case NEST_F32: e.imm.f = ((const float *)data)[i]; break;
        case NEST_F64: e.imm.f = ((const double *)data)[i]; break;
        case NEST_I32: e.imm.i = ((const int32_t *)data)[i]; break;
        case NEST_I64: e.imm.i = ((const int64_t *)data)[i]; break;
        default: e.imm.i = ((const uint8_t *)data)[i]; break;
        }
        em_literal(b, etype, &e);
    }
    buf_puts(b, count > 0 ? "\n};\n" : "0};\n");
}

/* ---- parts ---- */

void em_ref(ctx *c, int32_t b)
{
    c->refd[b] = true;
    pbuf_kind k = c->p->bufs[b].kind;
    if (c->partref[b] == c->part || k == BUF_TEMP || (k == BUF_CONST && c->mode != EMIT_JIT))
        return; /* temporaries are the part's own; the AOT file's constants are global */
    int32_t *v = grow_array(c->partbufs, &c->cappartbufs, c->npartbufs, sizeof *v);
    if (!v) {
        c->b->failed = true;
        return;
    }
    c->partbufs = v;
    c->partbufs[c->npartbufs++] = b;
    c->partref[b] = c->part;
}

void em_ref_ws(ctx *c)
{
    c->ws_refd = true;
    c->part_ws = true;
}

void em_ws_pointer(ctx *c, int32_t b, const char *name)
{
    const pbuf *pb = &c->p->bufs[b];
    const char *T = em_ctype(pb->etype);
    if (pb->offset < 0) /* symbolic: placed at run time (emit_dims.c) */
        em_line(c, "%s *restrict %s = (%s *)(ws + nest_off%d);", T, name, T, (int)b);
    else
        em_line(c, "%s *restrict %s = (%s *)(ws + %lld);", T, name, T, (long long)pb->offset);
    em_ref_ws(c);
}

/* Parameters, then results, then state tensors, then constants, each in order. */
static const plan *sort_plan;
static int abi_rank(pbuf_kind k)
{
    return k == BUF_PARAM ? 0 : k == BUF_RESULT ? 1 : k == BUF_STATE ? 2 : 3;
}
static int by_abi(const void *a, const void *b)
{
    const pbuf *x = &sort_plan->bufs[*(const int32_t *)a], *y = &sort_plan->bufs[*(const int32_t *)b];
    if (x->kind != y->kind)
        return abi_rank(x->kind) - abi_rank(y->kind);
    return (x->index > y->index) - (x->index < y->index);
}

/* Whether the function writes buffer b: a result, or a state tensor it assigns. */
static bool part_writes(const ctx *c, const pbuf *pb)
{
    int i = pb->kind == BUF_STATE ? st_pos(c, pb->index) : -1;
    return pb->kind == BUF_RESULT || (i >= 0 && c->st_written[i]);
}

/* The loop nests emitted into `nests` since the last part become a function of their own,
 * nest_NAME_partK, taking the arrays they name; `calls` gets the call. Compilers optimize a
 * function in time that grows faster than its size: parts keep a large graph's C compiling in
 * time proportional to it. */
static void flush_part(ctx *c, buf *defs, buf *calls, buf *nests)
{
    const plan *p = c->p;
    sort_plan = p;
    *c->helpers |= 1ull << H_NOINLINE;
    if (c->npartbufs > 1)
        qsort(c->partbufs, c->npartbufs, sizeof *c->partbufs, by_abi);
    buf_printf(defs, "static NEST_NOINLINE void nest_%s_part%d(", p->f->name, c->part);
    buf_printf(calls, "    nest_%s_part%d(", p->f->name, c->part);
    for (size_t i = 0; i < c->npartbufs; i++) {
        int32_t b = c->partbufs[i];
        const pbuf *pb = &p->bufs[b];
        buf_printf(defs, "%s%s%s *restrict %s", i ? ", " : "", part_writes(c, pb) ? "" : "const ",
                   em_ctype(pb->etype), c->bufname[b]);
        buf_printf(calls, "%s%s", i ? ", " : "", c->bufname[b]);
    }
    if (c->part_ws) {
        buf_printf(defs, "%sunsigned char *restrict ws", c->npartbufs ? ", " : "");
        buf_printf(calls, "%sws", c->npartbufs ? ", " : "");
    }
    if (!c->npartbufs && !c->part_ws)
        buf_puts(defs, "void");
    buf_puts(defs, ")\n{\n");
    buf_write(defs, nests->data ? nests->data : "", nests->len);
    buf_puts(defs, "}\n\n");
    buf_puts(calls, ");\n");
    nests->failed |= defs->failed | calls->failed;
    nests->len = 0;
    c->part++;
    c->npartbufs = 0;
    c->part_ws = false;
}

/* The function's loop nests, in order: into `direct` when they are few, else into parts (their
 * definitions into `defs`, the calls into `direct`). */
static void emit_nests(ctx *c, buf *defs, buf *direct)
{
    const plan *p = c->p;
    buf nests = {0}, calls = {0}, *out = c->b;
    c->part = 1;
    c->b = &nests;
    for (int32_t k = 0; k < p->nnests; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead || (ne->rowed && ne->group != k))
            continue;
        if (ne->rowed) {
            em_group(c, k);
        } else if (!em_nest_runs(ne)) {
            c->ne = ne;
            em_nest_comment(c);
            em_line(c, "/* (no elements) */");
        } else {
            em_nest(c, k);
        }
        if (nests.len >= EMIT_PART_BYTES && !c->dimname) /* parts would need the dims */
            flush_part(c, defs, &calls, &nests);
    }
    if (c->part > 1 && nests.len > 0)
        flush_part(c, defs, &calls, &nests);
    buf *from = c->part > 1 ? &calls : &nests;
    buf_write(direct, from->data ? from->data : "", from->len);
    direct->failed |= nests.failed | calls.failed;
    buf_reset(&nests);
    buf_reset(&calls);
    c->b = out;
}

/* The entry points of a function with symbolic dims (its sizes first, checked before anything
 * is written): NAME(int64_t N, ..., arrays), NAME_call_dims, NAME_workspace_size_dims and
 * NAME_call_ws_dims; with state, each but the workspace's size takes the state object first
 * (NAME(M_state *st, int64_t N, ...), NAME_call_dims(st, dims, args, results)). */
static void dims_entries(ctx *c, const char **abi, bool ws)
{
    const nest_function *f = c->f;
    const char *name = f->name;
    bool state = c->nst > 0;
    char pre[IR_MAX_NAME + 32] = ""; /* "M_state *st, " */
    if (state)
        snprintf(pre, sizeof pre, "%s_state *%s, ", f->module->name, c->stn);
    buf ca = {0};
    em_line(c, "size_t %s_workspace_size_dims(const int64_t *dims)", name);
    em_line(c, "{");
    em_line(c, "    int64_t n = nest_%s_dims(dims);", name);
    em_line(c, "    return n < 0 ? 0 : (size_t)n;");
    em_line(c, "}");
    em_line(c, "%s", "");
    call_args(c, &ca, ws ? "(unsigned char *)workspace" : NULL, "args", "results", state, false);
    char *a = em_finish(c, &ca);
    em_line(c, "int %s_call_ws_dims(%sconst int64_t *dims, void *const *args, "
               "void *const *results, void *workspace)",
            name, pre);
    open_wrapper(c, "args", "results");
    if (!ws)
        em_line(c, "    (void)workspace;");
    em_line(c, "    if (nest_%s_dims(dims) < 0)", name);
    em_line(c, "        return 1;");
    em_line(c, "    return %s_impl(%s);", name, a ? a : "");
    em_line(c, "}");
    em_line(c, "%s", "");
    free(a);
    /* NAME(sizes, arrays) and NAME_call_dims(dims, args, results): they allocate the workspace */
    for (int by_arrays = 0; by_arrays < 2; by_arrays++) {
        buf pl = {0};
        const char **save = c->bufname;
        c->bufname = abi;
        if (by_arrays)
            call_args(c, &pl, ws ? "ws" : NULL, "args", "results", state, false);
        else
            param_list(c, &pl, true, false, false, state);
        char *ps = em_finish(c, &pl);
        if (by_arrays) {
            em_line(c, "int %s_call_dims(%sconst int64_t *dims, void *const *args, "
                       "void *const *results)",
                    name, pre);
        } else {
            em_line(c, "int %s(%s)", name, ps ? ps : "");
            buf dv = {0}; /* "N, M" */
            for (int i = 0; i < c->ndims; i++)
                buf_printf(&dv, "%s%s", i ? ", " : "", c->dimname[c->dimabi[i]]);
            char *dvs = em_finish(c, &dv);
            buf cl = {0};
            buf_printf(&cl, "%s", dvs ? dvs : "");
            for (int32_t i = 0; i < f->nparams + f->nresults; i++)
                buf_printf(&cl, ", %s", abi[i]);
            for (int i = 0; i < c->nst; i++)
                buf_printf(&cl, ", (%s%s *)%s->t[%d]", c->st_written[i] ? "" : "const ",
                           em_ctype(f->module->states[c->st_index[i]].etype), c->stn,
                           c->st_index[i]);
            if (ws)
                buf_puts(&cl, ", ws");
            free(ps);
            ps = em_finish(c, &cl);
            em_line(c, "{");
            em_line(c, "    const int64_t dims[%d] = {%s};", c->ndims, dvs ? dvs : "0");
            free(dvs);
        }
        c->bufname = save;
        if (by_arrays)
            open_wrapper(c, "args", "results");
        em_line(c, "    int64_t n = nest_%s_dims(dims);", name);
        em_line(c, "    if (n < 0)");
        em_line(c, "        return 1;");
        impl_call(c, ws ? "n > 0 ? (size_t)n : 1" : NULL, ps);
        em_line(c, "}");
        em_line(c, "%s", "");
        free(ps);
    }
}

void emit_function(buf *b, const plan *p, emit_mode mode, uint64_t *helpers)
{
    const nest_function *f = p->f;
    ctx c = {.b = b, .p = p, .mp = (plan *)p, .f = f, .mode = mode, .helpers = helpers};
    const char **abi = NULL;
    bool *named = NULL; /* per state tensor used: whether a buffer holds it */
    c.bufname = calloc((size_t)p->nbufs + 1, sizeof *c.bufname);
    c.refd = calloc((size_t)p->nbufs + 1, sizeof *c.refd);
    c.touched = calloc((size_t)p->nbufs + 1, sizeof *c.touched);
    c.partref = calloc((size_t)p->nbufs + 1, sizeof *c.partref);
    c.node_in = calloc((size_t)f->nnodes + 1, sizeof *c.node_in);
    if (!c.bufname || !c.refd || !c.touched || !c.partref || !c.node_in ||
        !namer_init(&c.nm, f)) {
        free(c.bufname);
        free(c.refd);
        free(c.touched);
        free(c.partref);
        free(c.node_in);
        namer_free(&c.nm);
        b->failed = true;
        return;
    }
    /* the emitter's own names first, then the graph's */
    reserve_names(&c);
    c.stn = strcmp(f->name, "st") ? "st" : "nest_st";
    if (!used_states(&c)) {
        b->failed = true;
        goto out;
    }
    /* buffers of parameters, results and state: their C names, in ABI order (bufname is indexed
     * by plan buffer; param i and result i are looked up below) */
    if (ir_is_symbolic(f) && !em_dims_init(&c)) {
        b->failed = true;
        goto out;
    }
    abi = abi_names(&c);
    if (!abi) {
        b->failed = true;
        goto out;
    }
    named = calloc((size_t)c.nst + 1, sizeof *named);
    if (!named) {
        b->failed = true;
        goto out;
    }
    for (int32_t bi = 0; bi < p->nbufs; bi++) {
        const pbuf *pb = &p->bufs[bi];
        int i = pb->kind == BUF_STATE ? st_pos(&c, pb->index) : -1;
        if (pb->kind == BUF_PARAM)
            c.bufname[bi] = abi[pb->index];
        else if (pb->kind == BUF_RESULT)
            c.bufname[bi] = abi[f->nparams + pb->index];
        else if (i >= 0)
            c.bufname[bi] = abi[f->nparams + f->nresults + i];
        if (i >= 0)
            named[i] = true;
    }
    /* denormals: flushed when asked, or by default in a function that assigns state */
    c.flush = p->opts->flush_denormals > 0;
    for (int i = 0; p->opts->flush_denormals < 0 && i < c.nst; i++)
        c.flush |= c.st_written[i];
    if (c.flush)
        *c.helpers |= 1ull << H_FLUSH;
    const char *csr = c.flush ? em_unique(&c.fn, "nest_csr") : NULL;
    emit_constants(&c);
    bool ws = c.dimname ? emit_dims_have_ws(p) : p->ws_size > 0, state = c.nst > 0;
    const char *sp = state ? f->module->name : NULL;
    int folds = 0;
    for (int32_t k = 0; k < p->nnests; k++)
        for (int i = 0; !p->nests[k].dead && i < p->nests[k].nouts; i++)
            folds += p->nests[k].outs[i].reduce >= 0;
    c.fold_calls = folds > EMIT_FOLD_CALLS;
    /* the JIT's constants: locals of the function, named before the nests use them */
    buf consts = {0}, defs = {0}, direct = {0};
    c.b = &consts;
    c.indent = 1;
    for (int32_t bi = 0; bi < p->nbufs; bi++) {
        const pbuf *pb = &p->bufs[bi];
        if (pb->kind == BUF_CONST && mode == EMIT_JIT) {
            const char *name = em_unique(&c.fn, namer_name(&c.nm, pb->node));
            em_line(&c, "const %s *restrict %s = (const %s *)nest_consts_%s[%d];", em_ctype(pb->etype),
                 name, em_ctype(pb->etype), f->name, pb->index);
            c.bufname[bi] = name;
        }
    }
    if (c.dimname)
        em_dims_offsets(&c);
    c.b = &direct;
    emit_nests(&c, &defs, &direct);
    c.b = b;
    c.indent = 0;
    b->failed |= consts.failed | defs.failed | direct.failed;
    em_window_kernels(&c); /* before the parts that call them */
    buf_write(b, defs.data ? defs.data : "", defs.len);
    if (c.dimname)
        em_dims_check(&c);

    /* the body is the static NAME_impl, which every entry point calls: a call to the exported
     * NAME from inside a shared object could reach another library's function of that name
     * (the C library's random or time, or a second nest library loaded before) */
    const char **save = c.bufname;
    c.bufname = abi;
    buf sig = {0};
    param_list(&c, &sig, true, ws, state, false);
    char *sigs = em_finish(&c, &sig);
    c.bufname = save;
    signature_comment(&c);
    em_line(&c, "static int %s_impl(%s)", f->name, sigs ? sigs : "");
    free(sigs);
    em_line(&c, "{");
    c.indent++;
    buf_write(b, consts.data ? consts.data : "", consts.len);
    if (csr)
        em_line(&c, "const uint64_t %s = nest_flush_enter();", csr);
    buf_write(b, direct.data ? direct.data : "", direct.len);
    buf_reset(&consts);
    buf_reset(&defs);
    buf_reset(&direct);
    /* the names the body never wrote (unread parameters, loops without iterations, results
     * of nothing) are cast away, so that compilers see them used */
    for (int32_t bi = 0; bi < p->nbufs; bi++) {
        const pbuf *pb = &p->bufs[bi];
        if ((pb->kind == BUF_PARAM || pb->kind == BUF_RESULT || pb->kind == BUF_CONST ||
             pb->kind == BUF_STATE) &&
            !c.refd[bi] && c.bufname[bi])
            em_line(&c, "(void)%s;", c.bufname[bi]);
    }
    for (int i = 0; i < c.nst; i++) /* a state tensor with no buffer (assigned nothing) */
        if (!named[i])
            em_line(&c, "(void)%s;", abi[f->nparams + f->nresults + i]);
    if (ws && !c.ws_refd)
        em_line(&c, "(void)ws;");
    if (csr)
        em_line(&c, "nest_flush_leave(%s);", csr);
    em_line(&c, "return 0;");
    c.indent--;
    em_line(&c, "}");
    em_line(&c, "%s", "");
    if (ws && mode == EMIT_AOT)
        kept_workspace(&c);
    if (c.dimname) {
        dims_entries(&c, abi, ws);
        goto out;
    }

    buf ca = {0};
    if (ws) {
        em_line(&c, "size_t %s_workspace_size(void)", f->name);
        em_line(&c, "{");
        em_line(&c, "    return %lld;", (long long)p->ws_size);
        em_line(&c, "}");
        em_line(&c, "%s", "");
        call_args(&c, &ca, "(unsigned char *)workspace", "args", "results", state, false);
        char *a = em_finish(&c, &ca);
        if (state)
            em_line(&c, "int %s_call_ws(%s_state *%s, void *const *args, void *const *results, "
                        "void *workspace)",
                    f->name, sp, c.stn);
        else
            em_line(&c, "int %s_call_ws(void *const *args, void *const *results, void *workspace)",
                    f->name);
        open_wrapper(&c, "args", "results");
        em_line(&c, "    return %s_impl(%s);", f->name, a ? a : "");
        em_line(&c, "}");
        em_line(&c, "%s", "");
        free(a);
    }
    /* NAME by its arrays (and the state's tensors) */
    buf pl = {0};
    c.bufname = abi;
    param_list(&c, &pl, true, false, false, state);
    c.bufname = save;
    char *ps = em_finish(&c, &pl);
    em_line(&c, "int %s(%s)", f->name, ps ? ps : "");
    free(ps);
    em_line(&c, "{");
    buf cl = {0};
    for (int32_t i = 0; i < f->nparams + f->nresults; i++)
        buf_printf(&cl, "%s%s", i ? ", " : "", abi[i]);
    for (int i = 0; i < c.nst; i++)
        buf_printf(&cl, "%s(%s%s *)%s->t[%d]", f->nparams + f->nresults + i ? ", " : "",
                   c.st_written[i] ? "" : "const ",
                   em_ctype(f->module->states[c.st_index[i]].etype), c.stn, c.st_index[i]);
    if (ws)
        buf_printf(&cl, "%sws", f->nparams + f->nresults + c.nst ? ", " : "");
    char *cls = em_finish(&c, &cl);
    char wsb[32];
    snprintf(wsb, sizeof wsb, "%lld", (long long)p->ws_size);
    impl_call(&c, ws ? wsb : NULL, cls);
    free(cls);
    em_line(&c, "}");
    em_line(&c, "%s", "");
    /* NAME_call calls the impl too (its arrays must not hide a function named args or
     * results) */
    const char *an = strcmp(f->name, "args") ? "args" : "nest_args";
    const char *rn = strcmp(f->name, "results") ? "results" : "nest_results";
    call_args(&c, &ca, ws ? "ws" : NULL, an, rn, state, false);
    char *a = em_finish(&c, &ca);
    if (state)
        em_line(&c, "int %s_call(%s_state *%s, void *const *%s, void *const *%s)", f->name, sp,
                c.stn, an, rn);
    else
        em_line(&c, "int %s_call(void *const *%s, void *const *%s)", f->name, an, rn);
    open_wrapper(&c, an, rn);
    impl_call(&c, ws ? wsb : NULL, a);
    em_line(&c, "}");
    em_line(&c, "%s", "");
    free(a);
out:
    /* out of memory in a scope of names or in an expression made during emission */
    if (c.fn.oom || c.mp->status != NEST_OK)
        b->failed = true;
    free(abi);
    free(named);
    free(c.st_index);
    free(c.st_written);
    free(c.hoist);
    free(c.bufname);
    free(c.refd);
    free(c.decl);
    free(c.touched);
    free(c.partref);
    free(c.partbufs);
    free(c.node_in);
    em_id_ints_free(&c.hoisted);
    em_id_ints_free(&c.refbody);
    em_id_ints_free(&c.refidx);
    em_dims_free(&c);
    em_names_free(&c.fn);
    namer_free(&c.nm);
}

/* The header's comment on the state tensors a function uses. */
static void state_comment(ctx *c)
{
    buf t = {0};
    for (int i = 0; i < c->nst; i++)
        buf_printf(&t, "%s%s%s", i ? ", " : "", c->f->module->states[c->st_index[i]].name,
                   c->st_written[i] ? " (assigned)" : "");
    char *ts = em_finish(c, &t);
    em_line(c, "/* with the state of %s: %s */", c->f->module->name, ts ? ts : "");
    free(ts);
}

void emit_header_decls(buf *b, const plan *p)
{
    const nest_function *f = p->f;
    ctx c = {.b = b, .p = p, .f = f};
    if (!namer_init(&c.nm, f)) {
        namer_free(&c.nm);
        b->failed = true;
        return;
    }
    reserve_names(&c);
    c.stn = strcmp(f->name, "st") ? "st" : "nest_st";
    const char **names_ = NULL;
    if (!used_states(&c) || !(names_ = abi_names(&c))) {
        namer_free(&c.nm);
        em_names_free(&c.fn);
        free(c.st_index);
        free(c.st_written);
        b->failed = true;
        return;
    }
    if (ir_is_symbolic(f)) {
        if (!em_dims_init(&c)) {
            b->failed = true;
        } else {
            buf dn = {0};
            for (int i = 0; i < c.ndims; i++)
                buf_printf(&dn, "%s%s", i ? ", " : "", c.dimname[c.dimabi[i]]);
            char *dns = em_finish(&c, &dn);
            c.bufname = names_;
            signature_comment(&c);
            em_line(&c, "/* symbolic dims, in this order: %s */", dns ? dns : "");
            free(dns);
            bool state = c.nst > 0;
            char pre[IR_MAX_NAME + 32] = "";
            if (state) {
                snprintf(pre, sizeof pre, "%s_state *%s, ", f->module->name, c.stn);
                state_comment(&c);
            }
            buf pl = {0};
            param_list(&c, &pl, false, false, false, state);
            char *ps = em_finish(&c, &pl);
            em_line(&c, "int %s(%s);", f->name, ps ? ps : "");
            free(ps);
            em_line(&c, "int %s_call_dims(%sconst int64_t *dims, void *const *args, "
                        "void *const *results);", f->name, pre);
            em_line(&c, "size_t %s_workspace_size_dims(const int64_t *dims);", f->name);
            em_line(&c, "int %s_call_ws_dims(%sconst int64_t *dims, void *const *args, "
                        "void *const *results, void *workspace);", f->name, pre);
            em_line(&c, "%s", "");
        }
        em_dims_free(&c);
        goto out;
    }
    bool state = c.nst > 0;
    const char *sp = state ? f->module->name : "";
    char pre[IR_MAX_NAME + 32] = "";
    if (state)
        snprintf(pre, sizeof pre, "%s_state *%s, ", sp, c.stn);
    c.bufname = names_;
    signature_comment(&c);
    if (state)
        state_comment(&c);
    buf pl = {0};
    param_list(&c, &pl, false, false, false, state);
    char *ps = em_finish(&c, &pl);
    em_line(&c, "int %s(%s);", f->name, ps ? ps : "");
    free(ps);
    em_line(&c, "int %s_call(%svoid *const *args, void *const *results);", f->name, pre);
    if (p->ws_size > 0) {
        em_line(&c, "size_t %s_workspace_size(void); /* %lld bytes */", f->name, (long long)p->ws_size);
        em_line(&c, "int %s_call_ws(%svoid *const *args, void *const *results, void *workspace);",
                f->name, pre);
    }
    em_line(&c, "%s", "");
out:
    if (c.fn.oom)
        b->failed = true;
    free(names_);
    free(c.st_index);
    free(c.st_written);
    em_names_free(&c.fn);
    namer_free(&c.nm);
}
