/*
 * internal.h - the map of nest's compiler: one section per .c file, in pipeline order. The
 * folders are the stages: graph/ (types, the IR, printing, the reference interpreter), front/
 * (the builders of nest.h and the text form), passes/ (graph to plan), emit/ (plan to C text),
 * and pipeline.c, which runs them. Below it is common/util.h; above it driver/, which joins the
 * compiler's C text to the runtime (runtime/rt.h), which knows no graph.
 */
#ifndef NEST_INTERNAL_H
#define NEST_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nest.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------------
 * graph/types.c: element types, status texts, identifiers and the names C claims (below the IR)
 * ------------------------------------------------------------------------------------------- */

/* nest_type_name, nest_type_size and nest_status_str of nest.h live here too. */

/* Whether an element type is f32 or f64. */
static inline bool ir_is_float(int etype) { return etype == NEST_F32 || etype == NEST_F64; }

/* The largest tensor nest accepts: its size in bytes stays below 2^62 (every index fits). */
#define IR_MAX_BYTES ((int64_t)1 << 62)

/* Whether s is a valid identifier of the text form, and a name that the generated C can use
 * for a function (not a C keyword or a reserved prefix). */
bool is_identifier(const char *s, size_t len);
bool is_c_keyword(const char *s);
/* Whether name is declared by the C library headers the generated C includes, predefined by C
 * compilers, or a C++ keyword: the emitter renames parameters and values of that name, the
 * pipeline refuses a function of it, importers rename it. */
bool is_c_library_name(const char *name);
#define IR_MAX_NAME 255

/* ---------------------------------------------------------------------------------------------
 * graph/ir.c: the graph, its op table, type inference
 * ------------------------------------------------------------------------------------------- */

typedef enum ir_op {
#define OP(id, text, kind, arity, types, cf, ci) OP_##id,
#include "ops.def"
#undef OP
    OP_COUNT
} ir_op;

typedef enum ir_kind {
    K_PARAM,     /* a.param */
    K_CONST,     /* a.constant */
    K_STATE,     /* a.state: the value of a module state tensor at the call's entry */
    K_EW,        /* element-wise; result type = operand type */
    K_CMP,       /* element-wise comparison; result bool */
    K_SELECT,    /* element-wise c ? a : b */
    K_CONVERT,   /* element-wise; result type = node etype */
    K_DOT,       /* contraction of in[0]'s last axis with in[1]'s first */
    K_BROADCAST, /* a.axes = new axes of the output */
    K_RESHAPE,   /* a.order = input axis order */
    K_SLICE,     /* a.slice */
    K_CONCAT,    /* a.axis */
    K_REDUCE,    /* a.axes = reduced axes of the input */
    K_TUPLE,     /* operands are the elements */
    K_GET,       /* a.index */
    K_CONV,      /* a.win: convolution of in[0] [N, C, d..] with filters in[1] [K, C/groups, f..] */
    K_POOL,      /* a.win: max or average over windows of in[0] [N, C, d..] */
    /* the op set of real models */
    K_ARGREDUCE, /* a.axis: the axis searched (removed); result i64 */
    K_PAD,       /* a.pad; in[1] is the padding value (a scalar) */
    K_REVERSE,   /* a.axes: the axes read backwards */
    K_REPLACE_SLICE, /* a.slice: the box of in[0] that in[1] replaces */
    K_ONE_HOT,   /* a.axis: the new axis of the output */
    K_GATHER,    /* a.axis: the axis of in[0] that the indices in[1] select along */
    K_SOFTMAX,   /* a.axes: the axes normalized over */
    K_BATCH_DOT, /* numpy's matmul of in[0] and in[1] */
    K_TOPK,      /* a.topk: the values (which 0) or the indices (which 1) */
    K_SCATTER_ADD, /* a.axis: in[0] with in[2] added at the indices in[1] along the axis */
} ir_kind;

typedef enum ir_types { TY_NUM, TY_FLOAT, TY_BOOL, TY_ANY } ir_types;

typedef struct ir_opinfo {
    const char *name;
    ir_kind kind;
    int arity;
    ir_types types;
    const char *cfloat, *cint; /* C templates, see ops.def */
} ir_opinfo;

extern const ir_opinfo ir_ops[OP_COUNT];

/* The element type of a tuple value. */
#define IR_TUPLE 5

/* The most spatial axes a convolution or pooling window has (its operands have 3 to 5 axes). */
#define IR_MAX_SPATIAL 3

/* The geometry of a convolution's or pooling's window over the spatial axes (axes 2.. of its
 * input): per spatial axis, the window (a pool's, or the filters' spatial dims), the stride,
 * the dilation of the window, the padding below and above (negative crops: convolution only),
 * and the dilation of the data (transposed convolution). */
typedef struct ir_window {
    int nsp;                               /* spatial axes (1 to IR_MAX_SPATIAL) */
    int64_t window[IR_MAX_SPATIAL];
    int64_t stride[IR_MAX_SPATIAL];
    int64_t dilation[IR_MAX_SPATIAL];      /* 1 for pools */
    int64_t pad_below[IR_MAX_SPATIAL];
    int64_t pad_above[IR_MAX_SPATIAL];
    int64_t data_dilation[IR_MAX_SPATIAL]; /* 1 for pools */
    int64_t groups;                        /* convolution: input and output channels in groups */
    bool include_pad;                      /* avg_pool: the padding counts in the average */
} ir_window;

typedef struct ir_node {
    uint16_t op;     /* ir_op */
    uint8_t etype;   /* nest_type of the result, or IR_TUPLE */
    uint8_t rank;    /* 0 for scalars and tuples */
    int32_t nin;     /* operand count */
    int32_t *in;     /* operand node indices, all smaller than this node's */
    int64_t *shape;  /* rank dims */
    const char *name; /* the user's name, or NULL */
    int32_t line, col; /* where the text form built it, or 0 */
    union {
        struct {
            int32_t index;      /* position among the parameters */
            uint8_t layout;     /* nest_layout */
        } param;                /* K_PARAM */
        struct {
            void *data;         /* count elements of etype */
            int64_t count;      /* 1 (fills the shape) or the element count */
        } constant;             /* K_CONST */
        uint32_t axes;          /* K_BROADCAST: new output axes; K_REDUCE: reduced input axes;
                                 * K_REVERSE: reversed axes; K_SOFTMAX: normalized axes */
        uint8_t *order;         /* K_RESHAPE: in[0]'s axes in reading order (rank of in[0]) */
        struct {
            int64_t *lower, *upper, *step; /* rank entries each */
        } slice;                /* K_SLICE, K_REPLACE_SLICE */
        struct {
            int64_t *below, *above, *interior; /* rank entries each */
        } pad;                  /* K_PAD */
        struct {
            int64_t k;          /* how many */
            int32_t axis;
            uint8_t largest;    /* 1: the largest first; 0: the smallest */
            uint8_t which;      /* 0: the values; 1: their indices (the next node) */
        } topk;                 /* K_TOPK */
        int32_t axis;           /* K_CONCAT, K_ARGREDUCE, K_ONE_HOT, K_GATHER, K_SCATTER_ADD */
        int32_t state;          /* K_STATE: index into the module's states */
        struct {
            int32_t index;      /* the element taken */
            int32_t target;     /* the node that element is, through any GETs: never a GET */
        } get;                  /* K_GET */
        const ir_window *win;   /* K_CONV, K_POOL */
    } a;
} ir_node;

/* What a function does with one state tensor: its read node (ir_state_read) and the index of
 * its assignment in f->assigns, each -1 when none. */
typedef struct ir_state_use {
    int32_t read, assign;
} ir_state_use;

struct nest_function {
    arena arena;
    char *name;
    ir_node *nodes; /* malloc'd, grows; nodes refer to each other by index */
    int32_t nnodes, capnodes;
    int32_t *params; /* node index of each parameter, in order (arena, grows with nodes) */
    int32_t nparams;
    size_t capparams;
    int32_t *results; /* flattened result tensors: node indices */
    uint8_t *result_layout;
    int32_t nresults;
    int32_t *returned; /* the values as returned (tuples not flattened), for the text form */
    int32_t nreturned;
    bool has_return;
    int status;
    char *errmsg;   /* malloc'd, or NULL */
    int32_t line, col; /* where the text form defined the function, or 0 */
    int32_t *names; /* malloc'd: a hash index of the nodes' names (ir_set_name), -1 empty */
    size_t capnames, nnames;
    struct ir_state_use *state_uses; /* malloc'd: per state tensor, its read node and its
                                      * assignment (graph/state.c) */
    int32_t capstateuses;
    nest_module *module;  /* the module whose state it may read and assign, or NULL */
    struct ir_assign *assigns; /* assign(state, value) statements, in order (arena, grows) */
    int32_t nassigns;
    size_t capassigns;
    struct ir_dims *dims; /* the symbolic dims its shapes use (graph/dims.c), or NULL */
    bool detached;  /* a copy (ir_bind) of a module's function that the module does not hold */
    /* a copy with its leading symbolic axes merged (ir_collapse): the function it stands for;
     * and the copy that pipeline_plan made of this one, which it owns */
    const struct nest_function *origin;
    struct nest_function *collapsed;
};

/* One assignment of a function: state tensor `state` takes the value of node `node` when the
 * call returns. */
