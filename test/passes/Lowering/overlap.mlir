// RUN: loom-opt %s -split-input-file --loom-overlap-collectives --loom-lower-cpu | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-lower-cpu | FileCheck %s --check-prefix=BLOCKING

// Split collectives. The all_gather of an argument starts first (nothing
// before it computes its operand); the all_reduce moves up to just after
// the mul that computes its operand and is waited for just before the add
// that reads it, so exp and tanh run while it is in flight; the
// reduce_scatter along dimension 1 (4 blocks to pack) waits in its own
// call; the gather's wait comes before the function returns. The meta of
// each collective ends with its slot (-1: blocking); a wait's meta lists
// the transfer's buffers (all_reduce: its result; all_gather: operand and
// result) and the slot.
// CHECK: dense<[1, 1, 0, 2, 1, 8, 0, 2, 2, 8, 0, 2, 0, 0]>
// CHECK: dense<[1, 1, 0, 2, 4, 8, 0, 2, 4, 8, 0, 0, 1]>
// CHECK: dense<[1, 0, 0, 2, 4, 8, 1]>
// CHECK: dense<[1, 1, 0, 2, 4, 8, 0, 2, 4, 4, 0, 0, 2, 1, -1]>
// CHECK: dense<[2, 0, 0, 2, 1, 8, 0, 2, 2, 8, 0]>
// CHECK-LABEL: llvm.func @loom_fn_train_step
// CHECK: llvm.call @loom_cpu_all_gather
// CHECK: llvm.call @loom_cpu_mul
// CHECK: llvm.call @loom_cpu_all_reduce
// CHECK: llvm.call @loom_cpu_exp
// CHECK: llvm.call @loom_cpu_tanh
// CHECK: llvm.call @loom_cpu_collective_wait
// CHECK: llvm.call @loom_cpu_add
// CHECK: llvm.call @loom_cpu_reduce_scatter
// CHECK: llvm.call @loom_cpu_collective_wait
// CHECK: llvm.return

// Without overlap every collective waits in its own call, where it stands.
// BLOCKING-NOT: collective_wait
// BLOCKING-LABEL: llvm.func @loom_fn_train_step
// BLOCKING: llvm.call @loom_cpu_mul
// BLOCKING: llvm.call @loom_cpu_exp
// BLOCKING: llvm.call @loom_cpu_tanh
// BLOCKING: llvm.call @loom_cpu_all_reduce
// BLOCKING: llvm.call @loom_cpu_add
// BLOCKING: llvm.call @loom_cpu_reduce_scatter
// BLOCKING: llvm.call @loom_cpu_all_gather
// BLOCKING-NOT: collective_wait
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

// A transfer that reads another's result starts after that one's wait;
// slots are reused once waited for, lowest first (r2 takes slot 0 again,
// the reduce_scatter slot 1). The reduce_scatter (contiguous blocks along
// dimension 0) sends from the exp's buffer, so its wait lists that buffer
// and the memory plan keeps it until then: while tanh runs, r2, e, rs and
// t are live (128 + 128 + 64 + 128 bytes), where the blocking plan has
// freed e (320).
// CHECK: dense<[1, 1, 0, 2, 4, 8, 0, 2, 4, 8, 0, 0, 0]>
// CHECK: dense<[1, 0, 0, 2, 4, 8, 0]>
// CHECK: dense<[1, 1, 0, 2, 4, 8, 0, 2, 4, 8, 0, 0, 0]>
// CHECK: dense<[1, 1, 0, 2, 4, 8, 0, 2, 2, 8, 0, 0, 2, 0, 1]>
// CHECK: dense<[1, 0, 0, 2, 4, 8, 0]>
// CHECK: dense<[2, 0, 0, 2, 4, 8, 0, 2, 2, 8, 1]>
// CHECK-LABEL: llvm.func @loom_fn_train_step
// CHECK-SAME: loom.workspace_bytes = 448
// CHECK: llvm.call @loom_cpu_all_reduce
// CHECK: llvm.call @loom_cpu_collective_wait
// CHECK: llvm.call @loom_cpu_all_reduce
// CHECK: llvm.call @loom_cpu_exp
// CHECK: llvm.call @loom_cpu_reduce_scatter
// CHECK: llvm.call @loom_cpu_tanh
// CHECK: llvm.call @loom_cpu_collective_wait
// CHECK: llvm.call @loom_cpu_add
// CHECK: llvm.call @loom_cpu_collective_wait
// CHECK: llvm.call @loom_cpu_exp
// BLOCKING-LABEL: llvm.func @loom_fn_train_step
// BLOCKING-SAME: loom.workspace_bytes = 320
shard.grid @mesh(shape = 2)
func.func @train_step(%a: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<2x8xf32>) {
  %r1 = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %r2 = shard.all_reduce %r1 on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %e = loom.exp %x : tensor<4x8xf32>
  %rs = shard.reduce_scatter %e on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %t = loom.tanh %x : tensor<4x8xf32>
  %sum = loom.add %t, %r2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = loom.exp %rs : tensor<2x8xf32>
  return %sum, %m : tensor<4x8xf32>, tensor<2x8xf32>
}
