// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// Every loom op prints in its custom form and parses back unchanged, also
// from the generic form.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<2x16x64xf32>, %b: tensor<64xf32>, %c: tensor<2x16x1xf32>) -> tensor<2x16x64xbf16> {
  // CHECK: %[[A:.+]] = loom.add %{{.+}}, %{{.+}} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %0 = loom.add %x, %b : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: %[[S:.+]] = loom.sub %[[A]], %{{.+}} : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %1 = loom.sub %0, %c : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  // CHECK: %[[M:.+]] = loom.mul %[[S]], %[[S]] : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %2 = loom.mul %1, %1 : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  // CHECK: %[[D:.+]] = loom.div %[[M]], %{{.+}} : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %3 = loom.div %2, %c : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  // CHECK: %[[N:.+]] = loom.neg %[[D]] : tensor<2x16x64xf32>
  %4 = loom.neg %3 : tensor<2x16x64xf32>
  // CHECK: %[[E:.+]] = loom.exp %[[N]] : tensor<2x16x64xf32>
  %5 = loom.exp %4 : tensor<2x16x64xf32>
  // CHECK: %[[L:.+]] = loom.log %[[E]] : tensor<2x16x64xf32>
  %6 = loom.log %5 : tensor<2x16x64xf32>
  // CHECK: %[[Q:.+]] = loom.sqrt %[[L]] : tensor<2x16x64xf32>
  %7 = loom.sqrt %6 : tensor<2x16x64xf32>
  // CHECK: %[[R:.+]] = loom.rsqrt %[[Q]] : tensor<2x16x64xf32>
  %8 = loom.rsqrt %7 : tensor<2x16x64xf32>
  // CHECK: %[[T:.+]] = loom.tanh %[[R]] : tensor<2x16x64xf32>
  %9 = loom.tanh %8 : tensor<2x16x64xf32>
  // CHECK: loom.cast %[[T]] : tensor<2x16x64xf32> -> tensor<2x16x64xbf16>
  %10 = loom.cast %9 : tensor<2x16x64xf32> -> tensor<2x16x64xbf16>
  return %10 : tensor<2x16x64xbf16>
}

// CHECK-LABEL: func.func @layout
func.func @layout(%qkv: tensor<2x16x192xf32>, %x: tensor<16x1xf32>) -> (tensor<2x4x16x16xf32>, tensor<2x16x192xf32>, tensor<2x16x64xf32>, tensor<2x16xf32>, tensor<2x16x1xf32>, tensor<16xf32>) {
  // CHECK: %[[K:.+]] = loom.slice %{{.+}} [0, 0, 64] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  %k = loom.slice %qkv [0, 0, 64] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  // CHECK: %[[H:.+]] = loom.reshape %[[K]] : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %h = loom.reshape %k : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  // CHECK: loom.transpose %[[H]] [0, 2, 1, 3] : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
  %t = loom.transpose %h [0, 2, 1, 3] : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
  // CHECK: loom.pad %[[K]] low [0, 0, 64] : tensor<2x16x64xf32> -> tensor<2x16x192xf32>
  %p = loom.pad %k low [0, 0, 64] : tensor<2x16x64xf32> -> tensor<2x16x192xf32>
  // CHECK: loom.broadcast %{{.+}} : tensor<16x1xf32> -> tensor<2x16x64xf32>
  %b = loom.broadcast %x : tensor<16x1xf32> -> tensor<2x16x64xf32>
  // CHECK: loom.reduce_sum %[[K]] [2] : tensor<2x16x64xf32> -> tensor<2x16xf32>
  %s = loom.reduce_sum %k [2] : tensor<2x16x64xf32> -> tensor<2x16xf32>
  // CHECK: loom.reduce_mean %[[K]] [2] {keep_dims} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  %m = loom.reduce_mean %k [2] {keep_dims} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  // CHECK: loom.reduce_max %[[K]] [0, 2] : tensor<2x16x64xf32> -> tensor<16xf32>
  %mx = loom.reduce_max %k [0, 2] : tensor<2x16x64xf32> -> tensor<16xf32>
  return %t, %p, %b, %s, %m, %mx : tensor<2x4x16x16xf32>, tensor<2x16x192xf32>, tensor<2x16x64xf32>, tensor<2x16xf32>, tensor<2x16x1xf32>, tensor<16xf32>
}

