/*
 * emit_text.c - the texts the C emitter is made of: the helpers of the generated code and its
 * preamble, scopes of names, literals, index expressions, element expressions and the
 * statements of a body's values, and the texts of reductions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"


int em_tile_helper(int etype, int vb, int tj)
{
    int lanes = vb / (int)nest_type_size((nest_type)etype);
    bool thin = tj < tile_vectors(etype, vb) * lanes; /* narrower than tile_shape's */
    return (thin ? H_THIN : H_TILE) + 3 * (etype == NEST_F64) + (vb >= 64 ? 2 : vb >= 32 ? 1 : 0);
}

void em_helper_width(int i, int *etype, int *vector_bytes)
{
    *etype = i / 3 ? NEST_F64 : NEST_F32;
    *vector_bytes = 16 << (i % 3);
}

int em_fold_helper(int op, int etype, int lanes)
{
    int k = op == OP_SUM ? 0 : op == OP_MAX ? 1 : op == OP_MIN ? 2 : -1;
    int full = ACC_BYTES / (int)nest_type_size((nest_type)etype);
    if (k < 0 || !em_is_float(etype) || (lanes != full && lanes != full / 2))
        return -1;
    return H_FOLD + 4 * k + 2 * (etype == NEST_F64) + (lanes != full);
}

int em_hsum_helper(int etype, int lanes)
{
    int full = ACC_BYTES / (int)nest_type_size((nest_type)etype);
    if (!em_is_float(etype) || (lanes != full && lanes != full / 2))
        return -1;
    return H_HSUM + 2 * (etype == NEST_F64) + (lanes != full);
}

static void expand(buf *b, const char *tmpl, int etype, const char *const *args);

/* The combining of the lanes a[0..lanes) by op, pairwise (lane u takes lane u + w for halving
 * widths, each width in an array of its own), returned. */
static void emit_pairwise(buf *b, int op, int et, int lanes)
{
    const char *t = em_ctype(et);
    for (int w = lanes / 2; w >= 1; w /= 2) {
        char l[32], r[32];
        if (w * 2 == lanes) {
            snprintf(l, sizeof l, "a[u]");
            snprintf(r, sizeof r, "a[u + %d]", w);
        } else {
            snprintf(l, sizeof l, "a%d[u]", w * 2);
            snprintf(r, sizeof r, "a%d[u + %d]", w * 2, w);
        }
        const char *args[2] = {l, r};
        buf_printf(b, "    %s a%d[%d];\n    for (int u = 0; u < %d; u++)\n        a%d[u] = ", t, w,
                   w, w, w);
        expand(b, ir_ops[op].cfloat, et, args);
        buf_puts(b, ";\n");
    }
    buf_puts(b, "    return a1[0];\n");
}

/* The sum of a fold's partial sums: the same additions in the same order as the pairwise
 * arrays, made on vectors of GNU C where the compiler has them. Arrays of lanes went through
 * memory (a wide store read back a lane at a time): a tenth of an L2 distance of 1K floats. */
static void emit_hsum_helper(buf *b, int h)
{
    int et = (h - H_HSUM) / 2 ? NEST_F64 : NEST_F32, size = (int)nest_type_size((nest_type)et);
    int lanes = ACC_BYTES / size / ((h - H_HSUM) % 2 ? 2 : 1), nv = lanes * size / 64;
    const char *t = em_ctype(et);
    buf_printf(b, "/* the sum of a fold's %d partial sums, pairwise: lane u takes lane u + w for halving\n"
                  " * widths (under GNU C in vectors: the same additions in the same order) */\n"
                  "static inline %s nest_hsum_%s_%d(const %s *a)\n{\n#ifdef __GNUC__\n",
               lanes, t, nest_type_name((nest_type)et), lanes, t);
    for (int vb = 64; vb >= 16; vb /= 2)
        buf_printf(b, "    typedef %s v%d __attribute__((vector_size(%d), aligned(%d), may_alias));\n",
                   t, vb, vb, size);
    /* whole vectors: vector i takes vector i + nv / 2 (nv is 2 or 4) */
    if (nv == 4)
        buf_puts(b, "    v64 x64 = (((const v64 *)a)[0] + ((const v64 *)a)[2]) +\n"
                    "              (((const v64 *)a)[1] + ((const v64 *)a)[3]);\n");
    else
        buf_puts(b, "    v64 x64 = ((const v64 *)a)[0] + ((const v64 *)a)[1];\n");
    /* then the halves of a vector */
    for (int vb = 32; vb >= 16; vb /= 2)
        buf_printf(b, "    v%d x%d = ((const v%d *)&x%d)[0] + ((const v%d *)&x%d)[1];\n", vb, vb, vb,
                   vb * 2, vb, vb * 2);
    if (16 / size == 4)
        buf_puts(b, "    return (x16[0] + x16[2]) + (x16[1] + x16[3]);\n");
    else
        buf_puts(b, "    return x16[0] + x16[1];\n");
    buf_puts(b, "#else\n");
    emit_pairwise(b, OP_SUM, et, lanes);
    buf_puts(b, "#endif\n}\n\n");
}

/* The combining of a fold's lanes, in a function of its own in large functions. */
static void emit_fold_helper(buf *b, int h)
{
    static const int ops[] = {OP_SUM, OP_MAX, OP_MIN};
    int k = (h - H_FOLD) / 4, et = (h - H_FOLD) / 2 % 2 ? NEST_F64 : NEST_F32;
    int lanes = ACC_BYTES / (int)nest_type_size((nest_type)et) / ((h - H_FOLD) % 2 ? 2 : 1);
    const char *t = em_ctype(et), *tn = nest_type_name((nest_type)et);
    const ir_opinfo *info = &ir_ops[ops[k]];
    buf_printf(b, "/* the %s of a fold's %d partial results */\n"
                  "static NEST_NOINLINE %s nest_fold_%s_%s_%d(%s *a)\n{\n",
               info->name, lanes, t, info->name, tn, lanes, t);
    if (ops[k] == OP_SUM)
        buf_printf(b, "    return nest_hsum_%s_%d(a);\n", tn, lanes);
    else
        emit_pairwise(b, ops[k], et, lanes);
    buf_puts(b, "}\n\n");
}

/* The micro-kernel of a tiled product, ti x tj, a function of its own so that every compiler
 * keeps its accumulators in registers (inside an OpenMP-outlined loop some do not). A block of
 * fewer rows (the last of a product, or all of a small batch) has a loop of its own row count
 * up to TILE_ROW_CASES rows (a count known to the compiler keeps the accumulators in
 * registers), else goes one row at a time. */
#define TILE_ROW_CASES 8

