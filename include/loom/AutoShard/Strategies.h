//===- Strategies.h - An op's ways of being split over a mesh ----*- C++
//-*-===//
//
// From an op's sharding rule (factors) and a mesh, every assignment of mesh
// axes to splittable factors is a strategy: it fixes how each operand must
// arrive, how each result leaves (split, replicated or partial), and the
// local shapes the op computes on. Splitting a reduction factor leaves the
// results partial on that axis; the reduction is then a resharding of the
// result, so that it can be delayed and fused (all-reduce followed by a
// slice becomes reduce-scatter).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTOSHARD_STRATEGIES_H
#define LOOM_AUTOSHARD_STRATEGIES_H

#include "loom/AutoShard/Sharding.h"
#include "loom/CostModel/OpCost.h"

#include "dialects/Loom/ShardingRule.h"

#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace loom::autoshard {

/// Strategy::axisFactor of an axis on which a linear op (add, sub, neg,
/// reshape, transpose, broadcast, slice, concat, reduce_sum, reduce_mean)
/// takes partial sums and leaves partial sums.
inline constexpr int64_t kPassPartial = -2;

struct Strategy {
  /// For each mesh axis, the factor it splits, -1 (replicated on it) or
  /// kPassPartial.
  llvm::SmallVector<int64_t, 3> axisFactor;
  llvm::SmallVector<TensorSharding, 4> operands, results;
  cost::OpShapes localShapes;
  /// Seconds of the op's own compute at the local shapes.
  double computeSeconds = 0;
};

/// Every strategy of `op` (whose sharding rule is `rule`) on `mesh`, the
/// replicated one first. A factor can take several axes (in mesh order); a
/// factor inside a dimension made of several factors is split only if it is
/// the dimension's major factor, so that shards stay contiguous. Axes must
/// divide the factor. A linear op whose operands are sums when partial
/// also passes partial sums through, on any one or more axes.
std::vector<Strategy> enumerateStrategies(mlir::Operation *op,
                                          const OpShardingRule &rule,
                                          const DeviceMesh &mesh,
                                          const cost::DeviceSpec &device);

} // namespace loom::autoshard

#endif // LOOM_AUTOSHARD_STRATEGIES_H
