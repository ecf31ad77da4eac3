//===- Context.h - What a CUDA kernel runs with ------------------*- C++
//-*-===//
//
// The definition behind the opaque loom_cuda_context of
// loom_cuda_kernels.h: the stream, the cuBLASLt handle and its algorithm
// choices, the shared scratch area and the device error word, with the helpers
// the kernels' launchers use to check their launches and claim scratch.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_CONTEXT_H
#define LOOM_RUNTIME_CUDA_KERNELS_CONTEXT_H

#include "KernelArgs.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <utility>
#include <vector>

struct loom_cuda_context {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t blaslt = nullptr;
  void *scratch = nullptr;
  int64_t scratchBytes = 0;
  /// In device memory: {code, flat index, value, bound}; code 0 when no
  /// kernel has found an error since the last synchronize.
  long long *deviceError = nullptr;
  /// cuBLASLt's heuristic's answers by everything a GEMM call tells it
  /// (Matmul.cu): whether it found an algorithm, and which. Kernels run
  /// from one host thread per context, as the stream's order asks.
  std::map<std::vector<int64_t>, std::pair<bool, cublasLtMatmulAlgo_t>>
      gemmAlgorithms;
};

namespace loom::cuda {

/// What a kernel found on the device (the code of the device error word).
enum DeviceError : long long {
  kNoDeviceError = 0,
  kEmbeddingId = 1,
  kEmbeddingGradId = 2,
  kCrossEntropyLabel = 3,
  kCrossEntropyGradLabel = 4,
  kAdamWStep = 5,
  kAdamWMultiStep = 6,
};

/// Fails with the launch error of `op`'s last kernel launch, if any.
int32_t checkLaunch(const char *op);

/// Fails unless the context's scratch holds `bytes`.
int32_t needScratch(const loom_cuda_context *context, const char *op,
                    int64_t bytes);

/// The bytes of operand 0 into result 0, on the context's stream (copy,
/// reshape); `name` is the op's, for messages.
int32_t copyBytes(void *const *buffers, const int64_t *meta,
                  loom_cuda_context *context, const char *name);

} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDA_KERNELS_CONTEXT_H
