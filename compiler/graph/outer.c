/*
 * outer.c - symbolic dims in any position, as the passes take them: a function whose values have
 * a symbolic dim behind a plain one ([S,B,E] with B symbolic: PyTorch's attention, batch
 * second) is compiled as a copy in which every value is stored with its symbolic axes outermost
 * ([B,S,E]), so that every stride is plain and only extents are symbolic.
 *
 * Each value of f is held in the copy g as a node over "atoms": its axes, or parts of them that
 * a reshape split ([S,B*4,16] is atoms S | B,4 | 16), in an order of storage of their own (its
 * layout: atom j of the value's logical order sits at axis pos[j] of g's node). A reshape only
 * regroups atoms, so it is a reshape of g's node that splits axes, never a copy; a transpose
 * only permutes the logical order, nothing in g. An op that needs its operands in an order
 * (a dot's summed axis last, element-wise operands alike, a slice's axis whole) gets g's
 * transposes and reshapes of them: views when the symbolic axes stay in front, copies per
 * batch element where a reshape regroups behind them. What has no rule here (gathers,
 * convolutions, state) takes its operands in their logical order, as in f. Parameters and
 * results keep the ABI's row-major order. The function that g is, is checked as any other
 * (pipeline.c), and what the passes do not take is refused there.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NA NEST_MAX_RANK

/* How a value of f is held in g: atom j (in the value's logical order) has extent ext[j] (a dim
 * of g) and sits at axis pos[j] of node g; the atoms of logical axis k are start[k] to
 * start[k + 1] - 1. */
typedef struct lay {
    int32_t g;
    int rank, na;
    int start[NA + 1];
    int pos[NA];
    int64_t ext[NA];
} lay;

typedef struct outer {
    nest_function *f, *g;
    lay *l;            /* per node of f */
    int32_t *plain;    /* per node of f: g's node of its value in logical order, -1 before */
    int64_t *map;      /* per entry of f's table: its handle in g, 0 before */
    int32_t node;      /* the node of f being built */
    const char *why;   /* what is refused */
} outer;

/* ---- dims ---- */

static int64_t tr(outer *o, int64_t d) { return dim_transfer(o->f, o->g, o->map, d); }

/* Whether b divides a for every size of the names, and the quotient in *q. */
static bool quotient(outer *o, int64_t a, int64_t b, int64_t *q)
{
    return dim_quotient(o->g, a, b, q) && *q != DIM_NONE;
}

/* The coarsest common refinement of two lists of extents of one product, less a's units that
 * b does not need: into out (owners oa[k] and ob[k]: the entry of each list that atom k is
 * part of); its length, or -1. */
static int common(outer *o, const int64_t *a, int na, const int64_t *b, int nb, int64_t *out,
                  int *oa, int *ob)
{
    int i = 0, j = 0, n = 0;
    int64_t ca = na ? a[0] : 1, cb = nb ? b[0] : 1, q;
    while (i < na && j < nb) {
        if (n == NA)
            return -1;
        oa[n] = i;
        ob[n] = j;
        if (ca == 1 && cb != 1) { /* a unit of a's: dropped */
            ca = ++i < na ? a[i] : 1;
            continue;
        }
        if (ca == cb) {
            out[n++] = ca;
            ca = ++i < na ? a[i] : 1;
            cb = ++j < nb ? b[j] : 1;
        } else if (quotient(o, ca, cb, &q)) {
            out[n++] = cb;
            ca = q;
            cb = ++j < nb ? b[j] : 1;
        } else if (quotient(o, cb, ca, &q)) {
            out[n++] = ca;
            cb = q;
            ca = ++i < na ? a[i] : 1;
        } else
            return -1;
    }
    /* what is left is units (the products are equal): a's dropped, b's kept (an axis of 1) */
    for (; i < na; i++)
        if (a[i] != 1)
            return -1;
    for (; j < nb; j++) {
        if (n == NA || b[j] != 1 || na == 0)
            return -1;
        oa[n] = na - 1;
        ob[n] = j;
        out[n++] = 1;
    }
    return n;
}

/* ---- g's nodes ---- */

/* Builds a node into g for the node of f being built (its place and, last, its name); -1 with
 * the error on f. */
static int32_t build(outer *o, ir_op op, int nin, const int32_t *in, const ir_attrs *at)
{
    int32_t v = ir_build(o->g, op, nin, in, at);
    if (v < 0) {
        ir_error(o->f, o->g->status, "%s", o->g->errmsg ? o->g->errmsg : "out of memory");
        return -1;
    }
    o->g->nodes[v].line = o->f->nodes[o->node].line;
    o->g->nodes[v].col = o->f->nodes[o->node].col;
    return v;
}

static void storage(const lay *l, int64_t *shape)
{
    for (int j = 0; j < l->na; j++)
        shape[l->pos[j]] = l->ext[j];
}

/* l's node reshaped to its atoms' storage shape (after a split or a merge). */
static bool reshape_to(outer *o, lay *l)
{
    int64_t shape[NA];
    storage(l, shape);
    const ir_node *n = &o->g->nodes[l->g];
    if (n->rank == l->na && !memcmp(n->shape, shape, (size_t)l->na * sizeof *shape))
        return true;
    ir_attrs at = {.rank = l->na, .shape = shape};
    return (l->g = build(o, OP_RESHAPE, 1, &l->g, &at)) >= 0;
}

/* g's node v, a broadcast, built again from its operand as rank axes of shape, axis t of
 * which is v's axis from[t]: a broadcast is a view in any order and any split of its new axes,
 * so a value with the symbolic axes in front stays one (its node, or -1 with the error on f);
 * -2 when v is not a broadcast or its operand's axes would not come once each, in order. */
