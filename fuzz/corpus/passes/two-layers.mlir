// A two-layer model with a tied embedding (the output projection reuses
// `wte`), small enough to read the pipelined IR whole.
func.func @forward(%wte: tensor<16x8xf32> {loom.name = "wte"},
                   %w0: tensor<8x8xf32> {loom.name = "h.0.w"},
                   %w1: tensor<8x8xf32> {loom.name = "h.1.w"},
                   %g: tensor<8xf32> {loom.name = "ln_f.weight"},
                   %tokens: tensor<4x3xi32> {loom.name = "tokens"},
                   %labels: tensor<4x3xi32> {loom.name = "labels"}) -> tensor<f32> {
  %x = loom.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<4x3xi32>) -> tensor<4x3x8xf32>
  %h0 = loom.matmul %x, %w0 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
  %a0 = loom.gelu %h0 : tensor<4x3x8xf32>
  %h1 = loom.matmul %a0, %w1 : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
  %a1 = loom.gelu %h1 : tensor<4x3x8xf32>
  %n = loom.rmsnorm %a1, %g {epsilon = 1.0e-06 : f64} : tensor<4x3x8xf32>, tensor<8xf32>
  %logits = loom.matmul %n, %wte {transpose_rhs} : (tensor<4x3x8xf32>, tensor<16x8xf32>) -> tensor<4x3x16xf32>
  %loss = loom.cross_entropy %logits, %labels : (tensor<4x3x16xf32>, tensor<4x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
