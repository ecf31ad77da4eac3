//===- FusedSlots.h - A fused chain's registers assigned to slots -*- C++
//-*-===//
//
// The CUDA fused_elementwise kernel for contiguous chains (Fused.cu, unless
// LOOM_CUDA_FUSED=general) runs each instruction once for 8 elements held in
// "slots", a few register arrays of the thread named by constant indices.
// This header rewrites a decoded program over slots by liveness. It is
// plain C++, so that the CPU tests check the rewriting against the program
// it came from (test/Unit/FusedSlotsTest.cpp); the device kernel only
// follows the steps.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_FUSEDSLOTS_H
#define LOOM_RUNTIME_COMMON_FUSEDSLOTS_H

#include "FusedProgram.h"

#include <algorithm>
#include <cstdint>

namespace loom::kernels {

/// The most slots a program may need at once.
constexpr int kMaxSlots = 8;

/// A step: an instruction writing slot `out` from slots `a` and `b` (`b`:
/// a cast's loom_dtype; unused by the other unary ops), or, with opcode
/// kSlotStore, slot `a` stored to result `out`.
struct SlotStep {
  int8_t opcode, a, b, out;
};
constexpr int8_t kSlotStore = -1;

/// A program over slots: slot j < loads starts as operand loadOperand[j],
/// then the steps run in order.
struct SlotPlan {
  int32_t loads = 0, steps = 0;
  int8_t loadOperand[kMaxSlots] = {};
  SlotStep step[LOOM_FUSED_MAX_INSTRUCTIONS + kMaxTensors] = {};
};

/// `decoded` rewritten over slots into `plan`, or false when it needs more
/// than kMaxSlots at once; `slots` says how many it needs. Registers are
/// written once: a slot holds a register from its load or instruction to
/// the last instruction that reads it, and a result is stored as soon as
/// its register is written. Instructions whose value nothing reads or
/// stores are dropped, and so are the loads of operands nothing reads.
inline bool planSlots(const FusedProgram &decoded, SlotPlan &plan, int &slots) {
  int32_t registers = decoded.registers();
  // Which registers a result or a kept instruction reads, and the last
  // instruction that reads each (-1: none).
  bool live[kMaxTensors + LOOM_FUSED_MAX_INSTRUCTIONS] = {};
  int32_t lastRead[kMaxTensors + LOOM_FUSED_MAX_INSTRUCTIONS];
  for (int32_t r = 0; r < registers; ++r)
    lastRead[r] = -1;
  for (int32_t r = 0; r < decoded.results; ++r)
    live[decoded.resultRegister[r]] = true;
  for (int32_t i = decoded.count - 1; i >= 0; --i) {
    const FusedInstruction &in = decoded.code[i];
    if (!live[decoded.operands + i])
      continue;
    live[in.a] = true;
    if (fusedReadsB(in.opcode))
      live[in.b] = true;
  }
  for (int32_t i = 0; i < decoded.count; ++i) {
    const FusedInstruction &in = decoded.code[i];
    if (!live[decoded.operands + i])
      continue;
    lastRead[in.a] = i;
    if (fusedReadsB(in.opcode))
      lastRead[in.b] = i;
  }

  int slotOf[kMaxTensors + LOOM_FUSED_MAX_INSTRUCTIONS];
  bool busy[kMaxSlots] = {};
  slots = 0;
  auto allocate = [&](int32_t reg) {
    for (int j = 0; j < kMaxSlots; ++j)
      if (!busy[j]) {
        busy[j] = true;
        slotOf[reg] = j;
        slots = std::max(slots, j + 1);
        return true;
      }
    return false;
  };
  // Stores register `reg`'s results, then frees its slot if no
  // instruction reads it.
  auto store = [&](int32_t reg) {
    for (int32_t r = 0; r < decoded.results; ++r)
      if (decoded.resultRegister[r] == reg)
        plan.step[plan.steps++] = {kSlotStore, static_cast<int8_t>(slotOf[reg]),
                                   0, static_cast<int8_t>(r)};
    if (lastRead[reg] < 0)
      busy[slotOf[reg]] = false;
  };

  plan.loads = 0;
  plan.steps = 0;
  // Operands first, in order, so that live operand k takes slot k.
  for (int32_t t = 0; t < decoded.operands; ++t) {
    if (!live[t])
      continue;
    if (!allocate(t))
      return false;
    plan.loadOperand[plan.loads++] = static_cast<int8_t>(t);
  }
  for (int32_t t = 0; t < decoded.operands; ++t)
    if (live[t])
      store(t);
  for (int32_t i = 0; i < decoded.count; ++i) {
    const FusedInstruction &in = decoded.code[i];
    int32_t own = decoded.operands + i;
    if (!live[own])
      continue;
    bool readsB = fusedReadsB(in.opcode);
    SlotStep st = {static_cast<int8_t>(in.opcode),
                   static_cast<int8_t>(slotOf[in.a]),
                   static_cast<int8_t>(readsB ? slotOf[in.b] : in.b), 0};
    // The step reads its slots before it writes one: a slot read for the
    // last time may take the value.
    if (lastRead[in.a] == i)
      busy[slotOf[in.a]] = false;
    if (readsB && lastRead[in.b] == i)
      busy[slotOf[in.b]] = false;
    if (!allocate(own))
      return false;
    st.out = static_cast<int8_t>(slotOf[own]);
    plan.step[plan.steps++] = st;
    store(own);
  }
  return true;
}

} // namespace loom::kernels

#endif // LOOM_RUNTIME_COMMON_FUSEDSLOTS_H
