// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-auto-shard="func=mlp mesh=2x4 cluster=a100-80g" | FileCheck %s
// RUN: loom-opt %S/Inputs/unmet-pins.mlir --verify-diagnostics --loom-auto-shard="func=mlp mesh=2x4 cluster=a100-80g best-effort-pins=true" | FileCheck %S/Inputs/unmet-pins.mlir --check-prefix=BEST

// The MLP of Inputs/mlp.mlir with its tokens' batch pinned on mesh axis 0:
// the planner keeps that layout (and drops the attribute, the annotation
// now says it), splits the batch further over axis 1 for the matmuls, and
// replicates the weights: data parallelism over all 8 devices.

// CHECK-LABEL: func.func @mlp
// CHECK-NOT:   loom.split_axes
// CHECK:       %[[S0:.+]] = shard.sharding @mesh split_axes = {{\[\[}}0], []]
// CHECK-NEXT:  %[[X:.+]] = shard.shard %arg0 to %[[S0]]
// CHECK:       %[[S1:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], []]
// CHECK-NEXT:  %[[W1:.+]] = shard.shard %arg1 to %[[S1]]
// CHECK:       %[[S01:.+]] = shard.sharding @mesh split_axes = {{\[\[}}0, 1], []]
// CHECK-NEXT:  %[[XS:.+]] = shard.shard %[[X]] to %[[S01]] annotate_for_users
// CHECK:       loom.matmul %[[XS]], %[[W1]]
// CHECK-NOT:   loom.partial_axes
// CHECK:       return
func.func @mlp(%x: tensor<64x1024xf32> {loom.split_axes = [[0]]},
               %w1: tensor<1024x4096xf32>, %w2: tensor<4096x1024xf32>)
    -> tensor<64x1024xf32> {
  %h = loom.matmul %x, %w1 : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32>
  %g = loom.gelu %h : tensor<64x4096xf32>
  %y = loom.matmul %g, %w2 : (tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
}

// -----

// A weight pinned column-split on axis 1 by a `shard.shard` in the input
// keeps that layout, and the user's annotation is replaced by the pass's
// own (one shard.shard per value, on the pass's grid).

// CHECK-LABEL: func.func @mlp
// CHECK:       %[[S1:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], [1]]
// CHECK-NEXT:  %[[W1:.+]] = shard.shard %arg1 to %[[S1]] :
// CHECK-NOT:   shard.shard %arg1
// CHECK:       loom.matmul %{{.+}}, %[[W1]]
// CHECK:       return
shard.grid @mesh(shape = 2x4)
func.func @mlp(%x: tensor<64x1024xf32>, %w1: tensor<1024x4096xf32>,
               %w2: tensor<4096x1024xf32>) -> tensor<64x1024xf32> {
  %s = shard.sharding @mesh split_axes = [[], [1]] : !shard.sharding
  %w1p = shard.shard %w1 to %s : tensor<1024x4096xf32>
  %h = loom.matmul %x, %w1p : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32>
  %g = loom.gelu %h : tensor<64x4096xf32>
  %y = loom.matmul %g, %w2 : (tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
}
