/*
 * dims.c - symbolic dimensions: the table of a function's dim names and the sums of products
 * of them (N, N*64, N-1) that its shapes and attributes use.
 *
 * A dim is an int64_t. Values above DIM_SYM0 are plain sizes (or, in pad and slice lists, plain
 * offsets); DIM_SYM0 - k stands for entry k of the function's table. An entry is a polynomial
 * in the names with integer coefficients, in a canonical form (terms sorted, like terms merged,
 * no zero coefficient), hash-consed: equal expressions are the same handle, so comparing two
 * dims, symbolic or not, is comparing two integers. An expression without names is a plain
 * value, never an entry.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct ir_dims {
    dim_expr *e;       /* the entries (malloc'd) */
    size_t n, cap;
    int32_t *slots;    /* open addressing over the entries by hash, -1 empty (malloc'd) */
    size_t nslots;
};

void ir_dims_free(ir_dims *d)
{
    if (!d)
        return;
    free(d->e);
    free(d->slots);
    free(d);
}

int32_t dim_entry_count(const nest_function *f) { return f->dims ? (int32_t)f->dims->n : 0; }

const dim_expr *dim_entry(const nest_function *f, int64_t d)
{
    if (!dim_is_sym(d) || !f->dims)
        return NULL;
    int64_t k = DIM_SYM0 - d;
    return k < (int64_t)f->dims->n ? &f->dims->e[k] : NULL;
}

bool dim_valid(const nest_function *f, int64_t d)
{
    return d >= 0 || dim_entry(f, d) != NULL;
}

/* ---- polynomials ---- */

typedef struct poly {
    int n;
    dim_term t[DIM_MAX_TERMS];
} poly;

static int term_cmp(const dim_term *a, const dim_term *b)
{
    if (a->nf != b->nf)
        return a->nf < b->nf ? -1 : 1;
    for (int i = 0; i < a->nf; i++)
        if (a->f[i] != b->f[i])
            return a->f[i] < b->f[i] ? -1 : 1;
    return 0;
}

static uint64_t poly_hash(const dim_term *t, int n)
{
    uint64_t h = 1469598103934665603u;
    for (int i = 0; i < n; i++) {
        h = (h ^ (uint64_t)t[i].coef) * 1099511628211u;
        for (int j = 0; j < t[i].nf; j++)
            h = (h ^ (uint64_t)t[i].f[j]) * 1099511628211u;
        h = (h ^ 0xffu) * 1099511628211u;
    }
    return h;
}

/* d as a polynomial; false for an invalid handle. */
static bool to_poly(const nest_function *f, int64_t d, poly *p)
{
    memset(p, 0, sizeof *p);
    if (!dim_is_sym(d)) {
        if (d != 0) {
            p->n = 1;
            p->t[0].coef = d;
        }
        return true;
    }
    const dim_expr *e = dim_entry(f, d);
    if (!e)
        return false;
    p->n = e->nterms;
    memcpy(p->t, e->terms, (size_t)e->nterms * sizeof *e->terms);
    return true;
}

/* Adds c * term to p, keeping it canonical; false when a coefficient overflows or p would have
 * too many terms. */
static bool poly_add_term(poly *p, const dim_term *term, int64_t c)
{
    int i = 0;
    while (i < p->n && term_cmp(&p->t[i], term) < 0)
        i++;
    if (i < p->n && term_cmp(&p->t[i], term) == 0) {
        if (add_overflows(p->t[i].coef, c, &p->t[i].coef))
            return false;
        if (p->t[i].coef == 0) {
            memmove(&p->t[i], &p->t[i + 1], (size_t)(p->n - i - 1) * sizeof *p->t);
            p->n--;
        }
        return true;
    }
    if (c == 0)
        return true;
    if (p->n == DIM_MAX_TERMS)
        return false;
    memmove(&p->t[i + 1], &p->t[i], (size_t)(p->n - i) * sizeof *p->t);
    p->t[i] = *term;
    p->t[i].coef = c;
    p->n++;
    return true;
}

