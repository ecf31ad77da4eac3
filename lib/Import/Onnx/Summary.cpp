//===- Summary.cpp - loom-import --summary of an ONNX import --------------===//

#include "loom/Import/ModelSummary.h"
#include "loom/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace loom {
namespace {

int64_t parameterCount(const OnnxImport &import) {
  int64_t n = 0;
  for (const CheckpointTensor &t : import.parameters) {
    int64_t elements = 1;
    for (int64_t d : t.shape)
      elements *= d;
    n += elements;
  }
  return n;
}

double flopsPerToken(const OnnxImport &import) {
  auto forward =
      const_cast<OnnxImport &>(import).module->lookupSymbol<func::FuncOp>(
          "forward");
  return forward ? trainingFlopsPerToken(forward) : 0.0;
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

} // namespace

void printOnnxSummary(raw_ostream &os, StringRef path,
                      const OnnxImport &import) {
  const OnnxImportReport &r = import.report;
  os << "model:        " << path << " ("
     << (r.producer.empty() ? "?" : r.producer) << ", opset " << r.opset << ", "
     << r.graphNodes << " nodes)\n";
  os << "batch:        " << r.microBatch << " x " << r.seqLen << " tokens\n";
  os << "parameters:   " << groupThousands(parameterCount(import)) << " in "
     << import.parameters.size() << " tensors\n";
  os << llvm::formatv("FLOPs/token:  {0:e4} (forward + backward)\n",
                      flopsPerToken(import));
  if (auto family = recognizeModel(import))
    os << "family:       " << family->typeName() << ", " << family->numLayers
       << " layers, hidden " << family->hidden << ", " << family->numHeads
       << " heads (" << family->numKVHeads << " key/value), MLP "
       << family->intermediate << ", vocabulary " << family->vocab
       << " (what loom-plan plans)\n";
  else
    os << "family:       none: " << toString(family.takeError()) << "\n";
  os << "loss:         "
     << (r.returnsLoss ? "the graph's own"
                       : "mean cross-entropy of the graph's logits")
     << "\n";
  os << "fused:        ";
  if (r.fused.empty())
    os << "none";
  bool first = true;
  for (const auto &[kind, count] : r.fused) {
    os << (first ? "" : ", ") << kind << " " << count;
    first = false;
  }
  os << "\n";
  os << "unfused:      " << (r.unfused.empty() ? "none" : "") << "\n";
  for (const std::string &line : r.unfused)
    os << "  " << line << "\n";
  if (!r.foldedInitializers.empty()) {
    os << "folded initializers (constants, not trained):\n";
    for (const std::string &name : r.foldedInitializers)
      os << "  " << name << "\n";
  }
  if (!r.renamed.empty()) {
    os << "renamed initializers:\n";
    for (const std::string &line : r.renamed)
      os << "  " << line << "\n";
  }
  os << "parameters by name:\n";
  for (const CheckpointTensor &t : import.parameters)
    os << llvm::formatv("  {0,-48} {1}\n", t.name, shapeString(t.shape));
}

void printOnnxSummaryJSON(raw_ostream &os, StringRef path,
                          const OnnxImport &import) {
  const OnnxImportReport &r = import.report;
  llvm::json::Object shapes, fused;
  for (const CheckpointTensor &t : import.parameters)
    shapes[t.name] = llvm::json::Array(t.shape);
  for (const auto &[kind, count] : r.fused)
    fused[kind] = count;
  llvm::json::Value family = nullptr;
  if (auto config = recognizeModel(import))
    family = llvm::json::Object{{"model_type", config->typeName()},
                                {"layers", config->numLayers},
                                {"hidden", config->hidden},
                                {"heads", config->numHeads},
                                {"kv_heads", config->numKVHeads},
                                {"intermediate", config->intermediate},
                                {"vocab", config->vocab}};
  else
    llvm::consumeError(config.takeError());
  llvm::json::Object root{
      {"source", "onnx"},
      {"family", std::move(family)},
      {"model", path},
      {"producer", r.producer},
      {"opset", r.opset},
      {"nodes", r.graphNodes},
      {"micro_batch", r.microBatch},
      {"seq_len", r.seqLen},
      {"parameters", parameterCount(import)},
      {"flops_per_token", flopsPerToken(import)},
      {"returns_loss", r.returnsLoss},
      {"fused", std::move(fused)},
      {"unfused", llvm::json::Array(r.unfused)},
      {"folded_initializers", llvm::json::Array(r.foldedInitializers)},
      {"renamed", llvm::json::Array(r.renamed)},
      {"parameter_shapes", std::move(shapes)},
  };
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

} // namespace loom
