//===- Collectives.cu - The shard collectives over loom_comm, on a GPU ----===//
//
// The CUDA twins of runtime/cpu/kernels/Collectives.cpp: the same meta, the
// same checks and messages, the same member-order block packing. Around the
// moved dimension a tensor reads as [outer, members, piece]; the kernels
// swap the two leading dimensions into a packed buffer ([members, outer,
// piece], member blocks contiguous) before sending, and back after
// receiving. When outer is 1 the tensor is already in blocks and the
// callback works on the kernel's buffers.
//
// Everything is enqueued on the context's stream: the packing moves (one
// kernel each, converting the element type where a reduction's operand and
// result types differ), the plain copies (cudaMemcpyAsync), the packed
// buffers (cudaMallocAsync / cudaFreeAsync) and, by the contract of
// loom_cuda_kernels.h, the communication callbacks, which take device
// pointers and see the work enqueued before them.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

namespace loom::cuda {
namespace {

/// The product of `view`'s dimensions before `axis`.
int64_t elementsBefore(const View &view, int64_t axis) {
  int64_t n = 1;
  for (int64_t d = 0; d < axis; ++d)
    n *= view.dims[d];
  return n;
}

//===----------------------------------------------------------------------===//
// Block moves
//===----------------------------------------------------------------------===//

/// A source read as [a, b, piece] and a destination written as [taken, a,
/// piece] from blocks j = first .. first + taken - 1 of its middle
/// dimension: with first 0 and taken b the two leading dimensions swap
/// (the CPU kernels' swapLeading); with taken 1, one member's slice.
struct Blocks {
  int64_t a = 1, b = 1, piece = 0, first = 0, taken = 1;

