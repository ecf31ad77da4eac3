//===- Layout.cu - Reshape, transpose, broadcast, slice, pad, concat, reduce
//===//
//
// The layout ops move elements by their size without looking at them, as
// runtime/cpu/kernels/Layout.cpp does: transpose, broadcast, slice and pad
// are one strided move each (a box walked in row-major order, with a
// destination and a source stride per dimension, coalesced on the host),
// concat is one 2-D copy per input. The reductions give each group (result
// element) a thread when the reduced elements of a group lie apart (a
// reduction over leading dimensions: neighbouring threads read neighbouring
// elements) and a block when they are contiguous (over the last
// dimension). A leading-dimension reduction of few, long groups (GPT-2's
// bias gradients: 768 groups of 8192 rows, which a thread per group runs
// on 3 blocks) cuts each group into chunks: a thread per (group, chunk)
// into scratch, then a thread per group combining its chunks in order, so
// the result does not depend on the launch. Sums accumulate in double;
// max lets a NaN win, as the interpreter's does.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include <cmath>
#include <vector>

namespace loom::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Strided moves
//===----------------------------------------------------------------------===//

/// A box of `rank` dimensions with the strides (in elements) of the
/// destination and the source along each.
struct Move {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t dstStride[kMaxRank];
  int64_t srcStride[kMaxRank];

  void push(int64_t extent, int64_t dst, int64_t src) {
    if (extent == 1)
      return;
    int last = rank - 1;
    if (last >= 0 && dstStride[last] == dst * extent &&
        srcStride[last] == src * extent) {
      size[last] *= extent;
      dstStride[last] = dst;
      srcStride[last] = src;
      return;
    }
    size[rank] = extent;
    dstStride[rank] = dst;
    srcStride[rank] = src;
    ++rank;
  }
  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= size[d];
    return n;
  }
};

template <typename E>
__global__ void strided_move_kernel(E *dst, const E *src, Move move,
                                    int64_t n) {
  LOOM_GRID_STRIDE(e, n) {
    int64_t to = 0, from = 0, rest = e;
    for (int d = move.rank - 1; d >= 0; --d) {
      int64_t index = rest % move.size[d];
      rest /= move.size[d];
      to += index * move.dstStride[d];
      from += index * move.srcStride[d];
    }
    dst[to] = src[from];
  }
}

/// `move` of `bytes`-byte elements as a move of the widest unit (16, 8 or
/// 4 bytes) that the innermost dimension, contiguous on both sides, can be
/// cut into: its length, every other stride and both addresses multiples
/// of the unit. A slice of GPT-2's fused q/k/v projection then moves rows
/// of 16-byte units, a thread each, rather than 2-byte elements whose
/// index arithmetic cost more than the copy. Returns the unit's bytes.
int64_t widenMove(Move &move, const void *dst, const void *src, int64_t bytes) {
  int last = move.rank - 1;
  if ((bytes != 2 && bytes != 4 && bytes != 8) || last < 0 ||
      move.dstStride[last] != 1 || move.srcStride[last] != 1)
    return bytes;
  auto address = [](const void *p) { return reinterpret_cast<uintptr_t>(p); };
  for (int64_t wide : {16, 8, 4}) {
    if (wide <= bytes)
      break;
    int64_t factor = wide / bytes;
    bool fits = move.size[last] % factor == 0 && address(dst) % wide == 0 &&
                address(src) % wide == 0;
    for (int d = 0; d < last; ++d)
      fits = fits && move.dstStride[d] % factor == 0 &&
             move.srcStride[d] % factor == 0;
    if (!fits)
      continue;
    move.size[last] /= factor;
    for (int d = 0; d < last; ++d) {
      move.dstStride[d] /= factor;
      move.srcStride[d] /= factor;
    }
    return wide;
  }
  return bytes;
}

