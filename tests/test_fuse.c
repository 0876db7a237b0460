/* test_fuse.c - what fusion, views, flattening and memory planning claim, checked on the plan
 * (pipeline_plan, or pass_fuse alone for the shape before flattening) and on the generated C,
 * and every graph run through the JIT against the reference interpreter. */
#include <ctype.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "internal.h"

/* ---- fixture: a cache directory of the process's own ---- */

static char cache_root[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(cache_root, sizeof cache_root, "/tmp/nest-test-fuse-XXXXXX");
    if (!mkdtemp(cache_root))
        return -1;
    setenv("XDG_CACHE_HOME", cache_root, 1);
    unsetenv("NEST_CACHE");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    nftw(cache_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- plans ---- */

typedef struct planned {
    arena a;
    plan p;
    nest_options o;
} planned;

/* The plan of f after every pass (fuse 0 or 1). */
static planned *plan_all(nest_function *f, int fuse)
{
    planned *pl = calloc(1, sizeof *pl);
    assert_non_null(pl);
    nest_options_init(&pl->o);
    pl->o.fuse = fuse;
    assert_ok(f, pipeline_plan(&pl->p, f, &pl->a, &pl->o, NULL, NULL));
    return pl;
}

/* The plan of f after pass_fuse alone: the nests' index spaces as the graph gives them. */
static planned *plan_fused(nest_function *f)
{
    planned *pl = calloc(1, sizeof *pl);
    assert_non_null(pl);
    nest_options_init(&pl->o);
    pl->p.f = f;
    pl->p.a = &pl->a;
    pl->p.opts = &pl->o;
    assert_int_equal(pass_fuse(&pl->p), NEST_OK);
    return pl;
}

static void plan_release(planned *pl)
{
    free(pl->p.table);
    arena_free(&pl->a);
    free(pl);
}

static int live_nests(const plan *p)
{
    int n = 0;
    for (int32_t k = 0; k < p->nnests; k++)
        n += !p->nests[k].dead;
    return n;
}

/* The k-th live nest. */
static const nest *live_nest(const plan *p, int k)
{
    for (int32_t i = 0; i < p->nnests; i++)
        if (!p->nests[i].dead && k-- == 0)
            return &p->nests[i];
    fail_msg("no live nest %d", k);
    return NULL;
}

static int live_temps(const plan *p)
{
    int n = 0;
    for (int32_t b = 0; b < p->nbufs; b++)
        n += p->bufs[b].kind == BUF_TEMP && !p->bufs[b].dead;
    return n;
}

static int32_t param_buf(const plan *p, int index)
{
    for (int32_t b = 0; b < p->nbufs; b++)
        if (p->bufs[b].kind == BUF_PARAM && p->bufs[b].index == index)
            return b;
    fail_msg("no buffer for parameter %d", index);
    return -1;
}

/* The loads of buffer `buf` in a nest's expressions. */
typedef struct loads {
    int32_t buf;
    const fx *found[16];
    int n;
} loads;

static void collect_load(fx *e, void *ctx)
{
    loads *l = ctx;
    if (e->kind == FX_LOAD && e->buf == l->buf && l->n < (int)countof(l->found))
        l->found[l->n++] = e;
}

/* The one load of `buf` in nest ne (fails if there are none or several). */
static const fx *only_load(plan *p, const nest *ne, int32_t bufi)
{
    loads l = {.buf = bufi};
    for (int i = 0; i < ne->nouts; i++)
        assert_true(fx_walk(p, &ne->outs[i].value, 1, collect_load, &l));
    assert_int_equal(l.n, 1);
    return l.found[0];
}

static void assert_strides(const fx *load, int64_t off, int rank, const int64_t *st)
{
    assert_int_equal(load->kind, FX_LOAD);
    assert_int_equal(load->off, off);
    assert_int_equal(load->rank, rank);
    for (int k = 0; k < rank; k++)
        if (load->st[k] != st[k])
            fail_msg("stride %d of the load is %lld, want %lld", k, (long long)load->st[k],
                     (long long)st[k]);
}

typedef struct opcount {
    int op, n;
} opcount;

static void count_op(fx *e, void *ctx)
{
    opcount *c = ctx;
    if (e->kind == FX_OP && e->op == c->op)
        c->n++;
}

/* FX_OP nodes with op `op` in all of a nest's outputs, each shared node counted once. */
static int count_ops(plan *p, const nest *ne, int op)
{
    opcount c = {op, 0};
    fx *roots[64];
    assert_true(ne->nouts <= (int)countof(roots));
    for (int i = 0; i < ne->nouts; i++)
        roots[i] = ne->outs[i].value;
    assert_true(fx_walk(p, roots, ne->nouts, count_op, &c));
    return c.n;
}

/* ---- values: the JIT against the interpreter ---- */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int64_t value_count(nest_function *f, nest_value v)
{
    int64_t n = 1;
    const int64_t *shape = nest_value_shape(f, v);
    for (int k = 0; k < nest_value_rank(f, v); k++)
        n *= shape[k];
    return n;
}

/* Fills an array with values in [lo, hi) (floats on a grid of 1/64, integers whole). */
static void fill(nest_type t, void *p, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (double)(rng() % 1000000) / 1000000.0 * (hi - lo);
        switch (t) {
        case NEST_F32: ((float *)p)[i] = (float)(floor(x * 64) / 64); break;
        case NEST_F64: ((double *)p)[i] = floor(x * 64) / 64; break;
        case NEST_I32: ((int32_t *)p)[i] = (int32_t)floor(x); break;
        case NEST_I64: ((int64_t *)p)[i] = (int64_t)floor(x); break;
        case NEST_BOOL: ((uint8_t *)p)[i] = x > (lo + hi) / 2; break;
        }
    }
}

/* Runs f through the interpreter and through nest_compile with fusion on or off; the results
 * must agree within rtol (floats; integers exactly). Parameters hold values in [lo, hi). */
static void check_values_in(nest_function *f, int fuse, double lo, double hi, double rtol)
{
    int np = nest_param_count(f), nr = nest_result_count(f);
    void *args[16], *want[16], *got[16];
    assert_true(np <= 16 && nr <= 16);
    for (int i = 0; i < np; i++) {
        nest_value v = nest_param(f, i);
        nest_type t = (nest_type)nest_value_type(f, v);
        int64_t n = value_count(f, v);
        args[i] = malloc((size_t)(n ? n : 1) * nest_type_size(t));
        assert_non_null(args[i]);
        fill(t, args[i], n, lo, hi);
    }
    for (int i = 0; i < nr; i++) {
        nest_value v = nest_result(f, i);
        size_t bytes = (size_t)(value_count(f, v) ? value_count(f, v) : 1) *
                       nest_type_size((nest_type)nest_value_type(f, v));
        want[i] = malloc(bytes);
        got[i] = malloc(bytes);
        assert_true(want[i] && got[i]);
        memset(got[i], 0xa5, bytes); /* never-written elements show */
    }
    assert_ok(f, evaluate(f, args, want));
    nest_options o;
    nest_options_init(&o);
    o.fuse = fuse;
    nest_kernel *k = nest_compile(f, &o);
    if (!k)
        fail_msg("nest_compile: %s", nest_errmsg(f));
    int st = nest_call(k, args, np, got, nr);
    if (st != NEST_OK)
        fail_msg("nest_call: %s", nest_kernel_errmsg(k));
    for (int i = 0; i < nr; i++) {
        nest_value v = nest_result(f, i);
        nest_type t = (nest_type)nest_value_type(f, v);
        assert_close(t, got[i], want[i], value_count(f, v), rtol, rtol);
    }
    nest_kernel_free(k);
    for (int i = 0; i < np; i++)
        free(args[i]);
    for (int i = 0; i < nr; i++) {
        free(want[i]);
        free(got[i]);
    }
}

static void check_values(nest_function *f, int fuse)
{
    check_values_in(f, fuse, -2.0, 2.0, 1e-5);
}

/* ---- generated C ---- */

static char *emit_c(nest_function *f, int fuse)
{
    nest_options o;
    nest_options_init(&o);
    o.fuse = fuse;
    char *c = nest_emit(&f, 1, NEST_EMIT_C, &o);
    if (!c)
        fail_msg("nest_emit: %s", nest_errmsg(f));
    return c;
}

/* The C of f, fused, as emitted for x86-64-v4 whatever this CPU is: 512-bit vectors, tiles of
 * 4 x 64 f32, 16 lanes of f32 and 8 of f64. */
static char *emit_c_v4(nest_function *f)
{
    nest_options o;
    nest_options_init(&o);
    o.march = "x86-64-v4";
    char *c = nest_emit(&f, 1, NEST_EMIT_C, &o);
    if (!c)
        fail_msg("nest_emit: %s", nest_errmsg(f));
    return c;
}

static int count_str(const char *s, const char *needle)
{
    int n = 0;
    for (const char *q = s; (q = strstr(q, needle)); q += strlen(needle))
        n++;
    return n;
}

/* Whether s has `word` as a whole C identifier. */
static bool has_word(const char *s, const char *word)
{
    size_t n = strlen(word);
    for (const char *q = s; (q = strstr(q, word)); q += n) {
        bool before = q > s && (isalnum((unsigned char)q[-1]) || q[-1] == '_');
        bool after = isalnum((unsigned char)q[n]) || q[n] == '_';
        if (!before && !after)
            return true;
    }
    return false;
}

/* Whether some `for` line of the C runs a loop from lo up to hi. */
static bool has_loop(const char *c, int64_t lo, int64_t hi)
{
    char from[40], to[40];
    snprintf(from, sizeof from, " = %lld;", (long long)lo);
    snprintf(to, sizeof to, " < %lld;", (long long)hi);
    for (const char *q = c; (q = strstr(q, "for (")); q++) {
        const char *end = strchr(q, '\n');
        size_t len = end ? (size_t)(end - q) : strlen(q);
        char line[256];
        if (len >= sizeof line)
            continue;
        memcpy(line, q, len);
        line[len] = 0;
        if (strstr(line, from) && strstr(line, to))
            return true;
    }
    return false;
}

/* ---- graphs ---- */

static nest_value param(nest_function *f, const char *name, nest_type t, int rank,
                        const int64_t *shape)
{
    nest_value v = nest_parameter(f, name, t, rank, shape, NEST_ROW_MAJOR);
    assert_value(f, v);
    return v;
}

static void ret(nest_function *f, int n, const nest_value *v)
{
    assert_ok(f, nest_return(f, n, v, NULL));
}

/* ---- the tests ---- */

/* DESIGN.md's l2: subtract then dot is one nest, no temporary, no workspace, one loop nest. */
static void l2_is_one_loop(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 1, SHAPE(100000));
    nest_value y = param(f, "y", NEST_F32, 1, SHAPE(100000));
    nest_value d = nest_subtract(f, x, y);
    nest_value r = nest_dot(f, d, d);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    assert_int_equal(pl->p.ws_size, 0);
    const nest *ne = live_nest(&pl->p, 0);
    assert_int_equal(ne->nouts, 1);
    assert_int_equal(ne->outs[0].reduce, OP_SUM);
    assert_int_equal(count_ops(&pl->p, ne, OP_SUBTRACT), 1);
    plan_release(pl);

    char *c = emit_c(f, 1);
    assert_int_equal(count_str(c, "loops over ["), 1);
    assert_false(has_word(c, "ws"));
    assert_null(strstr(c, "_workspace_size"));
    free(c);
    check_values(f, 1);
}

