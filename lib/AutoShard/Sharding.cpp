//===- Sharding.cpp - Device meshes and tensor shardings ------------------===//

#include "loom/AutoShard/Sharding.h"

#include "llvm/ADT/STLExtras.h"
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

} // namespace loom::autoshard
