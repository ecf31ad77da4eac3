// RUN: loom-opt %s --loom-autodiff --loom-optimizer="kind=adamw lr=1e-3 beta1=0.8 beta2=0.5 eps=1e-6 weight-decay=0.1" -split-input-file | FileCheck %s --check-prefix=ADAMW
// RUN: loom-opt %s --loom-autodiff --loom-optimizer="kind=sgd lr=0.5 weight-decay=0" -split-input-file | FileCheck %s --check-prefix=SGD

// Two parameters and a batch: AdamW takes (params, m, v, step, tokens,
// labels) and returns (params', m', v', loss); SGD has no moments.
func.func @forward(%w: tensor<8x4xf32> {loom.name = "w"}, %b: tensor<4xf32> {loom.name = "b"}, %tokens: tensor<2x3xi32> {loom.name = "tokens"}, %labels: tensor<2x3xi32> {loom.name = "labels"}) -> tensor<f32> {
  %e = loom.embedding %w, %tokens : (tensor<8x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %h = loom.add %e, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %logits = loom.matmul %h, %w {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %l = loom.cross_entropy %logits, %labels : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME: %[[W:.+]]: tensor<8x4xf32> {loom.name = "w", loom.role = "param"}, %[[B:.+]]: tensor<4xf32> {loom.name = "b", loom.role = "param"},
// ADAMW-SAME: %[[MW:.+]]: tensor<8x4xf32> {loom.name = "w", loom.role = "m"}, %[[MB:.+]]: tensor<4xf32> {loom.name = "b", loom.role = "m"},
// ADAMW-SAME: %[[VW:.+]]: tensor<8x4xf32> {loom.name = "w", loom.role = "v"}, %[[VB:.+]]: tensor<4xf32> {loom.name = "b", loom.role = "v"},
// ADAMW-SAME: %[[STEP:.+]]: tensor<i64> {loom.name = "step", loom.role = "step"},
// ADAMW-SAME: %[[TOK:.+]]: tensor<2x3xi32> {loom.name = "tokens", loom.role = "data"}, %[[LAB:.+]]: tensor<2x3xi32> {loom.name = "labels", loom.role = "data"})
// ADAMW-SAME: -> (tensor<8x4xf32> {loom.name = "w", loom.role = "param"}, tensor<4xf32> {loom.name = "b", loom.role = "param"}, tensor<8x4xf32> {loom.name = "w", loom.role = "m"}, tensor<4xf32> {loom.name = "b", loom.role = "m"}, tensor<8x4xf32> {loom.name = "w", loom.role = "v"}, tensor<4xf32> {loom.name = "b", loom.role = "v"}, tensor<f32> {loom.role = "loss"})
// ADAMW-SAME: attributes {loom.optimizer = {beta1 = 8.000000e-01 : f64, beta2 = 5.000000e-01 : f64, eps = 9.9999999999999995E-7 : f64, kind = "adamw", lr = 1.000000e-03 : f64, weight_decay = 1.000000e-01 : f64}}
// ADAMW: %[[G:.+]]:3 = call @forward_backward(%[[W]], %[[B]], %[[TOK]], %[[LAB]])
// ADAMW: %[[W2:.+]], %[[MW2:.+]], %[[VW2:.+]] = loom.adamw_update %[[W]], %[[G]]#1, %[[MW]], %[[VW]], %[[STEP]] {beta1 = 8.000000e-01 : f64, beta2 = 5.000000e-01 : f64, eps = 9.9999999999999995E-7 : f64, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-01 : f64}
// ADAMW: %[[B2:.+]], %[[MB2:.+]], %[[VB2:.+]] = loom.adamw_update %[[B]], %[[G]]#2, %[[MB]], %[[VB]], %[[STEP]]
// ADAMW: return %[[W2]], %[[B2]], %[[MW2]], %[[MB2]], %[[VW2]], %[[VB2]], %[[G]]#0

// SGD-LABEL: func.func @train_step(
// SGD-SAME: %[[W:.+]]: tensor<8x4xf32> {loom.name = "w", loom.role = "param"}, %[[B:.+]]: tensor<4xf32> {loom.name = "b", loom.role = "param"}, %[[STEP:.+]]: tensor<i64> {loom.name = "step", loom.role = "step"}, %[[TOK:.+]]: tensor<2x3xi32> {loom.name = "tokens", loom.role = "data"}, %[[LAB:.+]]: tensor<2x3xi32>
// SGD-SAME: -> (tensor<8x4xf32> {loom.name = "w", loom.role = "param"}, tensor<4xf32> {loom.name = "b", loom.role = "param"}, tensor<f32> {loom.role = "loss"})
// SGD-SAME: attributes {loom.optimizer = {kind = "sgd", lr = 5.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}}
// SGD: %[[G:.+]]:3 = call @forward_backward(%[[W]], %[[B]], %[[TOK]], %[[LAB]])
// SGD: %[[W2:.+]] = loom.sgd_update %[[W]], %[[G]]#1 {lr = 5.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
// SGD: %[[B2:.+]] = loom.sgd_update %[[B]], %[[G]]#2
// SGD: return %[[W2]], %[[B2]], %[[G]]#0

// -----

// The dropout step of the forward pass is fed by the update step.
func.func @forward(%w: tensor<4xf32> {loom.name = "w"}, %step: tensor<i64> {loom.name = "step"}) -> tensor<f32> {
  %d = loom.dropout %w, %step {key = 0 : i64, rate = 5.0e-01 : f64, seed = 1 : i64} : tensor<4xf32>, tensor<i64>
  %l = loom.reduce_sum %d [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME: %[[W:.+]]: tensor<4xf32> {loom.name = "w", loom.role = "param"}, %{{.+}}: tensor<4xf32> {loom.name = "w", loom.role = "m"}, %{{.+}}: tensor<4xf32> {loom.name = "w", loom.role = "v"}, %[[STEP:.+]]: tensor<i64> {loom.name = "step", loom.role = "step"})
// ADAMW: call @forward_backward(%[[W]], %[[STEP]])
// SGD-LABEL: func.func @train_step(
// SGD-SAME: %[[W:.+]]: tensor<4xf32> {loom.name = "w", loom.role = "param"}, %[[STEP:.+]]: tensor<i64> {loom.name = "step", loom.role = "step"})
// SGD: call @forward_backward(%[[W]], %[[STEP]])
