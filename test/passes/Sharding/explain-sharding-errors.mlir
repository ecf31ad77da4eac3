// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-explain-sharding="func=f cluster=a100-80g" -o /dev/null
// RUN: not loom-opt %s --split-input-file --loom-explain-sharding="func=nosuch cluster=a100-80g" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FUNC
// RUN: not loom-opt %s --split-input-file --loom-explain-sharding="func=f cluster=nosuch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g" -o %t.mlir
// RUN: not loom-opt %t.mlir --loom-explain-sharding="func=mlp cluster=a100-80g output=%t.missing/table.txt" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OUTPUT

// FUNC: error: --loom-explain-sharding: no function @nosuch
// CLUSTER: error: --loom-explain-sharding: {{.*}}nosuch
// OUTPUT: error: --loom-explain-sharding: {{.*}}table.txt

// Without a grid there is nothing to explain. (The other cases: a missing
// function, an unknown cluster, an output file that cannot be written.)
// expected-error @+1 {{--loom-explain-sharding: no shard.grid in the module (run --loom-auto-shard first)}}
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// The grid must have the cluster's devices.
// expected-error @+1 {{--loom-explain-sharding: the grid has 4 devices, the cluster 'a100-80g' 8}}
shard.grid @mesh(shape = 2x2)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// All shardings of the function name one grid.
shard.grid @mesh(shape = 8)
shard.grid @other(shape = 2x4)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x8xf32>
  // expected-error @+1 {{--loom-explain-sharding: the shardings name two grids, @mesh and @other}}
  %t = shard.sharding @other split_axes = [[1]] : !shard.sharding
  %b = shard.shard %a to %t annotate_for_users : tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}

// -----

// A partial sum over an axis the grid does not have.
shard.grid @mesh(shape = 8)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  // expected-error @+1 {{--loom-explain-sharding: partial axis 1 is out of range: the mesh has 1 axes}}
  %a = shard.shard %x to %s {loom.partial_axes = array<i64: 1>} : tensor<8x8xf32>
  return %a : tensor<8x8xf32>
}

// -----

// A value has one layout.
shard.grid @mesh(shape = 8)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %t = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x8xf32>
  // expected-error @+1 {{--loom-explain-sharding: a second layout [{}, {0}] for a value laid out as [{0}, {}]}}
  %b = shard.shard %a to %t : tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}
