//===- Stages.cpp - Which pipeline stage runs each forward op -------------===//

#include "passes/Pipeline/Stages.h"

#include "passes/Autodiff/Autodiff.h"

#include "loom/AutoShard/Layers.h"
#include "loom/CostModel/MemoryModel.h"
#include "loom/CostModel/OpCost.h"
#include "loom/Planner/StageDP.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace loom {

FailureOr<ForwardItems> findForwardItems(func::FuncOp forward) {
  Block &body = forward.getBody().front();
  ForwardItems items;
  // The importers mark each layer's parameters (loom.layer); IR written
  // without the marks has the layer in the parameters' names.
  bool marked = llvm::any_of(forward.getArguments(), [&](BlockArgument arg) {
    return forward.getArgAttr(arg.getArgNumber(), kLayerAttr);
  });
  std::vector<int> argLayer;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto layer = forward.getArgAttrOfType<IntegerAttr>(i, kLayerAttr);
    auto name = forward.getArgAttrOfType<StringAttr>(i, kNameAttr);
    argLayer.push_back(marked ? (layer ? int(layer.getInt()) : -1)
                       : name ? autoshard::layerOfName(name.getValue())
                              : -1);
    items.numLayers = std::max(items.numLayers, argLayer.back() + 1);
  }
  if (items.numLayers == 0)
    return emitLineError(forward)
           << "--loom-pipeline: no argument is marked with a transformer layer "
              "(`loom.layer`) or names one (`h.<i>.`, `layers.<i>.`, "
              "`blocks.<i>.`), so there is nothing to cut into stages";
  int last = items.numLayers - 1;

  // A cast of an argument (a weight's bf16 copy under mixed precision)
  // stands for the argument: it has the layer of its weight, and a head
  // weight stays the head's through its copy.
  auto argCopy = [](Operation *op) -> BlockArgument {
    auto cast = dyn_cast_or_null<CastOp>(op);
    return cast ? dyn_cast<BlockArgument>(cast.getX()) : BlockArgument();
  };
  auto sourceArg = [&](Value value) -> BlockArgument {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return arg;
    return argCopy(value.getDefiningOp());
  };
  // Layer of each op: the deepest layer it depends on.
  DenseMap<Operation *, int> layerOf;
  auto layerOfValue = [&](Value value) {
    if (BlockArgument arg = sourceArg(value))
      return argLayer[arg.getArgNumber()];
    return layerOf.lookup_or(value.getDefiningOp(), -1);
  };
  // Arguments first used after the last layer began belong to the head.
  llvm::SmallDenseSet<unsigned> earlyArgs;
  for (Operation &op : body.without_terminator()) {
    int layer = -1;
    for (Value operand : op.getOperands())
      layer = std::max(layer, layerOfValue(operand));
    layerOf[&op] = layer;
    if (layer < last && !argCopy(&op))
      for (Value operand : op.getOperands())
        if (BlockArgument arg = sourceArg(operand))
          earlyArgs.insert(arg.getArgNumber());
  }
  llvm::SmallPtrSet<Operation *, 16> head;
  for (Operation &op : body.without_terminator()) {
    int layer = layerOf[&op];
    bool isHead = false;
    if (layer == last)
      for (Value operand : op.getOperands()) {
        BlockArgument arg = sourceArg(operand);
        if (arg ? argLayer[arg.getArgNumber()] < 0 &&
                      !earlyArgs.count(arg.getArgNumber())
                : head.count(operand.getDefiningOp()))
          isHead = true;
      }
    if (isHead)
      head.insert(&op);
    items.itemOf[&op] = isHead ? items.numLayers + 1 : layer + 1;
  }
  // An argument's copy runs with its first user.
  for (Operation &op : body.without_terminator())
    if (argCopy(&op) && !op.use_empty()) {
      int item = items.numItems();
      for (Operation *user : op.getUsers())
        item = std::min(item, items.itemOf.lookup(user));
      items.itemOf[&op] = item;
    }
  return items;
}

