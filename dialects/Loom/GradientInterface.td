//===- GradientInterface.td - Per-op gradient rules ------------*- tablegen -*-===//
//
// The only thing reverse-mode differentiation knows about an op: how to
// build the gradients of its operands from the gradients of its results.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_GRADIENTINTERFACE_TD
#define LOOM_DIALECT_GRADIENTINTERFACE_TD

include "mlir/IR/OpBase.td"

def Loom_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    The adjoint of an op: given the gradients of its results, builds the
    ops that compute the gradients of its operands. Rules are written in
    `loom` ops (and `arith.constant` splats) only, so the backward pass is
    sharded, costed and lowered by the same machinery as the forward pass:

      * a fused op maps to its fused gradient op (`layernorm` to
        `layernorm_grad`, ...);
      * a layout op or reduction maps to its inverse (`slice` to `pad`,
        `reduce_sum` to `reshape` + `broadcast`, ...);
      * an elementwise op to a few elementwise ops, summed back over the
        dimensions it broadcast.

    A rule knows nothing of the walk over the function: `--loom-autodiff`
    calls it once per op the loss depends on, last op first, and sums the
    gradients of a value with several uses. Ops without a gradient (the
    gradient and optimizer ops themselves) do not implement the interface;
    the pass reports them when the loss depends on them. The pass reads
    only this interface, never op names.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{
        Builds at `b`'s insertion point the gradients of this op's operands
        from `resultGrads` (one per result, null where the loss does not
        depend on that result; at least one is set). On entry
        `operandGrads` holds one null value per operand; the rule sets those
        of the operands that get a gradient and leaves the others null
        (integer operands, and operands whose gradient is zero, such as an
        `arith.constant`). Fails, with an error at the op, when the loss
        depends on a result the rule cannot differentiate.
      }],
      /*retTy=*/"::llvm::LogicalResult",
      /*methodName=*/"buildOperandGradients",
      /*args=*/(ins "::mlir::OpBuilder &":$b,
                    "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

/// Declares `buildOperandGradients` on an op; it is defined in
/// Gradients.cpp.
def Loom_HasGradient : DeclareOpInterfaceMethods<Loom_GradientOpInterface>;

#endif // LOOM_DIALECT_GRADIENTINTERFACE_TD