// CHECK-LABEL: func.func @concat
func.func @concat(%a: tensor<2x16x64xi32>, %b: tensor<2x16x32xi32>) -> tensor<2x16x96xi32> {
  // CHECK: loom.concat %{{.+}}, %{{.+}} {axis = 2 : i64} : (tensor<2x16x64xi32>, tensor<2x16x32xi32>) -> tensor<2x16x96xi32>
  %0 = loom.concat %a, %b {axis = 2 : i64} : (tensor<2x16x64xi32>, tensor<2x16x32xi32>) -> tensor<2x16x96xi32>
  return %0 : tensor<2x16x96xi32>
}

// CHECK-LABEL: func.func @gpt2_ops
func.func @gpt2_ops(%x: tensor<2x16x64xf32>, %w: tensor<64x256xf32>, %g: tensor<64xf32>, %wte: tensor<100x64xf32>, %tok: tensor<2x16xi32>, %step: tensor<i64>, %scores: tensor<2x4x16x16xf32>) -> (tensor<2x16x256xf32>, tensor<2x16x64xf32>, tensor<2x4x16x16xf32>, tensor<2x16x64xf32>, tensor<f32>) {
  // CHECK: %[[H:.+]] = loom.matmul %{{.+}}, %{{.+}} : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %h = loom.matmul %x, %w : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  // CHECK: loom.gelu %[[H]] : tensor<2x16x256xf32>
  %a = loom.gelu %h : tensor<2x16x256xf32>
  // CHECK: loom.layernorm %{{.+}}, %{{.+}}, %{{.+}} {epsilon = 1.000000e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  %n = loom.layernorm %x, %g, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: loom.softmax %{{.+}} : tensor<2x4x16x16xf32>
  %p = loom.softmax %scores : tensor<2x4x16x16xf32>
  // CHECK: loom.softmax %{{.+}} {causal} : tensor<2x4x16x16xf32>
  %pc = loom.softmax %scores {causal} : tensor<2x4x16x16xf32>
  // CHECK: %[[E:.+]] = loom.embedding %{{.+}}, %{{.+}} : (tensor<100x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  %e = loom.embedding %wte, %tok : (tensor<100x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  // CHECK: loom.dropout %[[E]], %{{.+}} {key = 3 : i64, rate = 1.000000e-01 : f64, seed = 1234 : i64} : tensor<2x16x64xf32>, tensor<i64>
  %d = loom.dropout %e, %step {key = 3 : i64, rate = 0.1 : f64, seed = 1234 : i64} : tensor<2x16x64xf32>, tensor<i64>
  // CHECK: %[[LOGITS:.+]] = loom.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<2x16x64xf32>, tensor<100x64xf32>) -> tensor<2x16x100xf32>
  %logits = loom.matmul %n, %wte {transpose_rhs} : (tensor<2x16x64xf32>, tensor<100x64xf32>) -> tensor<2x16x100xf32>
  // CHECK: loom.cross_entropy %[[LOGITS]], %{{.+}} : (tensor<2x16x100xf32>, tensor<2x16xi32>) -> tensor<f32>
  %loss = loom.cross_entropy %logits, %tok : (tensor<2x16x100xf32>, tensor<2x16xi32>) -> tensor<f32>
  return %a, %n, %p, %d, %loss : tensor<2x16x256xf32>, tensor<2x16x64xf32>, tensor<2x4x16x16xf32>, tensor<2x16x64xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @attention_dropout
func.func @attention_dropout(%q: tensor<2x16x4x16xf32>, %step: tensor<i64>, %lse: tensor<2x4x16xf32>) {
  // CHECK: loom.attention %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {causal, dropout_key = 2 : i64, dropout_rate = 1.000000e-01 : f64, dropout_seed = 1234 : i64, scale = 2.500000e-01 : f64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<i64>) -> (tensor<2x16x4x16xf32>, tensor<2x4x16xf32>)
  %o, %l = loom.attention %q, %q, %q, %step {causal, scale = 0.25 : f64, dropout_rate = 0.1 : f64, dropout_seed = 1234 : i64, dropout_key = 2 : i64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<i64>) -> (tensor<2x16x4x16xf32>, tensor<2x4x16xf32>)
  // CHECK: loom.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {causal, dropout_key = 2 : i64, dropout_rate = 1.000000e-01 : f64, dropout_seed = 1234 : i64, scale = 2.500000e-01 : f64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x4x16xf32>, tensor<i64>) -> (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %q, %lse, %step {causal, scale = 0.25 : f64, dropout_rate = 0.1 : f64, dropout_seed = 1234 : i64, dropout_key = 2 : i64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x4x16xf32>, tensor<i64>) -> (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>)
  return
}

// CHECK-LABEL: func.func @llama_ops
func.func @llama_ops(%x: tensor<2x16x8x32xbf16>, %kv: tensor<2x16x2x32xbf16>, %h: tensor<2x16x256xbf16>, %g: tensor<256xbf16>) -> (tensor<2x16x8x32xbf16>, tensor<2x8x16xf32>, tensor<2x16x256xbf16>, tensor<2x16x256xbf16>) {
  // CHECK: %[[Q:.+]] = loom.rope %{{.+}} {theta = 1.000000e+04 : f64} : tensor<2x16x8x32xbf16>
  %q = loom.rope %x {theta = 10000.0 : f64} : tensor<2x16x8x32xbf16>
  // CHECK: loom.attention %[[Q]], %{{.+}}, %{{.+}} {causal, scale = 0.17677669529663687 : f64} : (tensor<2x16x8x32xbf16>, tensor<2x16x2x32xbf16>, tensor<2x16x2x32xbf16>) -> (tensor<2x16x8x32xbf16>, tensor<2x8x16xf32>)
  %o, %lse = loom.attention %q, %kv, %kv {causal, scale = 0.17677669529663687 : f64} : (tensor<2x16x8x32xbf16>, tensor<2x16x2x32xbf16>, tensor<2x16x2x32xbf16>) -> (tensor<2x16x8x32xbf16>, tensor<2x8x16xf32>)
  // CHECK: loom.rmsnorm %{{.+}}, %{{.+}} {epsilon = 9.9999999999999995E-7 : f64} : tensor<2x16x256xbf16>, tensor<256xbf16>
  %n = loom.rmsnorm %h, %g {epsilon = 1.0e-06 : f64} : tensor<2x16x256xbf16>, tensor<256xbf16>
  // CHECK: loom.silu %{{.+}} : tensor<2x16x256xbf16>
  %s = loom.silu %h : tensor<2x16x256xbf16>
  // CHECK: loom.gelu_erf %{{.+}} : tensor<2x16x256xbf16>
  %ge = loom.gelu_erf %h : tensor<2x16x256xbf16>
  return %o, %lse, %n, %s : tensor<2x16x8x32xbf16>, tensor<2x8x16xf32>, tensor<2x16x256xbf16>, tensor<2x16x256xbf16>
}

// CHECK-LABEL: func.func @gradients
func.func @gradients(%dy: tensor<2x16x64xf32>, %x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %dp: tensor<2x4x16x16xf32>, %tok: tensor<2x16xi32>, %step: tensor<i64>, %dloss: tensor<f32>, %logits: tensor<2x16x100xf32>) {
  // CHECK: loom.layernorm_grad %{{.+}}, %{{.+}}, %{{.+}} {epsilon = 1.000000e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: loom.rmsnorm_grad %{{.+}}, %{{.+}}, %{{.+}} {epsilon = 1.000000e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  %rx, %rg = loom.rmsnorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: loom.gelu_grad %{{.+}}, %{{.+}} : tensor<2x16x64xf32>
  %ge = loom.gelu_grad %dy, %x : tensor<2x16x64xf32>
  // CHECK: loom.gelu_erf_grad %{{.+}}, %{{.+}} : tensor<2x16x64xf32>
  %gx = loom.gelu_erf_grad %dy, %x : tensor<2x16x64xf32>
  // CHECK: loom.silu_grad %{{.+}}, %{{.+}} : tensor<2x16x64xf32>
  %si = loom.silu_grad %dy, %x : tensor<2x16x64xf32>
  // CHECK: loom.softmax_grad %{{.+}}, %{{.+}} : tensor<2x4x16x16xf32>
  %sm = loom.softmax_grad %dp, %dp : tensor<2x4x16x16xf32>
  // CHECK: loom.embedding_grad %{{.+}}, %{{.+}} : (tensor<2x16x64xf32>, tensor<2x16xi32>) -> tensor<100x64xf32>
  %dw = loom.embedding_grad %dy, %tok : (tensor<2x16x64xf32>, tensor<2x16xi32>) -> tensor<100x64xf32>
  // CHECK: loom.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} : (tensor<f32>, tensor<2x16x100xf32>, tensor<2x16xi32>) -> tensor<2x16x100xf32>
  %dl = loom.cross_entropy_grad %dloss, %logits, %tok : (tensor<f32>, tensor<2x16x100xf32>, tensor<2x16xi32>) -> tensor<2x16x100xf32>
  // CHECK: loom.dropout_grad %{{.+}}, %{{.+}} {key = 3 : i64, rate = 1.000000e-01 : f64, seed = 1234 : i64} : tensor<2x16x64xf32>, tensor<i64>
  %dd = loom.dropout_grad %dy, %step {key = 3 : i64, rate = 0.1 : f64, seed = 1234 : i64} : tensor<2x16x64xf32>, tensor<i64>
  // CHECK: loom.reduce_max_grad %{{.+}}, %{{.+}} [2] {keep_dims} : tensor<2x16x1xf32>, tensor<2x16x64xf32>
  %dm1 = loom.reduce_sum %dy [2] {keep_dims} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  %dm = loom.reduce_max_grad %dm1, %x [2] {keep_dims} : tensor<2x16x1xf32>, tensor<2x16x64xf32>
  return
}

// CHECK-LABEL: func.func @attention_gradients
func.func @attention_gradients(%do: tensor<2x16x8x32xf32>, %q: tensor<2x16x8x32xf32>, %kv: tensor<2x16x2x32xf32>, %lse: tensor<2x8x16xf32>) {
  // CHECK: loom.rope_grad %{{.+}} {theta = 5.000000e+05 : f64} : tensor<2x16x8x32xf32>
  %dr = loom.rope_grad %do {theta = 500000.0 : f64} : tensor<2x16x8x32xf32>
  // CHECK: loom.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 1.250000e-01 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8x32xf32>, tensor<2x8x16xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>)
  %dq, %dk, %dv = loom.attention_grad %do, %q, %kv, %kv, %q, %lse {causal, scale = 0.125 : f64} : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8x32xf32>, tensor<2x8x16xf32>) -> (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>)
  return
}

// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%p: tensor<64x64xf32>, %g: tensor<64x64xbf16>, %step: tensor<i64>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  // CHECK: loom.adamw_update %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, lr = 3.000000e-04 : f64, weight_decay = 1.000000e-01 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<i64>
  %p2, %m2, %v2 = loom.adamw_update %p, %g, %p, %p, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<i64>
  // CHECK: loom.sgd_update %{{.+}}, %{{.+}} {lr = 1.000000e-02 : f64, weight_decay = 0.000000e+00 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>
  %p3 = loom.sgd_update %p, %g {lr = 1.0e-02 : f64, weight_decay = 0.0 : f64} : tensor<64x64xf32>, tensor<64x64xbf16>
  return %p2, %m2, %v2, %p3 : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}

// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<8x64xbf16>, %w: tensor<64x256xbf16>, %b: tensor<256xbf16>) -> (tensor<8x256xbf16>, tensor<8x256xbf16>) {
  // CHECK: %[[F:.+]]:2 = loom.fused(%{{.+}}, %{{.+}}, %{{.+}}) : (tensor<8x64xbf16>, tensor<64x256xbf16>, tensor<256xbf16>) -> (tensor<8x256xbf16>, tensor<8x256xbf16>) {
  // CHECK-NEXT: ^bb0(%{{.+}}: tensor<8x64xbf16>, %{{.+}}: tensor<64x256xbf16>, %{{.+}}: tensor<256xbf16>):
  // CHECK: loom.yield %{{.+}}, %{{.+}} : tensor<8x256xbf16>, tensor<8x256xbf16>
  %0:2 = loom.fused(%x, %w, %b) : (tensor<8x64xbf16>, tensor<64x256xbf16>, tensor<256xbf16>) -> (tensor<8x256xbf16>, tensor<8x256xbf16>) {
  ^bb0(%a: tensor<8x64xbf16>, %v: tensor<64x256xbf16>, %c: tensor<256xbf16>):
    %p = loom.matmul %a, %v : (tensor<8x64xbf16>, tensor<64x256xbf16>) -> tensor<8x256xbf16>
    %s = loom.add %p, %c : (tensor<8x256xbf16>, tensor<256xbf16>) -> tensor<8x256xbf16>
    %g = loom.gelu %s : tensor<8x256xbf16>
    loom.yield %s, %g : tensor<8x256xbf16>, tensor<8x256xbf16>
  }
  return %0#0, %0#1 : tensor<8x256xbf16>, tensor<8x256xbf16>
}
