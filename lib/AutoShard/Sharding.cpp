//===- Sharding.cpp - Device meshes and tensor shardings ------------------===//

#include "loom/AutoShard/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace loom::autoshard {

int64_t DeviceMesh::numDevices() const {
  int64_t devices = 1;
  for (int64_t size : shape)
    devices *= size;
  return devices;
}

int64_t DeviceMesh::stride(int64_t axis) const {
  int64_t stride = 1;
  for (int64_t later = axis + 1; later < numAxes(); ++later)
    stride *= shape[later];
  return stride;
}

cost::GroupPlacement
DeviceMesh::placement(int64_t axis, const cost::ClusterSpec &cluster) const {
  return cost::GroupPlacement::strided(shape[axis], stride(axis),
                                       cluster.devicesPerNode);
}

int64_t TensorSharding::dimOfAxis(int64_t axis) const {
  for (auto [dim, axes] : llvm::enumerate(dimAxes))
    if (llvm::is_contained(axes, axis))
      return dim;
  return -1;
}

bool TensorSharding::isPartial(int64_t axis) const {
  return llvm::is_contained(partialAxes, axis);
}

llvm::SmallVector<int64_t, 4>
TensorSharding::localShape(llvm::ArrayRef<int64_t> shape,
                           const DeviceMesh &mesh) const {
  llvm::SmallVector<int64_t, 4> local(shape);
  for (auto [dim, axes] : llvm::enumerate(dimAxes))
    for (int64_t axis : axes) {
      if (local[dim] % mesh.shape[axis] != 0)
        return {};
      local[dim] /= mesh.shape[axis];
    }
  return local;
}

bool TensorSharding::divides(llvm::ArrayRef<int64_t> shape,
                             const DeviceMesh &mesh) const {
  return shape.empty() || !localShape(shape, mesh).empty();
}

std::string TensorSharding::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(dimAxes, os, [&](const auto &axes) {
    os << "{";
    llvm::interleaveComma(axes, os);
    os << "}";
  });
  os << "]";
  if (!partialAxes.empty()) {
    os << " partial={";
    llvm::interleaveComma(partialAxes, os);
    os << "}";
  }
  return text;
}

mlir::ArrayAttr splitAxesAttr(mlir::MLIRContext *context,
                              const TensorSharding &sharding) {
  mlir::Builder b(context);
  llvm::SmallVector<mlir::Attribute> dims;
  for (const auto &axes : sharding.dimAxes)
    dims.push_back(b.getI64ArrayAttr(axes));
  return b.getArrayAttr(dims);
}

llvm::Expected<TensorSharding>
shardingFromSplitAxes(llvm::ArrayRef<llvm::SmallVector<int64_t, 2>> splitAxes,
                      int64_t rank, const DeviceMesh &mesh) {
  if (int64_t(splitAxes.size()) > rank)
    return llvm::createStringError(
        llvm::formatv("{0} lists of split axes for a tensor of rank {1}",
                      splitAxes.size(), rank));
  TensorSharding sharding = TensorSharding::replicated(rank);
  llvm::SmallVector<bool, 4> used(mesh.numAxes(), false);
  for (auto [dim, axes] : llvm::enumerate(splitAxes))
    for (int64_t axis : axes) {
      if (axis < 0 || axis >= mesh.numAxes())
        return llvm::createStringError(llvm::formatv(
            "mesh axis {0} (dimension {1}) is out of range: the mesh has "
            "{2} axes",
            axis, dim, mesh.numAxes()));
      if (used[axis])
        return llvm::createStringError(
            llvm::formatv("mesh axis {0} splits more than once", axis));
      used[axis] = true;
      sharding.dimAxes[dim].push_back(axis);
    }
  return sharding;
}

llvm::Expected<TensorSharding>
parseSplitAxesAttr(mlir::Attribute attr, int64_t rank, const DeviceMesh &mesh) {
  auto malformed = [] {
    return llvm::createStringError(
        "expected an array of arrays of mesh axes, e.g. [[0], [], [1]]");
  };
  auto dims = llvm::dyn_cast_or_null<mlir::ArrayAttr>(attr);
  if (!dims)
    return malformed();
  llvm::SmallVector<llvm::SmallVector<int64_t, 2>, 4> splitAxes;
  for (mlir::Attribute dim : dims) {
    auto axes = llvm::dyn_cast<mlir::ArrayAttr>(dim);
    if (!axes)
      return malformed();
    auto &list = splitAxes.emplace_back();
    for (mlir::Attribute axis : axes) {
      auto integer = llvm::dyn_cast<mlir::IntegerAttr>(axis);
      if (!integer)
        return malformed();
      list.push_back(integer.getInt());
    }
  }
  return shardingFromSplitAxes(splitAxes, rank, mesh);
}

llvm::Expected<TensorSharding> shardingOfShardOp(mlir::shard::ShardOp op,
                                                 const DeviceMesh &mesh) {
  auto shardingOp = op.getSharding().getDefiningOp<mlir::shard::ShardingOp>();
  if (!shardingOp)
    return llvm::createStringError(
        "its sharding is not made by a 'shard.sharding' op");
  if (!shardingOp.getStaticHaloSizes().empty() ||
      !shardingOp.getDynamicHaloSizes().empty() ||
      !shardingOp.getStaticShardedDimsOffsets().empty() ||
      !shardingOp.getDynamicShardedDimsOffsets().empty())
    return llvm::createStringError(
        "halo sizes and sharded dimension offsets are not supported");
  llvm::SmallVector<llvm::SmallVector<int64_t, 2>, 4> splitAxes;
  for (mlir::shard::GridAxesAttr axes : shardingOp.getSplitAxes())
    splitAxes.emplace_back(axes.asArrayRef().begin(), axes.asArrayRef().end());
  // Upstream prints a replicated 0-d tensor's sharding as `[[]]`.
  int64_t rank = op.getSrc().getType().getRank();
  while (int64_t(splitAxes.size()) > rank && splitAxes.back().empty())
    splitAxes.pop_back();
  auto sharding = shardingFromSplitAxes(splitAxes, rank, mesh);
  if (!sharding)
    return sharding.takeError();
  if (auto partial =
          op->getAttrOfType<mlir::DenseI64ArrayAttr>(kPartialAxesAttr)) {
    for (int64_t axis : partial.asArrayRef()) {
      if (axis < 0 || axis >= mesh.numAxes())
        return llvm::createStringError(llvm::formatv(
            "partial axis {0} is out of range: the mesh has {1} axes", axis,
            mesh.numAxes()));
      if (sharding->dimOfAxis(axis) >= 0 || sharding->isPartial(axis))
        return llvm::createStringError(llvm::formatv(
            "mesh axis {0} is partial and also splits or is repeated", axis));
      sharding->partialAxes.push_back(axis);
    }
  } else if (op->hasAttr(kPartialAxesAttr)) {
    return llvm::createStringError(llvm::formatv(
        "'{0}' must be an array<i64: ...> of mesh axes", kPartialAxesAttr));
  }
  return sharding;
}

} // namespace loom::autoshard
