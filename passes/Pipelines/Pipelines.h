//===- Pipelines.h - Loom's named pass pipelines ----------------*- C++ -*-===//
//
// Sequences of Loom's passes that the tools run, as plain functions that
// add them to a pass manager and as pipelines registered for loom-opt, so
// that what a tool does can be run and inspected pass by pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PIPELINES_PIPELINES_H
#define LOOM_PASSES_PIPELINES_PIPELINES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace loom {

/// The kernel library a compiled program calls.
enum class CompileTarget { CPU, CUDA };

/// What `loom-compile` does to a per-device program before it builds the
/// artifact (`--loom-compile-pipeline`).
struct CompilePipelineOptions
    : public mlir::PassPipelineOptions<CompilePipelineOptions> {
  Option<CompileTarget> target{
      *this, "target", llvm::cl::desc("The kernel library the program calls"),
      llvm::cl::init(CompileTarget::CPU),
      llvm::cl::values(
          clEnumValN(CompileTarget::CPU, "cpu", "loom_cpu_kernels.h"),
          clEnumValN(CompileTarget::CUDA, "cuda", "loom_cuda_kernels.h"))};
  Option<bool> padVocab{*this, "pad-vocab",
                        llvm::cl::desc("Run --loom-pad-vocab"),
                        llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Run --loom-fuse"),
                    llvm::cl::init(true)};
  Option<bool> overlap{*this, "overlap",
                       llvm::cl::desc("Run --loom-overlap-collectives"),
                       llvm::cl::init(true)};
};

/// How far `--loom-device-program-pipeline` builds the training step.
enum class DeviceProgramStep {
  /// @forward_backward only: what the planner costs.
  ForwardBackward,
  /// @train_step calling @forward_backward: what --loom-pipeline cuts.
  TrainStep,
  /// @train_step with its calls inlined: one function to shard.
  Inlined,
};

/// What builds the training step of an imported `@forward`
/// (`--loom-device-program-pipeline`): the passes the planner costs and the
/// tools run, in one place.
struct DeviceProgramPipelineOptions
    : public mlir::PassPipelineOptions<DeviceProgramPipelineOptions> {
  Option<DeviceProgramStep> step{
      *this, "step", llvm::cl::desc("How far to build the step"),
      llvm::cl::init(DeviceProgramStep::Inlined),
      llvm::cl::values(
          clEnumValN(DeviceProgramStep::ForwardBackward, "forward-backward",
                     "--loom-autodiff only"),
          clEnumValN(DeviceProgramStep::TrainStep, "train-step",
                     "then --loom-optimizer"),
          clEnumValN(DeviceProgramStep::Inlined, "inlined", "then --inline"))};
  Option<bool> decomposeAttention{
      *this, "decompose-attention",
      llvm::cl::desc("Run --loom-decompose-attention first (unfused "
                     "attention)"),
      llvm::cl::init(false)};
  // --loom-optimizer's options, with its defaults.
  Option<std::string> kind{*this, "kind",
                           llvm::cl::desc("The optimizer: adamw or sgd"),
                           llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(3e-4)};
  Option<double> beta1{*this, "beta1",
                       llvm::cl::desc("AdamW's first-moment decay"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2",
                       llvm::cl::desc("AdamW's second-moment decay"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps",
                     llvm::cl::desc("AdamW's denominator epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (decoupled for AdamW, L2 for SGD)"),
      llvm::cl::init(0.01)};
};

/// --loom-decompose-attention (when asked), --loom-autodiff, then
/// --loom-optimizer and --inline as far as `options.step` says.
void addDeviceProgramPipeline(mlir::OpPassManager &pm,
                              const DeviceProgramPipelineOptions &options);

/// Builds @forward_backward of `module`'s imported @forward in place (the
/// pipeline above with step=forward-backward): what the planner's
/// PlanEvaluator is given to build the programs it costs.
mlir::LogicalResult buildForwardBackward(mlir::ModuleOp module,
                                         bool decomposeAttention);

/// --loom-pad-vocab, --loom-fuse, --loom-overlap-collectives (each unless
/// switched off), then --loom-lower-cpu or --loom-lower-cuda.
void addCompilePipeline(mlir::OpPassManager &pm,
                        const CompilePipelineOptions &options);

/// Registers the pipelines above with loom-opt.
void registerLoomPipelines();

} // namespace loom

#endif // LOOM_PASSES_PIPELINES_PIPELINES_H
