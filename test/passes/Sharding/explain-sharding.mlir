// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g memory-budget=12e6" | loom-opt --loom-explain-sharding="func=mlp cluster=a100-80g" -o /dev/null | FileCheck %s --check-prefix=TENSOR
// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g" -o %t.mlir
// RUN: loom-opt %t.mlir --loom-explain-sharding="func=mlp cluster=a100-80g output=%t.txt" -o %t.after.mlir
// RUN: diff %t.mlir %t.after.mlir
// RUN: FileCheck %s --check-prefix=DATA < %t.txt
// RUN: loom-opt %s --loom-explain-sharding="func=f cluster=a100-80g" -o /dev/null | FileCheck %s --check-prefix=HAND

// Megatron's MLP as --loom-auto-shard plans it under a 12 MB budget (see
// auto-shard.mlir): the matmuls and the gelu run on column and row shards
// without communication, and the output's partial sums are reduced once,
// scattered, where it is returned.

// TENSOR:      sharding of @mlp on grid @mesh (shape 8) of cluster 'a100-80g'
// TENSOR-NEXT: op           loc    operands              results               compute    communication  collectives
// TENSOR-NEXT: loom.matmul  {{[0-9]+}}:{{[0-9]+}}  [{}, {}], [{}, {0}]   [{}, {0}]             [[T:[0-9.]+ us]]  0.00 us        -
// TENSOR-NEXT: loom.gelu    {{.*}}  [{}, {0}]             [{}, {0}]             {{[0-9.]+}} us    0.00 us        -
// TENSOR-NEXT: loom.matmul  {{.*}}  [{}, {0}], [{0}, {}]  [{}, {}] partial={0}  [[T]]  0.00 us        -
// TENSOR-NEXT: func.return  {{.*}}  [{}, {0}]                                   0.00 us    [[C:[0-9.]+ us]]       #0 reduce-scatter axis 0 256.0 KiB [[C]]
// TENSOR-NEXT: total: compute {{[0-9.]+}} us, communication [[C]]; collectives: all-reduce 0, reduce-scatter 1, all-to-all 0, all-gather 0, slice 0

// Data parallelism, written to a file with `output=` (the IR is left as it
// was): the batch is split, the weights whole, nothing communicated.

// DATA:      sharding of @mlp
// DATA:      loom.matmul  {{.*}}  [{0}, {}], [{}, {}]  [{0}, {}]  {{.*}} us  0.00 us        -
// DATA:      total: compute {{.*}}, communication 0.00 us; collectives: all-reduce 0, reduce-scatter 0, all-to-all 0, all-gather 0, slice 0

// Annotations written by hand: the batch-split input moves its split to the
// contraction dimension (all-to-all), the replicated weight is sliced by
// rows, the partial sums are all-reduced for a replicated result; the gelu's
// layouts are no strategy of a gelu (in and out split differently), which
// the row says. An unannotated value (%w) is replicated.

// HAND:      sharding of @f on grid @mesh (shape 8) of cluster 'a100-80g'
// HAND-NEXT: op
// HAND-NEXT: loom.matmul  {{[0-9]+}}:8  [{}, {0}], [{0}, {}]  [{}, {}] partial={0}  {{.*}} us  {{.*}} us  #0 all-to-all axis 0 32.0 KiB {{.*}} us; #1 slice axis 0
// HAND-NEXT: loom.gelu    {{.*}}  [{}, {}]              [{0}, {}]              {{.*}} us  {{.*}} us  #0 all-reduce axis 0 256.0 KiB {{.*}} us; (no strategy of the op has these layouts)
// HAND-NEXT: func.return  {{.*}}  [{0}, {}]                                    0.00 us    0.00 us    -
// HAND-NEXT: total: compute {{.*}} us, communication {{.*}} us; collectives: all-reduce 1, reduce-scatter 0, all-to-all 1, all-gather 0, slice 1
shard.grid @mesh(shape = 8)
func.func @f(%x: tensor<64x1024xf32>, %w: tensor<1024x1024xf32>) -> tensor<64x1024xf32> {
  %s0 = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %s0 : tensor<64x1024xf32>
  %s1 = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x0 to %s1 annotate_for_users : tensor<64x1024xf32>
  %s2 = shard.sharding @mesh split_axes = [[0], []] : !shard.sharding
  %w1 = shard.shard %w to %s2 annotate_for_users : tensor<1024x1024xf32>
  %y = loom.matmul %x1, %w1 : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  %s3 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %y0 = shard.shard %y to %s3 {loom.partial_axes = array<i64: 0>} : tensor<64x1024xf32>
  %y1 = shard.shard %y0 to %s3 annotate_for_users : tensor<64x1024xf32>
  %g = loom.gelu %y1 : tensor<64x1024xf32>
  %g0 = shard.shard %g to %s0 : tensor<64x1024xf32>
  return %g0 : tensor<64x1024xf32>
}
