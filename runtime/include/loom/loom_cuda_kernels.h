/*===- loom_cuda_kernels.h - The kernels compiled CUDA code calls ---------===*
 *
 * The CUDA twin of loom_cpu_kernels.h: one entry point per op, called with
 * the same `buffers` and the same `meta` (operand and result descriptions,
 * then the op's attributes, in the order loom_cpu_kernels.h lists them;
 * passes/Lowering/KernelCall.cpp writes them), so that `--loom-lower-cuda`
 * emits exactly the calls `--loom-lower-cpu` does, with one more argument:
 *
 *   int32_t loom_cuda_<op>(const loom_call_frame *frame,
 *                          void *const *buffers, const int64_t *meta,
 *                          loom_cuda_context *context);
 *
 * `buffers` are device pointers (dense, row-major, at the local shape);
 * `frame` and `meta` live in host memory. `frame` is read only by the
 * dropout sites (frame->comm->grid_coordinate and frame->micro_batch, as on
 * the CPU) and the collectives (frame->comm, see Collectives) and may be
 * null elsewhere.
 *
 * The context: why an extra argument. A kernel needs a stream, a cuBLASLt
 * handle and device scratch memory, none of which loom_call_frame holds,
 * and loom_program.h is shared with the CPU path. The context is an opaque
 * handle the runtime creates once per device (per rank) and passes through
 * the compiled function (`loom_fn_<f>(frame, context)` on the CUDA path,
 * see --loom-lower-cuda) to every kernel call. It owns:
 *   - the stream every kernel is enqueued on (the caller's; kernels never
 *     synchronize it, so a step's kernels run back to back),
 *   - a cuBLASLt handle,
 *   - one scratch area in device memory, used as the cuBLASLt workspace by
 *     matmul and for temporaries by the kernels listed below; the kernels
 *     of one stream run in order, so they share it,
 *   - a device error word (see Errors).
 * Kernels never synchronize and never print; none allocates but the
 * collectives' packed buffers (stream-ordered, see Collectives).
 *
 * Element types. Every floating-point tensor may be f32 or bf16 (bf16
 * storage, f32 arithmetic), each tensor independently, except:
 *   matmul            lhs and rhs of one type; f32 inputs give an f32
 *                     result, bf16 inputs a bf16 or an f32 one (cuBLASLt,
 *                     f32 accumulation); an epilogue's bias has the
 *                     result's type, bias_gelu_aux's two results one type
 *   adamw_update      m, v, m', v' f32 (optimizer state stays f32); param,
 *                     grad, param' f32 or bf16 (adamw_update_multi: the
 *                     same for each parameter)
 *   cross_entropy     the loss is f32 (or bf16); dloss likewise
 *   layout ops        copy, reshape, transpose, broadcast, slice, pad and
 *                     concat move elements of any type (f64 and integers
 *                     too) by their size
 * f64 arithmetic has no CUDA kernel (the float64 reference is the
 * interpreter's). Integer operands (ids, labels, the step) are i32 or i64.
 * Row statistics (means, variances, softmax sums, log-sum-exps) and the
 * sums over rows (dgamma, dbeta) accumulate in f32, reduce_sum /
 * reduce_mean in f64; results are rounded once, at the store.
 *
 * Scratch needed (bytes; a kernel given too little fails naming the size):
 *   matmul              none required; cuBLASLt may use all of it
 *   layernorm_grad      8 * rows + 8 * D at least (more is faster)
 *   rmsnorm_grad        4 * rows + 4 * D at least
 *   cross_entropy       8 (cross_entropy_with_grad too; more is faster)
 *   attention_grad      4 * B * Hq * S
 *   embedding_grad      4 * V * D when the result is bf16 (f32: none)
 *
 * Errors. A kernel returns 0 or a non-zero status after recording the
 * message loom_cuda_last_error() returns (an unsupported element type, a
 * shape the kernel does not take, a launch or cuBLASLt failure). What only
 * the device can see — an id or label outside the vocabulary, an AdamW
 * step below 1 — is recorded in the context's device error word (the first
 * one wins; the offending rows read as zeros, an AdamW update writes
 * nothing) and returned by loom_cuda_context_synchronize() with the CPU
 * kernel's message.
 *
 * Collectives. all_reduce, reduce_scatter, all_gather, all_to_all,
 * all_slice and collective_wait take the CPU collectives' meta (the first
 * three end with a slot, collective_wait is its tensors and a slot: see
 * loom_cpu_kernels.h) and give the CPU kernels' results, checks and
 * messages (runtime/cpu/kernels/Collectives.cpp): the kernel packs the
 * moved dimension into member blocks, calls the callback of `frame->comm`,
 * unpacks, and returns the callback's non-zero status as it is. A slot of
 * -1 calls the blocking callback; a slot >= 0 (a split collective: no
 * packing around it, the shared readers refuse the slot otherwise) calls
 * the *_start callback and returns with the transfer in flight, and the
 * collective_wait call with that slot calls loom_comm's wait. The
 * contract with the runtime's loom_comm:
 *   - the callbacks receive DEVICE pointers (`buf`, `send`, `recv`);
 *   - they are ordered with the context's stream: a blocking callback or
 *     a start sees the results of all work enqueued on it before the call
 *     (the packing, all_reduce's copy of its operand into its result), and
 *     work enqueued after a blocking call returns (the unpacking, the next
 *     kernels), or after the wait of a start returns, sees the transfer's
 *     results. Between a start and its wait the transfer may run beside
 *     the kernels enqueued in between, which never touch its buffers.
 *     NCCL gives this with a communication stream and events (see
 *     runtime/cuda/comm/NcclComm.h); a host-staged path (MPI)
 *     synchronizes the stream first and has its results in `recv` / `buf`
 *     before it returns (or enqueues the copy back on the stream), the
 *     start included (its wait then only frees the slot);
 *   - grid_coordinate (all_slice) is a host call, as on the CPU.
 * The packed buffers (when the moved dimension is not the leading one, or
 * reduce_scatter converts the element type) come from the stream's memory
 * pool (cudaMallocAsync) and go back to it on the stream (cudaFreeAsync)
 * after the callback and the unpacking; a failed allocation fails the
 * kernel with the buffer's size. Collectives move f32, bf16, f64, i32
 * and i64; all_reduce and reduce_scatter convert the operand to the
 * result's element type first (bf16 rounded to nearest even, as on the
 * CPU). all_slice communicates nothing: one strided copy of this rank's
 * piece (its member index from frame->comm->grid_coordinate).
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_CUDA_KERNELS_H
#define LOOM_CUDA_KERNELS_H

#include "loom/loom_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without the CUDA headers. */
struct CUstream_st;

