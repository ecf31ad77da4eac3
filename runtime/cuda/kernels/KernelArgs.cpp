//===- KernelArgs.cpp - The CUDA kernels' argument check and last error ---===//

#include "KernelArgs.h"

#include <cstdarg>
#include <cstdio>

namespace loom::cuda {

namespace {
thread_local char lastError[512] = "";
} // namespace

int32_t KernelArgs::expect(const char *op, int64_t wantOperands,
                           int64_t wantResults, uint32_t notFloat) const {
  int64_t operands = numOperands(), results = numResults();
  if (operands != wantOperands || results != wantResults)
    return fail("loom_cuda_%s: %lld operands and %lld results, expected %lld "
                "and %lld",
                op, static_cast<long long>(operands),
                static_cast<long long>(results),
                static_cast<long long>(wantOperands),
                static_cast<long long>(wantResults));
  for (int64_t t = 0; t < operands + results; ++t) {
    const View &view = tensor(t);
    if (view.rank > kMaxRank)
      return fail("loom_cuda_%s: tensor %lld has rank %lld, over %d", op,
                  static_cast<long long>(t), static_cast<long long>(view.rank),
                  kMaxRank);
    if (!(notFloat >> t & 1) && !view.isFloat())
      return fail("loom_cuda_%s: tensor %lld has element type %d, neither "
                  "f32 nor bf16",
                  op, static_cast<long long>(t), static_cast<int>(view.dtype));
  }
  return 0;
}

int32_t fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof lastError, format, args);
  va_end(args);
  return 1;
}

} // namespace loom::cuda

extern "C" const char *loom_cuda_last_error(void) {
  return loom::cuda::lastError;
}
