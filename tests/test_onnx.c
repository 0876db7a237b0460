/*
 * test_onnx.c - the ONNX importer on models built here with protobuf-c: values against closed
 * forms, weights as data in the AOT .so, external data, and the errors of bad files (garbage,
 * truncation, unknown opsets and operators, missing inputs, cycles, named dims, hostile paths).
 * The operators themselves are tested by the ONNX backend node tests (tests/onnx_cases.c). The
 * clean-up after import (ir_prune) is tested here too.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "internal.h"
#include "onnx.pb-c.h"

/* ---- building models ---- */

typedef struct model {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto nodes[8], *pnodes[8];
    Onnx__ValueInfoProto vin[4], vout[4], *pin[4], *pout[4];
    Onnx__TypeProto types[8];
    Onnx__TypeProto__Tensor tt[8];
    Onnx__TensorShapeProto shapes[8];
    Onnx__TensorShapeProto__Dimension dims[8][4], *pdims[8][4];
    Onnx__TensorProto inits[8], *pinits[8];
    int64_t idims[8][4];
    char *ins[8][6], *outs[8][2];
    int ntypes;
} model;

static void model_init(model *md, int64_t opset)
{
    memset(md, 0, sizeof *md);
    md->m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    md->g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    md->opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    md->opset.domain = "";
    md->opset.has_version = 1;
    md->opset.version = opset;
    md->opsets[0] = &md->opset;
    md->m.n_opset_import = 1;
    md->m.opset_import = md->opsets;
    md->m.has_ir_version = 1;
    md->m.ir_version = 8;
    md->m.graph = &md->g;
    md->g.name = "g";
    md->g.node = md->pnodes;
    md->g.input = md->pin;
    md->g.output = md->pout;
    md->g.initializer = md->pinits;
}

/* A float tensor type with up to 4 dims; a negative dim is the named dim "N". */
static Onnx__TypeProto *ftype(model *md, int rank, const int64_t *shape)
{
    int k = md->ntypes++;
    Onnx__TypeProto *t = &md->types[k];
    *t = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    md->tt[k] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    md->tt[k].has_elem_type = 1;
    md->tt[k].elem_type = 1;
    md->shapes[k] = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = &md->dims[k][i];
        *d = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (shape[i] < 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "N";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = shape[i];
        }
        md->pdims[k][i] = d;
    }
    md->shapes[k].n_dim = (size_t)rank;
    md->shapes[k].dim = md->pdims[k];
    md->tt[k].shape = &md->shapes[k];
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = &md->tt[k];
    return t;
}

static void input(model *md, char *name, int rank, const int64_t *shape)
{
    Onnx__ValueInfoProto *v = &md->vin[md->g.n_input];
    *v = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    v->name = name;
    v->type = ftype(md, rank, shape);
    md->pin[md->g.n_input++] = v;
}

static void output(model *md, char *name)
{
    Onnx__ValueInfoProto *v = &md->vout[md->g.n_output];
    *v = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    v->name = name;
    md->pout[md->g.n_output++] = v;
}

static Onnx__NodeProto *node(model *md, char *op, char *in0, char *in1, char *out)
{
    int k = (int)md->g.n_node++;
    Onnx__NodeProto *n = &md->nodes[k];
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->op_type = op;
    n->name = op;
    md->ins[k][0] = in0;
    md->ins[k][1] = in1;
    n->n_input = in1 ? 2 : 1;
    n->input = md->ins[k];
    md->outs[k][0] = out;
    n->n_output = 1;
    n->output = md->outs[k];
    md->pnodes[k] = n;
    return n;
}

static Onnx__TensorProto *init(model *md, char *name, int rank, const int64_t *shape,
                               const float *data)
{
    Onnx__TensorProto *t = &md->inits[md->g.n_initializer];
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    t->name = name;
    t->has_data_type = 1;
    t->data_type = 1;
    t->n_dims = (size_t)rank;
    if (rank)
        memcpy(md->idims[md->g.n_initializer], shape, (size_t)rank * sizeof *shape);
    t->dims = md->idims[md->g.n_initializer];
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    if (data) {
        t->has_raw_data = 1;
        t->raw_data.len = (size_t)n * 4;
        t->raw_data.data = (uint8_t *)data;
    }
    md->pinits[md->g.n_initializer++] = t;
    return t;
}

static uint8_t *pack(model *md, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&md->m);
    uint8_t *b = malloc(*len + 1);
    assert_non_null(b);
    onnx__model_proto__pack(&md->m, b);
    return b;
}

static nest_function *import_model(model *md, const nest_onnx_options *o)
{
    size_t len;
    uint8_t *b = pack(md, &len);
    nest_function *f = nest_import_onnx_mem(b, len, o);
    free(b);
    assert_non_null(f);
    return f;
}

/* y = relu(x + w): x f32[2,3] (or [N,3]), w an initializer */
static const float W6[6] = {1, -2, 3, -4, 5, -6};

static void add_relu(model *md, int64_t opset, int64_t batch)
{
    model_init(md, opset);
    input(md, "x.in", 2, (const int64_t[]){batch, 3});
    init(md, "w", 2, (const int64_t[]){2, 3}, W6);
    node(md, "Add", "x.in", "w", "s");
    node(md, "Relu", "s", NULL, "y");
    output(md, "y");
}

static void assert_msg(nest_function *f, int code, const char *part)
{
    if (nest_errcode(f) != code || !strstr(nest_errmsg(f), part))
        fail_msg("expected error %d with '%s', got %d: %s", code, part, nest_errcode(f),
                 nest_errmsg(f));
    assert_true(strncmp(nest_errmsg(f), "<memory>: ", 10) == 0);
    assert_int_equal(nest_result_count(f), 0);
}

/* Importing tests/corpus/onnx/FILE (an input a fuzzer found) fails with code and a message
 * that holds part. */
static void corpus_fails(const char *file, int code, const char *part)
{
    char path[256];
    snprintf(path, sizeof path, "tests/corpus/onnx/%s", file);
    nest_function *f = nest_import_onnx(path, NULL);
    assert_non_null(f);
    if (nest_errcode(f) != code || !strstr(nest_errmsg(f), part))
        fail_msg("%s: expected error %d with '%s', got %d: %s", file, code, part,
                 nest_errcode(f), nest_errmsg(f));
    nest_function_free(f);
}

/* ---- tests ---- */