int32_t stridedMove(void *dst, const void *src, const Move &elements,
                    int64_t elementBytes, loom_cuda_context *context,
                    const char *op) {
  if (elements.count() == 0)
    return 0;
  Move move = elements;
  int64_t bytes = widenMove(move, dst, src, elementBytes);
  int64_t n = move.count();
  unsigned blocks = blocksFor(n);
  cudaStream_t stream = context->stream;
  switch (bytes) {
  case 16:
    strided_move_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<uint4 *>(dst), static_cast<const uint4 *>(src), move, n);
    break;
  case 8:
    strided_move_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<uint64_t *>(dst), static_cast<const uint64_t *>(src), move,
        n);
    break;
  case 4:
    strided_move_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<uint32_t *>(dst), static_cast<const uint32_t *>(src), move,
        n);
    break;
  case 2:
    strided_move_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<uint16_t *>(dst), static_cast<const uint16_t *>(src), move,
        n);
    break;
  default:
    return fail("loom_cuda_%s: elements of %lld bytes", op,
                static_cast<long long>(elementBytes));
  }
  return checkLaunch(op);
}

/// Fills `out` in row-major order, reading `in` at `srcStrides` from
/// element `base`.
int32_t gather(const View &in, const View &out, const int64_t *srcStrides,
               int64_t base, loom_cuda_context *context, const char *op) {
  if (in.dtype != out.dtype)
    return fail("loom_cuda_%s: operand of element type %d, result of %d", op,
                static_cast<int>(in.dtype), static_cast<int>(out.dtype));
  int64_t dstStrides[kMaxRank];
  stridesOf(out, dstStrides);
  Move move;
  for (int64_t d = 0; d < out.rank; ++d)
    move.push(out.dims[d], dstStrides[d], srcStrides[d]);
  int64_t bytes = in.elementBytes();
  return stridedMove(out.data,
                     static_cast<const char *>(in.data) + base * bytes, move,
                     bytes, context, op);
}

int32_t checkLength(const char *op, const char *what, int64_t length,
                    int64_t rank) {
  if (length != rank)
    return fail("loom_cuda_%s: %lld %s for a tensor of rank %lld", op,
                static_cast<long long>(length), what,
                static_cast<long long>(rank));
  return 0;
}

int32_t checkRanks(const KernelArgs &args, const char *op) {
  if (args.numOperands() < 1 || args.numResults() != 1 ||
      args.in(0).rank > kMaxRank || args.out(0).rank > kMaxRank)
    return fail("loom_cuda_%s: expected one operand and one result of rank "
                "%d at most",
                op, kMaxRank);
  return 0;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// How a reduction walks its operand: group g (a result element, row-major
/// over the kept dimensions) starts at `sum keptIndex[d] * keptStride[d]`,
/// and its r-th element lies `sum reducedIndex[d] * reducedStride[d]` after
/// that.
struct ReduceWalk {
  int keptRank = 0, reducedRank = 0;
  int64_t keptSize[kMaxRank], keptStride[kMaxRank];
  int64_t reducedSize[kMaxRank], reducedStride[kMaxRank];
  int64_t groups = 1, perGroup = 1;

  __device__ int64_t groupBase(int64_t g) const {
    int64_t offset = 0;
    for (int d = keptRank - 1; d >= 0; --d) {
      offset += (g % keptSize[d]) * keptStride[d];
      g /= keptSize[d];
    }
    return offset;
  }
  __device__ int64_t elementOffset(int64_t r) const {
    int64_t offset = 0;
    for (int d = reducedRank - 1; d >= 0; --d) {
      offset += (r % reducedSize[d]) * reducedStride[d];
      r /= reducedSize[d];
    }
    return offset;
  }
  /// The reduced elements of a group are one contiguous run (of more than
  /// one element).
  bool contiguous() const { return reducedRank == 1 && reducedStride[0] == 1; }
};

void pushDim(int &rank, int64_t *sizes, int64_t *strides, int64_t size,
             int64_t stride) {
  if (size == 1)
    return;
  if (rank > 0 && strides[rank - 1] == stride * size) {
    sizes[rank - 1] *= size;
    strides[rank - 1] = stride;
    return;
  }
  sizes[rank] = size;
  strides[rank] = stride;
  ++rank;
}

/// Reads `dims` and `keep_dims` (which changes the result's shape, not its
/// layout), checks them and builds the walk of `x`.
template <Kernel K>
int32_t readReduction(const char *op, KernelArgs &args, const View &x,
                      ReduceWalk &walk) {
  auto dims = readAttrs<K>(args).dims;
  int64_t numDims = dims.size;
  bool reduced[kMaxRank] = {};
  for (int64_t i = 0; i < numDims; ++i) {
    if (dims[i] < 0 || dims[i] >= x.rank || reduced[dims[i]])
      return fail("loom_cuda_%s: reduced dimension %lld is out of range or "
                  "repeated for rank %lld",
                  op, static_cast<long long>(dims[i]),
                  static_cast<long long>(x.rank));
    reduced[dims[i]] = true;
  }
  int64_t strides[kMaxRank];
  stridesOf(x, strides);
  for (int64_t d = 0; d < x.rank; ++d) {
    if (reduced[d]) {
      pushDim(walk.reducedRank, walk.reducedSize, walk.reducedStride, x.dims[d],
              strides[d]);
      walk.perGroup *= x.dims[d];
    } else {
      pushDim(walk.keptRank, walk.keptSize, walk.keptStride, x.dims[d],
              strides[d]);
      walk.groups *= x.dims[d];
    }
  }
  return 0;
}

enum class Reduction { Sum, Mean, Max };

/// max that lets a NaN win (the interpreter's reduce_max).
struct NanMaxOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    if (isnan(a))
      return a;
    if (isnan(b))
      return b;
    return a > b ? a : b;
  }
};

