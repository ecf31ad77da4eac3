//===- CudaDevice.cu - The CUDA backend's Device --------------------------===//

#include "CudaDevice.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace loom::cuda_rt {
namespace {

/// Success, or `what`'s CUDA error as a kernel error with the file and
/// line of the call (a CUDA failure is the device's).
#define CHECK_CUDA(call, what) checkCuda((call), (what), __FILE__, __LINE__)

rt::Status checkCuda(cudaError_t status, const std::string &what,
                     const char *file, int line) {
  if (status == cudaSuccess)
    return rt::Status();
  return rt::foreignStatus(status == cudaErrorMemoryAllocation
                               ? LOOM_ERROR_OUT_OF_MEMORY
                               : LOOM_ERROR_KERNEL,
                           file, line, what, cudaGetErrorString(status));
}

__global__ void accumulateKernel(float *dst, const float *src, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] += src[i];
}

} // namespace

CudaDevice::~CudaDevice() {
  if (queue)
    cudaStreamSynchronize(queue);
  loom_cuda_context_destroy(context);
  for (auto &[bytes, data] : pool)
    cudaFree(data);
  if (queue)
    cudaStreamDestroy(queue);
}

rt::Status CudaDevice::init(int ordinal) {
  LOOM_RETURN_IF_ERROR(
      CHECK_CUDA(cudaSetDevice(ordinal),
                 "cudaSetDevice(" + std::to_string(ordinal) + ")"));
  device = ordinal;
  cudaStream_t created = nullptr;
  LOOM_RETURN_IF_ERROR(
      CHECK_CUDA(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking),
                 "cudaStreamCreate"));
  queue = created;
  return rt::Status();
}

rt::Status CudaDevice::createContext(int64_t scratchBytes) {
  if (loom_cuda_context_create(queue, scratchBytes, &context))
    return rt::kernelError(std::string("loom_cuda_context_create: ") +
                           loom_cuda_last_error());
  return rt::Status();
}

rt::Status CudaDevice::allocate(int64_t bytes, void *&out) {
  // At least one byte, so that empty tensors still have an address.
  size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  void *data = nullptr;
  if (auto it = pool.find(bytes); it != pool.end()) {
    data = it->second;
    pool.erase(it);
    pooled -= bytes;
  } else {
    cudaError_t status = cudaMalloc(&data, size);
    if (status == cudaErrorMemoryAllocation && !pool.empty()) {
      cudaGetLastError(); // clear it, then retry without the pool
      drainPool();
      status = cudaMalloc(&data, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      return CHECK_CUDA(status, "cudaMalloc of " + std::to_string(bytes) +
                                    " bytes on device " +
                                    std::to_string(device));
    }
  }
  if (cudaError_t status = cudaMemsetAsync(data, 0, size, queue);
      status != cudaSuccess) {
    cudaFree(data);
    return CHECK_CUDA(status, "cudaMemsetAsync");
  }
  out = data;
  return rt::Status();
}

void CudaDevice::release(void *data, int64_t bytes) {
  pool.emplace(bytes, data);
  pooled += bytes;
}

void CudaDevice::drainPool() {
  cudaStreamSynchronize(queue);
  for (auto &[bytes, data] : pool)
    cudaFree(data);
  pool.clear();
  pooled = 0;
}

rt::Status CudaDevice::upload(void *dst, const void *src, int64_t bytes) {
  // From pageable memory: returns once `src` is staged, so it may go.
  return CHECK_CUDA(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, queue),
      "copying " + std::to_string(bytes) + " bytes to the device");
}

rt::Status CudaDevice::download(void *dst, const void *src, int64_t bytes) {
  // Wait first: a pageable copy blocks in the driver, out of the
  // watchdog's reach.
  LOOM_RETURN_IF_ERROR(wait());
  LOOM_RETURN_IF_ERROR(CHECK_CUDA(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, queue),
      "copying " + std::to_string(bytes) + " bytes from the device"));
  return CHECK_CUDA(cudaStreamSynchronize(queue), "cudaStreamSynchronize");
}

rt::Status CudaDevice::copy(void *dst, const void *src, int64_t bytes) {
  return CHECK_CUDA(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, queue),
      "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes");
}

rt::Status CudaDevice::accumulate(float *dst, const float *src, int64_t count) {
  if (count == 0)
    return rt::Status();
  int64_t blocks = std::min<int64_t>((count + 255) / 256, 4096);
  accumulateKernel<<<static_cast<unsigned>(blocks), 256, 0, queue>>>(dst, src,
                                                                     count);
  return CHECK_CUDA(cudaGetLastError(), "launching the sum of tied gradients");
}

/// A compiled function's or collective kernel's failure: a communication
/// callback's status passes through the compiled code unchanged (the
/// communicator failed), anything else is the kernels'.
static rt::Status kernelStatus(int32_t status, std::string message) {
  if (status == LOOM_ERROR_COMMUNICATION)
    return rt::communicationError(std::move(message));
  return rt::kernelError(std::move(message));
}

rt::Status CudaDevice::call(const rt::Function &fn,
                            const loom_call_frame &frame) {
  if (!context)
    return rt::invalidArgument("the CUDA device has no kernel context");
  auto entry = reinterpret_cast<CudaEntryFn>(fn.symbol);
  if (int32_t status = entry(&frame, context))
    return kernelStatus(status, std::string(loom_cuda_last_error()) +
                                    " (status " + std::to_string(status) + ")");
  return rt::Status();
}

rt::Status CudaDevice::collective(const std::string &op,
                                  const loom_call_frame &frame,
                                  void *const *buffers, const int64_t *meta) {
  if (op != "all_gather" && op != "all_slice")
    return rt::invalidArgument("the CUDA device runs no collective '" + op +
                               "'");
  if (!context)
    return rt::invalidArgument("the CUDA device has no kernel context");
  int32_t status = op == "all_gather"
                       ? loom_cuda_all_gather(&frame, buffers, meta, context)
                       : loom_cuda_all_slice(&frame, buffers, meta, context);
  if (status)
    return kernelStatus(status, loom_cuda_last_error());
  return rt::Status();
}

rt::Status CudaDevice::wait() {
  if (waiter)
    return waiter();
  return CHECK_CUDA(cudaStreamSynchronize(queue), "cudaStreamSynchronize");
}

rt::Status CudaDevice::synchronize() {
  LOOM_RETURN_IF_ERROR(wait());
  // The device error word: what only the kernels saw.
  if (context && loom_cuda_context_synchronize(context))
    return rt::kernelError(loom_cuda_last_error());
  return rt::Status();
}

} // namespace loom::cuda_rt
