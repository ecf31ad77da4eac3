//===- CpuDevice.cpp - The CPU backend's Device ---------------------------===//

#include "CpuDevice.h"

#include "loom/loom_cpu_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace loom::rt {

Status CpuDevice::allocate(int64_t bytes, void *&out) {
  size_t rounded =
      static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  out = std::aligned_alloc(64, rounded);
  if (!out)
    return outOfMemory("out of host memory for " + std::to_string(bytes) +
                       " bytes");
  std::memset(out, 0, rounded);
  return Status();
}

void CpuDevice::release(void *data, int64_t) { std::free(data); }

Status CpuDevice::upload(void *dst, const void *src, int64_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status();
}

Status CpuDevice::download(void *dst, const void *src, int64_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status();
}

Status CpuDevice::copy(void *dst, const void *src, int64_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status();
}

Status CpuDevice::accumulate(float *dst, const float *src, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    dst[i] += src[i];
  return Status();
}

Status CpuDevice::call(const Function &fn, const loom_call_frame &frame) {
  int32_t status = fn.entry(&frame);
  if (status == 0)
    return Status();
  std::string message = std::string(loom_cpu_last_error()) + " (status " +
                        std::to_string(status) + ")";
  // A communicator's failure reaches us as its own status, passed on by the
  // collective kernel and the compiled code; anything else is a kernel's.
  if (status == LOOM_ERROR_COMMUNICATION)
    return communicationError(std::move(message));
  return kernelError(std::move(message));
}

Status CpuDevice::collective(const std::string &op,
                             const loom_call_frame &frame, void *const *buffers,
                             const int64_t *meta) {
  if (op != "all_gather" && op != "all_slice")
    return invalidArgument("the CPU device runs no collective '" + op + "'");
  int32_t status = op == "all_gather"
                       ? loom_cpu_all_gather(&frame, buffers, meta)
                       : loom_cpu_all_slice(&frame, buffers, meta);
  if (status == LOOM_ERROR_COMMUNICATION)
    return communicationError(loom_cpu_last_error());
  if (status)
    return kernelError(loom_cpu_last_error());
  return Status();
}

} // namespace loom::rt
