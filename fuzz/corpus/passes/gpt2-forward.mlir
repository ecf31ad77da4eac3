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
}
