//===- GradientRules.h - The adjoint of each loom op ------------*- C++ -*-===//
//
// One rule per op: given the gradients of an op's results, build the ops
// that compute the gradients of its operands. The autodiff pass walks a
// function backwards and calls these rules; they know nothing of the walk.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_AUTODIFF_GRADIENTRULES_H
#define LOOM_PASSES_AUTODIFF_GRADIENTRULES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace loom {

/// Builds at `b`'s insertion point the gradients of `op`'s operands from
/// `resultGrads` (one per result, null where the loss does not depend on
/// that result). Fills `operandGrads` with one value per operand, null for
/// operands without a gradient (integer tensors, and operands whose
/// gradient is zero). Fails with an error at `op` when `op` has no rule.
mlir::LogicalResult
buildOperandGradients(mlir::OpBuilder &b, mlir::Operation *op,
                      llvm::ArrayRef<mlir::Value> resultGrads,
                      llvm::SmallVectorImpl<mlir::Value> &operandGrads);

/// A 0-d or full-shape constant of `type` filled with `value`.
mlir::Value buildSplat(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::RankedTensorType type, double value);

} // namespace loom

#endif // LOOM_PASSES_AUTODIFF_GRADIENTRULES_H
