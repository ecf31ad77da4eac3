//===- OptimizerOps.td - Fused optimizer updates ----------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_OPTIMIZEROPS_TD
#define LOOM_DIALECT_OPTIMIZEROPS_TD

def Loom_AdamWUpdateOp : Loom_Op<"adamw_update",
    [AllTypesMatch<["param", "m", "v", "new_param", "new_m", "new_v"]>,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "one fused AdamW step for one parameter";
  let description = [{
    With `t = step` (1-based), as `torch.optim.AdamW`:

        m' = beta1 * m + (1 - beta1) * g
        v' = beta2 * v + (1 - beta2) * g^2
        p' = p - lr * (weight_decay * p
                       + (m' / (1 - beta1^t)) / (sqrt(v' / (1 - beta2^t)) + eps))

    `param`, `m` and `v` are f32 (master weights and moments under every
    precision policy); `grad` has the parameter's shape and may be bf16 or
    f16, in which case it is widened first.

    ```mlir
    %p2, %m2, %v2 = loom.adamw_update %p, %g, %m, %v, %step
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64,
         lr = 3.0e-04 : f64, weight_decay = 0.1 : f64}
        : tensor<768x768xf32>, tensor<768x768xbf16>, tensor<i64>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                       Loom_FloatTensor:$m, Loom_FloatTensor:$v,
                       Loom_StepTensor:$step, F64Attr:$lr, F64Attr:$beta1,
                       F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param, Loom_FloatTensor:$new_m,
                      Loom_FloatTensor:$new_v);
  let assemblyFormat = "$param `,` $grad `,` $m `,` $v `,` $step attr-dict `:` "
                       "type($param) `,` type($grad) `,` type($step)";
}

def Loom_SGDUpdateOp : Loom_Op<"sgd_update",
    [AllTypesMatch<["param", "new_param"]>,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "one SGD step with L2 weight decay for one parameter (as torch.optim.SGD)";
  let description = [{
    `p' = p - lr * (g + weight_decay * p)`, with `param` f32 and `grad` of
    the parameter's shape in any float type (widened first).

    ```mlir
    %p2 = loom.sgd_update %p, %g {lr = 1.0e-02 : f64, weight_decay = 0.0 : f64}
        : tensor<768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                       F64Attr:$lr, F64Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param);
  let assemblyFormat =
      "$param `,` $grad attr-dict `:` type($param) `,` type($grad)";
}

#endif // LOOM_DIALECT_OPTIMIZEROPS_TD
