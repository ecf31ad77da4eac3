// RUN: loom-opt %s --loom-autodiff -split-input-file | FileCheck %s

// Broadcasting: the bias gradient sums over the batch and sequence dims, a
// [S, 1] operand sums over the stretched last dim and keeps its shape.
func.func @forward(%x: tensor<2x8x16xf32> {loom.name = "x"}, %b: tensor<16xf32> {loom.name = "b"}, %s: tensor<8x1xf32> {loom.name = "s"}) -> tensor<f32> {
  %y = loom.add %x, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %z = loom.mul %y, %s : (tensor<2x8x16xf32>, tensor<8x1xf32>) -> tensor<2x8x16xf32>
  %l = loom.reduce_mean %z [0, 1, 2] : tensor<2x8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32>, tensor<2x8x16xf32> {loom.grad_of = "x"}, tensor<16xf32> {loom.grad_of = "b"}, tensor<8x1xf32> {loom.grad_of = "s"})
// CHECK: %[[SEED:.+]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[INV:.+]] = arith.constant dense<3.906250e-03> : tensor<f32>
// CHECK: %[[MEAN:.+]] = loom.mul %[[SEED]], %[[INV]]
// CHECK: %[[G:.+]] = loom.broadcast %{{.+}} : tensor<1x1x1xf32> -> tensor<2x8x16xf32>
// CHECK: %[[DY:.+]] = loom.mul %[[G]], %arg2
// CHECK: %[[DS:.+]] = loom.reduce_sum %{{.+}} [0, 2] : tensor<2x8x16xf32> -> tensor<8xf32>
// CHECK: %[[DS1:.+]] = loom.reshape %[[DS]] : tensor<8xf32> -> tensor<8x1xf32>
// CHECK: %[[DB:.+]] = loom.reduce_sum %[[DY]] [0, 1] : tensor<2x8x16xf32> -> tensor<16xf32>
// CHECK: return %{{.+}}, %[[DY]], %[[DB]], %[[DS1]]

// -----


// A linear layer with a shared 2-D weight, and a batched transposed matmul.
func.func @forward(%x: tensor<2x8x16xf32> {loom.name = "x"}, %w: tensor<32x16xf32> {loom.name = "w"}, %k: tensor<2x8x32xf32> {loom.name = "k"}) -> tensor<f32> {
  %h = loom.matmul %x, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %s = loom.matmul %h, %k {transpose_rhs} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x8xf32>
  %l = loom.reduce_sum %s [0, 1, 2] : tensor<2x8x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[H:.+]] = loom.matmul %arg0, %arg1 {transpose_rhs}
// CHECK: %[[G:.+]] = loom.broadcast
// CHECK: %[[DH:.+]] = loom.matmul %[[G]], %arg2 : (tensor<2x8x8xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[DK:.+]] = loom.matmul %[[G]], %[[H]] {transpose_lhs} : (tensor<2x8x8xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[DX:.+]] = loom.matmul %[[DH]], %arg1 : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
// CHECK: %[[X2:.+]] = loom.reshape %arg0 : tensor<2x8x16xf32> -> tensor<16x16xf32>
// CHECK: %[[G2:.+]] = loom.reshape %[[DH]] : tensor<2x8x32xf32> -> tensor<16x32xf32>
// CHECK: %[[DW:.+]] = loom.matmul %[[G2]], %[[X2]] {transpose_lhs} : (tensor<16x32xf32>, tensor<16x16xf32>) -> tensor<32x16xf32>
// CHECK: return %{{.+}}, %[[DX]], %[[DW]], %[[DK]]

// -----


// Tied embeddings: the table is used by the embedding and the output
// projection, and its gradient is the sum of both contributions.
func.func @forward(%wte: tensor<32x16xf32> {loom.name = "wte"}, %tokens: tensor<2x8xi32> {loom.name = "tokens"}, %labels: tensor<2x8xi32> {loom.name = "labels"}) -> tensor<f32> {
  %e = loom.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %logits = loom.matmul %e, %wte {transpose_rhs} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %l = loom.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32>, tensor<32x16xf32> {loom.grad_of = "wte"})
