// RUN: loom-opt %s -split-input-file --loom-overlap-collectives --loom-lower-cpu | FileCheck %s

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
// then the epilogue, 0: none; all_reduce: group 0, sum, then the slot it
// starts under: split collectives, overlap.mlir), and collective_wait
// lists the transfer's buffer and the slot.
// CHECK: module attributes {loom.groups = [array<i64: 0>]}
// CHECK: dense<[2, 1, 0, 2, 4, 8, 0, 2, 4, 8, 0, 2, 4, 4, 0, 1, 0]>
// CHECK: dense<[1, 1, 0, 2, 4, 4, 0, 2, 4, 4, 0, 0, 0]>
// CHECK: llvm.func @loom_cpu_all_reduce
// CHECK: dense<[1, 0, 0, 2, 4, 4, 0]>
// CHECK: llvm.func @loom_cpu_collective_wait
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

// -----

// Two AdamW updates in one loom.fused are one adamw_update_multi call: 9
// operands (param, grad, m, v of each, the step), 6 results, then lr,
// beta1, beta2, eps and weight_decay once.
// CHECK: dense<[9, 6, 0, 1, 4, 0, 1, 4, 0, 1, 4, 0, 1, 4, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 0, 0, 1, 4, 0, 1, 4, 0, 1, 4, 0, 1, 2, 0, 1, 2, 0, 1, 2,
// CHECK: llvm.func @loom_cpu_adamw_update_multi
func.func @train_step(%p0: tensor<4xf32>, %g0: tensor<4xf32>, %m0: tensor<4xf32>, %v0: tensor<4xf32>,
                      %p1: tensor<2xf32>, %g1: tensor<2xf32>, %m1: tensor<2xf32>, %v1: tensor<2xf32>,
                      %step: tensor<i64>) -> (tensor<4xf32>, tensor<2xf32>) {
  %0:6 = loom.fused(%p0, %g0, %m0, %v0, %p1, %g1, %m1, %v1, %step)
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i64>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>,
       %e: tensor<2xf32>, %f: tensor<2xf32>, %g: tensor<2xf32>, %h: tensor<2xf32>, %s: tensor<i64>):
    %x:3 = loom.adamw_update %a, %b, %c, %d, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<i64>
    %y:3 = loom.adamw_update %e, %f, %g, %h, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, lr = 3.0e-04 : f64, weight_decay = 0.1 : f64} : tensor<2xf32>, tensor<2xf32>, tensor<i64>
    loom.yield %x#0, %x#1, %x#2, %y#0, %y#1, %y#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  }
  return %0#0, %0#3 : tensor<4xf32>, tensor<2xf32>
}

// -----

// The exact GELU and its gradient call kernels of their own, and are
// opcodes 15 (gelu_erf of register 1) and 16 (gelu_erf_grad: register 2's
// derivative times register 0) of a fused chain, whose result is register 3.
// CHECK-DAG: llvm.func @loom_cpu_gelu_erf(
// CHECK-DAG: llvm.func @loom_cpu_gelu_erf_grad(
// CHECK-DAG: dense<[2, 1, 0, 2, 2, 4, 0, 2, 2, 4, 0, 2, 2, 4, 2, 15, 1, 0, 16, 0, 2, 3]>
// CHECK: llvm.call @loom_cpu_gelu_erf(
// CHECK: llvm.call @loom_cpu_gelu_erf_grad(
// CHECK: llvm.call @loom_cpu_fused_elementwise(
func.func @train_step(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %g = loom.gelu_erf %x : tensor<2x4xf32>
  %d = loom.gelu_erf_grad %dy, %x : tensor<2x4xf32>
  %f = loom.fused(%dy, %x) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>):
    %e = loom.gelu_erf %b : tensor<2x4xf32>
    %de = loom.gelu_erf_grad %a, %e : tensor<2x4xf32>
    loom.yield %de : tensor<2x4xf32>
  }
  return %g, %d, %f : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
