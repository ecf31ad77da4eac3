//===- KernelArgs.h - Reading a kernel's buffers and meta -------*- C++ -*-===//
//
// Every CPU kernel receives its operands and results as `buffers` and their
// description as `meta` (loom_cpu_kernels.h). KernelArgs decodes them once:
// a View per tensor, then the attributes read in the order the header lists
// them. Kernels report failures with fail(), which records the message
// loom_cpu_last_error() returns.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_KERNELS_KERNELARGS_H
#define LOOM_RUNTIME_CPU_KERNELS_KERNELARGS_H

#include "loom/loom_cpu_kernels.h"

#include <cstdint>
#include <cstring>

namespace loom::cpu {

constexpr int kMaxRank = 8;
constexpr int kMaxTensors = 16;

/// One operand or result: its buffer, element type and local shape.
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
  float *f32() const { return static_cast<float *>(data); }
  double *f64() const { return static_cast<double *>(data); }
  int32_t *i32() const { return static_cast<int32_t *>(data); }
  int64_t *i64() const { return static_cast<int64_t *>(data); }
  /// Element `i` of an integer tensor (i32 or i64).
  int64_t index(int64_t i) const {
    return dtype == LOOM_DTYPE_I32 ? i32()[i] : i64()[i];
  }
  /// Bytes per element.
  int64_t elementBytes() const { return loom_dtype_bytes(dtype); }
};

class KernelArgs {
public:
  KernelArgs(void *const *buffers, const int64_t *meta);

  int64_t numOperands() const { return operands; }
  int64_t numResults() const { return results; }
  const View &in(int64_t i) const { return views[i]; }
  const View &out(int64_t i) const { return views[operands + i]; }

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

private:
  int64_t operands = 0, results = 0;
  View views[kMaxTensors];
  const int64_t *cursor = nullptr;
};

/// Records `format` (printf-style) as this thread's last error; returns 1.
int32_t fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Row-major strides of `view`'s shape, in elements.
void stridesOf(const View &view, int64_t *strides);

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

/// Reads the mask block of a dropout site (loom_cpu_kernels.h) whose masked
/// tensor has `blockRank` dimensions, and says where the local tensor of
/// `localShape` (`rank` dims; the mask itself) sits in the global one: the
/// global row-major index of local element p is
/// `*base + sum_d p[d] * strides[d]`. Mask dimension d is split as block
/// entry `entryOfDim[d]` says (-1: whole; a null `entryOfDim`: entry d).
/// Defined in Norm.cpp, next to the dropout kernels.
int32_t readMaskIndex(KernelArgs &args, const loom_call_frame *frame,
                      int64_t blockRank, const int64_t *localShape,
                      int64_t rank, const int64_t *entryOfDim, int64_t *strides,
                      int64_t *base);

} // namespace loom::cpu

#endif // LOOM_RUNTIME_CPU_KERNELS_KERNELARGS_H
