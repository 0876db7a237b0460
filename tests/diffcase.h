/*
 * diffcase.h - the harness of the differential tests (test_diff.c, test_diff_ops.c): cases built
 * by small builders, deterministic inputs, the reference interpreter as the oracle, compiled runs
 * under several variants, and the comparison of every result. diffcase.c says how results are
 * compared and what the inputs hold.
 */
#ifndef NEST_DIFFCASE_H
#define NEST_DIFFCASE_H

#include <stdarg.h>

#include "testutil.h"

#define countof_(a) (sizeof(a) / sizeof((a)[0]))
#if defined(__GNUC__) || defined(__clang__)
#define FORMAT_(a, b) __attribute__((format(printf, a, b)))
#else
#define FORMAT_(a, b)
#endif

/* ---------------------------------------------------------------------------------------------
 * Inputs
 * ------------------------------------------------------------------------------------------- */

typedef enum gen {
    G_GENERAL, /* floats: moderate, both signs, varied magnitude; integers: wrap when combined */
    G_EXTREME, /* G_GENERAL plus inf, NaN, the largest finite values, subnormals */
    G_SMALL,   /* a few values, so that comparisons see equal operands (floats with inf, NaN) */
    G_POWEXP,  /* exponents of power: small integers and fractions; integers also huge/negative */
    G_EXACT,   /* floats that are multiples of 1/4 in [-2, 2]: sums and dots are exact */
    G_CONVERT, /* values at the edges of every conversion */
    G_BOOL,    /* 0 or 1 (any bool parameter gets it) */
} gen;

/* ---------------------------------------------------------------------------------------------
 * Building cases
 * ------------------------------------------------------------------------------------------- */

/* How a float result is compared (diffcase.c says why): exactly; arithmetic within 2 ulp; libm
 * within 4 ulp; a sum of n terms by its magnitude; a softmax over n elements within
 * 9 + n + (|ln w| + ln n) / 2 ulp. */
enum rkind { R_EXACT, R_ARITH, R_TRANS, R_SUM, R_NORM };

#define MAXP 512
#define MAXR 512
#define LABEL 64

typedef struct bctx {
    nest_function *f;
    bool mag;          /* building the magnitude twin (abs around reduced and contracted operands) */
    nest_layout lay;   /* layout of the parameters and results made through P and R */
    int np;
    uint8_t gen[MAXP];
    int nv;            /* values returned (a tuple is one) */
    nest_value res[MAXR];
    int nr;            /* result arrays (a tuple's elements each): the metadata below */
    nest_layout rlay[MAXR];
    uint8_t kind[MAXR];
    int64_t nterms[MAXR];
    char label[MAXR][LABEL];
} bctx;

typedef void (*build_fn)(bctx *b, const void *arg);

/* A shape: rank and dims. */
typedef struct shp {
    int rank;
    int64_t d[4];
} shp;

static const shp SHAPES[] = {
    {0, {0}},     {1, {1}},      {3, {1, 1, 1}},     {1, {0}},        {3, {3, 0, 2}},
    {1, {7}},     {1, {33}},     {2, {5, 17}},       {1, {1000003}},  {3, {64, 65, 67}},
};
#define NSHAPES ((int)countof_(SHAPES))

/* A reduction's operand shape and the axes it reduces. */
typedef struct red_form {
    shp in;
    int naxes;
    int64_t axes[3];
} red_form;
#define SHS(t, s) shape_str((t), (s)->rank, (s)->d)
#define PS(b, t, s, g) P((b), (t), (s)->rank, (s)->d, (g))

/* ---------------------------------------------------------------------------------------------
 * Arrays of a function's parameters and results
 * ------------------------------------------------------------------------------------------- */

#define GUARD 64
#define GUARD_BYTE 0xA5

typedef struct arrays {
    int n;
    void **p;
    int64_t *count;
    uint8_t *type;
    size_t *bytes;
} arrays;

/* ---------------------------------------------------------------------------------------------
 * Running a case
 * ------------------------------------------------------------------------------------------- */

enum {
    V_FUSE = 1 << 0,      /* JIT, default options (fusion on, OpenMP on) */
    V_NOFUSE = 1 << 1,    /* JIT, fuse = 0 */
    V_NOOMP = 1 << 2,     /* JIT, openmp = 0 */
    V_AOT = 1 << 3,       /* nest_build_so with the default cc */
    V_AOT_CLANG = 1 << 4, /* nest_build_so with clang-14 */
    V_COL = 1 << 5,       /* also build the case with column-major parameters and results */
    V_ALIAS = 1 << 6,     /* parameters of one type and shape get the same array */
    V_NOROW = 1 << 7,     /* with V_COL: only the column-major build */
    V_MARCH = 1 << 8,     /* JIT for another CPU than this one (x86-64-v2: narrower vectors) */
    V_STD = V_FUSE | V_NOFUSE,
};

typedef struct variant {
    unsigned flag;
    const char *what;
    int fuse, openmp;
    const char *cc;    /* AOT when set */
    const char *march; /* NULL: the default (native) */
} variant;

