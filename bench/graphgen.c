/*
 * graphgen.c - large graphs in the text form, for the compile-scale benchmark (bench/scale.c)
 * and for trying nestc on them (`build/bench/scale --print FAMILY N > g.nest`).
 *
 *   chain   t_i = op(t_{i-1}, y) over f32[1024], op cycling through add, multiply, subtract,
 *           maximum: one long fused expression
 *   wide    sum(op(p_a, p_b), axes=[0]) over f32[64] for pairs of 8 parameters, the sums added
 *           up in a chain: many small reductions over one iteration space
 *   mlp     relu(dot(h, w_l) + b_l) over f32[8,64] x f32[64,64]: products of matrices with
 *           their bias and activation, two parameters a layer
 *   sgd     a training step of the mlp's layers: the forward, the gradient of a sum of squares
 *           with respect to every weight and bias (grad), and w = w - lr * g assigned to each
 *           (state tensors, updated in place)
 *   random  a random DAG over f32[16,64]: element-wise ops whose operands are the previous value,
 *           one of the 32 before it, or now and then any earlier one (fan-out near and far),
 *           row sums broadcast back, transposes there and back;
 *           the values no one reads are added into the result, so every node is live
 *
 * n is the number of graph nodes (parameters included), approximately.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphgen.h"
#include "util.h"

static const char *const binops[] = {"add", "multiply", "subtract", "maximum"};

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static void chain(buf *b, int n)
{
    buf_puts(b, "func chain(x: f32[1024], y: f32[1024]) -> f32[1024] {\n");
    buf_puts(b, "  t0 = add(x, y)\n");
    for (int i = 1; i < n - 3; i++)
        buf_printf(b, "  t%d = %s(t%d, y)\n", i, binops[i % 4], i - 1);
    buf_printf(b, "  return t%d\n}\n", n > 4 ? n - 4 : 0);
}

static void wide(buf *b, int n)
{
    int terms = (n - 8) / 3 > 1 ? (n - 8) / 3 : 1;
    buf_puts(b, "func wide(");
    for (int p = 0; p < 8; p++)
        buf_printf(b, "%sp%d: f32[64]", p ? ", " : "", p);
    buf_puts(b, ") -> f32[] {\n");
    for (int i = 0; i < terms; i++) {
        buf_printf(b, "  e%d = %s(p%d, p%d)\n", i, binops[i % 4], i % 8, (i / 8 + i) % 8);
        buf_printf(b, "  s%d = sum(e%d, axes=[0])\n", i, i);
        if (i)
            buf_printf(b, "  a%d = add(%s%d, s%d)\n", i, i > 1 ? "a" : "s", i - 1, i);
    }
    buf_printf(b, "  return %s%d\n}\n", terms > 1 ? "a" : "s", terms - 1);
}

static void mlp(buf *b, int n)
{
    int layers = (n - 3) / 6 > 1 ? (n - 3) / 6 : 1;
    buf_puts(b, "func mlp(x: f32[8,64]");
    for (int l = 0; l < layers; l++)
        buf_printf(b, ", w%d: f32[64,64], b%d: f32[64]", l, l);
    buf_puts(b, ") -> f32[8,64] {\n");
    buf_puts(b, "  zero = broadcast(constant(f32[], 0), shape=[8,64], axes=[0,1])\n");
    for (int l = 0; l < layers; l++) {
        if (l)
            buf_printf(b, "  d%d = dot(h%d, w%d)\n", l, l - 1, l);
        else
            buf_puts(b, "  d0 = dot(x, w0)\n");
        buf_printf(b, "  z%d = add(d%d, broadcast(b%d, shape=[8,64], axes=[0]))\n", l, l, l);
        buf_printf(b, "  h%d = maximum(z%d, zero)\n", l, l);
    }
    buf_printf(b, "  return h%d\n}\n", layers - 1);
}

static void sgd(buf *b, int n)
{
    int layers = n / 22 > 1 ? n / 22 : 1; /* about 22 nodes a layer with the gradient */
    for (int l = 0; l < layers; l++)
        buf_printf(b, "var w%d: f32[64,64] = uniform(-0.125, 0.125, seed=%d)\nvar b%d: f32[64] = zeros\n",
                   l, l + 1, l);
    buf_puts(b, "func sgd(x: f32[8,64], lr: f32[]) -> f32[] {\n");
    buf_puts(b, "  zero = broadcast(constant(f32[], 0), shape=[8,64], axes=[0,1])\n");
    for (int l = 0; l < layers; l++) {
        if (l)
            buf_printf(b, "  z%d = add(dot(h%d, w%d), broadcast(b%d, shape=[8,64], axes=[0]))\n", l,
                       l - 1, l, l);
        else
            buf_puts(b, "  z0 = add(dot(x, w0), broadcast(b0, shape=[8,64], axes=[0]))\n");
        buf_printf(b, "  h%d = maximum(z%d, zero)\n", l, l);
    }
    buf_printf(b, "  loss = sum(multiply(h%d, h%d), axes=[0,1])\n  g = grad(loss", layers - 1,
               layers - 1);
    for (int l = 0; l < layers; l++)
        buf_printf(b, ", w%d, b%d", l, l);
    buf_puts(b, ")\n");
    for (int l = 0; l < layers; l++) {
        buf_printf(b, "  assign(w%d, subtract(w%d, multiply(broadcast(lr, shape=[64,64], axes=[0,1]), "
                      "get(g, %d))))\n", l, l, 2 * l);
        buf_printf(b, "  assign(b%d, subtract(b%d, multiply(broadcast(lr, shape=[64], axes=[0]), "
                      "get(g, %d))))\n", l, l, 2 * l + 1);
    }
    buf_puts(b, "  return loss\n}\n");
}

