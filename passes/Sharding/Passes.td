//===- Passes.td - Sharding passes ------------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_SHARDING_PASSES_TD
#define LOOM_PASSES_SHARDING_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomPrintShardingRules : Pass<"loom-print-sharding-rules"> {
  let summary = "Report the sharding rule of every op as a remark";
  let description = [{
    Emits, at each op that implements `ShardingRuleOpInterface`, a remark
    with its rule in Shardy's notation: the factors of every operand and
    result dimension, the factor sizes, which factors are reductions
    (splitting them leaves partial sums) and which must stay whole. This is
    exactly what the sharding planner sees of the op.

    ```
    remark: sharding rule ([i, k], [k, j]) -> ([i, j]) {i=4, j=16, k=8} reduction={k}
    ```

    The pass also checks each rule against the op's shapes and fails with
    an error naming the op if a rule is inconsistent.
  }];
}

def LoomAutoShard : Pass<"loom-auto-shard", "mlir::ModuleOp"> {
  let summary = "Choose a sharding of every value by an ILP over the ops' strategies";
  let description = [{
    Builds the auto-sharding problem of function `func` on a logical device
    mesh (Alpa's intra-operator formulation; lib/AutoShard, lib/Solver):
    every op's strategies come from its sharding rule, every argument may
    be stored replicated or split, every use costs the collectives that turn
    its producer's layout into what its consumer needs (all-reduce,
    reduce-scatter, all-to-all, all-gather, slice) on the cluster's links,
    and returned training state (`loom.role` param/m/v) comes back in its
    argument's layout. CBC picks one strategy per op minimizing compute plus
    communication under the per-device memory budget (arguments' storage).
    Data parallelism, ZeRO (state split over the data axis), Megatron's
    tensor parallelism and sequence parallelism are all strategies; none is
    special-cased.

    The choice is written with upstream `shard` ops: a `shard.grid @mesh`,
    and after every argument and op result a `shard.sharding` and a
    `shard.shard` giving its layout; an operand that must arrive in another
    layout gets a `shard.shard ... annotate_for_users` before its consumer.
    A value holding partial sums carries `loom.partial_axes` (the mesh axes
    it is partial over) on its `shard.shard`, which upstream lacks.

    ```mlir
    shard.grid @mesh(shape = 2x4)
    %sharding = shard.sharding @mesh split_axes = [[0], [], [1]] : !shard.sharding
    %h = shard.shard %0 to %sharding : tensor<8x16x128xf32>
    ```

    Repeated transformer layers are planned once: the layers are found from
    the parameter names (`h.<i>.`, `layers.<i>.`) and the dataflow, checked
    to be the same ops wired the same way, and every op of a layer is tied
    to the same op of a representative layer (same strategy; its costs and
    memory still count), so the ILP has the size of a few layers whatever
    the depth (docs/ilp.md, "Repeated layers").

    Options: `func` (default `forward_backward`), `mesh` (axis sizes such as
    `2x4`, their product the devices), `cluster` (as loom-plan's
    `--cluster`), `memory-budget` (bytes per device; 0: the device's
    memory), `reuse-layers` (default true; false plans every layer on its
    own). Errors: an op without a sharding rule, a call (inline first),
    a mesh that does not match the cluster, a budget no choice meets (with
    the least memory any choice needs). With `report`, a remark at the
    function gives the problem's size (nodes, edges, layers found, layers
    solved for, tied nodes, ILP variables and rows), the plan's cost and
    memory, and the seconds spent building and solving:

    ```
    remark: --loom-auto-shard: 3350 nodes, 5541 edges, 24 layers (3 solved
    for, 3059 nodes tied), ILP 11204 variables 5873 rows; cost 1.2e-01 s
    (compute 1.1e-01 s, resharding 1.2e-02 s), memory 4.6e+10 bytes per
    device; built in 0.21 s, solved in 0.90 s (CBC 0.85 s)
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward_backward\"",
           "The function to shard">,
    Option<"meshShape", "mesh", "std::string", "\"\"",
           "Mesh axis sizes, e.g. 2x4">,
    Option<"clusterName", "cluster", "std::string", "\"cpu-local\"",
           "Cluster spec: a preset or a file, optionally :NODES">,
    Option<"memoryBudget", "memory-budget", "double", "0",
           "Bytes per device (0: the device's memory)">,
    Option<"reuseLayers", "reuse-layers", "bool", "true",
           "Tie repeated layers to a representative layer">,
    Option<"report", "report", "bool", "false",
           "Emit a remark with the problem's size, the plan's cost and the "
           "planning time">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

#endif // LOOM_PASSES_SHARDING_PASSES_TD
