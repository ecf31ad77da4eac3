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
// A split collective (a slot >= 0) only starts its transfer: the shared
// readers accept a slot only where nothing is packed or unpacked around
// the callback (checkSplitBlocks), and all_reduce's copy of its operand
// into its result is enqueued before the start, so the transfer sees it.
// collective_wait ends the transfer; work enqueued after it sees the
// result.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include "Bf16.h"
#include "CollectiveMeta.h"

namespace loom::cuda {
namespace {

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
  case LOOM_DTYPE_BF16:
    static_cast<uint16_t *>(data)[i] =
        rt::toBf16Bits(static_cast<float>(value));
    return;
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
// Decoding and checks (CollectiveMeta.h, shared with the CPU kernels)
//===----------------------------------------------------------------------===//

using kernels::Collective;

/// Decoding and communication, failures recorded by fail().
using Reported = kernels::ReportedCollective<fail>;

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" {

int32_t loom_cuda_all_reduce(const loom_call_frame *frame, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllReduce, args, frame, op))
    return status;
  // The operand into the result (converted to its type), reduced in place.
  const View &in = args.in(0), &out = args.out(0);
  Blocks all;
  all.piece = op.count;
  if (int32_t status =
          moveBlocks(in, out.data, out.dtype, all, context, op.name))
    return status;
  if (int32_t status =
          Reported::communicate(frame, op, nullptr, out.data, out.dtype))
    return status;
  return 0;
}

int32_t loom_cuda_reduce_scatter(const loom_call_frame *frame,
                                 void *const *buffers, const int64_t *meta,
                                 loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readReduceScatter, args, frame, op))
    return status;
  // Member block i holds piece i of the operand, in the result's type.
  const View &in = args.in(0), &out = args.out(0);
  const void *send = in.data;
  StreamBuffer packed(context->stream);
  if (op.outer != 1 || in.dtype != out.dtype) {
    if (int32_t status =
            packed.allocate(op.name, op.count * op.members, out.elementBytes()))
      return status;
    if (int32_t status =
            moveBlocks(in, packed.data, out.dtype,
                       swapLeading(op.outer, op.members, op.piece(op.outer)),
                       context, op.name))
      return status;
    send = packed.data;
  }
  if (int32_t status =
          Reported::communicate(frame, op, send, out.data, out.dtype))
    return status;
  return 0;
}

int32_t loom_cuda_all_gather(const loom_call_frame *frame, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllGather, args, frame, op))
    return status;
  // The callback returns member blocks; the result interleaves them as
  // [outer, members, piece].
  const View &in = args.in(0), &out = args.out(0);
  View received = out;
  StreamBuffer blocks(context->stream);
  if (op.outer != 1) {
    if (int32_t status =
            blocks.allocate(op.name, op.count * op.members, out.elementBytes()))
      return status;
    received.data = blocks.data;
  }
  if (int32_t status =
          Reported::communicate(frame, op, in.data, received.data, in.dtype))
    return status;
  if (op.outer != 1)
    return moveBlocks(received, out.data, out.dtype,
                      swapLeading(op.members, op.outer, op.piece(op.outer)),
                      context, op.name);
  return 0;
}

int32_t loom_cuda_all_to_all(const loom_call_frame *frame, void *const *buffers,
                             const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllToAll, args, frame, op))
    return status;
  // Piece i (along split_axis) goes to member i; the received pieces
  // concatenate along concat_axis.
  const View &in = args.in(0), &out = args.out(0);
  const void *send = in.data;
  StreamBuffer packed(context->stream), unpacked(context->stream);
  if (op.outer != 1) {
    if (int32_t status =
            packed.allocate(op.name, op.count * op.members, in.elementBytes()))
      return status;
    if (int32_t status =
            moveBlocks(in, packed.data, in.dtype,
                       swapLeading(op.outer, op.members, op.piece(op.outer)),
                       context, op.name))
      return status;
    send = packed.data;
  }
  View received = out;
  if (op.recvOuter != 1) {
    if (int32_t status = unpacked.allocate(op.name, op.count * op.members,
                                           in.elementBytes()))
      return status;
    received.data = unpacked.data;
  }
  if (int32_t status =
          Reported::communicate(frame, op, send, received.data, in.dtype))
    return status;
  if (op.recvOuter != 1)
    return moveBlocks(
        received, out.data, out.dtype,
        swapLeading(op.members, op.recvOuter, op.piece(op.recvOuter)), context,
        op.name);
  return 0;
}

/// This rank's piece of the operand, one strided copy; no communication.
int32_t loom_cuda_all_slice(const loom_call_frame *frame, void *const *buffers,
                            const int64_t *meta, loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllSlice, args, frame, op))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  Blocks mine;
  mine.a = op.outer;
  mine.b = op.members;
  mine.piece = op.piece(op.outer);
  mine.first = op.index;
  return moveBlocks(in, out.data, out.dtype, mine, context, op.name);
}

/// Waits for the transfer a split collective started under the call's slot
/// (loom_comm's wait): its tensors are only listed, never touched.
int32_t loom_cuda_collective_wait(const loom_call_frame *frame,
                                  void *const *buffers, const int64_t *meta,
                                  loom_cuda_context *) {
  KernelArgs args(buffers, meta);
  return Reported::wait(args, frame);
}

} // extern "C"
