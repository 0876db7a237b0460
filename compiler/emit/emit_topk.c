/*
 * emit_topk.c - the loops of a topk nest (fuse.c): a helper call per row of the searched axis.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* topk (fuse.c): loops over every axis but the searched one, and a helper call per row. Rows
 * run in parallel unless they share the merge sort's scratch. */
void em_topk(ctx *c, int32_t k)
{
    const nest *ne = &c->p->nests[k];
    const ir_node *n = &c->f->nodes[ne->outs[0].node];
    int axis = n->a.topk.axis, r = ne->rank, et = ne->outs[0].value->etype;
    const fx *x = ne->outs[0].value;
    em_nest_open(c, k);
    const char *scratch = "0";
    if (ne->pack >= 0) {
        scratch = em_unique(&c->local, "scratch");
        em_line(c, "int64_t *restrict %s = (int64_t *)(ws + %lld);", scratch,
                (long long)c->p->bufs[ne->pack].offset);
        em_ref_ws(c);
    }
    *c->helpers |= 1ull << (H_TOPK + (et - NEST_F32));
    int64_t rows = 1;
    for (int d = 0; d < r; d++)
        if (d != axis)
            rows *= ne->dims[d];
    bool par = c->p->opts->openmp && ne->pack < 0 && em_nest_work(ne) >= PAR_MIN && rows >= 2;
    int opened = 0, first = 1;
    for (int d = 0; d < r; d++) {
        if (d == axis) {
            c->var[d] = c->expr[d] = "0";
            continue;
        }
        char v[16];
        snprintf(v, sizeof v, "i%d", d);
        c->var[d] = c->expr[d] = em_unique(&c->local, v);
        if (par && first)
            em_omp_for(c);
        first = 0;
        em_line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", c->var[d], c->var[d],
                (long long)ne->dims[d], c->var[d]);
        c->indent++;
        opened++;
    }
    /* the row's start in each array: the index with the axis at 0 */
    buf t = {0};
    int64_t st[NEST_MAX_RANK];
    const int64_t *strides[3] = {x->st, ne->outs[0].st, ne->outs[1].st};
    int32_t bufs[3] = {x->buf, ne->outs[0].buf, ne->outs[1].buf};
    int64_t offs[3] = {x->off, ne->outs[0].off, ne->outs[1].off};
    char *ptr[3];
    for (int j = 0; j < 3; j++) {
        buf_reset(&t);
        memcpy(st, strides[j], (size_t)r * sizeof *st);
        st[axis] = 0;
        buf_printf(&t, "%s + ", c->bufname[bufs[j]]);
        em_ref(c, bufs[j]);
        em_index(c, &t, bufs[j], offs[j], st, r);
        ptr[j] = em_finish(c, &t);
    }
    em_line(c, "nest_topk_%s(%s, %lld, %lld, %lld, %d, %s, %lld, %s, %lld, %s);",
            nest_type_name((nest_type)et), ptr[0] ? ptr[0] : "0", (long long)ne->dims[axis],
            (long long)x->st[axis], (long long)n->a.topk.k, n->a.topk.largest,
            ptr[1] ? ptr[1] : "0", (long long)ne->outs[0].st[axis], ptr[2] ? ptr[2] : "0",
            (long long)ne->outs[1].st[axis], scratch);
    for (int j = 0; j < 3; j++)
        free(ptr[j]);
    for (; opened > 0; opened--) {
        c->indent--;
        em_line(c, "}");
    }
    em_nest_close(c);
}
