//===- Layers.cpp - The transformer layer of each imported op -------------===//
//
// An ONNX graph names its nodes and initializers as its exporter pleases,
// so the layers are read from its structure, as Family.cpp reads the
// model's shape: a pre-norm transformer with L attentions has 2L + 1 norms,
// two per layer and a final one. Layer l begins at its first norm: an op
// belongs to the deepest layer whose first norm it depends on, unless it
// depends on the final norm (the head). Ops before the first norm (the
// embedding) and ops of weights alone belong to no layer. A parameter
// belongs to a layer when every op that reads it does (a tied embedding,
// read by the embedding and the head, belongs to none). A graph of another
// shape is left unmarked, and the passes fall back to the parameters'
// names.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "dialects/Loom/LoomOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace loom::onnx_import {

void markLayers(func::FuncOp function) {
  Block &body = function.getBody().front();
  llvm::SmallVector<Operation *> norms;
  int64_t attentions = 0;
  for (Operation &op : body) {
    if (isa<LayerNormOp, RMSNormOp>(op))
      norms.push_back(&op);
    attentions += isa<AttentionOp>(op);
  }
  if (attentions == 0 || int64_t(norms.size()) != 2 * attentions + 1)
    return;
  llvm::DenseMap<Operation *, int64_t> firstNormOf;
  for (int64_t l = 0; l < attentions; ++l)
    firstNormOf[norms[2 * l]] = l;
  Operation *finalNorm = norms.back();

  Builder b(function.getContext());
  llvm::DenseMap<Operation *, int64_t> layerOf;
  llvm::DenseSet<Operation *> head;
  for (Operation &op : body.without_terminator()) {
    int64_t layer = -1;
    bool isHead = &op == finalNorm;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp()) {
        layer = std::max(layer, layerOf.lookup_or(def, -1));
        isHead |= head.contains(def);
      }
    if (auto first = firstNormOf.find(&op); first != firstNormOf.end())
      layer = std::max(layer, first->second);
    layerOf[&op] = layer;
    if (isHead)
      head.insert(&op);
    else if (layer >= 0)
      op.setAttr(kLayerAttr, b.getI64IntegerAttr(layer));
  }
  // An op of weights alone (a parameter's bf16 copy; not the embedding,
  // which reads the tokens) belongs to the layer of its readers, when they
  // share one.
  auto commonLayer = [](auto users) -> std::optional<int64_t> {
    std::optional<int64_t> layer;
    for (Operation *user : users) {
      auto mark = user->getAttrOfType<IntegerAttr>(kLayerAttr);
      int64_t userLayer = mark ? mark.getInt() : -1;
      if (layer && *layer != userLayer)
        return std::nullopt;
      layer = userLayer;
    }
    return layer && *layer >= 0 ? layer : std::nullopt;
  };
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    bool weightsOnly =
        op.getNumOperands() > 0 && llvm::all_of(op.getOperands(), [](Value v) {
          return isa<BlockArgument>(v) && isFloatTensorType(v.getType());
        });
    if (weightsOnly && !op.hasAttr(kLayerAttr) && !head.contains(&op))
      if (std::optional<int64_t> layer = commonLayer(op.getUsers()))
        op.setAttr(kLayerAttr, b.getI64IntegerAttr(*layer));
  }
  for (BlockArgument arg : body.getArguments()) {
    if (!isFloatTensorType(arg.getType()) || arg.use_empty())
      continue;
    if (std::optional<int64_t> layer = commonLayer(arg.getUsers()))
      function.setArgAttr(arg.getArgNumber(), kLayerAttr,
                          b.getI64IntegerAttr(*layer));
  }
}

} // namespace loom::onnx_import
