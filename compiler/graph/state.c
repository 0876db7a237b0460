/*
 * state.c - modules and their state. A module holds functions and the state tensors they share:
 * variables (trainable) and persistent tensors, each with an initializer. A function reads a
 * state tensor through one K_STATE node (its value at the call's entry) and assigns it at most
 * once (the new value, taken when the call returns).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int ir_module_error(nest_module *m, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_verror(&m->errmsg, &m->status, status, fmt, ap);
    va_end(ap);
    m->line = m->col = 0;
    return m->status;
}

void ir_module_take_error(nest_module *m)
{
    for (int i = 0; i < m->nfns; i++)
        if (m->fns[i]->status) {
            ir_module_error(m, m->fns[i]->status, "%s",
                            m->fns[i]->errmsg ? m->fns[i]->errmsg : nest_status_str(m->fns[i]->status));
            return;
        }
}

/* ---- modules ---- */

bool ir_module_add(nest_module *m, nest_function *f)
{
    nest_function **p = grow_array(m->fns, &m->capfns, (size_t)m->nfns, sizeof *p);
    if (!p)
        return false;
    m->fns = p;
    f->module = m;
    m->fns[m->nfns++] = f;
    return true;
}

/* Checks a name with the function rules of ir.c, reporting on m. */
static int check_name(nest_module *m, const char *what, const char *name)
{
    nest_function tmp = {0};
    if (ir_check_name(&tmp, what, name) == NEST_OK)
        return NEST_OK;
    ir_module_error(m, tmp.status, "%s", tmp.errmsg ? tmp.errmsg : nest_status_str(tmp.status));
    free(tmp.errmsg);
    return m->status;
}

nest_module *nest_module_new(const char *name)
{
    nest_module *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (check_name(m, "module", name) == NEST_OK && !(m->name = strdup(name)))
        ir_module_error(m, NEST_ERR_NOMEM, "out of memory");
    return m;
}

const char *nest_module_name(const nest_module *m) { return m && m->name ? m->name : ""; }

int nest_module_set_name(nest_module *m, const char *name)
{
    if (!m)
        return NEST_ERR_ARG;
    if (check_name(m, "module", name))
        return m->status;
    char *s = strdup(name);
    if (!s)
        return ir_module_error(m, NEST_ERR_NOMEM, "out of memory");
    free(m->name);
    m->name = s;
    return NEST_OK;
}