static int64_t intern(nest_function *f, const poly *p, const char *name);

/* Whether d is a plain value (not a handle, not DIM_NONE, which lies below DIM_SYM0). */
static bool plain(int64_t d) { return d > DIM_SYM0; }

static int64_t too_large(nest_function *f)
{
    return ir_error(f, NEST_ERR_LIMIT, "a dim expression is too large"), DIM_NONE;
}

/* The handle or value of p; DIM_NONE with the error on f. */
static int64_t from_poly(nest_function *f, const poly *p)
{
    if (p->n == 0)
        return 0;
    if (p->n == 1 && p->t[0].nf == 0)
        return plain(p->t[0].coef) ? p->t[0].coef : too_large(f);
    if (p->n == 1 && p->t[0].nf == 1 && p->t[0].coef == 1)
        return DIM_SYM0 - p->t[0].f[0]; /* a name: its own entry */
    return intern(f, p, NULL);
}

static bool grow_slots(ir_dims *d)
{
    size_t ns = d->nslots ? d->nslots * 2 : 64;
    int32_t *s = malloc(ns * sizeof *s);
    if (!s)
        return false;
    for (size_t i = 0; i < ns; i++)
        s[i] = -1;
    for (size_t k = 0; k < d->n; k++) {
        size_t i = d->e[k].hash & (ns - 1);
        while (s[i] >= 0)
            i = (i + 1) & (ns - 1);
        s[i] = (int32_t)k;
    }
    free(d->slots);
    d->slots = s;
    d->nslots = ns;
    return true;
}

/* The entry of p (a name's own entry when name is not NULL), made on first use. */
static int64_t intern(nest_function *f, const poly *p, const char *name)
{
    if (!f->dims && !(f->dims = calloc(1, sizeof *f->dims)))
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), DIM_NONE;
    ir_dims *d = f->dims;
    uint64_t h = name ? 0 : poly_hash(p->t, p->n);
    if (!name && d->nslots) {
        for (size_t i = h & (d->nslots - 1); d->slots[i] >= 0; i = (i + 1) & (d->nslots - 1)) {
            const dim_expr *e = &d->e[d->slots[i]];
            if (e->hash == h && !e->name && e->nterms == p->n &&
                memcmp(e->terms, p->t, (size_t)p->n * sizeof *p->t) == 0)
                return DIM_SYM0 - d->slots[i];
        }
    }
    if (d->n >= DIM_MAX_EXPRS)
        return ir_error(f, NEST_ERR_LIMIT, "more than %d distinct dim expressions", DIM_MAX_EXPRS),
               DIM_NONE;
    dim_expr *e = grow_array(d->e, &d->cap, d->n, sizeof *e);
    if (!e)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), DIM_NONE;
    d->e = e;
    e = &d->e[d->n];
    memset(e, 0, sizeof *e);
    int32_t k = (int32_t)d->n;
    if (name) {
        e->name = arena_strdup(&f->arena, name);
        e->nterms = 1;
        e->terms = arena_alloc(&f->arena, sizeof *e->terms);
        if (e->name && e->terms)
            *e->terms = (dim_term){.coef = 1, .nf = 1, .f = {k}};
        e->hash = 0; /* names are found by dim_name, never by their polynomial */
    } else {
        e->nterms = p->n;
        e->terms = arena_memdup(&f->arena, p->t, (size_t)p->n * sizeof *p->t);
        e->hash = h;
    }
    if ((name && (!e->name || !e->terms)) || !e->terms)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), DIM_NONE;
    d->n++;
    if (2 * d->n >= d->nslots) {
        if (!grow_slots(d)) { /* inserts every entry, k too */
            d->n--;
            return ir_error(f, NEST_ERR_NOMEM, "out of memory"), DIM_NONE;
        }
    } else if (!name) {
        size_t i = h & (d->nslots - 1);
        while (d->slots[i] >= 0)
            i = (i + 1) & (d->nslots - 1);
        d->slots[i] = k;
    }
    return DIM_SYM0 - k;
}

