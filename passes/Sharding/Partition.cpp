//===- Partition.cpp - Annotated program to per-device SPMD program -------===//
//
// Implements --loom-partition: reads the layout of every value from the
// `shard.shard` annotations (--loom-auto-shard's or a user's), and rewrites
// the function into the program one device runs: local shapes, and `shard`
// collectives wherever a value must change layout. Each op runs the
// strategy of its sharding rule that its operands' and results' layouts
// describe (the cheapest one to reach when they describe none exactly).
// Finally, gradient all-reduces that feed the optimizer are bucketed.
//
//===----------------------------------------------------------------------===//

#include "passes/Sharding/Passes.h"

#include "loom/AutoShard/Resharding.h"
#include "loom/AutoShard/Strategies.h"
#include "loom/CostModel/ClusterSpec.h"

#include "passes/Sharding/BucketGradients.h"

#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <cstdio>

#define DEBUG_TYPE "loom-partition"

namespace loom {
#define GEN_PASS_DEF_LOOMPARTITION
#include "passes/Sharding/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::autoshard;

namespace loom {
namespace {

RankedTensorType tensorType(Value value) {
  return dyn_cast<RankedTensorType>(value.getType());
}

/// Rewrites one function; see the file comment.
class Partitioner {
public:
  Partitioner(func::FuncOp fn, shard::GridOp grid,
              const cost::ClusterSpec &cluster)
      : fn(fn), gridName(grid.getSymName()), cluster(cluster),
        b(fn.getContext()) {
    mesh.shape.assign(grid.getShape().begin(), grid.getShape().end());
  }

  LogicalResult run();

private:
  LogicalResult readLayouts();
  LogicalResult partitionOp(Operation &op);
  LogicalResult partitionReturn(func::ReturnOp ret);
  /// The layout of an original value (replicated when unannotated).
  TensorSharding layoutOf(Value value) const;
  /// `local` (in layout `from`) converted to `to`; null after a diagnostic.
  Value reshard(Value local, const TensorSharding &from,
                const TensorSharding &to, RankedTensorType global,
                Location loc);
  /// Checks that `sharding` divides `type` on the mesh.
  LogicalResult checkDivides(const TensorSharding &sharding,
                             RankedTensorType type, Operation *op,
                             llvm::StringRef what);
  RankedTensorType localType(RankedTensorType global,
                             const TensorSharding &sharding) const {
    return global.clone(sharding.localShape(global.getShape(), mesh));
  }

