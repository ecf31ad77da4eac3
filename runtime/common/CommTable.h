//===- CommTable.h - loom_comm's callbacks onto a communicator --*- C++ -*-===//
//
// The callback table every communicator (MpiComm, NcclComm, StagedComm)
// hands to compiled code: each entry casts ctx back to the communicator
// and calls its member of the same name. A communicator has the members
// below (private ones too, when it befriends fillCommTable):
//
//   allReduce, allGather, reduceScatter, allToAll, send, recv
//   allReduceStart, allGatherStart, reduceScatterStart (the slot first)
//   wait(slot), gridCoordinate(axis)
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_COMMTABLE_H
#define LOOM_RUNTIME_COMMON_COMMTABLE_H

#include "loom/loom_program.h"

#include <cstdint>
#include <vector>

namespace loom::rt {

/// Points every callback of `t` at `comm`'s members.
template <typename Comm> void fillCommTable(loom_comm &t, Comm *comm) {
  t.ctx = comm;
  t.all_reduce = [](void *ctx, int32_t group, void *buf, int64_t count,
                    loom_dtype dtype, loom_reduction op) {
    return static_cast<Comm *>(ctx)->allReduce(group, buf, count, dtype, op);
  };
  t.all_gather = [](void *ctx, int32_t group, const void *send, void *recv,
                    int64_t count, loom_dtype dtype) {
    return static_cast<Comm *>(ctx)->allGather(group, send, recv, count, dtype);
  };
  t.reduce_scatter = [](void *ctx, int32_t group, const void *send, void *recv,
                        int64_t count, loom_dtype dtype, loom_reduction op) {
    return static_cast<Comm *>(ctx)->reduceScatter(group, send, recv, count,
                                                   dtype, op);
  };
  t.all_to_all = [](void *ctx, int32_t group, const void *send, void *recv,
                    int64_t count, loom_dtype dtype) {
    return static_cast<Comm *>(ctx)->allToAll(group, send, recv, count, dtype);
  };
  t.send = [](void *ctx, int32_t peer, int32_t tag, const void *buf,
              int64_t count, loom_dtype dtype) {
    return static_cast<Comm *>(ctx)->send(peer, tag, buf, count, dtype);
  };
  t.recv = [](void *ctx, int32_t peer, int32_t tag, void *buf, int64_t count,
              loom_dtype dtype) {
    return static_cast<Comm *>(ctx)->recv(peer, tag, buf, count, dtype);
  };
  t.grid_coordinate = [](void *ctx, int32_t axis) -> int64_t {
    return static_cast<Comm *>(ctx)->gridCoordinate(axis);
  };
  t.all_reduce_start = [](void *ctx, int32_t slot, int32_t group, void *buf,
                          int64_t count, loom_dtype dtype, loom_reduction op) {
    return static_cast<Comm *>(ctx)->allReduceStart(slot, group, buf, count,
                                                    dtype, op);
  };
  t.all_gather_start = [](void *ctx, int32_t slot, int32_t group,
                          const void *send, void *recv, int64_t count,
                          loom_dtype dtype) {
    return static_cast<Comm *>(ctx)->allGatherStart(slot, group, send, recv,
                                                    count, dtype);
  };
  t.reduce_scatter_start = [](void *ctx, int32_t slot, int32_t group,
                              const void *send, void *recv, int64_t count,
                              loom_dtype dtype, loom_reduction op) {
    return static_cast<Comm *>(ctx)->reduceScatterStart(slot, group, send, recv,
                                                        count, dtype, op);
  };
  t.wait = [](void *ctx, int32_t slot) {
    return static_cast<Comm *>(ctx)->wait(slot);
  };
}

/// Coordinate `axis` of `coords`, -1 outside them (grid_coordinate's
/// answer for an axis the grid does not have).
inline int64_t coordinateOf(const std::vector<int64_t> &coords, int32_t axis) {
  if (axis < 0 || axis >= static_cast<int32_t>(coords.size()))
    return -1;
  return coords[axis];
}

} // namespace loom::rt

#endif // LOOM_RUNTIME_COMMON_COMMTABLE_H