typedef struct ir_assign {
    int32_t state;
    int32_t node;
    int32_t line, col;   /* where the text form wrote it, or 0 */
} ir_assign;

/* Operands and attributes for ir_build. Fields unused by an op are ignored. */
typedef struct ir_attrs {
    int type;               /* K_CONVERT target; K_PARAM, K_CONST element type */
    int rank;               /* K_PARAM, K_CONST, K_BROADCAST, K_RESHAPE, K_ONE_HOT: output rank */
    const int64_t *shape;   /* ... and shape */
    int naxes;              /* K_BROADCAST, K_REDUCE, K_REVERSE, K_SOFTMAX */
    const int64_t *axes;
    const int64_t *order;   /* K_RESHAPE, rank of the operand, or NULL */
    const int64_t *lower, *upper, *step; /* K_SLICE, K_REPLACE_SLICE; step may be NULL */
    /* K_CONV, K_POOL: rank(in[0]) - 2 entries each, NULL for the default (step above is the
     * window's stride); window is a pool's (a convolution's comes from its filters) */
    const int64_t *window, *dilation, *pad_below, *pad_above, *data_dilation;
    int64_t groups;         /* K_CONV: at least 1 */
    int include_pad;        /* avg_pool */
    int64_t index;          /* K_CONCAT, K_ARGREDUCE, K_ONE_HOT, K_GATHER, K_SCATTER_ADD axis;
                             * K_GET index */
    const int64_t *below, *above, *interior; /* K_PAD; interior may be NULL */
    int64_t k;              /* K_TOPK */
    int largest, which;     /* K_TOPK */
    const void *data;       /* K_CONST */
    int64_t count;
    const char *name;       /* K_PARAM */
    int layout;             /* K_PARAM */
    int32_t state;          /* K_STATE */
} ir_attrs;

/* Builds one node: checks the operands and attributes, infers the result type, appends it.
 * Returns its index, or NEST_NONE with the error on f. */
int32_t ir_build(nest_function *f, ir_op op, int nin, const int32_t *in, const ir_attrs *at);

/* A constant of `shape` whose elements are all v (converted to etype; integers truncated and
 * saturated at their range, NaN 0, as nest_convert does); its node, or
 * NEST_NONE with the error on f. */
int32_t ir_fill(nest_function *f, int etype, double v, int rank, const int64_t *shape);
/* topk of x: its values and indices nodes, then the tuple of both, which it returns (or
 * NEST_NONE with the error on f). */
int32_t ir_topk(nest_function *f, int32_t x, int64_t k, int64_t axis, int largest);
/* Whether node i is the tuple of a topk (the text form prints it as the topk call). */
static inline bool ir_is_topk_tuple(const nest_function *f, int32_t i);

/* Frees a function whatever owns it (nest_function_free leaves a module's functions alone). */
void ir_function_destroy(nest_function *f);
/* Records an error on f (replacing the last one) and returns `status`. */
int ir_error(nest_function *f, int status, const char *fmt, ...) FORMAT(3, 4);
/* The same for any handle: *errmsg (malloc'd, replaced) and *status take the error; returns the
 * status (NEST_ERR_NOMEM when the message could not be made). */
int ir_verror(char **errmsg, int *status, int code, const char *fmt, va_list ap);

/* Element counts and helpers on nodes. */
int64_t ir_count(const ir_node *n); /* product of the shape (1 for scalars); for a symbolic
                                     * shape a nominal count for heuristics, each symbolic dim
                                     * counted as DIM_NOMINAL: never a size */
/* The axes of a mask (a.axes) as a list, ascending, into axes; their number. */
int ir_mask_axes(uint32_t mask, int64_t *axes);
/* The element count of a checked shape as a dim (N*64 for [N,64]); DIM_NONE with the error. */
int64_t ir_dims_count(nest_function *f, int rank, const int64_t *shape);
static inline const ir_node *ir_in(const nest_function *f, const ir_node *n, int i)
{
    return &f->nodes[n->in[i]];
}
static inline ir_kind ir_kind_of(const ir_node *n) { return ir_ops[n->op].kind; }
bool op_is_elementwise(ir_op op);

/* Records "OP(operands): message" on f, the operands described with their types. */
int ir_op_error(nest_function *f, int status, ir_op op, int nin, const int32_t *in,
                const char *fmt, ...) FORMAT(6, 7);

/* "f32[3,4]" or "(f32[3], i32[])" into b. */
void ir_format_type(buf *b, const nest_function *f, int32_t node);
void ir_format_shape(buf *b, int rank, const int64_t *shape);
/* The node a value stands for: itself, or for a GET the element it takes (never a GET). */
static inline int32_t ir_resolve(const nest_function *f, int32_t v)
{
    return f->nodes[v].op == OP_GET ? f->nodes[v].a.get.target : v;
}
static inline bool ir_is_topk_tuple(const nest_function *f, int32_t i)
{
    const ir_node *n = &f->nodes[i];
    return n->op == OP_TUPLE && n->nin == 2 && f->nodes[n->in[0]].op == OP_TOPK;
}
/* Looks up an op by its text name; OP_COUNT if none. */
ir_op ir_op_lookup(const char *name, size_t len);
/* Finds a node by user name; -1 if none. A hash lookup: names are given through ir_set_name. */
int32_t ir_find_name(const nest_function *f, const char *name);
/* Gives node its user name (a string that lives as long as f: its arena's) and indexes it for
 * ir_find_name. NEST_OK, or NEST_ERR_NOMEM recorded on f. */
int ir_set_name(nest_function *f, int32_t node, const char *name);
/* After the nodes were renumbered (node i of the oldn before is now map[i], or gone when -1):
 * the indexes of f that name nodes (names, state reads) follow. */
void ir_renumber(nest_function *f, const int32_t *map, int32_t oldn);
/* Checks a name for a function, parameter or value; returns NEST_OK or records an error. */
int ir_check_name(nest_function *f, const char *what, const char *name);

/* Checks the graph's invariants (operand order, types against the rules); asserts in debug
 * builds and returns false on a violation. */
bool ir_verify(const nest_function *f);

/* ---------------------------------------------------------------------------------------------
 * graph/prune.c: dead nodes
 * ------------------------------------------------------------------------------------------- */

/* Removes the nodes that no result depends on and no assignment needs (parameters stay: they are
 * the arguments) from a function that has returned, renumbering the others in order (operands,
 * GET targets, parameters, results, assignments). Returns how many went; 0 also when out of
 * memory (f unchanged). */
int32_t ir_prune(nest_function *f);

/* ---------------------------------------------------------------------------------------------
 * graph/window.c: the type rules of convolution and pooling
 * ------------------------------------------------------------------------------------------- */

/* Checks the operands and window attributes of a K_CONV or K_POOL node and fills n's type,
 * shape and a.win; NEST_OK or the error recorded on f (naming the op, operands and shapes). */
int ir_infer_window(nest_function *f, ir_node *n, ir_op op, int nin, const int32_t *in,
                    const ir_attrs *at);
/* The extent of one output axis of a window: (padded, dilated input - dilated window) / stride
 * + 1, for input extent d and spatial axis i of w. */
int64_t ir_window_out(const ir_window *w, int i, int64_t d);

/* ---------------------------------------------------------------------------------------------
 * graph/dims.c: symbolic dimensions (names, and sums of products of names and integers)
 * ------------------------------------------------------------------------------------------- */

/* A dim is an int64_t: values above DIM_SYM0 are plain (sizes >= 0; pad and slice lists also
 * hold negative offsets), DIM_SYM0 - k is entry k of the function's table of dim expressions.
 * Entries are canonical and hash-consed: two dims are equal exactly when their int64_t are, so
 * every shape comparison stays one comparison. DIM_NONE is a failed operation (error on f). */
#define DIM_SYM0 (-((int64_t)1 << 62))
#define DIM_NONE INT64_MIN
#define DIM_MAX_TERMS 8    /* terms of one expression */
#define DIM_MAX_FACTORS 6  /* names multiplied in one term */
#define DIM_MAX_EXPRS 65536
#define DIM_NOMINAL 1024   /* what a symbolic dim counts as where only a guess is needed */
static inline bool dim_is_sym(int64_t d) { return d <= DIM_SYM0 && d != DIM_NONE; }

typedef struct dim_term {
    int64_t coef;
    int32_t nf;                   /* how many names it multiplies */
    int32_t f[DIM_MAX_FACTORS];   /* their entries, ascending */
} dim_term;
typedef struct dim_expr {
    const char *name;   /* a name's text, or NULL for an expression */
    int32_t nterms;
    dim_term *terms;    /* canonical: sorted, like terms merged, no zero coefficient */
    uint64_t hash;
} dim_expr;
typedef struct ir_dims ir_dims;
void ir_dims_free(ir_dims *d);

/* The dim named name (len bytes), declared on first use (the name is checked as a value's
 * is); DIM_NONE with the error on f. */
int64_t dim_name(nest_function *f, const char *name, size_t len);
/* The entry of the dim named name and its handle in *d, or -1 when f has no such dim. */
int32_t dim_find(const nest_function *f, const char *name, size_t len, int64_t *d);
/* Arithmetic on dims, symbolic or plain: the canonical result, or DIM_NONE with the error on f
 * (an invalid operand, a coefficient that overflows, an expression past the limits). */
