// RUN: loom-opt %s -split-input-file --loom-overlap-collectives | FileCheck %s

// The all_reduce moves up to just after the mul that computes its operand,
// the all_gather of an argument to the start (nothing computes its
// operand), both marked; the reduce_scatter along dimension 1 (4 blocks to
// pack) stays where it is, unmarked; every other op keeps its order.
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: shard.all_gather %{{.+}} {loom.overlap}
// CHECK-NEXT: %[[G:.+]] = loom.mul
// CHECK-NEXT: shard.all_reduce %[[G]] {{.*}}{loom.overlap}
// CHECK-NEXT: loom.exp
// CHECK-NEXT: loom.tanh
// CHECK-NEXT: loom.add
// CHECK-NEXT: shard.reduce_scatter
// CHECK-NOT: loom.overlap
// CHECK: return
shard.grid @mesh(shape = 2)
func.func @train_step(%w: tensor<4x8xf32>, %x: tensor<4x8xf32>, %s: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>) {
  %g = loom.mul %w, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = loom.exp %x : tensor<4x8xf32>
  %k = loom.tanh %h : tensor<4x8xf32>
  %r = shard.all_reduce %g on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %u = loom.add %r, %k : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %rs = shard.reduce_scatter %u on @mesh grid_axes = [0] scatter_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %ag = shard.all_gather %s on @mesh grid_axes = [0] gather_axis = 0 : tensor<1x8xf32> -> tensor<2x8xf32>
  return %u, %rs, %ag : tensor<4x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>
}

// -----

// A reshape costs nothing: it moves up to its operand first, so that the
// all_reduce of the reshaped product starts right after the matmul. Each
// all_gather of an argument starts no earlier than just after where the
// previous one stood (one gather ahead): %b's before the tanh that
// followed %a's, %c's before the neg that followed %b's.
// CHECK-LABEL: func.func @gathers
// CHECK-NEXT: shard.all_gather %arg0 {{.*}}{loom.overlap}
// CHECK-NEXT: %[[M:.+]] = loom.matmul
// CHECK-NEXT: %[[R:.+]] = loom.reshape %[[M]]
// CHECK-NEXT: shard.all_reduce %[[R]] {{.*}}{loom.overlap}
// CHECK-NEXT: loom.exp
// CHECK-NEXT: shard.all_gather %arg1 {{.*}}{loom.overlap}
// CHECK-NEXT: loom.tanh
// CHECK-NEXT: shard.all_gather %arg2 {{.*}}{loom.overlap}
// CHECK-NEXT: loom.neg
shard.grid @mesh(shape = 2)
func.func @gathers(%a: tensor<1x8xf32>, %b: tensor<1x8xf32>, %c: tensor<1x8xf32>, %x: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<64xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %m = loom.matmul %x, %x : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %e = loom.exp %x : tensor<8x8xf32>
  %ga = shard.all_gather %a on @mesh grid_axes = [0] gather_axis = 0 : tensor<1x8xf32> -> tensor<2x8xf32>
  %t = loom.tanh %x : tensor<8x8xf32>
  %gb = shard.all_gather %b on @mesh grid_axes = [0] gather_axis = 0 : tensor<1x8xf32> -> tensor<2x8xf32>
  %n = loom.neg %x : tensor<8x8xf32>
  %gc = shard.all_gather %c on @mesh grid_axes = [0] gather_axis = 0 : tensor<1x8xf32> -> tensor<2x8xf32>
  %r = loom.reshape %m : tensor<8x8xf32> -> tensor<64xf32>
  %s = shard.all_reduce %r on @mesh grid_axes = [0] : tensor<64xf32> -> tensor<64xf32>
  return %ga, %gb, %gc, %s, %e, %t, %n : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<64xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
