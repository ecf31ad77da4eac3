//===- SequenceSplit.cpp - Where the planner may split the sequence -------===//

#include "loom/AutoShard/SequenceSplit.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"

#include <limits>

using namespace mlir;

namespace loom::autoshard {
namespace {

/// What a tensor dimension or a rule factor carries.
enum Kind : uint8_t { kSequence = 1, kBatch = 2, kModel = 4 };

/// The kinds of every dimension of every value seen so far.
class DimKinds {
public:
  uint8_t get(Value value, size_t dim) const {
    auto it = kinds.find(value);
    return it == kinds.end() || dim >= it->second.size() ? 0 : it->second[dim];
  }
  /// Adds `kind` to a dimension; whether it was new.
  bool add(Value value, size_t dim, uint8_t kind) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || dim >= size_t(type.getRank()) || !kind)
      return false;
    // A dimension of one sequence is no batch to split.
    if (type.getDimSize(dim) == 1)
      kind &= ~kBatch;
    auto &dims = kinds[value];
    dims.resize(type.getRank(), 0);
    uint8_t before = dims[dim];
    dims[dim] |= kind;
    return dims[dim] != before;
  }

private:
  llvm::DenseMap<Value, llvm::SmallVector<uint8_t, 4>> kinds;
};

/// Seeds: dimension 0 (batch) and 1 (sequence) of the token arguments and
/// of attention's 4-D [batch, sequence, heads, head_dim] tensors.
void seed(func::FuncOp fn, DimKinds &kinds) {
  auto seedBatchSequence = [&](Value value) {
    kinds.add(value, 0, kBatch);
    kinds.add(value, 1, kSequence);
  };
  for (BlockArgument arg : fn.getArguments())
    if (auto role =
            fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kRoleAttr);
        role && role.getValue() == "data")
      seedBatchSequence(arg);
  fn.walk([&](Operation *op) {
    // The normalized (last) dimension of a norm's activations is the
    // model's hidden dimension, the residual stream's width.
    if (isa<LayerNormOp, RMSNormOp, LayerNormGradOp, RMSNormGradOp>(op)) {
      for (Value value :
           llvm::concat<Value>(op->getOperands(), op->getResults()))
        if (auto type = dyn_cast<RankedTensorType>(value.getType());
            type && type.getRank() >= 2)
          kinds.add(value, type.getRank() - 1, kModel);
      return;
    }
    if (!isa<AttentionOp, AttentionGradOp>(op))
      return;
    for (Value value : llvm::concat<Value>(op->getOperands(), op->getResults()))
      if (auto type = dyn_cast<RankedTensorType>(value.getType());
          type && type.getRank() == 4)
        seedBatchSequence(value);
  });
}

/// The kinds of each factor of `rule`, from the dimensions that hold only
/// that factor (a dimension that merges factors says nothing about each).
llvm::SmallVector<uint8_t>
factorKinds(Operation *op, const OpShardingRule &rule, const DimKinds &kinds) {
  llvm::SmallVector<uint8_t> factors(rule.getNumFactors(), 0);
  auto read = [&](ValueRange values, llvm::ArrayRef<TensorMapping> tensors) {
    for (auto [value, tensor] : llvm::zip(values, tensors))
      for (auto [dim, mapped] : llvm::enumerate(tensor))
        if (mapped.size() == 1)
          factors[mapped.front()] |= kinds.get(value, dim);
  };
  read(op->getOperands(), rule.getOperands());
  read(op->getResults(), rule.getResults());
  return factors;
}

/// Carries the factors' kinds to every dimension that holds them; whether
/// anything changed.
bool writeKinds(Operation *op, const OpShardingRule &rule,
                llvm::ArrayRef<uint8_t> factors, DimKinds &kinds) {
  bool changed = false;
  auto write = [&](ValueRange values, llvm::ArrayRef<TensorMapping> tensors) {
    for (auto [value, tensor] : llvm::zip(values, tensors))
      for (auto [dim, mapped] : llvm::enumerate(tensor))
        for (int64_t factor : mapped)
          changed |= kinds.add(value, dim, factors[factor]);
  };
  write(op->getOperands(), rule.getOperands());
  write(op->getResults(), rule.getResults());
  return changed;
}

} // namespace