int64_t dim_add(nest_function *f, int64_t a, int64_t b);
int64_t dim_sub(nest_function *f, int64_t a, int64_t b);
int64_t dim_mul(nest_function *f, int64_t a, int64_t b);
/* a / b when b divides a at every size of the names (a plain divisor of every coefficient, or
 * one term whose names and coefficient divide every term of a: N*8 by N*4 is 2) into *q;
 * false, recording nothing, when it does not (*q is DIM_NONE with the error on f when the
 * quotient overflows). */
bool dim_quotient(nest_function *f, int64_t a, int64_t b, int64_t *q);
/* a / b when b is plain and divides every coefficient of a's terms (N*4+2 by 2 is N*2+1, by -2
 * -N*2-1), so that the quotient is exact at every size of the names; DIM_NONE with the error on
 * f otherwise (a symbolic divisor, 0, a division that leaves a remainder: 7 by 2 too). */
int64_t dim_div_exact(nest_function *f, int64_t a, int64_t b);
/* The sign of a - b for every size of the names: -1, 0 or 1 when it is known, DIM_LE (a <= b)
 * or DIM_GE (a >= b) when only that is, DIM_UNKNOWN otherwise. A check of a rule fails at
 * construction only when it fails for every size; the rest is checked when the dims are known
 * (ir_bind, and the generated code at its entry). */
enum { DIM_LE = -2, DIM_GE = 2, DIM_UNKNOWN = 3 };
int dim_compare(const nest_function *f, int64_t a, int64_t b);
/* Whether d is plain or an entry of f's table. */
bool dim_valid(const nest_function *f, int64_t d);
const dim_expr *dim_entry(const nest_function *f, int64_t d);
int32_t dim_entry_count(const nest_function *f);
/* The value of d when the names have the values vals (indexed by entry): NEST_OK, or
 * NEST_ERR_LIMIT when it overflows. */
int dim_eval(const nest_function *f, int64_t d, const int64_t *vals, int64_t *out);
/* The same for n terms whose factors index vals directly. */
int dim_terms_eval(const dim_term *terms, int n, const int64_t *vals, int64_t *out);
/* Whether f's shapes name a dim. */
bool ir_is_symbolic(const nest_function *f);
/* The entries of the names the parameters' shapes use, in order of first appearance (the
 * order of the ABI), into ids (room for dim_entry_count); their number, -1 out of memory. */
int32_t dim_params(const nest_function *f, int32_t *ids);
/* The entries of all of f's names, in order of declaration; their number. */
int32_t dim_names(const nest_function *f, int32_t *ids);
/* The text of a dim (N, N*64+2, 7; "?" for a handle of no table) into b; dim_text malloc's it. */
void dim_format(buf *b, const nest_function *f, int64_t d);
/* The same as a C expression of int64_t: each name as names[its entry], an expression in
 * parentheses ((N*64+2)). */
void dim_format_with(buf *b, const nest_function *f, int64_t d, const char *const *names);
char *dim_text(const nest_function *f, int64_t d);
/* Dim d of f as the same expression of g's names (declared in g on first use); map (per entry
 * of f's table, 0 before) keeps the handles made. DIM_NONE with the error on g. */
int64_t dim_transfer(const nest_function *f, nest_function *g, int64_t *map, int64_t d);
/* The same as ir_node_attrs_of's map of the dims in a node's attributes, ctx a dim_move: a dim
 * that cannot be copied (out of memory) puts g's error on f. */
typedef struct dim_move {
    nest_function *f, *g;
    int64_t *map;
} dim_move;
bool dim_transfer_map(void *ctx, int64_t d, int64_t *out, const char *what, int32_t node, int i);
/* "[N,256]": ir_format_shape with f's names. */
void ir_format_dims(buf *b, const nest_function *f, int rank, const int64_t *shape);

/* ---------------------------------------------------------------------------------------------
 * graph/bind.c: a function at given dims
 * ------------------------------------------------------------------------------------------- */

/* A copy of f with its names given the values vals (in the order of dim_params), every shape
 * and attribute plain, every rule checked again with the sizes: a function the passes and the
 * interpreter take as they take any other (it shares f's module without belonging to it; free
 * it with ir_function_destroy). NULL with the error on f. */
nest_function *ir_bind(nest_function *f, const int64_t *vals, int nvals);
/* The entries of f's dims in the order of the ABI (*ids malloc'd, the caller frees), after
 * checking that each name appears in a parameter's shape. NEST_OK or the error on f. */
int ir_dims_of(nest_function *f, int32_t **ids, int32_t *n);
/* A map of dims (entry i of list `what` of node `node`): false stops, with the error on f. */
typedef bool (*ir_dim_map)(void *ctx, int64_t d, int64_t *out, const char *what, int32_t node,
                           int i);
/* The attributes of a node as ir_build takes them; the arrays they point into. */
typedef struct ir_node_attrs {
    ir_attrs at;
    int64_t shape[NEST_MAX_RANK], lo[NEST_MAX_RANK], up[NEST_MAX_RANK], step[NEST_MAX_RANK],
        axes[NEST_MAX_RANK], order[NEST_MAX_RANK];
} ir_node_attrs;
/* Node i's attributes into *s, every dim of its shape and lists mapped by map. */
bool ir_node_attrs_of(const nest_function *f, int32_t i, ir_dim_map map, void *ctx,
                      ir_node_attrs *s);
/* Builds node i of f into g with the attributes at, as node i of g (its operands are g's
 * nodes of the same indices), with f's name and place; false with the error on f. */
bool ir_rebuild_node(nest_function *f, nest_function *g, int32_t i, const ir_attrs *at);

/* ---------------------------------------------------------------------------------------------
 * graph/collapse.c: symbolic dims beyond the first axis, as a leading run of axes merged
 * ------------------------------------------------------------------------------------------- */

/* Whether a value of f has symbolic dims on its first axis and one further in. */
bool ir_collapse_needed(const nest_function *f);
/* A copy of f whose values have the leading run of axes with symbolic dims that they share
 * ([B,S,D]) merged into one axis ([B*S,D]): the same arrays, the same dims in the same order,
 * every rule checked again by ir_build. A value or op that takes the run's axes apart is
 * refused naming the value and the run. Its origin is f; free it with ir_function_destroy.
 * NULL with the error on f. */
nest_function *ir_collapse(nest_function *f);
/* The error on f that refuses node i of a function with symbolic dims: what (why), the value's
 * name and type, then `after`, and how to compile it at plain sizes; returns the status. */
int ir_refuse_dims(nest_function *f, int32_t i, const char *why, const char *after);

/* ---------------------------------------------------------------------------------------------
 * graph/outer.c: symbolic dims in any position, as values stored with them outermost
 * ------------------------------------------------------------------------------------------- */

/* Whether a value of f has a symbolic dim behind a plain one (and is not a transpose, which
 * the passes take as a view). */
bool ir_outer_needed(const nest_function *f);
/* A copy of f whose values are stored with their symbolic axes outermost: the same arrays in
 * the ABI's order at its parameters and results, transposes and reshapes in between as views
 * of g's values or copies, every rule checked again by ir_build. Its origin is f; free it with
 * ir_function_destroy. NULL with the error on f (an op it cannot place names the value). */
nest_function *ir_outer(nest_function *f);

/* ---------------------------------------------------------------------------------------------
 * graph/state.c: modules and their state: variables and persistent tensors, reads, assignments
 * ------------------------------------------------------------------------------------------- */

/* A tensor of a module's state: `var` (trainable) or `persistent`. */
typedef struct ir_state {
    const char *name;
    uint8_t etype;
    uint8_t rank;
    bool trainable;
    int64_t *shape;
    int64_t count;
    nest_init init;
    const void *data;    /* init.kind NEST_INIT_DATA: the elements (module arena), else NULL */
    int32_t line, col;   /* where the text form declared it, or 0 */
} ir_state;

struct nest_module {
    char *name;          /* NAME of the generated NAME_state (malloc'd) */
    nest_function **fns; /* owned */
    int nfns;
    size_t capfns;
    ir_state *states;    /* in declaration order (arena, grows) */
    int32_t nstates;
    size_t capstates;
    int32_t *state_index; /* a hash index of the states' names: a state or -1 (arena) */
    size_t capindex;
    arena arena;
    int status;
    char *errmsg;
    int line, col;
};

/* Records an error on m (replacing the last one) and returns `status`. */
int ir_module_error(nest_module *m, int status, const char *fmt, ...) FORMAT(3, 4);
/* Makes the error of m's first function that has one m's error (after an operation on the
 * whole module failed on a function). */
void ir_module_take_error(nest_module *m);
/* Appends f to m's functions (m owns it from then on); false when out of memory (f not added,
 * no error recorded). */
bool ir_module_add(nest_module *m, nest_function *f);
/* The state named `name` (len bytes) of f's module, or -1. */
int32_t ir_state_find(const nest_module *m, const char *name, size_t len);
/* Declares a state tensor (the checks of nest_variable); its index, or -1 with the error on m. */
int32_t ir_state_declare(nest_module *m, const char *name, bool trainable, nest_type type,
                         int rank, const int64_t *shape, const nest_init *init);
/* The same with an array of initial values (nest_variable_data), copied. */
int32_t ir_state_declare_data(nest_module *m, const char *name, bool trainable, nest_type type,
                              int rank, const int64_t *shape, const void *data);
