/*
 * handfused.h - the hand-written fused C loops nest is measured against.
 *
 * One pass per workload (softmax: three passes over each row), written the way a careful person
 * writes them: restrict pointers, `#pragma omp simd reduction` on float reductions so they
 * vectorize under strict IEEE rules. The *_2t variants split the outer loop over 2 OpenMP
 * threads. Built with the flags nest's JIT uses (see the Makefile).
 */
#ifndef BENCH_HANDFUSED_H
#define BENCH_HANDFUSED_H

#include <stddef.h>

/* sum((x - y)^2) over n elements */
float hf_l2(const float *x, const float *y, size_t n);
float hf_l2_2t(const float *x, const float *y, size_t n);

/* out = (a + b) * c - d */
void hf_chain(const float *a, const float *b, const float *c, const float *d, float *out,
              size_t n);
void hf_chain_2t(const float *a, const float *b, const float *c, const float *d, float *out,
                 size_t n);

/* out[r, j] = m[r, j] + v[j], m and out [rows, cols] */
void hf_badd(const float *m, const float *v, float *out, size_t rows, size_t cols);
void hf_badd_2t(const float *m, const float *v, float *out, size_t rows, size_t cols);

/* out[i, k] = sum_j x[i, j, k], x [a, l, d], out [a, d] */
void hf_msum(const float *x, float *out, size_t a, size_t l, size_t d);
void hf_msum_2t(const float *x, float *out, size_t a, size_t l, size_t d);

/* out = exp(x - max_row(x)) / sum_row(exp(x - max_row(x))), x and out [rows, cols] */
void hf_softmax(const float *x, float *out, size_t rows, size_t cols);
void hf_softmax_2t(const float *x, float *out, size_t rows, size_t cols);

#endif