// CHECK: %[[DLOGITS:.+]] = loom.cross_entropy_grad %{{.+}}, %{{.+}}, %arg2
// CHECK: %[[DE:.+]] = loom.matmul %[[DLOGITS]], %arg0
// CHECK: %[[DHEAD:.+]] = loom.matmul %{{.+}}, %{{.+}} {transpose_lhs} : (tensor<16x32xf32>, tensor<16x16xf32>) -> tensor<32x16xf32>
// CHECK: %[[DEMB:.+]] = loom.embedding_grad %[[DE]], %arg1 : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<32x16xf32>
// CHECK: %[[SUM:.+]] = loom.add %[[DHEAD]], %[[DEMB]]
// CHECK: return %{{.+}}, %[[SUM]] : tensor<f32>, tensor<32x16xf32>

// -----


// Grouped-query attention: the key/value gradients have the kv heads' shape;
// rope's gradient is the inverse rotation.
func.func @forward(%q: tensor<1x8x4x16xf32> {loom.name = "q"}, %k: tensor<1x8x2x16xf32> {loom.name = "k"}, %v: tensor<1x8x2x16xf32> {loom.name = "v"}) -> tensor<f32> {
  %qr = loom.rope %q {theta = 10000.0 : f64} : tensor<1x8x4x16xf32>
  %o, %lse = loom.attention %qr, %k, %v {causal, scale = 0.25 : f64} : (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x4x8xf32>)
  %l = loom.reduce_sum %o [0, 1, 2, 3] : tensor<1x8x4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[QR:.+]] = loom.rope %arg0
// CHECK: %[[O:.+]], %[[LSE:.+]] = loom.attention %[[QR]], %arg1, %arg2
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = loom.attention_grad %{{.+}}, %[[QR]], %arg1, %arg2, %[[O]], %[[LSE]] {causal, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>)
// CHECK: %[[DQR:.+]] = loom.rope_grad %[[DQ]] {theta = 1.000000e+04 : f64}
// CHECK: return %{{.+}}, %[[DQR]], %[[DK]], %[[DV]]

// -----

// Attention dropout: attention_grad gets the forward's step and dropout
// attributes, so it replays the same mask.
func.func @forward(%q: tensor<1x8x4x16xf32> {loom.name = "q"}, %step: tensor<i64> {loom.name = "step"}) -> tensor<f32> {
  %o, %lse = loom.attention %q, %q, %q, %step {causal, scale = 0.25 : f64, dropout_rate = 0.1 : f64, dropout_seed = 7 : i64, dropout_key = 4 : i64} : (tensor<1x8x4x16xf32>, tensor<1x8x4x16xf32>, tensor<1x8x4x16xf32>, tensor<i64>) -> (tensor<1x8x4x16xf32>, tensor<1x4x8xf32>)
  %l = loom.reduce_sum %o [0, 1, 2, 3] : tensor<1x8x4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32>, tensor<1x8x4x16xf32> {loom.grad_of = "q"})
// CHECK: %[[O:.+]], %[[LSE:.+]] = loom.attention %arg0, %arg0, %arg0, %arg1
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = loom.attention_grad %{{.+}}, %arg0, %arg0, %arg0, %[[O]], %[[LSE]], %arg1 {causal, dropout_key = 4 : i64, dropout_rate = 1.000000e-01 : f64, dropout_seed = 7 : i64, scale = 2.500000e-01 : f64}

// -----

// A constant operand gets no gradient: multiplying by a constant scale does
// not keep the other operand for the backward pass.
func.func @forward(%x: tensor<4x8xf32> {loom.name = "x"}) -> tensor<f32> {
  %c = arith.constant dense<2.500000e-01> : tensor<f32>
  %y = loom.mul %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %z = loom.div %c, %y : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = loom.reduce_sum %z [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[C:.+]] = arith.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[Y:.+]] = loom.mul %arg0, %[[C]]
// CHECK: %[[Z:.+]] = loom.div %[[C]], %[[Y]]
// CHECK: %[[G:.+]] = loom.broadcast
// CHECK-NEXT: %[[GZ:.+]] = loom.mul %[[G]], %[[Z]]
// CHECK-NEXT: %[[DIV:.+]] = loom.div %[[GZ]], %[[Y]]
// CHECK-NEXT: %[[DY:.+]] = loom.neg %[[DIV]]
// CHECK-NEXT: %[[DX:.+]] = loom.mul %[[DY]], %[[C]]
// CHECK-NEXT: return %{{.+}}, %[[DX]]

// -----


