//===- MicroBatch.h - A loss function on one micro-batch --------*- C++ -*-===//
//
// Pipelining runs the training step on M micro-batches of B/M sequences and
// sums their gradients. `splitMicroBatch` rewrites a loss function imported
// for the whole batch into the function of one micro-batch: the batch
// dimension is followed from the token arguments through every op's
// sharding rule, exactly as a data-parallel split of the batch over M
// devices would be, and every dimension holding it shrinks by M. The loss
// becomes the micro-batch's share of the batch loss (cross-entropy divides
// by the batch's token count), so the M shares sum to the batch loss.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PIPELINE_MICROBATCH_H
#define LOOM_PASSES_PIPELINE_MICROBATCH_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace loom {

/// Rewrites `fn` (one block; its integer arguments of rank >= 1 are the
/// batch's tokens and labels, batch first) in place to run on 1/M of the
/// batch. Errors at the op: a batch that M does not divide, a batch that is
/// not the outermost part of a dimension, a reduction over the batch that
/// is not a sum (a mean, a max), a non-splat constant or an argument
/// combined element-wise with the batch, and dropout on a tensor whose
/// first dimension is not the batch. Dropout ops get
/// `loom.mask_micro_batches = M` (DropoutMask.h's index then counts the
/// micro-batch's rows in the whole batch).
mlir::LogicalResult splitMicroBatch(mlir::func::FuncOp fn,
                                    int64_t numMicroBatches);

} // namespace loom

#endif // LOOM_PASSES_PIPELINE_MICROBATCH_H
