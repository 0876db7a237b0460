// eigen.cpp - see eigen.h.
#include <Eigen/Dense>
#include <unsupported/Eigen/CXX11/Tensor>

#include "eigen.h"

using Eigen::Index;
using Vec = Eigen::Map<const Eigen::ArrayXf>;
using VecOut = Eigen::Map<Eigen::ArrayXf>;
using Mat = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using MatOut = Eigen::Map<Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

float eg_l2(const float *x, const float *y, size_t n)
{
    Vec vx(x, Index(n)), vy(y, Index(n));
    return (vx - vy).matrix().squaredNorm();
}

void eg_chain(const float *a, const float *b, const float *c, const float *d, float *out,
              size_t n)
{
    Index k = Index(n);
    VecOut(out, k) = (Vec(a, k) + Vec(b, k)) * Vec(c, k) - Vec(d, k);
}

void eg_badd(const float *m, const float *v, float *out, size_t rows, size_t cols)
{
    Index r = Index(rows), c = Index(cols);
    Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>> row(v, c);
    MatOut(out, r, c) = Mat(m, r, c).rowwise() + row;
}

void eg_msum(const float *x, float *out, size_t a, size_t l, size_t d)
{
    Eigen::TensorMap<const Eigen::Tensor<float, 3, Eigen::RowMajor>> tx(x, Index(a), Index(l),
                                                                        Index(d));
    Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>> to(out, Index(a), Index(d));
    Eigen::array<Index, 1> axis{1};
    to = tx.sum(axis);
}

void eg_softmax(const float *x, float *out, size_t rows, size_t cols)
{
    Index r = Index(rows), c = Index(cols);
    Mat mx(x, r, c);
    MatOut mo(out, r, c);
    Eigen::ArrayXf m = mx.rowwise().maxCoeff();
    mo = (mx.colwise() - m).exp();
    Eigen::ArrayXf s = mo.rowwise().sum();
    mo.colwise() /= s;
}

const char *eg_version(void)
{
#define S2(x) #x
#define S(x) S2(x)
    return S(EIGEN_WORLD_VERSION) "." S(EIGEN_MAJOR_VERSION) "." S(EIGEN_MINOR_VERSION);
}