/* The loop over k of `rows` rows of `cols` columns of a tile whose rows are `stride` apart in
 * acc. One vector of columns: each row a statement of its own (as a loop over the rows, clang
 * vectorized that loop with gathers for the thin 16 x 16 tile, 72 GFLOP/s against 180 on a Zen
 * 5 core, and at the JIT's unrolling budget kept three of a 4 x 16 block's four rows of sums in
 * memory, 10 against 113; gcc 21 against 150). Wider, a loop over the rows (gcc's code for 4 x
 * 32 and 4 x 48 ran at half the speed written out; clang's the same either way). */
static void emit_tile_rows(buf *b, const char *t, int rows, int cols, int stride, int lanes)
{
    if (cols > lanes) {
        buf_printf(b,
                   "        for (int64_t k = 0; k < n; k++, panel += sp)\n"
                   "            for (int ii = 0; ii < %d; ii++) {\n"
                   "                const %s av = a[ii * si + k * sk];\n"
                   "                for (int jj = 0; jj < %d; jj++)\n"
                   "                    acc[ii * %d + jj] = acc[ii * %d + jj] + av * panel[jj];\n"
                   "            }\n",
                   rows, t, cols, stride, stride);
        return;
    }
    buf_printf(b, "        for (int64_t k = 0; k < n; k++, panel += sp) {\n"
                  "            const %s a0 = a[k * sk]", t);
    for (int i = 1; i < rows; i++)
        buf_printf(b, ",%s a%d = a[%d * si + k * sk]", i % 4 ? "" : "\n                   ", i, i);
    buf_printf(b, ";\n            for (int jj = 0; jj < %d; jj++) {\n", cols);
    for (int i = 0; i < rows; i++)
        buf_printf(b, "                acc[%d + jj] = acc[%d + jj] + a%d * panel[jj];\n", i * stride,
                   i * stride, i);
    buf_puts(b, "            }\n        }\n");
}

/* A tile's rows one at a time, each summed in a local row of `cols` (C text, at most tj)
 * columns: rows the kernel has no case of its own for. acc's rows are tj apart; with add, a
 * row starts from acc only when the kernel's add says so (else acc is zero already). */
static void emit_tile_row_by_row(buf *b, const char *t, const char *cols, int tj, bool add)
{
    buf_printf(b,
               "        for (int ii = 0; ii < rows; ii++) {\n"
               "            const %s *restrict p = panel;\n"
               "            %s row[%d];\n"
               "            for (int jj = 0; jj < %s; jj++)\n"
               "                row[jj] = %sacc[ii * %d + jj]%s;\n"
               "            for (int64_t k = 0; k < n; k++, p += sp) {\n"
               "                const %s av = a[ii * si + k * sk];\n"
               "                for (int jj = 0; jj < %s; jj++)\n"
               "                    row[jj] = row[jj] + av * p[jj];\n"
               "            }\n"
               "            for (int jj = 0; jj < %s; jj++)\n"
               "                acc[ii * %d + jj] = row[jj];\n"
               "        }\n",
               t, t, tj, cols, add ? "add ? " : "", tj, add ? " : 0" : "", t, cols, cols, tj);
}

static void emit_tile_fn(buf *b, int et, int ti, int tj, int lanes, bool maybe_unused)
{
    const char *t = em_ctype(et), *tn = nest_type_name((nest_type)et);
    buf_printf(b,
               "/* out[rows x %d] = sum over k < n of a[i * si + k * sk] * panel[k * sp + 0..%d), in k\n"
               " * order, for rows <= %d (with add: out plus that sum, a block of k after others):\n"
               " * the block of a product of matrices, in registers, each step one multiply-add\n"
               " * (fused where the CPU has them); summed in out itself, which restrict lets\n"
               " * compilers hold in registers and store once */\n"
               "static NEST_NOINLINE NEST_CONTRACT%s void nest_tile_%s_%dx%d(int rows, int64_t n, const %s *restrict a, int64_t si,\n"
               "                             int64_t sk, const %s *restrict panel, int64_t sp,\n"
               "                             %s *restrict out, int add)\n"
               "{\n"
               "    %s *restrict acc = out;\n"
               "    if (!add)\n"
               "        for (int t = 0; t < %d; t++)\n"
               "            acc[t] = 0;\n",
               tj, tj, ti, maybe_unused ? " NEST_UNUSED" : "", tn, ti, tj, t, t, t, t, ti * tj);
    int cases = ti <= TILE_ROW_CASES ? ti : 1;
    for (int r = ti; r > ti - cases; r--) {
        buf_printf(b, "    %sif (rows == %d) {\n", r < ti ? "} else " : "", r);
        emit_tile_rows(b, t, r, tj, tj, lanes);
    }
    if (cases < ti) {
        char cols[16];
        snprintf(cols, sizeof cols, "%d", tj);
        buf_puts(b, "    } else {\n");
        emit_tile_row_by_row(b, t, cols, tj, false);
    }
    buf_puts(b, "    }\n}\n\n");
}

/* The last block of a product whose columns end inside a tile (ti x tj): its first nv vectors
 * of columns (fewer than the tile's), in acc's rows tj apart as the tile's, so that the block
 * leaves as any other. The whole tile computed the columns past the product's end as well
 * (a 1x1 convolution on 28x28: 784 positions in 832 columns). A full block of rows holds its
 * columns in registers; fewer rows go one at a time. */
static void emit_tile_edge_fn(buf *b, int et, int ti, int tj, int lanes)
{
    const char *t = em_ctype(et), *tn = nest_type_name((nest_type)et);
    buf_printf(b,
               "/* the first nv * %d columns of nest_tile_%s_%dx%d's out (nv < %d): a last block of\n"
               " * fewer columns */\n"
               "static NEST_NOINLINE NEST_CONTRACT NEST_UNUSED void nest_tile_%s_%dx%d_edge(int rows, int nv, int64_t n,\n"
               "                             const %s *restrict a, int64_t si, int64_t sk,\n"
               "                             const %s *restrict panel, int64_t sp, %s *restrict out, int add)\n"
               "{\n"
               "    %s *restrict acc = out;\n",
               lanes, tn, ti, tj, tj / lanes, tn, ti, tj, t, t, t, t);
    for (int nv = 1; nv < tj / lanes; nv++) {
        buf_printf(b,
                   "    %sif (rows == %d && nv == %d) {\n"
                   "        if (!add)\n"
                   "            for (int ii = 0; ii < %d; ii++)\n"
                   "                for (int jj = 0; jj < %d; jj++)\n"
                   "                    acc[ii * %d + jj] = 0;\n",
                   nv > 1 ? "} else " : "", ti, nv, ti, nv * lanes, tj);
        emit_tile_rows(b, t, ti, nv * lanes, tj, lanes);
    }
    char cols[32];
    snprintf(cols, sizeof cols, "nv * %d", lanes);
    buf_puts(b, "    } else {\n");
    emit_tile_row_by_row(b, t, cols, tj, true);
    buf_puts(b, "    }\n}\n\n");
}

