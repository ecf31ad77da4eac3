module attributes {loom.pipeline = {micro_batches = 2 : i64, ranks = 2 : i64, recompute = ["none", "none"], schedule = "1f1b", stage_items = [0, 2, 4], virtual_stages = 1 : i64}, loom.state = "pipelined"} {
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
  func.func @train_step(%arg0: tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}, %arg2: tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, %arg3: tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}, %arg4: tensor<i64> {loom.name = "step", loom.role = "step"}, %arg5: tensor<2x3xi32> {loom.name = "tokens", loom.role = "data"}, %arg6: tensor<2x3xi32> {loom.name = "labels", loom.role = "data"}) -> (tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}, tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}, tensor<f32> {loom.role = "loss"}) attributes {loom.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64}} {
    %cst = arith.constant {loom.backward, loom.stage = 1 : i64} dense<1.000000e+00> : tensor<f32>
    %0 = loom.embedding %arg0, %arg5 {loom.stage = 0 : i64} : (tensor<16x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
    %1 = loom.matmul %0, %arg1 {loom.stage = 0 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %2 = loom.gelu %1 {loom.stage = 0 : i64} : tensor<2x3x8xf32>
    %3 = loom.matmul %2, %arg2 {loom.stage = 1 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %4 = loom.gelu %3 {loom.stage = 1 : i64} : tensor<2x3x8xf32>
    %5 = loom.rmsnorm %4, %arg3 {epsilon = 9.9999999999999995E-7 : f64, loom.stage = 1 : i64} : tensor<2x3x8xf32>, tensor<8xf32>
    %6 = loom.matmul %5, %arg0 {loom.stage = 1 : i64, transpose_rhs} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
    %7 = loom.cross_entropy %6, %arg6 {loom.stage = 1 : i64, token_count = 12 : i64} : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
    %8 = loom.cross_entropy_grad %cst, %6, %arg6 {loom.backward, loom.stage = 1 : i64, token_count = 12 : i64} : (tensor<f32>, tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<2x3x16xf32>
    %9 = loom.matmul %8, %arg0 {loom.backward, loom.stage = 1 : i64} : (tensor<2x3x16xf32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
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
    %23 = loom.embedding_grad %19, %arg5 {loom.backward, loom.stage = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<16x8xf32>
    %24 = loom.add %23, %12 {loom.tied_gradient} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    %25 = loom.sgd_update %arg0, %24 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<16x8xf32>, tensor<16x8xf32>
    %26 = loom.sgd_update %arg1, %22 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %27 = loom.sgd_update %arg2, %17 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %28 = loom.sgd_update %arg3, %dgamma {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    return %25, %26, %27, %28, %7 : tensor<16x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<f32>
  }
}

