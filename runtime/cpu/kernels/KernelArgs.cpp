//===- KernelArgs.cpp - The CPU kernels' last error -----------------------===//

#include "KernelArgs.h"

#include <cstdarg>
#include <cstdio>

namespace loom::cpu {

namespace {
thread_local char lastError[512] = "";
} // namespace

int32_t fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof lastError, format, args);
  va_end(args);
  return 1;
}

} // namespace loom::cpu

extern "C" const char *loom_cpu_last_error(void) {
  return loom::cpu::lastError;
}
