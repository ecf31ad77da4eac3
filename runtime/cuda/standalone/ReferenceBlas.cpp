//===- ReferenceBlas.cpp - Plain GEMMs behind cblas.h's signature ---------===//
//
// Row-major C = alpha op(A) op(B) + beta C as a loop nest (i, p, j: the
// innermost walks rows of B and C contiguously when B is not transposed),
// each C element accumulated in the element type as a BLAS does. Fast
// enough for the conformance test's shapes; column-major is not needed.
//
//===----------------------------------------------------------------------===//

#include "cblas.h"

#include <vector>

namespace {

template <typename T>
void gemm(bool transA, bool transB, int m, int n, int k, T alpha, const T *a,
          int lda, const T *b, int ldb, T beta, T *c, int ldc) {
  std::vector<T> row(n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j)
      row[j] = T(0);
    for (int p = 0; p < k; ++p) {
      T x = transA ? a[p * lda + i] : a[i * lda + p];
      if (transB)
        for (int j = 0; j < n; ++j)
          row[j] += x * b[j * ldb + p];
      else
        for (int j = 0; j < n; ++j)
          row[j] += x * b[p * ldb + j];
    }
    for (int j = 0; j < n; ++j)
      c[i * ldc + j] =
          alpha * row[j] + (beta == T(0) ? T(0) : beta * c[i * ldc + j]);
  }
}

} // namespace

extern "C" {

void cblas_sgemm(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE transA,
                 enum CBLAS_TRANSPOSE transB, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc) {
  gemm(transA == CblasTrans, transB == CblasTrans, m, n, k, alpha, a, lda, b,
       ldb, beta, c, ldc);
}

void cblas_dgemm(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE transA,
                 enum CBLAS_TRANSPOSE transB, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc) {
  gemm(transA == CblasTrans, transB == CblasTrans, m, n, k, alpha, a, lda, b,
       ldb, beta, c, ldc);
}

} // extern "C"