  int64_t count() const { return taken * a * piece; }
  /// The source element of destination element `e`.
  __device__ int64_t source(int64_t e) const {
    int64_t p = e % piece, row = e / piece;
    int64_t i = row % a, j = row / a + first;
    return (i * b + j) * piece + p;
  }
};

/// [a, b, piece] -> [b, a, piece], all b blocks.
Blocks swapLeading(int64_t a, int64_t b, int64_t piece) {
  Blocks blocks;
  blocks.a = a;
  blocks.b = b;
  blocks.piece = piece;
  blocks.taken = b;
  return blocks;
}

/// Element `i` of `data` (of `dtype`) as a double.
__device__ double readElement(const void *data, int32_t dtype, int64_t i) {
  switch (dtype) {
  case LOOM_DTYPE_F64:
    return static_cast<const double *>(data)[i];
  case LOOM_DTYPE_I32:
    return static_cast<const int32_t *>(data)[i];
  case LOOM_DTYPE_I64:
    return static_cast<double>(static_cast<const int64_t *>(data)[i]);
  case LOOM_DTYPE_BF16:
    return __uint_as_float(
        static_cast<uint32_t>(static_cast<const uint16_t *>(data)[i]) << 16);
  default:
    return static_cast<const float *>(data)[i];
  }
}

/// Stores `value` as element `i` of `data` (of `dtype`); bf16 rounds to
/// nearest even, bit for bit as the CPU kernels do.
__device__ void writeElement(void *data, int32_t dtype, int64_t i,
                             double value) {
  switch (dtype) {
  case LOOM_DTYPE_F64:
    static_cast<double *>(data)[i] = value;
    return;
  case LOOM_DTYPE_I32:
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(value);
    return;
  case LOOM_DTYPE_I64:
    static_cast<int64_t *>(data)[i] = static_cast<int64_t>(value);
    return;
  case LOOM_DTYPE_BF16: {
    uint32_t bits = __float_as_uint(static_cast<float>(value));
    if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN stays a quiet NaN
      bits |= 0x00400000u;
    else
      bits += 0x7fffu + ((bits >> 16) & 1u);
    static_cast<uint16_t *>(data)[i] = static_cast<uint16_t>(bits >> 16);
    return;
  }
  default:
    static_cast<float *>(data)[i] = static_cast<float>(value);
    return;
  }
}

/// Moves elements of one size without looking at them.
template <typename E>
__global__ void move_blocks_kernel(E *dst, const E *src, Blocks blocks,
                                   int64_t n) {
  LOOM_GRID_STRIDE(e, n) { dst[e] = src[blocks.source(e)]; }
}

/// Moves and converts `from` to `to` (two different types) as the CPU's
/// copyElements: i32 <-> i64 through int64 (exact), the rest through double.
__global__ void move_blocks_convert_kernel(void *dst, int32_t to,
                                           const void *src, int32_t from,
                                           Blocks blocks, int64_t n) {
  bool integers = (from == LOOM_DTYPE_I32 && to == LOOM_DTYPE_I64) ||
                  (from == LOOM_DTYPE_I64 && to == LOOM_DTYPE_I32);
  LOOM_GRID_STRIDE(e, n) {
    int64_t s = blocks.source(e);
    if (integers) {
      int64_t v = from == LOOM_DTYPE_I32 ? static_cast<const int32_t *>(src)[s]
                                         : static_cast<const int64_t *>(src)[s];
      if (to == LOOM_DTYPE_I32)
        static_cast<int32_t *>(dst)[e] = static_cast<int32_t>(v);
      else
        static_cast<int64_t *>(dst)[e] = v;
    } else {
      writeElement(dst, to, e, readElement(src, from, s));
    }
  }
}

/// `src`'s `blocks` into `dst` (of `to`) on the context's stream: one
/// cudaMemcpyAsync when nothing moves apart and the types agree, else a
/// kernel. `name` is the op's, for messages.
int32_t moveBlocks(const View &src, void *dst, loom_dtype to,
                   const Blocks &blocks, loom_cuda_context *context,
                   const char *name) {
  int64_t n = blocks.count();
  if (n == 0)
    return 0;
  int64_t toBytes = loom_dtype_bytes(to);
  cudaStream_t stream = context->stream;
  if (src.dtype == to && (blocks.a == 1 || blocks.b == 1)) {
    // [1, b, piece] or [a, 1, piece]: the taken blocks are one run.
    const char *from = static_cast<const char *>(src.data) +
                       blocks.first * blocks.piece * toBytes;
    cudaError_t status = cudaMemcpyAsync(dst, from, n * toBytes,
                                         cudaMemcpyDeviceToDevice, stream);
    if (status != cudaSuccess)
      return fail("loom_cuda_%s: %s", name, cudaGetErrorString(status));
    return 0;
  }
  unsigned grid = blocksFor(n);
  if (src.dtype != to) {
    move_blocks_convert_kernel<<<grid, kThreads, 0, stream>>>(
        dst, to, src.data, src.dtype, blocks, n);
    return checkLaunch(name);
  }
  switch (toBytes) {
  case 8:
    move_blocks_kernel<<<grid, kThreads, 0, stream>>>(
        static_cast<uint64_t *>(dst), static_cast<const uint64_t *>(src.data),
        blocks, n);
    break;
  case 4:
    move_blocks_kernel<<<grid, kThreads, 0, stream>>>(
        static_cast<uint32_t *>(dst), static_cast<const uint32_t *>(src.data),
        blocks, n);
    break;
  case 2:
    move_blocks_kernel<<<grid, kThreads, 0, stream>>>(
        static_cast<uint16_t *>(dst), static_cast<const uint16_t *>(src.data),
        blocks, n);
    break;
  default:
    return fail("loom_cuda_%s: elements of %lld bytes", name,
                static_cast<long long>(toBytes));
  }
  return checkLaunch(name);
}

/// Device memory from the stream's pool, given back on the same stream when
/// it goes out of scope: after the callback and the unpacking enqueued
/// with it, so that it is never reused while they may still read it.
class StreamBuffer {
public:
  explicit StreamBuffer(cudaStream_t stream) : stream(stream) {}
  StreamBuffer(const StreamBuffer &) = delete;
  StreamBuffer &operator=(const StreamBuffer &) = delete;
  ~StreamBuffer() {
    if (data)
      cudaFreeAsync(data, stream);
  }
  /// Allocates `elements` elements of `elementBytes`; fails naming `name`.
  int32_t allocate(const char *name, int64_t elements, int64_t elementBytes) {
    int64_t bytes = elements * elementBytes;
    cudaError_t status = cudaMallocAsync(
        &data, static_cast<size_t>(bytes > 0 ? bytes : 1), stream);
    if (status == cudaSuccess)
      return 0;
    data = nullptr;
    cudaGetLastError(); // not sticky: the next launch check must not see it
    return fail("%s: cannot allocate a %lld-element buffer (%lld bytes) on "
                "the stream: %s",
                name, static_cast<long long>(elements),
                static_cast<long long>(bytes), cudaGetErrorString(status));
  }
  void *data = nullptr;

private:
  cudaStream_t stream;
};

//===----------------------------------------------------------------------===//
// Checks (the CPU kernels' own)
//===----------------------------------------------------------------------===//

/// Fails unless the kernel has one operand and one result and `frame` has
/// a comm with the callback `present`.
int32_t checkCall(const char *name, const loom_call_frame *frame,
                  const KernelArgs &args, bool present) {
  if (args.numOperands() != 1 || args.numResults() != 1)
    return fail("%s: expected 1 operand and 1 result, got %lld and %lld", name,
                static_cast<long long>(args.numOperands()),
                static_cast<long long>(args.numResults()));
  if (!frame || !frame->comm || !present)
    return fail("%s: the call frame has no communication callback for it",
                name);
  return 0;
}

/// Fails unless dimension `axis` of `view` splits into `pieces` pieces.
int32_t checkSplit(const char *name, const View &view, int64_t axis,
                   int64_t pieces) {
  if (axis < 0 || axis >= view.rank || pieces <= 0 ||
      view.dims[axis] % pieces != 0)
    return fail("%s: cannot split dimension %lld of a rank-%lld operand into "
                "%lld pieces",
                name, static_cast<long long>(axis),
                static_cast<long long>(view.rank),
                static_cast<long long>(pieces));
  return 0;
}

/// Fails unless `result` has `expected`'s shape with dimension `axis`
/// multiplied (`multiply`) or divided by `scale`.
int32_t checkResultShape(const char *name, const View &result, View expected,
                         int64_t axis, int64_t scale, bool multiply) {
  if (multiply)
    expected.dims[axis] *= scale;
  else
    expected.dims[axis] /= scale;
  bool same = result.rank == expected.rank;
  for (int64_t d = 0; same && d < result.rank; ++d)
    same = result.dims[d] == expected.dims[d];
  if (!same)
    return fail("%s: the result's shape does not match the operand's", name);
  return 0;
}

/// Records that `name`'s callback returned `status`; returns it.
int32_t callbackFailed(const char *name, int64_t group, int32_t status) {
  fail("%s on group %lld: the communication callback returned %d", name,
       static_cast<long long>(group), status);
  return status;
}

/// `total` elements read as [outer, ...]: the elements per outer index.
int64_t perOuter(int64_t total, int64_t outer) {
  return outer > 0 ? total / outer : 0;
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" {

int32_t loom_cuda_all_reduce(const loom_call_frame *frame, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  auto reduction = static_cast<loom_reduction>(args.integer());
  const char *name = "all_reduce";
  if (int32_t status = checkCall(
          name, frame, args, frame && frame->comm && frame->comm->all_reduce))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  int64_t count = out.numElements();
  if (in.numElements() != count)
    return fail("all_reduce: the result's shape does not match the operand's");
  // The operand into the result (converted to its type), reduced in place.
  Blocks all;
  all.piece = count;
  if (int32_t status = moveBlocks(in, out.data, out.dtype, all, context, name))
    return status;
  const loom_comm *comm = frame->comm;
  if (int32_t status = comm->all_reduce(comm->ctx, static_cast<int32_t>(group),
                                        out.data, count, out.dtype, reduction))
    return callbackFailed(name, group, status);
  return 0;
}

int32_t loom_cuda_reduce_scatter(const loom_call_frame *frame,
                                 void *const *buffers, const int64_t *meta,
                                 loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  auto reduction = static_cast<loom_reduction>(args.integer());
  int64_t members = args.integer();
  int64_t axis = args.integer();
  const char *name = "reduce_scatter";
  if (int32_t status =
          checkCall(name, frame, args,
                    frame && frame->comm && frame->comm->reduce_scatter))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  if (int32_t status = checkSplit(name, in, axis, members))
    return status;
  if (int32_t status = checkResultShape(name, out, in, axis, members, false))
    return status;
  // Member block i holds piece i of the operand, in the result's type.
  int64_t outer = elementsBefore(in, axis);
  int64_t count = out.numElements();
  const void *send = in.data;
  StreamBuffer packed(context->stream);
  if (outer != 1 || in.dtype != out.dtype) {
    if (int32_t status =
            packed.allocate(name, count * members, out.elementBytes()))
      return status;
    if (int32_t status = moveBlocks(
            in, packed.data, out.dtype,
            swapLeading(outer, members, perOuter(count, outer)), context, name))
      return status;
    send = packed.data;
  }
  const loom_comm *comm = frame->comm;
  if (int32_t status =
          comm->reduce_scatter(comm->ctx, static_cast<int32_t>(group), send,
                               out.data, count, out.dtype, reduction))
    return callbackFailed(name, group, status);
  return 0;
}

int32_t loom_cuda_all_gather(const loom_call_frame *frame, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  int64_t members = args.integer();
  int64_t axis = args.integer();
  const char *name = "all_gather";
  if (int32_t status = checkCall(
          name, frame, args, frame && frame->comm && frame->comm->all_gather))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  if (axis < 0 || axis >= in.rank || members <= 0 || in.dtype != out.dtype)
    return fail("%s: gather axis %lld of a rank-%lld operand over %lld "
                "members (or element types that differ)",
                name, static_cast<long long>(axis),
                static_cast<long long>(in.rank),
                static_cast<long long>(members));
  if (int32_t status = checkResultShape(name, out, in, axis, members, true))
    return status;
  // The callback returns member blocks; the result interleaves them as
  // [outer, members, piece].
  int64_t outer = elementsBefore(in, axis);
  int64_t count = in.numElements();
  View received = out;
  StreamBuffer blocks(context->stream);
  if (outer != 1) {
    if (int32_t status =
            blocks.allocate(name, count * members, out.elementBytes()))
      return status;
    received.data = blocks.data;
  }
  const loom_comm *comm = frame->comm;
  if (int32_t status =
          comm->all_gather(comm->ctx, static_cast<int32_t>(group), in.data,
                           received.data, count, in.dtype))
    return callbackFailed(name, group, status);
  if (outer != 1)
    return moveBlocks(received, out.data, out.dtype,
                      swapLeading(members, outer, perOuter(count, outer)),
                      context, name);
  return 0;
}

int32_t loom_cuda_all_to_all(const loom_call_frame *frame, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  int64_t members = args.integer();
  int64_t splitAxis = args.integer();
  int64_t concatAxis = args.integer();
  const char *name = "all_to_all";
  if (int32_t status = checkCall(
          name, frame, args, frame && frame->comm && frame->comm->all_to_all))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  if (int32_t status = checkSplit(name, in, splitAxis, members))
    return status;
  if (concatAxis < 0 || concatAxis >= in.rank || in.dtype != out.dtype)
    return fail("%s: concat axis %lld of a rank-%lld operand (or element "
                "types that differ)",
                name, static_cast<long long>(concatAxis),
                static_cast<long long>(in.rank));
  // One piece: the operand split along split_axis; the result concatenates
  // the received pieces along concat_axis.
  View piece = in;
  piece.dims[splitAxis] /= members;
  if (int32_t status =
          checkResultShape(name, out, piece, concatAxis, members, true))
    return status;
  int64_t count = piece.numElements();
  int64_t sendOuter = elementsBefore(in, splitAxis);
  int64_t recvOuter = elementsBefore(piece, concatAxis);
  const void *send = in.data;
  StreamBuffer packed(context->stream), unpacked(context->stream);
  if (sendOuter != 1) {
    if (int32_t status =
            packed.allocate(name, count * members, in.elementBytes()))
      return status;
    if (int32_t status = moveBlocks(
            in, packed.data, in.dtype,
            swapLeading(sendOuter, members, perOuter(count, sendOuter)),
            context, name))
      return status;
    send = packed.data;
  }
  View received = out;
  if (recvOuter != 1) {
    if (int32_t status =
            unpacked.allocate(name, count * members, in.elementBytes()))
      return status;
    received.data = unpacked.data;
  }
  const loom_comm *comm = frame->comm;
  if (int32_t status = comm->all_to_all(comm->ctx, static_cast<int32_t>(group),
                                        send, received.data, count, in.dtype))
    return callbackFailed(name, group, status);
  if (recvOuter != 1)
    return moveBlocks(
        received, out.data, out.dtype,
        swapLeading(members, recvOuter, perOuter(count, recvOuter)), context,
        name);
  return 0;
}

/// This rank's piece of the operand, one strided copy; no communication.
int32_t loom_cuda_all_slice(const loom_call_frame *frame, void *const *buffers,
                            const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  args.integer(); // the group: all_slice does not communicate
  int64_t axis = args.integer();
  int64_t numAxes = 0, numSizes = 0;
  const int64_t *axes = args.array(numAxes);
  const int64_t *sizes = args.array(numSizes);
  const char *name = "all_slice";
  if (int32_t status =
          checkCall(name, frame, args,
                    frame && frame->comm && frame->comm->grid_coordinate))
    return status;
  if (numAxes != numSizes)
    return fail("%s: %lld grid axes but %lld sizes", name,
                static_cast<long long>(numAxes),
                static_cast<long long>(numSizes));
  // This rank's member index: the row-major index of its coordinates on
  // the listed axes.
  int64_t members = 1, index = 0;
  const loom_comm *comm = frame->comm;
  for (int64_t k = 0; k < numAxes; ++k) {
    int64_t coordinate =
        comm->grid_coordinate(comm->ctx, static_cast<int32_t>(axes[k]));
    if (coordinate < 0 || coordinate >= sizes[k])
      return fail("%s: coordinate %lld on grid axis %lld of size %lld", name,
                  static_cast<long long>(coordinate),
                  static_cast<long long>(axes[k]),
                  static_cast<long long>(sizes[k]));
    members *= sizes[k];
    index = index * sizes[k] + coordinate;
  }
  const View &in = args.in(0), &out = args.out(0);
  if (int32_t status = checkSplit(name, in, axis, members))
    return status;
  if (in.dtype != out.dtype)
    return fail("%s: the operand and result element types differ", name);
  if (int32_t status = checkResultShape(name, out, in, axis, members, false))
    return status;
  int64_t outer = elementsBefore(in, axis);
  Blocks mine;
  mine.a = outer;
  mine.b = members;
  mine.piece = perOuter(out.numElements(), outer);
  mine.first = index;
  return moveBlocks(in, out.data, out.dtype, mine, context, name);
}

} // extern "C"