static int32_t rebroadcast(outer *o, int32_t v, int rank, const int64_t *shape, const int *from)
{
    const ir_node *n = &o->g->nodes[v];
    if (n->op != OP_BROADCAST)
        return -2;
    int last = -1, kept = 0, na = 0;
    int64_t axes[NA];
    for (int t = 0; t < rank; t++) {
        if (n->a.axes & (1u << from[t])) {
            axes[na++] = t;
            continue;
        }
        if (from[t] <= last)
            return -2;
        last = from[t];
        kept++;
    }
    if (kept != o->g->nodes[n->in[0]].rank)
        return -2;
    int32_t x = n->in[0];
    ir_attrs at = {.rank = rank, .shape = shape, .naxes = na, .axes = axes};
    return build(o, OP_BROADCAST, 1, &x, &at);
}

/* l's atoms moved to the axes pos (a transpose of its node). */
static bool move_to(outer *o, lay *l, const int *pos)
{
    int64_t order[NA], shape[NA];
    int from[NA];
    bool same = true;
    for (int j = 0; j < l->na; j++) {
        order[pos[j]] = from[pos[j]] = l->pos[j];
        shape[pos[j]] = l->ext[j];
        same &= pos[j] == l->pos[j];
    }
    if (same)
        return true;
    ir_attrs at = {.rank = l->na, .shape = shape, .order = order};
    int32_t v = rebroadcast(o, l->g, l->na, shape, from);
    if (v == -1 || (v == -2 && (v = build(o, OP_RESHAPE, 1, &l->g, &at)) < 0))
        return false;
    l->g = v;
    memcpy(l->pos, pos, (size_t)l->na * sizeof *pos);
    return true;
}

/* Atom j of l split into the atoms ext[owner == j]: every atom is split by a list of owners
 * (ascending) and extents, n of them; its storage splits in place. */
static bool split(outer *o, lay *l, int n, const int64_t *ext, const int *owner)
{
    if (n == l->na)
        return true;
    lay r = {.g = l->g, .rank = l->rank, .na = n};
    for (int k = 0; k <= l->rank; k++) { /* the first new atom of each axis */
        int j = 0;
        while (j < n && owner[j] < l->start[k])
            j++;
        r.start[k] = k == l->rank ? n : j;
    }
    int at = 0, from[NA];
    for (int s = 0; s < l->na; s++) /* old storage axis s: its atom's parts, in order */
        for (int j = 0; j < n; j++)
            if (l->pos[owner[j]] == s) {
                from[at] = s;
                r.pos[j] = at++;
            }
    memcpy(r.ext, ext, (size_t)n * sizeof *ext);
    *l = r;
    int64_t shape[NA];
    storage(l, shape);
    int32_t v = rebroadcast(o, l->g, n, shape, from);
    if (v == -1)
        return false;
    if (v >= 0)
        return l->g = v, true;
    return reshape_to(o, l);
}

/* Where merge_axis_as puts an axis's atoms: where the first of them is stored, first, last
 * (where that keeps the symbolic atoms in front). */
enum { IN_PLACE, FRONT, BACK };

/* Axis k of l as one atom: its atoms brought together where `where` says, in the order
 * `order` (their indices within the axis; NULL: their own, which a summed axis need not
 * keep), and merged. */
static bool merge_axis_as(outer *o, lay *l, int k, const int *order, int where)
{
    int a = l->start[k], m = l->start[k + 1] - a;
    /* never a symbolic atom behind a plain one: such a copy would have symbolic strides */
    bool sym_in = false, sym_out = false;
    for (int j = 0; j < l->na; j++)
        *(j >= a && j < a + m ? &sym_in : &sym_out) |= dim_is_sym(l->ext[j]);
    if ((where == BACK && sym_in) || (where == FRONT && sym_out && !sym_in))
        where = IN_PLACE;
    if (m <= 1 && where == IN_PLACE)
        return true;
    int first = where == FRONT ? 0 : where == BACK ? l->na - m : NA, pos[NA];
    for (int j = a; j < a + m && where == IN_PLACE; j++)
        first = l->pos[j] < first ? l->pos[j] : first;
    /* the other atoms keep their order; the axis's go to first..first+m-1 */
    for (int t = 0; t < m; t++)
        pos[a + (order ? order[t] : t)] = first + t;
    for (int j = 0; j < l->na; j++) {
        if (j >= a && j < a + m)
            continue;
        int p = l->pos[j];
        for (int i = a; i < a + m; i++)
            p -= l->pos[i] < l->pos[j];
        pos[j] = p >= first ? p + m : p;
    }
    if (!move_to(o, l, pos))
        return false;
    int64_t e = 1;
    for (int j = a; j < a + m && e != DIM_NONE; j++)
        e = dim_mul(o->g, e, l->ext[j]);
    if (e == DIM_NONE)
        return ir_error(o->f, o->g->status, "%s", o->g->errmsg), false;
    l->ext[a] = e;
    l->pos[a] = first;
    for (int j = 0; j < l->na; j++) {
        int to = j < a ? j : j >= a + m ? j - m + 1 : -1;
        if (to >= 0) {
            l->ext[to] = l->ext[j];
            l->pos[to] = l->pos[j] > first ? l->pos[j] - m + 1 : l->pos[j];
        }
    }
    l->na -= m - 1;
    for (int i = k + 1; i <= l->rank; i++)
        l->start[i] -= m - 1;
    return reshape_to(o, l);
}

static bool merge_axis(outer *o, lay *l, int k) { return merge_axis_as(o, l, k, NULL, IN_PLACE); }

