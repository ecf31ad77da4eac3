// A pipelined step's mesh is one pipeline rank's stage grid, as an
// unpipelined step's is the whole step's: with 2 pipeline ranks on the 8
// GPUs of a100-80g, each stage is planned on at most 4; 2 x 8 do not fit:
// one line of error.
// RUN: loom-opt %s --loom-auto-shard="func=f mesh=4 cluster=a100-80g" | FileCheck %s
// RUN: loom-opt %s --loom-auto-shard="func=f mesh=2 cluster=a100-80g" | FileCheck %s --check-prefix=TWO
// RUN: not loom-opt %s --loom-auto-shard="func=f mesh=8 cluster=a100-80g" 2>&1 | FileCheck %s --check-prefix=DEVICES --implicit-check-not=operation
// RUN: not loom-opt %s --loom-auto-shard="func=f mesh=8 cluster=a100-80g" 2>&1 | count 1

// CHECK: shard.grid @mesh(shape = 4)
// TWO: shard.grid @mesh(shape = 2)
// DEVICES: error: --loom-auto-shard: the step needs 2 pipeline ranks x the mesh 8 = 16 devices, the cluster 'a100-80g' has 8
module attributes {loom.state = "pipelined", loom.pipeline = {schedule = "1f1b", ranks = 2 : i64, virtual_stages = 1 : i64, micro_batches = 1 : i64, recompute = ["none", "none"]}} {
  func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
    %y = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    return %y : tensor<8x16xf32>
  }
}