/* ---- the operations ---- */

int32_t dim_find(const nest_function *f, const char *name, size_t len, int64_t *d)
{
    for (size_t k = 0; f->dims && k < f->dims->n; k++) {
        const char *s = f->dims->e[k].name;
        if (s && strlen(s) == len && memcmp(s, name, len) == 0) {
            *d = DIM_SYM0 - (int64_t)k;
            return (int32_t)k;
        }
    }
    return -1;
}

int64_t dim_name(nest_function *f, const char *name, size_t len)
{
    int64_t d;
    if (dim_find(f, name, len, &d) >= 0)
        return d;
    char *s = malloc(len + 1);
    if (!s)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory"), DIM_NONE;
    memcpy(s, name, len);
    s[len] = 0;
    int64_t r = DIM_NONE;
    if (ir_check_name(f, "dim", s) == NEST_OK) {
        static const char *const types[] = {"f32", "f64", "i32", "i64", "bool"};
        bool type = false;
        for (size_t i = 0; i < countof(types); i++)
            type = type || strcmp(s, types[i]) == 0;
        if (type)
            ir_error(f, NEST_ERR_ARG, "dim: '%s' is an element type, not a name", s);
        else
            r = intern(f, NULL, s);
    }
    free(s);
    return r;
}

static int64_t bad_operand(nest_function *f, const char *what)
{
    return ir_error(f, NEST_ERR_ARG, "%s: an operand is not a dim of function %s", what, f->name),
           DIM_NONE;
}

int64_t dim_add(nest_function *f, int64_t a, int64_t b)
{
    int64_t s;
    if (plain(a) && plain(b))
        return !add_overflows(a, b, &s) && plain(s) ? s : too_large(f);
    poly p, q;
    if (a == DIM_NONE || b == DIM_NONE || !to_poly(f, a, &p) || !to_poly(f, b, &q))
        return bad_operand(f, "dim_add");
    for (int i = 0; i < q.n; i++)
        if (!poly_add_term(&p, &q.t[i], q.t[i].coef))
            return too_large(f);
    return from_poly(f, &p);
}

int64_t dim_sub(nest_function *f, int64_t a, int64_t b)
{
    int64_t nb = dim_mul(f, b, -1);
    return nb == DIM_NONE ? DIM_NONE : dim_add(f, a, nb);
}

int64_t dim_mul(nest_function *f, int64_t a, int64_t b)
{
    int64_t s;
    if (plain(a) && plain(b))
        return !mul_overflows(a, b, &s) && plain(s) ? s : too_large(f);
    poly p, q, r = {0};
    if (a == DIM_NONE || b == DIM_NONE || !to_poly(f, a, &p) || !to_poly(f, b, &q))
        return bad_operand(f, "dim_mul");
    for (int i = 0; i < p.n; i++)
        for (int j = 0; j < q.n; j++) {
            dim_term t = {0};
            int64_t c;
            if (p.t[i].nf + q.t[j].nf > DIM_MAX_FACTORS || mul_overflows(p.t[i].coef, q.t[j].coef, &c))
                return too_large(f);
            /* merge the sorted factor lists */
            int x = 0, y = 0;
            while (x < p.t[i].nf || y < q.t[j].nf) {
                if (y == q.t[j].nf || (x < p.t[i].nf && p.t[i].f[x] <= q.t[j].f[y]))
                    t.f[t.nf++] = p.t[i].f[x++];
                else
                    t.f[t.nf++] = q.t[j].f[y++];
            }
            if (!poly_add_term(&r, &t, c))
                return too_large(f);
        }
    return from_poly(f, &r);
}