static bool split_axis(outer *o, lay *l, int k, const int64_t *atoms, int na);

/* The axes ka of a and kb of b, summed against each other, as one atom each, placed as wa and
 * wb say: their common atoms merged in the order a stores them (a sum takes its terms in any
 * order). */
static bool summed_axes(outer *o, lay *a, int ka, int wa, lay *b, int kb, int wb)
{
    int64_t atoms[NA];
    int oa[NA], ob[NA], order[NA];
    int n = common(o, a->ext + a->start[ka], a->start[ka + 1] - a->start[ka],
                   b->ext + b->start[kb], b->start[kb + 1] - b->start[kb], atoms, oa, ob);
    if (n < 0)
        return o->why = "a product over an axis that reshapes split differently", false;
    if (!split_axis(o, a, ka, atoms, n) || !split_axis(o, b, kb, atoms, n))
        return false;
    for (int t = 0, c = 0; t < a->na; t++) /* by a's storage */
        for (int j = 0; j < n; j++)
            if (a->pos[a->start[ka] + j] == t)
                order[c++] = j;
    return merge_axis_as(o, a, ka, order, wa) && merge_axis_as(o, b, kb, order, wb);
}

/* A layout of one atom per axis of shape, stored as given (identity) or with the symbolic
 * axes first. */
static void one_per_axis(lay *l, int32_t g, int rank, const int64_t *shape, bool sym_first)
{
    l->g = g;
    l->rank = l->na = rank;
    int s = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < rank; k++) {
            l->start[k] = k;
            l->ext[k] = shape[k];
            if (!sym_first ? pass == 0 : (pass == 0) == dim_is_sym(shape[k]))
                l->pos[k] = s++;
        }
    l->start[rank] = rank;
}

/* g's node of f's node i in its logical order (row-major as in f). */
static int32_t plain(outer *o, int32_t i)
{
    i = ir_resolve(o->f, i);
    if (o->plain[i] >= 0)
        return o->plain[i];
    lay l = o->l[i];
    const ir_node *n = &o->f->nodes[i];
    if (n->etype == IR_TUPLE)
        return o->plain[i] = l.g;
    int pos[NA];
    for (int j = 0; j < l.na; j++)
        pos[j] = j;
    if (!move_to(o, &l, pos))
        return -1;
    int64_t shape[NA];
    for (int k = 0; k < n->rank; k++)
        if ((shape[k] = tr(o, n->shape[k])) == DIM_NONE)
            return ir_error(o->f, o->g->status, "%s", o->g->errmsg), -1;
    const ir_node *m = &o->g->nodes[l.g];
    if (m->rank != n->rank || memcmp(m->shape, shape, (size_t)n->rank * sizeof *shape)) {
        ir_attrs at = {.rank = n->rank, .shape = shape};
        if ((l.g = build(o, OP_RESHAPE, 1, &l.g, &at)) < 0)
            return -1;
    }
    return o->plain[i] = l.g;
}

/* Axis k of l split into atoms[0..na), a refinement of its own atoms. */
static bool split_axis(outer *o, lay *l, int k, const int64_t *atoms, int na)
{
    int c = l->start[k + 1] - l->start[k];
    if (c == na)
        return true;
    int64_t ext[NA], next[NA];
    int owner[NA], oa[NA], ob[NA], m = 0;
    if (l->na - c + na > NA)
        return o->why = "more than 32 atoms", false;
    for (int j = 0; j < l->start[k]; j++, m++)
        ext[m] = l->ext[j], owner[m] = j;
    if (common(o, l->ext + l->start[k], c, atoms, na, next, oa, ob) != na)
        return o->why = "operands whose axes a reshape split differently", false;
    for (int t = 0; t < na; t++, m++)
        ext[m] = next[t], owner[m] = l->start[k] + oa[t];
    for (int j = l->start[k + 1]; j < l->na; j++, m++)
        ext[m] = l->ext[j], owner[m] = j;
    return split(o, l, m, ext, owner);
}

/* Layouts ls[0..n) of values of one logical shape given the same atoms (the common refinement,
 * axis by axis, but for axis skip: one atom in each, of its own extent) and the storage of
 * ls[lead]. */
static bool conform(outer *o, lay *ls, int n, int lead, int skip)
{
    for (int k = 0; k < ls[0].rank; k++) {
        if (k == skip)
            continue;
        /* the common atoms of axis k over all */
        int64_t atoms[NA], next[NA];
        int na = ls[0].start[k + 1] - ls[0].start[k], oa[NA], ob[NA];
        memcpy(atoms, ls[0].ext + ls[0].start[k], (size_t)na * sizeof *atoms);
        for (int i = 1; i < n; i++) {
            const lay *l = &ls[i];
            int m = common(o, atoms, na, l->ext + l->start[k], l->start[k + 1] - l->start[k],
                           next, oa, ob);
            if (m < 0)
                return o->why = "operands whose axes a reshape split differently", false;
            memcpy(atoms, next, (size_t)m * sizeof *atoms);
            na = m;
        }
        for (int i = 0; i < n; i++) /* each split to them */
            if (!split_axis(o, &ls[i], k, atoms, na))
                return false;
    }
    for (int i = 0; i < n; i++)
        if (i != lead && !move_to(o, &ls[i], ls[lead].pos))
            return false;
    return true;
}

/* ---- each op ---- */

/* The attributes of node i of f with g's dims. */
static bool attrs(outer *o, int32_t i, ir_node_attrs *s)
{
    dim_move m = {o->f, o->g, o->map};
    return ir_node_attrs_of(o->f, i, dim_transfer_map, &m, s);
}