// Mixed precision: the gradient of a bf16 compute copy is cast back to the
// f32 master weight; an argument the loss ignores gets a zero gradient.
func.func @forward(%w: tensor<16x16xf32> {loom.name = "w"}, %x: tensor<4x16xbf16> {loom.name = "x"}, %unused: tensor<3xf32> {loom.name = "unused"}) -> tensor<f32> {
  %w16 = loom.cast %w : tensor<16x16xf32> -> tensor<16x16xbf16>
  %y = loom.matmul %x, %w16 : (tensor<4x16xbf16>, tensor<16x16xbf16>) -> tensor<4x16xbf16>
  %y32 = loom.cast %y : tensor<4x16xbf16> -> tensor<4x16xf32>
  %l = loom.reduce_sum %y32 [0, 1] : tensor<4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[W16:.+]] = loom.cast %arg0 : tensor<16x16xf32> -> tensor<16x16xbf16>
// CHECK: %[[G16:.+]] = loom.cast %{{.+}} : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: %[[DX:.+]] = loom.matmul %[[G16]], %[[W16]] {transpose_rhs}
// CHECK: %[[DW16:.+]] = loom.matmul %arg1, %[[G16]] {transpose_lhs} : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<16x16xbf16>
// CHECK: %[[DW:.+]] = loom.cast %[[DW16]] : tensor<16x16xbf16> -> tensor<16x16xf32>
// CHECK: %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %{{.+}}, %[[DW]], %[[DX]], %[[ZERO]]

// -----


// Layout ops map to their inverses: slice to pad, transpose to the inverse
// permutation, concat to slices, reshape back; silu and softmax to their
// fused gradients.
func.func @forward(%a: tensor<4x6xf32> {loom.name = "a"}, %b: tensor<4x2xf32> {loom.name = "b"}) -> tensor<f32> {
  %s = loom.slice %a [0, 2] : tensor<4x6xf32> -> tensor<4x3xf32>
  %c = loom.concat %s, %b {axis = 1 : i64} : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
  %t = loom.transpose %c [1, 0] : tensor<4x5xf32> -> tensor<5x4xf32>
  %r = loom.reshape %t : tensor<5x4xf32> -> tensor<20xf32>
  %u = loom.silu %r : tensor<20xf32>
  %p = loom.softmax %u : tensor<20xf32>
  %e = loom.exp %p : tensor<20xf32>
  %l = loom.reduce_sum %e [0] : tensor<20xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[P:.+]] = loom.softmax %{{.+}} : tensor<20xf32>
// CHECK: %[[E:.+]] = loom.exp %[[P]]
// CHECK: %[[DP:.+]] = loom.mul %{{.+}}, %[[E]]
// CHECK: %[[DU:.+]] = loom.softmax_grad %[[DP]], %[[P]] : tensor<20xf32>
// CHECK: %[[DR:.+]] = loom.silu_grad %[[DU]], %{{.+}} : tensor<20xf32>
// CHECK: %[[DT:.+]] = loom.reshape %[[DR]] : tensor<20xf32> -> tensor<5x4xf32>
// CHECK: %[[DC:.+]] = loom.transpose %[[DT]] [1, 0] : tensor<5x4xf32> -> tensor<4x5xf32>
// CHECK: %[[DS:.+]] = loom.slice %[[DC]] [0, 0] : tensor<4x5xf32> -> tensor<4x3xf32>
// CHECK: %[[DB:.+]] = loom.slice %[[DC]] [0, 3] : tensor<4x5xf32> -> tensor<4x2xf32>
// CHECK: %[[DA:.+]] = loom.pad %[[DS]] low [0, 2] : tensor<4x3xf32> -> tensor<4x6xf32>
// CHECK: return %{{.+}}, %[[DA]], %[[DB]]

// -----

