/*
 * emit.h - what the files of the C emitter share (private to compiler/emit/): the function's
 * context, scopes of names, the body of values being emitted, and the helpers each file uses.
 *
 *   emit_text.c   helpers of the generated code, names, expressions, reductions' texts
 *   emit_loops.c  loop nests: levels, folds, parallel chunks, tiled products, row groups
 *   emit_c.c      functions: entry points, constants, the header's declarations
 *   emit_conv.c   convolutions and pools: copies of the input, tiles and stores
 *   emit_conv_kernels.c  convolutions' kernels: a register tile, the dense form's tail
 *   emit_dims.c   symbolic dims: the check of given sizes, temporaries placed at run time
 */
#ifndef NEST_EMIT_H
#define NEST_EMIT_H

#include "internal.h"

/* Partial accumulators of a float reduction, in bytes: four AVX-512 vectors (eight AVX2
 * ones) of independent sums hide the latency of the adds. Folds of less than ACC_SMALL_DATA
 * bytes use half as many: combining the lanes at the end then costs as much as the loop
 * (measured here: 1024 floats fold in 38 ns with 32 lanes, 57 ns with 64; from 4096 on, 64 lanes
 * are faster). */
#define ACC_BYTES 256
#define ACC_SMALL_DATA (16 * 1024)
/* A function whose loop nests take more C than this is cut into parts, functions of their own
 * (NEST_NOINLINE, a macro of the preamble), each about this size: clang's time over a function
 * grows faster than its size (a 332-layer MLP: 7.5 s in parts of 48 KiB, 4.4 s in 8 KiB). */
#define EMIT_PART_BYTES (8 * 1024)
/* A function with more folds than this combines each fold's partial accumulators in a helper
 * function rather than in loops of its own: compilers take about 7 ms over those loops. */
#define EMIT_FOLD_CALLS 8
/* Loops of at least this many iterations run on several cores (with -fopenmp). */
#define PAR_MIN ((int64_t)1 << 18)
/* A whole-array reduction runs in chunks of at least this many elements, at most PAR_CHUNKS of
 * them, each folded alone and then combined in order: the result does not depend on the
 * number of threads. */
#define PAR_CHUNK ((int64_t)1 << 16)
#define PAR_CHUNKS 64

/* Helpers of the generated code: bits of the mask emit_preamble takes. */
enum {
    H_ADD, H_SUB, H_MUL, H_DIV, H_POW, H_NEG, H_ABS, /* x 2 integer types */
    H_INT_OPS = 7,
    H_CVT = 2 * H_INT_OPS, /* + 2 * to + from: i32/i64 from f32/f64 */
    H_TILE = H_CVT + 4,    /* + 3 * (f64) + (16, 32, 64 vector bytes): tiles of tile.c */
    H_HSUM = H_TILE + 6,   /* + 2 * (f64) + (half the lanes): the sum of a fold's partial sums */
    H_FOLD = H_HSUM + 4,   /* + 4 * (sum, max, min) + 2 * (f64) + (half the lanes): the
                            * combining of a fold's partial accumulators, in large functions */
    H_NOINLINE = H_FOLD + 12, /* the NEST_NOINLINE macro (tiles, folds, parts) */
    H_SIGMOID = H_NOINLINE + 1, /* + (f64): the op set of real models */
    H_TAKE = H_SIGMOID + 2, /* a gathered index, clamped */
    H_TOPK = H_TAKE + 1,   /* + element type (f32, f64, i32, i64): topk of a row */
    H_VEC = H_TOPK + 4,    /* + 3 * (f64) + (16, 32, 64 vector bytes): vector types (conv.c) */
    H_FLUSH = H_VEC + 6,   /* nest_flush_enter and nest_flush_leave: denormals flushed */
    H_DIMS = H_FLUSH + 1,  /* the checked arithmetic of symbolic dims (emit_dims.c) */
    H_THIN = H_DIMS + 1,   /* + 3 * (f64) + (16, 32, 64 vector bytes): the thin tiles of tile.c */
    H_STREAM = H_THIN + 6, /* + (f64): stores past the caches (emit_tile.c) */
    H_COUNT = H_STREAM + 2, /* 64: every bit of the helpers' mask */
};

