// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-autodiff --loom-optimizer="kind=sgd lr=0.1" --loom-pipeline="stages=2 micro-batches=2"

// A batch of 3 sequences does not divide into 2 micro-batches.
// expected-error @+1 {{--loom-pipeline: the batch of 3 sequences (argument 2) does not divide into 2 micro-batches}}
func.func @forward(%w0: tensor<8x8xf32> {loom.name = "h.0.w"},
                   %w1: tensor<8x8xf32> {loom.name = "h.1.w"},
                   %x: tensor<3x8xi32> {loom.name = "tokens"}) -> tensor<f32> {
  %0 = loom.embedding %w0, %x : (tensor<8x8xf32>, tensor<3x8xi32>) -> tensor<3x8x8xf32>
  %1 = loom.matmul %0, %w1 : (tensor<3x8x8xf32>, tensor<8x8xf32>) -> tensor<3x8x8xf32>
  %2 = loom.cross_entropy %1, %x : (tensor<3x8x8xf32>, tensor<3x8xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Dropout on a tensor whose first dimension is not the batch.
func.func @forward(%w0: tensor<8x8xf32> {loom.name = "h.0.w"},
                   %w1: tensor<8x8xf32> {loom.name = "h.1.w"},
                   %x: tensor<4x8xi32> {loom.name = "tokens"},
                   %step: tensor<i64> {loom.name = "step"}) -> tensor<f32> {
  %0 = loom.embedding %w0, %x : (tensor<8x8xf32>, tensor<4x8xi32>) -> tensor<4x8x8xf32>
  %1 = loom.transpose %0 [1, 0, 2] : tensor<4x8x8xf32> -> tensor<8x4x8xf32>
  // expected-error @+1 {{--loom-pipeline: dropout on a tensor whose first dimension is not the batch cannot be cut into micro-batches}}
  %2 = loom.dropout %1, %step {key = 3 : i64, rate = 0.1 : f64, seed = 1234 : i64} : tensor<8x4x8xf32>, tensor<i64>
  %3 = loom.transpose %2 [1, 0, 2] : tensor<8x4x8xf32> -> tensor<4x8x8xf32>
  %4 = loom.matmul %3, %w1 : (tensor<4x8x8xf32>, tensor<8x8xf32>) -> tensor<4x8x8xf32>
  %5 = loom.cross_entropy %4, %x : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %5 : tensor<f32>
}

// -----

// A mean over the batch does not add up over micro-batches.
func.func @forward(%w0: tensor<8x8xf32> {loom.name = "h.0.w"},
                   %w1: tensor<8x8xf32> {loom.name = "h.1.w"},
                   %x: tensor<4x8xi32> {loom.name = "tokens"}) -> tensor<f32> {
  %0 = loom.embedding %w0, %x : (tensor<8x8xf32>, tensor<4x8xi32>) -> tensor<4x8x8xf32>
  %1 = loom.matmul %0, %w1 : (tensor<4x8x8xf32>, tensor<8x8xf32>) -> tensor<4x8x8xf32>
  // expected-error @+1 {{--loom-pipeline: the op reduces over the batch with something other than a sum, which micro-batches cannot add up}}
  %2 = loom.reduce_mean %1 [0, 1, 2] : tensor<4x8x8xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Without layer names there is no chain of layers to cut.
// expected-error @+1 {{--loom-pipeline: no argument is marked with a transformer layer (`loom.layer`) or names one (`h.<i>.`, `layers.<i>.`, `blocks.<i>.`), so there is nothing to cut into stages}}
func.func @forward(%w: tensor<8x8xf32> {loom.name = "w"},
                   %x: tensor<4x8xi32> {loom.name = "tokens"}) -> tensor<f32> {
  %0 = loom.embedding %w, %x : (tensor<8x8xf32>, tensor<4x8xi32>) -> tensor<4x8x8xf32>
  %1 = loom.cross_entropy %0, %x : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
