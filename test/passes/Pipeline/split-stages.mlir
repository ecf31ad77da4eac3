// RUN: loom-opt %S/Inputs/two-layers.mlir --loom-autodiff --loom-optimizer="kind=sgd lr=0.1" --loom-pipeline="stages=2 micro-batches=2 layers=1,1" --inline --loom-split-stages | FileCheck %s
// RUN: loom-opt %S/Inputs/two-layers.mlir --loom-autodiff --loom-optimizer="kind=sgd lr=0.1" --loom-pipeline="stages=2 micro-batches=2 layers=1,1 schedule=zb-h1" --inline --loom-split-stages | FileCheck %s --check-prefix=ZB
// RUN: loom-opt %S/Inputs/two-layers.mlir --loom-autodiff --loom-optimizer="kind=sgd lr=0.1" --loom-pipeline="stages=2 micro-batches=2 layers=1,1 recompute=full" --inline --loom-split-stages | FileCheck %s --check-prefix=FULL

// The schedule is in the module; @train_step is replaced by the stage
// functions.
// CHECK: loom.schedule = {kind = "1f1b", micro_batches = 2 : i64, ranks = 2 : i64, streams = {{\[}}["forward stage 0 mb 0", "send_activation stage 0 mb 0 peer 1", "forward stage 0 mb 1", "send_activation stage 0 mb 1 peer 1", "recv_gradient stage 1 mb 0 peer 1", "backward stage 0 mb 0", "recv_gradient stage 1 mb 1 peer 1", "backward stage 0 mb 1", "all_reduce_gradients", "optimizer"], ["recv_activation stage 0 mb 0 peer 0", "forward stage 1 mb 0", "backward stage 1 mb 0", "send_gradient stage 1 mb 0 peer 0", "recv_activation stage 0 mb 1 peer 0", "forward stage 1 mb 1", "backward stage 1 mb 1", "send_gradient stage 1 mb 1 peer 0", "all_reduce_gradients", "optimizer"]], virtual_stages = 1 : i64}
// CHECK-NOT: func.func @train_step

// Stage 0's forward sends the layer's output on and saves what its
// backward reads.
// CHECK-LABEL: func.func @stage0_forward(
// CHECK-SAME: {loom.name = "tokens", loom.role = "data"})
// CHECK-SAME: -> (tensor<2x3x8xf32> {loom.role = "activation", loom.value = "[[ACT:v[0-9]+]]"}, tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v1"}, tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v2"})
// CHECK-SAME: attributes {loom.stage_function = {kind = "forward", stage = 0 : i64}}

// Its backward takes the activation gradient from stage 1 and adds this
// micro-batch's weight gradients to the accumulators.
// CHECK-LABEL: func.func @stage0_backward(
// CHECK-SAME: {loom.role = "activation_grad", loom.value = "[[DACT:v[0-9]+]]"}, %[[ACC:arg[0-9]+]]: tensor<8x8xf32> {loom.role = "accumulator", loom.value = "[[GW0:v[0-9]+]]"}
// CHECK: %[[DW:.+]] = loom.matmul {{.*}} transpose_lhs
// CHECK: loom.add %[[ACC]], %[[DW]]

// The tied embedding's accumulator is summed over both stages first.
// CHECK-LABEL: func.func @stage0_optimizer(
// CHECK-SAME: {loom.role = "accumulator", loom.value = "[[GW0]]"}, %[[TIED:arg[0-9]+]]: tensor<16x8xf32> {loom.role = "accumulator", loom.tied_stages = [0, 1], loom.value = "[[GWTE:v[0-9]+]]"})
// CHECK: loom.sgd_update %arg0, %[[TIED]]

// Stage 1 receives the activation and accumulates the loss.
// CHECK-LABEL: func.func @stage1_forward(
// CHECK-SAME: {loom.role = "activation", loom.value = "[[ACT]]"}, %[[LOSS:arg[0-9]+]]: tensor<f32> {loom.role = "loss", loom.value = "[[L:v[0-9]+]]"})
// CHECK: %[[CE:.+]] = loom.cross_entropy
// CHECK: loom.add %[[LOSS]], %[[CE]]
// CHECK-LABEL: func.func @stage1_backward(
// CHECK-SAME: -> (tensor<2x3x8xf32> {loom.role = "activation_grad", loom.value = "[[DACT]]"}, tensor<16x8xf32> {loom.role = "accumulator", loom.value = "[[GWTE]]"}
// CHECK-LABEL: func.func @stage1_optimizer(
// CHECK-SAME: loom.tied_stages = [0, 1], loom.value = "[[GWTE]]"

// ZB-H1: each backward is split into the input-gradient part and the
// weight-gradient part, which reads what the first saves for it.
// ZB: loom.schedule = {kind = "zb-h1"
// ZB-SAME: "backward_input stage 1 mb 0"
// ZB-SAME: "backward_weight stage 1 mb 0"
// ZB-LABEL: func.func @stage1_backward_input(
// ZB-SAME: -> (tensor<2x3x8xf32> {loom.role = "activation_grad", loom.value = "{{v[0-9]+}}"}, tensor<2x3x16xf32> {loom.role = "saved", loom.value = "[[S:v[0-9]+]]"}
// ZB-SAME: attributes {loom.stage_function = {kind = "backward_input", stage = 1 : i64}}
// ZB-LABEL: func.func @stage1_backward_weight(
// ZB-SAME: {loom.role = "saved", loom.value = "[[S]]"}
// ZB-SAME: attributes {loom.stage_function = {kind = "backward_weight", stage = 1 : i64}}
// ZB: loom.matmul {{.*}} transpose_lhs

// Full recomputation: stage 0 saves nothing (its only input is the
// tokens), and its backward recomputes the forward values it reads.
// FULL-LABEL: func.func @stage0_forward(
// FULL-SAME: -> (tensor<2x3x8xf32> {loom.role = "activation", loom.value = "v3"})
// FULL-LABEL: func.func @stage0_backward(
// FULL: loom.embedding {{.*}} {loom.stage = 0 : i64}
// FULL: loom.matmul {{.*}} {loom.stage = 0 : i64}
// FULL: loom.gelu_grad
