//===- DevicePosition.cpp - The rank a kernel runs on ---------------------===//
//
// The calling thread's device position, and the global indices of a
// partitioned dropout op's mask, or of a sequence shard's first position,
// computed from it.
//
//===----------------------------------------------------------------------===//

#include "DevicePosition.h"

#include "Kernels.h"

#include "dialects/Loom/LoomDialect.h"
#include "loom/Interpreter/MultiRank.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace loom::interp {

static thread_local const DevicePosition *threadPosition = nullptr;

const DevicePosition *currentDevicePosition() { return threadPosition; }

ScopedDevicePosition::ScopedDevicePosition(const DevicePosition &position)
    : previous(threadPosition) {
  threadPosition = &position;
}

ScopedDevicePosition::~ScopedDevicePosition() { threadPosition = previous; }

static thread_local int64_t threadMicroBatch = -1;

int64_t currentMicroBatch() { return threadMicroBatch; }

ScopedMicroBatch::ScopedMicroBatch(int64_t microBatch)
    : previous(threadMicroBatch) {
  threadMicroBatch = microBatch;
}

ScopedMicroBatch::~ScopedMicroBatch() { threadMicroBatch = previous; }

/// Adds micro-batch k's offset to the indices of a mask drawn on one
/// micro-batch (`indices` empty: the local tensor is the micro-batch's
/// whole tensor). `shards` is how many shards the micro-batch's tensor is
/// cut into.
static llvm::Expected<std::vector<int64_t>>
offsetByMicroBatch(Operation *op, ArrayRef<int64_t> localShape,
                   std::vector<int64_t> indices, int64_t shards) {
  auto attr = op->getAttrOfType<IntegerAttr>(kMaskMicroBatchesAttr);
  if (!attr || attr.getInt() <= 1)
    return indices;
  int64_t k = currentMicroBatch();
  if (k < 0 || k >= attr.getInt())
    return opError(op, "draws the dropout mask of one of " +
                           llvm::Twine(attr.getInt()) + " micro-batches (" +
                           kMaskMicroBatchesAttr +
                           "): it needs the pipeline interpreter");
  int64_t local = 1;
  for (int64_t size : localShape)
    local *= size;
  if (indices.empty()) {
    indices.resize(local);
    for (int64_t e = 0; e < local; ++e)
      indices[e] = e;
  }
  int64_t offset = k * local * shards;
  for (int64_t &index : indices)
    index += offset;
  return indices;
}

/// The entries of `op`'s loom.mask_split_axes, or an error when it is not
/// an array of arrays of integers.
static llvm::Expected<llvm::SmallVector<llvm::SmallVector<int16_t>>>
readMaskSplitAxes(Operation *op, ArrayAttr dims) {
  auto malformed = [&] {
    return opError(op, "has a malformed " + kMaskSplitAxesAttr +
                           " (expected an array of arrays of grid axes)");
  };
  llvm::SmallVector<llvm::SmallVector<int16_t>> entries;
  for (Attribute dim : dims) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return malformed();
    auto &entry = entries.emplace_back();
    for (Attribute axis : axes) {
      auto value = dyn_cast<IntegerAttr>(axis);
      if (!value)
        return malformed();
      entry.push_back(static_cast<int16_t>(value.getInt()));
    }
  }
  return entries;
}

