/*
 * fuzz_parse.c - libFuzzer target for the text form. Any bytes either parse or fail with a
 * positioned error and no functions; what parses prints to a text that parses back (with the
 * same signatures) and prints the same. `make fuzz-parse` builds and runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Noreturn void die(const char *what, const char *detail, const char *text)
{
    fprintf(stderr, "fuzz_parse: %s\n%s\n--- text:\n%s\n", what, detail ? detail : "", text ? text : "");
    abort();
}

/* Two shapes agree by their text: a symbolic dim is a handle into its own function's table,
 * numbered in the order its expressions were made, which the printed text need not repeat. */
static bool same_shape(const nest_function *a, const ir_node *x, const nest_function *b,
                       const ir_node *y)
{
    buf p = {0}, q = {0};
    ir_format_dims(&p, a, x->rank, x->shape);
    ir_format_dims(&q, b, y->rank, y->shape);
    char *s = buf_finish(&p), *t = buf_finish(&q);
    if (!s || !t)
        die("out of memory", NULL, NULL);
    bool same = strcmp(s, t) == 0;
    free(s);
    free(t);
    return same;
}

/* Parameter and result counts, types and shapes agree. */
static void same_signature(const nest_function *a, const nest_function *b, const char *text)
{
    if (strcmp(a->name, b->name) != 0 || a->nparams != b->nparams || a->nresults != b->nresults)
        die("the reparsed function has another signature", a->name, text);
    for (int i = 0; i < a->nparams + a->nresults; i++) {
        bool param = i < a->nparams;
        int k = param ? i : i - a->nparams;
        const ir_node *x = &a->nodes[param ? a->params[k] : a->results[k]];
        const ir_node *y = &b->nodes[param ? b->params[k] : b->results[k]];
        int lx = param ? x->a.param.layout : a->result_layout[k];
        int ly = param ? y->a.param.layout : b->result_layout[k];
        if (x->etype != y->etype || x->rank != y->rank || lx != ly || !same_shape(a, x, b, y))
            die("a parameter or result changed type, shape or layout", a->name, text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nest_module *m = nest_parse((const char *)data, size, "in.nest");
    if (!m)
        return 0; /* out of memory */
    if (nest_module_errcode(m) != NEST_OK) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "in.nest:%d:%d: error: ", nest_module_errline(m),
                 nest_module_errcol(m));
        const char *msg = nest_module_errmsg(m);
        if (nest_module_errline(m) < 1 || nest_module_errcol(m) < 1 ||
            strncmp(msg, prefix, strlen(prefix)) != 0 || nest_module_count(m) != 0)
            die("an error without a proper position", msg, NULL);
        nest_module_free(m);
        return 0;
    }
    for (int i = 0; i < m->nfns; i++)
        if (!ir_verify(m->fns[i]))
            die("a parsed function fails verification", m->fns[i]->name, NULL);

    char *t1 = nest_print(m->fns, m->nfns);
    if (!t1)
        die("nest_print failed", m->nfns ? nest_errmsg(m->fns[0]) : "", NULL);
    nest_module *m2 = nest_parse(t1, strlen(t1), "printed.nest");
    if (!m2)
        abort();
    if (nest_module_errcode(m2) != NEST_OK)
        die("the printed text does not parse", nest_module_errmsg(m2), t1);
    if (m2->nfns != m->nfns)
        die("the printed text has another number of functions", NULL, t1);
    for (int i = 0; i < m->nfns; i++)
        same_signature(m->fns[i], m2->fns[i], t1);
    char *t2 = nest_print(m2->fns, m2->nfns);
    if (!t2)
        abort();
    if (strcmp(t1, t2) != 0)
        die("print -> parse -> print changed the text", t2, t1);

    char *dot = nest_print_dot(m->fns, m->nfns);
    if (!dot)
        die("nest_print_dot failed", NULL, t1);
    free(dot);
    free(t2);
    free(t1);
    nest_module_free(m2);
    nest_module_free(m);
    return 0;
}