typedef struct loom_cuda_context loom_cuda_context;

/* Creates a context on the current device for `stream` (null: the legacy
 * default stream) with `scratch_bytes` of device scratch (0: 64 MiB). */
int32_t loom_cuda_context_create(struct CUstream_st *stream,
                                 int64_t scratch_bytes,
                                 loom_cuda_context **out_context);

/* Frees the context (after the stream's work is done). Null is a no-op. */
void loom_cuda_context_destroy(loom_cuda_context *context);

/* Waits for the context's stream; returns non-zero (and records the
 * message) for an asynchronous CUDA error or a device-side kernel error,
 * which it then clears. */
int32_t loom_cuda_context_synchronize(loom_cuda_context *context);

/* The message of the last failure on this thread ("" if none). */
const char *loom_cuda_last_error(void);

#define LOOM_CUDA_KERNEL(name)                                                 \
  int32_t loom_cuda_##name(const loom_call_frame *frame, void *const *buffers, \
                           const int64_t *meta, loom_cuda_context *context);

/* Elementwise (numpy broadcasting for the binary ops) and casts. */
LOOM_CUDA_KERNEL(add)
LOOM_CUDA_KERNEL(sub)
LOOM_CUDA_KERNEL(mul)
LOOM_CUDA_KERNEL(div)
LOOM_CUDA_KERNEL(neg)
LOOM_CUDA_KERNEL(exp)
LOOM_CUDA_KERNEL(log)
LOOM_CUDA_KERNEL(sqrt)
LOOM_CUDA_KERNEL(rsqrt)
LOOM_CUDA_KERNEL(tanh)
LOOM_CUDA_KERNEL(cast)
LOOM_CUDA_KERNEL(copy)
/* A chain of elementwise ops (loom_cpu_kernels.h's fused_elementwise
 * program) in one launch: every operand broadcast to the results' shape,
 * the instructions in f32 per element, each result rounded once at its
 * store. Operands and results f32 or bf16, at most 16 tensors in all. */
