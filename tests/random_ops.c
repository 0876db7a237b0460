/*
 * random_ops.c - the steps of the random graph generator (randgraph.c) that draw from the op
 * set of real models: element-wise math and logic, product, argmax/argmin, pad, reverse,
 * replace_slice, one_hot, gather, scatter_add, softmax, batch_dot, topk. Included by
 * randgraph.c after its helpers, whose interval-and-error model (info) these steps extend:
 *   - libm functions add 4 ulp of their result and propagate their operand's error through a
 *     bound on the derivative over the operand's interval;
 *   - floor, ceiling and sign take exact operands only (a rounding could cross an integer);
 *   - argmax, argmin, topk and comparisons take exact operands (ties must be the same ties);
 *   - views (pad, reverse, replace_slice, gather) keep their operands' infos;
 *   - scatter_add adds up to as many updates as there are indices to an element, as a sum;
 *   - softmax of n elements adds (20 + n + ln n) ulp of 1 and half its operand's error (the sum
 *     of its partial derivatives is at most 1/2).
 */

static bool is_bool_val(const val *v) { return v->t == NEST_BOOL; }
static bool is_exact_int(const val *v) { return exact(v) && (v->t == NEST_I32 || v->t == NEST_I64); }
static bool is_exact_numeric_axes(const val *v) { return exact(v) && isnum(v->t) && v->rank > 0; }
static bool is_numeric_axes(const val *v) { return isnum(v->t) && v->rank > 0; }

/* ---- element-wise math ---- */

typedef nest_value (*unary_builder)(nest_function *, nest_value);

static bool step_math(gen *g)
{
    static const struct {
        unary_builder fn;
        double lip;     /* |f'| on the operand's interval at most (0: computed below) */
        bool exact_only;
    } ops[] = {
        {nest_sin, 1, false},     {nest_cos, 1, false},      {nest_atan, 1, false},
        {nest_sigmoid, 0.25, false}, {nest_erf, 1.13, false}, {nest_sinh, 0, false},
        {nest_cosh, 0, false},    {nest_asin, 0, false},     {nest_acos, 0, false},
        {nest_relu, 1, false},    {nest_floor, 0, true},     {nest_ceiling, 0, true},
        {nest_sign, 0, true},
    };
    int k = below(&g->r, countof(ops));
    val *a = pick(g, ops[k].exact_only ? is_exact_val : is_float_val);
    if (!a || !isf(a->t))
        return false;
    unary_builder fn = ops[k].fn;
    if (fn == nest_sinh || fn == nest_cosh)
        a = bounded(g, a, 4);
    if (!a || ((fn == nest_asin || fn == nest_acos) && (mag(&a->in) > 0.5 || a->in.err > 1e-3)))
        return false;
    nest_type t = a->t;
    double u = unit(t), lo = a->in.lo, hi = a->in.hi, lip = ops[k].lip;
    info r = a->in;
    bool ex = false;
    if (fn == nest_sin || fn == nest_cos) {
        r.lo = -1, r.hi = 1;
    } else if (fn == nest_atan || fn == nest_sigmoid || fn == nest_erf || fn == nest_sinh ||
               fn == nest_asin) { /* increasing */
        double (*m)(double) = fn == nest_atan ? atan : fn == nest_erf ? erf : fn == nest_sinh ? sinh
                              : fn == nest_asin ? asin : NULL;
        r.lo = m ? m(lo) : 1 / (1 + exp(-lo));
        r.hi = m ? m(hi) : 1 / (1 + exp(-hi));
    } else if (fn == nest_acos) {
        r.lo = acos(hi), r.hi = acos(lo);
    } else if (fn == nest_cosh) {
        r.lo = lo > 0 ? cosh(lo) : hi < 0 ? cosh(hi) : 1;
        r.hi = cosh(mag(&a->in));
    } else if (fn == nest_relu) { /* exact, and its error its operand's */
        r.lo = fmax(lo, 0), r.hi = fmax(hi, 0);
        ex = a->in.err == 0;
    } else { /* floor, ceiling, sign of exact values: exact integers */
        r.lo = fn == nest_floor ? floor(lo) : fn == nest_ceiling ? ceil(lo) : lo < 0 ? -1 : lo > 0;
        r.hi = fn == nest_floor ? floor(hi) : fn == nest_ceiling ? ceil(hi) : hi < 0 ? -1 : hi > 0;
        r.q = a->in.q > 0 ? a->in.q : 0;
        ex = true;
    }
    if (fn == nest_sinh || fn == nest_cosh)
        lip = cosh(mag(&a->in));
    else if (fn == nest_asin || fn == nest_acos)
        lip = 1 / sqrt(1 - mag(&a->in) * mag(&a->in));
    if (fn != nest_relu && !ex) /* libm's 4 ulp; sigmoid's exp, sum and quotient 5 */
        r.err = lip * a->in.err + 12 * u * mag(&r);
    if (!settle(t, &r, ex))
        return false;
    a->uses++;
    return push(g, fn(g->f, a->v), r, "an element-wise math op") != NULL;
}

