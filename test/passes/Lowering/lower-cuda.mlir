// RUN: loom-opt %s -split-input-file --loom-overlap-collectives --loom-lower-cuda | FileCheck %s

// A mixed-precision step: the f32 master weight is cast to bf16, a bf16
// matmul (meta: dtype 4 = bf16, then the transpose flags and epilogue 0) and bf16
// activations. Each kernel takes the context as a fourth argument, which
// the function passes through; intermediates sit at 256-byte workspace
// offsets (4x8 bf16 is 64 bytes); the function records its target.
// CHECK: llvm.func @loom_cuda_cast(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: llvm.mlir.global internal constant @__loom_meta_train_step_1(dense<[2, 1, 4, 2, 4, 16, 4, 2, 8, 16, 4, 2, 4, 8, 0, 1, 0]>
// CHECK: llvm.func @loom_cuda_matmul(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @loom_fn_train_step(%arg0: !llvm.ptr, %arg1: !llvm.ptr) -> i32
// CHECK-SAME: loom.target = "cuda"
// CHECK-SAME: loom.workspace_bytes = 512
// CHECK: llvm.getelementptr %arg0[2]
// CHECK-NEXT: %[[WS:.+]] = llvm.load
// CHECK: %[[OFF0:.+]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[CAST:.+]] = llvm.getelementptr %[[WS]][%[[OFF0]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: llvm.call @loom_cuda_cast(%arg0, %{{.+}}, %{{.+}}, %arg1)
// CHECK: %[[OFF1:.+]] = llvm.mlir.constant(256 : i64) : i64
// CHECK-NEXT: %[[Y:.+]] = llvm.getelementptr %[[WS]][%[[OFF1]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: %[[META:.+]] = llvm.mlir.addressof @__loom_meta_train_step_1
// CHECK: llvm.call @loom_cuda_matmul(%arg0, %{{.+}}, %[[META]], %arg1)
// CHECK: llvm.call @loom_cuda_gelu(%arg0, %{{.+}}, %{{.+}}, %arg1)
// CHECK: llvm.call @loom_cuda_add(%arg0, %{{.+}}, %{{.+}}, %arg1)
// CHECK: llvm.return
// CHECK-NOT: loom_cpu_
func.func @train_step(%w: tensor<8x16xf32> {loom.name = "w", loom.role = "param"}, %x: tensor<4x16xbf16>) -> tensor<4x8xbf16> {
  %wb = loom.cast %w : tensor<8x16xf32> -> tensor<8x16xbf16>
  %y = loom.matmul %x, %wb {transpose_rhs} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
  %g = loom.gelu %y : tensor<4x8xbf16>
  %z = loom.add %g, %y : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %z : tensor<4x8xbf16>
}

// -----

// A constant stays a host global; an upload (copy's meta: host source,
// device destination) puts it where its value lives, here the result
// buffer (so no workspace), before the op that reads it. A returned
// argument is copied by loom_cuda_copy.
// CHECK: llvm.mlir.global internal constant @__loom_constant_train_step_0(dense<2.000000e+00> : tensor<4xf32>)
// CHECK: llvm.mlir.global internal constant @__loom_meta_train_step_1(dense<[1, 1, 0, 1, 4, 0, 1, 4]>
// CHECK: llvm.func @loom_cuda_upload(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @loom_fn_train_step
// CHECK-SAME: loom.workspace_bytes = 0
// CHECK: %[[HOST:.+]] = llvm.mlir.addressof @__loom_constant_train_step_0
// CHECK: llvm.store %[[HOST]]
// CHECK: llvm.call @loom_cuda_upload(%arg0, %{{.+}}, %{{.+}}, %arg1)
// CHECK: llvm.call @loom_cuda_mul
// CHECK: llvm.call @loom_cuda_copy(%arg0, %{{.+}}, %{{.+}}, %arg1)
func.func @train_step(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c = arith.constant dense<2.0> : tensor<4xf32>
  %m = loom.mul %a, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c, %m, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Collectives become loom_cuda_<collective> calls with the CPU meta
// (group 0, sum, slot 0), here on bf16, and their waits
// loom_cuda_collective_wait calls.
// CHECK: module attributes {loom.groups = [array<i64: 0>]}
// CHECK: dense<[1, 1, 4, 2, 4, 4, 4, 2, 4, 4, 0, 0, 0]>
// CHECK: llvm.func @loom_cuda_all_reduce(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: llvm.func @loom_cuda_collective_wait(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: llvm.call @loom_cuda_all_reduce(%arg0, %{{.+}}, %{{.+}}, %arg1)
// CHECK: llvm.call @loom_cuda_collective_wait(%arg0, %{{.+}}, %{{.+}}, %arg1)
shard.grid @mesh(shape = 2)
func.func @train_step(%a: tensor<4x4xbf16>) -> tensor<4x4xbf16> {
  %r = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4x4xbf16> -> tensor<4x4xbf16>
  return %r : tensor<4x4xbf16>
}
