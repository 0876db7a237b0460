/*
 * emit_state.c - the C of a module's state: the NAME_state type, its tensors' table, and the
 * functions that make, describe, save and load a state (the code of state_code.h, printed once
 * per file), or their declarations in the header.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* compiler/emit/state_code.h as lines of text (the Makefile makes state_code.inc from it) */
static const char *const state_code[] = {
#include "state_code.inc"
};

static void print_double(buf *b, double v)
{
    if (isnan(v))
        buf_puts(b, "NAN");
    else if (isinf(v))
        buf_puts(b, v < 0 ? "-INFINITY" : "INFINITY");
    else {
        char s[40];
        format_float(s, sizeof s, NEST_F64, v);
        buf_puts(b, s);
        if (!strpbrk(s, ".en"))
            buf_puts(b, ".0");
    }
}

static const char *const init_names[] = {"zeros", "constant", "uniform", "normal", "array"};

/* The comment listing the state's tensors: name, type and shape, kind and initializer. */
static void state_comment(buf *b, const nest_module *m)
{
    int64_t bytes = 0;
    for (int32_t i = 0; i < m->nstates; i++)
        bytes += m->states[i].count * (int64_t)nest_type_size((nest_type)m->states[i].etype);
    buf_printf(b, "/* The state of module %s: %d tensor%s, %lld bytes, in this order (index: name,\n"
                  " * type and shape, kind, initial value):\n",
               m->name, m->nstates, m->nstates == 1 ? "" : "s", (long long)bytes);
    for (int32_t i = 0; i < m->nstates; i++) {
        const ir_state *s = &m->states[i];
        buf_printf(b, " *   %d: %s %s", i, s->name, nest_type_name((nest_type)s->etype));
        ir_format_shape(b, s->rank, s->shape);
        buf_printf(b, ", %s, %s", s->trainable ? "var" : "persistent", init_names[s->init.kind]);
        if (s->init.kind == NEST_INIT_CONSTANT) {
            buf_putc(b, ' ');
            print_double(b, s->init.a);
        } else if (s->init.kind == NEST_INIT_DATA) {
            buf_puts(b, " (the values given)");
        } else if (s->init.kind != NEST_INIT_ZEROS) {
            buf_putc(b, '(');
            print_double(b, s->init.a);
            buf_puts(b, ", ");
            print_double(b, s->init.b);
            buf_printf(b, ", seed=%llu)", (unsigned long long)s->init.seed);
        }
        buf_putc(b, '\n');
    }
    buf_puts(b, " */\n");
}

