// An MLP: x [64, 1024] through 1024 -> 4096 -> 1024 (the auto-shard tests).
func.func @mlp(%x: tensor<64x1024xf32>, %w1: tensor<1024x4096xf32>,
               %w2: tensor<4096x1024xf32>) -> tensor<64x1024xf32> {
  %h = loom.matmul %x, %w1 : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32>
  %g = loom.gelu %h : tensor<64x4096xf32>
  %y = loom.matmul %g, %w2 : (tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
}