template <Reduction kind>
__device__ void reduceOne(Floats x, Floats out, const ReduceWalk &walk,
                          int64_t g, int64_t base, int64_t first, int64_t step,
                          bool block) {
  if constexpr (kind == Reduction::Max) {
    float max = -INFINITY;
    for (int64_t r = first; r < walk.perGroup; r += step)
      max = NanMaxOp()(max, x[base + walk.elementOffset(r)]);
    if (block)
      max = blockReduce(max, NanMaxOp(), -INFINITY);
    if (!block || threadIdx.x == 0)
      out.store(g, max);
  } else {
    double sum = 0.0;
    for (int64_t r = first; r < walk.perGroup; r += step)
      sum += x[base + walk.elementOffset(r)];
    if (block)
      sum = blockReduce(sum, SumOp(), 0.0);
    if (kind == Reduction::Mean)
      sum /= static_cast<double>(walk.perGroup);
    if (!block || threadIdx.x == 0)
      out.store(g, static_cast<float>(sum));
  }
}

/// A thread per group.
template <Reduction kind>
__global__ void reduce_threads_kernel(Floats x, Floats out, ReduceWalk walk) {
  LOOM_GRID_STRIDE(g, walk.groups) {
    reduceOne<kind>(x, out, walk, g, walk.groupBase(g), 0, 1, false);
  }
}

/// A block per group.
template <Reduction kind>
__global__ void reduce_blocks_kernel(Floats x, Floats out, ReduceWalk walk) {
  for (int64_t g = blockIdx.x; g < walk.groups; g += gridDim.x)
    reduceOne<kind>(x, out, walk, g, walk.groupBase(g), threadIdx.x, blockDim.x,
                    true);
}

/// A thread per (group, chunk): the chunk's elements reduced into
/// partial[chunk * groups + group] (neighbouring threads take neighbouring
/// groups, whose elements neighbour each other).
template <Reduction kind>
__global__ void reduce_chunks_kernel(Floats x, double *partial, ReduceWalk walk,
                                     int64_t chunks, int64_t chunkSize) {
  LOOM_GRID_STRIDE(i, walk.groups * chunks) {
    int64_t g = i % walk.groups, chunk = i / walk.groups;
    int64_t base = walk.groupBase(g);
    int64_t end = min(walk.perGroup, (chunk + 1) * chunkSize);
    double value = kind == Reduction::Max ? -INFINITY : 0.0;
    for (int64_t r = chunk * chunkSize; r < end; ++r) {
      double element = x[base + walk.elementOffset(r)];
      value =
          kind == Reduction::Max ? NanMaxOp()(value, element) : value + element;
    }
    partial[i] = value;
  }
}

/// A thread per group: its chunks combined in order.
template <Reduction kind>
__global__ void reduce_combine_kernel(const double *partial, Floats out,
                                      ReduceWalk walk, int64_t chunks) {
  LOOM_GRID_STRIDE(g, walk.groups) {
    double value = partial[g];
    for (int64_t chunk = 1; chunk < chunks; ++chunk) {
      double next = partial[chunk * walk.groups + g];
      value = kind == Reduction::Max ? NanMaxOp()(value, next) : value + next;
    }
    if (kind == Reduction::Mean)
      value /= static_cast<double>(walk.perGroup);
    out.store(g, static_cast<float>(value));
  }
}

