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
 * The attributes of each kernel, in their order, are its row of
 * loom/loom_kernels.def, the one list of the kernels (this header's
 * declarations and loom_cuda_kernels.h's come from it). Some notes on them:
 *   layernorm_grad, rmsnorm_grad: a fourth operand, a residual of dx's
 *                      shape, in the --loom-fuse norm gradient: dx +
 *                      residual is stored as dx
 *   attention, attention_grad: has_step says a step is the 4th operand
 *                      (rate 0 without one)
 *   cross_entropy_with_grad: operands dloss, logits, labels; results the
 *                      loss and dlogits: cross_entropy and
 *                      cross_entropy_grad of one loss in one call, the
 *                      `loom.fused` pair of --loom-fuse
 *   collective_wait    its tensors are the transfer's buffers, only listed
 *   all_slice          this rank's member index, the row-major index of its
 *                      coordinates on the grid axes, comes from
 *                      frame->comm->grid_coordinate at run time
 *
 * matmul's epilogue (the `loom.fused` matmul of `--loom-fuse`): 0 none
 * (operands lhs, rhs; result lhs.rhs); 1 bias (operands lhs, rhs, bias;
 * result lhs.rhs + bias); 2 bias_gelu (same operands; result gelu(lhs.rhs +
 * bias)); 3 bias_gelu_aux (same operands; results pre = lhs.rhs + bias,
 * then gelu(pre)); 4 residual (operands lhs, rhs, residual; result
 * lhs.rhs + residual); 5 bias_residual (operands lhs, rhs, bias, residual;
 * result lhs.rhs + bias + residual); 6 bias_grad (operands lhs, rhs, with
 * rhs [k, n] untransposed; results lhs.rhs and db [n], the sum of rhs' k
 * rows: the bias gradient beside a weight gradient x^T.dy); 7
 * dgelu_bias_grad (operands lhs, rhs, pre; results dpre = gelu_grad of
 * lhs.rhs at pre, of the result's shape, and db [n], the sum of dpre's
 * rows). bias is [n], n the result's last dimension, of the result's
 * element type, added to every row; a residual has the result's shape and
 * type; gelu is gelu's (GPT-2's tanh form). The sum is rounded once, at the
 * store, on the GPU (the CPU kernels round as the unfused ops do: f32 sums
 * in the ops' order, db in double as reduce_sum).
 *
 * fused_elementwise (a `loom.fused` chain of elementwise ops, one kernel):
 * every result has one shape, the chain's; each operand broadcasts to it as
 * the binary ops' operands do. After the tensors, the program:
 *
 *   count, then count instructions of 3 values (opcode, a, b), then one
 *   register per result.
 *
 * Registers 0..N-1 hold the operands' elements; instruction i writes
 * register N + i from registers a and b (a register before its own). All
 * arithmetic is in float32 (the instructions of one element, with no
 * rounding between them except a cast's); result r stores register
 * `results[r]` in its element type. Opcodes (loom_fused_opcode): add sub
 * mul div (a op b), neg exp log sqrt rsqrt tanh gelu gelu_erf silu (of a),
 * gelu_grad gelu_erf_grad silu_grad (b's derivative times a: dy = a, x = b,
 * as the ops' operands),
 * cast (a rounded to the loom_dtype b: bf16 rounds to nearest even, f32
 * is a no-op). At most LOOM_FUSED_MAX_INSTRUCTIONS instructions. Both
 * libraries decode and check the program with runtime/common/FusedProgram.h
 * (decodeFusedProgram: same checks, same messages).
 *
 * adamw_update_multi (a `loom.fused` group of adamw_update ops sharing
 * their step and hyperparameters, one call for every parameter): N
 * parameters; operands param_0, grad_0, m_0, v_0, param_1, ..., v_{N-1},
 * then the step (4N + 1); results param'_0, m'_0, v'_0, param'_1, ...
 * (3N). Each parameter's four operands and three results have one element
 * count and the element types adamw_update takes. The call has more than
 * the 16 tensors KernelArgs holds: both libraries decode it with
 * runtime/common/KernelMeta.h's TensorList.
 *
 * The mask block comes last; attention / attention_grad have it only
 * with has_step (the kernel reads no mask block when the rate is 0).
 * The mask block of a dropout site (dropout, dropout_grad, and attention /
 * attention_grad with has_step) says where the local tensor sits in the
 * global one, so that the kernel draws the global element's mask
 * (loom/DropoutMask.h): micro_batches M (1 outside a
 * pipeline; frame->micro_batch says which one runs), the grid's rank G (0
 * when the tensor is not split), the grid's shape (G values), then for
 * each dimension of the masked tensor (x / dy, or attention's q) the
 * number of grid axes splitting it and those axes, major first (nothing
 * when G is 0).
 *
 * The collective kernels pack the tensor dimension they move into member
 * blocks (and unpack after), so the runtime's callbacks only move
 * contiguous blocks, as loom_program.h says. A slot of -1 makes the call
 * communicate and wait; a slot >= 0 (a split collective, --loom-lower-cpu's
 * `overlap`) makes it start the transfer under that slot through
 * loom_comm's *_start callback and return, and the collective_wait call
 * with that slot waits for it (loom_comm's wait). Only a transfer on the
 * kernel's own buffers is split: all_reduce (it copies its operand into
 * its result, then reduces the result in place), and reduce_scatter /
 * all_gather whose operand holds contiguous member blocks of the result's
 * element type; the kernels refuse a slot on any other. `copy` copies its
 * operand into its result (a returned argument, a reshape).
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

/* The opcodes of a fused_elementwise program (see above): the
 * LOOM_FUSIBLE_KERNEL rows of loom/loom_kernels.def. */
typedef enum loom_fused_opcode {
#define LOOM_KERNEL(name, attributes)
#define LOOM_FUSIBLE_KERNEL(name, opcode, number, operands)                    \
  LOOM_FUSED_##opcode = number,
#include "loom/loom_kernels.def"
} loom_fused_opcode;

#define LOOM_FUSED_MAX_INSTRUCTIONS 64

/* matmul's epilogues (see above). */
typedef enum loom_matmul_epilogue {
  LOOM_EPILOGUE_NONE = 0,
  LOOM_EPILOGUE_BIAS = 1,
  LOOM_EPILOGUE_BIAS_GELU = 2,
  LOOM_EPILOGUE_BIAS_GELU_AUX = 3,
  LOOM_EPILOGUE_RESIDUAL = 4,
  LOOM_EPILOGUE_BIAS_RESIDUAL = 5,
  LOOM_EPILOGUE_BIAS_GRAD = 6,
  LOOM_EPILOGUE_DGELU_BIAS_GRAD = 7,
} loom_matmul_epilogue;

#define LOOM_CPU_KERNEL(name)                                                  \
  int32_t loom_cpu_##name(const loom_call_frame *frame, void *const *buffers,  \
                          const int64_t *meta);

#define LOOM_KERNEL(name, attributes) LOOM_CPU_KERNEL(name)
#include "loom/loom_kernels.def"

#undef LOOM_CPU_KERNEL

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CPU_KERNELS_H */
