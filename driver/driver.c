/*
 * driver.c - the public compile-and-call API of nest.h, joining the compiler (graph to C text) to
 * the runtime (C text to code): nest_compile (in process, through the
 * cache), nest_call, and nest_build_so (ahead of time with the system compiler).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "rt.h"

struct nest_kernel {
    rt_code *code;
    int (*call)(void *const *args, void *const *results);
    int (*call_ws)(void *const *args, void *const *results, void *ws);
    /* a function with state: the same, after the state's array of tensors */
    int (*call_st)(void *st, void *const *args, void *const *results);
    int (*call_st_ws)(void *st, void *const *args, void *const *results, void *ws);
    bool state;         /* the function reads or assigns the state of its module */
    int nstates;        /* the module's state tensors, and their layout hash */
    uint64_t layout;
    void *ws;
    size_t ws_size;
    atomic_bool ws_busy; /* a call is using ws: another call at the same time makes its own */
    void **consts;      /* copies of the function's constants, for nest_consts_NAME */
    int32_t nconsts;
    int nparams, nresults;
    int64_t *counts;    /* elements of each parameter, then of each result */
    /* a function with symbolic dims: the entry points by dims, and each parameter's and
     * result's count as a polynomial of the dims (factors: their positions in dims) */
    int ndims;
    int (*call_ws_dims)(const int64_t *dims, void *const *args, void *const *results, void *ws);
    int (*call_st_ws_dims)(void *st, const int64_t *dims, void *const *args,
                           void *const *results, void *ws); /* ... with state */
    size_t (*ws_size_dims)(const int64_t *dims);
    bool ws_dims;       /* ... placing something in the workspace at some sizes */
    dim_expr *count_exprs;
    int64_t *bytes;     /* ... and their sizes in bytes */
    int *esize;         /* ... and the bytes of their elements */
    char *name;
    bool cache_hit;
    char *cache_note;   /* why the cache was not used, or NULL */
    double compile_ms;
};

/* The message of the last failed nest_call in this thread, and its kernel: calls on one kernel
 * run in many threads at once, and a message made without allocating never runs out of memory. */
static _Thread_local struct {
    const nest_kernel *k;
    char msg[512];
} call_err;

static rt_opts runtime_opts(const nest_options *o)
{
    rt_opts r = {o->opt_level, o->march, o->openmp != 0, o->cache != 0};
    return r;
}

void nest_kernel_free(nest_kernel *k)
{
    if (!k)
        return;
    rt_code_free(k->code);
    for (int32_t i = 0; i < k->nconsts; i++)
        free(k->consts ? k->consts[i] : NULL);
    free(k->consts);
    free(k->ws);
    free(k->counts);
    free(k->bytes);
    free(k->esize);
    for (int i = 0; k->count_exprs && i < k->nparams + k->nresults; i++)
        free(k->count_exprs[i].terms);
    free(k->count_exprs);
    free(k->name);
    free(k->cache_note);
    if (call_err.k == k)
        call_err.k = NULL;
    free(k);
}

/* k->count_exprs: each parameter's and result's element count as a polynomial whose factors
 * are positions in the dims array; false when out of memory. */
static bool count_polys(nest_kernel *k, nest_function *f)
{
    int32_t *ids = NULL, nd = 0;
    int32_t ne = dim_entry_count(f);
    int *pos = calloc((size_t)ne + 1, sizeof *pos);
    k->count_exprs = calloc((size_t)(f->nparams + f->nresults) + 1, sizeof *k->count_exprs);
    if (!pos || !k->count_exprs || ir_dims_of(f, &ids, &nd) != NEST_OK) {
        free(pos);
        return false;
    }
    for (int32_t i = 0; i < nd; i++)
        pos[ids[i]] = i;
    k->ndims = nd;
    bool ok = true;
    for (int32_t i = 0; ok && i < f->nparams + f->nresults; i++) {
        const ir_node *n = &f->nodes[i < f->nparams ? f->params[i] : f->results[i - f->nparams]];
        int64_t c = ir_dims_count(f, n->rank, n->shape);
        const dim_expr *e = dim_entry(f, c);
        dim_expr *x = &k->count_exprs[i];
        if (c == DIM_NONE) {
            ok = false;
        } else if (!e) { /* plain */
            x->terms = calloc(1, sizeof *x->terms);
            ok = x->terms != NULL;
            if (ok && c != 0) {
                x->nterms = 1;
                x->terms[0].coef = c;
            }
        } else {
            x->terms = calloc((size_t)e->nterms + 1, sizeof *x->terms);
            ok = x->terms != NULL;
            for (int t = 0; ok && t < e->nterms; t++) {
                x->terms[t] = e->terms[t];
                for (int j = 0; j < e->terms[t].nf; j++)
                    x->terms[t].f[j] = pos[e->terms[t].f[j]];
            }
            x->nterms = ok ? e->nterms : 0;
        }
    }
    free(ids);
    free(pos);
    return ok;
}

