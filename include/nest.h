/*
 * nest.h - the public interface of nest, a tensor graph compiler that prints loop-nest C.
 *
 * A program builds a function: a graph of typed tensor ops over parameters. Each op's element
 * type and shape are inferred when it is built; a mismatch is an error kept on the function
 * handle (never an abort, never a message printed). The function can then be evaluated by the
 * reference interpreter, printed as text, emitted as C, compiled in process (nest_compile) or
 * ahead of time to a shared object (nest_build_so).
 *
 * Conventions
 * - Every call that can fail returns a status (NEST_OK is 0) or NULL / NEST_NONE, and the handle
 *   it was given keeps the last error: nest_errcode(), nest_errmsg().
 * - Every *_free(NULL) is a harmless no-op.
 * - Strings returned as `char *` are malloc'd and belong to the caller (release them with
 *   nest_string_free or free). Strings returned as `const char *` belong to the handle and live
 *   until the handle's next failing call or its free.
 * - Arrays passed to and from functions are dense and row-major unless a parameter or result is
 *   declared column-major; bool elements are one byte holding 0 or 1.
 * - Threads: distinct handles are independent, so functions can be built, printed, emitted and
 *   compiled in many threads at once (compiles share the compile cache safely, also across
 *   processes). One function or module handle is not safe to use from two threads at once. A
 *   kernel is: nest_call (and the kernel_* getters) may run on one kernel from many threads at
 *   once; nest_kernel_errmsg gives the calling thread's last error. A state object is too, for
 *   calls, saves and loads: they take turns on its lock (nest_call_state); the host reads and
 *   writes its tensors' data between them.
 */
#ifndef NEST_H
#define NEST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. nest_version() gives the library's, which a program linked
 * against the shared library may see differ in MINOR and PATCH: the soname carries MAJOR. */
#define NEST_VERSION_MAJOR 0
#define NEST_VERSION_MINOR 1
#define NEST_VERSION_PATCH 0
#define NEST_VERSION "0.1.0"

/* The library's version, "MAJOR.MINOR.PATCH" (static storage). */
const char *nest_version(void);

/* The version of LLVM that nest_compile uses ("14.0.6"; static storage), loading the JIT library
 * if it is not loaded yet; NULL when it cannot be loaded (nest_compile then says why). */
const char *nest_llvm_version(void);

/* The largest rank of a tensor. */
#define NEST_MAX_RANK 32

/* Status codes: X(name, message). NEST_OK is 0; every other code is positive. */
#define NEST_STATUS_MAP(X)                                                          \
    X(OK, "ok")                                                                     \
    X(ERR_TYPE, "operand types or shapes do not fit the op")                        \
    X(ERR_ARG, "invalid argument")                                                  \
    X(ERR_SYNTAX, "syntax error in the text form")                                  \
    X(ERR_LIMIT, "a size or depth limit is exceeded")                               \
    X(ERR_NOMEM, "out of memory")                                                   \
    X(ERR_CALL, "wrong arguments to a compiled or evaluated function")              \
    X(ERR_COMPILE, "compiling the generated C failed")                              \
    X(ERR_IO, "reading or writing a file failed")                                   \
    X(ERR_UNAVAILABLE, "a needed component is not available")

typedef enum nest_status {
#define NEST_STATUS_ENUM(name, msg) NEST_##name,
    NEST_STATUS_MAP(NEST_STATUS_ENUM)
#undef NEST_STATUS_ENUM
    NEST_STATUS_COUNT
} nest_status;

/* A static description of a status code ("ok", "out of memory", ...). */
const char *nest_status_str(int status);

/* Element types. bool is the type of comparison results; it is stored as one byte 0 or 1. */
typedef enum nest_type { NEST_F32, NEST_F64, NEST_I32, NEST_I64, NEST_BOOL } nest_type;

/* The text name of a type ("f32", ...), or "?" for a value out of range. */
const char *nest_type_name(nest_type t);

/* The size of one element in bytes (4, 8, 4, 8, 1), or 0 for a value out of range. */
size_t nest_type_size(nest_type t);

/* Memory order of a parameter or result array. */
typedef enum nest_layout { NEST_ROW_MAJOR, NEST_COL_MAJOR } nest_layout;

/* ---------------------------------------------------------------------------------------------
 * Functions and values
 * ------------------------------------------------------------------------------------------- */

typedef struct nest_function nest_function;

/* A value of a function: the output of one op (a tensor or a tuple). Values belong to the
 * function that made them; NEST_NONE (negative) marks a failed builder. Every builder given
 * NEST_NONE as an operand returns NEST_NONE and leaves the function's error as it is, so
 * builders can be nested and the error checked once at the end. */
typedef int32_t nest_value;
#define NEST_NONE ((nest_value)-1)

/* Creates an empty function. `name` must be an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 255
 * characters, not a C keyword, not beginning with "nest_"); an invalid name leaves the error on
 * the returned handle and makes every later builder fail. Returns NULL only when out of memory.
 * The caller owns the handle; release it with nest_function_free. */
nest_function *nest_function_new(const char *name);

/* Frees the function and everything it owns. NULL is a no-op. */
void nest_function_free(nest_function *f);

/* The last error of the handle (NEST_OK if none) and its message ("" if none). The message
 * names the op, its operands and their types and shapes; it belongs to the handle. */
