//===- KernelArgs.cpp - Reading a kernel's buffers and meta ---------------===//

#include "KernelArgs.h"

#include <cstdarg>
#include <cstdio>

namespace loom::cpu {

namespace {
thread_local char lastError[512] = "";
} // namespace

KernelArgs::KernelArgs(void *const *buffers, const int64_t *meta) {
  operands = meta[0];
  results = meta[1];
  cursor = meta + 2;
  for (int64_t t = 0; t < operands + results && t < kMaxTensors; ++t) {
    View &view = views[t];
    view.data = buffers[t];
    view.dtype = static_cast<loom_dtype>(*cursor++);
    view.rank = *cursor++;
    for (int64_t d = 0; d < view.rank; ++d) {
      int64_t extent = *cursor++;
      if (d < kMaxRank)
        view.dims[d] = extent;
    }
  }
}

int32_t fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof lastError, format, args);
  va_end(args);
  return 1;
}

void stridesOf(const View &view, int64_t *strides) {
  int64_t stride = 1;
  for (int64_t d = view.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= view.dims[d];
  }
}

} // namespace loom::cpu

extern "C" const char *loom_cpu_last_error(void) {
  return loom::cpu::lastError;
}
