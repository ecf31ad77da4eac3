//===- CudaDevice.cu - The CUDA backend's Device --------------------------===//

#include "CudaDevice.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace loom::cuda_rt {
namespace {

/// "" or `what`'s CUDA error.
std::string check(cudaError_t status, const std::string &what) {
  if (status == cudaSuccess)
    return "";
  return what + ": " + cudaGetErrorString(status);
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

std::string CudaDevice::init(int ordinal) {
  if (std::string error =
          check(cudaSetDevice(ordinal),
                "cudaSetDevice(" + std::to_string(ordinal) + ")");
      !error.empty())
    return error;
  device = ordinal;
  cudaStream_t created = nullptr;
  if (std::string error =
          check(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking),
                "cudaStreamCreate");
      !error.empty())
    return error;
  queue = created;
  return "";
}

std::string CudaDevice::createContext(int64_t scratchBytes) {
  if (loom_cuda_context_create(queue, scratchBytes, &context))
    return std::string("loom_cuda_context_create: ") + loom_cuda_last_error();
  return "";
}

void *CudaDevice::allocate(int64_t bytes, std::string &error) {
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
      error = check(status, "cudaMalloc of " + std::to_string(bytes) +
                                " bytes on device " + std::to_string(device));
      return nullptr;
    }
  }
  if (cudaError_t status = cudaMemsetAsync(data, 0, size, queue);
      status != cudaSuccess) {
    error = check(status, "cudaMemsetAsync");
    cudaFree(data);
    return nullptr;
  }
  return data;
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

std::string CudaDevice::upload(void *dst, const void *src, int64_t bytes) {
  // From pageable memory: returns once `src` is staged, so it may go.
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, queue),
               "copying " + std::to_string(bytes) + " bytes to the device");
}

std::string CudaDevice::download(void *dst, const void *src, int64_t bytes) {
  // Wait first: a pageable copy blocks in the driver, out of the
  // watchdog's reach.
  if (std::string error = wait(); !error.empty())
    return error;
  if (std::string error =
          check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, queue),
                "copying " + std::to_string(bytes) + " bytes from the device");
      !error.empty())
    return error;
  return check(cudaStreamSynchronize(queue), "cudaStreamSynchronize");
}

std::string CudaDevice::copy(void *dst, const void *src, int64_t bytes) {
  return check(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, queue),
      "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes");
}

std::string CudaDevice::accumulate(float *dst, const float *src,
                                   int64_t count) {
  if (count == 0)
    return "";
  int64_t blocks = std::min<int64_t>((count + 255) / 256, 4096);
  accumulateKernel<<<static_cast<unsigned>(blocks), 256, 0, queue>>>(dst, src,
                                                                     count);
  return check(cudaGetLastError(), "launching the sum of tied gradients");
}

std::string CudaDevice::call(const rt::Function &fn,
                             const loom_call_frame &frame) {
  if (!context)
    return "the CUDA device has no kernel context";
  auto entry = reinterpret_cast<CudaEntryFn>(fn.symbol);
  if (int32_t status = entry(&frame, context))
    return std::string(loom_cuda_last_error()) + " (status " +
           std::to_string(status) + ")";
  return "";
}

std::string CudaDevice::collective(const std::string &op,
                                   const loom_call_frame &frame,
                                   void *const *buffers, const int64_t *meta) {
  if (op != "all_gather" && op != "all_slice")
    return "the CUDA device runs no collective '" + op + "'";
  if (!context)
    return "the CUDA device has no kernel context";
  int32_t status = op == "all_gather"
                       ? loom_cuda_all_gather(&frame, buffers, meta, context)
                       : loom_cuda_all_slice(&frame, buffers, meta, context);
  if (status)
    return loom_cuda_last_error();
  return "";
}

std::string CudaDevice::wait() {
  if (waiter)
    return waiter();
  return check(cudaStreamSynchronize(queue), "cudaStreamSynchronize");
}

std::string CudaDevice::synchronize() {
  if (std::string error = wait(); !error.empty())
    return error;
  // The device error word: what only the kernels saw.
  if (context && loom_cuda_context_synchronize(context))
    return loom_cuda_last_error();
  return "";
}

} // namespace loom::cuda_rt
