//===- ModelImporter.h - Building @forward from a model config --*- C++ -*-===//
//
// Turns a ModelConfig plus training options into a module holding
//
//   func.func @forward(params..., %tokens, %labels[, %step]) -> tensor<f32>
//
// built from loom ops: the mean next-token cross-entropy of one micro-batch.
// Parameters are f32 (master weights) with their Hugging Face names in the
// `loom.name` argument attribute, in the order of HF's state dict.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_MODELIMPORTER_H
#define LOOM_IMPORT_MODELIMPORTER_H

#include "loom/Import/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <optional>

namespace loom {

/// f32 everywhere, or bf16 compute copies of f32 master weights.
enum class Precision { F32, BF16 };

struct ImportOptions {
  int64_t microBatch = 1;
  /// Tokens per sequence; 0 means the model's maximum.
  int64_t seqLen = 0;
  Precision precision = Precision::F32;
  /// Overrides of the config's dropout probabilities.
  std::optional<double> embdDropout, residDropout, attnDropout;
  /// Seed of the dropout masks.
  int64_t seed = 0;

  /// The sequence length these options give for `config`: by default the
  /// model's positions, at most its sliding window.
  int64_t seqLenFor(const ModelConfig &config) const {
    if (seqLen)
      return seqLen;
    if (config.slidingWindow)
      return std::min(config.maxPositions, config.slidingWindow);
    return config.maxPositions;
  }
};

/// How Hugging Face initializes a parameter (see ParamInit.h).
enum class InitKind {
  Normal,         ///< N(0, 0.02): embeddings and linear weights
  ResidualNormal, ///< N(0, 0.02 / sqrt(2 L)): GPT-2's residual projections
  Zeros,          ///< biases, LayerNorm shifts
  Ones,           ///< LayerNorm and RMSNorm scales
};

/// One parameter tensor: its Hugging Face name and shape (HF's layout:
/// GPT-2's Conv1D weights are [in, out], the other families' Linear
/// weights [out, in]).
struct ParamSpec {
  std::string name;
  llvm::SmallVector<int64_t, 2> shape;
  InitKind init = InitKind::Normal;
  /// The transformer layer it belongs to, or -1 (the embedding, the head).
  int64_t layer = -1;
  int64_t numElements() const;
};

/// The parameters of the model in state-dict order (tied weights once).
llvm::SmallVector<ParamSpec> listParameters(const ModelConfig &config);

/// Builds the module. Fails with a message for options the model cannot
/// take (a sequence longer than its positions or its sliding window, a
/// dropout probability outside [0, 1)). Dropout sites (GPT-2: embeddings,
/// then per layer attention, attention output, MLP output; the other
/// families: attention) get keys 0, 1, ... in the order the model runs
/// them.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext &context, const ModelConfig &config,
            const ImportOptions &options);

} // namespace loom

#endif // LOOM_IMPORT_MODELIMPORTER_H