/* A square of L x L elements (L the lanes of the tile's vectors) transposed: d[k * ds + j] =
 * s[j * ss + k]. It packs the panels of a second factor read across its rows (emit_tile.c).
 * Under GNU C with __builtin_shufflevector (clang; gcc from 12) on vectors: log2(L) rounds in
 * which rows i and i + L/2 interleave (a round rotates the bits of an element's (row, column)
 * by one: after log2(L) rounds they are (column, row)). Element by element, a transposed pack
 * ran as scattered single stores: 15% of a 1x1 convolution of 1024 channels on 14x14. */
static void emit_transpose_fn(buf *b, int et, int lanes)
{
    const char *t = em_ctype(et), *tn = nest_type_name((nest_type)et);
    int vb = lanes * (int)nest_type_size((nest_type)et), half = lanes / 2;
    buf_printf(b,
               "/* d[k * ds + j] = s[j * ss + k] for j, k < %d */\n"
               "static inline NEST_UNUSED void nest_transpose_%s_%d(%s *restrict d, int64_t ds,\n"
               "                                                 const %s *restrict s, int64_t ss)\n"
               "{\n"
               "#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)\n"
               "    typedef %s v __attribute__((vector_size(%d)));\n"
               "    typedef %s u __attribute__((vector_size(%d), aligned(%d), may_alias));\n"
               "    v r[%d], q[%d];\n"
               "    for (int j = 0; j < %d; j++)\n"
               "        r[j] = *(const u *)(s + j * ss);\n",
               lanes, tn, lanes, t, t, t, vb, t, vb, (int)nest_type_size((nest_type)et), lanes,
               lanes, lanes);
    int rounds = 0;
    for (int l = lanes; l > 1; l /= 2)
        rounds++;
    for (int k = 0; k < rounds; k++) {
        const char *from = k % 2 ? "q" : "r", *to = k % 2 ? "r" : "q";
        buf_printf(b, "    for (int i = 0; i < %d; i++) {\n", half);
        for (int h = 0; h < 2; h++) {
            buf_printf(b, "        %s[2 * i + %d] = __builtin_shufflevector(%s[i], %s[i + %d]", to, h,
                       from, from, half);
            for (int m = 0; m < half; m++)
                buf_printf(b, ", %d, %d", h * half + m, lanes + h * half + m);
            buf_puts(b, ");\n");
        }
        buf_puts(b, "    }\n");
    }
    buf_printf(b,
               "    for (int k = 0; k < %d; k++)\n"
               "        *(u *)(d + k * ds) = %s[k];\n"
               "#else\n"
               "    for (int k = 0; k < %d; k++)\n"
               "        for (int j = 0; j < %d; j++)\n"
               "            d[k * ds + j] = s[j * ss + k];\n"
               "#endif\n"
               "}\n\n",
               lanes, rounds % 2 ? "q" : "r", lanes, lanes);
}

/* The tile of tile_shape and the transpose of its panels' packing, or (thin) every thin tile
 * narrower than it (tile_thin_shape; a bit of the helpers' mask for each would take more bits
 * than it has: those a function does not call are NEST_UNUSED). */
static void emit_tile_helper(buf *b, int h, bool thin)
{
    int base = thin ? H_THIN : H_TILE;
    int et, vb, ti, tj;
    em_helper_width(h - base, &et, &vb);
    int lanes = vb / (int)nest_type_size((nest_type)et);
    if (!thin) {
        tile_shape(et, vb, &ti, &tj);
        emit_tile_fn(b, et, ti, tj, lanes, false);
        emit_tile_edge_fn(b, et, ti, tj, lanes);
        return;
    }
    for (int nv = 1; nv < tile_vectors(et, vb); nv++) {
        tile_thin_shape(et, vb, nv, &ti, &tj);
        emit_tile_fn(b, et, ti, tj, lanes, tile_vectors(et, vb) > 2);
    }
}

/* Stores past the caches of n elements (a multiple of 64 bytes' worth) from a to d (64-byte
 * aligned), as clang's nontemporal stores or gcc's movnt builtins with AVX-512, plain stores
 * elsewhere; and NEST_STREAM_FENCE, which orders them before what follows. */
static void emit_stream_helper(buf *b, int h)
{
    bool f64 = h > H_STREAM;
    const char *t = f64 ? "double" : "float", *s = f64 ? "pd" : "ps";
    int l = f64 ? 8 : 16;
    buf_printf(b,
               "/* n %ss (a multiple of %d) from a to d (aligned to 64 bytes) past the caches: a\n"
               " * result too large to stay in them is written without reading its lines first */\n"
               "static inline void nest_stream_%s(%s *restrict d, const %s *restrict a, int n)\n"
               "{\n"
               "#if defined(__clang__)\n"
               "    typedef %s v __attribute__((vector_size(64), aligned(64)));\n"
               "    typedef %s u __attribute__((vector_size(64), aligned(%d)));\n"
               "    for (int i = 0; i < n; i += %d) {\n"
               "        v x = *(const u *)(a + i); /* the store's alignment is its value's */\n"
               "        __builtin_nontemporal_store(x, (v *)(d + i));\n"
               "    }\n"
               "#elif defined(__GNUC__) && defined(__AVX512F__)\n"
               "    typedef %s u __attribute__((vector_size(64), aligned(%d)));\n"
               "    for (int i = 0; i < n; i += %d)\n"
               "        __builtin_ia32_movnt%s512(d + i, *(const u *)(a + i));\n"
               "#else\n"
               "    for (int i = 0; i < n; i++)\n"
               "        d[i] = a[i];\n"
               "#endif\n"
               "}\n\n",
               t, l, f64 ? "f64" : "f32", t, t, t, t, f64 ? 8 : 4, l, t, f64 ? 8 : 4, l, s);
    buf_puts(b, "#ifndef NEST_STREAM_FENCE /* those stores done before what follows */\n"
                "#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))\n"
                "#define NEST_STREAM_FENCE() __builtin_ia32_sfence()\n"
                "#else\n"
                "#define NEST_STREAM_FENCE() (void)0\n"
                "#endif\n"
                "#endif\n\n");
}

const char *em_ctype(int etype)
{
    static const char *const tnames[] = {"float", "double", "int32_t", "int64_t", "uint8_t"};
    return tnames[etype];
}

bool em_is_float(int etype) { return etype == NEST_F32 || etype == NEST_F64; }

/* Helpers of the op set of real models. */
/* topk of one row of a NUM type: insertion into the k best for k <= TOPK_INSERT, else a stable
 * bottom-up merge sort of the row's indices in tmp. */
