// RUN: loom-opt %s --loom-decompose-attention -split-input-file | FileCheck %s
// RUN: loom-opt %s --loom-decompose-attention --loom-autodiff -split-input-file | FileCheck %s --check-prefix=AD

// Multi-head, non-causal, more keys than queries: transposes to heads-major,
// Q scaled by a 0-d constant, scores, softmax, output matmul, transpose back;
// the core ops are tagged.
func.func @forward(%q: tensor<2x4x3x8xf32> {loom.name = "q"}, %k: tensor<2x6x3x8xf32> {loom.name = "k"}, %v: tensor<2x6x3x8xf32> {loom.name = "v"}) -> tensor<f32> {
  %o, %lse = loom.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x4x3x8xf32>, tensor<2x6x3x8xf32>, tensor<2x6x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x3x4xf32>)
  %l = loom.reduce_sum %o [0, 1, 2, 3] : tensor<2x4x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward
// CHECK-NOT: loom.attention
// CHECK: %[[Q:.+]] = loom.transpose %arg0 [0, 2, 1, 3] : tensor<2x4x3x8xf32> -> tensor<2x3x4x8xf32>
// CHECK: %[[K:.+]] = loom.transpose %arg1 [0, 2, 1, 3] : tensor<2x6x3x8xf32> -> tensor<2x3x6x8xf32>
// CHECK: %[[V:.+]] = loom.transpose %arg2 [0, 2, 1, 3] : tensor<2x6x3x8xf32> -> tensor<2x3x6x8xf32>
// CHECK: %[[SCALE:.+]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[QS:.+]] = loom.mul %[[Q]], %[[SCALE]] : (tensor<2x3x4x8xf32>, tensor<f32>) -> tensor<2x3x4x8xf32>
// CHECK: %[[S:.+]] = loom.matmul %[[QS]], %[[K]] {loom.attention_core, transpose_rhs} : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>) -> tensor<2x3x4x6xf32>
// CHECK: %[[P:.+]] = loom.softmax %[[S]] {loom.attention_core} : tensor<2x3x4x6xf32>
// CHECK: %[[O:.+]] = loom.matmul %[[P]], %[[V]] {loom.attention_core} : (tensor<2x3x4x6xf32>, tensor<2x3x6x8xf32>) -> tensor<2x3x4x8xf32>
// CHECK: %[[OUT:.+]] = loom.transpose %[[O]] [0, 2, 1, 3] : tensor<2x3x4x8xf32> -> tensor<2x4x3x8xf32>
// CHECK: loom.reduce_sum %[[OUT]]

// Autodiff of the unfused form: softmax_grad from the saved probabilities,
// no attention_grad, and no gradient for the scale constant.
// AD-LABEL: func.func @forward_backward
// AD: %[[Q:.+]] = loom.transpose %arg0
// AD: %[[QS:.+]] = loom.mul %[[Q]], %[[SCALE:.+]] :
// AD: %[[S:.+]] = loom.matmul %[[QS]], %[[K:.+]] {loom.attention_core, transpose_rhs}
// AD: %[[P:.+]] = loom.softmax %[[S]] {loom.attention_core}
// AD: %[[DS:.+]] = loom.softmax_grad %{{.+}}, %[[P]] : tensor<2x3x4x6xf32>
// AD: %[[DQS:.+]] = loom.matmul %[[DS]], %[[K]] : (tensor<2x3x4x6xf32>, tensor<2x3x6x8xf32>) -> tensor<2x3x4x8xf32>
// AD: %[[DK:.+]] = loom.matmul %[[DS]], %[[QS]] {transpose_lhs}
// AD: %[[DQ:.+]] = loom.mul %[[DQS]], %[[SCALE]]
// AD-NOT: loom.mul %{{.+}}, %[[Q]]
// AD-NOT: loom.attention_grad
// AD: return

// -----