/// How many chunks a thread-per-group reduction cuts its groups into: about
/// kChunkThreads threads in all, at least kMinChunk elements per chunk, and
/// a double per (group, chunk) within the context's scratch; 1: no cut.
constexpr int64_t kChunkThreads = int64_t{1} << 17, kMinChunk = 32;
int64_t chunksFor(const ReduceWalk &walk, const loom_cuda_context *context) {
  int64_t chunks = std::min(kChunkThreads / walk.groups,
                            (walk.perGroup + kMinChunk - 1) / kMinChunk);
  chunks = std::min<int64_t>(chunks, context->scratchBytes /
                                         (walk.groups * sizeof(double)));
  return std::max<int64_t>(chunks, 1);
}

/// Runs the reduction `walk` of `x` into `out` (walk.groups elements).
template <Reduction kind>
int32_t runReduction(loom_cuda_context *context, const View &x, const View &out,
                     const ReduceWalk &walk, const char *op) {
  if (walk.groups == 0)
    return 0;
  if (walk.contiguous()) {
    reduce_blocks_kernel<kind>
        <<<blocksFor(walk.groups, 1), kThreads, 0, context->stream>>>(
            floats(x), floats(out), walk);
    return checkLaunch(op);
  }
  int64_t chunks = chunksFor(walk, context);
  if (chunks == 1) {
    reduce_threads_kernel<kind>
        <<<blocksFor(walk.groups), kThreads, 0, context->stream>>>(
            floats(x), floats(out), walk);
    return checkLaunch(op);
  }
  int64_t chunkSize = (walk.perGroup + chunks - 1) / chunks;
  chunks = (walk.perGroup + chunkSize - 1) / chunkSize;
  double *partial = static_cast<double *>(context->scratch);
  reduce_chunks_kernel<kind>
      <<<blocksFor(walk.groups * chunks), kThreads, 0, context->stream>>>(
          floats(x), partial, walk, chunks, chunkSize);
  if (int32_t status = checkLaunch(op))
    return status;
  reduce_combine_kernel<kind>
      <<<blocksFor(walk.groups), kThreads, 0, context->stream>>>(
          partial, floats(out), walk, chunks);
  return checkLaunch(op);
}

template <Reduction kind, Kernel K>
int32_t reduce(void *const *buffers, const int64_t *meta,
               loom_cuda_context *context, const char *op) {
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect(op, 1, 1))
    return status;
  const View &x = args.in(0), &out = args.out(0);
  ReduceWalk walk;
  if (int32_t status = readReduction<K>(op, args, x, walk))
    return status;
  if (out.numElements() != walk.groups)
    return fail("loom_cuda_%s: the result has %lld elements, expected %lld", op,
                static_cast<long long>(out.numElements()),
                static_cast<long long>(walk.groups));
  return runReduction<kind>(context, x, out, walk, op);
}

/// dx: each group's dy shared evenly between the elements equal to its
/// maximum (torch.amax's gradient), 0 elsewhere.
__device__ void maxGradOne(Floats dy, Floats x, Floats dx,
                           const ReduceWalk &walk, int64_t g, int64_t first,
                           int64_t step, bool block) {
  int64_t base = walk.groupBase(g);
  float max = -INFINITY;
  for (int64_t r = first; r < walk.perGroup; r += step)
    max = NanMaxOp()(max, x[base + walk.elementOffset(r)]);
  if (block)
    max = blockReduce(max, NanMaxOp(), -INFINITY);
  int ties = 0;
  for (int64_t r = first; r < walk.perGroup; r += step)
    ties += x[base + walk.elementOffset(r)] == max;
  if (block)
    ties = blockReduce(ties, SumOp(), 0);
  float share = static_cast<float>(static_cast<double>(dy[g]) / ties);
  for (int64_t r = first; r < walk.perGroup; r += step) {
    int64_t offset = base + walk.elementOffset(r);
    dx.store(offset, x[offset] == max ? share : 0.0f);
  }
}

__global__ void reduce_max_grad_threads_kernel(Floats dy, Floats x, Floats dx,
                                               ReduceWalk walk) {
  LOOM_GRID_STRIDE(g, walk.groups) {
    maxGradOne(dy, x, dx, walk, g, 0, 1, false);
  }
}

__global__ void reduce_max_grad_blocks_kernel(Floats dy, Floats x, Floats dx,
                                              ReduceWalk walk) {
  for (int64_t g = blockIdx.x; g < walk.groups; g += gridDim.x)
    maxGradOne(dy, x, dx, walk, g, threadIdx.x, blockDim.x, true);
}

} // namespace