int nest_errcode(const nest_function *f);
const char *nest_errmsg(const nest_function *f);

/* Forgets the last error. A builder that failed added nothing, so the function stays usable. */
void nest_clear_error(nest_function *f);

/* The function's name; it belongs to the handle. */
const char *nest_function_name(const nest_function *f);

/* Symbolic dimensions. nest_named_dim returns the dim named `name` of f (declared on first use; the
 * name follows the rules of value names): a negative int64_t that any shape or attribute of f
 * may hold where a size goes, so that one function serves every size (nest_parameter(f, "x",
 * NEST_F32, 2, (int64_t[]){nest_named_dim(f, "N"), 256}, NEST_ROW_MAJOR)). nest_dim_add and
 * nest_dim_mul derive dims (N*64, N+1) from dims and integers. A name stands for one size
 * everywhere in f; the type rules compare dims by their expression (N*64 is 64*N; N and M
 * differ). On an error these return NEST_DIM_NONE, which every builder refuses, with the error
 * kept on f. A function's dims are the names its parameters' shapes use, in order of first
 * appearance; every name must appear there. nest_value_shape gives symbolic dims as these
 * negative values. */
#define NEST_DIM_NONE INT64_MIN
int64_t nest_named_dim(nest_function *f, const char *name);
int64_t nest_dim_add(nest_function *f, int64_t a, int64_t b);
int64_t nest_dim_mul(nest_function *f, int64_t a, int64_t b);
/* How many dims f takes, and the name of dim i (it belongs to f; NULL when out of range). */
int nest_dim_count(const nest_function *f);
const char *nest_dim_name(const nest_function *f, int i);
/* A copy of f with its dims given (dims[i] the size of nest_dim_name(f, i)): every shape plain,
 * every type rule checked again with the sizes (a negative size, an overflow or a slice out of
 * bounds is NEST_ERR_ARG or NEST_ERR_TYPE kept on f). The caller frees it with
 * nest_function_free; a module function's copy reads and assigns the same state. */
nest_function *nest_specialize(nest_function *f, const int64_t *dims, int ndims);

/* Adds a parameter; parameters are numbered in the order they are added. `name` follows the
 * rules of nest_function_new and must be unique among the parameters; `shape` has `rank`
 * entries (rank 0 is a scalar; dims may be 0). Column-major parameters are read in place. */
nest_value nest_parameter(nest_function *f, const char *name, nest_type type, int rank,
                          const int64_t *shape, nest_layout layout);

/* Gives a value a name, used by the text form and in comments of the generated C. The name
 * follows the rules of nest_function_new and must be unique in the function. */
int nest_set_name(nest_function *f, nest_value v, const char *name);

/* A constant tensor. `data` holds `count` elements of `type` (bool: one byte each): either 1
 * (the value fills the shape) or the element count of the shape, row-major. The data is copied. */
nest_value nest_constant(nest_function *f, nest_type type, int rank, const int64_t *shape,
                         const void *data, int64_t count);

/* Element-wise ops on operands of equal type and shape (nGraph semantics, no implicit
 * broadcasting: use nest_broadcast). Arithmetic takes f32, f64, i32, i64. Integer arithmetic
 * wraps (two's complement); integer divide truncates, x / 0 is 0, and INT_MIN / -1 wraps;
 * integer power with a negative exponent is 1 / a^-b truncated. maximum(a, b) is a > b ? a : b
 * and minimum(a, b) is a < b ? a : b (a NaN in a gives b). */
nest_value nest_add(nest_function *f, nest_value a, nest_value b);
nest_value nest_subtract(nest_function *f, nest_value a, nest_value b);
nest_value nest_multiply(nest_function *f, nest_value a, nest_value b);
nest_value nest_divide(nest_function *f, nest_value a, nest_value b);
nest_value nest_maximum(nest_function *f, nest_value a, nest_value b);
nest_value nest_minimum(nest_function *f, nest_value a, nest_value b);
nest_value nest_power(nest_function *f, nest_value a, nest_value b);

/* negative and abs take f32, f64, i32, i64; exp, log, sqrt and tanh take f32 and f64. */
nest_value nest_negative(nest_function *f, nest_value a);
nest_value nest_abs(nest_function *f, nest_value a);
nest_value nest_exp(nest_function *f, nest_value a);
nest_value nest_log(nest_function *f, nest_value a);
nest_value nest_sqrt(nest_function *f, nest_value a);
nest_value nest_tanh(nest_function *f, nest_value a);

/* Comparisons give bool. less and greater take numeric operands; equal takes any type. */
nest_value nest_less(nest_function *f, nest_value a, nest_value b);
nest_value nest_greater(nest_function *f, nest_value a, nest_value b);
nest_value nest_equal(nest_function *f, nest_value a, nest_value b);

/* select(c, a, b): c is bool of the shape of a and b; each element is c ? a : b. */
nest_value nest_select(nest_function *f, nest_value c, nest_value a, nest_value b);

/* Converts the element type. Float to integer truncates toward zero and saturates at the
 * integer's range (NaN gives 0); anything to bool is x != 0; bool to a number is 0 or 1. */
nest_value nest_convert(nest_function *f, nest_value a, nest_type type);

