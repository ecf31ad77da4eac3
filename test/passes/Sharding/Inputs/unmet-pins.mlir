// Pins no strategy meets: 6 rows do not divide over the 8 devices of axes
// 0 and 1, and a softmax cannot leave its normalized dimension split.
// auto-shard-pins.mlir plans them with best-effort-pins=true: warnings,
// and the plan goes on without them; auto-shard-pins-errors.mlir: errors.

// BEST-LABEL: func.func @mlp
// BEST-NOT:   split_axes = {{\[\[}}0, 1]
// BEST:       return
shard.grid @mesh(shape = 2x4)
// expected-warning @+1 {{--loom-auto-shard: cannot pin argument 0 to [{0, 1}, {}]: dimension 0 of size 6 does not divide over 8 devices; planning without this pin}}
func.func @mlp(%x: tensor<6x8xf32> {loom.split_axes = [[0, 1]]}) -> tensor<6x8xf32> {
  // expected-warning @+1 {{--loom-auto-shard: cannot pin result 0 of 'loom.softmax' to [{}, {1}]: 'loom.softmax' has no strategy that leaves result 0 in this layout; planning without this pin}}
  %y = loom.softmax %x : tensor<6x8xf32>
  %s = shard.sharding @mesh split_axes = [[], [1]] : !shard.sharding
  %p = shard.shard %y to %s : tensor<6x8xf32>
  return %p : tensor<6x8xf32>
}