/* Node i as in f, its operands in their logical order: a layout of one atom per axis. */
static bool as_is(outer *o, int32_t i)
{
    const ir_node *n = &o->f->nodes[i];
    ir_node_attrs s;
    int32_t in[64];
    if (n->nin > 64)
        return o->why = "an op of more than 64 operands", false;
    for (int j = 0; j < n->nin; j++)
        if ((in[j] = plain(o, n->in[j])) < 0)
            return false;
    if (!attrs(o, i, &s))
        return false;
    int32_t v = build(o, (ir_op)n->op, n->nin, in, &s.at);
    if (v < 0)
        return false;
    one_per_axis(&o->l[i], v, n->rank, s.shape, false);
    if (n->etype != IR_TUPLE)
        o->plain[i] = v;
    return true;
}

/* Element-wise: the operands conformed to the first with a symbolic atom. */
static bool elementwise(outer *o, int32_t i, const ir_node *n)
{
    lay ls[3];
    int lead = -1;
    if (n->nin > 3)
        return as_is(o, i);
    for (int j = 0; j < n->nin; j++) {
        ls[j] = o->l[ir_resolve(o->f, n->in[j])];
        for (int a = 0; a < ls[j].na && lead < 0; a++)
            lead = dim_is_sym(ls[j].ext[a]) ? j : -1;
    }
    lead = lead < 0 ? 0 : lead;
    if (!conform(o, ls, n->nin, lead, -1))
        return false;
    ir_node_attrs s;
    int32_t in[3];
    for (int j = 0; j < n->nin; j++)
        in[j] = ls[j].g;
    if (!attrs(o, i, &s))
        return false;
    lay *r = &o->l[i];
    *r = ls[lead];
    storage(r, s.shape);
    s.at.rank = r->na;
    return (r->g = build(o, (ir_op)n->op, n->nin, in, &s.at)) >= 0;
}

/* broadcast(x, axes): the new axes as atoms of their own; the symbolic ones after x's first
 * run of symbolic atoms, the plain ones among x's plain atoms by logical position. */
static bool broadcast(outer *o, int32_t i, const ir_node *n)
{
    const lay *x = &o->l[ir_resolve(o->f, n->in[0])];
    ir_node_attrs s;
    if (!attrs(o, i, &s))
        return false;
    lay *r = &o->l[i];
    r->rank = n->rank;
    r->na = 0;
    int xatom[NA]; /* per atom of r: x's atom, or -1 for a new axis */
    for (int k = 0, xk = 0; k < n->rank; k++) {
        r->start[k] = r->na;
        if (n->a.axes & (1u << k)) {
            if (r->na == NA)
                return o->why = "more than 32 atoms", false;
            xatom[r->na] = -1;
            r->ext[r->na++] = s.shape[k];
            continue;
        }
        for (int j = x->start[xk]; j < x->start[xk + 1]; j++) {
            if (r->na == NA)
                return o->why = "more than 32 atoms", false;
            xatom[r->na] = j;
            r->ext[r->na++] = x->ext[j];
        }
        xk++;
    }
    r->start[n->rank] = r->na;
    /* x's storage order, with the new atoms placed */
    int byslot[NA], lead = 0, p = 0;
    for (int j = 0; j < r->na; j++)
        if (xatom[j] >= 0)
            byslot[x->pos[xatom[j]]] = j;
    while (lead < x->na && dim_is_sym(r->ext[byslot[lead]]))
        lead++;
    for (int t = 0; t < lead; t++)
        r->pos[byslot[t]] = p++;
    for (int j = 0; j < r->na; j++)
        if (xatom[j] < 0 && dim_is_sym(r->ext[j]))
            r->pos[j] = p++;
    int t = lead;
    for (int j = 0; j < r->na; j++) {
        if (xatom[j] >= 0 || dim_is_sym(r->ext[j]))
            continue;
        while (t < x->na && byslot[t] < j) /* x's atoms stored before, logically before */
            r->pos[byslot[t++]] = p++;
        r->pos[j] = p++;
    }
    while (t < x->na)
        r->pos[byslot[t++]] = p++;
    uint32_t added = 0; /* the storage axes of the new atoms */
    for (int j = 0; j < r->na; j++)
        if (xatom[j] < 0)
            added |= 1u << r->pos[j];
    int64_t axes[NA];
    int nx = ir_mask_axes(added, axes);
    storage(r, s.shape);
    s.at.rank = r->na;
    s.at.naxes = nx;
    s.at.axes = axes;
    return (r->g = build(o, (ir_op)n->op, 1, &x->g, &s.at)) >= 0;
}

/* r: x without the atoms of the axes of mask, their storage closed up. */
static void drop_axes(lay *r, const lay *x, uint32_t mask)
{
    bool gone[NA] = {0};
    for (int k = 0; k < x->rank; k++)
        for (int j = x->start[k]; j < x->start[k + 1] && (mask & (1u << k)); j++)
            gone[x->pos[j]] = true;
    lay t = {.g = x->g};
    for (int k = 0; k < x->rank; k++) {
        if (mask & (1u << k))
            continue;
        t.start[t.rank++] = t.na;
        for (int j = x->start[k]; j < x->start[k + 1]; j++) {
            int p = x->pos[j];
            for (int q = 0; q < x->pos[j]; q++)
                p -= gone[q];
            t.pos[t.na] = p;
            t.ext[t.na++] = x->ext[j];
        }
    }
    t.start[t.rank] = t.na;
    *r = t;
}

