//===- Pipeline.h - The reference interpreter on a pipelined step -*- C++
//-*-===//
//
// Runs one training step of a module that --loom-split-stages cut into
// stage functions: every pipeline rank walks its instruction stream of the
// module's `loom.schedule` (forward/backward of stage s on micro-batch k,
// sends, receives, the gradient reduction, the optimizer), each stage
// function running on every device of the stage's `shard.grid` (the
// multi-rank interpreter) or alone when there is none. Transfers carry a
// stage function's activation (gradient) results to the next (previous)
// stage's arguments of the same `loom.value` key; a receive waits for its
// send, so the ranks advance as the schedule lets them, and a schedule
// that deadlocks is an error naming every blocked rank. It is the oracle of
// the pipeline: a pipelined step must give what the unpipelined one gives.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INTERPRETER_PIPELINE_H
#define LOOM_INTERPRETER_PIPELINE_H

#include "loom/Interpreter/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>

namespace loom::interp {

/// The step's state and batch, or its results, whole (unsharded), keyed
/// `<role>:<name>` as @train_step's arguments and results carry them
/// (`param:transformer.wte.weight`, `m:...`, `v:...`, `step:step`,
/// `data:tokens`, `data:labels`; results also `loss`).
using NamedTensors = std::map<std::string, Tensor>;

/// The key of argument or result attributes `attrs` (null when they have
/// no `loom.role`).
std::string stepKey(mlir::DictionaryAttr attrs);

/// Statistics of a run, for tests and reports.
struct PipelineRunStats {
  int64_t instructions = 0;  ///< executed over all pipeline ranks
  int64_t transfers = 0;     ///< sends matched by their receives
  int64_t peakSavedSets = 0; ///< most (stage, micro-batch) saves held at once
};

/// Runs one step. `inputs` holds every argument of the original step; the
/// data (`data:*`) has the whole batch, cut into the schedule's
/// micro-batches along dimension 0. Returns every result of the step:
/// updated parameters and moments, and the loss summed over micro-batches.
llvm::Expected<NamedTensors> runPipelineStep(mlir::ModuleOp module,
                                             const NamedTensors &inputs,
                                             Precision precision,
                                             PipelineRunStats *stats = nullptr);

} // namespace loom::interp

#endif // LOOM_INTERPRETER_PIPELINE_H