static void test_values(void **state)
{
    (void)state;
    model md;
    add_relu(&md, 13, 2);
    nest_function *f = import_model(&md, NULL);
    assert_int_equal(nest_errcode(f), NEST_OK);
    assert_string_equal(nest_function_name(f), "model");
    assert_int_equal(nest_param_count(f), 1); /* the initializer is no parameter */
    assert_int_equal(nest_result_count(f), 1);
    float x[6] = {0.5f, 0.5f, -3.5f, 1, -6, 7}, want[6], got[6], ref[6];
    for (int i = 0; i < 6; i++)
        want[i] = fmaxf(x[i] + W6[i], 0);
    void *args[1] = {x}, *res[1] = {got}, *res2[1] = {ref};
    assert_ok(f, nest_evaluate(f, args, 1, res2, 1));
    assert_exact(NEST_F32, ref, want, 6);
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    assert_int_equal(nest_call(k, args, 1, res, 1), NEST_OK);
    assert_exact(NEST_F32, got, want, 6);
    nest_kernel_free(k);
    nest_function_free(f);
}

static void test_named_dims(void **state)
{
    (void)state;
    model md;
    add_relu(&md, 13, -1);
    /* N given: plain sizes; N = 2 fits the weight; N = 3 does not broadcast */
    nest_dim d = {"N", 2};
    nest_onnx_options o = {.name = "relu_net", .dims = &d, .ndims = 1};
    nest_function *f = import_model(&md, &o);
    assert_int_equal(nest_errcode(f), NEST_OK);
    assert_string_equal(nest_function_name(f), "relu_net");
    assert_int_equal(nest_value_shape(f, nest_param(f, 0))[0], 2);
    assert_int_equal(nest_dim_count(f), 0);
    nest_function_free(f);
    d.value = 3;
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_TYPE, "node 0 'Add' (Add, opset 13): shapes do not broadcast");
    nest_function_free(f);
    d.value = -1;
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_ARG, "dimension 'N' is given as -1");
    nest_function_free(f);
}

static void int64_init(model *md, char *name, int64_t n, const int64_t *data)
{
    Onnx__TensorProto *t = init(md, name, 1, &n, NULL);
    t->data_type = 7;
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)n * 8;
    t->raw_data.data = (uint8_t *)data;
}

/* A dim_param not given stays symbolic: x f32[N,2,3]; r = relu(x + b) (b [2,3] broadcast);
 * y = Reshape(r, [0,-1]) . m (f32[N,6] by [6,2]) and z = Reshape(r, [-1,3]) (f32[N*2,3]). One
 * kernel at N = 0, 1, 7, 64 against the closed form, and the interpreter at the same sizes. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    static const float B[6] = {0.5f, -1, 0.25f, 2, -0.5f, 1};
    static const float M[12] = {1, -1, 2, 0.5f, -3, 1, 0.25f, 2, -1, -2, 1.5f, 1};
    static const int64_t keep[2] = {0, -1}, rows[2] = {-1, 3};
    model md;
    model_init(&md, 13);
    input(&md, "x", 3, (const int64_t[]){-1, 2, 3});
    init(&md, "b", 2, (const int64_t[]){2, 3}, B);
    init(&md, "m", 2, (const int64_t[]){6, 2}, M);
    int64_init(&md, "keep", 2, keep);
    int64_init(&md, "rows", 2, rows);
    node(&md, "Add", "x", "b", "s");
    node(&md, "Relu", "s", NULL, "r");
    node(&md, "Reshape", "r", "keep", "flat");
    node(&md, "MatMul", "flat", "m", "y");
    node(&md, "Reshape", "r", "rows", "z");
    output(&md, "y");
    output(&md, "z");
    nest_function *f = import_model(&md, NULL);
    assert_ok(f, nest_errcode(f));
    assert_int_equal(nest_dim_count(f), 1);
    assert_string_equal(nest_dim_name(f, 0), "N");
    int64_t n = nest_named_dim(f, "N");
    assert_int_equal(nest_value_shape(f, nest_result(f, 0))[0], n);
    assert_int_equal(nest_value_shape(f, nest_result(f, 1))[0], nest_dim_mul(f, n, 2));
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    static const int64_t sizes[] = {0, 1, 7, 64};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int64_t N = sizes[t];
        float *x = malloc((size_t)N * 24 + 4), *y = malloc((size_t)N * 8 + 4);
        float *z = malloc((size_t)N * 24 + 4), *wy = malloc((size_t)N * 8 + 4);
        float *wz = malloc((size_t)N * 24 + 4), *iy = malloc((size_t)N * 8 + 4);
        float *iz = malloc((size_t)N * 24 + 4);
        for (int64_t i = 0; i < N * 6; i++)
            x[i] = (float)((i * 37) % 11) - 5.5f;
        for (int64_t i = 0; i < N; i++)
            for (int j = 0; j < 2; j++) {
                double acc = 0;
                for (int c = 0; c < 6; c++) {
                    float r = fmaxf(x[i * 6 + c] + B[c], 0);
                    wz[i * 6 + c] = r;
                    acc += (double)r * M[c * 2 + j];
                }
                wy[i * 2 + j] = (float)acc;
            }
        void *args[1] = {x}, *res[2] = {y, z}, *ires[2] = {iy, iz};
        assert_int_equal(nest_call_dims(k, &N, 1, args, 1, res, 2), NEST_OK);
        assert_close(NEST_F32, y, wy, N * 2, 1e-5, 1e-5);
        assert_exact(NEST_F32, z, wz, N * 6);
        assert_ok(f, nest_evaluate_dims(f, &N, 1, args, 1, ires, 2));
        assert_close(NEST_F32, iy, wy, N * 2, 1e-5, 1e-5);
        assert_exact(NEST_F32, iz, wz, N * 6);
        free(x), free(y), free(z), free(wy), free(wz), free(iy), free(iz);
    }
    int64_t bad = -1;
    float one[6] = {0}, out[6];
    void *args[1] = {one}, *res[2] = {out, out + 2};
    assert_int_not_equal(nest_call_dims(k, &bad, 1, args, 1, res, 2), NEST_OK);
    nest_kernel_free(k);
    nest_function_free(f);

    /* --dim N=3 gives plain sizes */
    nest_dim d = {"N", 3};
    nest_onnx_options o = {.dims = &d, .ndims = 1};
    f = import_model(&md, &o);
    assert_ok(f, nest_errcode(f));
    assert_int_equal(nest_dim_count(f), 0);
    assert_int_equal(nest_value_shape(f, nest_result(f, 1))[0], 6);
    nest_function_free(f);

    /* the Shape of a symbolic value is a Reshape's shape (y = x) */
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){-1, 3});
    node(&md, "Shape", "x", NULL, "s");
    node(&md, "Reshape", "x", "s", "y");
    output(&md, "y");
    f = import_model(&md, NULL);
    assert_ok(f, nest_errcode(f));
    assert_int_equal(nest_value_shape(f, nest_result(f, 0))[0], nest_named_dim(f, "N"));
    float x9[9] = {1, -2, 3, -4, 5, -6, 7, -8, 9}, y9[9];
    assert_ok(f, nest_evaluate_dims(f, (const int64_t[]){3}, 1, (void *[]){x9}, 1,
                                    (void *[]){y9}, 1));
    assert_exact(NEST_F32, y9, x9, 9);
    nest_function_free(f);
    /* what would compute with the dims as numbers, other than their arithmetic
     * (test_symbolic_arithmetic), says to give their sizes */
    md.nodes[1].op_type = "Pow";
    md.ins[1][0] = "s";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "node 1 'Reshape' (Pow, opset 13): input 1 ('s') holds the "
               "model's symbolic dims (a Shape's): Pow of them is not computed; give the dims "
               "their sizes (nestc --dim NAME=N)");
    nest_function_free(f);
    md.g.n_node = 1;
    md.vout[0].name = "s";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "graph output 's' holds the model's symbolic dims");
    nest_function_free(f);

    /* a plain dim gathered out of the Shape of a symbolic value is a number (the width of
     * PyTorch's attention, divided by its heads): x f32[N,6], Expand(c, Shape(x)[1] / 2) */
    static const float C3[3] = {1.5f, -2, 4};
    static const int64_t i1[1] = {1}, i2[1] = {2};
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){-1, 6});
    init(&md, "c", 1, (const int64_t[]){3}, C3);
    int64_init(&md, "one", 1, i1);
    int64_init(&md, "two", 1, i2);
    node(&md, "Shape", "x", NULL, "s");
    node(&md, "Gather", "s", "one", "w");
    node(&md, "Div", "w", "two", "h");
    node(&md, "Expand", "c", "h", "e");
    node(&md, "Relu", "x", NULL, "r");
    output(&md, "r");
    output(&md, "e");
    f = import_model(&md, NULL);
    assert_ok(f, nest_errcode(f));
    assert_int_equal(nest_value_shape(f, nest_result(f, 1))[0], 3);
    float x12[12] = {0}, r12[12], e3[3];
    assert_ok(f, nest_evaluate_dims(f, (const int64_t[]){2}, 1, (void *[]){x12}, 1,
                                    (void *[]){r12, e3}, 2));
    assert_exact(NEST_F32, e3, C3, 3);
    nest_function_free(f);

    /* a dim_param that is no identifier becomes one; --dim takes either spelling */
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){-1, 3});
    md.dims[0][0].dim_param = "batch size";
    node(&md, "Relu", "x", NULL, "y");
    output(&md, "y");
    f = import_model(&md, NULL);
    assert_ok(f, nest_errcode(f));
    assert_string_equal(nest_dim_name(f, 0), "batch_size");
    nest_function_free(f);
    nest_dim both[2] = {{"batch size", 4}, {"batch_size", 4}};
    for (int i = 0; i < 2; i++) {
        o = (nest_onnx_options){.dims = &both[i], .ndims = 1};
        f = import_model(&md, &o);
        assert_ok(f, nest_errcode(f));
        assert_int_equal(nest_value_shape(f, nest_param(f, 0))[0], 4);
        nest_function_free(f);
    }
}