/* An int per expression node, by id (walk.c's dense ids), growing with the plan's nodes; new
 * entries are 0. */
typedef struct id_ints {
    int32_t *v;
    size_t cap;
} id_ints;

/* A set of identifiers in use, for making names unique. Running out of memory marks the set
 * and every enclosing one (oom): the function scope's flag fails the whole emission. */
typedef struct names {
    char **v;
    size_t n, cap;
    struct names *outer; /* the enclosing scope's names */
    bool oom;
} names;

typedef struct ctx {
    buf *b;
    const plan *p;
    plan *mp;                 /* the same plan, for transforms during emission */
    const nest_function *f;
    emit_mode mode;
    uint64_t *helpers;
    namer nm;
    names fn;                 /* function scope: parameters, results, workspace */
    const char **bufname;     /* per buffer: its C name */
    bool *refd;               /* per buffer: its name was written into the C */
    int32_t *decl;            /* the temporaries declared in the open block, not yet cast */
    size_t ndecl, capdecl;
    int32_t *touched;         /* per buffer: the last declare_temps that found it used */
    int32_t ntouch;
    uint8_t *node_in;         /* per graph node: 0, for the sets of em_nest_comment */
    bool ws_refd;             /* the workspace pointer was written into the C */
    /* a large function's loop nests go into parts, functions of their own (emit_c.c) */
    int part;                 /* the part being emitted (from 1) */
    int32_t *partref;         /* per buffer: the last part that named it */
    int32_t *partbufs;        /* the buffers the part names */
    size_t npartbufs, cappartbufs;
    bool part_ws;             /* the part names the workspace */
    int indent;
    /* the nest being emitted */
    const nest *ne;
    names local;
    const char *var[NEST_MAX_RANK];   /* loop variable per axis */
    const char *expr[NEST_MAX_RANK];  /* its value in index expressions ("i1" or "i1 + u") */
    const char **acc;                 /* per output: accumulator array (case A); an argmax's or
                                       * argmin's index */
    const char **best;                /* per output: an argmax's or argmin's best value */
    int accs;                         /* partial accumulators in use (1 or lanes) */
    bool unrolled;                    /* inside the lane-wide loop: `u` picks the accumulator */
    bool par_outer;                   /* the outermost loop runs on several cores */
    bool flush;                       /* denormals flushed during the call: each parallel
                                       * region sets its threads' mode (nest_options) */
    bool par_chunks;                  /* the outermost (folded) axis runs in parallel chunks */
    const char **fold_dst;            /* per output: where a fold ends (chunks), else NULL */
    names *body_names;                /* the scope of the body being emitted */
    int from;                         /* the first loop level the nest emits (1 in row groups) */
    const fx *tile_view;              /* a tiled product's own view, read from its tile */
    struct hoisted {
        const fx *e;
        const char *name;
    } *hoist;                         /* loads read once before the loops that do not move them */
    size_t nhoist, caphoist;
    id_ints hoisted;                  /* per node: 1 + its index in hoist (if still below nhoist) */
    id_ints refbody, refidx;          /* per node: the body (its stamp) that has it, and where */
    int32_t nbodies;                  /* bodies emitted so far: the next one's stamp */
    const char *tile_text;
    const nout *stream_to;            /* a tiled product's output that leaves through its tile,
                                       * written past the caches after the block (emit_tile.c) */
    bool fold_calls;                  /* folds combine their lanes in helpers (EMIT_FOLD_CALLS) */
    uint32_t concat_axes;             /* the nest's axes that a concat splits */
    /* the module state the function reads or assigns, in the state's order (emit_c.c) */
    int nst;
    int32_t *st_index;                /* the state tensor */
    bool *st_written;                 /* assigned by the function */
    const char *stn;                  /* the wrappers' name of the state pointer ("st") */
    /* symbolic dims (emit_c.c) */
    const char **dimname;             /* per entry of the function's dim table: a name's C name */
    int32_t *dimabi;                  /* the entries of the dims, in the order of the ABI */
    int ndims;
} ctx;