static void emit_topk_helper(buf *b, int et)
{
    const char *t = em_ctype(et), *tn = nest_type_name((nest_type)et);
    if (em_is_float(et))
        buf_printf(b,
                   "/* whether a comes before b in a topk: the better value, a NaN beyond every "
                   "number */\n"
                   "static int nest_topk_better_%s(%s a, %s b, int largest)\n{\n"
                   "    if (a != a || b != b)\n"
                   "        return largest ? a != a && b == b : a == a && b != b;\n"
                   "    return largest ? a > b : a < b;\n}\n",
                   tn, t, t);
    else
        buf_printf(b,
                   "static int nest_topk_better_%s(%s a, %s b, int largest)\n{\n"
                   "    return largest ? a > b : a < b;\n}\n",
                   tn, t, t);
    buf_printf(b,
               "/* topk of the row x[0], x[s], ... x[(n - 1) s]: its k best, in order (ties by "
               "index), into\n"
               " * v[0], v[sv], ... and their indices into ix[0], ix[si], ...; tmp holds 2 n "
               "indices when k > %d */\n"
               "static void nest_topk_%s(const %s *x, int64_t n, int64_t s, int64_t k, int largest,\n"
               "                         %s *v, int64_t sv, int64_t *ix, int64_t si, int64_t *tmp)\n"
               "{\n"
               "    if (k <= %d) {\n"
               "        %s best[%d] = {0};\n"
               "        int64_t at[%d] = {0}, cnt = 0;\n"
               "        for (int64_t j = 0; j < n && k > 0; j++) {\n"
               "            const %s xj = x[j * s];\n"
               "            if (cnt == k && !nest_topk_better_%s(xj, best[k - 1], largest))\n"
               "                continue;\n"
               "            int64_t p = cnt < k ? cnt++ : k - 1;\n"
               "            for (; p > 0 && nest_topk_better_%s(xj, best[p - 1], largest); p--) {\n"
               "                best[p] = best[p - 1];\n"
               "                at[p] = at[p - 1];\n"
               "            }\n"
               "            best[p] = xj;\n"
               "            at[p] = j;\n"
               "        }\n"
               "        for (int64_t j = 0; j < k; j++) {\n"
               "            v[j * sv] = best[j];\n"
               "            ix[j * si] = at[j];\n"
               "        }\n"
               "        return;\n"
               "    }\n"
               "    int64_t *ord = tmp, *aux = tmp + n;\n"
               "    for (int64_t j = 0; j < n; j++)\n"
               "        ord[j] = j;\n"
               "    for (int64_t w = 1; w < n; w *= 2) {\n"
               "        for (int64_t lo = 0; lo < n; lo += 2 * w) {\n"
               "            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;\n"
               "            int64_t p = lo, q = mid, o = lo;\n"
               "            while (p < mid && q < hi)\n"
               "                aux[o++] = nest_topk_better_%s(x[ord[q] * s], x[ord[p] * s], largest)"
               " ? ord[q++]\n"
               "                                                                            : ord[p++];\n"
               "            while (p < mid)\n"
               "                aux[o++] = ord[p++];\n"
               "            while (q < hi)\n"
               "                aux[o++] = ord[q++];\n"
               "        }\n"
               "        int64_t *swap = ord;\n"
               "        ord = aux;\n"
               "        aux = swap;\n"
               "    }\n"
               "    for (int64_t j = 0; j < k; j++) {\n"
               "        v[j * sv] = x[ord[j] * s];\n"
               "        ix[j * si] = ord[j];\n"
               "    }\n"
               "}\n",
               TOPK_INSERT, tn, t, t, TOPK_INSERT, t, TOPK_INSERT, TOPK_INSERT, t, tn, tn, tn);
}

static void emit_model_helper(buf *b, int h)
{
    if (h >= H_TOPK && h < H_TOPK + 4) {
        emit_topk_helper(b, NEST_F32 + (h - H_TOPK));
        return;
    }
    if (h == H_TAKE) {
        buf_puts(b, "/* element i of an axis of n > 0 (gather): a negative i counts from the end; then\n"
                    " * clamped to the axis */\n"
                    "static int64_t nest_take(int64_t i, int64_t n)\n{\n"
                    "    if (i < 0)\n        i += n;\n"
                    "    return i < 0 ? 0 : i >= n ? n - 1 : i;\n}\n");
        return;
    }
    if (h >= H_SIGMOID && h < H_SIGMOID + 2) {
        /* exp(-|x|) never overflows: sigmoid(x) for x < 0 is e / (1 + e), down to subnormals */
        bool f64 = h - H_SIGMOID;
        const char *t = f64 ? "double" : "float", *sfx = f64 ? "" : "f";
        buf_printf(b,
                   "static %s nest_sigmoid_%s(%s x)\n{\n"
                   "    const %s e = exp%s(-fabs%s(x));\n"
                   "    return (x >= 0 ? 1 : e) / (1 + e);\n}\n",
                   t, f64 ? "f64" : "f32", t, t, sfx, sfx);
    }
}

static void emit_flush_helpers(buf *b)
{
    buf_puts(b,
             "/* Denormal floats are flushed during a call (nest_options.flush_denormals): read\n"
             " * as zero, and a result below the normal range written as zero (x86's DAZ and\n"
             " * FTZ, AArch64's FZ). Each thread sets the mode on entry and puts back what it\n"
             " * found on return, keeping the exception flags the call raised. */\n"
             "#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE__)\n"
             "static inline uint64_t nest_flush_enter(void)\n{\n"
             "    const unsigned csr = __builtin_ia32_stmxcsr();\n"
             "    __builtin_ia32_ldmxcsr(csr | 0x8040u);\n"
             "    return csr;\n}\n"
             "static inline void nest_flush_leave(uint64_t csr)\n{\n"
             "    __builtin_ia32_ldmxcsr((__builtin_ia32_stmxcsr() & ~0x8040u) | "
             "((unsigned)csr & 0x8040u));\n}\n"
             "#elif defined(__aarch64__)\n"
             "static inline uint64_t nest_flush_enter(void)\n{\n"
             "    uint64_t fpcr;\n"
             "    __asm__ __volatile__(\"mrs %0, fpcr\" : \"=r\"(fpcr));\n"
             "    __asm__ __volatile__(\"msr fpcr, %0\" : : \"r\"(fpcr | (1u << 24)));\n"
             "    return fpcr;\n}\n"
             "static inline void nest_flush_leave(uint64_t csr)\n{\n"
             "    uint64_t fpcr;\n"
             "    __asm__ __volatile__(\"mrs %0, fpcr\" : \"=r\"(fpcr));\n"
             "    fpcr = (fpcr & ~(uint64_t)(1u << 24)) | (csr & (1u << 24));\n"
             "    __asm__ __volatile__(\"msr fpcr, %0\" : : \"r\"(fpcr));\n}\n"
             "#else\n"
             "static inline uint64_t nest_flush_enter(void) { return 0; }\n"
             "static inline void nest_flush_leave(uint64_t csr) { (void)csr; }\n"
             "#endif\n\n");
}

