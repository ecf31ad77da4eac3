//===- NeuralOps.td - Matmul and the fused ops of transformers -*- tablegen -*-===//

#ifndef LOOM_DIALECT_NEURALOPS_TD
#define LOOM_DIALECT_NEURALOPS_TD

def Loom_MatmulOp : Loom_Op<"matmul",
    [Loom_HasGradient, Loom_Cost<["getCostClass", "getFlops", "getModelFlops"]>]> {
  let summary = "batched matrix product with optional transposes";
  let description = [{
    `lhs` is `[B..., M, K]` (`[B..., K, M]` with `transpose_lhs`), `rhs` is
    `[K, N]` or `[B..., K, N]` with the same batch dimensions (`[.., N, K]`
    with `transpose_rhs`). The result is `[B..., M, N]`; a 2-D `rhs` is
    shared by every batch element, as a linear layer's weight is.

    ```mlir
    %y = loom.matmul %x, %w
        : (tensor<2x16x768xf32>, tensor<768x3072xf32>) -> tensor<2x16x3072xf32>
    %s = loom.matmul %q, %k {transpose_rhs}
        : (tensor<2x12x16x64xf32>, tensor<2x12x16x64xf32>) -> tensor<2x12x16x16xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   CArg<"bool", "false">:$transposeLhs,
                   CArg<"bool", "false">:$transposeRhs), [{
      build($_builder, $_state,
            ::loom::requireInferred(::loom::inferMatmulType(
                lhs.getType(), rhs.getType(), transposeLhs, transposeRhs,
                nullptr), "loom.matmul"),
            lhs, rhs, transposeLhs, transposeRhs);
    }]>
  ];
}

def Loom_LayerNormOp : Loom_Op<"layernorm",
    [AllTypesMatch<["x", "result"]>, AllTypesMatch<["gamma", "beta"]>,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `y = (x - mean(x)) / sqrt(var(x) + epsilon) * gamma + beta`, with the
    mean and the (biased) variance taken over the last dimension, as
    `torch.nn.LayerNorm`. `gamma` and `beta` are `[D]`.

    ```mlir
    %y = loom.layernorm %x, %g, %b {epsilon = 1.0e-05 : f64}
        : tensor<2x16x768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$gamma,
                       Loom_FloatTensor:$beta, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$x `,` $gamma `,` $beta attr-dict `:` type($x) `,` type($gamma)";
}

def Loom_RMSNormOp : Loom_Op<"rmsnorm", [AllTypesMatch<["x", "result"]>,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x^2) + epsilon) * gamma` over the last dimension, as
    Llama's `LlamaRMSNorm`. `gamma` is `[D]`.

    ```mlir
    %y = loom.rmsnorm %x, %g {epsilon = 1.0e-06 : f64}
        : tensor<2x16x512xf32>, tensor<512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$gamma,
                       F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x `,` $gamma attr-dict `:` type($x) `,` type($gamma)";
}

