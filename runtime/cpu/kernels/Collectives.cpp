//===- Collectives.cpp - The shard collectives over loom_comm -------------===//
//
// The kernels of the upstream `shard` collectives, with the meaning the
// reference multi-rank interpreter gives them (the compiler's
// MultiRank.h): all_gather concatenates the members' inputs along
// gather_axis in member order, reduce_scatter gives member i piece i of the
// reduction along scatter_axis, all_to_all gives member i the concatenation
// along concat_axis of piece i (along split_axis) of every member's input,
// and all_slice keeps this rank's piece without communicating.
//
// loom_comm's callbacks move contiguous blocks in member order
// (loom_program.h). Around the moved dimension a tensor reads as
// [outer, members, piece]: the kernels swap the two leading dimensions into
// a scratch buffer ([members, outer, piece], member blocks contiguous)
// before sending, and back after receiving. When outer is 1 the tensor is
// already in blocks and the callback works on the kernel's buffers.
//
//===----------------------------------------------------------------------===//

#include "KernelArgs.h"

#include "CollectiveMeta.h"

#include <cstdlib>

namespace loom::cpu {
namespace {

/// Element `i` of `data` (of `dtype`) as a double.
double readElement(const void *data, loom_dtype dtype, int64_t i) {
  switch (dtype) {
  case LOOM_DTYPE_F64:
    return static_cast<const double *>(data)[i];
  case LOOM_DTYPE_I32:
    return static_cast<const int32_t *>(data)[i];
  case LOOM_DTYPE_I64:
    return static_cast<double>(static_cast<const int64_t *>(data)[i]);
  case LOOM_DTYPE_BF16: {
    uint32_t bits =
        static_cast<uint32_t>(static_cast<const uint16_t *>(data)[i]) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  default:
    return static_cast<const float *>(data)[i];
  }
}

/// Stores `value` as element `i` of `data` (of `dtype`); bf16 rounds to
/// nearest even.
void writeElement(void *data, loom_dtype dtype, int64_t i, double value) {
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
    static_cast<uint16_t *>(data)[i] = toBf16Bits(static_cast<float>(value));
    return;
  default:
    static_cast<float *>(data)[i] = static_cast<float>(value);
    return;
  }
}

/// Copies `count` elements from `src` (of `from`) to `dst` (of `to`),
/// converting when the types differ (as `shard` reductions convert their
/// input to the result's element type first).
void copyElements(const void *src, loom_dtype from, void *dst, loom_dtype to,
                  int64_t srcOffset, int64_t dstOffset, int64_t count,
                  int64_t fromBytes, int64_t toBytes) {
  if (from == to) {
    std::memcpy(static_cast<char *>(dst) + dstOffset * toBytes,
                static_cast<const char *>(src) + srcOffset * fromBytes,
                count * toBytes);
    return;
  }
  if ((from == LOOM_DTYPE_I64 && to == LOOM_DTYPE_I32) ||
      (from == LOOM_DTYPE_I32 && to == LOOM_DTYPE_I64)) {
    // Through int64, not double: exact for every 64-bit value.
    for (int64_t e = 0; e < count; ++e) {
      int64_t v = from == LOOM_DTYPE_I32
                      ? static_cast<const int32_t *>(src)[srcOffset + e]
                      : static_cast<const int64_t *>(src)[srcOffset + e];
      if (to == LOOM_DTYPE_I32)
        static_cast<int32_t *>(dst)[dstOffset + e] = static_cast<int32_t>(v);
      else
        static_cast<int64_t *>(dst)[dstOffset + e] = v;
    }
    return;
  }
  for (int64_t e = 0; e < count; ++e)
    writeElement(dst, to, dstOffset + e, readElement(src, from, srcOffset + e));
}

/// `src` read as [a, b, piece] (of `from`) written to `dst` as [b, a, piece]
/// (of `to`).
void swapLeading(const View &src, void *dst, loom_dtype to, int64_t a,
                 int64_t b, int64_t piece) {
  View target;
  target.dtype = to;
  int64_t fromBytes = src.elementBytes(), toBytes = target.elementBytes();
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      copyElements(src.data, src.dtype, dst, to, (i * b + j) * piece,
                   (j * a + i) * piece, piece, fromBytes, toBytes);
}

/// A 64-byte aligned buffer, freed when it goes out of scope.
class Scratch {
public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { std::free(data); }
  /// Allocates `bytes`; false when memory is exhausted.
  bool allocate(int64_t bytes) {
    size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
    data = std::aligned_alloc(64, rounded ? rounded : 64);
    return data != nullptr;
  }
  void *data = nullptr;
};

using kernels::Collective;

/// Decoding and communication, failures recorded by fail().
using Reported = kernels::ReportedCollective<fail>;

} // namespace
} // namespace loom::cpu