typedef struct valref {
    const fx *e;
    const char *name; /* a local holding it, or NULL when it is inlined */
    int uses;         /* operand of this many ops of the body */
    int outputs;      /* value of this many outputs */
} valref;

typedef struct body {
    ctx *c;
    valref *v;
    size_t n, cap;
    int32_t stamp;    /* its mark in c->refbody (0: an empty body, which has no values) */
    bool oom;
} body;

/* The C names buffer b (or the workspace): its declaration is used. */
void em_ref(ctx *c, int32_t b);
void em_ref_ws(ctx *c);
/* Declares `name`, a pointer of workspace buffer b's type to where b lies in the workspace. */
void em_ws_pointer(ctx *c, int32_t b, const char *name);

/* emit_text.c */
/* The entry of e in ix, or NULL when out of memory (c->b->failed set). */
int32_t *em_id_int(ctx *c, id_ints *ix, const fx *e);
void em_id_ints_free(id_ints *ix);
const char *em_ctype(int etype);
bool em_is_float(int etype);
/* The helper of a tile of tile.c tj columns wide (the thin tiles' when narrower than
 * tile_shape's). */
int em_tile_helper(int etype, int vb, int tj);
/* The element type and vector bytes of the helper i past the first of those counted by type and
 * width (H_TILE, H_THIN, H_VEC: + 3 * (f64) + (16, 32, 64 vector bytes)). */
void em_helper_width(int i, int *etype, int *vector_bytes);
/* The helper combining `lanes` partial accumulators of a fold, or -1 when there is none. */
int em_fold_helper(int op, int etype, int lanes);
/* The helper that sums a fold's lanes partial sums of etype, or -1. */
int em_hsum_helper(int etype, int lanes);
const char *em_names_add(names *ns, const char *s);
/* base, or base_1, base_2, ... : the first that no scope uses; recorded in ns. */
const char *em_unique(names *ns, const char *base);
void em_names_free(names *ns);
/* buf_finish for a text built aside: on failure (NULL) the whole emission fails (c->b), so no
 * out-of-memory ever shows up as missing text in the C. */
char *em_finish(ctx *c, buf *t);
/* One line of C at the context's indentation. */
void em_line(ctx *c, const char *fmt, ...) FORMAT(2, 3);
/* A dim as C: the integer, or the expression of the function's dims (their C names); em_dim_text
 * the same in a string of the emission (freed by the caller; NULL fails the emission). */
void em_dim(ctx *c, buf *b, int64_t d);
char *em_dim_text(ctx *c, int64_t d);

/* emit_dims.c */
/* The C names of the function's dims (c->dimname, c->dimabi, c->ndims) after its own names;
 * false when out of memory. em_dims_free releases them. */
bool em_dims_init(ctx *c);
void em_dims_free(ctx *c);
/* "int64_t N, int64_t M" (from NULL), or "dims[0], dims[1]" (from "dims"), into b. */
void em_dims_params(ctx *c, buf *b, const char *from);
/* The statements at the start of NAME_impl that place the temporaries of symbolic sizes. */
void em_dims_offsets(ctx *c);
/* The static function nest_NAME_dims(const int64_t *dims): -1 when the sizes do not fit, else
 * the bytes of workspace they need. */