/* y = x f32[N,6] reshaped to [N*2,3], the shape computed from the dims at import:
 * Sub(Add(d, s), s) with d = Div(Mul(Shape(x), [4,1]), [2]), s = Shape(x). */
static void dims_model(model *md)
{
    static const int64_t k41[2] = {4, 1}, two[1] = {2};
    model_init(md, 13);
    input(md, "x", 2, (const int64_t[]){-1, 6});
    int64_init(md, "k41", 2, k41);
    int64_init(md, "two", 1, two);
    node(md, "Shape", "x", NULL, "s");
    node(md, "Mul", "s", "k41", "a");
    node(md, "Div", "a", "two", "d");
    node(md, "Add", "d", "s", "e");
    node(md, "Sub", "e", "s", "t");
    node(md, "Reshape", "x", "t", "y");
    output(md, "y");
}

/* Arithmetic on the dims of a Shape (PyTorch's attention reshapes by batch * heads and by
 * length * batch) is computed at import into dim expressions; what is not exact, or not
 * arithmetic on int64, says to give the sizes. */
static void test_symbolic_arithmetic(void **state)
{
    (void)state;
    model md;
    dims_model(&md);
    nest_function *f = import_model(&md, NULL);
    assert_ok(f, nest_errcode(f));
    int64_t n = nest_named_dim(f, "N");
    assert_int_equal(nest_value_rank(f, nest_result(f, 0)), 2);
    assert_int_equal(nest_value_shape(f, nest_result(f, 0))[0], nest_dim_mul(f, n, 2));
    assert_int_equal(nest_value_shape(f, nest_result(f, 0))[1], 3);
    nest_kernel *k = nest_compile(f, NULL);
    assert_non_null(k);
    static const int64_t sizes[] = {0, 1, 7};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int64_t N = sizes[t];
        float x[42], y[42], iy[42];
        for (int64_t i = 0; i < N * 6; i++)
            x[i] = (float)i * 0.5f - 3;
        void *args[1] = {x}, *res[1] = {y}, *ires[1] = {iy};
        assert_int_equal(nest_call_dims(k, &N, 1, args, 1, res, 1), NEST_OK);
        assert_exact(NEST_F32, y, x, N * 6);
        assert_ok(f, nest_evaluate_dims(f, &N, 1, args, 1, ires, 1));
        assert_exact(NEST_F32, iy, x, N * 6);
    }
    nest_kernel_free(k);
    nest_function_free(f);

    /* a division that leaves a remainder, a symbolic divisor, a float operand */
    static const int64_t three[1] = {3};
    md.inits[1].raw_data.data = (uint8_t *)three;
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "node 2 'Div' (Div, opset 13): Div of the model's symbolic dims "
               "(a Shape's): N*4 divided by 3 is not exact; give the dims their sizes (nestc "
               "--dim NAME=N)");
    nest_function_free(f);
    dims_model(&md);
    md.ins[2][1] = "s";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "N*4 divided by N is not computed (the divisor is symbolic)");
    nest_function_free(f);
    static const float half[1] = {0.5f};
    dims_model(&md);
    init(&md, "half", 1, (const int64_t[]){1}, half);
    md.ins[1][1] = "half";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "node 1 'Mul' (Mul, opset 13): input 2 ('half') is f32: Mul of "
               "the model's symbolic dims (a Shape's) is computed in int64 only");
    nest_function_free(f);

    /* x f32[N,S] flattened to [N*S]: the product of two dims, cast to int64 and negated twice */
    static const int64_t i0[1] = {0}, i1[1] = {1};
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){-1, -1});
    md.dims[0][1].dim_param = "S";
    int64_init(&md, "zero", 1, i0);
    int64_init(&md, "one", 1, i1);
    node(&md, "Shape", "x", NULL, "s");
    node(&md, "Gather", "s", "zero", "b");
    node(&md, "Gather", "s", "one", "l");
    node(&md, "Mul", "l", "b", "p");
    Onnx__NodeProto *cast = node(&md, "Cast", "p", NULL, "c");
    node(&md, "Neg", "c", NULL, "m");
    node(&md, "Neg", "m", NULL, "q");
    node(&md, "Reshape", "x", "q", "y");
    output(&md, "y");
    Onnx__AttributeProto to = ONNX__ATTRIBUTE_PROTO__INIT, *pto = &to;
    to.name = "to";
    to.has_i = 1;
    to.i = 7;
    cast->n_attribute = 1;
    cast->attribute = &pto;
    f = import_model(&md, NULL);
    assert_ok(f, nest_errcode(f));
    int64_t N = nest_named_dim(f, "N"), S = nest_named_dim(f, "S");
    assert_int_equal(nest_value_rank(f, nest_result(f, 0)), 1);
    assert_int_equal(nest_value_shape(f, nest_result(f, 0))[0], nest_dim_mul(f, N, S));
    k = nest_compile(f, NULL);
    assert_non_null(k);
    static const int64_t ns[3][2] = {{0, 5}, {1, 1}, {7, 5}};
    for (int t = 0; t < 3; t++) {
        float x[35], y[35], iy[35];
        int64_t count = ns[t][0] * ns[t][1];
        for (int64_t i = 0; i < count; i++)
            x[i] = (float)(i % 9) - 4;
        void *args[1] = {x}, *res[1] = {y}, *ires[1] = {iy};
        assert_int_equal(nest_call_dims(k, ns[t], 2, args, 1, res, 1), NEST_OK);
        assert_exact(NEST_F32, y, x, count);
        assert_ok(f, nest_evaluate_dims(f, ns[t], 2, args, 1, ires, 1));
        assert_exact(NEST_F32, iy, x, count);
    }
    nest_kernel_free(k);
    nest_function_free(f);
    /* a Cast to another type keeps the refusal */
    to.i = 1;
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "node 4 'Cast' (Cast, opset 13): input 1 ('p') holds the "
               "model's symbolic dims (a Shape's): Cast of them is not computed");
    nest_function_free(f);
}