/* Contracts the last axis of a with the first axis of b: shape a[:-1] + b[1:] (vector.vector
 * gives a scalar). A scalar operand scales the other. Numeric types, equal on both sides. */
nest_value nest_dot(nest_function *f, nest_value a, nest_value b);

/* Broadcasts a to `shape` (`rank` entries). `axes` (`naxes` distinct entries, any order) are the
 * axes of the output that a does not have; the remaining output dims must equal a's shape. */
nest_value nest_broadcast(nest_function *f, nest_value a, int rank, const int64_t *shape,
                          int naxes, const int64_t *axes);

/* Reads a's elements in the axis `order` (a permutation of a's axes, NULL for the identity) and
 * lays them out row-major in `shape`, which must have as many elements as a. A transpose is a
 * reshape with an order and the permuted shape. */
nest_value nest_reshape(nest_function *f, nest_value a, const int64_t *order, int rank,
                        const int64_t *shape);

/* The box lower <= i < upper of a, taking every strides-th element (NULL: all 1). Each array
 * has rank(a) entries; each output dim is ceil((upper - lower) / stride). */
nest_value nest_slice(nest_function *f, nest_value a, const int64_t *lower, const int64_t *upper,
                      const int64_t *strides);

/* Joins n >= 1 tensors of equal type and rank along `axis`; the other dims must agree. */
nest_value nest_concat(nest_function *f, int n, const nest_value *values, int64_t axis);

/* Reductions over `naxes` distinct axes (removed from the shape). sum of nothing is 0; max and
 * min of nothing are the lowest and highest value of the type (-inf and inf for floats). */
nest_value nest_sum(nest_function *f, nest_value a, int naxes, const int64_t *axes);
nest_value nest_max(nest_function *f, nest_value a, int naxes, const int64_t *axes);
nest_value nest_min(nest_function *f, nest_value a, int naxes, const int64_t *axes);

/* Convolution and pooling slide a window over the spatial axes of x [N, C, d1..dk], k = 1 to 3
 * (nGraph's general forms). Each attribute array has k entries, one per spatial axis, and NULL
 * gives its default. Along axis i the input is dilated by data_dilation[i] (data_dilation - 1
 * zeros between elements, as in a transposed convolution; default 1), padded with pad_below[i]
 * and pad_above[i] zeros (default 0), and the window, its taps dilation[i] apart (default 1),
 * steps by strides[i] (default 1): the output extent is
 *     (dilated(d, data_dilation) + pad_below + pad_above - dilated(f, dilation)) / strides + 1
 * with dilated(n, s) = (n - 1) * s + 1 (0 for n = 0), and the window must fit in the padded
 * input. Errors (NEST_ERR_TYPE) name the op, the operands' shapes and the attribute at fault. */

/* Convolution of x with filters w [K, C / groups, f1..fk] of the same float type: the result
 * [N, K, o1..ok] holds, for output channel k of group g = k / (K / groups), the sum over the
 * C / groups input channels of that group and every tap of the window of x times w. groups >= 1
 * must divide C and K (groups = C = K is a depthwise convolution). Negative padding crops. */
nest_value nest_convolution(nest_function *f, nest_value x, nest_value w, const int64_t *strides,
                            const int64_t *dilation, const int64_t *pad_below,
                            const int64_t *pad_above, const int64_t *data_dilation,
                            int64_t groups);

/* The largest (max_pool, any numeric type) or the mean (avg_pool, f32 or f64) of each window
 * of `window` elements (required, each >= 1): the result [N, C, o1..ok]. Padding must be smaller
 * than the window, so that every window holds an element of x; max_pool ignores the padding,
 * avg_pool divides by the number of elements of x in the window, or by the whole window's size
 * when include_pad is non-zero (the padding counts as zeros). */
nest_value nest_max_pool(nest_function *f, nest_value x, const int64_t *window,
                         const int64_t *strides, const int64_t *pad_below, const int64_t *pad_above);
nest_value nest_avg_pool(nest_function *f, nest_value x, const int64_t *window,
                         const int64_t *strides, const int64_t *pad_below,
                         const int64_t *pad_above, int include_pad);

/* A tuple of n >= 0 values, and its element `index`. */
nest_value nest_tuple(nest_function *f, int n, const nest_value *values);
nest_value nest_get(nest_function *f, nest_value tuple, int64_t index);

/* ---------------------------------------------------------------------------------------------
 * The op set of real models (docs/text-format.md, "Ops for real models")
 * ------------------------------------------------------------------------------------------- */

/* Element-wise math on f32 and f64, as C's libm (floor, ceil, erf, ...): sin, cos, tan, asin,
 * acos, atan, sinh, cosh, floor, ceiling, erf. sign(x) is 1, -1 or x itself (0, -0, NaN);
 * relu(x) is x < 0 ? 0 : x (NaN stays NaN); sigmoid(x) is 1 / (1 + exp(-x)). */
