//===- CpuDevice.h - The CPU backend's Device -------------------*- C++ -*-===//
//
// Host memory (64-byte aligned, as loom_program.h asks) and compiled
// functions called as `loom_fn_<f>(frame)` against the CPU kernel library.
// Every operation finishes before it returns.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_RUNTIME_CPUDEVICE_H
#define LOOM_RUNTIME_CPU_RUNTIME_CPUDEVICE_H

#include "Device.h"

namespace loom::rt {

class CpuDevice final : public Device {
public:
  void *allocate(int64_t bytes, std::string &error) override;
  void release(void *data, int64_t bytes) override;
  std::string upload(void *dst, const void *src, int64_t bytes) override;
  std::string download(void *dst, const void *src, int64_t bytes) override;
  std::string copy(void *dst, const void *src, int64_t bytes) override;
  std::string accumulate(float *dst, const float *src, int64_t count) override;
  std::string call(const Function &fn, const loom_call_frame &frame) override;
  std::string collective(const std::string &op, const loom_call_frame &frame,
                         void *const *buffers, const int64_t *meta) override;
  std::string synchronize() override { return ""; }
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_CPU_RUNTIME_CPUDEVICE_H
