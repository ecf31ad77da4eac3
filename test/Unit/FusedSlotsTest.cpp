//===- FusedSlotsTest.cpp - A fused chain over slots, checked on the CPU --===//
//
// The CUDA kernel for contiguous fused chains runs FusedSlots.h's rewriting
// of a program over a few slots. Whether that rewriting computes what the
// program computes is host logic, checked here on random programs: each is
// run directly (a register per value) and as its slot steps (at most
// kMaxSlots values at once), with an arbitrary but fixed, non-commutative
// arithmetic per opcode, and every result must come out the same, stored
// exactly once.
//
//===----------------------------------------------------------------------===//

#include "runtime/common/FusedSlots.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <vector>

using namespace loom::kernels;

namespace {

/// A stand-in for each opcode's arithmetic: distinct per opcode and
/// sensitive to the order of a and b, so that a misplaced slot shows.
double apply(int32_t opcode, double a, double b) {
  if (fusedReadsB(opcode))
    return a - 2 * b + opcode;
  if (opcode == LOOM_FUSED_CAST)
    return a + 0.5 * b; // b: the cast's loom_dtype, kept in the step
  return 3 * a + opcode;
}

/// Every result of `program` on `operands`, register by register.
std::vector<double> runDirectly(const FusedProgram &program,
                                const std::vector<double> &operands) {
  std::vector<double> reg(operands);
  for (int32_t i = 0; i < program.count; ++i) {
    const FusedInstruction &in = program.code[i];
    double b = fusedReadsB(in.opcode) ? reg[in.b] : in.b;
    reg.push_back(in.opcode == LOOM_FUSED_CAST || !fusedReadsB(in.opcode)
                      ? apply(in.opcode, reg[in.a], in.b)
                      : apply(in.opcode, reg[in.a], b));
  }
  std::vector<double> results;
  for (int32_t r = 0; r < program.results; ++r)
    results.push_back(reg[program.resultRegister[r]]);
  return results;
}

/// Every result of `plan` on `operands`, slot by slot; NaN for a result no
/// step stored, and `stores` counts the stores of each.
std::vector<double> runSlots(const SlotPlan &plan, int32_t results,
                             const std::vector<double> &operands,
                             std::vector<int> &stores) {
  double slot[kMaxSlots];
  for (double &value : slot)
    value = NAN;
  for (int32_t j = 0; j < plan.loads; ++j)
    slot[j] = operands[plan.loadOperand[j]];
  std::vector<double> out(results, NAN);
  stores.assign(results, 0);
  for (int32_t i = 0; i < plan.steps; ++i) {
    const SlotStep &st = plan.step[i];
    if (st.opcode == kSlotStore) {
      out[st.out] = slot[st.a];
      ++stores[st.out];
      continue;
    }
    double b = fusedReadsB(st.opcode) ? slot[st.b] : st.b;
    slot[st.out] = apply(st.opcode, slot[st.a], b);
  }
  return out;
}

/// A random valid program: every instruction reads registers before its
/// own; results name any register, operands included, repeats allowed.
FusedProgram randomProgram(std::mt19937 &rng) {
  FusedProgram program;
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  // One in ten sums 9 to 12 operands, all live at the start: more than
  // kMaxSlots, which planSlots must refuse.
  if (uniform(0, 9) == 0) {
    program.operands = uniform(kMaxSlots + 1, 12);
    program.count = program.operands - 1;
    for (int32_t i = 0; i < program.count; ++i)
      program.code[i] = {LOOM_FUSED_ADD, i == 0 ? 0 : program.operands + i - 1,
                         i + 1};
    program.results = 1;
    program.resultRegister[0] = program.registers() - 1;
    return program;
  }
  program.operands = uniform(1, 5);
  program.count = uniform(1, 24);
  for (int32_t i = 0; i < program.count; ++i) {
    int32_t own = program.operands + i;
    FusedInstruction &in = program.code[i];
    in.opcode = uniform(LOOM_FUSED_ADD, LOOM_FUSED_GELU_ERF_GRAD);
    // Mostly recent registers, as chains read them, sometimes any.
    auto pick = [&] {
      return uniform(0, 3) == 0 ? uniform(0, own - 1)
                                : std::max(0, own - uniform(1, 3));
    };
    in.a = pick();
    in.b = fusedReadsB(in.opcode) ? pick()
           : in.opcode == LOOM_FUSED_CAST
               ? (uniform(0, 1) ? LOOM_DTYPE_BF16 : LOOM_DTYPE_F32)
               : 0;
  }
  program.results = uniform(1, 4);
  for (int32_t r = 0; r < program.results; ++r)
    program.resultRegister[r] =
        uniform(0, 2) ? std::max(0, program.registers() - 1 - uniform(0, 2))
                      : uniform(0, program.registers() - 1);
  return program;
}

TEST(FusedSlotsTest, SlotStepsComputeWhatTheProgramComputes) {
  std::mt19937 rng(20261128);
  int planned = 0, refused = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    FusedProgram program = randomProgram(rng);
    std::vector<double> operands;
    for (int32_t t = 0; t < program.operands; ++t)
      operands.push_back(1.0 + 0.25 * t + 0.001 * trial);
    SlotPlan plan;
    int slots = 0;
    if (!planSlots(program, plan, slots)) {
      ++refused;
      continue;
    }
    ++planned;
    ASSERT_GE(slots, 1);
    ASSERT_LE(slots, kMaxSlots);
    std::vector<int> stores;
    std::vector<double> want = runDirectly(program, operands);
    std::vector<double> got = runSlots(plan, program.results, operands, stores);
    for (int32_t r = 0; r < program.results; ++r) {
      ASSERT_EQ(stores[r], 1) << "trial " << trial << ", result " << r;
      ASSERT_EQ(got[r], want[r]) << "trial " << trial << ", result " << r;
    }
    // Only slots below the count it reports are named.
    for (int32_t i = 0; i < plan.steps; ++i) {
      const SlotStep &st = plan.step[i];
      ASSERT_LT(st.a, slots);
      if (st.opcode != kSlotStore) {
        ASSERT_LT(st.out, slots);
        if (fusedReadsB(st.opcode))
          ASSERT_LT(st.b, slots);
      }
    }
  }
  // Both outcomes occur: the chains fit, the wide sums are left to the
  // general kernel.
  EXPECT_GT(planned, 15000);
  EXPECT_GT(refused, 1000);
}

