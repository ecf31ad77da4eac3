// RUN: loom-opt %s -split-input-file --loom-partition="func=f" | FileCheck %s
// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g memory-budget=12e6" --loom-partition="func=mlp" | FileCheck %s --check-prefix=MEGATRON

// A partial sum needed whole by two users is all-reduced once, where it is
// first needed.
shard.grid @mesh(shape = 4)
// CHECK-LABEL: func.func @f
// CHECK-SAME: %arg0: tensor<8x4xf32> {loom.split_axes = {{\[\[}}], [0]]}
// CHECK-SAME: %arg1: tensor<4x8xf32> {loom.split_axes = {{\[\[}}0], []]}
// CHECK:      %[[P:.+]] = loom.matmul %arg0, %arg1 : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[R:.+]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[G:.+]] = loom.gelu %[[R]]
// CHECK-NEXT: %[[S:.+]] = loom.silu %[[R]]
// CHECK-NOT:  shard.all_reduce
// CHECK:      return
func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %s0 = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %a0 = shard.shard %a to %s0 : tensor<8x16xf32>
  %s1 = shard.sharding @mesh split_axes = [[0], []] : !shard.sharding
  %b0 = shard.shard %b to %s1 : tensor<16x8xf32>
  %p = loom.matmul %a0, %b0 : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %s2 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %p0 = shard.shard %p to %s2 {loom.partial_axes = array<i64: 0>} : tensor<8x8xf32>
  %w0 = shard.shard %p0 to %s2 annotate_for_users : tensor<8x8xf32>
  %g = loom.gelu %w0 : tensor<8x8xf32>
  %w1 = shard.shard %p0 to %s2 annotate_for_users : tensor<8x8xf32>
  %h = loom.silu %w1 : tensor<8x8xf32>
  return %g, %h : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A split that moves from rows to columns is one all-to-all; a split the
