// RUN: loom-opt %s --loom-decompose-attention -split-input-file -verify-diagnostics

// The unfused form has no log-sum-exp: an attention whose lse is used
// cannot be decomposed.
func.func @lse_used(%q: tensor<1x4x2x4xf32>) -> tensor<1x2x4xf32> {
  // expected-error @+1 {{loom-decompose-attention: the log-sum-exp result of this attention has uses; the unfused form does not compute it}}
  %o, %lse = loom.attention %q, %q, %q {causal, scale = 0.5 : f64} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x2x4xf32>)
  // expected-note @+1 {{used here}}
  return %lse : tensor<1x2x4xf32>
}
