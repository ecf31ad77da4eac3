//===- Context.cu - Creating, checking and freeing a CUDA context ---------===//
//
// A context holds what every kernel call needs and none may allocate: the
// stream, the cuBLASLt handle, the scratch area and the device error word
// (loom_cuda_kernels.h). Errors the kernels find on the device reach the
// host at loom_cuda_context_synchronize, with the CPU kernels' messages.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "CudnnAttention.h"

namespace loom::cuda {

namespace {

constexpr int64_t kDefaultScratchBytes = int64_t{64} << 20;

int32_t failCuda(const char *what, cudaError_t status) {
  return fail("%s: %s", what, cudaGetErrorString(status));
}

/// The message of a device error word, in the CPU kernels' words.
int32_t failDevice(const long long *word) {
  const char *op = "kernel", *what = "id";
  switch (word[0]) {
  case kEmbeddingId:
    op = "embedding";
    break;
  case kEmbeddingGradId:
    op = "embedding_grad";
    break;
  case kCrossEntropyLabel:
    op = "cross_entropy";
    what = "label";
    break;
  case kCrossEntropyGradLabel:
    op = "cross_entropy_grad";
    what = "label";
    break;
  case kAdamWStep:
    return fail("adamw_update: step %lld is not 1-based", word[2]);
  case kAdamWMultiStep:
    return fail("adamw_update_multi: step %lld is not 1-based", word[2]);
  default:
    return fail("a CUDA kernel recorded device error %lld", word[0]);
  }
  return fail("%s: %s %lld at flat index %lld is outside [0, %lld)", op, what,
              word[2], word[1], word[3]);
}

} // namespace

int32_t checkLaunch(const char *op) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    return fail("loom_cuda_%s: %s", op, cudaGetErrorString(status));
  return 0;
}

int32_t needScratch(const loom_cuda_context *context, const char *op,
                    int64_t bytes) {
  if (bytes > context->scratchBytes)
    return fail("loom_cuda_%s: needs %lld bytes of scratch, the context has "
                "%lld",
                op, static_cast<long long>(bytes),
                static_cast<long long>(context->scratchBytes));
  return 0;
}

int32_t growScratch(loom_cuda_context *context, const char *op, int64_t bytes) {
  if (bytes <= context->scratchBytes)
    return 0;
  // Whole 16 MiB, so that plans a little larger than the last do not each
  // grow it again.
  constexpr int64_t kGrain = int64_t{16} << 20;
  int64_t grown = (bytes + kGrain - 1) / kGrain * kGrain;
  int64_t old = context->scratchBytes;
  cudaError_t status = cudaStreamSynchronize(context->stream);
  if (status == cudaSuccess) {
    cudaFree(context->scratch);
    context->scratch = nullptr;
    status = cudaMalloc(&context->scratch, grown);
    if (status == cudaSuccess) {
      context->scratchBytes = grown;
      return 0;
    }
    // A failed allocation is not sticky, but a launch check would read it.
    cudaGetLastError();
    if (cudaMalloc(&context->scratch, old) != cudaSuccess) {
      cudaGetLastError();
      context->scratch = nullptr;
      context->scratchBytes = 0;
    }
  }
  return fail("loom_cuda_%s: cannot grow the scratch from %lld to %lld "
              "bytes: %s",
              op, static_cast<long long>(old), static_cast<long long>(grown),
              cudaGetErrorString(status));
}

} // namespace loom::cuda

using namespace loom::cuda;

extern "C" {

int32_t loom_cuda_context_create(struct CUstream_st *stream,
                                 int64_t scratch_bytes,
                                 loom_cuda_context **out_context) {
  *out_context = nullptr;
  auto *context = new loom_cuda_context;
  context->stream = stream;
  context->scratchBytes =
      scratch_bytes > 0 ? scratch_bytes : kDefaultScratchBytes;
  cudaError_t status = cudaMalloc(&context->scratch, context->scratchBytes);
  if (status == cudaSuccess)
    status = cudaMalloc(&context->deviceError, 4 * sizeof(long long));
  // On the stream, as every later write of the word: a plain cudaMemset
  // runs on the legacy default stream, which a non-blocking stream (the
  // runtime's) does not wait for.
  if (status == cudaSuccess)
    status =
        cudaMemsetAsync(context->deviceError, 0, 4 * sizeof(long long), stream);
  if (status != cudaSuccess) {
    loom_cuda_context_destroy(context);
    return failCuda("loom_cuda_context_create", status);
  }
  cublasStatus_t blas = cublasLtCreate(&context->blaslt);
  if (blas != CUBLAS_STATUS_SUCCESS) {
    loom_cuda_context_destroy(context);
    return fail("loom_cuda_context_create: cublasLtCreate: %s",
                cublasLtGetStatusString(blas));
  }
  context->profile = profileFromEnvironment();
  *out_context = context;
  return 0;
}

void loom_cuda_context_destroy(loom_cuda_context *context) {
  if (!context)
    return;
  finishProfile(context->profile);
  cudnn::destroy(context->cudnn);
  if (context->blaslt)
    cublasLtDestroy(context->blaslt);
  cudaFree(context->scratch);
  cudaFree(context->deviceError);
  delete context;
}

int32_t loom_cuda_context_synchronize(loom_cuda_context *context) {
  cudaError_t status = cudaStreamSynchronize(context->stream);
  if (status != cudaSuccess)
    return failCuda("loom_cuda_context_synchronize", status);
  resolveProfile(context->profile);
  long long word[4];
  status = cudaMemcpy(word, context->deviceError, sizeof word,
                      cudaMemcpyDeviceToHost);
  if (status != cudaSuccess)
    return failCuda("loom_cuda_context_synchronize", status);
  if (word[0] == kNoDeviceError)
    return 0;
  // Cleared on the stream, before the next kernel can record an error.
  cudaMemsetAsync(context->deviceError, 0, sizeof word, context->stream);
  return failDevice(word);
}

} // extern "C"
