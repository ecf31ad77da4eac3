// RUN: loom-opt %s --loom-optimizer -split-input-file -verify-diagnostics
// RUN: not loom-opt %s --loom-optimizer="kind=adam" -split-input-file 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not loom-opt %s --loom-optimizer="beta1=1.0" -split-input-file 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not loom-opt %s --loom-optimizer="eps=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not loom-opt %s --loom-optimizer="kind=sgd lr=-1" -split-input-file 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not loom-opt %s --loom-optimizer="weight-decay=-0.1" -split-input-file 2>&1 | FileCheck %s --check-prefix=WD

// Options out of their range are rejected before anything is built.
// KIND: error: --loom-optimizer: unknown kind 'adam' (expected adamw or sgd)
// BETA: error: --loom-optimizer: beta1 and beta2 must be in [0, 1)
// EPS: error: --loom-optimizer: eps must be positive
// LR: error: --loom-optimizer: lr must be non-negative
// WD: error: --loom-optimizer: weight-decay must be non-negative

// The optimizer needs the gradient function of --loom-autodiff.
// expected-error @+1 {{loom-optimizer: no function 'forward_backward' (run --loom-autodiff first)}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %l = loom.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A function of that name without gradient results.
// expected-error @+1 {{loom-optimizer: 'forward_backward' is not a gradient function: result 1 should be the gradient of argument 0}}
func.func @forward_backward(%x: tensor<4xf32>) -> tensor<f32> {
  %l = loom.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Master weights are f32 under every precision policy.
// expected-error @+1 {{loom-optimizer: parameter 0 is 'tensor<4xbf16>'; master weights must be f32 (use a bf16 compute copy)}}
func.func @forward_backward(%x: tensor<4xbf16>) -> (tensor<f32>, tensor<4xbf16> {loom.grad_of = "x"}) {
  %c = loom.cast %x : tensor<4xbf16> -> tensor<4xf32>
  %l = loom.reduce_sum %c [0] : tensor<4xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xbf16>
}

// -----

// The step function's name is taken.
func.func @train_step() {
  return
}
// expected-error @+1 {{loom-optimizer: 'train_step' already exists}}
func.func @forward_backward(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {loom.grad_of = "x"}) {
  %l = loom.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}