static void test_garbage_and_truncation(void **state)
{
    (void)state;
    nest_function *f = nest_import_onnx_mem("\xff\xff\xff\xff not a model", 18, NULL);
    assert_msg(f, NEST_ERR_SYNTAX, "not an ONNX model");
    nest_function_free(f);
    model md;
    add_relu(&md, 13, 2);
    size_t len;
    uint8_t *b = pack(&md, &len);
    /* every truncation fails cleanly, or (cut at a field boundary) names what is missing */
    for (size_t cut = 0; cut < len; cut++) {
        f = nest_import_onnx_mem(b, cut, NULL);
        assert_non_null(f);
        assert_int_not_equal(nest_errcode(f), NEST_OK);
        assert_true(strncmp(nest_errmsg(f), "<memory>: ", 10) == 0);
        assert_int_equal(nest_result_count(f), 0);
        nest_function_free(f);
    }
    free(b);
}

static void test_opsets(void **state)
{
    (void)state;
    model md;
    add_relu(&md, 99, 2);
    nest_function *f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "opset 99 of the default domain is not supported");
    nest_function_free(f);
    add_relu(&md, 13, 2);
    md.nodes[1].domain = "com.example";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "node 1 'Relu' (Relu of domain com.example, opset 13)");
    nest_function_free(f);
}

static void test_unsupported_operator(void **state)
{
    (void)state;
    model md;
    add_relu(&md, 13, 2);
    md.nodes[1].op_type = "FancyOp";
    nest_function *f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "node 1 'Relu' (FancyOp, opset 13): operator FancyOp is not "
                                "supported; supported: Abs, Add,");
    nest_function_free(f);
}

static void test_graph_errors(void **state)
{
    (void)state;
    model md;
    add_relu(&md, 13, 2);
    md.ins[1][0] = "nope";
    nest_function *f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "node 1 'Relu' (Relu, opset 13): input 'nope' is not a graph "
                                "input, an initializer or the output of a node");
    nest_function_free(f);

    /* a cycle: s = Add(x, y), y = Relu(s) */
    add_relu(&md, 13, 2);
    md.ins[0][1] = "y";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "a cycle in the graph");
    nest_function_free(f);

    /* an output defined twice */
    add_relu(&md, 13, 2);
    md.outs[1][0] = "s";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "output 's' is already defined");
    nest_function_free(f);

    /* an output nothing computes */
    add_relu(&md, 13, 2);
    md.vout[0].name = "z";
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "graph output 'z' is not computed by any node");
    nest_function_free(f);

    /* a weight of the wrong size and one of an unsupported type */
    add_relu(&md, 13, 2);
    md.inits[0].raw_data.len = 20;
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "initializer 'w': 20 bytes of data for 6 elements of float");
    nest_function_free(f);
    add_relu(&md, 13, 2);
    md.inits[0].data_type = 2;
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_TYPE, "element type uint8 is not supported");
    nest_function_free(f);

    /* an attribute out of range */
    add_relu(&md, 13, 2);
    md.nodes[1].op_type = "Softmax";
    Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT, *pa = &a;
    a.name = "axis";
    a.has_i = 1;
    a.i = 5;
    md.nodes[1].n_attribute = 1;
    md.nodes[1].attribute = &pa;
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "(Softmax, opset 13): axis 5 is out of range for rank 2");
    nest_function_free(f);
}

