//===- Target.cpp - The kernel libraries compiled code can call -----------===//

#include "passes/Lowering/Target.h"

namespace loom::lowering {

const Target &cpuTarget() {
  static const Target target{
      /*backend=*/"cpu",         /*flag=*/"--loom-lower-cpu",
      /*library=*/"CPU",         /*kernelPrefix=*/"loom_cpu_",
      /*passesContext=*/false,   /*deviceBuffers=*/false,
      /*workspaceAlignment=*/64, /*bf16Arithmetic=*/false};
  return target;
}

const Target &cudaTarget() {
  // 256 bytes: cudaMalloc's alignment, which cuBLASLt's heuristics and
  // vectorized loads reward (the kernels are told the real alignment).
  static const Target target{
      /*backend=*/"cuda",         /*flag=*/"--loom-lower-cuda",
      /*library=*/"CUDA",         /*kernelPrefix=*/"loom_cuda_",
      /*passesContext=*/true,     /*deviceBuffers=*/true,
      /*workspaceAlignment=*/256, /*bf16Arithmetic=*/true};
  return target;
}

} // namespace loom::lowering
