/*
 * fuzz_build.c - the C API's builders under libFuzzer: bytes become a sequence of calls of
 * nest.h (parameters, constants, the ops (convolution, pools, pad, gather, topk and the other
 * ops of real models among them), names, tuples, results) with operands, shapes, axes
 * and attributes taken from the bytes: mostly near-valid, often invalid, sometimes hostile
 * (negative or huge dims, out-of-range axes and indexes, NEST_NONE and stale values, NULL
 * arrays with a count, names that are not identifiers).
 *
 * What must hold, whatever the bytes:
 * - no crash, leak or undefined behaviour (ASan, UBSan);
 * - a builder returns a value of the function or NEST_NONE; NEST_NONE comes with an error
 *   (a code and a non-empty message), a value without one, and a failed builder adds nothing;
 * - every value's type and shape are what nest_value_type/rank/shape say, within the limits;
 * - with results set, the function prints, the text parses back to the same text, and it emits
 *   C (or fails with a limit error, never anything else).
 *
 *   make fuzz-build   runs it for FUZZ_TIME seconds; the seeds are tests/corpus/build/.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nest.h"

#define MAXV 64

typedef struct in {
    const uint8_t *p;
    size_t n;
} in;

static unsigned byte(in *s)
{
    if (!s->n)
        return 0;
    s->n--;
    return *s->p++;
}

/* A dimension: mostly small, sometimes 0, rarely hostile. */
static int64_t dim(in *s)
{
    unsigned b = byte(s);
    if (b < 200)
        return b % 6;
    switch (b % 8) {
    case 0: return -1;
    case 1: return INT64_MAX;
    case 2: return (int64_t)1 << 31;
    case 3: return (int64_t)1 << 40;
    case 4: return INT64_MIN;
    default: return 1 + b % 64;
    }
}