/* Nodes out of order in the file still import (in a topological order). */
static void test_unsorted(void **state)
{
    (void)state;
    model md;
    add_relu(&md, 13, 2);
    Onnx__NodeProto *t = md.pnodes[0];
    md.pnodes[0] = md.pnodes[1];
    md.pnodes[1] = t;
    nest_function *f = import_model(&md, NULL);
    assert_int_equal(nest_errcode(f), NEST_OK);
    nest_function_free(f);
}

/* A graph input given a value at import: y = Reshape(x, shape) with shape a graph input. */
static void test_fixed_inputs(void **state)
{
    (void)state;
    model md;
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){2, 3});
    input(&md, "shape", 1, (const int64_t[]){2});
    md.tt[md.ntypes - 1].elem_type = 7; /* int64 */
    node(&md, "Reshape", "x", "shape", "y");
    output(&md, "y");
    nest_function *f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "input 2 ('shape') must be known at import");
    nest_function_free(f);

    int64_t to[2] = {3, 2}, two = 2;
    nest_onnx_input in = {"shape", NEST_I64, 1, &two, to};
    nest_onnx_options o = {.inputs = &in, .ninputs = 1};
    f = import_model(&md, &o);
    assert_int_equal(nest_errcode(f), NEST_OK);
    assert_int_equal(nest_param_count(f), 1); /* x alone */
    nest_value r = nest_result(f, 0);
    assert_int_equal(nest_value_rank(f, r), 2);
    assert_int_equal(nest_value_shape(f, r)[0], 3);
    assert_int_equal(nest_value_shape(f, r)[1], 2);
    float x[6] = {1, 2, 3, 4, 5, 6}, got[6];
    void *args[1] = {x}, *res[1] = {got};
    assert_ok(f, nest_evaluate(f, args, 1, res, 1));
    assert_exact(NEST_F32, got, x, 6);
    nest_function_free(f);

    /* the value must agree with the declaration, and name a graph input */
    in.type = NEST_I32;
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_TYPE, "graph input 'shape' is declared int64; the value given is i32");
    nest_function_free(f);
    in.type = NEST_I64;
    in.rank = 0;
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_TYPE, "the value given for graph input 'shape' has shape [], not the "
                                 "declared one");
    nest_function_free(f);
    in.rank = 1;
    in.name = "y";
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_ARG, "a value is given for 'y', which is not a graph input");
    nest_function_free(f);
    in.name = "shape";
    in.data = NULL;
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_ARG, "the value given for graph input 'shape' has no data");
    nest_function_free(f);
    o.ninputs = -1;
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_ARG, "ninputs is negative");
    nest_function_free(f);

    /* an initializer listed as an input is a default the given value replaces */
    add_relu(&md, 13, 2);
    input(&md, "w", 2, (const int64_t[]){2, 3});
    float w2[6] = {10, 10, 10, 10, 10, 10}, want[6];
    int64_t s23[2] = {2, 3};
    nest_onnx_input iw = {"w", NEST_F32, 2, s23, w2};
    nest_onnx_options ow = {.inputs = &iw, .ninputs = 1};
    f = import_model(&md, &ow);
    assert_int_equal(nest_errcode(f), NEST_OK);
    assert_int_equal(nest_param_count(f), 1);
    float x2[6] = {-20, 0, 1, -5, 2, -11};
    for (int i = 0; i < 6; i++)
        want[i] = fmaxf(x2[i] + 10, 0);
    args[0] = x2;
    assert_ok(f, nest_evaluate(f, args, 1, res, 1));
    assert_exact(NEST_F32, got, want, 6);
    nest_function_free(f);
}

/* A node with five inputs (BatchNormalization's). */
static void node5(model *md, char *op, char *const in[5], char *out)
{
    Onnx__NodeProto *n = node(md, op, in[0], in[1], out);
    int k = (int)md->g.n_node - 1;
    for (int i = 2; i < 5; i++)
        md->ins[k][i] = in[i];
    n->n_input = 5;
}

/* y = BatchNormalization(Gemm(x, W, C)) with known statistics, and the same after a Relu:
 * against the closed form; after the Gemm, the normalization is folded into W and C at import
 * (no sqrt, divide or per-channel multiply left), elsewhere its coefficients are constants. */
static void test_batch_norm_folded(void **state)
{
    (void)state;
    static const float W[6] = {1, -2, 0.5f, 3, -1, 0.25f}, C[2] = {0.5f, -1};
    static const float S[2] = {2, -0.5f}, B[2] = {0.1f, 0.2f}, M[2] = {1, -2}, V[2] = {4, 0.25f};
    float x[6] = {1, 2, 3, -1, 0.5f, -2}, got[4];
    for (int relu = 0; relu < 3; relu++) {
        model md;
        model_init(&md, 13);
        input(&md, "x", 2, (const int64_t[]){2, 3});
        init(&md, "W", 2, (const int64_t[]){3, 2}, W);
        init(&md, "C", 1, (const int64_t[]){2}, C);
        init(&md, "s", 1, (const int64_t[]){2}, S);
        init(&md, "b", 1, (const int64_t[]){2}, B);
        init(&md, "m", 1, (const int64_t[]){2}, M);
        init(&md, "v", 1, (const int64_t[]){2}, V);
        node(&md, "Gemm", "x", "W", "g");
        md.ins[0][2] = "C";
        md.nodes[0].n_input = 3;
        if (relu == 1)
            node(&md, "Relu", "g", NULL, "r");
        node5(&md, "BatchNormalization", (char *[]){relu == 1 ? "r" : "g", "s", "b", "m", "v"},
              "y");
        output(&md, "y");
        if (relu == 2) /* the Gemm's output is also a result: nothing to fold into */
            output(&md, "g");
        nest_function *f = import_model(&md, NULL);
        assert_int_equal(nest_errcode(f), NEST_OK);
        char *text = nest_print(&f, 1);
        assert_non_null(text);
        if (strstr(text, "sqrt") || strstr(text, "divide") ||
            (relu == 0 && strstr(text, "multiply")))
            fail_msg("not folded (case %d):\n%s", relu, text);
        nest_string_free(text);
        float g2[4];
        void *args[1] = {x}, *res[2] = {got, g2};
        nest_kernel *k = nest_compile(f, NULL);
        assert_non_null(k);
        assert_int_equal(nest_call(k, args, 1, res, relu == 2 ? 2 : 1), NEST_OK);
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 2; j++) {
                double g = C[j];
                for (int l = 0; l < 3; l++)
                    g += (double)x[i * 3 + l] * W[l * 2 + j];
                if (relu == 1)
                    g = g > 0 ? g : 0;
                double want = (g - M[j]) / sqrt(V[j] + 1e-5) * S[j] + B[j];
                if (fabs(got[i * 2 + j] - want) > 1e-5 * (1 + fabs(want)))
                    fail_msg("case %d: y[%d][%d] = %.9g, want %.9g", relu, i, j,
                             got[i * 2 + j], want);
            }
        }
        nest_kernel_free(k);
        nest_function_free(f);
    }
}