nest_value nest_sin(nest_function *f, nest_value a);
nest_value nest_cos(nest_function *f, nest_value a);
nest_value nest_tan(nest_function *f, nest_value a);
nest_value nest_asin(nest_function *f, nest_value a);
nest_value nest_acos(nest_function *f, nest_value a);
nest_value nest_atan(nest_function *f, nest_value a);
nest_value nest_sinh(nest_function *f, nest_value a);
nest_value nest_cosh(nest_function *f, nest_value a);
nest_value nest_floor(nest_function *f, nest_value a);
nest_value nest_ceiling(nest_function *f, nest_value a);
nest_value nest_erf(nest_function *f, nest_value a);
nest_value nest_sign(nest_function *f, nest_value a);
nest_value nest_relu(nest_function *f, nest_value a);
nest_value nest_sigmoid(nest_function *f, nest_value a);

/* Logic on bool operands: not, and, or. */
nest_value nest_not(nest_function *f, nest_value a);
nest_value nest_and(nest_function *f, nest_value a, nest_value b);
nest_value nest_or(nest_function *f, nest_value a, nest_value b);

/* Comparisons giving bool: not_equal takes any type (NaN differs from everything), less_eq and
 * greater_eq numeric operands (false with a NaN). */
nest_value nest_not_equal(nest_function *f, nest_value a, nest_value b);
nest_value nest_less_eq(nest_function *f, nest_value a, nest_value b);
nest_value nest_greater_eq(nest_function *f, nest_value a, nest_value b);

/* The product over `naxes` distinct axes (removed from the shape); of nothing it is 1. Integers
 * wrap. */
nest_value nest_product(nest_function *f, nest_value a, int naxes, const int64_t *axes);

/* The index (i64) of the largest (argmax) or smallest (argmin) element along `axis`, which is
 * removed from the shape. Ties give the lowest index. A NaN counts as beyond every number, for
 * both (as numpy and PyTorch): the result is the index of the first NaN. The axis must not be
 * empty unless the result is. */
nest_value nest_argmax(nest_function *f, nest_value a, int64_t axis);
nest_value nest_argmin(nest_function *f, nest_value a, int64_t axis);

/* Pads a (any type, rank r) with `value`, a scalar of a's type: along axis k, below[k] values,
 * then a's elements with interior[k] values between neighbours, then above[k] values. Negative
 * below or above crop instead (from the dilated tensor, then from the padding beyond it); each
 * output dim, below + (dim - 1) * (interior + 1) + 1 + above (below + above for an empty axis),
 * must be >= 0. Each array has r entries; interior may be NULL (all 0). Without interior
 * padding the compiled code reads a in place (a view that splits loops at the borders). */
nest_value nest_pad(nest_function *f, nest_value a, nest_value value, const int64_t *below,
                    const int64_t *above, const int64_t *interior);

/* a with the `naxes` distinct axes read backwards (a view: negative strides). */
nest_value nest_reverse(nest_function *f, nest_value a, int naxes, const int64_t *axes);

/* a with the box of nest_slice(a, lower, upper, strides) replaced by b, which must have the
 * slice's shape and a's type. strides may be NULL (all 1). */
nest_value nest_replace_slice(nest_function *f, nest_value a, nest_value b, const int64_t *lower,
                              const int64_t *upper, const int64_t *strides);

/* One-hot encoding: the result has `shape` (`rank` entries) and indices' numeric type; removing
 * `axis` from shape gives indices' shape. Element i is 1 where indices (at i without axis)
 * equals i[axis], else 0: an index outside [0, shape[axis]), or a float that is no integer,
 * gives a row of zeros. */
nest_value nest_one_hot(nest_function *f, nest_value indices, int rank, const int64_t *shape,
                        int64_t axis);

/* numpy.take(a, indices, axis): the result's shape is a's with `axis` replaced by indices' shape
 * (i32 or i64), and element (i.., j.., k..) is a[i.., take(indices[j..]), k..]. An index in
 * [-n, n) (n = a's extent along axis) takes that element, counting negative ones from the end;
 * one outside is clamped to 0 or n - 1: the compiled code never reads outside a. The axis may be
 * empty only when the result is. */
nest_value nest_gather(nest_function *f, nest_value a, nest_value indices, int64_t axis);

/* gather's adjoint, numpy.add.at: a (numeric) with each element of `updates` added to the element
 * of a that gather(a, indices, axis) would take at its position. updates has a's type and the
 * shape gather's result would have (a's with `axis` replaced by indices' shape, i32 or i64).
 * Indices count and clamp as gather's do; an index that repeats adds each of its updates, in
 * row-major order of the updates. The result has a's type and shape. */
nest_value nest_scatter_add(nest_function *f, nest_value a, nest_value indices, nest_value updates,
                            int64_t axis);

/* softmax over `naxes` distinct axes of a (f32, f64): exp(a - m) / sum(exp(a - m)), where m and
 * the sum run over those axes (m is their max: nothing overflows). The shape is a's. A group
 * holding a NaN, or only -inf, gives NaN. */
nest_value nest_softmax(nest_function *f, nest_value a, int naxes, const int64_t *axes);

/* numpy.matmul: products of matrices over the last two axes of a ([..., m, k]) and b
 * ([..., k, n]), the leading (batch) axes broadcast against each other (aligned at the right,
 * extents equal or 1). A vector a (b) is a matrix of one row (column) whose axis is left out of
 * the result. Numeric types, equal on both sides; integers wrap. */
nest_value nest_batch_dot(nest_function *f, nest_value a, nest_value b);

