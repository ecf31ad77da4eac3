//===- StepPhases.h - Phase and stage of every op of a step -----*- C++ -*-===//
//
// The first step of --loom-split-stages: which phase (forward, backward,
// optimizer) and which pipeline stage runs each op of a pipelined
// @train_step, including the ops the partitioner inserted without a tag.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PIPELINE_STEPPHASES_H
#define LOOM_PASSES_PIPELINE_STEPPHASES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <set>

namespace loom {

enum class Phase { Forward, Backward, Optimizer };

struct OpInfo {
  Phase phase = Phase::Forward;
  int64_t stage = -1;          ///< forward and backward ops
  std::set<int64_t> optStages; ///< optimizer ops: the stages running them
};

/// An op without operands that --loom-split-stages copies into every
/// function that uses it rather than passing its value around.
bool isConstantLeaf(mlir::Operation *op);

/// The phases and stages of the ops of `step` (one block, inlined):
/// forward and backward ops carry them (`loom.stage`, `loom.backward`);
/// optimizer updates and tied-gradient sums are the optimizer phase, run by
/// every stage holding the parameters they update; ops the partitioner
/// inserted take their first user's, or, when they feed a tied sum or are
/// only returned, their latest producer's.
class StepPhases {
public:
  explicit StepPhases(mlir::func::FuncOp step)
      : step(step), body(step.getBody().front()) {}

  /// Computes `info` and `position` for a pipeline of `numStages` stages;
  /// errors at an op whose stage is out of range or cannot be told, or at
  /// a call.
  mlir::LogicalResult run(int64_t numStages) {
    if (mlir::failed(classify(numStages)))
      return mlir::failure();
    assignOptimizerStages();
    return mlir::success();
  }

  /// A forward or backward op that reads only parameters and optimizer
  /// state (a slice or gather of a weight): the optimizer recomputes it
  /// rather than reading it as an accumulator.
  bool isStepInvariant(mlir::Operation *op);

  llvm::DenseMap<mlir::Operation *, OpInfo> info;
  /// Block order of every op.
  llvm::DenseMap<mlir::Operation *, int64_t> position;

private:
  mlir::LogicalResult classify(int64_t numStages);
  /// Checks the dataflow the tags promise (a forward op reads no backward
  /// value, ...), so that a hand-edited step is an error, not a crash.
  mlir::LogicalResult checkDataflow();
  void assignOptimizerStages();

  mlir::func::FuncOp step;
  mlir::Block &body;
  llvm::DenseMap<mlir::Operation *, bool> invariant;
};

} // namespace loom

#endif // LOOM_PASSES_PIPELINE_STEPPHASES_H
