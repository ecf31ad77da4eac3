//===- LowerCUDA.cpp - Per-device programs to CUDA kernel calls -----------===//
//
// --loom-lower-cuda: the kernel-call lowering (LowerToKernels.h) aimed at
// the CUDA kernel library, loom_cuda_kernels.h (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "passes/Lowering/LowerToKernels.h"
#include "passes/Lowering/Passes.h"

#define DEBUG_TYPE "loom-lower-cuda"

namespace loom {
#define GEN_PASS_DEF_LOOMLOWERCUDA
#include "passes/Lowering/Passes.h.inc"

namespace {

struct LowerCUDAPass : impl::LoomLowerCUDABase<LowerCUDAPass> {
  void runOnOperation() override {
    if (failed(
            lowering::lowerToKernels(getOperation(), lowering::cudaTarget())))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
