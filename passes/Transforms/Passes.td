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

#endif // LOOM_PASSES_TRANSFORMS_PASSES_TD
