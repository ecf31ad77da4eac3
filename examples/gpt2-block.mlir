// One GPT-2 transformer block, forward, at toy size: batch 2, sequence 16,
// hidden 64, 4 heads of 16, MLP 256. Parameter names and layouts are
// Hugging Face's (GPT-2 stores linear weights as [in, out]).
//
//   loom-opt examples/gpt2-block.mlir --loom-print-sharding-rules
//
// prints, at every op, the factors the sharding planner may split.
func.func @gpt2_block(
    %x: tensor<2x16x64xf32>,
    %ln_1_w: tensor<64xf32> {loom.name = "transformer.h.0.ln_1.weight"},
    %ln_1_b: tensor<64xf32> {loom.name = "transformer.h.0.ln_1.bias"},
    %attn_w: tensor<64x192xf32> {loom.name = "transformer.h.0.attn.c_attn.weight"},
    %attn_b: tensor<192xf32> {loom.name = "transformer.h.0.attn.c_attn.bias"},
    %proj_w: tensor<64x64xf32> {loom.name = "transformer.h.0.attn.c_proj.weight"},
    %proj_b: tensor<64xf32> {loom.name = "transformer.h.0.attn.c_proj.bias"},
    %ln_2_w: tensor<64xf32> {loom.name = "transformer.h.0.ln_2.weight"},
    %ln_2_b: tensor<64xf32> {loom.name = "transformer.h.0.ln_2.bias"},
    %fc_w: tensor<64x256xf32> {loom.name = "transformer.h.0.mlp.c_fc.weight"},
    %fc_b: tensor<256xf32> {loom.name = "transformer.h.0.mlp.c_fc.bias"},
    %mlp_w: tensor<256x64xf32> {loom.name = "transformer.h.0.mlp.c_proj.weight"},
    %mlp_b: tensor<64xf32> {loom.name = "transformer.h.0.mlp.c_proj.bias"})
    -> tensor<2x16x64xf32> {
  // Attention: fused q/k/v projection, split, heads, causal attention.
  %h = loom.layernorm %x, %ln_1_w, %ln_1_b {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  %qkv0 = loom.matmul %h, %attn_w : (tensor<2x16x64xf32>, tensor<64x192xf32>) -> tensor<2x16x192xf32>
  %qkv = loom.add %qkv0, %attn_b : (tensor<2x16x192xf32>, tensor<192xf32>) -> tensor<2x16x192xf32>
  %q0 = loom.slice %qkv [0, 0, 0] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  %k0 = loom.slice %qkv [0, 0, 64] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  %v0 = loom.slice %qkv [0, 0, 128] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
  %q = loom.reshape %q0 : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %k = loom.reshape %k0 : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %v = loom.reshape %v0 : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %o, %lse = loom.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>) -> (tensor<2x16x4x16xf32>, tensor<2x4x16xf32>)
  %o2 = loom.reshape %o : tensor<2x16x4x16xf32> -> tensor<2x16x64xf32>
  %p0 = loom.matmul %o2, %proj_w : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
  %p = loom.add %p0, %proj_b : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %x1 = loom.add %x, %p : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  // MLP: c_fc, GELU (tanh), c_proj.
  %h2 = loom.layernorm %x1, %ln_2_w, %ln_2_b {epsilon = 1.0e-05 : f64} : tensor<2x16x64xf32>, tensor<64xf32>
  %f0 = loom.matmul %h2, %fc_w : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %f = loom.add %f0, %fc_b : (tensor<2x16x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
  %g = loom.gelu %f : tensor<2x16x256xf32>
  %m0 = loom.matmul %g, %mlp_w : (tensor<2x16x256xf32>, tensor<256x64xf32>) -> tensor<2x16x64xf32>
  %m = loom.add %m0, %mlp_b : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %y = loom.add %x1, %m : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}
