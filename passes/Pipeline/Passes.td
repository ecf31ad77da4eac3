//===- Passes.td - Pipeline passes ----------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_PIPELINE_PASSES_TD
#define LOOM_PASSES_PIPELINE_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomPipeline : Pass<"loom-pipeline", "mlir::ModuleOp"> {
  let summary = "Cut the training step into pipeline stages over micro-batches";
  let description = [{
    Takes a module with `@forward` (the loss), `@forward_backward` and
    `@train_step` calling it (`--loom-autodiff --loom-optimizer`, before
    `--inline`) and prepares it for pipeline parallelism
    (docs/pipeline.md):
    - micro-batches: the batch dimension is followed from the token
      arguments through every op's sharding rule and divided by
      `micro-batches` (M); cross-entropy divides by the whole batch's token
      count, so the M micro-batches' losses and gradients sum to the
      batch's; dropout ops get `loom.mask_micro_batches = M`, so that
      micro-batch k draws the masks of its rows of the whole batch;
    - stages: the forward pass is a chain of items (the embedding, the
      layers, the head); `stages` × `virtual-stages` contiguous ranges of
      them become the stages, by `layers` (transformer layers per stage,
      the embedding on the first stage and the head on the last) or else
      by Alpa's stage DP on the ops' roofline times on `cluster`'s device,
      every stage fitting `memory-budget` with the parameters it reads (and
      their gradients and moments) and its forward results for the
      micro-batches its schedule keeps in flight;
      every forward op gets `loom.stage = s`;
    - `@forward_backward` is differentiated again from the micro-batched
      `@forward`, every backward op tagged with the stage of the forward op
      it differentiates and `loom.backward`; a parameter used by several
      stages (GPT-2's tied embedding) gets one gradient per stage, summed by
      a `loom.add {loom.tied_gradient}` in `@train_step`;
    - the module gets `loom.pipeline = {schedule, ranks, virtual_stages,
      micro_batches, recompute, stage_items}`.
    ```mlir
    %3 = loom.layernorm %2, %arg2, %arg3 {epsilon = 1.0e-05 : f64, loom.stage = 0 : i64} : tensor<2x8x64xf32>, tensor<64xf32>
    ```
    The step may then be inlined, sharded (`--loom-auto-shard`,
    `--loom-partition` with `func=train_step`) and is cut into stage
    functions by `--loom-split-stages`.
    Options: `stages` (P, pipeline ranks), `micro-batches` (M),
    `schedule` (`gpipe`, `1f1b`, `interleaved-1f1b`, `zb-h1`),
    `virtual-stages` (V, stages per rank; interleaved-1f1b needs V >= 2 and
    M a multiple of P), `recompute` (`none`, `selective`, `full`: one value,
    or one per stage, comma-separated), `layers` (comma-separated layer
    counts per stage), `cluster` (as `--loom-auto-shard`'s),
    `memory-budget` (bytes per device; 0: the cluster device's memory).
    Errors: a missing function or a step already inlined, a schedule shape
    the schedule does not allow, a batch M does not divide, dropout on a
    tensor whose first dimension is not the batch, more stages than items,
    a memory budget no split fits (with what the tightest split needs),
    `layers` or `recompute` lists of the wrong length.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "2", "Pipeline ranks (P)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step (M)">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved-1f1b or zb-h1">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Stages per rank (V)">,
    Option<"recompute", "recompute", "std::string", "\"none\"",
           "none, selective or full; or one per stage, comma-separated">,
    ListOption<"layers", "layers", "int64_t",
               "Transformer layers per stage (default: balanced)">,
    Option<"clusterName", "cluster", "std::string", "\"cpu-local\"",
           "Cluster spec whose device times the stages are balanced on">,
    Option<"memoryBudget", "memory-budget", "double", "0",
           "Bytes per device each balanced stage must fit (0: the cluster "
           "device's memory)">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "loom::LoomDialect"];
}

def LoomSplitStages : Pass<"loom-split-stages", "mlir::ModuleOp"> {
  let summary = "Cut a pipelined training step into per-stage functions and one schedule";
  let description = [{
    Takes `@train_step` as `--loom-pipeline` left it, inlined and perhaps
    partitioned (`--loom-partition func=train_step`; the collectives it
    inserted join the stage and phase of their users), and replaces it by
    the functions each stage runs on one micro-batch (docs/pipeline.md):
    - `@stage<s>_forward`: its forward ops. Arguments: its parameters,
      the micro-batch's data, the activations from stage s-1 (`loom.role =
      "activation"`), the loss accumulator; results: the activations for
      stage s+1, the values its backward saves (`saved`), the accumulator;
    - `@stage<s>_backward`: its backward ops and the forward ops it
      recomputes (recompute `full`: all of them from the stage's inputs;
      `selective`: those tagged `loom.attention_core`; `none`: none).
      Arguments: parameters, saved values, the activation gradients from
      stage s+1 (`activation_grad`), the gradient accumulators
      (`accumulator`); results: the activation gradients for stage s-1 and
      the accumulators plus this micro-batch's gradients;
    - with `zb-h1`, the backward is split instead into
      `@stage<s>_backward_input` (what the activation gradients need) and
      `@stage<s>_backward_weight` (the rest), the first saving what the
      second reads;
    - `@stage<s>_optimizer`: the updates of the stage's parameters from
      the accumulated gradients (with the data-parallel reduction the
      partitioner put before them). An accumulator with `loom.tied_stages`
      is first summed over those stages.
    Every argument and result that is not one of `@train_step`'s carries
    `loom.value`, the key the schedule's transfers and the executor match
    them by; each function carries `loom.stage_function = {stage, kind}`.
    The module gets `loom.schedule`: the instruction streams the simulator
    times and every executor runs, one string per instruction
    (loom/Schedule/ScheduleAttr.h):
    ```mlir
    loom.schedule = {kind = "1f1b", micro_batches = 2 : i64, ranks = 2 : i64,
        streams = [["forward stage 0 mb 0", "send_activation stage 0 mb 0 peer 1", ...], [...]],
        virtual_stages = 1 : i64}
    ```
    Errors: no `loom.pipeline` or no `@train_step`, a call left in it, an
    op whose stage cannot be told.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

#endif // LOOM_PASSES_PIPELINE_PASSES_TD
