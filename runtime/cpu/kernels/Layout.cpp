//===- Layout.cpp - Reshape, transpose, broadcast, slice, pad, concat -----===//
//
// The layout ops move elements without looking at them, so they move
// elements of any type by their size. Transpose, broadcast, slice and pad
// are one strided move each (a walk of a box with a destination and a source
// stride per dimension), whose dimensions are first coalesced so that the
// innermost loop is as long as it can be, a memcpy where both sides are
// contiguous. The reductions walk their operand contiguously and add each
// run into its group (the result element it reduces into), in double.
//
//===----------------------------------------------------------------------===//

#include "KernelArgs.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace loom::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Strided moves
//===----------------------------------------------------------------------===//

/// One dimension of a strided move: its extent, and the strides (in
/// elements) of the destination and the source along it.
struct MoveDim {
  int64_t size, dstStride, srcStride;
};

/// Drops size-1 dimensions and merges a dimension into the one before it
/// where both sides step across the two as across one. Returns the new
/// number of dimensions.
int coalesce(MoveDim *dims, int rank) {
  int count = 0;
  for (int d = 0; d < rank; ++d) {
    MoveDim dim = dims[d];
    if (dim.size == 1)
      continue;
    if (count > 0) {
      MoveDim &prev = dims[count - 1];
      if (prev.dstStride == dim.dstStride * dim.size &&
          prev.srcStride == dim.srcStride * dim.size) {
        prev = {prev.size * dim.size, dim.dstStride, dim.srcStride};
        continue;
      }
    }
    dims[count++] = dim;
  }
  return count;
}

/// The innermost run of a move: `n` elements of type E.
template <typename E>
void moveRun(char *dst, const char *src, int64_t n, int64_t dstStride,
             int64_t srcStride) {
  E *to = reinterpret_cast<E *>(dst);
  const E *from = reinterpret_cast<const E *>(src);
  for (int64_t i = 0; i < n; ++i)
    to[i * dstStride] = from[i * srcStride];
}