/* A Conv, ConvTranspose or pool over x f32[1,2,5,5] (W f32[4,2,3,3] or f32[2,4,3,3]) with one
 * ints attribute (or a string one for auto_pad): bad windows are errors naming the node and what
 * is wrong, and nothing is compiled. */
static void test_conv_errors(void **state)
{
    (void)state;
    static const float W[72] = {0};
    static const struct {
        const char *op, *attr;
        int n;
        int64_t v[4];
        int code;
        const char *msg;
    } cases[] = {
        {"Conv", "pads", 3, {1, 1, 1}, NEST_ERR_ARG, "(Conv, opset 13): pads has 3 entries, not 4"},
        {"Conv", "pads", 4, {-1, 0, 0, 0}, NEST_ERR_ARG, "pads must not be negative"},
        {"Conv", "strides", 2, {0, 1}, NEST_ERR_ARG, "strides must be positive"},
        {"Conv", "dilations", 1, {2}, NEST_ERR_ARG, "dilations has 1 entries, not one per spatial"},
        {"Conv", "dilations", 2, {3, 1}, NEST_ERR_TYPE,
         "the window (7) is larger than the padded input (5) on spatial axis 0"},
        {"Conv", "kernel_shape", 2, {2, 2}, NEST_ERR_TYPE, "kernel_shape differs from W's"},
        {"Conv", "group", 0, {2}, NEST_ERR_TYPE, "(Conv, opset 13): "},
        {"Conv", "auto_pad", 0, {0}, NEST_ERR_ARG, "auto_pad 'WRONG' is not NOTSET"},
        {"ConvTranspose", "group", 0, {3}, NEST_ERR_TYPE,
         "W's first extent (2) must be X's channels (2) and a multiple of group (3)"},
        {"ConvTranspose", "output_shape", 2, {0, 5}, NEST_ERR_ARG, "output_shape must be positive"},
        {"ConvTranspose", "pads", 4, {4, 4, 4, 4}, NEST_ERR_ARG,
         "the padding of spatial axis 0 (4 and 4) leaves no output"},
        {"MaxPool", "strides", 2, {1, 1}, NEST_ERR_ARG, "kernel_shape is required"},
        {"MaxPool", "kernel_shape", 2, {6, 6}, NEST_ERR_TYPE, "the window (6) is larger"},
        {"AveragePool", "kernel_shape", 3, {2, 2, 2}, NEST_ERR_ARG,
         "kernel_shape has 3 entries, not one per spatial axis (2)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model md;
        model_init(&md, 13);
        input(&md, "x", 4, (const int64_t[]){1, 2, 5, 5});
        bool pool = strstr(cases[i].op, "Pool") != NULL;
        bool tr = strcmp(cases[i].op, "ConvTranspose") == 0;
        if (!pool)
            init(&md, "W", 4, tr ? (const int64_t[]){2, 4, 3, 3} : (const int64_t[]){4, 2, 3, 3},
                 W);
        node(&md, (char *)cases[i].op, "x", pool ? NULL : "W", "y");
        output(&md, "y");
        Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT, *pa = &a;
        a.name = (char *)cases[i].attr;
        int64_t ints[4];
        memcpy(ints, cases[i].v, sizeof ints);
        if (strcmp(a.name, "auto_pad") == 0) {
            a.has_s = 1;
            a.s.data = (uint8_t *)"WRONG";
            a.s.len = 5;
        } else if (cases[i].n == 0) {
            a.has_i = 1;
            a.i = ints[0];
        } else {
            a.n_ints = (size_t)cases[i].n;
            a.ints = ints;
        }
        md.nodes[0].n_attribute = 1;
        md.nodes[0].attribute = &pa;
        nest_function *f = import_model(&md, NULL);
        assert_msg(f, cases[i].code, cases[i].msg);
        nest_function_free(f);
    }
}

/* Pow with a known exponent of 2 is a product (what pow computes, without the call). */
static void test_pow_square(void **state)
{
    (void)state;
    model md;
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){2, 3});
    static const float two = 2;
    init(&md, "e", 0, NULL, &two);
    node(&md, "Pow", "x", "e", "y");
    output(&md, "y");
    nest_function *f = import_model(&md, NULL);
    assert_int_equal(nest_errcode(f), NEST_OK);
    char *text = nest_print(&f, 1);
    if (strstr(text, "power") || !strstr(text, "multiply(x, x)"))
        fail_msg("x^2 is not x * x:\n%s", text);
    nest_string_free(text);
    float x[6] = {1.5f, -2, 3e-20f, 1e20f, -0.0f, 7}, got[6], want[6];
    for (int i = 0; i < 6; i++)
        want[i] = powf(x[i], 2);
    void *args[1] = {x}, *res[1] = {got};
    assert_ok(f, nest_evaluate(f, args, 1, res, 1));
    assert_exact(NEST_F32, got, want, 6);
    nest_function_free(f);
}

/* A Shape folded at import leaves no node behind: y = Reshape(Relu(x), Shape(x)) is the relu
 * alone. */
