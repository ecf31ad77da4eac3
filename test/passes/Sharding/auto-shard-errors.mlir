// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-auto-shard="func=f mesh=2x4 cluster=a100-80g"
// RUN: not loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g memory-budget=1000" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not loom-opt %s --split-input-file --loom-auto-shard="func=f mesh=2xq cluster=a100-80g" 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: not loom-opt %s --split-input-file --loom-auto-shard="func=f mesh=16 cluster=a100-80g" 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=16 cluster=a100-80g" 2>&1 | FileCheck %s --check-prefix=DEVICES --implicit-check-not=operation
// RUN: not loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=2 cluster=%t.missing.json" 2>&1 | FileCheck %s --check-prefix=NOFILE --implicit-check-not=operation
// RUN: not loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=16 cluster=a100-80g" 2>&1 | count 1
// RUN: not loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=2 cluster=%t.missing.json" 2>&1 | count 1
// RUN: not loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=2x4 cluster=a100-80g context-axis=2" 2>&1 | FileCheck %s --check-prefix=CONTEXT
// RUN: not loom-opt %s --split-input-file --loom-auto-shard="func=nosuch mesh=8 cluster=a100-80g" 2>&1 | FileCheck %s --check-prefix=FUNC

// BUDGET: error: --loom-auto-shard: memory budget of 1000 bytes {{.*}} is infeasible: every allowed strategy choice needs at least
// MESH: error: --loom-auto-shard: mesh="2xq" is not a list of axis sizes such as 2x4
// DEVICES: {{.*}}.mlir:{{[0-9]+}}:0: error: --loom-auto-shard: the step needs the mesh 16 = 16 devices, the cluster 'a100-80g' has 8
// NOFILE: error: --loom-auto-shard: {{.*}}missing.json: {{.*}}No such file or directory
// CONTEXT: error: --loom-auto-shard: context-axis=2 is not an axis of the mesh 2x4
// FUNC: {{.*}}auto-shard-errors.mlir:{{[0-9]+}}:0: error: --loom-auto-shard: no function @nosuch

// A call must be inlined first. (The other cases: a malformed mesh, a mesh
// the cluster cannot hold, a missing cluster file, each one line without
// the function's IR after it; a context axis outside the mesh, a missing
// function, a budget below what any choice needs.)
func.func private @g(tensor<8xf32>) -> tensor<8xf32>
// expected-error @+1 {{--loom-auto-shard: }}
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = func.call @g(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A partitioned module: the planner plans the whole step, before
// --loom-partition.
// expected-error @+1 {{--loom-auto-shard: the module is partitioned already (loom.state): plan the step before --loom-partition}}
module attributes {loom.state = "partitioned"} {
  shard.grid @mesh(shape = 2x4)
  func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// A pipelined step partitioned in place keeps its state; its collectives
// say it is partitioned.
shard.grid @mesh(shape = 2x4)
// expected-error @+1 {{--loom-auto-shard: @f is partitioned already (it holds 'shard.all_gather'): plan the step before --loom-partition}}
func.func @f(%x: tensor<4xf32>) -> tensor<8xf32> {
  %y = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}
