//===- Stages.cpp - Which pipeline stage runs each forward op -------------===//

#include "passes/Pipeline/Stages.h"

#include "loom/AutoShard/Layers.h"
#include "loom/CostModel/OpCost.h"
#include "loom/Planner/StageDP.h"

#include "dialects/Loom/LoomDialect.h"

#include "llvm/ADT/SetVector.h"

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

std::vector<double> itemSeconds(func::FuncOp forward, const ForwardItems &items,
                                const cost::DeviceSpec &device) {
  std::vector<double> seconds(items.numItems(), 0.0);
  for (Operation &op : forward.getBody().front().without_terminator())
    seconds[items.itemOf.lookup(&op)] +=
        3 * cost::opTime(cost::getOpWork(&op), device);
  return seconds;
}

FailureOr<std::vector<int64_t>>
chooseStageBounds(func::FuncOp forward, const ForwardItems &items,
                  const std::vector<double> &seconds, int64_t numStages,
                  int64_t numMicroBatches, ArrayRef<int64_t> layersPerStage) {
  int64_t numItems = items.numItems();
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
  for (double s : seconds)
    problem.items.push_back({s, 0, 0});
  problem.numStages = numStages;
  problem.numMicroBatches = numMicroBatches;
  problem.inFlight.assign(numStages, 1.0);
  auto partition = plan::partitionStages(problem);
  if (!partition)
    return forward.emitError("--loom-pipeline: no split of the items into ")
           << numStages << " stages";
  return partition->bounds;
}

} // namespace loom
