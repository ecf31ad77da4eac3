// RUN: loom-opt %s --loom-autodiff -split-input-file -verify-diagnostics

// The module has no function to differentiate.
// expected-error @+1 {{loom-autodiff: no function 'forward'}}
module {
  func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
    %l = loom.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A loss is one 0-d float tensor.
// expected-error @+1 {{loom-autodiff: 'forward' must return exactly one 0-d float tensor (the loss)}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A declaration has no body to differentiate.
// expected-error @+1 {{loom-autodiff: 'forward' must have a body of one block}}
func.func private @forward(%x: tensor<4xf32>) -> tensor<f32>

// -----

// The gradient function's name is taken.
// expected-error @+1 {{loom-autodiff: 'forward_backward' already exists}}
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %l = loom.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @forward_backward() {
  return
}

// -----

// An op without a gradient rule (no second derivatives), reached from the loss.
func.func @forward(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{loom-autodiff: no gradient rule for 'loom.gelu_grad'}}
  %g = loom.gelu_grad %dy, %x : tensor<4x8xf32>
  %l = loom.reduce_sum %g [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The log-sum-exp of attention is for the backward pass, not for the loss.
func.func @forward(%q: tensor<1x4x2x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{loom-autodiff: the loss depends on the log-sum-exp result of attention, which has no gradient rule}}
  %o, %lse = loom.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %l = loom.reduce_sum %lse [0, 1, 2] : tensor<1x2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The same when the loss uses only a later result of such an op.
func.func @forward(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<f32> {
  // expected-error @+1 {{loom-autodiff: no gradient rule for 'loom.layernorm_grad'}}
  %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>
  %l = loom.reduce_sum %dg [0] : tensor<8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
