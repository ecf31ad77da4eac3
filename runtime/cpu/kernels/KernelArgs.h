//===- KernelArgs.h - Reading a kernel's buffers and meta -------*- C++ -*-===//
//
// Every CPU kernel receives its operands and results as `buffers` and their
// description as `meta` (loom_cpu_kernels.h), which KernelArgs decodes
// (runtime/common/KernelMeta.h, shared with the CUDA kernels). Kernels
// report failures with fail(), which records the message
// loom_cpu_last_error() returns.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_KERNELS_KERNELARGS_H
#define LOOM_RUNTIME_CPU_KERNELS_KERNELARGS_H

#include "loom/loom_cpu_kernels.h"

#include "Bf16.h"
#include "KernelAttrs.h"

#include <cstdint>
#include <cstring>

namespace loom::cpu {

using kernels::Kernel;
using kernels::KernelArgs;
using kernels::kMaxRank;
using kernels::kMaxTensors;
using kernels::readAttrs;
using kernels::Rows;
using kernels::rowsOf;
using kernels::stridesOf;
using kernels::TensorList;
using kernels::View;

using rt::roundToBf16;
using rt::toBf16Bits;

/// Records `format` (printf-style) as this thread's last error; returns 1.
int32_t fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// The sum of a contiguous run in double, over four partial sums so that
/// the additions do not wait on each other.
template <typename T> double sumRun(const T *x, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  for (; i < n; ++i)
    s0 += x[i];
  return (s0 + s1) + (s2 + s3);
}

/// kernels::readMaskIndex, its error recorded by fail(): 0 or 1.
inline int32_t readMaskIndex(KernelArgs &args, const loom_call_frame *frame,
                             int64_t blockRank, const int64_t *localShape,
                             int64_t rank, const int64_t *entryOfDim,
                             int64_t *strides, int64_t *base,
                             int64_t *starts = nullptr) {
  char error[256];
  if (kernels::readMaskIndex(args, frame, blockRank, localShape, rank,
                             entryOfDim, strides, base, error, sizeof error,
                             starts))
    return 0;
  return fail("%s", error);
}

} // namespace loom::cpu

#endif // LOOM_RUNTIME_CPU_KERNELS_KERNELARGS_H