llvm::Expected<std::vector<int64_t>> maskIndices(Operation *op,
                                                 ArrayRef<int64_t> localShape,
                                                 ArrayRef<int64_t> splitOfDim) {
  Attribute attr = op->getAttr(kMaskSplitAxesAttr);
  if (!attr)
    return offsetByMicroBatch(op, localShape, {}, 1);
  auto dims = dyn_cast<ArrayAttr>(attr);
  if (!dims)
    return opError(op, "has a malformed " + kMaskSplitAxesAttr +
                           " (expected an array of arrays of grid axes)");
  auto entries = readMaskSplitAxes(op, dims);
  if (!entries)
    return entries.takeError();
  if (entries->size() > localShape.size())
    return opError(op, kMaskSplitAxesAttr + " has " +
                           llvm::Twine(entries->size()) +
                           " entries for a tensor of rank " +
                           llvm::Twine(localShape.size()));
  if (llvm::all_of(*entries, [](const auto &axes) { return axes.empty(); }))
    return offsetByMicroBatch(op, localShape, {}, 1);

  const DevicePosition *position = currentDevicePosition();
  if (!position)
    return opError(op, "draws its dropout mask on a split tensor (" +
                           kMaskSplitAxesAttr +
                           "): it needs the multi-rank interpreter");
  if (Attribute grid = op->getAttr(kMaskGridAttr)) {
    auto symbol = dyn_cast<FlatSymbolRefAttr>(grid);
    if (!symbol)
      return opError(op, kMaskGridAttr + " must be a grid symbol");
    if (symbol.getValue() != position->gridName)
      return opError(op, "splits its dropout mask over @" + symbol.getValue() +
                             ", but the ranks run on @" + position->gridName);
  }
  llvm::SmallVector<llvm::SmallVector<int16_t>> split(localShape.size());
  for (size_t dim = 0; dim < localShape.size(); ++dim) {
    int64_t entry =
        splitOfDim.empty() ? static_cast<int64_t>(dim) : splitOfDim[dim];
    if (entry >= 0 && entry < static_cast<int64_t>(entries->size()))
      split[dim] = (*entries)[entry];
  }
  auto indices = globalIndicesOfShard(localShape, position->gridShape, split,
                                      position->rank);
  if (!indices)
    return opError(op, kMaskSplitAxesAttr + ": " +
                           llvm::toString(indices.takeError()));
  int64_t shards = 1;
  for (const auto &axes : split)
    for (int16_t axis : axes)
      shards *= position->gridShape[axis];
  return offsetByMicroBatch(op, localShape, std::move(*indices), shards);
}

llvm::Expected<int64_t> globalStart(Operation *op, int64_t localSize,
                                    int64_t entry) {
  auto dims = op->getAttrOfType<ArrayAttr>(kMaskSplitAxesAttr);
  if (!dims) {
    if (op->hasAttr(kMaskSplitAxesAttr))
      return opError(op, "has a malformed " + kMaskSplitAxesAttr +
                             " (expected an array of arrays of grid axes)");
    return 0;
  }
  auto entries = readMaskSplitAxes(op, dims);
  if (!entries)
    return entries.takeError();
  if (entry >= static_cast<int64_t>(entries->size()) ||
      (*entries)[entry].empty())
    return 0;
  const DevicePosition *position = currentDevicePosition();
  if (!position)
    return opError(op, "is a shard at a global position (" +
                           kMaskSplitAxesAttr +
                           "): it needs the multi-rank interpreter");
  if (auto grid = op->getAttrOfType<FlatSymbolRefAttr>(kMaskGridAttr);
      grid && grid.getValue() != position->gridName)
    return opError(op, "is split over @" + grid.getValue() +
                           ", but the ranks run on @" + position->gridName);
  // The rank's coordinates, row-major over the grid, then its shard: the
  // row-major index of its coordinates on the splitting axes.
  ArrayRef<int64_t> shape = position->gridShape;
  llvm::SmallVector<int64_t> coordinate(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1, r = position->rank;
       d >= 0; --d) {
    coordinate[d] = r % shape[d];
    r /= shape[d];
  }
  int64_t shard = 0;
  for (int16_t axis : (*entries)[entry]) {
    if (axis < 0 || axis >= static_cast<int16_t>(shape.size()))
      return opError(op, kMaskSplitAxesAttr + ": grid axis " +
                             llvm::Twine(axis) + " is out of range");
    shard = shard * shape[axis] + coordinate[axis];
  }
  return shard * localSize;
}

} // namespace loom::interp
