//===- CudaDevice.h - The CUDA backend's Device -----------------*- C++ -*-===//
//
// One GPU as the executor sees it (runtime/executor/Device.h): buffers in
// device memory, every operation queued on one stream, compiled functions
// called as `loom_fn_<f>(frame, context)` with the kernels' context
// (loom_cuda_kernels.h) on that stream.
//
// Allocations the executor gives back (a call's arguments and results, the
// pipeline's values) stay in a pool by size and are handed out again,
// zeroed on the stream, so that a step in its steady state calls no
// cudaMalloc (which would synchronize the device). Reuse is safe without
// waiting: everything runs on the one stream, in order.
//
// Waiting for the stream (download, synchronize) goes through a waiter
// when the communication backend sets one: NCCL's watchdog polls the
// stream and the communicators and aborts them instead of hanging.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_RUNTIME_CUDADEVICE_H
#define LOOM_RUNTIME_CUDA_RUNTIME_CUDADEVICE_H

#include "Device.h"

#include "loom/loom_cuda_kernels.h"

#include <functional>
#include <map>

namespace loom::cuda_rt {

/// The entry point of a --target=cuda function.
using CudaEntryFn = int32_t (*)(const loom_call_frame *, loom_cuda_context *);

class CudaDevice final : public rt::Device {
public:
  CudaDevice() = default;
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;
  ~CudaDevice() override;

  /// Makes device `ordinal` current and creates the stream.
  rt::Status init(int ordinal);
  /// Creates the kernels' context with `scratchBytes` of scratch.
  rt::Status createContext(int64_t scratchBytes);
  struct CUstream_st *stream() const { return queue; }
  int ordinal() const { return device; }
  /// Waits for the stream through `wait` from now on (a communication
  /// backend's watchdog); it returns success or why the stream did not
  /// finish, as the layer that saw it (a communication error for NCCL's
  /// watchdog).
  void setWaiter(std::function<rt::Status()> wait) { waiter = std::move(wait); }

  rt::Status allocate(int64_t bytes, void *&out) override;
  void release(void *data, int64_t bytes) override;
  rt::Status upload(void *dst, const void *src, int64_t bytes) override;
  rt::Status download(void *dst, const void *src, int64_t bytes) override;
  rt::Status copy(void *dst, const void *src, int64_t bytes) override;
  rt::Status accumulate(float *dst, const float *src, int64_t count) override;
  rt::Status call(const rt::Function &fn,
                  const loom_call_frame &frame) override;
  rt::Status collective(const std::string &op, const loom_call_frame &frame,
                        void *const *buffers, const int64_t *meta) override;
  rt::Status synchronize() override;

  /// Bytes held by the pool (given back, not yet reused).
  int64_t pooledBytes() const { return pooled; }

private:
  /// Waits for the stream: the waiter, or cudaStreamSynchronize.
  rt::Status wait();
  /// Frees the pool (after the stream's work): before giving up on an
  /// allocation that did not fit.
  void drainPool();

  int device = -1;
  struct CUstream_st *queue = nullptr;
  loom_cuda_context *context = nullptr;
  std::function<rt::Status()> waiter;
  std::multimap<int64_t, void *> pool;
  int64_t pooled = 0;
};

} // namespace loom::cuda_rt

#endif // LOOM_RUNTIME_CUDA_RUNTIME_CUDADEVICE_H