  func::FuncOp fn;
  llvm::StringRef gridName;
  DeviceMesh mesh;
  const cost::ClusterSpec &cluster;
  OpBuilder b;
  /// Original value -> its layout.
  llvm::DenseMap<Value, TensorSharding> layouts;
  /// Original value -> the local value holding it (in layoutOf(value)).
  IRMapping local;
  /// How partial results of each new op combine.
  llvm::DenseMap<Value, shard::ReductionKind> partialKind;
  /// (local value, target layout) -> converted value, so that a partial sum
  /// used twice is reduced once.
  std::map<std::pair<void *, std::string>, Value> converted;
  Block *newBody = nullptr;
};

TensorSharding Partitioner::layoutOf(Value value) const {
  auto it = layouts.find(value);
  if (it != layouts.end())
    return it->second;
  auto type = tensorType(value);
  return TensorSharding::replicated(type ? type.getRank() : 0);
}

LogicalResult Partitioner::checkDivides(const TensorSharding &sharding,
                                        RankedTensorType type, Operation *op,
                                        llvm::StringRef what) {
  llvm::SmallVector<int64_t, 4> shape(type.getShape());
  for (auto [dim, axes] : llvm::enumerate(sharding.dimAxes))
    for (int64_t axis : axes) {
      if (shape[dim] % mesh.shape[axis] != 0)
        return op->emitError()
               << "--loom-partition: dimension " << dim << " of " << what
               << " (" << type << ") has " << shape[dim]
               << " elements per device before mesh axis " << axis
               << ", which does not divide by its " << mesh.shape[axis]
               << " devices";
      shape[dim] /= mesh.shape[axis];
    }
  return success();
}

LogicalResult Partitioner::readLayouts() {
  auto record = [&](Value value, const TensorSharding &sharding,
                    Operation *at) -> LogicalResult {
    auto [it, inserted] = layouts.try_emplace(value, sharding);
    if (!inserted && !(it->second == sharding))
      return at->emitError()
             << "--loom-partition: a second annotation gives " << sharding.str()
             << " to a value already " << it->second.str();
    return success();
  };
  for (Operation &op : fn.getBody().front()) {
    auto shardOp = dyn_cast<shard::ShardOp>(op);
    if (!shardOp)
      continue;
    // shard.shard only takes ranked tensors.
    auto type = cast<RankedTensorType>(shardOp.getSrc().getType());
    auto grid = shardOp.getSharding().getDefiningOp<shard::ShardingOp>();
    if (grid && grid.getGrid() != gridName)
      return shardOp.emitError()
             << "--loom-partition: annotation on @" << grid.getGrid()
             << ", expected @" << gridName;
    llvm::Expected<TensorSharding> sharding = shardingOfShardOp(shardOp, mesh);
    if (!sharding)
      return shardOp.emitError()
             << "--loom-partition: " << llvm::toString(sharding.takeError());
    if (failed(checkDivides(*sharding, type, shardOp, "the annotated value")))
      return failure();
    if (failed(record(shardOp.getResult(), *sharding, shardOp)))
      return failure();
    // Without annotate_for_users, the annotation is the layout of the value
    // itself (its producer leaves it so).
    if (!shardOp.getAnnotateForUsers() &&
        failed(record(shardOp.getSrc(), *sharding, shardOp)))
      return failure();
  }
  return success();
}

Value Partitioner::reshard(Value value, const TensorSharding &from,
                           const TensorSharding &to, RankedTensorType global,
                           Location loc) {
  if (from == to)
    return value;
  auto key = std::make_pair(value.getAsOpaquePointer(), to.str());
  if (auto it = converted.find(key); it != converted.end())
    return it->second;
  for (int64_t axis : to.partialAxes)
    if (!from.isPartial(axis)) {
      emitError(loc) << "--loom-partition: cannot make a whole value "
                     << from.str() << " partial " << to.str();
      return nullptr;
    }
  TensorSharding current = from;
  auto grid = [&](int64_t axis) {
    return llvm::SmallVector<int16_t, 1>{static_cast<int16_t>(axis)};
  };
  auto divides = [&](int64_t dim, int64_t axis) {
    return current.localShape(global.getShape(), mesh)[dim] %
               mesh.shape[axis] ==
           0;
  };
  // Whether appending `axis` to dimension `dim` of the current layout
  // moves it towards `to` (its axes so far are a prefix of the target's).
  auto appendsTowardTarget = [&](int64_t dim, int64_t axis) {
    const auto &have = current.dimAxes[dim], &want = to.dimAxes[dim];
    return have.size() < want.size() &&
           llvm::equal(have, llvm::ArrayRef(want).take_front(have.size())) &&
           want[have.size()] == axis && divides(dim, axis);
  };

  // 1. Partial sums: reduce, scattering at once where the target splits.
  for (int64_t axis : llvm::SmallVector<int64_t, 2>(from.partialAxes)) {
    if (to.isPartial(axis))
      continue;
    shard::ReductionKind kind =
        partialKind.lookup_or(value, shard::ReductionKind::Sum);
    llvm::erase(current.partialAxes, axis);
    int64_t dim = to.dimOfAxis(axis);
    if (dim >= 0 && appendsTowardTarget(dim, axis)) {
      current.dimAxes[dim].push_back(axis);
      value = shard::ReduceScatterOp::create(b, loc, localType(global, current),
                                             gridName, grid(axis), value, kind,
                                             llvm::APInt(64, dim));
    } else {
      value = shard::AllReduceOp::create(b, loc, value.getType(), gridName,
                                         grid(axis), value, kind);
    }
  }
  // 2. Splits to undo, minor axis first; an axis the target wants at the
  //    end of another dimension moves there in one all-to-all.
  bool changed = true;
  while (changed) {
    changed = false;
    for (int64_t dim = 0; dim < global.getRank(); ++dim) {
      auto &axes = current.dimAxes[dim];
      const auto &want = to.dimAxes[dim];
      size_t common = 0;
      while (common < axes.size() && common < want.size() &&
             axes[common] == want[common])
        ++common;
      if (axes.size() == common)
        continue;
      int64_t axis = axes.back();
      axes.pop_back();
      int64_t target = -1;
      for (int64_t other = 0; other < global.getRank() && target < 0; ++other)
        if (other != dim && appendsTowardTarget(other, axis))
          target = other;
      if (target >= 0) {
        current.dimAxes[target].push_back(axis);
        value = shard::AllToAllOp::create(
            b, loc, localType(global, current), gridName, grid(axis), value,
            llvm::APInt(64, target), llvm::APInt(64, dim));
      } else {
        value = shard::AllGatherOp::create(b, loc, localType(global, current),
                                           gridName, grid(axis), value,
                                           llvm::APInt(64, dim));
      }
      changed = true;
    }
  }
  // 3. Splits the target adds: each device keeps its slice.
  for (int64_t dim = 0; dim < global.getRank(); ++dim)
    for (size_t i = current.dimAxes[dim].size(); i < to.dimAxes[dim].size();
         ++i) {
      int64_t axis = to.dimAxes[dim][i];
      current.dimAxes[dim].push_back(axis);
      value = shard::AllSliceOp::create(b, loc, localType(global, current),
                                        gridName, grid(axis), value,
                                        llvm::APInt(64, dim));
    }
  assert(current == to && "resharding did not reach its target");
  converted[key] = value;
  return value;
}

/// The strategy of `op` that its layouts describe: the one whose operand
/// and result layouts cost least to reach (zero when they match).
const Strategy *pickStrategy(llvm::ArrayRef<Strategy> strategies,
                             llvm::ArrayRef<TensorSharding> operands,
                             llvm::ArrayRef<TensorSharding> results,
                             Operation *op, const DeviceMesh &mesh,
                             const cost::ClusterSpec &cluster) {
  const Strategy *best = nullptr;
  double bestCost = ReshardPlan::kImpossible;
  for (const Strategy &strategy : strategies) {
    double total = 0;
    for (auto [i, value] : llvm::enumerate(op->getOperands()))
      if (auto type = tensorType(value))
        total += planResharding(operands[i], strategy.operands[i],
                                type.getShape(), 1.0, mesh, cluster)
                     .cost();
    for (auto [i, value] : llvm::enumerate(op->getResults()))
      if (auto type = tensorType(value))
        total += planResharding(strategy.results[i], results[i],
                                type.getShape(), 1.0, mesh, cluster)
                     .cost();
    if (!best || total < bestCost) {
      best = &strategy;
      bestCost = total;
    }
    if (total == 0)
      break;
  }
  return bestCost < ReshardPlan::kImpossible ? best : nullptr;
}

LogicalResult Partitioner::partitionOp(Operation &op) {
  b.setInsertionPointToEnd(newBody);
  // Annotations become conversions (none when the layout already matches).
  if (auto shardOp = dyn_cast<shard::ShardOp>(op)) {
    Value converted =
        reshard(local.lookup(shardOp.getSrc()), layoutOf(shardOp.getSrc()),
                layoutOf(shardOp.getResult()), tensorType(shardOp.getSrc()),
                op.getLoc());
    if (!converted)
      return failure();
    local.map(shardOp.getResult(), converted);
    return success();
  }
  if (isa<shard::ShardingOp>(op))
    return success();
  if (isa<func::CallOp>(op))
    return emitLineError(&op)
           << "--loom-partition: inline calls first (--inline)";

  llvm::SmallVector<TensorSharding, 4> operandLayouts, resultLayouts;
  for (Value operand : op.getOperands())
    operandLayouts.push_back(layoutOf(operand));
  for (Value result : op.getResults())
    resultLayouts.push_back(layoutOf(result));

  Strategy replicated;
  const Strategy *strategy = &replicated;
  std::vector<Strategy> strategies;
  shard::ReductionKind kind = shard::ReductionKind::Sum;
  if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op)) {
    OpShardingRule rule = ruled.getShardingRule();
    kind = rule.getReductionKind();
    strategies = enumerateStrategies(&op, rule, mesh, cluster.device);
    strategy = pickStrategy(strategies, operandLayouts, resultLayouts, &op,
                            mesh, cluster);
    if (!strategy)
      return op.emitError() << "--loom-partition: no strategy of the op's "
                               "sharding rule can meet its layouts";
  } else if (op.hasTrait<OpTrait::ConstantLike>() && op.getNumOperands() == 0) {
    for (Value result : op.getResults())
      replicated.results.push_back(TensorSharding::replicated(
          tensorType(result) ? tensorType(result).getRank() : 0));
  } else {
    return op.emitError() << "--loom-partition: '" << op.getName()
                          << "' has no sharding rule";
  }

