//===- CpuDevice.h - The CPU backend's Device -------------------*- C++ -*-===//
//
// Host memory (64-byte aligned, as loom_program.h asks) and compiled
// functions called as `loom_fn_<f>(frame)` against the CPU kernel library.
// Every operation finishes before it returns. A compiled function's
// status says which layer failed: LOOM_ERROR_COMMUNICATION when a
// communication callback did (compiled code passes the callback's status
// on), a kernel otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_RUNTIME_CPUDEVICE_H
#define LOOM_RUNTIME_CPU_RUNTIME_CPUDEVICE_H

#include "Device.h"

namespace loom::rt {

class CpuDevice final : public Device {
public:
  Status allocate(int64_t bytes, void *&out) override;
  void release(void *data, int64_t bytes) override;
  Status upload(void *dst, const void *src, int64_t bytes) override;
  Status download(void *dst, const void *src, int64_t bytes) override;
  Status copy(void *dst, const void *src, int64_t bytes) override;
  Status accumulate(float *dst, const float *src, int64_t count) override;
  Status call(const Function &fn, const loom_call_frame &frame) override;
  Status collective(const std::string &op, const loom_call_frame &frame,
                    void *const *buffers, const int64_t *meta) override;
  Status synchronize() override { return Status(); }
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_CPU_RUNTIME_CPUDEVICE_H
