//===- StepPhases.cpp - Phase and stage of every op of a step -------------===//

#include "passes/Pipeline/StepPhases.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

using namespace mlir;

namespace loom {

bool isConstantLeaf(Operation *op) {
  return op->getNumOperands() == 0 && op->hasTrait<OpTrait::ConstantLike>();
}

bool StepPhases::isStepInvariant(Operation *op) {
  auto it = invariant.find(op);
  if (it != invariant.end())
    return it->second;
  bool result = info.count(op) && info[op].phase != Phase::Optimizer;
  for (Value operand : op->getOperands()) {
    if (!result)
      break;
    if (auto arg = dyn_cast<BlockArgument>(operand)) {
      auto role =
          step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kRoleAttr);
      result = role && role.getValue() != "data";
      continue;
    }
    Operation *def = operand.getDefiningOp();
    result = isConstantLeaf(def) || isStepInvariant(def);
  }
  invariant[op] = result;
  return result;
}

LogicalResult StepPhases::classify(int64_t numStages) {
  int64_t index = 0;
  for (Operation &op : body) {
    position[&op] = index++;
    if (isa<func::CallOp>(op))
      return emitLineError(&op)
             << "--loom-split-stages: inline @train_step first "
                "(--inline)";
    if (op.hasTrait<OpTrait::IsTerminator>() || isConstantLeaf(&op))
      continue;
    if (isa<AdamWUpdateOp, SGDUpdateOp>(op) || op.hasAttr(kTiedGradientAttr)) {
      info[&op] = {Phase::Optimizer, -1, {}};
      continue;
    }
    if (auto stage = op.getAttrOfType<IntegerAttr>(kStageAttr)) {
      if (stage.getInt() < 0 || stage.getInt() >= numStages)
        return op.emitError("--loom-split-stages: stage ")
               << stage.getInt() << " is outside the pipeline's " << numStages
               << " stages";
      info[&op] = {op.hasAttr(kBackwardAttr) ? Phase::Backward : Phase::Forward,
                   stage.getInt(),
                   {}};
    }
  }
  // Ops the partitioner inserted run where their first user runs (a
  // gradient's reduction before its update: once per step, on the
  // accumulated gradient)...
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (info.count(&op) || isConstantLeaf(&op))
      continue;
    Operation *first = nullptr;
    for (Operation *user : op.getUsers())
      // ...except before a tied sum, whose operands must stay with the
      // stages that compute them.
      if (info.count(user) && !user->hasAttr(kTiedGradientAttr) &&
          (!first || position[user] < position[first]))
        first = user;
    // Copied first: inserting may move the map's entries.
    if (first) {
      OpInfo inherited = info.lookup(first);
      info[&op] = std::move(inherited);
    }
  }
  // ...or, when only returned, where their latest producer runs.
  for (Operation &op : body.without_terminator()) {
    if (info.count(&op) || isConstantLeaf(&op))
      continue;
    Operation *last = nullptr;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && info.count(def) && (!last || position[def] > position[last]))
        last = def;
    if (!last)
      return op.emitError("--loom-split-stages: cannot tell which stage "
                          "runs this op (no staged user or producer)");
    OpInfo inherited = info.lookup(last);
    info[&op] = std::move(inherited);
  }
  return checkDataflow();
}

LogicalResult StepPhases::checkDataflow() {
  // What --loom-pipeline's tags promise, which cutting the step relies on:
  // a forward op reads no backward value and no later stage's forward
  // value, and a tied sum adds gradient contributions of the backward. A
  // hand-edited step may break it (a backward op without `loom.backward`).
  auto stageName = [](const OpInfo &opInfo) {
    return (opInfo.phase == Phase::Backward ? "the backward of stage "
                                            : "the forward of stage ") +
           std::to_string(opInfo.stage);
  };
  for (Operation &op : body.without_terminator()) {
    auto it = info.find(&op);
    if (it == info.end())
      continue;
    const OpInfo &mine = it->second;
    bool tied = op.hasAttr(kTiedGradientAttr);
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto from = def ? info.find(def) : info.end();
      if (from == info.end()) {
        if (tied)
          return op.emitError("--loom-split-stages: `")
                 << kTiedGradientAttr << "` sums gradients, but its operand "
                 << "is not computed by the backward pass";
        continue;
      }
      const OpInfo &source = from->second;
      if (tied && source.phase != Phase::Backward) {
        InFlightDiagnostic diag =
            op.emitError("--loom-split-stages: `")
            << kTiedGradientAttr << "` sums gradients, but its operand comes "
            << "from "
            << (source.phase == Phase::Optimizer ? "the optimizer"
                                                 : stageName(source));
        diag.attachNote(def->getLoc()) << "the operand's op";
        return diag;
      }
      if (mine.phase != Phase::Forward || source.phase == Phase::Optimizer)
        continue;
      if (source.phase == Phase::Backward ||
          (source.phase == Phase::Forward && source.stage > mine.stage)) {
        InFlightDiagnostic diag =
            op.emitError("--loom-split-stages: this op of ")
            << stageName(mine) << " reads a value of " << stageName(source)
            << ", which runs after it"
            << (source.phase == Phase::Backward
                    ? " (is its `loom.backward` missing?)"
                    : "");
        diag.attachNote(def->getLoc()) << "the value's op";
        return diag;
      }
    }
  }
  return success();
}

void StepPhases::assignOptimizerStages() {
  // The stages holding each parameter: those whose forward or backward use
  // it.
  DenseMap<Value, std::set<int64_t>> holding;
  for (BlockArgument arg : body.getArguments()) {
    auto role =
        step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kRoleAttr);
    if (!role || role.getValue() != "param")
      continue;
    for (Operation *user : arg.getUsers())
      if (info.count(user) && info.lookup(user).phase != Phase::Optimizer)
        holding[arg].insert(info.lookup(user).stage);
  }
  for (Operation &op : body.without_terminator()) {
    auto it = info.find(&op);
    if (it == info.end() || it->second.phase != Phase::Optimizer)
      continue;
    std::set<int64_t> stages;
    for (Value operand : op.getOperands()) {
      if (isa<BlockArgument>(operand)) {
        auto found = holding.find(operand);
        if (found != holding.end())
          stages.insert(found->second.begin(), found->second.end());
        continue;
      }
      Operation *def = operand.getDefiningOp();
      if (!info.count(def))
        continue;
      const OpInfo &from = info[def];
      if (from.phase == Phase::Optimizer)
        stages.insert(from.optStages.begin(), from.optStages.end());
      else
        stages.insert(from.stage);
    }
    it->second.optStages = std::move(stages);
  }
  // Every stage that runs an op also runs what feeds it: a slice of a
  // moment, or of a weight that another stage's forward reads too, is
  // where its users are; what nothing stages runs on stage 0.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    auto it = info.find(&op);
    if (it == info.end() || it->second.phase != Phase::Optimizer)
      continue;
    for (Operation *user : op.getUsers()) {
      auto found = info.find(user);
      if (found != info.end() && found->second.phase == Phase::Optimizer &&
          !user->hasAttr(kTiedGradientAttr))
        it->second.optStages.insert(found->second.optStages.begin(),
                                    found->second.optStages.end());
    }
    if (it->second.optStages.empty())
      it->second.optStages.insert(0);
  }
}

} // namespace loom
