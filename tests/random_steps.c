/*
 * random_steps.c - the core steps of the random graph generator (randgraph.c): element-wise
 * arithmetic, comparisons and select, convert, broadcast, reshape, slices, concat, reductions,
 * dot, constants and tuples, each with the interval and error bound (info) of its result.
 * Included by randgraph.c after its helpers.
 */
/* ---- the ops, with their infos ---- */

static void corners(double a0, double a1, double b0, double b1, double (*f)(double, double),
                    double *lo, double *hi)
{
    double c[4] = {f(a0, b0), f(a0, b1), f(a1, b0), f(a1, b1)};
    *lo = fmin(fmin(c[0], c[1]), fmin(c[2], c[3]));
    *hi = fmax(fmax(c[0], c[1]), fmax(c[2], c[3]));
}

static double mul_d(double a, double b) { return a * b; }
static double div_d(double a, double b) { return a / b; }

/* The info of a elementwise-op b (same type); false: not worth generating. */
static bool binary_info(opk op, nest_type t, const info *a, const info *b, info *r)
{
    bool ex = a->err == 0 && b->err == 0;
    double u = unit(t), ma = mag(a), mb = mag(b);
    *r = (info){0, 0, 0, a->q < b->q ? a->q : b->q, false};
    switch (op) {
    case O_ADD:
        r->lo = a->lo + b->lo, r->hi = a->hi + b->hi;
        r->err = a->err + b->err;
        break;
    case O_SUBTRACT:
        r->lo = a->lo - b->hi, r->hi = a->hi - b->lo;
        r->err = a->err + b->err;
        break;
    case O_MULTIPLY:
        corners(a->lo, a->hi, b->lo, b->hi, mul_d, &r->lo, &r->hi);
        r->err = ma * b->err + mb * a->err + a->err * b->err;
        r->q = a->q + b->q;
        break;
    case O_MAXIMUM:
        r->lo = fmax(a->lo, b->lo), r->hi = fmax(a->hi, b->hi);
        r->err = fmax(a->err, b->err);
        break;
    case O_MINIMUM:
        r->lo = fmin(a->lo, b->lo), r->hi = fmin(a->hi, b->hi);
        r->err = fmax(a->err, b->err);
        break;
    case O_DIVIDE:
        if (!isf(t)) {
            r->lo = -ma, r->hi = ma;
            break;
        }
        {
            double bmin = b->lo > 0 ? b->lo : -b->hi; /* |b| at least */
            if (!(b->lo >= 0.25 || b->hi <= -0.25) || b->err > 0.1 * bmin)
                return false;
            corners(a->lo, a->hi, b->lo, b->hi, div_d, &r->lo, &r->hi);
            r->err = (a->err + mag(r) * b->err) / (bmin - b->err);
            ex = false;
        }
        break;
    case O_POWER:
        if (!isf(t)) {
            if (b->lo >= 0 && b->hi <= 6 && ma <= 100) {
                double m = pow(ma, b->hi) + 1;
                r->lo = -m, r->hi = m;
            } else {
                r->lo = int_min(t), r->hi = int_max(t);
            }
            break;
        }
        if (!(a->lo >= 0.25) || a->err > 0.1 * a->lo || mb > 3)
            return false;
        corners(a->lo, a->hi, b->lo, b->hi, pow, &r->lo, &r->hi);
        r->err = mag(r) * (mb * a->err / (a->lo - a->err) +
                           fmax(fabs(log(a->lo)), fabs(log(a->hi))) * b->err) * 1.1 +
                 8 * u * mag(r);
        ex = false;
        break;
    default:
        return false;
    }
    if (!ex && isf(t))
        r->err += u * mag(r);
    return settle(t, r, ex);
}

