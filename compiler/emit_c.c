/*
 * emit_c.c - C99 text of a planned function.
 *
 * Each nest becomes a block that opens with a comment naming the graph nodes it computes. The
 * loop nest runs the iteration space with constant bounds; its body evaluates the element
 * expressions once each (named after their graph nodes) and stores or folds them into the
 * outputs. Float reductions whose innermost axis folds keep several partial accumulators, so
 * that compilers vectorize them under strict IEEE rules and the sum is at least as accurate as
 * a sequential one. Concatenations split the loops at their boundaries. Integer arithmetic goes
 * through small helpers that wrap instead of overflowing. Everything the graph names reaches the
 * C only as a checked identifier, made unique against the emitter's own names.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Partial accumulators of a float reduction, in bytes: four AVX-512 vectors (eight AVX2
 * ones) of independent sums hide the latency of the adds. Folds of less than ACC_SMALL_DATA
 * bytes use half as many: combining the lanes at the end then costs as much as the loop
 * (measured here: 1024 floats fold in 38 ns with 32 lanes, 57 ns with 64; from 4096 on, 64 lanes
 * are faster). */
#define ACC_BYTES 256
#define ACC_SMALL_DATA (16 * 1024)
/* Loops of at least this many iterations run on several cores (with -fopenmp). */
#define PAR_MIN ((int64_t)1 << 18)
/* A whole-array reduction runs in chunks of at least this many elements, at most PAR_CHUNKS of
 * them, each folded alone and then combined in order: the result does not depend on the
 * number of threads. */
#define PAR_CHUNK ((int64_t)1 << 16)
#define PAR_CHUNKS 64

/* ---- helpers of the generated code ---- */

enum {
    H_ADD, H_SUB, H_MUL, H_DIV, H_POW, H_NEG, H_ABS, /* x 2 integer types */
    H_INT_OPS = 7,
    H_CVT = 2 * H_INT_OPS, /* + 2 * to + from: i32/i64 from f32/f64 */
    H_TILE = H_CVT + 4,    /* + 3 * (f64) + (16, 32, 64 vector bytes): tiles of tile.c */
    H_COUNT = H_TILE + 6,
};

static const char *ctype(int etype);

static int tile_helper(int etype, int vb)
{
    return H_TILE + 3 * (etype == NEST_F64) + (vb >= 64 ? 2 : vb >= 32 ? 1 : 0);
}

/* The micro-kernel of a tiled product, a function of its own so that every compiler keeps its
 * accumulators in registers (inside an OpenMP-outlined loop some do not). */
static void emit_tile_helper(buf *b, int h)
{
    int et = (h - H_TILE) / 3 ? NEST_F64 : NEST_F32, vb = 16 << ((h - H_TILE) % 3), ti, tj;
    tile_shape(et, vb, &ti, &tj);
    const char *t = ctype(et), *tn = nest_type_name((nest_type)et);
    buf_printf(b,
               "/* out[rows x %d] = sum over k < n of a[i * si + k * sk] * panel[k][0..%d), in k\n"
               " * order, for rows <= %d: the block of a product of matrices, in registers */\n"
               "static void nest_tile_%s_%dx%d(int rows, int64_t n, const %s *restrict a, int64_t si,\n"
               "                             int64_t sk, const %s *restrict panel, %s *restrict out)\n"
               "{\n"
               "    %s acc[%d];\n"
               "    for (int t = 0; t < %d; t++)\n"
               "        acc[t] = 0;\n"
               "    if (rows == %d) {\n"
               "        for (int64_t k = 0; k < n; k++, panel += %d)\n"
               "            for (int ii = 0; ii < %d; ii++) {\n"
               "                const %s av = a[ii * si + k * sk];\n"
               "                for (int jj = 0; jj < %d; jj++)\n"
               "                    acc[ii * %d + jj] = acc[ii * %d + jj] + av * panel[jj];\n"
               "            }\n"
               "    } else {\n"
               "        for (int64_t k = 0; k < n; k++, panel += %d)\n"
               "            for (int ii = 0; ii < rows; ii++) {\n"
               "                const %s av = a[ii * si + k * sk];\n"
               "                for (int jj = 0; jj < %d; jj++)\n"
               "                    acc[ii * %d + jj] = acc[ii * %d + jj] + av * panel[jj];\n"
               "            }\n"
               "    }\n"
               "    for (int t = 0; t < %d; t++)\n"
               "        out[t] = acc[t];\n"
               "}\n\n",
               tj, tj, ti, tn, ti, tj, t, t, t, t, ti * tj, ti * tj, ti, tj, ti, t, tj, tj, tj, tj,
               t, tj, tj, tj, ti * tj);
}

static const char *ctype(int etype)
{
    static const char *const names[] = {"float", "double", "int32_t", "int64_t", "uint8_t"};
    return names[etype];
}

static bool is_float(int etype) { return etype == NEST_F32 || etype == NEST_F64; }