static void emit_helper(buf *b, int h)
{
    if (h >= H_STREAM) {
        emit_stream_helper(b, h);
        return;
    }
    if (h >= H_THIN) {
        emit_tile_helper(b, h, true);
        return;
    }
    if (h == H_DIMS) {
        buf_puts(b, "/* the checked arithmetic of symbolic dims: 0 when it overflows */\n"
                    "static inline int nest_dim_mul(int64_t *a, int64_t b)\n{\n"
                    "    return !__builtin_mul_overflow(*a, b, a);\n}\n\n"
                    "static inline int nest_dim_add(int64_t *a, int64_t b)\n{\n"
                    "    return !__builtin_add_overflow(*a, b, a);\n}\n\n");
        return;
    }
    if (h == H_FLUSH) {
        emit_flush_helpers(b);
        return;
    }
    if (h >= H_VEC) {
        em_vec_helper(b, h);
        return;
    }
    if (h == H_NOINLINE) {
        buf_puts(b, "/* helpers and the parts of a large function stay functions of their own: "
                    "compiling\n * them once is faster, and calling them costs little; a tile's "
                    "block is NEST_ALIGNED\n * to a cache line */\n"
                    "#if defined(__GNUC__)\n#define NEST_NOINLINE __attribute__((noinline))\n"
                    "#define NEST_UNUSED __attribute__((unused))\n"
                    "#define NEST_ALIGNED __attribute__((aligned(64)))\n"
                    "#else\n#define NEST_NOINLINE\n#define NEST_UNUSED\n#define NEST_ALIGNED\n"
                    "#endif\n\n");
        return;
    }
    if (h >= H_SIGMOID) {
        emit_model_helper(b, h);
        return;
    }
    if (h >= H_FOLD) {
        emit_fold_helper(b, h);
        return;
    }
    if (h >= H_HSUM) {
        emit_hsum_helper(b, h);
        return;
    }
    if (h >= H_TILE) {
        emit_tile_helper(b, h, false);
        return;
    }
    if (h >= H_CVT) {
        int to = (h - H_CVT) / 2 ? NEST_I64 : NEST_I32, from = (h - H_CVT) % 2 ? NEST_F64 : NEST_F32;
        const char *t = em_ctype(to), *f = em_ctype(from), *tn = nest_type_name((nest_type)to);
        const char *lim = to == NEST_I32 ? "2147483648.0" : "9223372036854775808.0";
        const char *sfx = from == NEST_F32 ? "f" : "";
        buf_printf(b,
                   "/* %s to %s: truncates toward zero, saturates, NaN gives 0 */\n"
                   "static %s nest_cvt_%s_%s(%s x)\n{\n"
                   "    if (x != x)\n        return 0;\n"
                   "    if (x <= -%s%s)\n        return %s_MIN;\n"
                   "    if (x >= %s%s)\n        return %s_MAX;\n"
                   "    return (%s)x;\n}\n\n",
                   nest_type_name((nest_type)from), tn, t, tn, nest_type_name((nest_type)from), f,
                   lim, sfx, to == NEST_I32 ? "INT32" : "INT64", lim, sfx,
                   to == NEST_I32 ? "INT32" : "INT64", t);
        return;
    }
    int et = h / H_INT_OPS ? NEST_I64 : NEST_I32;
    const char *t = em_ctype(et), *tn = nest_type_name((nest_type)et);
    const char *u = et == NEST_I32 ? "uint32_t" : "uint64_t";
    const char *mn = et == NEST_I32 ? "INT32_MIN" : "INT64_MIN";
    switch (h % H_INT_OPS) {
    case H_ADD:
    case H_SUB:
    case H_MUL: {
        static const char *const fns[] = {"add", "sub", "mul"}, *const ops[] = {"+", "-", "*"};
        int k = h % H_INT_OPS;
        buf_printf(b, "static %s nest_%s_%s(%s a, %s b) { return (%s)((%s)a %s (%s)b); }\n", t,
                   fns[k], tn, t, t, t, u, ops[k], u);
        return;
    }
    case H_DIV:
        buf_printf(b,
                   "static %s nest_div_%s(%s a, %s b)\n{\n"
                   "    if (b == 0)\n        return 0;\n"
                   "    if (a == %s && b == -1)\n        return a;\n"
                   "    return a / b;\n}\n",
                   t, tn, t, t, mn);
        return;
    case H_POW:
        buf_printf(b,
                   "static %s nest_pow_%s(%s a, %s b)\n{\n"
                   "    %s r = 1, x = (%s)a;\n"
                   "    if (b < 0)\n        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;\n"
                   "    for (; b; b >>= 1) {\n        if (b & 1)\n            r *= x;\n"
                   "        x *= x;\n    }\n    return (%s)r;\n}\n",
                   t, tn, t, t, u, u, t);
        return;
    case H_NEG:
        buf_printf(b, "static %s nest_neg_%s(%s a) { return (%s)(0 - (%s)a); }\n", t, tn, t, t, u);
        return;
    case H_ABS:
        buf_printf(b, "static %s nest_abs_%s(%s a) { return a < 0 ? (%s)(0 - (%s)a) : a; }\n", t,
                   tn, t, t, u);
        return;
    }
}

/* What the generated code uses of the C library, declared directly: reading the system headers
 * takes the in-process compiler longer than compiling a small kernel. */
static const char jit_declarations[] =
    "/* Generated by nest for its in-process compiler, which is clang: the few declarations the\n"
    " * code needs stand in for the system headers. */\n"
    "typedef __INT32_TYPE__ int32_t;\ntypedef __INT64_TYPE__ int64_t;\n"
    "typedef __UINT8_TYPE__ uint8_t;\ntypedef __UINT32_TYPE__ uint32_t;\n"
    "typedef __UINT64_TYPE__ uint64_t;\ntypedef __SIZE_TYPE__ size_t;\n"
    "#define INT32_MIN (-__INT32_MAX__ - 1)\n#define INT32_MAX __INT32_MAX__\n"
    "#define INT64_MIN (-__INT64_MAX__ - 1)\n#define INT64_MAX __INT64_MAX__\n"
    "#define NEST_CAT_(a, b) a##b\n#define NEST_CAT(a, b) NEST_CAT_(a, b)\n"
    "#define INT64_C(c) NEST_CAT(c, __INT64_C_SUFFIX__)\n"
    "#define INFINITY __builtin_inff()\n#define NAN __builtin_nanf(\"\")\n"
    "void *malloc(size_t);\nvoid free(void *);\n"
    "float expf(float);\nfloat logf(float);\nfloat sqrtf(float);\nfloat tanhf(float);\n"
    "float powf(float, float);\nfloat fabsf(float);\n"
    "double exp(double);\ndouble log(double);\ndouble sqrt(double);\ndouble tanh(double);\n"
    "double pow(double, double);\ndouble fabs(double);\n"
    /* the op set of real models */
    "float sinf(float);\nfloat cosf(float);\nfloat tanf(float);\nfloat asinf(float);\n"
    "float acosf(float);\nfloat atanf(float);\nfloat sinhf(float);\nfloat coshf(float);\n"
    "float floorf(float);\nfloat ceilf(float);\nfloat erff(float);\n"
    "double sin(double);\ndouble cos(double);\ndouble tan(double);\ndouble asin(double);\n"
    "double acos(double);\ndouble atan(double);\ndouble sinh(double);\ndouble cosh(double);\n"
    "double floor(double);\ndouble ceil(double);\ndouble erf(double);\n\n";

