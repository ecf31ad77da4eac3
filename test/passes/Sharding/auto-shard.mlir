// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g" | FileCheck %s --check-prefix=DATA
// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g memory-budget=12e6" | FileCheck %s --check-prefix=TENSOR

// The MLP of Inputs/mlp.mlir on the 8 GPUs of a DGX A100. With memory to spare the batch is
// split and the weights replicated (data parallelism: no communication);
// when 12 MB cannot hold the two 16 MB weights, the first matmul is split
// by columns and the second by rows (Megatron-LM), whose partial sums are
// reduced once at the end (scattered, since the result may leave split).

// DATA:      shard.grid @mesh(shape = 8)
// DATA-LABEL:
