/*===- loom_cpu_kernels.h - The kernels compiled CPU code calls ----------===*
 *
 * `--loom-lower-cpu` turns every op of a per-device function into one call
 * of a kernel of this library (runtime/cpu/kernels), which the runtime
 * provides to program.so when it loads it. Every kernel has one signature:
 *
 *   int32_t loom_cpu_<op>(const loom_call_frame *frame,
 *                         void *const *buffers, const int64_t *meta);
 *
 * where <op> is the op's name without its dialect (`loom.layernorm_grad` →
 * loom_cpu_layernorm_grad, `shard.all_reduce` → loom_cpu_all_reduce).
 *
 * `buffers` holds the op's operands in order, then its results: dense,
 * row-major, at the local shape. Results never alias operands.
 *
 * `meta` describes them, then the op's attributes:
 *
 *   meta[0] = number of operands N, meta[1] = number of results M,
 *   then for each of the N + M tensors: dtype (loom_dtype), rank, dims...,
 *   then the op's attributes, as listed below. A floating-point attribute
 *   is the bit pattern of its double; a unit attribute is 0 or 1; an array
 *   attribute is its length followed by its elements.
 *
 * Kernels return 0, or a non-zero status after recording a message that
 * loom_cpu_last_error() returns (for example a token id outside the
 * vocabulary). Collectives return the status of the communication callback
 * of `frame->comm`. Kernels compute in float32 (float64 where the element
 * type says so, for the layout ops and collectives that move f64) and
 * accumulate reductions in double.
 *
 * Attributes, by op (ops not listed have none):
 *   matmul             transpose_lhs, transpose_rhs
 *   layernorm          epsilon
 *   layernorm_grad     epsilon
 *   rmsnorm            epsilon
 *   rmsnorm_grad       epsilon
 *   softmax            causal
 *   rope, rope_grad    theta
 *   attention          causal, scale, has_step, dropout_rate, dropout_seed,
 *                      dropout_key      (has_step: a step operand is the
 *                                        4th operand; rate 0 without one)
 *   attention_grad     causal, scale, has_step, dropout_rate, dropout_seed,
 *                      dropout_key
 *   cross_entropy      token_count (0 when absent: all labels' count)
 *   cross_entropy_grad token_count
 *   reduce_sum, reduce_mean, reduce_max, reduce_max_grad
 *                      dims (array), keep_dims
 *   transpose          permutation (array)
 *   slice              offsets (array)
 *   pad                low (array)
 *   concat             axis
 *   dropout, dropout_grad
 *                      rate, seed, key, then the mask block
 *   adamw_update       lr, beta1, beta2, eps, weight_decay
 *   sgd_update         lr, weight_decay
 *   all_reduce         group, reduction (loom_reduction)
 *   reduce_scatter     group, reduction, members, scatter_axis
 *   all_gather         group, members, gather_axis
 *   all_to_all         group, members, split_axis, concat_axis
 *   all_slice          group, slice_axis, grid axes (array), their sizes
 *                      (array): this rank's member index, the row-major
 *                      index of its coordinates on those axes, comes from
 *                      frame->comm->grid_coordinate at run time
 *
 * The mask block comes last; attention / attention_grad have it only
 * with has_step (the kernel reads no mask block when the rate is 0).
 * The mask block of a dropout site (dropout, dropout_grad, and attention /
 * attention_grad with has_step) says where the local tensor sits in the
 * global one, so that the kernel draws the global element's mask
 * (include/loom/Interpreter/DropoutMask.h): micro_batches M (1 outside a
 * pipeline; frame->micro_batch says which one runs), the grid's rank G (0
 * when the tensor is not split), the grid's shape (G values), then for
 * each dimension of the masked tensor (x / dy, or attention's q) the
 * number of grid axes splitting it and those axes, major first (nothing
 * when G is 0).
 *
 * The collective kernels pack the tensor dimension they move into member
 * blocks (and unpack after), so the runtime's callbacks only move
 * contiguous blocks, as loom_program.h says. `copy` copies its operand
 * into its result (a returned argument, a reshape).
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_CPU_KERNELS_H
#define LOOM_CPU_KERNELS_H

#include "loom/loom_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the last failed kernel on this thread ("" if none). */
const char *loom_cpu_last_error(void);

#define LOOM_CPU_KERNEL(name)                                                  \
  int32_t loom_cpu_##name(const loom_call_frame *frame, void *const *buffers,  \
                          const int64_t *meta);

/* Elementwise (numpy broadcasting for the binary ops) and casts. */
LOOM_CPU_KERNEL(add)
LOOM_CPU_KERNEL(sub)
LOOM_CPU_KERNEL(mul)
LOOM_CPU_KERNEL(div)
LOOM_CPU_KERNEL(neg)
LOOM_CPU_KERNEL(exp)
LOOM_CPU_KERNEL(log)
LOOM_CPU_KERNEL(sqrt)
LOOM_CPU_KERNEL(rsqrt)
LOOM_CPU_KERNEL(tanh)
LOOM_CPU_KERNEL(cast)
LOOM_CPU_KERNEL(copy)
/* Layout and reductions. */
LOOM_CPU_KERNEL(reshape)
LOOM_CPU_KERNEL(transpose)
LOOM_CPU_KERNEL(broadcast)
LOOM_CPU_KERNEL(slice)
LOOM_CPU_KERNEL(pad)
LOOM_CPU_KERNEL(concat)
LOOM_CPU_KERNEL(reduce_sum)
LOOM_CPU_KERNEL(reduce_mean)
LOOM_CPU_KERNEL(reduce_max)
LOOM_CPU_KERNEL(reduce_max_grad)
/* Neural ops and their gradients. */
LOOM_CPU_KERNEL(matmul)
LOOM_CPU_KERNEL(layernorm)
LOOM_CPU_KERNEL(layernorm_grad)
LOOM_CPU_KERNEL(rmsnorm)
LOOM_CPU_KERNEL(rmsnorm_grad)
LOOM_CPU_KERNEL(gelu)
LOOM_CPU_KERNEL(gelu_grad)
LOOM_CPU_KERNEL(silu)
LOOM_CPU_KERNEL(silu_grad)
LOOM_CPU_KERNEL(softmax)
LOOM_CPU_KERNEL(softmax_grad)
LOOM_CPU_KERNEL(rope)
LOOM_CPU_KERNEL(rope_grad)
LOOM_CPU_KERNEL(attention)
LOOM_CPU_KERNEL(attention_grad)
LOOM_CPU_KERNEL(embedding)
LOOM_CPU_KERNEL(embedding_grad)
LOOM_CPU_KERNEL(cross_entropy)
LOOM_CPU_KERNEL(cross_entropy_grad)
LOOM_CPU_KERNEL(dropout)
LOOM_CPU_KERNEL(dropout_grad)
/* Optimizer updates. */
LOOM_CPU_KERNEL(adamw_update)
LOOM_CPU_KERNEL(sgd_update)
/* Collectives over frame->comm. */
LOOM_CPU_KERNEL(all_reduce)
LOOM_CPU_KERNEL(reduce_scatter)
LOOM_CPU_KERNEL(all_gather)
LOOM_CPU_KERNEL(all_to_all)
LOOM_CPU_KERNEL(all_slice)

#undef LOOM_CPU_KERNEL

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CPU_KERNELS_H */
