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
      copied there;
    - a collective marked `loom.overlap` (`--loom-overlap-collectives`,
      which only marks those that allow it: every `all_reduce`; a
      `reduce_scatter` / `all_gather` whose operand already holds
      contiguous member blocks of the result's element type) is split: its
      call starts the transfer under a slot (the last meta value; -1 for a
      collective that waits in its own call) and returns, and a
      `collective_wait` call for that slot stands just before the first
      call that reads the result (or before the function returns). The
      calls between overlap the transfer (loom_program.h's split
      collectives). The wait lists the transfer's buffers, so the memory
      plan keeps them until then. Slots are reused once waited for, lowest
      first. A marked collective that does not allow it is an error.
    The lowered function keeps what the runtime needs as attributes:
    `loom.args` / `loom.results` (each argument's tensor type and original
    attributes: role, name, value key, split axes), `loom.workspace_bytes`,
    `loom.peak_live_bytes`, `loom.target = "cpu"` (the kernel library it
    calls, so that a runtime refuses an artifact built for another) and, for
    a stage function, `loom.stage_function`; the module gets `loom.groups`,
    the grid axes of each communicator group
    the collectives use, and of the axes splitting a result dimension (the
    runtime gathers an updated parameter split more finely than the step
    reads it, ZeRO's layout). Other functions (`@forward`, `@forward_backward`)
    are removed. `shard.grid` ops and the `loom.schedule` stay for
    `loom-compile`, which writes them into the artifact. Workspace offsets
    are multiples of 64 bytes.
    Errors: an op with no CPU kernel, an element type the kernels do not
    take (bf16, f16), a dynamic shape, a call left in the step (run
    `--inline` first), no function to lower.
    ```mlir
    llvm.func @loom_fn_train_step(%arg0: !llvm.ptr) -> i32 attributes {loom.workspace_bytes = 1048576 : i64, ...}
    ```
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def LoomLowerCUDA : Pass<"loom-lower-cuda", "mlir::ModuleOp"> {
  let summary = "Lower per-device programs to LLVM calls of the CUDA kernels";
  let description = [{
    The lowering of `--loom-lower-cpu` (the same functions, memory plan,
    meta arrays and attributes) aimed at the CUDA kernel library,
    runtime/include/loom/loom_cuda_kernels.h. The differences:
    - each function becomes `llvm.func @loom_fn_<name>(%frame: !llvm.ptr,
      %context: !llvm.ptr) -> i32`, and every kernel call is
      `loom_cuda_<op>(frame, buffers, meta, context)`, the context (a
      `loom_cuda_context`: stream, cuBLASLt handle, scratch) passed through;
      the host code computes the buffers' device pointers (arguments,
      results, workspace + offset) exactly as on the CPU;
    - workspace offsets are multiples of 256 bytes (cudaMalloc's alignment);
    - every op takes bf16 tensors (bf16 storage, f32 arithmetic: the mixed
      precision step of `loom-import --precision bf16`, f32 master weights
      cast to bf16 for the compute);
    - an `arith.constant` stays a host global, copied into the workspace
      (or its result buffer) by a `loom_cuda_upload` call (copy's meta,
      buffers: host source, device destination) where it stands;
    - `shard` collectives become `loom_cuda_<collective>` calls with the CPU
      meta (and, for those marked `loom.overlap`, the same starts and
      `loom_cuda_collective_wait` calls: the CUDA runtime runs the
      transfers on a communication stream, with events between it and the
      compute stream).
    The lowered functions get `loom.target = "cuda"`.
    Errors: those of `--loom-lower-cpu`, bf16 excepted (f16 is refused by
    both).
    ```mlir
    llvm.func @loom_fn_train_step(%arg0: !llvm.ptr, %arg1: !llvm.ptr) -> i32 attributes {loom.workspace_bytes = 1048576 : i64, ...}
    ```
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // LOOM_PASSES_LOWERING_PASSES_TD