/* A reduction, softmax or reverse over whole axes: over their atoms where they lie. */
static bool over_axes(outer *o, int32_t i, const ir_node *n)
{
    int32_t ia = ir_resolve(o->f, n->in[0]);
    const lay *x = &o->l[ia];
    ir_node_attrs s;
    if (!attrs(o, i, &s))
        return false;
    uint32_t at = 0; /* the storage axes of the axes' atoms */
    for (int k = 0; k < x->rank; k++)
        for (int j = x->start[k]; j < x->start[k + 1] && (n->a.axes & (1u << k)); j++)
            at |= 1u << x->pos[j];
    int64_t axes[NA];
    int na = ir_mask_axes(at, axes);
    lay *r = &o->l[i];
    if (ir_kind_of(n) == K_REDUCE) /* the kept atoms, their storage closed up */
        drop_axes(r, x, n->a.axes);
    else
        *r = *x;
    int64_t shape[NA];
    storage(r, shape);
    s.at.rank = r->na;
    s.at.shape = shape;
    s.at.naxes = na;
    s.at.axes = axes;
    int32_t in[2] = {x->g, n->nin > 1 ? plain(o, n->in[1]) : -1};
    if (n->nin > 1 && in[1] < 0)
        return false;
    return (r->g = build(o, (ir_op)n->op, n->nin, in, &s.at)) >= 0;
}

/* reshape(x, order, shape): x's atoms in the order, regrouped into the new axes (split where
 * an axis ends inside one); g's node split in place. */
static bool reshape(outer *o, int32_t i, const ir_node *n)
{
    int32_t ia = ir_resolve(o->f, n->in[0]);
    const lay *x = &o->l[ia];
    if (x->rank == 0 || n->rank == 0)
        return as_is(o, i);
    ir_node_attrs s;
    if (!attrs(o, i, &s))
        return false;
    /* x's atoms in the order of reading */
    lay t = {.g = x->g, .rank = x->rank};
    for (int k = 0; k < x->rank; k++) {
        int a = n->a.order[k];
        t.start[k] = t.na;
        for (int j = x->start[a]; j < x->start[a + 1]; j++) {
            t.ext[t.na] = x->ext[j];
            t.pos[t.na++] = x->pos[j];
        }
    }
    t.start[t.rank] = t.na;
    int64_t atoms[NA];
    int oa[NA], ob[NA];
    int m = common(o, t.ext, t.na, s.shape, n->rank, atoms, oa, ob);
    if (m < 0)
        return o->why = "a reshape whose axes do not divide each other", false;
    if (!split(o, &t, m, atoms, oa))
        return false;
    lay *r = &o->l[i];
    *r = t;
    r->rank = n->rank;
    for (int k = 0, j = 0; k <= n->rank; k++) {
        while (j < m && ob[j] < k)
            j++;
        r->start[k] = k == n->rank ? m : j;
    }
    return true;
}

/* dot(x, w): x's last axis and w's first (each one atom), summed; x's other atoms, then w's,
 * each in its storage order. */
static bool dot(outer *o, int32_t i, const ir_node *n)
{
    lay x = o->l[ir_resolve(o->f, n->in[0])], w = o->l[ir_resolve(o->f, n->in[1])];
    if (x.rank == 0 || w.rank == 0)
        return elementwise(o, i, n);
    if (!summed_axes(o, &x, x.rank - 1, BACK, &w, 0, FRONT))
        return false;
    int px[NA], pw[NA], kx = x.na - 1;
    for (int j = 0; j < x.na; j++)
        px[j] = j == kx ? kx : x.pos[j] - (x.pos[j] > x.pos[kx]);
    for (int j = 0; j < w.na; j++)
        pw[j] = j == 0 ? 0 : w.pos[j] + (w.pos[j] < w.pos[0]);
    if (!move_to(o, &x, px) || !move_to(o, &w, pw))
        return false;
    lay *r = &o->l[i];
    r->rank = n->rank;
    r->na = x.na - 1 + w.na - 1;
    if (r->na > NA)
        return o->why = "more than 32 atoms", false;
    for (int k = 0; k < x.rank - 1; k++)
        r->start[k] = x.start[k];
    for (int k = 1; k <= w.rank; k++)
        r->start[x.rank - 1 + k - 1] = x.start[x.rank - 1] + w.start[k] - 1;
    for (int j = 0; j < kx; j++)
        r->ext[j] = x.ext[j], r->pos[j] = x.pos[j];
    for (int j = 1; j < w.na; j++)
        r->ext[kx + j - 1] = w.ext[j], r->pos[kx + j - 1] = kx + w.pos[j] - 1;
    ir_node_attrs s;
    if (!attrs(o, i, &s))
        return false;
    storage(r, s.shape);
    s.at.rank = r->na;
    int32_t in[2] = {x.g, w.g};
    return (r->g = build(o, (ir_op)n->op, 2, in, &s.at)) >= 0;
}

/* batch_dot(x, y): the rows, the summed axis and the columns one atom each and last; the
 * batch axes as the result's atoms in one storage order for both (units where an operand
 * broadcasts), which is the first operand's where it has them all. */