/* The k largest (largest != 0) or smallest elements of a (numeric) along `axis`, in order, best
 * first, and their indices: a tuple of two values, element 0 of a's type and element 1 of type
 * i64, both of a's shape with `axis` of extent k (0 <= k <= the axis' extent). The order is
 * stable: equal elements keep their index order. A NaN counts as beyond every number: first
 * among the largest, last among the smallest. Take the elements with nest_get. */
nest_value nest_topk(nest_function *f, nest_value a, int64_t k, int64_t axis, int largest);

/* Sets the function's results, replacing earlier ones. Tuples among them are flattened: the
 * caller sees one result array per tensor, in order. `layouts` (NULL: all row-major) gives the
 * order of each flattened result array. */
int nest_return(nest_function *f, int n, const nest_value *values, const nest_layout *layouts);

/* Inspection of a function's signature: parameter and (flattened) result counts, and the type,
 * rank and shape of each. The shape pointer belongs to the function. Out-of-range indexes give
 * -1 / NULL. */
int nest_param_count(const nest_function *f);
int nest_result_count(const nest_function *f);
int nest_value_type(const nest_function *f, nest_value v);
int nest_value_rank(const nest_function *f, nest_value v);
const int64_t *nest_value_shape(const nest_function *f, nest_value v);
nest_value nest_param(const nest_function *f, int i);
nest_value nest_result(const nest_function *f, int i);
/* The name of a value (a parameter's, or one given by nest_set_name), or NULL if it has none or v
 * is out of range. It belongs to the function. */
const char *nest_value_name(const nest_function *f, nest_value v);

/* ---------------------------------------------------------------------------------------------
 * Modules and state
 *
 * A module holds functions and the state they share: variables (trainable) and persistent
 * tensors, which keep their values from one call to the next. A function of a module reads a
 * state tensor with nest_read and gives it a new value with nest_assign. Reads see the values
 * at the call's entry; assignments take effect when the call returns, all at once (so two
 * tensors can be swapped in one call). The values themselves live in a state object
 * (nest_state_new below, NAME_state_new in generated C), which each call is given.
 * ------------------------------------------------------------------------------------------- */

typedef struct nest_module nest_module;

/* Creates an empty module. `name` follows the rules of nest_function_new; it names the state
 * type and functions of the generated C (NAME_state, NAME_state_new, ...). An invalid name
 * leaves the error on the module. Returns NULL only when out of memory; the caller frees the
 * module with nest_module_free, which frees its functions too. */
nest_module *nest_module_new(const char *name);

/* The module's name, and a new one (nestc --name). For a parsed module it is the file name's
 * stem, characters that cannot be in an identifier replaced by '_'. */
const char *nest_module_name(const nest_module *m);
int nest_module_set_name(nest_module *m, const char *name);

/* Adds an empty function to the module: it may read and assign the module's state. It belongs
 * to the module (nest_function_free on it does nothing). Returns NULL with the error on m for a
 * name the module already has, or when out of memory; an invalid name leaves the error on the
 * returned function, as nest_function_new does. */
nest_function *nest_module_add_function(nest_module *m, const char *name);

/* How a state tensor starts (the generator is documented in docs/text-format.md: a counter-based
 * splitmix64 stream and arithmetic that gives the same values on every machine). */
typedef enum nest_init_kind {
    NEST_INIT_ZEROS,   /* every element 0 */
    NEST_INIT_CONSTANT,/* every element a */
    NEST_INIT_UNIFORM, /* uniform in [a, b) from `seed` (float types) */
    NEST_INIT_NORMAL,  /* normal with mean a and standard deviation b from `seed` (float types) */
    NEST_INIT_DATA,    /* an array of values: declared by nest_variable_data or
                          nest_persistent_data, not through a nest_init */
} nest_init_kind;

typedef struct nest_init {
    nest_init_kind kind;
    double a, b;
    uint64_t seed;
} nest_init;

/* Declares a trainable variable (nest_variable) or a persistent tensor, not trained
 * (nest_persistent), of the module. `name` follows the rules of nest_function_new and is unique
 * in the module (among its state and the names its functions use); `init` NULL means zeros; a
 * constant must fit the type (integers: a whole number in range). Returns NEST_OK or an error
 * kept on m. */
int nest_variable(nest_module *m, const char *name, nest_type type, int rank,
                  const int64_t *shape, const nest_init *init);
int nest_persistent(nest_module *m, const char *name, nest_type type, int rank,
                    const int64_t *shape, const nest_init *init);
/* The same with an array for initial value: `data` holds the tensor's elements, dense and
 * row-major, of its type (bool: bytes 0 or 1), and is copied. NAME_state_new of the generated C
 * starts from a copy too (linked into the shared object as data). NEST_ERR_ARG for a NULL data
 * of a tensor with elements or a bool byte that is not 0 or 1, with the error kept on m. */
int nest_variable_data(nest_module *m, const char *name, nest_type type, int rank,
                       const int64_t *shape, const void *data);
int nest_persistent_data(nest_module *m, const char *name, nest_type type, int rank,
                         const int64_t *shape, const void *data);

/* The value of the state tensor `name` of f's module at the call's entry (the same value each
 * time it is asked for in f). NEST_NONE with the error on f if f has no module or the module no
 * such tensor. */
nest_value nest_read(nest_function *f, const char *name);