/* ---- logic and comparisons ---- */

static bool step_logic(gen *g)
{
    if (chance(&g->r, 50)) { /* not, and, or */
        val *a = pick(g, is_bool_val);
        if (!a)
            return false;
        int ia = (int)(a - g->vals);
        info r = {0, 1, 0, 0, false};
        if (chance(&g->r, 30)) {
            a->uses++;
            return push(g, nest_not(g->f, a->v), r, "not") != NULL;
        }
        val *b = obtain(g, NEST_BOOL, a->rank, a->shape, true);
        if (!b)
            return false;
        a = &g->vals[ia];
        a->uses++, b->uses++;
        return push(g, chance(&g->r, 50) ? nest_and(g->f, a->v, b->v) : nest_or(g->f, a->v, b->v),
                    r, "and, or") != NULL;
    }
    int op = below(&g->r, 3);
    val *a = pick(g, op == 0 ? is_exact_val : is_exact_numeric);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *b = obtain(g, a->t, a->rank, a->shape, true);
    if (!b || !exact(b))
        return false;
    a = &g->vals[ia];
    a->uses++, b->uses++;
    nest_value c = op == 0   ? nest_not_equal(g->f, a->v, b->v)
                   : op == 1 ? nest_less_eq(g->f, a->v, b->v)
                             : nest_greater_eq(g->f, a->v, b->v);
    return push(g, c, (info){0, 1, 0, 0, false}, "a comparison") != NULL;
}

/* ---- product, argmax, argmin ---- */

static bool step_product(gen *g)
{
    val *a = pick(g, is_exact_numeric);
    if (!a)
        return false;
    int64_t axes[MAXRANK];
    int na = 0;
    double n = 1;
    for (int k = 0; k < a->rank; k++)
        if (chance(&g->r, 50)) {
            axes[na++] = k;
            n *= (double)a->shape[k];
        }
    nest_type t = a->t;
    info r = a->in;
    double m = mag(&a->in);
    if (isf(t)) {
        if (n > 6 || m > 4)
            return false;
        double p = pow(fmax(m, 1), n);
        r.lo = -p, r.hi = p, r.q = (int)n * a->in.q;
        /* each of the n - 1 products rounds at most once */
        if (!(p < ldexp(1.0, r.q + prec(t))))
            r.err = n * unit(t) * p;
        if (!settle(t, &r, r.err == 0))
            return false;
    } else {
        double p = pow(fmax(m, 1), n);
        r.lo = -p, r.hi = p;
        settle(t, &r, true);
    }
    a->uses++;
    return push(g, nest_product(g->f, a->v, na, axes), r, "a product") != NULL;
}

static bool step_arg(gen *g)
{
    val *a = pick(g, is_exact_numeric_axes);
    if (!a)
        return false;
    int axis = below(&g->r, a->rank);
    if (a->shape[axis] == 0 && a->count == 0) {
        int64_t rest = 1;
        for (int k = 0; k < a->rank; k++)
            rest *= k == axis ? 1 : a->shape[k];
        if (rest > 0)
            return false; /* an empty axis with a result to fill: refused by the rules */
    }
    a->uses++;
    info r = {0, (double)(a->shape[axis] > 0 ? a->shape[axis] - 1 : 0), 0, 0, false};
    return push(g, chance(&g->r, 50) ? nest_argmax(g->f, a->v, axis) : nest_argmin(g->f, a->v, axis),
                r, "argmax, argmin") != NULL;
}

/* ---- views ---- */

static info merge_info(const info *a, const info *b)
{
    return (info){fmin(a->lo, b->lo), fmax(a->hi, b->hi), fmax(a->err, b->err),
                  a->q < b->q ? a->q : b->q, false};
}

