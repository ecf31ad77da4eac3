//===- Pipelines.cpp - Loom's named pass pipelines ------------------------===//

#include "passes/Pipelines/Pipelines.h"

#include "passes/Autodiff/Passes.h"
#include "passes/Lowering/Passes.h"
#include "passes/Optimizer/Passes.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace loom {

void addDeviceProgramPipeline(mlir::OpPassManager &pm,
                              const DeviceProgramPipelineOptions &options) {
  if (options.decomposeAttention)
    pm.addPass(createLoomDecomposeAttention());
  pm.addPass(createLoomAutodiff());
  if (options.step == DeviceProgramStep::ForwardBackward)
    return;
  LoomOptimizerOptions optimizer;
  optimizer.kind = options.kind;
  optimizer.lr = options.lr;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.weightDecay = options.weightDecay;
  pm.addPass(createLoomOptimizer(optimizer));
  if (options.step == DeviceProgramStep::Inlined)
    pm.addPass(mlir::createInlinerPass());
}

mlir::LogicalResult buildForwardBackward(mlir::ModuleOp module,
                                         bool decomposeAttention) {
  mlir::PassManager pm(module->getContext());
  DeviceProgramPipelineOptions options;
  options.step = DeviceProgramStep::ForwardBackward;
  options.decomposeAttention = decomposeAttention;
  addDeviceProgramPipeline(pm, options);
  return pm.run(module);
}

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
  mlir::PassPipelineRegistration<DeviceProgramPipelineOptions>(
      "loom-device-program-pipeline",
      "Builds the training step of an imported @forward: "
      "--loom-decompose-attention (decompose-attention=true), "
      "--loom-autodiff, --loom-optimizer, --inline, as far as "
      "step=forward-backward|train-step|inlined says",
      addDeviceProgramPipeline);
  mlir::PassPipelineRegistration<CompilePipelineOptions>(
      "loom-compile-pipeline",
      "What loom-compile runs on a per-device program: --loom-pad-vocab, "
      "--loom-fuse, --loom-overlap-collectives, then --loom-lower-cpu or "
      "--loom-lower-cuda (target=cpu|cuda)",
      addCompilePipeline);
}

} // namespace loom
