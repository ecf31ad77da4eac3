//===- cblas.h - The two CBLAS calls the CPU kernels make -------*- C++ -*-===//
//
// For the standalone build only (CMakeLists.txt beside this file): the
// declarations of OpenBLAS's cblas.h that runtime/cpu/kernels use, with the
// reference enum values, implemented by ReferenceBlas.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_STANDALONE_CBLAS_H
#define LOOM_STANDALONE_CBLAS_H

extern "C" {

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA,
                 enum CBLAS_TRANSPOSE transB, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc);
void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA,
                 enum CBLAS_TRANSPOSE transB, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc);

} // extern "C"

#endif // LOOM_STANDALONE_CBLAS_H
