// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g" | FileCheck %s --check-prefix=DATA
// RUN: loom-opt %S/Inputs/mlp.mlir --loom-auto-shard="func=mlp mesh=8 cluster=a100-80g memory-budget=12e6" | FileCheck %s --check-prefix=TENSOR

// The MLP of Inputs/mlp.mlir on the 8 GPUs of a DGX A100. With memory to
// spare the batch is split and the weights replicated (data parallelism: no
// communication); when 12 MB cannot hold the two 16 MB weights, the first
// matmul is split by columns and the second by rows (Megatron-LM), whose
// partial sums are reduced once at the end (scattered, since the result may
// leave split).

// DATA:      shard.grid @mesh(shape = 8)
// DATA-LABEL: func.func @mlp
// DATA:      %[[S0:.+]] = shard.sharding @mesh split_axes = {{\[\[}}0], []]
// DATA-NEXT: %[[X:.+]] = shard.shard %arg0 to %[[S0]]
// DATA:      %[[S1:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], []]
// DATA-NEXT: %[[W1:.+]] = shard.shard %arg1 to %[[S1]]
// DATA:      loom.matmul %[[X]], %[[W1]]
// DATA-NOT:  annotate_for_users
// DATA-NOT:  loom.partial_axes
// DATA:      return

// TENSOR-LABEL: func.func @mlp
// TENSOR:      %[[S0:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], []]
// TENSOR-NEXT: %[[X:.+]] = shard.shard %arg0 to %[[S0]]
// TENSOR:      %[[S1:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], [0]]
// TENSOR-NEXT: %[[W1:.+]] = shard.shard %arg1 to %[[S1]]
// TENSOR:      %[[S2:.+]] = shard.sharding @mesh split_axes = {{\[\[}}0], []]
// TENSOR-NEXT: %[[W2:.+]] = shard.shard %arg2 to %[[S2]]
// TENSOR:      %[[H:.+]] = loom.matmul %[[X]], %[[W1]]
// TENSOR:      loom.gelu
// TENSOR:      %[[Y:.+]] = loom.matmul %{{.+}}, %[[W2]]
// TENSOR:      %[[SP:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], []]
// TENSOR-NEXT: %[[P:.+]] = shard.shard %[[Y]] to %[[SP]] {loom.partial_axes = array<i64: 0>}
// TENSOR:      shard.shard %[[P]] to %{{.+}} annotate_for_users
// TENSOR-NEXT: return