static void emit_helper(buf *b, int h)
{
    if (h >= H_TILE) {
        emit_tile_helper(b, h);
        return;
    }
    if (h >= H_CVT) {
        int to = (h - H_CVT) / 2 ? NEST_I64 : NEST_I32, from = (h - H_CVT) % 2 ? NEST_F64 : NEST_F32;
        const char *t = ctype(to), *f = ctype(from), *tn = nest_type_name((nest_type)to);
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
    const char *t = ctype(et), *tn = nest_type_name((nest_type)et);
    const char *u = et == NEST_I32 ? "uint32_t" : "uint64_t";
    const char *mn = et == NEST_I32 ? "INT32_MIN" : "INT64_MIN";
    switch (h % H_INT_OPS) {
    case H_ADD:
    case H_SUB:
    case H_MUL: {
        static const char *const names[] = {"add", "sub", "mul"}, *const ops[] = {"+", "-", "*"};
        int k = h % H_INT_OPS;
        buf_printf(b, "static %s nest_%s_%s(%s a, %s b) { return (%s)((%s)a %s (%s)b); }\n", t,
                   names[k], tn, t, t, t, u, ops[k], u);
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
    "double pow(double, double);\ndouble fabs(double);\n\n";

void emit_preamble(buf *b, uint64_t helpers, emit_mode mode)
{
    if (mode == EMIT_JIT)
        buf_puts(b, jit_declarations);
    else
        buf_puts(b, "/* Generated by nest: self-contained C99. Build with, for example,\n"
                    " *   cc -std=c99 -O3 -march=native -fopenmp-simd -shared -fPIC file.c -lm\n"
                    " * (-fopenmp as well runs large loops on several cores). */\n"
                    "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n"
                    "#include <stdlib.h>\n\n");
    bool any = false;
    for (int h = 0; h < H_COUNT; h++)
        if (helpers & (1ull << h)) {
            emit_helper(b, h);
            any = true;
        }
    if (any)
        buf_putc(b, '\n');
}

/* ---- names ---- */

/* A set of identifiers in use, for making names unique. */
typedef struct names {
    char **v;
    size_t n, cap;
    struct names *outer; /* the enclosing scope's names */
    bool oom;
} names;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

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

static const char *names_add(names *ns, const char *s)
{
    if ((ns->n + 1) * 2 > ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        char **v = calloc(cap, sizeof *v);
        if (!v) {
            ns->oom = true;
            return "oom";
        }
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
    if (!d) {
        ns->oom = true;
        return "oom";
    }
    size_t j = str_hash(d) & (ns->cap - 1);
    while (ns->v[j])
        j = (j + 1) & (ns->cap - 1);
    ns->v[j] = d;
    ns->n++;
    return d;
}

/* base, or base_1, base_2, ... : the first that no scope uses; recorded in ns. */
static const char *unique(names *ns, const char *base)
{
    if (!names_has(ns, base) && !is_c_keyword(base))
        return names_add(ns, base);
    char s[IR_MAX_NAME + 32];
    for (int k = 1;; k++) {
        snprintf(s, sizeof s, "%s_%d", base, k);
        if (!names_has(ns, s))
            return names_add(ns, s);
    }
}

static void names_free(names *ns)
{
    for (size_t i = 0; i < ns->cap; i++)
        free(ns->v[i]);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

/* ---- the function's context ---- */

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
    bool *decl;               /* per temporary: declared in the open block, not yet cast */
    bool ws_refd;             /* the workspace pointer was written into the C */
    int indent;
    /* the nest being emitted */
    const nest *ne;
    names local;
    const char *var[NEST_MAX_RANK];   /* loop variable per axis */
    const char *expr[NEST_MAX_RANK];  /* its value in index expressions ("i1" or "i1 + u") */
    const char **acc;                 /* per output: accumulator array (case A) */
    int accs;                         /* partial accumulators in use (1 or lanes) */
    bool unrolled;                    /* inside the lane-wide loop: `u` picks the accumulator */
    bool par_outer;                   /* the outermost loop runs on several cores */
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
    const char *tile_text;
} ctx;

static void line(ctx *c, const char *fmt, ...) FORMAT(2, 3);
static void line(ctx *c, const char *fmt, ...)
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

static void literal(buf *b, int etype, const fx *e)
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
static void index_expr(ctx *c, buf *b, int32_t bufi, int64_t off, const int64_t *st, int rank)
{
    bool any = false;
    /* a temporary shrunk to one row of a row group is indexed within the row */
    int from = c->p->bufs[bufi].row ? 1 : 0;
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
    bool oom;
} body;

static valref *find_ref(body *bd, const fx *e)
{
    for (size_t i = bd->n; i-- > 0;)
        if (bd->v[i].e == e)
            return &bd->v[i];
    return NULL;
}

/* Appends the C text of operand e: a local's name, a load or a literal. */
static void operand_text(body *bd, buf *b, const fx *e)
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
    for (size_t i = c->nhoist; i-- > 0;)
        if (c->hoist[i].e == e) {
            buf_puts(b, c->hoist[i].name);
            return;
        }
    switch (e->kind) {
    case FX_LOAD:
        buf_printf(b, "%s[", c->bufname[e->buf]);
        c->refd[e->buf] = true;
        index_expr(c, b, e->buf, e->off, e->st, e->rank);
        buf_putc(b, ']');
        return;
    case FX_IMM:
        literal(b, e->etype, e);
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
    case OP_MULTIPLY: base = H_MUL; break;
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
    if (e->nargs == 2 && e->args[0] == e->args[1] && !is_float(e->args[0]->etype)) {
        switch (e->op) {
        case OP_EQUAL: buf_puts(b, "1"); return;
        case OP_LESS: case OP_GREATER: buf_puts(b, "0"); return;
        case OP_MAXIMUM: case OP_MINIMUM: operand_text(bd, b, e->args[0]); return;
        default: break;
        }
    }
    char *args[3] = {NULL, NULL, NULL};
    for (int i = 0; i < e->nargs && i < 3; i++) {
        buf t = {0};
        operand_text(bd, &t, e->args[i]);
        args[i] = buf_finish(&t);
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
        else if (is_float(from) && !is_float(to)) {
            int h = H_CVT + 2 * (to == NEST_I64) + (from == NEST_F64);
            *c->helpers |= 1ull << h;
            buf_printf(b, "nest_cvt_%s_%s(%s)", nest_type_name((nest_type)to),
                       nest_type_name((nest_type)from), args[0]);
        } else
            buf_printf(b, "(%s)%s", ctype(to), args[0]);
        goto out;
    }
    int at = e->args[e->nargs - 1]->etype; /* the operands' type (select: of its values) */
    const ir_opinfo *info = &ir_ops[e->op];
    const char *tmpl = is_float(at) ? info->cfloat : info->cint;
    if (!is_float(at)) {
        int h = int_helper(e->op, at);
        if (h >= 0 && strstr(tmpl, "nest_"))
            *c->helpers |= 1ull << h;
    }
    expand(b, tmpl, at, (const char *const *)args);
out:
    for (int i = 0; i < 3; i++)
        free(args[i]);
}

/* Appends a trailing comment naming the graph node of e. */
static void node_comment(ctx *c, buf *b, int32_t node)
{
    if (node < 0)
        return;
    buf t = {0};
    print_node(&t, &c->nm, node, 4);
    char *s = buf_finish(&t);
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
    if (!v) {
        bd->oom = true;
        return;
    }
    bd->v = v;
    bd->v[bd->n++] = (valref){e, NULL, 0, 0};
    for (int i = 0; i < e->nargs; i++) {
        valref *r = find_ref(bd, e->args[i]);
        if (r)
            r->uses++;
    }
}

/* Emits the statements computing the nest's values at the current indexes; afterwards
 * value_text() gives each output's value. Ops used more than once, or by other ops, get a
 * local named after their graph node. */
static void emit_values(ctx *c, body *bd, fx *const *roots, int n)
{
    if (!fx_walk(c->mp, roots, n, count_uses, bd) || bd->oom)
        return;
    for (int i = 0; i < n; i++) {
        valref *r = find_ref(bd, roots[i]);
        if (r)
            r->outputs++;
    }
    for (size_t i = 0; i < bd->n; i++) {
        valref *r = &bd->v[i];
        const fx *e = r->e;
        if (e->kind != FX_OP || (r->uses == 0 && r->outputs == 1))
            continue; /* used once, as an output: inlined there */
        const char *base = e->node >= 0 ? namer_name(&c->nm, e->node) : "t";
        const char *name = unique(c->body_names, base);
        buf t = {0};
        op_text(bd, &t, e);
        char *s = buf_finish(&t);
        if (!s) {
            bd->oom = true;
            return;
        }
        buf cm = {0};
        node_comment(c, &cm, e->node);
        char *cs = buf_finish(&cm);
        line(c, "%s %s = %s;%s", ctype(e->etype), name, s, cs ? cs : "");
        free(s);
        free(cs);
        r->name = name;
    }
}

/* The C text of a root value (a local, a load, a literal, or its inlined op). */
static char *value_text(body *bd, const fx *e)
{
    buf t = {0};
    valref *r = find_ref(bd, e);
    if (e->kind == FX_OP && !(r && r->name))
        op_text(bd, &t, e);
    else
        operand_text(bd, &t, e);
    return buf_finish(&t);
}

/* ---- reductions ---- */

static void init_text(buf *b, int op, int etype)
{
    if (op == OP_SUM) {
        buf_puts(b, is_float(etype) ? (etype == NEST_F32 ? "0.0f" : "0.0") : "0");
        return;
    }
    bool max = op == OP_MAX;
    switch (etype) {
    case NEST_F32: buf_puts(b, max ? "-INFINITY" : "INFINITY"); return;
    case NEST_F64: buf_puts(b, max ? "(double)-INFINITY" : "(double)INFINITY"); return;
    case NEST_I32: buf_puts(b, max ? "INT32_MIN" : "INT32_MAX"); return;
    default: buf_puts(b, max ? "INT64_MIN" : "INT64_MAX"); return;
    }
}

/* "acc op= value" as the template of the reduction. */
static char *combine_text(ctx *c, int op, int etype, const char *acc, const char *value)
{
    const ir_opinfo *info = &ir_ops[op];
    const char *tmpl = is_float(etype) ? info->cfloat : info->cint;
    if (!is_float(etype)) {
        int h = int_helper(op, etype);
        if (h >= 0 && strstr(tmpl, "nest_"))
            *c->helpers |= 1ull << h;
    }
    const char *args[2] = {acc, value};
    buf t = {0};
    expand(&t, tmpl, etype, args);
    return buf_finish(&t);
}

/* ---- nests ---- */

static void store_text(ctx *c, buf *b, const nout *o)
{
    buf_printf(b, "%s[", c->bufname[o->buf]);
    c->refd[o->buf] = true;
    index_expr(c, b, o->buf, o->off, o->st, c->ne->rank);
    buf_putc(b, ']');
}

/* The body at the innermost level: evaluate, then store or fold each output. */
static void emit_outputs(ctx *c, const nout *outs, fx *const *vals, int nouts);

static void emit_body(ctx *c, fx *const *vals) { emit_outputs(c, c->ne->outs, vals, c->ne->nouts); }

/* Evaluates vals and stores or folds each into its output. */
static void emit_outputs(ctx *c, const nout *outs, fx *const *vals, int nouts)
{
    body bd = {.c = c};
    /* the body's locals live in a scope of their own: every copy of the body reuses names */
    names scope = {.outer = &c->local}, *saved = c->body_names;
    c->body_names = &scope;
    emit_values(c, &bd, vals, nouts);
    for (int i = 0; i < nouts && !bd.oom; i++) {
        const nout *o = &outs[i];
        char *v = value_text(&bd, vals[i]);
        buf dst = {0};
        if (o->reduce >= 0 && c->acc && c->acc[i]) {
            if (c->accs > 1)
                buf_printf(&dst, "%s[%s]", c->acc[i], c->unrolled ? "u" : "0");
            else
                buf_puts(&dst, c->acc[i]);
        } else {
            store_text(c, &dst, o);
        }
        char *d = buf_finish(&dst);
        if (!v || !d) {
            bd.oom = true;
        } else if (o->reduce >= 0) {
            /* an op inlined into the fold is one operand of its template: acc + (a - b), not
             * acc + a - b, and never acc + a > b ? a : b */
            if (vals[i]->kind == FX_OP && !is_identifier(v, strlen(v))) {
                buf t = {0};
                buf_printf(&t, "(%s)", v);
                free(v);
                v = buf_finish(&t);
            }
            char *s = v ? combine_text(c, o->reduce, o->value->etype, d, v) : NULL;
            if (!v)
                bd.oom = true;
            buf cm = {0};
            node_comment(c, &cm, o->node);
            char *cs = buf_finish(&cm);
            if (s)
                line(c, "%s = %s;%s", d, s, cs ? cs : "");
            free(s);
            free(cs);
        } else {
            buf cm = {0};
            node_comment(c, &cm, vals[i]->kind == FX_OP ? -1 : o->node);
            char *cs = buf_finish(&cm);
            line(c, "%s = %s;%s", d, v, cs ? cs : "");
            free(cs);
        }
        free(v);
        free(d);
    }
    free(bd.v);
    if (bd.oom || scope.oom)
        c->b->failed = true;
    names_free(&scope);
    c->body_names = saved;
}

/* The boundaries of concats on axis k that lie strictly inside (lo, hi), not counting concats
 * nested in another concat's part on the same axis (they surface when the outer resolves). */
typedef struct bounds {
    int axis;
    int64_t lo, hi;
    int64_t *v;
    size_t n, cap;
    bool oom;
} bounds;

static void add_bound(bounds *bs, int64_t x)
{
    if (x <= bs->lo || x >= bs->hi)
        return;
    for (size_t i = 0; i < bs->n; i++)
        if (bs->v[i] == x)
            return;
    int64_t *v = grow_array(bs->v, &bs->cap, bs->n, sizeof *v);
    if (!v) {
        bs->oom = true;
        return;
    }
    bs->v = v;
    bs->v[bs->n++] = x;
}

static void collect_bounds(fx *e, void *ctx_)
{
    bounds *bs = ctx_;
    if (e->kind == FX_CONCAT && e->axis == bs->axis)
        for (int j = 0; j <= e->nargs; j++)
            add_bound(bs, e->starts[j]);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void emit_level(ctx *c, int lvl, fx **vals);
static void emit_loop(ctx *c, int lvl, const char *lo, const char *hi, int64_t n, fx **sel);

/* Loop level lvl over [lo, hi), split at concat boundaries. Concats nested in a part are only
 * seen once their outer concat resolves, so every segment is checked again. */
static void emit_range(ctx *c, int lvl, int64_t lo, int64_t hi, fx **vals)
{
    const nest *ne = c->ne;
    bounds bs = {.axis = lvl, .lo = lo, .hi = hi};
    /* only concats not inside another concat on this axis: resolve the outer ones first by
     * selecting [lo, hi), which keeps the straddling ones */
    fx *sel[ne->nouts];
    for (int i = 0; i < ne->nouts; i++) {
        sel[i] = fx_select(c->mp, vals[i], lvl, lo, hi);
        if (!sel[i]) {
            c->b->failed = true;
            return;
        }
    }
    /* boundaries of the concats that remain at the top: those straddle [lo, hi) */
    for (int i = 0; i < ne->nouts; i++) {
        fx *e = sel[i];
        /* only top-level concats on this axis: walk, but do not enter parts of such concats */
        fx *stack[64];
        int sp = 0;
        stack[sp++] = e;
        while (sp > 0) {
            fx *x = stack[--sp];
            if (x->kind == FX_CONCAT && x->axis == lvl) {
                collect_bounds(x, &bs);
                continue;
            }
            for (int j = 0; j < x->nargs; j++) {
                if (sp == (int)countof(stack)) {
                    /* too deep to track: fall back to every boundary (correct, finer) */
                    fx_walk(c->mp, &x->args[j], 1, collect_bounds, &bs);
                    continue;
                }
                stack[sp++] = x->args[j];
            }
        }
    }
    if (bs.oom) {
        free(bs.v);
        c->b->failed = true;
        return;
    }
    if (bs.n > 0) {
        qsort(bs.v, (size_t)bs.n, sizeof *bs.v, cmp_i64);
        int64_t a = lo;
        for (size_t i = 0; i <= bs.n; i++) {
            int64_t z = i < bs.n ? bs.v[i] : hi;
            if (z > a)
                emit_range(c, lvl, a, z, sel);
            a = z;
        }
        free(bs.v);
        return;
    }
    free(bs.v);
    if (lo >= hi)
        return;
    char l[32], h[32];
    snprintf(l, sizeof l, "%lld", (long long)lo);
    snprintf(h, sizeof h, "%lld", (long long)hi);
    emit_loop(c, lvl, l, h, hi - lo, sel);
}

static void omp_parallel_for(ctx *c)
{
    line(c, "#ifdef _OPENMP");
    line(c, "#pragma omp parallel for schedule(static)");
    line(c, "#endif");
}

/* The loop of level lvl over [lo, hi), bounds as C text, n its trip count when the bounds are
 * constants (else -1). The innermost folded axis runs `accs` lanes at a time, then the rest. */
typedef struct hoist_scan {
    ctx *c;
    int lvl;
} hoist_scan;

static bool nest_writes(const nest *ne, int32_t b)
{
    for (int i = 0; i < ne->nouts; i++)
        if (ne->outs[i].buf == b)
            return true;
    return false;
}

static void hoist_one(fx *e, void *ctx_)
{
    hoist_scan *hs = ctx_;
    ctx *c = hs->c;
    if (e->kind != FX_LOAD || e == c->tile_view || nest_writes(c->ne, e->buf) || c->b->failed)
        return;
    for (int k = hs->lvl; k < c->ne->rank; k++)
        if (e->st[k] != 0)
            return;
    for (size_t i = 0; i < c->nhoist; i++)
        if (c->hoist[i].e == e)
            return;
    struct hoisted *h = grow_array(c->hoist, &c->caphoist, c->nhoist, sizeof *h);
    if (!h) {
        c->b->failed = true;
        return;
    }
    c->hoist = h;
    buf t = {0};
    body bd = {.c = c};
    operand_text(&bd, &t, e);
    char *text = buf_finish(&t);
    const char *base = e->node >= 0 ? namer_name(&c->nm, e->node) : "v";
    char nb[IR_MAX_NAME + 8];
    snprintf(nb, sizeof nb, "%s_%s", base, base[0] == '_' ? "v" : "value");
    const char *name = unique(&c->local, nb);
    line(c, "const %s %s = %s;", ctype(e->etype), name, text ? text : "0");
    free(text);
    c->hoist[c->nhoist++] = (struct hoisted){e, name};
}

/* Reads once, before the loop of level lvl, every load that no loop from lvl inward moves and
 * that the nest does not write. Compilers take restrict on block-scope pointers as a hint at
 * most, so such a load inside a loop that stores through another workspace pointer would be
 * reloaded at every step, and keep the loop scalar. Only when every loop runs at least once:
 * a hoisted load must not read what the loops would not. Returns the previous table size. */
static size_t hoist_loads(ctx *c, int lvl, int64_t n, fx *const *vals)
{
    size_t saved = c->nhoist;
    if (n == 0)
        return saved;
    for (int k = lvl + 1; k < c->ne->rank; k++)
        if (c->ne->dims[k] == 0)
            return saved;
    hoist_scan hs = {c, lvl};
    fx_walk(c->mp, vals, c->ne->nouts, hoist_one, &hs);
    return saved;
}

static void emit_loop(ctx *c, int lvl, const char *lo, const char *hi, int64_t n, fx **sel)
{
    const nest *ne = c->ne;
    const char *v = c->var[lvl];
    bool fold_inner = c->acc && lvl == ne->rank - 1 && c->accs > 1;
    size_t hoisted = hoist_loads(c, lvl, n, sel);
    if (!fold_inner) {
        if (c->par_outer && lvl == 0)
            omp_parallel_for(c);
        line(c, "for (int64_t %s = %s; %s < %s; %s++) {", v, lo, v, hi, v);
        c->indent++;
        emit_level(c, lvl + 1, sel);
        c->indent--;
        line(c, "}");
        c->nhoist = hoisted;
        return;
    }
    int w = c->accs;
    char mid[96];
    bool has_main = true, has_rest = true;
    if (n >= 0) {
        long long lo_v = atoll(lo);
        snprintf(mid, sizeof mid, "%lld", lo_v + n / w * w);
        has_main = n >= w;
        has_rest = n % w != 0;
    } else {
        snprintf(mid, sizeof mid, "%s_lanes", v);
        line(c, "const int64_t %s = %s + (%s - %s) / %d * %d;", mid, lo, hi, lo, w, w);
    }
    if (has_main) {
        line(c, "for (int64_t %s = %s; %s < %s; %s += %d) {", v, lo, v, mid, v, w);
        c->indent++;
        line(c, "for (int u = 0; u < %d; u++) {", w);
        c->indent++;
        char e[64];
        snprintf(e, sizeof e, "%s + u", v);
        c->expr[lvl] = e;
        c->unrolled = true;
        emit_body(c, sel);
        c->unrolled = false;
        c->expr[lvl] = v;
        c->indent--;
        line(c, "}");
        c->indent--;
        line(c, "}");
    }
    if (has_rest) {
        line(c, "for (int64_t %s = %s; %s < %s; %s++) {", v, mid, v, hi, v);
        c->indent++;
        emit_body(c, sel);
        c->indent--;
        line(c, "}");
    }
    c->nhoist = hoisted;
}

/* The first reduced axis of the nest, or its rank. */
static int first_reduced(const nest *ne)
{
    for (int k = 0; k < ne->rank; k++)
        if (ne->reduced & (1u << k))
            return k;
    return ne->rank;
}

/* Whether every axis from the first reduced one on is reduced: the outputs then fold into
 * accumulators (case A); otherwise they fold in memory (case B). */
static bool folds_in_registers(const nest *ne)
{
    for (int k = first_reduced(ne); k < ne->rank; k++)
        if (!(ne->reduced & (1u << k)))
            return false;
    return true;
}

static void emit_fold_start(ctx *c, int lvl)
{
    const nest *ne = c->ne;
    if (folds_in_registers(ne)) {
        /* partial accumulators when a float reduction folds its innermost axis */
        int innermost = ne->rank - 1, lanes = ACC_BYTES;
        bool wide = innermost >= lvl && (ne->reduced & (1u << innermost));
        /* a chunk of a parallel fold is at least PAR_CHUNK long */
        int64_t extent = c->par_chunks && innermost == 0 ? PAR_CHUNK : ne->dims[innermost];
        for (int i = 0; i < ne->nouts; i++) {
            int et = ne->outs[i].value->etype;
            if (ne->outs[i].reduce < 0)
                continue;
            wide &= is_float(et);
            int size = (int)nest_type_size((nest_type)et);
            int bytes = extent * size < ACC_SMALL_DATA ? ACC_BYTES / 2 : ACC_BYTES;
            if (bytes / size < lanes)
                lanes = bytes / size;
        }
        wide &= ne->dims[innermost] >= 2 * lanes;
        c->accs = wide ? lanes : 1;
        for (int i = 0; i < ne->nouts; i++) {
            const nout *o = &ne->outs[i];
            c->acc[i] = NULL;
            if (o->reduce < 0)
                continue;
            const char *base = o->node >= 0 ? namer_name(&c->nm, o->node) : "acc";
            char nb[IR_MAX_NAME + 8];
            snprintf(nb, sizeof nb, "%s_acc", base);
            c->acc[i] = unique(&c->local, nb);
            buf t = {0};
            init_text(&t, o->reduce, o->value->etype);
            char *init = buf_finish(&t);
            if (!init) {
                c->b->failed = true;
                return;
            }
            if (c->accs > 1) {
                line(c, "%s %s[%d];", ctype(o->value->etype), c->acc[i], c->accs);
                line(c, "for (int u = 0; u < %d; u++)", c->accs);
                line(c, "    %s[u] = %s;", c->acc[i], init);
            } else {
                line(c, "%s %s = %s;", ctype(o->value->etype), c->acc[i], init);
            }
            free(init);
        }
        return;
    }
    /* case B: the outputs start at the identity over the kept axes from lvl inward */
    for (int i = 0; i < ne->nouts; i++) {
        if (ne->outs[i].reduce < 0)
            continue;
        int opened = 0;
        for (int k = lvl; k < ne->rank; k++) {
            if (ne->reduced & (1u << k))
                continue;
            line(c, "for (int64_t %s = 0; %s < %lld; %s++)", c->var[k], c->var[k],
                 (long long)ne->dims[k], c->var[k]);
            c->indent++;
            opened++;
        }
        buf t = {0};
        store_text(c, &t, &ne->outs[i]);
        buf_puts(&t, " = ");
        init_text(&t, ne->outs[i].reduce, ne->outs[i].value->etype);
        char *s = buf_finish(&t);
        line(c, "%s;", s ? s : "");
        free(s);
        c->indent -= opened;
    }
}

static void emit_fold_end(ctx *c)
{
    const nest *ne = c->ne;
    if (!folds_in_registers(ne))
        return;
    for (int i = 0; i < ne->nouts; i++) {
        const nout *o = &ne->outs[i];
        const char *a = c->acc[i];
        int et = o->value->etype;
        if (o->reduce < 0)
            continue;
        /* pairwise: lane u takes lane u + w for halving widths */
        for (int w = c->accs / 2; w >= 1; w /= 2) {
            char l[IR_MAX_NAME + 64], r[IR_MAX_NAME + 64];
            snprintf(l, sizeof l, w > 1 ? "%s[u]" : "%s[0]", a);
            snprintf(r, sizeof r, w > 1 ? "%s[u + %d]" : "%s[%d]", a, w);
            char *s = combine_text(c, o->reduce, et, l, r);
            if (s && w > 1)
                line(c, "for (int u = 0; u < %d; u++) %s = %s;", w, l, s);
            else if (s)
                line(c, "%s = %s;", l, s);
            free(s);
        }
        buf t = {0};
        if (c->fold_dst)
            buf_puts(&t, c->fold_dst[i]);
        else
            store_text(c, &t, o);
        char *d = buf_finish(&t);
        buf cm = {0};
        node_comment(c, &cm, c->fold_dst ? -1 : o->node);
        char *cs = buf_finish(&cm);
        if (d)
            line(c, "%s = %s%s;%s", d, a, c->accs > 1 ? "[0]" : "", cs ? cs : "");
        free(d);
        free(cs);
    }
}

/* A whole-array fold in parallel chunks: each chunk folds into its partial result, then the
 * partial results combine in chunk order. */
static void emit_chunks(ctx *c, fx **vals)
{
    const nest *ne = c->ne;
    int64_t n = ne->dims[0], nch = n / PAR_CHUNK;
    if (nch > PAR_CHUNKS)
        nch = PAR_CHUNKS;
    if (nch < 2)
        nch = 2;
    int64_t len = (n + nch - 1) / nch;
    len = (len + ACC_BYTES - 1) / ACC_BYTES * ACC_BYTES; /* whole lanes in every chunk */
    nch = (n + len - 1) / len;
    const char *part[ne->nouts], *dst[ne->nouts];
    char *dsts[ne->nouts];
    const char *ch = unique(&c->local, "chunk"), *lo = unique(&c->local, "lo"),
               *hi = unique(&c->local, "hi");
    for (int i = 0; i < ne->nouts; i++) {
        const nout *o = &ne->outs[i];
        part[i] = dst[i] = NULL;
        dsts[i] = NULL;
        if (o->reduce < 0)
            continue;
        char nb[IR_MAX_NAME + 8];
        snprintf(nb, sizeof nb, "%s_part", o->node >= 0 ? namer_name(&c->nm, o->node) : "acc");
        part[i] = unique(&c->local, nb);
        line(c, "%s %s[%lld];", ctype(o->value->etype), part[i], (long long)nch);
        buf t = {0};
        buf_printf(&t, "%s[%s]", part[i], ch);
        dsts[i] = buf_finish(&t);
        dst[i] = dsts[i] ? dsts[i] : "?";
    }
    omp_parallel_for(c);
    line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", ch, ch, (long long)nch, ch);
    c->indent++;
    line(c, "const int64_t %s = %s * %lld, %s = %s + %lld < %lld ? %s + %lld : %lld;", lo, ch,
         (long long)len, hi, lo, (long long)len, (long long)n, lo, (long long)len, (long long)n);
    c->fold_dst = dst;
    emit_fold_start(c, 0);
    emit_loop(c, 0, lo, hi, -1, vals);
    emit_fold_end(c);
    c->fold_dst = NULL;
    c->indent--;
    line(c, "}");
    for (int i = 0; i < ne->nouts; i++) {
        const nout *o = &ne->outs[i];
        if (o->reduce < 0)
            continue;
        char l[IR_MAX_NAME + 64], r[IR_MAX_NAME + 64];
        snprintf(l, sizeof l, "%s[0]", part[i]);
        snprintf(r, sizeof r, "%s[%s]", part[i], ch);
        char *comb = combine_text(c, o->reduce, o->value->etype, l, r);
        line(c, "for (int64_t %s = 1; %s < %lld; %s++)", ch, ch, (long long)nch, ch);
        line(c, "    %s = %s;", l, comb ? comb : "");
        free(comb);
        buf t = {0};
        store_text(c, &t, o);
        char *d = buf_finish(&t);
        buf cm = {0};
        node_comment(c, &cm, o->node);
        char *cs = buf_finish(&cm);
        line(c, "%s = %s;%s", d ? d : "", l, cs ? cs : "");
        free(d);
        free(cs);
        free(dsts[i]);
    }
}

static void emit_level(ctx *c, int lvl, fx **vals)
{
    const nest *ne = c->ne;
    if (lvl == 0 && c->par_chunks) {
        emit_chunks(c, vals);
        return;
    }
    bool reduce = nest_folds(ne);
    /* the fold's accumulators need a block, unless the nest's own block is right there */
    bool block = reduce && lvl == first_reduced(ne) && lvl > c->from;
    if (block) {
        line(c, "{");
        c->indent++;
    }
    if (reduce && lvl == first_reduced(ne))
        emit_fold_start(c, lvl);
    if (lvl == ne->rank)
        emit_body(c, vals);
    else
        emit_range(c, lvl, 0, ne->dims[lvl], vals);
    if (reduce && lvl == first_reduced(ne))
        emit_fold_end(c);
    if (block) {
        c->indent--;
        line(c, "}");
    }
}

/* Every graph node a nest computes, in graph order, for its comment. */
typedef struct nodeset {
    int32_t *v;
    size_t n, cap;
    bool oom;
} nodeset;

static void add_node(nodeset *s, int32_t node)
{
    if (node < 0)
        return;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == node)
            return;
    int32_t *v = grow_array(s->v, &s->cap, s->n, sizeof *v);
    if (!v) {
        s->oom = true;
        return;
    }
    s->v = v;
    s->v[s->n++] = node;
}

static void collect_node(fx *e, void *ctx_)
{
    if (e->kind == FX_OP || e->kind == FX_CONCAT)
        add_node(ctx_, e->node);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void emit_nest_comment(ctx *c)
{
    const nest *ne = c->ne;
    nodeset s = {0};
    for (int i = 0; i < ne->nouts; i++)
        fx_walk(c->mp, &ne->outs[i].value, 1, collect_node, &s);
    for (int i = 0; i < ne->nnodes; i++)
        add_node(&s, ne->nodes[i]);
    qsort(s.v, (size_t)s.n, sizeof *s.v, cmp_i32);
    for (size_t i = 0; i < s.n; i++) {
        buf t = {0};
        print_node(&t, &c->nm, s.v[i], 4);
        buf_puts(&t, ": ");
        ir_format_type(&t, c->f, s.v[i]);
        char *x = buf_finish(&t);
        if (x) {
            if (strlen(x) > 110)
                strcpy(x + 106, "...");
            for (char *q = x; (q = strstr(q, "*/")); q++)
                q[1] = '|';
        }
        line(c, "%s %s", i == 0 ? "/*" : " *", x ? x : "");
        free(x);
    }
    buf t = {0};
    buf_printf(&t, " * loops over [");
    for (int k = 0; k < ne->rank; k++)
        buf_printf(&t, "%s%lld%s", k ? "," : "", (long long)ne->dims[k],
                   (ne->reduced & (1u << k)) ? "r" : "");
    buf_puts(&t, "]");
    if (ne->reduced)
        buf_puts(&t, " (r: folded)");
    buf_puts(&t, " */");
    char *x = buf_finish(&t);
    line(c, "%s", x ? x : " */");
    free(x);
    free(s.v);
}

static bool nest_runs(const nest *ne)
{
    /* a fold over nothing still writes its initial values, unless its outputs are empty too */
    bool folds = nest_folds(ne);
    for (int k = 0; k < ne->rank; k++)
        if (ne->dims[k] == 0 && !(folds && (ne->reduced & (1u << k))))
            return false;
    return true;
}

/* Whether nest ne touches buffer b. */
static bool nest_uses(ctx *c, const nest *ne, int32_t b)
{
    for (int i = 0; i < ne->nouts; i++)
        if (ne->outs[i].buf == b || fx_reads(c->mp, ne->outs[i].value, b))
            return true;
    return false;
}

/* Declares the temporaries that nests [first, last] of a group (or one nest) touch: pointers
 * into the workspace, or with `rows`, the local row arrays of contracted ones. */
static void declare_temps(ctx *c, int32_t first, int32_t last, int32_t group, bool rows)
{
    for (int32_t b = 0; b < c->p->nbufs; b++) {
        const pbuf *pb = &c->p->bufs[b];
        if (pb->kind != BUF_TEMP || pb->dead || (pb->row != 0) != rows)
            continue;
        bool used = false;
        for (int32_t k = first; k <= last && !used; k++) {
            const nest *ne = &c->p->nests[k];
            used = !ne->dead && (ne->group == group || group < 0) && nest_uses(c, ne, b);
        }
        if (!used)
            continue;
        const char *name = unique(&c->local, namer_name(&c->nm, pb->node));
        c->bufname[b] = name;
        c->decl[b] = true;
        c->refd[b] = false;
        if (rows)
            line(c, "%s %s[%lld];", ctype(pb->etype), name, (long long)pb->row);
        else
            line(c, "%s *restrict %s = (%s *)(ws + %lld);", ctype(pb->etype), name,
                 ctype(pb->etype), (long long)pb->offset);
        c->ws_refd |= !rows;
    }
}

/* Casts away the temporaries declared for the block being closed that its code never names
 * (their only reads were in loops without iterations, or folded into constants). */
static void cast_unused_temps(ctx *c)
{
    for (int32_t b = 0; b < c->p->nbufs; b++) {
        if (c->decl[b] && !c->refd[b])
            line(c, "(void)%s;", c->bufname[b]);
        c->decl[b] = false;
    }
}

static int64_t nest_work(const nest *ne)
{
    int64_t work = 1;
    for (int k = 0; k < ne->rank; k++)
        work = work > INT64_MAX / (ne->dims[k] + 1) ? INT64_MAX : work * ne->dims[k];
    return work;
}

/* The loops of one nest from level `from` (0, or 1 inside a row group whose loop is var[0]). */
static void emit_nest_loops(ctx *c, const nest *ne, int from, bool may_par)
{
    c->ne = ne;
    for (int k = from; k < ne->rank; k++) {
        char v[16];
        snprintf(v, sizeof v, "i%d", k);
        c->var[k] = c->expr[k] = unique(&c->local, v);
    }
    const char *accs[ne->nouts > 0 ? ne->nouts : 1];
    c->acc = nest_folds(ne) && folds_in_registers(ne) ? accs : NULL;
    c->accs = 1;
    fx *vals[ne->nouts > 0 ? ne->nouts : 1];
    for (int i = 0; i < ne->nouts; i++)
        vals[i] = ne->outs[i].value;
    /* several cores for big nests: over the outermost loop when it is kept, else in chunks of
     * a whole-array fold */
    bool par = may_par && c->p->opts->openmp && nest_work(ne) >= PAR_MIN && ne->rank > 0;
    c->par_outer = par && !(ne->reduced & 1u) && ne->dims[0] >= 2;
    c->par_chunks = par && nest_folds(ne) && (ne->reduced & 1u) && folds_in_registers(ne) &&
                    ne->dims[0] >= 2 * PAR_CHUNK && !fx_has_concat(c->mp, vals, ne->nouts, 0);
    c->from = from;
    emit_level(c, from, vals);
    c->par_outer = c->par_chunks = false;
    c->acc = NULL;
}

/* dst = value, the value's statements first. */
static void emit_assign(ctx *c, const char *dst, fx *value)
{
    body bd = {.c = c};
    names scope = {.outer = &c->local}, *saved = c->body_names;
    c->body_names = &scope;
    emit_values(c, &bd, &value, 1);
    char *v = bd.oom ? NULL : value_text(&bd, value);
    if (v)
        line(c, "%s = %s;", dst, v);
    else
        c->b->failed = true;
    free(v);
    free(bd.v);
    names_free(&scope);
    c->body_names = saved;
}

/* A product of matrices tiled by tile.c: for each block of TJ columns, B's panel is packed;
 * for each block of TI rows, the block of the product accumulates in registers over k; then
 * the block leaves through the absorbed element-wise outputs (and the product's own store). */
static void emit_tiled(ctx *c, int32_t k)
{
    const nest *ne = &c->p->nests[k];
    const nout *prod = &ne->outs[0];
    int et = prod->value->etype, ti = ne->tile_i, tj = ne->tile_j;
    long long I = ne->dims[0], K = ne->dims[1], J = ne->dims[2];
    const char *T = ctype(et);
    c->ne = ne;
    memset(&c->local, 0, sizeof c->local);
    c->local.outer = &c->fn;
    emit_nest_comment(c);
    line(c, "/* in tiles of %d x %d held in registers over the %lld-long sum, the second factor", ti,
         tj, K);
    line(c, " * packed %d columns at a time */", tj);
    line(c, "{");
    c->indent++;
    declare_temps(c, k, k, -1, false);
    const char *panel = unique(&c->local, "panel");
    line(c, "%s *restrict %s = (%s *)(ws + %lld);", T, panel, T,
         (long long)c->p->bufs[ne->pack].offset);
    c->ws_refd = true;
    const char *i0 = unique(&c->local, "i0"), *kv = unique(&c->local, "k"),
               *j0 = unique(&c->local, "j0"), *ni = unique(&c->local, "ni"),
               *nj = unique(&c->local, "nj"), *acc = unique(&c->local, "acc");
    c->var[0] = i0;
    c->var[1] = kv;
    c->var[2] = j0;
    line(c, "for (int64_t %s = 0; %s < %lld; %s += %d) {", j0, j0, J, j0, tj);
    c->indent++;
    line(c, "const int %s = %lld - %s < %d ? (int)(%lld - %s) : %d;", nj, J, j0, tj, J, j0, tj);
    /* the panel: B's columns j0 .. j0 + nj, k-major, zero past the edge */
    line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", kv, kv, K, kv);
    c->indent++;
    line(c, "for (int jj = 0; jj < %s; jj++) {", nj);
    c->indent++;
    char jexpr[64], dst[128];
    snprintf(jexpr, sizeof jexpr, "%s + jj", j0);
    c->expr[0] = "0";
    c->expr[1] = kv;
    c->expr[2] = jexpr;
    snprintf(dst, sizeof dst, "%s[%s * %d + jj]", panel, kv, tj);
    emit_assign(c, dst, ne->tile_b);
    c->indent--;
    line(c, "}");
    line(c, "for (int jj = %s; jj < %d; jj++)", nj, tj);
    line(c, "    %s = 0;", dst);
    c->indent--;
    line(c, "}");
    if (c->p->opts->openmp && nest_work(ne) >= PAR_MIN && I > ti)
        omp_parallel_for(c);
    line(c, "for (int64_t %s = 0; %s < %lld; %s += %d) {", i0, i0, I, i0, ti);
    c->indent++;
    line(c, "const int %s = %lld - %s < %d ? (int)(%lld - %s) : %d;", ni, I, i0, ti, I, i0, ti);
    line(c, "%s %s[%d];", T, acc, ti * tj);
    char iexpr[64];
    snprintf(iexpr, sizeof iexpr, "%s + ii", i0);
    {
        /* the first factor's rows start at a[off + i0 * si] and step k by sk */
        const fx *a = ne->tile_a;
        int h = tile_helper(et, ne->tile_vb);
        *c->helpers |= 1ull << h;
        buf t = {0};
        buf_printf(&t, "%s + %lld", c->bufname[a->buf], (long long)a->off);
        c->refd[a->buf] = true;
        if (a->st[0])
            buf_printf(&t, " + %s * %lld", i0, (long long)a->st[0]);
        char *base = buf_finish(&t);
        line(c, "nest_tile_%s_%dx%d(%s, %lld, %s, %lld, %lld, %s, %s);",
             nest_type_name((nest_type)et), ti, tj, ni, K, base ? base : "0",
             (long long)a->st[0], (long long)a->st[1], panel, acc);
        free(base);
    }
    c->expr[0] = iexpr;
    /* the block leaves: through the absorbed outputs, and into the product if it is kept */
    line(c, "for (int ii = 0; ii < %s; ii++) {", ni);
    c->indent++;
    line(c, "for (int jj = 0; jj < %s; jj++) {", nj);
    c->indent++;
    c->expr[1] = "0";
    c->expr[2] = jexpr;
    char tile[96];
    snprintf(tile, sizeof tile, "%s[ii * %d + jj]", acc, tj);
    c->tile_view = fx_load(c->mp, prod->buf, prod->off, 3, prod->st, -1);
    c->tile_text = tile;
    if (ne->nouts > 1) {
        fx *vals[ne->nouts];
        for (int i = 1; i < ne->nouts; i++)
            vals[i - 1] = ne->outs[i].value;
        emit_outputs(c, ne->outs + 1, vals, ne->nouts - 1);
    }
    if (!prod->drop) {
        buf t = {0};
        store_text(c, &t, prod);
        char *d = buf_finish(&t);
        line(c, "%s = %s;", d ? d : "", tile);
        free(d);
    }
    c->tile_view = NULL;
    c->tile_text = NULL;
    c->indent--;
    line(c, "}");
    c->indent--;
    line(c, "}");
    c->indent--;
    line(c, "}");
    c->indent--;
    line(c, "}");
    cast_unused_temps(c);
    c->indent--;
    line(c, "}");
    names_free(&c->local);
}

static void emit_nest(ctx *c, int32_t k)
{
    if (c->p->nests[k].tile_i) {
        emit_tiled(c, k);
        return;
    }
    const nest *ne = &c->p->nests[k];
    c->ne = ne;
    memset(&c->local, 0, sizeof c->local);
    c->local.outer = &c->fn;
    emit_nest_comment(c);
    line(c, "{");
    c->indent++;
    declare_temps(c, k, k, -1, false);
    emit_nest_loops(c, ne, 0, true);
    cast_unused_temps(c);
    c->indent--;
    line(c, "}");
    names_free(&c->local);
}

/* A row group: one loop over the rows, each member nest's inner loops inside it. */
static void emit_group(ctx *c, int32_t lead)
{
    const plan *p = c->p;
    int32_t last = lead;
    int64_t work = 0;
    for (int32_t k = lead; k < p->nnests; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead)
            continue;
        if (ne->group != lead)
            break;
        last = k;
        int64_t w = nest_work(ne);
        work = work > INT64_MAX - w ? INT64_MAX : work + w;
    }
    const nest *head = &p->nests[lead];
    names group = {.outer = &c->fn};
    memset(&c->local, 0, sizeof c->local);
    c->local.outer = &c->fn;
    line(c, "/* %d nests proceed row by row over %lld rows: */", 0 + (int)(last - lead + 1),
         (long long)head->dims[0]);
    line(c, "{");
    c->indent++;
    const char *row = unique(&c->local, "i0");
    declare_temps(c, lead, last, lead, false);
    if (c->p->opts->openmp && work >= PAR_MIN)
        omp_parallel_for(c);
    line(c, "for (int64_t %s = 0; %s < %lld; %s++) {", row, row, (long long)head->dims[0], row);
    c->indent++;
    declare_temps(c, lead, last, lead, true);
    group = c->local; /* the group's names: the members' scopes chain to it */
    for (int32_t k = lead; k <= last; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead || ne->group != lead)
            continue;
        c->ne = ne;
        emit_nest_comment(c);
        if (!nest_runs(ne)) {
            line(c, "/* (no elements) */");
            continue;
        }
        line(c, "{");
        c->indent++;
        memset(&c->local, 0, sizeof c->local);
        c->local.outer = &group;
        c->var[0] = c->expr[0] = row;
        emit_nest_loops(c, ne, 1, false);
        names_free(&c->local);
        c->indent--;
        line(c, "}");
    }
    cast_unused_temps(c);
    c->indent--;
    line(c, "}");
    c->indent--;
    line(c, "}");
    names_free(&group);
    memset(&c->local, 0, sizeof c->local);
}

/* ---- functions ---- */

/* Names the emitter uses at function scope. */
static const char *const reserved[] = {"ws", "args", "results", "workspace", "rc", "u"};

/* Identifiers that the headers the C includes (<math.h>, <stddef.h>, <stdint.h>, <stdlib.h>,
 * <string.h>) declare as macros, types or functions, that C compilers predefine in GNU modes
 * (the header is included by programs built in any mode), and C++'s keywords (the header is
 * also C++). A parameter or value of such a name gets another name in the C; a function of
 * such a name is refused (emit_name_taken). */
static const char *const c_library[] = {
    /* macros */
    "NAN", "INFINITY", "HUGE_VAL", "HUGE_VALF", "HUGE_VALL", "FP_INFINITE", "FP_NAN",
    "FP_NORMAL", "FP_SUBNORMAL", "FP_ZERO", "FP_FAST_FMA", "FP_FAST_FMAF", "FP_FAST_FMAL",
    "FP_ILOGB0", "FP_ILOGBNAN", "MATH_ERRNO", "MATH_ERREXCEPT", "math_errhandling", "NULL",
    "EXIT_FAILURE", "EXIT_SUCCESS", "RAND_MAX", "MB_CUR_MAX", "errno", "INT8_MIN", "INT8_MAX",
    "UINT8_MAX", "INT16_MIN", "INT16_MAX", "UINT16_MAX", "INT32_MIN", "INT32_MAX", "UINT32_MAX",
    "INT64_MIN", "INT64_MAX", "UINT64_MAX", "INT_LEAST8_MIN", "INT_LEAST8_MAX",
    "UINT_LEAST8_MAX", "INT_LEAST16_MIN", "INT_LEAST16_MAX", "UINT_LEAST16_MAX",
    "INT_LEAST32_MIN", "INT_LEAST32_MAX", "UINT_LEAST32_MAX", "INT_LEAST64_MIN",
    "INT_LEAST64_MAX", "UINT_LEAST64_MAX", "INT_FAST8_MIN", "INT_FAST8_MAX", "UINT_FAST8_MAX",
    "INT_FAST16_MIN", "INT_FAST16_MAX", "UINT_FAST16_MAX", "INT_FAST32_MIN", "INT_FAST32_MAX",
    "UINT_FAST32_MAX", "INT_FAST64_MIN", "INT_FAST64_MAX", "UINT_FAST64_MAX", "INTPTR_MIN",
    "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX", "UINTMAX_MAX", "PTRDIFF_MIN",
    "PTRDIFF_MAX", "SIG_ATOMIC_MIN", "SIG_ATOMIC_MAX", "SIZE_MAX", "WCHAR_MIN", "WCHAR_MAX",
    "WINT_MIN", "WINT_MAX", "linux", "unix", "i386",
    /* function-like macros: harmless as names, but not as functions */
    "INT8_C", "INT16_C", "INT32_C", "INT64_C", "UINT8_C", "UINT16_C", "UINT32_C", "UINT64_C",
    "INTMAX_C", "UINTMAX_C", "offsetof", "fpclassify", "isfinite", "isinf", "isnan", "isnormal",
    "signbit", "isgreater", "isgreaterequal", "isless", "islessequal", "islessgreater",
    "isunordered",
    /* types */
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
    "int_least8_t", "int_least16_t", "int_least32_t", "int_least64_t", "uint_least8_t",
    "uint_least16_t", "uint_least32_t", "uint_least64_t", "int_fast8_t", "int_fast16_t",
    "int_fast32_t", "int_fast64_t", "uint_fast8_t", "uint_fast16_t", "uint_fast32_t",
    "uint_fast64_t", "intptr_t", "uintptr_t", "intmax_t", "uintmax_t", "size_t", "ptrdiff_t",
    "wchar_t", "max_align_t", "div_t", "ldiv_t", "lldiv_t", "float_t", "double_t",
    /* <stdlib.h>, <string.h> */
    "atof", "atoi", "atol", "atoll", "strtod", "strtof", "strtold", "strtol", "strtoll",
    "strtoul", "strtoull", "rand", "srand", "calloc", "free", "malloc", "realloc",
    "aligned_alloc", "abort", "atexit", "at_quick_exit", "exit", "quick_exit", "_Exit",
    "getenv", "system", "bsearch", "qsort", "abs", "labs", "llabs", "div", "ldiv", "lldiv",
    "mblen", "mbtowc", "wctomb", "mbstowcs", "wcstombs", "memcpy", "memmove", "strcpy",
    "strncpy", "strcat", "strncat", "memcmp", "strcmp", "strcoll", "strncmp", "strxfrm",
    "memchr", "strchr", "strcspn", "strpbrk", "strrchr", "strspn", "strstr", "strtok",
    "memset", "strerror", "strlen",
    /* C++ keywords that C does not have */
    "alignas", "alignof", "and", "and_eq", "bitand", "bitor", "catch", "char8_t", "char16_t",
    "char32_t", "class", "compl", "concept", "consteval", "constexpr", "constinit",
    "const_cast", "co_await", "co_return", "co_yield", "decltype", "delete", "dynamic_cast",
    "explicit", "export", "friend", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "reinterpret_cast",
    "requires", "static_assert", "static_cast", "template", "this", "thread_local", "throw",
    "try", "typeid", "typename", "using", "virtual", "xor", "xor_eq",
};

/* The functions of <math.h>, each also with the suffixes f and l (expf, expl). */
static const char *const c_math[] = {
    "acos", "asin", "atan", "atan2", "cos", "sin", "tan", "acosh", "asinh", "atanh", "cosh",
    "sinh", "tanh", "exp", "exp2", "expm1", "frexp", "ilogb", "ldexp", "log", "log10", "log1p",
    "log2", "logb", "modf", "scalbn", "scalbln", "cbrt", "fabs", "hypot", "pow", "sqrt", "erf",
    "erfc", "lgamma", "tgamma", "ceil", "floor", "nearbyint", "rint", "lrint", "llrint",
    "round", "lround", "llround", "trunc", "fmod", "remainder", "remquo", "copysign", "nan",
    "nextafter", "nexttoward", "fdim", "fmax", "fmin", "fma",
};

/* Whether a math function's name, with the suffix sfx ("", "f" or "l"), is name. */
static bool is_math(const char *name, const char *fn, const char *sfx)
{
    size_t n = strlen(fn);
    return strncmp(name, fn, n) == 0 && strcmp(name + n, sfx) == 0;
}

bool emit_name_taken(const char *name)
{
    for (size_t i = 0; i < countof(c_library); i++)
        if (strcmp(name, c_library[i]) == 0)
            return true;
    for (size_t i = 0; i < countof(c_math); i++)
        if (is_math(name, c_math[i], "") || is_math(name, c_math[i], "f") ||
            is_math(name, c_math[i], "l"))
            return true;
    return false;
}

/* Records the names a function's C cannot give to its parameters and values: the emitter's,
 * the C library's, and the function's own entry points, which its wrappers call. */
static void reserve_names(ctx *c)
{
    for (size_t i = 0; i < countof(reserved); i++)
        names_add(&c->fn, reserved[i]);
    for (size_t i = 0; i < countof(c_library); i++)
        names_add(&c->fn, c_library[i]);
    char nm[IR_MAX_NAME + 32];
    for (size_t i = 0; i < countof(c_math); i++)
        for (int k = 0; k < 3; k++) {
            snprintf(nm, sizeof nm, "%s%s", c_math[i], k == 0 ? "" : k == 1 ? "f" : "l");
            names_add(&c->fn, nm);
        }
    static const char *const entry[] = {"_call", "_impl", "_workspace_size", "_call_ws"};
    for (size_t i = 0; i < countof(entry); i++) {
        snprintf(nm, sizeof nm, "%s%s", c->f->name, entry[i]);
        names_add(&c->fn, nm);
    }
}

/* The C names of the parameters and then the results, in ABI order, recorded in c->fn: the
 * graph's names, and for results that are parameters or unnamed, result<i>. */
static const char **abi_names(ctx *c)
{
    const nest_function *f = c->f;
    const char **abi = calloc((size_t)(f->nparams + f->nresults) + 1, sizeof *abi);
    if (!abi)
        return NULL;
    for (int32_t i = 0; i < f->nparams; i++)
        abi[i] = unique(&c->fn, f->nodes[f->params[i]].name);
    for (int32_t i = 0; i < f->nresults; i++) {
        const ir_node *n = &f->nodes[f->results[i]];
        const char *base = n->op == OP_PARAMETER ? "_" : namer_name(&c->nm, f->results[i]);
        char nm[IR_MAX_NAME + 16];
        if (base[0] == '_')
            snprintf(nm, sizeof nm, "result%d", i);
        else
            snprintf(nm, sizeof nm, "%s", base);
        abi[f->nparams + i] = unique(&c->fn, nm);
    }
    return abi;
}

/* The declaration of the typed entry point's parameters: "const float *restrict x, ...". */
static void param_list(ctx *c, buf *b, bool with_restrict, bool with_ws)
{
    const nest_function *f = c->f;
    const char *r = with_restrict ? "restrict " : "";
    bool any = false;
    for (int32_t i = 0; i < f->nparams; i++) {
        const ir_node *n = &f->nodes[f->params[i]];
        buf_printf(b, "%sconst %s *%s%s", any ? ", " : "", ctype(n->etype), r, c->bufname[i]);
        any = true;
    }
    for (int32_t i = 0; i < f->nresults; i++) {
        const ir_node *n = &f->nodes[f->results[i]];
        buf_printf(b, "%s%s *%s%s", any ? ", " : "", ctype(n->etype), r,
                   c->bufname[f->nparams + i]);
        any = true;
    }
    if (with_ws) {
        buf_printf(b, "%sunsigned char *%sws", any ? ", " : "", r);
        any = true;
    }
    if (!any)
        buf_puts(b, "void");
}

/* "(const float *)args[0], ..., (float *)results[0]", with the arrays named args and res */
static void call_args(ctx *c, buf *b, const char *ws, const char *args, const char *res)
{
    const nest_function *f = c->f;
    bool any = false;
    for (int32_t i = 0; i < f->nparams; i++) {
        buf_printf(b, "%s(const %s *)%s[%d]", any ? ", " : "",
                   ctype(f->nodes[f->params[i]].etype), args, i);
        any = true;
    }
    for (int32_t i = 0; i < f->nresults; i++) {
        buf_printf(b, "%s(%s *)%s[%d]", any ? ", " : "", ctype(f->nodes[f->results[i]].etype), res,
                   i);
        any = true;
    }
    if (ws)
        buf_printf(b, "%s%s", any ? ", " : "", ws);
}

static void signature_comment(ctx *c)
{
    const nest_function *f = c->f;
    buf t = {0};
    buf_printf(&t, "/* %s(", f->name);
    for (int32_t i = 0; i < f->nparams; i++) {
        const ir_node *n = &f->nodes[f->params[i]];
        buf_printf(&t, "%s%s: ", i ? ", " : "", n->name);
        ir_format_type(&t, f, f->params[i]);
        if (n->a.param.layout == NEST_COL_MAJOR)
            buf_puts(&t, " col");
    }
    buf_puts(&t, ") -> ");
    if (f->nresults != 1)
        buf_putc(&t, '(');
    for (int32_t i = 0; i < f->nresults; i++) {
        if (i)
            buf_puts(&t, ", ");
        ir_format_type(&t, f, f->results[i]);
        if (f->result_layout[i] == NEST_COL_MAJOR)
            buf_puts(&t, " col");
    }
    if (f->nresults != 1)
        buf_putc(&t, ')');
    buf_puts(&t, " */");
    char *s = buf_finish(&t);
    line(c, "%s", s ? s : "");
    free(s);
}

static void emit_constants(ctx *c)
{
    const plan *p = c->p;
    for (int32_t b = 0; b < p->nbufs; b++) {
        const pbuf *pb = &p->bufs[b];
        if (pb->kind != BUF_CONST)
            continue;
        const ir_node *n = &c->f->nodes[pb->node];
        char nm[IR_MAX_NAME + 64];
        snprintf(nm, sizeof nm, "nest_const_%s_%d", c->f->name, pb->index);
        c->bufname[b] = unique(&c->fn, nm);
        if (c->mode == EMIT_JIT)
            continue;
        buf_printf(c->b, "static const %s %s[%lld] = {", ctype(pb->etype), c->bufname[b],
                   (long long)(pb->count > 0 ? pb->count : 1));
        for (int64_t i = 0; i < pb->count; i++) {
            buf_puts(c->b, i % 8 ? ", " : (i ? ",\n    " : "\n    "));
            fx e = {.etype = pb->etype};
            switch (pb->etype) {
            case NEST_F32: e.imm.f = ((const float *)n->a.constant.data)[i]; break;
            case NEST_F64: e.imm.f = ((const double *)n->a.constant.data)[i]; break;
            case NEST_I32: e.imm.i = ((const int32_t *)n->a.constant.data)[i]; break;
            case NEST_I64: e.imm.i = ((const int64_t *)n->a.constant.data)[i]; break;
            default: e.imm.i = ((const uint8_t *)n->a.constant.data)[i]; break;
            }
            literal(c->b, pb->etype, &e);
        }
        buf_puts(c->b, pb->count > 0 ? "\n};\n" : "0};\n");
    }
    if (c->mode == EMIT_JIT && p->nconsts > 0) {
        char nm[IR_MAX_NAME + 32];
        snprintf(nm, sizeof nm, "nest_consts_%s", c->f->name);
        buf_printf(c->b, "const void *%s[%d];\n", nm, p->nconsts);
    }
}

void emit_function(buf *b, const plan *p, emit_mode mode, uint64_t *helpers)
{
    const nest_function *f = p->f;
    ctx c = {.b = b, .p = p, .mp = (plan *)p, .f = f, .mode = mode, .helpers = helpers};
    c.bufname = calloc((size_t)p->nbufs + 1, sizeof *c.bufname);
    c.refd = calloc((size_t)p->nbufs + 1, sizeof *c.refd);
    c.decl = calloc((size_t)p->nbufs + 1, sizeof *c.decl);
    if (!c.bufname || !c.refd || !c.decl || !namer_init(&c.nm, f)) {
        free(c.bufname);
        free(c.refd);
        free(c.decl);
        namer_free(&c.nm);
        b->failed = true;
        return;
    }
    /* the emitter's own names first, then the graph's */
    reserve_names(&c);
    /* buffers of parameters and results: their C names, in ABI order (bufname is indexed by
     * plan buffer; param i and result i are looked up below) */
    const char **abi = abi_names(&c);
    if (!abi) {
        b->failed = true;
        goto out;
    }
    for (int32_t bi = 0; bi < p->nbufs; bi++) {
        const pbuf *pb = &p->bufs[bi];
        if (pb->kind == BUF_PARAM)
            c.bufname[bi] = abi[pb->index];
        else if (pb->kind == BUF_RESULT)
            c.bufname[bi] = abi[f->nparams + pb->index];
    }
    emit_constants(&c);

    bool ws = p->ws_size > 0;
    /* the typed entry: parameters and results by name (with the workspace: the impl) */
    const char **save = c.bufname;
    c.bufname = abi;
    buf sig = {0};
    param_list(&c, &sig, true, ws);
    char *sigs = buf_finish(&sig);
    c.bufname = save;
    signature_comment(&c);
    if (ws)
        line(&c, "static int %s_impl(%s)", f->name, sigs ? sigs : "");
    else
        line(&c, "int %s(%s)", f->name, sigs ? sigs : "");
    free(sigs);
    line(&c, "{");
    c.indent++;
    for (int32_t bi = 0; bi < p->nbufs; bi++) {
        const pbuf *pb = &p->bufs[bi];
        if (pb->kind == BUF_CONST && mode == EMIT_JIT) {
            const char *name = unique(&c.fn, namer_name(&c.nm, pb->node));
            line(&c, "const %s *restrict %s = (const %s *)nest_consts_%s[%d];", ctype(pb->etype),
                 name, ctype(pb->etype), f->name, pb->index);
            c.bufname[bi] = name;
        }
    }
    for (int32_t k = 0; k < p->nnests; k++) {
        const nest *ne = &p->nests[k];
        if (ne->dead || (ne->rowed && ne->group != k))
            continue;
        if (ne->rowed) {
            emit_group(&c, k);
            continue;
        }
        if (!nest_runs(ne)) {
            c.ne = ne;
            emit_nest_comment(&c);
            line(&c, "/* (no elements) */");
            continue;
        }
        emit_nest(&c, k);
    }
    /* the names the body never wrote (unread parameters, loops without iterations, results
     * of nothing) are cast away, so that compilers see them used */
    for (int32_t bi = 0; bi < p->nbufs; bi++) {
        const pbuf *pb = &p->bufs[bi];
        if ((pb->kind == BUF_PARAM || pb->kind == BUF_RESULT || pb->kind == BUF_CONST) &&
            !c.refd[bi] && c.bufname[bi])
            line(&c, "(void)%s;", c.bufname[bi]);
    }
    if (ws && !c.ws_refd)
        line(&c, "(void)ws;");
    line(&c, "return 0;");
    c.indent--;
    line(&c, "}");
    line(&c, "%s", "");

    buf ca = {0};
    if (ws) {
        line(&c, "size_t %s_workspace_size(void)", f->name);
        line(&c, "{");
        line(&c, "    return %lld;", (long long)p->ws_size);
        line(&c, "}");
        line(&c, "%s", "");
        call_args(&c, &ca, "(unsigned char *)workspace", "args", "results");
        char *a = buf_finish(&ca);
        line(&c, "int %s_call_ws(void *const *args, void *const *results, void *workspace)", f->name);
        line(&c, "{");
        if (f->nparams == 0)
            line(&c, "    (void)args;");
        if (f->nresults == 0)
            line(&c, "    (void)results;");
        line(&c, "    return %s_impl(%s);", f->name, a ? a : "");
        line(&c, "}");
        line(&c, "%s", "");
        free(a);
        buf pl = {0};
        c.bufname = abi;
        param_list(&c, &pl, true, false);
        c.bufname = save;
        char *ps = buf_finish(&pl);
        line(&c, "int %s(%s)", f->name, ps ? ps : "");
        free(ps);
        line(&c, "{");
        line(&c, "    unsigned char *ws = malloc(%lld);", (long long)p->ws_size);
        line(&c, "    int rc;");
        line(&c, "    if (!ws)");
        line(&c, "        return 1;");
        buf cl = {0};
        for (int32_t i = 0; i < f->nparams + f->nresults; i++)
            buf_printf(&cl, "%s, ", abi[i]);
        char *cls = buf_finish(&cl);
        line(&c, "    rc = %s_impl(%sws);", f->name, cls ? cls : "");
        free(cls);
        line(&c, "    free(ws);");
        line(&c, "    return rc;");
        line(&c, "}");
        line(&c, "%s", "");
    }
    /* NAME_call calls NAME: its arrays must not hide a function named args or results */
    const char *an = strcmp(f->name, "args") ? "args" : "nest_args";
    const char *rn = strcmp(f->name, "results") ? "results" : "nest_results";
    call_args(&c, &ca, NULL, an, rn);
    char *a = buf_finish(&ca);
    line(&c, "int %s_call(void *const *%s, void *const *%s)", f->name, an, rn);
    line(&c, "{");
    if (f->nparams == 0)
        line(&c, "    (void)%s;", an);
    if (f->nresults == 0)
        line(&c, "    (void)%s;", rn);
    line(&c, "    return %s(%s);", f->name, a ? a : "");
    line(&c, "}");
    line(&c, "%s", "");
    free(a);
out:
    free(abi);
    free(c.hoist);
    free(c.bufname);
    free(c.refd);
    free(c.decl);
    names_free(&c.fn);
    namer_free(&c.nm);
}

void emit_header_decls(buf *b, const plan *p)
{
    const nest_function *f = p->f;
    ctx c = {.b = b, .p = p, .f = f};
    reserve_names(&c);
    if (!namer_init(&c.nm, f)) {
        namer_free(&c.nm);
        b->failed = true;
        return;
    }
    const char **names_ = abi_names(&c);
    if (!names_) {
        namer_free(&c.nm);
        names_free(&c.fn);
        b->failed = true;
        return;
    }
    c.bufname = names_;
    signature_comment(&c);
    buf pl = {0};
    param_list(&c, &pl, false, false);
    char *ps = buf_finish(&pl);
    line(&c, "int %s(%s);", f->name, ps ? ps : "");
    free(ps);
    line(&c, "int %s_call(void *const *args, void *const *results);", f->name);
    if (p->ws_size > 0) {
        line(&c, "size_t %s_workspace_size(void); /* %lld bytes */", f->name, (long long)p->ws_size);
        line(&c, "int %s_call_ws(void *const *args, void *const *results, void *workspace);",
             f->name);
    }
    line(&c, "%s", "");
    free(names_);
    names_free(&c.fn);
    namer_free(&c.nm);
}
