/*
 * parse.c - the text form (.nest) into functions.
 *
 *   file   := (func | state)*
 *   state  := ("var" | "persistent") NAME ":" type "=" init
 *   init   := "zeros" | value | "[" values "]" | ("uniform" | "normal") "(" value "," value ","
 *             "seed" "=" INT ")"
 *   func   := "func" NAME "(" [param {"," param}] ")" "->" rets "{" stmt* "}"
 *   param  := NAME ":" type [layout]
 *   rets   := type [layout] | "(" [type [layout] {"," type [layout]}] ")"
 *   type   := ("f32" | "f64" | "i32" | "i64" | "bool") "[" [INT {"," INT}] "]"
 *   layout := "row" | "col"
 *   stmt   := NAME "=" expr | "assign" "(" NAME "," expr ")" | "return" [expr {"," expr}]
 *   expr   := NAME | OP "(" [arg {"," arg}] ")" | "grad" "(" expr {"," NAME} ")"
 *   arg    := expr | NAME "=" value | type | value        (by op: see parse_call)
 *   value  := number | "true" | "false" | "inf" | "nan" | "-" value | "[" [value {"," value}] "]"
 *
 * The state a module declares is in scope in every function after it: a state NAME reads the
 * tensor's value at the call's entry. Comments run from '#' to the end of the line. The parser stops at the first error and
 * records "file:line:col: error: message" on the module. It never recurses deeper than
 * PARSE_MAX_DEPTH calls.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef enum tok_kind {
    T_EOF, T_NAME, T_INT, T_FLOAT, T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_LBRACE, T_RBRACE,
    T_COMMA, T_COLON, T_EQ, T_ARROW, T_MINUS, T_PLUS, T_STAR,
} tok_kind;

static const char *const tok_text[] = {
    "end of file", "a name", "an integer", "a number", "'('", "')'", "'['", "']'", "'{'", "'}'",
    "','", "':'", "'='", "'->'", "'-'", "'+'", "'*'",
};

typedef struct token {
    tok_kind kind;
    const char *s; /* into the source */
    size_t len;
    int line, col;
} token;

/* A symbol of the function being parsed: NAME -> node. Open addressing, grows. */
typedef struct sym {
    const char *name; /* into the source */
    size_t len;
    int32_t node;
    int line, col;
} sym;

typedef struct parser {
    const char *src, *end, *p;
    const char *file;
    int line;
    const char *line_start;
    token tok;         /* the current token */
    nest_module *m;
    nest_function *f;  /* the function being parsed */
    sym *syms;
    size_t nsyms, capsyms;
    int depth;
    struct call_slot **slots; /* per call depth, reused: see parse_call */
    size_t nslots, capslots;
    arena scratch;     /* everything temporary: freed once at the end, also after an error */
    jmp_buf fail;
} parser;

/* ---- errors ---- */

static _Noreturn void error_at(parser *ps, int line, int col, int status, const char *fmt, ...)
    FORMAT(5, 6);
static _Noreturn void error_at(parser *ps, int line, int col, int status, const char *fmt, ...)
{
    buf b = {0};
    buf_printf(&b, "%s:%d:%d: error: ", ps->file, line, col);
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    nest_module *m = ps->m;
    free(m->errmsg);
    m->errmsg = buf_finish(&b);
    m->status = m->errmsg ? status : NEST_ERR_NOMEM;
    m->line = line;
    m->col = col;
    longjmp(ps->fail, 1);
}

#define error_tok(ps, t, ...) error_at(ps, (t)->line, (t)->col, NEST_ERR_SYNTAX, __VA_ARGS__)

static _Noreturn void oom(parser *ps)
{
    error_at(ps, ps->tok.line, ps->tok.col, NEST_ERR_NOMEM, "out of memory");
}

/* Grows an array in the scratch arena to hold n + 1 elements of `size` bytes. */
static void *grow(parser *ps, void *p, size_t n, size_t *cap, size_t size)
{
    void *q = arena_grow(&ps->scratch, p, n, cap, size);
    if (!q)
        oom(ps);
    return q;
}

/* A token's text for messages: at most 40 bytes, printable ASCII only. */
static const char *show(const token *t, char out[64])
{
    if (t->kind == T_EOF)
        return "end of file";
    size_t n = t->len < 40 ? t->len : 40;
    size_t k = 0;
    out[k++] = '\'';
    for (size_t i = 0; i < n; i++)
        out[k++] = (t->s[i] >= 0x20 && t->s[i] < 0x7f) ? t->s[i] : '?';
    if (t->len > n) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k++] = '\'';
    out[k] = '\0';
    return out;
}

/* ---- lexer ---- */

static bool is_name_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }

/* The length of the valid UTF-8 sequence at p (1 to 4), or 0 if it is not valid. */
static int utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    int n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    if (end - p < n)
        return 0;
    unsigned cp = c & (0x3f >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static int col_of(parser *ps, const char *p) { return (int)(p - ps->line_start) + 1; }

static void next(parser *ps)
{
    const char *p = ps->p;
    for (;;) {
        if (p == ps->end)
            break;
        char c = *p;
        if (c == '\n') {
            p++;
            ps->line++;
            ps->line_start = p;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p++;
        } else if (c == '#') {
            while (p < ps->end && *p != '\n') {
                if (*p == '\0')
                    error_at(ps, ps->line, col_of(ps, p), NEST_ERR_SYNTAX, "NUL byte in the input");
                int n = utf8_len((const unsigned char *)p, (const unsigned char *)ps->end);
                if (n == 0)
                    error_at(ps, ps->line, col_of(ps, p), NEST_ERR_SYNTAX,
                             "invalid UTF-8 byte 0x%02x", (unsigned char)*p);
                p += n;
            }
        } else {
            break;
        }
    }
    token *t = &ps->tok;
    t->s = p;
    t->line = ps->line;
    t->col = col_of(ps, p);
    if (p == ps->end) {
        t->kind = T_EOF;
        t->len = 0;
        ps->p = p;
        return;
    }
    unsigned char c = (unsigned char)*p;
    const char *start = p;
    if (is_name_start(c)) {
        while (p < ps->end && (is_name_start((unsigned char)*p) || is_digit((unsigned char)*p)))
            p++;
        t->kind = T_NAME;
    } else if (is_digit(c) || (c == '.' && p + 1 < ps->end && is_digit((unsigned char)p[1]))) {
        t->kind = T_INT;
        while (p < ps->end && is_digit((unsigned char)*p))
            p++;
        if (p < ps->end && *p == '.') {
            t->kind = T_FLOAT;
            p++;
            while (p < ps->end && is_digit((unsigned char)*p))
                p++;
        }
        if (p < ps->end && (*p == 'e' || *p == 'E')) {
            const char *q = p + 1;
            if (q < ps->end && (*q == '+' || *q == '-'))
                q++;
            if (q < ps->end && is_digit((unsigned char)*q)) {
                t->kind = T_FLOAT;
                p = q;
                while (p < ps->end && is_digit((unsigned char)*p))
                    p++;
            }
        }
        if (p < ps->end && (is_name_start((unsigned char)*p) || *p == '.'))
            error_at(ps, ps->line, col_of(ps, p), NEST_ERR_SYNTAX, "malformed number");
    } else {
        p++;
        switch (c) {
        case '(': t->kind = T_LPAREN; break;
        case ')': t->kind = T_RPAREN; break;
        case '[': t->kind = T_LBRACK; break;
        case ']': t->kind = T_RBRACK; break;
        case '{': t->kind = T_LBRACE; break;
        case '}': t->kind = T_RBRACE; break;
        case ',': t->kind = T_COMMA; break;
        case ':': t->kind = T_COLON; break;
        case '=': t->kind = T_EQ; break;
        case '+': t->kind = T_PLUS; break;
        case '*': t->kind = T_STAR; break;
        case '-':
            if (p < ps->end && *p == '>') {
                p++;
                t->kind = T_ARROW;
            } else {
                t->kind = T_MINUS;
            }
            break;
        default:
            if (c == 0)
                error_at(ps, t->line, t->col, NEST_ERR_SYNTAX, "NUL byte in the input");
            if (c >= 0x80) {
                int n = utf8_len((const unsigned char *)start, (const unsigned char *)ps->end);
                if (n == 0)
                    error_at(ps, t->line, t->col, NEST_ERR_SYNTAX, "invalid UTF-8 byte 0x%02x", c);
                error_at(ps, t->line, t->col, NEST_ERR_SYNTAX,
                         "unexpected character (non-ASCII text is allowed only in comments)");
            }
            if (c < 0x20 || c == 0x7f)
                error_at(ps, t->line, t->col, NEST_ERR_SYNTAX, "unexpected control character 0x%02x", c);
            error_at(ps, t->line, t->col, NEST_ERR_SYNTAX, "unexpected character '%c'", c);
        }
    }
    t->len = (size_t)(p - start);
    ps->p = p;
}

static bool is_tok(parser *ps, tok_kind k) { return ps->tok.kind == k; }

static bool is_word(parser *ps, const char *w)
{
    return ps->tok.kind == T_NAME && ps->tok.len == strlen(w) && memcmp(ps->tok.s, w, ps->tok.len) == 0;
}

static bool accept(parser *ps, tok_kind k)
{
    if (ps->tok.kind != k)
        return false;
    next(ps);
    return true;
}

static _Noreturn void expected(parser *ps, const char *what)
{
    char s[64];
    error_tok(ps, &ps->tok, "expected %s, found %s", what, show(&ps->tok, s));
}

static token expect(parser *ps, tok_kind k)
{
    token t = ps->tok;
    if (t.kind != k)
        expected(ps, tok_text[k]);
    next(ps);
    return t;
}

/* ---- names ---- */

/* Token t (a NAME) checked against the rules for names; returned NUL-terminated in f's arena. */
static const char *name_of(parser *ps, const token *t, const char *what)
{
    if (t->kind != T_NAME) {
        char w[64];
        snprintf(w, sizeof w, "a %s name", what);
        expected(ps, w);
    }
    if (t->len > IR_MAX_NAME)
        error_at(ps, t->line, t->col, NEST_ERR_LIMIT, "name is %zu characters long (the limit is %d)",
                 t->len, IR_MAX_NAME);
    char *s = arena_alloc(&ps->f->arena, t->len + 1);
    if (!s)
        oom(ps);
    memcpy(s, t->s, t->len);
    if (ir_check_name(ps->f, what, s) != NEST_OK)
        error_at(ps, t->line, t->col, ps->f->status, "%s", nest_errmsg(ps->f));
    return s;
}

static const char *take_name(parser *ps, const char *what)
{
    const char *s = name_of(ps, &ps->tok, what);
    next(ps);
    return s;
}

static sym *sym_find(parser *ps, const char *s, size_t len)
{
    if (!ps->capsyms)
        return NULL;
    size_t mask = ps->capsyms - 1;
    for (size_t i = hash_bytes(s, len) & mask;; i = (i + 1) & mask) {
        sym *y = &ps->syms[i];
        if (!y->name)
            return NULL;
        if (y->len == len && memcmp(y->name, s, len) == 0)
            return y;
    }
}

static void sym_add(parser *ps, const token *t, int32_t node)
{
    sym *old = sym_find(ps, t->s, t->len);
    if (old)
        error_tok(ps, t, "'%.*s' is already defined at line %d, column %d", (int)t->len, t->s,
                  old->line, old->col);
    if ((ps->nsyms + 1) * 2 > ps->capsyms) {
        size_t cap = ps->capsyms ? ps->capsyms * 2 : 64;
        sym *tab = calloc(cap, sizeof *tab);
        if (!tab)
            oom(ps);
        for (size_t i = 0; i < ps->capsyms; i++) {
            sym *y = &ps->syms[i];
            if (!y->name)
                continue;
            size_t j = hash_bytes(y->name, y->len) & (cap - 1);
            while (tab[j].name)
                j = (j + 1) & (cap - 1);
            tab[j] = *y;
        }
        free(ps->syms);
        ps->syms = tab;
        ps->capsyms = cap;
    }
    size_t mask = ps->capsyms - 1;
    size_t i = hash_bytes(t->s, t->len) & mask;
    while (ps->syms[i].name)
        i = (i + 1) & mask;
    ps->syms[i] = (sym){t->s, t->len, node, t->line, t->col};
    ps->nsyms++;
}

/* ---- types ---- */

static int type_of_word(const token *t)
{
    static const char *const names[] = {"f32", "f64", "i32", "i64", "bool"};
    for (int i = 0; i < (int)countof(names); i++)
        if (t->kind == T_NAME && t->len == strlen(names[i]) && memcmp(t->s, names[i], t->len) == 0)
            return i;
    return -1;
}

/* Parses a non-negative integer literal; errors on overflow. */
static int64_t parse_int(parser *ps, const token *t)
{
    if (t->kind != T_INT)
        error_tok(ps, t, "expected an integer");
    uint64_t v = 0;
    for (size_t i = 0; i < t->len; i++) {
        unsigned d = (unsigned)(t->s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            error_tok(ps, t, "integer %.*s is too large", (int)(t->len > 40 ? 40 : t->len), t->s);
        v = v * 10 + d;
    }
    if (v > (uint64_t)INT64_MAX)
        error_tok(ps, t, "integer %.*s is too large (the limit is 2^63 - 1)", (int)t->len, t->s);
    return (int64_t)v;
}

typedef struct ttype {
    int etype, rank, layout;
    int64_t shape[NEST_MAX_RANK];
    token at;
} ttype;

/* What names a dim may hold: none (a state's type), the function's dims, or new ones too (a
 * parameter's type declares them). */
typedef enum dim_mode { DIMS_NONE, DIMS_KNOWN, DIMS_DECLARE } dim_mode;

static int64_t parse_dim_sum(parser *ps, dim_mode names, int depth);

/* The result of a dim operation, or the error it recorded as a parse error at t. */
static int64_t dim_ok(parser *ps, const token *t, int64_t d)
{
    if (d == DIM_NONE) {
        int st = ps->f->status == NEST_ERR_NOMEM || ps->f->status == NEST_ERR_LIMIT
                     ? ps->f->status
                     : NEST_ERR_SYNTAX;
        error_at(ps, t->line, t->col, st, "%s", ps->f->errmsg ? ps->f->errmsg : "invalid dim");
    }
    return d;
}

/* factor := INT | NAME | "(" sum ")" */
static int64_t parse_dim_factor(parser *ps, dim_mode names, int depth)
{
    token t = ps->tok;
    if (t.kind == T_INT) {
        int64_t v = parse_int(ps, &t);
        next(ps);
        return v;
    }
    if (t.kind == T_NAME && names != DIMS_NONE) {
        int64_t d;
        next(ps);
        if (dim_find(ps->f, t.s, t.len, &d) >= 0)
            return d;
        if (names == DIMS_KNOWN)
            error_tok(ps, &t, "%.*s is not a dim of the parameters' shapes",
                      (int)(t.len > 40 ? 40 : t.len), t.s);
        return dim_ok(ps, &t, dim_name(ps->f, t.s, t.len));
    }
    if (t.kind == T_LPAREN && names != DIMS_NONE) {
        if (depth >= 32)
            error_tok(ps, &t, "a dim expression nests deeper than 32 levels");
        next(ps);
        int64_t d = parse_dim_sum(ps, names, depth + 1);
        expect(ps, T_RPAREN);
        return d;
    }
    expected(ps, names == DIMS_NONE ? "a dimension (a non-negative integer)"
                                    : "a dimension (a non-negative integer or a dim name)");
}

/* term := factor {"*" factor} */
static int64_t parse_dim_term(parser *ps, dim_mode names, int depth)
{
    int64_t d = parse_dim_factor(ps, names, depth);
    while (names != DIMS_NONE && is_tok(ps, T_STAR)) {
        token t = ps->tok;
        next(ps);
        d = dim_ok(ps, &t, dim_mul(ps->f, d, parse_dim_factor(ps, names, depth)));
    }
    return d;
}

/* sum := ["-"] term {("+" | "-") term}: a dim (N, N*64, N-1, 2*(N+1)) */
static int64_t parse_dim_sum(parser *ps, dim_mode names, int depth)
{
    token t = ps->tok;
    bool neg = names != DIMS_NONE && accept(ps, T_MINUS);
    int64_t d = parse_dim_term(ps, names, depth);
    if (neg)
        d = dim_ok(ps, &t, dim_mul(ps->f, d, -1));
    while (names != DIMS_NONE && (is_tok(ps, T_PLUS) || is_tok(ps, T_MINUS))) {
        t = ps->tok;
        bool minus = t.kind == T_MINUS;
        next(ps);
        int64_t e = parse_dim_term(ps, names, depth);
        d = dim_ok(ps, &t, minus ? dim_sub(ps->f, d, e) : dim_add(ps->f, d, e));
    }
    return d;
}

static void parse_type(parser *ps, ttype *ty, bool with_layout, dim_mode names)
{
    ty->at = ps->tok;
    ty->etype = type_of_word(&ps->tok);
    if (ty->etype < 0) {
        char s[64];
        error_tok(ps, &ps->tok, "expected a type (f32, f64, i32, i64 or bool), found %s",
                  show(&ps->tok, s));
    }
    next(ps);
    expect(ps, T_LBRACK);
    ty->rank = 0;
    int64_t count = 1;
    bool huge = false;
    if (!is_tok(ps, T_RBRACK)) {
        do {
            if (is_tok(ps, T_MINUS))
                error_tok(ps, &ps->tok, "a dimension cannot be negative");
            if (ty->rank == NEST_MAX_RANK)
                error_at(ps, ps->tok.line, ps->tok.col, NEST_ERR_LIMIT,
                         "more than %d dimensions", NEST_MAX_RANK);
            token d = ps->tok;
            int64_t v = ty->shape[ty->rank++] = parse_dim_sum(ps, names, 0);
            if (v < 0 && !dim_is_sym(v))
                error_tok(ps, &d, "a dimension cannot be negative");
            /* as in ir.c, the limit applies to the product of the non-zero plain dims */
            if (v > 0 && mul_overflows(count, v, &count))
                huge = true;
        } while (accept(ps, T_COMMA));
    }
    expect(ps, T_RBRACK);
    int64_t bytes;
    if (huge || mul_overflows(count, (int64_t)nest_type_size((nest_type)ty->etype), &bytes) ||
        bytes >= IR_MAX_BYTES)
        error_at(ps, ty->at.line, ty->at.col, NEST_ERR_LIMIT,
                 "this shape is too large (the limit is 2^62 bytes)");
    ty->layout = NEST_ROW_MAJOR;
    if (with_layout) {
        if (is_word(ps, "col")) {
            ty->layout = NEST_COL_MAJOR;
            next(ps);
        } else if (is_word(ps, "row")) {
            next(ps);
        }
    }
}

/* ---- values (constant data and attribute lists) ---- */

/* A growing list of parsed literal values. */
typedef struct lit {
    bool is_int, is_bool, neg;
    double f;
    uint64_t u; /* magnitude for integers */
    token at;
} lit;

typedef struct lits {
    lit *v;
    size_t n, cap;
} lits;

static void lits_push(parser *ps, lits *l, lit x)
{
    l->v = grow(ps, l->v, l->n, &l->cap, sizeof *l->v);
    l->v[l->n++] = x;
}

static lit parse_literal(parser *ps)
{
    lit x = {.at = ps->tok};
    if (accept(ps, T_MINUS))
        x.neg = true;
    token t = ps->tok;
    if (t.kind == T_INT || t.kind == T_FLOAT) {
        /* the text is not NUL-terminated: copy it for strtod */
        char tmp[128];
        if (t.len >= sizeof tmp)
            error_tok(ps, &t, "number literal is too long");
        memcpy(tmp, t.s, t.len);
        tmp[t.len] = '\0';
        x.f = strtod(tmp, NULL);
        if (isinf(x.f))
            error_tok(ps, &t, "number %s is out of range (use inf for infinity)", tmp);
        if (t.kind == T_INT) {
            x.is_int = true;
            for (size_t i = 0; i < t.len && x.u != UINT64_MAX; i++) {
                unsigned d = (unsigned)(t.s[i] - '0');
                x.u = x.u > (UINT64_MAX - d) / 10 ? UINT64_MAX : x.u * 10 + d;
            }
        }
    } else if (t.kind == T_NAME && (is_word(ps, "inf") || is_word(ps, "nan"))) {
        x.f = is_word(ps, "inf") ? INFINITY : NAN;
    } else if (t.kind == T_NAME && (is_word(ps, "true") || is_word(ps, "false"))) {
        if (x.neg)
            error_tok(ps, &t, "'-' before a bool");
        x.is_bool = true;
        x.u = is_word(ps, "true");
    } else {
        expected(ps, "a number, inf, nan, true or false");
    }
    if (x.neg)
        x.f = -x.f;
    next(ps);
    return x;
}

/* value := literal | "[" [literal {"," literal}] "]"; lists are flat. */
static void parse_values(parser *ps, lits *out)
{
    if (accept(ps, T_LBRACK)) {
        if (!is_tok(ps, T_RBRACK)) {
            do {
                if (is_tok(ps, T_LBRACK))
                    error_tok(ps, &ps->tok, "nested lists are not allowed: values are flat, row-major");
                lits_push(ps, out, parse_literal(ps));
            } while (accept(ps, T_COMMA));
        }
        expect(ps, T_RBRACK);
    } else {
        lits_push(ps, out, parse_literal(ps));
    }
}

/* Stores literal x as element i of etype at data; errors when it does not fit. */
static void store_literal(parser *ps, int etype, void *data, size_t i, const lit *x)
{
    switch (etype) {
    case NEST_F32:
    case NEST_F64:
        if (x->is_bool)
            error_tok(ps, &x->at, "a bool literal in a %s constant", nest_type_name((nest_type)etype));
        if (etype == NEST_F32) {
            if (isfinite(x->f) && isinf((float)x->f))
                error_tok(ps, &x->at, "number is out of range for f32");
            ((float *)data)[i] = (float)x->f;
        } else
            ((double *)data)[i] = x->f;
        return;
    case NEST_I32:
    case NEST_I64: {
        if (!x->is_int)
            error_tok(ps, &x->at, "%s constants take integer literals",
                      nest_type_name((nest_type)etype));
        uint64_t lim = etype == NEST_I32 ? (uint64_t)INT32_MAX : (uint64_t)INT64_MAX;
        if (x->u > lim + (x->neg ? 1 : 0))
            error_tok(ps, &x->at, "integer literal is out of range for %s",
                      nest_type_name((nest_type)etype));
        int64_t v = x->neg ? (int64_t)(0 - x->u) : (int64_t)x->u;
        if (etype == NEST_I32)
            ((int32_t *)data)[i] = (int32_t)v;
        else
            ((int64_t *)data)[i] = v;
        return;
    }
    case NEST_BOOL:
        if (!x->is_bool)
            error_tok(ps, &x->at, "bool constants take true or false");
        ((uint8_t *)data)[i] = (uint8_t)x->u;
        return;
    }
}

/* ---- calls ---- */

typedef struct attr {
    bool set;
    token at;
    int64_t v[NEST_MAX_RANK];
    int n;
} attr;

enum {
    A_SHAPE, A_AXES, A_ORDER, A_LOWER, A_UPPER, A_STRIDES, A_AXIS, A_TYPE,
    /* windows (convolution, pooling) */
    A_WINDOW, A_DILATION, A_PAD_BELOW, A_PAD_ABOVE, A_DATA_DILATION, A_GROUPS, A_INCLUDE_PAD,
    A_BELOW, A_ABOVE, A_INTERIOR, A_K, A_LARGEST, /* the op set of real models */
    A_COUNT
};
static const char *const attr_names[A_COUNT] = {
    "shape", "axes", "order", "lower", "upper", "strides", "axis", "type",
    "window", "dilation", "pad_below", "pad_above", "data_dilation", "groups", "include_pad",
    "below", "above", "interior", "k", "largest"};
/* The window attributes that are lists of one entry per spatial axis. */
#define WINDOW_LISTS                                                                            \
    (1u << A_WINDOW | 1u << A_STRIDES | 1u << A_DILATION | 1u << A_PAD_BELOW |                 \
     1u << A_PAD_ABOVE | 1u << A_DATA_DILATION)

/* The attributes each kind takes, as bits of the enum above. */
static unsigned attrs_of(ir_kind k)
{
    switch (k) {
    case K_BROADCAST: return 1u << A_SHAPE | 1u << A_AXES;
    case K_RESHAPE: return 1u << A_ORDER | 1u << A_SHAPE;
    case K_SLICE: return 1u << A_LOWER | 1u << A_UPPER | 1u << A_STRIDES;
    case K_CONCAT: return 1u << A_AXIS;
    case K_REDUCE: return 1u << A_AXES;
    case K_CONVERT: return 1u << A_TYPE;
    case K_CONV: return (WINDOW_LISTS & ~(1u << A_WINDOW)) | 1u << A_GROUPS;
    case K_POOL: return 1u << A_WINDOW | 1u << A_STRIDES | 1u << A_PAD_BELOW | 1u << A_PAD_ABOVE;
    case K_ARGREDUCE: return 1u << A_AXIS;
    case K_PAD: return 1u << A_BELOW | 1u << A_ABOVE | 1u << A_INTERIOR;
    case K_REVERSE: return 1u << A_AXES;
    case K_REPLACE_SLICE: return 1u << A_LOWER | 1u << A_UPPER | 1u << A_STRIDES;
    case K_ONE_HOT: return 1u << A_SHAPE | 1u << A_AXIS;
    case K_GATHER: return 1u << A_AXIS;
    case K_SCATTER_ADD: return 1u << A_AXIS;
    case K_SOFTMAX: return 1u << A_AXES;
    case K_TOPK: return 1u << A_K | 1u << A_AXIS | 1u << A_LARGEST;
    default: return 0;
    }
}

static void parse_attr_value(parser *ps, int which, attr *a)
{
    if (which == A_TYPE) {
        int t = type_of_word(&ps->tok);
        if (t < 0)
            expected(ps, "an element type (f32, f64, i32, i64 or bool)");
        a->v[0] = t;
        a->n = 1;
        next(ps);
        return;
    }
    if (which == A_INCLUDE_PAD || which == A_LARGEST) {
        if (!is_word(ps, "true") && !is_word(ps, "false"))
            expected(ps, "true or false");
        a->v[0] = is_word(ps, "true");
        a->n = 1;
        next(ps);
        return;
    }
    if (which == A_AXIS || which == A_GROUPS || which == A_K) {
        if (is_tok(ps, T_MINUS))
            error_tok(ps, &ps->tok, "%s cannot be negative", attr_names[which]);
        a->v[0] = parse_int(ps, &ps->tok);
        a->n = 1;
        next(ps);
        return;
    }
    expect(ps, T_LBRACK);
    a->n = 0;
    if (!is_tok(ps, T_RBRACK)) {
        do {
            if (a->n == NEST_MAX_RANK)
                error_at(ps, ps->tok.line, ps->tok.col, NEST_ERR_LIMIT,
                         "more than %d entries", NEST_MAX_RANK);
            token t = ps->tok;
            /* shapes and slice bounds may use the function's dims (shape=[N,64], upper=[N-1]) */
            bool dims = which == A_SHAPE || which == A_LOWER || which == A_UPPER;
            int64_t v;
            if (dims) {
                if (!is_tok(ps, T_INT) && !is_tok(ps, T_NAME) && !is_tok(ps, T_MINUS) &&
                    !is_tok(ps, T_LPAREN))
                    expected(ps, "an integer");
                v = parse_dim_sum(ps, DIMS_KNOWN, 0);
            } else {
                bool neg = accept(ps, T_MINUS);
                t = ps->tok;
                if (t.kind != T_INT)
                    expected(ps, "an integer");
                v = parse_int(ps, &t);
                v = neg ? -v : v;
                next(ps);
            }
            if (v < 0 && !dim_is_sym(v) && which != A_LOWER && which != A_UPPER &&
                which != A_PAD_BELOW && which != A_PAD_ABOVE && which != A_BELOW &&
                which != A_ABOVE)
                error_tok(ps, &t, "%s entries cannot be negative", attr_names[which]);
            a->v[a->n++] = v;
        } while (accept(ps, T_COMMA));
    }
    expect(ps, T_RBRACK);
}

/* The attributes and the constant type of one call: about 3 KB. Calls nest PARSE_MAX_DEPTH deep,
 * so these live in one slot per depth in the scratch arena, reused, rather than on the stack. */
typedef struct call_slot {
    attr at[A_COUNT];
    ttype ctype;
} call_slot;

/* The zeroed slot of the call at `depth` (from 1). */
static call_slot *slot_at(parser *ps, int depth)
{
    size_t d = (size_t)depth - 1;
    while (ps->nslots <= d) {
        ps->slots = grow(ps, ps->slots, ps->nslots, &ps->capslots, sizeof *ps->slots);
        ps->slots[ps->nslots] = arena_alloc(&ps->scratch, sizeof(call_slot));
        if (!ps->slots[ps->nslots])
            oom(ps);
        ps->nslots++;
    }
    memset(ps->slots[d], 0, sizeof(call_slot));
    return ps->slots[d];
}

static int32_t parse_expr(parser *ps);

/* Records the function's last error at token t. */
static _Noreturn void build_error(parser *ps, const token *t)
{
    error_at(ps, t->line, t->col, ps->f->status, "%s", ps->f->errmsg ? ps->f->errmsg : "invalid op");
}

/* Whether the token after the current one is of kind k, without consuming. */
static bool peek_is(parser *ps, tok_kind k)
{
    const char *p = ps->p, *line_start = ps->line_start;
    int line = ps->line;
    token t = ps->tok;
    next(ps);
    bool is = is_tok(ps, k);
    ps->p = p;
    ps->line = line;
    ps->line_start = line_start;
    ps->tok = t;
    return is;
}

/* Whether the current NAME token is followed by '=' (an attribute), without consuming. */
static bool at_attribute(parser *ps) { return is_tok(ps, T_NAME) && peek_is(ps, T_EQ); }

/* The end of a call that built node v (or failed: the error at optok): its position, the ')'. */
static int32_t end_call(parser *ps, const token *optok, int32_t v)
{
    if (v < 0)
        build_error(ps, optok);
    ps->f->nodes[v].line = optok->line;
    ps->f->nodes[v].col = optok->col;
    next(ps); /* the ')' */
    ps->depth--;
    return v;
}

/* grad "(" expr {"," NAME} ")": the tuple of the gradients of a scalar with respect to
 * variables or parameters (compiler/graph/grad.c). */
static int32_t parse_grad(parser *ps, token optok)
{
    if (++ps->depth > PARSE_MAX_DEPTH)
        error_at(ps, optok.line, optok.col, NEST_ERR_LIMIT,
                 "calls nest deeper than %d levels; name intermediate values", PARSE_MAX_DEPTH);
    expect(ps, T_LPAREN);
    if (is_tok(ps, T_RPAREN))
        error_tok(ps, &optok, "grad needs a loss and the values to differentiate it by, as in "
                              "grad(loss, w1, b1)");
    int32_t loss = parse_expr(ps);
    int32_t *wrt = NULL;
    size_t n = 0, cap = 0;
    while (accept(ps, T_COMMA)) {
        token t = ps->tok;
        if (t.kind != T_NAME)
            expected(ps, "the name of a variable or parameter");
        sym *y = sym_find(ps, t.s, t.len);
        if (!y) {
            char sh[64];
            error_tok(ps, &t, "use of undefined value %s", show(&t, sh));
        }
        const ir_node *x = &ps->f->nodes[y->node];
        if (x->op != OP_STATE && x->op != OP_PARAMETER)
            error_tok(ps, &t, "grad differentiates by variables and parameters; %.*s is a value "
                              "computed in the function",
                      (int)(t.len > 40 ? 40 : t.len), t.s);
        wrt = grow(ps, wrt, n, &cap, sizeof *wrt);
        wrt[n++] = y->node;
        next(ps);
    }
    if (n == 0)
        error_tok(ps, &ps->tok, "grad needs at least one variable or parameter after the loss");
    if (!is_tok(ps, T_RPAREN))
        expected(ps, "',' or ')'");
    return end_call(ps, &optok, nest_grad(ps->f, loss, (int)n, wrt));
}

/* The checks of a call's attributes that need the parser's view (which attribute is missing,
 * lists of the wrong length); the type rules of ir.c check the rest. */
static void check_call(parser *ps, const ir_opinfo *info, const token *optok, const attr *at,
                       int nin, const int32_t *in)
{
    static const struct {
        ir_kind kind;
        int attr;
        const char *text;
    } required[] = {
        {K_BROADCAST, A_SHAPE, "shape=[...]"}, {K_BROADCAST, A_AXES, "axes=[...]"},
        {K_RESHAPE, A_SHAPE, "shape=[...]"},   {K_SLICE, A_LOWER, "lower=[...]"},
        {K_SLICE, A_UPPER, "upper=[...]"},     {K_CONCAT, A_AXIS, "axis=N"},
        {K_REDUCE, A_AXES, "axes=[...]"},      {K_CONVERT, A_TYPE, "type=T"},
        {K_POOL, A_WINDOW, "window=[...]"},
        {K_ARGREDUCE, A_AXIS, "axis=N"},      {K_PAD, A_BELOW, "below=[...]"},
        {K_PAD, A_ABOVE, "above=[...]"},       {K_REVERSE, A_AXES, "axes=[...]"},
        {K_REPLACE_SLICE, A_LOWER, "lower=[...]"}, {K_REPLACE_SLICE, A_UPPER, "upper=[...]"},
        {K_ONE_HOT, A_SHAPE, "shape=[...]"},   {K_ONE_HOT, A_AXIS, "axis=N"},
        {K_GATHER, A_AXIS, "axis=N"},          {K_SOFTMAX, A_AXES, "axes=[...]"},
        {K_TOPK, A_K, "k=N"},                  {K_TOPK, A_AXIS, "axis=N"},
        {K_SCATTER_ADD, A_AXIS, "axis=N"},
    };
    for (size_t i = 0; i < countof(required); i++)
        if (info->kind == required[i].kind && !at[required[i].attr].set)
            error_tok(ps, optok, "%s needs %s", info->name, required[i].text);
    if (info->arity >= 0 && nin != info->arity)
        error_tok(ps, optok, "%s takes %d operand%s, not %d", info->name, info->arity,
                  info->arity == 1 ? "" : "s", nin);
    if (info->kind == K_CONCAT && nin < 1)
        error_tok(ps, optok, "concat needs at least one operand");
    const ir_node *a = nin == 1 || (nin == 2 && (info->kind == K_PAD ||
                                                 info->kind == K_REPLACE_SLICE))
                           ? &ps->f->nodes[in[0]]
                           : NULL;
    int rank = a && a->etype != IR_TUPLE ? a->rank : -1;
    if (info->kind == K_PAD) {
        static const int lists[] = {A_BELOW, A_ABOVE, A_INTERIOR};
        for (size_t i = 0; i < countof(lists); i++) {
            const attr *l = &at[lists[i]];
            if (l->set && rank >= 0 && l->n != rank)
                error_tok(ps, &l->at, "%s has %d entries but the operand has rank %d",
                          attr_names[lists[i]], l->n, rank);
        }
    }
    if (info->kind == K_SLICE || info->kind == K_REPLACE_SLICE) {
        if (at[A_UPPER].n != at[A_LOWER].n)
            error_tok(ps, &at[A_UPPER].at, "upper has %d entries but lower has %d", at[A_UPPER].n,
                      at[A_LOWER].n);
        if (at[A_STRIDES].set && at[A_STRIDES].n != at[A_LOWER].n)
            error_tok(ps, &at[A_STRIDES].at, "strides has %d entries but lower has %d",
                      at[A_STRIDES].n, at[A_LOWER].n);
        if (rank >= 0 && at[A_LOWER].n != rank)
            error_tok(ps, &at[A_LOWER].at, "lower has %d entries but the operand has rank %d",
                      at[A_LOWER].n, rank);
    }
    /* window lists have an entry per spatial axis of the input (the type rule checks its rank) */
    const ir_node *x = nin >= 1 ? &ps->f->nodes[in[0]] : NULL;
    int xrank = x && x->etype != IR_TUPLE ? x->rank : -1;
    for (int i = 0; i < A_COUNT; i++)
        if ((info->kind == K_CONV || info->kind == K_POOL) && (WINDOW_LISTS & (1u << i)) &&
            at[i].set && xrank >= 3 && at[i].n != xrank - 2)
            error_tok(ps, &at[i].at, "%s has %d entries but the input has %d spatial axes",
                      attr_names[i], at[i].n, xrank - 2);
    if (info->kind == K_RESHAPE && at[A_ORDER].set && rank >= 0 && at[A_ORDER].n != rank)
        error_tok(ps, &at[A_ORDER].at, "order has %d entries but the operand has rank %d",
                  at[A_ORDER].n, rank);
}

/* The data of constant(type, values): checks the count and converts every literal. */
static void *constant_data(parser *ps, const ttype *ty, const lits *vals, const token *close)
{
    int64_t count = 1;
    bool symbolic = false;
    for (int i = 0; i < ty->rank; i++) {
        symbolic = symbolic || dim_is_sym(ty->shape[i]);
        count *= dim_is_sym(ty->shape[i]) ? 1 : ty->shape[i]; /* bounded by parse_type */
    }
    if (symbolic && vals->n != 1)
        error_tok(ps, vals->n ? &vals->v[0].at : close,
                  "constant %s of a symbolic shape: %zu values given, expected 1",
                  nest_type_name((nest_type)ty->etype), vals->n);
    if ((int64_t)vals->n != 1 && (int64_t)vals->n != count)
        error_tok(ps, vals->n ? &vals->v[0].at : close,
                  "constant %s: %zu values given, expected 1 or %lld",
                  nest_type_name((nest_type)ty->etype), vals->n, (long long)count);
    void *data = arena_array(&ps->scratch, vals->n + 1, nest_type_size((nest_type)ty->etype));
    if (!data)
        oom(ps);
    for (size_t i = 0; i < vals->n; i++)
        store_literal(ps, ty->etype, data, i, &vals->v[i]);
    return data;
}

static int32_t parse_call(parser *ps, token optok)
{
    ir_op op = ir_op_lookup(optok.s, optok.len);
    if (op == OP_COUNT && optok.len == 4 && memcmp(optok.s, "grad", 4) == 0)
        return parse_grad(ps, optok);
    if (op == OP_COUNT || op == OP_PARAMETER || op == OP_STATE) {
        char s[64];
        error_tok(ps, &optok, "unknown op %s", show(&optok, s));
    }
    if (++ps->depth > PARSE_MAX_DEPTH)
        error_at(ps, optok.line, optok.col, NEST_ERR_LIMIT,
                 "calls nest deeper than %d levels; name intermediate values", PARSE_MAX_DEPTH);
    const ir_opinfo *info = &ir_ops[op];
    expect(ps, T_LPAREN);

    int32_t *in = NULL;
    size_t nin = 0, capin = 0;
    call_slot *slot = slot_at(ps, ps->depth);
    attr *at = slot->at;
    ttype *ctype = &slot->ctype;
    lits vals = {0};
    bool have_ctype = false, have_vals = false, have_index = false;
    int64_t index = 0;
    unsigned allowed = attrs_of(info->kind) | (op == OP_AVG_POOL ? 1u << A_INCLUDE_PAD : 0);

    if (!is_tok(ps, T_RPAREN)) {
        do {
            token t = ps->tok;
            if (at_attribute(ps)) {
                int which = -1;
                for (int i = 0; i < A_COUNT; i++)
                    if (strlen(attr_names[i]) == t.len && memcmp(attr_names[i], t.s, t.len) == 0)
                        which = i;
                if (which < 0 || !(allowed & (1u << which)))
                    error_tok(ps, &t, "%s has no attribute '%.*s'", info->name,
                              (int)(t.len > 40 ? 40 : t.len), t.s);
                if (at[which].set)
                    error_tok(ps, &t, "attribute '%s' is given twice", attr_names[which]);
                next(ps);
                next(ps); /* the '=' */
                at[which].set = true;
                at[which].at = t;
                parse_attr_value(ps, which, &at[which]);
            } else if (info->kind == K_CONST) {
                if (have_vals)
                    error_tok(ps, &t, "constant takes a type and its values");
                if (!have_ctype) {
                    parse_type(ps, ctype, false, DIMS_KNOWN);
                    have_ctype = true;
                } else {
                    parse_values(ps, &vals);
                    have_vals = true;
                }
            } else if (info->kind == K_GET && nin == 1) {
                if (have_index)
                    error_tok(ps, &t, "get takes a tuple and an index");
                if (t.kind != T_INT)
                    expected(ps, "the index of the tuple element");
                index = parse_int(ps, &t);
                have_index = true;
                next(ps);
            } else {
                int32_t v = parse_expr(ps);
                in = grow(ps, in, nin, &capin, sizeof *in);
                in[nin++] = v;
            }
        } while (accept(ps, T_COMMA));
    }
    token close = ps->tok;
    if (close.kind != T_RPAREN)
        expected(ps, "',' or ')'");
    if (info->kind == K_CONST && !have_vals)
        error_tok(ps, &optok, "constant needs a type and values, as in constant(f32[2], [1, 2])");
    if (info->kind == K_GET && !have_index)
        error_tok(ps, &optok, "get needs a tuple and an index, as in get(t, 0)");
    check_call(ps, info, &optok, at, (int)nin, in);

    ir_attrs ia = {
        .rank = at[A_SHAPE].n,
        .shape = at[A_SHAPE].v,
        .naxes = at[A_AXES].n,
        .axes = at[A_AXES].v,
        .order = at[A_ORDER].set ? at[A_ORDER].v : NULL,
        .lower = at[A_LOWER].v,
        .upper = at[A_UPPER].v,
        .step = at[A_STRIDES].set ? at[A_STRIDES].v : NULL,
        .index = info->kind == K_GET ? index : at[A_AXIS].v[0],
        .type = (int)at[A_TYPE].v[0],
        .window = at[A_WINDOW].set ? at[A_WINDOW].v : NULL,
        .dilation = at[A_DILATION].set ? at[A_DILATION].v : NULL,
        .pad_below = at[A_PAD_BELOW].set ? at[A_PAD_BELOW].v : NULL,
        .pad_above = at[A_PAD_ABOVE].set ? at[A_PAD_ABOVE].v : NULL,
        .data_dilation = at[A_DATA_DILATION].set ? at[A_DATA_DILATION].v : NULL,
        .groups = at[A_GROUPS].set ? at[A_GROUPS].v[0] : 1,
        .include_pad = (int)at[A_INCLUDE_PAD].v[0],
        .below = at[A_BELOW].v,
        .above = at[A_ABOVE].v,
        .interior = at[A_INTERIOR].set ? at[A_INTERIOR].v : NULL,
    };
    if (info->kind == K_CONST) {
        ia.type = ctype->etype;
        ia.rank = ctype->rank;
        ia.shape = ctype->shape;
        ia.data = constant_data(ps, ctype, &vals, &close);
        ia.count = (int64_t)vals.n;
    }
    int32_t v = op == OP_TOPK && nin == 1 /* two nodes and their tuple */
                    ? ir_topk(ps->f, in[0], at[A_K].v[0], at[A_AXIS].v[0],
                              at[A_LARGEST].set ? (int)at[A_LARGEST].v[0] : 1)
                    : ir_build(ps->f, op, (int)nin, in, &ia);
    return end_call(ps, &optok, v);
}

static int32_t parse_expr(parser *ps)
{
    token t = ps->tok;
    if (t.kind != T_NAME)
        expected(ps, "a value or an op");
    next(ps);
    if (is_tok(ps, T_LPAREN))
        return parse_call(ps, t);
    sym *y = sym_find(ps, t.s, t.len);
    if (!y) {
        char s[64];
        if (ir_op_lookup(t.s, t.len) != OP_COUNT)
            error_tok(ps, &t, "op %s needs operands in parentheses", show(&t, s));
        error_tok(ps, &t, "use of undefined value %s", show(&t, s));
    }
    return y->node;
}

/* ---- functions ---- */

static void check_results(parser *ps, const ttype *rets, int nrets, const token *ret_tok)
{
    nest_function *f = ps->f;
    if (f->nresults != nrets)
        error_at(ps, ret_tok->line, ret_tok->col, NEST_ERR_TYPE, "the function declares %d result%s but returns %d", nrets,
                  nrets == 1 ? "" : "s", f->nresults);
    for (int i = 0; i < nrets; i++) {
        const ir_node *n = &f->nodes[f->results[i]];
        if (n->etype != rets[i].etype || n->rank != rets[i].rank ||
            memcmp(n->shape, rets[i].shape, (size_t)n->rank * sizeof(int64_t)) != 0) {
            buf a = {0}, b = {0};
            ir_format_type(&a, f, f->results[i]);
            buf_puts(&b, nest_type_name((nest_type)rets[i].etype));
            ir_format_dims(&b, f, rets[i].rank, rets[i].shape);
            char *sa = buf_finish(&a), *sb = buf_finish(&b);
            char msg[600];
            snprintf(msg, sizeof msg, "result %d is %.250s but the function declares %.250s",
                     i + 1, sa ? sa : "?", sb ? sb : "?");
            free(sa);
            free(sb);
            error_at(ps, ret_tok->line, ret_tok->col, NEST_ERR_TYPE, "%s", msg);
        }
    }
}

/* rets := type [layout] | "(" [type [layout] {"," type [layout]}] ")" */
static ttype *parse_results(parser *ps, int *nrets)
{
    ttype *rets = NULL;
    size_t n = 0, cap = 0;
    bool paren = accept(ps, T_LPAREN);
    if (!paren || !is_tok(ps, T_RPAREN)) {
        do {
            rets = grow(ps, rets, n, &cap, sizeof *rets);
            parse_type(ps, &rets[n++], true, DIMS_KNOWN);
        } while (paren && accept(ps, T_COMMA));
    }
    if (paren)
        expect(ps, T_RPAREN);
    *nrets = (int)n;
    return rets;
}

/* "return" [expr {"," expr}]: sets f's results and checks them against the declaration. */
static void parse_return(parser *ps, const ttype *rets, int nrets)
{
    token t = ps->tok;
    next(ps);
    int32_t *vals = NULL;
    size_t n = 0, cap = 0;
    if (!is_tok(ps, T_RBRACE)) {
        do {
            int32_t v = parse_expr(ps);
            vals = grow(ps, vals, n, &cap, sizeof *vals);
            vals[n++] = v;
        } while (accept(ps, T_COMMA));
    }
    nest_function *f = ps->f;
    if (nest_return(f, (int)n, vals, NULL) != NEST_OK)
        build_error(ps, &t);
    check_results(ps, rets, nrets, &t);
    for (int i = 0; i < nrets; i++)
        f->result_layout[i] = (uint8_t)rets[i].layout;
}

/* NAME "=" expr */
static void parse_binding(parser *ps)
{
    token t = ps->tok;
    if (t.kind != T_NAME)
        expected(ps, "a statement (NAME = expression, or return)");
    next(ps);
    if (!is_tok(ps, T_EQ)) {
        if (is_tok(ps, T_LPAREN))
            error_tok(ps, &t, "the value of this op is unused: name it (x = %.*s(...))",
                      (int)(t.len > 40 ? 40 : t.len), t.s);
        expected(ps, "'='");
    }
    next(ps);
    sym *old = sym_find(ps, t.s, t.len);
    if (old && old->node >= 0 && ps->f->nodes[old->node].op == OP_STATE)
        error_tok(ps, &t, "%.*s is a state tensor of the module (declared at line %d); "
                          "assign(%.*s, value) gives it a new value",
                  (int)t.len, t.s, old->line, (int)t.len, t.s);
    if (old)
        sym_add(ps, &t, -1); /* reports the earlier definition */
    const char *name = name_of(ps, &t, "value");
    int32_t v = parse_expr(ps);
    sym_add(ps, &t, v);
    /* `y = x` makes y another name of x: the text form keeps the first */
    if (!ps->f->nodes[v].name && ir_set_name(ps->f, v, name) != NEST_OK)
        oom(ps);
}

/* "assign" "(" NAME "," expr ")" */
static void parse_assign(parser *ps)
{
    token kw = ps->tok;
    next(ps); /* "assign" */
    expect(ps, T_LPAREN);
    token t = ps->tok;
    if (t.kind != T_NAME)
        expected(ps, "the name of a state tensor");
    sym *y = sym_find(ps, t.s, t.len);
    if (!y || ps->f->nodes[y->node].op != OP_STATE)
        error_tok(ps, &t, "assign takes a state tensor of the module (var or persistent), and "
                          "'%.*s' is not one",
                  (int)(t.len > 40 ? 40 : t.len), t.s);
    int32_t target = y->node;
    next(ps);
    expect(ps, T_COMMA);
    int32_t v = parse_expr(ps);
    if (!is_tok(ps, T_RPAREN))
        expected(ps, "')'");
    if (nest_assign(ps->f, target, v) != NEST_OK)
        build_error(ps, &kw);
    ps->f->assigns[ps->f->nassigns - 1].line = kw.line;
    ps->f->assigns[ps->f->nassigns - 1].col = kw.col;
    next(ps);
}

static void parse_function(parser *ps)
{
    token kw = ps->tok;
    next(ps); /* "func" */
    token nt = ps->tok;
    nest_module *m = ps->m;
    nest_function *f = calloc(1, sizeof *f);
    if (!f || !ir_module_add(m, f)) { /* the module owns f from here: an error frees it */
        free(f);
        oom(ps);
    }
    ps->f = f;
    f->name = (char *)take_name(ps, "function");
    f->line = kw.line;
    f->col = kw.col;
    for (int i = 0; i < m->nfns - 1; i++)
        if (strcmp(m->fns[i]->name, f->name) == 0)
            error_tok(ps, &nt, "function '%s' is already defined at line %d", f->name,
                      m->fns[i]->line);

    ps->nsyms = 0;
    if (ps->capsyms)
        memset(ps->syms, 0, ps->capsyms * sizeof *ps->syms);
    expect(ps, T_LPAREN);
    if (!is_tok(ps, T_RPAREN)) {
        do {
            token pt = ps->tok;
            if (pt.kind == T_NAME && sym_find(ps, pt.s, pt.len))
                sym_add(ps, &pt, -1); /* reports the duplicate */
            const char *name = take_name(ps, "parameter");
            expect(ps, T_COLON);
            ttype ty;
            parse_type(ps, &ty, true, DIMS_DECLARE);
            ir_attrs at = {.type = ty.etype, .rank = ty.rank, .shape = ty.shape, .name = name,
                           .layout = ty.layout};
            int32_t v = ir_build(f, OP_PARAMETER, 0, NULL, &at);
            if (v < 0)
                build_error(ps, &pt);
            f->nodes[v].line = pt.line;
            f->nodes[v].col = pt.col;
            sym_add(ps, &pt, v);
        } while (accept(ps, T_COMMA));
    }
    /* the module's state, in declaration order: one read node each, named by the tensor */
    for (int32_t s = 0; s < m->nstates; s++) {
        const ir_state *st = &m->states[s];
        token at = {T_NAME, st->name, strlen(st->name), st->line, st->col};
        if (sym_find(ps, at.s, at.len))
            continue; /* a parameter of that name was refused by ir_build already */
        int32_t v = ir_state_read(f, s);
        if (v < 0)
            build_error(ps, &kw);
        sym_add(ps, &at, v);
    }
    expect(ps, T_RPAREN);
    expect(ps, T_ARROW);
    int nrets;
    ttype *rets = parse_results(ps, &nrets);
    expect(ps, T_LBRACE);

    bool returned = false;
    while (!is_tok(ps, T_RBRACE)) {
        if (is_tok(ps, T_EOF))
            expected(ps, "'}' to end the function");
        if (returned)
            error_tok(ps, &ps->tok, "statement after return");
        if (is_word(ps, "return")) {
            parse_return(ps, rets, nrets);
            returned = true;
        } else if (is_word(ps, "assign") && peek_is(ps, T_LPAREN)) {
            parse_assign(ps);
        } else {
            parse_binding(ps);
        }
    }
    if (!returned)
        error_tok(ps, &ps->tok, "function '%s' has no return statement", f->name);
    next(ps); /* '}' */
    if (!ir_verify(f))
        error_at(ps, kw.line, kw.col, NEST_ERR_SYNTAX,
                 "internal error: the graph of '%s' failed verification", f->name);
    ps->f = NULL;
}

/* A number of an initializer, as a double. */
static double init_number(parser *ps, const lit *x, int etype)
{
    if (x->is_bool && etype != NEST_BOOL)
        error_tok(ps, &x->at, "a bool literal initializes only a bool tensor");
    if (!x->is_bool && etype == NEST_BOOL)
        error_tok(ps, &x->at, "a bool tensor starts true or false");
    if (x->is_bool)
        return (double)x->u;
    if ((etype == NEST_I32 || etype == NEST_I64) && !x->is_int)
        error_tok(ps, &x->at, "%s tensors start with an integer", nest_type_name((nest_type)etype));
    return x->f;
}

/* ("var" | "persistent") NAME ":" type "=" init */
static void parse_state(parser *ps)
{
    bool trainable = is_word(ps, "var");
    next(ps);
    token nt = ps->tok;
    if (nt.kind != T_NAME)
        expected(ps, trainable ? "the name of the variable" : "the name of the persistent tensor");
    if (nt.len > IR_MAX_NAME)
        error_at(ps, nt.line, nt.col, NEST_ERR_LIMIT, "name is %zu characters long (the limit is %d)",
                 nt.len, IR_MAX_NAME);
    char *name = arena_alloc(&ps->scratch, nt.len + 1);
    if (!name)
        oom(ps);
    memcpy(name, nt.s, nt.len);
    int32_t earlier = ir_state_find(ps->m, name, nt.len);
    if (earlier >= 0)
        error_tok(ps, &nt, "state tensor '%s' is already declared at line %d", name,
                  ps->m->states[earlier].line);
    for (int i = 0; i < ps->m->nfns; i++)
        if (strcmp(ps->m->fns[i]->name, name) == 0)
            error_tok(ps, &nt, "'%s' is the name of a function (line %d)", name,
                      ps->m->fns[i]->line);
    next(ps);
    expect(ps, T_COLON);
    ttype ty;
    parse_type(ps, &ty, false, DIMS_NONE);
    expect(ps, T_EQ);
    nest_init in = {NEST_INIT_ZEROS, 0, 0, 0};
    void *data = NULL;
    token it = ps->tok;
    if (is_word(ps, "zeros")) {
        next(ps);
    } else if ((is_word(ps, "uniform") || is_word(ps, "normal")) && peek_is(ps, T_LPAREN)) {
        in.kind = is_word(ps, "uniform") ? NEST_INIT_UNIFORM : NEST_INIT_NORMAL;
        next(ps);
        expect(ps, T_LPAREN);
        lit a = parse_literal(ps);
        expect(ps, T_COMMA);
        lit b = parse_literal(ps);
        if (is_tok(ps, T_RPAREN))
            expected(ps, "seed=N (the seed of the generator)");
        expect(ps, T_COMMA);
        if (a.is_bool || b.is_bool)
            error_tok(ps, a.is_bool ? &a.at : &b.at, "the parameters of %s are numbers",
                      in.kind == NEST_INIT_UNIFORM ? "uniform" : "normal");
        if (!is_word(ps, "seed") || !peek_is(ps, T_EQ))
            expected(ps, "seed=N (the seed of the generator)");
        next(ps);
        next(ps);
        if (is_tok(ps, T_MINUS))
            error_tok(ps, &ps->tok, "a seed cannot be negative");
        in.seed = (uint64_t)parse_int(ps, &ps->tok);
        next(ps);
        expect(ps, T_RPAREN);
        in.a = a.f;
        in.b = b.f;
    } else if (is_tok(ps, T_LBRACK)) { /* the elements, flat and row-major */
        lits vals = {0};
        parse_values(ps, &vals);
        int64_t count = 1;
        for (int i = 0; i < ty.rank; i++)
            count *= ty.shape[i]; /* bounded by parse_type */
        if ((int64_t)vals.n != count)
            error_tok(ps, vals.n ? &vals.v[0].at : &it, "%s %s: %zu values given, expected %lld",
                      trainable ? "variable" : "persistent tensor", name, vals.n, (long long)count);
        data = arena_array(&ps->scratch, vals.n + 1, nest_type_size((nest_type)ty.etype));
        if (!data)
            oom(ps);
        for (size_t i = 0; i < vals.n; i++)
            store_literal(ps, ty.etype, data, i, &vals.v[i]);
        in.kind = NEST_INIT_DATA;
    } else {
        lit x = parse_literal(ps);
        in.kind = NEST_INIT_CONSTANT;
        in.a = init_number(ps, &x, ty.etype);
    }
    int32_t s = in.kind == NEST_INIT_DATA
                    ? ir_state_declare_data(ps->m, name, trainable, (nest_type)ty.etype, ty.rank,
                                            ty.shape, data)
                    : ir_state_declare(ps->m, name, trainable, (nest_type)ty.etype, ty.rank,
                                       ty.shape, &in);
    if (s < 0)
        error_at(ps, it.line, it.col, ps->m->status, "%s", nest_module_errmsg(ps->m));
    ps->m->states[s].line = nt.line;
    ps->m->states[s].col = nt.col;
}

/* file := (func | state)*. Returns false after an error (recorded on the module). The setjmp
 * lives here, apart from nest_parse's locals, so that no local of the caller is live across it. */
static bool parse_file(parser *ps)
{
    if (setjmp(ps->fail) != 0)
        return false;
    next(ps);
    while (!is_tok(ps, T_EOF)) {
        if (is_word(ps, "var") || is_word(ps, "persistent"))
            parse_state(ps);
        else if (is_word(ps, "func"))
            parse_function(ps);
        else
            expected(ps, "'func', 'var' or 'persistent'");
    }
    return true;
}

nest_module *nest_parse(const char *text, size_t len, const char *filename)
{
    nest_module *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    parser *ps = calloc(1, sizeof *ps);
    if (!ps) {
        free(m);
        return NULL;
    }
    ps->src = ps->p = ps->line_start = text ? text : "";
    ps->end = ps->src + (text ? len : 0);
    ps->file = filename ? filename : "<input>";
    ps->line = 1;
    ps->m = m;
    m->name = ir_module_name_of_file(ps->file);
    if (!m->name) {
        ps->m = NULL;
        free(ps);
        nest_module_free(m);
        return NULL;
    }
    if (!parse_file(ps)) {
        /* the error is on m; drop every function and state so that callers see only the error */
        for (int i = 0; i < m->nfns; i++)
            ir_function_destroy(m->fns[i]);
        m->nfns = 0;
        m->nstates = 0;
        m->capindex = 0; /* the index of their names too */
    }
    free(ps->syms);
    arena_free(&ps->scratch);
    free(ps);
    return m;
}
