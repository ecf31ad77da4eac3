//===- Device.h - Where a backend keeps tensors and runs code ---*- C++ -*-===//
//
// The executor (Session.h, Pipeline.cpp) is one implementation for every
// backend: it places the rank in the job, holds its shard of the state,
// binds each call's arguments and walks the pipeline schedule. What a
// backend changes is where buffers live and how a compiled function is
// called, and that is a Device: host memory and `loom_fn_<f>(frame)` for
// the CPU backend, device memory and `loom_fn_<f>(frame, context)` on one
// CUDA stream for the GPU backend. The executor never dereferences a
// buffer; it moves bytes through its Device.
//
// A Device's operations are ordered among themselves (the CUDA device
// queues them on its stream); `download` and `synchronize` return once
// everything queued before them has finished. Each returns a Status whose
// code the device chose (Status.h): a kernel, CUDA or cuBLAS failure is a
// kernel error, a failed allocation out of memory, and a communication
// callback's failure inside a compiled function a communication error.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_DEVICE_H
#define LOOM_RUNTIME_EXECUTOR_DEVICE_H

#include "Artifact.h"
#include "Status.h"

#include <cstdint>
#include <string>
#include <utility>

namespace loom::rt {

class Device {
public:
  virtual ~Device() = default;

  /// A zeroed allocation of `bytes` (at least one byte, so that an empty
  /// tensor has an address) in `out`, or why not.
  virtual Status allocate(int64_t bytes, void *&out) = 0;
  /// Gives back what allocate returned (`bytes` as asked for). Work queued
  /// before may still read it: the device reuses it only after that work.
  virtual void release(void *data, int64_t bytes) = 0;

  /// Host memory into a buffer; `src` may be reused once this returns.
  virtual Status upload(void *dst, const void *src, int64_t bytes) = 0;
  /// A buffer into host memory, once the work queued before has finished.
  virtual Status download(void *dst, const void *src, int64_t bytes) = 0;
  /// Buffer to buffer.
  virtual Status copy(void *dst, const void *src, int64_t bytes) = 0;
  /// `dst[i] += src[i]` for `count` floats (the sum of tied gradients).
  virtual Status accumulate(float *dst, const float *src, int64_t count) = 0;

  /// Runs compiled function `fn` on `frame`.
  virtual Status call(const Function &fn, const loom_call_frame &frame) = 0;
  /// The backend's kernel of collective `op`, "all_gather" or "all_slice"
  /// (loom_cpu_<op>'s buffers and meta): the executor brings state that a
  /// step wrote in another layout back to the one it reads with them.
  virtual Status collective(const std::string &op, const loom_call_frame &frame,
                            void *const *buffers, const int64_t *meta) = 0;
  /// Waits for everything queued; reports what only the device saw (a
  /// token id outside the vocabulary).
  virtual Status synchronize() = 0;
};

/// A zeroed buffer of a Device, given back when it goes.
class Buffer {
public:
  Buffer() = default;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() { reset(); }

  /// Replaces the buffer with `bytes` zeroed bytes of `owner`.
  Status allocate(Device &owner, int64_t bytes) {
    reset();
    void *data = nullptr;
    LOOM_RETURN_IF_ERROR(owner.allocate(bytes, data));
    storage = data;
    device = &owner;
    size = bytes;
    return Status();
  }
  void reset() {
    if (storage)
      device->release(storage, size);
    storage = nullptr;
    device = nullptr;
    size = 0;
  }
  void swap(Buffer &other) {
    std::swap(storage, other.storage);
    std::swap(device, other.device);
    std::swap(size, other.size);
  }
  void *data() const { return storage; }
  int64_t size = 0;

private:
  void *storage = nullptr;
  Device *device = nullptr;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_EXECUTOR_DEVICE_H
