//===- OpCost.h - FLOPs, bytes and time of one loom op ----------*- C++ -*-===//
//
// The compute half of the cost model: what one op does (FLOPs, bytes it
// reads and writes) at its — possibly local, sharded — shapes, as the op's
// OpCostInterface (dialects/Loom/CostInterface.td) counts it, and how long
// that takes on a device by a roofline with per-class efficiency.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COSTMODEL_OPCOST_H
#define LOOM_COSTMODEL_OPCOST_H

#include "loom/CostModel/ClusterSpec.h"

#include "dialects/Loom/OpCost.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace loom::cost {

/// How an op's time is modeled (the op's `OpCostInterface`).
using OpClass = ::loom::CostClass;

struct OpWork {
  OpClass opClass = OpClass::Free;
  /// FLOPs the kernel executes (including any recomputation inside a fused
  /// backward kernel).
  double flops = 0;
  /// FLOPs that count as model FLOPs (MFU): recomputation excluded.
  double modelFlops = 0;
  /// Bytes read plus bytes written, at the tensors' element types.
  double bytes = 0;
  /// The arithmetic the FLOPs run in (from the operand element type).
  MathMode mathMode = MathMode::FP32;
};

/// Shapes of an op's operands and results, in order.
using ::loom::OpShapes;
/// Bytes of one element of a type, and elements of a shape.
using ::loom::elementBytes;
using ::loom::numElements;

/// The work of `op` at `shapes` (its local shapes on one device), as its
/// `OpCostInterface` counts it; an op without the interface is free.
OpWork getOpWork(mlir::Operation *op, const OpShapes &shapes);
inline OpWork getOpWork(mlir::Operation *op) {
  return getOpWork(op, OpShapes::of(op));
}

/// Seconds `work` takes on `device`: launch overhead plus the roofline
/// max(compute, memory) with the device's efficiencies.
double opTime(const OpWork &work, const DeviceSpec &device);

} // namespace loom::cost

#endif // LOOM_COSTMODEL_OPCOST_H