static bool unary_info(opk op, nest_type t, const info *a, info *r)
{
    double u = unit(t);
    bool ex = a->err == 0;
    *r = *a;
    switch (op) {
    case O_NEGATIVE:
        r->lo = -a->hi, r->hi = -a->lo;
        break;
    case O_ABS:
        r->lo = a->lo >= 0 ? a->lo : a->hi <= 0 ? -a->hi : 0;
        r->hi = mag(a);
        break;
    case O_EXP:
        if (a->hi > (t == NEST_F32 ? 12 : 30) || a->err > 0.1)
            return false;
        r->lo = exp(a->lo), r->hi = exp(a->hi);
        r->err = exp(a->hi) * a->err * 1.2 + 8 * u * r->hi;
        ex = false;
        break;
    case O_LOG:
        if (!(a->lo >= 0.25) || a->err > 0.1 * a->lo)
            return false;
        r->lo = log(a->lo), r->hi = log(a->hi);
        r->err = a->err / (a->lo - a->err) + 8 * u * mag(r);
        ex = false;
        break;
    case O_SQRT:
        if (!(a->lo >= 0) || (a->err > 0 && (a->lo < 0.25 || a->err > 0.1 * a->lo)))
            return false;
        r->lo = sqrt(a->lo), r->hi = sqrt(a->hi);
        r->err = (a->err > 0 ? a->err / (2 * sqrt(a->lo - a->err)) : 0) + u * r->hi;
        ex = false;
        break;
    case O_TANH:
        r->lo = tanh(a->lo), r->hi = tanh(a->hi);
        r->err = a->err + 8 * u;
        ex = false;
        break;
    default:
        return false;
    }
    return settle(t, r, ex);
}

static val *ew_binary(gen *g, opk op, val *a, val *b)
{
    info r;
    if (!binary_info(op, a->t, &a->in, &b->in, &r))
        return NULL;
    static nest_value (*const build[])(nest_function *, nest_value, nest_value) = {
        [O_ADD] = nest_add, [O_SUBTRACT] = nest_subtract, [O_MULTIPLY] = nest_multiply,
        [O_DIVIDE] = nest_divide, [O_MAXIMUM] = nest_maximum, [O_MINIMUM] = nest_minimum,
        [O_POWER] = nest_power,
    };
    a->uses++, b->uses++;
    return push(g, build[op](g->f, a->v, b->v), r, "an element-wise binary op");
}

static val *ew_unary(gen *g, opk op, val *a)
{
    info r;
    if (!unary_info(op, a->t, &a->in, &r))
        return NULL;
    static nest_value (*const build[])(nest_function *, nest_value) = {
        [O_NEGATIVE] = nest_negative, [O_ABS] = nest_abs, [O_EXP] = nest_exp,
        [O_LOG] = nest_log, [O_SQRT] = nest_sqrt, [O_TANH] = nest_tanh,
    };
    a->uses++;
    return push(g, build[op](g->f, a->v), r, "an element-wise unary op");
}

/* a turned into a float value with elements at least 0.25 (for log, sqrt, pow, divide). */
static val *positive(gen *g, val *a)
{
    if (a->in.lo >= 0.25 && a->in.err <= 0.1 * a->in.lo)
        return a;
    int how = below(&g->r, 3);
    if (how == 0 && a->in.lo >= -1 && a->in.hi <= 4 && a->in.err <= 0.01)
        return ew_unary(g, O_EXP, a); /* exp of something bounded */
    if (how <= 1) { /* abs(a) + c */
        val *ab = ew_unary(g, O_ABS, a);
        val *c = ab ? splat(g, a->t, 0.25 * (2 + below(&g->r, 6)), a->rank, a->shape) : NULL;
        return c ? ew_binary(g, O_ADD, ab, c) : NULL;
    }
    /* maximum(a, c) */
    int ia = (int)(a - g->vals);
    val *c = obtain(g, a->t, a->rank, a->shape, false);
    if (!c || c->in.lo < 0.25 || c->in.err > 0.1 * c->in.lo)
        c = splat(g, a->t, 0.25 * (1 + below(&g->r, 8)), a->rank, a->shape);
    return c ? ew_binary(g, O_MAXIMUM, &g->vals[ia], c) : NULL;
}

/* a squeezed into [-1, 1] when it is large. */
static val *bounded(gen *g, val *a, double limit)
{
    if (mag(&a->in) <= limit)
        return a;
    return ew_unary(g, O_TANH, a);
}

static val *convert(gen *g, val *a, nest_type to)
{
    if (!convertible(a, to))
        return NULL;
    info r = a->in;
    bool ex = a->in.err == 0;
    if (a->t == NEST_BOOL) {
        r = (info){0, 1, 0, 0, false};
    } else if (to == NEST_BOOL) {
        r = (info){0, 1, 0, 0, false};
    } else if (isf(to) && !isf(a->t)) {
        r.q = 0;
    } else if (!isf(to) && isf(a->t)) {
        r.lo = fmax(fmin(trunc(a->in.lo), int_max(to)), int_min(to));
        r.hi = fmax(fmin(trunc(a->in.hi), int_max(to)), int_min(to));
        r.q = 0;
    }
    if (!settle(to, &r, ex))
        return NULL;
    a->uses++;
    return push(g, nest_convert(g->f, a->v, to), r, "convert");
}