/* The value of a count polynomial at dims, saturating at INT64_MAX (the kernel's own check
 * refuses such sizes; here it only has to be positive). */
static int64_t count_at(const dim_expr *x, const int64_t *dims)
{
    int64_t s;
    return dim_terms_eval(x->terms, x->nterms, dims, &s) == NEST_OK ? s : INT64_MAX;
}

nest_kernel *nest_compile(nest_function *f, const nest_options *opts)
{
    if (!f)
        return NULL;
    double t0 = clock_ms();
    nest_options defaults;
    if (!opts) {
        nest_options_init(&defaults);
        opts = &defaults;
    }
    jit_info info;
    char *src = pipeline_emit_jit(f, opts, &info);
    if (!src)
        return NULL;
    nest_kernel *k = calloc(1, sizeof *k);
    char *err = NULL;
    if (!k)
        goto nomem;
    atomic_init(&k->ws_busy, false);
    k->nparams = f->nparams;
    k->nresults = f->nresults;
    k->state = ir_uses_state(f);
    if (k->state) {
        k->nstates = f->module->nstates;
        k->layout = ir_state_layout_hash(f->module);
    }
    k->counts = malloc(((size_t)f->nparams + (size_t)f->nresults + 1) * sizeof *k->counts);
    k->bytes = malloc(((size_t)f->nparams + (size_t)f->nresults + 1) * sizeof *k->bytes);
    k->esize = malloc(((size_t)f->nparams + (size_t)f->nresults + 1) * sizeof *k->esize);
    k->name = strdup(f->name);
    k->consts = calloc((size_t)info.nconsts + 1, sizeof *k->consts);
    if (!k->counts || !k->bytes || !k->esize || !k->name || !k->consts)
        goto nomem;
    for (int32_t i = 0; i < f->nparams + f->nresults; i++) {
        const ir_node *n = &f->nodes[i < f->nparams ? f->params[i] : f->results[i - f->nparams]];
        k->counts[i] = ir_count(n);
        k->esize[i] = (int)nest_type_size((nest_type)n->etype);
        k->bytes[i] = k->counts[i] * k->esize[i];
    }
    if (ir_is_symbolic(f) && !count_polys(k, f))
        goto nomem;
    k->nconsts = info.nconsts;
    for (int32_t i = 0; i < info.nconsts; i++) {
        size_t bytes;
        void *owned;
        const void *data = pipeline_const_data(&info, i, &bytes, &owned);
        if (!data)
            goto nomem;
        if (!owned && (owned = malloc(bytes + 1)))
            memcpy(owned, data, bytes);
        if (!(k->consts[i] = owned))
            goto nomem;
    }
    if (info.ws_size > 0) {
        k->ws_size = (size_t)info.ws_size;
        if (!(k->ws = aligned_alloc(64, (k->ws_size + 63) & ~(size_t)63))) {
            ir_error(f, NEST_ERR_NOMEM, "%s: out of memory for the workspace of %zu bytes", f->name,
                     k->ws_size);
            goto fail;
        }
    }

    rt_opts ro = runtime_opts(opts);
    int st = rt_jit(src, strlen(src), &ro, &k->code, &k->cache_hit, &err);
    if (st != NEST_OK) {
        ir_error(f, st, "compiling %s: %s", f->name, err ? err : nest_status_str(st));
        goto fail;
    }
    const char *note = rt_code_cache_note(k->code);
    if (note[0] && !(k->cache_note = strdup(note)))
        goto nomem;
    char sym[IR_MAX_NAME + 32];
    if (k->count_exprs) {
        snprintf(sym, sizeof sym, "%s_call_ws_dims", f->name);
        void *e1 = rt_code_symbol(k->code, sym);
        snprintf(sym, sizeof sym, "%s_workspace_size_dims", f->name);
        void *e2 = rt_code_symbol(k->code, sym);
        if (!e1 || !e2) {
            ir_error(f, NEST_ERR_COMPILE, "compiling %s: the entry point %s is missing", f->name,
                     sym);
            goto fail;
        }
        if (k->state)
            memcpy(&k->call_st_ws_dims, &e1, sizeof e1);
        else
            memcpy(&k->call_ws_dims, &e1, sizeof e1);
        memcpy(&k->ws_size_dims, &e2, sizeof e2);
        k->ws_dims = info.ws_dims;
        goto entered;
    }
    snprintf(sym, sizeof sym, k->ws ? "%s_call_ws" : "%s_call", f->name);
    void *entry = rt_code_symbol(k->code, sym);
    if (!entry) {
        ir_error(f, NEST_ERR_COMPILE, "compiling %s: the entry point %s is missing", f->name, sym);
        goto fail;
    }
    /* function pointers from object pointers: POSIX guarantees the round trip */
    if (k->state && k->ws)
        memcpy(&k->call_st_ws, &entry, sizeof entry);
    else if (k->state)
        memcpy(&k->call_st, &entry, sizeof entry);
    else if (k->ws)
        memcpy(&k->call_ws, &entry, sizeof entry);
    else
        memcpy(&k->call, &entry, sizeof entry);
entered:
    if (info.nconsts > 0) {
        snprintf(sym, sizeof sym, "nest_consts_%s", f->name);
        const void **table = rt_code_symbol(k->code, sym);
        if (!table) {
            ir_error(f, NEST_ERR_COMPILE, "compiling %s: the constants table is missing", f->name);
            goto fail;
        }
        for (int32_t i = 0; i < info.nconsts; i++)
            table[i] = k->consts[i];
    }
    pipeline_info_free(&info);
    free(src);
    free(err);
    k->compile_ms = clock_ms() - t0;
    return k;

nomem:
    ir_error(f, NEST_ERR_NOMEM, "compiling %s: out of memory", f->name);
fail:
    pipeline_info_free(&info);
    free(src);
    free(err);
    nest_kernel_free(k);
    return NULL;
}