static const variant VARIANTS[] = {
    {V_FUSE, "jit", 1, 1, NULL, NULL},
    {V_NOFUSE, "jit fuse=0", 0, 1, NULL, NULL},
    {V_NOOMP, "jit openmp=0", 1, 0, NULL, NULL},
    {V_MARCH, "jit march=x86-64-v2", 1, 1, NULL, "x86-64-v2"},
    {V_AOT, "aot cc", 1, 1, "cc", NULL},
    {V_AOT_CLANG, "aot clang-14", 1, 1, "clang-14", NULL},
};

typedef int (*call_fn)(void *const *, void *const *);
typedef int (*call_ws_fn)(void *const *, void *const *, void *);
typedef size_t (*ws_size_fn)(void);

/* A case built, with inputs, the oracle's results (and magnitudes), and arrays for the runs. */
typedef struct prepared {
    const char *name;
    bctx *b, *m;
    arrays args, want, got, mag;
    unsigned char **owned; /* each parameter's own array (args.p may share them) */
    unsigned char **copy;  /* the inputs as made, to check that no call writes them */
    double ms;
} prepared;

/* ---------------------------------------------------------------------------------------------
 * The harness (diffcase.c)
 * ------------------------------------------------------------------------------------------- */

/* The group fixture: a fresh directory for the compile cache and the files of the run. */
int group_setup(void **state);
int group_teardown(void **state);
/* Runs a suite's tests between group_setup and group_teardown: only those matching the cmocka
 * pattern NEST_DIFF_TEST (test_aot*) if set; with NEST_DIFF_VERBOSE, the counts at the end. */
int diff_run_tests(const char *name, const struct CMUnitTest *tests, size_t n);
#define run_diff_tests(tests) diff_run_tests(#tests, (tests), countof_(tests))
extern bool g_verbose;
extern int g_cases, g_runs;
extern int64_t g_results, g_elements;

int64_t shp_count(const shp *s);
const char *tname(nest_type t);
/* "f32[5,17]", in a ring of 8 static buffers (SHS: of a shp) */
const char *shape_str(nest_type t, int rank, const int64_t *d);
/* A parameter with an input generator (PS: of a shp); its layout is the case's. */
nest_value P(bctx *b, nest_type t, int rank, const int64_t *shape, gen g);
/* A parameter in a layout of its own. */
nest_value PL(bctx *b, nest_type t, int rank, const int64_t *shape, gen g, nest_layout lay);
/* A result of the case: the kind of op that made it sets the float tolerance. */
void R(bctx *b, nest_value v, int kind, const char *fmt, ...) FORMAT_(4, 5);
/* A sum or dot result of nterms terms per element. */
void RS(bctx *b, nest_value v, int64_t nterms, const char *fmt, ...) FORMAT_(4, 5);
/* A softmax result normalized over n elements. */
void RN(bctx *b, nest_value v, int64_t n, const char *fmt, ...) FORMAT_(4, 5);
/* A tuple result of n elements (no nested tuples), of the kinds given. */
void RT(bctx *b, nest_value v, int n, const uint8_t *kinds, const int64_t *nterms,
        const char *label);
/* In the magnitude twin, |v| (floats); else v. Wrap every operand of sum and dot in it. */
nest_value M(bctx *b, nest_value v);
bool is_float_t(int t);
/* Builds a case: returns the context with f, or fails the test after reporting the error. */
bctx *build(const char *name, build_fn fn, const void *arg, nest_layout lay, bool mag);
void bctx_free(bctx *b);
void arrays_alloc(arrays *a, const nest_function *f, bool results);
void arrays_free(arrays *a);
void arrays_poison(arrays *a);
/* A symbol of a loaded shared object. */
void *fn_sym(void *h, const char *name);
/* Calls f's entry points in a loaded .so into got; false after printing why. */
bool so_call(void *h, nest_function *f, const char *what, arrays *args, arrays *got);
/* A unique path in the run's temporary directory. */
void temp_path(char *out, size_t cap, const char *stem, const char *ext);
/* Builds fns into a .so as variant v says and loads it; NULL after printing why. */
void *build_and_load(nest_function *const *fns, int n, const variant *v);
/* A case built with its inputs and the oracle's results; verify compares a run's results. */
void prepare(prepared *pr, const char *name, build_fn fn, const void *arg, nest_layout lay,
             bool alias);
int verify(prepared *pr, const char *how);
void release(prepared *pr);
/* Runs one case under the variants in flags; fails the test after reporting every mismatch. */
void check_case(const char *name, build_fn fn, const void *arg, unsigned flags);
/* Compiles f (fused and not) and calls it on args; each result must equal want[r] (floats:
 * equal, or both NaN): values worked out by hand, not by the interpreter. */
void anchor(nest_function *f, void *const *args, const void *const *want);
/* Runs a shell command (output into a temporary log); false after printing the output. */
bool run_cmd(const char *cmd);
/* Names of the emitter's own identifiers, the C library's and C++ keywords (NCOLLIDING of them);
 * build_emit_names builds parameters and values named so (test_diff.c compiles it without
 * warnings, test_diff_abi.c compares it with the oracle). */
extern const char *const COLLIDING[];
extern const size_t NCOLLIDING;
void build_emit_names(bctx *b, const void *arg);
bool write_file(const char *path, const char *text);

#endif /* NEST_DIFFCASE_H */
