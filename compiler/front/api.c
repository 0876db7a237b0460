/* api.c - the public builders and accessors of nest.h over the graph of ir.c. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void nest_string_free(char *s) { free(s); }

/* ---- functions ---- */

nest_function *nest_function_new(const char *name)
{
    nest_function *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    if (ir_check_name(f, "function", name) == NEST_OK) {
        f->name = arena_strdup(&f->arena, name);
        if (!f->name) { /* NULL only when out of memory, as documented */
            nest_function_free(f);
            return NULL;
        }
    }
    return f;
}

void nest_function_free(nest_function *f)
{
    if (f && (!f->module || f->detached)) /* a module's functions go with it */
        ir_function_destroy(f);
}

int nest_errcode(const nest_function *f) { return f ? f->status : NEST_ERR_ARG; }

const char *nest_errmsg(const nest_function *f)
{
    if (!f)
        return "no function (NULL handle)";
    if (f->status == NEST_OK)
        return "";
    return f->errmsg ? f->errmsg : nest_status_str(f->status);
}

void nest_clear_error(nest_function *f)
{
    if (!f)
        return;
    free(f->errmsg);
    f->errmsg = NULL;
    f->status = NEST_OK;
}

const char *nest_function_name(const nest_function *f) { return f && f->name ? f->name : ""; }

/* ---- builders ---- */

nest_value nest_parameter(nest_function *f, const char *name, nest_type type, int rank,
                          const int64_t *shape, nest_layout layout)
{
    ir_attrs at = {.type = (int)type, .rank = rank, .shape = shape, .name = name,
                   .layout = (int)layout};
    return ir_build(f, OP_PARAMETER, 0, NULL, &at);
}

int nest_set_name(nest_function *f, nest_value v, const char *name)
{
    if (!f)
        return NEST_ERR_ARG;
    if (v < 0 || v >= f->nnodes)
        return ir_error(f, NEST_ERR_ARG, "set_name: %d is not a value of function %s", v, f->name);
    if (ir_check_name(f, "value", name))
        return f->status;
    int32_t other = ir_find_name(f, name);
    if (f->module && ir_state_find(f->module, name, strlen(name)) >= 0 && other != v)
        return ir_error(f, NEST_ERR_ARG, "the name '%s' is a state tensor of module %s", name,
                        f->module->name);
    if (other >= 0 && other != v)
        return ir_error(f, NEST_ERR_ARG, "the name '%s' is already used in function %s", name,
                        f->name);
    if ((f->nodes[v].op == OP_PARAMETER || f->nodes[v].op == OP_STATE) && other != v)
        return ir_error(f, NEST_ERR_ARG, "%s %s keeps its name",
                        f->nodes[v].op == OP_STATE ? "state tensor" : "parameter", f->nodes[v].name);
    const char *s = arena_strdup(&f->arena, name);
    if (!s)
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    return ir_set_name(f, v, s);
}

nest_value nest_constant(nest_function *f, nest_type type, int rank, const int64_t *shape,
                         const void *data, int64_t count)
{
    ir_attrs at = {.type = (int)type, .rank = rank, .shape = shape, .data = data, .count = count};
    return ir_build(f, OP_CONSTANT, 0, NULL, &at);
}

