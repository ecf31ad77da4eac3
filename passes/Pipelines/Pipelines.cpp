//===- Pipelines.cpp - Loom's named pass pipelines ------------------------===//

#include "passes/Pipelines/Pipelines.h"

#include "passes/Lowering/Passes.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

namespace loom {

void addCompilePipeline(mlir::OpPassManager &pm,
                        const CompilePipelineOptions &options) {
  if (options.padVocab)
    pm.addPass(createLoomPadVocab());
  if (options.fuse)
    pm.addPass(createLoomFuse());
  if (options.overlap)
    pm.addPass(createLoomOverlapCollectives());
  if (options.target == CompileTarget::CUDA)
    pm.addPass(createLoomLowerCUDA());
  else
    pm.addPass(createLoomLowerCPU());
}

void registerLoomPipelines() {
  mlir::PassPipelineRegistration<CompilePipelineOptions>(
      "loom-compile-pipeline",
      "What loom-compile runs on a per-device program: --loom-pad-vocab, "
      "--loom-fuse, --loom-overlap-collectives, then --loom-lower-cpu or "
      "--loom-lower-cuda (target=cpu|cuda)",
      addCompilePipeline);
}

} // namespace loom