static void test_no_dead_nodes(void **state)
{
    (void)state;
    model md;
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){2, 3});
    node(&md, "Shape", "x", NULL, "s");
    node(&md, "Relu", "x", NULL, "r");
    node(&md, "Reshape", "r", "s", "y");
    output(&md, "y");
    nest_function *f = import_model(&md, NULL);
    assert_int_equal(nest_errcode(f), NEST_OK);
    char *text = nest_print(&f, 1);
    assert_non_null(text);
    if (strstr(text, "i64") || strstr(text, "reshape"))
        fail_msg("dead nodes are left:\n%s", text);
    nest_string_free(text);
    float x[6] = {-1, 2, -3, 4, -5, 6}, got[6], want[6] = {0, 2, 0, 4, 0, 6};
    void *args[1] = {x}, *res[1] = {got};
    assert_ok(f, nest_evaluate(f, args, 1, res, 1));
    assert_exact(NEST_F32, got, want, 6);
    nest_function_free(f);
}

/* ir_prune on a graph with dead values, tuples and GETs: the live ones keep their values and
 * names, the parameters stay (even unused), the results are those of before. */
static void test_prune(void **state)
{
    (void)state;
    int64_t s3[1] = {3};
    nest_function *f = nest_function_new("p");
    nest_value a = nest_parameter(f, "a", NEST_F32, 1, s3, NEST_ROW_MAJOR);
    nest_parameter(f, "unused", NEST_F32, 1, s3, NEST_ROW_MAJOR);
    nest_value e = nest_exp(f, a);                                /* dead */
    nest_value sq = nest_multiply(f, a, a);
    nest_value t = nest_tuple(f, 2, (nest_value[]){sq, a});
    nest_value t2 = nest_tuple(f, 2, (nest_value[]){e, sq});      /* dead */
    nest_get(f, t2, 1);                                           /* dead */
    nest_value g = nest_get(f, t, 0);
    nest_value r = nest_negative(f, g);
    assert_ok(f, nest_set_name(f, r, "neg"));
    assert_ok(f, nest_set_name(f, e, "dead"));
    assert_ok(f, nest_return(f, 2, (nest_value[]){r, t}, NULL));
    assert_int_equal(f->nnodes, 9);
    assert_int_equal(ir_prune(f), 3);
    assert_int_equal(f->nnodes, 6);
    /* the index of names follows the nodes: found where they are now, the pruned ones gone */
    int32_t neg = ir_find_name(f, "neg");
    assert_true(neg >= 0 && neg < f->nnodes && f->nodes[neg].op == OP_NEGATIVE);
    assert_int_equal(ir_find_name(f, "dead"), -1);
    assert_int_equal(ir_find_name(f, "a"), f->params[0]);
    assert_int_equal(ir_prune(f), 0);
    assert_int_equal(nest_param_count(f), 2);
    assert_int_equal(nest_result_count(f), 3);
    char *text = nest_print(&f, 1);
    assert_non_null(text);
    if (!strstr(text, "neg = negative(") || strstr(text, "exp("))
        fail_msg("after pruning:\n%s", text);
    nest_string_free(text);
    float x[3] = {1, -2, 3}, u[3] = {0}, r0[3], r1[3], r2[3];
    void *args[2] = {x, u}, *res[3] = {r0, r1, r2};
    assert_ok(f, nest_evaluate(f, args, 2, res, 3));
    assert_exact(NEST_F32, r0, ((float[]){-1, -4, -9}), 3);
    assert_exact(NEST_F32, r1, ((float[]){1, 4, 9}), 3);
    assert_exact(NEST_F32, r2, x, 3);
    nest_function_free(f);
}

/* 64K floats of weights: no literals in the C; the .so carries them and computes right. */
static void test_weights_are_data(void **state)
{
    (void)state;
    enum { K = 256, M = 256 };
    float *w = malloc(sizeof(float) * K * M);
    for (int i = 0; i < K * M; i++)
        w[i] = (float)((i * 7) % 13) - 6.0f;
    model md;
    model_init(&md, 13);
    input(&md, "x", 2, (const int64_t[]){1, K});
    init(&md, "fc.weight", 2, (const int64_t[]){K, M}, w);
    node(&md, "MatMul", "x", "fc.weight", "y");
    output(&md, "y");
    nest_onnx_options o = {.name = "fc"};
    nest_function *f = import_model(&md, &o);
    assert_int_equal(nest_errcode(f), NEST_OK);
    char *c = nest_emit(&f, 1, NEST_EMIT_C, NULL);
    assert_non_null(c);
    assert_non_null(strstr(c, "/* fc_weight: f32[256,256], 262144 bytes of data"));
    assert_non_null(strstr(c, "extern const float nest_const_fc_0[65536]"));
    assert_true(strlen(c) < 20000); /* 64K numbers would not fit */
    free(c);

    char so[] = "/tmp/nest-test-onnx-XXXXXX.so";
    int fd = mkstemps(so, 3);
    assert_true(fd >= 0);
    close(fd);
    assert_ok(f, nest_build_so(&f, 1, so, NULL, NULL, NULL));
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    int (*fn)(const float *, float *);
    void *sym = dlsym(h, "fc");
    assert_non_null(sym);
    memcpy(&fn, &sym, sizeof sym);
    assert_null(dlsym(h, "nest_const_fc_0")); /* hidden */
    float x[K], y[M], want[M];
    for (int i = 0; i < K; i++)
        x[i] = (float)(i % 5) - 2.0f;
    for (int j = 0; j < M; j++) {
        double s = 0;
        for (int i = 0; i < K; i++)
            s += (double)x[i] * w[i * M + j];
        want[j] = (float)s;
    }
    assert_int_equal(fn(x, y), 0);
    assert_exact(NEST_F32, y, want, M); /* small integers: exact in any order */
    dlclose(h);
    unlink(so);
    nest_function_free(f);
    free(w);
}

