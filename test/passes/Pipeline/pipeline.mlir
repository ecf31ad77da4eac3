// RUN: loom-opt %S/Inputs/two-layers.mlir --loom-autodiff --loom-optimizer="kind=sgd lr=0.1" --loom-pipeline="stages=2 micro-batches=2 layers=1,1" | FileCheck %s
// RUN: loom-opt %S/Inputs/two-layers.mlir --loom-autodiff --loom-optimizer="kind=sgd lr=0.1" --loom-pipeline="stages=2 micro-batches=4 schedule=gpipe recompute=full,none" | FileCheck %s --check-prefix=BALANCED
// RUN: sed -e 's/{loom.name = "h\.\([01]\)\.w"}/{loom.layer = \1 : i64, loom.name = "block\1"}/' %S/Inputs/two-layers.mlir \
// RUN:   | loom-opt --loom-autodiff --loom-optimizer="kind=sgd lr=0.1" --loom-pipeline="stages=2 micro-batches=2 layers=1,1" | FileCheck %s --check-prefix=MARKED

// The batch of 4 sequences becomes micro-batches of 2, the loss divides by
// the whole batch's 12 tokens, every forward op carries its stage (the
// embedding and layer 0 on stage 0, layer 1 and the head on stage 1), and
// the tied embedding gets a second argument for stage 1.
// CHECK: module attributes {loom.pipeline = {micro_batches = 2 : i64, ranks = 2 : i64, recompute = ["none", "none"], schedule = "1f1b", stage_items = [0, 2, 4], virtual_stages = 1 : i64}, loom.state = "pipelined"}
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[WTE:arg[0-9]+]]: tensor<16x8xf32> {loom.name = "wte"}
// CHECK-SAME: tensor<2x3xi32> {loom.name = "tokens"}, %[[LABELS:arg[0-9]+]]: tensor<2x3xi32> {loom.name = "labels"}, %[[WTE1:arg[0-9]+]]: tensor<16x8xf32> {loom.name = "wte"}
// CHECK: loom.embedding %[[WTE]], {{.*}} {loom.stage = 0 : i64} : (tensor<16x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
// CHECK: loom.gelu {{.*}} {loom.stage = 0 : i64}
// CHECK: loom.gelu {{.*}} {loom.stage = 1 : i64}
// CHECK: loom.rmsnorm {{.*}} loom.stage = 1 : i64
// CHECK: loom.matmul {{.*}}, %[[WTE1]] {loom.stage = 1 : i64, transpose_rhs}
// CHECK: loom.cross_entropy {{.*}}, %[[LABELS]] {loom.stage = 1 : i64, token_count = 12 : i64}

// The gradient function is derived again: every backward op runs in its
// forward op's stage; the embedding's two gradients are results of their own.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: tensor<16x8xf32> {loom.grad_of = "wte"}, tensor<8x8xf32> {loom.grad_of = "h.0.w"}, tensor<8x8xf32> {loom.grad_of = "h.1.w"}, tensor<8xf32> {loom.grad_of = "ln_f.weight"}, tensor<16x8xf32> {loom.grad_of = "wte"})
// CHECK: loom.cross_entropy_grad {{.*}} {loom.backward, loom.stage = 1 : i64, token_count = 12 : i64}
// CHECK: loom.rmsnorm_grad {{.*}} loom.backward, loom.stage = 1 : i64
// CHECK: loom.gelu_grad {{.*}} {loom.backward, loom.stage = 0 : i64}
// CHECK: loom.embedding_grad {{.*}} {loom.backward, loom.stage = 0 : i64}

// @train_step takes micro-batches and sums the tied gradients.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<2x3xi32> {loom.name = "tokens", loom.role = "data"}
// CHECK: %[[G:.+]]:6 = call @forward_backward(%arg0, {{.*}}, %arg0)
// CHECK: %[[SUM:.+]] = loom.add %[[G]]#1, %[[G]]#5 {loom.tied_gradient}
// CHECK: loom.sgd_update %arg0, %[[SUM]]

// Without `layers` the stage DP balances the items' roofline times; modes
// and micro-batches are recorded for --loom-split-stages.
// BALANCED: module attributes {loom.pipeline = {micro_batches = 4 : i64, ranks = 2 : i64, recompute = ["full", "none"], schedule = "gpipe", stage_items = [0, {{[0-9]}}, 4], virtual_stages = 1 : i64}, loom.state = "pipelined"}
// BALANCED: loom.embedding {{.*}} -> tensor<1x3x8xf32>

// Layers marked as the importers mark them (`loom.layer` on the parameters)
// need no layer index in the names: the same items and stages.
// MARKED: stage_items = [0, 2, 4]
// MARKED-LABEL: func.func @forward(
// MARKED: loom.gelu {{.*}} {loom.stage = 0 : i64}
// MARKED: loom.gelu {{.*}} {loom.stage = 1 : i64}