/* Attention's product of the weights and the values, the values in PyTorch's [S, B*H, D]
 * order: the batch of products runs product by product (the batch axis outermost, the sum
 * over the keys inside it), not the sum outermost as the strides alone would order it; and a
 * bias added to an operand that the product reads 16 times is stored once before it. */
static void batch_of_products_by_product(void **state)
{
    nest_function *f = *state;
    nest_value w = param(f, "w", NEST_F32, 3, SHAPE(256, 16, 16));
    nest_value v = param(f, "v", NEST_F32, 3, SHAPE(16, 256, 16));
    nest_value b = param(f, "b", NEST_F32, 1, SHAPE(16));
    nest_value vt = nest_reshape(f, v, SHAPE(1, 0, 2), 3, SHAPE(256, 16, 16));
    nest_value vb = nest_add(f, vt, nest_broadcast(f, b, 3, SHAPE(256, 16, 16), 2, SHAPE(0, 1)));
    nest_value r[2] = {nest_batch_dot(f, w, vt), nest_batch_dot(f, w, vb)};
    assert_value(f, r[1]);
    ret(f, 2, r);

    planned *pl = plan_all(f, 1);
    /* the products of the values as they lie, the bias added, the products of those */
    assert_int_equal(live_nests(&pl->p), 3);
    for (int k = 0; k < 3; k++) {
        const nest *ne = live_nest(&pl->p, k);
        if (!ne->reduced)
            continue;
        assert_int_equal(ne->dims[0], 256);
        assert_false(ne->reduced & 1u);
        assert_int_equal(count_ops(&pl->p, ne, OP_ADD), 0);
    }
    plan_release(pl);
    check_values(f, 1);
}

/* Transposing twice is the identity view: no copy, x read row-major. */
static void double_transpose_is_a_view(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(3, 5));
    nest_value y = param(f, "y", NEST_F32, 2, SHAPE(3, 5));
    nest_value t = nest_reshape(f, x, SHAPE(1, 0), 2, SHAPE(5, 3));
    nest_value tt = nest_reshape(f, t, SHAPE(1, 0), 2, SHAPE(3, 5));
    nest_value r = nest_add(f, tt, y);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_fused(f);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    const nest *ne = live_nest(&pl->p, 0);
    assert_strides(only_load(&pl->p, ne, param_buf(&pl->p, 0)), 0, 2, SHAPE(5, 1));
    plan_release(pl);

    pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    ne = live_nest(&pl->p, 0);
    assert_int_equal(ne->rank, 1); /* both contiguous: one flat loop */
    assert_int_equal(ne->dims[0], 15);
    assert_strides(only_load(&pl->p, ne, param_buf(&pl->p, 0)), 0, 1, SHAPE(1));
    plan_release(pl);

    char *c = emit_c(f, 1);
    assert_int_equal(count_str(c, "loops over ["), 1);
    free(c);
    check_values(f, 1);
}

/* [m,n] + broadcast([n]): the vector is read with stride 0 along the rows, never copied. */
static void broadcast_is_stride_zero(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(6, 7));
    nest_value v = param(f, "v", NEST_F32, 1, SHAPE(7));
    nest_value b = nest_broadcast(f, v, 2, SHAPE(6, 7), 1, SHAPE(0));
    nest_value r = nest_add(f, a, b);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_fused(f);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    assert_strides(only_load(&pl->p, live_nest(&pl->p, 0), param_buf(&pl->p, 1)), 0, 2,
                   SHAPE(0, 1));
    plan_release(pl);

    pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    assert_int_equal(pl->p.ws_size, 0);
    const nest *ne = live_nest(&pl->p, 0);
    assert_int_equal(ne->rank, 2); /* the stride-0 axis cannot merge */
    assert_strides(only_load(&pl->p, ne, param_buf(&pl->p, 1)), 0, 2, SHAPE(0, 1));
    plan_release(pl);
    check_values(f, 1);
}

/* t = exp(add(a, b)); return t, t * t: one nest with two outputs, exp evaluated once. */
static void shared_value_computed_once(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(4, 9));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(4, 9));
    nest_value t = nest_exp(f, nest_add(f, a, b));
    nest_value m = nest_multiply(f, t, t);
    assert_value(f, m);
    ret(f, 2, (nest_value[]){t, m});

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    const nest *ne = live_nest(&pl->p, 0);
    assert_int_equal(ne->nouts, 2);
    assert_int_equal(count_ops(&pl->p, ne, OP_EXP), 1);
    assert_int_equal(count_ops(&pl->p, ne, OP_ADD), 1);
    plan_release(pl);

    char *c = emit_c(f, 1);
    assert_int_equal(count_str(c, "expf("), 1);
    free(c);
    check_values(f, 1);
}

/* An expensive value used by two ops that are not results is stored once or recomputed, but
 * the values agree either way; here it is used by two reductions over different axes. */
static void shared_value_two_reductions(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F64, 2, SHAPE(5, 6));
    nest_value t = nest_tanh(f, nest_exp(f, a));
    nest_value s0 = nest_sum(f, t, 1, SHAPE(0));
    nest_value s1 = nest_max(f, t, 1, SHAPE(1));
    assert_value(f, s1);
    ret(f, 2, (nest_value[]){s0, s1});
    planned *pl = plan_all(f, 1);
    /* exp and tanh cost 20: stored once, read by both reductions */
    assert_int_equal(live_temps(&pl->p), 1);
    plan_release(pl);
    check_values(f, 1);
}

/* An element-wise op over contiguous [64,128,32] runs as one loop of 262144. */
static void contiguous_flattens_to_one_loop(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 3, SHAPE(64, 128, 32));
    nest_value b = param(f, "b", NEST_F32, 3, SHAPE(64, 128, 32));
    nest_value r = nest_multiply(f, nest_add(f, a, b), a);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    const nest *ne = live_nest(&pl->p, 0);
    assert_int_equal(ne->rank, 1);
    assert_int_equal(ne->dims[0], 262144);
    assert_strides(only_load(&pl->p, ne, param_buf(&pl->p, 0)), 0, 1, SHAPE(1));
    assert_int_equal(ne->outs[0].st[0], 1);
    plan_release(pl);

    char *c = emit_c(f, 1);
    assert_true(strstr(c, "262144") != NULL);
    free(c);
    check_values(f, 1);
}

/* Column-major operands flatten too when every access agrees; mixed layouts keep two axes. */
static void flatten_respects_layouts(void **state)
{
    nest_function *f = *state;
    nest_value a = nest_parameter(f, "a", NEST_F32, 3, SHAPE(4, 5, 6), NEST_COL_MAJOR);
    nest_value b = nest_parameter(f, "b", NEST_F32, 3, SHAPE(4, 5, 6), NEST_COL_MAJOR);
    nest_value same = nest_add(f, a, b);
    assert_value(f, same);
    assert_ok(f, nest_return(f, 1, &same, (const nest_layout[]){NEST_COL_MAJOR}));
    planned *pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    const nest *ne = live_nest(&pl->p, 0);
    assert_int_equal(ne->rank, 1);
    assert_int_equal(ne->dims[0], 120);
    assert_int_equal(ne->outs[0].st[0], 1);
    plan_release(pl);
    check_values(f, 1);

    nest_function *g = nest_function_new("g");
    a = nest_parameter(g, "a", NEST_F32, 3, SHAPE(4, 5, 6), NEST_COL_MAJOR);
    nest_value c = nest_parameter(g, "c", NEST_F32, 3, SHAPE(4, 5, 6), NEST_ROW_MAJOR);
    nest_value mixed = nest_subtract(g, a, c);
    assert_value(g, mixed);
    assert_ok(g, nest_return(g, 1, &mixed, NULL));
    pl = plan_all(g, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_true(live_nest(&pl->p, 0)->rank >= 2);
    plan_release(pl);
    check_values(g, 1);
    check_values(g, 0);
    nest_function_free(g);
}

/* slice with strides, transpose and broadcast compose into one load of x. */
static void views_compose(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(9, 11));
    nest_value y = param(f, "y", NEST_F32, 3, SHAPE(3, 5, 4));
    /* rows 1,3,5,7 and columns 2,5,8 of x: [4,3] */
    nest_value s = nest_slice(f, x, SHAPE(1, 2), SHAPE(8, 11), SHAPE(2, 3));
    nest_value t = nest_reshape(f, s, SHAPE(1, 0), 2, SHAPE(3, 4));
    nest_value b = nest_broadcast(f, t, 3, SHAPE(3, 5, 4), 1, SHAPE(1));
    nest_value r = nest_add(f, b, y);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_fused(f);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    /* offset 1 * 11 + 2; the slice's strides 22 and 3, transposed, with 0 for the new axis */
    assert_strides(only_load(&pl->p, live_nest(&pl->p, 0), param_buf(&pl->p, 0)), 13, 3,
                   SHAPE(3, 0, 22));
    plan_release(pl);

    pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    assert_int_equal(pl->p.ws_size, 0);
    plan_release(pl);
    check_values(f, 1);
    check_values(f, 0);
}

/* A reshape that merges transposed axes cannot be a view: it stores one copy. */
static void merging_transposed_axes_copies(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(4, 6));
    nest_value y = param(f, "y", NEST_F32, 1, SHAPE(24));
    nest_value m = nest_reshape(f, x, SHAPE(1, 0), 1, SHAPE(24));
    nest_value r = nest_add(f, m, y);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_temps(&pl->p), 1);
    assert_int_equal(live_nests(&pl->p), 2);
    for (int32_t b = 0; b < pl->p.nbufs; b++)
        if (pl->p.bufs[b].kind == BUF_TEMP && !pl->p.bufs[b].dead)
            assert_int_equal(pl->p.bufs[b].count, 24);
    assert_true(pl->p.ws_size >= 24 * 4);
    plan_release(pl);
    check_values(f, 1);
    check_values(f, 0);
}

/* The same with a computed operand: the element-wise chain goes into the one copy. */
static void merging_transposed_expression_copies_once(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(4, 6));
    nest_value e = nest_exp(f, x);
    nest_value m = nest_reshape(f, e, SHAPE(1, 0), 1, SHAPE(24));
    nest_value r = nest_negative(f, m);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_temps(&pl->p), 1);
    assert_int_equal(live_nests(&pl->p), 2);
    plan_release(pl);
    check_values(f, 1);
}

/* A contiguous reshape (merging or splitting row-major axes) of an expression is a view. */
static void contiguous_reshape_is_a_view(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 3, SHAPE(2, 3, 4));
    nest_value y = param(f, "y", NEST_F32, 2, SHAPE(6, 4));
    nest_value m = nest_reshape(f, nest_exp(f, x), NULL, 2, SHAPE(6, 4));
    nest_value r = nest_add(f, m, y);
    nest_value s = nest_reshape(f, r, NULL, 4, SHAPE(2, 3, 2, 2));
    nest_value q = nest_multiply(f, s, s);
    assert_value(f, q);
    ret(f, 1, &q);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    plan_release(pl);
    check_values(f, 1);
}

