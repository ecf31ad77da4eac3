//===- MemoryModel.cpp - Model states, saved activations, working set -----===//

#include "loom/CostModel/MemoryModel.h"

#include "loom/CostModel/OpCost.h"

#include "dialects/Loom/LoomOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

using namespace mlir;

namespace loom::cost {

llvm::StringRef stringifyRecompute(Recompute recompute) {
  switch (recompute) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "?";
}

StateBytesPerParam stateBytesPerParam(bool mixedPrecision,
                                      OptimizerKind optimizer) {
  // ZeRO §3.1: with mixed precision, 2 bytes of fp16/bf16 parameters; the
  // optimizer keeps an fp32 master copy (4) plus, for Adam, momentum and
  // variance (4 + 4): K = 12. The gradients are fp32 (4), not ZeRO's fp16:
  // the gradient of Loom's cast to the compute copy is the master weight's
  // f32 gradient, and bf16 training in Megatron-LM accumulates and reduces
  // fp32 gradients (its main_grad buffers), as Llama 3 does (Dubey et al.
  // 2024 §3.3.4). In f32 the parameters are their own master copy.
  double moments = optimizer == OptimizerKind::AdamW ? 8 : 0;
  if (mixedPrecision)
    return {2, 4, 4 + moments};
  return {4, 4, moments};
}

ModelStateMemory modelStateMemory(double numParams,
                                  const StateBytesPerParam &perParam,
                                  ZeroStage zero, int64_t dataParallel) {
  // ZeRO §5.1–5.3 (Figure 1): stage k divides the first k of optimizer
  // states, gradients, parameters by the data-parallel degree Nd.
  double nd = double(std::max<int64_t>(1, dataParallel));
  int stage = static_cast<int>(zero);
  ModelStateMemory memory;
  memory.optimizerStates =
      numParams * perParam.optimizer / (stage >= 1 ? nd : 1);
  memory.grads = numParams * perParam.grads / (stage >= 2 ? nd : 1);
  memory.params = numParams * perParam.params / (stage >= 3 ? nd : 1);
  return memory;
}

namespace {

double bytesOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? numElements(type.getShape()) * elementBytes(type) : 0;
}

/// The value whose storage `value` uses: reshapes are views.
Value storageRoot(Value value) {
  while (auto reshape = value.getDefiningOp<ReshapeOp>())
    value = reshape->getOperand(0);
  return value;
}

} // namespace

llvm::DenseSet<Operation *> forwardOps(func::FuncOp fn) {
  llvm::DenseSet<Operation *> forward;
  Operation *terminator = fn.getBody().front().getTerminator();
  if (terminator->getNumOperands() == 0)
    return forward;
  llvm::SmallVector<Value> worklist{terminator->getOperand(0)};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val().getDefiningOp();
    if (!op || !forward.insert(op).second)
      continue;
    llvm::append_range(worklist, op->getOperands());
  }
  return forward;
}

llvm::DenseSet<Value> batchDependentValues(func::FuncOp fn) {
  llvm::DenseSet<Value> dependent;
  for (BlockArgument arg : fn.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (type && type.getRank() > 0 && type.getElementType().isInteger())
      dependent.insert(arg);
  }
  fn.walk([&](Operation *op) {
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return dependent.contains(v); }))
      for (Value result : op->getResults())
        dependent.insert(result);
  });
  return dependent;
}

llvm::SmallVector<SavedValue>
findSavedActivations(func::FuncOp fn, const ActivationOptions &options) {
  llvm::DenseSet<Operation *> forward = forwardOps(fn);
  llvm::DenseSet<Value> dependent = batchDependentValues(fn);
  llvm::SmallVector<SavedValue> saved;
  llvm::DenseSet<Value> seen;
  fn.walk([&](Operation *op) {
    if (!forward.contains(op))
      return;
    bool core = op->hasAttr(kAttentionCoreAttr);
    if (options.storeDropoutMasks)
      if (auto dropout = dyn_cast<DropoutOp>(op))
        if (dropout.getRate().convertToDouble() > 0 &&
            dependent.contains(dropout.getResult()))
          saved.push_back({dropout.getResult(),
                           double(dropout.getType().getNumElements()),
                           /*isDropoutMask=*/true, core});
    for (Value result : op->getResults()) {
      if (!dependent.contains(result) ||
          !isa<FloatType>(getElementTypeOrSelf(result.getType())))
        continue;
      bool readByBackward = llvm::any_of(result.getUsers(), [&](Operation *u) {
        return !forward.contains(u);
      });
      if (!readByBackward)
        continue;
      Value root = storageRoot(result);
      if (!seen.insert(root).second)
        continue;
      Operation *producer = root.getDefiningOp();
      saved.push_back({root, bytesOf(root), /*isDropoutMask=*/false,
                       producer && producer->hasAttr(kAttentionCoreAttr)});
    }
  });
  return saved;
}

double keptBytes(llvm::ArrayRef<SavedValue> saved, Recompute recompute) {
  double bytes = 0;
  for (const SavedValue &value : saved)
    if (recompute != Recompute::Selective || !value.attentionCore)
      bytes += value.bytes;
  return bytes;
}

double peakTemporaryBytes(func::FuncOp fn, llvm::ArrayRef<SavedValue> exclude) {
  Block &body = fn.getBody().front();
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : body)
    position[&op] = index++;
  llvm::DenseSet<Value> skip;
  for (const SavedValue &value : exclude)
    skip.insert(value.value);
  for (Value result : body.getTerminator()->getOperands())
    skip.insert(storageRoot(result));

  // The last use of each storage root, through its views.
  llvm::DenseMap<Value, int64_t> lastUse;
  for (Operation &op : body)
    for (Value result : op.getResults()) {
      Value root = storageRoot(result);
      int64_t &last = lastUse[root];
      last = std::max(last, position[&op]);
      for (Operation *user : result.getUsers())
        last = std::max(last, position[user]);
    }
  // Sweep: +bytes at the definition, -bytes after the last use.
  std::vector<double> delta(index + 1, 0.0);
  for (auto [root, last] : lastUse) {
    if (isa<BlockArgument>(root) || skip.contains(root))
      continue;
    double bytes = bytesOf(root);
    delta[position[root.getDefiningOp()]] += bytes;
    delta[last + 1] -= bytes;
  }
  double live = 0, peak = 0;
  for (double change : delta) {
    live += change;
    peak = std::max(peak, live);
  }
  return peak;
}

} // namespace loom::cost
