//===- DevicePosition.cpp - The rank a kernel runs on ---------------------===//
//
// The calling thread's device position, and the global indices of a
// partitioned dropout op's mask computed from it.
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
    return std::vector<int64_t>{};
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
    return std::vector<int64_t>{};

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
  return indices;
}

} // namespace loom::interp
