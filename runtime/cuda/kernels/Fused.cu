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
// thread.
//
// By default (LOOM_CUDA_FUSED=general: never), a contiguous chain (every
// operand of the results' shape, as SwiGLU's forward and backward are) runs
// a rewritten program instead: each thread
// takes 8 consecutive elements, with one 16-byte load or store per bf16
// tensor when every tensor is 16-byte aligned, and runs each instruction
// once for all 8, on "slots" (8 registers each) that the host assigns to
// the program's registers by liveness. A slot is picked by a jump on its
// index, so the values stay in registers. Its cost is the memory traffic
// then: the interpreter's decode, local-memory registers and per-element
// index arithmetic are what made the general kernel run at a fraction of
// the bandwidth. The general kernel keeps the broadcasts and programs of
// more live values than slots; its registers, indexed at run time, live
// in the thread's local memory (L1).
//
// The arithmetic is the unfused kernels': Elementwise.cu's formulas for
// the arithmetic and math ops, Activation.cuh's gelu, silu and their
// derivatives (Norm.cu's), and a bf16 store's rounding for the cast.
//
//===----------------------------------------------------------------------===//

#include "Activation.cuh"
#include "Device.cuh"

#include "FusedProgram.h"
#include "FusedSlots.h"

#include <cstdlib>
#include <cstring>
#include <type_traits>

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

/// The value `opcode` computes from `a` and `b` (`castType`: a cast's
/// loom_dtype). rsqrt is 1 / sqrtf as in Elementwise.cu (not the
/// approximate rsqrtf); the activation gradients are dy * f'(x) with
/// dy = a, x = b, as Norm.cu's activation_backward. Both kernels below
/// compute through it, so they agree bit for bit.
__device__ __forceinline__ float evaluate(int opcode, float a, float b,
                                          int castType) {
  switch (opcode) {
  case LOOM_FUSED_ADD:
    return a + b;
  case LOOM_FUSED_SUB:
    return a - b;
  case LOOM_FUSED_MUL:
    return a * b;
  case LOOM_FUSED_DIV:
    return a / b;
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
    return castType == LOOM_DTYPE_BF16 ? roundBf16(a) : a;
  case LOOM_FUSED_GELU:
    return gelu(a);
  case LOOM_FUSED_GELU_GRAD:
    return a * geluDerivative(b);
  case LOOM_FUSED_GELU_ERF:
    return geluErf(a);
  case LOOM_FUSED_GELU_ERF_GRAD:
    return a * geluErfDerivative(b);
  case LOOM_FUSED_SILU:
    return silu(a);
  case LOOM_FUSED_SILU_GRAD:
    return a * siluDerivative(b);
  default: // the host checked the opcodes
    return a;
  }
}