static bool step_pad(gen *g)
{
    val *a = pick(g, NULL);
    if (!a)
        return false;
    int ia = (int)(a - g->vals), r = a->rank;
    int64_t lo[MAXRANK], hi[MAXRANK], in[MAXRANK], shape[MAXRANK];
    bool interior = chance(&g->r, 30);
    for (int k = 0; k < r; k++) {
        int64_t n = a->shape[k];
        in[k] = interior ? below(&g->r, 3) : 0;
        int64_t d = n > 0 ? (n - 1) * (in[k] + 1) + 1 : 0;
        lo[k] = below(&g->r, 6) - 2;
        hi[k] = below(&g->r, 6) - 2;
        if (d + lo[k] + hi[k] < 0)
            lo[k] = hi[k] = 0;
        shape[k] = d + lo[k] + hi[k];
    }
    if (volume(r, shape) > g->cap)
        return false;
    double x = (double)(below(&g->r, 4) - 1);
    if (a->t == NEST_BOOL)
        x = x > 0;
    val *c = splat(g, a->t, x, 0, NULL);
    if (!c)
        return false;
    a = &g->vals[ia];
    a->uses++, c->uses++;
    info ri = merge_info(&a->in, &c->in);
    return push(g, nest_pad(g->f, a->v, c->v, lo, hi, chance(&g->r, 50) || interior ? in : NULL),
                ri, "pad") != NULL;
}

static bool step_reverse(gen *g)
{
    val *a = pick(g, has_axes);
    if (!a)
        return false;
    int64_t axes[MAXRANK];
    int na = 0;
    for (int k = 0; k < a->rank; k++)
        if (chance(&g->r, 60))
            axes[na++] = k;
    a->uses++;
    return push(g, nest_reverse(g->f, a->v, na, axes), a->in, "reverse") != NULL;
}

static bool step_replace_slice(gen *g)
{
    val *a = pick(g, has_axes);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    int64_t lo[MAXRANK], up[MAXRANK], st[MAXRANK], box[MAXRANK];
    bool strided = chance(&g->r, 30);
    for (int k = 0; k < a->rank; k++) {
        int64_t d = a->shape[k];
        lo[k] = below(&g->r, (int)d + 1);
        up[k] = lo[k] + below(&g->r, (int)(d - lo[k]) + 1);
        st[k] = strided ? 1 + below(&g->r, 3) : 1;
        box[k] = (up[k] - lo[k] + st[k] - 1) / st[k];
    }
    val *y = obtain(g, a->t, a->rank, box, false);
    if (!y)
        return false;
    a = &g->vals[ia];
    a->uses++, y->uses++;
    info r = merge_info(&a->in, &y->in);
    return push(g, nest_replace_slice(g->f, a->v, y->v, lo, up, strided ? st : NULL), r,
                "replace_slice") != NULL;
}

/* Constant indices of shape ishape (rank ri) for an axis of extent n: anywhere in
 * [-n - 2, n + 2), negative ones counting from the end, the others clamping; i32 or i64. */
static val *take_indices(gen *g, int64_t n, int ri, const int64_t *ishape, const char *what)
{
    nest_type it = chance(&g->r, 50) ? NEST_I32 : NEST_I64;
    int64_t cnt = count_of(ri, ishape);
    int64_t *data = malloc((size_t)(cnt ? cnt : 1) * sizeof *data);
    int32_t *d32 = malloc((size_t)(cnt ? cnt : 1) * sizeof *d32);
    assert_true(data && d32);
    for (int64_t i = 0; i < cnt; i++) {
        data[i] = (int64_t)below(&g->r, (int)(2 * n + 4)) - n - 2;
        d32[i] = (int32_t)data[i];
    }
    val *ix = push(g, nest_constant(g->f, it, ri, ishape, it == NEST_I32 ? (void *)d32 : (void *)data,
                                    cnt ? cnt : 1),
                   (info){(double)(-n - 2), (double)(n + 2), 0, 0, false}, what);
    free(data);
    free(d32);
    return ix;
}

/* An operand (ok), an axis of it, indices' rank and shape, and the shape gather's result
 * (scatter_add's updates) has; NULL when none fits. */