void em_dims_check(ctx *c);
void em_literal(buf *b, int etype, const fx *e);
/* The index of element (vars) of a strided view: off + sum(var_k * st_k). */
void em_index(ctx *c, buf *b, int32_t bufi, int64_t off, const int64_t *st, int rank);
/* Appends the C text of operand e: a local's name, a load or a literal. */
void em_operand(body *bd, buf *b, const fx *e);
/* Appends a trailing comment naming the graph node of e. */
void em_node_comment(ctx *c, buf *b, int32_t node);
/* Emits the statements computing the values at the current indexes; afterwards em_value_text
 * gives each root's value. */
void em_values(ctx *c, body *bd, fx *const *roots, int n);
char *em_value_text(body *bd, const fx *e);
void em_init_text(buf *b, int op, int etype);
/* "acc op= value" as the template of the reduction. */
char *em_combine(ctx *c, int op, int etype, const char *acc, const char *value);

/* Whether a reduction is argmax or argmin: it folds an index, one step at a time. */
static inline bool em_is_arg(int reduce) { return reduce == OP_ARGMAX || reduce == OP_ARGMIN; }
/* emit_loops.c */
/* Evaluates vals and stores or folds each into its output. */
void em_outputs(ctx *c, const nout *outs, fx *const *vals, int nouts);
void em_nest_comment(ctx *c);
/* Whether a nest has iterations to run (a fold over nothing still writes its initial values). */
bool em_nest_runs(const nest *ne);
void em_nest(ctx *c, int32_t k);
/* A nest's block: its comment, "{", the temporaries it touches; and its end. em_nest_open is
 * em_nest_start (the nest's names and comment) and em_nest_enter ("{" and the temporaries),
 * between which more comment may go. */
void em_nest_open(ctx *c, int32_t k);
void em_nest_start(ctx *c, int32_t k);
void em_nest_enter(ctx *c, int32_t k);
void em_nest_close(ctx *c);
/* The store of output o at the index expressions in c->expr: "buf[index]". */
void em_store_text(ctx *c, buf *b, const nout *o);
/* "#pragma omp parallel for" for the loop that follows (under #ifdef _OPENMP); with c->flush,
 * a region whose threads flush denormals around their share of the loop. */
void em_omp_for(ctx *c);
/* em_omp_for, in parallel only when the C condition cond holds at run time (NULL: always). */
void em_omp_for_if(ctx *c, const char *cond);
/* The start of a parallel region whose block follows (a tiled product's): with c->flush, each
 * thread flushes denormals for the region. */
void em_omp_region(ctx *c);
/* dst = value, the value's statements first (at the index expressions in c->expr). */
void em_assign(ctx *c, const char *dst, fx *value);
/* A row group: one loop over the rows, each member nest's inner loops inside it. */
void em_group(ctx *c, int32_t lead);
/* The iterations of a nest (saturating at INT64_MAX): what decides its parallel loops. */
int64_t em_nest_work(const nest *ne);

/* emit_tile.c */
/* A product of matrices tiled by tile.c: panels or B in place, a micro-kernel call per block,
 * the absorbed outputs on the block as it leaves. */
void em_tiled(ctx *c, int32_t k);

/* emit_topk.c */
/* A topk nest (fuse.c): loops over every axis but the searched one, a helper call per row. */
void em_topk(ctx *c, int32_t k);

/* emit_conv.c */
/* A convolution or pooling nest (conv.c): its loops, its kernel's call, its store. */
void em_window(ctx *c, int32_t k);

/* emit_conv_kernels.c */
/* The static kernels of the function's convolutions, before its entry points. */
void em_window_kernels(ctx *c);
/* The C name of convolution nest k's kernel (its dense form's tail kernel: the name + _tail). */
const char *em_conv_kernel_name(ctx *c, int32_t k, char *s, size_t n);
/* Helper H_VEC.. H_VEC + 5 of the preamble: a vector type. */
void em_vec_helper(buf *b, int h);
/* The NEST_CONTRACT and NEST_KEEP macros, which tiles and convolution kernels use. */
void em_contract_macro(buf *b);

#endif /* NEST_EMIT_H */