// The gradients of slices side by side join into one concat instead of a
// sum of pads: q, k, v cut from one [4, 6] projection give concat(dq, dk,
// dv) in column order, whatever order the backward pass meets them in.
func.func @forward(%qkv: tensor<4x6xf32> {loom.name = "qkv"}) -> tensor<f32> {
  %q = loom.slice %qkv [0, 0] : tensor<4x6xf32> -> tensor<4x2xf32>
  %k = loom.slice %qkv [0, 2] : tensor<4x6xf32> -> tensor<4x2xf32>
  %v = loom.slice %qkv [0, 4] : tensor<4x6xf32> -> tensor<4x2xf32>
  %qk = loom.mul %q, %k : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %o = loom.mul %qk, %v : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %l = loom.reduce_sum %o [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[Q:.+]] = loom.slice %arg0 [0, 0]
// CHECK: %[[K:.+]] = loom.slice %arg0 [0, 2]
// CHECK: %[[QK:.+]] = loom.mul %[[Q]], %[[K]]
// CHECK-NOT: loom.pad
// CHECK-NOT: loom.add
// CHECK: %[[DV:.+]] = loom.mul %{{.+}}, %[[QK]]
// CHECK: %[[DQ:.+]] = loom.mul %{{.+}}, %[[K]]
// CHECK: %[[DK:.+]] = loom.mul %{{.+}}, %[[Q]]
// CHECK: %[[DQKV:.+]] = loom.concat %[[DQ]], %[[DK]], %[[DV]] {axis = 1 : i64}
// CHECK-NOT: loom.pad
// CHECK-NOT: loom.add
// CHECK: return %{{.+}}, %[[DQKV]]

// -----

// Slices that touch but leave part of the value uncovered join into one
// padded concat; a slice apart from them keeps its own pad and the sum.
// (The backward pass meets the slices last to first: b, a, then c, which
// does not touch the box of a and b.)
func.func @forward(%x: tensor<3x8xf32> {loom.name = "x"}) -> tensor<f32> {
  %c = loom.slice %x [0, 6] : tensor<3x8xf32> -> tensor<3x2xf32>
  %a = loom.slice %x [0, 1] : tensor<3x8xf32> -> tensor<3x2xf32>
  %b = loom.slice %x [0, 3] : tensor<3x8xf32> -> tensor<3x2xf32>
  %ab = loom.mul %a, %b : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %abc = loom.add %ab, %c : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %l = loom.reduce_sum %abc [0, 1] : tensor<3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[AB:.+]] = loom.concat %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
// CHECK: %[[DAB:.+]] = loom.pad %[[AB]] low [0, 1] : tensor<3x4xf32> -> tensor<3x8xf32>
// CHECK: %[[DC:.+]] = loom.pad %{{.+}} low [0, 6] : tensor<3x2xf32> -> tensor<3x8xf32>
// CHECK: %[[DX:.+]] = loom.add %[[DAB]], %[[DC]]
// CHECK: return %{{.+}}, %[[DX]]

// -----

// Dropout's gradient replays the same mask: same step, rate, seed and key;
// the integer step gets no gradient.
func.func @forward(%x: tensor<4x8xf32> {loom.name = "x"}, %step: tensor<i64> {loom.name = "step"}) -> tensor<f32> {
  %d = loom.dropout %x, %step {key = 3 : i64, rate = 1.0e-01 : f64, seed = 7 : i64} : tensor<4x8xf32>, tensor<i64>
  %l = loom.reduce_sum %d [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32>, tensor<4x8xf32> {loom.grad_of = "x"})
// CHECK: %[[DX:.+]] = loom.dropout_grad %{{.+}}, %arg1 {key = 3 : i64, rate = 1.000000e-01 : f64, seed = 7 : i64}
// CHECK: return %{{.+}}, %[[DX]] : tensor<f32>, tensor<4x8xf32>

// -----

// The gradient of a maximum goes to the elements that attain it.
func.func @forward(%x: tensor<4x8xf32> {loom.name = "x"}) -> tensor<f32> {
  %m = loom.reduce_max %x [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %l = loom.reduce_sum %m [0, 1] : tensor<4x1xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[G:.+]] = loom.broadcast %{{.+}} : tensor<1x1xf32> -> tensor<4x1xf32>
// CHECK: %[[DX:.+]] = loom.reduce_max_grad %[[G]], %arg0 [1] {keep_dims} : tensor<4x1xf32>, tensor<4x8xf32>
// CHECK: return %{{.+}}, %[[DX]]

// -----

// The exact GELU's gradient is gelu_erf_grad at the forward input.
func.func @forward(%a: tensor<4x6xf32> {loom.name = "a"}) -> tensor<f32> {
  %g = loom.gelu_erf %a : tensor<4x6xf32>
  %l = loom.reduce_sum %g [0, 1] : tensor<4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[A:arg[0-9]+]]: tensor<4x6xf32>
// CHECK: %[[DY:.+]] = loom.broadcast %{{.+}} : tensor<1x1xf32> -> tensor<4x6xf32>
// CHECK: %[[DA:.+]] = loom.gelu_erf_grad %[[DY]], %[[A]] : tensor<4x6xf32>
// CHECK: return %{{.+}}, %[[DA]]
