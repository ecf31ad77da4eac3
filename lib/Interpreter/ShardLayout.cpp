//===- ShardLayout.cpp - Pieces of tensors over a device grid -------------===//
//
// Cuts and joins tensors along one dimension, and the shardOfRank /
// assembleFromShards helpers of MultiRank.h built on them.
//
//===----------------------------------------------------------------------===//

#include "ShardLayout.h"

#include "Kernels.h"

#include "loom/Interpreter/MultiRank.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cmath>
#include <tuple>

namespace loom::interp {

/// The number of elements before dimension `axis` (rows) and after it (the
/// contiguous run of one index of `axis`).
static std::pair<int64_t, int64_t> outerInner(llvm::ArrayRef<int64_t> shape,
                                              int64_t axis) {
  return {numElementsOf(shape.take_front(axis)),
          numElementsOf(shape.drop_front(axis + 1))};
}

Tensor pieceAlong(const Tensor &t, int64_t axis, int64_t pieces, int64_t k) {
  assert(t.shape()[axis] % pieces == 0 && "pieces divide the dimension");
  llvm::SmallVector<int64_t, 4> shape(t.shape());
  int64_t piece = shape[axis] / pieces;
  int64_t outer, inner;
  std::tie(outer, inner) = outerInner(shape, axis);
  int64_t run = piece * inner, row = shape[axis] * inner;
  shape[axis] = piece;
  auto cut = [&](const auto &in) {
    std::decay_t<decltype(in)> out;
    out.reserve(outer * run);
    for (int64_t o = 0; o < outer; ++o) {
      auto first = in.begin() + o * row + k * run;
      out.insert(out.end(), first, first + run);
    }
    return out;
  };
  if (t.isFloat())
    return Tensor::floats(t.elementType(), shape, cut(t.f()));
  return Tensor::ints(t.elementType(), shape, cut(t.i()));
}

Tensor concatAlong(llvm::ArrayRef<const Tensor *> parts, int64_t axis) {
  llvm::SmallVector<int64_t, 4> shape(parts.front()->shape());
  shape[axis] = 0;
  for (const Tensor *part : parts)
    shape[axis] += part->shape()[axis];
  int64_t outer, inner;
  std::tie(outer, inner) = outerInner(shape, axis);
  auto join = [&](auto data) {
    std::decay_t<decltype(data(*parts.front()))> out;
    out.reserve(outer * shape[axis] * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (const Tensor *part : parts) {
        int64_t run = part->shape()[axis] * inner;
        auto first = data(*part).begin() + o * run;
        out.insert(out.end(), first, first + run);
      }
    return out;
  };
  Tensor first = *parts.front();
  if (first.isFloat())
    return Tensor::floats(
        first.elementType(), shape,
        join([](const Tensor &t) -> const std::vector<double> & {
          return t.f();
        }));
  return Tensor::ints(first.elementType(), shape,
                      join([](const Tensor &t) -> const std::vector<int64_t> & {
                        return t.i();
                      }));
}

int64_t linearIndexOf(llvm::ArrayRef<int64_t> shape,
                      llvm::ArrayRef<int64_t> index) {
  int64_t linear = 0;
  for (auto [size, i] : llvm::zip(shape, index))
    linear = linear * size + i;
  return linear;
}

//===----------------------------------------------------------------------===//
// Shards of a global tensor
//===----------------------------------------------------------------------===//

std::vector<llvm::SmallVector<int16_t>>
splitAxesFromAttr(mlir::ArrayAttr splitAxes) {
  std::vector<llvm::SmallVector<int16_t>> split;
  if (!splitAxes)
    return split;
  for (mlir::Attribute dim : splitAxes) {
    llvm::SmallVector<int16_t> axes;
    for (mlir::Attribute axis : llvm::cast<mlir::ArrayAttr>(dim))
      axes.push_back(llvm::cast<mlir::IntegerAttr>(axis).getInt());
    split.push_back(axes);
  }
  return split;
}

llvm::SmallVector<int64_t> gridMultiIndex(llvm::ArrayRef<int64_t> gridShape,
                                          int64_t rank) {
  llvm::SmallVector<int64_t> index(gridShape.size());
  for (int64_t axis = static_cast<int64_t>(gridShape.size()) - 1; axis >= 0;
       --axis) {
    index[axis] = rank % gridShape[axis];
    rank /= gridShape[axis];
  }
  return index;
}

/// For each tensor dimension, how many shards split it and which of them
/// `rank` holds; checks the axes against the grid and the tensor rank.
static llvm::Error
shardPositions(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> gridShape,
               SplitAxes splitAxes, int64_t rank,
               llvm::SmallVectorImpl<std::pair<int64_t, int64_t>> &positions) {
  if (splitAxes.size() > shape.size())
    return llvm::createStringError(
        "the sharding splits " + llvm::Twine(splitAxes.size()) +
        " dimensions of a tensor of rank " + llvm::Twine(shape.size()));
  llvm::SmallVector<int64_t> multiIndex = gridMultiIndex(gridShape, rank);
  llvm::SmallVector<bool> used(gridShape.size(), false);
  positions.assign(shape.size(), {1, 0});
  for (auto [dim, axes] : llvm::enumerate(splitAxes)) {
    llvm::SmallVector<int64_t> sizes, coords;
    for (int16_t axis : axes) {
      if (axis < 0 || axis >= static_cast<int64_t>(gridShape.size()) ||
          used[axis])
        return llvm::createStringError(
            "grid axis " + llvm::Twine(axis) +
            " is out of range or splits two dimensions");
      used[axis] = true;
      sizes.push_back(gridShape[axis]);
      coords.push_back(multiIndex[axis]);
    }
    int64_t count = numElementsOf(sizes);
    if (shape[dim] % count != 0)
      return llvm::createStringError("dimension " + llvm::Twine(dim) +
                                     " of size " + llvm::Twine(shape[dim]) +
                                     " does not split into " +
                                     llvm::Twine(count) + " shards");
    positions[dim] = {count, linearIndexOf(sizes, coords)};
  }
  return llvm::Error::success();
}

llvm::Expected<Tensor> shardOfRank(const Tensor &global,
                                   llvm::ArrayRef<int64_t> gridShape,
                                   SplitAxes splitAxes, int64_t rank) {
  llvm::SmallVector<std::pair<int64_t, int64_t>> positions;
  if (llvm::Error error =
          shardPositions(global.shape(), gridShape, splitAxes, rank, positions))
    return std::move(error);
  Tensor shard = global;
  for (auto [dim, position] : llvm::enumerate(positions))
    if (position.first > 1)
      shard = pieceAlong(shard, dim, position.first, position.second);
  return shard;
}

/// The global shape of a tensor whose shards have shape `localShape`;
/// axes out of range are left to shardPositions to report.
static llvm::SmallVector<int64_t, 4>
globalShapeOf(llvm::ArrayRef<int64_t> localShape,
              llvm::ArrayRef<int64_t> gridShape, SplitAxes splitAxes) {
  llvm::SmallVector<int64_t, 4> globalShape(localShape);
  for (auto [dim, axes] : llvm::enumerate(splitAxes))
    for (int16_t axis : axes)
      if (dim < globalShape.size() && axis >= 0 &&
          axis < static_cast<int64_t>(gridShape.size()))
        globalShape[dim] *= gridShape[axis];
  return globalShape;
}

/// The offset in the global tensor of element 0 of `rank`'s shard.
static int64_t
shardBase(llvm::ArrayRef<int64_t> localShape,
          llvm::ArrayRef<int64_t> globalStrides,
          llvm::ArrayRef<std::pair<int64_t, int64_t>> positions) {
  int64_t base = 0;
  for (auto [dim, position] : llvm::enumerate(positions))
    base += position.second * localShape[dim] * globalStrides[dim];
  return base;
}

llvm::Expected<std::vector<int64_t>>
globalIndicesOfShard(llvm::ArrayRef<int64_t> localShape,
                     llvm::ArrayRef<int64_t> gridShape, SplitAxes splitAxes,
                     int64_t rank) {
  llvm::SmallVector<int64_t, 4> globalShape =
      globalShapeOf(localShape, gridShape, splitAxes);
  llvm::SmallVector<std::pair<int64_t, int64_t>> positions;
  if (llvm::Error error =
          shardPositions(globalShape, gridShape, splitAxes, rank, positions))
    return std::move(error);
  llvm::SmallVector<int64_t, 4> strides = stridesOf(globalShape);
  return stridedOffsets(localShape, strides,
                        shardBase(localShape, strides, positions));
}

/// Whether two elements are the same value (NaNs agree with each other).
static bool sameValue(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

llvm::Expected<Tensor> assembleFromShards(llvm::ArrayRef<Tensor> shardsPerRank,
                                          llvm::ArrayRef<int64_t> gridShape,
                                          SplitAxes splitAxes) {
  int64_t numRanks = numElementsOf(gridShape);
  if (static_cast<int64_t>(shardsPerRank.size()) != numRanks)
    return llvm::createStringError("expected " + llvm::Twine(numRanks) +
                                   " shards, one per rank, got " +
                                   llvm::Twine(shardsPerRank.size()));
  const Tensor &first = shardsPerRank.front();
  llvm::SmallVector<int64_t, 4> globalShape =
      globalShapeOf(first.shape(), gridShape, splitAxes);
  llvm::SmallVector<int64_t, 4> strides = stridesOf(globalShape);
  int64_t size = numElementsOf(globalShape);
  std::vector<double> floats(first.isFloat() ? size : 0);
  std::vector<int64_t> ints(first.isFloat() ? 0 : size);
  std::vector<int64_t> writer(size, -1);
  for (auto [rank, shard] : llvm::enumerate(shardsPerRank)) {
    if (shard.shape() != first.shape() || shard.isFloat() != first.isFloat())
      return llvm::createStringError(
          "rank " + llvm::Twine(rank) + " holds a " +
          shapeString(shard.shape()) + " shard, rank 0 a " +
          shapeString(first.shape()) + " one (or of another kind)");
    llvm::SmallVector<std::pair<int64_t, int64_t>> positions;
    if (llvm::Error error =
            shardPositions(globalShape, gridShape, splitAxes, rank, positions))
      return std::move(error);
    std::vector<int64_t> targets = stridedOffsets(
        shard.shape(), strides, shardBase(shard.shape(), strides, positions));
    for (auto [e, target] : llvm::enumerate(targets)) {
      bool agrees = first.isFloat() ? sameValue(floats[target], shard.f()[e])
                                    : ints[target] == shard.i()[e];
      if (writer[target] >= 0 && !agrees) {
        std::string text;
        llvm::raw_string_ostream os(text);
        os << "the replicas disagree: rank " << rank << " holds ";
        if (first.isFloat())
          os << llvm::format("%.17g", shard.f()[e]) << " where rank "
             << writer[target] << " holds "
             << llvm::format("%.17g", floats[target]);
        else
          os << shard.i()[e] << " where rank " << writer[target] << " holds "
             << ints[target];
        os << " (global flat index " << target << ")";
        return llvm::createStringError(text);
      }
      writer[target] = rank;
      if (first.isFloat())
        floats[target] = shard.f()[e];
      else
        ints[target] = shard.i()[e];
    }
  }
  if (first.isFloat())
    return Tensor::floats(first.elementType(), globalShape, std::move(floats));
  return Tensor::ints(first.elementType(), globalShape, std::move(ints));
}

} // namespace loom::interp