static void test_external_data(void **state)
{
    (void)state;
    char dir[] = "/tmp/nest-test-onnx-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], data[256];
    snprintf(path, sizeof path, "%s/ext.onnx", dir);
    snprintf(data, sizeof data, "%s/w.bin", dir);
    FILE *out = fopen(data, "wb");
    assert_non_null(out);
    float pad[4] = {9, 9, 9, 9};
    fwrite(pad, 4, 4, out);
    fwrite(W6, 4, 6, out);
    fclose(out);

    model md;
    add_relu(&md, 13, 2);
    Onnx__StringStringEntryProto kv[3] = {ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                          ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                          ONNX__STRING_STRING_ENTRY_PROTO__INIT};
    Onnx__StringStringEntryProto *pkv[3] = {&kv[0], &kv[1], &kv[2]};
    kv[0].key = "location", kv[0].value = "w.bin";
    kv[1].key = "offset", kv[1].value = "16";
    kv[2].key = "length", kv[2].value = "24";
    md.inits[0].has_raw_data = 0;
    md.inits[0].has_data_location = 1;
    md.inits[0].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    md.inits[0].n_external_data = 3;
    md.inits[0].external_data = pkv;
    size_t len;
    uint8_t *b = pack(&md, &len);
    out = fopen(path, "wb");
    fwrite(b, 1, len, out);
    fclose(out);
    free(b);

    nest_function *f = nest_import_onnx(path, NULL);
    assert_int_equal(nest_errcode(f), NEST_OK);
    assert_string_equal(nest_function_name(f), "ext");
    float x[6] = {0}, y[6], want[6];
    for (int i = 0; i < 6; i++)
        want[i] = fmaxf(W6[i], 0);
    void *args[1] = {x}, *res[1] = {y};
    assert_ok(f, nest_evaluate(f, args, 1, res, 1));
    assert_exact(NEST_F32, y, want, 6);
    nest_function_free(f);

    /* from memory, external data needs a folder */
    f = import_model(&md, NULL);
    assert_msg(f, NEST_ERR_ARG, "needs the model's folder");
    nest_function_free(f);
    /* a location outside the folder is refused */
    kv[0].value = "../w.bin";
    nest_onnx_options o = {.data_dir = dir};
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_ARG, "is not a plain path inside the model's folder");
    nest_function_free(f);
    /* more bytes than the file holds */
    kv[0].value = "w.bin";
    kv[1].value = "100";
    f = import_model(&md, &o);
    assert_msg(f, NEST_ERR_IO, "holds fewer than 24 bytes from offset 100");
    nest_function_free(f);

    unlink(path);
    unlink(data);
    rmdir(dir);
}

/* A builder's error inside a converter that gives up names the node too (found by fuzz_onnx:
 * a Gemm of f32 and f64 matrices said only "dot(...): operand element types differ"). */
static void test_builder_error_names_node(void **state)
{
    (void)state;
    const char *path = "tests/corpus/onnx/crash-gemm-types.onnx";
    nest_function *f = nest_import_onnx(path, NULL);
    assert_non_null(f);
    assert_int_equal(nest_errcode(f), NEST_ERR_TYPE);
    const char *msg = nest_errmsg(f);
    if (strncmp(msg, path, strlen(path)) != 0 || !strstr(msg, "node 0 (Gemm, opset 13)") ||
        !strstr(msg, "operand element types differ"))
        fail_msg("message: %s", msg);
    nest_function_free(f);
}

/* A Split with no outputs is an error, not a division by zero (found by fuzz_onnx). */
static void test_split_without_outputs(void **state)
{
    (void)state;
    corpus_fails("crash-split-no-outputs.onnx", NEST_ERR_ARG,
                 "node 0 (Split, opset 13): no outputs to split into");
}

/* A MaxPool with Indices padded by about 2^25 along an axis would make, while importing, a table
 * of indices per tap: 25 taps at 226 million output positions, 1.8 GB each (found by fuzz_onnx).
 * It is a limit error, nothing allocated. */
static void test_maxpool_indices_limit(void **state)
{
    (void)state;
    corpus_fails("crash-maxpool-indices-huge.onnx", NEST_ERR_LIMIT,
                 "(MaxPool, opset 12): the indices of 25 taps at");
}

/* A float attribute far outside an integer constant's range saturates instead of being cast
 * (undefined behaviour; found by fuzz_onnx): the import goes on to its own verdict. */
static void test_float_attribute_saturates(void **state)
{
    (void)state;
    nest_function *f = nest_import_onnx("tests/corpus/onnx/crash-full-int-range.onnx", NULL);
    assert_non_null(f);
    assert_non_null(strstr(nest_errmsg(f), "graph output 'y' is declared unknown but computes i32"));
    nest_function_free(f);
}

/* A node whose evaluation at import would make 256 GiB (ConstantOfShape of [2^36] floats) is
 * computed at run time instead, not allocated (found by fuzz_onnx): the shape of its value and
 * a small fold beside it are still known. tests/corpus/onnx/huge-fold.onnx is written by
 * onnx.helper: Constant s = [2^36], big = ConstantOfShape(s), y = Shape(big), z = s * 2. */
static void test_huge_fold_at_run_time(void **state)
{
    (void)state;
    nest_function *f = nest_import_onnx("tests/corpus/onnx/huge-fold.onnx", NULL);
    assert_non_null(f);
    assert_ok(f, nest_errcode(f));
    int64_t y = 0, z = 0;
    void *res[2] = {&y, &z};
    assert_ok(f, nest_evaluate(f, NULL, 0, res, 2));
    assert_int_equal(y, INT64_C(1) << 36);
    assert_int_equal(z, INT64_C(1) << 37);
    nest_function_free(f);
    /* the fuzzer's input: a Reshape whose shape depends on it is an error naming the node */
    f = nest_import_onnx("tests/corpus/onnx/crash-constant-of-shape-huge.onnx", NULL);
    assert_non_null(f);
    assert_int_equal(nest_errcode(f), NEST_ERR_ARG);
    assert_non_null(strstr(nest_errmsg(f), "node 29 (Reshape, opset 17): input 2"));
    assert_non_null(strstr(nest_errmsg(f), "must be known at import"));
    nest_function_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_huge_fold_at_run_time),
        cmocka_unit_test(test_named_dims),
        cmocka_unit_test(test_symbolic_batch),
        cmocka_unit_test(test_symbolic_arithmetic),
        cmocka_unit_test(test_garbage_and_truncation),
        cmocka_unit_test(test_opsets),
        cmocka_unit_test(test_unsupported_operator),
        cmocka_unit_test(test_graph_errors),
        cmocka_unit_test(test_unsorted),
        cmocka_unit_test(test_fixed_inputs),
        cmocka_unit_test(test_no_dead_nodes),
        cmocka_unit_test(test_batch_norm_folded),
        cmocka_unit_test(test_conv_errors),
        cmocka_unit_test(test_pow_square),
        cmocka_unit_test(test_prune),
        cmocka_unit_test(test_weights_are_data),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_builder_error_names_node),
        cmocka_unit_test(test_split_without_outputs),
        cmocka_unit_test(test_maxpool_indices_limit),
        cmocka_unit_test(test_float_attribute_saturates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