/* concat feeding an element-wise op: no temporary, the loop splits at the boundary. */
static void concat_fuses_with_split_loops(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(4, 3));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(4, 5));
    nest_value c = param(f, "c", NEST_F32, 2, SHAPE(4, 8));
    nest_value cat = nest_concat(f, 2, (nest_value[]){a, b}, 1);
    nest_value r = nest_add(f, nest_exp(f, cat), c);
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    plan_release(pl);

    char *src = emit_c(f, 1);
    assert_int_equal(count_str(src, "loops over ["), 1);
    assert_true(has_loop(src, 0, 3));
    assert_true(has_loop(src, 3, 8));
    free(src);
    check_values(f, 1);
    check_values(f, 0);
}

/* A concat of three along the outer axis of a flattenable space, then sliced across the
 * boundaries and transposed. */
static void concat_slice_transpose(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_I32, 2, SHAPE(2, 5));
    nest_value b = param(f, "b", NEST_I32, 2, SHAPE(3, 5));
    nest_value c = param(f, "c", NEST_I32, 2, SHAPE(1, 5));
    nest_value cat = nest_concat(f, 3, (nest_value[]){a, b, c}, 0);
    nest_value w = nest_multiply(f, cat, cat);
    nest_value s = nest_slice(f, w, SHAPE(1, 0), SHAPE(6, 5), SHAPE(2, 2));
    nest_value t = nest_reshape(f, s, SHAPE(1, 0), 2, SHAPE(3, 3));
    nest_value r = nest_add(f, t, nest_negative(f, t));
    assert_value(f, r);
    ret(f, 2, (nest_value[]){w, t});
    (void)r;
    check_values_in(f, 1, -50, 50, 0);
    check_values_in(f, 0, -50, 50, 0);
}

/* A concat along the outer axis read by a row reduction and by a nest after it: the nests
 * cannot share one loop over the rows unless the loop splits at the boundary. */
static void concat_on_row_axis(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(2, 5));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(4, 5));
    nest_value c = nest_concat(f, 2, (nest_value[]){a, b}, 0);
    nest_value m = nest_max(f, c, 1, SHAPE(1));
    nest_value r = nest_subtract(f, c, nest_broadcast(f, m, 2, SHAPE(6, 5), 1, SHAPE(1)));
    assert_value(f, r);
    ret(f, 1, &r);
    char *src = emit_c(f, 1);
    assert_null(strstr(src, "nest_internal_error"));
    free(src);
    check_values(f, 1);
    check_values(f, 0);
}

/* A tiled product of matrices absorbs the element-wise nest after it into the tile's store,
 * which runs whole blocks: an epilogue that reads a concat (split loops) keeps its own nest. */
static void tile_epilogue_with_concat(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(8, 4));
    nest_value w = param(f, "w", NEST_F32, 2, SHAPE(4, 32));
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(8, 10));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(8, 22));
    nest_value h = nest_dot(f, x, w);
    nest_value r = nest_add(f, h, nest_concat(f, 2, (nest_value[]){a, b}, 1));
    /* the product and no rows: a concat with an empty part has the product's shape */
    nest_value e = nest_constant(f, NEST_F32, 2, SHAPE(0, 32), (const float[]){-0.5f}, 1);
    nest_value q = nest_concat(f, 2, (nest_value[]){nest_dot(f, x, w), e}, 0);
    assert_value(f, q);
    ret(f, 2, (nest_value[]){r, q});
    char *src = emit_c(f, 1);
    assert_null(strstr(src, "nest_internal_error"));
    free(src);
    check_values(f, 1);
    check_values(f, 0);
}

/* A tiled product with a result of 8 MiB or more writes it past the caches, the whole cache
 * lines of each full block's rows (nest_stream_*), the ends of lines and partial blocks
 * plainly: the product alone, with a bias and a ReLU absorbed, and in f64; a last block of
 * fewer rows and of fewer columns; the result malloc'd (not aligned to 64 bytes) and aligned. */
static void tile_results_past_caches(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(1001, 24));
    nest_value w = param(f, "w", NEST_F32, 2, SHAPE(24, 2100));
    nest_value b = param(f, "b", NEST_F32, 1, SHAPE(2100));
    nest_value x2 = param(f, "x2", NEST_F32, 2, SHAPE(1001, 24));
    nest_value xd = param(f, "xd", NEST_F64, 2, SHAPE(501, 8));
    nest_value wd = param(f, "wd", NEST_F64, 2, SHAPE(8, 2100));
    nest_value p = nest_dot(f, x, w);
    nest_value z = nest_add(f, nest_dot(f, x2, w), nest_broadcast(f, b, 2, SHAPE(1001, 2100), 1, SHAPE(0)));
    nest_value r = nest_maximum(f, z, nest_constant(f, NEST_F32, 2, SHAPE(1001, 2100), (const float[]){0}, 1));
    nest_value pd = nest_dot(f, xd, wd);
    assert_value(f, r);
    assert_value(f, pd);
    ret(f, 3, (nest_value[]){p, r, pd});
    char *src = emit_c(f, 1);
    assert_int_equal(count_str(src, "nest_stream_f32(nest_d"), 2);
    assert_int_equal(count_str(src, "nest_stream_f64(nest_d"), 1);
    free(src);
    check_values(f, 1);
    /* into results aligned to 64 bytes: every line of a full block's rows past the caches */
    float *xs = malloc(1001 * 24 * 4), *ws_ = malloc(24 * 2100 * 4), *bs = malloc(2100 * 4);
    float *x2s = malloc(1001 * 24 * 4);
    double *xds = malloc(501 * 8 * 8), *wds = malloc(8 * 2100 * 8);
    assert_true(xs && ws_ && bs && x2s && xds && wds);
    fill(NEST_F32, xs, 1001 * 24, -2, 2);
    fill(NEST_F32, ws_, 24 * 2100, -2, 2);
    fill(NEST_F32, bs, 2100, -2, 2);
    fill(NEST_F32, x2s, 1001 * 24, -2, 2);
    fill(NEST_F64, xds, 501 * 8, -2, 2);
    fill(NEST_F64, wds, 8 * 2100, -2, 2);
    void *args[6] = {xs, ws_, bs, x2s, xds, wds}, *want[3], *got[3];
    size_t bytes[3] = {1001 * 2100 * 4, 1001 * 2100 * 4, 501 * 2100 * 8};
    for (int i = 0; i < 3; i++) {
        want[i] = malloc(bytes[i]);
        got[i] = aligned_alloc(64, (bytes[i] + 63) & ~(size_t)63); /* whole multiples of 64 */
        assert_true(want[i] && got[i]);
    }
    assert_ok(f, evaluate(f, args, want));
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    assert_int_equal(nest_call(k, args, 6, got, 3), NEST_OK);
    assert_close(NEST_F32, got[0], want[0], 1001 * 2100, 1e-5, 1e-5);
    assert_close(NEST_F32, got[1], want[1], 1001 * 2100, 1e-5, 1e-5);
    assert_close(NEST_F64, got[2], want[2], 501 * 2100, 1e-12, 1e-12);
    nest_kernel_free(k);
    for (int i = 0; i < 3; i++) {
        free(want[i]);
        free(got[i]);
    }
    free(xs), free(ws_), free(bs), free(x2s), free(xds), free(wds);
}

/* A 1x1 convolution whose 196 positions would fill 196 of a tile's 256 columns is computed
 * transposed (tile.c fewer_lanes): the positions the rows of its tiles, the filters packed once
 * for the batch in squares of the lanes, each full block stored as squares; with a bias and a
 * ReLU absorbed, the block is transposed first and they run along the result's rows. */
