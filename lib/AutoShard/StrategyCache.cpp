//===- StrategyCache.cpp - One copy of each strategy set and matrix -------===//

#include "StrategyCache.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace loom::autoshard {
namespace {

llvm::ArrayRef<int64_t> shapeOf(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.getShape();
  return {};
}

const void *number(size_t n) { return reinterpret_cast<const void *>(n); }

/// Name and types of `op`, as uniqued pointers.
std::vector<const void *> kindOf(Operation *op) {
  std::vector<const void *> key{op->getName().getAsOpaquePointer(),
                                number(op->getNumOperands())};
  for (Type type : op->getOperandTypes())
    key.push_back(type.getAsOpaquePointer());
  for (Type type : op->getResultTypes())
    key.push_back(type.getAsOpaquePointer());
  return key;
}

bool sameStrategy(const Strategy &a, const Strategy &b) {
  return a.axisFactor == b.axisFactor && a.operands == b.operands &&
         a.results == b.results &&
         a.localShapes.operands == b.localShapes.operands &&
         a.localShapes.results == b.localShapes.results &&
         a.computeSeconds == b.computeSeconds;
}

bool sameSet(const StrategySet &a, const StrategySet &b) {
  return a.seconds == b.seconds && a.memory == b.memory &&
         a.strategies.size() == b.strategies.size() &&
         llvm::all_of(
             llvm::zip_equal(a.strategies, b.strategies), [](auto pair) {
               return sameStrategy(std::get<0>(pair), std::get<1>(pair));
             });
}

} // namespace

int StrategyCache::intern(StrategySet set, std::vector<const void *> kind) {
  std::vector<int> &candidates = byKind[std::move(kind)];
  for (int id : candidates)
    if (sameSet(sets[id], set))
      return id;
  sets.push_back(std::move(set));
  candidates.push_back(sets.size() - 1);
  return sets.size() - 1;
}

int StrategyCache::ofOp(Operation *op) {
  std::vector<const void *> key = kindOf(op);
  key.push_back(op->getAttrDictionary().getAsOpaquePointer());
  auto found = byOp.find(key);
  if (found != byOp.end())
    return found->second;

  std::vector<Strategy> strategies;
  if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op)) {
    strategies =
        enumerateStrategies(op, ruled.getShardingRule(), mesh, cluster.device);
  } else if (op->hasTrait<OpTrait::ConstantLike>() &&
             op->getNumOperands() == 0) {
    Strategy replicated;
    for (Type type : op->getResultTypes())
      replicated.results.push_back(
          TensorSharding::replicated(shapeOf(type).size()));
    strategies.push_back(std::move(replicated));
  } else {
    return -1;
  }
  StrategySet set;
  for (const Strategy &strategy : strategies) {
    set.seconds.push_back(strategy.computeSeconds);
    set.memory.push_back(0);
  }
  set.strategies = std::move(strategies);
  size_t before = sets.size();
  key.pop_back();
  int id = intern(std::move(set), key);
  if (size_t(id) == before)
    valueTypes.emplace_back(op->getResultTypes());
  key.push_back(op->getAttrDictionary().getAsOpaquePointer());
  byOp[std::move(key)] = id;
  return id;
}

int StrategyCache::ofArgument(Type type) {
  std::vector<const void *> key{number(1), type.getAsOpaquePointer()};
  auto found = byOp.find(key);
  if (found != byOp.end())
    return found->second;
  StrategySet set;
  std::vector<Strategy> strategies;
  double perElement =
      cost::elementBytes(type) + options.argumentOverheadBytesPerElement;
  for (TensorSharding &sharding : argumentShardings(shapeOf(type), mesh)) {
    Strategy strategy;
    strategy.localShapes.results.push_back(
        sharding.localShape(shapeOf(type), mesh));
    set.memory.push_back(
        cost::numElements(strategy.localShapes.results.back()) * perElement);
    set.seconds.push_back(0);
    strategy.results.push_back(std::move(sharding));
    strategies.push_back(std::move(strategy));
  }
  set.strategies = std::move(strategies);
  sets.push_back(std::move(set));
  valueTypes.push_back({type});
  return byOp[std::move(key)] = sets.size() - 1;
}

int StrategyCache::ofReturned(Type type) {
  std::vector<const void *> key{number(2), type.getAsOpaquePointer()};
  auto found = byOp.find(key);
  if (found != byOp.end())
    return found->second;
  StrategySet set;
  std::vector<Strategy> strategies;
  for (TensorSharding &sharding : argumentShardings(shapeOf(type), mesh)) {
    Strategy strategy;
    strategy.operands.push_back(std::move(sharding));
    strategies.push_back(std::move(strategy));
    set.seconds.push_back(0);
    set.memory.push_back(0);
  }
  set.strategies = std::move(strategies);
  sets.push_back(std::move(set));
  valueTypes.push_back({type});
  return byOp[std::move(key)] = sets.size() - 1;
}

int StrategyCache::ofFanout(Type type) {
  std::vector<const void *> key{number(3), type.getAsOpaquePointer()};
  auto found = byOp.find(key);
  if (found != byOp.end())
    return found->second;
  StrategySet set;
  std::vector<Strategy> strategies;
  auto add = [&](const TensorSharding &sharding) {
    Strategy strategy;
    strategy.operands.push_back(sharding);
    strategy.results.push_back(sharding);
    strategy.localShapes.operands.push_back(
        sharding.localShape(shapeOf(type), mesh));
    strategy.localShapes.results.push_back(
        strategy.localShapes.operands.back());
    strategies.push_back(std::move(strategy));
    set.seconds.push_back(0);
    set.memory.push_back(0);
  };
  for (TensorSharding &sharding : argumentShardings(shapeOf(type), mesh)) {
    llvm::SmallVector<int64_t, 3> free;
    for (int64_t axis = 0; axis < mesh.numAxes(); ++axis)
      if (mesh.shape[axis] > 1 && sharding.dimOfAxis(axis) < 0)
        free.push_back(axis);
    // Every subset of the free axes, in axis order, as partial axes.
    for (unsigned subset = 0; subset < (1u << free.size()); ++subset) {
      TensorSharding partial = sharding;
      for (auto [bit, axis] : llvm::enumerate(free))
        if (subset & (1u << bit))
          partial.partialAxes.push_back(axis);
      add(partial);
    }
  }
  set.strategies = std::move(strategies);
  sets.push_back(std::move(set));
  valueTypes.push_back({type});
  return byOp[std::move(key)] = sets.size() - 1;
}

ReshardMatrix StrategyCache::matrix(int from, unsigned result, int to,
                                    int operand) {
  auto key = std::make_tuple(from, result, to, operand);
  auto found = matrices.find(key);
  if (found != matrices.end())
    return found->second;
  Type type = valueTypes[from][result];
  const SharedArray<Strategy> &producer = sets[from].strategies;
  const SharedArray<Strategy> &consumer = sets[to].strategies;
  auto values = std::make_shared<std::vector<double>>();
  values->reserve(producer.size() * consumer.size());
  for (const Strategy &produced : producer)
    for (const Strategy &consumed : consumer)
      values->push_back(planResharding(produced.results[result],
                                       operand < 0 ? consumed.results[0]
                                                   : consumed.operands[operand],
                                       shapeOf(type), cost::elementBytes(type),
                                       mesh, cluster)
                            .cost());
  ReshardMatrix matrix(std::move(values), consumer.size());
  matrices.emplace(key, matrix);
  return matrix;
}

} // namespace loom::autoshard