/* The read node of state s in f, made on first use; NEST_NONE with the error on f. */
int32_t ir_state_read(nest_function *f, int32_t s);
/* Whether f reads (in a node a result or an assignment needs) or assigns module state. The
 * generated entry points of such a function take the state first. */
bool ir_uses_state(const nest_function *f);
/* A hash of the module's state layout (names, types, shapes): a state object and a compiled
 * function fit each other when their layouts hash alike and have as many tensors. */
uint64_t ir_state_layout_hash(const nest_module *m);
/* The module name a file name gives: its stem, with every character that cannot be in an
 * identifier replaced by '_' ("model" for "dir/model.nest"); malloc'd. */
char *ir_module_name_of_file(const char *filename);

/* ---------------------------------------------------------------------------------------------
 * front/parse.c: the text form
 * ------------------------------------------------------------------------------------------- */


/* Deepest nesting of calls the parser accepts. */
#define PARSE_MAX_DEPTH 1000

/* ---------------------------------------------------------------------------------------------
 * front/onnx_read.c, onnx_ops.c, onnx_math.c, onnx_shape.c, onnx_nn.c, onnx_conv.c: ONNX import
 * (nest_import_onnx of nest.h)
 * ------------------------------------------------------------------------------------------- */

/* onnx_read.c reads the protobuf (protobuf-c over onnx.proto, generated at build time into
 * build/gen), checks the graph and builds the function node by node, folding the nodes whose
 * inputs are known; onnx_ops.c holds what the lowerings share and the table of operators
 * (front/onnx_ops.def, one line per operator); onnx_math.c (element-wise), onnx_shape.c
 * (constants, shapes, views), onnx_nn.c (reductions, products, normalization, global pools) and
 * onnx_conv.c (convolutions and pools over windows) hold one lowering per operator. What they share is in front/onnx.h, which only they include. */

/* ---------------------------------------------------------------------------------------------
 * graph/print.c: canonical text and Graphviz
 * ------------------------------------------------------------------------------------------- */

/* The name each node prints as: its own, or a generated "_<index>" that no user name takes. */
typedef struct namer {
    const nest_function *f;
    const char **taken; /* sorted user names beginning with "_<digit>" */
    size_t ntaken;
    char **made;        /* generated names, per node (malloc'd) */
} namer;
bool namer_init(namer *nm, const nest_function *f);
void namer_free(namer *nm);
const char *namer_name(const namer *nm, int32_t node);

/* Appends the canonical text of f to b. */
void print_function(buf *b, const nest_function *f);
/* Appends "name = op(operands, attributes)" for one node (constants abbreviated past `maxvals`
 * values). */
void print_node(buf *b, const namer *nm, int32_t node, int64_t maxvals);
/* What a picture of a function shows of its plan: each loop nest a cluster of the nodes it
 * computes, and where values are stored (pipeline.c fills it). */
typedef enum dot_store {
    DOT_FUSED,     /* computed where it is used: no memory */
    DOT_WORKSPACE, /* a temporary in the workspace */
    DOT_ROW,       /* a temporary of one row, a local array of its row group's loop */
    DOT_VIEW,      /* a view no nest computes: index arithmetic in the nests that read it */
} dot_store;
typedef struct dot_marks {
    int nclusters;
    char *const *labels;    /* per cluster */
    const int *parent;      /* per cluster: the cluster it is drawn in (a row group), or -1 */
    const int32_t *cluster; /* per node: its cluster, or -1 (parameters, constants, shared views) */
    const uint8_t *store;   /* per node: dot_store */
} dot_marks;
/* Appends function number k of a Graphviz digraph: one node per op ("name = op"; a parameter
 * with its type), each edge labelled with the type and shape of the value it carries; with
 * marks, the loop nests as filled clusters (inside the cluster of their row group), views
 * dashed (in the nest that reads them, if only one does), and stored temporaries framed twice,
 * their edges bold. */
void print_dot_function(buf *b, const nest_function *f, int k, const dot_marks *marks);
/* The shortest %g text of a finite v that reads back as the same value of etype (f32 or f64). */
void format_float(char *s, size_t n, int etype, double v);
/* Formats one element of a constant so that it parses back to the same value. */
void print_scalar(buf *b, int etype, const void *data, int64_t i);

/* ---------------------------------------------------------------------------------------------
 * graph/interp.c: the reference interpreter
 * ------------------------------------------------------------------------------------------- */

/* Evaluates f into the result arrays (see nest_evaluate); `state` (NULL for a function without
 * state) holds the module's state tensors, which take the assigned values at the end. */
int interp_run(nest_function *f, void *const *args, void *const *results, void *const *state);
/* nest_evaluate's checks of the counts and arrays, then interp_run. */
int interp_call(nest_function *f, void *const *state, void *const *args, int nargs,
                void *const *results, int nresults);

/* ---------------------------------------------------------------------------------------------
 * graph/interp_window.c: the reference interpreter's convolution and pooling
 * ------------------------------------------------------------------------------------------- */

/* Evaluates K_CONV or K_POOL node n of f from its dense row-major operands x (and filters w)
 * into out, by direct loops over the definition. */
void interp_window(const nest_function *f, const ir_node *n, const void *x, const void *w,
                   void *out);

/* ---------------------------------------------------------------------------------------------
 * The plan: what the passes below turn a function into. Buffers hold tensors; nests are loop
 * nests over an iteration space; fx are the element expressions evaluated inside them.
 * ------------------------------------------------------------------------------------------- */

typedef enum pbuf_kind {
    BUF_PARAM,
    BUF_RESULT,
    BUF_TEMP,
    BUF_CONST,
    BUF_STATE,     /* a state tensor of the module: read (its entry value), and written in place
                    * by an assignment when inplace.c finds that safe */
    BUF_STATE_NEW, /* the new value of an assigned state tensor, until inplace.c makes it the
                    * state tensor itself or a temporary copied into it at the end */
} pbuf_kind;

typedef struct pbuf {
    pbuf_kind kind;
    int32_t index;      /* BUF_PARAM / BUF_RESULT: position; BUF_CONST: constant number;
                         * BUF_STATE, BUF_STATE_NEW: the state tensor */
    int32_t node;       /* the graph node whose value it holds */
    uint8_t etype;
    int64_t count;      /* elements (a dim handle when the shape is symbolic) */
    int64_t offset;     /* BUF_TEMP: byte offset in the workspace (memplan.c) */
    bool dead;          /* BUF_TEMP: no longer written or read (merged away) */
    int64_t row;        /* BUF_TEMP: shrunk to one row of this many elements, a local array of
                         * its row group's loop (rows.c); 0 when it lives in the workspace */
    const struct const_pack *pack; /* BUF_CONST: its node's data packed so for the one nest
                                    * that reads it (prepack.c), count the packed elements;
                                    * NULL: the data as they are */
} pbuf;

typedef enum fx_kind {
    FX_LOAD,   /* buf[off + sum(i_k * st[k]) + sum(gst[j] * take(args[j], gdim[j]))]: a strided
                * view, plus nargs gather terms whose index is another expression (take(v, n)
                * counts a negative v from the end and clamps to [0, n)); buf FX_IOTA: the
                * index itself, off + sum(i_k * st[k]), an i64 */
    FX_IMM,    /* a scalar literal: imm */
    FX_OP,     /* op(args): an element-wise op of ops.def (convert: etype is the target) */
    FX_CONCAT, /* along `axis`, arg j covers [starts[j], starts[j+1]) and sees index i - starts[j] */
} fx_kind;

typedef struct fx fx;
struct fx {
    uint8_t kind, etype; /* fx_kind, nest_type */
    uint16_t op;         /* FX_OP */
    int32_t node;        /* the graph node it computes (names, comments), or -1 */
    int32_t id;          /* creation order: args always have smaller ids */
    int32_t nargs;       /* FX_OP, FX_CONCAT */
    fx **args;
    int rank;            /* rank of the index space it is expressed in (FX_LOAD, FX_CONCAT) */
    int32_t buf;         /* FX_LOAD: a buffer, or FX_IOTA */
    int64_t off;         /* FX_LOAD */
    int64_t *st;         /* FX_LOAD: rank strides in elements */
    int64_t *gst, *gdim; /* FX_LOAD: per gather term (nargs), its stride and the extent taken */
    union {
        double f;
        int64_t i;
    } imm;               /* FX_IMM, by etype */
    int axis;            /* FX_CONCAT */
    int64_t *starts;     /* FX_CONCAT: nargs + 1 entries */
    uint64_t hash;
    fx *chain;           /* hash-consing table */
};

/* A map from expression nodes to expression nodes (walk.c); zero is an empty map. */
typedef struct fx_map {
    const fx **keys;
    fx **vals;
    size_t cap, n;
} fx_map;

/* One output of a nest: a store of `value` into a view of `buf`, or a reduction of it. */
typedef struct nout {
    int32_t buf;
    int64_t off;
    int64_t *st;         /* over the iteration space; 0 on reduced axes */
    fx *value;
    int16_t reduce;      /* OP_SUM, OP_PRODUCT, OP_MAX, OP_MIN, OP_ARGMAX, OP_ARGMIN (the index
                          * along the one folded axis, which is the nest's innermost), or -1
                          * for a store */
    int32_t node;        /* the graph node computed */
    bool drop;           /* tile.c: the fold feeds the nest's other outputs and is not stored */
} nout;

