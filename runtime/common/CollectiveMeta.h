//===- CollectiveMeta.h - Decoding a collective's meta ----------*- C++ -*-===//
//
// The CPU and CUDA kernels of the `shard` collectives (all_reduce,
// reduce_scatter, all_gather, all_to_all, all_slice) take the same meta and
// make the same checks with the same messages; only the data movement
// differs (host loops there, stream-ordered kernels here). This header
// decodes an op's attributes, checks the call, the frame's comm, the split
// and the result's shape, and says how the tensors read as [outer, members,
// piece] around the moved dimension.
//
// Header-only for the reason KernelMeta.h is: the two libraries are
// separate shared objects, each with its own fail() and last error, so a
// check that fails writes its message into the caller's buffer and returns
// false, and the caller reports it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_COLLECTIVEMETA_H
#define LOOM_RUNTIME_COMMON_COLLECTIVEMETA_H

#include "KernelAttrs.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace loom::kernels {

/// A collective call, decoded and checked. Around the moved dimension a
/// tensor reads as [outer, members, piece]; loom_comm's callbacks move
/// `count`-element blocks in member order.
struct Collective {
  enum Kind { AllReduce, ReduceScatter, AllGather, AllToAll, AllSlice };
  Kind kind = AllReduce;
  const char *name = ""; ///< the op, as messages name it
  int64_t group = 0;
  loom_reduction reduction = LOOM_REDUCE_SUM; ///< all_reduce, reduce_scatter
  int64_t members = 1;
  /// Elements before the moved dimension: of the operand (reduce_scatter,
  /// all_gather, all_slice; all_to_all's split_axis) ...
  int64_t outer = 1;
  /// ... and, for all_to_all, of one received piece before concat_axis.
  int64_t recvOuter = 1;
  /// Elements of one member block: the result's (all_reduce,
  /// reduce_scatter, all_slice), the operand's (all_gather) or one piece's
  /// (all_to_all).
  int64_t count = 0;
  int64_t index = 0; ///< all_slice: this rank's member
  /// all_reduce, reduce_scatter, all_gather: the slot a split collective
  /// starts its transfer under (loom_comm's *_start; collective_wait ends
  /// it), or -1 when the call communicates and waits.
  int64_t slot = -1;

  /// The elements of a block per index of `outerCount` (0 when it is 0).
  int64_t piece(int64_t outerCount) const {
    return outerCount > 0 ? count / outerCount : 0;
  }
};

namespace collective {

using kernels::failWith;

/// The product of `view`'s dimensions before `axis`.
inline int64_t elementsBefore(const View &view, int64_t axis) {
  int64_t n = 1;
  for (int64_t d = 0; d < axis; ++d)
    n *= view.dims[d];
  return n;
}

/// Checks that the kernel has one operand and one result and `frame` a comm
/// with the op's callback (`present`).
inline bool checkCall(const char *name, const loom_call_frame *frame,
                      const KernelArgs &args, bool present, char *error,
                      size_t errorSize) {
  if (args.numOperands() != 1 || args.numResults() != 1)
    return failWith(error, errorSize,
                    "%s: expected 1 operand and 1 result, got %lld and %lld",
                    name, static_cast<long long>(args.numOperands()),
                    static_cast<long long>(args.numResults()));
  if (!frame || !frame->comm || !present)
    return failWith(error, errorSize,
                    "%s: the call frame has no communication callback for it",
                    name);
  return true;
}

/// Whether `frame` has the callback a collective calls: `blocking`, or
/// with a slot `start` and loom_comm's wait.
template <typename Blocking, typename Start>
bool hasCallback(const loom_call_frame *frame, int64_t slot,
                 Blocking loom_comm::*blocking, Start loom_comm::*start) {
  if (!frame || !frame->comm)
    return false;
  const loom_comm &comm = *frame->comm;
  return slot < 0 ? comm.*blocking != nullptr
                  : comm.*start != nullptr && comm.wait != nullptr;
}

/// Checks that a split collective (a slot) works on contiguous member
/// blocks of one element type, as the lowering splits only those: the
/// transfer runs on the kernel's buffers and nothing is left to unpack.
inline bool checkSplitBlocks(const Collective &op, const View &in,
                             const View &out, char *error, size_t errorSize) {
  if (op.slot < 0 || (op.outer == 1 && in.dtype == out.dtype))
    return true;
  return failWith(error, errorSize,
                  "%s: a split collective (slot %lld) needs an operand of "
                  "contiguous member blocks of the result's element type",
                  op.name, static_cast<long long>(op.slot));
}

/// Checks that dimension `axis` of `view` splits into `pieces` pieces.
inline bool checkSplit(const char *name, const View &view, int64_t axis,
                       int64_t pieces, char *error, size_t errorSize) {
  if (axis < 0 || axis >= view.rank || pieces <= 0 ||
      view.dims[axis] % pieces != 0)
    return failWith(error, errorSize,
                    "%s: cannot split dimension %lld of a rank-%lld operand "
                    "into %lld pieces",
                    name, static_cast<long long>(axis),
                    static_cast<long long>(view.rank),
                    static_cast<long long>(pieces));
  return true;
}

/// Checks that `result` has `expected`'s shape with dimension `axis`
/// multiplied (`multiply`) or divided by `scale`.
inline bool checkResultShape(const char *name, const View &result,
                             View expected, int64_t axis, int64_t scale,
                             bool multiply, char *error, size_t errorSize) {
  if (multiply)
    expected.dims[axis] *= scale;
  else
    expected.dims[axis] /= scale;
  bool same = result.rank == expected.rank;
  for (int64_t d = 0; same && d < result.rank; ++d)
    same = result.dims[d] == expected.dims[d];
  if (!same)
    return failWith(error, errorSize,
                    "%s: the result's shape does not match the operand's",
                    name);
  return true;
}

} // namespace collective

