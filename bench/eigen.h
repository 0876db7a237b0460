/*
 * eigen.h - the Eigen 3 contender: each workload as one Eigen expression over the caller's
 * arrays (Eigen::Map / TensorMap, no copies). Same arguments as handfused.h.
 */
#ifndef BENCH_EIGEN_H
#define BENCH_EIGEN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

float eg_l2(const float *x, const float *y, size_t n);
void eg_chain(const float *a, const float *b, const float *c, const float *d, float *out,
              size_t n);
void eg_badd(const float *m, const float *v, float *out, size_t rows, size_t cols);
void eg_msum(const float *x, float *out, size_t a, size_t l, size_t d);
void eg_softmax(const float *x, float *out, size_t rows, size_t cols);
/* "3.4.0" */
const char *eg_version(void);

#ifdef __cplusplus
}
#endif

#endif
