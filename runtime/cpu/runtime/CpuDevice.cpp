//===- CpuDevice.cpp - The CPU backend's Device ---------------------------===//

#include "CpuDevice.h"

#include "loom/loom_cpu_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace loom::rt {

void *CpuDevice::allocate(int64_t bytes, std::string &error) {
  size_t rounded =
      static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  void *data = std::aligned_alloc(64, rounded);
  if (!data) {
    error = "out of host memory for " + std::to_string(bytes) + " bytes";
    return nullptr;
  }
  std::memset(data, 0, rounded);
  return data;
}

void CpuDevice::release(void *data, int64_t) { std::free(data); }

std::string CpuDevice::upload(void *dst, const void *src, int64_t bytes) {
  std::memcpy(dst, src, bytes);
  return "";
}

std::string CpuDevice::download(void *dst, const void *src, int64_t bytes) {
  std::memcpy(dst, src, bytes);
  return "";
}

std::string CpuDevice::copy(void *dst, const void *src, int64_t bytes) {
  std::memcpy(dst, src, bytes);
  return "";
}

std::string CpuDevice::accumulate(float *dst, const float *src, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    dst[i] += src[i];
  return "";
}

std::string CpuDevice::call(const Function &fn, const loom_call_frame &frame) {
  if (int32_t status = fn.entry(&frame))
    return std::string(loom_cpu_last_error()) + " (status " +
           std::to_string(status) + ")";
  return "";
}

std::string CpuDevice::collective(const std::string &op,
                                  const loom_call_frame &frame,
                                  void *const *buffers, const int64_t *meta) {
  if (op != "all_gather" && op != "all_slice")
    return "the CPU device runs no collective '" + op + "'";
  int32_t status = op == "all_gather"
                       ? loom_cpu_all_gather(&frame, buffers, meta)
                       : loom_cpu_all_slice(&frame, buffers, meta);
  if (status)
    return loom_cpu_last_error();
  return "";
}

} // namespace loom::rt