/* "a divided by b" and why it is not computed, as the error on f. */
static int64_t not_divided(nest_function *f, int64_t a, int64_t b, const char *why)
{
    char *x = dim_text(f, a), *y = dim_text(f, b);
    ir_error(f, NEST_ERR_ARG, "%s divided by %s %s", x ? x : "?", y ? y : "?", why);
    free(x);
    free(y);
    return DIM_NONE;
}

bool dim_quotient(nest_function *f, int64_t a, int64_t b, int64_t *q)
{
    poly p, d, r = {0};
    if (a == b && a != DIM_NONE)
        return *q = 1, true;
    if (a == DIM_NONE || b == DIM_NONE || !to_poly(f, a, &p) || !to_poly(f, b, &d) || d.n != 1)
        return false;
    const dim_term *t = &d.t[0];
    for (int i = 0; i < p.n; i++) {
        dim_term s = {0};
        int k = 0; /* s: p's term less t's names (both ascending), when it has them all */
        for (int j = 0; j < p.t[i].nf; j++)
            if (k < t->nf && p.t[i].f[j] == t->f[k])
                k++;
            else
                s.f[s.nf++] = p.t[i].f[j];
        if (k < t->nf || p.t[i].coef % t->coef != 0 ||
            (t->coef == -1 && p.t[i].coef == INT64_MIN) ||
            !poly_add_term(&r, &s, p.t[i].coef / t->coef))
            return false;
    }
    *q = from_poly(f, &r);
    return true;
}

int64_t dim_div_exact(nest_function *f, int64_t a, int64_t b)
{
    poly p;
    int64_t q;
    if (a == DIM_NONE || b == DIM_NONE || !to_poly(f, a, &p) ||
        (dim_is_sym(b) && !dim_entry(f, b)))
        return bad_operand(f, "dim_div_exact");
    if (dim_is_sym(b))
        return not_divided(f, a, b, "is not computed (the divisor is symbolic)");
    if (b == 0)
        return not_divided(f, a, b, "is not computed");
    return dim_quotient(f, a, b, &q) ? q : not_divided(f, a, b, "is not exact");
}

int dim_compare(const nest_function *f, int64_t a, int64_t b)
{
    if (!dim_is_sym(a) && !dim_is_sym(b))
        return a < b ? -1 : a > b ? 1 : 0;
    if (a == b)
        return 0;
    poly p, q;
    if (!to_poly(f, a, &p) || !to_poly(f, b, &q))
        return DIM_UNKNOWN;
    /* a - b: names are sizes (>= 0), so a polynomial whose coefficients all have one sign has
     * that sign (or is 0, when the names are) */
    for (int i = 0; i < q.n; i++)
        if (!poly_add_term(&p, &q.t[i], q.t[i].coef == INT64_MIN ? 0 : -q.t[i].coef))
            return DIM_UNKNOWN;
    bool pos = true, neg = true;
    int64_t c = 0;
    for (int i = 0; i < p.n; i++) {
        if (p.t[i].nf == 0)
            c = p.t[i].coef;
        pos = pos && p.t[i].coef >= 0;
        neg = neg && p.t[i].coef <= 0;
    }
    if (pos && c > 0)
        return 1;
    if (neg && c < 0)
        return -1;
    if (pos)
        return DIM_GE;
    if (neg)
        return DIM_LE;
    return DIM_UNKNOWN;
}

/* ---- values ---- */

int dim_eval(const nest_function *f, int64_t d, const int64_t *vals, int64_t *out)
{
    if (!dim_is_sym(d)) {
        *out = d;
        return d == DIM_NONE ? NEST_ERR_ARG : NEST_OK;
    }
    const dim_expr *e = dim_entry(f, d);
    if (!e)
        return NEST_ERR_ARG;
    return dim_terms_eval(e->terms, e->nterms, vals, out);
}

