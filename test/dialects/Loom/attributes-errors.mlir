// RUN: loom-opt %s -split-input-file -verify-diagnostics

// A misspelt loom.* attribute is an error, not ignored.
func.func @unknown(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.neg' op unknown attribute `loom.stag`}}
  %0 = loom.neg %a {loom.stag = 0 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A stage is a non-negative integer.
func.func @negative_stage(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.neg' op `loom.stage` must be a non-negative integer stage}}
  %0 = loom.neg %a {loom.stage = -1 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A backward op says which stage's backward it is.
func.func @backward_without_stage(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.neg' op `loom.backward` must be a unit attribute beside `loom.stage`}}
  %0 = loom.neg %a {loom.backward} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Only the sum of a tied parameter's gradients is a tied gradient.
func.func @tied_not_add(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.mul' op `loom.tied_gradient` must be a unit attribute on a loom.add (the sum of a tied parameter's gradients)}}
  %0 = loom.mul %a, %a {loom.tied_gradient} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The module's state is one of the pipeline's stages.
// expected-error @+1 {{'builtin.module' op `loom.state` must be "pipelined", "partitioned" or "split", not "halfway"}}
module attributes {loom.state = "halfway"} {
}

// -----

// A state must match the pipeline attributes: a partitioned module is
// not pipelined.
// expected-error @+1 {{'builtin.module' op `loom.state` = "partitioned" does not match the module: it has `loom.pipeline`, no `loom.schedule`}}
module attributes {loom.state = "partitioned", loom.pipeline = {schedule = "1f1b", ranks = 2 : i64, virtual_stages = 1 : i64, micro_batches = 2 : i64, recompute = ["none", "none"]}} {
}

// -----

// "split" means the stage functions and their schedule are there.
// expected-error @+1 {{'builtin.module' op `loom.state` = "split" does not match the module: no `loom.pipeline`, no `loom.schedule`}}
module attributes {loom.state = "split"} {
}

// -----

// One recompute mode per stage (ranks x virtual stages).
// expected-error @+1 {{'builtin.module' op `loom.pipeline` needs `recompute`: none, selective or full for each of its 2 stages}}
module attributes {loom.state = "pipelined", loom.pipeline = {schedule = "1f1b", ranks = 2 : i64, virtual_stages = 1 : i64, micro_batches = 2 : i64, recompute = ["none"]}} {
}

// -----

// A role the executors know.
// expected-error @+1 {{'func.func' op argument 0: `loom.role` must be one of param, m, v, step, data, loss, activation, activation_grad, saved, accumulator}}
func.func @role(%a: tensor<4xf32> {loom.role = "weights"}) {
  return
}

// -----

// Split axes: one list of mesh axes per dimension.
// expected-error @+1 {{'func.func' op argument 0: `loom.split_axes` must be an array of arrays of mesh axes, e.g. [[0], [], [1]]}}
func.func @split_flat(%a: tensor<4x4xf32> {loom.split_axes = [0]}) {
  return
}

// -----

// No axis splits twice.
// expected-error @+1 {{'func.func' op argument 0: `loom.split_axes` mesh axis 0 splits more than once}}
func.func @split_twice(%a: tensor<4x4xf32> {loom.split_axes = [[0], [0]]}) {
  return
}

// -----

// No more lists than dimensions.
// expected-error @+1 {{'func.func' op result 0: `loom.split_axes` 3 lists of split axes for a tensor of rank 2}}
func.func @split_rank(%a: tensor<4x4xf32>) -> (tensor<4x4xf32> {loom.split_axes = [[], [], [0]]}) {
  return %a : tensor<4x4xf32>
}

// -----

// In a module with a grid, the axes are the grid's: the runtime places
// shards by them.
shard.grid @mesh(shape = 2)
// expected-error @+1 {{'func.func' op argument 0: `loom.split_axes` mesh axis 9223372036854775807 is not an axis of the module's 1-axis grid}}
func.func @split_off_grid(%a: tensor<4x4xf32> {loom.split_axes = [[], [9223372036854775807]]}) {
  return
}

// -----

// A stage function's stage and kind.
// expected-error @+1 {{'func.func' op `loom.stage_function` must be {stage = <i64 >= 0>, kind = forward | backward | backward_input | backward_weight | optimizer}}}
func.func @stage_function() attributes {loom.stage_function = {stage = 0 : i64, kind = "sideways"}} {
  return
}

// -----

// Unknown argument attributes are errors too.
// expected-error @+1 {{'func.func' op argument 0: unknown attribute `loom.nmae`}}
func.func @unknown_arg(%a: tensor<4xf32> {loom.nmae = "x"}) {
  return
}

// -----

// loom.overlap marks a shard collective (--loom-overlap-collectives).
func.func @overlap_on_add(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.add' op `loom.overlap` must be a unit attribute on a shard.all_reduce, reduce_scatter or all_gather}}
  %b = loom.add %a, %a {loom.overlap} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// A layer is a non-negative integer, on an op as on an argument.
func.func @negative_layer(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.neg' op `loom.layer` must be a non-negative integer layer}}
  %0 = loom.neg %a {loom.layer = -1 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op argument 0: `loom.layer` must be a non-negative integer layer}}
func.func @layer_name(%a: tensor<4xf32> {loom.layer = "h.0"}) {
  return
}