/* Gives the state tensor that `state` reads (a value of nest_read) the value `value` when the
 * call returns. The value must have the tensor's type and shape; a tensor is assigned at most
 * once per function. Returns NEST_OK or an error kept on f. */
int nest_assign(nest_function *f, nest_value state, nest_value value);

/* Reverse-mode gradients: adds to f the graph of the derivatives of the scalar float `loss`
 * with respect to each of `wrt` (n >= 1 values of nest_read of trainable variables, or float
 * parameters), and returns them as a tuple (element i has wrt[i]'s type and shape; zeros where
 * loss does not depend on it). Gradients do not flow through comparisons, integer values or
 * other ops that have no derivative. NEST_NONE with the error on f for a loss that is not a
 * float scalar, or a wrt that is not a float variable or parameter (a persistent tensor is not
 * trainable); on an error f is left as it was. */
nest_value nest_grad(nest_function *f, nest_value loss, int n, const nest_value *wrt);

/* State objects: the values of a module's state. A state object does not refer to its module
 * (free them in any order); it fits every function compiled from a module with the same state
 * declarations. Several state objects of one module are independent (two models training side
 * by side). */
typedef struct nest_state nest_state;

/* Allocates and initializes a state object of the module. NULL with the error on m (out of
 * memory: NEST_ERR_NOMEM). The caller frees it with nest_state_free. */
nest_state *nest_state_new(nest_module *m);
void nest_state_free(nest_state *st);

/* A state object over the caller's arrays, used in place: tensor i of m's state (in declaration
 * order) is data[i], dense and row-major of the tensor's type and shape. Nothing is allocated
 * for the tensors and nothing is initialized: the arrays keep their values, calls read and
 * assign them, nest_state_save and nest_state_load work on them. The arrays must not overlap
 * and must outlive the state object; they need no alignment beyond their element type's. This
 * is how one array serves the state objects of several modules (a front end's variable read by
 * a training step and by a prediction compiled apart): calls with any of those state objects
 * must then not overlap (each state object serializes its own calls only). NULL with the error on m: NEST_ERR_ARG for a NULL data or a NULL array
 * of a non-empty tensor, or two arrays that overlap; NEST_ERR_NOMEM. The caller frees it with
 * nest_state_free, which leaves the arrays alone. */
nest_state *nest_state_wrap(nest_module *m, void *const *data);

/* The state's tensors, in declaration order: their count, the bytes of all their data, and for
 * tensor i its name, type, rank, shape (belonging to the state) and data (dense, row-major; read
 * and write it freely between calls). Out-of-range indexes give NULL or -1. */
int nest_state_count(const nest_state *st);
size_t nest_state_size(const nest_state *st);
const char *nest_state_name(const nest_state *st, int i);
int nest_state_type(const nest_state *st, int i);
int nest_state_rank(const nest_state *st, int i);
const int64_t *nest_state_shape(const nest_state *st, int i);
void *nest_state_data(nest_state *st, int i);
/* The index of the tensor called `name`, or -1; and its data, or NULL. */
int nest_state_find(const nest_state *st, const char *name);
void *nest_state_tensor(nest_state *st, const char *name);

/* Writes the state to a file (format: docs/api.md; written to PATH.tmp and renamed), and reads
 * one back. A file loads into a state of exactly its tensors, matched by name in any order, each
 * of the same type and shape; a tensor missing from either side is an error naming it. Loading
 * checks the whole file (header, size, checksum, then names, types and shapes) before it
 * changes anything: on any error the state is unchanged. NEST_OK, or NEST_ERR_IO with the
 * reason in nest_state_errmsg (NEST_ERR_NOMEM when out of memory). */
int nest_state_save(nest_state *st, const char *path);
int nest_state_load(nest_state *st, const char *path);
/* The message of the last failed save or load ("" if none); it belongs to the state. */
const char *nest_state_errmsg(const nest_state *st);

/* ---------------------------------------------------------------------------------------------
 * Text form
 * ------------------------------------------------------------------------------------------- */

/* Parses the text form (`len` bytes, which may hold NUL bytes: they are an error). `filename`
 * names the text in messages, and its stem names the module. Returns NULL only when out of memory; otherwise a module that
 * either holds the functions or keeps the first error: nest_module_errcode() and a message of
 * the form "file:line:col: error: text". The caller frees it with nest_module_free. */
nest_module *nest_parse(const char *text, size_t len, const char *filename);
void nest_module_free(nest_module *m);
int nest_module_errcode(const nest_module *m);
const char *nest_module_errmsg(const nest_module *m);
/* Line and column (from 1; columns count bytes) of the error, 0 if none. */
int nest_module_errline(const nest_module *m);
int nest_module_errcol(const nest_module *m);

/* The functions of a parsed module, in file order; they belong to the module. */
int nest_module_count(const nest_module *m);
nest_function *nest_module_function(const nest_module *m, int i);
nest_function *nest_module_find(const nest_module *m, const char *name);

/* The canonical text form of n functions: parsing it and printing again gives the same text.
 * Returns a string the caller frees, or NULL (error on the first function, or out of memory). */
char *nest_print(nest_function *const *fns, int n);
/* The canonical text form of a module: its state declarations, then its functions as nest_print
 * gives them; a module without functions is its declarations alone. Parsing it gives the module
 * back. Returns a string the caller frees, or NULL (the error on m, or on a function). */
