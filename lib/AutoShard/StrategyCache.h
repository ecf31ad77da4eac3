//===- StrategyCache.h - One copy of each strategy set and matrix ---------===//
//
// Private to lib/AutoShard. The strategies of an op depend only on its
// name, attributes and types, and a resharding matrix only on the
// strategies at its two ends and the value's type: the n layers of a
// transformer need each once. Building the problem of a deep model then
// costs a hash lookup per op and per use, not an enumeration and k_u x k_v
// calls of planResharding.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_AUTOSHARD_STRATEGYCACHE_H
#define LOOM_LIB_AUTOSHARD_STRATEGYCACHE_H

#include "loom/AutoShard/Problem.h"

#include <map>

namespace loom::autoshard {

/// The strategies a node may take, with each one's seconds and memory.
struct StrategySet {
  SharedArray<Strategy> strategies;
  std::vector<double> seconds, memory;
};

class StrategyCache {
public:
  StrategyCache(const DeviceMesh &mesh, const cost::ClusterSpec &cluster,
                const ProblemOptions &options)
      : mesh(mesh), cluster(cluster), options(options) {}

  /// The set of an op with a sharding rule or a constant; -1 for any other
  /// op.
  int ofOp(mlir::Operation *op);
  /// The layouts an argument of `type` may be stored in.
  int ofArgument(mlir::Type type);
  /// The whole layouts a returned value of `type` may leave in.
  int ofReturned(mlir::Type type);
  /// The layouts in which a value of `type` with several uses may be
  /// handed to them: every argument layout, also partial on any set of the
  /// axes it does not split (operand 0 = result 0 = the layout).
  int ofFanout(mlir::Type type);
  const StrategySet &set(int id) const { return sets[id]; }

  /// The costs of carrying result `result` of a node of set `from` to one
  /// of set `to`, whose strategies want it as operand `operand` (or, when
  /// `operand` < 0, as their result 0: a loop-carried argument).
  ReshardMatrix matrix(int from, unsigned result, int to, int operand);

private:
  /// Keeps `set` unless an identical one exists (ops whose attributes
  /// differ in ways the strategies do not see, such as a dropout key);
  /// `kind` groups the candidates.
  int intern(StrategySet set, std::vector<const void *> kind);

  const DeviceMesh &mesh;
  const cost::ClusterSpec &cluster;
  const ProblemOptions &options;
  std::vector<StrategySet> sets;
  /// The type of each set's results (or, for a returned value, operand 0).
  std::vector<llvm::SmallVector<mlir::Type, 2>> valueTypes;
  /// Op name, attributes and types (uniqued, so pointers compare) -> set.
  std::map<std::vector<const void *>, int> byOp;
  /// Op name and types -> the distinct sets seen with them.
  std::map<std::vector<const void *>, std::vector<int>> byKind;
  std::map<std::tuple<int, unsigned, int, int>, ReshardMatrix> matrices;
};

} // namespace loom::autoshard

#endif // LOOM_LIB_AUTOSHARD_STRATEGYCACHE_H
