//===- Passes.td - Optimizer passes -----------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_OPTIMIZER_PASSES_TD
#define LOOM_PASSES_OPTIMIZER_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomOptimizer : Pass<"loom-optimizer", "mlir::ModuleOp"> {
  let summary = "Build @train_step: gradients plus one optimizer update";
  let description = [{
    Adds `@train_step` next to the gradient function made by
    `--loom-autodiff` (`@forward_backward` by default). With `kind=adamw`:

    ```
    func.func @train_step(params..., m..., v..., %step: tensor<i64>,
                          <the other arguments: tokens, labels>)
        -> (params'..., m'..., v'..., loss)
    ```

    and with `kind=sgd`, `(params..., %step, tokens, labels) ->
    (params'..., loss)`. The parameters are the arguments that have a
    gradient (`loom.grad_of`); `m` and `v` are the first and second AdamW
    moments, one per parameter, with its shape, in f32. `step` is the
    1-based number of this update: AdamW's bias correction uses it, and
    when the forward function takes a dropout step it receives the same
    value. The body calls the gradient function and applies one
    `loom.adamw_update` (or `loom.sgd_update`) per parameter.

    Mixed precision follows the import's policy: parameters, moments and
    the update are f32 (master weights); the bf16 compute copies are the
    `loom.cast` ops inside the forward pass, so their gradients arrive in
    f32 through the cast's gradient.

    Options (all of them are recorded on `@train_step` as `loom.optimizer`):
    - `kind`: `adamw` (default) or `sgd`.
    - `lr` (default 3e-4), `beta1` (0.9), `beta2` (0.999), `eps` (1e-8),
      `weight-decay` (0.01, decoupled for AdamW, L2 for SGD).
    - `func`: the gradient function (default `forward_backward`).
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"adamw\"",
           "The optimizer: adamw or sgd">,
    Option<"lr", "lr", "double", "3e-4", "Learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW's first-moment decay">,
    Option<"beta2", "beta2", "double", "0.999",
           "AdamW's second-moment decay">,
    Option<"eps", "eps", "double", "1e-8", "AdamW's denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.01",
           "Weight decay (decoupled for AdamW, L2 for SGD)">,
    Option<"funcName", "func", "std::string", "\"forward_backward\"",
           "The gradient function made by --loom-autodiff">
  ];
}

#endif // LOOM_PASSES_OPTIMIZER_PASSES_TD
