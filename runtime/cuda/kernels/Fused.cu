//===- Fused.cu - A chain of elementwise ops in one kernel ----------------===//
//
// loom_cuda_fused_elementwise runs the program of a `loom.fused` chain
// (loom_cpu_kernels.h: registers 0..N-1 hold the operands' elements,
// instruction i writes register N + i) over the results' shape in one
// launch. The program is decoded and checked by runtime/common/
// FusedProgram.h, as the CPU kernel decodes it (same messages). Each thread
// takes elements of the results' shape (a grid-stride loop), loads each
// operand's element as f32, broadcast as the binary ops broadcast
// (Elementwise.cu's coalesced walk, for N operands), runs the instructions
// and stores each result's register in its element type: one rounding per
// result, none between instructions but a cast's.
//
// The program and the walk travel by value in the kernel's parameters (no
// allocation, no copy): the instruction loop reads them from the constant
// bank, and its switch on the opcode takes the same branch in every
// thread. The registers are indexed at run time, so they live in the
// thread's local memory (L1); the memory traffic this kernel saves is the
// intermediate tensors' round trips through DRAM.
//
// The arithmetic is the unfused kernels': Elementwise.cu's formulas for
// the arithmetic and math ops, Activation.cuh's gelu, silu and their
// derivatives (Norm.cu's), and a bf16 store's rounding for the cast.
//
//===----------------------------------------------------------------------===//

#include "Activation.cuh"
#include "Device.cuh"

#include "FusedProgram.h"

namespace loom::cuda {
namespace {

constexpr int kMaxRegisters = kMaxTensors + LOOM_FUSED_MAX_INSTRUCTIONS;

/// Writes register N + i from registers `a` and `b` (`b`: cast's loom_dtype;
/// 0 for the unary ops).
struct Instruction {
  int16_t opcode, a, b;
};

/// Everything a launch needs, passed by value.
struct LaunchProgram {
  int32_t operands = 0, results = 0, count = 0;
  /// The results' dimensions as a broadcast walk, outermost first (size-1
  /// dimensions dropped, neighbours merged where every operand reads across
  /// them as across one), and each operand's stride along them (0 where it
  /// stretches, and past `rank`).
  int32_t rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxTensors][kMaxRank] = {};
  Floats in[kMaxTensors] = {};
  Floats out[kMaxTensors] = {};
  Instruction code[LOOM_FUSED_MAX_INSTRUCTIONS] = {};
  /// The register each result stores.
  int16_t result[kMaxTensors] = {};
};

// Kernel parameters are limited to 4 KiB before CUDA 12.1.
static_assert(sizeof(LaunchProgram) <= 4096, "LaunchProgram outgrew 4 KiB");

/// The value instruction `ins` writes. rsqrt is 1 / sqrtf as in
/// Elementwise.cu (not the approximate rsqrtf); the activation gradients
/// are dy * f'(x) with dy = a, x = b, as Norm.cu's activation_backward.
__device__ __forceinline__ float evaluate(Instruction ins, const float *reg) {
  float a = reg[ins.a];
  switch (ins.opcode) {
  case LOOM_FUSED_ADD:
    return a + reg[ins.b];
  case LOOM_FUSED_SUB:
    return a - reg[ins.b];
  case LOOM_FUSED_MUL:
    return a * reg[ins.b];
  case LOOM_FUSED_DIV:
    return a / reg[ins.b];
  case LOOM_FUSED_NEG:
    return -a;
  case LOOM_FUSED_EXP:
    return expf(a);
  case LOOM_FUSED_LOG:
    return logf(a);
  case LOOM_FUSED_SQRT:
    return sqrtf(a);
  case LOOM_FUSED_RSQRT:
    return 1.0f / sqrtf(a);
  case LOOM_FUSED_TANH:
    return tanhf(a);
  case LOOM_FUSED_CAST:
    return ins.b == LOOM_DTYPE_BF16 ? roundBf16(a) : a;
  case LOOM_FUSED_GELU:
    return gelu(a);
  case LOOM_FUSED_GELU_GRAD:
    return a * geluDerivative(reg[ins.b]);
  case LOOM_FUSED_GELU_ERF:
    return geluErf(a);
  case LOOM_FUSED_GELU_ERF_GRAD:
    return a * geluErfDerivative(reg[ins.b]);
  case LOOM_FUSED_SILU:
    return silu(a);
  case LOOM_FUSED_SILU_GRAD:
    return a * siluDerivative(reg[ins.b]);
  default: // the host checked the opcodes
    return a;
  }
}

/// `kContiguous`: every operand has the results' shape (a walk of at most
/// one dimension, stride 1), so element e of each is at e.
template <bool kContiguous>
__global__ void fused_elementwise_forward_kernel(const LaunchProgram program,
                                                 int64_t n) {
  LOOM_GRID_STRIDE(e, n) {
    float reg[kMaxRegisters];
    int64_t index[kMaxRank];
    int64_t rest = e;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      index[d] = 0;
      if (!kContiguous && d < program.rank) {
        index[d] = rest % program.size[d];
        rest /= program.size[d];
      }
    }
#pragma unroll
    for (int t = 0; t < kMaxTensors; ++t) {
      if (t < program.operands) {
        int64_t offset = e;
        if (!kContiguous) {
          offset = 0;
#pragma unroll
          for (int d = 0; d < kMaxRank; ++d)
            offset += index[d] * program.stride[t][d];
        }
        reg[t] = program.in[t][offset];
      }
    }
    for (int i = 0; i < program.count; ++i)
      reg[program.operands + i] = evaluate(program.code[i], reg);
#pragma unroll
    for (int r = 0; r < kMaxTensors; ++r)
      if (r < program.results)
        program.out[r].store(e, reg[program.result[r]]);
  }
}