void emit_preamble(buf *b, uint64_t helpers, emit_mode mode)
{
    if (mode == EMIT_JIT)
        buf_puts(b, jit_declarations);
    else
        buf_puts(b, "/* Generated by nest: self-contained C99. Build with, for example,\n"
                    " *   cc -std=c99 -O3 -march=native -mtune=generic -fopenmp-simd -shared -fPIC file.c -lm\n"
                    " * (-fopenmp as well runs large loops on several cores). */\n"
                    "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n"
                    "#include <stdlib.h>\n\n");
    bool any = false;
    /* tiles, folds and parts are NEST_NOINLINE: the macro first; tiles and convolutions' vector
     * kernels are NEST_CONTRACT too */
    uint64_t tiles = ((1ull << H_HSUM) - (1ull << H_TILE)) | ((1ull << H_STREAM) - (1ull << H_THIN));
    uint64_t vecs = (1ull << H_FLUSH) - (1ull << H_VEC);
    if (helpers & (((2ull << H_NOINLINE) - (1ull << H_FOLD)) | tiles | vecs))
        emit_helper(b, H_NOINLINE);
    if (helpers & (tiles | vecs))
        em_contract_macro(b);
    for (int h = 0; h < H_COUNT; h++)
        if (h != H_NOINLINE && (helpers & (1ull << h))) {
            emit_helper(b, h);
            any = true;
        }
    /* the squares' transpose of each type and vector width that a tile (the packs of its
     * panels, its transposed stores) or a convolution's vectors (the packs of its filters) use:
     * H_TILE and H_VEC count their types and widths alike */
    for (int i = 0; i < H_HSUM - H_TILE; i++)
        if (helpers & ((1ull << (H_TILE + i)) | (1ull << (H_VEC + i)))) {
            int et, vb;
            em_helper_width(i, &et, &vb);
            emit_transpose_fn(b, et, vb / (int)nest_type_size((nest_type)et));
        }
    if (any)
        buf_putc(b, '\n');
}

/* ---- names ---- */

static uint64_t str_hash(const char *s) { return hash_bytes(s, strlen(s)); }

static bool names_has(const names *ns, const char *s)
{
    for (; ns; ns = ns->outer) {
        if (!ns->cap)
            continue;
        for (size_t i = str_hash(s) & (ns->cap - 1); ns->v[i]; i = (i + 1) & (ns->cap - 1))
            if (strcmp(ns->v[i], s) == 0)
                return true;
    }
    return false;
}

/* Out of memory: the scope and every enclosing one say so (the function scope's flag fails the
 * emission); the name returned only keeps the caller going until then. */
static const char *names_oom(names *ns)
{
    for (; ns; ns = ns->outer)
        ns->oom = true;
    return "_";
}

const char *em_names_add(names *ns, const char *s)
{
    if ((ns->n + 1) * 2 > ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        char **v = calloc(cap, sizeof *v);
        if (!v)
            return names_oom(ns);
        for (size_t i = 0; i < ns->cap; i++)
            if (ns->v[i]) {
                size_t j = str_hash(ns->v[i]) & (cap - 1);
                while (v[j])
                    j = (j + 1) & (cap - 1);
                v[j] = ns->v[i];
            }
        free(ns->v);
        ns->v = v;
        ns->cap = cap;
    }
    char *d = strdup(s);
    if (!d)
        return names_oom(ns);
    size_t j = str_hash(d) & (ns->cap - 1);
    while (ns->v[j])
        j = (j + 1) & (ns->cap - 1);
    ns->v[j] = d;
    ns->n++;
    return d;
}

char *em_finish(ctx *c, buf *t)
{
    char *s = buf_finish(t);
    if (!s)
        c->b->failed = true;
    return s;
}

/* base, or base_1, base_2, ... : the first that no scope uses; recorded in ns. base itself is
 * not taken when C or its library claims it (no C library name ends in _<digits>). */
const char *em_unique(names *ns, const char *base)
{
    if (!names_has(ns, base) && !is_c_keyword(base) && !is_c_library_name(base))
        return em_names_add(ns, base);
    char s[IR_MAX_NAME + 32];
    for (int k = 1;; k++) {
        snprintf(s, sizeof s, "%s_%d", base, k);
        if (!names_has(ns, s))
            return em_names_add(ns, s);
    }
}

