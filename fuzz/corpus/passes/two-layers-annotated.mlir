module {
  shard.grid @mesh(shape = 2)
  func.func @forward(%arg0: tensor<16x8xf32> {loom.name = "wte"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w"}, %arg2: tensor<8x8xf32> {loom.name = "h.1.w"}, %arg3: tensor<8xf32> {loom.name = "ln_f.weight"}, %arg4: tensor<4x3xi32> {loom.name = "tokens"}, %arg5: tensor<4x3xi32> {loom.name = "labels"}) -> tensor<f32> {
    %0 = loom.embedding %arg0, %arg4 : (tensor<16x8xf32>, tensor<4x3xi32>) -> tensor<4x3x8xf32>
    %1 = loom.matmul %0, %arg1 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %2 = loom.gelu %1 : tensor<4x3x8xf32>
    %3 = loom.matmul %2, %arg2 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %4 = loom.gelu %3 : tensor<4x3x8xf32>
    %5 = loom.rmsnorm %4, %arg3 {epsilon = 9.9999999999999995E-7 : f64} : tensor<4x3x8xf32>, tensor<8xf32>
    %6 = loom.matmul %5, %arg0 {transpose_rhs} : (tensor<4x3x8xf32>, tensor<16x8xf32>) -> tensor<4x3x16xf32>
    %7 = loom.cross_entropy %6, %arg5 : (tensor<4x3x16xf32>, tensor<4x3xi32>) -> tensor<f32>
    return %7 : tensor<f32>
  }
  func.func @forward_backward(%arg0: tensor<16x8xf32> {loom.name = "wte"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w"}, %arg2: tensor<8x8xf32> {loom.name = "h.1.w"}, %arg3: tensor<8xf32> {loom.name = "ln_f.weight"}, %arg4: tensor<4x3xi32> {loom.name = "tokens"}, %arg5: tensor<4x3xi32> {loom.name = "labels"}) -> (tensor<f32>, tensor<16x8xf32> {loom.grad_of = "wte"}, tensor<8x8xf32> {loom.grad_of = "h.0.w"}, tensor<8x8xf32> {loom.grad_of = "h.1.w"}, tensor<8xf32> {loom.grad_of = "ln_f.weight"}) {
    %cst = arith.constant dense<1.000000e+00> : tensor<f32>
    %0 = loom.embedding %arg0, %arg4 : (tensor<16x8xf32>, tensor<4x3xi32>) -> tensor<4x3x8xf32>
    %1 = loom.matmul %0, %arg1 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %2 = loom.gelu %1 : tensor<4x3x8xf32>
    %3 = loom.matmul %2, %arg2 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %4 = loom.gelu %3 : tensor<4x3x8xf32>
    %5 = loom.rmsnorm %4, %arg3 {epsilon = 9.9999999999999995E-7 : f64} : tensor<4x3x8xf32>, tensor<8xf32>
    %6 = loom.matmul %5, %arg0 {transpose_rhs} : (tensor<4x3x8xf32>, tensor<16x8xf32>) -> tensor<4x3x16xf32>
    %7 = loom.cross_entropy %6, %arg5 : (tensor<4x3x16xf32>, tensor<4x3xi32>) -> tensor<f32>
    %8 = loom.cross_entropy_grad %cst, %6, %arg5 : (tensor<f32>, tensor<4x3x16xf32>, tensor<4x3xi32>) -> tensor<4x3x16xf32>
    %9 = loom.matmul %8, %arg0 : (tensor<4x3x16xf32>, tensor<16x8xf32>) -> tensor<4x3x8xf32>
    %10 = loom.reshape %5 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %11 = loom.reshape %8 : tensor<4x3x16xf32> -> tensor<12x16xf32>
    %12 = loom.matmul %11, %10 {transpose_lhs} : (tensor<12x16xf32>, tensor<12x8xf32>) -> tensor<16x8xf32>
    %dx, %dgamma = loom.rmsnorm_grad %9, %4, %arg3 {epsilon = 9.9999999999999995E-7 : f64} : tensor<4x3x8xf32>, tensor<8xf32>
    %13 = loom.gelu_grad %dx, %3 : tensor<4x3x8xf32>
    %14 = loom.matmul %13, %arg2 {transpose_rhs} : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %15 = loom.reshape %2 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %16 = loom.reshape %13 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %17 = loom.matmul %15, %16 {transpose_lhs} : (tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<8x8xf32>
    %18 = loom.gelu_grad %14, %1 : tensor<4x3x8xf32>
    %19 = loom.matmul %18, %arg1 {transpose_rhs} : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %20 = loom.reshape %0 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %21 = loom.reshape %18 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %22 = loom.matmul %20, %21 {transpose_lhs} : (tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<8x8xf32>
    %23 = loom.embedding_grad %19, %arg4 : (tensor<4x3x8xf32>, tensor<4x3xi32>) -> tensor<16x8xf32>
    %24 = loom.add %12, %23 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    return %7, %24, %22, %17, %dgamma : tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  }
  func.func @train_step(%arg0: tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}, %arg2: tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, %arg3: tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}, %arg4: tensor<i64> {loom.name = "step", loom.role = "step"}, %arg5: tensor<4x3xi32> {loom.name = "tokens", loom.role = "data"}, %arg6: tensor<4x3xi32> {loom.name = "labels", loom.role = "data"}) -> (tensor<16x8xf32> {loom.name = "wte", loom.role = "param"}, tensor<8x8xf32> {loom.name = "h.0.w", loom.role = "param"}, tensor<8x8xf32> {loom.name = "h.1.w", loom.role = "param"}, tensor<8xf32> {loom.name = "ln_f.weight", loom.role = "param"}, tensor<f32> {loom.role = "loss"}) attributes {loom.optimizer = {kind = "sgd", lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64}} {
    %sharding = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated = shard.shard %arg0 to %sharding : tensor<16x8xf32>
    %sharding_0 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_1 = shard.shard %arg1 to %sharding_0 : tensor<8x8xf32>
    %sharding_2 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_3 = shard.shard %arg2 to %sharding_2 : tensor<8x8xf32>
    %sharding_4 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %sharding_annotated_5 = shard.shard %arg3 to %sharding_4 : tensor<8xf32>
    %sharding_6 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %sharding_annotated_7 = shard.shard %arg4 to %sharding_6 : tensor<i64>
    %sharding_8 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_9 = shard.shard %arg5 to %sharding_8 : tensor<4x3xi32>
    %sharding_10 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_11 = shard.shard %arg6 to %sharding_10 : tensor<4x3xi32>
    %cst = arith.constant dense<1.000000e+00> : tensor<f32>
    %sharding_12 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %sharding_annotated_13 = shard.shard %cst to %sharding_12 : tensor<f32>
    %0 = loom.embedding %sharding_annotated, %sharding_annotated_9 : (tensor<16x8xf32>, tensor<4x3xi32>) -> tensor<4x3x8xf32>
    %sharding_14 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_15 = shard.shard %0 to %sharding_14 : tensor<4x3x8xf32>
    %1 = loom.matmul %sharding_annotated_15, %sharding_annotated_1 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %sharding_16 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_17 = shard.shard %1 to %sharding_16 : tensor<4x3x8xf32>
    %2 = loom.gelu %sharding_annotated_17 : tensor<4x3x8xf32>
    %sharding_18 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_19 = shard.shard %2 to %sharding_18 : tensor<4x3x8xf32>
    %3 = loom.matmul %sharding_annotated_19, %sharding_annotated_3 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %sharding_20 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_21 = shard.shard %3 to %sharding_20 : tensor<4x3x8xf32>
    %4 = loom.gelu %sharding_annotated_21 : tensor<4x3x8xf32>
    %sharding_22 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_23 = shard.shard %4 to %sharding_22 : tensor<4x3x8xf32>
    %5 = loom.rmsnorm %sharding_annotated_23, %sharding_annotated_5 {epsilon = 9.9999999999999995E-7 : f64} : tensor<4x3x8xf32>, tensor<8xf32>
    %sharding_24 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_25 = shard.shard %5 to %sharding_24 : tensor<4x3x8xf32>
    %6 = loom.matmul %sharding_annotated_25, %sharding_annotated {transpose_rhs} : (tensor<4x3x8xf32>, tensor<16x8xf32>) -> tensor<4x3x16xf32>
    %sharding_26 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_27 = shard.shard %6 to %sharding_26 : tensor<4x3x16xf32>
    %7 = loom.cross_entropy %sharding_annotated_27, %sharding_annotated_11 : (tensor<4x3x16xf32>, tensor<4x3xi32>) -> tensor<f32>
    %sharding_28 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %sharding_annotated_29 = shard.shard %7 to %sharding_28 : tensor<f32>
    %8 = loom.cross_entropy_grad %sharding_annotated_13, %sharding_annotated_27, %sharding_annotated_11 : (tensor<f32>, tensor<4x3x16xf32>, tensor<4x3xi32>) -> tensor<4x3x16xf32>
    %sharding_30 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_31 = shard.shard %8 to %sharding_30 : tensor<4x3x16xf32>
    %9 = loom.matmul %sharding_annotated_31, %sharding_annotated : (tensor<4x3x16xf32>, tensor<16x8xf32>) -> tensor<4x3x8xf32>
    %sharding_32 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_33 = shard.shard %9 to %sharding_32 : tensor<4x3x8xf32>
    %10 = loom.reshape %sharding_annotated_25 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %sharding_34 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_35 = shard.shard %10 to %sharding_34 : tensor<12x8xf32>
    %11 = loom.reshape %sharding_annotated_31 : tensor<4x3x16xf32> -> tensor<12x16xf32>
    %sharding_36 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_37 = shard.shard %11 to %sharding_36 : tensor<12x16xf32>
    %12 = loom.matmul %sharding_annotated_37, %sharding_annotated_35 {transpose_lhs} : (tensor<12x16xf32>, tensor<12x8xf32>) -> tensor<16x8xf32>
    %sharding_38 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_39 = shard.shard %12 to %sharding_38 : tensor<16x8xf32>
    %dx, %dgamma = loom.rmsnorm_grad %sharding_annotated_33, %sharding_annotated_23, %sharding_annotated_5 {epsilon = 9.9999999999999995E-7 : f64} : tensor<4x3x8xf32>, tensor<8xf32>
    %sharding_40 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_41 = shard.shard %dx to %sharding_40 : tensor<4x3x8xf32>
    %sharding_42 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %sharding_annotated_43 = shard.shard %dgamma to %sharding_42 : tensor<8xf32>
    %13 = loom.gelu_grad %sharding_annotated_41, %sharding_annotated_21 : tensor<4x3x8xf32>
    %sharding_44 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_45 = shard.shard %13 to %sharding_44 : tensor<4x3x8xf32>
    %14 = loom.matmul %sharding_annotated_45, %sharding_annotated_3 {transpose_rhs} : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %sharding_46 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_47 = shard.shard %14 to %sharding_46 : tensor<4x3x8xf32>
    %15 = loom.reshape %sharding_annotated_19 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %sharding_48 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_49 = shard.shard %15 to %sharding_48 : tensor<12x8xf32>
    %16 = loom.reshape %sharding_annotated_45 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %sharding_50 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_51 = shard.shard %16 to %sharding_50 : tensor<12x8xf32>
    %17 = loom.matmul %sharding_annotated_49, %sharding_annotated_51 {transpose_lhs} : (tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<8x8xf32>
    %sharding_52 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_53 = shard.shard %17 to %sharding_52 : tensor<8x8xf32>
    %18 = loom.gelu_grad %sharding_annotated_47, %sharding_annotated_17 : tensor<4x3x8xf32>
    %sharding_54 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_55 = shard.shard %18 to %sharding_54 : tensor<4x3x8xf32>
    %19 = loom.matmul %sharding_annotated_55, %sharding_annotated_1 {transpose_rhs} : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
    %sharding_56 = shard.sharding @mesh split_axes = [[], [], []] : !shard.sharding
    %sharding_annotated_57 = shard.shard %19 to %sharding_56 : tensor<4x3x8xf32>
    %20 = loom.reshape %sharding_annotated_15 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %sharding_58 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_59 = shard.shard %20 to %sharding_58 : tensor<12x8xf32>
    %21 = loom.reshape %sharding_annotated_55 : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %sharding_60 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_61 = shard.shard %21 to %sharding_60 : tensor<12x8xf32>
    %22 = loom.matmul %sharding_annotated_59, %sharding_annotated_61 {transpose_lhs} : (tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<8x8xf32>
    %sharding_62 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_63 = shard.shard %22 to %sharding_62 : tensor<8x8xf32>
    %23 = loom.embedding_grad %sharding_annotated_57, %sharding_annotated_9 : (tensor<4x3x8xf32>, tensor<4x3xi32>) -> tensor<16x8xf32>
    %sharding_64 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_65 = shard.shard %23 to %sharding_64 : tensor<16x8xf32>
    %24 = loom.add %sharding_annotated_39, %sharding_annotated_65 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    %sharding_66 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_67 = shard.shard %24 to %sharding_66 : tensor<16x8xf32>
    %25 = loom.sgd_update %sharding_annotated, %sharding_annotated_67 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<16x8xf32>, tensor<16x8xf32>
    %sharding_68 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_69 = shard.shard %25 to %sharding_68 : tensor<16x8xf32>
    %26 = loom.sgd_update %sharding_annotated_1, %sharding_annotated_63 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %sharding_70 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_71 = shard.shard %26 to %sharding_70 : tensor<8x8xf32>
    %27 = loom.sgd_update %sharding_annotated_3, %sharding_annotated_53 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %sharding_72 = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
    %sharding_annotated_73 = shard.shard %27 to %sharding_72 : tensor<8x8xf32>
    %28 = loom.sgd_update %sharding_annotated_5, %sharding_annotated_43 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %sharding_74 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %sharding_annotated_75 = shard.shard %28 to %sharding_74 : tensor<8xf32>
    return %sharding_annotated_69, %sharding_annotated_71, %sharding_annotated_73, %sharding_annotated_75, %sharding_annotated_29 : tensor<16x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<f32>
  }
}