/* An axis or an index: mostly in range for rank, sometimes not. */
static int64_t axis(in *s, int rank)
{
    unsigned b = byte(s);
    if (b < 220)
        return rank > 0 ? (int64_t)(b % (unsigned)rank) : 0;
    return b % 2 ? -(int64_t)(b % 5) : rank + (int64_t)(b % 3);
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_build: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

typedef struct st {
    nest_function *f;
    nest_value v[MAXV];
    int nv;
} st;

/* A value: one made so far, or rarely NEST_NONE or a value of no function. */
static nest_value value(st *g, in *s)
{
    unsigned b = byte(s);
    if (g->nv == 0 || b >= 250)
        return b % 2 ? NEST_NONE : 100000 + (nest_value)b;
    return g->v[b % (unsigned)g->nv];
}

static int rank_of(st *g, nest_value v)
{
    int r = nest_value_rank(g->f, v);
    return r < 0 ? 0 : r;
}

/* none: an operand was NEST_NONE, and then (as documented) a failure may leave no error. */
static void check_value(st *g, nest_value r, const char *op, bool none)
{
    int code = nest_errcode(g->f);
    if (r == NEST_NONE) {
        if (!none && (code == NEST_OK || !nest_errmsg(g->f)[0]))
            die("a builder failed without an error", op);
        nest_clear_error(g->f);
        return;
    }
    if (code != NEST_OK)
        die("a builder gave a value and an error", nest_errmsg(g->f));
    int t = nest_value_type(g->f, r), rk = nest_value_rank(g->f, r);
    if ((t < 0) != (rk < 0) || t > NEST_BOOL || rk > NEST_MAX_RANK)
        die("a value with a wrong type or rank", op);
    if (t >= 0) { /* a tensor (a tuple has neither type nor rank: -1) */
        const int64_t *sh = nest_value_shape(g->f, r);
        for (int i = 0; i < rk; i++)
            if (!sh || sh[i] < 0)
                die("a value with a negative or missing dim", op);
    }
    if (g->nv < MAXV)
        g->v[g->nv++] = r;
}

static void one_call(st *g, in *s)
{
    static const char *const names[] = {"x", "y", "w_1", "_a", "int", "nest_x", "1x", "a-b",
                                        "", "x", "main", "printf"};
    nest_function *f = g->f;
    unsigned op = byte(s) % 34;
    /* room for any rank (the hostile parameter asks for 40): the API reads rank entries */
    int64_t shape[48], ax[48], lo[48], hi[48], st_[48];
    int rank = (int)(byte(s) % 5);
    for (int i = 0; i < 48; i++)
        shape[i] = i < 6 ? dim(s) : 1, ax[i] = lo[i] = 0, hi[i] = st_[i] = 1;
    nest_value a = value(g, s), b = value(g, s), c = value(g, s);
    nest_value r = NEST_NONE;
    const char *what = "?";
    switch (op) {
    case 0: {
        what = "parameter";
        const char *nm = names[byte(s) % (sizeof names / sizeof *names)];
        char uniq[32];
        snprintf(uniq, sizeof uniq, "%s%u", nm, byte(s) % 4);
        r = nest_parameter(f, byte(s) % 2 ? uniq : nm, (nest_type)(byte(s) % 6), rank, shape,
                           (nest_layout)(byte(s) % 2));
        break;
    }
    case 1: {
        what = "constant";
        double data[16];
        for (int i = 0; i < 16; i++)
            data[i] = (double)(int8_t)byte(s) / 4.0;
        int64_t count = byte(s) % 3 == 0 ? 1 : (int64_t)(byte(s) % 18);
        r = nest_constant(f, (nest_type)(byte(s) % 5), rank, shape, byte(s) == 255 ? NULL : data,
                          count);
        break;
    }
    case 2: what = "add"; r = nest_add(f, a, b); break;
    case 3: what = "subtract"; r = nest_subtract(f, a, b); break;
    case 4: what = "multiply"; r = nest_multiply(f, a, a); break;
    case 5: what = "divide"; r = nest_divide(f, a, b); break;
    case 6: what = "maximum/minimum"; r = byte(s) % 2 ? nest_maximum(f, a, b) : nest_minimum(f, a, b); break;
    case 7: what = "power"; r = nest_power(f, a, a); break;
    case 8: {
        what = "unary";
        nest_value (*un[])(nest_function *, nest_value) = {nest_negative, nest_abs, nest_exp,
                                                            nest_log, nest_sqrt, nest_tanh};
        r = un[byte(s) % 6](f, a);
        break;
    }
    case 9: {
        what = "compare";
        unsigned k = byte(s) % 3;
        r = k == 0 ? nest_less(f, a, b) : k == 1 ? nest_greater(f, a, a) : nest_equal(f, a, b);
        break;
    }
    case 10: what = "select"; r = nest_select(f, c, a, b); break;
    case 11: what = "convert"; r = nest_convert(f, a, (nest_type)(byte(s) % 6)); break;
    case 12: what = "dot"; r = nest_dot(f, a, b); break;
    case 13: {
        /* broadcast a to its own shape with new axes inserted */
        what = "broadcast";
        int ra = rank_of(g, a), nnew = (int)(byte(s) % 3), out = ra + nnew;
        const int64_t *sa = nest_value_shape(f, a);
        uint32_t newmask = 0;
        int naxes = 0;
        for (int i = 0; i < nnew && out <= 40; i++) {
            ax[naxes] = axis(s, out);
            newmask |= 1u << (ax[naxes] & 31);
            naxes++;
        }
        for (int i = 0, j = 0; i < out; i++)
            shape[i] = i < 32 && ((newmask >> i) & 1) ? dim(s) : (sa && j < ra ? sa[j++] : dim(s));
        if (byte(s) == 7)
            shape[0] = dim(s);
        r = nest_broadcast(f, a, out, shape, naxes, ax);
        break;
    }
    case 14: {
        /* a permutation of a (a transpose), or a flattening reshape */
        what = "reshape";
        int ra = rank_of(g, a);
        const int64_t *sa = nest_value_shape(f, a);
        int64_t order[NEST_MAX_RANK];
        for (int i = 0; i < ra; i++)
            order[i] = i;
        for (int i = ra - 1; i > 0; i--) {
            int j = (int)(byte(s) % (unsigned)(i + 1));
            int64_t t = order[i];
            order[i] = order[j], order[j] = t;
        }
        if (byte(s) % 4 == 0 && ra > 0)
            order[0] = axis(s, ra + 1);
        int64_t n = 1;
        for (int i = 0; i < ra && sa; i++)
            n *= sa[i] <= 1000 ? sa[i] : 1;
        if (byte(s) % 2 && sa) {
            for (int i = 0; i < ra; i++)
                shape[i] = sa[order[i] >= 0 && order[i] < ra ? order[i] : 0];
            r = nest_reshape(f, a, byte(s) % 8 ? order : NULL, ra, shape);
        } else {
            shape[0] = byte(s) % 8 ? n : dim(s);
            r = nest_reshape(f, a, NULL, 1, shape);
        }
        break;
    }
    case 15: {
        what = "slice";
        int ra = rank_of(g, a);
        const int64_t *sa = nest_value_shape(f, a);
        for (int i = 0; i < ra; i++) {
            int64_t d = sa ? sa[i] : 1;
            lo[i] = byte(s) % 8 ? (int64_t)(byte(s) % (unsigned)(d + 1 > 0 && d < 256 ? d + 1 : 1)) : dim(s);
            hi[i] = byte(s) % 8 ? d : dim(s);
            st_[i] = byte(s) % 8 ? 1 + byte(s) % 3 : dim(s);
        }
        r = nest_slice(f, a, lo, hi, byte(s) % 3 ? st_ : NULL);
        break;
    }
    case 16: {
        what = "concat";
        nest_value parts[3] = {a, byte(s) % 2 ? a : b, c};
        r = nest_concat(f, 1 + (int)(byte(s) % 3), parts, axis(s, rank_of(g, a)));
        break;
    }
    case 17: case 18: case 19: {
        what = "reduce";
        int ra = rank_of(g, a), n = (int)(byte(s) % (unsigned)(ra + 2));
        for (int i = 0; i < n; i++)
            ax[i] = byte(s) % 8 ? i : axis(s, ra);
        nest_value (*red[])(nest_function *, nest_value, int, const int64_t *) = {nest_sum, nest_max,
                                                                                 nest_min};
        r = red[op - 17](f, a, n, ax);
        break;
    }
    case 20: {
        what = "tuple";
        nest_value parts[3] = {a, b, c};
        r = nest_tuple(f, (int)(byte(s) % 4), parts);
        break;
    }
    case 21: what = "get"; r = nest_get(f, a, (int64_t)(byte(s) % 5) - 1); break;
    case 22: {
        what = "set_name";
        const char *nm = names[byte(s) % (sizeof names / sizeof *names)];
        int rc = nest_set_name(f, a, nm);
        if (rc != NEST_OK) {
            if (nest_errcode(f) != rc || !nest_errmsg(f)[0])
                die("nest_set_name failed without its error", nm);
            nest_clear_error(f);
        }
        return;
    }
    case 23: {
        what = "return";
        nest_value vals[3] = {a, b, c};
        nest_layout lay[3] = {NEST_ROW_MAJOR, NEST_COL_MAJOR, (nest_layout)(byte(s) % 3)};
        int nret = 1 + (int)(byte(s) % 3);
        /* layouts has one entry per flattened result: given only when no value is a tuple */
        bool tensors = true;
        for (int i = 0; i < nret; i++)
            tensors = tensors && (vals[i] == NEST_NONE || nest_value_type(f, vals[i]) >= 0);
        int rc = nest_return(f, nret, vals, tensors && byte(s) % 2 ? lay : NULL);
        if (rc != NEST_OK) {
            if (nest_errcode(f) != rc || !nest_errmsg(f)[0])
                die("nest_return failed without its error", NULL);
            nest_clear_error(f);
        }
        return;
    }
    case 24: case 25: case 26: {
        /* convolution, max_pool, avg_pool over a's spatial axes (rank - 2 of them), each
         * attribute given or NULL (its default), mostly small, sometimes hostile */
        int k = rank_of(g, a) - 2 > 0 ? rank_of(g, a) - 2 : 1;
        int64_t win[48], dil[48], ddil[48];
        for (int i = 0; i < 48; i++) {
            win[i] = i < k && byte(s) % 8 ? 1 + byte(s) % 3 : dim(s);
            st_[i] = i < k && byte(s) % 8 ? 1 + byte(s) % 2 : dim(s);
            dil[i] = i < k && byte(s) % 8 ? 1 + byte(s) % 2 : dim(s);
            ddil[i] = i < k && byte(s) % 8 ? 1 + byte(s) % 2 : dim(s);
            lo[i] = byte(s) % 4 ? (int64_t)(byte(s) % 3) - (byte(s) % 8 == 0) : dim(s);
            hi[i] = byte(s) % 4 ? (int64_t)(byte(s) % 3) : dim(s);
        }
        unsigned nulls = byte(s);
#define OPT(bit, arr) ((nulls >> (bit)) & 1 ? NULL : (arr))
        if (op == 24) {
            what = "convolution";
            int64_t groups = byte(s) % 4 ? 1 + byte(s) % 3 : dim(s);
            r = nest_convolution(f, a, b, OPT(0, st_), OPT(1, dil), OPT(2, lo), OPT(3, hi),
                                 OPT(4, ddil), groups);
        } else if (op == 25) {
            what = "max_pool";
            r = nest_max_pool(f, a, byte(s) == 255 ? NULL : win, OPT(0, st_), OPT(2, lo), OPT(3, hi));
        } else {
            what = "avg_pool";
            r = nest_avg_pool(f, a, byte(s) == 255 ? NULL : win, OPT(0, st_), OPT(2, lo), OPT(3, hi),
                              (int)(byte(s) % 2));
        }
#undef OPT
        break;
    }
    case 27: {
        what = "pad";
        for (int i = 0; i < 48; i++) {
            lo[i] = byte(s) % 4 ? (int64_t)(byte(s) % 4) - 1 : dim(s);
            hi[i] = byte(s) % 4 ? (int64_t)(byte(s) % 4) - 1 : dim(s);
            st_[i] = byte(s) % 4 ? (int64_t)(byte(s) % 2) : dim(s);
        }
        r = nest_pad(f, a, b, lo, hi, byte(s) % 2 ? st_ : NULL);
        break;
    }
    case 28: {
        what = "reverse/softmax/product";
        int ra = rank_of(g, a), n = (int)(byte(s) % (unsigned)(ra + 2));
        for (int i = 0; i < n; i++)
            ax[i] = byte(s) % 8 ? i : axis(s, ra);
        unsigned k = byte(s) % 3;
        r = k == 0 ? nest_reverse(f, a, n, ax) : k == 1 ? nest_softmax(f, a, n, ax)
                                                        : nest_product(f, a, n, ax);
        break;
    }
    case 29: {
        what = "gather/argmax/argmin";
        unsigned k = byte(s) % 3;
        int64_t x = axis(s, rank_of(g, a));
        r = k == 0 ? nest_gather(f, a, b, x) : k == 1 ? nest_argmax(f, a, x) : nest_argmin(f, a, x);
        break;
    }
    case 30: {
        what = "topk";
        int64_t k = byte(s) % 8 ? (int64_t)(byte(s) % 4) : dim(s);
        r = nest_topk(f, a, k, axis(s, rank_of(g, a)), (int)(byte(s) % 2));
        break;
    }
    case 31: what = "batch_dot"; r = nest_batch_dot(f, a, b); break;
    case 32: {
        what = "one_hot/replace_slice";
        if (byte(s) % 2) {
            r = nest_one_hot(f, a, rank, shape, axis(s, rank));
        } else {
            int ra = rank_of(g, a);
            const int64_t *sa = nest_value_shape(f, a);
            for (int i = 0; i < ra && i < 48; i++) {
                lo[i] = byte(s) % 8 ? 0 : dim(s);
                hi[i] = byte(s) % 8 && sa ? sa[i] : dim(s);
            }
            r = nest_replace_slice(f, a, b, lo, hi, byte(s) % 2 ? st_ : NULL);
        }
        break;
    }
    default:
        what = "hostile";
        switch (byte(s) % 4) {
        case 0: r = nest_parameter(f, "h", NEST_F32, 2, NULL, NEST_ROW_MAJOR); break;
        case 1: r = nest_broadcast(f, a, 2, shape, 3, NULL); break;
        case 2: r = nest_concat(f, 2, NULL, 0); break;
        default: r = nest_parameter(f, "h", NEST_F32, 40, shape, NEST_ROW_MAJOR); break;
        }
        break;
    }
    check_value(g, r, what, a == NEST_NONE || b == NEST_NONE || c == NEST_NONE);
}

static void round_trip(nest_function *f)
{
    char *t1 = nest_print(&f, 1);
    if (!t1)
        die("nest_print failed", nest_errmsg(f));
    nest_module *m = nest_parse(t1, strlen(t1), "printed.nest");
    if (!m)
        abort();
    if (nest_module_errcode(m) != NEST_OK)
        die("the printed text does not parse", nest_module_errmsg(m));
    nest_function *g = nest_module_function(m, 0);
    char *t2 = nest_print(&g, 1);
    if (!t2 || strcmp(t1, t2) != 0)
        die("print -> parse -> print changed the text", t1);
    free(t2);
    nest_module_free(m);
    free(t1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in s = {data, size};
    st g = {0};
    g.f = nest_function_new(byte(&s) == 1 ? "int" : "fz");
    if (!g.f)
        return 0;
    bool named = nest_errcode(g.f) == NEST_OK;
    for (int i = 0; i < 48 && s.n > 0; i++)
        one_call(&g, &s);
    if (named && nest_result_count(g.f) > 0) {
        round_trip(g.f);
        char *c = nest_emit(&g.f, 1, NEST_EMIT_C, NULL);
        if (!c && nest_errcode(g.f) != NEST_ERR_LIMIT)
            die("emitting C failed", nest_errmsg(g.f));
        free(c);
    }
    nest_function_free(g.f);
    return 0;
}
