//===- GradientBuilders.h - Builders the gradient rules share ---*- C++ -*-===//
//
// Small pieces of IR that several gradient rules (Gradients.cpp) and the
// autodiff pass build: constants, and the inverses of broadcasting and
// reduction. They create loom ops and arith constants only.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_GRADIENTBUILDERS_H
#define LOOM_DIALECT_GRADIENTBUILDERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace loom {

/// A 0-d or full-shape constant of `type` filled with `value`.
mlir::Value buildSplat(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::RankedTensorType type, double value);

/// A 0-d constant of `like`'s element type: broadcasts against anything.
mlir::Value buildScalar(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value like, double value);

/// Sums `grad` (of a broadcast result) back to the shape of `target`,
/// undoing numpy broadcasting: the leading dimensions `target` lacks and
/// the dimensions where `target` has size 1 are summed away.
mlir::Value reduceToType(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value grad, mlir::RankedTensorType target);

/// Spreads the gradient of a reduction over `dims` of `input` back to the
/// input's shape.
mlir::Value unreduce(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad,
                     mlir::RankedTensorType input,
                     llvm::ArrayRef<int64_t> dims);

/// Swaps the last two dimensions.
mlir::Value transposeLast2(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value x);

/// Folds all dimensions but the last into one: [B..., M, K] -> [B*M, K].
mlir::Value flattenRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// Elementwise arithmetic at one location, for the gradients of the unary
/// ops, which their ODS definitions write (ElementwiseOps.td).
struct ElementwiseBuilder {
  mlir::OpBuilder &b;
  mlir::Location loc;

  mlir::Value add(mlir::Value lhs, mlir::Value rhs) const;
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs) const;
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs) const;
  mlir::Value div(mlir::Value lhs, mlir::Value rhs) const;
  mlir::Value neg(mlir::Value x) const;
  /// buildScalar: a 0-d constant of `like`'s element type.
  mlir::Value scalar(mlir::Value like, double value) const;
};

} // namespace loom

#endif // LOOM_DIALECT_GRADIENTBUILDERS_H
