module attributes {loom.pipeline = {micro_batches = 2 : i64, ranks = 2 : i64, recompute = ["none", "none"], schedule = "1f1b", stage_items = [0, 2, 4], virtual_stages = 1 : i64}, loom.schedule = {kind = "1f1b", micro_batches = 2 : i64, ranks = 2 : i64, streams = [["forward stage 0 mb 0", "send_activation stage 0 mb 0 peer 1", "forward stage 0 mb 1", "send_activation stage 0 mb 1 peer 1", "recv_gradient stage 1 mb 0 peer 1", "backward stage 0 mb 0", "recv_gradient stage 1 mb 1 peer 1", "backward stage 0 mb 1", "all_reduce_gradients", "optimizer"], ["recv_activation stage 0 mb 0 peer 0", "forward stage 1 mb 0", "backward stage 1 mb 0", "send_gradient stage 1 mb 0 peer 0", "recv_activation stage 0 mb 1 peer 0", "forward stage 1 mb 1", "backward stage 1 mb 1", "send_gradient stage 1 mb 1 peer 0", "all_reduce_gradients", "optimizer"]], virtual_stages = 1 : i64}, loom.state = "split"} {
  func.func @forward(%arg0: tensor<16x8xf32> {loom.name = "wte"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w"}, %arg2: tensor<8x8xf32> {loom.name = "h.1.w"}, %arg3: tensor<8xf32> {loom.name = "ln_f.weight"}, %arg4: tensor<2x3xi32> {loom.name = "tokens"}, %arg5: tensor<2x3xi32> {loom.name = "labels"}, %arg6: tensor<16x8xf32> {loom.name = "wte"}) -> tensor<f32> {
    %0 = loom.embedding %arg0, %arg4 {loom.stage = 0 : i64} : (tensor<16x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
    %1 = loom.matmul %0, %arg1 {loom.stage = 0 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %2 = loom.gelu %1 {loom.stage = 0 : i64} : tensor<2x3x8xf32>
    %3 = loom.matmul %2, %arg2 {loom.stage = 1 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %4 = loom.gelu %3 {loom.stage = 1 : i64} : tensor<2x3x8xf32>
    %5 = loom.rmsnorm %4, %arg3 {epsilon = 9.9999999999999995E-7 : f64, loom.stage = 1 : i64} : tensor<2x3x8xf32>, tensor<8xf32>
    %6 = loom.matmul %5, %arg6 {loom.stage = 1 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
    %7 = loom.cross_entropy %6, %arg5 {loom.stage = 1 : i64, token_count = 12 : i64} : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
    return %7 : tensor<f32>
  }
  func.func @forward_backward(%arg0: tensor<16x8xf32> {loom.name = "wte"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w"}, %arg2: tensor<8x8xf32> {loom.name = "h.1.w"}, %arg3: tensor<8xf32> {loom.name = "ln_f.weight"}, %arg4: tensor<2x3xi32> {loom.name = "tokens"}, %arg5: tensor<2x3xi32> {loom.name = "labels"}, %arg6: tensor<16x8xf32> {loom.name = "wte"}) -> (tensor<f32>, tensor<16x8xf32> {loom.grad_of = "wte"}, tensor<8x8xf32> {loom.grad_of = "h.0.w"}, tensor<8x8xf32> {loom.grad_of = "h.1.w"}, tensor<8xf32> {loom.grad_of = "ln_f.weight"}, tensor<16x8xf32> {loom.grad_of = "wte"}) {
    %cst = arith.constant {loom.backward, loom.stage = 1 : i64} dense<1.000000e+00> : tensor<f32>
    %0 = loom.embedding %arg0, %arg4 {loom.stage = 0 : i64} : (tensor<16x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
    %1 = loom.matmul %0, %arg1 {loom.stage = 0 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %2 = loom.gelu %1 {loom.stage = 0 : i64} : tensor<2x3x8xf32>
    %3 = loom.matmul %2, %arg2 {loom.stage = 1 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %4 = loom.gelu %3 {loom.stage = 1 : i64} : tensor<2x3x8xf32>
    %5 = loom.rmsnorm %4, %arg3 {epsilon = 9.9999999999999995E-7 : f64, loom.stage = 1 : i64} : tensor<2x3x8xf32>, tensor<8xf32>
    %6 = loom.matmul %5, %arg6 {loom.stage = 1 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
    %7 = loom.cross_entropy %6, %arg5 {loom.stage = 1 : i64, token_count = 12 : i64} : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
    %8 = loom.cross_entropy_grad %cst, %6, %arg5 {loom.backward, loom.stage = 1 : i64, token_count = 12 : i64} : (tensor<f32>, tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<2x3x16xf32>
    %9 = loom.matmul %8, %arg6 {loom.backward, loom.stage = 1 : i64} : (tensor<2x3x16xf32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
    %10 = loom.reshape %5 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %11 = loom.reshape %8 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x16xf32> -> tensor<6x16xf32>
    %12 = loom.matmul %11, %10 {loom.backward, loom.stage = 1 : i64, transpose_lhs} : (tensor<6x16xf32>, tensor<6x8xf32>) -> tensor<16x8xf32>
    %dx, %dgamma = loom.rmsnorm_grad %9, %4, %arg3 {epsilon = 9.9999999999999995E-7 : f64, loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32>, tensor<8xf32>
    %13 = loom.gelu_grad %dx, %3 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32>
    %14 = loom.matmul %13, %arg2 {loom.backward, loom.stage = 1 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %15 = loom.reshape %2 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %16 = loom.reshape %13 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %17 = loom.matmul %15, %16 {loom.backward, loom.stage = 1 : i64, transpose_lhs} : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<8x8xf32>
    %18 = loom.gelu_grad %14, %1 {loom.backward, loom.stage = 0 : i64} : tensor<2x3x8xf32>
    %19 = loom.matmul %18, %arg1 {loom.backward, loom.stage = 0 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %20 = loom.reshape %0 {loom.backward, loom.stage = 0 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %21 = loom.reshape %18 {loom.backward, loom.stage = 0 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %22 = loom.matmul %20, %21 {loom.backward, loom.stage = 0 : i64, transpose_lhs} : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<8x8xf32>
    %23 = loom.embedding_grad %19, %arg4 {loom.backward, loom.stage = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<16x8xf32>
    return %7, %23, %22, %17, %dgamma, %12 : tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<16x8xf32>
  }
  func.func @stage0_forward(%arg0: tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}, %arg2: tensor<2x3xi32> {loom.name = "tokens", loom.role = "data"}) -> (tensor<2x3x8xf32> {loom.role = "activation", loom.value = "v3"}, tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v1"}, tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v2"}) attributes {loom.stage_function = {kind = "forward", stage = 0 : i64}} {
    %0 = loom.embedding %arg0, %arg2 {loom.stage = 0 : i64} : (tensor<16x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
    %1 = loom.matmul %0, %arg1 {loom.stage = 0 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %2 = loom.gelu %1 {loom.stage = 0 : i64} : tensor<2x3x8xf32>
    return %2, %0, %1 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
  }
  func.func @stage0_backward(%arg0: tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}, %arg1: tensor<2x3xi32> {loom.name = "tokens", loom.role = "data"}, %arg2: tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v1"}, %arg3: tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v2"}, %arg4: tensor<2x3x8xf32> {loom.role = "activation_grad", loom.value = "v16"}, %arg5: tensor<8x8xf32> {loom.role = "accumulator", loom.value = "v24"}, %arg6: tensor<16x8xf32> {loom.role = "accumulator", loom.value = "v26"}) -> (tensor<8x8xf32> {loom.role = "accumulator", loom.value = "v24"}, tensor<16x8xf32> {loom.role = "accumulator", loom.value = "v26"}) attributes {loom.stage_function = {kind = "backward", stage = 0 : i64}} {
    %0 = loom.gelu_grad %arg4, %arg3 {loom.backward, loom.stage = 0 : i64} : tensor<2x3x8xf32>
    %1 = loom.matmul %0, %arg0 {loom.backward, loom.stage = 0 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %2 = loom.reshape %arg2 {loom.backward, loom.stage = 0 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %3 = loom.reshape %0 {loom.backward, loom.stage = 0 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %4 = loom.matmul %2, %3 {loom.backward, loom.stage = 0 : i64, transpose_lhs} : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<8x8xf32>
    %5 = loom.embedding_grad %1, %arg1 {loom.backward, loom.stage = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<16x8xf32>
    %6 = loom.add %arg5, %4 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %7 = loom.add %arg6, %5 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    return %6, %7 : tensor<8x8xf32>, tensor<16x8xf32>
  }
  func.func @stage0_optimizer(%arg0: tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}, %arg2: tensor<8x8xf32> {loom.role = "accumulator", loom.value = "v24"}, %arg3: tensor<16x8xf32> {loom.role = "accumulator", loom.tied_stages = [0, 1], loom.value = "v26"}) -> (tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}) attributes {loom.stage_function = {kind = "optimizer", stage = 0 : i64}} {
    %0 = loom.sgd_update %arg0, %arg3 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<16x8xf32>, tensor<16x8xf32>
    %1 = loom.sgd_update %arg1, %arg2 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    return %0, %1 : tensor<16x8xf32>, tensor<8x8xf32>
  }
  func.func @stage1_forward(%arg0: tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, %arg2: tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}, %arg3: tensor<2x3xi32> {loom.name = "labels", loom.role = "data"}, %arg4: tensor<2x3x8xf32> {loom.role = "activation", loom.value = "v3"}, %arg5: tensor<f32> {loom.role = "loss", loom.value = "v8"}) -> (tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v3"}, tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v4"}, tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v5"}, tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v6"}, tensor<2x3x16xf32> {loom.role = "saved", loom.value = "v7"}, tensor<f32> {loom.role = "loss", loom.value = "v8"}) attributes {loom.stage_function = {kind = "forward", stage = 1 : i64}} {
    %0 = loom.matmul %arg4, %arg1 {loom.stage = 1 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %1 = loom.gelu %0 {loom.stage = 1 : i64} : tensor<2x3x8xf32>
    %2 = loom.rmsnorm %1, %arg2 {epsilon = 9.9999999999999995E-7 : f64, loom.stage = 1 : i64} : tensor<2x3x8xf32>, tensor<8xf32>
    %3 = loom.matmul %2, %arg0 {loom.stage = 1 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
    %4 = loom.cross_entropy %3, %arg3 {loom.stage = 1 : i64, token_count = 12 : i64} : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
    %5 = loom.add %arg5, %4 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %arg4, %0, %1, %2, %3, %5 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x16xf32>, tensor<f32>
  }
  func.func @stage1_backward(%arg0: tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, %arg2: tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}, %arg3: tensor<2x3xi32> {loom.name = "labels", loom.role = "data"}, %arg4: tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v3"}, %arg5: tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v4"}, %arg6: tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v5"}, %arg7: tensor<2x3x8xf32> {loom.role = "saved", loom.value = "v6"}, %arg8: tensor<2x3x16xf32> {loom.role = "saved", loom.value = "v7"}, %arg9: tensor<16x8xf32> {loom.role = "accumulator", loom.value = "v26"}, %arg10: tensor<8xf32> {loom.role = "accumulator", loom.value = "v14#1"}, %arg11: tensor<8x8xf32> {loom.role = "accumulator", loom.value = "v19"}) -> (tensor<2x3x8xf32> {loom.role = "activation_grad", loom.value = "v16"}, tensor<16x8xf32> {loom.role = "accumulator", loom.value = "v26"}, tensor<8xf32> {loom.role = "accumulator", loom.value = "v14#1"}, tensor<8x8xf32> {loom.role = "accumulator", loom.value = "v19"}) attributes {loom.stage_function = {kind = "backward", stage = 1 : i64}} {
    %cst = arith.constant {loom.backward, loom.stage = 1 : i64} dense<1.000000e+00> : tensor<f32>
    %0 = loom.cross_entropy_grad %cst, %arg8, %arg3 {loom.backward, loom.stage = 1 : i64, token_count = 12 : i64} : (tensor<f32>, tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<2x3x16xf32>
    %1 = loom.matmul %0, %arg0 {loom.backward, loom.stage = 1 : i64} : (tensor<2x3x16xf32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
    %2 = loom.reshape %arg7 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %3 = loom.reshape %0 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x16xf32> -> tensor<6x16xf32>
    %4 = loom.matmul %3, %2 {loom.backward, loom.stage = 1 : i64, transpose_lhs} : (tensor<6x16xf32>, tensor<6x8xf32>) -> tensor<16x8xf32>
    %dx, %dgamma = loom.rmsnorm_grad %1, %arg6, %arg2 {epsilon = 9.9999999999999995E-7 : f64, loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32>, tensor<8xf32>
    %5 = loom.gelu_grad %dx, %arg5 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32>
    %6 = loom.matmul %5, %arg1 {loom.backward, loom.stage = 1 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %7 = loom.reshape %arg4 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %8 = loom.reshape %5 {loom.backward, loom.stage = 1 : i64} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %9 = loom.matmul %7, %8 {loom.backward, loom.stage = 1 : i64, transpose_lhs} : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<8x8xf32>
    %10 = loom.add %arg9, %4 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    %11 = loom.add %arg10, %dgamma : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %12 = loom.add %arg11, %9 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    return %6, %10, %11, %12 : tensor<2x3x8xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8x8xf32>
  }
  func.func @stage1_optimizer(%arg0: tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, %arg2: tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}, %arg3: tensor<8xf32> {loom.role = "accumulator", loom.value = "v14#1"}, %arg4: tensor<8x8xf32> {loom.role = "accumulator", loom.value = "v19"}, %arg5: tensor<16x8xf32> {loom.role = "accumulator", loom.tied_stages = [0, 1], loom.value = "v26"}) -> (tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}) attributes {loom.stage_function = {kind = "optimizer", stage = 1 : i64}} {
    %0 = loom.sgd_update %arg0, %arg5 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<16x8xf32>, tensor<16x8xf32>
    %1 = loom.sgd_update %arg1, %arg4 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %2 = loom.sgd_update %arg2, %arg3 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    return %0, %1, %2 : tensor<16x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  }
}