FailureOr<std::vector<plan::StageItem>>
itemCosts(func::FuncOp forward, const ForwardItems &items,
          const cost::DeviceSpec &device, double stateCopies) {
  // The planner's model (lib/Planner/ModelCosts.cpp): every op of the
  // differentiated step at its roofline time, per micro-batch when it
  // depends on the batch. Each backward op counts with the forward op
  // whose adjoint it computes, so the step is differentiated here into a
  // scratch function, costed and dropped.
  llvm::DenseMap<Operation *, Operation *> adjointOf;
  auto scratch =
      buildGradientFunction(forward, "forward_backward.stage_costs",
                            [&](Operation *created, Operation *from) {
                              if (from)
                                adjointOf[created] = from;
                            });
  if (failed(scratch))
    return failure();
  llvm::DenseSet<Value> batchDependent = cost::batchDependentValues(*scratch);
  auto perMicroBatch = [&](Operation *op) {
    if (!llvm::any_of(op->getResults(), [&](Value result) {
          return batchDependent.contains(result);
        }))
      return 0.0;
    return cost::opTime(cost::getOpWork(op), device);
  };
  // The scratch function begins with @forward's ops, cloned in order; the
  // backward ops follow.
  size_t numForward = forward.getBody().front().getOperations().size() - 1;
  llvm::SmallVector<Operation *> clones;
  llvm::DenseMap<Operation *, double> backwardSeconds;
  for (Operation &op : scratch->getBody().front().without_terminator()) {
    if (clones.size() < numForward) {
      clones.push_back(&op);
      continue;
    }
    if (Operation *from = adjointOf.lookup(&op))
      backwardSeconds[from] += perMicroBatch(&op);
  }

  std::vector<plan::StageItem> costs(items.numItems());
  auto bytes = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor ? cost::numElements(tensor.getShape()) *
                        cost::elementBytes(tensor.getElementType())
                  : 0.0;
  };
  llvm::SmallDenseSet<unsigned> counted;
  size_t index = 0;
  for (Operation &op : forward.getBody().front().without_terminator()) {
    plan::StageItem &item = costs[items.itemOf.lookup(&op)];
    Operation *clone = clones[index++];
    item.seconds += perMicroBatch(clone) + backwardSeconds.lookup(clone);
    for (Value result : op.getResults())
      item.activationBytes += bytes(result.getType());
    for (Value operand : op.getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand);
          arg && isFloatTensorType(arg.getType()) &&
          counted.insert(arg.getArgNumber()).second)
        item.staticBytes += stateCopies * bytes(arg.getType());
  }
  scratch->erase();
  return costs;
}

FailureOr<std::vector<int64_t>>
chooseStageBounds(func::FuncOp forward, const ForwardItems &items,
                  const std::vector<plan::StageItem> &costs,
                  const std::vector<double> &inFlight, int64_t numMicroBatches,
                  double capacity, ArrayRef<int64_t> layersPerStage) {
  int64_t numItems = items.numItems();
  int64_t numStages = inFlight.size();
  if (!layersPerStage.empty()) {
    if (int64_t(layersPerStage.size()) != numStages)
      return emitLineError(forward)
             << "--loom-pipeline: `layers` lists " << layersPerStage.size()
             << " stages, the pipeline has " << numStages;
    std::vector<int64_t> bounds{0};
    int64_t layer = 0;
    for (auto [s, count] : llvm::enumerate(layersPerStage)) {
      if (count < 0)
        return emitLineError(forward)
               << "--loom-pipeline: `layers` has a negative "
                  "count";
      layer += count;
      // Items: the embedding (0) goes with stage 0, the head with the last.
      bounds.push_back(s + 1 == layersPerStage.size() ? numItems : 1 + layer);
    }
    if (layer != items.numLayers)
      return emitLineError(forward)
             << "--loom-pipeline: `layers` places " << layer
             << " layers, the model has " << items.numLayers;
    return bounds;
  }
  if (numStages > numItems)
    return emitLineError(forward)
           << "--loom-pipeline: " << numStages << " stages but only "
           << numItems << " items to place (the embedding, " << items.numLayers
           << " layers and the head)";
  plan::StageProblem problem;
  problem.items = costs;
  problem.numStages = numStages;
  problem.numMicroBatches = numMicroBatches;
  problem.inFlight = inFlight;
  problem.capacity = capacity;
  if (auto partition = plan::partitionStages(problem))
    return partition->bounds;
  auto tightest = plan::partitionForMemory(problem);
  return emitLineError(forward)
         << "--loom-pipeline: no split of the items into " << numStages
         << " stages fits " << llvm::formatv("{0:e3}", capacity).str()
         << " bytes per device; the tightest needs "
         << llvm::formatv("{0:e3}", tightest ? tightest->peakBytes : 0.0).str();
}

} // namespace loom
