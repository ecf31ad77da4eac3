//===- Pipelines.h - Loom's named pass pipelines ----------------*- C++ -*-===//
//
// Sequences of Loom's passes that the tools run, as plain functions that
// add them to a pass manager and as pipelines registered for loom-opt, so
// that what a tool does can be run and inspected pass by pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PIPELINES_PIPELINES_H
#define LOOM_PASSES_PIPELINES_PIPELINES_H

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

/// --loom-pad-vocab, --loom-fuse, --loom-overlap-collectives (each unless
/// switched off), then --loom-lower-cpu or --loom-lower-cuda.
void addCompilePipeline(mlir::OpPassManager &pm,
                        const CompilePipelineOptions &options);

/// Registers the pipelines above with loom-opt.
void registerLoomPipelines();

} // namespace loom

#endif // LOOM_PASSES_PIPELINES_PIPELINES_H
