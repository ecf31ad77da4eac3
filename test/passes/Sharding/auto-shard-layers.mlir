// RUN: loom-import %S/../../../examples/configs/gpt2-tiny.json --micro-batch 4 --seq-len 64 --precision bf16 \
// RUN:   | loom-opt --loom-autodiff --loom-optimizer --inline \
// RUN:       --loom-auto-shard="func=train_step mesh=2x4 cluster=a100-80g:1 report=true" \
// RUN:       --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPT2
// RUN: loom-import %S/../../../examples/configs/llama-tiny.json --micro-batch 4 --seq-len 64 --precision bf16 \
// RUN:   | loom-opt --loom-autodiff --loom-optimizer --inline \
// RUN:       --loom-auto-shard="func=train_step mesh=2x4 cluster=a100-80g:1 report=true" \
// RUN:       --mlir-print-op-on-diagnostic=false | FileCheck %s --check-prefix=LLAMA
// RUN: loom-import %S/../../../examples/configs/gpt2-tiny.json --micro-batch 2 --seq-len 16 \
// RUN:   | sed -e 's/"transformer\.h\.\([0-9]\)\./"transformer.block\1_/g' \
// RUN:   | loom-opt --loom-autodiff --loom-optimizer --inline \
// RUN:       --loom-auto-shard="func=train_step mesh=2 cluster=a100-80g:1 report=true" \
// RUN:       --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=MARKED

// A whole training step of tiny GPT-2 and tiny Llama, @forward_backward
// inlined into @train_step, plans: 0-d values (the step, the loss) take the
// one layout they have, returned training state comes back in its
// argument's layout, and size-1 dimensions never split. Tiny models have
// two layers: each is its own representative (the first follows the
// embedding, the last precedes the head), so nothing is tied.
// GPT2: remark: --loom-auto-shard: {{[0-9]+}} nodes, {{[0-9]+}} edges, 2 layers (2 solved for, 0 nodes tied)

// The layers are the ones the importer marks (loom.layer on the parameters,
// their gradients, moments and updates), not guessed from the names: with
// the layer indices taken out of the names they are still found.
// MARKED: remark: --loom-auto-shard: {{[0-9]+}} nodes, {{[0-9]+}} edges, 2 layers (2 solved for, 0 nodes tied)

// LLAMA: shard.grid @mesh
// LLAMA-LABEL: func.func @train_step
// LLAMA: shard.shard
// LLAMA-NOT: call @forward_backward
// LLAMA: return
