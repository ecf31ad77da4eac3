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

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

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

/// Reads the description of the tensor at `cursor` (dtype, rank, dims) into
/// `view` with its buffer; returns the cursor after it. Dimensions past
/// kMaxRank are skipped (the kernels refuse such ranks).
inline const int64_t *readView(const int64_t *cursor, void *buffer,
                               View &view) {
  view.data = buffer;
  view.dtype = static_cast<loom_dtype>(*cursor++);
  view.rank = *cursor++;
  for (int64_t d = 0; d < view.rank; ++d) {
    int64_t extent = *cursor++;
    if (d < kMaxRank)
      view.dims[d] = extent;
  }
  return cursor;
}

/// The attributes after the tensors.
class AttributeReader {
public:
  AttributeReader() = default;
  /// Reads the attributes that start at `cursor`.
  explicit AttributeReader(const int64_t *cursor) : cursor(cursor) {}

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

protected:
  const int64_t *cursor = nullptr;
};

/// A call of at most kMaxTensors tensors: every kernel but the
/// multi-tensor ones (TensorList).
class KernelArgs : public AttributeReader {
public:
  KernelArgs(void *const *buffers, const int64_t *meta) {
    operands = meta[0];
    results = meta[1];
    cursor = meta + 2;
    for (int64_t t = 0; t < operands + results && t < kMaxTensors; ++t)
      cursor = readView(cursor, buffers[t], views[t]);
  }

  int64_t numOperands() const { return operands; }
  int64_t numResults() const { return results; }
  const View &in(int64_t i) const { return views[i]; }
  const View &out(int64_t i) const { return views[operands + i]; }
  const View &tensor(int64_t t) const { return views[t]; }

private:
  int64_t operands = 0, results = 0;
  View views[kMaxTensors];
};

/// A call of any number of tensors (adamw_update_multi), decoded into a
/// vector.
class TensorList : public AttributeReader {
public:
  TensorList(void *const *buffers, const int64_t *meta) {
    operands = meta[0];
    results = meta[1];
    cursor = meta + 2;
    views.resize(static_cast<size_t>(operands + results));
    for (int64_t t = 0; t < operands + results; ++t)
      cursor = readView(cursor, buffers[t], views[t]);
  }

  int64_t numOperands() const { return operands; }
  int64_t numResults() const { return results; }
  const View &in(int64_t i) const { return views[i]; }
  const View &out(int64_t i) const { return views[operands + i]; }

private:
  int64_t operands = 0, results = 0;
  std::vector<View> views;
};

/// The row-wise kernels' view of a tensor: rows of length `size` (its last
/// dimension), `count` of them.
struct Rows {
  int64_t size = 0, count = 0;
};

inline Rows rowsOf(const View &x) {
  Rows rows;
  rows.size = x.rank > 0 ? x.dims[x.rank - 1] : 1;
  rows.count = rows.size > 0 ? x.numElements() / rows.size : 0;
  return rows;
}

/// Writes `format` (printf-style) to `error`; returns false. The shared
/// decoders' way of failing (see the file comment).
inline bool failWith(char *error, size_t errorSize, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
inline bool failWith(char *error, size_t errorSize, const char *format, ...) {
  va_list list;
  va_start(list, format);
  std::vsnprintf(error, errorSize, format, list);
  va_end(list);
  return false;
}

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
/// global element count (interp::maskIndices). `starts`, when given (rank
/// entries), receives the global position of each dimension's first local
/// element, which micro-batches do not move (a sequence shard's first
/// position). Returns false with a message in `error` (`errorSize` bytes)
/// on a malformed block or frame.
inline bool readMaskIndex(KernelArgs &args, const loom_call_frame *frame,
                          int64_t blockRank, const int64_t *localShape,
                          int64_t rank, const int64_t *entryOfDim,
                          int64_t *strides, int64_t *base, char *error,
                          size_t errorSize, int64_t *starts = nullptr) {
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
    if (starts)
      starts[d] = start[d];
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

/// The position block of an op that computes from its rows' global
/// positions (readMaskIndex's block, when its row says `present`): the
/// global position of local row 0 along dimension `dim` of the local tensor
/// of `localShape` (`rank` dims, the block's entry d splitting dimension
/// d). 0 without a block. Returns false with a message on a malformed one.
inline bool readPositionStart(KernelArgs &args, const loom_call_frame *frame,
                              bool present, const int64_t *localShape,
                              int64_t rank, int64_t dim, int64_t *start,
                              char *error, size_t errorSize) {
  *start = 0;
  if (!present)
    return true;
  int64_t strides[kMaxRank], starts[kMaxRank], base = 0;
  if (!readMaskIndex(args, frame, rank, localShape, rank, nullptr, strides,
                     &base, error, errorSize, starts))
    return false;
  *start = starts[dim];
  return true;
}

/// The shapes of an attention: q [B, S, H, D] (operand `qIndex`), k and v
/// [B, Skv, Hkv, D] after it, with H a multiple of Hkv.
struct AttentionDims {
  int64_t batch = 0, seq = 0, heads = 0, kvSeq = 0, kvHeads = 0, dim = 0;
};

/// Reads and checks `dims` as both kernel libraries rely on (`causal` needs
/// as many keys as queries, or a multiple of them on a shard of the
/// sequence); messages start with "<prefix>_<op>: ".
inline bool readAttentionDims(const KernelArgs &args, int64_t qIndex,
                              bool causal, const char *prefix, const char *op,
                              AttentionDims &dims, char *error,
                              size_t errorSize) {
  auto failWith = [&](const char *what) {
    std::snprintf(error, errorSize, "%s_%s: %s", prefix, op, what);
    return false;
  };
  const View &q = args.in(qIndex), &k = args.in(qIndex + 1),
             &v = args.in(qIndex + 2);
  if (q.rank != 4 || k.rank != 4 || v.rank != 4)
    return failWith("q, k and v must be [B, S, H, D]");
  dims.batch = q.dims[0];
  dims.seq = q.dims[1];
  dims.heads = q.dims[2];
  dims.dim = q.dims[3];
  dims.kvSeq = k.dims[1];
  dims.kvHeads = k.dims[2];
  for (int64_t d = 0; d < 4; ++d)
    if (k.dims[d] != v.dims[d])
      return failWith("k and v differ in shape");
  if (k.dims[0] != dims.batch || k.dims[3] != dims.dim || dims.kvHeads <= 0 ||
      dims.heads % dims.kvHeads != 0)
    return failWith("k and v do not fit q");
  if (causal && (dims.seq <= 0 || dims.kvSeq % dims.seq != 0))
    return failWith("causal needs as many keys as queries, or a multiple");
  if (dims.kvSeq <= 0 || dims.dim <= 0)
    return failWith("no keys or an empty head dimension");
  return true;
}

} // namespace loom::kernels

#endif // LOOM_RUNTIME_COMMON_KERNELMETA_H
