//===- Family.cpp - The model family an imported graph is -----------------===//
//
// loom-plan's cost model builds the programs of the families Loom knows
// (GPT-2, Llama, Qwen2, Mistral, GPT-NeoX) at any depth and tensor-parallel
// width, so it plans a graph through the configuration of its family. The
// configuration is read from the fused ops of the imported @forward: the
// embedding (vocabulary, width), the attentions (layers, heads, key/value
// heads, head size), the norms (kind, epsilon), the activations (kind, MLP
// width), RoPE (theta, rotary dims) or learned positions, the parallel
// residual (both norms of a layer read one value), the tied head; then the
// configuration's parameters must be the graph's, shape for shape.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"
#include "loom/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace loom {
namespace {

llvm::Error notAFamily(const Twine &why) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      ("the graph is not one of the families loom-plan's cost model builds "
       "(GPT-2, Llama, Qwen2, Mistral, GPT-NeoX): " +
       why)
          .str());
}

/// A parameter's shape with a matrix's dimensions in order: a graph may
/// hold a weight transposed under a generated name (without --weights).
SmallVector<int64_t> canonical(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> sorted(shape.begin(), shape.end());
  if (sorted.size() == 2)
    llvm::sort(sorted);
  return sorted;
}

/// The parameters' shapes, sorted: what a configuration must reproduce.
std::vector<SmallVector<int64_t>> shapesOf(ArrayRef<ParamSpec> specs) {
  std::vector<SmallVector<int64_t>> shapes;
  for (const ParamSpec &spec : specs)
    shapes.push_back(canonical(spec.shape));
  llvm::sort(shapes);
  return shapes;
}

} // namespace

