//===- Resharding.cpp - The collectives between two shardings -------------===//

#include "loom/AutoShard/Resharding.h"

#include "loom/CostModel/OpCost.h"

#include "llvm/ADT/STLExtras.h"

namespace loom::autoshard {

llvm::StringRef stringifyReshardKind(ReshardKind kind) {
  switch (kind) {
  case ReshardKind::AllReduce:
    return "all-reduce";
  case ReshardKind::ReduceScatter:
    return "reduce-scatter";
  case ReshardKind::AllToAll:
    return "all-to-all";
  case ReshardKind::AllGather:
    return "all-gather";
  case ReshardKind::Slice:
    return "slice";
  }
  return "?";
}

namespace {

/// Whether `axis` splits `dim` of both shardings at the same position
/// among the dimension's axes (then the shards already match).
bool sameSplit(const TensorSharding &a, const TensorSharding &b, int64_t axis,
               int64_t dim) {
  const auto &axesA = a.dimAxes[dim], &axesB = b.dimAxes[dim];
  auto posA = llvm::find(axesA, axis), posB = llvm::find(axesB, axis);
  return posA != axesA.end() && posB != axesB.end() &&
         posA - axesA.begin() == posB - axesB.begin();
}

} // namespace

ReshardPlan planResharding(const TensorSharding &from, const TensorSharding &to,
                           llvm::ArrayRef<int64_t> shape, double elementBytes,
                           const DeviceMesh &mesh,
                           const cost::ClusterSpec &cluster) {
  ReshardPlan plan;
  if (!from.divides(shape, mesh) || !to.divides(shape, mesh)) {
    plan.possible = false;
    return plan;
  }
  // Bytes one device holds as the steps go.
  double local = cost::numElements(from.localShape(shape, mesh)) * elementBytes;
  auto add = [&](ReshardKind kind, int64_t axis, int64_t dim,
                 cost::Collective collective, double bytes) {
    double seconds =
        cost::collectiveCost(collective, bytes, mesh.placement(axis, cluster),
                             cluster)
            .seconds;
    plan.steps.push_back({kind, axis, dim, bytes, seconds});
    plan.seconds += seconds;
  };

  // A target can only be partial where the source is.
  for (int64_t axis : to.partialAxes)
    if (!from.isPartial(axis)) {
      plan.possible = false;
      return plan;
    }
  // 1. Reduce partial sums, scattering at once where the target splits the
  //    axis and the source does not (Megatron's sequence parallelism).
  for (int64_t axis : from.partialAxes) {
    if (to.isPartial(axis))
      continue;
    int64_t size = mesh.shape[axis];
    int64_t dim = to.dimOfAxis(axis);
    if (dim >= 0 && from.dimOfAxis(axis) < 0) {
      add(ReshardKind::ReduceScatter, axis, dim,
          cost::Collective::ReduceScatter, local);
      local /= double(size);
    } else {
      add(ReshardKind::AllReduce, axis, -1, cost::Collective::AllReduce, local);
    }
  }
  // 2. Splits that move to another dimension, then 3. splits to undo (a
  //    split of the same dimension at another position among its axes is
  //    gathered and sliced again).
  llvm::SmallVector<std::pair<int64_t, int64_t>> gathers;
  for (int64_t axis = 0; axis < mesh.numAxes(); ++axis) {
    int64_t fromDim = from.dimOfAxis(axis), toDim = to.dimOfAxis(axis);
    if (fromDim < 0 || (fromDim == toDim && sameSplit(from, to, axis, fromDim)))
      continue;
    if (toDim >= 0 && toDim != fromDim)
      add(ReshardKind::AllToAll, axis, toDim, cost::Collective::AllToAll,
          local);
    else
      gathers.push_back({axis, fromDim});
  }
  for (auto [axis, dim] : gathers) {
    local *= double(mesh.shape[axis]);
    add(ReshardKind::AllGather, axis, dim, cost::Collective::AllGather, local);
  }
  // 4. Splits the source lacks (or gathered to re-place): each device keeps
  //    its slice, without communication.
  for (int64_t axis = 0; axis < mesh.numAxes(); ++axis) {
    int64_t toDim = to.dimOfAxis(axis);
    bool gathered = llvm::any_of(
        gathers, [&](auto gather) { return gather.first == axis; });
    if (toDim >= 0 &&
        (gathered || (from.dimOfAxis(axis) < 0 && !from.isPartial(axis))))
      plan.steps.push_back({ReshardKind::Slice, axis, toDim, 0, 0});
  }
  return plan;
}

} // namespace loom::autoshard