/// The value instruction `ins` writes (`b` of a unary op is 0, register 0;
/// a cast's is its type).
__device__ __forceinline__ float evaluate(Instruction ins, const float *reg) {
  float b = ins.opcode == LOOM_FUSED_CAST ? 0.0f : reg[ins.b];
  return evaluate(ins.opcode, reg[ins.a], b, ins.b);
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

using kernels::kMaxSlots;
/// FusedSlots.h's steps: an instruction on slots, or a store (kStore).
using Step = kernels::SlotStep;
constexpr int8_t kStore = kernels::kSlotStore;

/// The contiguous kernel's program: the instructions rewritten over a few
/// "slots", registers of the thread that each hold 8 consecutive elements
/// of one program register while it is live (see slotProgram). A slot is
/// named by a run-time index, but each access is a branch on that index,
/// the same in every thread, to code that names the slot's registers as
/// constants: no local memory, and one decode per 8 elements.
struct SlotProgram {
  /// Slot j < loads starts as operand in[j]'s elements.
  int32_t loads = 0, steps = 0;
  Floats in[kMaxSlots] = {};
  Floats out[kMaxTensors] = {};
  Step step[LOOM_FUSED_MAX_INSTRUCTIONS + kMaxTensors] = {};
};

static_assert(sizeof(SlotProgram) <= 4096, "SlotProgram outgrew 4 KiB");

/// fn(std::integral_constant<int, slot>()): a switch whose cases name the
/// slot as a constant. A switch of at least 4 cases stays a jump (the
/// compiler turns two-way choices into selects, which would move every
/// slot's registers where a jump moves one slot's).
template <int kSlots, typename Fn>
__device__ __forceinline__ void withSlot(int slot, Fn fn) {
  static_assert(kSlots >= 4 && kSlots <= 8, "a switch of 4 to 8 cases");
  switch (slot) {
  case 0:
    fn(std::integral_constant<int, 0>());
    break;
  case 1:
    fn(std::integral_constant<int, 1>());
    break;
  case 2:
    fn(std::integral_constant<int, 2>());
    break;
  case 3:
    fn(std::integral_constant<int, 3>());
    break;
  case 4:
    if constexpr (kSlots > 4)
      fn(std::integral_constant<int, 4>());
    break;
  case 5:
    if constexpr (kSlots > 5)
      fn(std::integral_constant<int, 5>());
    break;
  case 6:
    if constexpr (kSlots > 6)
      fn(std::integral_constant<int, 6>());
    break;
  case 7:
    if constexpr (kSlots > 7)
      fn(std::integral_constant<int, 7>());
    break;
  default: // slotProgram allocates below kSlots
    break;
  }
}

/// v = slot `slot` of `s`.
template <int kSlots>
__device__ __forceinline__ void readSlot(const float (&s)[kSlots][8], int slot,
                                         float (&v)[8]) {
  withSlot<kSlots>(slot, [&](auto j) {
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = s[decltype(j)::value][k];
  });
}

/// Slot `slot` of `s` = v.
template <int kSlots>
__device__ __forceinline__ void writeSlot(float (&s)[kSlots][8], int slot,
                                          const float (&v)[8]) {
  withSlot<kSlots>(slot, [&](auto j) {
#pragma unroll
    for (int k = 0; k < 8; ++k)
      s[decltype(j)::value][k] = v[k];
  });
}

/// Runs instruction step `st` (opcode kOpcode) on the 8 elements of its
/// slots.
template <int kOpcode, bool kBinary, int kSlots>
__device__ __forceinline__ void apply(float (&s)[kSlots][8], Step st) {
  float x[8], y[8] = {};
  readSlot(s, st.a, x);
  if (kBinary)
    readSlot(s, st.b, y);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    x[k] = evaluate(kOpcode, x[k], y[k], st.b);
  writeSlot(s, st.out, x);
}

/// Elements [8 g, 8 g + 8) of the results in each thread, for every g below
/// ceil(n / 8), in a grid-stride loop. With `kVector` (every tensor 16-byte
/// aligned) a group of 8 takes one 16-byte load or store per bf16 tensor,
/// two per f32 one; the last group when n % 8 != 0, and every group
/// without `kVector`, element by element. Registers: 4 slots fit two
/// blocks an SM (128 a thread); 8 take one.
template <int kSlots, bool kVector>
__global__ void __launch_bounds__(kThreads, kSlots <= 4 ? 2 : 1)
    fused_elementwise_slots_kernel(const SlotProgram program, int64_t n) {
  int64_t groups = (n + 7) / 8;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       g < groups; g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t base = 8 * g;
    bool full = kVector && base + 8 <= n;
    float s[kSlots][8];
    if (full) {
      // Every load is issued before the first conversion waits on one.
      uint4 raw[kSlots][2];
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        if (j < program.loads) {
          const Floats &t = program.in[j];
          if (t.dtype == LOOM_DTYPE_BF16) {
            raw[j][0] = *reinterpret_cast<const uint4 *>(
                static_cast<const __nv_bfloat16 *>(t.data) + base);
          } else {
            const uint4 *p = reinterpret_cast<const uint4 *>(
                static_cast<const float *>(t.data) + base);
            raw[j][0] = p[0];
            raw[j][1] = p[1];
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        if (j < program.loads) {
          if (program.in[j].dtype == LOOM_DTYPE_BF16) {
            const __nv_bfloat162 *pairs =
                reinterpret_cast<const __nv_bfloat162 *>(&raw[j][0]);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              float2 f = __bfloat1622float2(pairs[k]);
              s[j][2 * k] = f.x;
              s[j][2 * k + 1] = f.y;
            }
          } else {
            const float *f = reinterpret_cast<const float *>(raw[j]);
#pragma unroll
            for (int k = 0; k < 8; ++k)
              s[j][k] = f[k];
          }
        }
      }
    } else {
      // Past n, the elements are 0 and their results dropped.
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        if (j < program.loads) {
#pragma unroll
          for (int k = 0; k < 8; ++k)
            s[j][k] = base + k < n ? program.in[j][base + k] : 0.0f;
        }
      }
    }
    for (int i = 0; i < program.steps; ++i) {
      Step st = program.step[i];
      switch (st.opcode) {
      case kStore: {
        float v[8];
        readSlot(s, st.a, v);
        const Floats &t = program.out[st.out];
        if (full) {
          store8(t, base, v);
        } else {
#pragma unroll
          for (int k = 0; k < 8; ++k)
            if (base + k < n)
              t.store(base + k, v[k]);
        }
        break;
      }
#define LOOM_KERNEL(name, attributes)
#define LOOM_FUSIBLE_KERNEL(name, opcode, number, operands)                    \
  case LOOM_FUSED_##opcode:                                                    \
    apply<LOOM_FUSED_##opcode, (operands) == 2>(s, st);                        \
    break;
#include "loom/loom_kernels.def"
      default: // the host checked the opcodes
        break;
      }
    }
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

/// `decoded` rewritten over slots (FusedSlots.h's planSlots), with the
/// tensors it loads and stores, or false when it needs more than
/// kMaxSlots at once; `slots` says how many it needs.
bool slotProgram(const KernelArgs &args, const kernels::FusedProgram &decoded,
                 SlotProgram &program, int &slots) {
  kernels::SlotPlan plan;
  if (!kernels::planSlots(decoded, plan, slots))
    return false;
  program.loads = plan.loads;
  program.steps = plan.steps;
  for (int32_t j = 0; j < plan.loads; ++j)
    program.in[j] = floats(args.in(plan.loadOperand[j]));
  for (int32_t r = 0; r < decoded.results; ++r)
    program.out[r] = floats(args.out(r));
  for (int32_t i = 0; i < plan.steps; ++i)
    program.step[i] = plan.step[i];
  return true;
}

/// Whether contiguous chains take the slot kernels: unless
/// LOOM_CUDA_FUSED=general keeps every chain on the per-element kernel.
/// The conformance test runs the fused cases both ways.
bool slotKernelsChosen() {
  const char *value = std::getenv("LOOM_CUDA_FUSED");
  return !value || std::strcmp(value, "general") != 0;
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
  SlotProgram slotted;
  int slots = 0;
  if (contiguous && slotKernelsChosen() &&
      slotProgram(args, decoded, slotted, slots)) {
    bool vector = true;
    for (int32_t t = 0; t < decoded.operands + decoded.results; ++t)
      vector = vector && aligned16(args.tensor(t).data);
    unsigned blocks = blocksFor((n + 7) / 8);
    if (!vector)
      fused_elementwise_slots_kernel<kMaxSlots, false>
          <<<blocks, kThreads, 0, context->stream>>>(slotted, n);
    else if (slots <= 4)
      fused_elementwise_slots_kernel<4, true>
          <<<blocks, kThreads, 0, context->stream>>>(slotted, n);
    else
      fused_elementwise_slots_kernel<kMaxSlots, true>
          <<<blocks, kThreads, 0, context->stream>>>(slotted, n);
  } else if (contiguous)
    fused_elementwise_forward_kernel<true>
        <<<blocksFor(n), kThreads, 0, context->stream>>>(program, n);
  else
    fused_elementwise_forward_kernel<false>
        <<<blocksFor(n), kThreads, 0, context->stream>>>(program, n);
  return checkLaunch("fused_elementwise");
}