static void tile_transposed_by_lanes(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 4, SHAPE(2, 37, 14, 14));
    nest_value w = param(f, "w", NEST_F32, 4, SHAPE(128, 37, 1, 1));
    nest_value w2 = param(f, "w2", NEST_F32, 4, SHAPE(128, 37, 1, 1));
    nest_value b = param(f, "b", NEST_F32, 1, SHAPE(128));
    nest_value y = nest_convolution(f, x, w, NULL, NULL, NULL, NULL, NULL, 1);
    nest_value z = nest_add(f, y, nest_broadcast(f, b, 4, SHAPE(2, 128, 14, 14), 3, SHAPE(0, 2, 3)));
    nest_value r = nest_maximum(
        f, z, nest_constant(f, NEST_F32, 4, SHAPE(2, 128, 14, 14), (const float[]){0}, 1));
    nest_value p = nest_convolution(f, x, w2, NULL, NULL, NULL, NULL, NULL, 1);
    assert_value(f, r);
    assert_value(f, p);
    ret(f, 2, (nest_value[]){r, p});
    char *c = emit_c_v4(f);
    assert_int_equal(count_str(c, "blocks of 16 rows: the transposed result"), 2);
    assert_int_equal(count_str(c, "all of it once for the batch"), 2);
    /* the helper, each product's pack, the plain product's store, the absorbed's transpose */
    assert_int_equal(count_str(c, "nest_transpose_f32_16("), 5);
    assert_int_equal(count_str(c, "acct["), 2);
    free(c);
    check_values(f, 1);
    check_values(f, 0);
}

/* A product whose columns waste a little of its tiles' (250 in 256) is computed transposed
 * when the second factor, which it then reads across its rows, is small (24 x 250); a large
 * one (600 x 250, 600 KB) is read along its rows and the product computed as it is. */
static void tile_transposed_small_saving(void **state)
{
    nest_function *f = *state;
    nest_value r[2];
    for (int i = 0; i < 2; i++) {
        int64_t k = i ? 600 : 24;
        nest_value a = param(f, i ? "a1" : "a0", NEST_F32, 2, SHAPE(64, k));
        nest_value b = param(f, i ? "b1" : "b0", NEST_F32, 2, SHAPE(k, 250));
        r[i] = nest_dot(f, a, b);
        assert_value(f, r[i]);
    }
    ret(f, 2, r);
    char *c = emit_c_v4(f);
    assert_int_equal(count_str(c, "blocks of 16 rows: the transposed result"), 1);
    free(c);
    check_values(f, 1);
}

/* A convolution with channels in vector lanes packs its filters by squares of the lanes
 * (nest_transpose_*): whole panels of 16 channels, then element by element the last, partial
 * panel (100 channels) and the sum's last values (20 channels x 9 taps = 11 squares and 4);
 * in f32 and f64. And the form the model picks for ResNet's 512 channels at 7x7: for one image
 * the dense form (positions in lanes, no margins: the pack would not pay), channels in lanes
 * for 8. */
static void conv_channels_by_squares(void **state)
{
    nest_function *f = *state;
    nest_value r[2];
    for (int i = 0; i < 2; i++) {
        nest_type t = i ? NEST_F64 : NEST_F32;
        nest_value x = param(f, i ? "x64" : "x32", t, 4, SHAPE(3, 20, 4, 4));
        nest_value w = param(f, i ? "w64" : "w32", t, 4, SHAPE(100, 20, 3, 3));
        nest_value y = nest_convolution(f, x, w, NULL, NULL, SHAPE(1, 1), SHAPE(1, 1), NULL, 1);
        r[i] = nest_maximum(f, y, nest_constant(f, t, 4, SHAPE(3, 100, 4, 4),
                                                i ? (const void *)(const double[]){0}
                                                  : (const void *)(const float[]){0},
                                                1));
        assert_value(f, r[i]);
    }
    ret(f, 2, r);
    char *c = emit_c_v4(f);
    assert_int_equal(count_str(c, "tiles of 8 positions x 16 output channels"), 2);
    assert_int_equal(count_str(c, "nest_transpose_f32_16(dst"), 1);
    assert_int_equal(count_str(c, "nest_transpose_f64_8(dst"), 1);
    free(c);
    check_values(f, 1);
    check_values(f, 0);

    static const char *const forms[] = {"tiles of 8 output channels x 48 positions",
                                        "tiles of 10 positions x 32 output channels"};
    for (int n = 1; n <= 8; n += 7) {
        nest_function *g = nest_function_new("resnet512");
        assert_non_null(g);
        nest_value x = param(g, "x", NEST_F32, 4, SHAPE(n, 512, 7, 7));
        nest_value w = param(g, "w", NEST_F32, 4, SHAPE(512, 512, 3, 3));
        nest_value y = nest_convolution(g, x, w, NULL, NULL, SHAPE(1, 1), SHAPE(1, 1), NULL, 1);
        assert_value(g, y);
        ret(g, 1, &y);
        c = emit_c_v4(g);
        assert_int_equal(count_str(c, forms[n > 1]), 1);
        assert_int_equal(count_str(c, "positions dense, a run per input channel and tap"), n == 1);
        free(c);
        nest_function_free(g);
    }
}

/* Filters of `shape` as a constant of small integers from seed (exact sums in f32). */
static nest_value const_filters(nest_function *f, int rank, const int64_t *shape, int seed)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((i * 7919 + seed * 104729) % 7) - 3;
    nest_value w = nest_constant(f, NEST_F32, rank, shape, v, n);
    free(v);
    assert_value(f, w);
    return w;
}

/* Constant filters of a convolution with channels in lanes are packed ahead of time: the C
 * reads the constant as panels and packs nothing per call; filters that something else reads
 * too (here a result) are packed per call. And 512 channels at 7x7 for one image take channels
 * in lanes when the pack costs nothing. */
static void conv_filters_packed_ahead(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 4, SHAPE(3, 20, 4, 4));
    nest_value w1 = const_filters(f, 4, SHAPE(100, 20, 3, 3), 1);
    nest_value w2 = const_filters(f, 4, SHAPE(100, 20, 3, 3), 2);
    nest_value r[3];
    r[0] = nest_convolution(f, x, w1, NULL, NULL, SHAPE(1, 1), SHAPE(1, 1), NULL, 1);
    r[1] = nest_convolution(f, x, w2, NULL, NULL, SHAPE(1, 1), SHAPE(1, 1), NULL, 1);
    r[2] = w2;
    assert_value(f, r[0]);
    assert_value(f, r[1]);
    ret(f, 3, r);
    char *c = emit_c_v4(f);
    assert_int_equal(count_str(c, "tiles of 8 positions x 16 output channels"), 2);
    assert_int_equal(count_str(c, "the filters, packed ahead of time"), 1);
    assert_int_equal(count_str(c, "packed for its convolution: per group and 16 output "
                                  "channels, [180: input channel x tap][16]"), 1);
    assert_int_equal(count_str(c, "nest_transpose_f32_16(dst"), 1); /* w2's, per call */
    free(c);
    check_values(f, 1);
    check_values(f, 0);

    nest_function *g = nest_function_new("resnet512");
    assert_non_null(g);
    x = param(g, "x", NEST_F32, 4, SHAPE(1, 512, 7, 7));
    nest_value y = nest_convolution(g, x, const_filters(g, 4, SHAPE(512, 512, 3, 3), 3), NULL,
                                    NULL, SHAPE(1, 1), SHAPE(1, 1), NULL, 1);
    assert_value(g, y);
    ret(g, 1, &y);
    c = emit_c_v4(g);
    assert_int_equal(count_str(c, "tiles of 10 positions x 32 output channels"), 1);
    assert_int_equal(count_str(c, "the filters, packed ahead of time"), 1);
    free(c);
    nest_function_free(g);
}

