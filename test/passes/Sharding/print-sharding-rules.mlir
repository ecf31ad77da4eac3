// RUN: loom-opt %s --loom-print-sharding-rules -split-input-file -verify-diagnostics -o /dev/null

// A GPT-2 MLP: the first matmul's N and the second's K are the same hidden
// factor of size 256, parallel in one and a reduction in the other (the
// column-then-row split of Megatron-LM).
func.func @mlp(%x: tensor<2x16x64xf32>, %w1: tensor<64x256xf32>, %w2: tensor<256x64xf32>) -> tensor<2x16x64xf32> {
  // expected-remark @+1 {{sharding rule ([i, j, l], [l, k]) -> ([i, j, k]) {i=2, j=16, k=256, l=64} reduction={l}}}
  %h = loom.matmul %x, %w1 : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  // expected-remark @+1 {{sharding rule ([i, j, k]) -> ([i, j, k]) {i=2, j=16, k=256}}}
  %a = loom.gelu %h : tensor<2x16x256xf32>
  // expected-remark @+1 {{sharding rule ([i, j, l], [l, k]) -> ([i, j, k]) {i=2, j=16, k=64, l=256} reduction={l}}}
  %y = loom.matmul %a, %w2 : (tensor<2x16x256xf32>, tensor<256x64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Ops of other dialects have no rule and get no remark; the loss sums over
// tokens, so both token factors are reductions and the vocabulary is whole.
func.func @loss(%logits: tensor<4x8x100xf32>, %labels: tensor<4x8xi32>) -> tensor<f32> {
  %c = arith.constant dense<2.0> : tensor<f32>
  // expected-remark @+1 {{sharding rule ([i, j, k], [i, j]) -> ([]) {i=4, j=8, k=100} reduction={i, j} whole={k}}}
  %l = loom.cross_entropy %logits, %labels : (tensor<4x8x100xf32>, tensor<4x8xi32>) -> tensor<f32>
  %r = arith.mulf %l, %c : tensor<f32>
  return %r : tensor<f32>
}
