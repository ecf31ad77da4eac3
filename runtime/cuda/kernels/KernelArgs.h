//===- KernelArgs.h - Reading a CUDA kernel's buffers and meta --*- C++ -*-===//
//
// The host side of every CUDA kernel: the meta of loom_cuda_kernels.h
// decoded into a View per tensor and the attributes in order, exactly as
// runtime/cpu/kernels/KernelArgs.h decodes it (the two libraries are
// separate shared objects, so each has its own copy of these few lines).
// Kernels report failures with fail(), which records the message
// loom_cuda_last_error() returns.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_KERNELARGS_H
#define LOOM_RUNTIME_CUDA_KERNELS_KERNELARGS_H

#include "loom/loom_cuda_kernels.h"

#include <cstdint>
#include <cstring>

namespace loom::cuda {

constexpr int kMaxRank = 8;
constexpr int kMaxTensors = 16;

/// One operand or result: its device buffer, element type and local shape.
struct View {
  void *data = nullptr;
  loom_dtype dtype = LOOM_DTYPE_F32;
  int64_t rank = 0;
  int64_t dims[kMaxRank] = {};

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d = 0; d < rank; ++d)
      n *= dims[d];
    return n;
  }
  int64_t elementBytes() const { return loom_dtype_bytes(dtype); }
  /// f32 or bf16: the types the arithmetic kernels take.
  bool isFloat() const {
    return dtype == LOOM_DTYPE_F32 || dtype == LOOM_DTYPE_BF16;
  }
  bool isIndex() const {
    return dtype == LOOM_DTYPE_I32 || dtype == LOOM_DTYPE_I64;
  }
};

class KernelArgs {
public:
  KernelArgs(void *const *buffers, const int64_t *meta);

  int64_t numOperands() const { return operands; }
  int64_t numResults() const { return results; }
  const View &in(int64_t i) const { return views[i]; }
  const View &out(int64_t i) const { return views[operands + i]; }
  const View &tensor(int64_t t) const { return views[t]; }

  /// The next attribute.
  int64_t integer() { return *cursor++; }
  double real() {
    double value;
    std::memcpy(&value, cursor++, sizeof value);
    return value;
  }
  bool unit() { return *cursor++ != 0; }
  /// The next array attribute: its length, and a pointer to its elements.
  const int64_t *array(int64_t &length) {
    length = *cursor++;
    const int64_t *elements = cursor;
    cursor += length;
    return elements;
  }

  /// Fails unless there are `operands` operands and `results` results, all
  /// f32 or bf16 but the tensors whose bit is set in `notFloat`.
  int32_t expect(const char *op, int64_t operands, int64_t results,
                 uint32_t notFloat = 0) const;

private:
  int64_t operands = 0, results = 0;
  View views[kMaxTensors];
  const int64_t *cursor = nullptr;
};

/// Records `format` (printf-style) as this thread's last error; returns 1.
int32_t fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Row-major strides of `view`'s shape, in elements.
void stridesOf(const View &view, int64_t *strides);

/// Reads the mask block of a dropout site and says where the local tensor
/// of `localShape` sits in the global one (runtime/cpu/kernels/Norm.cpp's
/// readMaskIndex, whose meaning DropoutMask.h gives): the global row-major
/// index of local element p is `*base + sum_d p[d] * strides[d]`.
int32_t readMaskIndex(KernelArgs &args, const loom_call_frame *frame,
                      int64_t blockRank, const int64_t *localShape,
                      int64_t rank, const int64_t *entryOfDim, int64_t *strides,
                      int64_t *base);

} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDA_KERNELS_KERNELARGS_H