llvm::Expected<ModelConfig> recognizeModel(const OnnxImport &import) {
  auto forward =
      const_cast<OnnxImport &>(import).module->lookupSymbol<func::FuncOp>(
          "forward");
  SmallVector<EmbeddingOp> embeddings;
  SmallVector<AttentionOp> attentions;
  SmallVector<Operation *> norms, activations;
  SmallVector<RopeOp> ropes;
  SmallVector<MatmulOp> matmuls;
  forward.walk([&](Operation *op) {
    if (auto e = dyn_cast<EmbeddingOp>(op))
      embeddings.push_back(e);
    else if (auto a = dyn_cast<AttentionOp>(op))
      attentions.push_back(a);
    else if (isa<LayerNormOp, RMSNormOp>(op))
      norms.push_back(op);
    else if (isa<GeluOp, GeluErfOp, SiluOp>(op))
      activations.push_back(op);
    else if (auto r = dyn_cast<RopeOp>(op))
      ropes.push_back(r);
    else if (auto m = dyn_cast<MatmulOp>(op))
      matmuls.push_back(m);
  });
  if (embeddings.size() != 1)
    return notAFamily("it has " + Twine(embeddings.size()) +
                      " token embeddings, not one");
  if (attentions.empty())
    return notAFamily("it has no fused attention (see --summary)");
  ModelConfig c{};
  ArrayRef<int64_t> table = embeddings[0].getTable().getType().getShape();
  c.vocab = table[0];
  c.hidden = table[1];
  c.numLayers = attentions.size();
  ArrayRef<int64_t> q = attentions[0].getQ().getType().getShape();
  ArrayRef<int64_t> k = attentions[0].getK().getType().getShape();
  c.numHeads = q[2];
  c.numKVHeads = k[2];
  c.headDimension = q[3];
  for (AttentionOp a : attentions)
    if (!a.getCausal() || a.getQ().getType() != attentions[0].getQ().getType())
      return notAFamily("its attentions are not all causal and alike");
  if (std::fabs(attentions[0].getScale().convertToDouble() *
                    std::sqrt(double(c.headDimension)) -
                1.0) > 1e-6)
    return notAFamily("its attention scale is not 1/sqrt(head size)");

  bool rms = !norms.empty() && isa<RMSNormOp>(norms[0]);
  if (int64_t(norms.size()) != 2 * c.numLayers + 1 ||
      llvm::any_of(norms,
                   [&](Operation *n) { return isa<RMSNormOp>(n) != rms; }))
    return notAFamily("it does not have two norms of one kind per layer and "
                      "a final one");
  c.normEpsilon =
      rms ? cast<RMSNormOp>(norms[0]).getEpsilon().convertToDouble()
          : cast<LayerNormOp>(norms[0]).getEpsilon().convertToDouble();
  if (int64_t(activations.size()) != c.numLayers ||
      llvm::any_of(activations, [&](Operation *a) {
        return a->getName() != activations[0]->getName();
      }))
    return notAFamily("it does not have one activation of one kind per layer");
  c.activation = isa<SiluOp>(activations[0])      ? Activation::Silu
                 : isa<GeluErfOp>(activations[0]) ? Activation::GeluErf
                                                  : Activation::GeluTanh;
  c.intermediate =
      cast<RankedTensorType>(activations[0]->getResult(0).getType())
          .getShape()
          .back();
  // The head: the last matmul, tied when its weight is the embedding's.
  c.tieEmbeddings =
      !matmuls.empty() && matmuls.back().getRhs() == embeddings[0].getTable();
  // Both norms of layer 0 read one value: the parallel residual.
  c.parallelResidual = norms[0]->getOperand(0) == norms[1]->getOperand(0);
  c.embdDropout = c.residDropout = c.attnDropout = 0;
  int64_t seq = import.report.seqLen;
  c.maxPositions = seq;

  if (!ropes.empty()) {
    c.ropeTheta = ropes[0].getTheta().convertToDouble();
    c.rotaryDim = ropes[0].getType().getShape().back();
    if (int64_t(ropes.size()) != 2 * c.numLayers)
      return notAFamily("RoPE is not applied to every layer's q and k");
  }
  // Families by their ops; the configuration's parameters decide the rest
  // (biases on q, k and v).
  SmallVector<ModelConfig> candidates;
  if (rms && c.activation == Activation::Silu && !ropes.empty() &&
      c.rotaryDim == c.headDimension && !c.parallelResidual) {
    for (ModelType type : {ModelType::Llama, ModelType::Qwen2}) {
      ModelConfig option = c;
      option.type = type;
      option.qkvBias = type == ModelType::Qwen2;
      candidates.push_back(option);
    }
  } else if (!rms && ropes.empty() && c.activation == Activation::GeluTanh &&
             !c.parallelResidual) {
    ModelConfig option = c;
    option.type = ModelType::GPT2;
    option.qkvBias = true;
    option.tieEmbeddings = true;
    option.rotaryDim = 0;
    // The learned positions: a [P, hidden] parameter other than the table.
    for (const CheckpointTensor &t : import.parameters)
      if (t.shape.size() == 2 && t.shape[1] == c.hidden &&
          t.shape[0] != c.vocab)
        option.maxPositions = std::max(option.maxPositions, t.shape[0]);
    candidates.push_back(option);
  } else if (!rms && !ropes.empty() && c.activation != Activation::Silu) {
    for (bool bias : {true, false}) {
      ModelConfig option = c;
      option.type = ModelType::GPTNeoX;
      option.qkvBias = bias;
      candidates.push_back(option);
    }
  }
  std::vector<SmallVector<int64_t>> graphShapes;
  for (const CheckpointTensor &t : import.parameters)
    graphShapes.push_back(canonical(t.shape));
  llvm::sort(graphShapes);
  for (const ModelConfig &option : candidates)
    if (shapesOf(listParameters(option)) == graphShapes)
      return option;
  if (candidates.empty())
    return notAFamily("its norms, activation and position encoding are no "
                      "family's");
  return notAFamily("its parameters are not those of a " +
                    candidates[0].typeName() + " of its sizes");
}

} // namespace loom
