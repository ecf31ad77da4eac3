//===- ModelSummary.cpp - Size and cost of an imported model --------------===//

#include "loom/Import/ModelSummary.h"

#include "dialects/Loom/LoomOps.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace loom {

/// 2 FLOPs (multiply + add) per multiply-accumulate.
static double matmulFlops(MatmulOp op) {
  ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
  int64_t k = op.getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
  return 2.0 * op.getType().getNumElements() * k;
}

/// Q K^T and P V: 2 * (2 * B * Hq * S * Skv * D).
static double attentionFlops(AttentionOp op) {
  ArrayRef<int64_t> q = op.getQ().getType().getShape();
  int64_t kvSeq = op.getK().getType().getDimSize(1);
  return 4.0 * q[0] * q[2] * q[1] * kvSeq * q[3];
}

double trainingFlopsPerToken(func::FuncOp forward) {
  double forwardFlops = 0;
  forward.walk([&](Operation *op) {
    if (auto matmul = dyn_cast<MatmulOp>(op))
      forwardFlops += matmulFlops(matmul);
    else if (auto attention = dyn_cast<AttentionOp>(op))
      forwardFlops += attentionFlops(attention);
  });
  for (BlockArgument arg : forward.getArguments()) {
    auto name =
        forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    if (name && name.getValue() == "tokens")
      return 3.0 * forwardFlops /
             cast<RankedTensorType>(arg.getType()).getNumElements();
  }
  return 0;
}

ModelSummary summarizeModel(const ModelConfig &config, func::FuncOp forward) {
  ModelSummary summary;
  for (const ParamSpec &spec : listParameters(config))
    summary.parameters += spec.numElements();
  summary.flopsPerToken = trainingFlopsPerToken(forward);
  return summary;
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

std::string groupThousands(int64_t n) {
  std::string digits = std::to_string(n), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      text += ',';
    text += digits[i];
  }
  return text;
}

void printSummary(llvm::raw_ostream &os, const ModelConfig &config,
                  const ImportOptions &options, const ModelSummary &summary) {
  os << "model:        " << config.typeName() << ", " << config.numLayers
     << " layers, hidden " << config.hidden << ", " << config.numHeads
     << " heads (" << config.numKVHeads << " key/value), MLP "
     << config.intermediate << ", vocabulary " << config.vocab << "\n";
  os << "parameters:   " << groupThousands(summary.parameters) << "\n";
  os << llvm::formatv("FLOPs/token:  {0:e4} (forward + backward, sequence "
                      "length {1})\n",
                      summary.flopsPerToken, options.seqLenFor(config));
  std::string layer0 = config.layerPrefix(0);
  // "transformer.h.0." -> "transformer.h.".
  std::string layerPrefix = layer0.substr(0, layer0.size() - 2);
  SmallVector<ParamSpec> params = listParameters(config);
  os << "per layer (" << config.numLayers << " alike), layer 0:\n";
  for (const ParamSpec &spec : params)
    if (StringRef(spec.name).starts_with(layer0))
      os << llvm::formatv("  {0,-48} {1}\n", spec.name,
                          shapeString(spec.shape));
  os << "outside the layers:\n";
  for (const ParamSpec &spec : params)
    if (!StringRef(spec.name).starts_with(layerPrefix))
      os << llvm::formatv("  {0,-48} {1}\n", spec.name,
                          shapeString(spec.shape));
}

void printSummaryJSON(llvm::raw_ostream &os, const ModelConfig &config,
                      const ImportOptions &options,
                      const ModelSummary &summary) {
  llvm::json::Object shapes;
  for (const ParamSpec &spec : listParameters(config))
    shapes[spec.name] = llvm::json::Array(spec.shape);
  llvm::json::Object root{
      {"model_type", config.typeName()},
      {"parameters", summary.parameters},
      {"flops_per_token", summary.flopsPerToken},
      {"seq_len", options.seqLenFor(config)},
      {"layers", config.numLayers},
      {"hidden", config.hidden},
      {"heads", config.numHeads},
      {"kv_heads", config.numKVHeads},
      {"intermediate", config.intermediate},
      {"vocab", config.vocab},
      {"parameter_shapes", std::move(shapes)},
  };
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

} // namespace loom
