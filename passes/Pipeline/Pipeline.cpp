//===- Pipeline.cpp - Micro-batches and stages of a step (--loom-pipeline) ===//
//
// Rewrites @forward for one micro-batch, tags its ops with stages, unties
// parameters that several stages use, differentiates it again with every
// backward op tagged, and points @train_step at the new gradient function.
// Nothing is cut apart here: the step stays one function, so that the
// sharding passes see it whole; --loom-split-stages cuts it.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipeline/Passes.h"

#include "passes/Autodiff/Autodiff.h"
#include "passes/Pipeline/MicroBatch.h"
#include "passes/Pipeline/Stages.h"

#include "loom/CostModel/ClusterSpec.h"
#include "loom/Schedule/Schedule.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstdio>

#define DEBUG_TYPE "loom-pipeline"

namespace loom {
#define GEN_PASS_DEF_LOOMPIPELINE
#include "passes/Pipeline/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom {
namespace {

int64_t stageOf(Operation *op) {
  auto attr = op->getAttrOfType<IntegerAttr>(kStageAttr);
  return attr ? attr.getInt() : -1;
}

void setStage(Operation *op, int64_t stage) {
  op->setAttr(kStageAttr, Builder(op).getI64IntegerAttr(stage));
}

/// The earliest stage of `op`'s users, or 0 when none has one.
int64_t earliestUserStage(Operation *op) {
  int64_t stage = -1;
  for (Operation *user : op->getUsers())
    if (int64_t s = stageOf(user); s >= 0)
      stage = stage < 0 ? s : std::min(stage, s);
  return std::max<int64_t>(stage, 0);
}

/// Ops without operands (constants) take the earliest stage that uses them:
/// --loom-split-stages copies them into every stage that needs them.
void tagConstants(Block &body) {
  for (Operation &op : body.without_terminator())
    if (op.getNumOperands() == 0)
      setStage(&op, earliestUserStage(&op));
}

/// A parameter used by several stages gets an argument per extra stage, so
/// that each stage's gradient contribution is its own result.
struct Replica {
  unsigned original; ///< argument of @forward
  unsigned copy;     ///< the new argument
};

std::vector<Replica> untieParameters(func::FuncOp forward) {
  std::vector<Replica> replicas;
  unsigned numArgs = forward.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i) {
    BlockArgument arg = forward.getArgument(i);
    if (!isFloatTensorType(arg.getType()))
      continue;
    std::map<int64_t, SmallVector<OpOperand *>> usesByStage;
    for (OpOperand &use : arg.getUses())
      usesByStage[stageOf(use.getOwner())].push_back(&use);
    if (usesByStage.size() < 2)
      continue;
    for (auto &[stage, uses] : llvm::drop_begin(usesByStage)) {
      unsigned copy = forward.getNumArguments();
      (void)forward.insertArgument(copy, arg.getType(),
                                   forward.getArgAttrDict(i), arg.getLoc());
      for (OpOperand *use : uses)
        use->set(forward.getArgument(copy));
      replicas.push_back({i, copy});
    }
  }
  return replicas;
}

/// Parses `recompute` into one mode per stage.
FailureOr<SmallVector<Attribute>> parseRecompute(Operation *at, StringRef text,
                                                 int64_t numStages) {
  SmallVector<StringRef> parts;
  text.split(parts, ',');
  if (parts.size() != 1 && int64_t(parts.size()) != numStages)
    return emitLineError(at)
           << "--loom-pipeline: `recompute` lists " << parts.size()
           << " modes for " << numStages << " stages";
  SmallVector<Attribute> modes;
  Builder b(at->getContext());
  for (int64_t s = 0; s < numStages; ++s) {
    StringRef mode = parts[parts.size() == 1 ? 0 : s].trim();
    if (mode != "none" && mode != "selective" && mode != "full")
      return emitLineError(at) << "--loom-pipeline: unknown recompute mode '"
                               << mode << "' (none, selective or full)";
    modes.push_back(b.getStringAttr(mode));
  }
  return modes;
}

struct PipelinePass : impl::LoomPipelineBase<PipelinePass> {
  using LoomPipelineBase::LoomPipelineBase;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    if (!std::isfinite(memoryBudget) || memoryBudget < 0) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", double(memoryBudget));
      return emitLineError(module)
             << "--loom-pipeline: memory-budget=" << text
             << " must be a number of bytes >= 0 (0: the device's memory)";
    }
    auto kind = sched::parseScheduleKind(schedule);
    if (!kind)
      return emitLineError(module)
             << "--loom-pipeline: unknown schedule '" << schedule
             << "' (gpipe, 1f1b, interleaved-1f1b, zb-h1)";
    if (llvm::Error err = sched::checkScheduleShape(*kind, stages, microBatches,
                                                    virtualStages))
      return emitLineError(module)
             << "--loom-pipeline: " << llvm::toString(std::move(err));
    if (ModuleState state = getModuleState(module); state != ModuleState::Whole)
      return emitLineError(module)
             << "--loom-pipeline: the module is already "
             << stringifyModuleState(state) << " (loom.state)";
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    auto oldGrad = module.lookupSymbol<func::FuncOp>("forward_backward");
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!forward || !oldGrad || !step)
      return emitLineError(module) << "--loom-pipeline: needs @forward, "
                                      "@forward_backward and @train_step "
                                      "(--loom-autodiff --loom-optimizer)";
    func::CallOp call;
    int64_t calls = 0;
    step.walk([&](func::CallOp c) {
      ++calls;
      if (c.getCallee() == "forward_backward")
        call = c;
    });
    if (!call || calls != 1)
      return emitLineError(step)
             << "--loom-pipeline: @train_step must make one "
                "call, to @forward_backward (run the pass "
                "before --inline)";
    auto cluster = cost::resolveClusterSpec(clusterName);
    if (!cluster)
      return emitLineError(module)
             << "--loom-pipeline: " << llvm::toString(cluster.takeError());
    int64_t numStages = stages * virtualStages;
    auto recomputeModes = parseRecompute(module, recompute, numStages);
    if (failed(recomputeModes))
      return failure();

    // Stages are chosen on the micro-batch the stages will run.
    if (failed(splitMicroBatch(forward, microBatches)))
      return failure();
    auto items = findForwardItems(forward);
    if (failed(items))
      return failure();
    // Each stage keeps its rank's micro-batches in flight (a chunk of an
    // interleaved rank its share); AdamW keeps a parameter, its gradient
    // and two moments, SGD the first two.
    std::vector<double> inFlight;
    for (int64_t s = 0; s < numStages; ++s)
      inFlight.push_back(
          double(sched::peakInFlight(*kind, stages, microBatches, virtualStages,
                                     s % stages)) /
          virtualStages);
    auto optimizer = step->getAttrOfType<DictionaryAttr>(kOptimizerAttr);
    auto optimizerKind =
        optimizer ? optimizer.getAs<StringAttr>("kind") : StringAttr();
    double stateCopies =
        optimizerKind && optimizerKind.getValue() == "sgd" ? 2 : 4;
    double capacity =
        memoryBudget > 0 ? double(memoryBudget) : cluster->device.memoryBytes;
    auto costs = itemCosts(forward, *items, cluster->device, stateCopies);
    if (failed(costs))
      return failure();
    auto bounds = chooseStageBounds(forward, *items, *costs, inFlight,
                                    microBatches, capacity, layers);
    if (failed(bounds))
      return failure();
    Block &body = forward.getBody().front();
    for (Operation &op : body.without_terminator()) {
      int64_t item = items->itemOf.lookup(&op);
      int64_t stage = llvm::upper_bound(*bounds, item) - bounds->begin() - 1;
      setStage(&op, std::min(stage, numStages - 1));
    }
    tagConstants(body);
    std::vector<Replica> replicas = untieParameters(forward);

    // Differentiate again: every backward op runs in the stage of the
    // forward op whose adjoint it computes.
    oldGrad.setSymName("forward_backward.unpipelined");
    auto grad = buildGradientFunction(
        forward, "forward_backward", [](Operation *created, Operation *from) {
          created->setAttr(kBackwardAttr, UnitAttr::get(created->getContext()));
          if (!from)
            return;
          setStage(created, stageOf(from));
          // A dropout's gradient replays the forward's masks.
          if (Attribute m = from->getAttr(kMaskMicroBatchesAttr);
              m && isa<DropoutGradOp, AttentionGradOp>(created))
            created->setAttr(kMaskMicroBatchesAttr, m);
        });
    if (failed(grad))
      return failure();
    tagBackwardLeftovers(*grad);
    if (failed(retargetCall(call, *grad, forward, replicas)))
      return failure();
    oldGrad.erase();

    Builder b(module.getContext());
    SmallVector<Attribute> itemBounds;
    for (int64_t bound : *bounds)
      itemBounds.push_back(b.getI64IntegerAttr(bound));
    module->setAttr(
        kPipelineAttr,
        b.getDictionaryAttr({
            b.getNamedAttr("schedule", b.getStringAttr(schedule)),
            b.getNamedAttr("ranks", b.getI64IntegerAttr(stages)),
            b.getNamedAttr("virtual_stages",
                           b.getI64IntegerAttr(virtualStages)),
            b.getNamedAttr("micro_batches", b.getI64IntegerAttr(microBatches)),
            b.getNamedAttr("recompute", b.getArrayAttr(*recomputeModes)),
            b.getNamedAttr("stage_items", b.getArrayAttr(itemBounds)),
        }));
    setModuleState(module, ModuleState::Pipelined);
    return success();
  }

  /// The loss's seed and the zero gradients come from no forward op: they
  /// run where their first user runs (stage 0 when only returned).
  static void tagBackwardLeftovers(func::FuncOp grad) {
    Block &body = grad.getBody().front();
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (stageOf(&op) < 0)
        setStage(&op, earliestUserStage(&op));
  }

  /// Replaces @train_step's call of the old gradient function by one of the
  /// new: data arguments shrink to the micro-batch, replicated parameters
  /// are passed twice, and their gradients are summed.
  LogicalResult retargetCall(func::CallOp call, func::FuncOp grad,
                             func::FuncOp forward, ArrayRef<Replica> replicas) {
    SmallVector<Value> operands(call.getOperands());
    for (const Replica &replica : replicas)
      operands.push_back(call.getOperand(replica.original));
    for (auto [operand, type] :
         llvm::zip_equal(operands, grad.getArgumentTypes())) {
      if (operand.getType() == type)
        continue;
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg)
        return emitLineError(call)
               << "--loom-pipeline: a micro-batched argument "
                  "of @forward_backward is not an argument of "
                  "@train_step";
      arg.setType(type);
    }
    auto step = call->getParentOfType<func::FuncOp>();
    Block &stepBody = step.getBody().front();
    step.setFunctionType(FunctionType::get(
        step.getContext(), stepBody.getArgumentTypes(), step.getResultTypes()));

    OpBuilder b(call);
    auto newCall = func::CallOp::create(b, call.getLoc(), grad, operands);
    // Result 1 + k is the gradient of @forward's k-th float argument.
    DenseMap<unsigned, unsigned> resultOfArg;
    unsigned next = 1;
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (isFloatTensorType(forward.getArgument(i).getType()))
        resultOfArg[i] = next++;
    SmallVector<Value> results(
        newCall.getResults().take_front(call.getNumResults()));
    for (const Replica &replica : replicas) {
      unsigned r = resultOfArg.lookup(replica.original);
      auto sum =
          AddOp::create(b, call.getLoc(), results[r],
                        newCall.getResult(resultOfArg.lookup(replica.copy)));
      sum->setAttr(kTiedGradientAttr, b.getUnitAttr());
      results[r] = sum;
    }
    call.replaceAllUsesWith(results);
    call.erase();
    return success();
  }
};

} // namespace
} // namespace loom