LOOM_CUDA_KERNEL(fused_elementwise)
/* A constant of the compiled program into device memory: copy's meta,
 * buffers[0] a host pointer (the program's global), buffers[1] its device
 * destination; an asynchronous host-to-device copy on the context's
 * stream. */
LOOM_CUDA_KERNEL(upload)
/* Layout and reductions. */
LOOM_CUDA_KERNEL(reshape)
LOOM_CUDA_KERNEL(transpose)
LOOM_CUDA_KERNEL(broadcast)
LOOM_CUDA_KERNEL(slice)
LOOM_CUDA_KERNEL(pad)
LOOM_CUDA_KERNEL(concat)
LOOM_CUDA_KERNEL(reduce_sum)
LOOM_CUDA_KERNEL(reduce_mean)
LOOM_CUDA_KERNEL(reduce_max)
LOOM_CUDA_KERNEL(reduce_max_grad)
/* Neural ops and their gradients. */
LOOM_CUDA_KERNEL(matmul)
LOOM_CUDA_KERNEL(layernorm)
LOOM_CUDA_KERNEL(layernorm_grad)
LOOM_CUDA_KERNEL(rmsnorm)
LOOM_CUDA_KERNEL(rmsnorm_grad)
LOOM_CUDA_KERNEL(gelu)
LOOM_CUDA_KERNEL(gelu_grad)
LOOM_CUDA_KERNEL(gelu_erf)
LOOM_CUDA_KERNEL(gelu_erf_grad)
LOOM_CUDA_KERNEL(silu)
LOOM_CUDA_KERNEL(silu_grad)
LOOM_CUDA_KERNEL(softmax)
LOOM_CUDA_KERNEL(softmax_grad)
LOOM_CUDA_KERNEL(rope)
LOOM_CUDA_KERNEL(rope_grad)
LOOM_CUDA_KERNEL(attention)
LOOM_CUDA_KERNEL(attention_grad)
LOOM_CUDA_KERNEL(embedding)
LOOM_CUDA_KERNEL(embedding_grad)
LOOM_CUDA_KERNEL(cross_entropy)
LOOM_CUDA_KERNEL(cross_entropy_grad)
LOOM_CUDA_KERNEL(cross_entropy_with_grad)
LOOM_CUDA_KERNEL(dropout)
LOOM_CUDA_KERNEL(dropout_grad)
/* Optimizer updates. */
LOOM_CUDA_KERNEL(adamw_update)
LOOM_CUDA_KERNEL(sgd_update)
/* adamw_update over N parameters in one call (loom_cpu_kernels.h's
 * operands and results), each parameter's types as adamw_update takes them:
 * a few multi-tensor launches, each parameter's results bit-identical to
 * its own adamw_update call's. */
LOOM_CUDA_KERNEL(adamw_update_multi)
/* Collectives over frame->comm (see Collectives). */
LOOM_CUDA_KERNEL(all_reduce)
LOOM_CUDA_KERNEL(reduce_scatter)
LOOM_CUDA_KERNEL(all_gather)
LOOM_CUDA_KERNEL(all_to_all)
LOOM_CUDA_KERNEL(all_slice)
/* The end of a split collective: waits for the transfer started under its
 * slot (its tensors, the transfer's buffers, are only listed). */
LOOM_CUDA_KERNEL(collective_wait)

#undef LOOM_CUDA_KERNEL

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CUDA_KERNELS_H */
