//===- OnnxImporter.h - ONNX graphs to @forward -----------------*- C++ -*-===//
//
// Imports a causal language model exported to ONNX (PyTorch's exporters)
// as the module the config importer writes:
//
//   func.func @forward(params..., %tokens: tensor<BxSxi32>,
//                      %labels: tensor<BxSxi32>) -> tensor<f32>
//
// The graph takes token ids and returns logits [B, S, V] (the mean
// cross-entropy against %labels is added) or the loss itself (labels as a
// second input). Float initializers are the parameters, under their names;
// integer initializers, Constant nodes and the shape arithmetic are folded
// at import, with dynamic batch and sequence axes specialized to the
// options. Patterns of the fused ops (LayerNorm, RMSNorm, both GELUs,
// SiLU, rotary embeddings, causal attention with grouped-query heads)
// become loom's fused ops; the rest imports as plain loom ops.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_ONNXIMPORTER_H
#define LOOM_IMPORT_ONNXIMPORTER_H

#include "loom/Checkpoint/Safetensors.h"
#include "loom/Import/ModelImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <vector>

namespace loom {

struct OnnxImportOptions {
  /// Sequences per micro-batch; 0: the graph's static batch (1 for a
  /// dynamic batch axis).
  int64_t microBatch = 0;
  /// Tokens per sequence; 0: the graph's static sequence length (an error
  /// for a dynamic sequence axis).
  int64_t seqLen = 0;
  Precision precision = Precision::F32;
  /// A safetensors file of the model's parameters: graph inputs named in it
  /// are parameters (a graph exported without its weights), its tensors
  /// override initializers of the same name, and an initializer the
  /// exporter renamed takes the name of the tensor it equals (as is or
  /// transposed). Initializers named in it are never folded.
  std::string weightsPath;
  /// Whether OnnxImport::parameters carries the values (for
  /// --init-weights), or names and shapes only.
  bool parameterValues = true;
};

/// What the import found, for `loom-import --summary`.
struct OnnxImportReport {
  std::string producer;
  int64_t opset = 0;
  int64_t microBatch = 0, seqLen = 0;
  int64_t graphNodes = 0;
  /// Whether the graph returns the loss (else Loom added the cross-entropy
  /// of its logits).
  bool returnsLoss = false;
  /// Fused patterns by kind ("attention", "layernorm", "rmsnorm", "gelu",
  /// "gelu_erf", "silu", "rope", "causal_softmax", "cross_entropy") and how
  /// often each was found.
  std::map<std::string, int64_t> fused;
  /// Patterns that stayed unfused: "attention at node 'N': why".
  std::vector<std::string> unfused;
  /// Float initializers the graph only combines with constants (buffers
  /// such as rotary inverse frequencies): folded, not parameters.
  std::vector<std::string> foldedInitializers;
  /// Initializers imported under another name: "from -> to".
  std::vector<std::string> renamed;
};

struct OnnxImport {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The parameters in @forward's order, under their names and with their
  /// shapes, and (OnnxImportOptions::parameterValues) their initial values
  /// from the initializers or the weights file.
  std::vector<CheckpointTensor> parameters;
  OnnxImportReport report;
};

/// Imports the ONNX model at `path`. Errors are one line naming the file
/// and, where one is at fault, the node, its op type and the opset: a file
/// that is not ONNX, an op or attribute Loom cannot take, a dynamic axis
/// without its option, a shape that cannot be folded, a weights file that
/// does not fit.
llvm::Expected<OnnxImport> importOnnx(mlir::MLIRContext &context,
                                      llvm::StringRef path,
                                      const OnnxImportOptions &options);

/// `loom-import MODEL.onnx --summary`: the graph, the parameters, FLOPs
/// per token, which patterns were fused and which stayed unfused, the
/// initializers folded or renamed, and every parameter's shape.
void printOnnxSummary(llvm::raw_ostream &os, llvm::StringRef path,
                      const OnnxImport &import);

/// The same as one JSON object: `parameters`, `flops_per_token`, `fused`
/// (kind: count), `unfused`, `folded_initializers`, `renamed`,
/// `parameter_shapes`, ...
void printOnnxSummaryJSON(llvm::raw_ostream &os, llvm::StringRef path,
                          const OnnxImport &import);

/// The configuration of the family an imported graph is (GPT-2, Llama,
/// Qwen2, GPT-NeoX; Mistral is a Llama), read from its fused ops and
/// checked against its parameters' shapes: what loom-plan's cost model
/// plans for a graph. An error says why the graph is no family.
llvm::Expected<ModelConfig> recognizeModel(const OnnxImport &import);

/// Whether `path` names an ONNX model (by its extension).
bool isOnnxPath(llvm::StringRef path);

} // namespace loom

#endif // LOOM_IMPORT_ONNXIMPORTER_H