int32_t sumRows(loom_cuda_context *context, const View &x, int64_t rows,
                int64_t n, const View &out, const char *op) {
  ReduceWalk walk;
  pushDim(walk.keptRank, walk.keptSize, walk.keptStride, n, 1);
  pushDim(walk.reducedRank, walk.reducedSize, walk.reducedStride, rows, n);
  walk.groups = n;
  walk.perGroup = rows;
  return runReduction<Reduction::Sum>(context, x, out, walk, op);
}
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" {

int32_t loom_cuda_reshape(const loom_call_frame *, void *const *buffers,
                          const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "reshape");
  return copyBytes(buffers, meta, context, "reshape");
}

/// Result dimension d is operand dimension permutation[d].
int32_t loom_cuda_transpose(const loom_call_frame *, void *const *buffers,
                            const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "transpose");
  KernelArgs args(buffers, meta);
  if (int32_t status = checkRanks(args, "transpose"))
    return status;
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
      return fail("loom_cuda_transpose: permutation entry %lld is outside "
                  "[0, %lld)",
                  static_cast<long long>(permutation[d]),
                  static_cast<long long>(in.rank));
    srcStrides[d] = inStrides[permutation[d]];
  }
  return gather(in, out, srcStrides, 0, context, "transpose");
}

/// numpy broadcasting: aligned at the last dimension, size-1 and missing
/// leading dimensions stretch (read with stride 0).
int32_t loom_cuda_broadcast(const loom_call_frame *, void *const *buffers,
                            const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "broadcast");
  KernelArgs args(buffers, meta);
  if (int32_t status = checkRanks(args, "broadcast"))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  if (in.rank > out.rank)
    return fail("loom_cuda_broadcast: operand rank %lld exceeds result rank "
                "%lld",
                static_cast<long long>(in.rank),
                static_cast<long long>(out.rank));
  int64_t inStrides[kMaxRank], srcStrides[kMaxRank];
  stridesOf(in, inStrides);
  int64_t shift = out.rank - in.rank;
  for (int64_t d = 0; d < out.rank; ++d) {
    int64_t id = d - shift;
    srcStrides[d] = id >= 0 && in.dims[id] != 1 ? inStrides[id] : 0;
  }
  return gather(in, out, srcStrides, 0, context, "broadcast");
}

/// The box of the result's shape that starts at `offsets`.
int32_t loom_cuda_slice(const loom_call_frame *, void *const *buffers,
                        const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "slice");
  KernelArgs args(buffers, meta);
  if (int32_t status = checkRanks(args, "slice"))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  auto offsets = readAttrs<Kernel::slice>(args).offsets;
  int64_t length = offsets.size;
  if (int32_t status = checkLength("slice", "offsets", length, in.rank))
    return status;
  if (out.rank != in.rank)
    return fail("loom_cuda_slice: the result's rank differs from the "
                "operand's");
  int64_t inStrides[kMaxRank], base = 0;
  stridesOf(in, inStrides);
  for (int64_t d = 0; d < in.rank; ++d) {
    if (offsets[d] < 0 || offsets[d] + out.dims[d] > in.dims[d])
      return fail("loom_cuda_slice: offset %lld of extent %lld is outside "
                  "dimension %lld of size %lld",
                  static_cast<long long>(offsets[d]),
                  static_cast<long long>(out.dims[d]),
                  static_cast<long long>(d),
                  static_cast<long long>(in.dims[d]));
    base += offsets[d] * inStrides[d];
  }
  return gather(in, out, inStrides, base, context, "slice");
}

