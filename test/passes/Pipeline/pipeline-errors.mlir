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

// Dropout masks are drawn by the element's index in the whole batch.
func.func @forward(%w0: tensor<8x8xf32> {loom.name = "h.0.w"},
                   %w1: tensor<8x8xf32> {loom.name = "h.1.w"},
                   %x: tensor<4x8xi32> {loom.name = "tokens"},
                   %step: tensor<i64> {loom.name = "step"}) -> tensor<f32> {
  %0 = loom.embedding %w0, %x : (tensor<8x8xf32>, tensor<4x8xi32>) -> tensor<4x8x8xf32>
  // expected-error @+1 {{--loom-pipeline: dropout with 2 micro-batches is not supported: its masks are drawn by the element's index in the whole batch}}
  %1 = loom.dropout %0, %step {key = 3 : i64, rate = 0.1 : f64, seed = 1234 : i64} : tensor<4x8x8xf32>, tensor<i64>
  %2 = loom.matmul %1, %w1 : (tensor<4x8x8xf32>, tensor<8x8xf32>) -> tensor<4x8x8xf32>
  %3 = loom.cross_entropy %2, %x : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %3 : tensor<f32>
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
// expected-error @+1 {{--loom-pipeline: no argument names a transformer layer (`h.<i>.`, `layers.<i>.`, `blocks.<i>.`), so there is nothing to cut into stages}}
func.func @forward(%w: tensor<8x8xf32> {loom.name = "w"},
                   %x: tensor<4x8xi32> {loom.name = "tokens"}) -> tensor<f32> {
  %0 = loom.embedding %w, %x : (tensor<8x8xf32>, tensor<4x8xi32>) -> tensor<4x8x8xf32>
  %1 = loom.cross_entropy %0, %x : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