typedef struct nest {
    int rank;
    int64_t *dims;       /* the iteration space */
    uint32_t reduced;    /* iteration axes folded by reduce outputs (all outputs reduce then) */
    int nouts;
    nout *outs;
    int32_t *nodes;      /* the graph nodes computed here, in order (for comments) */
    int nnodes;
    size_t capouts, capnodes; /* room in outs and nodes (arena arrays that fuse.c grows) */
    bool dead;           /* merged into another nest */
    bool dot;            /* fuse.c: a contraction with free axes on both sides (a product of
                          * matrices); tile.c may tile it */
    int tile_i, tile_j;  /* tile.c: the register tile of a [I, K, J] product, or 0 */
    int tile_rows;       /* tile.c: the rows of a block, tile_i or a multiple (a transposed
                          * product's blocks store whole cache lines down its columns) */
    int tile_vb;         /* tile.c: the vector bytes the tile was sized for (16, 32, 64) */
    fx *tile_a, *tile_b; /* tile.c: its factors: a load ignoring J, an expression ignoring I */
    bool a_first;        /* tile.c: the product is tile_a * tile_b (else tile_b * tile_a) */
    bool b_direct;       /* tile.c: tile_b is read where it lies, not packed (few blocks of rows) */
    bool b_direct_rt;    /* tile.c: symbolic rows; tile_b is read where it lies when they make at
                          * most TILE_DIRECT_BLOCKS blocks, decided at run time, else packed */
    bool tile_par;       /* tile.c: its tiles run on several cores (each product of a batch in
                          * one parallel region): B packed whole, then the tiles */
    bool tile_rowwise;   /* tile.c: B packed whole, then the blocks row by row (each block of
                          * rows across all the columns), not column block by column block */
    bool b_shared;       /* tile.c: a batch of products whose B ignores the batch (the
                          * filters of a 1x1 convolution computed transposed): B packed whole
                          * once, then the tiles of every product */
    bool batch_outer;    /* tile.c: with b_shared on several cores, the products run
                          * outermost (each product's A across all the blocks of columns), not
                          * the blocks of columns (each panel across every product), when that
                          * reads fewer bytes from beyond the second-level cache */
    int64_t k_block;     /* tile.c: with b_shared on one core, the sum in blocks of this many
                          * k (0: whole): each group of k_group products runs every block of
                          * columns on one block of k before the next, its partial sums kept
                          * in the workspace after the panels */
    int64_t k_group;
    bool b_packed;       /* tile.c: B is a constant stored as its panels (prepack.c): nothing
                          * packed per call, the panels read from the constant */
    int32_t pack;        /* the workspace buffer private to the nest, or -1: a tiled product's
                          * packed panel (tile.c; -1 for a batch of products: a local array),
                          * a convolution's copy of its input (conv.c) */
    int32_t group;       /* rows.c: the first nest of its row group (its own index if alone) */
    bool rowed;          /* rows.c: in a group of several nests sharing the outer loop */
    struct wplan *win;   /* conv.c: a convolution's or pooling's plan (its own loops), or NULL */
    bool values_first;   /* inplace.c: the body reads every output's value before it stores
                          * any (a swap of two tensors in place, through registers) */
    int16_t special;     /* a nest of its own code, which the passes leave as it is; -1
                          * otherwise. OP_TOPK: outs are the values and the indices, each
                          * reading the operand's load; pack a scratch buffer or -1.
                          * OP_SCATTER_ADD: over the updates' space, outs[0]'s value (an
                          * update) is added to the element outs[1]'s value loads (a load of
                          * the result with the index as its gather term; not stored: drop) */
} nest;

/* Whether any output of n folds (the nest is a reduction, its values ready only at its end). */
static inline bool nest_folds(const nest *n)
{
    for (int i = 0; i < n->nouts; i++)
        if (n->outs[i].reduce >= 0)
            return true;
    return false;
}

/* Whether a nest folds an argmax or argmin: an index, one element after the other, so its one
 * folded axis stays innermost (flatten.c) and its accumulators are scalars (emit/). */
static inline bool nest_has_arg(const nest *n)
{
    for (int i = 0; i < n->nouts; i++)
        if (n->outs[i].reduce == OP_ARGMAX || n->outs[i].reduce == OP_ARGMIN)
            return true;
    return false;
}

typedef struct plan {
    nest_function *f;
    arena *a;            /* everything of the plan; freed by the caller */
    const nest_options *opts;
    pbuf *bufs;
    int32_t nbufs;
    size_t capbufs;
    nest *nests;
    int32_t nnests;
    size_t capnests;
    int64_t ws_size;     /* bytes of workspace (memplan.c); with symbolic temporaries, the
                          * part before them */
    int32_t nconsts;     /* BUF_CONST buffers */
    /* hash-consing of fx */
    fx **table;
    size_t tabcap, nfx;
    /* walk.c: marks of expression nodes (by id) and of buffers, stamped with an epoch */
    uint32_t *fxmark, *bufmark;
    size_t capfxmark, capbufmark;
    uint32_t fxepoch, bufepoch;
    int status;          /* first error (NEST_OK): out of memory or a limit */
    char why[320];       /* "" or what the limit was, for the message (plan_limit) */
} plan;

/* The most work one loop body holds (nest_weight): fusion (fuse.c's merges, rows.c's groups)
 * stores an intermediate rather than grow a body past it. Past it, C compilers take time that
 * grows faster than the body (measured with clang 14: a loop of 4,000 element-wise ops
 * compiles in 2.5 times the time of two of 2,000). */
#define PLAN_MAX_BODY 400

/* ---------------------------------------------------------------------------------------------
 * passes/layout.c: tensor descriptions: buffers, strides, element expressions and their views
 * ------------------------------------------------------------------------------------------- */

/* Records NEST_ERR_LIMIT on p (unless an error is already there) with what went over it, for
 * the message of the compile that fails; returns false. */
bool plan_limit(plan *p, const char *fmt, ...) FORMAT(2, 3);
/* The same with another status (what the plan cannot compile yet: NEST_ERR_ARG). */
bool plan_fail(plan *p, int status, const char *fmt, ...) FORMAT(3, 4);

/* Adds a buffer; -1 when out of memory (recorded in p->status). */
int32_t plan_buffer(plan *p, pbuf_kind kind, int32_t index, int32_t node, int etype, int64_t count);
/* The strides of a dense tensor of `shape` in a layout (row- or column-major). */
void layout_strides(int rank, const int64_t *shape, int layout, int64_t *st);

/* Expressions are hash-consed: equal expressions are the same pointer. NULL when out of memory
 * (p->status says so). */
fx *fx_load(plan *p, int32_t buf, int64_t off, int rank, const int64_t *st, int32_t node);
/* The buffer of a load that reads no memory: its value is its index (an i64). */
#define FX_IOTA (-1)
/* Whether e reads a buffer through a plain strided view (a load with no gather term). */
static inline bool fx_is_view(const fx *e)
{
    return e->kind == FX_LOAD && !e->nargs && e->buf != FX_IOTA;
}
/* The most gather terms of one load (more: the caller stores the operand): a pad with interior
 * padding or a strided replace_slice takes one per axis. */
#define FX_MAX_TERMS NEST_MAX_RANK
/* A load with nterms gather terms (idx: their index expressions, over the load's space). */
fx *fx_gload(plan *p, int32_t buf, int64_t off, int rank, const int64_t *st, int nterms,
             fx *const *idx, const int64_t *gst, const int64_t *gdim, int32_t node);
fx *fx_imm(plan *p, int etype, double f, int64_t i);
fx *fx_op(plan *p, ir_op op, int etype, int nargs, fx *const *args, int32_t node);
fx *fx_concat(plan *p, int rank, int axis, int nargs, fx *const *args, const int64_t *starts,
              int32_t node);

/* Views of expressions: each gives the expression over a new index space, or NULL when it
 * cannot be expressed by strides (then p->status stays NEST_OK and the caller stores the
 * operand). `in_shape` is e's index space. */
fx *fx_broadcast(plan *p, fx *e, int rank, uint32_t new_axes);
fx *fx_slice(plan *p, fx *e, const int64_t *lower, const int64_t *step);
fx *fx_permute(plan *p, fx *e, int rank, const uint8_t *order);
fx *fx_reshape(plan *p, fx *e, int in_rank, const int64_t *in_shape, int rank,
               const int64_t *shape);
/* e with the load `from` replaced by `to` (any node over the same space). */
fx *fx_substitute(plan *p, fx *e, fx *from, fx *to);
/* Each of the n values with every load that is a key of subst replaced by its value (any node
 * over the same space), in place, with one memo for all: shared nodes are rewritten once. False
 * when out of memory (p->status). */
bool fx_forward(plan *p, fx **vals, int n, const fx_map *subst);
/* e over an index space whose axis `axis` is shifted by delta: e'(i) = e(i + delta). */
fx *fx_shift(plan *p, fx *e, int axis, int64_t delta);
/* e (over `shape`) read backwards along the axes in mask: strides negated. */
fx *fx_reverse(plan *p, fx *e, int rank, const int64_t *shape, uint32_t mask);
/* e (over a space of rank in_rank, extent n along `axis`) read at the positions an index
 * expression gives along that axis: the result is over a space of rank in_rank - 1 + ri where
 * axes axis .. axis + ri - 1 are the index's, and idx is an expression over that space. NULL when
 * e concatenates along the axis or a load would take too many gather terms. */