static nest_type rand_type(gen *g)
{
    static const nest_type types[] = {NEST_F32, NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_F32,
                                      NEST_F64, NEST_I32, NEST_BOOL};
    return types[below(&g->r, countof(types))];
}

static bool is_numeric_val(const val *v) { return isnum(v->t); }
static bool is_float_val(const val *v) { return isf(v->t); }
static bool is_exact_val(const val *v) { return exact(v); }
static bool is_exact_numeric(const val *v) { return exact(v) && isnum(v->t); }
static bool has_axes(const val *v) { return v->rank > 0; }
static bool below_max_rank(const val *v) { return v->rank < MAXRANK; }
static bool dot_operand(const val *v) { return isnum(v->t) && v->rank <= 2; }

static bool step_binary(gen *g)
{
    static const opk ops[] = {O_ADD, O_ADD, O_SUBTRACT, O_SUBTRACT, O_MULTIPLY,
                                O_MULTIPLY, O_DIVIDE, O_MAXIMUM, O_MINIMUM, O_POWER};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, is_numeric_val);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *b = obtain(g, a->t, a->rank, a->shape, false);
    a = &g->vals[ia];
    if (!b)
        return false;
    int ib = (int)(b - g->vals);
    if (isf(a->t) && op == O_DIVIDE) {
        b = positive(g, b);
        if (b && chance(&g->r, 30))
            b = ew_unary(g, O_NEGATIVE, b);
    } else if (isf(a->t) && op == O_POWER) {
        val *base = positive(g, a);
        if (!base)
            return false;
        ia = (int)(base - g->vals);
        b = bounded(g, &g->vals[ib], 3);
    } else if (isf(a->t) && op == O_MULTIPLY) {
        a = bounded(g, a, 1e4);
        ia = a ? (int)(a - g->vals) : -1;
        b = a ? bounded(g, &g->vals[ib], 1e4) : NULL;
    }
    if (!b || ia < 0)
        return false;
    a = &g->vals[ia];
    return chance(&g->r, 50) || op == O_DIVIDE || op == O_POWER || op == O_SUBTRACT
               ? ew_binary(g, op, a, b) != NULL
               : ew_binary(g, op, b, a) != NULL;
}

static bool step_unary(gen *g)
{
    static const opk ops[] = {O_NEGATIVE, O_ABS, O_EXP, O_LOG, O_SQRT, O_TANH};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, op == O_NEGATIVE || op == O_ABS ? is_numeric_val : is_float_val);
    if (!a)
        return false;
    if (op == O_LOG || (op == O_SQRT && (a->in.lo < 0 || a->in.err > 0 || gen_for_gradients)))
        a = positive(g, a);
    else if (op == O_EXP)
        a = bounded(g, a, 4);
    return a && ew_unary(g, op, a) != NULL;
}

static bool step_compare(gen *g)
{
    static const opk ops[] = {O_LESS, O_GREATER, O_EQUAL};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, op == O_EQUAL ? is_exact_val : is_exact_numeric);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *b = obtain(g, a->t, a->rank, a->shape, true);
    a = &g->vals[ia];
    if (!b || !exact(b))
        return false;
    nest_value c = op == O_LESS      ? nest_less(g->f, a->v, b->v)
                   : op == O_GREATER ? nest_greater(g->f, a->v, b->v)
                                      : nest_equal(g->f, a->v, b->v);
    b->uses++;
    val *cv = push(g, c, (info){0, 1, 0, 0, false}, "a comparison");
    if (!cv || chance(&g->r, 25))
        return cv != NULL;
    int ic = (int)(cv - g->vals);
    nest_type t = chance(&g->r, 50) ? a->t : rand_type(g);
    val *x = obtain(g, t, cv->rank, cv->shape, false);
    int ix = x ? (int)(x - g->vals) : -1;
    val *y = x ? obtain(g, t, cv->rank, cv->shape, false) : NULL;
    if (!y)
        return false;
    x = &g->vals[ix];
    cv = &g->vals[ic];
    info r = {fmin(x->in.lo, y->in.lo), fmax(x->in.hi, y->in.hi), fmax(x->in.err, y->in.err),
              x->in.q < y->in.q ? x->in.q : y->in.q, false};
    x->uses++, y->uses++, cv->uses++;
    return push(g, nest_select(g->f, cv->v, x->v, y->v), r, "select") != NULL;
}