char *nest_module_print(nest_module *m);

/* A Graphviz digraph of n functions: one node per op, each edge labelled with the type and shape
 * of the value it carries; the loop nests the compiler makes are clusters of the ops they
 * compute (a row group around its nests), views are dashed, and temporaries stored in memory
 * are framed twice with bold edges. Returns a string the caller frees, or NULL. */
char *nest_print_dot(nest_function *const *fns, int n);

/* Frees a string nest returned. NULL is a no-op. */
void nest_string_free(char *s);

/* ---------------------------------------------------------------------------------------------
 * ONNX import
 * ------------------------------------------------------------------------------------------- */

/* The value of a dynamic dimension: an input dim that the model names (dim_param). */
typedef struct nest_dim {
    const char *name;
    int64_t value;
} nest_dim;

/* A graph input given its value at import: it is no parameter then but a constant, so that the
 * shapes, axes or pads computed from it are known (as nest needs them) and what depends only on
 * it is computed at import. Its type and shape must agree with what the model declares. */
typedef struct nest_onnx_input {
    const char *name;       /* the graph input (an initializer listed as an input: its value
                             * replaces the initializer's) */
    nest_type type;
    int rank;
    const int64_t *shape;
    const void *data;       /* the product of the shape elements, row-major; copied */
} nest_onnx_input;

typedef struct nest_onnx_options {
    const char *name;       /* the function's name (NULL: the file's stem made an identifier;
                             * "model" when imported from memory) */
    const nest_dim *dims;   /* ndims values of named dims; a named dim not given stays a
                             * symbolic dim of the function (named as given, made an
                             * identifier) */
    int ndims;
    const char *data_dir;   /* the folder of external data files (NULL: the model's folder;
                             * from memory, external data is then an error) */
    const nest_onnx_input *inputs; /* ninputs graph inputs fixed to values (may be NULL) */
    int ninputs;
} nest_onnx_options;

/* Imports an ONNX model (opsets 7 to 17 of the default domain) as a function: its parameters
 * are the graph inputs that are not initializers, in order; its results the graph outputs, in
 * order. Initializers become constants (binary data, never C literals); nodes whose inputs are
 * all known at import are evaluated then. `opts` may be NULL. Returns NULL only when out of
 * memory; otherwise a function the caller frees with nest_function_free, which on error holds
 * it (nest_errcode, nest_errmsg: "FILE: node N 'name' (Op, opset K): what"). An error leaves
 * no results, so nothing can be emitted from it. */
nest_function *nest_import_onnx(const char *path, const nest_onnx_options *opts);
/* The same from `len` bytes in memory (copied as needed; the caller keeps them). */
nest_function *nest_import_onnx_mem(const void *data, size_t len, const nest_onnx_options *opts);

/* ---------------------------------------------------------------------------------------------
 * Reference interpreter
 * ------------------------------------------------------------------------------------------- */

/* Evaluates f with the simple reference interpreter: `args` are nargs parameter arrays, `results`
 * nresults result arrays (layouts as declared). Returns NEST_OK or an error kept on f (wrong
 * counts: NEST_ERR_CALL; a missing result: NEST_ERR_ARG; memory: NEST_ERR_NOMEM). */
int nest_evaluate(nest_function *f, void *const *args, int nargs, void *const *results,
                  int nresults);

/* nest_evaluate for a function with symbolic dims, at the sizes dims (as nest_specialize). */
int nest_evaluate_dims(nest_function *f, const int64_t *dims, int ndims, void *const *args,
                       int nargs, void *const *results, int nresults);

/* nest_evaluate for a function that reads or assigns state (nest_evaluate refuses those): reads
 * see st's values, and st takes the assigned values when the call returns. st must fit f's
 * module (NEST_ERR_CALL otherwise), and no argument or result array may be one of st's
 * tensors. */
int nest_evaluate_state(nest_function *f, nest_state *st, void *const *args, int nargs,
                        void *const *results, int nresults);

/* nest_evaluate_state for a function with state and symbolic dims, at the sizes dims (as
 * nest_evaluate_dims): the state's tensors have plain shapes, the function's values the sizes. */
int nest_evaluate_state_dims(nest_function *f, nest_state *st, const int64_t *dims, int ndims,
                             void *const *args, int nargs, void *const *results, int nresults);

/* ---------------------------------------------------------------------------------------------
 * Compilation
 * ------------------------------------------------------------------------------------------- */

typedef struct nest_options {
    int opt_level;      /* 0..3 (default 3) */
    const char *march;  /* target CPU for -march: "native" (default), "x86-64-v2", ... */
    const char *cc;     /* C compiler for nest_build_so (default "cc") */
    int fuse;           /* fuse element-wise chains and reductions (default 1) */
    int openmp;         /* run large loops on several cores (default 1) */
    int cache;          /* use the compile cache (default 1; NEST_CACHE=0 turns it off) */
    int verbose;        /* nest_build_so: report the command and its time in *log (default 0) */
    /* Denormal (subnormal) floats during a call: 1 flushes them (each thread of the call reads
     * them as zero and writes zero for a result below the normal range, x86's FTZ and DAZ,
     * AArch64's FZ; the caller's mode is restored on return), 0 keeps IEEE arithmetic, -1
     * (default) flushes in the functions that assign state (training steps, whose momentum
     * decays into denormals, each operation on one costing a hundred cycles) and keeps them in
     * the others. Other CPUs keep them whatever this says. */
    int flush_denormals;
} nest_options;

