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

    Users may pin layouts: an argument attribute `loom.split_axes = [[0],
    [], [1]]` (one list of mesh axes per dimension, major first, trailing
    dimensions optional), or a `shard.shard %v to %s` in the input (on an
    argument or an op result, without `annotate_for_users` or
    `loom.partial_axes`), fixes that value's layout: its node keeps only the
    strategies that leave it so, and the user's attribute and `shard` ops
    give way to the pass's own annotations. A pin no strategy meets (a split
    that does not divide its dimension, a layout the op cannot produce) is
    an error at the value saying why; with `best-effort-pins=true` it is a
    warning and the plan goes on without it. Pins name axes of the `mesh`
    option.

    Repeated transformer layers are planned once: the layers are found from
    the parameter names (`h.<i>.`, `layers.<i>.`) and the dataflow, checked
    to be the same ops wired the same way, and every op of a layer is tied
    to the same op of a representative layer (same strategy; its costs and
    memory still count), so the ILP has the size of a few layers whatever
    the depth (docs/ilp.md, "Repeated layers").

    Sequence splits are the planner's choice (`sequence-parallel=any`):
    splitting the sequence through attention is DeepSpeed-Ulysses' or
    context parallelism, which the cost model may find cheaper than
    Megatron-LM's all-reduces. `sequence-parallel=megatron` allows the
    sequence to be split only outside the GEMMs (matmul and attention keep
    it whole), Megatron-LM's sequence parallelism, where each all-reduce of
    tensor parallelism becomes a reduce-scatter and an all-gather;
    `sequence-parallel=none` never splits it, Megatron-LM's plain tensor
    parallelism. The sequence is found from the dataflow: dimension 1 of
    attention's tensors and of the token arguments, carried through every
    op's sharding rule (include/loom/AutoShard/SequenceSplit.h).

    Options: `func` (default `forward_backward`), `mesh` (axis sizes such as
    `2x4`, their product the devices of one pipeline rank: the whole step's
    when it is not pipelined), `cluster` (as loom-plan's `--cluster`; it
    must hold the pipeline ranks times the mesh's devices), `memory-budget`
    (bytes per device; 0: the device's memory), `reuse-layers` (default
    true; false plans every layer on its own), `sequence-parallel` (`any`,
    `megatron` or `none`), `context-axis` (a mesh axis that splits only
    the tokens, and every attention's queries along the sequence: context
    parallelism, the keys and values all-gathered around that axis and
    their gradients reduce-scattered back; default -1, none),
    `best-effort-pins` (default false). Errors, one
    line each: an op without a sharding rule, a call (inline first), a mesh
    that the cluster cannot hold or that differs from an existing
    `shard.grid @mesh`, a pin no strategy meets, a budget no choice meets (with the least memory any choice
    needs), a malformed pin (an axis out of the mesh or used twice, two
    different pins of one value, partial sums, `annotate_for_users`). With
    `report`, a remark at the function gives the problem's size (nodes,
    edges, layers found, layers solved for, tied nodes, ILP variables and
    rows), the plan's cost and memory, and the seconds spent building and
    solving:

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
    Option<"sequenceParallel", "sequence-parallel", "std::string", "\"any\"",
           "Where the sequence may be split: any, megatron (outside the "
           "GEMMs) or none">,
    Option<"contextAxis", "context-axis", "int64_t", "-1",
           "A mesh axis that splits only the sequence, through attention "
           "(context parallelism); -1: none">,
    Option<"bestEffortPins", "best-effort-pins", "bool", "false",
           "A pin no strategy meets is a warning and the plan goes on "
           "without it (default: an error)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def LoomPartition : Pass<"loom-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite an annotated function into the per-device SPMD program";
  let description = [{
    Reads the layout of every value of function `func` from its `shard.shard`
    annotations (as `--loom-auto-shard` writes them, or a user: a
    `shard.shard` without `annotate_for_users` gives its operand's layout,
    one with it the layout its users need; `loom.partial_axes` marks partial
    sums; unannotated values are replicated) and rewrites the function into
    the program one device of the `shard.grid` runs:

    - arguments and results take their local types and carry
      `loom.split_axes = [[0], [], [1]]` (the mesh axes splitting each
      dimension, major first);
    - every op runs on local shapes with the strategy of its sharding rule
      that its layouts describe (a reshape, a slice or a matmul keep their
      attributes; a cross-entropy over split tokens gets the global
      `token_count`; a dropout op, or attention with dropout, whose masked
      tensor is split gets `loom.mask_split_axes` and `loom.mask_grid`, so
      that each device draws the masks of the unpartitioned op);
    - where a value meets a consumer that needs another layout, `shard`
      collectives convert it, one mesh axis at a time: partial sums are
      reduced (`all_reduce`, or `reduce_scatter` when the target splits
      that axis: an all-reduce followed by a slice is never emitted), a
      split moving to another dimension is one `all_to_all`, splits to undo
      are `all_gather`s (minor axis first), new splits are `all_slice`s
      (local, no communication). A partial sum is reduced where it is first
      needed whole, and once however many users need it;
    - gradient all-reduces (those feeding optimizer updates) over the same
      mesh axes are bucketed: flattened, concatenated, all-reduced in one
      collective of at most `bucket-bytes`, and split again, placed after
      the last gradient of the bucket is computed.

    ```mlir
    // Megatron's row-parallel matmul: the partial product is reduced where
    // a replicated consumer needs it.
    %y = loom.matmul %h, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
    %r = shard.all_reduce %y on @mesh grid_axes = [1] : tensor<8x32xf32> -> tensor<8x32xf32>
    ```

    The multi-rank reference interpreter runs the result (the partitioner's
    oracle; see the equivalence tests). Errors: no function or no grid, a
    call (inline first), an op without a sharding rule, a layout that does
    not divide a dimension (naming the op, the dimension and the mesh axis),
    a partial argument, and contradictory annotations.

    Options: `func` (default `forward_backward`), `bucket-bytes` (default
    25 MiB, PyTorch DDP's; 0 disables bucketing).
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward_backward\"",
           "The function to partition">,
    Option<"bucketBytes", "bucket-bytes", "double", "26214400",
           "Largest gradient all-reduce bucket in bytes (0: no bucketing)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect", "loom::LoomDialect"];
}

def LoomExplainSharding : Pass<"loom-explain-sharding", "mlir::ModuleOp"> {
  let summary = "Print what a function's sharding costs, op by op";
  let description = [{
    Reads the `shard` annotations of function `func` (as `--loom-auto-shard`
    writes them, or written by hand) and prints a table with one row per
    op: its name and `line:col`, the layout of every operand (what the op
    needs) and result, the collectives that bring each operand from its
    producer's layout to the one the op needs (`#operand kind axis bytes
    time`, from the planner's resharding plans), the op's compute time at
    its local shapes and the communication time, both on the cluster's
    cost model. A final line sums compute and communication and counts each
    collective kind. The IR is left unchanged.

    A value's layout is that of its `shard.shard` without
    `annotate_for_users` (with `loom.partial_axes` for partial sums); the
    layout an operand must arrive in is that of an `annotate_for_users`
    `shard.shard` feeding the op, or else its producer's layout. A value
    without an annotation is replicated. Ops whose layouts match none of
    their strategies are marked, and timed at the annotated local shapes.

    The table ends with the totals (the README shows a whole table):

    ```
    total: compute 294.84 us, communication 11.39 us; collectives: all-reduce 0, reduce-scatter 1, all-to-all 0, all-gather 0, slice 0
    ```

    Options: `func` (default `forward_backward`), `cluster` (as
    `--loom-auto-shard`'s; its devices must be the grid's), `output` (a
    file, written atomically; `-`, the default, is stdout). Errors: no such
    function, no `shard.grid` (or shardings naming two grids), a grid that
    is not the cluster's devices, a malformed annotation.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward_backward\"",
           "The annotated function to explain">,
    Option<"clusterName", "cluster", "std::string", "\"cpu-local\"",
           "Cluster spec: a preset or a file, optionally :NODES">,
    Option<"output", "output", "std::string", "\"-\"",
           "Where to write the table (- for stdout)">,
  ];
}

#endif // LOOM_PASSES_SHARDING_PASSES_TD
