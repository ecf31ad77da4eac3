//===- Sharding.h - Device meshes and tensor shardings as plain data -*- C++
//-*-//
//
// The planner's view of upstream `shard` attributes: a logical device mesh
// (`shard.grid`) laid row-major over the cluster's ranks, and how one tensor
// is laid out on it (`shard.sharding`'s split axes, plus the partial-sum
// state upstream lacks).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTOSHARD_SHARDING_H
#define LOOM_AUTOSHARD_SHARDING_H

#include "loom/CostModel/Collectives.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::shard {
class ShardOp;
} // namespace mlir::shard

namespace loom::autoshard {

/// A logical mesh of devices, e.g. 2-D `data x tensor`. Device ranks fill
/// it row-major (the last axis varies fastest), and ranks fill nodes in
/// order, so the last axis is the one most likely to stay inside a node.
struct DeviceMesh {
  llvm::SmallVector<int64_t, 3> shape;

  int64_t numDevices() const;
  int64_t numAxes() const { return shape.size(); }
  /// Ranks between consecutive devices along `axis`.
  int64_t stride(int64_t axis) const;
  /// Where a group along `axis` sits on `cluster`'s nodes.
  cost::GroupPlacement placement(int64_t axis,
                                 const cost::ClusterSpec &cluster) const;
};

/// How one tensor lies on a mesh: for each dimension the mesh axes that
/// split it (major to minor), and the axes over which every device holds a
/// partial sum that still needs reducing.
struct TensorSharding {
  llvm::SmallVector<llvm::SmallVector<int64_t, 2>, 4> dimAxes;
  llvm::SmallVector<int64_t, 2> partialAxes;

  static TensorSharding replicated(int64_t rank) {
    TensorSharding sharding;
    sharding.dimAxes.resize(rank);
    return sharding;
  }
  /// The dimension `axis` splits, or -1.
  int64_t dimOfAxis(int64_t axis) const;
  bool isPartial(int64_t axis) const;
  /// Whether every axis divides the dimension it splits (a 0-d tensor is
  /// never split, so always fits).
  bool divides(llvm::ArrayRef<int64_t> shape, const DeviceMesh &mesh) const;
  /// The shape each device holds of a tensor of `shape`; an empty vector
  /// when an axis does not divide its dimension (check `divides` first for a
  /// 0-d tensor).
  llvm::SmallVector<int64_t, 4> localShape(llvm::ArrayRef<int64_t> shape,
                                           const DeviceMesh &mesh) const;
  /// `[{0}, {}, {1}] partial={0}`-style text for tables and tests.
  std::string str() const;

  bool operator==(const TensorSharding &other) const {
    return dimAxes == other.dimAxes && partialAxes == other.partialAxes;
  }
};

/// `sharding`'s split axes as a kSplitAxesAttr value (one list per
/// dimension, trailing ones included; partial axes are not part of it).
mlir::ArrayAttr splitAxesAttr(mlir::MLIRContext *context,
                              const TensorSharding &sharding);

/// The sharding of a tensor of `rank` dimensions that `splitAxes` (one list
/// of mesh axes per dimension, trailing ones optional) describes on `mesh`.
/// Errors: more lists than dimensions, an axis out of the mesh's range, an
/// axis used twice.
llvm::Expected<TensorSharding>
shardingFromSplitAxes(llvm::ArrayRef<llvm::SmallVector<int64_t, 2>> splitAxes,
                      int64_t rank, const DeviceMesh &mesh);

/// The sharding a kSplitAxesAttr value describes; errors as
/// shardingFromSplitAxes, and when `attr` is not an array of arrays of
/// integers.
llvm::Expected<TensorSharding>
parseSplitAxesAttr(mlir::Attribute attr, int64_t rank, const DeviceMesh &mesh);

/// The layout a `shard.shard` gives its value on `mesh`: its
/// `shard.sharding`'s split axes and its kPartialAxesAttr. Errors (as
/// shardingFromSplitAxes, plus): a sharding not made by a `shard.sharding`
/// op, halo sizes or explicit shard offsets, partial axes out of range or
/// also splitting a dimension.
llvm::Expected<TensorSharding> shardingOfShardOp(mlir::shard::ShardOp op,
                                                 const DeviceMesh &mesh);

} // namespace loom::autoshard

#endif // LOOM_AUTOSHARD_SHARDING_H
