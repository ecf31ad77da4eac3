//===- TrainStep.h - The calling convention of @train_step ------*- C++ -*-===//
//
// `--loom-optimizer` builds
//
//   @train_step(params..., [m..., v...,] step, tokens, labels)
//       -> (params'..., [m'..., v'...,] loss)
//
// and marks every argument with `loom.role` (param, m, v, step, data) and
// its `loom.name`. This header reads that convention back, so that every
// executor (the reference interpreter, the compiled runtimes) binds
// checkpoints, optimizer state and batches the same way.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRAINING_TRAINSTEP_H
#define LOOM_TRAINING_TRAINSTEP_H

#include "loom/Checkpoint/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace loom {

/// One trained parameter of @train_step.
struct TrainedParam {
  std::string name; ///< Hugging Face name (`loom.name`)
  llvm::SmallVector<int64_t> shape;
};

/// Where each role sits in @train_step's arguments and results.
struct TrainStepLayout {
  std::vector<TrainedParam> params; ///< arguments 0..n-1, results 0..n-1
  bool hasMoments = false;          ///< AdamW: m and v follow the params
  unsigned stepArg = 0;
  unsigned tokensArg = 0, labelsArg = 0;
  int64_t microBatch = 0, seqLen = 0; ///< the tokens' shape
  unsigned lossResult = 0;

  /// Arguments (and updated-state results) of the parameters and moments.
  size_t numStateArgs() const { return params.size() * (hasMoments ? 3 : 1); }
};

/// Reads the layout of `fn`; errors name what is missing or out of place.
llvm::Expected<TrainStepLayout> analyzeTrainStep(mlir::func::FuncOp fn);

/// The tables of the `loom.embedding` ops that look up the token ids `ids`
/// (the step's tokens argument): through func.call into the callee (a step
/// calls @forward_backward), reshapes and transposes, and ops of the
/// `shard` dialect, which move ids without changing them. A table's first
/// dimension is the vocabulary every id must stay below; the caller checks
/// the token file against it before training. Empty when no embedding reads
/// `ids`.
llvm::SmallVector<mlir::Value> embeddingTablesOf(mlir::Value ids);

/// The vocabulary every token id of `module`'s step must stay below: the
/// smallest whole first dimension of the tables (embeddingTablesOf) that
/// the step's tokens index, wherever a function takes them (`loom.role`
/// "data", `loom.name` "tokens": @train_step's argument, or the first
/// stage's after --loom-split-stages). A table that is an argument split
/// by rows (`loom.split_axes` on the module's `shard.grid`) counts all its
/// shards' rows, not one device's. std::nullopt when no embedding reads
/// the tokens.
std::optional<int64_t> tokenVocabulary(mlir::ModuleOp module);

/// The tensor of `ckpt` holding parameter `name`: the name itself or, for
/// GPT-2 files saved from `GPT2Model`, the name without `transformer.`.
const CheckpointTensor *findParameter(const Checkpoint &ckpt,
                                      llvm::StringRef name);

/// The tensor of every parameter of `params` (of `layout`), in order, with
/// dtypes and shapes checked; errors name `fileName` and the tensor.
llvm::Expected<std::vector<const CheckpointTensor *>>
bindParameters(llvm::ArrayRef<TrainedParam> params, const Checkpoint &ckpt,
               llvm::StringRef fileName);
inline llvm::Expected<std::vector<const CheckpointTensor *>>
bindParameters(const TrainStepLayout &layout, const Checkpoint &ckpt,
               llvm::StringRef fileName) {
  return bindParameters(layout.params, ckpt, fileName);
}

} // namespace loom

#endif // LOOM_TRAINING_TRAINSTEP_H
