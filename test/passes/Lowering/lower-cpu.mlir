// RUN: loom-opt %s -split-input-file --loom-lower-cpu | FileCheck %s

// Each op becomes one kernel call with a constant meta array (operand and
// result shapes, then attributes); a value an op computes is written into
// its result slot, a returned argument is copied there; intermediates get
// workspace offsets from the memory plan.
// CHECK: llvm.mlir.global internal constant @__loom_meta_train_step_0(dense<[2, 1, 0, 2, 4, 8, 0, 2, 4, 8, 0, 2, 4, 8]>
// CHECK: llvm.func @loom_cpu_add(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @loom_fn_train_step(%arg0: !llvm.ptr) -> i32
// CHECK-SAME: loom.args = [{attrs = {loom.name = "w", loom.role = "param"}, type = tensor<4x8xf32>}
// CHECK-SAME: loom.workspace_bytes = 256
// CHECK: llvm.call @loom_cpu_add(%arg0
// CHECK: llvm.cond_br
// CHECK: llvm.call @loom_cpu_gelu
// CHECK: llvm.call @loom_cpu_mul
// CHECK: llvm.call @loom_cpu_copy
// CHECK: llvm.return
// CHECK: llvm.func @loom_program_abi_version() -> i32
// CHECK-NOT: func.func
func.func @train_step(%a: tensor<4x8xf32> {loom.name = "w", loom.role = "param"}, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = loom.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %d = loom.gelu %c : tensor<4x8xf32>
  %e = loom.mul %d, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %e, %a : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @forward(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// A collective names its communicator group (the module's loom.groups) and
// its members; attributes follow the shapes (matmul: transpose flags,
// then the epilogue, 0: none).
// CHECK: module attributes {loom.groups = [array<i64: 0>]}
// CHECK: dense<[2, 1, 0, 2, 4, 8, 0, 2, 4, 8, 0, 2, 4, 4, 0, 1, 0]>
// CHECK: dense<[1, 1, 0, 2, 4, 4, 0, 2, 4, 4, 0, 0]>
// CHECK: llvm.func @loom_cpu_all_reduce
shard.grid @mesh(shape = 2)
func.func @train_step(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %p = loom.matmul %a, %b {transpose_rhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  %r = shard.all_reduce %p on @mesh grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Workspace offsets are i64 GEP indices: two intermediates of 2.4 GB each
// put the second past 2 GiB (an i32 index wrapped there).
// CHECK: loom.peak_live_bytes = 4800000000 : i64
// CHECK-SAME: loom.workspace_bytes = 4800000000 : i64
// CHECK: llvm.mlir.constant(2400000000 : i64) : i64
// CHECK-NEXT: llvm.getelementptr %{{.+}}[%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
func.func @train_step(%a: tensor<600000000xf32>) -> tensor<600000000xf32> {
  %b = loom.gelu %a : tensor<600000000xf32>
  %c = loom.gelu %b : tensor<600000000xf32>
  %d = loom.add %b, %c : (tensor<600000000xf32>, tensor<600000000xf32>) -> tensor<600000000xf32>
  return %d : tensor<600000000xf32>
}

// -----

// A fused chain is one fused_elementwise call: the tensors, then the
// program: 2 instructions, add (opcode 0) of registers 0 and 1, gelu (11)
// of register 2; the result is register 3. A reshape makes no call: the
// exp reads the chain's buffer at its own shape.
// CHECK: dense<[2, 1, 0, 2, 2, 4, 0, 1, 4, 0, 2, 2, 4, 2, 0, 0, 1, 11, 2, 0, 3]>
// CHECK: llvm.func @loom_cpu_fused_elementwise
// CHECK-NOT: loom_cpu_reshape
// CHECK: llvm.func @loom_cpu_exp
// CHECK-NOT: loom_cpu_reshape
// CHECK: llvm.func @loom_fn_train_step
// CHECK-SAME: loom.workspace_bytes = 64
func.func @train_step(%a: tensor<2x4xf32>, %b: tensor<4xf32>) -> tensor<8xf32> {
  %0 = loom.fused(%a, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%x: tensor<2x4xf32>, %y: tensor<4xf32>):
    %s = loom.add %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = loom.gelu %s : tensor<2x4xf32>
    loom.yield %g : tensor<2x4xf32>
  }
  %r = loom.reshape %0 : tensor<2x4xf32> -> tensor<8xf32>
  %e = loom.exp %r : tensor<8xf32>
  return %e : tensor<8xf32>
}

// -----

// A matmul with an epilogue is one matmul call with a bias operand:
// transpose flags (rhs transposed), then epilogue 3 (bias_gelu_aux: the
// sum and its gelu, two results).
// CHECK: dense<[3, 2, 0, 2, 2, 3, 0, 2, 4, 3, 0, 1, 4, 0, 2, 2, 4, 0, 2, 2, 4, 0, 1, 3]>
// CHECK: llvm.func @loom_cpu_matmul
func.func @train_step(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>, %b: tensor<4xf32>)
    -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0:2 = loom.fused(%x, %w, %b) : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>)
      -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  ^bb0(%a: tensor<2x3xf32>, %v: tensor<4x3xf32>, %c: tensor<4xf32>):
    %p = loom.matmul %a, %v {transpose_rhs} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
    %s = loom.add %c, %p : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %g = loom.gelu %s : tensor<2x4xf32>
    loom.yield %s, %g : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %0#0, %0#1 : tensor<2x4xf32>, tensor<2x4xf32>
}