fx *fx_gather(plan *p, fx *e, int in_rank, int axis, int64_t n, fx *idx, int ri);
/* e with the axes of a nest merged or dropped: new axis k takes the strides of old axis
 * from[k+1]-1, the innermost of the axes it merges (the others merged or had extent 1). */
fx *fx_regroup(plan *p, fx *e, int rank, const int *from);
/* e with every FX_CONCAT on `axis` with a part covering [lo, hi) replaced by that part (shifted);
 * a concat with a boundary inside [lo, hi) stays, for the caller to split further. */
fx *fx_select(plan *p, fx *e, int axis, int64_t lo, int64_t hi);

/* ---------------------------------------------------------------------------------------------
 * passes/walk.c: walks over the expressions (each node once), marks, maps, the buffers read
 * ------------------------------------------------------------------------------------------- */

/* Calls fn on every node of the expressions (each once, however many paths reach it), args
 * before users (by id). Costs the size of the DAG. False when out of memory (p->status). */
bool fx_walk(plan *p, fx *const *roots, int nroots, void (*fn)(fx *e, void *ctx), void *ctx);
/* The same, not entering the args of the nodes for which enter() is false (they are visited;
 * their args only if another path reaches them). */
bool fx_walk_pruned(plan *p, fx *const *roots, int nroots, bool (*enter)(const fx *e, void *ctx),
                    void (*fn)(fx *e, void *ctx), void *ctx);
/* The same in no particular order (no sort): for questions whose answer does not depend on it. */
bool fx_visit(plan *p, fx *const *roots, int nroots, bool (*enter)(const fx *e, void *ctx),
              void (*fn)(fx *e, void *ctx), void *ctx);
/* fx_visit over the values of a nest's outputs. */
bool nest_visit(plan *p, const nest *ne, void (*fn)(fx *e, void *ctx), void *ctx);
/* Whether the expressions hold a concat along `axis` (any axis for -1; also when the walk runs
 * out of memory: the cautious answer). */
bool fx_has_concat(plan *p, fx *const *roots, int nroots, int axis);
/* Whether e loads from buffer buf (a walk of e: for one question; to ask about many buffers,
 * take fx_loads once). Also when the walk runs out of memory: the cautious answer. */
bool fx_reads(plan *p, fx *e, int32_t buf);
/* The distinct buffers the expressions load, ascending, in *out (malloc'd, the caller frees;
 * NULL when none): their number, or -1 when out of memory (p->status). */
int32_t fx_loads(plan *p, fx *const *roots, int nroots, int32_t **out);
/* The same for the values of a nest's outputs. */
int32_t nest_loads(plan *p, const nest *ne, int32_t **out);
/* How many live nests read each buffer: a malloc'd array of p->nbufs + 1 counts, or NULL when
 * out of memory (p->status says so). */
int32_t *nest_readers(plan *p);
/* The first nest after k that is not dead, or p->nnests. */
int32_t next_live_nest(const plan *p, int32_t k);
/* Whether the values (over the `rank` axes of o's nest) read o's buffer only through the view
 * o writes (replaced by zero, no read of the buffer remains: expressions are hash-consed, so
 * the view is one node); false also when out of memory (p->status says so). */
bool reads_only_view(plan *p, const nout *o, int rank, fx *const *vals, int nvals);
/* Nest k absorbs e, the element-wise nest after it, which reads k's value (outs[0]) only where k
 * writes it: e's outputs, as `outs` (over k's space), and nodes join k's, and e dies. k's value
 * is then stored only if it is not a temporary or a nest other than e reads it (readers: as
 * nest_readers counted them before any absorption). False when out of memory. (tile.c, conv.c) */
bool nest_absorb(plan *p, int32_t k, int32_t e, const nout *outs, const int32_t *readers);

/* The work of one node of an expression: its op's weight (exp, log, tanh, power 10; divide,
 * sqrt 3; others 1), 1 for a concat, 0 for a leaf. */
int fx_weight(const fx *e);
/* The work of a nest's body: the weights of its values' nodes (each once), and 1 an output. */
int64_t nest_weight(plan *p, const nest *ne);

/* A set of expression nodes (or of buffers), for one walk at a time: clear starts an empty
 * set in O(1); mark adds e and returns whether it was not there yet (false also when out of
 * memory: p->status). fx_walk and fx_loads use them: a walk of your own must not call those
 * between its clear and its last mark. */
void fx_marks_clear(plan *p);
bool fx_mark(plan *p, const fx *e);
void buf_marks_clear(plan *p);
bool buf_mark(plan *p, int32_t b);
/* A malloc'd array indexed by node id, with room for e: v, or v grown (doubling, from 1024
 * elements of `size` bytes) with the new elements' bytes all `fill` (0, or -1: every element
 * -1); NULL when out of memory (v stands). Used as  T *n = fx_id_array(v, &cap, e, sizeof *n,
 * -1); if (!n) fail; v = n; ... v[e->id]  (the passes' memos per node, the emitter's maps). */
void *fx_id_array(void *v, size_t *cap, const fx *e, size_t size, int fill);

/* A map from expression nodes to expression nodes (memo of a rewrite, a substitution; the
 * type is declared with the plan). The slot of e (NULL in a new slot), or NULL when out of
 * memory (p->status); a slot moves when the map grows. */
fx **fx_map_slot(plan *p, fx_map *m, const fx *e);
fx *fx_map_get(const fx_map *m, const fx *e);
void fx_map_free(fx_map *m);

/* ---------------------------------------------------------------------------------------------
 * passes/fuse.c: which values are stored, and the nests that compute them
 * ------------------------------------------------------------------------------------------- */

/* topk keeps its k best in order by insertion up to this k; beyond, it merge-sorts each row. */
#define TOPK_INSERT 16
/* Lowers p->f into buffers and nests: element-wise chains, views and the reductions that
 * consume them fuse into one nest unless opts->fuse is 0; then adjacent nests over the same
 * space merge so that a value feeding several outputs is computed once. */
int pass_fuse(plan *p);
/* Adds an output to nest n: a store of value into buffer bufi through the view (off, st), or a
 * fold of it (reduce an op, else -1), computing graph node `node`. False when out of memory
 * (p->status). */
bool nest_add_out(plan *p, nest *n, int32_t bufi, int64_t off, const int64_t *st, fx *value,
                  int reduce, int32_t node);

/* ---------------------------------------------------------------------------------------------
 * passes/merge.c: the end of fuse (pass_fuse calls these in this order)
 * ------------------------------------------------------------------------------------------- */

/* Merges adjacent nests over the same space: values forwarded instead of read back; stores join
 * a following reduction. */
void merge_adjacent(plan *p);
/* Moves each nest of assignments up to right after the last nest that writes what it reads,
 * when no nest in between reads the entry value of a tensor it assigns. */
void merge_schedule_assigns(plan *p);
/* Drops stores into temporaries that no nest reads any more. */
void merge_drop_dead_stores(plan *p);

/* ---------------------------------------------------------------------------------------------
 * passes/conv.c: convolution and pooling nests
 * ------------------------------------------------------------------------------------------- */

/* The plan of a convolution's or pooling's nest (nest.win), which runs loops of its own
 * (emit/emit_conv.c). Its outs[0] stores the op's value, an FX_OP of the op over its operands
 * (which says what the nest reads), into the op's buffer; outs[1..] are element-wise outputs
 * absorbed into that store (pass_conv), reading the value through the view outs[0] writes. */
