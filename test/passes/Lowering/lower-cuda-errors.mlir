// RUN: loom-opt %s -split-input-file --loom-lower-cuda -verify-diagnostics

// The CUDA kernels store f32 or bf16: an f16 op is refused.
func.func @train_step(%a: tensor<4xf16>) -> tensor<4xf16> {
  // expected-error @+1 {{'loom.gelu' op --loom-lower-cuda has no CUDA kernel for element type 'f16'}}
  %b = loom.gelu %a : tensor<4xf16>
  return %b : tensor<4xf16>
}

// -----

// So is an f16 collective (NCCL would take it; the CPU meta has no code).
shard.grid @mesh(shape = 2)
func.func @train_step(%a: tensor<4xf16>) -> tensor<4xf16> {
  // expected-error @+1 {{'shard.all_reduce' op --loom-lower-cuda has no CUDA kernel for element type 'f16'}}
  %r = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4xf16> -> tensor<4xf16>
  return %r : tensor<4xf16>
}

// -----

// Calls must be inlined first.
func.func private @g(%a: tensor<4xf32>) -> tensor<4xf32>
func.func @train_step(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{--loom-lower-cuda needs the calls inlined (run --inline first)}}
  %b = func.call @g(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Nothing to lower.
// expected-error @+1 {{--loom-lower-cuda found nothing to lower: no stage functions (--loom-split-stages) and no @train_step}}
module {
  func.func @forward(%a: tensor<4xf32>) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}

// -----

// Only sum, max and min reductions have kernels.
shard.grid @mesh(shape = 2)
func.func @train_step(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.all_reduce' op --loom-lower-cuda supports the sum, max and min reductions, not product}}
  %r = shard.all_reduce %a on @mesh grid_axes = [0] reduction = product : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// An f16 constant has no loom_dtype either.
func.func @train_step() -> tensor<4xf16> {
  // expected-error @+1 {{'arith.constant' op --loom-lower-cuda takes dense tensor constants of f32, f64, bf16, i32 or i64 only}}
  %c = arith.constant dense<1.0> : tensor<4xf16>
  return %c : tensor<4xf16>
}
