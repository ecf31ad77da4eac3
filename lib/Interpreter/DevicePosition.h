//===- DevicePosition.h - The rank a kernel runs on -------------*- C++ -*-===//
//
// Most kernels compute the same thing on every rank. The dropout kernels
// do not: a partitioned dropout op (one carrying `loom.mask_split_axes`,
// see DropoutMask.h) draws each element's mask at the element's index in
// the global tensor, which depends on where the running rank sits in the
// grid. runRanks gives each rank thread its position for the length of its
// run (a thread-local, so the kernel signature stays the same for every
// op); interp::run sets none, so a split dropout op is an error there.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_INTERPRETER_DEVICEPOSITION_H
#define LOOM_LIB_INTERPRETER_DEVICEPOSITION_H

#include "mlir/IR/Operation.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace loom::interp {

/// The device a rank thread of runRanks runs as.
struct DevicePosition {
  llvm::StringRef gridName;
  llvm::ArrayRef<int64_t> gridShape;
  int64_t rank = 0;
};

/// The position of the device the calling thread runs as; null outside a
/// rank thread of runRanks.
const DevicePosition *currentDevicePosition();

/// Makes `position` the calling thread's until destroyed.
class ScopedDevicePosition {
public:
  explicit ScopedDevicePosition(const DevicePosition &position);
  ~ScopedDevicePosition();
  ScopedDevicePosition(const ScopedDevicePosition &) = delete;
  ScopedDevicePosition &operator=(const ScopedDevicePosition &) = delete;

private:
  const DevicePosition *previous;
};

/// The micro-batch of a pipelined step the calling thread computes (the
/// pipeline interpreter sets it around each stage function it runs, and
/// runRanks hands it to its rank threads); -1 when none.
int64_t currentMicroBatch();

/// Makes `microBatch` the calling thread's until destroyed.
class ScopedMicroBatch {
public:
  explicit ScopedMicroBatch(int64_t microBatch);
  ~ScopedMicroBatch();
  ScopedMicroBatch(const ScopedMicroBatch &) = delete;
  ScopedMicroBatch &operator=(const ScopedMicroBatch &) = delete;

private:
  int64_t previous;
};

/// The global row-major index of each element (in row-major order) of the
/// local tensor of `localShape` whose mask `op` draws, read from the op's
/// `loom.mask_split_axes` and the running rank's position. `splitOfDim`
/// maps each mask dimension to the entry of the attribute that splits it
/// (-1: the dimension is whole); empty maps dimension d to entry d.
/// An op with `loom.mask_micro_batches = M` draws the masks of micro-batch
/// k (currentMicroBatch) of M, dimension 0 being the batch: its indices are
/// offset by k times the micro-batch's global element count. Returns an
/// empty vector when the local tensor is the global one (no attribute, or
/// one that splits nothing, and no micro-batches). Errors name the op: a
/// malformed attribute, a split op outside runRanks, a grid other than the
/// rank's, a micro-batched op run outside the pipeline interpreter.
llvm::Expected<std::vector<int64_t>>
maskIndices(mlir::Operation *op, llvm::ArrayRef<int64_t> localShape,
            llvm::ArrayRef<int64_t> splitOfDim = {});

/// The global position of a shard's first element along one dimension of
/// `localSize` elements, split as entry `entry` of `op`'s
/// `loom.mask_split_axes` says: 0 without the attribute or where the entry
/// splits nothing. What a sequence shard's rows need (a causal attention's
/// queries, a rotary embedding's positions); micro-batches split the batch,
/// not positions, and do not move it. Errors as maskIndices'.
llvm::Expected<int64_t> globalStart(mlir::Operation *op, int64_t localSize,
                                    int64_t entry);

} // namespace loom::interp

#endif // LOOM_LIB_INTERPRETER_DEVICEPOSITION_H