char *ir_module_name_of_file(const char *filename)
{
    const char *base = filename ? strrchr(filename, '/') : NULL;
    base = base ? base + 1 : filename ? filename : "";
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        n = (size_t)(dot - base);
    if (n > IR_MAX_NAME - 2)
        n = IR_MAX_NAME - 2;
    char *s = malloc(n + 3);
    if (!s)
        return NULL;
    size_t k = 0;
    /* a digit first, or a reserved prefix (_X, __, nest_), gets "m_" in front */
    bool prefix = n == 0 || (base[0] >= '0' && base[0] <= '9') || base[0] == '_' ||
                  strncmp(base, "nest_", 5) == 0;
    if (prefix) {
        s[k++] = 'm';
        s[k++] = '_';
    }
    for (size_t i = 0; i < n; i++) {
        char c = base[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        s[k++] = ok ? c : '_';
    }
    s[k] = '\0';
    if (is_c_keyword(s)) { /* "int.nest": the name "int_" */
        s[k++] = '_';
        s[k] = '\0';
    }
    return s;
}

/* ---- state declarations ---- */

/* The index's slot for the name: the state that has it, or an empty slot (-1). */
static int32_t *state_slot(const nest_module *m, const char *name, size_t len)
{
    size_t mask = m->capindex - 1;
    for (size_t i = hash_bytes(name, len) & mask;; i = (i + 1) & mask) {
        int32_t v = m->state_index[i];
        if (v < 0 || (strncmp(m->states[v].name, name, len) == 0 && m->states[v].name[len] == 0))
            return &m->state_index[i];
    }
}

int32_t ir_state_find(const nest_module *m, const char *name, size_t len)
{
    return m && m->capindex ? *state_slot(m, name, len) : -1;
}

/* Enters state s (the last declared) into the index of names, grown to at most half full. */
static bool index_state(nest_module *m, int32_t s)
{
    if (((size_t)s + 1) * 2 > m->capindex) {
        size_t cap = m->capindex ? m->capindex * 2 : 64;
        int32_t *t = arena_array(&m->arena, cap, sizeof *t);
        if (!t)
            return false;
        for (size_t i = 0; i < cap; i++)
            t[i] = -1;
        m->state_index = t;
        m->capindex = cap;
        for (int32_t i = 0; i < s; i++)
            *state_slot(m, m->states[i].name, strlen(m->states[i].name)) = i;
    }
    *state_slot(m, m->states[s].name, strlen(m->states[s].name)) = s;
    return true;
}

/* Whether the constant v fits element type t (floats: rounded, but not out of range; integers
 * and bool: exactly). */
static bool constant_fits(int t, double v)
{
    switch (t) {
    case NEST_F32: return !(isfinite(v) && isinf((float)v));
    case NEST_F64: return true;
    case NEST_I32: return v >= -0x1p31 && v < 0x1p31 && v == floor(v);
    case NEST_I64: return v >= -0x1p63 && v < 0x1p63 && v == floor(v);
    case NEST_BOOL: return v == 0 || v == 1;
    }
    return false;
}

/* Declares a state tensor with initializer init, or with the elements at data when init is
 * NEST_INIT_DATA. */
static int32_t declare_state(nest_module *m, const char *name, bool trainable, nest_type type,
                             int rank, const int64_t *shape, const nest_init *init,
                             const void *data)
{
    const char *what = trainable ? "variable" : "persistent tensor";
    if (!m)
        return -1;
    if (m->status == NEST_OK && !m->name) /* the module's own name was invalid */
        return -1;
    if (check_name(m, what, name))
        return -1;
    if (ir_state_find(m, name, strlen(name)) >= 0) {
        ir_module_error(m, NEST_ERR_ARG, "module %s already has a state tensor %s", m->name, name);
        return -1;
    }
    for (int i = 0; i < m->nfns; i++)
        if (ir_find_name(m->fns[i], name) >= 0) {
            ir_module_error(m, NEST_ERR_ARG, "%s %s: function %s already uses the name", what,
                            name, m->fns[i]->name);
            return -1;
        }
    if ((int)type < 0 || type > NEST_BOOL) {
        ir_module_error(m, NEST_ERR_ARG, "%s %s: invalid element type %d", what, name, (int)type);
        return -1;
    }
    /* the shape rules of parameters (rank, dims, size), checked by the IR's own code */
    nest_function tmp = {0};
    tmp.name = "state";
    ir_attrs at = {.type = (int)type, .rank = rank, .shape = shape, .name = "x"};
    int32_t v = ir_build(&tmp, OP_PARAMETER, 0, NULL, &at);
    int64_t count = v >= 0 ? ir_count(&tmp.nodes[v]) : 0;
    int st = tmp.status;
    if (st)
        ir_module_error(m, st, "%s %s: %s", what, name, tmp.errmsg ? tmp.errmsg : nest_status_str(st));
    arena_free(&tmp.arena);
    free(tmp.nodes);
    free(tmp.names);
    free(tmp.errmsg);
    if (st)
        return -1;
    nest_init in = init ? *init : (nest_init){NEST_INIT_ZEROS, 0, 0, 0};
    switch (in.kind) {
    case NEST_INIT_ZEROS:
        in.a = in.b = 0;
        in.seed = 0;
        break;
    case NEST_INIT_CONSTANT:
        if (!constant_fits(type, in.a)) {
            ir_module_error(m, NEST_ERR_TYPE, "%s %s: the initial value %g does not fit %s", what,
                            name, in.a, nest_type_name(type));
            return -1;
        }
        in.b = 0;
        in.seed = 0;
        break;
    case NEST_INIT_UNIFORM:
    case NEST_INIT_NORMAL:
        if (!ir_is_float(type)) {
            ir_module_error(m, NEST_ERR_TYPE, "%s %s: %s initializers take f32 or f64, not %s",
                            what, name, in.kind == NEST_INIT_UNIFORM ? "uniform" : "normal",
                            nest_type_name(type));
            return -1;
        }
        if (in.seed >= (uint64_t)1 << 63) {
            ir_module_error(m, NEST_ERR_ARG, "%s %s: the seed must be below 2^63", what, name);
            return -1;
        }
        if (!(in.a - in.a == 0) || !(in.b - in.b == 0) ||
            (in.kind == NEST_INIT_UNIFORM ? !(in.a <= in.b) : !(in.b >= 0))) {
            ir_module_error(m, NEST_ERR_ARG, "%s %s: %s(%g, %g) is not a valid distribution%s",
                            what, name, in.kind == NEST_INIT_UNIFORM ? "uniform" : "normal",
                            in.a, in.b,
                            in.kind == NEST_INIT_UNIFORM ? " (finite, low <= high)"
                                                          : " (finite, std >= 0)");
            return -1;
        }
        break;
    case NEST_INIT_DATA:
        if (!data && count > 0) {
            ir_module_error(m, NEST_ERR_ARG,
                            "%s %s: an array initializer is given by nest_%s_data, with its data",
                            what, name, trainable ? "variable" : "persistent");
            return -1;
        }
        for (int64_t i = 0; type == NEST_BOOL && i < count; i++)
            if (((const unsigned char *)data)[i] > 1) {
                ir_module_error(m, NEST_ERR_ARG,
                                "%s %s: element %lld of the initial value is byte %d, not a bool "
                                "(0 or 1)",
                                what, name, (long long)i, ((const unsigned char *)data)[i]);
                return -1;
            }
        in.a = in.b = 0;
        in.seed = 0;
        break;
    default:
        ir_module_error(m, NEST_ERR_ARG, "%s %s: invalid initializer kind %d", what, name,
                        (int)in.kind);
        return -1;
    }
    size_t bytes = (size_t)count * nest_type_size(type);
    void *copy = NULL;
    if (in.kind == NEST_INIT_DATA && bytes > 0) {
        if (!(copy = arena_alloc(&m->arena, bytes))) {
            ir_module_error(m, NEST_ERR_NOMEM, "out of memory");
            return -1;
        }
        memcpy(copy, data, bytes);
    }
    ir_state *s = arena_grow(&m->arena, m->states, (size_t)m->nstates, &m->capstates, sizeof *s);
    char *nm = arena_strdup(&m->arena, name);
    int64_t *sh = arena_array(&m->arena, (size_t)rank + 1, sizeof *sh);
    if (!s || !nm || !sh) {
        ir_module_error(m, NEST_ERR_NOMEM, "out of memory");
        return -1;
    }
    if (rank > 0)
        memcpy(sh, shape, (size_t)rank * sizeof *sh);
    m->states = s;
    s[m->nstates] = (ir_state){nm, (uint8_t)type, (uint8_t)rank, trainable, sh, count, in, copy, 0, 0};
    if (!index_state(m, m->nstates)) {
        ir_module_error(m, NEST_ERR_NOMEM, "out of memory");
        return -1;
    }
    return m->nstates++;
}

int32_t ir_state_declare(nest_module *m, const char *name, bool trainable, nest_type type,
                         int rank, const int64_t *shape, const nest_init *init)
{
    return declare_state(m, name, trainable, type, rank, shape, init, NULL);
}

int32_t ir_state_declare_data(nest_module *m, const char *name, bool trainable, nest_type type,
                              int rank, const int64_t *shape, const void *data)
{
    nest_init in = {NEST_INIT_DATA, 0, 0, 0};
    return declare_state(m, name, trainable, type, rank, shape, &in, data);
}

static int declare(nest_module *m, const char *name, bool trainable, nest_type type, int rank,
                   const int64_t *shape, const nest_init *init, const void *data)
{
    if (!m)
        return NEST_ERR_ARG;
    if (declare_state(m, name, trainable, type, rank, shape, init, data) >= 0)
        return NEST_OK;
    return m->status ? m->status : NEST_ERR_ARG;
}

int nest_variable(nest_module *m, const char *name, nest_type type, int rank,
                  const int64_t *shape, const nest_init *init)
{
    return declare(m, name, true, type, rank, shape, init, NULL);
}

int nest_persistent(nest_module *m, const char *name, nest_type type, int rank,
                    const int64_t *shape, const nest_init *init)
{
    return declare(m, name, false, type, rank, shape, init, NULL);
}

int nest_variable_data(nest_module *m, const char *name, nest_type type, int rank,
                       const int64_t *shape, const void *data)
{
    nest_init in = {NEST_INIT_DATA, 0, 0, 0};
    return declare(m, name, true, type, rank, shape, &in, data);
}

int nest_persistent_data(nest_module *m, const char *name, nest_type type, int rank,
                         const int64_t *shape, const void *data)
{
    nest_init in = {NEST_INIT_DATA, 0, 0, 0};
    return declare(m, name, false, type, rank, shape, &in, data);
}

/* ---- reads and assignments ---- */

/* The table of what f does with each state tensor, grown to hold state s: built by one scan of
 * the nodes and the assignments when it grows (a copy such as ir_bind's has both and no table
 * yet), then kept by ir_state_read (which makes every OP_STATE node), nest_assign and
 * ir_renumber. A read node dropped since (a builder's rollback) is checked for where the table
 * is read. */
static bool state_uses_fit(nest_function *f, int32_t s)
{
    if (s < f->capstateuses)
        return true;
    int32_t cap = f->module->nstates > s ? f->module->nstates : s + 1;
    if (cap < 2 * f->capstateuses) /* states declared between uses: the rescans stay few */
        cap = 2 * f->capstateuses;
    ir_state_use *t = malloc((size_t)cap * sizeof *t);
    if (!t)
        return false;
    for (int32_t i = 0; i < cap; i++)
        t[i] = (ir_state_use){-1, -1};
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        if (n->op == OP_STATE && n->a.state >= 0 && n->a.state < cap && t[n->a.state].read < 0)
            t[n->a.state].read = i;
    }
    for (int32_t i = 0; i < f->nassigns; i++)
        if (f->assigns[i].state < cap && t[f->assigns[i].state].assign < 0)
            t[f->assigns[i].state].assign = i;
    free(f->state_uses);
    f->state_uses = t;
    f->capstateuses = cap;
    return true;
}

