/*
 * state.c - the state objects of nest.h: a module's state tensors in one block, initialized,
 * saved and loaded by the same code the generated C prints (compiler/emit/state_code.h), or
 * over the caller's arrays (nest_state_wrap), and nest_evaluate_state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "emit/state_code.h"

void nest_state_free(nest_state *st)
{
    if (!st)
        return;
    if (st->locked_init)
        pthread_mutex_destroy(&st->lock);
    for (int i = 0; st->d && i < st->n; i++) {
        free((char *)st->d[i].name);
        free((int64_t *)st->d[i].shape);
    }
    free(st->d);
    free(st->t);
    free(st->bytes);
    free(st->block);
    free(st);
}

static bool overlaps(const void *p, int64_t bytes, const void *q, int64_t qbytes)
{
    const char *a = p, *b = q;
    return p && q && bytes > 0 && qbytes > 0 && a < b + qbytes && b < a + bytes;
}

/* A state object of m: its tensors in one block, initialized (data NULL), or the caller's arrays
 * data[i] as they are. */
static nest_state *state_make(nest_module *m, void *const *data)
{
    if (!m)
        return NULL;
    int n = m->nstates;
    nest_state *st = calloc(1, sizeof *st);
    if (!st)
        goto nomem;
    st->n = n;
    st->layout = ir_state_layout_hash(m);
    if (pthread_mutex_init(&st->lock, NULL) != 0)
        goto nomem;
    st->locked_init = true;
    st->t = calloc((size_t)n + 1, sizeof *st->t);
    st->d = calloc((size_t)n + 1, sizeof *st->d);
    st->bytes = calloc((size_t)n + 1, sizeof *st->bytes);
    if (!st->t || !st->d || !st->bytes)
        goto nomem;
    for (int i = 0; i < n; i++) {
        const ir_state *s = &m->states[i];
        nest_st_desc *d = &st->d[i];
        int64_t *shape = malloc(((size_t)s->rank + 1) * sizeof *shape);
        d->name = strdup(s->name);
        d->shape = shape;
        if (!d->name || !shape)
            goto nomem;
        if (s->rank)
            memcpy(shape, s->shape, (size_t)s->rank * sizeof *shape);
        d->type = s->etype;
        d->rank = s->rank;
        d->count = s->count;
        d->init = (int)s->init.kind;
        d->a = s->init.a;
        d->b = s->init.b;
        d->seed = s->init.seed;
        d->data = s->data; /* the module's, until the tensors are filled */
        st->bytes[i] = s->count * (int64_t)nest_type_size((nest_type)s->etype);
        st->size += (size_t)st->bytes[i];
    }
    /* a state of its own is filled from the initializers; then it does not refer to its module */
    bool unfilled = !data && nest_st_alloc(st->d, n, st->t, &st->block);
    for (int i = 0; i < n; i++)
        st->d[i].data = NULL;
    if (unfilled)
        goto nomem;
    if (!data)
        return st;
    for (int i = 0; i < n; i++) {
        if (!data[i] && st->bytes[i] > 0) {
            ir_module_error(m, NEST_ERR_ARG, "state of module %s: the array of %s is NULL",
                            nest_module_name(m), st->d[i].name);
            goto fail;
        }
        for (int j = 0; j < i; j++)
            if (overlaps(data[i], st->bytes[i], data[j], st->bytes[j])) {
                ir_module_error(m, NEST_ERR_ARG,
                                "state of module %s: the arrays of %s and %s overlap",
                                nest_module_name(m), st->d[j].name, st->d[i].name);
                goto fail;
            }
        st->t[i] = data[i];
    }
    return st;
nomem:
    ir_module_error(m, NEST_ERR_NOMEM, "state of module %s: out of memory", nest_module_name(m));
fail:
    nest_state_free(st);
    return NULL;
}

nest_state *nest_state_new(nest_module *m) { return state_make(m, NULL); }

nest_state *nest_state_wrap(nest_module *m, void *const *data)
{
    if (m && !data && m->nstates > 0) {
        ir_module_error(m, NEST_ERR_ARG, "state of module %s: no arrays (data is NULL)",
                        nest_module_name(m));
        return NULL;
    }
    static void *const none[1] = {NULL};
    return state_make(m, data ? data : none);
}

int nest_state_count(const nest_state *st) { return st ? st->n : -1; }
size_t nest_state_size(const nest_state *st) { return st ? st->size : 0; }

static bool in_range(const nest_state *st, int i) { return st && i >= 0 && i < st->n; }

const char *nest_state_name(const nest_state *st, int i) { return in_range(st, i) ? st->d[i].name : NULL; }
int nest_state_type(const nest_state *st, int i) { return in_range(st, i) ? st->d[i].type : -1; }
int nest_state_rank(const nest_state *st, int i) { return in_range(st, i) ? st->d[i].rank : -1; }
const int64_t *nest_state_shape(const nest_state *st, int i)
{
    return in_range(st, i) ? st->d[i].shape : NULL;
}
void *nest_state_data(nest_state *st, int i) { return in_range(st, i) ? st->t[i] : NULL; }

int nest_state_find(const nest_state *st, const char *name)
{
    for (int i = 0; st && name && i < st->n; i++)
        if (strcmp(st->d[i].name, name) == 0)
            return i;
    return -1;
}

void *nest_state_tensor(nest_state *st, const char *name)
{
    return nest_state_data(st, nest_state_find(st, name));
}

