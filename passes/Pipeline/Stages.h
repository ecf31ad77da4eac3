//===- Stages.h - Which pipeline stage runs each forward op -----*- C++ -*-===//
//
// A transformer's forward pass is a chain of items: the embedding, the
// layers (numbered by the `loom.layer` the importers put on their
// parameters; in IR written without it, by the names, `h.<i>.` /
// `layers.<i>.`) and the head. Pipeline stages are contiguous ranges of items;
// this file finds each op's item and chooses the ranges.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PIPELINE_STAGES_H
#define LOOM_PASSES_PIPELINE_STAGES_H

#include "loom/CostModel/ClusterSpec.h"
#include "loom/Planner/StageDP.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace loom {

/// Items of a forward pass: 0 is the embedding (ops that depend on no
/// layer), 1..L the layers, L+1 the head (ops after the last layer that
/// depend on arguments no earlier op uses: the final norm, the output
/// projection, the labels).
struct ForwardItems {
  int numLayers = 0;
  llvm::DenseMap<mlir::Operation *, int> itemOf;
  int numItems() const { return numLayers + 2; }
};

/// The items of `forward`'s ops. An op of layer i depends on layer i's
/// parameters and on no deeper layer's, so items never decrease along the
/// dataflow. Fails when no argument is marked with or names a layer.
mlir::FailureOr<ForwardItems> findForwardItems(mlir::func::FuncOp forward);

/// What each item costs one device, for the stage DP: forward and backward
/// seconds of one micro-batch on `device`, costed as the planner costs them
/// (every op of the differentiated step at its roofline time, the backward
/// ops with the forward op whose adjoint they compute; ops that do not
/// depend on the batch are left out), the bytes of the parameters it reads
/// first times `stateCopies` (the parameter, its gradient and the
/// optimizer's moments), and the bytes of its forward results (what one
/// micro-batch in flight keeps without recomputation, an upper bound).
/// Fails (with an error at the op) when `forward` cannot be differentiated.
mlir::FailureOr<std::vector<plan::StageItem>>
itemCosts(mlir::func::FuncOp forward, const ForwardItems &items,
          const cost::DeviceSpec &device, double stateCopies);

/// Stage s holds items [bounds[s], bounds[s+1]). With `layersPerStage`
/// (one count per stage, summing to the layers) the embedding joins the
/// first stage and the head the last; otherwise the fastest contiguous
/// split whose every stage fits `capacity` bytes, stage s keeping
/// `inFlight[s]` micro-batches' activations (Alpa's stage DP,
/// loom/Planner/StageDP.h). Errors when there are more stages than items,
/// the counts are wrong, or no split fits (with what the tightest needs).
mlir::FailureOr<std::vector<int64_t>>
chooseStageBounds(mlir::func::FuncOp forward, const ForwardItems &items,
                  const std::vector<plan::StageItem> &costs,
                  const std::vector<double> &inFlight, int64_t numMicroBatches,
                  double capacity, llvm::ArrayRef<int64_t> layersPerStage);

} // namespace loom

#endif // LOOM_PASSES_PIPELINE_STAGES_H