int32_t ir_state_read(nest_function *f, int32_t s)
{
    if (!state_uses_fit(f, s))
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), NEST_NONE;
    int32_t c = f->state_uses[s].read;
    if (c >= 0 && c < f->nnodes && f->nodes[c].op == OP_STATE && f->nodes[c].a.state == s)
        return c;
    ir_attrs at = {.state = s};
    int32_t v = ir_build(f, OP_STATE, 0, NULL, &at);
    if (v >= 0) {
        f->nodes[v].name = f->module->states[s].name; /* the module outlives its functions */
        f->state_uses[s].read = v;
    }
    return v;
}

nest_value nest_read(nest_function *f, const char *name)
{
    if (!f)
        return NEST_NONE;
    if (!f->name)
        return ir_error(f, NEST_ERR_ARG, "the function has no valid name"), NEST_NONE;
    if (!name)
        return ir_error(f, NEST_ERR_ARG, "read: the name is NULL"), NEST_NONE;
    if (!f->module)
        return ir_error(f, NEST_ERR_ARG,
                        "read %.64s: function %s has no state (it is not in a module)", name,
                        f->name),
               NEST_NONE;
    int32_t s = ir_state_find(f->module, name, strlen(name));
    if (s < 0)
        return ir_error(f, NEST_ERR_ARG, "read: module %s has no state tensor '%.64s'",
                        f->module->name, name),
               NEST_NONE;
    return ir_state_read(f, s);
}

