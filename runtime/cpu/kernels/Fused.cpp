//===- Fused.cpp - A chain of elementwise ops in one pass -----------------===//
//
// fused_elementwise runs the register program of a `loom.fused` chain
// (loom_cpu_kernels.h, decoded by runtime/common/FusedProgram.h) over the
// chain's elements: a block of elements at a time, each instruction a loop
// over the block, so that the program is dispatched once per block and the
// loops vectorize. Each element computes exactly what the unfused kernels
// compute for it (same float operations, Activation.h's gelu and silu), so
// fusing changes no f32 result.
//
//===----------------------------------------------------------------------===//

#include "Activation.h"
#include "FusedProgram.h"
#include "KernelArgs.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::cpu {
namespace {

using kernels::FusedInstruction;
using kernels::FusedProgram;

constexpr int64_t kBlock = 256;

/// y[i] = instruction(a[i], b[i]) for the `n` elements of a block.
void execute(const FusedInstruction &in, const float *a, const float *b,
             float *y, int64_t n) {
  switch (in.opcode) {
  case LOOM_FUSED_ADD:
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] + b[i];
    return;
  case LOOM_FUSED_SUB:
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] - b[i];
    return;
  case LOOM_FUSED_MUL:
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] * b[i];
    return;
  case LOOM_FUSED_DIV:
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] / b[i];
    return;
  case LOOM_FUSED_NEG:
    for (int64_t i = 0; i < n; ++i)
      y[i] = -a[i];
    return;
  case LOOM_FUSED_EXP:
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::exp(a[i]);
    return;
  case LOOM_FUSED_LOG:
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::log(a[i]);
    return;
  case LOOM_FUSED_SQRT:
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::sqrt(a[i]);
    return;
  case LOOM_FUSED_RSQRT:
    for (int64_t i = 0; i < n; ++i)
      y[i] = 1.0f / std::sqrt(a[i]);
    return;
  case LOOM_FUSED_TANH:
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::tanh(a[i]);
    return;
  case LOOM_FUSED_CAST:
    if (in.b == LOOM_DTYPE_BF16)
      for (int64_t i = 0; i < n; ++i)
        y[i] = roundToBf16(a[i]);
    else
      std::copy(a, a + n, y);
    return;
  case LOOM_FUSED_GELU:
    for (int64_t i = 0; i < n; ++i)
      y[i] = gelu(a[i]);
    return;
  case LOOM_FUSED_GELU_GRAD:
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] * geluDerivative(b[i]);
    return;
  case LOOM_FUSED_GELU_ERF:
    for (int64_t i = 0; i < n; ++i)
      y[i] = geluErf(a[i]);
    return;
  case LOOM_FUSED_GELU_ERF_GRAD:
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] * geluErfDerivative(b[i]);
    return;
  case LOOM_FUSED_SILU:
    for (int64_t i = 0; i < n; ++i)
      y[i] = silu(a[i]);
    return;
  case LOOM_FUSED_SILU_GRAD:
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] * siluDerivative(b[i]);
    return;
  default:
    return; // decodeFusedProgram refused it
  }
}

/// The chain's dimensions as a walk, outermost first: size-1 dimensions
/// dropped, and a dimension merged into the one before it where every
/// operand reads across the two as across one. Returns their number.
int coalesce(const FusedProgram &program, int64_t *sizes,
             int64_t (*strides)[kMaxRank]) {
  int count = 0;
  for (int64_t d = 0; d < program.rank; ++d) {
    int64_t size = program.dims[d];
    if (size == 1)
      continue;
    if (count > 0) {
      bool merge = true;
      for (int32_t t = 0; merge && t < program.operands; ++t)
        merge = strides[t][count - 1] == program.strides[t][d] * size;
      if (merge) {
        sizes[count - 1] *= size;
        for (int32_t t = 0; t < program.operands; ++t)
          strides[t][count - 1] = program.strides[t][d];
        continue;
      }
    }
    sizes[count] = size;
    for (int32_t t = 0; t < program.operands; ++t)
      strides[t][count] = program.strides[t][d];
    ++count;
  }
  return count;
}

/// Runs the program over every element: runs along the innermost walk
/// dimension, in blocks of kBlock elements.
void run(const KernelArgs &args, const FusedProgram &program) {
  int64_t sizes[kMaxRank];
  int64_t strides[kMaxTensors][kMaxRank];
  int rank = coalesce(program, sizes, strides);
  int64_t runLength = rank > 0 ? sizes[rank - 1] : 1, runs = 1;
  for (int d = 0; d + 1 < rank; ++d)
    runs *= sizes[d];
  std::vector<float> registers(
      static_cast<size_t>(program.registers() * kBlock));
  auto reg = [&](int32_t r) { return registers.data() + r * kBlock; };

  int64_t index[kMaxRank] = {};
  int64_t offsets[kMaxTensors] = {};
  for (int64_t run = 0; run < runs; ++run) {
    for (int64_t start = 0; start < runLength; start += kBlock) {
      int64_t n = std::min(kBlock, runLength - start);
      for (int32_t t = 0; t < program.operands; ++t) {
        const float *x = args.in(t).f32() + offsets[t];
        int64_t inner = rank > 0 ? strides[t][rank - 1] : 0;
        float *r = reg(t);
        if (inner == 0)
          std::fill(r, r + n, *x);
        else
          for (int64_t i = 0; i < n; ++i)
            r[i] = x[(start + i) * inner];
      }
      for (int32_t i = 0; i < program.count; ++i) {
        const FusedInstruction &in = program.code[i];
        execute(in, reg(in.a), reg(kernels::fusedReadsB(in.opcode) ? in.b : 0),
                reg(program.operands + i), n);
      }
      for (int32_t r = 0; r < program.results; ++r) {
        const float *value = reg(program.resultRegister[r]);
        std::copy(value, value + n,
                  args.out(r).f32() + run * runLength + start);
      }
    }
    for (int d = rank - 2; d >= 0; --d) {
      for (int32_t t = 0; t < program.operands; ++t)
        offsets[t] += strides[t][d];
      if (++index[d] < sizes[d])
        break;
      for (int32_t t = 0; t < program.operands; ++t)
        offsets[t] -= strides[t][d] * sizes[d];
      index[d] = 0;
    }
  }
}

} // namespace
} // namespace loom::cpu

using namespace loom::cpu;

extern "C" int32_t loom_cpu_fused_elementwise(const loom_call_frame *,
                                              void *const *buffers,
                                              const int64_t *meta) {
  KernelArgs args(buffers, meta);
  FusedProgram program;
  char error[256];
  if (!loom::kernels::decodeFusedProgram(
          args, "fused_elementwise",
          [](loom_dtype dtype) { return dtype == LOOM_DTYPE_F32; }, program,
          error, sizeof error))
    return fail("%s", error);
  if (program.numElements() > 0)
    run(args, program);
  return 0;
}