/* A tiled product's second factor that is a constant only it reads is stored as its panels:
 * a plain product (columns past the last panel's zeros), one on several cores, a batch of
 * products sharing it, and a 1x1 convolution computed transposed (its filters the second
 * factor); a constant that is also a result, or one that the view repeats, is packed per
 * call. */
static void product_constant_panels(void **state)
{
    nest_function *f = *state;
    nest_value r[7];
    r[0] = nest_dot(f, param(f, "x", NEST_F32, 2, SHAPE(256, 300)),
                    const_filters(f, 2, SHAPE(300, 190), 4));
    r[1] = nest_dot(f, param(f, "y", NEST_F32, 2, SHAPE(256, 512)),
                    const_filters(f, 2, SHAPE(512, 256), 5));
    r[2] = nest_batch_dot(f, param(f, "z", NEST_F32, 3, SHAPE(4, 64, 30)),
                          const_filters(f, 2, SHAPE(30, 126), 6));
    r[3] = nest_convolution(f, param(f, "im", NEST_F32, 4, SHAPE(3, 256, 14, 14)),
                            const_filters(f, 4, SHAPE(128, 256, 1, 1), 7), NULL, NULL, NULL, NULL,
                            NULL, 1);
    r[5] = const_filters(f, 2, SHAPE(300, 128), 8);
    r[4] = nest_dot(f, param(f, "u", NEST_F32, 2, SHAPE(256, 300)), r[5]);
    /* a constant [128] repeated down 300 rows: stored whole it would be 300 x 128 */
    r[6] = nest_dot(f, param(f, "v", NEST_F32, 2, SHAPE(256, 300)),
                    nest_broadcast(f, const_filters(f, 1, SHAPE(128), 9), 2, SHAPE(300, 128), 1,
                                   SHAPE(0)));
    for (int i = 0; i < 7; i++)
        assert_value(f, r[i]);
    ret(f, 7, r);
    char *c = emit_c_v4(f);
    assert_int_equal(count_str(c, "a constant packed ahead of time"), 4);
    assert_int_equal(count_str(c, "packed for its product: per block of 64 columns"), 4);
    assert_int_equal(count_str(c, "packed for its product: per block of 64 columns, [300][64]"), 1);
    assert_int_equal(count_str(c, "packed 64 columns at a time"), 2); /* r[5], r[6]: per call */
    free(c);
    check_values(f, 1);
    check_values(f, 0);
}

/* Empty tensors: a fold whose outputs are empty writes nothing (and needs no workspace), a fold
 * over an empty axis still writes its initial values. */
static void empty_folds(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F64, 3, SHAPE(3, 0, 5));
    nest_value y = param(f, "y", NEST_F32, 2, SHAPE(4, 0));
    /* min over axes 0 and 2 of [3,0,5]: a temporary of no elements, read by a broadcast */
    nest_value m = nest_min(f, nest_exp(f, x), 2, SHAPE(0, 2));
    nest_value b = nest_broadcast(f, nest_convert(f, m, NEST_F32), 2, SHAPE(0, 6), 1, SHAPE(1));
    nest_value s = nest_sum(f, nest_exp(f, y), 1, SHAPE(1)); /* [4] of zeros */
    nest_value mx = nest_max(f, y, 1, SHAPE(1));             /* [4] of -inf */
    assert_value(f, mx);
    ret(f, 3, (nest_value[]){b, s, mx});
    char *src = emit_c(f, 1);
    assert_null(strstr(src, "ws +"));
    free(src);
    check_values(f, 1);
    check_values(f, 0);
}

/* sum over the middle axis of a 3-d tensor. */
static void sum_middle_axis(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 3, SHAPE(7, 33, 5));
    nest_value r = nest_sum(f, nest_multiply(f, x, x), 1, SHAPE(1));
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_nests(&pl->p), 1);
    assert_int_equal(live_temps(&pl->p), 0);
    const nest *ne = live_nest(&pl->p, 0);
    assert_int_equal(ne->outs[0].reduce, OP_SUM);
    assert_int_equal(ne->reduced != 0, 1);
    plan_release(pl);
    check_values(f, 1);
    check_values(f, 0);
}

/* softmax over rows: exp(x - max) / sum(exp(x - max)). */
static void row_softmax(void **state)
{
    nest_function *f = *state;
    int64_t m = 37, n = 101;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(m, n));
    nest_value mx = nest_max(f, x, 1, SHAPE(1));
    nest_value e = nest_exp(f, nest_subtract(f, x, nest_broadcast(f, mx, 2, SHAPE(m, n), 1, SHAPE(1))));
    nest_value s = nest_sum(f, e, 1, SHAPE(1));
    nest_value r = nest_divide(f, e, nest_broadcast(f, s, 2, SHAPE(m, n), 1, SHAPE(1)));
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    /* max, then exp with its sum, then the division: the exp is computed once per element */
    int exps = 0;
    for (int k = 0; k < live_nests(&pl->p); k++)
        exps += count_ops(&pl->p, live_nest(&pl->p, k), OP_EXP);
    assert_int_equal(exps, 1);
    assert_true(live_nests(&pl->p) <= 3);
    plan_release(pl);
    check_values_in(f, 1, -20, 20, 1e-5);
    check_values_in(f, 0, -20, 20, 1e-5);
}

/* A layer norm over rows: the row sums and the per-row scalar steps between them (the mean,
 * 1/sqrt of the variance) share one loop over the rows, and every temporary is row-local. */
static void row_layer_norm(void **state)
{
    nest_function *f = *state;
    int64_t m = 19, n = 64;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(m, n));
    nest_value cn = nest_broadcast(f, nest_constant(f, NEST_F32, 0, NULL, &(float){64}, 1), 1,
                                   SHAPE(m), 1, SHAPE(0));
    nest_value mean = nest_divide(f, nest_sum(f, x, 1, SHAPE(1)), cn);
    nest_value d = nest_subtract(f, x, nest_broadcast(f, mean, 2, SHAPE(m, n), 1, SHAPE(1)));
    nest_value var = nest_divide(f, nest_sum(f, nest_multiply(f, d, d), 1, SHAPE(1)), cn);
    nest_value one = nest_broadcast(f, nest_constant(f, NEST_F32, 0, NULL, &(float){1}, 1), 1,
                                    SHAPE(m), 1, SHAPE(0));
    nest_value inv = nest_divide(f, one, nest_sqrt(f, var));
    nest_value r = nest_multiply(f, d, nest_broadcast(f, inv, 2, SHAPE(m, n), 1, SHAPE(1)));
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_true(live_nests(&pl->p) >= 3);
    for (int k = 0; k < live_nests(&pl->p); k++) {
        const nest *ne = live_nest(&pl->p, k);
        assert_true(ne->rowed);
        assert_int_equal(ne->group, live_nest(&pl->p, 0)->group);
    }
    assert_int_equal(pl->p.ws_size, 0);
    plan_release(pl);
    check_values_in(f, 1, -4, 4, 1e-4);
    check_values_in(f, 0, -4, 4, 1e-4);
}

/* Nests that proceed row by row share their outer loop only when each reads rows already
 * computed: a row reduction broadcast along the other axis (column j needs row j's maximum)
 * and a transposed read of a stored value keep loops of their own. */