int nest_assign(nest_function *f, nest_value state, nest_value value)
{
    if (!f)
        return NEST_ERR_ARG;
    if (!f->name)
        return ir_error(f, NEST_ERR_ARG, "the function has no valid name");
    if (state < 0 || value < 0)
        return f->status ? f->status : ir_error(f, NEST_ERR_ARG, "assign: a value is NEST_NONE");
    if (state >= f->nnodes || value >= f->nnodes)
        return ir_error(f, NEST_ERR_ARG, "assign: %d is not a value of function %s",
                        state >= f->nnodes ? state : value, f->name);
    int32_t t = ir_resolve(f, state), v = ir_resolve(f, value);
    const ir_node *tn = &f->nodes[t], *vn = &f->nodes[v];
    if (tn->op != OP_STATE)
        return ir_error(f, NEST_ERR_ARG,
                        "assign: the target must be a state tensor (a value of nest_read), not "
                        "%s",
                        ir_ops[tn->op].name);
    const ir_state *s = &f->module->states[tn->a.state];
    if (vn->etype != s->etype || vn->rank != s->rank ||
        memcmp(vn->shape, s->shape, (size_t)s->rank * sizeof(int64_t)) != 0) {
        buf b = {0};
        ir_format_type(&b, f, v);
        char *ty = buf_finish(&b);
        buf c = {0};
        ir_format_type(&c, f, t);
        char *sy = buf_finish(&c);
        ir_error(f, NEST_ERR_TYPE, "assign(%s: %s, value: %s): the value's type differs",
                 s->name, sy ? sy : "?", ty ? ty : "?");
        free(ty);
        free(sy);
        return f->status;
    }
    if (!state_uses_fit(f, tn->a.state))
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    int32_t i = f->state_uses[tn->a.state].assign;
    if (i >= 0) {
        if (f->assigns[i].line)
            return ir_error(f, NEST_ERR_ARG,
                            "%s is assigned twice in function %s (first at line %d, column "
                            "%d); one call assigns a tensor once",
                            s->name, f->name, f->assigns[i].line, f->assigns[i].col);
        return ir_error(f, NEST_ERR_ARG,
                        "%s is assigned twice in function %s; one call assigns a tensor once",
                        s->name, f->name);
    }
    ir_assign *a = arena_grow(&f->arena, f->assigns, (size_t)f->nassigns, &f->capassigns, sizeof *a);
    if (!a)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    f->assigns = a;
    f->state_uses[tn->a.state].assign = f->nassigns;
    a[f->nassigns++] = (ir_assign){tn->a.state, v, 0, 0};
    return NEST_OK;
}

