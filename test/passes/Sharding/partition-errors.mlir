// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-partition="func=f"
// RUN: not loom-opt %s --split-input-file --loom-partition="func=nosuch" 2>&1 | FileCheck %s --check-prefix=FUNC

// FUNC: error: --loom-partition: no function @nosuch

// A function without a grid has not been planned.
// expected-error @+1 {{--loom-partition: the module has no shard.grid (run --loom-auto-shard first)}}
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// A split that does not divide: 6 rows over 4 devices.
shard.grid @mesh(shape = 4)
func.func @f(%x: tensor<6xf32>) -> tensor<6xf32> {
  %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{--loom-partition: dimension 0 of the annotated value ('tensor<6xf32>') has 6 elements per device before mesh axis 0, which does not divide by its 4 devices}}
  %y = shard.shard %x to %s : tensor<6xf32>
  return %y : tensor<6xf32>
}

// -----

// Two annotations that disagree on one value.
shard.grid @mesh(shape = 2)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s0 = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s0 : tensor<8xf32>
  %s1 = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  // expected-error @+1 {{--loom-partition: a second annotation gives [{}] to a value already [{0}]}}
  %b = shard.shard %x to %s1 : tensor<8xf32>
  %y = loom.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Annotations on another grid than the module's.
shard.grid @mesh(shape = 2)
shard.grid @other(shape = 2)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @other split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{--loom-partition: annotation on @other, expected @mesh}}
  %y = shard.shard %x to %s : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A mesh axis the grid lacks.
shard.grid @mesh(shape = 2)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  // expected-error @+1 {{--loom-partition: }}
  %y = shard.shard %x to %s : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A whole value cannot be asked to hold partial sums.
shard.grid @mesh(shape = 2)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  // expected-error @+1 {{--loom-partition: cannot make a whole value [{}] partial [{}] partial={0}}}
  %y = shard.shard %x to %s annotate_for_users {loom.partial_axes = array<i64: 0>} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// An op's result annotated partial where no strategy of its rule leaves
// partial sums.
shard.grid @mesh(shape = 2)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{--loom-partition: no strategy of the op's sharding rule can meet its layouts}}
  %g = loom.gelu %x : tensor<8xf32>
  %s = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %y = shard.shard %g to %s {loom.partial_axes = array<i64: 0>} : tensor<8xf32>
  %w = shard.shard %y to %s annotate_for_users : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

// An op of another dialect has no sharding rule.
shard.grid @mesh(shape = 2)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{--loom-partition: 'arith.addf' has no sharding rule}}
  %y = arith.addf %x, %x : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Calls are inlined first.
shard.grid @mesh(shape = 2)
func.func private @g(tensor<8xf32>) -> tensor<8xf32>
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{--loom-partition: inline calls first (--inline)}}
  %y = func.call @g(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// An argument arrives whole: it cannot hold partial sums.
shard.grid @mesh(shape = 2)
// expected-error @+1 {{--loom-partition: argument 0 cannot hold partial sums}}
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %y = shard.shard %x to %s {loom.partial_axes = array<i64: 0>} : tensor<8xf32>
  %w = shard.shard %y to %s annotate_for_users : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

// One block only.
shard.grid @mesh(shape = 2)
// expected-error @+1 {{--loom-partition: @f must have one block}}
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  cf.br ^next
^next:
  return %x : tensor<8xf32>
}

// -----

// Every device must know the grid's shape.
// expected-error @+1 {{--loom-partition: the grid must have a static shape}}
shard.grid @mesh(shape = ?)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