typedef struct wplan {
    int32_t node;               /* the convolution or pooling */
    const ir_window *win;
    fx *x;                      /* the input: an expression over [N, C, d..] */
    int64_t N, C, K, G;         /* batch, input and output channels (pools: K = C), groups */
    int64_t d[IR_MAX_SPATIAL], o[IR_MAX_SPATIAL]; /* input and output extents (1 past nsp) */
    /* convolution: the filters, and the direct form (see conv.c) */
    int32_t wbuf;               /* the filters: a dense [K, C/G, f..] buffer from woff */
    int64_t woff;
    int64_t taps;               /* taps of the window, row-major over the filters' axes */
    /* per spatial axis and tap along it, its part of where a tap reads in a channel's planes
     * (tap t reads at conv_tapoff(w, t), the sum over the axes); maxoff the most of any tap */
    int64_t *axoff[IR_MAX_SPATIAL];
    int64_t maxoff;
    int nph[IR_MAX_SPATIAL];    /* the stride phases the taps use along each axis */
    int64_t *ph[IR_MAX_SPATIAL];
    int64_t hq[IR_MAX_SPATIAL]; /* a plane's extents */
    int64_t qst[IR_MAX_SPATIAL];/* position q of output o: sum o_i * qst[i] */
    int64_t plane, cstride;     /* elements of a plane, of one channel's planes */
    int64_t q;                  /* positions computed per image and group (margins too) */
    int64_t p;                  /* output positions per image */
    bool in_place;              /* x is a dense buffer read in place (xbuf from xoff) */
    int32_t xbuf;
    int64_t xoff;
    /* the register tile: ti rows by nv vectors of lanes (vb bytes): rows are output channels
     * and lanes positions, or with by_channels, rows are positions and lanes channels (the
     * filters then packed in the workspace at packoff: per group and tile of tj channels, a
     * panel [C/G x taps][tj]; kpad is the group's channels rounded up to whole tiles; with
     * prepacked, the filters are a constant packed so ahead of time: prepack.c) */
    bool by_channels, prepacked;
    int ti, nv, lanes, vb;
    int64_t kpad, packoff;
    /* tiles of positions along each output row (2-D, positions in lanes, not in place): row r's
     * positions from r * qst[0] in pieces of a tile's lanes, the last of its vectors that cover
     * the rest of the row (conv.c, row_tiles) */
    bool row_tiles;
    bool filters_outer;         /* tiles of positions run innermost (see emit_conv.c) */
    bool images_inner;          /* by_channels: and the images inside each tile of channels */
    /* a group's planes fit in CONV_LOCAL_PLANES bytes and there are groups enough for the
     * threads (depthwise, small grouped convolutions, small images in a batch): each image
     * and group copies its planes into a local array of its thread just before its tiles,
     * which read them from the cache (no copy of the whole input in the workspace) */
    bool local_planes;
    /* the dense form (positions in lanes, conv.c, make_dense): the copy holds, per image,
     * input channel and tap, the values that tap reads for every output position, a run of p
     * (no planes' margins: 49 positions of a 7x7 output in 49 lanes, not 61); the planes'
     * fields then describe those runs (hq = o, plane = p, cstride = taps * p). With tail > 0 the
     * tiles compute the first q = p - tail positions and the last `tail` are sums with the
     * input channels and taps in the lanes, from their own copy [tail][C x taps] at tailoff in
     * the workspace (one image, one group) */
    bool dense;
    int64_t tail, tailoff;
    /* dense: the sum runs over blocks of cblock input channels (each block's copy stays in the
     * cache for every tile), the tiles' partial sums in the workspace at partoff. With splits
     * > 1 (OpenMP) the input channels are split into that many chunks, run in parallel, each
     * copying its channels and summing every tile over them into a set of partial sums of its
     * own (setsize elements from partoff + chunk * setsize); the tiles then add the sets in
     * order and store */
    int64_t cblock, partoff, splits, setsize;
} wplan;

/* The most taps along one axis of a convolution's window: the generated code holds a table of
 * each axis' tap offsets (a window of 2^40 taps would be a table of 8 TiB). */
#define CONV_MAX_WINDOW 65536

/* Where tap t (row-major over the window's axes) reads in a channel's planes. */
int64_t conv_tapoff(const wplan *w, int64_t t);
/* The tiles of positions of one image and group (positions in lanes): along the planes, or
 * with row_tiles the output rows times the pieces of a row. */
int64_t conv_position_tiles(const wplan *w);
/* The vectors of the last tile of positions of the planes, or of each row's last piece with
 * row_tiles, when they are fewer than a tile's and that saves a hundredth of the vectors or
 * more (the kernel has a fast path for them); else 0. */
int conv_edge_vectors(const wplan *w);

/* The most bytes of a group's planes that its tiles read from a local array (conv.c). */
#define CONV_LOCAL_PLANES (64 * 1024)

/* A 1x1 convolution with nothing to pad or skip, whose input x and filters are dense in
 * memory, is a product of matrices per image: out[n, k, p] = sum over c of w[k, c] * x[n, c, p].
 * When its positions fill the columns of tile.c's tiles well (at most a quarter of them wasted:
 * 7x7 and 14x14 waste 23% of 64-wide tiles and still run faster so than in the direct form),
 * its value over [N, K, positions.., C] (C to fold, batch_dot's form) with that space's
 * extents in dims (the node's rank + 1); else NULL (also when out of memory: p->status says
 * so). (fuse.c) */
fx *conv_as_product(plan *p, int32_t node, const fx *x, const fx *filters, int64_t *dims);
/* Makes ne, a nest over node's output that stores its value, a convolution or pooling nest:
 * x is the input's expression, filters (convolution) a dense load of the filters. */
bool conv_plan(plan *p, nest *ne, int32_t node, fx *x, fx *filters);
/* Absorbs into each convolution or pooling nest the element-wise nest after it that reads its
 * value only where it is written. */
int pass_conv(plan *p);
/* One line of --dump-after on a convolution's or pool's plan. */
void conv_describe(buf *b, const nest *ne);

/* ---------------------------------------------------------------------------------------------
 * passes/prepack.c: constants packed ahead of time
 * ------------------------------------------------------------------------------------------- */

/* A constant that one nest alone reads, and reads as panels it would otherwise pack on every
 * call, is stored as those panels: its buffer gets a const_pack (and count becomes
 * const_pack_count), and whoever gives the constant's data (the AOT file's tables,
 * nest_build_so's linked data, the JIT's copies) makes it with const_pack_data from the
 * node's. Two kinds:
 *   - CONST_PACK_CONV: a convolution's filters [K, C/G, f..] for its tiles with channels in
 *     lanes: per group and tile of tj output channels, a panel [C/G x taps][tj], zeros past
 *     the group's channels (kpad: the group's channels rounded up to whole tiles);
 *   - CONST_PACK_PANELS: the second factor of a tiled product, a view of the constant (element
 *     (k, j) at off + k * stk + j * stj), K x J: per block of tj columns a panel [K][tj], zeros
 *     past J. */
enum { CONST_PACK_NONE, CONST_PACK_CONV, CONST_PACK_PANELS };
typedef struct const_pack {
    int kind;
    int64_t tj;        /* the panels' columns: a tile's output channels, or its columns */
    int64_t K, G, ct, kpad; /* CONV: output channels, groups, C/G x taps, padded channels */
    int64_t off, stk, stj, J; /* PANELS: the view (K its rows), its columns */
} const_pack;
int64_t const_pack_count(const const_pack *pk);
/* dst (const_pack_count elements of esize bytes) from src, the node's data. */
void const_pack_data(const const_pack *pk, size_t esize, const void *src, void *dst);
/* The same into a malloc'd copy (the caller frees it), or NULL when out of memory. */
void *const_pack_copy(const const_pack *pk, size_t esize, const void *src);
/* The comment line above constant `name` in the C: how it is packed. */
void const_pack_describe(buf *b, const char *name, const const_pack *pk);
/* Whether buffer b read from element off is a whole constant not packed yet (what a
 * convolution's filters must be to be packed ahead of time). */
bool prepack_whole(const plan *p, int32_t b, int64_t off);
/* Packs the filters of convolution nest ne (channels in lanes) ahead of time when they are a
 * whole constant that only ne reads (readers: nest_readers' counts); sets its plan's
 * prepacked. False when out of memory. (conv.c) */
bool prepack_conv(plan *p, nest *ne, const int32_t *readers);
/* Packs tiled product n's second factor ahead of time when it is a view of a constant that only
 * n reads, the same for every product of a batch, with the rows, sum and columns known; sets
 * n->b_packed. False when it does not (or out of memory: p->status). (tile.c) */
bool prepack_panels(plan *p, nest *n, const int32_t *readers);

/* ---------------------------------------------------------------------------------------------
 * passes/rows.c: outer-loop fusion
 * ------------------------------------------------------------------------------------------- */

/* Groups consecutive nests that proceed row by row under one outer loop, and shrinks the
 * temporaries that live only inside a group to one row. */
int pass_rows(plan *p);

/* ---------------------------------------------------------------------------------------------
 * passes/flatten.c: loop order and flattening
 * ------------------------------------------------------------------------------------------- */

/* Orders each nest's axes (the axis with the smallest strides innermost) and merges adjacent
 * axes whose strides agree for every access; drops axes of extent 1. The shared outer axis of a
 * row group stays where it is. */
int pass_flatten(plan *p);
/* Reorders a nest's axes: new axis k is old axis order[k] (dims, folded axes, every output's
 * strides and expressions). False when out of memory. */
bool nest_permute(plan *p, nest *n, const uint8_t *order);

/* ---------------------------------------------------------------------------------------------
 * passes/tile.c: register tiles for matrix products
 * ------------------------------------------------------------------------------------------- */

/* Half the bytes of a second-level cache (1 MiB on Intel's server cores since Skylake and AMD's
 * since Zen 4): a packed panel of filters past it streams from the third level, beside the
 * planes it is multiplied by. One within it costs nothing more: 512 channels' 3x3 filters,
 * 590 KB a panel of 32 channels, ran at 197 GFLOP/s on Zen 5 (batch 8, one core), above
 * the 4 x 64 tiles with positions in lanes. */
#define L2_HALF (512 * 1024)
/* A tiled batch of products packs its panels into a local array of each thread (pack -1) when
 * they take at most this many bytes (libomp's and glibc's threads have megabytes of stack). */
#define TILE_LOCAL_PANEL (64 * 1024)
/* A product with at most this many blocks of rows reads its second factor in place when that
 * is a load of unit stride along the columns: a packed panel would serve too few blocks to pay
 * for its copy (a dense layer at a batch of 16 copied its whole weight on every call). */