/* ---- questions about a function's state ---- */

bool ir_uses_state(const nest_function *f)
{
    if (!f->module || f->module->nstates == 0)
        return false;
    if (f->nassigns > 0)
        return true;
    /* a read counts when a result needs it */
    bool *live = calloc((size_t)f->nnodes + 1, sizeof *live);
    if (!live)
        return true; /* the cautious answer */
    for (int32_t i = 0; i < f->nresults; i++)
        live[f->results[i]] = true;
    bool uses = false;
    for (int32_t i = f->nnodes - 1; i >= 0 && !uses; i--) {
        const ir_node *n = &f->nodes[i];
        if (!live[i])
            continue;
        if (n->op == OP_STATE)
            uses = true;
        if (n->etype == IR_TUPLE)
            continue;
        for (int j = 0; j < n->nin; j++)
            live[ir_resolve(f, n->in[j])] = true;
    }
    free(live);
    return uses;
}

uint64_t ir_state_layout_hash(const nest_module *m)
{
    uint64_t h = 1469598103934665603u;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211u)
    for (int32_t i = 0; m && i < m->nstates; i++) {
        const ir_state *s = &m->states[i];
        for (const char *c = s->name; *c; c++)
            MIX((unsigned char)*c);
        MIX(0x100 + s->etype);
        MIX(0x200 + s->rank);
        for (int k = 0; k < s->rank; k++)
            MIX(s->shape[k]);
    }
#undef MIX
    return h;
}