const char *nest_state_errmsg(const nest_state *st)
{
    return !st ? "no state (NULL handle)" : st->errmsg;
}

/* Keeps the message of a failed save or load; the code of state_code.h becomes a status. */
static int file_result(nest_state *st, int rc, const char *msg)
{
    st->errmsg[0] = '\0';
    if (rc == 0)
        return NEST_OK;
    snprintf(st->errmsg, sizeof st->errmsg, "%s", msg);
    return rc == 4 ? NEST_ERR_NOMEM : NEST_ERR_IO;
}

typedef int (*file_fn)(const nest_st_desc *d, int n, void *const *t, const char *path, char *msg,
                       size_t msglen);

static int file_op(nest_state *st, const char *path, file_fn op, const char *what)
{
    if (!st)
        return NEST_ERR_ARG;
    char msg[512] = "";
    state_lock(st);
    int rc = path ? op(st->d, st->n, st->t, path, msg, sizeof msg) : 1;
    if (!path)
        snprintf(msg, sizeof msg, "%s: the path is NULL", what);
    rc = file_result(st, rc, msg);
    state_unlock(st);
    return rc;
}

void state_lock(nest_state *st)
{
    if (st)
        pthread_mutex_lock(&st->lock);
}

void state_unlock(nest_state *st)
{
    if (st)
        pthread_mutex_unlock(&st->lock);
}

int nest_state_save(nest_state *st, const char *path)
{
    return file_op(st, path, nest_st_save, "save");
}

int nest_state_load(nest_state *st, const char *path)
{
    return file_op(st, path, nest_st_load, "load");
}

/* ---- calls with a state ---- */


int state_check_call(const nest_state *st, int nstates, uint64_t layout, const char *fname,
                     void *const *args, int nargs, const int64_t *arg_bytes, void *const *results,
                     int nresults, const int64_t *res_bytes, char **msg)
{
    buf b = {0};
    if (!st) {
        buf_printf(&b, "%s reads or assigns state: give it a state object", fname);
    } else if (st->n != nstates || st->layout != layout) {
        buf_printf(&b,
                   "%s: the state object does not fit (it holds %d tensors; the function's "
                   "module declares %d, or other names, types or shapes)",
                   fname, st->n, nstates);
    } else {
        for (int j = 0; j < st->n && !b.len; j++) {
            for (int i = 0; i < nargs && !b.len; i++)
                if (overlaps(args[i], arg_bytes[i], st->t[j], st->bytes[j]))
                    buf_printf(&b, "%s: argument %d is state tensor %s", fname, i + 1, st->d[j].name);
            for (int i = 0; i < nresults && !b.len; i++)
                if (overlaps(results[i], res_bytes[i], st->t[j], st->bytes[j]))
                    buf_printf(&b, "%s: result %d is state tensor %s", fname, i + 1, st->d[j].name);
        }
    }
    if (!b.len && !b.failed)
        return NEST_OK;
    *msg = buf_finish(&b);
    return NEST_ERR_CALL;
}

int nest_evaluate_state(nest_function *f, nest_state *st, void *const *args, int nargs,
                        void *const *results, int nresults)
{
    if (!f)
        return NEST_ERR_ARG;
    if (!f->has_return)
        return ir_error(f, NEST_ERR_ARG, "function %s has no results (nest_return was not called)",
                        f->name);
    if (!ir_uses_state(f))
        return interp_call(f, NULL, args, nargs, results, nresults);
    if (nargs == f->nparams && nresults == f->nresults && (args || !nargs) &&
        (results || !nresults)) {
        int64_t *ab = calloc((size_t)nargs + 1, sizeof *ab), *rb = calloc((size_t)nresults + 1, sizeof *rb);
        char *msg = NULL;
        int rc = ab && rb ? NEST_OK : NEST_ERR_NOMEM;
        for (int i = 0; rc == NEST_OK && i < nargs; i++)
            ab[i] = ir_count(&f->nodes[f->params[i]]) *
                    (int64_t)nest_type_size((nest_type)f->nodes[f->params[i]].etype);
        for (int i = 0; rc == NEST_OK && i < nresults; i++)
            rb[i] = ir_count(&f->nodes[f->results[i]]) *
                    (int64_t)nest_type_size((nest_type)f->nodes[f->results[i]].etype);
        if (rc == NEST_OK)
            rc = state_check_call(st, f->module->nstates, ir_state_layout_hash(f->module), f->name,
                                  args, nargs, ab, results, nresults, rb, &msg);
        free(ab);
        free(rb);
        if (rc != NEST_OK) {
            ir_error(f, rc, "%s", msg ? msg : "out of memory");
            free(msg);
            return rc;
        }
    }
    state_lock(st);
    int rc = interp_call(f, st ? st->t : NULL, args, nargs, results, nresults);
    state_unlock(st);
    return rc;
}

int nest_evaluate_state_dims(nest_function *f, nest_state *st, const int64_t *dims, int ndims,
                             void *const *args, int nargs, void *const *results, int nresults)
{
    if (!f)
        return NEST_ERR_ARG;
    nest_function *g = ir_bind(f, dims, ndims);
    if (!g)
        return f->status;
    int rc = nest_evaluate_state(g, st, args, nargs, results, nresults);
    if (rc)
        ir_error(f, rc, "%s", g->errmsg ? g->errmsg : nest_status_str(rc));
    ir_function_destroy(g);
    return rc;
}