using namespace loom::cpu;

extern "C" int32_t loom_cpu_all_reduce(const loom_call_frame *frame,
                                       void *const *buffers,
                                       const int64_t *meta) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllReduce, args, frame, op))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  copyElements(in.data, in.dtype, out.data, out.dtype, 0, 0, op.count,
               in.elementBytes(), out.elementBytes());
  if (int32_t status =
          Reported::communicate(frame, op, nullptr, out.data, out.dtype))
    return status;
  return 0;
}

extern "C" int32_t loom_cpu_reduce_scatter(const loom_call_frame *frame,
                                           void *const *buffers,
                                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readReduceScatter, args, frame, op))
    return status;
  // Member block i holds piece i of the operand, in the result's type.
  const View &in = args.in(0), &out = args.out(0);
  const void *send = in.data;
  Scratch packed;
  if (op.outer != 1 || in.dtype != out.dtype) {
    if (!packed.allocate(op.count * op.members * out.elementBytes()))
      return fail("%s: out of memory for a %lld-element buffer", op.name,
                  static_cast<long long>(op.count * op.members));
    swapLeading(in, packed.data, out.dtype, op.outer, op.members,
                op.piece(op.outer));
    send = packed.data;
  }
  if (int32_t status =
          Reported::communicate(frame, op, send, out.data, out.dtype))
    return status;
  return 0;
}

extern "C" int32_t loom_cpu_all_gather(const loom_call_frame *frame,
                                       void *const *buffers,
                                       const int64_t *meta) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllGather, args, frame, op))
    return status;
  // The callback returns member blocks; the result interleaves them as
  // [outer, members, piece].
  const View &in = args.in(0), &out = args.out(0);
  View received = out;
  Scratch blocks;
  if (op.outer != 1) {
    if (!blocks.allocate(op.count * op.members * out.elementBytes()))
      return fail("%s: out of memory for a %lld-element buffer", op.name,
                  static_cast<long long>(op.count * op.members));
    received.data = blocks.data;
  }
  if (int32_t status =
          Reported::communicate(frame, op, in.data, received.data, in.dtype))
    return status;
  if (op.outer != 1)
    swapLeading(received, out.data, out.dtype, op.members, op.outer,
                op.piece(op.outer));
  return 0;
}

extern "C" int32_t loom_cpu_all_to_all(const loom_call_frame *frame,
                                       void *const *buffers,
                                       const int64_t *meta) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllToAll, args, frame, op))
    return status;
  // Piece i (along split_axis) goes to member i; the received pieces
  // concatenate along concat_axis.
  const View &in = args.in(0), &out = args.out(0);
  int64_t blockElements = op.count * op.members;
  int64_t elementBytes = in.elementBytes();
  Scratch scratch;
  if ((op.outer != 1 || op.recvOuter != 1) &&
      !scratch.allocate(2 * blockElements * elementBytes))
    return fail("%s: out of memory for a %lld-element buffer", op.name,
                static_cast<long long>(2 * blockElements));
  const void *send = in.data;
  if (op.outer != 1) {
    swapLeading(in, scratch.data, in.dtype, op.outer, op.members,
                op.piece(op.outer));
    send = scratch.data;
  }
  View received = out;
  if (op.recvOuter != 1)
    received.data =
        static_cast<char *>(scratch.data) + blockElements * elementBytes;
  if (int32_t status =
          Reported::communicate(frame, op, send, received.data, in.dtype))
    return status;
  if (op.recvOuter != 1)
    swapLeading(received, out.data, out.dtype, op.members, op.recvOuter,
                op.piece(op.recvOuter));
  return 0;
}

extern "C" int32_t loom_cpu_all_slice(const loom_call_frame *frame,
                                      void *const *buffers,
                                      const int64_t *meta) {
  KernelArgs args(buffers, meta);
  Collective op;
  if (int32_t status =
          Reported::read(loom::kernels::readAllSlice, args, frame, op))
    return status;
  // Outer block o of the result is block (o, index) of the operand.
  const View &in = args.in(0), &out = args.out(0);
  int64_t piece = op.piece(op.outer);
  int64_t bytes = in.elementBytes();
  for (int64_t o = 0; o < op.outer; ++o)
    std::memcpy(static_cast<char *>(out.data) + o * piece * bytes,
                static_cast<const char *>(in.data) +
                    (o * op.members + op.index) * piece * bytes,
                piece * bytes);
  return 0;
}

extern "C" int32_t loom_cpu_collective_wait(const loom_call_frame *frame,
                                            void *const *buffers,
                                            const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return Reported::wait(args, frame);
}
