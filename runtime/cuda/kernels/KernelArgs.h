//===- KernelArgs.h - Reading a CUDA kernel's buffers and meta --*- C++ -*-===//
//
// The host side of every CUDA kernel: the meta of loom_cuda_kernels.h
// decoded as the CPU kernels decode it (runtime/common/KernelMeta.h, shared
// by both libraries). Kernels report failures with fail(), which records
// the message loom_cuda_last_error() returns.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_KERNELARGS_H
#define LOOM_RUNTIME_CUDA_KERNELS_KERNELARGS_H

#include "loom/loom_cuda_kernels.h"

#include "KernelAttrs.h"

#include <cstdint>

namespace loom::cuda {

using kernels::Kernel;
using kernels::kMaxRank;
using kernels::kMaxTensors;
using kernels::readAttrs;
using kernels::Rows;
using kernels::rowsOf;
using kernels::stridesOf;
using kernels::TensorList;
using kernels::View;

/// The decoded meta (device buffers), and the check every kernel starts
/// with.
class KernelArgs : public kernels::KernelArgs {
public:
  using kernels::KernelArgs::KernelArgs;

  /// Fails unless there are `operands` operands and `results` results, all
  /// f32 or bf16 but the tensors whose bit is set in `notFloat`.
  int32_t expect(const char *op, int64_t operands, int64_t results,
                 uint32_t notFloat = 0) const;
};

/// Records `format` (printf-style) as this thread's last error; returns 1.
int32_t fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// kernels::readMaskIndex, its error recorded by fail(): 0 or 1.
inline int32_t readMaskIndex(KernelArgs &args, const loom_call_frame *frame,
                             int64_t blockRank, const int64_t *localShape,
                             int64_t rank, const int64_t *entryOfDim,
                             int64_t *strides, int64_t *base) {
  char error[256];
  if (kernels::readMaskIndex(args, frame, blockRank, localShape, rank,
                             entryOfDim, strides, base, error, sizeof error))
    return 0;
  return fail("%s", error);
}

} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDA_KERNELS_KERNELARGS_H