static int call_error(nest_kernel *k, int status, const char *fmt, ...) FORMAT(3, 4);
static int call_error(nest_kernel *k, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call_err.msg, sizeof call_err.msg, fmt, ap);
    va_end(ap);
    call_err.k = k;
    return status;
}

/* The entry point with a workspace: the one by dims, the one taking the state first, or the
 * plain one. */
static int call_ws(nest_kernel *k, const int64_t *dims, void *st, void *const *args,
                   void *const *results, void *ws)
{
    if (k->count_exprs)
        return k->state ? k->call_st_ws_dims(st, dims, args, results, ws)
                        : k->call_ws_dims(dims, args, results, ws);
    return k->state ? k->call_st_ws(st, args, results, ws) : k->call_ws(args, results, ws);
}

/* Runs the kernel with a workspace of `size` bytes: its own (grown to the largest size called
 * so far: symbolic dims), or one of the call's own when another call holds it (many threads
 * calling one kernel). -1 when out of memory. */
static int run_with_workspace(nest_kernel *k, size_t size, const int64_t *dims, void *st,
                              void *const *args, void *const *results)
{
    if (size == 0) { /* nothing placed at these sizes: no workspace to take (two atomic
                      * operations are a third of the call of an L2 of one row) */
        _Alignas(64) unsigned char none[64];
        return call_ws(k, dims, st, args, results, none);
    }
    size_t bytes = (size + 63) & ~(size_t)63;
    void *ws;
    bool idle = false;
    if (atomic_compare_exchange_strong(&k->ws_busy, &idle, true)) {
        if (size > k->ws_size && (ws = aligned_alloc(64, bytes))) {
            free(k->ws);
            k->ws = ws;
            k->ws_size = size;
        }
        int rc = size > k->ws_size ? -1 : call_ws(k, dims, st, args, results, k->ws);
        atomic_store(&k->ws_busy, false);
        return rc;
    }
    ws = aligned_alloc(64, bytes);
    int rc = ws ? call_ws(k, dims, st, args, results, ws) : -1;
    free(ws);
    return rc;
}