void em_names_free(names *ns)
{
    for (size_t i = 0; i < ns->cap; i++)
        free(ns->v[i]);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

void em_dim(ctx *c, buf *b, int64_t d)
{
    if (dim_is_sym(d))
        dim_format_with(b, c->f, d, c->dimname);
    else
        buf_printf(b, "%lld", (long long)d);
}

char *em_dim_text(ctx *c, int64_t d)
{
    buf t = {0};
    em_dim(c, &t, d);
    return em_finish(c, &t);
}

void em_line(ctx *c, const char *fmt, ...)
{
    for (int i = 0; i < c->indent; i++)
        buf_puts(c->b, "    ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(c->b, fmt, ap);
    va_end(ap);
    buf_putc(c->b, '\n');
}

/* ---- expressions ---- */

void em_literal(buf *b, int etype, const fx *e)
{
    switch (etype) {
    case NEST_F32:
    case NEST_F64: {
        double v = e->imm.f;
        const char *cast = etype == NEST_F32 ? "" : "(double)";
        if (isnan(v)) {
            buf_printf(b, "%sNAN", cast);
        } else if (isinf(v)) {
            buf_printf(b, "%s%sINFINITY", v < 0 ? "(-" : "", cast);
            if (v < 0)
                buf_putc(b, ')');
        } else {
            char s[48];
            format_float(s, sizeof s, etype, v);
            bool point = strpbrk(s, ".en") != NULL;
            if (v < 0 || signbit(v))
                buf_printf(b, "(%s%s%s)", s, point ? "" : ".0", etype == NEST_F32 ? "f" : "");
            else
                buf_printf(b, "%s%s%s", s, point ? "" : ".0", etype == NEST_F32 ? "f" : "");
        }
        return;
    }
    case NEST_I32:
        if (e->imm.i == INT32_MIN)
            buf_puts(b, "INT32_MIN");
        else
            buf_printf(b, e->imm.i < 0 ? "(%lld)" : "%lld", (long long)e->imm.i);
        return;
    case NEST_I64:
        if (e->imm.i == INT64_MIN)
            buf_puts(b, "INT64_MIN");
        else
            buf_printf(b, e->imm.i < 0 ? "INT64_C(%lld)" : "INT64_C(%lld)", (long long)e->imm.i);
        return;
    default:
        buf_puts(b, e->imm.i ? "1" : "0");
        return;
    }
}

/* The index of element (vars) of a strided view: off + sum(var_k * st_k). */
void em_index(ctx *c, buf *b, int32_t bufi, int64_t off, const int64_t *st, int rank)
{
    bool any = false;
    /* a temporary shrunk to one row of a row group is indexed within the row */
    int from = bufi >= 0 && c->p->bufs[bufi].row ? 1 : 0;
    for (int k = from; k < rank; k++) {
        if (st[k] == 0)
            continue;
        const char *v = c->expr[k];
        bool compound = strchr(v, ' ') != NULL;
        if (any)
            buf_puts(b, " + ");
        if (st[k] == 1)
            buf_puts(b, v);
        else
            buf_printf(b, compound ? "(%s) * %lld" : "%s * %lld", v, (long long)st[k]);
        any = true;
    }
    if (!any)
        buf_printf(b, "%lld", (long long)off);
    else if (off)
        buf_printf(b, off < 0 ? " - %lld" : " + %lld", (long long)(off < 0 ? -off : off));
}


int32_t *em_id_int(ctx *c, id_ints *ix, const fx *e)
{
    int32_t *v = fx_id_array(ix->v, &ix->cap, e, sizeof *v, 0);
    if (!v) {
        c->b->failed = true;
        return NULL;
    }
    ix->v = v;
    return &v[e->id];
}

void em_id_ints_free(id_ints *ix)
{
    free(ix->v);
    memset(ix, 0, sizeof *ix);
}

static valref *find_ref(body *bd, const fx *e)
{
    ctx *c = bd->c;
    if (!bd->stamp || (size_t)e->id >= c->refbody.cap || c->refbody.v[e->id] != bd->stamp)
        return NULL;
    return &bd->v[c->refidx.v[e->id]];
}

/* Appends the C text of operand e: a local's name, a load or a literal. */
void em_operand(body *bd, buf *b, const fx *e)
{
    ctx *c = bd->c;
    valref *r = find_ref(bd, e);
    if (r && r->name) {
        buf_puts(b, r->name);
        return;
    }
    if (e == c->tile_view) { /* a tiled product read where it is computed: its register */
        buf_puts(b, c->tile_text);
        return;
    }
    if ((size_t)e->id < c->hoisted.cap) {
        int32_t h = c->hoisted.v[e->id] - 1;
        if (h >= 0 && (size_t)h < c->nhoist && c->hoist[h].e == e) {
            buf_puts(b, c->hoist[h].name);
            return;
        }
    }
    switch (e->kind) {
    case FX_LOAD:
        if (e->buf == FX_IOTA) { /* the index itself */
            buf_putc(b, '(');
            em_index(c, b, e->buf, e->off, e->st, e->rank);
            buf_putc(b, ')');
            return;
        }
        buf_printf(b, "%s[", c->bufname[e->buf]);
        em_ref(c, e->buf);
        em_index(c, b, e->buf, e->off, e->st, e->rank);
        for (int j = 0; j < e->nargs; j++) { /* gather terms: the index taken, clamped */
            *c->helpers |= 1ull << H_TAKE;
            buf_printf(b, " + %lld * nest_take(", (long long)e->gst[j]);
            em_operand(bd, b, e->args[j]);
            buf_puts(b, ", "); /* the axis: a symbolic one as its dims' C */
            em_dim(c, b, e->gdim[j]);
            buf_putc(b, ')');
        }
        buf_putc(b, ']');
        return;
    case FX_IMM:
        em_literal(b, e->etype, e);
        return;
    default:
        /* never: ops are named before their users and concats split their loops; if it
         * happens, an undeclared name fails the compile rather than compute a wrong value */
        buf_puts(b, "nest_internal_error_unsplit_value");
        return;
    }
}

static int int_helper(int op, int etype)
{
    int base;
    switch (op) {
    case OP_ADD: case OP_SUM: base = H_ADD; break;
    case OP_SUBTRACT: base = H_SUB; break;
    case OP_MULTIPLY: case OP_PRODUCT: base = H_MUL; break;
    case OP_DIVIDE: base = H_DIV; break;
    case OP_POWER: base = H_POW; break;
    case OP_NEGATIVE: base = H_NEG; break;
    case OP_ABS: base = H_ABS; break;
    default: return -1;
    }
    return base + (etype == NEST_I64 ? H_INT_OPS : 0);
}

/* Expands a template of ops.def with operand texts. */
static void expand(buf *b, const char *tmpl, int etype, const char *const *args)
{
    for (const char *t = tmpl; *t; t++) {
        if (*t != '$') {
            buf_putc(b, *t);
            continue;
        }
        t++;
        if (*t >= '0' && *t <= '9')
            buf_puts(b, args[*t - '0']);
        else if (*t == 'T')
            buf_puts(b, nest_type_name((nest_type)etype));
        else if (*t == 'F')
            buf_puts(b, etype == NEST_F32 ? "f" : "");
    }
}

/* The C expression computing op node e from its operands. */
static void op_text(body *bd, buf *b, const fx *e)
{
    ctx *c = bd->c;
    /* an integer compared with itself (operands are hash-consed: the same pointer): compilers
     * warn that the comparison is constant, so the C says the constant (floats compare: NaN
     * is not equal to itself) */
    if (e->nargs == 2 && e->args[0] == e->args[1] && !em_is_float(e->args[0]->etype)) {
        switch (e->op) {
        case OP_EQUAL: case OP_LESS_EQ: case OP_GREATER_EQ: buf_puts(b, "1"); return;
        case OP_LESS: case OP_GREATER: case OP_NOT_EQUAL: buf_puts(b, "0"); return;
        case OP_AND: case OP_OR: em_operand(bd, b, e->args[0]); return;
        case OP_MAXIMUM: case OP_MINIMUM: em_operand(bd, b, e->args[0]); return;
        default: break;
        }
    }
    char *args[3] = {NULL, NULL, NULL};
    for (int i = 0; i < e->nargs && i < 3; i++) {
        buf t = {0};
        em_operand(bd, &t, e->args[i]);
        args[i] = em_finish(bd->c, &t);
        if (!args[i])
            bd->oom = true;
    }
    if (bd->oom)
        goto out;
    if (e->op == OP_CONVERT) {
        int from = e->args[0]->etype, to = e->etype;
        if (from == to)
            buf_puts(b, args[0]);
        else if (to == NEST_BOOL)
            buf_printf(b, "%s != 0", args[0]);
        else if (em_is_float(from) && !em_is_float(to)) {
            int h = H_CVT + 2 * (to == NEST_I64) + (from == NEST_F64);
            *c->helpers |= 1ull << h;
            buf_printf(b, "nest_cvt_%s_%s(%s)", nest_type_name((nest_type)to),
                       nest_type_name((nest_type)from), args[0]);
        } else
            buf_printf(b, "(%s)%s", em_ctype(to), args[0]);
        goto out;
    }
    int at = e->args[e->nargs - 1]->etype; /* the operands' type (select: of its values) */
    const ir_opinfo *info = &ir_ops[e->op];
    const char *tmpl = em_is_float(at) ? info->cfloat : info->cint;
    if (!em_is_float(at)) {
        int h = int_helper(e->op, at);
        if (h >= 0 && strstr(tmpl, "nest_"))
            *c->helpers |= 1ull << h;
    } else if (e->op == OP_SIGMOID) {
        *c->helpers |= 1ull << (H_SIGMOID + (at == NEST_F64));
    }
    expand(b, tmpl, at, (const char *const *)args);
out:
    for (int i = 0; i < 3; i++)
        free(args[i]);
}

/* Appends a trailing comment naming the graph node of e. */
void em_node_comment(ctx *c, buf *b, int32_t node)
{
    if (node < 0)
        return;
    buf t = {0};
    print_node(&t, &c->nm, node, 4);
    char *s = em_finish(c, &t);
    if (s) {
        if (strlen(s) > 100)
            strcpy(s + 96, "...");
        /* a comment never holds the end of a comment */
        for (char *q = s; (q = strstr(q, "*/")); q++)
            q[1] = '|';
        buf_printf(b, "    /* %s */", s);
    }
    free(s);
}

static void count_uses(fx *e, void *ctx_)
{
    body *bd = ctx_;
    valref *v = grow_array(bd->v, &bd->cap, bd->n, sizeof *v);
    if (v)
        bd->v = v;
    int32_t *stamp = em_id_int(bd->c, &bd->c->refbody, e), *idx = em_id_int(bd->c, &bd->c->refidx, e);
    if (!v || !stamp || !idx) {
        bd->oom = true;
        return;
    }
    *stamp = bd->stamp;
    *idx = (int32_t)bd->n;
    bd->v[bd->n++] = (valref){e, NULL, 0, 0};
    for (int i = 0; i < e->nargs; i++) {
        valref *r = find_ref(bd, e->args[i]);
        if (r)
            r->uses++;
    }
}

/* Emits the statements computing the nest's values at the current indexes; afterwards
 * em_value_text() gives each output's value. Ops used more than once, or by other ops, get a
 * local named after their graph node; in a nest whose values come first (inplace.c), every
 * output's value does, loads too, so that no store precedes a read. */
void em_values(ctx *c, body *bd, fx *const *roots, int n)
{
    bd->stamp = ++c->nbodies;
    if (!fx_walk(c->mp, roots, n, count_uses, bd) || bd->oom)
        return;
    for (int i = 0; i < n; i++) {
        valref *r = find_ref(bd, roots[i]);
        if (r)
            r->outputs++;
    }
    bool first = c->ne && c->ne->values_first;
    for (size_t i = 0; i < bd->n; i++) {
        valref *r = &bd->v[i];
        const fx *e = r->e;
        if (first && e->kind == FX_LOAD && r->outputs > 0) {
            buf t = {0};
            em_operand(bd, &t, e);
            char *s = em_finish(c, &t);
            const char *name = em_unique(c->body_names, e->node >= 0 ? namer_name(&c->nm, e->node) : "t");
            if (!s) {
                bd->oom = true;
                return;
            }
            em_line(c, "%s %s = %s;", em_ctype(e->etype), name, s);
            free(s);
            r->name = name;
            continue;
        }
        if (e->kind != FX_OP || (r->uses == 0 && r->outputs == 1 && !first))
            continue; /* used once, as an output: inlined there */
        const char *base = e->node >= 0 ? namer_name(&c->nm, e->node) : "t";
        const char *name = em_unique(c->body_names, base);
        buf t = {0};
        op_text(bd, &t, e);
        char *s = em_finish(c, &t);
        if (!s) {
            bd->oom = true;
            return;
        }
        buf cm = {0};
        em_node_comment(c, &cm, e->node);
        char *cs = em_finish(c, &cm);
        em_line(c, "%s %s = %s;%s", em_ctype(e->etype), name, s, cs ? cs : "");
        free(s);
        free(cs);
        r->name = name;
    }
}

/* The C text of a root value (a local, a load, a literal, or its inlined op). */
char *em_value_text(body *bd, const fx *e)
{
    buf t = {0};
    valref *r = find_ref(bd, e);
    if (e->kind == FX_OP && !(r && r->name))
        op_text(bd, &t, e);
    else
        em_operand(bd, &t, e);
    return em_finish(bd->c, &t);
}

/* ---- reductions ---- */

void em_init_text(buf *b, int op, int etype)
{
    if (op == OP_SUM || op == OP_PRODUCT) {
        const char *v = op == OP_SUM ? "0" : "1";
        buf_printf(b, "%s%s", v, em_is_float(etype) ? (etype == NEST_F32 ? ".0f" : ".0") : "");
        return;
    }
    bool max = op == OP_MAX || op == OP_ARGMAX; /* an argmax's best value starts at the lowest */
    switch (etype) {
    case NEST_F32: buf_puts(b, max ? "-INFINITY" : "INFINITY"); return;
    case NEST_F64: buf_puts(b, max ? "(double)-INFINITY" : "(double)INFINITY"); return;
    case NEST_I32: buf_puts(b, max ? "INT32_MIN" : "INT32_MAX"); return;
    default: buf_puts(b, max ? "INT64_MIN" : "INT64_MAX"); return;
    }
}

/* "acc op= value" as the template of the reduction. */
char *em_combine(ctx *c, int op, int etype, const char *acc, const char *value)
{
    const ir_opinfo *info = &ir_ops[op];
    const char *tmpl = em_is_float(etype) ? info->cfloat : info->cint;
    if (!em_is_float(etype)) {
        int h = int_helper(op, etype);
        if (h >= 0 && strstr(tmpl, "nest_"))
            *c->helpers |= 1ull << h;
    }
    const char *args[2] = {acc, value};
    buf t = {0};
    expand(&t, tmpl, etype, args);
    return em_finish(c, &t);
}
