//===- OpCost.h - What the cost interface speaks of -------------*- C++ -*-===//
//
// The types and shape arithmetic of OpCostInterface (CostInterface.td):
// how an op's time is modeled, its operand and result shapes, and the bytes
// of tensors at their element types. Nothing here knows a device; the cost
// model (lib/CostModel) turns these counts into seconds.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_OPCOST_H
#define LOOM_DIALECT_OPCOST_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace loom {

/// How an op's time is modeled.
enum class CostClass {
  /// Matrix products: compute-bound roofline with the size-dependent GEMM
  /// efficiency.
  Gemm,
  /// Fused attention (attention, attention_grad): compute-bound roofline at
  /// the device's attention efficiency, on the work the kernel does (a
  /// causal kernel skips the tiles above the diagonal).
  Attention,
  /// Everything elementwise, normalizations, reductions, copies: bandwidth
  /// roofline.
  Bandwidth,
  /// Views (reshape) and constants: no kernel.
  Free,
};

/// Shapes of an op's operands and results, in order: the op's own, or the
/// local shapes one device holds under a sharding.
struct OpShapes {
  llvm::SmallVector<llvm::SmallVector<int64_t, 4>, 4> operands, results;
  /// The op's own (global) shapes; empty for a value that is not a ranked
  /// tensor.
  static OpShapes of(mlir::Operation *op);
};

/// Bytes of one element of `type` (a tensor's element type, or a scalar),
/// at least 1; 0 for types without a bit width (index, tokens).
double elementBytes(mlir::Type type);
/// Elements of a tensor of `shape` (1 for a 0-d tensor).
double numElements(llvm::ArrayRef<int64_t> shape);
/// Bytes of every tensor operand and result of `op` at `shapes`, at the
/// op's element types: the traffic of a kernel that reads each operand and
/// writes each result once.
double tensorBytes(mlir::Operation *op, const OpShapes &shapes);

} // namespace loom

#endif // LOOM_DIALECT_OPCOST_H