/// Zeros, with the operand placed at `low`.
int32_t loom_cuda_pad(const loom_call_frame *, void *const *buffers,
                      const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "pad");
  KernelArgs args(buffers, meta);
  if (int32_t status = checkRanks(args, "pad"))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  auto low = readAttrs<Kernel::pad>(args).low;
  int64_t length = low.size;
  if (int32_t status = checkLength("pad", "low entries", length, out.rank))
    return status;
  if (in.rank != out.rank || in.dtype != out.dtype)
    return fail("loom_cuda_pad: the operand and the result differ in rank "
                "or element type");
  int64_t outStrides[kMaxRank], inStrides[kMaxRank], base = 0;
  stridesOf(out, outStrides);
  stridesOf(in, inStrides);
  Move move;
  for (int64_t d = 0; d < out.rank; ++d) {
    if (low[d] < 0 || low[d] + in.dims[d] > out.dims[d])
      return fail("loom_cuda_pad: low %lld of extent %lld is outside "
                  "dimension %lld of size %lld",
                  static_cast<long long>(low[d]),
                  static_cast<long long>(in.dims[d]), static_cast<long long>(d),
                  static_cast<long long>(out.dims[d]));
    base += low[d] * outStrides[d];
    move.push(in.dims[d], outStrides[d], inStrides[d]);
  }
  int64_t bytes = out.elementBytes();
  cudaError_t status =
      cudaMemsetAsync(out.data, 0, out.numElements() * bytes, context->stream);
  if (status != cudaSuccess)
    return fail("loom_cuda_pad: %s", cudaGetErrorString(status));
  return stridedMove(static_cast<char *>(out.data) + base * bytes, in.data,
                     move, bytes, context, "pad");
}

/// For each block before `axis`, each input's block in turn: one 2-D copy
/// per input. Reads its own meta: a concat may have more inputs than
/// KernelArgs holds views.
int32_t loom_cuda_concat(const loom_call_frame *, void *const *buffers,
                         const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "concat");
  loom::kernels::ConcatLayout c;
  char error[256];
  if (!loom::kernels::readConcat(meta, "loom_cuda_concat", c, error,
                                 sizeof error))
    return fail("%s", error);
  char *out = static_cast<char *>(buffers[c.operands]);
  int64_t total = 0;
  for (int64_t extent : c.extents)
    total += extent;
  int64_t outBlock = total * c.inner * c.bytes;
  for (int64_t t = 0; t < c.operands; ++t) {
    int64_t block = c.extents[t] * c.inner * c.bytes;
    if (block > 0 && c.outer > 0) {
      cudaError_t status =
          cudaMemcpy2DAsync(out, outBlock, buffers[t], block, block, c.outer,
                            cudaMemcpyDeviceToDevice, context->stream);
      if (status != cudaSuccess)
        return fail("loom_cuda_concat: %s", cudaGetErrorString(status));
    }
    out += block;
  }
  return 0;
}

int32_t loom_cuda_reduce_sum(const loom_call_frame *, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "reduce_sum");
  return reduce<Reduction::Sum, Kernel::reduce_sum>(buffers, meta, context,
                                                    "reduce_sum");
}

/// The mean over the local elements of each group.
int32_t loom_cuda_reduce_mean(const loom_call_frame *, void *const *buffers,
                              const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "reduce_mean");
  return reduce<Reduction::Mean, Kernel::reduce_mean>(buffers, meta, context,
                                                      "reduce_mean");
}

int32_t loom_cuda_reduce_max(const loom_call_frame *, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "reduce_max");
  return reduce<Reduction::Max, Kernel::reduce_max>(buffers, meta, context,
                                                    "reduce_max");
}

/// Operands dy (reduce_max's result) and x; result dx of x's shape.
int32_t loom_cuda_reduce_max_grad(const loom_call_frame *, void *const *buffers,
                                  const int64_t *meta,
                                  loom_cuda_context *context) {
  ProfileScope scope(context, "reduce_max_grad");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("reduce_max_grad", 2, 1))
    return status;
  const View &dy = args.in(0), &x = args.in(1), &dx = args.out(0);
  ReduceWalk walk;
  if (int32_t status = readReduction<Kernel::reduce_max_grad>("reduce_max_grad",
                                                              args, x, walk))
    return status;
  if (dy.numElements() != walk.groups || dx.numElements() != x.numElements())
    return fail("loom_cuda_reduce_max_grad: dy or dx does not fit x");
  if (walk.groups == 0)
    return 0;
  if (walk.contiguous())
    reduce_max_grad_blocks_kernel<<<blocksFor(walk.groups, 1), kThreads, 0,
                                    context->stream>>>(floats(dy), floats(x),
                                                       floats(dx), walk);
  else
    reduce_max_grad_threads_kernel<<<blocksFor(walk.groups), kThreads, 0,
                                     context->stream>>>(floats(dy), floats(x),
                                                        floats(dx), walk);
  return checkLaunch("reduce_max_grad");
}

} // extern "C"