static bool batch_dot(outer *o, int32_t i, const ir_node *n)
{
    lay x = o->l[ir_resolve(o->f, n->in[0])], y = o->l[ir_resolve(o->f, n->in[1])];
    if (x.rank < 2 || y.rank < 2)
        return as_is(o, i);
    int nb = n->rank - 2;
    lay *ops[2] = {&x, &y};
    if (!summed_axes(o, &x, x.rank - 1, BACK, &y, y.rank - 2, IN_PLACE) ||
        !merge_axis(o, &x, x.rank - 2) ||
        !merge_axis(o, &y, y.rank - 1))
        return false;
    /* the result's batch atoms: per batch axis, the common atoms of the operands that have it
     * whole */
    int64_t atoms[NA];
    int na = 0, bstart[NA + 1], own[2][NA]; /* per result atom, each operand's atom or -1 */
    for (int k = 0; k < nb; k++) {
        bstart[k] = na;
        int64_t cur[NA], next[NA];
        int nc = -1, oa[NA], ob[NA];
        for (int q = 0; q < 2; q++) {
            const lay *l = ops[q];
            int ak = k - (nb - (l->rank - 2));
            if (ak < 0)
                continue;
            int c = l->start[ak + 1] - l->start[ak];
            int64_t prod = 1;
            for (int j = l->start[ak]; j < l->start[ak + 1]; j++)
                prod = dim_mul(o->g, prod, l->ext[j]);
            if (prod != tr(o, n->shape[k]) || (prod == 1 && q == 1 && nc >= 0))
                continue; /* broadcast along it */
            if (nc < 0) {
                memcpy(cur, l->ext + l->start[ak], (size_t)c * sizeof *cur);
                nc = c;
            } else if ((nc = common(o, cur, nc, l->ext + l->start[ak], c, next, oa, ob)) < 0) {
                return o->why = "batch axes that a reshape split differently", false;
            } else
                memcpy(cur, next, (size_t)nc * sizeof *cur);
        }
        if (nc < 0) /* both broadcast: an axis of 1 */
            cur[0] = 1, nc = 1;
        if (na + nc + 2 > NA)
            return o->why = "more than 32 atoms", false;
        memcpy(atoms + na, cur, (size_t)nc * sizeof *cur);
        na += nc;
    }
    bstart[nb] = na;
    /* each operand split to the result's atoms along the batch axes it has whole */
    for (int q = 0; q < 2; q++) {
        lay *l = ops[q];
        int lb = l->rank - 2;
        int64_t ext[NA];
        int owner[NA], m = 0;
        for (int ak = 0; ak < lb; ak++) {
            int k = ak + (nb - lb), c = l->start[ak + 1] - l->start[ak];
            int64_t prod = 1;
            for (int j = l->start[ak]; j < l->start[ak + 1]; j++)
                prod = dim_mul(o->g, prod, l->ext[j]);
            int64_t want = 1;
            for (int j = bstart[k]; j < bstart[k + 1]; j++)
                want = dim_mul(o->g, want, atoms[j]);
            int64_t got[NA];
            int oa[NA], ob[NA], g;
            if (prod != want) { /* broadcast: one atom of 1 */
                for (int j = l->start[ak]; j < l->start[ak + 1]; j++)
                    ext[m] = l->ext[j], owner[m++] = j;
                for (int j = bstart[k]; j < bstart[k + 1]; j++)
                    own[q][j] = -1;
                continue;
            }
            g = common(o, l->ext + l->start[ak], c, atoms + bstart[k], bstart[k + 1] - bstart[k],
                       got, oa, ob);
            if (g != bstart[k + 1] - bstart[k])
                return o->why = "batch axes that a reshape split differently", false;
            for (int t = 0; t < g; t++) {
                own[q][bstart[k] + t] = m;
                ext[m] = got[t], owner[m++] = l->start[ak] + oa[t];
            }
        }
        for (int k = 0; k < nb - lb; k++)
            for (int j = bstart[k]; j < bstart[k + 1]; j++)
                own[q][j] = -1;
        for (int j = l->start[lb]; j < l->na; j++)
            ext[m] = l->ext[j], owner[m++] = j;
        if (!split(o, l, m, ext, owner))
            return false;
    }
    /* the storage order of the batch atoms: the first operand's when it has them all, else
     * the symbolic ones first */
    int order[NA], no = 0;
    bool xall = true;
    for (int j = 0; j < na; j++)
        xall &= own[0][j] >= 0;
    for (int pass = 0; pass < 2 && !xall; pass++)
        for (int j = 0; j < na; j++)
            if ((pass == 0) == dim_is_sym(atoms[j]))
                order[no++] = j;
    if (xall) {
        for (int s = 0; s < x.na; s++)
            for (int j = 0; j < na; j++)
                if (x.pos[own[0][j]] == s)
                    order[no++] = j;
    }
    /* each operand: its batch atoms in that order (units for the ones it lacks), then its
     * two matrix axes */
    int32_t in[2];
    for (int q = 0; q < 2; q++) {
        lay *l = ops[q];
        int pos[NA], p = 0;
        for (int t = 0; t < na; t++)
            if (own[q][order[t]] >= 0)
                pos[own[q][order[t]]] = p++;
        for (int j = 0; j < l->na - 2; j++) { /* its atoms along axes it broadcasts */
            bool used = false;
            for (int t = 0; t < na; t++)
                used |= own[q][t] == j;
            if (!used)
                pos[j] = p++;
        }
        pos[l->na - 2] = p++;
        pos[l->na - 1] = p++;
        if (!move_to(o, l, pos))
            return false;
        /* as na + 2 axes: units for what it lacks, in the order */
        int64_t shape[NA];
        for (int t = 0; t < na; t++)
            shape[t] = own[q][order[t]] >= 0 ? l->ext[own[q][order[t]]] : 1;
        shape[na] = l->ext[l->na - 2];
        shape[na + 1] = l->ext[l->na - 1];
        ir_attrs at = {.rank = na + 2, .shape = shape};
        const ir_node *m = &o->g->nodes[l->g];
        if (m->rank != na + 2 || memcmp(m->shape, shape, (size_t)(na + 2) * sizeof *shape))
            if ((l->g = build(o, OP_RESHAPE, 1, &l->g, &at)) < 0)
                return false;
        in[q] = l->g;
    }
    lay *r = &o->l[i];
    r->rank = n->rank;
    r->na = na + 2;
    for (int k = 0; k < nb; k++)
        r->start[k] = bstart[k];
    r->start[nb] = na;
    r->start[nb + 1] = na + 1;
    r->start[nb + 2] = na + 2;
    memcpy(r->ext, atoms, (size_t)na * sizeof *atoms);
    for (int t = 0; t < na; t++)
        r->pos[order[t]] = t;
    r->ext[na] = x.ext[x.na - 2];
    r->ext[na + 1] = y.ext[y.na - 1];
    r->pos[na] = na;
    r->pos[na + 1] = na + 1;
    ir_node_attrs s;
    if (!attrs(o, i, &s))
        return false;
    return (r->g = build(o, (ir_op)n->op, 2, in, &s.at)) >= 0;
}

