//===- KernelMeta.h - Decoding a kernel call's buffers and meta -*- C++ -*-===//
//
// Every kernel of the CPU and CUDA kernel libraries receives its operands
// and results as `buffers` and their description as `meta`
// (loom_cpu_kernels.h; loom_cuda_kernels.h takes the same): a View per
// tensor, then the op's attributes in the order the header lists them, the
// dropout mask block last. This header decodes them for both libraries.
//
// It is header-only on purpose: the two libraries are separate shared
// objects, each with its own last-error buffer, so nothing here reports an
// error through a library's fail(); readMaskIndex writes its message into
// the caller's buffer instead.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_KERNELMETA_H
#define LOOM_RUNTIME_COMMON_KERNELMETA_H

#include "loom/loom_program.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace loom::kernels {

constexpr int kMaxRank = 8;
constexpr int kMaxTensors = 16;

/// One operand or result: its buffer (host or device memory, as the
/// library takes), element type and local shape.
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
  /// Bytes per element.
  int64_t elementBytes() const { return loom_dtype_bytes(dtype); }
  /// f32 or bf16: the types the CUDA arithmetic kernels take.
  bool isFloat() const {
    return dtype == LOOM_DTYPE_F32 || dtype == LOOM_DTYPE_BF16;
  }
  bool isIndex() const {
    return dtype == LOOM_DTYPE_I32 || dtype == LOOM_DTYPE_I64;
  }
  /// Typed host pointers (meaningless on device buffers).
  float *f32() const { return static_cast<float *>(data); }
  double *f64() const { return static_cast<double *>(data); }
  int32_t *i32() const { return static_cast<int32_t *>(data); }
  int64_t *i64() const { return static_cast<int64_t *>(data); }
  /// Element `i` of an integer tensor in host memory (i32 or i64).
  int64_t index(int64_t i) const {
    return dtype == LOOM_DTYPE_I32 ? i32()[i] : i64()[i];
  }
};

class KernelArgs {
public:
  KernelArgs(void *const *buffers, const int64_t *meta) {
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

private:
  int64_t operands = 0, results = 0;
  View views[kMaxTensors];
  const int64_t *cursor = nullptr;
};

/// Row-major strides of `view`'s shape, in elements.
inline void stridesOf(const View &view, int64_t *strides) {
  int64_t stride = 1;
  for (int64_t d = view.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= view.dims[d];
  }
}

/// Reads the mask block of a dropout site whose masked tensor has
/// `blockRank` dimensions, and says where the local tensor of `localShape`
/// (`rank` dims; the mask itself) sits in the global one: the global
/// row-major index of local element p is `*base + sum_d p[d] * strides[d]`.
/// Mask dimension d is split as block entry `entryOfDim[d]` says (-1:
/// whole; a null `entryOfDim`: entry d). Along a dimension split over grid
/// axes [a0, a1, ...] the rank's shard is the row-major index of its
/// coordinates on them; micro-batch k of M adds k times the micro-batch's
/// global element count (interp::maskIndices). Returns false with a message
/// in `error` (`errorSize` bytes) on a malformed block or frame.
inline bool readMaskIndex(KernelArgs &args, const loom_call_frame *frame,
                          int64_t blockRank, const int64_t *localShape,
                          int64_t rank, const int64_t *entryOfDim,
                          int64_t *strides, int64_t *base, char *error,
                          size_t errorSize) {
  int64_t microBatches = args.integer();
  int64_t gridRank = 0;
  const int64_t *gridShape = args.array(gridRank);
  if (blockRank > kMaxRank || rank > kMaxRank) {
    std::snprintf(error, errorSize, "dropout mask: rank over %d", kMaxRank);
    return false;
  }
  int64_t axisCount[kMaxRank] = {};
  const int64_t *axes[kMaxRank] = {};
  if (gridRank > 0)
    for (int64_t entry = 0; entry < blockRank; ++entry)
      axes[entry] = args.array(axisCount[entry]);

  const loom_comm *comm = frame ? frame->comm : nullptr;
  int64_t globalShape[kMaxRank], start[kMaxRank];
  int64_t shards = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t entry = entryOfDim ? entryOfDim[d] : d;
    int64_t count = 1, shard = 0;
    if (entry >= 0 && entry < blockRank)
      for (int64_t a = 0; a < axisCount[entry]; ++a) {
        int64_t axis = axes[entry][a];
        if (axis < 0 || axis >= gridRank) {
          std::snprintf(error, errorSize,
                        "dropout mask: grid axis %lld is out of range",
                        static_cast<long long>(axis));
          return false;
        }
        if (!comm || !comm->grid_coordinate) {
          std::snprintf(error, errorSize,
                        "dropout mask: a split tensor needs "
                        "comm->grid_coordinate");
          return false;
        }
        int64_t coordinate =
            comm->grid_coordinate(comm->ctx, static_cast<int32_t>(axis));
        if (coordinate < 0 || coordinate >= gridShape[axis]) {
          std::snprintf(error, errorSize,
                        "dropout mask: coordinate %lld on grid axis %lld is "
                        "out of range",
                        static_cast<long long>(coordinate),
                        static_cast<long long>(axis));
          return false;
        }
        shard = shard * gridShape[axis] + coordinate;
        count *= gridShape[axis];
      }
    globalShape[d] = localShape[d] * count;
    start[d] = shard * localShape[d];
    shards *= count;
  }
  int64_t stride = 1, offset = 0;
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    offset += start[d] * stride;
    stride *= globalShape[d];
  }
  if (microBatches > 1) {
    int64_t k = frame ? frame->micro_batch : 0;
    if (k < 0 || k >= microBatches) {
      std::snprintf(error, errorSize, "dropout mask: micro-batch %lld of %lld",
                    static_cast<long long>(k),
                    static_cast<long long>(microBatches));
      return false;
    }
    int64_t local = 1;
    for (int64_t d = 0; d < rank; ++d)
      local *= localShape[d];
    offset += k * local * shards;
  }
  *base = offset;
  return true;
}

} // namespace loom::kernels

#endif // LOOM_RUNTIME_COMMON_KERNELMETA_H