static void rows_respect_dependences(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(6, 6));
    nest_value m = nest_max(f, x, 1, SHAPE(1));
    nest_value a = nest_subtract(f, x, nest_broadcast(f, m, 2, SHAPE(6, 6), 1, SHAPE(0)));
    nest_value y = nest_exp(f, x);
    nest_value t = nest_add(f, nest_reshape(f, y, SHAPE(1, 0), 2, SHAPE(6, 6)), a);
    nest_value s = nest_sum(f, nest_multiply(f, t, t), 1, SHAPE(1));
    nest_value u = nest_divide(f, t, nest_broadcast(f, nest_add(f, s, s), 2, SHAPE(6, 6), 1,
                                                     SHAPE(0)));
    assert_value(f, u);
    ret(f, 3, (nest_value[]){y, t, u});
    planned *pl = plan_all(f, 1);
    /* the nest that reads m by columns is not in the group of the nest that computes m */
    for (int k = 0; k < live_nests(&pl->p); k++) {
        const nest *ne = live_nest(&pl->p, k);
        for (int i = 0; i < ne->nouts; i++)
            if (ne->outs[i].node == m)
                for (int j = k + 1; j < live_nests(&pl->p); j++) {
                    const nest *rd = live_nest(&pl->p, j);
                    for (int o = 0; o < rd->nouts; o++)
                        if (fx_reads(&pl->p, rd->outs[o].value, ne->outs[i].buf))
                            assert_true(!rd->rowed || rd->group != ne->group);
                }
    }
    plan_release(pl);
    check_values(f, 1);
    check_values(f, 0);
}

/* Without fusion every op is a nest of its own (views stay views), with the same values. */
static void no_fuse_one_nest_per_op(void **state)
{
    nest_function *f = *state;
    nest_value a = param(f, "a", NEST_F32, 2, SHAPE(4, 5));
    nest_value b = param(f, "b", NEST_F32, 2, SHAPE(4, 5));
    nest_value t = nest_exp(f, nest_add(f, a, b));
    nest_value u = nest_reshape(f, t, SHAPE(1, 0), 2, SHAPE(5, 4));
    nest_value r = nest_multiply(f, u, nest_reshape(f, a, SHAPE(1, 0), 2, SHAPE(5, 4)));
    nest_value s = nest_sum(f, r, 1, SHAPE(0));
    assert_value(f, s);
    ret(f, 2, (nest_value[]){r, s});

    /* add, exp, multiply, sum: four nests, the two transposes are views */
    planned *pl = plan_all(f, 0);
    assert_int_equal(live_nests(&pl->p), 4);
    assert_int_equal(live_temps(&pl->p), 2);
    for (int k = 0; k < 4; k++)
        assert_int_equal(live_nest(&pl->p, k)->nouts, 1);
    plan_release(pl);

    pl = plan_all(f, 1);
    assert_int_equal(live_temps(&pl->p), 0);
    plan_release(pl);

    char *c = emit_c(f, 0);
    assert_int_equal(count_str(c, "loops over ["), 4);
    free(c);
    check_values(f, 0);
    check_values(f, 1);
}

/* Liveness of one temporary: the first and last live nest that touch it. */
static void life_of(plan *p, int32_t b, int *first, int *last)
{
    *first = *last = -1;
    for (int k = 0; k < live_nests(p); k++) {
        const nest *ne = live_nest(p, k);
        for (int i = 0; i < ne->nouts; i++)
            if (ne->outs[i].buf == b || fx_reads(p, ne->outs[i].value, b)) {
                if (*first < 0)
                    *first = k;
                *last = k;
            }
    }
}

/* Every pair of workspace temporaries whose lives overlap occupies disjoint bytes, inside
 * ws_size; returns the sum of their sizes. */
static int64_t check_workspace(plan *p)
{
    int64_t sum = 0;
    for (int32_t b = 0; b < p->nbufs; b++) {
        const pbuf *x = &p->bufs[b];
        if (x->kind != BUF_TEMP || x->dead || x->row)
            continue;
        int64_t xs = x->count * (int64_t)nest_type_size((nest_type)x->etype);
        sum += xs;
        assert_true(x->offset >= 0 && x->offset + xs <= p->ws_size);
        assert_int_equal(x->offset % 64, 0);
        int xf, xl;
        life_of(p, b, &xf, &xl);
        assert_true(xf >= 0);
        for (int32_t c = b + 1; c < p->nbufs; c++) {
            const pbuf *y = &p->bufs[c];
            if (y->kind != BUF_TEMP || y->dead || y->row)
                continue;
            int64_t ys = y->count * (int64_t)nest_type_size((nest_type)y->etype);
            int yf, yl;
            life_of(p, c, &yf, &yl);
            bool overlap_time = !(xl < yf || yl < xf);
            bool overlap_bytes = x->offset < y->offset + ys && y->offset < x->offset + xs;
            if (overlap_time && overlap_bytes)
                fail_msg("temporaries b%d [%d,%d] and b%d [%d,%d] share bytes", b, xf, xl, c, yf,
                         yl);
        }
    }
    return sum;
}

/* A chain of reductions: each temporary lives from its nest to the next, so the first and
 * the third share bytes while neighbours do not. */
static void memplan_shares_by_liveness(void **state)
{
    nest_function *f = *state;
    /* reductions over the outer axis: no row groups, the temporaries live in the workspace */
    nest_value x = param(f, "x", NEST_F32, 4, SHAPE(8, 10, 12, 16));
    nest_value a = nest_sum(f, nest_exp(f, x), 1, SHAPE(0));        /* [10,12,16] */
    nest_value b = nest_sum(f, nest_tanh(f, a), 1, SHAPE(0));       /* [12,16] */
    nest_value c = nest_max(f, nest_sqrt(f, nest_abs(f, b)), 1, SHAPE(0)); /* [16] */
    nest_value r = nest_sum(f, nest_log(f, c), 1, SHAPE(0));
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    assert_int_equal(live_temps(&pl->p), 3);
    int64_t sum = check_workspace(&pl->p);
    assert_true(pl->p.ws_size < sum);
    /* the largest (a) and the smallest (c) do not live at once: c sits inside a's bytes */
    int32_t ta = -1, tc = -1;
    for (int32_t i = 0; i < pl->p.nbufs; i++) {
        if (pl->p.bufs[i].kind != BUF_TEMP || pl->p.bufs[i].dead)
            continue;
        if (pl->p.bufs[i].count == 10 * 12 * 16)
            ta = i;
        if (pl->p.bufs[i].count == 16)
            tc = i;
    }
    assert_true(ta >= 0 && tc >= 0);
    assert_true(pl->p.bufs[tc].offset < pl->p.bufs[ta].offset + 10 * 12 * 16 * 4);
    plan_release(pl);
    check_values_in(f, 1, 0.0, 1.0, 1e-4);
}

/* Without fusion every op stores: many temporaries, placed without conflicts, and the
 * workspace is smaller than all of them together. */
static void memplan_no_fuse_chain(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F64, 1, SHAPE(100)); /* rank 1: no row groups */
    nest_value v = x;
    for (int i = 0; i < 6; i++)
        v = i % 2 ? nest_tanh(f, nest_add(f, v, x)) : nest_multiply(f, v, x);
    nest_value r = nest_sum(f, v, 1, SHAPE(0));
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 0);
    assert_int_equal(live_temps(&pl->p), 9);
    int64_t sum = check_workspace(&pl->p);
    assert_true(pl->p.ws_size < sum);
    assert_true(pl->p.ws_size >= 2 * 800); /* a value and its successor live at once */
    plan_release(pl);
    check_values(f, 0);
    check_values(f, 1);
}