/* argmax, argmin: along its axis as one atom. */
static bool argreduce(outer *o, int32_t i, const ir_node *n)
{
    lay x = o->l[ir_resolve(o->f, n->in[0])];
    int axis = n->a.axis;
    if (!merge_axis(o, &x, axis))
        return false;
    ir_node_attrs s;
    if (!attrs(o, i, &s))
        return false;
    lay *r = &o->l[i];
    drop_axes(r, &x, 1u << axis);
    storage(r, s.shape);
    s.at.rank = r->na;
    s.at.index = x.pos[x.start[axis]];
    return (r->g = build(o, (ir_op)n->op, 1, &x.g, &s.at)) >= 0;
}

/* slice and pad: the axes they cut or pad as one atom each, the lists over g's axes. */
static bool slice_pad(outer *o, int32_t i, const ir_node *n)
{
    lay x = o->l[ir_resolve(o->f, n->in[0])];
    bool pad = ir_kind_of(n) == K_PAD;
    ir_node_attrs s;
    if (!attrs(o, i, &s))
        return false;
    const ir_node *a = &o->f->nodes[ir_resolve(o->f, n->in[0])];
    for (int k = 0; k < x.rank; k++) {
        bool whole = pad ? !s.lo[k] && !s.up[k] && !s.step[k]
                         : !s.lo[k] && n->a.slice.upper[k] == a->shape[k] && s.step[k] == 1;
        if (!whole && !merge_axis(o, &x, k))
            return false;
    }
    int64_t lo[NA], up[NA], step[NA];
    lay *r = &o->l[i];
    *r = x;
    for (int k = 0; k < x.rank; k++)
        for (int j = x.start[k]; j < x.start[k + 1]; j++) {
            bool one = x.start[k + 1] - x.start[k] == 1;
            int p = x.pos[j];
            lo[p] = one ? s.lo[k] : 0;
            up[p] = one ? s.up[k] : pad ? 0 : x.ext[j];
            step[p] = one ? s.step[k] : pad ? 0 : 1;
            if (one)
                r->ext[j] = s.shape[k];
        }
    storage(r, s.shape);
    s.at.rank = r->na;
    s.at.lower = s.at.below = lo;
    s.at.upper = s.at.above = up;
    s.at.step = s.at.interior = step;
    int32_t in[2] = {x.g, pad ? plain(o, n->in[1]) : -1};
    if (pad && in[1] < 0)
        return false;
    return (r->g = build(o, (ir_op)n->op, n->nin, in, &s.at)) >= 0;
}

/* concat: its axis one atom in every part, the other axes conformed to the first part's. */
static bool concat(outer *o, int32_t i, const ir_node *n)
{
    int axis = n->a.axis, np = n->nin;
    lay *ls = calloc((size_t)np, sizeof *ls);
    int32_t *in = calloc((size_t)np, sizeof *in);
    bool ok = ls && in;
    if (!ok)
        ir_error(o->f, NEST_ERR_NOMEM, "out of memory");
    for (int j = 0; ok && j < np; j++) {
        ls[j] = o->l[ir_resolve(o->f, n->in[j])];
        ok = merge_axis(o, &ls[j], axis);
    }
    ok = ok && conform(o, ls, np, 0, axis);
    ir_node_attrs s;
    ok = ok && attrs(o, i, &s);
    lay *r = &o->l[i];
    if (ok) {
        for (int j = 0; j < np; j++)
            in[j] = ls[j].g;
        *r = ls[0];
        r->ext[r->start[axis]] = s.shape[axis];
        storage(r, s.shape);
        s.at.rank = r->na;
        s.at.index = r->pos[r->start[axis]];
        ok = (r->g = build(o, (ir_op)n->op, np, in, &s.at)) >= 0;
    }
    free(ls);
    free(in);
    return ok;
}

