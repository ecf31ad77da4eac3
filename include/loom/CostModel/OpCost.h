//===- OpCost.h - FLOPs, bytes and time of one loom op ----------*- C++ -*-===//
//
// The compute half of the cost model: what one op does (FLOPs, bytes it
// reads and writes) from the op and its — possibly local, sharded — shapes,
// and how long that takes on a device by a roofline with per-class
// efficiency.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COSTMODEL_OPCOST_H
#define LOOM_COSTMODEL_OPCOST_H

#include "loom/CostModel/ClusterSpec.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace loom::cost {

/// How an op's time is modeled.
enum class OpClass {
  /// Matrix products (matmul, fused attention): compute-bound roofline with
  /// the size-dependent GEMM efficiency.
  Gemm,
  /// Everything elementwise, normalizations, reductions, copies: bandwidth
  /// roofline.
  Bandwidth,
  /// Views (reshape) and constants: no kernel.
  Free,
};

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
struct OpShapes {
  llvm::SmallVector<llvm::SmallVector<int64_t, 4>, 4> operands, results;
  /// The op's own (global) shapes.
  static OpShapes of(mlir::Operation *op);
};

/// Bytes of one element of `type` (a tensor's element type, or a scalar),
/// at least 1; 0 for types without a bit width (index, tokens).
double elementBytes(mlir::Type type);
/// Elements of a tensor of `shape` (1 for a 0-d tensor).
double numElements(llvm::ArrayRef<int64_t> shape);

/// The work of `op` at `shapes` (its local shapes on one device).
OpWork getOpWork(mlir::Operation *op, const OpShapes &shapes);
inline OpWork getOpWork(mlir::Operation *op) {
  return getOpWork(op, OpShapes::of(op));
}

/// Seconds `work` takes on `device`: launch overhead plus the roofline
/// max(compute, memory) with the device's efficiencies.
double opTime(const OpWork &work, const DeviceSpec &device);

} // namespace loom::cost

#endif // LOOM_COSTMODEL_OPCOST_H
