//===- Passes.td - Autodiff passes ------------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_AUTODIFF_PASSES_TD
#define LOOM_PASSES_AUTODIFF_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomAutodiff : Pass<"loom-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of a loss function";
  let description = [{
    Adds `@<func>_backward` next to `@<func>` (by default `@forward` gives
    `@forward_backward`). The new function takes the same arguments and
    returns the loss followed by the gradient of every floating-point
    argument, in argument order; each gradient result carries
    `loom.grad_of = "<name>"` with the argument's `loom.name`. Integer
    arguments (tokens, labels, the dropout step) get no gradient.

    The body is the forward computation followed by its adjoint, built
    from `loom` ops only by each op's gradient rule (`GradientOpInterface`,
    dialects/Loom/Gradients.cpp; the unary math ops' rules are in their ODS
    definitions, ElementwiseOps.td):

    - elementwise ops reduce their gradient back over broadcast dimensions
      (`reduce_sum` + `reshape`);
    - `reshape`, `transpose`, `slice`, `pad`, `concat`, `broadcast`,
      `reduce_sum`, `reduce_mean` and `cast` map to their inverse layout op,
      `reduce_max` to `reduce_max_grad` (ties share the gradient);
    - `matmul` gives two matmuls (a 2-D right operand shared across batch
      dimensions sums its gradient over them);
    - each fused op (`layernorm`, `rmsnorm`, `gelu`, `gelu_erf`, `silu`, `softmax`,
      `rope`, `attention`, `embedding`, `cross_entropy`, `dropout`) maps to
      its fused gradient op; `attention_grad` sums key/value gradients over
      the query heads of a group (GQA) and replays attention dropout's mask
      (the forward's step and dropout attributes);
    - an `arith.constant` operand gets no gradient (so multiplying by a
      constant scale does not keep the other operand for the backward);
    - a value used several times (a residual, tied embeddings) gets the sum
      of the gradients of its uses.

    The function must return one 0-d float tensor. Ops without a gradient
    rule (the gradient and optimizer ops themselves: they do not implement
    `GradientOpInterface`) are reported with an error at the op when the
    loss depends on them.

    Options:
    - `func`: the function to differentiate (default `forward`).
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The function to differentiate">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

#endif // LOOM_PASSES_AUTODIFF_PASSES_TD
