//===- Stages.cpp - Which pipeline stage runs each forward op -------------===//

#include "passes/Pipeline/Stages.h"

#include "loom/AutoShard/Layers.h"
#include "loom/CostModel/OpCost.h"
#include "loom/Planner/StageDP.h"

#include "dialects/Loom/LoomDialect.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace loom {

FailureOr<ForwardItems> findForwardItems(func::FuncOp forward) {
  Block &body = forward.getBody().front();
  ForwardItems items;
  std::vector<int> argLayer;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto name = forward.getArgAttrOfType<StringAttr>(i, kNameAttr);
    argLayer.push_back(name ? autoshard::layerOfName(name.getValue()) : -1);
    items.numLayers = std::max(items.numLayers, argLayer.back() + 1);
  }
  if (items.numLayers == 0)
    return forward.emitError(
        "--loom-pipeline: no argument names a transformer layer "
        "(`h.<i>.`, `layers.<i>.`, `blocks.<i>.`), so there is nothing to "
        "cut into stages");
  int last = items.numLayers - 1;

  // Layer of each op: the deepest layer it depends on.
  DenseMap<Operation *, int> layerOf;
  auto layerOfValue = [&](Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
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
    if (layer < last)
      for (Value operand : op.getOperands())
        if (auto arg = dyn_cast<BlockArgument>(operand))
          earlyArgs.insert(arg.getArgNumber());
  }
  llvm::SmallPtrSet<Operation *, 16> head;
  for (Operation &op : body.without_terminator()) {
    int layer = layerOf[&op];
    bool isHead = false;
    if (layer == last)
      for (Value operand : op.getOperands()) {
        auto arg = dyn_cast<BlockArgument>(operand);
        if (arg ? argLayer[arg.getArgNumber()] < 0 &&
                      !earlyArgs.count(arg.getArgNumber())
                : head.count(operand.getDefiningOp()))
          isHead = true;
      }
    if (isHead)
      head.insert(&op);
    items.itemOf[&op] = isHead ? items.numLayers + 1 : layer + 1;
  }
  return items;
}

std::vector<plan::StageItem> itemCosts(func::FuncOp forward,
                                       const ForwardItems &items,
                                       const cost::DeviceSpec &device,
                                       double stateCopies) {
  std::vector<plan::StageItem> costs(items.numItems());
  auto bytes = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor ? cost::numElements(tensor.getShape()) *
                        cost::elementBytes(tensor.getElementType())
                  : 0.0;
  };
  llvm::SmallDenseSet<unsigned> counted;
  for (Operation &op : forward.getBody().front().without_terminator()) {
    plan::StageItem &item = costs[items.itemOf.lookup(&op)];
    item.seconds += 3 * cost::opTime(cost::getOpWork(&op), device);
    for (Value result : op.getResults())
      item.activationBytes += bytes(result.getType());
    for (Value operand : op.getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand);
          arg && isFloatTensorType(arg.getType()) &&
          counted.insert(arg.getArgNumber()).second)
        item.staticBytes += stateCopies * bytes(arg.getType());
  }
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
      return forward.emitError("--loom-pipeline: `layers` lists ")
             << layersPerStage.size() << " stages, the pipeline has "
             << numStages;
    std::vector<int64_t> bounds{0};
    int64_t layer = 0;
    for (auto [s, count] : llvm::enumerate(layersPerStage)) {
      if (count < 0)
        return forward.emitError("--loom-pipeline: `layers` has a negative "
                                 "count");
      layer += count;
      // Items: the embedding (0) goes with stage 0, the head with the last.
      bounds.push_back(s + 1 == layersPerStage.size() ? numItems : 1 + layer);
    }
    if (layer != items.numLayers)
      return forward.emitError("--loom-pipeline: `layers` places ")
             << layer << " layers, the model has " << items.numLayers;
    return bounds;
  }
  if (numStages > numItems)
    return forward.emitError("--loom-pipeline: ")
           << numStages << " stages but only " << numItems
           << " items to place (the embedding, " << items.numLayers
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
  return forward.emitError("--loom-pipeline: no split of the items into ")
         << numStages << " stages fits "
         << llvm::formatv("{0:e3}", capacity).str()
         << " bytes per device; the tightest needs "
         << llvm::formatv("{0:e3}", tightest ? tightest->peakBytes : 0.0).str();
}

} // namespace loom