  // Some ops compute from their elements' global indices: a dropout mask
  // is drawn by global element index, a causal attention's queries and a
  // rotary embedding's rows sit at global positions. On a split tensor the
  // op records how its indexed tensor (x, dy or q) is split, so that each
  // device offsets its local indices (DropoutMask.h).
  ArrayAttr maskSplit;
  std::optional<unsigned> masked;
  if (isa<DropoutOp, DropoutGradOp, AttentionOp, RopeOp, RopeGradOp>(op))
    masked = 0;
  else if (isa<AttentionGradOp>(op))
    masked = 1;
  auto indexed = [&](const TensorSharding &layout) {
    bool sequenceSplit =
        layout.dimAxes.size() > 1 && !layout.dimAxes[1].empty();
    if (auto attention = dyn_cast<AttentionOp>(op))
      return attention.getDropoutRateAttr() ||
             (attention.getCausal() && sequenceSplit);
    if (auto grad = dyn_cast<AttentionGradOp>(op))
      return grad.getDropoutRateAttr() || (grad.getCausal() && sequenceSplit);
    if (isa<RopeOp, RopeGradOp>(op))
      return sequenceSplit;
    return true;
  };
  if (masked && indexed(strategy->operands[*masked])) {
    const TensorSharding &layout = strategy->operands[*masked];
    if (llvm::any_of(layout.dimAxes,
                     [](const auto &axes) { return !axes.empty(); }))
      maskSplit = splitAxesAttr(b.getContext(), layout);
  }