/* Node i of f into g, with its layout. */
static bool outer_node(outer *o, int32_t i)
{
    const ir_node *n = &o->f->nodes[i];
    o->node = i;
    switch (ir_kind_of(n)) {
    case K_PARAM: /* in the ABI's order */
        if (!as_is(o, i))
            return false;
        o->plain[i] = o->l[i].g;
        return true;
    case K_CONST: { /* a fill of a symbolic shape: any order is the same data */
        ir_node_attrs s;
        bool sym = false;
        for (int k = 0; k < n->rank; k++)
            sym |= dim_is_sym(n->shape[k]);
        if (!sym || n->a.constant.count != 1)
            return as_is(o, i);
        if (!attrs(o, i, &s))
            return false;
        lay *r = &o->l[i];
        one_per_axis(r, -1, n->rank, s.shape, true);
        int64_t shape[NA];
        storage(r, shape);
        s.at.shape = shape;
        return (r->g = build(o, (ir_op)n->op, 0, NULL, &s.at)) >= 0;
    }
    case K_EW:
    case K_CMP:
    case K_SELECT:
    case K_CONVERT: return elementwise(o, i, n);
    case K_BROADCAST: return broadcast(o, i, n);
    case K_REDUCE:
    case K_SOFTMAX:
    case K_REVERSE: return over_axes(o, i, n);
    case K_ARGREDUCE: return argreduce(o, i, n);
    case K_DOT: return dot(o, i, n);
    case K_BATCH_DOT: return batch_dot(o, i, n);
    case K_RESHAPE: return reshape(o, i, n);
    case K_SLICE:
    case K_PAD: return slice_pad(o, i, n);
    case K_CONCAT: return concat(o, i, n);
    case K_STATE:
    case K_REPLACE_SLICE:
    case K_ONE_HOT:
    case K_GATHER:
    case K_SCATTER_ADD:
    case K_TOPK:
    case K_CONV:
    case K_POOL:
    case K_TUPLE:
    case K_GET: return as_is(o, i);
    }
    return as_is(o, i);
}

/* Whether node n only permutes its operand's axes. */
static bool transposes(const nest_function *f, const ir_node *n)
{
    if (ir_kind_of(n) != K_RESHAPE)
        return false;
    const ir_node *a = &f->nodes[ir_resolve(f, n->in[0])];
    if (a->rank != n->rank)
        return false;
    for (int k = 0; k < n->rank; k++)
        if (n->shape[k] != a->shape[n->a.order[k]])
            return false;
    return true;
}

bool ir_outer_needed(const nest_function *f)
{
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *n = &f->nodes[i];
        bool plain_before = false;
        for (int k = 0; n->etype != IR_TUPLE && k < n->rank; k++) {
            if (!dim_is_sym(n->shape[k]))
                plain_before = true;
            else if (plain_before && !transposes(f, n))
                return true;
        }
    }
    return false;
}

/* The results, the returned values and the assignments of f, as g's nodes in f's order. */
static bool outer_results(outer *o)
{
    nest_function *f = o->f, *g = o->g;
    g->results = arena_alloc(&g->arena, (size_t)f->nresults * sizeof *g->results + 1);
    g->result_layout = arena_alloc(&g->arena, (size_t)f->nresults + 1);
    g->returned = arena_alloc(&g->arena, (size_t)f->nreturned * sizeof *g->returned + 1);
    g->assigns = arena_alloc(&g->arena, (size_t)f->nassigns * sizeof *g->assigns + 1);
    if (!g->results || !g->result_layout || !g->returned || !g->assigns)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), false;
    for (int32_t i = 0; i < f->nresults; i++) {
        o->node = f->results[i];
        if ((g->results[i] = plain(o, f->results[i])) < 0)
            return false;
        g->result_layout[i] = f->result_layout[i];
    }
    for (int32_t i = 0; i < f->nreturned; i++) {
        o->node = f->returned[i];
        if ((g->returned[i] = plain(o, f->returned[i])) < 0)
            return false;
    }
    for (int32_t i = 0; i < f->nassigns; i++) {
        g->assigns[i] = f->assigns[i];
        o->node = f->assigns[i].node;
        if ((g->assigns[i].node = plain(o, f->assigns[i].node)) < 0)
            return false;
    }
    g->nresults = f->nresults;
    g->nreturned = f->nreturned;
    g->nassigns = f->nassigns;
    g->capassigns = (size_t)f->nassigns;
    g->has_return = true;
    return true;
}

nest_function *ir_outer(nest_function *f)
{
    int32_t *ids = NULL, np = 0;
    if (ir_dims_of(f, &ids, &np))
        return NULL;
    outer o = {.f = f};
    o.map = calloc((size_t)dim_entry_count(f) + 1, sizeof *o.map);
    o.l = malloc((size_t)f->nnodes * sizeof *o.l + 1);
    o.plain = malloc((size_t)f->nnodes * sizeof *o.plain + 1);
    nest_function *g = o.map && o.l && o.plain ? calloc(1, sizeof *g) : NULL;
    o.g = g;
    bool ok = g && (g->name = arena_strdup(&g->arena, f->name));
    if (!ok)
        ir_error(f, NEST_ERR_NOMEM, "out of memory");
    if (g) {
        g->module = f->module;
        g->detached = true;
        g->origin = f;
        g->line = f->line;
        g->col = f->col;
    }
    /* the names first, in the order of the ABI, so that g's order is f's */
    for (int32_t k = 0; ok && k < np; k++)
        ok = tr(&o, DIM_SYM0 - ids[k]) != DIM_NONE;
    for (int32_t i = 0; ok && i < f->nnodes; i++)
        o.plain[i] = -1;
    for (int32_t i = 0; ok && i < f->nnodes; i++) {
        int32_t before = g->nnodes;
        ok = outer_node(&o, i);
        /* the user's name on what was built for it */
        const ir_node *n = &f->nodes[i];
        if (ok && n->name && ir_kind_of(n) != K_PARAM && o.l[i].g >= before &&
            ir_set_name(g, o.l[i].g, n->name) != NEST_OK) {
            ir_error(f, NEST_ERR_NOMEM, "out of memory");
            ok = false;
        }
        if (!ok && o.why)
            ir_refuse_dims(f, i, o.why, "");
    }
    ok = ok && outer_results(&o);
    if (ok) /* what conform and rebroadcast left behind (the passes check every node) */
        ir_prune(g);
    free(ids);
    free(o.map);
    free(o.l);
    free(o.plain);
    if (!ok) {
        ir_function_destroy(g);
        return NULL;
    }
    return g;
}
