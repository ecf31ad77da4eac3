module {
  func.func @forward(%arg0: tensor<16x8xf32> {loom.name = "transformer.wte.weight"}, %arg1: tensor<8x8xf32> {loom.name = "transformer.wpe.weight"}, %arg2: tensor<8xf32> {loom.name = "transformer.h.0.ln_1.weight"}, %arg3: tensor<8xf32> {loom.name = "transformer.h.0.ln_1.bias"}, %arg4: tensor<8x24xf32> {loom.name = "transformer.h.0.attn.c_attn.weight"}, %arg5: tensor<24xf32> {loom.name = "transformer.h.0.attn.c_attn.bias"}, %arg6: tensor<8x8xf32> {loom.name = "transformer.h.0.attn.c_proj.weight"}, %arg7: tensor<8xf32> {loom.name = "transformer.h.0.attn.c_proj.bias"}, %arg8: tensor<8xf32> {loom.name = "transformer.h.0.ln_2.weight"}, %arg9: tensor<8xf32> {loom.name = "transformer.h.0.ln_2.bias"}, %arg10: tensor<8x32xf32> {loom.name = "transformer.h.0.mlp.c_fc.weight"}, %arg11: tensor<32xf32> {loom.name = "transformer.h.0.mlp.c_fc.bias"}, %arg12: tensor<32x8xf32> {loom.name = "transformer.h.0.mlp.c_proj.weight"}, %arg13: tensor<8xf32> {loom.name = "transformer.h.0.mlp.c_proj.bias"}, %arg14: tensor<8xf32> {loom.name = "transformer.h.1.ln_1.weight"}, %arg15: tensor<8xf32> {loom.name = "transformer.h.1.ln_1.bias"}, %arg16: tensor<8x24xf32> {loom.name = "transformer.h.1.attn.c_attn.weight"}, %arg17: tensor<24xf32> {loom.name = "transformer.h.1.attn.c_attn.bias"}, %arg18: tensor<8x8xf32> {loom.name = "transformer.h.1.attn.c_proj.weight"}, %arg19: tensor<8xf32> {loom.name = "transformer.h.1.attn.c_proj.bias"}, %arg20: tensor<8xf32> {loom.name = "transformer.h.1.ln_2.weight"}, %arg21: tensor<8xf32> {loom.name = "transformer.h.1.ln_2.bias"}, %arg22: tensor<8x32xf32> {loom.name = "transformer.h.1.mlp.c_fc.weight"}, %arg23: tensor<32xf32> {loom.name = "transformer.h.1.mlp.c_fc.bias"}, %arg24: tensor<32x8xf32> {loom.name = "transformer.h.1.mlp.c_proj.weight"}, %arg25: tensor<8xf32> {loom.name = "transformer.h.1.mlp.c_proj.bias"}, %arg26: tensor<8xf32> {loom.name = "transformer.ln_f.weight"}, %arg27: tensor<8xf32> {loom.name = "transformer.ln_f.bias"}, %arg28: tensor<2x4xi32> {loom.name = "tokens"}, %arg29: tensor<2x4xi32> {loom.name = "labels"}) -> tensor<f32> {
    %0 = loom.embedding %arg0, %arg28 : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %1 = loom.slice %arg1 [0, 0] : tensor<8x8xf32> -> tensor<4x8xf32>
    %2 = loom.add %0, %1 : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %3 = loom.layernorm %2, %arg2, %arg3 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %4 = loom.matmul %3, %arg4 : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
    %5 = loom.add %4, %arg5 : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
    %6 = loom.slice %5 [0, 0, 0] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %7 = loom.reshape %6 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %8 = loom.slice %5 [0, 0, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %9 = loom.reshape %8 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %10 = loom.slice %5 [0, 0, 16] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %11 = loom.reshape %10 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %out, %lse = loom.attention %7, %9, %11 {causal, scale = 5.000000e-01 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
    %12 = loom.reshape %out : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %13 = loom.matmul %12, %arg6 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %14 = loom.add %13, %arg7 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %15 = loom.add %2, %14 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %16 = loom.layernorm %15, %arg8, %arg9 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %17 = loom.matmul %16, %arg10 : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %18 = loom.add %17, %arg11 : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32>
    %19 = loom.gelu %18 : tensor<2x4x32xf32>
    %20 = loom.matmul %19, %arg12 : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
    %21 = loom.add %20, %arg13 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %22 = loom.add %15, %21 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %23 = loom.layernorm %22, %arg14, %arg15 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %24 = loom.matmul %23, %arg16 : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
    %25 = loom.add %24, %arg17 : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
    %26 = loom.slice %25 [0, 0, 0] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %27 = loom.reshape %26 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %28 = loom.slice %25 [0, 0, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %29 = loom.reshape %28 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %30 = loom.slice %25 [0, 0, 16] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %31 = loom.reshape %30 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %out_0, %lse_1 = loom.attention %27, %29, %31 {causal, scale = 5.000000e-01 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
    %32 = loom.reshape %out_0 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %33 = loom.matmul %32, %arg18 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %34 = loom.add %33, %arg19 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %35 = loom.add %22, %34 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %36 = loom.layernorm %35, %arg20, %arg21 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %37 = loom.matmul %36, %arg22 : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %38 = loom.add %37, %arg23 : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32>
    %39 = loom.gelu %38 : tensor<2x4x32xf32>
    %40 = loom.matmul %39, %arg24 : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
    %41 = loom.add %40, %arg25 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %42 = loom.add %35, %41 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %43 = loom.layernorm %42, %arg26, %arg27 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %44 = loom.matmul %43, %arg0 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %45 = loom.cross_entropy %44, %arg29 : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %45 : tensor<f32>
  }
  func.func @forward_backward(%arg0: tensor<16x8xf32> {loom.name = "transformer.wte.weight"}, %arg1: tensor<8x8xf32> {loom.name = "transformer.wpe.weight"}, %arg2: tensor<8xf32> {loom.name = "transformer.h.0.ln_1.weight"}, %arg3: tensor<8xf32> {loom.name = "transformer.h.0.ln_1.bias"}, %arg4: tensor<8x24xf32> {loom.name = "transformer.h.0.attn.c_attn.weight"}, %arg5: tensor<24xf32> {loom.name = "transformer.h.0.attn.c_attn.bias"}, %arg6: tensor<8x8xf32> {loom.name = "transformer.h.0.attn.c_proj.weight"}, %arg7: tensor<8xf32> {loom.name = "transformer.h.0.attn.c_proj.bias"}, %arg8: tensor<8xf32> {loom.name = "transformer.h.0.ln_2.weight"}, %arg9: tensor<8xf32> {loom.name = "transformer.h.0.ln_2.bias"}, %arg10: tensor<8x32xf32> {loom.name = "transformer.h.0.mlp.c_fc.weight"}, %arg11: tensor<32xf32> {loom.name = "transformer.h.0.mlp.c_fc.bias"}, %arg12: tensor<32x8xf32> {loom.name = "transformer.h.0.mlp.c_proj.weight"}, %arg13: tensor<8xf32> {loom.name = "transformer.h.0.mlp.c_proj.bias"}, %arg14: tensor<8xf32> {loom.name = "transformer.h.1.ln_1.weight"}, %arg15: tensor<8xf32> {loom.name = "transformer.h.1.ln_1.bias"}, %arg16: tensor<8x24xf32> {loom.name = "transformer.h.1.attn.c_attn.weight"}, %arg17: tensor<24xf32> {loom.name = "transformer.h.1.attn.c_attn.bias"}, %arg18: tensor<8x8xf32> {loom.name = "transformer.h.1.attn.c_proj.weight"}, %arg19: tensor<8xf32> {loom.name = "transformer.h.1.attn.c_proj.bias"}, %arg20: tensor<8xf32> {loom.name = "transformer.h.1.ln_2.weight"}, %arg21: tensor<8xf32> {loom.name = "transformer.h.1.ln_2.bias"}, %arg22: tensor<8x32xf32> {loom.name = "transformer.h.1.mlp.c_fc.weight"}, %arg23: tensor<32xf32> {loom.name = "transformer.h.1.mlp.c_fc.bias"}, %arg24: tensor<32x8xf32> {loom.name = "transformer.h.1.mlp.c_proj.weight"}, %arg25: tensor<8xf32> {loom.name = "transformer.h.1.mlp.c_proj.bias"}, %arg26: tensor<8xf32> {loom.name = "transformer.ln_f.weight"}, %arg27: tensor<8xf32> {loom.name = "transformer.ln_f.bias"}, %arg28: tensor<2x4xi32> {loom.name = "tokens"}, %arg29: tensor<2x4xi32> {loom.name = "labels"}) -> (tensor<f32>, tensor<16x8xf32> {loom.grad_of = "transformer.wte.weight"}, tensor<8x8xf32> {loom.grad_of = "transformer.wpe.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.0.ln_1.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.0.ln_1.bias"}, tensor<8x24xf32> {loom.grad_of = "transformer.h.0.attn.c_attn.weight"}, tensor<24xf32> {loom.grad_of = "transformer.h.0.attn.c_attn.bias"}, tensor<8x8xf32> {loom.grad_of = "transformer.h.0.attn.c_proj.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.0.attn.c_proj.bias"}, tensor<8xf32> {loom.grad_of = "transformer.h.0.ln_2.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.0.ln_2.bias"}, tensor<8x32xf32> {loom.grad_of = "transformer.h.0.mlp.c_fc.weight"}, tensor<32xf32> {loom.grad_of = "transformer.h.0.mlp.c_fc.bias"}, tensor<32x8xf32> {loom.grad_of = "transformer.h.0.mlp.c_proj.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.0.mlp.c_proj.bias"}, tensor<8xf32> {loom.grad_of = "transformer.h.1.ln_1.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.1.ln_1.bias"}, tensor<8x24xf32> {loom.grad_of = "transformer.h.1.attn.c_attn.weight"}, tensor<24xf32> {loom.grad_of = "transformer.h.1.attn.c_attn.bias"}, tensor<8x8xf32> {loom.grad_of = "transformer.h.1.attn.c_proj.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.1.attn.c_proj.bias"}, tensor<8xf32> {loom.grad_of = "transformer.h.1.ln_2.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.1.ln_2.bias"}, tensor<8x32xf32> {loom.grad_of = "transformer.h.1.mlp.c_fc.weight"}, tensor<32xf32> {loom.grad_of = "transformer.h.1.mlp.c_fc.bias"}, tensor<32x8xf32> {loom.grad_of = "transformer.h.1.mlp.c_proj.weight"}, tensor<8xf32> {loom.grad_of = "transformer.h.1.mlp.c_proj.bias"}, tensor<8xf32> {loom.grad_of = "transformer.ln_f.weight"}, tensor<8xf32> {loom.grad_of = "transformer.ln_f.bias"}) {
    %0 = loom.embedding %arg0, %arg28 : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %1 = loom.slice %arg1 [0, 0] : tensor<8x8xf32> -> tensor<4x8xf32>
    %2 = loom.add %0, %1 : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %3 = loom.layernorm %2, %arg2, %arg3 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %4 = loom.matmul %3, %arg4 : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
    %5 = loom.add %4, %arg5 : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
    %6 = loom.slice %5 [0, 0, 0] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %7 = loom.reshape %6 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %8 = loom.slice %5 [0, 0, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %9 = loom.reshape %8 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %10 = loom.slice %5 [0, 0, 16] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %11 = loom.reshape %10 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %out, %lse = loom.attention %7, %9, %11 {causal, scale = 5.000000e-01 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
    %12 = loom.reshape %out : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %13 = loom.matmul %12, %arg6 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %14 = loom.add %13, %arg7 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %15 = loom.add %2, %14 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %16 = loom.layernorm %15, %arg8, %arg9 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %17 = loom.matmul %16, %arg10 : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %18 = loom.add %17, %arg11 : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32>
    %19 = loom.gelu %18 : tensor<2x4x32xf32>
    %20 = loom.matmul %19, %arg12 : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
    %21 = loom.add %20, %arg13 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %22 = loom.add %15, %21 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %23 = loom.layernorm %22, %arg14, %arg15 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %24 = loom.matmul %23, %arg16 : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
    %25 = loom.add %24, %arg17 : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
    %26 = loom.slice %25 [0, 0, 0] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %27 = loom.reshape %26 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %28 = loom.slice %25 [0, 0, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %29 = loom.reshape %28 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %30 = loom.slice %25 [0, 0, 16] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %31 = loom.reshape %30 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %out_0, %lse_1 = loom.attention %27, %29, %31 {causal, scale = 5.000000e-01 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
    %32 = loom.reshape %out_0 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %33 = loom.matmul %32, %arg18 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %34 = loom.add %33, %arg19 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %35 = loom.add %22, %34 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %36 = loom.layernorm %35, %arg20, %arg21 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %37 = loom.matmul %36, %arg22 : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %38 = loom.add %37, %arg23 : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32>
    %39 = loom.gelu %38 : tensor<2x4x32xf32>
    %40 = loom.matmul %39, %arg24 : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
    %41 = loom.add %40, %arg25 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %42 = loom.add %35, %41 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %43 = loom.layernorm %42, %arg26, %arg27 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %44 = loom.matmul %43, %arg0 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %45 = loom.cross_entropy %44, %arg29 : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
    %cst = arith.constant dense<1.000000e+00> : tensor<f32>
    %46 = loom.cross_entropy_grad %cst, %44, %arg29 : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
    %47 = loom.matmul %46, %arg0 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %48 = loom.reshape %43 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %49 = loom.reshape %46 : tensor<2x4x16xf32> -> tensor<8x16xf32>
    %50 = loom.matmul %49, %48 {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
    %dx, %dgamma, %dbeta = loom.layernorm_grad %47, %42, %arg26 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %51 = loom.reduce_sum %dx [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
    %52 = loom.matmul %dx, %arg24 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
    %53 = loom.reshape %39 : tensor<2x4x32xf32> -> tensor<8x32xf32>
    %54 = loom.reshape %dx : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %55 = loom.matmul %53, %54 {transpose_lhs} : (tensor<8x32xf32>, tensor<8x8xf32>) -> tensor<32x8xf32>
    %56 = loom.gelu_grad %52, %38 : tensor<2x4x32xf32>
    %57 = loom.reduce_sum %56 [0, 1] : tensor<2x4x32xf32> -> tensor<32xf32>
    %58 = loom.matmul %56, %arg22 {transpose_rhs} : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
    %59 = loom.reshape %36 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %60 = loom.reshape %56 : tensor<2x4x32xf32> -> tensor<8x32xf32>
    %61 = loom.matmul %59, %60 {transpose_lhs} : (tensor<8x8xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %dx_2, %dgamma_3, %dbeta_4 = loom.layernorm_grad %58, %35, %arg20 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %62 = loom.add %dx, %dx_2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %63 = loom.reduce_sum %62 [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
    %64 = loom.matmul %62, %arg18 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %65 = loom.reshape %32 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %66 = loom.reshape %62 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %67 = loom.matmul %65, %66 {transpose_lhs} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %68 = loom.reshape %64 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %dq, %dk, %dv = loom.attention_grad %68, %27, %29, %31, %out_0, %lse_1 {causal, scale = 5.000000e-01 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>)
    %69 = loom.reshape %dv : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %70 = loom.reshape %dk : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %71 = loom.reshape %dq : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %72 = loom.concat %71, %70, %69 {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
    %73 = loom.reduce_sum %72 [0, 1] : tensor<2x4x24xf32> -> tensor<24xf32>
    %74 = loom.matmul %72, %arg16 {transpose_rhs} : (tensor<2x4x24xf32>, tensor<8x24xf32>) -> tensor<2x4x8xf32>
    %75 = loom.reshape %23 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %76 = loom.reshape %72 : tensor<2x4x24xf32> -> tensor<8x24xf32>
    %77 = loom.matmul %75, %76 {transpose_lhs} : (tensor<8x8xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
    %dx_5, %dgamma_6, %dbeta_7 = loom.layernorm_grad %74, %22, %arg14 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %78 = loom.add %62, %dx_5 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %79 = loom.reduce_sum %78 [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
    %80 = loom.matmul %78, %arg12 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
    %81 = loom.reshape %19 : tensor<2x4x32xf32> -> tensor<8x32xf32>
    %82 = loom.reshape %78 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %83 = loom.matmul %81, %82 {transpose_lhs} : (tensor<8x32xf32>, tensor<8x8xf32>) -> tensor<32x8xf32>
    %84 = loom.gelu_grad %80, %18 : tensor<2x4x32xf32>
    %85 = loom.reduce_sum %84 [0, 1] : tensor<2x4x32xf32> -> tensor<32xf32>
    %86 = loom.matmul %84, %arg10 {transpose_rhs} : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
    %87 = loom.reshape %16 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %88 = loom.reshape %84 : tensor<2x4x32xf32> -> tensor<8x32xf32>
    %89 = loom.matmul %87, %88 {transpose_lhs} : (tensor<8x8xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %dx_8, %dgamma_9, %dbeta_10 = loom.layernorm_grad %86, %15, %arg8 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %90 = loom.add %78, %dx_8 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %91 = loom.reduce_sum %90 [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
    %92 = loom.matmul %90, %arg6 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %93 = loom.reshape %12 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %94 = loom.reshape %90 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %95 = loom.matmul %93, %94 {transpose_lhs} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %96 = loom.reshape %92 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %dq_11, %dk_12, %dv_13 = loom.attention_grad %96, %7, %9, %11, %out, %lse {causal, scale = 5.000000e-01 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>)
    %97 = loom.reshape %dv_13 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %98 = loom.reshape %dk_12 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %99 = loom.reshape %dq_11 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %100 = loom.concat %99, %98, %97 {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
    %101 = loom.reduce_sum %100 [0, 1] : tensor<2x4x24xf32> -> tensor<24xf32>
    %102 = loom.matmul %100, %arg4 {transpose_rhs} : (tensor<2x4x24xf32>, tensor<8x24xf32>) -> tensor<2x4x8xf32>
    %103 = loom.reshape %3 : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %104 = loom.reshape %100 : tensor<2x4x24xf32> -> tensor<8x24xf32>
    %105 = loom.matmul %103, %104 {transpose_lhs} : (tensor<8x8xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
    %dx_14, %dgamma_15, %dbeta_16 = loom.layernorm_grad %102, %2, %arg2 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %106 = loom.add %90, %dx_14 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %107 = loom.reduce_sum %106 [0] : tensor<2x4x8xf32> -> tensor<4x8xf32>
    %108 = loom.pad %107 low [0, 0] : tensor<4x8xf32> -> tensor<8x8xf32>
    %109 = loom.embedding_grad %106, %arg28 : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
    %110 = loom.add %50, %109 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    return %45, %110, %108, %dgamma_15, %dbeta_16, %105, %101, %95, %91, %dgamma_9, %dbeta_10, %89, %85, %83, %79, %dgamma_6, %dbeta_7, %77, %73, %67, %63, %dgamma_3, %dbeta_4, %61, %57, %55, %51, %dgamma, %dbeta : tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  func.func @train_step(%arg0: tensor<16x8xf32> {loom.name = "transformer.wte.weight", loom.role = "param"}, %arg1: tensor<8x8xf32> {loom.name = "transformer.wpe.weight", loom.role = "param"}, %arg2: tensor<8xf32> {loom.name = "transformer.h.0.ln_1.weight", loom.role = "param"}, %arg3: tensor<8xf32> {loom.name = "transformer.h.0.ln_1.bias", loom.role = "param"}, %arg4: tensor<8x24xf32> {loom.name = "transformer.h.0.attn.c_attn.weight", loom.role = "param"}, %arg5: tensor<24xf32> {loom.name = "transformer.h.0.attn.c_attn.bias", loom.role = "param"}, %arg6: tensor<8x8xf32> {loom.name = "transformer.h.0.attn.c_proj.weight", loom.role = "param"}, %arg7: tensor<8xf32> {loom.name = "transformer.h.0.attn.c_proj.bias", loom.role = "param"}, %arg8: tensor<8xf32> {loom.name = "transformer.h.0.ln_2.weight", loom.role = "param"}, %arg9: tensor<8xf32> {loom.name = "transformer.h.0.ln_2.bias", loom.role = "param"}, %arg10: tensor<8x32xf32> {loom.name = "transformer.h.0.mlp.c_fc.weight", loom.role = "param"}, %arg11: tensor<32xf32> {loom.name = "transformer.h.0.mlp.c_fc.bias", loom.role = "param"}, %arg12: tensor<32x8xf32> {loom.name = "transformer.h.0.mlp.c_proj.weight", loom.role = "param"}, %arg13: tensor<8xf32> {loom.name = "transformer.h.0.mlp.c_proj.bias", loom.role = "param"}, %arg14: tensor<8xf32> {loom.name = "transformer.h.1.ln_1.weight", loom.role = "param"}, %arg15: tensor<8xf32> {loom.name = "transformer.h.1.ln_1.bias", loom.role = "param"}, %arg16: tensor<8x24xf32> {loom.name = "transformer.h.1.attn.c_attn.weight", loom.role = "param"}, %arg17: tensor<24xf32> {loom.name = "transformer.h.1.attn.c_attn.bias", loom.role = "param"}, %arg18: tensor<8x8xf32> {loom.name = "transformer.h.1.attn.c_proj.weight", loom.role = "param"}, %arg19: tensor<8xf32> {loom.name = "transformer.h.1.attn.c_proj.bias", loom.role = "param"}, %arg20: tensor<8xf32> {loom.name = "transformer.h.1.ln_2.weight", loom.role = "param"}, %arg21: tensor<8xf32> {loom.name = "transformer.h.1.ln_2.bias", loom.role = "param"}, %arg22: tensor<8x32xf32> {loom.name = "transformer.h.1.mlp.c_fc.weight", loom.role = "param"}, %arg23: tensor<32xf32> {loom.name = "transformer.h.1.mlp.c_fc.bias", loom.role = "param"}, %arg24: tensor<32x8xf32> {loom.name = "transformer.h.1.mlp.c_proj.weight", loom.role = "param"}, %arg25: tensor<8xf32> {loom.name = "transformer.h.1.mlp.c_proj.bias", loom.role = "param"}, %arg26: tensor<8xf32> {loom.name = "transformer.ln_f.weight", loom.role = "param"}, %arg27: tensor<8xf32> {loom.name = "transformer.ln_f.bias", loom.role = "param"}, %arg28: tensor<i64> {loom.name = "step", loom.role = "step"}, %arg29: tensor<2x4xi32> {loom.name = "tokens", loom.role = "data"}, %arg30: tensor<2x4xi32> {loom.name = "labels", loom.role = "data"}) -> (tensor<16x8xf32> {loom.name = "transformer.wte.weight", loom.role = "param"}, tensor<8x8xf32> {loom.name = "transformer.wpe.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.0.ln_1.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.0.ln_1.bias", loom.role = "param"}, tensor<8x24xf32> {loom.name = "transformer.h.0.attn.c_attn.weight", loom.role = "param"}, tensor<24xf32> {loom.name = "transformer.h.0.attn.c_attn.bias", loom.role = "param"}, tensor<8x8xf32> {loom.name = "transformer.h.0.attn.c_proj.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.0.attn.c_proj.bias", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.0.ln_2.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.0.ln_2.bias", loom.role = "param"}, tensor<8x32xf32> {loom.name = "transformer.h.0.mlp.c_fc.weight", loom.role = "param"}, tensor<32xf32> {loom.name = "transformer.h.0.mlp.c_fc.bias", loom.role = "param"}, tensor<32x8xf32> {loom.name = "transformer.h.0.mlp.c_proj.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.0.mlp.c_proj.bias", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.1.ln_1.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.1.ln_1.bias", loom.role = "param"}, tensor<8x24xf32> {loom.name = "transformer.h.1.attn.c_attn.weight", loom.role = "param"}, tensor<24xf32> {loom.name = "transformer.h.1.attn.c_attn.bias", loom.role = "param"}, tensor<8x8xf32> {loom.name = "transformer.h.1.attn.c_proj.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.1.attn.c_proj.bias", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.1.ln_2.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.1.ln_2.bias", loom.role = "param"}, tensor<8x32xf32> {loom.name = "transformer.h.1.mlp.c_fc.weight", loom.role = "param"}, tensor<32xf32> {loom.name = "transformer.h.1.mlp.c_fc.bias", loom.role = "param"}, tensor<32x8xf32> {loom.name = "transformer.h.1.mlp.c_proj.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.h.1.mlp.c_proj.bias", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.ln_f.weight", loom.role = "param"}, tensor<8xf32> {loom.name = "transformer.ln_f.bias", loom.role = "param"}, tensor<f32> {loom.role = "loss"}) attributes {loom.optimizer = {kind = "sgd", lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64}} {
    %0:29 = call @forward_backward(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %arg14, %arg15, %arg16, %arg17, %arg18, %arg19, %arg20, %arg21, %arg22, %arg23, %arg24, %arg25, %arg26, %arg27, %arg29, %arg30) : (tensor<16x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4xi32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
    %1 = loom.sgd_update %arg0, %0#1 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<16x8xf32>, tensor<16x8xf32>
    %2 = loom.sgd_update %arg1, %0#2 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %3 = loom.sgd_update %arg2, %0#3 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %4 = loom.sgd_update %arg3, %0#4 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %5 = loom.sgd_update %arg4, %0#5 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x24xf32>, tensor<8x24xf32>
    %6 = loom.sgd_update %arg5, %0#6 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<24xf32>, tensor<24xf32>
    %7 = loom.sgd_update %arg6, %0#7 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %8 = loom.sgd_update %arg7, %0#8 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %9 = loom.sgd_update %arg8, %0#9 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %10 = loom.sgd_update %arg9, %0#10 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %11 = loom.sgd_update %arg10, %0#11 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x32xf32>, tensor<8x32xf32>
    %12 = loom.sgd_update %arg11, %0#12 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<32xf32>, tensor<32xf32>
    %13 = loom.sgd_update %arg12, %0#13 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<32x8xf32>, tensor<32x8xf32>
    %14 = loom.sgd_update %arg13, %0#14 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %15 = loom.sgd_update %arg14, %0#15 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %16 = loom.sgd_update %arg15, %0#16 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %17 = loom.sgd_update %arg16, %0#17 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x24xf32>, tensor<8x24xf32>
    %18 = loom.sgd_update %arg17, %0#18 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<24xf32>, tensor<24xf32>
    %19 = loom.sgd_update %arg18, %0#19 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    %20 = loom.sgd_update %arg19, %0#20 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %21 = loom.sgd_update %arg20, %0#21 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %22 = loom.sgd_update %arg21, %0#22 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %23 = loom.sgd_update %arg22, %0#23 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x32xf32>, tensor<8x32xf32>
    %24 = loom.sgd_update %arg23, %0#24 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<32xf32>, tensor<32xf32>
    %25 = loom.sgd_update %arg24, %0#25 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<32x8xf32>, tensor<32x8xf32>
    %26 = loom.sgd_update %arg25, %0#26 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %27 = loom.sgd_update %arg26, %0#27 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    %28 = loom.sgd_update %arg27, %0#28 {lr = 3.000000e-04 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8xf32>, tensor<8xf32>
    return %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %0#0 : tensor<16x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>
  }
}

