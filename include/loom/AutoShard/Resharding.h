//===- Resharding.h - The collectives between two shardings ------*- C++
//-*-===//
//
// What it costs to turn a tensor laid out one way into the layout a consumer
// needs, one mesh axis at a time: reduce partial sums (all-reduce, or
// reduce-scatter when the target splits that axis anyway), move a split
// between dimensions (all-to-all), undo a split (all-gather), or take a
// local slice (free).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTOSHARD_RESHARDING_H
#define LOOM_AUTOSHARD_RESHARDING_H

#include "loom/AutoShard/Sharding.h"

#include "llvm/ADT/SmallVector.h"

#include <limits>

namespace loom::autoshard {

enum class ReshardKind {
  AllReduce,
  ReduceScatter,
  AllToAll,
  AllGather,
  Slice,
};
llvm::StringRef stringifyReshardKind(ReshardKind kind);

struct ReshardStep {
  ReshardKind kind;
  int64_t axis;
  /// The dimension gathered, scattered or sliced (the target's for
  /// all-to-all); -1 for all-reduce.
  int64_t dim = -1;
  /// Bytes of the collective's n (see cost::collectiveCost).
  double bytes = 0;
  double seconds = 0;
};

struct ReshardPlan {
  llvm::SmallVector<ReshardStep, 4> steps;
  double seconds = 0;
  /// False when no sequence of collectives gets there (the target is
  /// partial where the source is not, or a split does not divide).
  bool possible = true;

  static constexpr double kImpossible = std::numeric_limits<double>::infinity();
  double cost() const { return possible ? seconds : kImpossible; }
};

/// The steps from `from` to `to` for a tensor of `shape` whose elements take
/// `elementBytes`, and their time on `cluster`. Reductions come first, at the
/// smallest size; then all-to-alls; then gathers; slices last.
ReshardPlan planResharding(const TensorSharding &from, const TensorSharding &to,
                           llvm::ArrayRef<int64_t> shape, double elementBytes,
                           const DeviceMesh &mesh,
                           const cost::ClusterSpec &cluster);

} // namespace loom::autoshard

#endif // LOOM_AUTOSHARD_RESHARDING_H
