// RUN: loom-opt %s -split-input-file --loom-lower-cpu -verify-diagnostics

// The CPU kernels compute in f32: a bf16 op is refused.
func.func @train_step(%a: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'loom.gelu' op --loom-lower-cpu has no CPU kernel for element type 'bf16'}}
  %b = loom.gelu %a : tensor<4xbf16>
  return %b : tensor<4xbf16>
}

// -----

// Calls must be inlined first.
func.func private @g(%a: tensor<4xf32>) -> tensor<4xf32>
func.func @train_step(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{--loom-lower-cpu needs the calls inlined (run --inline first)}}
  %b = func.call @g(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Nothing to lower.
// expected-error @+1 {{--loom-lower-cpu found nothing to lower: no stage functions (--loom-split-stages) and no @train_step}}
module {
  func.func @forward(%a: tensor<4xf32>) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}

// -----

// Only sum, max and min reductions have kernels.
shard.grid @mesh(shape = 2)
func.func @train_step(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.all_reduce' op --loom-lower-cpu supports the sum, max and min reductions, not product}}
  %r = shard.all_reduce %a on @mesh grid_axes = [0] reduction = product : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A loom.fused body no kernel runs (a softmax is not elementwise).
func.func @train_step(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'loom.fused' op has no CPU kernel for its body (--loom-lower-cpu runs a matmul with one of its epilogues, a loss with its gradient, a norm gradient with a residual, AdamW updates or a chain of elementwise ops; see --loom-fuse)}}
  %0 = loom.fused(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%x: tensor<4x4xf32>):
    %s = loom.softmax %x : tensor<4x4xf32>
    loom.yield %s : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

// A matmul body must be matmul, bias add[, gelu] over the inputs in order.
func.func @train_step(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'loom.fused' op has no CPU kernel for its body}}
  %0 = loom.fused(%x, %w, %b) : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x3xf32>, %v: tensor<3x4xf32>, %c: tensor<4xf32>):
    %p = loom.matmul %a, %v : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %s = loom.sub %p, %c : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    loom.yield %s : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

// A bias_grad body sums the rows of an untransposed rhs: with transpose_rhs
// the summed rows are not the rhs' [k, n] rows, and no kernel runs it.
func.func @train_step(%x: tensor<6x5xf32>, %dy: tensor<4x6xf32>) -> (tensor<5x4xf32>, tensor<6xf32>) {
  // expected-error @+1 {{'loom.fused' op has no CPU kernel for its body}}
  %0:2 = loom.fused(%x, %dy) : (tensor<6x5xf32>, tensor<4x6xf32>) -> (tensor<5x4xf32>, tensor<6xf32>) {
  ^bb0(%a: tensor<6x5xf32>, %b: tensor<4x6xf32>):
    %p = loom.matmul %a, %b {transpose_lhs, transpose_rhs} : (tensor<6x5xf32>, tensor<4x6xf32>) -> tensor<5x4xf32>
    %s = loom.reduce_sum %b [0] : tensor<4x6xf32> -> tensor<6xf32>
    loom.yield %p, %s : tensor<5x4xf32>, tensor<6xf32>
  }
  return %0#0, %0#1 : tensor<5x4xf32>, tensor<6xf32>
}

// -----

// A collective marked loom.overlap must be one whose transfer runs on its
// own buffers: this reduce_scatter along dimension 1 packs 4 blocks.
shard.grid @mesh(shape = 2)
func.func @train_step(%a: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'shard.reduce_scatter' op is marked loom.overlap but its transfer cannot run on its own buffers}}
  %b = shard.reduce_scatter %a on @mesh grid_axes = [0] scatter_axis = 1 {loom.overlap} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %b : tensor<4x4xf32>
}
