/*
 * prune.c - removes the nodes of a function that no result depends on. Importers build nodes
 * that end up unused (a Shape whose value was folded, weights rewritten at import); the passes
 * already skip them, but the text form, the interpreter and the memory would keep them.
 */
#include <assert.h>
#include <stdlib.h>

#include "internal.h"

int32_t ir_prune(nest_function *f)
{
    if (!f || f->status != NEST_OK || !f->has_return || f->nnodes == 0)
        return 0;
    int32_t nn = f->nnodes;
    int32_t *map = malloc((size_t)nn * sizeof *map);
    if (!map)
        return 0; /* nothing removed: the function stays as it was */
    for (int32_t i = 0; i < nn; i++)
        map[i] = f->nodes[i].op == OP_PARAMETER ? 1 : 0; /* 1: live */
    for (int32_t i = 0; i < f->nresults; i++)
        map[f->results[i]] = 1;
    for (int32_t i = 0; i < f->nreturned; i++)
        map[f->returned[i]] = 1;
    for (int32_t i = 0; i < f->nassigns; i++) /* the values a call assigns to state */
        map[f->assigns[i].node] = 1;
    /* operands come before their users: one backward sweep marks everything live */
    for (int32_t i = nn - 1; i >= 0; i--) {
        const ir_node *n = &f->nodes[i];
        if (!map[i])
            continue;
        for (int32_t j = 0; j < n->nin; j++)
            map[n->in[j]] = 1;
        if (n->op == OP_GET)
            map[n->a.get.target] = 1;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < nn; i++) {
        if (!map[i]) {
            map[i] = -1;
            continue;
        }
        ir_node *n = &f->nodes[i];
        for (int32_t j = 0; j < n->nin; j++)
            n->in[j] = map[n->in[j]];
        if (n->op == OP_GET)
            n->a.get.target = map[n->a.get.target];
        map[i] = k;
        if (k != i)
            f->nodes[k] = *n;
        k++;
    }
    for (int32_t i = 0; i < f->nparams; i++)
        f->params[i] = map[f->params[i]];
    for (int32_t i = 0; i < f->nresults; i++)
        f->results[i] = map[f->results[i]];
    for (int32_t i = 0; i < f->nreturned; i++)
        f->returned[i] = map[f->returned[i]];
    for (int32_t i = 0; i < f->nassigns; i++)
        f->assigns[i].node = map[f->assigns[i].node];
    f->nnodes = k;
    ir_renumber(f, map, nn);
    free(map);
    assert(ir_verify(f));
    return nn - k;
}