/// For every index of the box `dims`, dst[index . dstStrides] =
/// src[index . srcStrides], elements of `bytes` bytes.
void stridedMove(char *dst, const char *src, MoveDim *dims, int rank,
                 int64_t bytes) {
  rank = coalesce(dims, rank);
  if (rank == 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const MoveDim inner = dims[rank - 1];
  bool contiguous = inner.dstStride == 1 && inner.srcStride == 1;
  int64_t runs = 1;
  for (int d = 0; d + 1 < rank; ++d)
    runs *= dims[d].size;
  int64_t index[kMaxRank] = {};
  int64_t dstOffset = 0, srcOffset = 0;
  for (int64_t run = 0; run < runs; ++run) {
    char *to = dst + dstOffset * bytes;
    const char *from = src + srcOffset * bytes;
    if (contiguous)
      std::memcpy(to, from, inner.size * bytes);
    else if (bytes == 8)
      moveRun<uint64_t>(to, from, inner.size, inner.dstStride, inner.srcStride);
    else if (bytes == 4)
      moveRun<uint32_t>(to, from, inner.size, inner.dstStride, inner.srcStride);
    else
      moveRun<uint16_t>(to, from, inner.size, inner.dstStride, inner.srcStride);
    for (int d = rank - 2; d >= 0; --d) {
      dstOffset += dims[d].dstStride;
      srcOffset += dims[d].srcStride;
      if (++index[d] < dims[d].size)
        break;
      dstOffset -= dims[d].dstStride * dims[d].size;
      srcOffset -= dims[d].srcStride * dims[d].size;
      index[d] = 0;
    }
  }
}

/// A move that fills `out` in row-major order, reading `in` at
/// `srcStrides` from element `base`.
void gather(const View &in, const View &out, const int64_t *srcStrides,
            int64_t base = 0) {
  int64_t dstStrides[kMaxRank];
  stridesOf(out, dstStrides);
  MoveDim dims[kMaxRank];
  for (int64_t d = 0; d < out.rank; ++d)
    dims[d] = {out.dims[d], dstStrides[d], srcStrides[d]};
  int64_t bytes = in.elementBytes();
  stridedMove(static_cast<char *>(out.data),
              static_cast<const char *>(in.data) + base * bytes, dims,
              static_cast<int>(out.rank), bytes);
}

/// Checks that `length` per-dimension values were given for a tensor of
/// rank `rank`.
int32_t checkLength(const char *op, const char *what, int64_t length,
                    int64_t rank) {
  if (length != rank)
    return fail("%s: %lld %s for a tensor of rank %lld", op,
                static_cast<long long>(length), what,
                static_cast<long long>(rank));
  return 0;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// One dimension of a reduction walk: its extent in the operand and the
/// stride of the group index along it (0 along a reduced dimension). The
/// operand itself is walked contiguously.
struct ReduceDim {
  int64_t size, groupStride;
};

/// The walk of an operand `x` reduced over `dims` (which the caller
/// checked), coalesced as stridedMove's. The groups are laid out as the
/// operand with the reduced dimensions set to 1 (keep_dims changes only the
/// result's shape, not its layout). Returns the number of dimensions.
int reduceWalk(const View &x, const int64_t *dims, int64_t numDims,
               ReduceDim *walk) {
  bool reduced[kMaxRank] = {};
  for (int64_t i = 0; i < numDims; ++i)
    reduced[dims[i]] = true;
  int64_t stride = 1, groupStrides[kMaxRank];
  for (int64_t d = x.rank - 1; d >= 0; --d) {
    groupStrides[d] = reduced[d] ? 0 : stride;
    if (!reduced[d])
      stride *= x.dims[d];
  }
  int count = 0;
  for (int64_t d = 0; d < x.rank; ++d) {
    int64_t size = x.dims[d];
    if (size == 1)
      continue;
    if (count > 0 && walk[count - 1].groupStride == groupStrides[d] * size) {
      walk[count - 1] = {walk[count - 1].size * size, groupStrides[d]};
      continue;
    }
    walk[count++] = {size, groupStrides[d]};
  }
  return count;
}

/// Calls `fn(xOffset, groupOffset, length, advances)` for each innermost run
/// of the walk: `length` contiguous operand elements that go to `length`
/// consecutive groups (`advances`) or all to one.
template <typename Fn> void forEachRun(const ReduceDim *walk, int rank, Fn fn) {
  if (rank == 0) {
    fn(int64_t{0}, int64_t{0}, int64_t{1}, false);
    return;
  }
  const ReduceDim &inner = walk[rank - 1];
  int64_t runs = 1;
  for (int d = 0; d + 1 < rank; ++d)
    runs *= walk[d].size;
  int64_t index[kMaxRank] = {};
  int64_t groupOffset = 0;
  for (int64_t run = 0; run < runs; ++run) {
    fn(run * inner.size, groupOffset, inner.size, inner.groupStride != 0);
    for (int d = rank - 2; d >= 0; --d) {
      groupOffset += walk[d].groupStride;
      if (++index[d] < walk[d].size)
        break;
      groupOffset -= walk[d].groupStride * walk[d].size;
      index[d] = 0;
    }
  }
}

/// Reads a reduction's `dims` and `keep_dims`, checks the dimensions and
/// builds the walk of `x`.
template <Kernel K>
int32_t readReduction(const char *op, KernelArgs &args, const View &x,
                      ReduceDim *walk, int &rank) {
  // keep_dims changes the result's shape, not its layout.
  auto dims = readAttrs<K>(args).dims;
  int64_t numDims = dims.size;
  bool seen[kMaxRank] = {};
  for (int64_t i = 0; i < numDims; ++i) {
    if (dims[i] < 0 || dims[i] >= x.rank || seen[dims[i]])
      return fail("%s: reduced dimension %lld is out of range or repeated "
                  "for rank %lld",
                  op, static_cast<long long>(dims[i]),
                  static_cast<long long>(x.rank));
    seen[dims[i]] = true;
  }
  rank = reduceWalk(x, dims.data, numDims, walk);
  return 0;
}

/// Whether `value` replaces `max` as a group's maximum: NaN wins, as in the
/// interpreter.
inline bool beats(double value, double max) {
  return value > max || std::isnan(value);
}

/// The maximum of each of `numGroups` groups of `x`.
template <typename T>
std::vector<double> groupMaxima(const T *x, const ReduceDim *walk, int rank,
                                int64_t numGroups) {
  std::vector<double> maxima(numGroups,
                             -std::numeric_limits<double>::infinity());
  forEachRun(walk, rank,
             [&](int64_t xOffset, int64_t group, int64_t n, bool advances) {
               const T *run = x + xOffset;
               if (advances) {
                 double *max = maxima.data() + group;
                 for (int64_t i = 0; i < n; ++i)
                   if (beats(run[i], max[i]))
                     max[i] = run[i];
                 return;
               }
               double max = maxima[group];
               for (int64_t i = 0; i < n; ++i)
                 if (beats(run[i], max))
                   max = run[i];
               maxima[group] = max;
             });
  return maxima;
}

enum class Reduction { Sum, Mean, Max };

template <typename T>
void reduce(const View &x, const View &out, const ReduceDim *walk, int rank,
            Reduction kind) {
  const T *in = static_cast<const T *>(x.data);
  T *y = static_cast<T *>(out.data);
  int64_t numGroups = out.numElements();
  if (kind == Reduction::Max) {
    std::vector<double> maxima = groupMaxima(in, walk, rank, numGroups);
    for (int64_t g = 0; g < numGroups; ++g)
      y[g] = static_cast<T>(maxima[g]);
    return;
  }
  std::vector<double> sums(numGroups, 0.0);
  forEachRun(walk, rank,
             [&](int64_t xOffset, int64_t group, int64_t n, bool advances) {
               const T *run = in + xOffset;
               if (advances) {
                 double *sum = sums.data() + group;
                 for (int64_t i = 0; i < n; ++i)
                   sum[i] += run[i];
                 return;
               }
               sums[group] += sumRun(run, n);
             });
  double count = kind == Reduction::Mean
                     ? static_cast<double>(x.numElements() / numGroups)
                     : 1.0;
  for (int64_t g = 0; g < numGroups; ++g)
    y[g] = static_cast<T>(sums[g] / count);
}

template <Kernel K>
int32_t reduceKernel(void *const *buffers, const int64_t *meta, const char *op,
                     Reduction kind) {
  KernelArgs args(buffers, meta);
  const View &x = args.in(0), &out = args.out(0);
  ReduceDim walk[kMaxRank];
  int rank;
  if (int32_t status = readReduction<K>(op, args, x, walk, rank))
    return status;
  if (x.dtype != out.dtype)
    return fail("%s: operand of element type %d, result of %d", op,
                static_cast<int>(x.dtype), static_cast<int>(out.dtype));
  if (x.dtype == LOOM_DTYPE_F32)
    reduce<float>(x, out, walk, rank, kind);
  else if (x.dtype == LOOM_DTYPE_F64)
    reduce<double>(x, out, walk, rank, kind);
  else
    return fail("%s: element type %d is neither f32 nor f64", op,
                static_cast<int>(x.dtype));
  return 0;
}

/// Each group's gradient goes to the elements equal to its maximum, shared
/// evenly between ties (as torch.amax's).
template <typename T>
void reduceMaxGrad(const View &dyView, const View &xView, const View &dxView,
                   const ReduceDim *walk, int rank) {
  const T *dy = static_cast<const T *>(dyView.data);
  const T *x = static_cast<const T *>(xView.data);
  T *dx = static_cast<T *>(dxView.data);
  int64_t numGroups = dyView.numElements();
  std::vector<double> maxima = groupMaxima(x, walk, rank, numGroups);
  std::vector<int64_t> ties(numGroups, 0);
  forEachRun(walk, rank,
             [&](int64_t xOffset, int64_t group, int64_t n, bool advances) {
               for (int64_t i = 0; i < n; ++i) {
                 int64_t g = group + (advances ? i : 0);
                 ties[g] += static_cast<double>(x[xOffset + i]) == maxima[g];
               }
             });
  forEachRun(walk, rank,
             [&](int64_t xOffset, int64_t group, int64_t n, bool advances) {
               for (int64_t i = 0; i < n; ++i) {
                 int64_t g = group + (advances ? i : 0);
                 dx[xOffset + i] =
                     static_cast<double>(x[xOffset + i]) == maxima[g]
                         ? static_cast<T>(static_cast<double>(dy[g]) /
                                          static_cast<double>(ties[g]))
                         : T(0);
               }
             });
}

} // namespace
} // namespace loom::cpu