#define BINARY(fn, OPID)                                                                       \
    nest_value nest_##fn(nest_function *f, nest_value a, nest_value b)                         \
    {                                                                                          \
        int32_t in[2] = {a, b};                                                                \
        return ir_build(f, OP_##OPID, 2, in, NULL);                                            \
    }
#define UNARY(fn, OPID)                                                                        \
    nest_value nest_##fn(nest_function *f, nest_value a)                                       \
    {                                                                                          \
        return ir_build(f, OP_##OPID, 1, &a, NULL);                                            \
    }
BINARY(add, ADD)
BINARY(subtract, SUBTRACT)
BINARY(multiply, MULTIPLY)
BINARY(divide, DIVIDE)
BINARY(maximum, MAXIMUM)
BINARY(minimum, MINIMUM)
BINARY(power, POWER)
BINARY(less, LESS)
BINARY(greater, GREATER)
BINARY(equal, EQUAL)
BINARY(dot, DOT)
UNARY(negative, NEGATIVE)
UNARY(abs, ABS)
UNARY(exp, EXP)
UNARY(log, LOG)
UNARY(sqrt, SQRT)
UNARY(tanh, TANH)

nest_value nest_select(nest_function *f, nest_value c, nest_value a, nest_value b)
{
    int32_t in[3] = {c, a, b};
    return ir_build(f, OP_SELECT, 3, in, NULL);
}

nest_value nest_convert(nest_function *f, nest_value a, nest_type type)
{
    ir_attrs at = {.type = (int)type};
    return ir_build(f, OP_CONVERT, 1, &a, &at);
}

nest_value nest_broadcast(nest_function *f, nest_value a, int rank, const int64_t *shape,
                          int naxes, const int64_t *axes)
{
    ir_attrs at = {.rank = rank, .shape = shape, .naxes = naxes, .axes = axes};
    return ir_build(f, OP_BROADCAST, 1, &a, &at);
}

nest_value nest_reshape(nest_function *f, nest_value a, const int64_t *order, int rank,
                        const int64_t *shape)
{
    ir_attrs at = {.order = order, .rank = rank, .shape = shape};
    return ir_build(f, OP_RESHAPE, 1, &a, &at);
}

nest_value nest_slice(nest_function *f, nest_value a, const int64_t *lower, const int64_t *upper,
                      const int64_t *strides)
{
    ir_attrs at = {.lower = lower, .upper = upper, .step = strides};
    return ir_build(f, OP_SLICE, 1, &a, &at);
}

nest_value nest_concat(nest_function *f, int n, const nest_value *values, int64_t axis)
{
    ir_attrs at = {.index = axis};
    return ir_build(f, OP_CONCAT, n, values, &at);
}

static nest_value reduce(nest_function *f, ir_op op, nest_value a, int naxes, const int64_t *axes)
{
    ir_attrs at = {.naxes = naxes, .axes = axes};
    return ir_build(f, op, 1, &a, &at);
}

nest_value nest_sum(nest_function *f, nest_value a, int naxes, const int64_t *axes)
{
    return reduce(f, OP_SUM, a, naxes, axes);
}

nest_value nest_max(nest_function *f, nest_value a, int naxes, const int64_t *axes)
{
    return reduce(f, OP_MAX, a, naxes, axes);
}

nest_value nest_min(nest_function *f, nest_value a, int naxes, const int64_t *axes)
{
    return reduce(f, OP_MIN, a, naxes, axes);
}

/* ---- convolution and pooling ---- */

nest_value nest_convolution(nest_function *f, nest_value x, nest_value w, const int64_t *strides,
                            const int64_t *dilation, const int64_t *pad_below,
                            const int64_t *pad_above, const int64_t *data_dilation,
                            int64_t groups)
{
    int32_t in[2] = {x, w};
    ir_attrs at = {.step = strides, .dilation = dilation, .pad_below = pad_below,
                   .pad_above = pad_above, .data_dilation = data_dilation, .groups = groups};
    return ir_build(f, OP_CONVOLUTION, 2, in, &at);
}

nest_value nest_max_pool(nest_function *f, nest_value x, const int64_t *window,
                         const int64_t *strides, const int64_t *pad_below, const int64_t *pad_above)
{
    ir_attrs at = {.window = window, .step = strides, .pad_below = pad_below,
                   .pad_above = pad_above};
    return ir_build(f, OP_MAX_POOL, 1, &x, &at);
}

nest_value nest_avg_pool(nest_function *f, nest_value x, const int64_t *window,
                         const int64_t *strides, const int64_t *pad_below,
                         const int64_t *pad_above, int include_pad)
{
    ir_attrs at = {.window = window, .step = strides, .pad_below = pad_below,
                   .pad_above = pad_above, .include_pad = include_pad};
    return ir_build(f, OP_AVG_POOL, 1, &x, &at);
}

nest_value nest_tuple(nest_function *f, int n, const nest_value *values)
{
    return ir_build(f, OP_TUPLE, n, values, NULL);
}

nest_value nest_get(nest_function *f, nest_value tuple, int64_t index)
{
    ir_attrs at = {.index = index};
    return ir_build(f, OP_GET, 1, &tuple, &at);
}

/* ---- the op set of real models ---- */

UNARY(sin, SIN)
UNARY(cos, COS)
UNARY(tan, TAN)
UNARY(asin, ASIN)
UNARY(acos, ACOS)
UNARY(atan, ATAN)
UNARY(sinh, SINH)
UNARY(cosh, COSH)
UNARY(floor, FLOOR)
UNARY(ceiling, CEILING)
UNARY(erf, ERF)
UNARY(sign, SIGN)
UNARY(relu, RELU)
UNARY(sigmoid, SIGMOID)
UNARY(not, NOT)
BINARY(and, AND)
BINARY(or, OR)
BINARY(not_equal, NOT_EQUAL)
BINARY(less_eq, LESS_EQ)
BINARY(greater_eq, GREATER_EQ)
#undef BINARY
#undef UNARY

nest_value nest_product(nest_function *f, nest_value a, int naxes, const int64_t *axes)
{
    return reduce(f, OP_PRODUCT, a, naxes, axes);
}

static nest_value argreduce(nest_function *f, ir_op op, nest_value a, int64_t axis)
{
    ir_attrs at = {.index = axis};
    return ir_build(f, op, 1, &a, &at);
}

nest_value nest_argmax(nest_function *f, nest_value a, int64_t axis)
{
    return argreduce(f, OP_ARGMAX, a, axis);
}

nest_value nest_argmin(nest_function *f, nest_value a, int64_t axis)
{
    return argreduce(f, OP_ARGMIN, a, axis);
}

nest_value nest_pad(nest_function *f, nest_value a, nest_value value, const int64_t *below,
                    const int64_t *above, const int64_t *interior)
{
    int32_t in[2] = {a, value};
    ir_attrs at = {.below = below, .above = above, .interior = interior};
    return ir_build(f, OP_PAD, 2, in, &at);
}

nest_value nest_reverse(nest_function *f, nest_value a, int naxes, const int64_t *axes)
{
    ir_attrs at = {.naxes = naxes, .axes = axes};
    return ir_build(f, OP_REVERSE, 1, &a, &at);
}

nest_value nest_replace_slice(nest_function *f, nest_value a, nest_value b, const int64_t *lower,
                              const int64_t *upper, const int64_t *strides)
{
    int32_t in[2] = {a, b};
    ir_attrs at = {.lower = lower, .upper = upper, .step = strides};
    return ir_build(f, OP_REPLACE_SLICE, 2, in, &at);
}

nest_value nest_one_hot(nest_function *f, nest_value indices, int rank, const int64_t *shape,
                        int64_t axis)
{
    ir_attrs at = {.rank = rank, .shape = shape, .index = axis};
    return ir_build(f, OP_ONE_HOT, 1, &indices, &at);
}

nest_value nest_gather(nest_function *f, nest_value a, nest_value indices, int64_t axis)
{
    int32_t in[2] = {a, indices};
    ir_attrs at = {.index = axis};
    return ir_build(f, OP_GATHER, 2, in, &at);
}

nest_value nest_scatter_add(nest_function *f, nest_value a, nest_value indices, nest_value updates,
                            int64_t axis)
{
    int32_t in[3] = {a, indices, updates};
    ir_attrs at = {.index = axis};
    return ir_build(f, OP_SCATTER_ADD, 3, in, &at);
}

nest_value nest_softmax(nest_function *f, nest_value a, int naxes, const int64_t *axes)
{
    ir_attrs at = {.naxes = naxes, .axes = axes};
    return ir_build(f, OP_SOFTMAX, 1, &a, &at);
}

nest_value nest_batch_dot(nest_function *f, nest_value a, nest_value b)
{
    int32_t in[2] = {a, b};
    return ir_build(f, OP_BATCH_DOT, 2, in, NULL);
}

nest_value nest_topk(nest_function *f, nest_value a, int64_t k, int64_t axis, int largest)
{
    return ir_topk(f, a, k, axis, largest);
}

/* The most results a function may have. */
#define MAX_RESULTS (INT32_MAX / 2)

/* Appends the tensors of value v, depth first, to out. Tuples nest as deep as the graph, so this
 * walks with an explicit stack; it skips tuples that hold no tensor (count[] is 0), so its time
 * is bounded by the tensors it writes times the depth, however the tuples share elements. */
static int64_t flatten(const nest_function *f, int32_t v, int32_t *out, int32_t *stack,
                       const int64_t *count)
{
    int64_t k = 0;
    int32_t sp = 0;
    stack[sp++] = v;
    while (sp > 0) {
        int32_t i = ir_resolve(f, stack[--sp]);
        const ir_node *n = &f->nodes[i];
        if (n->etype != IR_TUPLE) {
            out[k++] = i;
            continue;
        }
        for (int j = n->nin - 1; j >= 0; j--)
            if (count[ir_resolve(f, n->in[j])] > 0)
                stack[sp++] = n->in[j];
    }
    return k;
}

static int64_t add_saturating(int64_t a, int64_t b)
{
    return a + b > MAX_RESULTS ? MAX_RESULTS + 1 : a + b;
}

int nest_return(nest_function *f, int n, const nest_value *values, const nest_layout *layouts)
{
    if (!f)
        return NEST_ERR_ARG;
    if (!f->name)
        return ir_error(f, NEST_ERR_ARG, "the function has no valid name");
    if (n < 0 || (n > 0 && !values))
        return ir_error(f, NEST_ERR_ARG, "return: invalid value list");
    for (int i = 0; i < n; i++) {
        if (values[i] < 0)
            return f->status ? f->status : ir_error(f, NEST_ERR_ARG, "return: value %d is NEST_NONE", i + 1);
        if (values[i] >= f->nnodes)
            return ir_error(f, NEST_ERR_ARG, "return: %d is not a value of function %s",
                            values[i], f->name);
    }
    /* The stack of flatten() never holds more entries than there are operands in the graph.
     * count[i] is the number of tensors value i stands for (saturating above MAX_RESULTS), in
     * one pass since operands come first: tuples sharing elements can stand for exponentially
     * many. */
    int64_t edges = n;
    for (int32_t i = 0; i < f->nnodes; i++)
        edges += f->nodes[i].nin;
    int32_t *stack = malloc((size_t)(edges + 1) * sizeof *stack);
    int64_t *count = malloc(((size_t)f->nnodes + 1) * sizeof *count);
    if (!stack || !count) {
        free(stack);
        free(count);
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < f->nnodes; i++) {
        const ir_node *x = &f->nodes[i];
        if (x->op == OP_GET) {
            count[i] = count[x->a.get.target];
        } else if (x->op == OP_TUPLE) {
            count[i] = 0;
            for (int j = 0; j < x->nin; j++)
                count[i] = add_saturating(count[i], count[x->in[j]]);
        } else {
            count[i] = 1;
        }
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total = add_saturating(total, count[values[i]]);
    if (total > MAX_RESULTS) {
        free(stack);
        free(count);
        return ir_error(f, NEST_ERR_LIMIT, "return: too many results (more than %d)", MAX_RESULTS);
    }
    int32_t *res = arena_array(&f->arena, (size_t)total + 1, sizeof *res);
    uint8_t *lay = arena_alloc(&f->arena, (size_t)total + 1);
    int32_t *ret = arena_array(&f->arena, (size_t)n + 1, sizeof *ret);
    if (!res || !lay || !ret) {
        free(stack);
        free(count);
        return ir_error(f, NEST_ERR_NOMEM, "out of memory");
    }
    int64_t k = 0;
    for (int i = 0; i < n; i++)
        k += flatten(f, values[i], res + k, stack, count);
    free(stack);
    free(count);
    for (int64_t i = 0; i < total; i++) {
        int l = layouts ? (int)layouts[i] : NEST_ROW_MAJOR;
        if (l != NEST_ROW_MAJOR && l != NEST_COL_MAJOR)
            return ir_error(f, NEST_ERR_ARG, "return: result %lld has an invalid layout %d",
                            (long long)i + 1, l);
        lay[i] = (uint8_t)l;
    }
    if (n > 0)
        memcpy(ret, values, (size_t)n * sizeof *ret);
    f->results = res;
    f->result_layout = lay;
    f->nresults = (int32_t)total;
    f->returned = ret;
    f->nreturned = n;
    f->has_return = true;
    return NEST_OK;
}

/* ---- inspection ---- */

int nest_param_count(const nest_function *f) { return f ? f->nparams : -1; }
int nest_result_count(const nest_function *f) { return f ? f->nresults : -1; }

static const ir_node *value(const nest_function *f, nest_value v)
{
    return f && v >= 0 && v < f->nnodes ? &f->nodes[v] : NULL;
}

int nest_value_type(const nest_function *f, nest_value v)
{
    const ir_node *n = value(f, v);
    return n && n->etype != IR_TUPLE ? n->etype : -1;
}

int nest_value_rank(const nest_function *f, nest_value v)
{
    const ir_node *n = value(f, v);
    return n && n->etype != IR_TUPLE ? n->rank : -1;
}

const int64_t *nest_value_shape(const nest_function *f, nest_value v)
{
    const ir_node *n = value(f, v);
    return n && n->etype != IR_TUPLE ? n->shape : NULL;
}

const char *nest_value_name(const nest_function *f, nest_value v)
{
    const ir_node *n = value(f, v);
    return n ? n->name : NULL;
}

nest_value nest_param(const nest_function *f, int i)
{
    return f && i >= 0 && i < f->nparams ? f->params[i] : NEST_NONE;
}

nest_value nest_result(const nest_function *f, int i)
{
    return f && i >= 0 && i < f->nresults ? f->results[i] : NEST_NONE;
}

/* ---- modules ---- */

int nest_module_errcode(const nest_module *m) { return m ? m->status : NEST_ERR_ARG; }

const char *nest_module_errmsg(const nest_module *m)
{
    if (!m)
        return "no module (NULL handle)";
    if (m->status == NEST_OK)
        return "";
    return m->errmsg ? m->errmsg : nest_status_str(m->status);
}

int nest_module_errline(const nest_module *m) { return m ? m->line : 0; }
int nest_module_errcol(const nest_module *m) { return m ? m->col : 0; }
int nest_module_count(const nest_module *m) { return m ? m->nfns : 0; }

nest_function *nest_module_function(const nest_module *m, int i)
{
    return m && i >= 0 && i < m->nfns ? m->fns[i] : NULL;
}

nest_function *nest_module_find(const nest_module *m, const char *name)
{
    if (!m || !name)
        return NULL;
    for (int i = 0; i < m->nfns; i++)
        if (strcmp(m->fns[i]->name, name) == 0)
            return m->fns[i];
    return NULL;
}

/* ---- the interpreter ---- */

int nest_evaluate(nest_function *f, void *const *args, int nargs, void *const *results,
                  int nresults)
{
    if (!f)
        return NEST_ERR_ARG;
    if (!f->has_return)
        return ir_error(f, NEST_ERR_ARG, "function %s has no results (nest_return was not called)",
                        f->name);
    if (ir_uses_state(f))
        return ir_error(f, NEST_ERR_CALL,
                        "function %s reads or assigns state of module %s: use nest_evaluate_state",
                        f->name, f->module->name);
    return interp_call(f, NULL, args, nargs, results, nresults);
}

int nest_evaluate_dims(nest_function *f, const int64_t *dims, int ndims, void *const *args,
                       int nargs, void *const *results, int nresults)
{
    if (!f)
        return NEST_ERR_ARG;
    if (ir_uses_state(f))
        return ir_error(f, NEST_ERR_CALL,
                        "function %s reads or assigns state of module %s: use "
                        "nest_evaluate_state_dims",
                        f->name, f->module->name);
    nest_function *g = ir_bind(f, dims, ndims);
    if (!g)
        return f->status;
    int st = interp_call(g, NULL, args, nargs, results, nresults);
    if (st)
        ir_error(f, st, "%s", g->errmsg ? g->errmsg : nest_status_str(st));
    ir_function_destroy(g);
    return st;
}

/* ---- symbolic dims ---- */

int64_t nest_named_dim(nest_function *f, const char *name)
{
    if (!f)
        return NEST_DIM_NONE;
    if (!name)
        return ir_error(f, NEST_ERR_ARG, "dim: the name is NULL"), NEST_DIM_NONE;
    return dim_name(f, name, strlen(name));
}

int64_t nest_dim_add(nest_function *f, int64_t a, int64_t b)
{
    return f ? dim_add(f, a, b) : NEST_DIM_NONE;
}

int64_t nest_dim_mul(nest_function *f, int64_t a, int64_t b)
{
    return f ? dim_mul(f, a, b) : NEST_DIM_NONE;
}

int nest_dim_count(const nest_function *f)
{
    int32_t *ids = f ? calloc((size_t)dim_entry_count(f) + 1, sizeof *ids) : NULL;
    int n = ids ? dim_params(f, ids) : 0;
    free(ids);
    return n < 0 ? 0 : n;
}

const char *nest_dim_name(const nest_function *f, int i)
{
    int32_t *ids = f ? calloc((size_t)dim_entry_count(f) + 1, sizeof *ids) : NULL;
    int n = ids ? dim_params(f, ids) : 0;
    const char *s = i >= 0 && i < n ? dim_entry(f, DIM_SYM0 - ids[i])->name : NULL;
    free(ids);
    return s;
}

nest_function *nest_specialize(nest_function *f, const int64_t *dims, int ndims)
{
    return f ? ir_bind(f, dims, ndims) : NULL;
}

int interp_call(nest_function *f, void *const *state, void *const *args, int nargs,
                void *const *results, int nresults)
{
    if (ir_is_symbolic(f))
        return ir_error(f, NEST_ERR_CALL,
                        "function %s has symbolic dims: give their sizes with nest_evaluate_dims",
                        f->name);
    if (nargs != f->nparams || nresults != f->nresults)
        return ir_error(f, NEST_ERR_CALL,
                        "function %s takes %d argument%s and %d result%s; given %d and %d",
                        f->name, f->nparams, f->nparams == 1 ? "" : "s", f->nresults,
                        f->nresults == 1 ? "" : "s", nargs, nresults);
    if ((nargs > 0 && !args) || (nresults > 0 && !results))
        return ir_error(f, NEST_ERR_CALL, "function %s: the %s array is NULL", f->name,
                        nargs > 0 && !args ? "argument" : "result");
    for (int i = 0; i < nargs; i++)
        if (!args[i] && ir_count(&f->nodes[f->params[i]]) > 0)
            return ir_error(f, NEST_ERR_CALL, "argument %d (%s) is NULL", i + 1,
                            f->nodes[f->params[i]].name);
    for (int i = 0; i < nresults; i++)
        if (!results[i] && ir_count(&f->nodes[f->results[i]]) > 0)
            return ir_error(f, NEST_ERR_CALL, "result %d is NULL", i + 1);
    return interp_run(f, args, results, state);
}

void nest_options_init(nest_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->opt_level = 3;
    o->march = "native";
    o->cc = "cc";
    o->fuse = 1;
    o->openmp = 1;
    o->cache = 1;
    o->flush_denormals = -1;
}

/* ---- modules: their functions (graph/state.c holds the rest of a module) ---- */

void nest_module_free(nest_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nfns; i++)
        ir_function_destroy(m->fns[i]);
    free(m->fns);
    free(m->name);
    free(m->errmsg);
    arena_free(&m->arena);
    free(m);
}

nest_function *nest_module_add_function(nest_module *m, const char *name)
{
    if (!m)
        return NULL;
    for (int i = 0; name && i < m->nfns; i++)
        if (m->fns[i]->name && strcmp(m->fns[i]->name, name) == 0) {
            ir_module_error(m, NEST_ERR_ARG, "module %s already has a function %s",
                            nest_module_name(m), name);
            return NULL;
        }
    nest_function *f = nest_function_new(name);
    if (!f || !ir_module_add(m, f)) {
        ir_function_destroy(f);
        ir_module_error(m, NEST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return f;
}
