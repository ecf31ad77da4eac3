//===- GroupSplit.h - A rank's place in a communicator group ----*- C++ -*-===//
//
// Every communicator (MpiComm over MPI_Comm_split, NcclComm over
// ncclCommSplit) splits its world once per group of grid axes with the
// same color and key, so that a group's ranks are in member order on
// every backend: the color is the world rank of the group's member 0 (the
// device with coordinate 0 on each of the group's axes; groups of one
// index hold disjoint ranks), the key the member index (row-major over the
// group's axes).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_GROUPSPLIT_H
#define LOOM_RUNTIME_COMMON_GROUPSPLIT_H

#include <cstdint>
#include <vector>

namespace loom::rt {

/// What a rank passes to its backend's split for one group.
struct GroupSplit {
  int color = 0;       ///< the world rank of the group's member 0
  int key = 0;         ///< this rank's member index
  int64_t members = 1; ///< the group's size
};

/// The coordinates of grid index `linear` (row-major) in `gridShape`.
inline std::vector<int64_t>
gridCoordinates(int64_t linear, const std::vector<int64_t> &gridShape) {
  std::vector<int64_t> coords(gridShape.size());
  for (size_t a = gridShape.size(); a-- > 0;) {
    coords[a] = linear % gridShape[a];
    linear /= gridShape[a];
  }
  return coords;
}

/// The split of the group over `axes` for the device at `coords` of
/// `gridShape`, whose devices are world ranks `gridRanks` (row-major).
inline GroupSplit groupSplit(const std::vector<int64_t> &gridShape,
                             const std::vector<int> &gridRanks,
                             const std::vector<int64_t> &coords,
                             const std::vector<int16_t> &axes) {
  GroupSplit split;
  std::vector<int64_t> first = coords;
  for (int16_t axis : axes) {
    split.key = split.key * static_cast<int>(gridShape[axis]) +
                static_cast<int>(coords[axis]);
    split.members *= gridShape[axis];
    first[axis] = 0;
  }
  int64_t firstLinear = 0;
  for (size_t a = 0; a < first.size(); ++a)
    firstLinear = firstLinear * gridShape[a] + first[a];
  split.color = gridRanks[firstLinear];
  return split;
}

} // namespace loom::rt

#endif // LOOM_RUNTIME_COMMON_GROUPSPLIT_H