static val *take_operand(gen *g, bool (*ok)(const val *), int *axis, int *ri, int64_t *ishape,
                         int64_t *shape)
{
    val *a = pick(g, ok);
    if (!a)
        return NULL;
    *axis = below(&g->r, a->rank);
    *ri = below(&g->r, 3);
    if (a->rank - 1 + *ri > MAXRANK || a->shape[*axis] == 0)
        return NULL;
    rand_shape(g, *ri, ishape);
    for (int k = 0, j = 0; k < a->rank; k++) {
        if (k != *axis) {
            shape[j++] = a->shape[k];
            continue;
        }
        for (int i = 0; i < *ri; i++)
            shape[j++] = ishape[i];
    }
    return volume(a->rank - 1 + *ri, shape) <= g->cap ? a : NULL;
}

static bool step_gather(gen *g)
{
    int axis, ri;
    int64_t ishape[MAXRANK], shape[MAXRANK];
    val *a = take_operand(g, has_axes, &axis, &ri, ishape, shape);
    int ia = a ? (int)(a - g->vals) : -1;
    val *ix = a ? take_indices(g, a->shape[axis], ri, ishape, "gather's indices") : NULL;
    if (!ix)
        return false;
    a = &g->vals[ia];
    a->uses++, ix->uses++;
    return push(g, nest_gather(g->f, a->v, ix->v, axis), a->in, "gather") != NULL;
}

/* scatter_add: an element takes x's and up to as many updates as there are indices */
static bool step_scatter_add(gen *g)
{
    int axis, ri;
    int64_t ishape[MAXRANK], shape[MAXRANK];
    val *a = take_operand(g, is_numeric_axes, &axis, &ri, ishape, shape);
    if (!a)
        return false;
    int ia = (int)(a - g->vals);
    val *u = obtain(g, a->t, a->rank - 1 + ri, shape, false);
    int iu = u ? (int)(u - g->vals) : -1;
    val *ix = u ? take_indices(g, g->vals[ia].shape[axis], ri, ishape, "scatter_add's indices") : NULL;
    if (!ix)
        return false;
    a = &g->vals[ia];
    u = &g->vals[iu];
    double n = (double)count_of(ri, ishape), m = fmax(mag(&a->in), mag(&u->in));
    info r = a->in;
    r.lo = a->in.lo + n * fmin(u->in.lo, 0);
    r.hi = a->in.hi + n * fmax(u->in.hi, 0);
    r.q = a->in.q < u->in.q ? a->in.q : u->in.q;
    if (isf(a->t))
        r.err = a->in.err + n * u->in.err + (n + 1) * (n + 1) * unit(a->t) * m;
    if (!settle(a->t, &r, exact(a) && exact(u)))
        return false;
    a->uses++, u->uses++, ix->uses++;
    return push(g, nest_scatter_add(g->f, a->v, ix->v, u->v, axis), r, "scatter_add") != NULL;
}

static bool step_one_hot(gen *g)
{
    val *a = pick(g, is_exact_int);
    if (!a || a->rank >= MAXRANK)
        return false;
    int axis = below(&g->r, a->rank + 1);
    int64_t shape[MAXRANK];
    for (int k = 0, j = 0; k <= a->rank; k++)
        shape[k] = k == axis ? below(&g->r, 7) : a->shape[j++];
    if (volume(a->rank + 1, shape) > g->cap)
        return false;
    a->uses++;
    return push(g, nest_one_hot(g->f, a->v, a->rank + 1, shape, axis), (info){0, 1, 0, 0, false},
                "one_hot") != NULL;
}

/* ---- softmax, batch_dot, topk ---- */

static bool step_softmax(gen *g)
{
    val *a = pick(g, is_float_val);
    if (!a)
        return false;
    a = bounded(g, a, 4);
    if (!a || a->in.err > 1e-3)
        return false;
    int64_t axes[MAXRANK];
    int na = 0;
    double n = 1;
    uint32_t mask = a->rank > 0 && chance(&g->r, 60) ? 1u << (a->rank - 1) : 0;
    for (int k = 0; k < a->rank; k++)
        if ((mask & (1u << k)) || chance(&g->r, 30)) {
            axes[na++] = k;
            n *= (double)a->shape[k];
        }
    info r = {0, 1, 0.5 * a->in.err + (20 + n + log(n + 1)) * 2 * unit(a->t), 0, false};
    a->uses++;
    return push(g, nest_softmax(g->f, a->v, na, axes), r, "softmax") != NULL;
}