/// The launch's copy of a decoded program, with the walk over the results'
/// shape (see LaunchProgram) coalesced as Elementwise.cu coalesces a binary
/// op's.
LaunchProgram launchProgram(const KernelArgs &args,
                            const kernels::FusedProgram &decoded) {
  LaunchProgram program;
  program.operands = decoded.operands;
  program.results = decoded.results;
  program.count = decoded.count;
  for (int32_t i = 0; i < decoded.count; ++i) {
    const kernels::FusedInstruction &in = decoded.code[i];
    program.code[i] = {static_cast<int16_t>(in.opcode),
                       static_cast<int16_t>(in.a), static_cast<int16_t>(in.b)};
  }
  for (int32_t r = 0; r < decoded.results; ++r) {
    program.result[r] = static_cast<int16_t>(decoded.resultRegister[r]);
    program.out[r] = floats(args.out(r));
  }
  for (int32_t t = 0; t < decoded.operands; ++t)
    program.in[t] = floats(args.in(t));
  for (int64_t d = 0; d < decoded.rank; ++d) {
    int64_t size = decoded.dims[d];
    if (size == 1)
      continue;
    int last = program.rank - 1;
    bool merge = last >= 0;
    for (int32_t t = 0; merge && t < program.operands; ++t)
      merge = program.stride[t][last] == decoded.strides[t][d] * size;
    int at = merge ? last : program.rank++;
    program.size[at] = merge ? program.size[at] * size : size;
    for (int32_t t = 0; t < program.operands; ++t)
      program.stride[t][at] = decoded.strides[t][d];
  }
  return program;
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" int32_t loom_cuda_fused_elementwise(const loom_call_frame *,
                                               void *const *buffers,
                                               const int64_t *meta,
                                               loom_cuda_context *context) {
  ProfileScope scope(context, "fused_elementwise");
  KernelArgs args(buffers, meta);
  loom::kernels::FusedProgram decoded;
  char error[256];
  if (!loom::kernels::decodeFusedProgram(
          args, "loom_cuda_fused_elementwise",
          [](loom_dtype dtype) {
            return dtype == LOOM_DTYPE_F32 || dtype == LOOM_DTYPE_BF16;
          },
          decoded, error, sizeof error))
    return fail("%s", error);
  int64_t n = decoded.numElements();
  if (n == 0)
    return 0;
  LaunchProgram program = launchProgram(args, decoded);
  bool contiguous = program.rank <= 1;
  for (int32_t t = 0; contiguous && program.rank == 1 && t < program.operands;
       ++t)
    contiguous = program.stride[t][0] == 1;
  if (contiguous)
    fused_elementwise_forward_kernel<true>
        <<<blocksFor(n), kThreads, 0, context->stream>>>(program, n);
  else
    fused_elementwise_forward_kernel<false>
        <<<blocksFor(n), kThreads, 0, context->stream>>>(program, n);
  return checkLaunch("fused_elementwise");
}