/* The elements of array i (the parameters, then the results): counts[i], or with symbolic dims
 * (counts NULL) evaluated at dims. */
static int64_t array_count(const nest_kernel *k, const int64_t *counts, const int64_t *dims, int i)
{
    return counts ? counts[i] : count_at(&k->count_exprs[i], dims);
}

/* The checks of every call: argument and result counts, and NULL and aliased arrays (counts:
 * the elements of each parameter, then of each result; NULL: evaluated at dims for an array
 * that is NULL or aliased, which only an empty one may be). */
static int check_call(nest_kernel *k, const int64_t *counts, const int64_t *dims, void *const *args,
                      int nargs, void *const *results, int nresults)
{
    if (nargs != k->nparams || nresults != k->nresults)
        return call_error(k, NEST_ERR_CALL,
                          "%s takes %d argument%s and %d result%s; given %d and %d", k->name,
                          k->nparams, k->nparams == 1 ? "" : "s", k->nresults,
                          k->nresults == 1 ? "" : "s", nargs, nresults);
    if ((nargs && !args) || (nresults && !results))
        return call_error(k, NEST_ERR_CALL, "%s: the argument or result list is NULL", k->name);
    for (int i = 0; i < nargs; i++)
        if (!args[i] && array_count(k, counts, dims, i) > 0)
            return call_error(k, NEST_ERR_CALL, "%s: argument %d is NULL", k->name, i + 1);
    for (int i = 0; i < nresults; i++) {
        if (!results[i] && array_count(k, counts, dims, nargs + i) > 0)
            return call_error(k, NEST_ERR_CALL, "%s: result %d is NULL", k->name, i + 1);
        for (int j = 0; j < nargs; j++)
            if (results[i] && results[i] == args[j] && array_count(k, counts, dims, nargs + i) > 0)
                return call_error(k, NEST_ERR_CALL,
                                  "%s: result %d is the array of argument %d (results must be "
                                  "distinct arrays)",
                                  k->name, i + 1, j + 1);
        for (int j = 0; j < i; j++)
            if (results[i] && results[i] == results[j] &&
                array_count(k, counts, dims, nargs + i) > 0)
                return call_error(k, NEST_ERR_CALL, "%s: results %d and %d are the same array",
                                  k->name, j + 1, i + 1);
    }
    return NEST_OK;
}

/* Runs a checked call (st: the state's tensors, or NULL). */
static int run(nest_kernel *k, void *st, void *const *args, void *const *results)
{
    int rc = k->ws      ? run_with_workspace(k, k->ws_size, NULL, st, args, results)
             : k->state ? k->call_st(st, args, results)
                        : k->call(args, results);
    if (rc < 0)
        return call_error(k, NEST_ERR_NOMEM,
                          "%s: out of memory for a workspace of %zu bytes (the kernel's own is in "
                          "use by a call in another thread)",
                          k->name, k->ws_size);
    if (rc != 0)
        return call_error(k, NEST_ERR_NOMEM, "%s: the kernel failed (%d)", k->name, rc);
    return NEST_OK;
}

int nest_call(nest_kernel *k, void *const *args, int nargs, void *const *results, int nresults)
{
    if (!k)
        return NEST_ERR_ARG;
    if (k->count_exprs)
        return call_error(k, NEST_ERR_CALL, "%s has symbolic dims: call it with %s", k->name,
                          k->state ? "nest_call_state_dims" : "nest_call_dims");
    if (k->state)
        return call_error(k, NEST_ERR_CALL,
                          "%s reads or assigns state: call it with nest_call_state", k->name);
    int st = check_call(k, k->counts, NULL, args, nargs, results, nresults);
    return st != NEST_OK ? st : run(k, NULL, args, results);
}

