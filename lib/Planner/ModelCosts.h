//===- ModelCosts.h - A model's per-device programs, costed ----*- C++ -*-===//
//
// The part of the estimate that reads the model's IR (Estimate.cpp does the
// arithmetic of plans on it): @forward_backward of the per-device program,
// built twice — without layers (embedding and head only) and with one layer
// — so one layer's cost is the difference and the whole model's is the
// embedding, the head and L layers, however deep it is. The same two
// programs with the full tensor-parallel widths tell which ops Megatron's
// tensor parallelism leaves replicated (same shapes on every rank): those
// are the ops sequence parallelism splits along the sequence instead.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_PLANNER_MODELCOSTS_H
#define LOOM_LIB_PLANNER_MODELCOSTS_H

#include "loom/Planner/Estimate.h"

#include "llvm/ADT/SmallVector.h"

#include <memory>

namespace loom::plan::detail {

/// Per micro-batch costs of a part of @forward_backward on one device.
struct PartCost {
  double forward = 0, backward = 0; ///< seconds
  /// Of those, the ops tensor parallelism leaves replicated.
  double forwardReplicated = 0, backwardReplicated = 0;
  /// Forward seconds of the attention core (rerun by selective recompute).
  double coreForward = 0;
  /// Seconds of the fused attention kernels (what context parallelism
  /// scales by its degree: a device's queries meet every key).
  double attentionForward = 0, attentionBackward = 0;
  /// Seconds of ops that do not depend on the batch (the bf16 copies of the
  /// weights): once per step, not per micro-batch.
  double perStep = 0;
  double modelFlops = 0;
  /// Saved activations (SavedValue) with whether each is replicated.
  llvm::SmallVector<std::pair<cost::SavedValue, bool>> saved;

  void subtract(const PartCost &other) {
    forward -= other.forward;
    backward -= other.backward;
    forwardReplicated -= other.forwardReplicated;
    backwardReplicated -= other.backwardReplicated;
    coreForward -= other.coreForward;
    attentionForward -= other.attentionForward;
    attentionBackward -= other.attentionBackward;
    perStep -= other.perStep;
    modelFlops -= other.modelFlops;
  }
  void add(const PartCost &other) {
    forward += other.forward;
    backward += other.backward;
    forwardReplicated += other.forwardReplicated;
    backwardReplicated += other.backwardReplicated;
    coreForward += other.coreForward;
    attentionForward += other.attentionForward;
    attentionBackward += other.attentionBackward;
    perStep += other.perStep;
    modelFlops += other.modelFlops;
  }
};

/// Saved bytes of `saved` under sequence parallelism over `tp` and a
/// recompute policy other than Full.
double savedBytes(llvm::ArrayRef<std::pair<cost::SavedValue, bool>> saved,
                  cost::Recompute recompute, bool sequenceParallel, int64_t tp);

/// Parameters of layer 0, of the embedding (first stage) and of the head
/// (last stage: final norm, untied output projection, or the tied copy of
/// the token table that Megatron keeps there when P > 1).
struct ParamCounts {
  double total = 0, layer = 0, embedding = 0, head = 0;
};

/// What the model costs one device per micro-batch, by part, for one
/// tensor-parallel degree, micro-batch and context-parallel degree.
struct ModelCosts {
  PartCost embedding, head, layer;
  /// Parameters on one tensor-parallel rank: without and with the tied
  /// copy of the token table on the last stage (P > 1).
  ParamCounts params, paramsTiedCopy;
  double totalParams = 0; ///< of the whole model
  /// Saved values of the one-layer program (embedding, one layer, head).
  llvm::SmallVector<std::pair<cost::SavedValue, bool>> oneLayerSaved;
  double temporaries = 0;
  /// Model FLOPs of one micro-batch through all layers, at full widths.
  double modelFlops = 0;

  /// Bytes one layer keeps under `recompute` (None or Selective).
  double layerKept(cost::Recompute recompute, bool sequenceParallel,
                   int64_t tp) const {
    return savedBytes(oneLayerSaved, recompute, sequenceParallel, tp) -
           savedBytes(embedding.saved, recompute, sequenceParallel, tp) -
           savedBytes(head.saved, recompute, sequenceParallel, tp);
  }
};

/// Costs the per-device programs of `config` on `device` for one
/// tensor-parallel degree, micro-batch and context-parallel degree.
llvm::Expected<std::unique_ptr<ModelCosts>>
costModel(mlir::MLIRContext &context, const ModelConfig &config,
          const cost::DeviceSpec &device, int64_t tp, int64_t microBatch,
          int64_t cp, const TrainingSetup &setup,
          const ProgramBuilder &buildProgram);

} // namespace loom::plan::detail

#endif // LOOM_LIB_PLANNER_MODELCOSTS_H