static bool step_batch_dot(gen *g)
{
    static const nest_type types[] = {NEST_F32, NEST_F32, NEST_F64, NEST_I32, NEST_I64};
    nest_type t = types[below(&g->r, countof(types))];
    int64_t m = 1 + below(&g->r, g->large ? 40 : 5), k = below(&g->r, g->large ? 40 : 7);
    int64_t n = chance(&g->r, 30) ? 1 + below(&g->r, 8) : 16 + below(&g->r, g->large ? 60 : 30);
    int64_t batch = 1 + below(&g->r, 4);
    while ((m * n * batch > g->cap || m * k * batch > g->cap || k * n * batch > g->cap) &&
           batch > 1)
        batch--;
    while (m > 1 && (m * n * batch > g->cap || m * k * batch > g->cap))
        m /= 2;
    while (k > 1 && (k * n * batch > g->cap || m * k * batch > g->cap))
        k /= 2;
    if (m * n * batch > g->cap || k * n * batch > g->cap)
        return false;
    /* a: [batch, m, k] or [m, k]; b: [batch, k, n], [1, k, n] or [k, n]; a vector now and then */
    int form = below(&g->r, 5);
    int ra = form == 4 ? 1 : form == 1 ? 2 : 3, rb = form == 3 ? 1 : form == 2 ? 2 : 3;
    int64_t sa[3], sb[3];
    if (ra == 3)
        sa[0] = batch, sa[1] = m, sa[2] = k;
    else if (ra == 2)
        sa[0] = m, sa[1] = k;
    else
        sa[0] = k;
    if (rb == 3)
        sb[0] = form == 1 ? batch : chance(&g->r, 30) ? 1 : batch, sb[1] = k, sb[2] = n;
    else if (rb == 2)
        sb[0] = k, sb[1] = n;
    else
        sb[0] = k;
    val *x = obtain(g, t, ra, sa, false);
    int ix = x ? (int)(x - g->vals) : -1;
    val *y = x ? obtain(g, t, rb, sb, false) : NULL;
    if (!y)
        return false;
    int iy = (int)(y - g->vals);
    if (isf(t)) {
        val *bx = bounded(g, &g->vals[ix], 100);
        ix = bx ? (int)(bx - g->vals) : -1;
        val *by = bx ? bounded(g, &g->vals[iy], 100) : NULL;
        iy = by ? (int)(by - g->vals) : -1;
        if (ix < 0 || iy < 0)
            return false;
    }
    val *a = &g->vals[ix], *b = &g->vals[iy];
    info p;
    if (!binary_info(O_MULTIPLY, t, &a->in, &b->in, &p))
        return false;
    info r = p;
    double nk = (double)k;
    r.lo = nk == 0 ? 0 : fmin(nk * p.lo, p.lo);
    r.hi = nk == 0 ? 0 : fmax(nk * p.hi, p.hi);
    if (isf(t))
        r.err = nk * p.err + nk * nk * unit(t) * mag(&p);
    if (!settle(t, &r, p.err == 0))
        return false;
    a->uses++, b->uses++;
    return push(g, nest_batch_dot(g->f, a->v, b->v), r, "batch_dot") != NULL;
}

static bool step_topk(gen *g)
{
    val *a = pick(g, is_exact_numeric_axes);
    if (!a)
        return false;
    int axis = below(&g->r, a->rank);
    int64_t n = a->shape[axis], k = below(&g->r, (int)(n < 20 ? n : 20) + 1);
    a->uses++;
    nest_value t = nest_topk(g->f, a->v, k, axis, chance(&g->r, 60));
    if (chance(&g->r, 50))
        return push(g, nest_get(g->f, t, 0), a->in, "topk's values") != NULL;
    return push(g, nest_get(g->f, t, 1), (info){0, (double)(n > 0 ? n - 1 : 0), 0, 0, false},
                "topk's indices") != NULL;
}

/* One step of the op set of real models. */
static bool step_model(gen *g)
{
    switch (below(&g->r, 14)) {
    case 0:
    case 1: return step_math(g);
    case 2: return step_logic(g);
    case 3: return step_product(g);
    case 4: return step_arg(g);
    case 5: return step_pad(g);
    case 6: return step_reverse(g);
    case 7: return step_replace_slice(g);
    case 8: return step_gather(g);
    case 9: return step_one_hot(g);
    case 10: return step_softmax(g);
    case 11: return step_batch_dot(g);
    case 12: return step_scatter_add(g);
    default: return step_topk(g);
    }
}