/// SwiGLU's backward as --loom-fuse writes it, with an operand stored as a
/// result and an instruction nothing reads: 4 slots, the dead one dropped.
TEST(FusedSlotsTest, SwigluGradientFitsFourSlots) {
  FusedProgram program;
  program.operands = 3; // dy, gate, up
  program.count = 5;
  program.code[0] = {LOOM_FUSED_SILU, 1, 0};      // r3 = silu(gate)
  program.code[1] = {LOOM_FUSED_MUL, 0, 3};       // r4 = dy * r3 (d up)
  program.code[2] = {LOOM_FUSED_MUL, 0, 2};       // r5 = dy * up
  program.code[3] = {LOOM_FUSED_SILU_GRAD, 5, 1}; // r6 = d gate
  program.code[4] = {LOOM_FUSED_EXP, 0, 0};       // r7, read by nothing
  program.results = 3;
  program.resultRegister[0] = 6;
  program.resultRegister[1] = 4;
  program.resultRegister[2] = 2;
  SlotPlan plan;
  int slots = 0;
  ASSERT_TRUE(planSlots(program, plan, slots));
  EXPECT_EQ(slots, 4);
  EXPECT_EQ(plan.loads, 3);
  int instructions = 0;
  for (int32_t i = 0; i < plan.steps; ++i)
    instructions += plan.step[i].opcode != kSlotStore;
  EXPECT_EQ(instructions, 4);
  std::vector<int> stores;
  std::vector<double> operands = {0.5, -1.25, 2.0};
  EXPECT_EQ(runSlots(plan, 3, operands, stores),
            runDirectly(program, operands));
}

} // namespace
