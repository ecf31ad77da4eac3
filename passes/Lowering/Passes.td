//===- Passes.td - Lowering passes ----------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_LOWERING_PASSES_TD
#define LOOM_PASSES_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomLowerCPU : Pass<"loom-lower-cpu", "mlir::ModuleOp"> {
  let summary = "Lower per-device programs to LLVM calls of the CPU kernels";
  let description = [{
    Lowers the functions the runtime calls (the stage functions of a
    pipelined step, `--loom-split-stages`, or else `@train_step`; both
    after `--inline` and, for a sharded step, `--loom-partition`) to the
    LLVM dialect, following the contract of
    runtime/include/loom/loom_program.h. Each becomes
    `llvm.func @loom_fn_<name>(%frame: !llvm.ptr) -> i32`:
    - every `loom` op and `shard` collective becomes one call of its kernel
      (runtime/include/loom/loom_cpu_kernels.h), with a constant `meta`
      array of its shapes and attributes; a kernel's non-zero status is
      returned at once;
    - `shard.shard` / `shard.sharding` vanish (the partitioner already made
      the shapes local), `arith.constant` tensors become constant globals;
    - every intermediate tensor gets an offset in the frame's workspace by a
      static memory plan (buffers reused by liveness, MemoryPlan.h); a
      result computed by an op is written straight into its result buffer,
      other results (arguments, constants, a value returned twice) are
      copied there.
    The lowered function keeps what the runtime needs as attributes:
    `loom.args` / `loom.results` (each argument's tensor type and original
    attributes: role, name, value key, split axes), `loom.workspace_bytes`,
    `loom.peak_live_bytes` and, for a stage function, `loom.stage_function`;
    the module gets `loom.groups`, the grid axes of each communicator group
    the collectives use, and of the axes splitting a result dimension (the
    runtime gathers an updated parameter split more finely than the step
    reads it, ZeRO's layout). Other functions (`@forward`, `@forward_backward`)
    are removed. `shard.grid` ops and the `loom.schedule` stay for
    `loom-compile`, which writes them into the artifact.
    Errors: an op with no CPU kernel, an element type the kernels do not
    take (bf16, f16), a dynamic shape, a call left in the step (run
    `--inline` first), no function to lower.
    ```mlir
    llvm.func @loom_fn_train_step(%arg0: !llvm.ptr) -> i32 attributes {loom.workspace_bytes = 1048576 : i64, ...}
    ```
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // LOOM_PASSES_LOWERING_PASSES_TD
