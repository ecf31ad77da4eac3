//===- LoomDialect.h - The loom dialect -------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOMDIALECT_H
#define LOOM_DIALECT_LOOMDIALECT_H

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "llvm/Support/Error.h"

#include "dialects/Loom/LoomDialect.h.inc"

namespace loom {

/// Function argument and result attributes (and, for kAttentionCoreAttr, op
/// attributes) that carry meaning between the importer, the passes and the
/// executors.
///
/// A parameter's Hugging Face name, or "tokens", "labels", "step".
constexpr llvm::StringLiteral kNameAttr = "loom.name";
/// On the results of `--loom-autodiff`: the name of the argument whose
/// gradient this result is.
constexpr llvm::StringLiteral kGradOfAttr = "loom.grad_of";
/// On @train_step's arguments and results (`--loom-optimizer`): param, m, v,
/// step, data or loss.
constexpr llvm::StringLiteral kRoleAttr = "loom.role";

/// The transformer layer (i64 >= 0) of a parameter argument (and of its
/// gradient, moments and updated value) and of the forward ops the
/// importer built for that layer: what the pipeline's stages and the
/// planner's repeated layers are made of. Ops and arguments outside every
/// layer (the embedding, the head) have none.
constexpr llvm::StringLiteral kLayerAttr = "loom.layer";

/// A unit attribute on the ops `--loom-decompose-attention` creates for the
/// core of attention (the scores matmul, softmax, dropout and the output
/// matmul): what selective activation recomputation recomputes instead of
/// saving (Korthikanti et al. 2022).
constexpr llvm::StringLiteral kAttentionCoreAttr = "loom.attention_core";

/// On a dropout op (`dropout`, `dropout_grad`, or `attention` /
/// `attention_grad` with dropout) that `--loom-partition` runs on a split
/// tensor: the mesh axes that split each dimension of the masked tensor
/// (`x` / `dy`, or attention's q-shaped `[B, S, H, D]`), as an array of
/// arrays of i64, `[[0], [], [1]]`; and the grid they are axes of, a
/// symbol reference. The op draws each element's mask at its index in the
/// global tensor (DropoutMask.h).
constexpr llvm::StringLiteral kMaskSplitAxesAttr = "loom.mask_split_axes";
constexpr llvm::StringLiteral kMaskGridAttr = "loom.mask_grid";
/// On a dropout op of a pipelined step (`--loom-pipeline`): the number M
/// (i64) of micro-batches the batch, dimension 0 of the masked tensor, was
/// cut into. The executor says which micro-batch runs, and micro-batch k
/// draws the masks of rows [k·b, (k+1)·b) of the whole batch.
constexpr llvm::StringLiteral kMaskMicroBatchesAttr = "loom.mask_micro_batches";

/// Pipeline parallelism (`--loom-pipeline`, `--loom-split-stages`,
/// docs/pipeline.md). On ops of the training step: the pipeline stage
/// (i64) that runs the op, and a unit attribute on the ops of the backward
/// pass; on the module: the pipeline's shape (a dictionary: schedule,
/// ranks, virtual_stages, micro_batches, recompute, stage_items), and after
/// the split the serialized schedule (loom/Schedule/Serialize.h JSON).
constexpr llvm::StringLiteral kStageAttr = "loom.stage";
constexpr llvm::StringLiteral kBackwardAttr = "loom.backward";
constexpr llvm::StringLiteral kPipelineAttr = "loom.pipeline";
constexpr llvm::StringLiteral kScheduleAttr = "loom.schedule";
/// On the `loom.add` that sums the gradient contributions of a parameter
/// used by several stages (GPT-2's tied embedding): the stages keep their
/// contributions apart until the step's gradient reduction.
constexpr llvm::StringLiteral kTiedGradientAttr = "loom.tied_gradient";
/// On a stage function (`--loom-split-stages`): {stage, kind} with kind
/// forward, backward, backward_input, backward_weight or optimizer.
constexpr llvm::StringLiteral kStageFunctionAttr = "loom.stage_function";
/// On a stage function's arguments and results that are not @train_step's
/// (activations, their gradients, saved values, accumulators): the key
/// that names the value of the training step they carry.
constexpr llvm::StringLiteral kValueKeyAttr = "loom.value";
/// On an accumulator argument of an optimizer function: the stages whose
/// accumulators of the same key are summed into it before the step.
constexpr llvm::StringLiteral kTiedStagesAttr = "loom.tied_stages";

/// On a `shard` collective of a per-device program
/// (`--loom-overlap-collectives`): the lowering starts its transfer where it
/// stands and waits for it just before the first op that reads its result.
constexpr llvm::StringLiteral kOverlapAttr = "loom.overlap";
/// Sharding (`--loom-auto-shard`, `--loom-partition`). On an argument or
/// result: a tensor's split axes in `shard.sharding`'s order, e.g.
/// `loom.split_axes = [[0], [], [1]]`: one list of mesh axes per dimension,
/// major axis first; trailing dimensions may be left out (not split). On an
/// argument of the function --loom-auto-shard plans it pins that
/// argument's layout; the partitioner marks the layout of partitioned
/// arguments and results with it. On a `shard.shard`: the mesh axes its
/// value holds partial sums over (upstream `shard` has no partial state on
/// values).
constexpr llvm::StringLiteral kSplitAxesAttr = "loom.split_axes";
constexpr llvm::StringLiteral kPartialAxesAttr = "loom.partial_axes";

/// On @train_step (`--loom-optimizer`): the optimizer and its
/// hyperparameters, a dictionary {kind, lr, ...}.
constexpr llvm::StringLiteral kOptimizerAttr = "loom.optimizer";

/// The lowering (`--loom-lower-cpu`, `--loom-lower-cuda`). On a lowered
/// function: its arguments' and results' buffers (kArgsAttr,
/// kResultsAttr), its workspace and peak live bytes, and the backend whose
/// kernels it calls (loom-compile copies it into plan.json's "backend");
/// on the module: the communicator groups its collectives use.
constexpr llvm::StringLiteral kArgsAttr = "loom.args";
constexpr llvm::StringLiteral kResultsAttr = "loom.results";
constexpr llvm::StringLiteral kWorkspaceBytesAttr = "loom.workspace_bytes";
constexpr llvm::StringLiteral kPeakLiveBytesAttr = "loom.peak_live_bytes";
constexpr llvm::StringLiteral kTargetAttr = "loom.target";
constexpr llvm::StringLiteral kGroupsAttr = "loom.groups";

/// On the module: how far the passes have taken the training step, so that
/// every tool can tell whether it can execute it (checkExecutable).
/// Absent: whole (@train_step as --loom-optimizer wrote it, perhaps
/// annotated); "pipelined": --loom-pipeline cut @train_step into
/// micro-batches and tagged its stages, which --inline and
/// --loom-split-stages must still turn into stage functions; "partitioned":
/// --loom-partition rewrote @train_step into one device's program;
/// "split": --loom-split-stages made the stage functions and the schedule.
constexpr llvm::StringLiteral kStateAttr = "loom.state";
enum class ModuleState { Whole, Pipelined, Partitioned, Split };
ModuleState getModuleState(mlir::ModuleOp module);
void setModuleState(mlir::ModuleOp module, ModuleState state);
llvm::StringRef stringifyModuleState(ModuleState state);
/// Fails, with a message saying what is missing, unless `module` is in one
/// of the `runs` states (what `tool` can execute).
llvm::Error checkExecutable(mlir::ModuleOp module,
                            llvm::ArrayRef<ModuleState> runs,
                            llvm::StringRef tool);

/// A ranked tensor of floats: what has a gradient and what an optimizer
/// updates.
inline bool isFloatTensorType(mlir::Type type) {
  auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
  return tensor && llvm::isa<mlir::FloatType>(tensor.getElementType());
}

} // namespace loom

#endif // LOOM_DIALECT_LOOMDIALECT_H
