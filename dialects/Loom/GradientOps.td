//===- GradientOps.td - Gradients of the fused ops --------------*- tablegen -*-===//
//
// Each fused forward op has one fused gradient op that takes the gradient
// of its result(s) and what it needs of the forward pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_GRADIENTOPS_TD
#define LOOM_DIALECT_GRADIENTOPS_TD

def Loom_LayerNormGradOp : Loom_Op<"layernorm_grad",
    [AllTypesMatch<["dy", "x", "dx"]>,
     AllTypesMatch<["gamma", "dgamma", "dbeta"]>,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "gradient of `layernorm`";
  let description = [{
    Given `dy`, the forward input `x` and `gamma`, returns the gradients of
    `x`, `gamma` and `beta`. The row statistics are recomputed from `x`.

    ```mlir
    %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64}
        : tensor<2x16x768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_FloatTensor:$x,
                       Loom_FloatTensor:$gamma, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$dx, Loom_FloatTensor:$dgamma,
                      Loom_FloatTensor:$dbeta);
  let assemblyFormat =
      "$dy `,` $x `,` $gamma attr-dict `:` type($x) `,` type($gamma)";
}

def Loom_RMSNormGradOp : Loom_Op<"rmsnorm_grad",
    [AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["gamma", "dgamma"]>,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "gradient of `rmsnorm`";
  let description = [{
    Given `dy`, the forward input `x` and `gamma`, returns the gradients of
    `x` and `gamma`.

    ```mlir
    %dx, %dg = loom.rmsnorm_grad %dy, %x, %g {epsilon = 1.0e-06 : f64}
        : tensor<2x16x512xf32>, tensor<512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_FloatTensor:$x,
                       Loom_FloatTensor:$gamma, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$dx, Loom_FloatTensor:$dgamma);
  let assemblyFormat =
      "$dy `,` $x `,` $gamma attr-dict `:` type($x) `,` type($gamma)";
}

/// Gradient of a pointwise activation: `dx = dy * f'(x)`.
class Loom_ActivationGradOp<string mnemonic, string forward>
    : Loom_Op<mnemonic, [SameOperandsAndResultType,
                         Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "gradient of `" # forward # "`";
  let description = [{
    `dx = dy * }] # forward # [{'(x)`, elementwise, from the forward input.

    ```mlir
    %dx = loom.}] # mnemonic # [{ %dy, %x : tensor<2x16x3072xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_FloatTensor:$x);
  let results = (outs Loom_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($x)";
  let hasVerifier = 0;
  let extraClassDefinition = [{
    ::loom::OpShardingRule $cppClass::getShardingRule() {
      return ::loom::getAlignedRule(*this, getType().getShape());
    }
  }];
}

def Loom_GeluGradOp : Loom_ActivationGradOp<"gelu_grad", "gelu">;
def Loom_GeluErfGradOp : Loom_ActivationGradOp<"gelu_erf_grad", "gelu_erf">;
def Loom_SiluGradOp : Loom_ActivationGradOp<"silu_grad", "silu">;

def Loom_SoftmaxGradOp : Loom_Op<"softmax_grad", [SameOperandsAndResultType,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "gradient of `softmax` from its output";
  let description = [{
    `dx = y * (dy - sum(dy * y))` along the last dimension, where `y` is the
    forward result.

    ```mlir
    %dx = loom.softmax_grad %dy, %y : tensor<2x12x16x16xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_FloatTensor:$y);
  let results = (outs Loom_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $y attr-dict `:` type($y)";
}

def Loom_RopeGradOp : Loom_Op<"rope_grad", [SameOperandsAndResultType,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "gradient of `rope`: the inverse rotation";
  let description = [{
    Rotates each pair by the negated angle of `rope` with the same `theta`
    and frequency scaling (a rotation's transpose is its inverse).

    ```mlir
    %dx = loom.rope_grad %dy {theta = 10000.0 : f64} : tensor<2x16x8x64xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, F64Attr:$theta,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<F64Attr>:$original_max_positions);
  let results = (outs Loom_FloatTensor:$dx);
  let assemblyFormat = "$dy attr-dict `:` type($dy)";
}

def Loom_AttentionGradOp : Loom_Op<"attention_grad",
    [AllTypesMatch<["q", "dq", "dout", "out"]>, AllTypesMatch<["k", "dk"]>,
     AllTypesMatch<["v", "dv"]>,
     Loom_Cost<["getCostClass", "getFlops", "getModelFlops",
                "getSequenceExponent", "getComputeType"]>]> {
  let summary = "gradient of `attention`";
  let description = [{
    Given `dout`, the forward inputs and both forward results, returns the
    gradients of `q`, `k` and `v`. The probabilities are recomputed from
    `lse`; with grouped-query heads, `dk` and `dv` sum over the query heads
    that share a key/value head. The attributes and the optional `step`
    are the forward op's; with attention dropout the mask is recomputed
    from them, as `dropout_grad` does (`loom.mask_split_axes` and
    `loom.mask_grid` too: the split of `q`, as on `attention`).

    ```mlir
    %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %v, %o, %lse
        {causal, scale = 0.125 : f64}
        : (tensor<2x16x8x64xf32>, tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>,
           tensor<2x16x2x64xf32>, tensor<2x16x8x64xf32>, tensor<2x8x16xf32>)
        -> (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>)
    %dqd, %dkd, %dvd = loom.attention_grad %do, %q, %k, %v, %o, %lse, %step
        {causal, scale = 0.125 : f64, dropout_rate = 1.0e-01 : f64,
         dropout_seed = 1234 : i64, dropout_key = 2 : i64}
        : (tensor<2x16x8x64xf32>, tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>,
           tensor<2x16x2x64xf32>, tensor<2x16x8x64xf32>, tensor<2x8x16xf32>,
           tensor<i64>)
        -> (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dout, Loom_FloatTensor:$q,
                       Loom_FloatTensor:$k, Loom_FloatTensor:$v,
                       Loom_FloatTensor:$out, Loom_FloatTensor:$lse,
                       Optional<Loom_StepTensor>:$step,
                       UnitAttr:$causal, F64Attr:$scale,
                       OptionalAttr<F64Attr>:$dropout_rate,
                       OptionalAttr<I64Attr>:$dropout_seed,
                       OptionalAttr<I64Attr>:$dropout_key);
  let results = (outs Loom_FloatTensor:$dq, Loom_FloatTensor:$dk,
                      Loom_FloatTensor:$dv);
  let assemblyFormat = "$dout `,` $q `,` $k `,` $v `,` $out `,` $lse "
                       "(`,` $step^)? attr-dict "
                       "`:` functional-type(operands, results)";
}

def Loom_EmbeddingGradOp : Loom_Op<"embedding_grad"> {
  let summary = "gradient of `embedding`: scatter-add of rows";
  let description = [{
    `result[V, D]` starts at zero and accumulates `dy[i..., :]` into row
    `ids[i...]`; `V` comes from the result type. With tied embeddings the
    autodiff adds this to the output projection's weight gradient.

    ```mlir
    %dwte = loom.embedding_grad %dy, %tokens
        : (tensor<2x16x768xf32>, tensor<2x16xi32>) -> tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_IndexTensor:$ids);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$dy `,` $ids attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$dy, "::mlir::Value":$ids,
                   "int64_t":$vocabSize), [{
      auto dyType = ::mlir::cast<::mlir::RankedTensorType>(dy.getType());
      build($_builder, $_state,
            dyType.clone({vocabSize, dyType.getShape().back()}), dy, ids);
    }]>
  ];
}

def Loom_CrossEntropyGradOp : Loom_Op<"cross_entropy_grad",
    [AllTypesMatch<["logits", "dlogits"]>,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "gradient of `cross_entropy`";
  let description = [{
    `dlogits[t] = dloss * (softmax(logits[t]) - onehot(labels[t])) / T`,
    where `T` is the number of tokens, or `token_count` when present (as on
    `cross_entropy`).

    ```mlir
    %dlogits = loom.cross_entropy_grad %dloss, %logits, %labels
        : (tensor<f32>, tensor<2x16x50257xf32>, tensor<2x16xi32>)
        -> tensor<2x16x50257xf32>
    ```
  }];
  let arguments = (ins Loom_ScalarF32:$dloss, Loom_FloatTensor:$logits,
                       Loom_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$token_count);
  let results = (outs Loom_FloatTensor:$dlogits);
  let assemblyFormat = "$dloss `,` $logits `,` $labels attr-dict `:` "
                       "functional-type(operands, results)";
}

def Loom_ReduceMaxGradOp : Loom_Op<"reduce_max_grad",
    [AllTypesMatch<["x", "dx"]>]> {
  let summary = "gradient of `reduce_max`";
  let description = [{
    Routes `dy` (the gradient of `reduce_max %x dims`) to the elements of
    `x` that equal their group's maximum; when several elements tie, they
    share it evenly, as `torch.amax` does. `dims` and `keep_dims` are the
    forward op's, so `dy` has the forward result's type. The maximum is
    recomputed from `x`, so the reduced dimensions cannot be split.

    ```mlir
    %dx = loom.reduce_max_grad %dy, %x [2]
        : tensor<2x16xf32>, tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_FloatTensor:$x,
                       DenseI64ArrayAttr:$dims, UnitAttr:$keep_dims);
  let results = (outs Loom_FloatTensor:$dx);
  let assemblyFormat =
      "$dy `,` $x $dims attr-dict `:` type($dy) `,` type($x)";
}

def Loom_DropoutGradOp : Loom_Op<"dropout_grad", [AllTypesMatch<["dy", "dx"]>,
     Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "gradient of `dropout`: the same mask and scale";
  let description = [{
    Applies to `dy` the mask that `dropout` with the same `step`, `rate`,
    `seed` and `key` drew, and the same `1 / (1 - rate)` scale. On a device
    of a partitioned program, `loom.mask_split_axes` and `loom.mask_grid`
    say how `dy` is split, as on `dropout`.

    ```mlir
    %dx = loom.dropout_grad %dy, %step {key = 3 : i64, rate = 1.0e-01 : f64, seed = 1234 : i64}
        : tensor<2x16x768xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_StepTensor:$step,
                       F64Attr:$rate, I64Attr:$seed, I64Attr:$key);
  let results = (outs Loom_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $step attr-dict `:` type($dy) `,` type($step)";
}

#endif // LOOM_DIALECT_GRADIENTOPS_TD
