// Six parameters pinned by rows over a mesh axis of 3 devices, none of
// whose 8 rows divide over it: six pins the plan cannot keep.
func.func @step(%w0: tensor<8x4xf32> {loom.name = "h.0.w", loom.split_axes = [[0]]},
                %w1: tensor<8x4xf32> {loom.name = "h.1.w", loom.split_axes = [[0]]},
                %w2: tensor<8x4xf32> {loom.name = "h.2.w", loom.split_axes = [[0]]},
                %w3: tensor<8x4xf32> {loom.name = "h.3.w", loom.split_axes = [[0]]},
                %w4: tensor<8x4xf32> {loom.name = "h.4.w", loom.split_axes = [[0]]},
                %w5: tensor<8x4xf32> {loom.name = "h.5.w", loom.split_axes = [[0]]})
    -> tensor<8x4xf32> {
  %0 = loom.add %w0, %w1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = loom.add %0, %w2 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = loom.add %1, %w3 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %3 = loom.add %2, %w4 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %4 = loom.add %3, %w5 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %4 : tensor<8x4xf32>
}
