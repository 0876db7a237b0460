/*
 * onnx.h - what the ONNX importer's files share: onnx_read.c reads the protobuf, checks the
 * graph, decodes tensors and walks the nodes in order; onnx_ops.c holds what the lowerings share
 * and the table of operators (onnx_ops.def); onnx_math.c, onnx_shape.c, onnx_nn.c and
 * onnx_conv.c lower each operator to nest ops. The protobuf structs come from onnx.proto through protoc-c
 * (build/gen/onnx.pb-c.h).
 */
#ifndef NEST_ONNX_H
#define NEST_ONNX_H

#include "internal.h"
#include "onnx.pb-c.h"

/* The opsets of the default domain the importer reads (7 to 17 are what exporters write; the
 * older ones load where the operators meant the same, without the legacy broadcast attribute). */
#define OX_MIN_OPSET 1
#define OX_MAX_OPSET 17

/* A node whose inputs are all known is evaluated at import while the values it makes take at
 * most this many bytes together; a larger one is computed at run time instead (a weight's
 * transpose, say), so that import never holds more than this for one node. */
#define OX_FOLD_BYTES ((int64_t)1 << 28)

/* A tensor known at import time: an initializer, a Constant, or the value of a node whose
 * inputs were all known (folded). */
typedef struct ox_tensor {
    int etype;      /* nest_type */
    int rank;
    int64_t shape[NEST_MAX_RANK];
    int64_t count;  /* elements held: 1 (the value fills the shape) or the shape's product */
    void *data;     /* count elements of etype */
    bool dims;      /* integers that may be the function's symbolic dims (a Shape's): only
                     * moved on or computed with at import (onnx_read.c's dims_use), or a
                     * Reshape's shape */
} ox_tensor;

/* One ONNX value name of the graph. */
typedef struct ox_entry {
    const char *name;
    const Onnx__TensorProto *init; /* an initializer not decoded yet */
    ox_tensor *k;                  /* the value, when known at import */
    nest_value v;                  /* the value in the function, NEST_NONE until made */
    bool defined;
    int32_t uses;                  /* node inputs and graph outputs that name it */
    int32_t user;                  /* the index of a node that uses it, or -1 */
} ox_entry;

typedef struct ox_model ox_model;

/* The lowering of one node. */
typedef struct ox {
    ox_model *m;
    nest_function *f;              /* where ops are built: the function, or a scratch one */
    const Onnx__NodeProto *node;
    int64_t opset;
    int nin, nout;
    ox_entry **in;                 /* per input: its entry, NULL for an absent optional one */
    nest_value *inv;               /* per input: its value in f once made */
    nest_value *out;               /* per output: set by the lowering */
    int32_t absorb;                /* a later node this one computes too (ox_absorb), or -1 */
    bool dims;                     /* the outputs hold symbolic dims (ox_tensor's dims); an
                                    * arithmetic lowering computes them (dims_use) */
} ox;

/* ---- onnx_read.c ---- */

/* Records an error on the node being lowered ("node 3 'conv1' (Conv, opset 13): ...") and
 * returns the status. */
int ox_err(ox *c, int status, const char *fmt, ...) FORMAT(3, 4);
/* Whether input i is given (optional inputs may be absent or named ""). */
bool ox_has(const ox *c, int i);
/* Input i as a value of c->f (a known tensor becomes a constant there); NEST_NONE with the
 * error recorded when absent. */
nest_value ox_in(ox *c, int i);
/* The function whose table holds the handles of the symbolic dims in known tensors (the
 * model's, also while c->f is a scratch one). */
nest_function *ox_dims_fn(const ox *c);
/* Input i's value known at import, or NULL with an error saying that it must be. */
const ox_tensor *ox_known(ox *c, int i);
/* Input i's value when it is known at import, else NULL (no error: for what only helps). */
const ox_tensor *ox_peek(ox *c, int i);
/* The value of an ONNX name when it is known at import, else NULL (no error). */
const ox_tensor *ox_peek_name(ox *c, const char *name);
/* The one node that uses output `out` of this node, when nothing else does (a graph output
 * counts as a use): with *index its position in the graph. NULL otherwise. */
const Onnx__NodeProto *ox_sole_user(ox *c, int out, int32_t *index);
/* The node at `index` (a sole user of this node's first output) is computed by this node: its
 * first output becomes this node's first output, and it is not lowered itself. Only when
 * building the function (c->f is the model's). */
void ox_absorb(ox *c, int32_t index);
/* A known tensor of `etype` and shape in the import's memory (contents zero), or NULL with the
 * error. */
ox_tensor *ox_tensor_new(ox *c, int etype, int rank, const int64_t *shape);
/* A known tensor as a constant of c->f, named after `onnx_name` in the function. */
nest_value ox_constant(ox *c, const ox_tensor *t, const char *onnx_name);
/* The element i of a known tensor as an integer or a double (count 1 fills). */
int64_t ox_int_at(const ox_tensor *t, int64_t i);
double ox_float_at(const ox_tensor *t, int64_t i);
/* Decodes an attribute's tensor (Constant's value, ConstantOfShape's value); NULL with the
 * error recorded. */