int dim_terms_eval(const dim_term *terms, int n, const int64_t *vals, int64_t *out)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++) {
        int64_t t = terms[i].coef;
        for (int j = 0; j < terms[i].nf; j++)
            if (mul_overflows(t, vals[terms[i].f[j]], &t))
                return NEST_ERR_LIMIT;
        if (add_overflows(s, t, &s))
            return NEST_ERR_LIMIT;
    }
    *out = s;
    return NEST_OK;
}

/* ---- the order of the text and of the ABI ---- */

/* An expression's terms print, and the ABI meets the names they hold, in an order that depends
 * on the names alone, never on the order they were declared in (parsing the printed text
 * declares them in another): higher degree first, then by the names' text factor by factor,
 * each term's factors by name; the integer last. So printing is idempotent, and a function
 * printed and parsed back has the same dims in the same order. */
static int name_cmp(const nest_function *f, int32_t a, int32_t b)
{
    return strcmp(f->dims->e[a].name, f->dims->e[b].name);
}

/* t's factors in the order of their names. */
static void named_factors(const nest_function *f, const dim_term *t, int32_t *out)
{
    for (int i = 0; i < t->nf; i++) {
        int j = i;
        for (; j > 0 && name_cmp(f, out[j - 1], t->f[i]) > 0; j--)
            out[j] = out[j - 1];
        out[j] = t->f[i];
    }
}

static int canon_cmp(const nest_function *f, const dim_term *a, const dim_term *b)
{
    if (a->nf != b->nf)
        return a->nf > b->nf ? -1 : 1;
    int32_t fa[DIM_MAX_FACTORS], fb[DIM_MAX_FACTORS];
    named_factors(f, a, fa);
    named_factors(f, b, fb);
    for (int i = 0; i < a->nf; i++) {
        int c = name_cmp(f, fa[i], fb[i]);
        if (c)
            return c;
    }
    return 0;
}

