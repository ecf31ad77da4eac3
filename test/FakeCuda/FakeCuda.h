/*===- FakeCuda.h - A CUDA device that runs only the host side ------------===*
 *
 * libloom_fake_cuda implements the part of the CUDA runtime, of cuBLASLt
 * and of cuDNN's graph API that Loom's CUDA kernels, runtime and
 * communicators call, with no GPU behind it: device memory is host memory,
 * copies and memsets are carried out, and kernel launches, GEMMs and cuDNN
 * graphs are checked and recorded but not computed. Linked instead of
 * libcudart, libcublasLt and libcudnn (the
 * loom_cuda_kernels_fake / loom_cuda_driver_fake libraries of the test
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
 *     of 8;
 *   - cuDNN (FakeCudnn.cpp, when Loom is built with cuDNN): each backend
 *     descriptor takes only its own attributes, of their type and count;
 *     descriptors it refers to are live, finalized and of the right kind;
 *     finalize finds every required attribute; tensors have a layout that
 *     does not overlap itself; the dimensions of each matmul, pointwise,
 *     reduction and reshape agree; an operation graph has unique tensor
 *     uids, one producer per tensor, and every virtual tensor it reads
 *     produced in it; an execution's variant pack holds every tensor in
 *     memory of the plan exactly once and no virtual one, each pointer
 *     inside a live allocation with the tensor's extent and alignment (a
 *     by-value scalar's in host memory), and a workspace inside an
 *     allocation and at least the plan's size. Its heuristic knows two
 *     engines, "sdpa_fprop" and "sdpa_bprop", offered for graphs with the
 *     operations of cuDNN's fused attention forward (two matmuls, a
 *     max and a sum reduction, exp, log, div) or backward (five matmuls,
 *     reshapes, an identity into memory); no other graph gets one.
 * A violation fails the call with CUDA's, cuBLAS's or cuDNN's error code,
 * is printed to stderr with what was wrong, and is counted.
 *
 * Environment:
 *   LOOM_FAKE_CUDA_LOG=FILE       at exit, write the launches per kernel,
 *                                 the GEMMs, copies and violations to FILE
 *   LOOM_FAKE_CUBLASLT_EPILOGUES=none
 *                                 the heuristic finds no algorithm for a
 *                                 GEMM with an epilogue, as cuBLASLt does
 *                                 for shapes its epilogue kernels refuse,
 *                                 so that the kernels' fallbacks run
 *   LOOM_FAKE_CUDNN=refuse        cuDNN's heuristic finds no engine for any
 *                                 graph, so that attention falls back to
 *                                 Loom's kernels
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
  int64_t launches;         /* kernel launches */
  int64_t gemms;            /* cublasLtMatmul calls */
  int64_t copies;           /* cudaMemcpy* calls */
  int64_t memsets;          /* cudaMemset* calls */
  int64_t violations;       /* calls refused for a rule above */
  int64_t cudnn_executions; /* cudnnBackendExecute calls */
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
