//===- Autodiff.h - Reverse-mode differentiation as a library ---*- C++ -*-===//
//
// What `--loom-autodiff` does, callable by other passes: `--loom-pipeline`
// differentiates its micro-batched forward pass itself, so that it can tag
// each backward op with the pipeline stage of the forward op it comes from.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_AUTODIFF_AUTODIFF_H
#define LOOM_PASSES_AUTODIFF_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace loom {

/// Called for every op the backward pass creates, with the forward op whose
/// adjoint it computes or sums (null for the loss's seed and for the zero
/// gradients of arguments the loss does not depend on).
using BackwardOpHook = llvm::function_ref<void(mlir::Operation *created,
                                               mlir::Operation *forward)>;

/// Checks that `forward` is a loss function (one block, one 0-d float
/// result) and inserts after it `name`: the same arguments, returning the
/// loss and the gradient of every floating-point argument in argument
/// order, each result marked `loom.grad_of`. Errors are emitted at the
/// function or at an op without a gradient rule.
mlir::FailureOr<mlir::func::FuncOp>
buildGradientFunction(mlir::func::FuncOp forward, llvm::StringRef name,
                      BackwardOpHook hook = {});

} // namespace loom

#endif // LOOM_PASSES_AUTODIFF_AUTODIFF_H
