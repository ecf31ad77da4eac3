//===- LowerCPU.cpp - Per-device programs to CPU kernel calls -------------===//
//
// --loom-lower-cpu: the kernel-call lowering (LowerToKernels.h) aimed at
// the CPU kernel library, loom_cpu_kernels.h (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "passes/Lowering/LowerToKernels.h"
#include "passes/Lowering/Passes.h"

#define DEBUG_TYPE "loom-lower-cpu"

namespace loom {
#define GEN_PASS_DEF_LOOMLOWERCPU
#include "passes/Lowering/Passes.h.inc"

namespace {

struct LowerCPUPass : impl::LoomLowerCPUBase<LowerCPUPass> {
  void runOnOperation() override {
    if (failed(lowering::lowerToKernels(getOperation(), lowering::cpuTarget())))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
