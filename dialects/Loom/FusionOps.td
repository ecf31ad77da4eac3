//===- FusionOps.td - Ops run as one kernel ---------------------*- tablegen -*-===//
//
// `--loom-fuse` groups ops of a per-device program that one kernel call can
// run together; the lowerings turn each group into one call.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_FUSIONOPS_TD
#define LOOM_DIALECT_FUSIONOPS_TD

def Loom_FusedOp : Op<Loom_Dialect, "fused",
    [IsolatedFromAbove, SingleBlock, RecursiveMemoryEffects,
     RecursivelySpeculatable, Loom_OpCostInterface]> {
  let summary = "ops that run as one kernel call";
  let description = [{
    The body computes the results from the block arguments (the inputs, in
    order) with `loom` ops, and `loom.yield`s them. `--loom-fuse` builds
    these kinds, which `--loom-lower-cpu` / `--loom-lower-cuda` each lower
    to one kernel call (loom_cpu_kernels.h):

    - a matmul with an epilogue: `loom.matmul`, `loom.add` of a bias over
      the result's last dimension, and optionally `loom.gelu` of the sum
      (inputs lhs, rhs, bias; results the gelu, or the sum and the gelu when
      the sum is used elsewhere too), or a residual `loom.add` of the
      product or the biased sum; in the backward, `loom.gelu_grad` of the
      product with a `loom.reduce_sum` of its rows (inputs lhs, rhs, pre;
      results dpre and the bias gradient), or a `loom.reduce_sum` of the
      rhs' rows (inputs lhs, rhs; results the product and the bias
      gradient): one `matmul` call, a cuBLASLt epilogue on the GPU;
    - a loss and its gradient: `loom.cross_entropy` and
      `loom.cross_entropy_grad` of one logits, labels and token count
      (inputs dloss, logits, labels; results the loss and dlogits): one
      `cross_entropy_with_grad` call;
    - an elementwise chain: ops of one result shape among add, sub, mul,
      div, neg, exp, log, sqrt, rsqrt, tanh, cast, gelu, gelu_grad,
      gelu_erf, gelu_erf_grad, silu, silu_grad, the inputs broadcasting to that shape: one
      `fused_elementwise` call, every element computed in f32 registers and
      rounded once, at the store;
    - AdamW updates of several parameters sharing their step and
      hyperparameters (inputs param, grad, m, v of each, then the step;
      results param', m', v' of each; a gradient's widening cast may stand
      before its update): one multi-tensor `adamw_update_multi` call.

    ```mlir
    %1:2 = loom.fused(%x, %w, %b) : (tensor<8x64xbf16>, tensor<64x256xbf16>, tensor<256xbf16>)
        -> (tensor<8x256xbf16>, tensor<8x256xbf16>) {
    ^bb0(%x0: tensor<8x64xbf16>, %w0: tensor<64x256xbf16>, %b0: tensor<256xbf16>):
      %0 = loom.matmul %x0, %w0 : (tensor<8x64xbf16>, tensor<64x256xbf16>) -> tensor<8x256xbf16>
      %2 = loom.add %0, %b0 : (tensor<8x256xbf16>, tensor<256xbf16>) -> tensor<8x256xbf16>
      %3 = loom.gelu %2 : tensor<8x256xbf16>
      loom.yield %2, %3 : tensor<8x256xbf16>, tensor<8x256xbf16>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "`(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body";
  let hasVerifier = 1;
}

def Loom_YieldOp : Op<Loom_Dialect, "yield",
    [Pure, Terminator, HasParent<"FusedOp">]> {
  let summary = "the results of a loom.fused body";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // LOOM_DIALECT_FUSIONOPS_TD