def Loom_GeluOp : Loom_Op<"gelu", [SameOperandsAndResultType,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "GELU, tanh approximation (GPT-2's `gelu_new`)";
  let description = [{
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`.

    ```mlir
    %y = loom.gelu %x : tensor<2x16x3072xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 0;
  let extraClassDefinition = [{
    ::loom::OpShardingRule $cppClass::getShardingRule() {
      return ::loom::getAlignedRule(*this, getType().getShape());
    }
  }];
}

def Loom_GeluErfOp : Loom_Op<"gelu_erf", [SameOperandsAndResultType,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "GELU, exact (erf) form (GPT-NeoX's and BERT's `gelu`)";
  let description = [{
    `0.5 * x * (1 + erf(x / sqrt(2)))`, `torch.nn.functional.gelu` with
    `approximate='none'`; `loom.gelu` is the tanh approximation.

    ```mlir
    %y = loom.gelu_erf %x : tensor<2x16x8192xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 0;
  let extraClassDefinition = [{
    ::loom::OpShardingRule $cppClass::getShardingRule() {
      return ::loom::getAlignedRule(*this, getType().getShape());
    }
  }];
}

def Loom_SiluOp : Loom_Op<"silu", [SameOperandsAndResultType,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "SiLU (swish): x * sigmoid(x)";
  let description = [{
    `x / (1 + exp(-x))`, the gate activation of Llama's SwiGLU MLP.

    ```mlir
    %y = loom.silu %x : tensor<2x16x1376xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 0;
  let extraClassDefinition = [{
    ::loom::OpShardingRule $cppClass::getShardingRule() {
      return ::loom::getAlignedRule(*this, getType().getShape());
    }
  }];
}

def Loom_SoftmaxOp : Loom_Op<"softmax", [SameOperandsAndResultType,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "softmax over the last dimension, optionally causally masked";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along the last dimension.

    With `causal` (Megatron's fused scaled-masked softmax), the last two
    dimensions `[.., S, S]` must be equal and element `j` of row `i` is
    masked out for `j > i`: it takes no part in the row's sum and its
    result is exactly 0 (so `softmax_grad` gives it a zero gradient with no
    mask of its own).

    ```mlir
    %p = loom.softmax %s : tensor<2x12x16x16xf32>
    %c = loom.softmax %s {causal} : tensor<2x12x16x16xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x, UnitAttr:$causal);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Loom_RopeOp : Loom_Op<"rope", [SameOperandsAndResultType,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "rotary position embedding (Llama's rotate-half layout)";
  let description = [{
    `x` is `[B, S, H, D]` with even `D`. Position `s` (0-based, along
    dimension 1) rotates the pair `(x[i], x[i + D/2])` by the angle
    `s * theta^(-2i/D)`, as Hugging Face's `apply_rotary_pos_emb`. On a
    device of a partitioned program whose `x` is split along the sequence,
    `loom.mask_split_axes` and `loom.mask_grid` (set by `--loom-partition`)
    give its rows' global positions.

    Llama 3.1's frequency scaling (`rope_scaling` with `"rope_type":
    "llama3"`) comes as `scaling_factor`, `low_freq_factor`,
    `high_freq_factor` and `original_max_positions`, all four or none
    (runtime/include/loom/RopeFrequency.h): the low frequencies are
    divided by the factor, the high ones kept, the band between blended.

    ```mlir
    %q = loom.rope %x {theta = 10000.0 : f64} : tensor<2x16x8x64xf32>
    %q8 = loom.rope %x {theta = 500000.0 : f64, scaling_factor = 8.0 : f64,
        low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64,
        original_max_positions = 8192.0 : f64} : tensor<2x16x8x64xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x, F64Attr:$theta,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<F64Attr>:$original_max_positions);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Loom_AttentionOp : Loom_Op<"attention",
    [Loom_HasGradient, Loom_Cost<["getCostClass", "getFlops", "getModelFlops",
                                  "getSequenceExponent"]>]> {
  let summary = "fused scaled-dot-product attention with grouped-query heads";
  let description = [{
    `q` is `[B, S, Hq, D]`, `k` and `v` are `[B, Skv, Hkv, D]` with `Hkv`
    dividing `Hq`: query head `h` attends with key/value head
    `h / (Hq / Hkv)` (grouped-query attention; `Hkv = Hq` is multi-head).
    `out = softmax(scale * q k^T + mask) v`, where `causal` masks keys after
    the query's position (and needs `S = Skv`; on a device of a
    context-parallel program `Skv` a multiple of `S`, the queries its rows
    of the sequence at the offset `loom.mask_split_axes` gives). The second
    result is the
    log-sum-exp of each softmax row, `[B, Hq, S]` in f32: what a fused
    kernel keeps for the backward pass instead of the probabilities.

    Attention dropout (GPT-2's `attn_pdrop`): with `dropout_rate`,
    `dropout_seed`, `dropout_key` and the `step` operand (all or none), the
    probabilities `P` are dropped before they multiply `v`:
    `out = (P * mask / (1 - dropout_rate)) v`. The mask of element
    `(b, h, i, j)` of `P` is the one `loom.dropout %P, %step` with
    `rate = dropout_rate, seed = dropout_seed, key = dropout_key` draws for
    the `[B, Hq, S, Skv]` tensor `P`: a function of the element's row-major
    index in that global tensor, so `attention_grad` recomputes it and the
    unfused form (`--loom-decompose-attention`) draws the same mask. The
    log-sum-exp is that of the undropped probabilities. On a device of a
    partitioned program, `loom.mask_split_axes` (and `loom.mask_grid`) give
    the mesh axes splitting each dimension of `q`, `[B, S, Hq, D]`: the
    mask's `b`, `h` and `i` are split as `q`'s dimensions 0, 2 and 1, and
    `j` (the keys) is whole, so each device draws the masks of its slice of
    the global `P` (see `loom.dropout`).

    ```mlir
    %o, %lse = loom.attention %q, %k, %v {causal, scale = 0.125 : f64}
        : (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>)
        -> (tensor<2x16x8x64xf32>, tensor<2x8x16xf32>)
    %od, %lsed = loom.attention %q, %k, %v, %step {causal, scale = 0.125 : f64,
        dropout_rate = 1.0e-01 : f64, dropout_seed = 1234 : i64, dropout_key = 2 : i64}
        : (tensor<2x16x8x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2x64xf32>,
           tensor<i64>) -> (tensor<2x16x8x64xf32>, tensor<2x8x16xf32>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$q, Loom_FloatTensor:$k,
                       Loom_FloatTensor:$v, Optional<Loom_StepTensor>:$step,
                       UnitAttr:$causal, F64Attr:$scale,
                       OptionalAttr<F64Attr>:$dropout_rate,
                       OptionalAttr<I64Attr>:$dropout_seed,
                       OptionalAttr<I64Attr>:$dropout_key);
  let results = (outs Loom_FloatTensor:$out, Loom_FloatTensor:$lse);
  let assemblyFormat = "$q `,` $k `,` $v (`,` $step^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let builders = [
    /// Attention without dropout when `step` is null; otherwise with
    /// dropout of `dropoutRate` keyed by `step`, `dropoutSeed` and
    /// `dropoutKey`.
    OpBuilder<(ins "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "bool":$causal, "double":$scale,
                   CArg<"::mlir::Value", "{}">:$step,
                   CArg<"double", "0.0">:$dropoutRate,
                   CArg<"int64_t", "0">:$dropoutSeed,
                   CArg<"int64_t", "0">:$dropoutKey), [{
      ::llvm::SmallVector<::mlir::Type, 2> types = ::loom::requireInferred(
          ::loom::inferAttentionTypes(q.getType(), k.getType(), v.getType(),
                                      causal, nullptr), "loom.attention");
      build($_builder, $_state, types[0], types[1], q, k, v, step,
            causal ? $_builder.getUnitAttr() : nullptr,
            $_builder.getF64FloatAttr(scale),
            step ? $_builder.getF64FloatAttr(dropoutRate) : nullptr,
            step ? $_builder.getI64IntegerAttr(dropoutSeed) : nullptr,
            step ? $_builder.getI64IntegerAttr(dropoutKey) : nullptr);
    }]>
  ];
}

def Loom_EmbeddingOp : Loom_Op<"embedding",
    [Loom_HasGradient, Loom_Cost<["getFlops", "getBytes"]>]> {
  let summary = "gathers rows of a table by integer ids";
  let description = [{
    `result[i..., :] = table[ids[i...], :]` with `table` `[V, D]`; the result
    is `ids`' shape followed by `D`. Ids outside `[0, V)` are an error at
    run time.

    ```mlir
    %x = loom.embedding %wte, %tokens
        : (tensor<50257x768xf32>, tensor<2x16xi32>) -> tensor<2x16x768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$table, Loom_IndexTensor:$ids);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$table, "::mlir::Value":$ids), [{
      build($_builder, $_state,
            ::loom::requireInferred(::loom::inferEmbeddingType(
                table.getType(), ids.getType(), nullptr), "loom.embedding"),
            table, ids);
    }]>
  ];
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy",
    [Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "fused log-softmax + negative log-likelihood, mean over tokens";
  let description = [{
    `logits` is `[T..., V]` and `labels` `[T...]` with ids in `[0, V)`. The
    result is the f32 scalar `mean over T of (logsumexp(logits[t]) -
    logits[t, labels[t]])`, i.e. `torch.nn.functional.cross_entropy`.

    `token_count`, when present, is the `T` the sum is divided by instead of
    the number of labels: `--loom-partition` sets it to the global number of
    tokens when the tokens are split over devices, so that each device's
    result is its partial sum of the global mean.

    ```mlir
    %loss = loom.cross_entropy %logits, %labels
        : (tensor<2x16x50257xf32>, tensor<2x16xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$token_count);
  let results = (outs Loom_ScalarF32:$loss);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$logits, "::mlir::Value":$labels), [{
      build($_builder, $_state,
            ::mlir::RankedTensorType::get({}, $_builder.getF32Type()),
            logits, labels, /*token_count=*/nullptr);
    }]>
  ];
}

def Loom_DropoutOp : Loom_Op<"dropout", [AllTypesMatch<["x", "result"]>,
     Loom_HasGradient, Loom_Cost<["getFlopsPerElement"]>]> {
  let summary = "inverted dropout with a counter-based random mask";
  let description = [{
    Zeroes each element with probability `rate` and scales the others by
    `1 / (1 - rate)`. The keep/drop decision of an element is a pure
    function of (`seed`, `step`, `key`, the element's index in the global,
    unsharded tensor): `key` names the dropout site, so a sharded run draws
    exactly the masks of the unsharded one and `dropout_grad` recomputes
    the mask instead of storing it.

    On a device of a partitioned program, `x` is a shard and the op carries
    `loom.mask_split_axes` (one list of mesh axes per dimension of `x`,
    major first, as `shard.sharding`'s `split_axes`) and `loom.mask_grid`
    (the grid): an element's global index follows from its local index and
    the device's coordinates (see DropoutMask.h). `--loom-partition` sets
    them.

    ```mlir
    %y = loom.dropout %x, %step {key = 3 : i64, rate = 1.0e-01 : f64, seed = 1234 : i64}
        : tensor<2x16x768xf32>, tensor<i64>
    // Device shard of a [4, 16, 768] tensor split by batch over mesh axis 0:
    %ys = loom.dropout %xs, %step {key = 3 : i64, rate = 1.0e-01 : f64, seed = 1234 : i64,
        loom.mask_split_axes = [[0], [], []], loom.mask_grid = @mesh}
        : tensor<2x16x768xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_StepTensor:$step,
                       F64Attr:$rate, I64Attr:$seed, I64Attr:$key);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x `,` $step attr-dict `:` type($x) `,` type($step)";
}

#endif // LOOM_DIALECT_NEURALOPS_TD