/* A call of a kernel with symbolic dims, with the state st (NULL for a function without). */
static int call_dims(nest_kernel *k, nest_state *st, const int64_t *dims, int ndims,
                     void *const *args, int nargs, void *const *results, int nresults)
{
    if (ndims != k->ndims || (ndims > 0 && !dims))
        return call_error(k, NEST_ERR_CALL, "%s takes %d dim%s; given %d", k->name, k->ndims,
                          k->ndims == 1 ? "" : "s", ndims);
    for (int i = 0; i < ndims; i++)
        if (dims[i] < 0)
            return call_error(k, NEST_ERR_CALL, "%s: dim %d is negative (%lld)", k->name, i + 1,
                              (long long)dims[i]);
    int status = check_call(k, NULL, dims, args, nargs, results, nresults);
    if (status == NEST_OK && k->state) {
        /* the arrays' bytes at these sizes, for the checks of the state's (on the stack for up
         * to 64 arrays: small calls pay no allocation) */
        int64_t small[64];
        size_t nc = (size_t)k->nparams + (size_t)k->nresults;
        int64_t *bytes = nc <= 64 ? small : malloc(nc * sizeof *bytes);
        if (!bytes)
            return call_error(k, NEST_ERR_NOMEM, "%s: out of memory", k->name);
        for (size_t i = 0; i < nc; i++) {
            int64_t n = count_at(&k->count_exprs[i], dims);
            bytes[i] = n > INT64_MAX / k->esize[i] ? INT64_MAX : n * k->esize[i];
        }
        char *msg = NULL;
        if ((status = state_check_call(st, k->nstates, k->layout, k->name, args, nargs, bytes,
                                       results, nresults, bytes + nargs, &msg)) != NEST_OK) {
            call_error(k, status, "%s", msg ? msg : "out of memory");
            free(msg);
        }
        if (bytes != small)
            free(bytes);
    }
    if (status != NEST_OK)
        return status;
    size_t size = k->ws_dims ? k->ws_size_dims(dims) : 0;
    state_lock(st); /* calls with one state object take turns, as nest_call_state's */
    int rc = run_with_workspace(k, size, dims, st ? st->t : NULL, args, results);
    state_unlock(st);
    if (rc < 0)
        return call_error(k, NEST_ERR_NOMEM, "%s: out of memory for a workspace of %zu bytes",
                          k->name, size);
    if (rc != 0)
        return call_error(k, NEST_ERR_CALL,
                          "%s: the sizes do not fit its shapes (a dim expression overflows, a "
                          "shape passes the limit of 2^62 bytes, or a slice bound passes its "
                          "axis)",
                          k->name);
    return NEST_OK;
}

int nest_call_dims(nest_kernel *k, const int64_t *dims, int ndims, void *const *args, int nargs,
                   void *const *results, int nresults)
{
    if (!k)
        return NEST_ERR_ARG;
    if (!k->count_exprs && ndims == 0)
        return nest_call(k, args, nargs, results, nresults);
    if (k->state)
        return call_error(k, NEST_ERR_CALL,
                          "%s reads or assigns state: call it with nest_call_state_dims", k->name);
    return call_dims(k, NULL, dims, ndims, args, nargs, results, nresults);
}

int nest_call_state_dims(nest_kernel *k, nest_state *st, const int64_t *dims, int ndims,
                         void *const *args, int nargs, void *const *results, int nresults)
{
    if (!k)
        return NEST_ERR_ARG;
    if (!k->count_exprs && ndims == 0)
        return nest_call_state(k, st, args, nargs, results, nresults);
    if (!k->state) /* a function without state ignores the state object */
        return nest_call_dims(k, dims, ndims, args, nargs, results, nresults);
    return call_dims(k, st, dims, ndims, args, nargs, results, nresults);
}

int nest_call_state(nest_kernel *k, nest_state *st, void *const *args, int nargs,
                    void *const *results, int nresults)
{
    if (!k)
        return NEST_ERR_ARG;
    if (!k->state) /* a function without state ignores the state object */
        return nest_call(k, args, nargs, results, nresults);
    if (k->count_exprs)
        return call_error(k, NEST_ERR_CALL,
                          "%s has symbolic dims: call it with nest_call_state_dims", k->name);
    int status = check_call(k, k->counts, NULL, args, nargs, results, nresults);
    if (status != NEST_OK)
        return status;
    char *msg = NULL;
    status = state_check_call(st, k->nstates, k->layout, k->name, args, nargs, k->bytes, results,
                              nresults, k->bytes + nargs, &msg);
    if (status != NEST_OK) {
        call_error(k, status, "%s", msg ? msg : "out of memory");
        free(msg);
        return status;
    }
    state_lock(st);
    status = run(k, st->t, args, results);
    state_unlock(st);
    return status;
}

