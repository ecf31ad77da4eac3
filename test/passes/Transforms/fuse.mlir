// RUN: loom-opt %s -split-input-file --loom-fuse | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-fuse="epilogues=false losses=false norms=false elementwise=false optimizer=false" | FileCheck %s --check-prefix=OFF

// A linear layer with gelu: matmul, bias add and gelu in one loom.fused
// (inputs lhs, rhs, bias); the sum is used only by the gelu, so the gelu
// alone is yielded. The next layer's bias add fuses too, and so does the
// residual added to its sum (inputs lhs, rhs, bias, residual).
// CHECK-LABEL: func.func @mlp
// CHECK: %[[H:.+]] = loom.fused(%arg0, %arg1, %arg2)
// CHECK-NEXT: ^bb0(%[[X:.+]]: tensor<8x16xf32>, %[[W:.+]]: tensor<16x32xf32>, %[[B:.+]]: tensor<32xf32>):
// CHECK-NEXT: %[[P:.+]] = loom.matmul %[[X]], %[[W]]
// CHECK-NEXT: %[[S:.+]] = loom.add %[[P]], %[[B]]
// CHECK-NEXT: %[[G:.+]] = loom.gelu %[[S]]
// CHECK-NEXT: loom.yield %[[G]] : tensor<8x32xf32>
// CHECK: %[[Y:.+]] = loom.fused(%[[H]], %arg3, %arg4, %arg0) : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: ^bb0(%{{.+}}, %{{.+}}, %{{.+}}, %[[R:.+]]: tensor<8x16xf32>):
// CHECK-NEXT: %[[Q:.+]] = loom.matmul
// CHECK-NEXT: %[[T:.+]] = loom.add %{{.+}}, %[[Q]]
// CHECK-NEXT: %[[U:.+]] = loom.add %[[R]], %[[T]]
// CHECK-NEXT: loom.yield %[[U]]
// CHECK: return %[[Y]]
// OFF-LABEL: func.func @mlp
// OFF-NOT: loom.fused
func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<32xf32>,
               %w2: tensor<32x16xf32>, %b2: tensor<16xf32>) -> tensor<8x16xf32> {
  %p = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = loom.add %p, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g = loom.gelu %s : tensor<8x32xf32>
  %q = loom.matmul %g, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %t = loom.add %b2, %q : (tensor<16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = loom.add %x, %t : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// The sum before the gelu is read again later (by gelu_grad, as in a
// training step): the fused op yields it too.
// CHECK-LABEL: func.func @keeps_the_sum
// CHECK: %[[F:.+]]:2 = loom.fused(%arg0, %arg1, %arg2)
// CHECK: loom.yield %{{.+}}, %{{.+}} : tensor<4x8xbf16>, tensor<4x8xbf16>
// CHECK: loom.gelu_grad %arg3, %[[F]]#0
// CHECK: return %[[F]]#1
func.func @keeps_the_sum(%x: tensor<4x6xbf16>, %w: tensor<6x8xbf16>, %b: tensor<8xbf16>,
                         %dy: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %p = loom.matmul %x, %w : (tensor<4x6xbf16>, tensor<6x8xbf16>) -> tensor<4x8xbf16>
  %s = loom.add %p, %b : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %g = loom.gelu %s : tensor<4x8xbf16>
  %dx = loom.gelu_grad %dy, %s : tensor<4x8xbf16>
  return %g, %dx : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// No epilogue: a product read twice, a bias that is not over the last
// dimension, an f16 matmul (the fused kernels take f32 and bf16).
// CHECK-LABEL: func.func @no_epilogue
// CHECK: %[[P:.+]] = loom.matmul
// CHECK: loom.add %[[P]], %arg2
// CHECK: loom.add %[[P]], %[[P]]
// CHECK-LABEL: func.func @column_bias
// CHECK-NOT: loom.fused
// CHECK-LABEL: func.func @f16_matmul
// CHECK-NOT: loom.fused
// CHECK: return
func.func @no_epilogue(%x: tensor<4x6xf32>, %w: tensor<6x8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %p = loom.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %s = loom.add %p, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %d = loom.add %p, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %d : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @column_bias(%x: tensor<4x6xf32>, %w: tensor<6x8xf32>, %b: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %p = loom.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %s = loom.add %p, %b : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
func.func @f16_matmul(%x: tensor<4x6xf16>, %w: tensor<6x8xf16>, %b: tensor<8xf16>) -> tensor<4x8xf16> {
  %p = loom.matmul %x, %w : (tensor<4x6xf16>, tensor<6x8xf16>) -> tensor<4x8xf16>
  %s = loom.add %p, %b : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  %e = loom.exp %s : tensor<4x8xf16>
  return %e : tensor<4x8xf16>
}

// -----

// SwiGLU and a residual: silu(a) * b + r is one chain of three ops; its
// inputs broadcast (a [1, 8] row, a [4, 1] column); the intermediate
// values are used nowhere else, so only the last is yielded.
// CHECK-LABEL: func.func @chain
// CHECK: %[[C:.+]] = loom.fused(%arg0, %arg1, %arg2) : (tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<1x8xf32>, %[[R:.+]]: tensor<4x1xf32>):
// CHECK-NEXT: %[[S:.+]] = loom.silu %[[A]]
// CHECK-NEXT: %[[M:.+]] = loom.mul %[[S]], %[[B]]
// CHECK-NEXT: %[[Y:.+]] = loom.add %[[M]], %[[R]]
// CHECK-NEXT: loom.yield %[[Y]]
// CHECK: return %[[C]]
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<1x8xf32>, %r: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %s = loom.silu %a : tensor<4x8xf32>
  %m = loom.mul %s, %b : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %y = loom.add %m, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A chain stops where an op outside it reads its value: the softmax reads
// %e, so %e's chain (exp of a neg) cannot move past it and the add after
// the softmax starts a chain of its own with the cast.
// CHECK-LABEL: func.func @interrupted
// CHECK: %[[E:.+]] = loom.fused(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: loom.neg
// CHECK: loom.exp
// CHECK: %[[S:.+]] = loom.softmax %[[E]]
// CHECK: %[[F:.+]]:2 = loom.fused(%[[E]], %[[S]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>)
// CHECK: loom.add
// CHECK: loom.cast
// CHECK: loom.yield
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @interrupted(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %n = loom.neg %x : tensor<4x8xf32>
  %e = loom.exp %n : tensor<4x8xf32>
  %s = loom.softmax %e : tensor<4x8xf32>
  %a = loom.add %e, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = loom.cast %a : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %a, %c : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// Ops of another shape do not join a chain (a broadcast result is a new
// chain's input), and a lone op is left as it is.
// CHECK-LABEL: func.func @shapes
// CHECK: loom.fused(%arg0, %arg1) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK: loom.fused(%{{.+}}, %arg2) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @shapes(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = loom.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %t = loom.tanh %s : tensor<8xf32>
  %u = loom.mul %t, %c : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = loom.sqrt %u : tensor<4x8xf32>
  return %v : tensor<4x8xf32>
}

// -----

// Consecutive AdamW updates sharing their step and hyperparameters are one
// loom.fused (param, grad, m, v of each, then the step); a bf16 gradient's
// widening cast read only by its update moves inside. An update with
// another learning rate starts a new run; a lone one stays as it is.
// CHECK-LABEL: func.func @updates
// CHECK: %[[U:.+]]:6 = loom.fused(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg12)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: loom.adamw_update
// CHECK-NEXT: loom.cast %{{.+}} : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT: loom.adamw_update
// CHECK-NEXT: loom.yield
// CHECK: loom.adamw_update %arg8
// CHECK-NOT: loom.fused
// CHECK: return %[[U]]#0, %[[U]]#3
func.func @updates(%p0: tensor<4x8xf32>, %g0: tensor<4x8xf32>, %m0: tensor<4x8xf32>, %v0: tensor<4x8xf32>,
                   %p1: tensor<8xf32>, %g1: tensor<8xbf16>, %m1: tensor<8xf32>, %v1: tensor<8xf32>,
                   %p2: tensor<8xf32>, %g2: tensor<8xf32>, %m2: tensor<8xf32>, %v2: tensor<8xf32>,
                   %step: tensor<i64>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %g1w = loom.cast %g1 : tensor<8xbf16> -> tensor<8xf32>
  %a0, %b0, %c0 = loom.adamw_update %p0, %g0, %m0, %v0, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>
  %a1, %b1, %c1 = loom.adamw_update %p1, %g1w, %m1, %v1, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<i64>
  %a2, %b2, %c2 = loom.adamw_update %p2, %g2, %m2, %v2, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, weight_decay = 0.1 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<i64>
  return %a0, %a1, %a2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A residual added to a product (no bias): inputs lhs, rhs, residual. A
// residual that is the matmul's own operand, an add whose other operand
// broadcasts, and the product of a value with itself are left alone.
// CHECK-LABEL: func.func @residual
// CHECK: %[[F:.+]] = loom.fused(%arg0, %arg1, %arg2) : (tensor<4x6xf32>, tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[P:.+]] = loom.matmul
// CHECK-NEXT: %[[S:.+]] = loom.add %[[P]], %{{.+}}
// CHECK-NEXT: loom.yield %[[S]]
// CHECK: %[[Q:.+]] = loom.matmul %arg3, %arg3
// CHECK: loom.add %[[Q]], %arg3
// CHECK: %[[B:.+]] = loom.matmul %arg0, %arg1
// CHECK: loom.add %[[B]], %arg4
// CHECK: %[[S:.+]] = loom.matmul %arg3, %arg3
// CHECK: loom.add %[[S]], %arg5
func.func @residual(%x: tensor<4x6xf32>, %w: tensor<6x8xf32>, %r: tensor<4x8xf32>,
                    %sq: tensor<4x4xf32>, %row: tensor<1x8xf32>, %r4: tensor<4x4xf32>)
    -> (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>) {
  %p = loom.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %s = loom.add %p, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = loom.matmul %sq, %sq : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = loom.add %q, %sq : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = loom.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %u = loom.add %b, %row : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %q2 = loom.matmul %sq, %sq : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %v = loom.add %q2, %r4 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %s, %t, %u, %v : tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>
}

// -----

// A linear layer's backward: the gelu gradient of dy.w^T at the layer's
// pre-activation, whose rows a reduce_sum sums (the bias gradient), is one
// loom.fused (lhs, rhs, pre) -> (dpre, db) standing where the gelu_grad
// stood; the weight gradient x^T.dy beside the sum of dy's rows (reshaped
// to [rows, n]) is one loom.fused (lhs, rhs) -> (dw, db), its reduce_sum
// rewritten over the rhs.
// CHECK-LABEL: func.func @backward
// CHECK: %[[D:.+]]:2 = loom.fused(%arg0, %arg1, %arg2) : (tensor<2x3x4xbf16>, tensor<8x4xbf16>, tensor<2x3x8xbf16>) -> (tensor<2x3x8xbf16>, tensor<8xbf16>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[P:.+]] = loom.matmul %{{.+}}, %{{.+}} {transpose_rhs}
// CHECK-NEXT: %[[G:.+]] = loom.gelu_grad %[[P]], %{{.+}}
// CHECK-NEXT: %[[S:.+]] = loom.reduce_sum %[[G]] [0, 1]
// CHECK-NEXT: loom.yield %[[G]], %[[S]]
// CHECK: %[[X:.+]] = loom.reshape %arg3
// CHECK: %[[Y:.+]] = loom.reshape %arg0
// CHECK: %[[W:.+]]:2 = loom.fused(%[[X]], %[[Y]]) : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> (tensor<5x4xbf16>, tensor<4xbf16>)
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<6x5xbf16>, %[[R:.+]]: tensor<6x4xbf16>):
// CHECK-NEXT: %[[M:.+]] = loom.matmul %{{.+}}, %[[R]] {transpose_lhs}
// CHECK-NEXT: %[[B:.+]] = loom.reduce_sum %[[R]] [0] : tensor<6x4xbf16> -> tensor<4xbf16>
// CHECK-NEXT: loom.yield %[[M]], %[[B]]
// CHECK: return %[[D]]#0, %[[D]]#1, %[[W]]#0, %[[W]]#1
func.func @backward(%dy: tensor<2x3x4xbf16>, %w: tensor<8x4xbf16>, %pre: tensor<2x3x8xbf16>,
                    %x: tensor<2x3x5xbf16>)
    -> (tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<5x4xbf16>, tensor<4xbf16>) {
  %db = loom.reduce_sum %dy [0, 1] : tensor<2x3x4xbf16> -> tensor<4xbf16>
  %dh = loom.matmul %dy, %w {transpose_rhs} : (tensor<2x3x4xbf16>, tensor<8x4xbf16>) -> tensor<2x3x8xbf16>
  %dpre = loom.gelu_grad %dh, %pre : tensor<2x3x8xbf16>
  %db1 = loom.reduce_sum %dpre [0, 1] : tensor<2x3x8xbf16> -> tensor<8xbf16>
  %xr = loom.reshape %x : tensor<2x3x5xbf16> -> tensor<6x5xbf16>
  %dyr = loom.reshape %dy : tensor<2x3x4xbf16> -> tensor<6x4xbf16>
  %dw = loom.matmul %xr, %dyr {transpose_lhs} : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  return %dpre, %db1, %dw, %db : tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<5x4xbf16>, tensor<4xbf16>
}

// -----

// No backward epilogue: a reduce_sum that keeps its dimensions, one over
// a leading dimension only, a transposed rhs, a bias gradient read before
// the weight gradient's reshape exists (no place for the fused op), and
// one of a single column (n = 1).
// CHECK-LABEL: func.func @no_backward_epilogue
// CHECK-NOT: loom.fused
// CHECK: return
func.func @no_backward_epilogue(%dy: tensor<6x4xf32>, %x: tensor<6x5xf32>, %y: tensor<4x6xf32>,
                                %z: tensor<2x3x4xf32>, %zx: tensor<6x5xf32>, %col: tensor<6x1xf32>)
    -> (tensor<1x4xf32>, tensor<5x4xf32>, tensor<3x4xf32>, tensor<5x4xf32>, tensor<4xf32>, tensor<5x4xf32>,
        tensor<1xf32>, tensor<5x1xf32>) {
  %k = loom.reduce_sum %dy [0] {keep_dims} : tensor<6x4xf32> -> tensor<1x4xf32>
  %a = loom.matmul %x, %dy {transpose_lhs} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
  %l = loom.reduce_sum %z [0] : tensor<2x3x4xf32> -> tensor<3x4xf32>
  %t = loom.reduce_sum %y [0] : tensor<4x6xf32> -> tensor<6xf32>
  %b = loom.matmul %x, %y {transpose_lhs, transpose_rhs} : (tensor<6x5xf32>, tensor<4x6xf32>) -> tensor<5x4xf32>
  %s = loom.reduce_sum %z [0, 1] : tensor<2x3x4xf32> -> tensor<4xf32>
  %u = loom.exp %s : tensor<4xf32>
  %zr = loom.reshape %z : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %c = loom.matmul %zx, %zr {transpose_lhs} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
  %cu = loom.add %c, %c : (tensor<5x4xf32>, tensor<5x4xf32>) -> tensor<5x4xf32>
  %one = loom.reduce_sum %col [0] : tensor<6x1xf32> -> tensor<1xf32>
  %w1 = loom.matmul %zx, %col {transpose_lhs} : (tensor<6x5xf32>, tensor<6x1xf32>) -> tensor<5x1xf32>
  return %k, %a, %l, %b, %u, %cu, %one, %w1 : tensor<1x4xf32>, tensor<5x4xf32>, tensor<3x4xf32>, tensor<5x4xf32>, tensor<4xf32>, tensor<5x4xf32>, tensor<1xf32>, tensor<5x1xf32>
}

// -----

// A loss and its gradient of one logits, labels and token count are one
// loom.fused (dloss, logits, labels) -> (loss, dlogits) where the gradient
// stood; a gradient of other labels, or of another token count, is not
// the loss's.
// CHECK-LABEL: func.func @loss
// CHECK: %[[F:.+]]:2 = loom.fused(%arg0, %arg1, %arg2) : (tensor<f32>, tensor<6x7xf32>, tensor<6xi32>) -> (tensor<f32>, tensor<6x7xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[L:.+]] = loom.cross_entropy
// CHECK-NEXT: %[[G:.+]] = loom.cross_entropy_grad
// CHECK-NEXT: loom.yield %[[L]], %[[G]]
// CHECK: loom.cross_entropy_grad %arg0, %arg1, %arg3
// CHECK: loom.cross_entropy_grad %arg0, %arg1, %arg2 {token_count = 12 : i64}
// CHECK: return %[[F]]#0, %[[F]]#1
// OFF-LABEL: func.func @loss
// OFF-NOT: loom.fused
func.func @loss(%d: tensor<f32>, %l: tensor<6x7xf32>, %y: tensor<6xi32>, %z: tensor<6xi32>)
    -> (tensor<f32>, tensor<6x7xf32>, tensor<6x7xf32>, tensor<6x7xf32>) {
  %loss = loom.cross_entropy %l, %y : (tensor<6x7xf32>, tensor<6xi32>) -> tensor<f32>
  %g = loom.cross_entropy_grad %d, %l, %y : (tensor<f32>, tensor<6x7xf32>, tensor<6xi32>) -> tensor<6x7xf32>
  %h = loom.cross_entropy_grad %d, %l, %z : (tensor<f32>, tensor<6x7xf32>, tensor<6xi32>) -> tensor<6x7xf32>
  %k = loom.cross_entropy_grad %d, %l, %y {token_count = 12 : i64} : (tensor<f32>, tensor<6x7xf32>, tensor<6xi32>) -> tensor<6x7xf32>
  return %loss, %g, %h, %k : tensor<f32>, tensor<6x7xf32>, tensor<6x7xf32>, tensor<6x7xf32>
}

// -----

// A norm's gradient whose dx only a residual add reads is one loom.fused
// (dy, x, gamma, residual) -> (dx + residual, dgamma, dbeta) where the add
// stood; one whose dx is read twice, or added to one of its own operands,
// is not.
// CHECK-LABEL: func.func @norm_grads
// CHECK: %[[F:.+]]:3 = loom.fused(%arg0, %arg1, %arg2, %arg3) : (tensor<6x8xf32>, tensor<6x8xf32>, tensor<8xf32>, tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[DX:[^,]+]], %{{.+}}, %{{.+}} = loom.layernorm_grad
// CHECK-NEXT: %[[S:.+]] = loom.add %{{.+}}, %[[DX]]
// CHECK-NEXT: loom.yield %[[S]], %{{.+}}, %{{.+}} :
// CHECK: %[[R:.+]]:2 = loom.fused(%[[F]]#0, %arg1, %arg2, %arg3) : (tensor<6x8xf32>, tensor<6x8xf32>, tensor<8xf32>, tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<8xf32>)
// CHECK: loom.rmsnorm_grad
// CHECK: %[[TWICE:[^,]+]], %{{.+}}, %{{.+}} = loom.layernorm_grad %[[R]]#0
// CHECK-NEXT: loom.add %[[TWICE]], %[[TWICE]]
// CHECK: %[[OWN:[^,]+]], %{{.+}}, %{{.+}} = loom.layernorm_grad %[[R]]#0
// CHECK-NEXT: loom.add %[[OWN]], %arg1
// OFF-LABEL: func.func @norm_grads
// OFF-NOT: loom.fused
func.func @norm_grads(%dy: tensor<6x8xf32>, %x: tensor<6x8xf32>, %g: tensor<8xf32>, %r: tensor<6x8xf32>)
    -> (tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<6x8xf32>, tensor<6x8xf32>) {
  %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<8xf32>
  %s = loom.add %r, %dx : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  %rx, %rg = loom.rmsnorm_grad %s, %x, %g {epsilon = 1.0e-6 : f64} : tensor<6x8xf32>, tensor<8xf32>
  %t = loom.add %rx, %r : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  %ex, %eg, %eb = loom.layernorm_grad %t, %x, %g {epsilon = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<8xf32>
  %u = loom.add %ex, %ex : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  %fx, %fg, %fb = loom.layernorm_grad %t, %x, %g {epsilon = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<8xf32>
  %v = loom.add %fx, %x : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  return %s, %dg, %db, %rg, %u, %v : tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<6x8xf32>, tensor<6x8xf32>
}