/* Temporaries that are all live at the end (read by one last nest) never share. */
static void memplan_overlapping_lives(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F32, 2, SHAPE(8, 9));
    nest_value s0 = nest_sum(f, x, 1, SHAPE(0));   /* [9] */
    nest_value s1 = nest_max(f, x, 1, SHAPE(0));   /* [9] */
    nest_value s2 = nest_min(f, x, 1, SHAPE(0));   /* [9] */
    nest_value t = nest_add(f, nest_add(f, s0, s1), s2);
    nest_value r = nest_sum(f, nest_exp(f, t), 1, SHAPE(0));
    assert_value(f, r);
    ret(f, 1, &r);

    planned *pl = plan_all(f, 1);
    int temps = live_temps(&pl->p);
    assert_true(temps >= 1);
    int64_t sum = check_workspace(&pl->p);
    assert_true(pl->p.ws_size >= sum);
    plan_release(pl);
    check_values(f, 1);
    check_values(f, 0);
}

/* Temporaries of different element types never share workspace bytes, even when their lives
 * do not overlap: compilers' type-based alias analysis may move a load of the first type below
 * a store of the second to the same address (clang did: a copy of a double temporary read the
 * int32 product that reused its bytes). */
static void memplan_types_do_not_share(void **state)
{
    nest_function *f = *state;
    nest_value x = param(f, "x", NEST_F64, 2, SHAPE(8, 16));
    nest_value p = param(f, "p", NEST_I32, 2, SHAPE(9, 16));
    nest_value a = nest_sum(f, x, 1, SHAPE(0)); /* f64[16], a temporary */
    nest_value r1 = nest_multiply(f, a, a);
    nest_value d = nest_sum(f, p, 1, SHAPE(0)); /* i32[16], a temporary after a's life */
    nest_value r2 = nest_multiply(f, d, d);
    assert_value(f, r2);
    ret(f, 2, (nest_value[]){r1, r2});
    planned *pl = plan_all(f, 1);
    assert_int_equal(live_temps(&pl->p), 2);
    check_workspace(&pl->p);
    const pbuf *t[2];
    int n = 0;
    for (int32_t b = 0; b < pl->p.nbufs; b++)
        if (pl->p.bufs[b].kind == BUF_TEMP && !pl->p.bufs[b].dead)
            t[n++] = &pl->p.bufs[b];
    assert_int_not_equal(t[0]->etype, t[1]->etype);
    int64_t s0 = t[0]->count * (int64_t)nest_type_size((nest_type)t[0]->etype);
    int64_t s1 = t[1]->count * (int64_t)nest_type_size((nest_type)t[1]->etype);
    assert_true(t[0]->offset + s0 <= t[1]->offset || t[1]->offset + s1 <= t[0]->offset);
    plan_release(pl);
    check_values(f, 1);
}

/* The graph in which the random tester found it: with fusion, the copy of a returned value
 * into its second result array read the product's integers. */
static void memplan_types_regression(void **state)
{
    nest_function *f = *state;
    nest_value p2 = nest_parameter(f, "p2", NEST_F64, 4, SHAPE(1, 6, 128, 7), NEST_COL_MAJOR);
    nest_value p3 = nest_parameter(f, "p3", NEST_I32, 2, SHAPE(31, 22), NEST_COL_MAJOR);
    nest_value p4 = param(f, "p4", NEST_I32, 2, SHAPE(22, 109));
    nest_value p5 = param(f, "p5", NEST_I32, 1, SHAPE(109));
    nest_value m = nest_min(f, nest_subtract(f, p2, p2), 1, SHAPE(1));
    nest_value r = nest_reshape(f, m, NULL, 2, SHAPE(1, 896));
    nest_value d = nest_add(f, nest_dot(f, p3, p4), nest_broadcast(f, p5, 2, SHAPE(31, 109), 1,
                                                                    SHAPE(0)));
    assert_value(f, d);
    ret(f, 3, (nest_value[]){d, r, r});
    check_values_in(f, 1, -20, 20, 0);
    check_values_in(f, 0, -20, 20, 0);
}

/* ---- nestc ---- */

/* Runs `nestc ARGS FILE` on the text; returns its stdout (malloc'd) and exit status. */
static char *run_nestc(const char *args, const char *text, int *status)
{
    char path[] = "/tmp/nest-test-fuse-XXXXXX.nest";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", tu_nestc(), args, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *s = tu_read_all(p);
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    remove(path);
    return s;
}

static const char sample[] =
    "func l2(x: f32[1000], y: f32[1000]) -> f32[] {\n"
    "  d = subtract(x, y)\n"
    "  return dot(d, d)\n"
    "}\n"
    "func chain(x: f32[8,9]) -> f32[] {\n"
    "  a = sum(exp(x), axes=[1])\n"
    "  return sum(tanh(a), axes=[0])\n"
    "}\n";

static void nestc_dumps(void **state)
{
    (void)state;
    static const char *const passes[] = {"fuse", "flatten", "memplan"};
    for (size_t i = 0; i < countof(passes); i++) {
        char args[64];
        snprintf(args, sizeof args, "--dump-after=%s", passes[i]);
        int st;
        char *out = run_nestc(args, sample, &st);
        if (st != 0)
            fail_msg("nestc %s: status %d: %s", args, st, out);
        assert_non_null(strstr(out, "plan l2:"));
        assert_non_null(strstr(out, "plan chain:"));
        assert_non_null(strstr(out, "nest 0 over ["));
        assert_non_null(strstr(out, "sum multiply(subtract("));
        if (strcmp(passes[i], "memplan") == 0)
            assert_non_null(strstr(out, "plan l2: 3 buffers, workspace 0 bytes"));
        free(out);
    }
    int st;
    char *out = run_nestc("--dump-after=nosuchpass", sample, &st);
    assert_int_not_equal(st, 0);
    free(out);
    out = run_nestc("--no-fuse --dump-after=fuse", sample, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "plan l2:"));
    free(out);
    out = run_nestc("--emit=dot", sample, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "digraph"));
    assert_non_null(strstr(out, "subtract"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(l2_is_one_loop, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(double_transpose_is_a_view, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(broadcast_is_stride_zero, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(shared_value_computed_once, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(shared_value_two_reductions, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(contiguous_flattens_to_one_loop, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(flatten_respects_layouts, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(views_compose, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(merging_transposed_axes_copies, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(merging_transposed_expression_copies_once, fn_setup,
                                        fn_teardown),
        cmocka_unit_test_setup_teardown(contiguous_reshape_is_a_view, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(concat_fuses_with_split_loops, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(concat_slice_transpose, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(concat_on_row_axis, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(tile_epilogue_with_concat, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(tile_results_past_caches, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(tile_transposed_by_lanes, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(tile_transposed_small_saving, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(conv_channels_by_squares, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(conv_filters_packed_ahead, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(product_constant_panels, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(empty_folds, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(sum_middle_axis, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(row_softmax, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(row_layer_norm, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(rows_respect_dependences, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(no_fuse_one_nest_per_op, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(batch_of_products_by_product, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(memplan_shares_by_liveness, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(memplan_no_fuse_chain, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(memplan_overlapping_lives, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(memplan_types_do_not_share, fn_setup, fn_teardown),
        cmocka_unit_test_setup_teardown(memplan_types_regression, fn_setup, fn_teardown),
        cmocka_unit_test(nestc_dumps),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