/* Fills o with the defaults above. */
void nest_options_init(nest_options *o);

/* The generated C of n functions: a self-contained C99 translation unit (kind NEST_EMIT_C) or
 * the header declaring its entry points (NEST_EMIT_H). Returns a string the caller frees, or
 * NULL with the error on the function at fault. `opts` may be NULL for the defaults. */
typedef enum nest_emit_kind { NEST_EMIT_C, NEST_EMIT_H } nest_emit_kind;
char *nest_emit(nest_function *const *fns, int n, nest_emit_kind kind, const nest_options *opts);
/* The same for a module: its state (NAME_state_new ... , also when it has no functions, for a
 * host that keeps, saves and loads the state alone) and all its functions. NULL with the error
 * on m (a function's error is copied there). */
char *nest_module_emit(nest_module *m, nest_emit_kind kind, const nest_options *opts);

/* A compiled function, callable in this process. */
typedef struct nest_kernel nest_kernel;

/* Compiles f in process (clang and LLVM, loaded on first use). Returns NULL with the error on f
 * (NEST_ERR_UNAVAILABLE when the JIT library cannot be loaded). The kernel does not refer to f
 * afterwards; the caller frees it with nest_kernel_free. `opts` may be NULL for the defaults. */
nest_kernel *nest_compile(nest_function *f, const nest_options *opts);

/* Calls the kernel: args and results as for nest_evaluate. Returns NEST_OK, NEST_ERR_CALL for a
 * wrong count (the message says which), or NEST_ERR_NOMEM. Calls on one kernel may run in many
 * threads at once: the kernel owns one workspace, and a call that finds it in use allocates its
 * own for the call (NEST_ERR_NOMEM if it cannot). */
int nest_call(nest_kernel *k, void *const *args, int nargs, void *const *results, int nresults);

/* nest_call for a kernel of a function with symbolic dims (nest_call refuses those): dims[i]
 * is the size of nest_dim_name(f, i). One kernel serves every size. A negative size, or sizes
 * whose shapes overflow or put a slice out of bounds, are NEST_ERR_CALL, and nothing is
 * written. A kernel without symbolic dims takes ndims 0. */
int nest_call_dims(nest_kernel *k, const int64_t *dims, int ndims, void *const *args, int nargs,
                   void *const *results, int nresults);

/* nest_call for a kernel whose function reads or assigns state (nest_call refuses those): as
 * nest_evaluate_state. Kernels of one module may share a state object. Calls with one state
 * object take turns: each holds the state object's lock (as nest_evaluate_state,
 * nest_state_save and nest_state_load do), so calls from several threads with one state object
 * are serialized and no assignment is lost, while calls with distinct state objects run at
 * once. State objects that wrap the same arrays (nest_state_wrap) have locks of their own: the
 * caller keeps their calls apart. */
int nest_call_state(nest_kernel *k, nest_state *st, void *const *args, int nargs,
                    void *const *results, int nresults);

/* nest_call_state for a kernel of a function with state and symbolic dims: dims and their
 * checks as nest_call_dims, the state as nest_call_state. A kernel without state ignores st;
 * one without symbolic dims takes ndims 0. */
int nest_call_state_dims(nest_kernel *k, nest_state *st, const int64_t *dims, int ndims,
                         void *const *args, int nargs, void *const *results, int nresults);

/* The message of the last failed nest_call on k in the calling thread ("" if none). It lives in
 * the thread until its next failing call or the kernel's free. */
const char *nest_kernel_errmsg(const nest_kernel *k);
/* 1 if the kernel came from the compile cache, 0 if it was compiled. */
int nest_kernel_cache_hit(const nest_kernel *k);
/* Why the compile cache was not used for the kernel, or "" when it was (or was turned off): the
 * cache directory is refused when another user owns it (a symlink to their directory, say) or
 * others can write to it, since code loaded from it runs in this process; a store that failed
 * ("No space left on device") leaves the kernel good but uncached. Belongs to the kernel. */
const char *nest_kernel_cache_note(const nest_kernel *k);
/* Bytes of scratch memory the kernel uses (0 when everything fuses into its results). */
size_t nest_kernel_workspace_size(const nest_kernel *k);
/* Wall time of nest_compile for this kernel, in milliseconds. */
double nest_kernel_compile_ms(const nest_kernel *k);
void nest_kernel_free(nest_kernel *k);

/* Builds a shared object with every function of fns at so_path and its header at h_path (NULL:
 * no header), with opts->cc. On error returns non-zero with the error on fns[0] (the compiler's
 * output in the message). With opts->verbose, *log (if log is not NULL) receives the command
 * and its time; the caller frees it. */
int nest_build_so(nest_function *const *fns, int n, const char *so_path, const char *h_path,
                  const nest_options *opts, char **log);
/* The same for a module: its state and all its functions (nest_module_emit), also when it has no
 * functions; the error on m. */
int nest_module_build_so(nest_module *m, const char *so_path, const char *h_path,
                         const nest_options *opts, char **log);

#ifdef __cplusplus
}
#endif

#endif /* NEST_H */