static bool step_convert(gen *g)
{
    val *a = pick(g, NULL);
    if (!a)
        return false;
    nest_type to = rand_type(g);
    if (!convertible(a, to))
        to = chance(&g->r, 50) ? NEST_F64 : NEST_F32;
    return convert(g, a, to) != NULL;
}

static bool step_broadcast(gen *g)
{
    val *a = pick(g, below_max_rank);
    if (!a)
        return false;
    int rank = a->rank + 1 + below(&g->r, MAXRANK - a->rank);
    int64_t shape[MAXRANK], axes[MAXRANK];
    int na = 0;
    /* choose which output axes are new */
    uint32_t mask = 0;
    while (__builtin_popcount(mask) < rank - a->rank)
        mask |= 1u << below(&g->r, rank);
    for (int tries = 0; tries < 10; tries++) {
        na = 0;
        for (int k = 0, j = 0; k < rank; k++) {
            if (mask & (1u << k)) {
                shape[k] = rand_dim(g);
                axes[na++] = k;
            } else {
                shape[k] = a->shape[j++];
            }
        }
        if (volume(rank, shape) <= g->cap)
            return push(g, nest_broadcast(g->f, a->v, rank, shape, na, axes), a->in,
                        "broadcast") != NULL;
    }
    return false;
}

/* Random dims with the given product (count > 0). */
static bool factor(gen *g, int64_t count, int rank, int64_t *shape)
{
    if (rank == 0)
        return count == 1;
    int64_t rest = count;
    for (int k = 0; k < rank - 1; k++) {
        int64_t divs[64];
        int nd = 0;
        for (int64_t d = 1; d <= rest && nd < 64; d++)
            if (rest % d == 0)
                divs[nd++] = d;
        shape[k] = divs[below(&g->r, nd)];
        rest /= shape[k];
    }
    shape[rank - 1] = rest;
    /* shuffle so that the large remainder is not always last */
    for (int k = rank - 1; k > 0; k--) {
        int j = below(&g->r, k + 1);
        int64_t t = shape[k];
        shape[k] = shape[j];
        shape[j] = t;
    }
    return true;
}