// consumer lacks is gathered; one it adds is a local slice.
shard.grid @mesh(shape = 2x2)
// CHECK-LABEL: func.func @f
// CHECK-SAME: %arg0: tensor<4x8xf32> {loom.split_axes = {{\[\[}}0], []]}
// CHECK:      %[[T:.+]] = shard.all_to_all %arg0 on @mesh grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: loom.gelu %[[T]] : tensor<8x4xf32>
// CHECK:      %[[G:.+]] = shard.all_gather %{{.+}} on @mesh grid_axes = [0] gather_axis = 1 : tensor<8x4xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[S:.+]] = shard.all_slice %[[G]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[H:.+]] = loom.silu %[[S]] : tensor<4x8xf32>
// CHECK-NEXT: %[[HG:.+]] = shard.all_gather %[[H]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[HS:.+]] = shard.all_slice %[[HG]] on @mesh grid_axes = [0] slice_axis = 1 : tensor<8x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[HS]]
func.func @f(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s0 = shard.sharding @mesh split_axes = [[0], []] : !shard.sharding
  %a0 = shard.shard %a to %s0 : tensor<8x8xf32>
  %s1 = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %a1 = shard.shard %a0 to %s1 annotate_for_users : tensor<8x8xf32>
  %g = loom.gelu %a1 : tensor<8x8xf32>
  %g0 = shard.shard %g to %s1 : tensor<8x8xf32>
  %s2 = shard.sharding @mesh split_axes = [[1], []] : !shard.sharding
  %g1 = shard.shard %g0 to %s2 annotate_for_users : tensor<8x8xf32>
  %h = loom.silu %g1 : tensor<8x8xf32>
  %h0 = shard.shard %h to %s2 : tensor<8x8xf32>
  %r = shard.shard %h0 to %s1 annotate_for_users : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Gradient all-reduces feeding the optimizer are bucketed: flattened,
// concatenated, reduced once, split again.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @f
// CHECK:      %[[GA:.+]] = loom.matmul %arg0, %arg1 {transpose_lhs}
// CHECK:      %[[GB:.+]] = loom.reduce_sum
// CHECK-NEXT: %[[FA:.+]] = loom.reshape %[[GA]] : tensor<4x4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[C:.+]] = loom.concat %[[FA]], %[[GB]] {axis = 0 : i64}
// CHECK-NEXT: %[[R:.+]] = shard.all_reduce %[[C]] on @mesh grid_axes = [0] : tensor<20xf32> -> tensor<20xf32>
// CHECK-NEXT: loom.slice %[[R]] [0] : tensor<20xf32> -> tensor<16xf32>
// CHECK:      loom.slice %[[R]] [16] : tensor<20xf32> -> tensor<4xf32>
// CHECK-NOT:  shard.all_reduce
// CHECK:      loom.adamw_update
// CHECK:      loom.adamw_update
func.func @f(%x: tensor<8x4xf32>, %dy: tensor<8x4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>,
             %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %mb: tensor<4xf32>, %vb: tensor<4xf32>,
             %step: tensor<i64>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  %split = shard.sharding @mesh split_axes = [[0], []] : !shard.sharding
  %x0 = shard.shard %x to %split : tensor<8x4xf32>
  %dy0 = shard.shard %dy to %split : tensor<8x4xf32>
  %gw = loom.matmul %x0, %dy0 {transpose_lhs} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %none = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %gw0 = shard.shard %gw to %none {loom.partial_axes = array<i64: 0>} : tensor<4x4xf32>
  %gb = loom.reduce_sum %dy0 [0] : tensor<8x4xf32> -> tensor<4xf32>
  %gb0 = shard.shard %gb to %none {loom.partial_axes = array<i64: 0>} : tensor<4xf32>
  %gw1 = shard.shard %gw0 to %none annotate_for_users : tensor<4x4xf32>
  %nw, %nm, %nv = loom.adamw_update %w, %gw1, %m, %v, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  %gb1 = shard.shard %gb0 to %none annotate_for_users : tensor<4xf32>
  %nb, %nmb, %nvb = loom.adamw_update %b, %gb1, %mb, %vb, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<i64>
  return %nw, %nb : tensor<4x4xf32>, tensor<4xf32>
}

// -----

// A mean over tokens split across devices divides by the global count.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @f
// CHECK:      %[[L:.+]] = loom.cross_entropy %arg0, %arg1 {token_count = 8 : i64} : (tensor<2x2x10xf32>, tensor<2x2xi32>) -> tensor<f32>
// CHECK-NEXT: shard.all_reduce %[[L]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
func.func @f(%logits: tensor<4x2x10xf32>, %labels: tensor<4x2xi32>) -> tensor<f32> {
  %split = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %l0 = shard.shard %logits to %split : tensor<4x2x10xf32>
  %y0 = shard.shard %labels to %split : tensor<4x2xi32>
  %loss = loom.cross_entropy %l0, %y0 : (tensor<4x2x10xf32>, tensor<4x2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Megatron's MLP as --loom-auto-shard plans it under 12 MB: local weight
// shards in the signature, no communication until the row-parallel partial
// sums, which leave scattered (an all-reduce followed by a slice is a
// reduce-scatter).
// MEGATRON:      shard.grid @mesh(shape = 8)
// MEGATRON-LABEL: func.func @mlp
// MEGATRON-SAME: %arg0: tensor<64x1024xf32> {loom.split_axes = {{\[\[}}], []]}
// MEGATRON-SAME: %arg1: tensor<1024x512xf32> {loom.split_axes = {{\[\[}}], [0]]}
// MEGATRON-SAME: %arg2: tensor<512x1024xf32> {loom.split_axes = {{\[\[}}0], []]}
// MEGATRON-SAME: -> (tensor<64x128xf32> {loom.split_axes = {{\[\[}}], [0]]})
// MEGATRON:      loom.matmul %arg0, %arg1 : (tensor<64x1024xf32>, tensor<1024x512xf32>) -> tensor<64x512xf32>
// MEGATRON:      loom.gelu %{{.+}} : tensor<64x512xf32>
// MEGATRON:      %[[Y:.+]] = loom.matmul
// MEGATRON-NEXT: %[[R:.+]] = shard.reduce_scatter %[[Y]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<64x1024xf32> -> tensor<64x128xf32>
// MEGATRON-NEXT: return %[[R]]
