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
    - with `overlap` (the default), a collective that allows it (every
      `all_reduce`; a `reduce_scatter` / `all_gather` whose operand already
      holds contiguous member blocks of the result's element type: the
      dimensions before the moved one are 1) is split: its call starts the
      transfer under a slot (the last meta value; -1 for a collective that
      waits in its own call) and returns, and a `collective_wait` call for
      that slot stands just before the first call that reads the result (or
      before the function returns). The calls between overlap the transfer
      (loom_program.h's split collectives: gradient all-reduces and
      reduce-scatters under the rest of the backward, ZeRO's all-gathers
      ahead of their use). The wait lists the transfer's buffers, so the
      memory plan keeps them until then. Slots are reused once waited for,
      lowest first.
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
  let options = [
    Option<"overlap", "overlap", "bool", /*default=*/"true",
           "Split all-reduces and contiguous reduce-scatters / all-gathers "
           "into a start and a wait before the first reader">,
  ];
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
      meta (and, with `overlap`, the same starts and
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
  let options = [
    Option<"overlap", "overlap", "bool", /*default=*/"true",
           "Split all-reduces and contiguous reduce-scatters / all-gathers "
           "into a start and a wait before the first reader">,
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def LoomPadVocab : Pass<"loom-pad-vocab", "mlir::ModuleOp"> {
  let summary = "Pad a language model head's logits to an aligned width";
  let description = [{
    Run on per-device programs before `--loom-fuse` (`loom-compile` does,
    unless `--no-pad-vocab`). A vocabulary that is not a multiple of
    `multiple` (GPT-2's 50257) leaves rows of the logits, and of both
    gradients of the head, that GEMM libraries do not read at full speed
    (2-byte aligned in bf16: cuBLASLt's slow kernels, or the CUDA matmul's
    staging through scratch, several passes over the step's largest
    tensor). For each head of that form, in every function:

    - the logits are `loom.matmul %h, %w {transpose_rhs}` with a `[V, d]`
      weight `%w`, read only by `loom.cross_entropy` and
      `loom.cross_entropy_grad` ops;
    - each gradient is read only by `loom.matmul %dlogits, %w'` with a
      `[V, d]` rhs (the gradient of `%h`; `%w'` is `%w`, or a value
      standing for it such as ZeRO's regather, padded the same way) and
      by `loom.matmul` of `%dlogits` (or of it reshaped to `[T, V]`)
      transposed as the lhs (the gradient of `%w`),

    the weight is padded with zero rows to `Vp`, the next multiple
    (`loom.pad`), the product gets a bias of 0 over the vocabulary and
    -inf over the padding (a rank-1 `arith.constant`, which `--loom-fuse`
    makes the matmul's bias epilogue), and the losses, gradients and
    backward matmuls read the `[..., Vp]` values; the weight gradient's
    `Vp` rows are cut back to `V` by a `loom.slice`. exp(-inf) adds
    nothing to a row's sum of exponentials and its softmax is 0 there, so
    the loss and every gradient are those of the original head; only
    intermediates change shape (parameters, optimizer state and
    checkpoints do not). Other heads are left alone: logits that another
    op reads (a pipeline stage returning them for its backward), or that
    come through a collective (a head split along `d`, whose partial
    logits are all-reduced). A label in [V, Vp) is no longer refused by
    the loss (its logit is -inf: an infinite loss); the embedding lookup
    of the same token id still is. `multiple` is 1 to 65536.

    ```mlir
    %wp = loom.pad %w low [0, 0] : tensor<50257x768xbf16> -> tensor<50304x768xbf16>
    %p = loom.matmul %h, %wp {transpose_rhs} : (...) -> tensor<8x1024x50304xbf16>
    %logits = loom.add %p, %mask : (tensor<8x1024x50304xbf16>, tensor<50304xbf16>) -> ...
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"64",
           "pad the vocabulary to a multiple of this (16-byte aligned "
           "rows need 8 in bf16, 4 in f32)">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def LoomFuse : Pass<"loom-fuse", "mlir::ModuleOp"> {
  let summary = "Group ops that one kernel call can run into loom.fused";
  let description = [{
    Run on per-device programs right before `--loom-lower-cpu` /
    `--loom-lower-cuda` (`loom-compile` does, unless `--no-fuse`). In every
    function of one block:
    - **matmul epilogues**: a `loom.matmul` whose only user is a
      `loom.add` of a bias (rank 1, the result's last dimension, the same
      element type), and a `loom.gelu` of that sum when there is one (its
      other users, a `loom.gelu_grad` in a training step, must come after
      the gelu), become one `loom.fused` with inputs (lhs, rhs, bias): one
      `matmul` call with a bias or bias-gelu epilogue (cuBLASLt's on the
      GPU), the sum kept as a second result where it is used elsewhere.
      A residual added to the product (or to the biased sum, when nothing
      else reads it), a tensor of the product's type other than the
      matmul's operands, joins too: the residual and bias_residual
      epilogues (cuBLASLt's C input, beta = 1);
    - **backward epilogues**: a matmul read only by a `loom.gelu_grad`
      whose rows (every dimension but the last) a `loom.reduce_sum` sums,
      as a linear layer's dX and bias gradient before a gelu are, becomes
      one `loom.fused` (lhs, rhs, pre) -> (dpre, db), the dgelu_bias_grad
      epilogue (cuBLASLt's DGELU_BGRAD); a `loom.reduce_sum` of dy's rows
      beside a matmul whose untransposed rank-2 rhs is dy (or dy reshaped
      to [rows, n]), a weight gradient x^T.dy and its bias gradient,
      becomes one `loom.fused` (lhs, rhs) -> (dw, db), the bias_grad
      epilogue (cuBLASLt's BGRADA), its reduce_sum rewritten over the rhs.
      Each stands after the latest of its ops that every reader of its
      results follows, or is not formed;
    - **losses**: a `loom.cross_entropy` and a `loom.cross_entropy_grad`
      of the same logits, labels and token count become one `loom.fused`
      (dloss, logits, labels) -> (loss, dlogits), one
      `cross_entropy_with_grad` call, which on the GPU takes each row's
      maximum and sum of exponentials once for both (the logits are read
      twice instead of three times);
    - **norm gradients**: a `loom.layernorm_grad` or `loom.rmsnorm_grad`
      whose dx only a `loom.add` of a residual (a tensor of dx's type other
      than the norm's operands) reads, as each block's input gradient in a
      pre-norm transformer is, becomes one `loom.fused` (dy, x, gamma,
      residual) -> (dx + residual, dgamma[, dbeta]): one norm gradient
      call that adds the residual as it stores dx;
    - **elementwise chains**: connected ops of one result shape among add,
      sub, mul, div, neg, exp, log, sqrt, rsqrt, tanh, cast, gelu,
      gelu_grad, gelu_erf, gelu_erf_grad, silu and silu_grad on f32 / bf16 tensors become one
      `loom.fused` run by one `fused_elementwise` call; its results are the
      values used outside the chain. A chain grows while no other op reads
      its values in between (the fused op stands where its last op stood),
      up to 64 ops and 16 tensors;
    - **optimizer updates**: consecutive `loom.adamw_update` ops sharing
      their step and hyperparameters become one `loom.fused` run by one
      multi-tensor `adamw_update_multi` call (inputs param, grad, m, v of
      each, then the step); a gradient's widening `loom.cast` read by its
      update alone moves inside (the kernels widen a bf16 gradient as they
      load it).
    The fused op computes what the ops computed; f32 results are the same
    bit for bit on the CPU, and on the GPU bf16 values between the ops of a
    chain are no longer rounded (they stay f32 registers).
    ```mlir
    %1 = loom.fused(%x, %y, %b) : (...) -> tensor<8x64xbf16> { ... loom.yield %3 : ... }
    ```
  }];
  let options = [
    Option<"epilogues", "epilogues", "bool", /*default=*/"true",
           "fuse a matmul with its bias add and gelu or residual add, and "
           "backward matmuls with their gelu gradient and bias gradient">,
    Option<"losses", "losses", "bool", /*default=*/"true",
           "fuse a cross-entropy loss with its gradient">,
    Option<"norms", "norms", "bool", /*default=*/"true",
           "fuse a norm's gradient with the residual add of its dx">,
    Option<"elementwise", "elementwise", "bool", /*default=*/"true",
           "fuse chains of elementwise ops">,
    Option<"optimizer", "optimizer", "bool", /*default=*/"true",
           "fuse runs of AdamW updates into one multi-tensor call">,
  ];
}

#endif // LOOM_PASSES_LOWERING_PASSES_TD
