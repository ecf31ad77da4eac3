//===- Collectives.cpp - The shard collectives over loom_comm -------------===//
//
// The kernels of the upstream `shard` collectives, with the meaning the
// reference multi-rank interpreter gives them (include/loom/Interpreter/
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

#include <cstdlib>

namespace loom::cpu {
namespace {

/// The product of `view`'s dimensions before `axis`.
int64_t elementsBefore(const View &view, int64_t axis) {
  int64_t n = 1;
  for (int64_t d = 0; d < axis; ++d)
    n *= view.dims[d];
  return n;
}

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
  case LOOM_DTYPE_BF16: {
    float f = static_cast<float>(value);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
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

/// Fails unless the kernel has one operand and one result and `frame` has
/// a comm with the callback `present`.
int32_t checkCall(const char *name, const loom_call_frame *frame,
                  const KernelArgs &args, bool present) {
  if (args.numOperands() != 1 || args.numResults() != 1)
    return fail("%s: expected 1 operand and 1 result, got %lld and %lld", name,
                static_cast<long long>(args.numOperands()),
                static_cast<long long>(args.numResults()));
  if (!frame->comm || !present)
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

} // namespace
} // namespace loom::cpu

using namespace loom::cpu;

extern "C" int32_t loom_cpu_all_reduce(const loom_call_frame *frame,
                                       void *const *buffers,
                                       const int64_t *meta) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  auto reduction = static_cast<loom_reduction>(args.integer());
  if (int32_t status = checkCall("all_reduce", frame, args,
                                 frame->comm && frame->comm->all_reduce))
    return status;
  const View &in = args.in(0), &out = args.out(0);
  int64_t count = out.numElements();
  if (in.numElements() != count)
    return fail("all_reduce: the result's shape does not match the operand's");
  copyElements(in.data, in.dtype, out.data, out.dtype, 0, 0, count,
               in.elementBytes(), out.elementBytes());
  const loom_comm *comm = frame->comm;
  if (int32_t status = comm->all_reduce(comm->ctx, static_cast<int32_t>(group),
                                        out.data, count, out.dtype, reduction))
    return callbackFailed("all_reduce", group, status);
  return 0;
}

extern "C" int32_t loom_cpu_reduce_scatter(const loom_call_frame *frame,
                                           void *const *buffers,
                                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  auto reduction = static_cast<loom_reduction>(args.integer());
  int64_t members = args.integer();
  int64_t axis = args.integer();
  const char *name = "reduce_scatter";
  if (int32_t status = checkCall(name, frame, args,
                                 frame->comm && frame->comm->reduce_scatter))
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
  Scratch packed;
  if (outer != 1 || in.dtype != out.dtype) {
    if (!packed.allocate(count * members * out.elementBytes()))
      return fail("%s: out of memory for a %lld-element buffer", name,
                  static_cast<long long>(count * members));
    swapLeading(in, packed.data, out.dtype, outer, members, count / outer);
    send = packed.data;
  }
  const loom_comm *comm = frame->comm;
  if (int32_t status =
          comm->reduce_scatter(comm->ctx, static_cast<int32_t>(group), send,
                               out.data, count, out.dtype, reduction))
    return callbackFailed(name, group, status);
  return 0;
}

extern "C" int32_t loom_cpu_all_gather(const loom_call_frame *frame,
                                       void *const *buffers,
                                       const int64_t *meta) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  int64_t members = args.integer();
  int64_t axis = args.integer();
  const char *name = "all_gather";
  if (int32_t status =
          checkCall(name, frame, args, frame->comm && frame->comm->all_gather))
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
  Scratch blocks;
  if (outer != 1) {
    if (!blocks.allocate(count * members * out.elementBytes()))
      return fail("%s: out of memory for a %lld-element buffer", name,
                  static_cast<long long>(count * members));
    received.data = blocks.data;
  }
  const loom_comm *comm = frame->comm;
  if (int32_t status =
          comm->all_gather(comm->ctx, static_cast<int32_t>(group), in.data,
                           received.data, count, in.dtype))
    return callbackFailed(name, group, status);
  if (outer != 1)
    swapLeading(received, out.data, out.dtype, members, outer, count / outer);
  return 0;
}

extern "C" int32_t loom_cpu_all_to_all(const loom_call_frame *frame,
                                       void *const *buffers,
                                       const int64_t *meta) {
  KernelArgs args(buffers, meta);
  int64_t group = args.integer();
  int64_t members = args.integer();
  int64_t splitAxis = args.integer();
  int64_t concatAxis = args.integer();
  const char *name = "all_to_all";
  if (int32_t status =
          checkCall(name, frame, args, frame->comm && frame->comm->all_to_all))
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
  int64_t elementBytes = in.elementBytes();
  int64_t sendOuter = elementsBefore(in, splitAxis);
  int64_t recvOuter = elementsBefore(piece, concatAxis);
  Scratch scratch;
  if ((sendOuter != 1 || recvOuter != 1) &&
      !scratch.allocate(2 * count * members * elementBytes))
    return fail("%s: out of memory for a %lld-element buffer", name,
                static_cast<long long>(2 * count * members));
  const void *send = in.data;
  if (sendOuter != 1) {
    swapLeading(in, scratch.data, in.dtype, sendOuter, members,
                count / sendOuter);
    send = scratch.data;
  }
  View received = out;
  if (recvOuter != 1)
    received.data =
        static_cast<char *>(scratch.data) + count * members * elementBytes;
  const loom_comm *comm = frame->comm;
  if (int32_t status = comm->all_to_all(comm->ctx, static_cast<int32_t>(group),
                                        send, received.data, count, in.dtype))
    return callbackFailed(name, group, status);
  if (recvOuter != 1)
    swapLeading(received, out.data, out.dtype, members, recvOuter,
                count / recvOuter);
  return 0;
}

extern "C" int32_t loom_cpu_all_slice(const loom_call_frame *frame,
                                      void *const *buffers,
                                      const int64_t *meta) {
  KernelArgs args(buffers, meta);
  args.integer(); // the group: all_slice does not communicate
  int64_t axis = args.integer();
  int64_t numAxes = 0, numSizes = 0;
  const int64_t *axes = args.array(numAxes);
  const int64_t *sizes = args.array(numSizes);
  const char *name = "all_slice";
  if (int32_t status = checkCall(name, frame, args,
                                 frame->comm && frame->comm->grid_coordinate))
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
  int64_t piece = out.numElements() / outer;
  int64_t bytes = in.elementBytes();
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char *>(out.data) + o * piece * bytes,
                static_cast<const char *>(in.data) +
                    (o * members + index) * piece * bytes,
                piece * bytes);
  return 0;
}
