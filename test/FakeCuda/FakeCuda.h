/*===- FakeCuda.h - A CUDA device that runs only the host side ------------===*
 *
 * libloom_fake_cuda implements the part of the CUDA runtime and of
 * cuBLASLt that Loom's CUDA kernels, runtime and communicators call, with
 * no GPU behind it: device memory is host memory, copies and memsets are
 * carried out, and kernel launches and GEMMs are checked and recorded but
 * not computed. Linked instead of libcudart and libcublasLt (the
 * loom_cuda_kernels_fake / loom_cuda_runtime_fake libraries of the test
 * build), it lets a machine without a GPU run every host-side line of the
 * CUDA backend: meta decoding, shape and dtype checks, path selection,
 * scratch sizing, launch configurations, cuBLASLt descriptors, the
 * executor's memory plan and uploads.
 *
 * What it checks beyond what it is asked:
 *   - launches: a registered kernel, grid x in [1, 2^31 - 1], y and z in
 *     [1, 65535], a block of 1 to 1024 threads (z at most 64), dynamic
 *     shared memory within the kernel's limit (48 KiB, or what
 *     cudaFuncSetAttribute raised it to, at most 227 KiB), a live stream;
 *   - memory: every device range a copy, memset, GEMM operand, bias, aux
 *     or workspace touches lies inside one live allocation; frees free
 *     live allocations;
 *   - GEMMs: cuBLASLt's shape rules (op(A) m x k, op(B) k x n, C and D
 *     m x n, leading dimensions at least the rows), one input type, the
 *     output type matching C, an aux leading dimension that is a multiple
 *     of 8.
 * A violation fails the call with CUDA's or cuBLAS's error code, is
 * printed to stderr with what was wrong, and is counted.
 *
 * Environment:
 *   LOOM_FAKE_CUDA_LOG=FILE       at exit, write the launches per kernel,
 *                                 the GEMMs, copies and violations to FILE
 *   LOOM_FAKE_CUBLASLT_EPILOGUES=none
 *                                 the heuristic finds no algorithm for a
 *                                 GEMM with an epilogue, as cuBLASLt does
 *                                 for shapes its epilogue kernels refuse,
 *                                 so that the kernels' fallbacks run
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_TEST_FAKECUDA_FAKECUDA_H
#define LOOM_TEST_FAKECUDA_FAKECUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the fake device has been asked to do since the last reset. */
typedef struct loom_fake_cuda_stats {
  int64_t launches;   /* kernel launches */
  int64_t gemms;      /* cublasLtMatmul calls */
  int64_t copies;     /* cudaMemcpy* calls */
  int64_t memsets;    /* cudaMemset* calls */
  int64_t violations; /* calls refused for a rule above */
} loom_fake_cuda_stats;

/* One cublasLtMatmul call: D = op(A) op(B) (+ C) in cuBLASLt's column-major
 * terms, the types as cudaDataType_t, the epilogue as
 * cublasLtEpilogue_t, and the reduction schemes the preference allowed
 * (cublasLtReductionScheme_t bits) when the heuristic chose its
 * algorithm. */
typedef struct loom_fake_cuda_gemm {
  int64_t m, n, k, batch;
  int32_t type_a, type_d, epilogue;
  uint32_t reduction_schemes;
} loom_fake_cuda_gemm;

void loom_fake_cuda_get_stats(loom_fake_cuda_stats *out_stats);
void loom_fake_cuda_reset_stats(void);
/* The message of the latest violation ("" if none). */
const char *loom_fake_cuda_last_violation(void);
/* Launches since the last reset of kernels whose demangled name contains
 * `name`. */
int64_t loom_fake_cuda_launches_of(const char *name);
/* GEMM `index` (0 to gemms - 1) since the last reset; 0 if it exists. */
int32_t loom_fake_cuda_get_gemm(int64_t index, loom_fake_cuda_gemm *out_gemm);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_TEST_FAKECUDA_FAKECUDA_H */
