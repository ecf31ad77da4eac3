//===- Strategies.cpp - An op's ways of being split over a mesh -----------===//

#include "loom/AutoShard/Strategies.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

#include <functional>

using namespace mlir;

namespace loom::autoshard {
namespace {

/// Factors that may be split: not whole, and the major factor of every
/// dimension that holds them (so each device's shard is one contiguous
/// block).
llvm::SmallVector<bool> splittableFactors(const OpShardingRule &rule) {
  llvm::SmallVector<bool> splittable(rule.getNumFactors(), true);
  for (int64_t f = 0; f < rule.getNumFactors(); ++f)
    if (rule.getFactorKind(f) == FactorKind::Whole)
      splittable[f] = false;
  auto markMinors = [&](llvm::ArrayRef<TensorMapping> tensors) {
    for (const TensorMapping &tensor : tensors)
      for (const DimMapping &dim : tensor)
        for (size_t i = 1; i < dim.size(); ++i) // size-1 dims map none
          splittable[dim[i]] = false;
  };
  markMinors(rule.getOperands());
  markMinors(rule.getResults());
  return splittable;
}

/// Whether the op is linear in all its tensor operands jointly, so that
/// partial sums may flow through it (its ODS says Loom_Linear). Megatron's
/// backward pass sums the input gradients of the column-parallel Q, K and V
/// projections before reducing them once; this is what lets the solver find
/// that.
bool isLinear(Operation *op) { return op->hasTrait<Linear>(); }

/// Whether every tensor operand of `op` is a sum when partial: an operand
/// produced by a max-reduction (or an argument, which is never partial) may
/// not flow through a linear op as a partial value.
bool operandsReduceBySum(Operation *op) {
  for (Value operand : op->getOperands()) {
    auto producer = operand.getDefiningOp<ShardingRuleOpInterface>();
    if (producer && producer.getShardingRule().getReductionKind() !=
                        shard::ReductionKind::Sum)
      return false;
  }
  return true;
}

/// The sharding of one tensor under `axisFactor`: a dimension takes the
/// axes of its major factor; with `partialIfUnmapped`, axes whose factor the
/// tensor does not map make it partial (results of a split reduction); an
/// axis marked kPassPartial makes every operand and result partial.
TensorSharding shardingOf(const TensorMapping &tensor,
                          llvm::ArrayRef<int64_t> axisFactor,
                          bool partialIfUnmapped, const OpShardingRule &rule) {
  TensorSharding sharding = TensorSharding::replicated(tensor.size());
  for (auto [axis, factor] : llvm::enumerate(axisFactor)) {
    if (factor == kPassPartial)
      sharding.partialAxes.push_back(axis);
    if (factor < 0)
      continue;
    bool mapped = false;
    for (auto [dim, factors] : llvm::enumerate(tensor))
      if (!factors.empty() && factors.front() == factor) {
        sharding.dimAxes[dim].push_back(axis);
        mapped = true;
      }
    if (!mapped && partialIfUnmapped && !rule.mapsFactor(tensor, factor))
      sharding.partialAxes.push_back(axis);
  }
  return sharding;
}

llvm::SmallVector<int64_t, 4> shapeOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return {};
  return llvm::SmallVector<int64_t, 4>(type.getShape());
}

} // namespace

std::vector<Strategy> enumerateStrategies(Operation *op,
                                          const OpShardingRule &rule,
                                          const DeviceMesh &mesh,
                                          const cost::DeviceSpec &device) {
  llvm::SmallVector<bool> splittable = splittableFactors(rule);
  bool passesPartials = isLinear(op) && operandsReduceBySum(op);
  std::vector<Strategy> strategies;
  llvm::SmallVector<int64_t, 3> axisFactor(mesh.numAxes(), -1);

  auto emit = [&]() {
    // Every factor's axes must divide it.
    llvm::SmallVector<int64_t> split(rule.getNumFactors(), 1);
    for (auto [axis, factor] : llvm::enumerate(axisFactor))
      if (factor >= 0)
        split[factor] *= mesh.shape[axis];
    for (int64_t f = 0; f < rule.getNumFactors(); ++f)
      if (rule.getFactorSize(f) % split[f] != 0)
        return;
    Strategy strategy;
    strategy.axisFactor = axisFactor;
    for (auto [value, tensor] :
         llvm::zip(op->getOperands(), rule.getOperands())) {
      strategy.operands.push_back(
          shardingOf(tensor, axisFactor, /*partialIfUnmapped=*/false, rule));
      strategy.localShapes.operands.push_back(
          strategy.operands.back().localShape(shapeOf(value), mesh));
    }
    for (auto [value, tensor] :
         llvm::zip(op->getResults(), rule.getResults())) {
      strategy.results.push_back(
          shardingOf(tensor, axisFactor, /*partialIfUnmapped=*/true, rule));
      strategy.localShapes.results.push_back(
          strategy.results.back().localShape(shapeOf(value), mesh));
    }
    strategy.computeSeconds =
        cost::opTime(cost::getOpWork(op, strategy.localShapes), device);
    strategies.push_back(std::move(strategy));
  };

  // Each axis takes one splittable factor or none; the all-replicated
  // assignment comes first.
  std::function<void(int64_t)> assign = [&](int64_t axis) {
    if (axis == mesh.numAxes()) {
      emit();
      return;
    }
    axisFactor[axis] = -1;
    assign(axis + 1);
    for (int64_t f = 0; f < rule.getNumFactors(); ++f) {
      if (!splittable[f] || mesh.shape[axis] == 1)
        continue;
      axisFactor[axis] = f;
      assign(axis + 1);
    }
    if (passesPartials && mesh.shape[axis] > 1) {
      axisFactor[axis] = kPassPartial;
      assign(axis + 1);
    }
    axisFactor[axis] = -1;
  };
  assign(0);
  return strategies;
}

} // namespace loom::autoshard