/* order[0 .. e->nterms): e's terms in the canonical order. */
static void canon_order(const nest_function *f, const dim_expr *e, int *order)
{
    for (int i = 0; i < e->nterms; i++) {
        int j = i;
        for (; j > 0 && canon_cmp(f, &e->terms[order[j - 1]], &e->terms[i]) > 0; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
}

int32_t dim_params(const nest_function *f, int32_t *ids)
{
    int32_t n = 0, ne = dim_entry_count(f);
    if (ne == 0)
        return 0;
    bool *seen = calloc((size_t)ne, 1);
    if (!seen)
        return -1;
    for (int32_t p = 0; p < f->nparams; p++) {
        const ir_node *x = &f->nodes[f->params[p]];
        for (int i = 0; i < x->rank; i++) {
            const dim_expr *e = dim_entry(f, x->shape[i]);
            if (!e)
                continue;
            int order[DIM_MAX_TERMS];
            canon_order(f, e, order);
            for (int t = 0; t < e->nterms; t++) {
                int32_t fs[DIM_MAX_FACTORS];
                named_factors(f, &e->terms[order[t]], fs);
                for (int j = 0; j < e->terms[order[t]].nf; j++) {
                    int32_t k = fs[j];
                    if (!seen[k]) {
                        seen[k] = true;
                        ids[n++] = k;
                    }
                }
            }
        }
    }
    free(seen);
    return n;
}

int32_t dim_names(const nest_function *f, int32_t *ids)
{
    int32_t n = 0;
    for (int32_t k = 0; k < dim_entry_count(f); k++)
        if (f->dims->e[k].name)
            ids[n++] = k;
    return n;
}

bool ir_is_symbolic(const nest_function *f)
{
    for (int32_t k = 0; k < dim_entry_count(f); k++)
        if (f->dims->e[k].name)
            return true;
    return false;
}

/* ---- text ---- */

static void format_term(buf *b, const nest_function *f, const dim_term *t, bool first,
                        const char *const *names)
{
    int64_t c = t->coef;
    if (c < 0)
        buf_putc(b, '-');
    else if (!first)
        buf_putc(b, '+');
    uint64_t m = c < 0 ? 0 - (uint64_t)c : (uint64_t)c;
    int32_t fs[DIM_MAX_FACTORS];
    named_factors(f, t, fs);
    for (int j = 0; j < t->nf; j++)
        buf_printf(b, "%s%s", j ? "*" : "", names ? names[fs[j]] : f->dims->e[fs[j]].name);
    if (t->nf == 0)
        buf_printf(b, "%llu", (unsigned long long)m);
    else if (m != 1)
        buf_printf(b, "*%llu", (unsigned long long)m);
}

void dim_format(buf *b, const nest_function *f, int64_t d) { dim_format_with(b, f, d, NULL); }

void dim_format_with(buf *b, const nest_function *f, int64_t d, const char *const *names)
{
    const dim_expr *e = f ? dim_entry(f, d) : NULL;
    if (!dim_is_sym(d) || !e) {
        if (dim_is_sym(d))
            buf_puts(b, "?");
        else
            buf_printf(b, "%lld", (long long)d);
        return;
    }
    if (e->name) {
        buf_puts(b, names ? names[DIM_SYM0 - d] : e->name);
        return;
    }
    if (names)
        buf_putc(b, '(');
    /* the canonical order (M*N*2-M*2, N*64+2, N-1), except that the first term with a positive
     * coefficient leads (a type's dim cannot start with a minus: 2-N, N-M), or 0 when none has */
    int order[DIM_MAX_TERMS], lead = -1;
    canon_order(f, e, order);
    for (int i = 0; i < e->nterms && lead < 0; i++)
        if (e->terms[order[i]].coef > 0)
            lead = i;
    if (lead >= 0)
        format_term(b, f, &e->terms[order[lead]], true, names);
    else
        buf_putc(b, '0');
    for (int i = 0; i < e->nterms; i++)
        if (i != lead)
            format_term(b, f, &e->terms[order[i]], false, names);
    if (names)
        buf_putc(b, ')');
}

void ir_format_dims(buf *b, const nest_function *f, int rank, const int64_t *shape)
{
    buf_putc(b, '[');
    for (int i = 0; i < rank; i++) {
        if (i)
            buf_putc(b, ',');
        dim_format(b, f, shape[i]);
    }
    buf_putc(b, ']');
}

char *dim_text(const nest_function *f, int64_t d)
{
    buf b = {0};
    dim_format(&b, f, d);
    return buf_finish(&b);
}

int64_t dim_transfer(const nest_function *f, nest_function *g, int64_t *map, int64_t d)
{
    const dim_expr *e = dim_entry(f, d);
    if (!e)
        return d; /* plain (lists also hold negative offsets) */
    int32_t k = (int32_t)(DIM_SYM0 - d);
    if (map[k])
        return map[k];
    int64_t sum = 0;
    for (int t = 0; t < e->nterms && sum != DIM_NONE; t++) {
        int64_t prod = e->terms[t].coef;
        for (int j = 0; j < e->terms[t].nf && prod != DIM_NONE; j++) {
            const char *name = dim_entry(f, DIM_SYM0 - e->terms[t].f[j])->name;
            prod = dim_mul(g, prod, dim_name(g, name, strlen(name)));
        }
        sum = prod == DIM_NONE ? DIM_NONE : dim_add(g, sum, prod);
    }
    return map[k] = sum;
}

bool dim_transfer_map(void *ctx, int64_t d, int64_t *out, const char *what, int32_t node, int i)
{
    (void)what, (void)node, (void)i;
    dim_move *m = ctx;
    *out = dim_transfer(m->f, m->g, m->map, d);
    if (*out == DIM_NONE)
        ir_error(m->f, m->g->status, "%s", m->g->errmsg ? m->g->errmsg : "out of memory");
    return *out != DIM_NONE;
}