/* An operand among `made` values: mostly a recent one, sometimes any (long-range fan-out). */
static int pick(uint64_t *s, int made)
{
    int r = (int)(next(s) % 10);
    if (r < 8 && made > 32)
        return made - 1 - (int)(next(s) % 32);
    return (int)(next(s) % (uint64_t)made);
}

static void random_dag(buf *b, int n, uint64_t seed)
{
    static const char *const unops[] = {"tanh", "abs", "negative"};
    static const char *const ops2[] = {"add", "subtract", "multiply", "maximum", "minimum"};
    int count = n > 16 ? n : 16, unread = 0;
    char *used = calloc((size_t)count + 4, 1), *other = calloc((size_t)count + 4, 1);
    if (!used || !other) {
        free(used);
        free(other);
        b->failed = true;
        return;
    }
    uint64_t s = seed * 2654435761u + 1;
    buf_puts(b, "func random(p0: f32[16,64], p1: f32[16,64], p2: f32[16,64], p3: f32[16,64]) "
                "-> f32[16,64] {\n");
    /* value i < 4 is parameter i; value i >= 4 is v<i> */
    int made = 4;
#define NAME(i) ((i) < 4 ? "p" : "v"), (i)
#define USE(i) (unread -= (i) >= 4 && (i) < before && !used[i], used[i] = 1)
    /* each unread value costs two nodes at the end */
    while (made + 2 * unread + 3 < count) {
        int r = (int)(next(&s) % 100);
        int a = next(&s) % 2 ? made - 1 : pick(&s, made);
        int c = pick(&s, made), before = made;
        while (other[a]) /* the sums and transposes have other shapes: take their users */
            a++;
        while (other[c])
            c++;
        USE(a);
        if (r < 12) {
            buf_printf(b, "  v%d = %s(%s%d)\n", made, unops[next(&s) % 3], NAME(a));
        } else if (r < 16 && made + 2 < count) {
            /* a row sum broadcast back: a reduction, then a use of it across the row */
            buf_printf(b, "  v%d = sum(%s%d, axes=[1])\n", made, NAME(a));
            buf_printf(b, "  v%d = broadcast(v%d, shape=[16,64], axes=[1])\n", made + 1, made);
            other[made] = other[made + 1] = 1;
            buf_printf(b, "  v%d = subtract(%s%d, v%d)\n", made + 2, NAME(c), made + 1);
            USE(made);
            USE(made + 1);
            USE(c);
            made += 2;
        } else if (r < 19 && made + 1 < count) {
            /* a transpose and back: views, no copies */
            buf_printf(b, "  v%d = reshape(%s%d, order=[1,0], shape=[64,16])\n", made, NAME(a));
            buf_printf(b, "  v%d = reshape(v%d, order=[1,0], shape=[16,64])\n", made + 1, made);
            other[made] = 1;
            USE(made);
            made += 1;
        } else {
            buf_printf(b, "  v%d = %s(%s%d, %s%d)\n", made, ops2[next(&s) % 5], NAME(a), NAME(c));
            USE(c);
        }
        made++;
        for (int i = before; i < made; i++)
            unread += !used[i];
    }
    /* the values no one reads, added up: every node reaches the result (tanh keeps it finite) */
    int acc = made - 1, last = made - 1;
    for (int i = 4; i < last; i++)
        if (!used[i]) {
            buf_printf(b, "  v%d = add(v%d, tanh(v%d))\n", made, acc, i);
            acc = made++;
        }
#undef NAME
#undef USE
    buf_printf(b, "  return %s%d\n}\n", acc < 4 ? "p" : "v", acc);
    free(used);
    free(other);
}

char *graphgen(const char *family, int n, uint64_t seed)
{
    buf b = {0};
    buf_printf(&b, "# %s, about %d nodes (bench/graphgen.c)\n", family, n);
    if (strcmp(family, "chain") == 0)
        chain(&b, n);
    else if (strcmp(family, "wide") == 0)
        wide(&b, n);
    else if (strcmp(family, "mlp") == 0)
        mlp(&b, n);
    else if (strcmp(family, "sgd") == 0)
        sgd(&b, n);
    else if (strcmp(family, "random") == 0)
        random_dag(&b, n, seed);
    else {
        buf_reset(&b);
        return NULL;
    }
    return buf_finish(&b);
}