/// Each reader below decodes its op's attributes (in the order
/// loom_cpu_kernels.h lists them) into `op` and checks the call; false with
/// a message in `error` (`errorSize` bytes) when a check fails.
using CollectiveReader = bool (*)(KernelArgs &args,
                                  const loom_call_frame *frame, Collective &op,
                                  char *error, size_t errorSize);

/// all_reduce: group, reduction. The operand and result hold as many
/// elements (of possibly different types).
inline bool readAllReduce(KernelArgs &args, const loom_call_frame *frame,
                          Collective &op, char *error, size_t errorSize) {
  op.kind = Collective::AllReduce;
  op.name = "all_reduce";
  auto attrs = readAttrs<Kernel::all_reduce>(args);
  op.group = attrs.group;
  op.reduction = static_cast<loom_reduction>(attrs.reduction);
  op.slot = attrs.slot;
  if (!collective::checkCall(
          op.name, frame, args,
          collective::hasCallback(frame, op.slot, &loom_comm::all_reduce,
                                  &loom_comm::all_reduce_start),
          error, errorSize))
    return false;
  op.count = args.out(0).numElements();
  if (args.in(0).numElements() != op.count)
    return collective::failWith(
        error, errorSize, "%s: the result's shape does not match the operand's",
        op.name);
  return true;
}

/// reduce_scatter: group, reduction, members, scatter_axis. The result is
/// the operand's piece along scatter_axis (of possibly another type).
inline bool readReduceScatter(KernelArgs &args, const loom_call_frame *frame,
                              Collective &op, char *error, size_t errorSize) {
  op.kind = Collective::ReduceScatter;
  op.name = "reduce_scatter";
  auto attrs = readAttrs<Kernel::reduce_scatter>(args);
  op.group = attrs.group;
  op.reduction = static_cast<loom_reduction>(attrs.reduction);
  op.members = attrs.members;
  int64_t axis = attrs.scatter_axis;
  op.slot = attrs.slot;
  if (!collective::checkCall(
          op.name, frame, args,
          collective::hasCallback(frame, op.slot, &loom_comm::reduce_scatter,
                                  &loom_comm::reduce_scatter_start),
          error, errorSize))
    return false;
  const View &in = args.in(0), &out = args.out(0);
  if (!collective::checkSplit(op.name, in, axis, op.members, error,
                              errorSize) ||
      !collective::checkResultShape(op.name, out, in, axis, op.members, false,
                                    error, errorSize))
    return false;
  op.outer = collective::elementsBefore(in, axis);
  op.count = out.numElements();
  return collective::checkSplitBlocks(op, in, out, error, errorSize);
}

/// all_gather: group, members, gather_axis. The result is the members'
/// operands concatenated along gather_axis, of the operand's type.
inline bool readAllGather(KernelArgs &args, const loom_call_frame *frame,
                          Collective &op, char *error, size_t errorSize) {
  op.kind = Collective::AllGather;
  op.name = "all_gather";
  auto attrs = readAttrs<Kernel::all_gather>(args);
  op.group = attrs.group;
  op.members = attrs.members;
  int64_t axis = attrs.gather_axis;
  op.slot = attrs.slot;
  if (!collective::checkCall(
          op.name, frame, args,
          collective::hasCallback(frame, op.slot, &loom_comm::all_gather,
                                  &loom_comm::all_gather_start),
          error, errorSize))
    return false;
  const View &in = args.in(0), &out = args.out(0);
  if (axis < 0 || axis >= in.rank || op.members <= 0 || in.dtype != out.dtype)
    return collective::failWith(
        error, errorSize,
        "%s: gather axis %lld of a rank-%lld operand over %lld members (or "
        "element types that differ)",
        op.name, static_cast<long long>(axis), static_cast<long long>(in.rank),
        static_cast<long long>(op.members));
  if (!collective::checkResultShape(op.name, out, in, axis, op.members, true,
                                    error, errorSize))
    return false;
  op.outer = collective::elementsBefore(in, axis);
  op.count = in.numElements();
  return collective::checkSplitBlocks(op, in, out, error, errorSize);
}

