/* handfused.c - see handfused.h.
 *
 * The 2-thread variants cut the outer range in two halves and run the one-thread loop on each
 * half: clang 14 does not vectorize `omp parallel for simd` with a reduction, and this is the
 * plain way to write it anyway. */
#include <math.h>

#include "handfused.h"

/* The half [*lo, *hi) of n items that thread t of 2 takes. */
static void half(size_t n, int t, size_t *lo, size_t *hi)
{
    *lo = t == 0 ? 0 : n / 2;
    *hi = t == 0 ? n / 2 : n;
}

float hf_l2(const float *restrict x, const float *restrict y, size_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) {
        float d = x[i] - y[i];
        s += d * d;
    }
    return s;
}

float hf_l2_2t(const float *x, const float *y, size_t n)
{
    float s = 0.0f;
#pragma omp parallel for reduction(+ : s) num_threads(2)
    for (int t = 0; t < 2; t++) {
        size_t lo, hi;
        half(n, t, &lo, &hi);
        s += hf_l2(x + lo, y + lo, hi - lo);
    }
    return s;
}

void hf_chain(const float *restrict a, const float *restrict b, const float *restrict c,
              const float *restrict d, float *restrict out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (a[i] + b[i]) * c[i] - d[i];
}

void hf_chain_2t(const float *a, const float *b, const float *c, const float *d, float *out,
                 size_t n)
{
#pragma omp parallel for num_threads(2)
    for (int t = 0; t < 2; t++) {
        size_t lo, hi;
        half(n, t, &lo, &hi);
        hf_chain(a + lo, b + lo, c + lo, d + lo, out + lo, hi - lo);
    }
}

void hf_badd(const float *restrict m, const float *restrict v, float *restrict out, size_t rows,
             size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            out[r * cols + j] = m[r * cols + j] + v[j];
}

void hf_badd_2t(const float *m, const float *v, float *out, size_t rows, size_t cols)
{
#pragma omp parallel for num_threads(2)
    for (int t = 0; t < 2; t++) {
        size_t lo, hi;
        half(rows, t, &lo, &hi);
        hf_badd(m + lo * cols, v, out + lo * cols, hi - lo, cols);
    }
}

/* Each output row stays in L1 while the l input rows stream past it. */
void hf_msum(const float *restrict x, float *restrict out, size_t a, size_t l, size_t d)
{
    for (size_t i = 0; i < a; i++) {
        float *restrict o = out + i * d;
        for (size_t k = 0; k < d; k++)
            o[k] = 0.0f;
        for (size_t j = 0; j < l; j++)
            for (size_t k = 0; k < d; k++)
                o[k] += x[(i * l + j) * d + k];
    }
}

void hf_msum_2t(const float *x, float *out, size_t a, size_t l, size_t d)
{
#pragma omp parallel for num_threads(2)
    for (int t = 0; t < 2; t++) {
        size_t lo, hi;
        half(a, t, &lo, &hi);
        hf_msum(x + lo * l * d, out + lo * d, hi - lo, l, d);
    }
}

/* The largest element of a row. clang 14 does not vectorize a float max reduction under strict
 * IEEE rules, even with `omp simd reduction(max:)`; 16 partial maxima do vectorize. */
static float row_max(const float *restrict x, size_t n)
{
    float acc[16];
    for (int k = 0; k < 16; k++)
        acc[k] = -INFINITY;
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int k = 0; k < 16; k++)
            acc[k] = x[j + k] > acc[k] ? x[j + k] : acc[k];
    float m = -INFINITY;
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    for (int k = 0; k < 16; k++)
        m = acc[k] > m ? acc[k] : m;
    return m;
}

/* One row: max pass, exp and sum pass (storing the exponentials in out), scale pass. */
static void softmax_row(const float *restrict x, float *restrict out, size_t cols)
{
    float m = row_max(x, cols);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t j = 0; j < cols; j++) {
        float e = expf(x[j] - m);
        out[j] = e;
        s += e;
    }
    for (size_t j = 0; j < cols; j++)
        out[j] = out[j] / s;
}

void hf_softmax(const float *restrict x, float *restrict out, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        softmax_row(x + r * cols, out + r * cols, cols);
}

void hf_softmax_2t(const float *x, float *out, size_t rows, size_t cols)
{
#pragma omp parallel for num_threads(2)
    for (int t = 0; t < 2; t++) {
        size_t lo, hi;
        half(rows, t, &lo, &hi);
        hf_softmax(x + lo * cols, out + lo * cols, hi - lo, cols);
    }
}