using namespace loom::cpu;

extern "C" {

/// Row-major elements keep their order: a copy.
int32_t loom_cpu_reshape(const loom_call_frame *, void *const *buffers,
                         const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  std::memcpy(out.data, in.data, out.numElements() * out.elementBytes());
  return 0;
}

/// Result dimension d is operand dimension permutation[d].
int32_t loom_cpu_transpose(const loom_call_frame *, void *const *buffers,
                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  auto permutation = readAttrs<Kernel::transpose>(args).permutation;
  int64_t length = permutation.size;
  if (int32_t status =
          checkLength("transpose", "permutation entries", length, out.rank))
    return status;
  int64_t inStrides[kMaxRank], srcStrides[kMaxRank];
  stridesOf(in, inStrides);
  for (int64_t d = 0; d < out.rank; ++d) {
    if (permutation[d] < 0 || permutation[d] >= in.rank)
      return fail("transpose: permutation entry %lld is outside [0, %lld)",
                  static_cast<long long>(permutation[d]),
                  static_cast<long long>(in.rank));
    srcStrides[d] = inStrides[permutation[d]];
  }
  gather(in, out, srcStrides);
  return 0;
}

/// numpy broadcasting: aligned at the last dimension, size-1 and missing
/// leading dimensions stretch (read with stride 0).
int32_t loom_cpu_broadcast(const loom_call_frame *, void *const *buffers,
                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  if (in.rank > out.rank)
    return fail("broadcast: operand rank %lld exceeds result rank %lld",
                static_cast<long long>(in.rank),
                static_cast<long long>(out.rank));
  int64_t inStrides[kMaxRank], srcStrides[kMaxRank];
  stridesOf(in, inStrides);
  int64_t shift = out.rank - in.rank;
  for (int64_t d = 0; d < out.rank; ++d) {
    int64_t id = d - shift;
    srcStrides[d] = id >= 0 && in.dims[id] != 1 ? inStrides[id] : 0;
  }
  gather(in, out, srcStrides);
  return 0;
}

/// The box of the result's shape that starts at `offsets`.
int32_t loom_cpu_slice(const loom_call_frame *, void *const *buffers,
                       const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  auto offsets = readAttrs<Kernel::slice>(args).offsets;
  int64_t length = offsets.size;
  if (int32_t status = checkLength("slice", "offsets", length, in.rank))
    return status;
  int64_t inStrides[kMaxRank], base = 0;
  stridesOf(in, inStrides);
  for (int64_t d = 0; d < in.rank; ++d) {
    if (offsets[d] < 0 || offsets[d] + out.dims[d] > in.dims[d])
      return fail("slice: offset %lld of extent %lld is outside dimension "
                  "%lld of size %lld",
                  static_cast<long long>(offsets[d]),
                  static_cast<long long>(out.dims[d]),
                  static_cast<long long>(d),
                  static_cast<long long>(in.dims[d]));
    base += offsets[d] * inStrides[d];
  }
  gather(in, out, inStrides, base);
  return 0;
}

/// Zeros, with the operand placed at `low`.
int32_t loom_cpu_pad(const loom_call_frame *, void *const *buffers,
                     const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &in = args.in(0), &out = args.out(0);
  auto low = readAttrs<Kernel::pad>(args).low;
  int64_t length = low.size;
  if (int32_t status = checkLength("pad", "low entries", length, out.rank))
    return status;
  int64_t outStrides[kMaxRank], inStrides[kMaxRank], base = 0;
  stridesOf(out, outStrides);
  stridesOf(in, inStrides);
  MoveDim dims[kMaxRank];
  for (int64_t d = 0; d < out.rank; ++d) {
    if (low[d] < 0 || low[d] + in.dims[d] > out.dims[d])
      return fail("pad: low %lld of extent %lld is outside dimension %lld of "
                  "size %lld",
                  static_cast<long long>(low[d]),
                  static_cast<long long>(in.dims[d]), static_cast<long long>(d),
                  static_cast<long long>(out.dims[d]));
    base += low[d] * outStrides[d];
    dims[d] = {in.dims[d], outStrides[d], inStrides[d]};
  }
  int64_t bytes = out.elementBytes();
  std::memset(out.data, 0, out.numElements() * bytes);
  stridedMove(static_cast<char *>(out.data) + base * bytes,
              static_cast<const char *>(in.data), dims,
              static_cast<int>(out.rank), bytes);
  return 0;
}

/// For each block before `axis`, each input's block in turn. Reads its own
/// meta: a concat may have more inputs than KernelArgs holds views.
int32_t loom_cpu_concat(const loom_call_frame *, void *const *buffers,
                        const int64_t *meta) {
  loom::kernels::ConcatLayout c;
  char error[256];
  if (!loom::kernels::readConcat(meta, "concat", c, error, sizeof error))
    return fail("%s", error);
  char *out = static_cast<char *>(buffers[c.operands]);
  for (int64_t o = 0; o < c.outer; ++o)
    for (int64_t t = 0; t < c.operands; ++t) {
      int64_t block = c.extents[t] * c.inner * c.bytes;
      std::memcpy(out, static_cast<const char *>(buffers[t]) + o * block,
                  block);
      out += block;
    }
  return 0;
}

int32_t loom_cpu_reduce_sum(const loom_call_frame *, void *const *buffers,
                            const int64_t *meta) {
  return reduceKernel<Kernel::reduce_sum>(buffers, meta, "reduce_sum",
                                          Reduction::Sum);
}

/// The mean over the local elements of each group (the partitioner turns a
/// split reduce_mean into sums divided by the global count).
int32_t loom_cpu_reduce_mean(const loom_call_frame *, void *const *buffers,
                             const int64_t *meta) {
  return reduceKernel<Kernel::reduce_mean>(buffers, meta, "reduce_mean",
                                           Reduction::Mean);
}

/// NaN wins, as in the interpreter.
int32_t loom_cpu_reduce_max(const loom_call_frame *, void *const *buffers,
                            const int64_t *meta) {
  return reduceKernel<Kernel::reduce_max>(buffers, meta, "reduce_max",
                                          Reduction::Max);
}

/// Operands dy (reduce_max's result type) and x; result dx of x's type.
int32_t loom_cpu_reduce_max_grad(const loom_call_frame *, void *const *buffers,
                                 const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &dy = args.in(0), &x = args.in(1), &dx = args.out(0);
  ReduceDim walk[kMaxRank];
  int rank;
  if (int32_t status = readReduction<Kernel::reduce_max_grad>(
          "reduce_max_grad", args, x, walk, rank))
    return status;
  if (dy.dtype != x.dtype || dx.dtype != x.dtype)
    return fail("reduce_max_grad: dy, x and dx have element types %d, %d and "
                "%d",
                static_cast<int>(dy.dtype), static_cast<int>(x.dtype),
                static_cast<int>(dx.dtype));
  if (x.dtype == LOOM_DTYPE_F32)
    reduceMaxGrad<float>(dy, x, dx, walk, rank);
  else if (x.dtype == LOOM_DTYPE_F64)
    reduceMaxGrad<double>(dy, x, dx, walk, rank);
  else
    return fail("reduce_max_grad: element type %d is neither f32 nor f64",
                static_cast<int>(x.dtype));
  return 0;
}

} // extern "C"