#define TILE_DIRECT_BLOCKS 8
/* A product runs its blocks along the result's rows, its second factor packed whole first,
 * when that packing takes at most TILE_WHOLE_PANEL bytes (it stays in the second-level cache
 * while every block of rows reads it) and the result, with the element-wise outputs absorbed
 * into its stores, takes TILE_ROWS_RESULT bytes or more (it streams from beyond the caches). */
#define TILE_WHOLE_PANEL (256 * 1024)
#define TILE_ROWS_RESULT (1 << 20)
/* A batch of products that share their second factor packs it once for all of them when the
 * packing takes at most this many bytes of the workspace (a 1x1 convolution's filters: 1 MiB
 * for 1024 to 256 channels); past it, once per product into one panel. */
#define TILE_SHARED_PANEL (16 << 20)
/* A shared B's products sum over k in blocks (k_block) whose panel of one block of columns
 * takes this many bytes: it stays in the first-level cache while a group's blocks of rows read
 * it, and their A's block stays in the second (1x1 1024 -> 256 at 14x14, 8 images, one core:
 * each image's 784 KB input had been read once per block of 64 columns, from beyond it); so
 * do the tiles of a block of several rows (emit_tile.c). */
#define TILE_K_BLOCK_BYTES (32 * 1024)
/* The values of k in such a block for n's tiles. */
int64_t tile_k_block_len(const nest *n);
/* Products and convolutions run on several cores (with OpenMP) from this many multiply-adds
 * (about 80 us of one core at 100 GFLOP/s): a parallel region costs microseconds of a quiet
 * machine, and tens when the cores are shared; the smaller products of a training step (the
 * digits MLP's, 2^21 multiply-adds at most) lost more to it than they gained. */
#define PAR_MIN_MACS ((int64_t)1 << 22)
/* Tiles the [batch..., I, K, J] nests of contracting dots and batch_dots (the result block in
 * registers, B packed into panels) and absorbs the element-wise nest that follows into the
 * tile's store. */
int pass_tile(plan *p);
/* The register tile (rows ti, columns tj) for an element type and a vector width in bytes. */
void tile_shape(int etype, int vector_bytes, int *ti, int *tj);
/* The register tile of a product with fewer columns than tile_shape's: nv vectors of columns
 * (nv below tile_shape's) and as many rows as the accumulators allow (16 x 16 floats with
 * 512-bit vectors). nv is 0 for tile_shape's own. */
void tile_thin_shape(int etype, int vector_bytes, int nv, int *ti, int *tj);
/* The vectors of columns of tile_shape's tile, and the thin tile for J columns (0: none). */
int tile_vectors(int etype, int vector_bytes);
int tile_thin_vectors(int etype, int vector_bytes, int64_t J);
/* The vector width in bytes of the CPU the code is compiled for (opts->march): 64 with
 * AVX-512, 32 with AVX2, 16 for baseline x86-64 and x86-64-v2. */
int tile_vector_bytes(const nest_options *o);
/* Whether a tiled [I, K, J] product over symbolic rows computes the whole product row by row
 * (each row's accumulators kept across k, the rows in a local array of tile_i x J) when the
 * rows are fewer than a tile's: no batch, and that array within TILE_LOCAL_PANEL bytes. */
bool tile_few_rows(const nest *n);
/* Whether a tiled product's result is stored transposed: its rows I are the result's
 * contiguous axis (tile.c computed `g . w^T` as `w . g^T`), so a block's columns leave as runs
 * down the result's columns. */
bool tile_transposed(const nest *n);

/* ---------------------------------------------------------------------------------------------
 * passes/inplace.c: assignments of state in place
 * ------------------------------------------------------------------------------------------- */

/* Makes each assignment's store write the state tensor itself when no later read of the entry
 * value can see it (the update w = w - lr * v runs in place), ordering the stores of a nest so
 * that every read of a tensor comes before its store; otherwise the store goes to a temporary
 * that a nest at the end copies into the tensor. */
int pass_inplace(plan *p);

/* ---------------------------------------------------------------------------------------------
 * passes/memplan.c: the workspace
 * ------------------------------------------------------------------------------------------- */

/* Places the live temporaries in one workspace by liveness; sets p->ws_size. A temporary of a
 * symbolic size (count a dim handle) gets offset -1: the generated code places those after
 * the rest at run time, one after another (emit_c.c). */
int pass_memplan(plan *p);

/* ---------------------------------------------------------------------------------------------
 * emit/: C text (emit_c.c the functions, emit_loops.c the loop nests, emit_text.c the
 * expressions and names, emit_dims.c the C of symbolic dims; emit/emit.h is what they share)
 * ------------------------------------------------------------------------------------------- */

typedef enum emit_mode {
    EMIT_AOT, /* self-contained: constants are data in the C file */
    EMIT_JIT, /* constants come through the global array nest_consts_NAME, set after loading */
} emit_mode;

/* Appends the C of one planned function (its entry points) to b. `helpers` accumulates the
 * static helper functions the code needs (bits of emit_helper). */
void emit_function(buf *b, const plan *p, emit_mode mode, uint64_t *helpers);
/* The preamble: includes (for the JIT, the few declarations the code needs) and the helpers in
 * the mask. */
void emit_preamble(buf *b, uint64_t helpers, emit_mode mode);
/* Constants above EMIT_DATA_BYTES are not C text ahead of time: the C declares them extern
 * (nest_const_NAME_K, K their number) and nest_build_so links their bytes in as data. */
#define EMIT_DATA_BYTES 64
bool emit_const_is_data(int64_t count, int etype);
/* "static const T name[count] = {...};": count elements of etype at data, as exact literals. */
void emit_table(buf *b, const char *name, int etype, const void *data, int64_t count);
/* The declarations of one function's entry points, with shapes in comments. */
void emit_header_decls(buf *b, const plan *p);
/* Whether a plan with symbolic dims needs a workspace (static or placed at run time). */
bool emit_dims_have_ws(const plan *p);
/* emit_state.c: the C of a module's state (the NAME_state type; in the .c file, its table and
 * the functions NAME_state_new ... NAME_state_load; in the header, their declarations) before
 * the functions that take it. */
void emit_state(buf *b, const nest_module *m, emit_mode mode, bool header);
/* Whether a function called `name` would clash with the state entry points of module m. */
bool emit_state_name_taken(const nest_module *m, const char *name);

/* ---------------------------------------------------------------------------------------------
 * pipeline.c: the passes in order
 * ------------------------------------------------------------------------------------------- */

/* Plans f with the passes in order (after a pass named dump_after, if not NULL, its state is
 * printed into *dump). Returns NEST_OK or an error recorded on f. */
int pipeline_plan(plan *p, nest_function *f, arena *a, const nest_options *opts,
                  const char *dump_after, buf *dump);
/* The passes, in order, as nestc --dump-after names them. */
#define PIPELINE_PASSES "fuse, conv, rows, flatten, tile, inplace, memplan"
bool pipeline_has_pass(const char *name);
/* Prints a plan (nests, their outputs and expressions) for --dump-after. */
void plan_dump(buf *b, const plan *p);
/* What the JIT needs besides the C of a function: its workspace and the graph nodes of its
 * constants, in the order of nest_consts_NAME (malloc'd array), nodes of const_fn: the
 * function itself, or the copy its plan was made of (outer.c, collapse.c), which lives until
 * the function is planned again or freed. */
typedef struct jit_info {
    int64_t ws_size;
    bool ws_dims; /* symbolic dims: whether anything is placed in the workspace at some sizes */
    int32_t nconsts;
    int32_t *const_nodes;
    const_pack *const_packs; /* per constant, how its data are packed (CONST_PACK_NONE: as
                              * they are) */
    const struct nest_function *const_fn;
} jit_info;
/* The elements of constant i as the code reads them (packed or not). */
int64_t pipeline_const_count(const jit_info *info, int32_t i);
/* The data of constant i as the code reads them, size in *bytes: its node's, or packed into a
 * malloc'd copy left in *owned (the caller frees it; NULL otherwise). NULL when out of memory. */
const void *pipeline_const_data(const jit_info *info, int32_t i, size_t *bytes, void **owned);
/* Frees what pipeline_consts or pipeline_emit_jit left in info. */
void pipeline_info_free(jit_info *info);
/* The module whose state the C of fns declares: mod if it has state, else the first of the
 * functions' modules with state, or NULL. */
const nest_module *pipeline_state_module(const nest_module *mod, nest_function *const *fns, int n);
/* The graph nodes of f's constants in their numbering (info->const_nodes, malloc'd), as
 * pipeline_emit_jit gives them. Returns NEST_OK or the error on f. */
int pipeline_consts(nest_function *f, const nest_options *opts, jit_info *info);
/* The C of one function for the JIT: constants come through nest_consts_NAME. Malloc'd, or NULL
 * with the error on f. */
char *pipeline_emit_jit(nest_function *f, const nest_options *opts, jit_info *info);
/* The plans of n functions after the pass named `pass` (fuse, flatten, memplan); NULL for an
 * unknown pass or an error (on the function). */
char *pipeline_dump(nest_function *const *fns, int n, const nest_options *opts, const char *pass);
/* A Graphviz digraph of n functions with each loop nest's ops drawn as a cluster and the
 * temporaries it stores marked (nest_print_dot with these options; see print_dot_function).
 * NULL with the error on the function at fault. */
char *pipeline_dot(nest_function *const *fns, int n, const nest_options *opts);

#endif /* NEST_INTERNAL_H */
