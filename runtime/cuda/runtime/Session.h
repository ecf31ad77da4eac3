//===- Session.h - One GPU's executor ---------------------------*- C++ -*-===//
//
// The executor behind loom_cuda_session (loom_cuda_runtime.h): the state
// of a one-device, unpipelined training step in device memory, its
// workspace, the batch, and the step loop. The artifact is the CPU
// runtime's loader (runtime/cpu/runtime/Artifact.h), asked for "cuda".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_RUNTIME_SESSION_H
#define LOOM_RUNTIME_CUDA_RUNTIME_SESSION_H

#include "Artifact.h"

#include "loom/loom_cuda_kernels.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace loom::cuda_rt {

/// A zeroed device allocation (cudaMalloc: 256-byte aligned).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();
  /// "" or the CUDA error.
  std::string allocate(int64_t bytes);
  void swap(DeviceBuffer &other) {
    std::swap(pointer, other.pointer);
    std::swap(size, other.size);
  }
  void *data() const { return pointer; }
  int64_t size = 0;

private:
  void *pointer = nullptr;
};

struct StateEntry {
  std::string key;
  rt::TensorSpec spec;
  std::vector<int64_t> offsets; ///< zeros: one device holds it whole
  DeviceBuffer current, next;
  bool updated = false; ///< train_step returns it (else current stays)
};

/// The entry point of a --target=cuda function.
using CudaEntryFn = int32_t (*)(const loom_call_frame *, loom_cuda_context *);

class Session {
public:
  explicit Session(const rt::Artifact &artifact) : artifact(artifact) {}
  ~Session();

  /// Picks `device`, creates the stream and context, allocates the state,
  /// the workspace and the step's other buffers; "" or an error.
  std::string init(int32_t device);
  std::string setState(int32_t index, const float *global);
  std::string getState(int32_t index, float *global);
  std::string setBatch(const int32_t *tokens, const int32_t *labels);
  std::string step(int64_t stepNumber, double &loss);
  int64_t stateBytes() const;

  const rt::Artifact &artifact;
  std::vector<std::unique_ptr<StateEntry>> state;
  DeviceBuffer workspace;
  std::string error;

private:
  /// One argument or result buffer that is not state: the step number,
  /// tokens, labels, the loss.
  struct Slot {
    const rt::TensorSpec *spec = nullptr;
    DeviceBuffer buffer;
  };

  /// Fails with `what`'s CUDA error, if any.
  static std::string check(int status, const std::string &what);

  const rt::Function *fn = nullptr;
  CudaEntryFn entry = nullptr;
  struct CUstream_st *stream = nullptr;
  loom_cuda_context *context = nullptr;
  std::map<std::string, size_t> stateIndex;
  /// Per argument / result: a state entry's index, or -1 and a slot.
  std::vector<int64_t> argState, resultState;
  std::vector<std::unique_ptr<Slot>> argSlots, resultSlots;
  bool haveBatch = false;
};

} // namespace loom::cuda_rt

#endif // LOOM_RUNTIME_CUDA_RUNTIME_SESSION_H