ox_tensor *ox_decode(ox *c, const Onnx__TensorProto *t, const char *what);
/* Attributes: the attribute named `name` of the node, or NULL. */
const Onnx__AttributeProto *ox_attr(const ox *c, const char *name);
int64_t ox_attr_int(const ox *c, const char *name, int64_t dflt);
float ox_attr_float(const ox *c, const char *name, float dflt);
/* The string attribute (or dflt), NUL-terminated by the reader. */
const char *ox_attr_str(const ox *c, const char *name, const char *dflt);
/* An ints attribute: its count, -1 when absent, -2 (with the error) when above max. */
int ox_attr_ints(ox *c, const char *name, int64_t *out, int max);
/* A known input's integers (at most max, else an error): its count, or -1 with the error. */
int ox_known_ints(ox *c, int i, int64_t *out, int max);

/* ---- onnx_ops.c ---- */

/* The value v of the function being built. */
static inline const ir_node *ox_node(const ox *c, nest_value v) { return &c->f->nodes[v]; }
static inline int ox_type(const ox *c, nest_value v) { return ox_node(c, v)->etype; }
static inline int ox_rank(const ox *c, nest_value v) { return ox_node(c, v)->rank; }
static inline const int64_t *ox_shape(const ox *c, nest_value v) { return ox_node(c, v)->shape; }
/* The product of a shape. */
static inline int64_t ox_count(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

/* Whether a value's shape names a dim; if so, an error on the node saying that `what` needs
 * plain sizes (naming the dim and --dim). */
bool ox_symbolic(ox *c, nest_value v, const char *what);

/* Returns NEST_ERR_ARG from a lowering when a value could not be made (the error is on c->f
 * or the model). */
#define OX_CHECK(v)                                                                            \
    do {                                                                                       \
        if ((v) == NEST_NONE)                                                                  \
            return NEST_ERR_ARG;                                                               \
    } while (0)

/* Constants filling a shape with one value: of a type and shape, or like v. */
nest_value ox_full(ox *c, int etype, double value, int rank, const int64_t *shape);
nest_value ox_full_like(ox *c, nest_value v, double value);
/* An axis in [-rank, rank) made positive; -1 with the error when out of range. */
int ox_axis(ox *c, int64_t axis, int rank, const char *what);
/* Views that are no-ops when nothing changes (then v itself): to a shape, by an axis order, one
 * axis sliced. Each passes NEST_NONE through. */
nest_value ox_reshape(ox *c, nest_value v, int rank, const int64_t *shape);
nest_value ox_transpose(ox *c, nest_value v, const int64_t *perm);
nest_value ox_slice_axis(ox *c, nest_value x, int axis, int64_t lo, int64_t hi, int64_t step);
/* v broadcast to `shape` by numpy's rule: a reshape drops the stretched dims of extent 1, then
 * an explicit broadcast. */
nest_value ox_bcast_to(ox *c, nest_value v, int rank, const int64_t *shape);
/* Inputs 0..n-1 into v, broadcast to their common shape; NEST_OK or the error. */
int ox_inputs_bcast(ox *c, int n, nest_value *v);
/* The axes of Squeeze, Unsqueeze and the reductions: the attribute before `input_opset`, the
 * input `index` from it. Returns the count, -1 when not given, -2 on an error. */
int ox_axes_arg(ox *c, int input_opset, int index, int64_t *axes);

/* ---- onnx_nn.c: what the convolutions share with the products ---- */

/* The inference BatchNormalization that alone uses this node's first output, with known
 * statistics: its index and its coefficients y = x * a + b for n channels (double, the import's
 * memory). NULL when there is none. */
const Onnx__NodeProto *ox_bn_after(ox *c, int32_t *index, double **a, double **b, int64_t *n);
/* Element i of a known float or double tensor set to v. */
void ox_store(ox_tensor *t, int64_t i, double v);
/* v of shape [C] as the channel axis 1 of x's shape (broadcast); NEST_NONE with the error when
 * x has rank below 2 or v is not a vector. */
nest_value ox_per_channel(ox *c, nest_value v, nest_value x);

typedef int (*ox_lower_fn)(ox *c);
/* The lowering of an operator of the default domain, or NULL if it is not supported. */
ox_lower_fn ox_lookup(const char *op_type);
/* Appends the supported operators, comma-separated. */
void ox_supported(buf *b);

/* ---- onnx_math.c, onnx_shape.c, onnx_nn.c, onnx_conv.c: one lowering per operator (onnx_ops.def) ---- */

/* Reads the node's inputs and attributes, builds its outputs in c->out; NEST_OK or the error
 * recorded on the node. */
#define OX(name, fn) int ox_op_##fn(ox *c);
#include "onnx_ops.def"
#undef OX

#endif /* NEST_ONNX_H */