/// all_to_all: group, members, split_axis, concat_axis. One piece is the
/// operand split along split_axis; the result concatenates the received
/// pieces along concat_axis, of the operand's type.
inline bool readAllToAll(KernelArgs &args, const loom_call_frame *frame,
                         Collective &op, char *error, size_t errorSize) {
  op.kind = Collective::AllToAll;
  op.name = "all_to_all";
  auto attrs = readAttrs<Kernel::all_to_all>(args);
  op.group = attrs.group;
  op.members = attrs.members;
  int64_t splitAxis = attrs.split_axis;
  int64_t concatAxis = attrs.concat_axis;
  if (!collective::checkCall(op.name, frame, args,
                             frame && frame->comm && frame->comm->all_to_all,
                             error, errorSize))
    return false;
  const View &in = args.in(0), &out = args.out(0);
  if (!collective::checkSplit(op.name, in, splitAxis, op.members, error,
                              errorSize))
    return false;
  if (concatAxis < 0 || concatAxis >= in.rank || in.dtype != out.dtype)
    return collective::failWith(
        error, errorSize,
        "%s: concat axis %lld of a rank-%lld operand (or element types that "
        "differ)",
        op.name, static_cast<long long>(concatAxis),
        static_cast<long long>(in.rank));
  View piece = in;
  piece.dims[splitAxis] /= op.members;
  if (!collective::checkResultShape(op.name, out, piece, concatAxis, op.members,
                                    true, error, errorSize))
    return false;
  op.outer = collective::elementsBefore(in, splitAxis);
  op.recvOuter = collective::elementsBefore(piece, concatAxis);
  op.count = piece.numElements();
  return true;
}

/// all_slice: group (unused: it does not communicate), slice_axis, grid
/// axes, their sizes. The members are the ranks along the listed axes; this
/// rank's `index` is the row-major index of its coordinates on them, and
/// the result its piece of the operand along slice_axis.
inline bool readAllSlice(KernelArgs &args, const loom_call_frame *frame,
                         Collective &op, char *error, size_t errorSize) {
  op.kind = Collective::AllSlice;
  op.name = "all_slice";
  auto attrs = readAttrs<Kernel::all_slice>(args);
  op.group = attrs.group;
  int64_t axis = attrs.slice_axis;
  int64_t numAxes = attrs.axes.size, numSizes = attrs.sizes.size;
  const int64_t *axes = attrs.axes.data, *sizes = attrs.sizes.data;
  if (!collective::checkCall(op.name, frame, args,
                             frame && frame->comm &&
                                 frame->comm->grid_coordinate,
                             error, errorSize))
    return false;
  if (numAxes != numSizes)
    return collective::failWith(
        error, errorSize, "%s: %lld grid axes but %lld sizes", op.name,
        static_cast<long long>(numAxes), static_cast<long long>(numSizes));
  const loom_comm *comm = frame->comm;
  op.members = 1;
  op.index = 0;
  for (int64_t k = 0; k < numAxes; ++k) {
    int64_t coordinate =
        comm->grid_coordinate(comm->ctx, static_cast<int32_t>(axes[k]));
    if (coordinate < 0 || coordinate >= sizes[k])
      return collective::failWith(
          error, errorSize,
          "%s: coordinate %lld on grid axis %lld of size %lld", op.name,
          static_cast<long long>(coordinate), static_cast<long long>(axes[k]),
          static_cast<long long>(sizes[k]));
    op.members *= sizes[k];
    op.index = op.index * sizes[k] + coordinate;
  }
  const View &in = args.in(0), &out = args.out(0);
  if (!collective::checkSplit(op.name, in, axis, op.members, error, errorSize))
    return false;
  if (in.dtype != out.dtype)
    return collective::failWith(
        error, errorSize, "%s: the operand and result element types differ",
        op.name);
  if (!collective::checkResultShape(op.name, out, in, axis, op.members, false,
                                    error, errorSize))
    return false;
  op.outer = collective::elementsBefore(in, axis);
  op.count = out.numElements();
  return true;
}