  b.setInsertionPointToEnd(newBody);
  IRMapping operands;
  for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
    Value value = local.lookup(operand);
    if (auto type = tensorType(operand)) {
      if (failed(checkDivides(strategy->operands[i], type, &op,
                              "operand " + std::to_string(i))))
        return failure();
      value = reshard(value, operandLayouts[i], strategy->operands[i], type,
                      op.getLoc());
      if (!value)
        return failure();
    }
    operands.map(operand, value);
  }
  Operation *clone = b.clone(op, operands);
  if (maskSplit) {
    clone->setAttr(kMaskSplitAxesAttr, maskSplit);
    clone->setAttr(kMaskGridAttr,
                   FlatSymbolRefAttr::get(b.getContext(), gridName));
  }
  for (auto [i, result] : llvm::enumerate(clone->getResults()))
    if (auto type = tensorType(result)) {
      if (failed(checkDivides(strategy->results[i], type, &op,
                              "result " + std::to_string(i))))
        return failure();
      result.setType(localType(type, strategy->results[i]));
      if (!strategy->results[i].partialAxes.empty())
        partialKind[result] = kind;
    }
  // The mean over a split set of tokens divides by the global count.
  auto countTokens = [&](auto loss, Value labels) {
    if (!loss.getTokenCountAttr())
      loss.setTokenCountAttr(
          b.getI64IntegerAttr(tensorType(labels).getNumElements()));
  };
  if (auto loss = dyn_cast<CrossEntropyOp>(clone))
    countTokens(loss, op.getOperand(1));
  else if (auto grad = dyn_cast<CrossEntropyGradOp>(clone))
    countTokens(grad, op.getOperand(2));
  for (auto [i, result] : llvm::enumerate(op.getResults())) {
    Value value = clone->getResult(i);
    if (auto type = tensorType(result)) {
      value = reshard(value, strategy->results[i], resultLayouts[i], type,
                      op.getLoc());
      if (!value)
        return failure();
    }
    local.map(result, value);
  }
  return success();
}

