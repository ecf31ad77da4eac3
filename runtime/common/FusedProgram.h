//===- FusedProgram.h - Decoding a fused elementwise chain ------*- C++ -*-===//
//
// `fused_elementwise` (loom_cpu_kernels.h) runs a chain of elementwise ops
// as one kernel: its meta carries a small register program after the
// tensors. The CPU and CUDA kernels decode and check it here, with the same
// messages, and say how each operand broadcasts to the chain's shape; only
// the loop over elements differs.
//
// Header-only for the reason KernelMeta.h is: a failed check writes its
// message into the caller's buffer and returns false.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_FUSEDPROGRAM_H
#define LOOM_RUNTIME_COMMON_FUSEDPROGRAM_H

#include "loom/loom_cpu_kernels.h"

#include "KernelAttrs.h"
#include "KernelMeta.h"

#include <cstdint>
#include <cstdio>

namespace loom::kernels {

/// One instruction: register `a` op register `b` (`b` is a loom_dtype for a
/// cast and unused by the other unary ops).
struct FusedInstruction {
  int32_t opcode, a, b;
};

/// A decoded fused_elementwise call.
struct FusedProgram {
  int32_t operands = 0, results = 0, count = 0;
  FusedInstruction code[LOOM_FUSED_MAX_INSTRUCTIONS];
  int32_t resultRegister[kMaxTensors];
  /// The chain's shape: every result's.
  int64_t rank = 0;
  int64_t dims[kMaxRank] = {};
  /// Operand t's stride along each dimension of the chain's shape: its own
  /// row-major stride, 0 where it broadcasts (a missing or size-1 dim).
  int64_t strides[kMaxTensors][kMaxRank] = {};

  int32_t registers() const { return operands + count; }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d = 0; d < rank; ++d)
      n *= dims[d];
    return n;
  }
};

/// Whether `opcode` reads register b (the binary ops and the activation
/// gradients, whose b is x).
inline bool fusedReadsB(int32_t opcode) {
  return fusedOperandCount(opcode) == 2;
}

/// Decodes the program after the tensors of `args` (whose cursor stands at
/// the attributes) and checks it: the results of one shape, every operand
/// broadcastable to it, element types `floatType` accepts, the opcodes,
/// registers and casts' types. `kernel` names the kernel in messages.
template <typename FloatType>
bool decodeFusedProgram(KernelArgs &args, const char *kernel,
                        FloatType floatType, FusedProgram &program, char *error,
                        size_t errorSize) {
  program.operands = static_cast<int32_t>(args.numOperands());
  program.results = static_cast<int32_t>(args.numResults());
  if (program.results < 1 || program.operands < 1 ||
      program.operands + program.results > kMaxTensors)
    return failWith(error, errorSize,
                    "%s: %d operands and %d results (1 to %d tensors, at "
                    "least one of each)",
                    kernel, program.operands, program.results, kMaxTensors);
  const View &shape = args.out(0);
  program.rank = shape.rank;
  for (int64_t d = 0; d < shape.rank; ++d)
    program.dims[d] = shape.dims[d];
  for (int32_t t = 0; t < program.operands + program.results; ++t) {
    const View &view = args.tensor(t);
    if (!floatType(view.dtype))
      return failWith(error, errorSize,
                      "%s: tensor %d has element type %d, which the kernel "
                      "does not compute in",
                      kernel, t, static_cast<int>(view.dtype));
    if (view.rank > kMaxRank)
      return failWith(error, errorSize, "%s: tensor %d has rank over %d",
                      kernel, t, kMaxRank);
    if (t >= program.operands) {
      bool same = view.rank == shape.rank;
      for (int64_t d = 0; same && d < view.rank; ++d)
        same = view.dims[d] == shape.dims[d];
      if (!same)
        return failWith(error, errorSize,
                        "%s: result %d differs in shape from result 0", kernel,
                        t - program.operands);
      continue;
    }
    if (view.rank > shape.rank)
      return failWith(error, errorSize,
                      "%s: operand %d has rank %lld, the chain %lld", kernel, t,
                      static_cast<long long>(view.rank),
                      static_cast<long long>(shape.rank));
    int64_t own[kMaxRank];
    stridesOf(view, own);
    int64_t shift = shape.rank - view.rank;
    for (int64_t d = 0; d < shape.rank; ++d) {
      int64_t vd = d - shift;
      int64_t extent = vd >= 0 ? view.dims[vd] : 1;
      if (extent != 1 && extent != shape.dims[d])
        return failWith(error, errorSize,
                        "%s: operand %d does not broadcast to the chain's "
                        "shape (dimension %lld: %lld, not %lld)",
                        kernel, t, static_cast<long long>(d),
                        static_cast<long long>(extent),
                        static_cast<long long>(shape.dims[d]));
      program.strides[t][d] = extent == 1 ? 0 : own[vd];
    }
  }

  int64_t count = args.integer();
  if (count < 1 || count > LOOM_FUSED_MAX_INSTRUCTIONS)
    return failWith(error, errorSize, "%s: %lld instructions (1 to %d)", kernel,
                    static_cast<long long>(count), LOOM_FUSED_MAX_INSTRUCTIONS);
  program.count = static_cast<int32_t>(count);
  for (int32_t i = 0; i < program.count; ++i) {
    int64_t opcode = args.integer(), a = args.integer(), b = args.integer();
    int64_t own = program.operands + i;
    if (fusedOperandCount(opcode) == 0)
      return failWith(error, errorSize, "%s: instruction %d has opcode %lld",
                      kernel, i, static_cast<long long>(opcode));
    bool castType = opcode == LOOM_FUSED_CAST;
    if (castType && b != LOOM_DTYPE_F32 && b != LOOM_DTYPE_BF16)
      return failWith(error, errorSize,
                      "%s: instruction %d casts to element type %lld (f32 or "
                      "bf16)",
                      kernel, i, static_cast<long long>(b));
    bool readsB = fusedReadsB(static_cast<int32_t>(opcode));
    if (a < 0 || a >= own || (readsB && (b < 0 || b >= own)))
      return failWith(error, errorSize,
                      "%s: instruction %d reads registers %lld and %lld, not "
                      "all below its own %lld",
                      kernel, i, static_cast<long long>(a),
                      static_cast<long long>(b), static_cast<long long>(own));
    program.code[i] = {static_cast<int32_t>(opcode), static_cast<int32_t>(a),
                       static_cast<int32_t>(readsB || castType ? b : 0)};
  }
  for (int32_t r = 0; r < program.results; ++r) {
    int64_t reg = args.integer();
    if (reg < 0 || reg >= program.registers())
      return failWith(error, errorSize, "%s: result %d is register %lld, of %d",
                      kernel, r, static_cast<long long>(reg),
                      program.registers());
    program.resultRegister[r] = static_cast<int32_t>(reg);
  }
  return true;
}

} // namespace loom::kernels

#endif // LOOM_RUNTIME_COMMON_FUSEDPROGRAM_H
