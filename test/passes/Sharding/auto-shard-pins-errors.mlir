// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-auto-shard="func=f mesh=2x4 cluster=a100-80g"

// Pins name axes of the `mesh` option: axis 2 of a 2x4 mesh does not exist.
// expected-error @+1 {{--loom-auto-shard: bad pin loom.split_axes = [[2]] on argument 0: mesh axis 2 (dimension 0) is out of range: the mesh has 2 axes}}
func.func @f(%x: tensor<8x8xf32> {loom.split_axes = [[2]]}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// A mesh axis splits one dimension at most once (the dialect checks the
// attribute's form before the pass reads it).
// expected-error @+1 {{'func.func' op argument 0: `loom.split_axes` mesh axis 0 splits more than once}}
func.func @f(%x: tensor<8x8xf32> {loom.split_axes = [[0], [0]]}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// One list per dimension, not more.
// expected-error @+1 {{'func.func' op argument 0: `loom.split_axes` 3 lists of split axes for a tensor of rank 2}}
func.func @f(%x: tensor<8x8xf32> {loom.split_axes = [[], [], [1]]}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// A list of lists of axes, not a flat list.
// expected-error @+1 {{'func.func' op argument 0: `loom.split_axes` must be an array of arrays of mesh axes, e.g. [[0], [], [1]]}}
func.func @f(%x: tensor<8x8xf32> {loom.split_axes = [0]}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// Only tensors have a layout.
// expected-error @+1 {{'func.func' op argument 1: `loom.split_axes` is on a value that is not a ranked tensor}}
func.func @f(%x: tensor<8x8xf32>, %n: i64 {loom.split_axes = [[0]]}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// A pin by shard.shard cannot hold partial sums: the planner decides where
// reductions happen.
shard.grid @mesh(shape = 2x4)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @mesh split_axes = [[], []] : !shard.sharding
  // expected-error @+1 {{--loom-auto-shard: a pin cannot hold partial sums ('loom.partial_axes')}}
  %p = shard.shard %x to %s {loom.partial_axes = array<i64: 0>} : tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

// -----

// The layout one user needs is not a pin.
shard.grid @mesh(shape = 2x4)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{--loom-auto-shard: 'annotate_for_users' (the layout one user needs) is not supported as a pin; pin the value's own layout with a 'shard.shard' without it}}
  %p = shard.shard %x to %s annotate_for_users : tensor<8x8xf32>
  %y = loom.gelu %p : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Axes out of range in a shard.sharding pin, too (checked against the
// mesh option, whatever the grid it names).
shard.grid @other(shape = 2x4x2)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @other split_axes = [[], [2]] : !shard.sharding
  // expected-error @+1 {{--loom-auto-shard: bad pin: mesh axis 2 (dimension 1) is out of range: the mesh has 2 axes}}
  %p = shard.shard %x to %s : tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

// -----

// Two pins of one value must agree.
shard.grid @mesh(shape = 2x4)
func.func @f(%x: tensor<8x8xf32> {loom.split_axes = [[0]]}) -> tensor<8x8xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  // expected-error @+1 {{--loom-auto-shard: argument 0 is pinned twice, to [{0}, {}] and to [{1}, {}]}}
  %p = shard.shard %x to %s : tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

// -----

// The pass writes its annotations on grid @mesh, which must then be the
// mesh it plans on.
// expected-error @+1 {{--loom-auto-shard: this grid is not the mesh 2x4 the pass plans on}}
shard.grid @mesh(shape = 8)
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// Pins no strategy meets are errors saying why (Inputs/unmet-pins.mlir,
// planned with best-effort-pins=true in auto-shard-pins.mlir, warns and
// plans without them).

shard.grid @mesh(shape = 2x4)
// expected-error @+1 {{--loom-auto-shard: cannot pin argument 0 to [{0, 1}, {}]: dimension 0 of size 6 does not divide over 8 devices (best-effort-pins=true plans without it)}}
func.func @f(%x: tensor<6x8xf32> {loom.split_axes = [[0, 1]]}) -> tensor<6x8xf32> {
  // expected-error @+1 {{--loom-auto-shard: cannot pin result 0 of 'loom.softmax' to [{}, {1}]: 'loom.softmax' has no strategy that leaves result 0 in this layout (best-effort-pins=true plans without it)}}
  %y = loom.softmax %x : tensor<6x8xf32>
  %s = shard.sharding @mesh split_axes = [[], [1]] : !shard.sharding
  %p = shard.shard %y to %s : tensor<6x8xf32>
  return %p : tensor<6x8xf32>
}