LogicalResult Partitioner::partitionReturn(func::ReturnOp ret) {
  b.setInsertionPointToEnd(newBody);
  llvm::SmallVector<Value> values;
  for (auto [i, operand] : llvm::enumerate(ret.getOperands())) {
    TensorSharding layout = layoutOf(operand);
    Value value = local.lookup(operand);
    if (!layout.partialAxes.empty()) {
      TensorSharding whole = layout;
      whole.partialAxes.clear();
      value = reshard(value, layout, whole, tensorType(operand), ret.getLoc());
      if (!value)
        return failure();
      layout = whole;
    }
    fn.setResultAttr(i, kSplitAxesAttr, splitAxesAttr(fn.getContext(), layout));
    values.push_back(value);
  }
  func::ReturnOp::create(b, ret.getLoc(), values);
  return success();
}

LogicalResult Partitioner::run() {
  if (!fn.getBody().hasOneBlock())
    return emitLineError(fn) << "--loom-partition: @" << fn.getSymName()
                             << " must have one block";
  if (failed(readLayouts()))
    return failure();
  Block &oldBody = fn.getBody().front();
  newBody = new Block();
  fn.getBody().push_back(newBody);
  for (BlockArgument arg : oldBody.getArguments()) {
    Type type = arg.getType();
    if (auto tensor = tensorType(arg)) {
      TensorSharding layout = layoutOf(arg);
      if (!layout.partialAxes.empty())
        return emitLineError(fn)
               << "--loom-partition: argument " << arg.getArgNumber()
               << " cannot hold partial sums";
      if (failed(
              checkDivides(layout, tensor, fn,
                           "argument " + std::to_string(arg.getArgNumber()))))
        return failure();
      type = localType(tensor, layout);
      fn.setArgAttr(arg.getArgNumber(), kSplitAxesAttr,
                    splitAxesAttr(fn.getContext(), layout));
    }
    local.map(arg, newBody->addArgument(type, arg.getLoc()));
  }
  for (Operation &op : oldBody) {
    LogicalResult result = isa<func::ReturnOp>(op)
                               ? partitionReturn(cast<func::ReturnOp>(op))
                               : partitionOp(op);
    if (failed(result))
      return failure();
  }
  oldBody.dropAllDefinedValueUses();
  oldBody.erase();
  fn.setFunctionType(
      b.getFunctionType(newBody->getArgumentTypes(),
                        newBody->getTerminator()->getOperandTypes()));
  return success();
}

struct PartitionPass : impl::LoomPartitionBase<PartitionPass> {
  using LoomPartitionBase::LoomPartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!std::isfinite(bucketBytes) || bucketBytes < 0) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", double(bucketBytes));
      emitLineError(module)
          << "--loom-partition: bucket-bytes=" << text
          << " must be a number of bytes >= 0 (0: no buckets)";
      return signalPassFailure();
    }
    ModuleState state = getModuleState(module);
    if (state == ModuleState::Partitioned || state == ModuleState::Split) {
      emitLineError(module)
          << "--loom-partition: the module is " << stringifyModuleState(state)
          << " already (loom.state)";
      return signalPassFailure();
    }
    auto fn = module.lookupSymbol<func::FuncOp>(funcName);
    if (!fn) {
      emitLineError(module) << "--loom-partition: no function @" << funcName;
      return signalPassFailure();
    }
    shard::GridOp grid;
    module.walk([&](shard::GridOp op) {
      if (!grid)
        grid = op;
    });
    if (!grid) {
      emitLineError(fn) << "--loom-partition: the module has no shard.grid "
                           "(run --loom-auto-shard first)";
      return signalPassFailure();
    }
    if (llvm::any_of(grid.getShape(), [](int64_t size) {
          return ShapedType::isDynamic(size);
        })) {
      emitLineError(grid)
          << "--loom-partition: the grid must have a static shape";
      return signalPassFailure();
    }
    // Any cluster ranks the strategies that reach an op's layouts (the
    // costs only break ties between equally exact ones).
    cost::ClusterSpec cluster = llvm::cantFail(cost::getPreset("cpu-local"));
    Partitioner partitioner(fn, grid, cluster);
    if (failed(partitioner.run()))
      return signalPassFailure();
    if (bucketBytes > 0)
      bucketGradientAllReduces(fn.getBody().front(), bucketBytes);
    // A pipelined step stays pipelined: --loom-split-stages cuts it next.
    if (getModuleState(module) == ModuleState::Whole)
      setModuleState(module, ModuleState::Partitioned);
  }
};

} // namespace
} // namespace loom
