// A pipelined step's mesh is one pipeline rank's stage grid: with 2
// pipeline ranks on the 8 GPUs of a100-80g, each stage is planned on 4 (or
// on 8 when the cluster names one stage's devices).
// RUN: loom-opt %s --loom-auto-shard="func=f mesh=4 cluster=a100-80g" | FileCheck %s
// RUN: loom-opt %s --loom-auto-shard="func=f mesh=8 cluster=a100-80g" | FileCheck %s --check-prefix=EIGHT
// RUN: not loom-opt %s --loom-auto-shard="func=f mesh=2 cluster=a100-80g" 2>&1 | FileCheck %s --check-prefix=DEVICES

// CHECK: shard.grid @mesh(shape = 4)
// EIGHT: shard.grid @mesh(shape = 8)
// DEVICES: error: --loom-auto-shard: the mesh 2 has 2 devices, the cluster 'a100-80g' 8 (a pipelined step's mesh has them all, or one of its 2 pipeline ranks' share)
module attributes {loom.state = "pipelined", loom.pipeline = {schedule = "1f1b", ranks = 2 : i64, virtual_stages = 1 : i64, micro_batches = 1 : i64, recompute = ["none", "none"]}} {
  func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
    %y = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    return %y : tensor<8x16xf32>
  }
}
