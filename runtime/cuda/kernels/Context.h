//===- Context.h - What a CUDA kernel runs with ------------------*- C++
//-*-===//
//
// The definition behind the opaque loom_cuda_context of
// loom_cuda_kernels.h: the stream, the cuBLASLt handle and its algorithm
// choices, cuDNN's handle and attention plans, the shared scratch area, the
// device error word and the optional profile, with the helpers the kernels'
// launchers use to check their launches and claim scratch.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_CONTEXT_H
#define LOOM_RUNTIME_CUDA_KERNELS_CONTEXT_H

#include "KernelArgs.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace loom::cuda {
class Profile;
namespace cudnn {
struct State;
} // namespace cudnn
} // namespace loom::cuda

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
  /// cuDNN's handle and the attention plans built so far, created at the
  /// first attention call that tries cuDNN (CudnnAttention.cpp).
  loom::cuda::cudnn::State *cudnn = nullptr;
  /// Which kernels ran the latest attention or attention_grad call
  /// (loom_cuda_attention_path).
  std::string attentionPath;
  /// Set when LOOM_CUDA_PROFILE asks for kernel times (Profile.cu).
  loom::cuda::Profile *profile = nullptr;
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

/// Times what a kernel entry point enqueues on the context's stream, from
/// its construction to its destruction, when the context profiles
/// (Profile.cu); `op` is the label unless label() gives another.
class ProfileScope {
public:
  ProfileScope(loom_cuda_context *context, const char *op);
  ~ProfileScope();
  ProfileScope(const ProfileScope &) = delete;
  ProfileScope &operator=(const ProfileScope &) = delete;
  /// Replaces the label (printf-style), e.g. with a GEMM's shape.
  void label(const char *format, ...) __attribute__((format(printf, 2, 3)));

private:
  loom_cuda_context *context;
  int index = -1;
};

/// The profile LOOM_CUDA_PROFILE asks for, or null.
Profile *profileFromEnvironment();
/// Adds the calls since the last resolve (the stream idle) as one step.
void resolveProfile(Profile *profile);
/// Writes the profile's table and frees it.
void finishProfile(Profile *profile);

/// Fails with the launch error of `op`'s last kernel launch, if any.
int32_t checkLaunch(const char *op);

/// Fails unless the context's scratch holds `bytes`.
int32_t needScratch(const loom_cuda_context *context, const char *op,
                    int64_t bytes);

/// Makes the context's scratch hold at least `bytes`: when it is smaller,
/// waits for the stream (work enqueued before may still use the old area)
/// and replaces it. Only cuDNN's attention plans call it, once per plan
/// that needs more than the context has (loom_cuda_kernels.h); on failure
/// the old size is kept if it can be and the message is recorded.
int32_t growScratch(loom_cuda_context *context, const char *op, int64_t bytes);

/// out[j] = the sum over the rows of x, a contiguous [rows, n] tensor
/// (f32 or bf16), in double as reduce_sum sums (Layout.cu): matmul's bias
/// gradients where cuBLASLt does not take them. `op` names the caller for
/// messages.
int32_t sumRows(loom_cuda_context *context, const View &x, int64_t rows,
                int64_t n, const View &out, const char *op);

/// The bytes of operand 0 into result 0, on the context's stream (copy,
/// reshape); `name` is the op's, for messages.
int32_t copyBytes(void *const *buffers, const int64_t *meta,
                  loom_cuda_context *context, const char *name);

} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDA_KERNELS_CONTEXT_H