// Grouped-query (4 query heads, 2 kv heads), causal, with dropout: k and v
// are repeated per query head, the softmax is causal and the dropout has the
// attention's step, rate, seed and key.
func.func @forward(%q: tensor<2x8x4x16xf32> {loom.name = "q"}, %k: tensor<2x8x2x16xf32> {loom.name = "k"}, %v: tensor<2x8x2x16xf32> {loom.name = "v"}, %step: tensor<i64> {loom.name = "step"}) -> tensor<f32> {
  %o, %lse = loom.attention %q, %k, %v, %step {causal, scale = 0.25 : f64, dropout_rate = 0.1 : f64, dropout_seed = 7 : i64, dropout_key = 4 : i64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<i64>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  %l = loom.reduce_sum %o [0, 1, 2, 3] : tensor<2x8x4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.+]] = loom.transpose %arg0 [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK: %[[KT:.+]] = loom.transpose %arg1 [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
// CHECK: %[[K1:.+]] = loom.reshape %[[KT]] : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
// CHECK: %[[K2:.+]] = loom.broadcast %[[K1]] : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[K:.+]] = loom.reshape %[[K2]] : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
// CHECK: %[[VT:.+]] = loom.transpose %arg2 [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
// CHECK: loom.reshape %[[VT]] : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
// CHECK: loom.broadcast
// CHECK: %[[V:.+]] = loom.reshape %{{.+}} : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
// CHECK: %[[SCALE:.+]] = arith.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[QS:.+]] = loom.mul %[[Q]], %[[SCALE]]
// CHECK: %[[S:.+]] = loom.matmul %[[QS]], %[[K]] {loom.attention_core, transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
// CHECK: %[[P:.+]] = loom.softmax %[[S]] {causal, loom.attention_core} : tensor<2x4x8x8xf32>
// CHECK: %[[PD:.+]] = loom.dropout %[[P]], %arg3 {key = 4 : i64, loom.attention_core, rate = 1.000000e-01 : f64, seed = 7 : i64} : tensor<2x4x8x8xf32>, tensor<i64>
// CHECK: %[[O:.+]] = loom.matmul %[[PD]], %[[V]] {loom.attention_core} : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK: loom.transpose %[[O]] [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>

// The backward replays the dropout mask; the repeated k and v sum their
// gradients back over the query heads of a group.
// AD-LABEL: func.func @forward_backward
// AD: %[[P:.+]] = loom.softmax %{{.+}} {causal, loom.attention_core}
// AD: %[[PD:.+]] = loom.dropout %[[P]], %arg3
// AD: %[[DPD:.+]] = loom.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
// AD: %[[DP:.+]] = loom.dropout_grad %[[DPD]], %arg3 {key = 4 : i64, rate = 1.000000e-01 : f64, seed = 7 : i64}
// AD: loom.softmax_grad %[[DP]], %[[P]] : tensor<2x4x8x8xf32>
// AD: loom.reduce_sum %{{.+}} [2] : tensor<2x2x2x8x16xf32> -> tensor<2x2x8x16xf32>
// AD-NOT: loom.attention_grad
// AD: return

// -----

// Every attention of every function is rewritten: two chained ones in
// @forward, one in @other.
func.func @forward(%q: tensor<1x4x2x4xf32> {loom.name = "q"}) -> tensor<f32> {
  %o, %lse = loom.attention %q, %q, %q {causal, scale = 0.5 : f64} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x2x4xf32>)
  %o2, %lse2 = loom.attention %o, %q, %q {scale = 0.5 : f64} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x2x4xf32>)
  %l = loom.reduce_sum %o2 [0, 1, 2, 3] : tensor<1x4x2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

func.func @other(%q: tensor<1x4x2x4xf32>) -> tensor<1x4x2x4xf32> {
  %o, %lse = loom.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x4x2x4xf32>
}

// CHECK-LABEL: func.func @forward
// CHECK-NOT: loom.attention %
// CHECK: loom.softmax %{{.+}} {causal, loom.attention_core}
// CHECK-NOT: loom.attention %
// CHECK: loom.softmax %{{.+}} {loom.attention_core}
// CHECK-NOT: loom.attention %
// CHECK-LABEL: func.func @other
// CHECK-NOT: loom.attention %
// CHECK: loom.softmax %{{.+}} {loom.attention_core}
// CHECK-NOT: loom.attention %
// CHECK: return

// AD-LABEL: func.func @forward_backward
// AD-COUNT-2: loom.softmax_grad
// AD-NOT: loom.attention
// AD: return