llvm::Expected<SequenceSplit> parseSequenceSplit(llvm::StringRef text) {
  if (text == "any")
    return SequenceSplit::Any;
  if (text == "megatron")
    return SequenceSplit::Megatron;
  if (text == "none")
    return SequenceSplit::None;
  return llvm::createStringError("sequence-parallel=\"" + text.str() +
                                 "\" is not one of: any, megatron, none");
}

llvm::DenseMap<Operation *, llvm::SmallVector<uint8_t>>
findResidualFactors(func::FuncOp fn) {
  DimKinds kinds;
  seed(fn, kinds);
  std::vector<std::pair<Operation *, OpShardingRule>> ruled;
  for (Operation &op : fn.getBody().front())
    if (auto withRule = dyn_cast<ShardingRuleOpInterface>(&op))
      ruled.push_back({&op, withRule.getShardingRule()});
  // Kinds only grow, so this ends; forward and backward sweeps carry them
  // both ways through the dataflow (gradients flow against it).
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &[op, rule] : ruled)
      changed |= writeKinds(op, rule, factorKinds(op, rule, kinds), kinds);
    for (auto &[op, rule] : llvm::reverse(ruled))
      changed |= writeKinds(op, rule, factorKinds(op, rule, kinds), kinds);
  }
  llvm::DenseMap<Operation *, llvm::SmallVector<uint8_t>> found;
  for (auto &[op, rule] : ruled) {
    llvm::SmallVector<uint8_t> &factors = found[op];
    bool activation = false;
    for (uint8_t kind : factorKinds(op, rule, kinds)) {
      activation |= (kind & (kSequence | kBatch)) != 0;
      uint8_t residual = 0;
      if (kind == kSequence)
        residual |= kSequenceFactor;
      if (kind & kSequence)
        residual |= kTokenFactor;
      if (kind & kModel)
        residual |= kModelFactor;
      factors.push_back(residual);
    }
    // Weights and optimizer state (no batch or sequence) are not the
    // residual stream: ZeRO splits them freely.
    if (!activation)
      for (uint8_t &factor : factors)
        factor &= ~kModelFactor;
  }
  return found;
}

int64_t restrictSequenceSplits(ShardingProblem &problem, SequenceSplit mode,
                               func::FuncOp fn) {
  if (mode == SequenceSplit::Any)
    return 0;
  auto residual = findResidualFactors(fn);
  int64_t forbidden = 0;
  for (ProblemNode &node : problem.nodes) {
    auto it = node.op ? residual.find(node.op) : residual.end();
    if (it == residual.end())
      continue;
    // Megatron's sequence parallelism leaves the GEMMs' sequence whole;
    // both forms leave the width of the residual stream whole outside the
    // GEMMs (tensor parallelism splits it only inside them).
    bool gemm = isa<MatmulOp, AttentionOp, AttentionGradOp>(node.op);
    uint8_t banned = gemm ? 0 : kModelFactor;
    if (mode == SequenceSplit::None || gemm)
      banned |= kSequenceFactor;
    for (auto [i, strategy] : llvm::enumerate(node.strategies)) {
      bool splitsBanned = llvm::any_of(strategy.axisFactor, [&](int64_t f) {
        return f >= 0 && (it->second[f] & banned);
      });
      if (splitsBanned &&
          node.seconds[i] != std::numeric_limits<double>::infinity()) {
        node.seconds[i] = std::numeric_limits<double>::infinity();
        ++forbidden;
      }
    }
  }
  return forbidden;
}

int64_t restrictContextAxis(ShardingProblem &problem, int64_t axis,
                            func::FuncOp fn) {
  auto residual = findResidualFactors(fn);
  int64_t forbidden = 0;
  for (ProblemNode &node : problem.nodes) {
    auto it = node.op ? residual.find(node.op) : residual.end();
    if (it == residual.end())
      continue;
    bool attention = isa<AttentionOp, AttentionGradOp>(node.op);
    for (auto [i, strategy] : llvm::enumerate(node.strategies)) {
      int64_t factor = axis < static_cast<int64_t>(strategy.axisFactor.size())
                           ? strategy.axisFactor[axis]
                           : -1;
      bool banned =
          factor >= 0 ? !(it->second[factor] & kTokenFactor) : attention;
      if (banned &&
          node.seconds[i] != std::numeric_limits<double>::infinity()) {
        node.seconds[i] = std::numeric_limits<double>::infinity();
        ++forbidden;
      }
    }
  }
  return forbidden;
}

} // namespace loom::autoshard