/// Calls `op`'s callback on `frame`'s comm: `op.count`-element blocks of
/// `dtype` from `send` to `recv` (all_reduce reduces `recv` in place;
/// all_slice does not communicate). Returns the callback's status, with a
/// message in `error` (`errorSize` bytes) when it is not 0.
inline int32_t communicate(const loom_call_frame *frame, const Collective &op,
                           const void *send, void *recv, loom_dtype dtype,
                           char *error, size_t errorSize) {
  const loom_comm *comm = frame->comm;
  auto group = static_cast<int32_t>(op.group);
  auto slot = static_cast<int32_t>(op.slot);
  bool split = op.slot >= 0;
  int32_t status = 0;
  switch (op.kind) {
  case Collective::AllReduce:
    status = split ? comm->all_reduce_start(comm->ctx, slot, group, recv,
                                            op.count, dtype, op.reduction)
                   : comm->all_reduce(comm->ctx, group, recv, op.count, dtype,
                                      op.reduction);
    break;
  case Collective::ReduceScatter:
    status =
        split ? comm->reduce_scatter_start(comm->ctx, slot, group, send, recv,
                                           op.count, dtype, op.reduction)
              : comm->reduce_scatter(comm->ctx, group, send, recv, op.count,
                                     dtype, op.reduction);
    break;
  case Collective::AllGather:
    status =
        split ? comm->all_gather_start(comm->ctx, slot, group, send, recv,
                                       op.count, dtype)
              : comm->all_gather(comm->ctx, group, send, recv, op.count, dtype);
    break;
  case Collective::AllToAll:
    status = comm->all_to_all(comm->ctx, group, send, recv, op.count, dtype);
    break;
  case Collective::AllSlice:
    break;
  }
  if (status != 0)
    std::snprintf(error, errorSize,
                  "%s on group %lld: the communication callback returned %d",
                  op.name, static_cast<long long>(op.group), status);
  return status;
}

/// collective_wait: its tensors (the transfer's buffers, which it does not
/// touch), then the slot. Waits for the transfer started under the slot:
/// 0, or the callback's status with a message in `error`.
inline int32_t waitForTransfer(KernelArgs &args, const loom_call_frame *frame,
                               char *error, size_t errorSize) {
  int64_t slot = readAttrs<Kernel::collective_wait>(args).slot;
  if (!frame || !frame->comm || !frame->comm->wait) {
    collective::failWith(
        error, errorSize,
        "collective_wait: the call frame has no communication callback for it");
    return 1;
  }
  if (slot < 0) {
    collective::failWith(error, errorSize, "collective_wait: slot %lld",
                         static_cast<long long>(slot));
    return 1;
  }
  const loom_comm *comm = frame->comm;
  int32_t status = comm->wait(comm->ctx, static_cast<int32_t>(slot));
  if (status != 0)
    std::snprintf(error, errorSize,
                  "collective_wait for slot %lld: the communication callback "
                  "returned %d",
                  static_cast<long long>(slot), status);
  return status;
}

/// A library's fail(): records a printf-style message as the library's
/// last error and returns 1.
using FailFn = int32_t (*)(const char *format, ...);

/// A collective's decoding and communication with failures recorded by
/// the library's `Fail`, as its kernels report them: each returns 0, or a
/// non-zero status after `Fail` recorded the message.
template <FailFn Fail> struct ReportedCollective {
  /// Decodes and checks the meta with `reader`: 0 or 1.
  static int32_t read(CollectiveReader reader, KernelArgs &args,
                      const loom_call_frame *frame, Collective &op) {
    char error[256];
    return reader(args, frame, op, error, sizeof error) ? 0 : Fail("%s", error);
  }
  /// Runs the callback (kernels::communicate): its status.
  static int32_t communicate(const loom_call_frame *frame, const Collective &op,
                             const void *send, void *recv, loom_dtype dtype) {
    char error[256];
    int32_t status =
        kernels::communicate(frame, op, send, recv, dtype, error, sizeof error);
    if (status != 0)
      Fail("%s", error);
    return status;
  }
  /// Waits for a split collective (kernels::waitForTransfer): its status.
  static int32_t wait(KernelArgs &args, const loom_call_frame *frame) {
    char error[256];
    int32_t status = waitForTransfer(args, frame, error, sizeof error);
    if (status != 0)
      Fail("%s", error);
    return status;
  }
};

} // namespace loom::kernels

#endif // LOOM_RUNTIME_COMMON_COLLECTIVEMETA_H
