//===- Passes.td - Graph transforms -----------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_TRANSFORMS_PASSES_TD
#define LOOM_PASSES_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomDecomposeAttention : Pass<"loom-decompose-attention"> {
  let summary = "Rewrite fused attention into matmul, softmax, dropout, matmul";
  let description = [{
    Replaces every `loom.attention` (in any function) by the unfused
    computation of Megatron-LM's non-flash attention, so that the memory
    model sees, and can count, the activations it saves (Korthikanti et al.
    2022, "Reducing Activation Recomputation in Large Transformer Models",
    Section 4.1). For `q` `[B, S, Hq, D]` and `k`, `v` `[B, Skv, Hkv, D]`:

    1. `loom.transpose` q, k and v to heads-major `[B, H, S, D]`;
    2. with grouped-query heads (`Hkv < Hq`), each key/value head is
       repeated for the `Hq / Hkv` query heads that share it
       (`loom.reshape` to `[B, Hkv, 1, Skv, D]`, `loom.broadcast` to
       `[B, Hkv, G, Skv, D]`, `loom.reshape` to `[B, Hq, Skv, D]`);
    3. `qs = loom.mul q, scale`: the scale multiplies Q (an `arith.constant`
       0-d splat of Q's element type, so rounded to it: exact when the head
       size is a power of 4), not the `[S, Skv]` scores, so no extra tensor
       of size `S * Skv` is saved for the backward pass;
    4. `scores = loom.matmul qs, k {transpose_rhs}`, `[B, Hq, S, Skv]`;
    5. `p = loom.softmax scores`, `{causal}` for causal attention;
    6. `pd = loom.dropout p, step` with the attention's `dropout_rate`,
       `dropout_seed` and `dropout_key`, only when it has dropout (the mask
       is the one the fused op draws);
    7. `o = loom.matmul pd, v` (or `p`), `[B, Hq, S, D]`;
    8. `loom.transpose` o back to `[B, S, Hq, D]`.

    Differentiated afterwards (run it before `--loom-autodiff`), the
    backward pass keeps exactly `qs` and `k` (the scores matmul), `p` (the
    softmax), `pd` and `v` (the output matmul), and nothing else of size
    `S * Skv`: the dropout mask is recomputed from its counter.

    The ops of steps 4 to 7 (the scores matmul, softmax, dropout and the
    output matmul) carry the unit attribute `loom.attention_core`, which
    marks the part of attention that selective activation recomputation
    recomputes instead of saving.

    The log-sum-exp result of `loom.attention` has no unfused counterpart:
    an attention whose log-sum-exp has uses is an error. In `@forward`, as
    `loom-import` builds it, it has none (only `--loom-autodiff`'s
    `attention_grad` reads it).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def LoomPadVocab : Pass<"loom-pad-vocab", "mlir::ModuleOp"> {
  let summary = "Pad a language model head's logits to an aligned width";
  let description = [{
    Run on per-device programs before `--loom-fuse` (`loom-compile` does,
    unless `--no-pad-vocab`). A vocabulary that is not a multiple of
    `multiple` (GPT-2's 50257) leaves rows of the logits, and of both
    gradients of the head, that GEMM libraries do not read at full speed
    (2-byte aligned in bf16: cuBLASLt's slow kernels, or the CUDA matmul's
    staging through scratch, several passes over the step's largest
    tensor). For each head of that form, in every function:

    - the logits are `loom.matmul %h, %w {transpose_rhs}` with a `[V, d]`
      weight `%w`, read only by `loom.cross_entropy` and
      `loom.cross_entropy_grad` ops;
    - each gradient is read only by `loom.matmul %dlogits, %w'` with a
      `[V, d]` rhs (the gradient of `%h`; `%w'` is `%w`, or a value
      standing for it such as ZeRO's regather, padded the same way) and
      by `loom.matmul` of `%dlogits` (or of it reshaped to `[T, V]`)
      transposed as the lhs (the gradient of `%w`),

    the weight is padded with zero rows to `Vp`, the next multiple
    (`loom.pad`), the product gets a bias of 0 over the vocabulary and
    -inf over the padding (a rank-1 `arith.constant`, which `--loom-fuse`
    makes the matmul's bias epilogue), and the losses, gradients and
    backward matmuls read the `[..., Vp]` values; the weight gradient's
    `Vp` rows are cut back to `V` by a `loom.slice`. exp(-inf) adds
    nothing to a row's sum of exponentials and its softmax is 0 there, so
    the loss and every gradient are those of the original head; only
    intermediates change shape (parameters, optimizer state and
    checkpoints do not). Other heads are left alone: logits that another
    op reads (a pipeline stage returning them for its backward), or that
    come through a collective (a head split along `d`, whose partial
    logits are all-reduced). A label in [V, Vp) is no longer refused by
    the loss (its logit is -inf: an infinite loss); the embedding lookup
    of the same token id still is. `multiple` is 1 to 65536.

    ```mlir
    %wp = loom.pad %w low [0, 0] : tensor<50257x768xbf16> -> tensor<50304x768xbf16>
    %p = loom.matmul %h, %wp {transpose_rhs} : (...) -> tensor<8x1024x50304xbf16>
    %logits = loom.add %p, %mask : (tensor<8x1024x50304xbf16>, tensor<50304xbf16>) -> ...
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"64",
           "pad the vocabulary to a multiple of this (16-byte aligned "
           "rows need 8 in bf16, 4 in f32)">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def LoomFuse : Pass<"loom-fuse", "mlir::ModuleOp"> {
  let summary = "Group ops that one kernel call can run into loom.fused";
  let description = [{
    Run on per-device programs right before `--loom-lower-cpu` /
    `--loom-lower-cuda` (`loom-compile` does, unless `--no-fuse`). In every
    function of one block:
    - **matmul epilogues**: a `loom.matmul` whose only user is a
      `loom.add` of a bias (rank 1, the result's last dimension, the same
      element type), and a `loom.gelu` of that sum when there is one (its
      other users, a `loom.gelu_grad` in a training step, must come after
      the gelu), become one `loom.fused` with inputs (lhs, rhs, bias): one
      `matmul` call with a bias or bias-gelu epilogue (cuBLASLt's on the
      GPU), the sum kept as a second result where it is used elsewhere.
      A residual added to the product (or to the biased sum, when nothing
      else reads it), a tensor of the product's type other than the
      matmul's operands, joins too: the residual and bias_residual
      epilogues (cuBLASLt's C input, beta = 1);
    - **backward epilogues**: a matmul read only by a `loom.gelu_grad`
      whose rows (every dimension but the last) a `loom.reduce_sum` sums,
      as a linear layer's dX and bias gradient before a gelu are, becomes
      one `loom.fused` (lhs, rhs, pre) -> (dpre, db), the dgelu_bias_grad
      epilogue (on the GPU a plain GEMM and one fused pass); a `loom.reduce_sum` of dy's rows
      beside a matmul whose untransposed rank-2 rhs is dy (or dy reshaped
      to [rows, n]), a weight gradient x^T.dy and its bias gradient,
      becomes one `loom.fused` (lhs, rhs) -> (dw, db), the bias_grad
      epilogue (cuBLASLt's BGRADA), its reduce_sum rewritten over the rhs.
      Each stands after the latest of its ops that every reader of its
      results follows, or is not formed;
    - **losses**: a `loom.cross_entropy` and a `loom.cross_entropy_grad`
      of the same logits, labels and token count become one `loom.fused`
      (dloss, logits, labels) -> (loss, dlogits), one
      `cross_entropy_with_grad` call, which on the GPU takes each row's
      maximum and sum of exponentials once for both (the logits are read
      twice instead of three times);
    - **norm gradients**: a `loom.layernorm_grad` or `loom.rmsnorm_grad`
      whose dx only a `loom.add` of a residual (a tensor of dx's type other
      than the norm's operands) reads, as each block's input gradient in a
      pre-norm transformer is, becomes one `loom.fused` (dy, x, gamma,
      residual) -> (dx + residual, dgamma[, dbeta]): one norm gradient
      call that adds the residual as it stores dx;
    - **elementwise chains**: connected ops of one result shape among add,
      sub, mul, div, neg, exp, log, sqrt, rsqrt, tanh, cast, gelu,
      gelu_grad, gelu_erf, gelu_erf_grad, silu and silu_grad on f32 / bf16
      tensors become one
      `loom.fused` run by one `fused_elementwise` call; its results are the
      values used outside the chain. A chain grows while no other op reads
      its values in between (the fused op stands where its last op stood),
      up to 64 ops and 16 tensors;
    - **optimizer updates**: consecutive `loom.adamw_update` ops sharing
      their step and hyperparameters become one `loom.fused` run by one
      multi-tensor `adamw_update_multi` call (inputs param, grad, m, v of
      each, then the step); a gradient's widening `loom.cast` read by its
      update alone moves inside (the kernels widen a bf16 gradient as they
      load it).
    The fused op computes what the ops computed; f32 results are the same
    bit for bit on the CPU, and on the GPU bf16 values between the ops of a
    chain are no longer rounded (they stay f32 registers).
    ```mlir
    %1 = loom.fused(%x, %y, %b) : (...) -> tensor<8x64xbf16> { ... loom.yield %3 : ... }
    ```
  }];
  let options = [
    Option<"epilogues", "epilogues", "bool", /*default=*/"true",
           "fuse a matmul with its bias add and gelu or residual add, and "
           "backward matmuls with their gelu gradient and bias gradient">,
    Option<"losses", "losses", "bool", /*default=*/"true",
           "fuse a cross-entropy loss with its gradient">,
    Option<"norms", "norms", "bool", /*default=*/"true",
           "fuse a norm's gradient with the residual add of its dx">,
    Option<"elementwise", "elementwise", "bool", /*default=*/"true",
           "fuse chains of elementwise ops">,
    Option<"optimizer", "optimizer", "bool", /*default=*/"true",
           "fuse runs of AdamW updates into one multi-tensor call">,
  ];
}

def LoomOverlapCollectives : Pass<"loom-overlap-collectives", "mlir::ModuleOp"> {
  let summary = "Start collectives early so that their transfers overlap compute";
  let description = [{
    Run on per-device programs right before `--loom-lower-cpu` /
    `--loom-lower-cuda` (`loom-compile` does, unless `--no-overlap`). In
    every function of one block, each collective whose transfer can run on
    its own buffers (an all-reduce, or a reduce-scatter / all-gather whose
    operand already holds contiguous member blocks of the result's element
    type) is moved up to just after the op that computes its operand (an
    all-gather no earlier than where the previous all-gather stood: one
    gather ahead, so that prefetching a ZeRO step's parameters keeps one
    more of them live, not all), and marked `loom.overlap`. Reshapes and
    `shard.shard` ops, which cost nothing, move up to just after their
    operand first. The lowering then starts each marked transfer where it
    stands and waits for it just before the first op that reads its result,
    so gradient reductions run under the rest of the backward and ZeRO
    gathers prefetch. Every other op keeps its order.
    ```mlir
    %g = loom.mul %w, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = shard.all_reduce %g on @mesh grid_axes = [0] {loom.overlap} : tensor<4x8xf32> -> tensor<4x8xf32>
    %h = loom.exp %x : tensor<4x8xf32>
    ```
  }];
}

#endif // LOOM_PASSES_TRANSFORMS_PASSES_TD