const char *nest_kernel_errmsg(const nest_kernel *k)
{
    return !k ? "no kernel (NULL handle)" : call_err.k == k ? call_err.msg : "";
}

int nest_kernel_cache_hit(const nest_kernel *k) { return k && k->cache_hit; }
const char *nest_kernel_cache_note(const nest_kernel *k)
{
    return k && k->cache_note ? k->cache_note : "";
}
size_t nest_kernel_workspace_size(const nest_kernel *k) { return k ? k->ws_size : 0; }
double nest_kernel_compile_ms(const nest_kernel *k) { return k ? k->compile_ms : 0; }

/* Records an error of a build on the first function, or on the module without functions. */
static int build_error(nest_module *m, nest_function *const *fns, int n, int st, const char *fmt,
                       const char *a, const char *b)
{
    return n ? ir_error(fns[0], st, fmt, a, b) : ir_module_error(m, st, fmt, a, b);
}

/* The binary data of an AOT build: blobs and the names the C declares them under. */
typedef struct blobs {
    rt_blob *b;
    char (*syms)[IR_MAX_NAME + 64];
    int n;
    size_t cap;
    void **owned;      /* data made for the build (constants packed ahead of time), freed with it */
    size_t nowned, capowned;
} blobs;

/* Keeps p, to be freed with the blobs; false (p freed) when out of memory. */
static bool blobs_own(blobs *bl, void *p)
{
    if (bl->nowned == bl->capowned) {
        size_t cap = bl->capowned ? bl->capowned * 2 : 16;
        void **v = realloc(bl->owned, cap * sizeof *v);
        if (!v) {
            free(p);
            return false;
        }
        bl->owned = v;
        bl->capowned = cap;
    }
    bl->owned[bl->nowned++] = p;
    return true;
}

/* Room for `more` blobs; false when out of memory (what is there stays). */
static bool blobs_reserve(blobs *bl, size_t more)
{
    size_t want = (size_t)bl->n + more + 1;
    if (want <= bl->cap)
        return true;
    rt_blob *nb = realloc(bl->b, want * sizeof *nb);
    if (nb)
        bl->b = nb;
    char (*ns)[IR_MAX_NAME + 64] = realloc(bl->syms, want * sizeof *ns);
    if (ns)
        bl->syms = ns;
    if (!nb || !ns)
        return false;
    bl->cap = want;
    return true;
}

/* Adds a blob in the room reserved, under the name fmt makes. */
static void blobs_add(blobs *bl, const void *data, size_t size, const char *fmt, ...)
    FORMAT(4, 5);
static void blobs_add(blobs *bl, const void *data, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bl->syms[bl->n], sizeof bl->syms[bl->n], fmt, ap);
    va_end(ap);
    bl->b[bl->n++] = (rt_blob){NULL, data, size};
}

static void blobs_free(blobs *bl)
{
    free(bl->b);
    free(bl->syms);
    for (size_t i = 0; i < bl->nowned; i++)
        free(bl->owned[i]);
    free(bl->owned);
}

/* nest_build_so of n functions, with the state of module m (NULL: of the functions' module),
 * which may have no functions. */
