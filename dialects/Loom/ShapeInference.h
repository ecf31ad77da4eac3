//===- ShapeInference.h - Result types of loom ops --------------*- C++ -*-===//
//
// One function per op family computes the result type(s) from the operand
// types and attributes. Verifiers call them with an error emitter and
// compare with the stated result types; builders call them without one.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_SHAPEINFERENCE_H
#define LOOM_DIALECT_SHAPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeRange.h"
#include "mlir/Support/LLVM.h"

namespace loom {

/// Emits an error at the op being verified; null when building.
using EmitErrorFn = llvm::function_ref<mlir::InFlightDiagnostic()>;

/// numpy broadcasting of two tensors with the same element type.
mlir::FailureOr<mlir::RankedTensorType>
inferBroadcastType(mlir::Type lhs, mlir::Type rhs, EmitErrorFn emitError);

/// Result dimension i is operand dimension permutation[i].
mlir::FailureOr<mlir::RankedTensorType>
inferTransposeType(mlir::Type x, llvm::ArrayRef<int64_t> permutation,
                   EmitErrorFn emitError);

mlir::FailureOr<mlir::RankedTensorType>
inferConcatType(mlir::TypeRange inputs, int64_t axis, EmitErrorFn emitError);

mlir::FailureOr<mlir::RankedTensorType>
inferReduceType(mlir::Type x, llvm::ArrayRef<int64_t> dims, bool keepDims,
                EmitErrorFn emitError);

mlir::FailureOr<mlir::RankedTensorType>
inferMatmulType(mlir::Type lhs, mlir::Type rhs, bool transposeLhs,
                bool transposeRhs, EmitErrorFn emitError);

/// The output `[B, S, Hq, D]` and the f32 log-sum-exp `[B, Hq, S]`.
mlir::FailureOr<llvm::SmallVector<mlir::Type, 2>>
inferAttentionTypes(mlir::Type q, mlir::Type k, mlir::Type v, bool causal,
                    EmitErrorFn emitError);

mlir::FailureOr<mlir::RankedTensorType>
inferEmbeddingType(mlir::Type table, mlir::Type ids, EmitErrorFn emitError);

/// Checks that a normalization's scale/shift `param` is `[D]` for `x`'s
/// last dimension `D` and shares `x`'s element type.
mlir::LogicalResult verifyNormParam(mlir::Type x, mlir::Type param,
                                    llvm::StringRef name,
                                    EmitErrorFn emitError);

/// Checks that `labels` is `logits`' shape without its last dimension.
mlir::LogicalResult verifyLabels(mlir::Type logits, mlir::Type labels,
                                 EmitErrorFn emitError);

/// Checks that the dropout probability `rate` (the attribute `name`) is in
/// [0, 1): dropout keeps elements with probability 1 - rate.
mlir::LogicalResult verifyDropoutRate(mlir::Operation *op, llvm::StringRef name,
                                      double rate);

/// Unwraps an inference done by a builder. The builder's caller promised
/// valid operands, so a failure here is a bug in the compiler.
template <typename T>
T requireInferred(mlir::FailureOr<T> inferred, llvm::StringRef opName) {
  if (mlir::failed(inferred))
    llvm::report_fatal_error(llvm::Twine("internal error: ") + opName +
                             " built from operands it does not accept");
  return *inferred;
}

/// Formats a number for a message the way people write it (`%g`: 0.001,
/// 1e-08, inf).
std::string formatNumber(double value);

/// Compares the stated result types of `op` with the inferred ones.
mlir::LogicalResult verifyInferredTypes(mlir::Operation *op,
                                        mlir::TypeRange inferred);
/// The same for an inference that may have failed (and then reported why).
mlir::LogicalResult
verifyInferredTypes(mlir::Operation *op,
                    mlir::FailureOr<mlir::RankedTensorType> inferred);
mlir::LogicalResult
verifyInferredTypes(mlir::Operation *op,
                    mlir::FailureOr<llvm::SmallVector<mlir::Type, 2>> inferred);

/// Verifies a binary op with numpy broadcasting (operands 0 and 1).
mlir::LogicalResult verifyBroadcastingOp(mlir::Operation *op);

} // namespace loom

#endif // LOOM_DIALECT_SHAPEINFERENCE_H