static bool step_reshape(gen *g)
{
    val *a = pick(g, NULL);
    if (!a)
        return false;
    int64_t order[MAXRANK], shape[MAXRANK];
    int rank = a->rank;
    for (int k = 0; k < a->rank; k++)
        order[k] = k;
    int mode = below(&g->r, 3);
    if (mode == 0 && a->rank >= 2) { /* a transpose */
        for (int k = a->rank - 1; k > 0; k--) {
            int j = below(&g->r, k + 1);
            int64_t t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        for (int k = 0; k < rank; k++)
            shape[k] = a->shape[order[k]];
    } else if (mode == 1) { /* contiguous: merge two adjacent dims or split one */
        memcpy(shape, a->shape, sizeof shape);
        if (a->rank >= 2 && (a->rank == MAXRANK || chance(&g->r, 50))) {
            int k = below(&g->r, a->rank - 1);
            shape[k] *= shape[k + 1];
            memmove(&shape[k + 1], &shape[k + 2], (size_t)(a->rank - k - 2) * sizeof *shape);
            rank--;
        } else if (a->rank < MAXRANK) {
            int k = a->rank ? below(&g->r, a->rank) : 0;
            int64_t d = a->rank ? a->shape[k] : 1, f = 1;
            for (int64_t x = 2; x <= d; x++)
                if (d % x == 0 && chance(&g->r, 50)) {
                    f = x;
                    break;
                }
            memmove(&shape[k + 1], &shape[k], (size_t)(a->rank - k) * sizeof *shape);
            shape[k] = f;
            shape[k + 1] = a->rank ? d / f : 1;
            rank++;
        }
    } else { /* any order, any shape of the same count */
        for (int k = a->rank - 1; k > 0; k--) {
            int j = below(&g->r, k + 1);
            int64_t t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        rank = below(&g->r, MAXRANK + 1);
        if (a->count == 0) {
            if (rank == 0)
                rank = 1;
            for (int k = 0; k < rank; k++)
                shape[k] = 1 + below(&g->r, 3);
            shape[below(&g->r, rank)] = 0;
        } else if (!factor(g, a->count, rank, shape)) {
            rank = 1;
            shape[0] = a->count;
        }
    }
    bool identity = true;
    for (int k = 0; k < a->rank; k++)
        identity &= order[k] == k;
    return push(g, nest_reshape(g->f, a->v, identity && chance(&g->r, 50) ? NULL : order, rank,
                                shape),
                a->in, "reshape") != NULL;
}

static bool step_slice(gen *g)
{
    val *a = pick(g, has_axes);
    if (!a)
        return false;
    int64_t lo[MAXRANK], up[MAXRANK], st[MAXRANK];
    for (int k = 0; k < a->rank; k++) {
        int64_t d = a->shape[k];
        if (chance(&g->r, 30)) { /* the whole axis */
            lo[k] = 0, up[k] = d, st[k] = 1;
            continue;
        }
        lo[k] = below(&g->r, (int)d + 1);
        up[k] = lo[k] + below(&g->r, (int)(d - lo[k]) + 1);
        if (up[k] == lo[k] && d > 0 && chance(&g->r, 80)) /* empty slices now and then */
            up[k] = d, lo[k] = below(&g->r, (int)d);
        st[k] = 1 + below(&g->r, 3);
    }
    bool unit_steps = true;
    for (int k = 0; k < a->rank; k++)
        unit_steps &= st[k] == 1;
    return push(g, nest_slice(g->f, a->v, lo, up, unit_steps && chance(&g->r, 50) ? NULL : st),
                a->in, "slice") != NULL;
}

/* A concat along axis of the values at idx. */
static val *concat_of(gen *g, const int *idx, int nparts, int axis)
{
    nest_value parts[3];
    info r = g->vals[idx[0]].in;
    for (int i = 0; i < nparts; i++) {
        val *p = &g->vals[idx[i]];
        p->uses++;
        parts[i] = p->v;
        r.lo = fmin(r.lo, p->in.lo);
        r.hi = fmax(r.hi, p->in.hi);
        r.err = fmax(r.err, p->in.err);
        r.q = r.q < p->in.q ? r.q : p->in.q;
    }
    return push(g, nest_concat(g->f, nparts, parts, axis), r, "concat");
}

/* A part of a concat: now and then a concat itself along the same axis, whose boundaries the
 * outer one shifts when it selects its parts. */
static val *part_of(gen *g, nest_type t, int rank, const int64_t *shape, int axis)
{
    if (shape[axis] >= 2 && chance(&g->r, 30)) {
        int64_t s1[MAXRANK], s2[MAXRANK];
        memcpy(s1, shape, sizeof s1);
        memcpy(s2, shape, sizeof s2);
        s1[axis] = 1 + below(&g->r, (int)shape[axis] - 1);
        s2[axis] = shape[axis] - s1[axis];
        val *x = obtain(g, t, rank, s1, false);
        int idx[2] = {x ? (int)(x - g->vals) : -1, -1};
        val *y = x ? obtain(g, t, rank, s2, false) : NULL;
        if (!y)
            return NULL;
        idx[1] = (int)(y - g->vals);
        return concat_of(g, idx, 2, axis);
    }
    return obtain(g, t, rank, shape, false);
}

static bool step_concat(gen *g)
{
    val *a = pick(g, has_axes);
    if (!a)
        return false;
    int axis = below(&g->r, a->rank), nparts = 2 + (chance(&g->r, 30) ? 1 : 0);
    int idx[3];
    idx[0] = (int)(a - g->vals);
    for (int i = 1; i < nparts; i++) {
        int64_t shape[MAXRANK];
        memcpy(shape, g->vals[idx[0]].shape, sizeof shape);
        shape[axis] = chance(&g->r, 10) ? 0 : 1 + below(&g->r, g->maxdim);
        int64_t vol = volume(g->vals[idx[0]].rank, shape);
        if (vol > g->cap / 3)
            shape[axis] = 1;
        val *p = part_of(g, g->vals[idx[0]].t, g->vals[idx[0]].rank, shape, axis);
        if (!p)
            return false;
        idx[i] = (int)(p - g->vals);
    }
    /* a random position for the first part */
    int pos = below(&g->r, nparts), t = idx[0];
    idx[0] = idx[pos];
    idx[pos] = t;
    return concat_of(g, idx, nparts, axis) != NULL;
}

/* op (O_SUM, O_MAX or O_MIN) of a over the axes of its own where all, else over a random few. */
static val *reduce_val(gen *g, opk op, val *a, bool all)
{
    int64_t axes[MAXRANK];
    int na = 0;
    double n = 1;
    for (int k = 0; k < a->rank; k++)
        if (all || chance(&g->r, 50)) {
            axes[na++] = k;
            n *= (double)a->shape[k];
        }
    info r = a->in;
    nest_type t = a->t;
    if (op == O_SUM) {
        r.lo = n == 0 ? 0 : fmin(n * a->in.lo, a->in.lo);
        r.hi = n == 0 ? 0 : fmax(n * a->in.hi, a->in.hi);
        if (isf(t))
            r.err = n * a->in.err + (n > 1 ? n * n * unit(t) * mag(&a->in) : 0);
        if (!settle(t, &r, a->in.err == 0))
            return NULL;
    } else if (n == 0) {
        if (isf(t))
            r = (info){-INFINITY, INFINITY, 0, 0, true};
        else
            r = (info){int_min(t), int_max(t), 0, 0, false};
    }
    nest_value v = op == O_SUM   ? nest_sum(g->f, a->v, na, axes)
                   : op == O_MAX ? nest_max(g->f, a->v, na, axes)
                                  : nest_min(g->f, a->v, na, axes);
    a->uses++;
    return push(g, v, r, "a reduction");
}

static bool step_reduce(gen *g)
{
    static const opk ops[] = {O_SUM, O_SUM, O_MAX, O_MIN};
    opk op = ops[below(&g->r, countof(ops))];
    val *a = pick(g, is_numeric_val);
    if (!a)
        return false;
    a->uses--; /* pick counted the use reduce_val() counts */
    return reduce_val(g, op, a, chance(&g->r, 25)) != NULL;
}

/* The values nothing reads (numbers, not the parameters), each summed to a scalar in f64, added
 * up: the graph's root, which every such value reaches (else a graph of thousands of ops is
 * mostly dead code). Values too large are squeezed by tanh first. NULL if there are none. */
static val *gather_leaves(gen *g)
{
    int last = g->n, acc = -1;
    for (int i = g->np; i < last && !g->broken; i++) {
        val *v = &g->vals[i];
        if (v->uses != 0 || v->in.special || !isnum(v->t) || v->count == 0 || v->count > 1 << 16)
            continue;
        val *s = reduce_val(g, O_SUM, v, true);
        val *d = s ? convert(g, s, NEST_F64) : NULL;
        val *b = d ? bounded(g, d, 1e6) : NULL;
        if (!b)
            continue;
        if (acc < 0) {
            acc = (int)(b - g->vals);
            continue;
        }
        val *sum = ew_binary(g, O_ADD, &g->vals[acc], b);
        if (sum)
            acc = (int)(sum - g->vals);
    }
    return acc >= 0 && !g->broken ? &g->vals[acc] : NULL;
}

static val *make_dot(gen *g, int ia, int ib, double n, bool swap);

static bool step_dot(gen *g)
{
    val *a = pick(g, dot_operand);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    nest_type t = a->t;
    int64_t shape[MAXRANK];
    int rank;
    double n = 1;
    if (a->rank == 0) { /* scaling */
        rank = below(&g->r, 3);
        rand_shape(g, rank, shape);
    } else {
        int64_t k = a->shape[a->rank - 1];
        n = (double)k;
        rank = chance(&g->r, 50) ? 1 : 2;
        shape[0] = k;
        if (rank == 2) {
            shape[1] = rand_dim(g);
            if (volume(a->rank, a->shape) * (shape[1] ? shape[1] : 1) > g->cap)
                shape[1] = 1;
        }
        if (chance(&g->r, 10)) /* the tensor on the left, the scalar on the right */
            rank = 0;
    }
    if (a->rank > 0 && rank == 0)
        n = 1;
    val *b = obtain(g, t, rank, shape, false);
    if (!b)
        return false;
    return make_dot(g, ia, (int)(b - g->vals), n, g->vals[ia].rank == 0 && chance(&g->r, 50)) !=
           NULL;
}

/* dot(vals[ia], vals[ib]) contracting n elements (swapped: dot(b, a)); float operands are first
 * squeezed into a range where the sum's bound stays useful. */
static val *make_dot(gen *g, int ia, int ib, double n, bool swap)
{
    nest_type t = g->vals[ia].t;
    if (isf(t)) {
        val *ba = bounded(g, &g->vals[ia], 100);
        ia = ba ? (int)(ba - g->vals) : -1;
        val *bb = ba ? bounded(g, &g->vals[ib], 100) : NULL;
        ib = bb ? (int)(bb - g->vals) : -1;
        if (ia < 0 || ib < 0)
            return NULL;
    }
    val *a = &g->vals[ia], *b = &g->vals[ib];
    a->uses++, b->uses++;
    info p;
    if (!binary_info(O_MULTIPLY, t, &a->in, &b->in, &p))
        return NULL;
    info r = p;
    if (n != 1) {
        r.lo = n == 0 ? 0 : fmin(n * p.lo, p.lo);
        r.hi = n == 0 ? 0 : fmax(n * p.hi, p.hi);
        if (isf(t))
            r.err = n * p.err + n * n * unit(t) * mag(&p);
        if (!settle(t, &r, p.err == 0))
            return NULL;
    }
    return push(g, swap ? nest_dot(g->f, b->v, a->v) : nest_dot(g->f, a->v, b->v), r, "dot");
}

/* A dense layer, maximum(dot(x, w) + broadcast(b), 0) or a part of it: the product of
 * matrices is tiled from 16 columns on, and the bias and ReLU that follow are absorbed into
 * the tile's store. */
static bool step_dense(gen *g)
{
    static const nest_type types[] = {NEST_F32, NEST_F32, NEST_F64, NEST_I32, NEST_I64};
    nest_type t = types[below(&g->r, countof(types))];
    int64_t m = 1 + below(&g->r, g->large ? 70 : 6), k = below(&g->r, g->large ? 70 : 9);
    int64_t n = chance(&g->r, 20) ? 1 + below(&g->r, 15) : 16 + below(&g->r, g->large ? 150 : 60);
    if (chance(&g->r, 10))
        m = 0;
    while (m > 1 && (m * n > g->cap || m * k > g->cap))
        m /= 2;
    while (k > 1 && (k * n > g->cap || m * k > g->cap))
        k /= 2;
    if (m * n > g->cap || k * n > g->cap)
        return false;
    val *x = obtain(g, t, 2, (int64_t[]){m, k}, false);
    int ix = x ? (int)(x - g->vals) : -1;
    val *w = x ? obtain(g, t, 2, (int64_t[]){k, n}, false) : NULL;
    val *h = w ? make_dot(g, ix, (int)(w - g->vals), (double)k, false) : NULL;
    if (!h || chance(&g->r, 20))
        return h != NULL;
    int ih = (int)(h - g->vals);
    val *bias = obtain(g, t, 1, (int64_t[]){n}, false);
    val *bb = bias ? push(g, nest_broadcast(g->f, bias->v, 2, (int64_t[]){m, n}, 1,
                                            (int64_t[]){0}),
                          bias->in, "broadcast of a bias")
                   : NULL;
    val *z = bb ? ew_binary(g, O_ADD, &g->vals[ih], bb) : NULL;
    if (!z || chance(&g->r, 30))
        return z != NULL;
    val *zero = splat(g, t, 0, 2, (int64_t[]){m, n});
    int iz = (int)(z - g->vals);
    return zero && ew_binary(g, O_MAXIMUM, &g->vals[iz], zero) != NULL;
}

/* A row-wise pattern: reduce over some axes, broadcast back, combine with the operand; for
 * floats now and then a whole softmax, exp(x - max) / sum(exp(x - max)). */
static val *reduce_back(gen *g, val *a, opk op, uint32_t mask)
{
    int64_t axes[MAXRANK];
    int na = 0;
    double n = 1;
    for (int k = 0; k < a->rank; k++)
        if (mask & (1u << k)) {
            axes[na++] = k;
            n *= (double)a->shape[k];
        }
    if (n == 0)
        return NULL;
    info r = a->in;
    if (op == O_SUM) {
        r.lo = fmin(n * a->in.lo, a->in.lo);
        r.hi = fmax(n * a->in.hi, a->in.hi);
        if (isf(a->t))
            r.err = n * a->in.err + (n > 1 ? n * n * unit(a->t) * mag(&a->in) : 0);
        if (!settle(a->t, &r, a->in.err == 0))
            return NULL;
    }
    int ia = (int)(a - g->vals);
    a->uses++;
    val *red = push(g,
                    op == O_SUM   ? nest_sum(g->f, a->v, na, axes)
                    : op == O_MAX ? nest_max(g->f, a->v, na, axes)
                                  : nest_min(g->f, a->v, na, axes),
                    r, "a row reduction");
    if (!red)
        return NULL;
    red->uses++;
    a = &g->vals[ia];
    /* mostly back along the reduced axes; sometimes along others of the same extents, so that
     * a row reads what other rows computed (a transposed use of a row reduction) */
    if (chance(&g->r, 30)) {
        uint32_t masks[16];
        int nm = 0;
        for (uint32_t m = 0; m < (1u << a->rank); m++) {
            if (__builtin_popcount(m) != na)
                continue;
            bool fits = true;
            for (int k = 0, j = 0; k < a->rank && fits; k++)
                if (!(m & (1u << k)))
                    fits = a->shape[k] == red->shape[j++];
            if (fits)
                masks[nm++] = m;
        }
        uint32_t m = masks[below(&g->r, nm)];
        for (int k = 0, j = 0; k < a->rank; k++)
            if (m & (1u << k))
                axes[j++] = k;
    }
    return push(g, nest_broadcast(g->f, red->v, a->rank, a->shape, na, axes), r,
                "a broadcast back");
}

static bool step_rows(gen *g)
{
    val *a = pick(g, has_axes);
    if (a && chance(&g->r, 30)) { /* equal extents, so reductions can come back transposed */
        int64_t d = 2 + below(&g->r, g->maxdim), shape[MAXRANK] = {d, d, d, d};
        a = obtain(g, a->t, 2 + below(&g->r, 2), shape, false);
    }
    if (!a || !isnum(a->t) || a->count == 0)
        return false;
    int ia = (int)(a - g->vals);
    uint32_t mask = 0;
    if (chance(&g->r, 60))
        mask = 1u << (a->rank - 1); /* the last axis: rows */
    while (!mask)
        mask = (uint32_t)below(&g->r, 1 << a->rank);
    if (isf(a->t) && chance(&g->r, 50)) { /* softmax */
        val *x = bounded(g, a, 4);
        int ix = x ? (int)(x - g->vals) : -1;
        val *m = x ? reduce_back(g, x, O_MAX, mask) : NULL;
        val *d = m ? ew_binary(g, O_SUBTRACT, &g->vals[ix], m) : NULL;
        val *e = d ? ew_unary(g, O_EXP, d) : NULL;
        int ie = e ? (int)(e - g->vals) : -1;
        val *s = e ? reduce_back(g, e, O_SUM, mask) : NULL;
        val *ps = s ? positive(g, s) : NULL;
        return ps && ew_binary(g, O_DIVIDE, &g->vals[ie], ps) != NULL;
    }
    static const opk reds[] = {O_SUM, O_MAX, O_MIN};
    static const opk ops[] = {O_SUBTRACT, O_ADD, O_MULTIPLY, O_MAXIMUM, O_MINIMUM};
    val *b = reduce_back(g, a, reds[below(&g->r, 3)], mask);
    return b && ew_binary(g, ops[below(&g->r, 5)], &g->vals[ia], b) != NULL;
}

static bool step_const(gen *g)
{
    int rank = below(&g->r, MAXRANK + 1);
    int64_t shape[MAXRANK];
    rand_shape(g, rank, shape);
    return new_const(g, rand_type(g), rank, shape) != NULL;
}

static bool step_tuple(gen *g)
{
    val *a = pick(g, NULL);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *b = pick(g, NULL);
    int ib = (int)(b - g->vals);
    nest_value parts[2] = {g->vals[ia].v, g->vals[ib].v};
    nest_value tu = nest_tuple(g->f, 2, parts);
    int which = below(&g->r, 2);
    return push(g, nest_get(g->f, tu, which), g->vals[which ? ib : ia].in, "get") != NULL;
}
