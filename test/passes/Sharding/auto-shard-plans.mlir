// RUN: loom-opt %S/Inputs/gpt-blocks.mlir --loom-autodiff="func=blocks" \
// RUN:     --loom-auto-shard="func=blocks_backward mesh=8 cluster=a100-80g:1 sequence-parallel=none" \
// RUN:     --loom-partition="func=blocks_backward" | FileCheck %s --check-prefix=MEGATRON
// RUN: loom-opt %S/Inputs/gpt-blocks.mlir --loom-autodiff="func=blocks" \
// RUN:     --loom-auto-shard="func=blocks_backward mesh=8 cluster=a100-80g:1 sequence-parallel=megatron" \
// RUN:     --loom-partition="func=blocks_backward" | FileCheck %s --check-prefix=SP
// RUN: loom-import %S/../../../examples/configs/gpt2-tiny.json --micro-batch 2048 --seq-len 64 --precision bf16 \
// RUN:   | loom-opt --loom-autodiff --loom-optimizer --inline \
// RUN:       --loom-auto-shard="func=train_step mesh=8 cluster=a100-80g:1" --loom-partition="func=train_step" \
// RUN:   | FileCheck %s --check-prefix=DP
// RUN: loom-import %S/../../../examples/configs/gpt2-tiny.json --micro-batch 2048 --seq-len 64 --precision bf16 \
// RUN:   | loom-opt --loom-autodiff --loom-optimizer --inline \
// RUN:       --loom-auto-shard="func=train_step mesh=8 cluster=a100-80g:1 memory-budget=85500000" \
// RUN:       --loom-partition="func=train_step" | FileCheck %s --check-prefix=ZERO

// Plans the solver finds by itself (nothing pinned but the one sequence of
// the GPT blocks, which leaves no batch to split).

// Two GPT blocks on a tensor axis of 8, sequence parallelism not allowed:
// Megatron's column-then-row split, two all-reduces per layer in the
// forward pass (after attention's output projection and after the MLP) and
// two in the backward (before each layer norm's gradient: the Q, K and V
// input gradients summed while partial, then reduced once), nothing else.
// MEGATRON-LABEL: func.func @blocks_backward
// MEGATRON-NOT:   shard.reduce_scatter
// MEGATRON-NOT:   shard.all_gather
// MEGATRON-COUNT-4: shard.all_reduce
// MEGATRON-NOT:   shard.all_reduce
// MEGATRON:       loom.reduce_mean
// MEGATRON-NOT:   shard.all_reduce
// MEGATRON:       shard.all_reduce
// MEGATRON-NEXT:  loom.layernorm_grad %all_reduce
// MEGATRON-NOT:   shard.all_reduce
// MEGATRON:       shard.all_reduce
// MEGATRON-NEXT:  loom.layernorm_grad %all_reduce
// MEGATRON-NOT:   shard.all_reduce
// MEGATRON:       shard.all_reduce
// MEGATRON-NEXT:  loom.layernorm_grad %all_reduce
// MEGATRON-NOT:   shard.all_reduce
// MEGATRON:       shard.all_reduce
// MEGATRON-NEXT:  loom.layernorm_grad %all_reduce
// MEGATRON-NOT:   shard.all_reduce
// MEGATRON-NOT:   shard.reduce_scatter
// MEGATRON-NOT:   shard.all_gather
// MEGATRON:       return

// The same with Megatron-LM's sequence parallelism allowed, which the cost
// model finds cheaper in the forward pass: each all-reduce becomes a
// reduce-scatter over the sequence (the residual add runs on the shards)
// and an all-gather before the next layer norm; the last one needs no
// all-gather, as the mean reduces the shards.
// SP-LABEL: func.func @blocks_backward
// SP-NOT:   shard.all_reduce
// SP:       shard.reduce_scatter {{.*}} scatter_axis = 1
// SP-NOT:   shard.all_reduce
// SP:       shard.all_gather {{.*}} gather_axis = 1
// SP-NOT:   shard.all_reduce
// SP:       shard.reduce_scatter {{.*}} scatter_axis = 1
// SP-NOT:   shard.all_reduce
// SP:       shard.all_gather {{.*}} gather_axis = 1
// SP-NOT:   shard.all_reduce
// SP:       shard.reduce_scatter {{.*}} scatter_axis = 1
// SP-NOT:   shard.all_reduce
// SP:       shard.all_gather {{.*}} gather_axis = 1
// SP-NOT:   shard.all_reduce
// SP:       shard.reduce_scatter {{.*}} scatter_axis = 1
// SP-NOT:   shard.all_reduce
// SP:       loom.reduce_mean

// Tiny GPT-2 with a large batch (2048 sequences of 64 tokens): pure data
// parallelism. Parameters and optimizer state stay whole, each device
// takes its slice of the batch, and the gradients are all-reduced in buckets (the position
// embedding's gradient is ready only after the others are read, so it is a
// bucket of its own), plus the loss.
// DP-LABEL: func.func @train_step
// DP-NOT:   loom.split_axes = {{\[\[}}0
// DP-SAME:  {
// DP:       shard.all_slice {{.*}} grid_axes = [0] slice_axis = 0 : tensor<2048x64xi32> -> tensor<256x64xi32>
// DP-NOT:   shard.all_gather
// DP-NOT:   shard.reduce_scatter
// DP-NOT:   shard.all_to_all
// DP-DAG:   shard.all_reduce {{.*}} : tensor<f32> -> tensor<f32>
// DP-DAG:   shard.all_reduce {{.*}} : tensor<64x64xbf16>
// DP-DAG:   shard.all_reduce {{.*}} : tensor<116480xbf16>
// DP-NOT:   shard.all_reduce
// DP:       return

// The same with 85.5 MB per device, 1.5 MB less than the data-parallel
// plan keeps (87 MB, mostly the activations saved for the backward pass,
// which data parallelism already splits): ZeRO. The largest weights and
// their Adam moments are split over the devices, their gradients
// reduce-scattered and the weights all-gathered where used (ZeRO-3 on
// those weights: the solver splits what saves the most per byte of traffic).
// ZERO-LABEL: func.func @train_step
// ZERO-SAME: loom.name = "transformer.h.{{[01]}}.{{[a-z_.]+}}.weight", loom.role = "param", loom.split_axes = {{\[\[}}0], []]
// ZERO-SAME: loom.name = "transformer.h.{{[01]}}.{{[a-z_.]+}}.weight", loom.role = "m", loom.split_axes = {{\[\[}}0], []]
// ZERO-SAME: loom.name = "transformer.h.{{[01]}}.{{[a-z_.]+}}.weight", loom.role = "v", loom.split_axes = {{\[\[}}0], []]
// ZERO:      shard.all_gather
// ZERO:      shard.reduce_scatter