void emit_state(buf *b, const nest_module *m, emit_mode mode, bool header)
{
    const char *M = m->name;
    int n = m->nstates;
    state_comment(b, m);
    buf_printf(b, "typedef struct %s_state %s_state;\n", M, M);
    if (header) {
        buf_printf(b,
                   "%s_state *%s_state_new(void);            /* allocated, initialized; NULL when "
                   "out of memory */\n"
                   "void %s_state_free(%s_state *st);        /* NULL is a no-op */\n"
                   "size_t %s_state_size(void);              /* bytes of all the tensors */\n"
                   "int %s_state_count(void);                /* tensors */\n"
                   "/* tensor i: name, type (0 f32, 1 f64, 2 i32, 3 i64, 4 bool), rank, shape, "
                   "row-major data;\n"
                   " * NULL or -1 for an index out of range */\n"
                   "const char *%s_state_name(int i);\n"
                   "int %s_state_type(int i);\n"
                   "int %s_state_rank(int i);\n"
                   "const int64_t *%s_state_shape(int i);\n"
                   "void *%s_state_data(%s_state *st, int i);\n"
                   "int %s_state_find(const char *name);     /* the index of a tensor, or -1 */\n"
                   "void *%s_state_tensor(%s_state *st, const char *name); /* NULL if none */\n"
                   "/* state files: 0 on success; 1 an I/O error, 2 not a whole state file, 3 a "
                   "file of\n"
                   " * another state, 4 out of memory; on any error a load leaves the state as "
                   "it was */\n"
                   "int %s_state_save(const %s_state *st, const char *path);\n"
                   "int %s_state_load(%s_state *st, const char *path);\n\n",
                   M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M);
        return;
    }
    if (mode == EMIT_JIT) { /* the kernel is called with the runtime's array of tensors */
        buf_printf(b, "struct %s_state {\n    void *t[%d];\n};\n\n", M, n);
        return;
    }
    buf_printf(b, "struct %s_state {\n    void *t[%d]; /* the tensors */\n    void *block;\n};\n\n",
               M, n);
    for (size_t i = 0; i < countof(state_code); i++)
        buf_puts(b, state_code[i]);
    buf_putc(b, '\n');
    for (int32_t i = 0; i < n; i++) {
        const ir_state *s = &m->states[i];
        buf_printf(b, "static const int64_t %s_shape_%d[%d] = {", M, i, s->rank ? s->rank : 1);
        for (int k = 0; k < s->rank; k++)
            buf_printf(b, "%s%lld", k ? ", " : "", (long long)s->shape[k]);
        buf_puts(b, s->rank ? "};\n" : "0};\n");
    }
    for (int32_t i = 0; i < n; i++) { /* the initial values given as arrays */
        const ir_state *s = &m->states[i];
        if (s->init.kind != NEST_INIT_DATA)
            continue;
        char nm[IR_MAX_NAME + 32];
        snprintf(nm, sizeof nm, "nest_init_%s_%d", M, i);
        if (emit_const_is_data(s->count, s->etype))
            buf_printf(b, "/* %lld bytes of data linked beside this C, not text */\n"
                          "extern const %s %s[%lld] __attribute__((visibility(\"hidden\"), "
                          "aligned(64)));\n",
                       (long long)(s->count * (int64_t)nest_type_size((nest_type)s->etype)),
                       em_ctype(s->etype), nm, (long long)s->count);
        else
            emit_table(b, nm, s->etype, s->data, s->count);
    }
    buf_printf(b, "static const nest_st_desc %s_desc[%d] = {\n", M, n);
    for (int32_t i = 0; i < n; i++) {
        const ir_state *s = &m->states[i];
        buf_printf(b, "    {\"%s\", %d, %d, %s_shape_%d, %lld, %d, ", s->name, s->etype, s->rank, M,
                   i, (long long)s->count, (int)s->init.kind);
        print_double(b, s->init.a);
        buf_puts(b, ", ");
        print_double(b, s->init.b);
        buf_printf(b, ", UINT64_C(%llu), ", (unsigned long long)s->init.seed);
        if (s->init.kind == NEST_INIT_DATA)
            buf_printf(b, "nest_init_%s_%d},\n", M, i);
        else
            buf_puts(b, "0},\n");
    }
    int64_t bytes = 0;
    for (int32_t i = 0; i < n; i++)
        bytes += m->states[i].count * (int64_t)nest_type_size((nest_type)m->states[i].etype);
    buf_puts(b, "};\n\n");
    buf_printf(b,
               "%s_state *%s_state_new(void)\n{\n"
               "    %s_state *st = (%s_state *)calloc(1, sizeof *st);\n"
               "    if (st && nest_st_alloc(%s_desc, %d, st->t, &st->block)) {\n"
               "        free(st);\n        st = NULL;\n    }\n    return st;\n}\n\n",
               M, M, M, M, M, n);
    buf_printf(b,
               "void %s_state_free(%s_state *st)\n{\n    if (st) {\n        free(st->block);\n"
               "        free(st);\n    }\n}\n\n",
               M, M);
    buf_printf(b, "size_t %s_state_size(void)\n{\n    return %lld;\n}\n\n", M, (long long)bytes);
    buf_printf(b, "int %s_state_count(void)\n{\n    return %d;\n}\n\n", M, n);
    buf_printf(b,
               "const char *%s_state_name(int i)\n{\n"
               "    return i >= 0 && i < %d ? %s_desc[i].name : NULL;\n}\n\n",
               M, n, M);
    buf_printf(b, "int %s_state_type(int i)\n{\n    return i >= 0 && i < %d ? %s_desc[i].type : -1;\n}\n\n",
               M, n, M);
    buf_printf(b, "int %s_state_rank(int i)\n{\n    return i >= 0 && i < %d ? %s_desc[i].rank : -1;\n}\n\n",
               M, n, M);
    buf_printf(b,
               "const int64_t *%s_state_shape(int i)\n{\n"
               "    return i >= 0 && i < %d ? %s_desc[i].shape : NULL;\n}\n\n",
               M, n, M);
    buf_printf(b,
               "void *%s_state_data(%s_state *st, int i)\n{\n"
               "    return st && i >= 0 && i < %d ? st->t[i] : NULL;\n}\n\n",
               M, M, n);
    buf_printf(b,
               "int %s_state_find(const char *name)\n{\n    int i;\n"
               "    for (i = 0; name && i < %d; i++)\n"
               "        if (strcmp(%s_desc[i].name, name) == 0)\n            return i;\n"
               "    return -1;\n}\n\n",
               M, n, M);
    /* its own search, not a call of the exported NAME_state_find, which another library of
     * a module of the same name could provide */
    buf_printf(b,
               "void *%s_state_tensor(%s_state *st, const char *name)\n{\n    int i;\n"
               "    for (i = 0; st && name && i < %d; i++)\n"
               "        if (strcmp(%s_desc[i].name, name) == 0)\n            return st->t[i];\n"
               "    return NULL;\n}\n\n",
               M, M, n, M);
    buf_printf(b,
               "int %s_state_save(const %s_state *st, const char *path)\n{\n"
               "    return st && path ? nest_st_save(%s_desc, %d, st->t, path, NULL, 0) : 1;\n}\n\n",
               M, M, M, n);
    buf_printf(b,
               "int %s_state_load(%s_state *st, const char *path)\n{\n"
               "    return st && path ? nest_st_load(%s_desc, %d, st->t, path, NULL, 0) : 1;\n}\n\n",
               M, M, M, n);
}

/* The entry points a module with state adds to the C, after the module's name. */
static const char *const state_entries[] = {
    "_state", "_state_new", "_state_free", "_state_size", "_state_count", "_state_name",
    "_state_type", "_state_rank", "_state_shape", "_state_data", "_state_find", "_state_tensor",
    "_state_save", "_state_load", "_shape_", "_desc",
};

bool emit_state_name_taken(const nest_module *m, const char *name)
{
    size_t ml = strlen(m->name);
    if (strncmp(name, m->name, ml) != 0)
        return false;
    for (size_t i = 0; i < countof(state_entries); i++) {
        size_t el = strlen(state_entries[i]);
        if (strncmp(name + ml, state_entries[i], el) == 0 &&
            (name[ml + el] == '\0' || state_entries[i][el - 1] == '_'))
            return true;
    }
    return false;
}