static int build_so(nest_module *m, nest_function *const *fns, int n, const char *so_path,
                    const char *h_path, const nest_options *opts, char **log)
{
    if (log)
        *log = NULL;
    nest_options defaults;
    if (!opts) {
        nest_options_init(&defaults);
        opts = &defaults;
    }
    char *src = m ? nest_module_emit(m, NEST_EMIT_C, opts) : nest_emit(fns, n, NEST_EMIT_C, opts);
    char *hdr = !src || !h_path ? NULL
                : m         ? nest_module_emit(m, NEST_EMIT_H, opts)
                            : nest_emit(fns, n, NEST_EMIT_H, opts);
    if (!src || (h_path && !hdr)) {
        free(src);
        int st = m ? nest_module_errcode(m) : nest_errcode(fns[0]);
        return st ? st : NEST_ERR_NOMEM;
    }
    /* constants above EMIT_DATA_BYTES: binary data under the names the C declares */
    blobs bl = {0};
    int st = NEST_OK;
    for (int i = 0; i < n && st == NEST_OK; i++) {
        jit_info info = {0};
        if ((st = pipeline_consts(fns[i], opts, &info)) != NEST_OK)
            break;
        if (!blobs_reserve(&bl, (size_t)info.nconsts))
            st = ir_error(fns[i], NEST_ERR_NOMEM, "out of memory");
        for (int32_t k = 0; st == NEST_OK && k < info.nconsts; k++) {
            const ir_node *c = &info.const_fn->nodes[info.const_nodes[k]];
            size_t bytes;
            void *owned;
            if (!emit_const_is_data(pipeline_const_count(&info, k), c->etype))
                continue;
            const void *data = pipeline_const_data(&info, k, &bytes, &owned);
            if (!data || (owned && !blobs_own(&bl, owned)))
                st = ir_error(fns[i], NEST_ERR_NOMEM, "out of memory");
            else
                blobs_add(&bl, data, bytes, "nest_const_%s_%d", fns[i]->name, k);
        }
        pipeline_info_free(&info);
    }
    /* and the state's initial values given as arrays, above EMIT_DATA_BYTES */
    const nest_module *sm = pipeline_state_module(m, fns, n);
    if (st == NEST_OK && sm && !blobs_reserve(&bl, (size_t)sm->nstates))
        st = build_error(m, fns, n, NEST_ERR_NOMEM, "building %s: %s", so_path, "out of memory");
    for (int32_t i = 0; st == NEST_OK && sm && i < sm->nstates; i++) {
        const ir_state *s = &sm->states[i];
        if (s->init.kind == NEST_INIT_DATA && emit_const_is_data(s->count, s->etype))
            blobs_add(&bl, s->data, (size_t)s->count * nest_type_size((nest_type)s->etype),
                      "nest_init_%s_%d", sm->name, i);
    }
    if (st != NEST_OK) {
        blobs_free(&bl);
        free(src);
        free(hdr);
        return st;
    }
    /* syms[] moved with realloc: point the blobs at the final array */
    for (int i = 0; i < bl.n; i++)
        bl.b[i].symbol = bl.syms[i];
    rt_opts ro = runtime_opts(opts);
    char *err = NULL;
    st = rt_build_so_data(src, strlen(src), bl.b, bl.n, so_path, opts->cc, &ro,
                          opts->verbose ? log : NULL, &err);
    blobs_free(&bl);
    if (st != NEST_OK)
        build_error(m, fns, n, st, "building %s: %s", so_path, err ? err : nest_status_str(st));
    if (st == NEST_OK && hdr) {
        FILE *out = fopen(h_path, "w");
        bool ok = out && fputs(hdr, out) >= 0;
        if (out && fclose(out) != 0)
            ok = false;
        if (!ok)
            st = build_error(m, fns, n, NEST_ERR_IO, "cannot write %s%s", h_path, "");
    }
    free(err);
    free(src);
    free(hdr);
    return st;
}

int nest_build_so(nest_function *const *fns, int n, const char *so_path, const char *h_path,
                  const nest_options *opts, char **log)
{
    if (log)
        *log = NULL;
    if (n < 1 || !fns || !fns[0])
        return NEST_ERR_ARG;
    return build_so(NULL, fns, n, so_path, h_path, opts, log);
}

int nest_module_build_so(nest_module *m, const char *so_path, const char *h_path,
                         const nest_options *opts, char **log)
{
    if (log)
        *log = NULL;
    if (!m)
        return NEST_ERR_ARG;
    int st = build_so(m, m->fns, m->nfns, so_path, h_path, opts, log);
    if (st != NEST_OK)
        ir_module_take_error(m);
    return st;
}

const char *nest_version(void) { return NEST_VERSION; }

const char *nest_llvm_version(void)
{
    const rt_shim_api *api = rt_shim(NULL);
    return api ? api->llvm_version() : NULL;
}
