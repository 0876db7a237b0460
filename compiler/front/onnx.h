/*
 * onnx.h - what the ONNX importer's two files share: onnx_read.c reads the protobuf, checks the
 * graph, decodes tensors and walks the nodes in order; onnx_ops.c lowers each operator to nest
 * ops. The protobuf structs come from onnx.proto through protoc-c (build/gen/onnx.pb-c.h).
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
} ox_tensor;

/* One ONNX value name of the graph. */
typedef struct ox_entry {
    const char *name;
    const Onnx__TensorProto *init; /* an initializer not decoded yet */
    ox_tensor *k;                  /* the value, when known at import */
    nest_value v;                  /* the value in the function, NEST_NONE until made */
    bool defined;
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
/* Input i's value known at import, or NULL with an error saying that it must be. */
const ox_tensor *ox_known(ox *c, int i);
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

typedef int (*ox_lower_fn)(ox *c);
/* The lowering of an operator of the default domain, or NULL if it is not supported. */
ox_lower_fn ox_lookup(const char *op_type);
/* Appends the supported operators, comma-separated. */
void ox_supported(buf *b);
/* Whether the operator has a value that cannot be known at import (none of the supported
 * ones: each is a function of its inputs). */
bool ox_foldable(const char *op_type);

#endif /* NEST_ONNX_H */
