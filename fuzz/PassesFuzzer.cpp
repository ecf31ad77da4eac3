//===- PassesFuzzer.cpp - Fuzzing Loom's passes on small modules ----------===//
//
// Parses the input as an MLIR module (loom, func, arith, shard, ...) and,
// when it verifies, runs each Loom pass on its own copy of it: every pass
// must end in success or in a diagnostic, never crash, and what succeeds
// must verify (the pass manager checks). Diagnostics are dropped: only
// crashes and sanitizer reports count. The seeds are small training steps
// at each stage of the pipeline (fuzz/corpus/passes), so mutations reach
// the passes' own checks rather than the parser's.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomDialect.h"
#include "passes/Autodiff/Passes.h"
#include "passes/Lowering/Passes.h"
#include "passes/Optimizer/Passes.h"
#include "passes/Pipeline/Passes.h"
#include "passes/Sharding/Passes.h"
#include "passes/Transforms/Passes.h"

#include "loom/Support/IRDepth.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

/// Each runs on a fresh copy of the input. The options keep the searches
/// small (a 2-device mesh, the host as the cluster).
constexpr const char *kPipelines[] = {
    "loom-print-sharding-rules",
    "loom-decompose-attention",
    "loom-autodiff",
    "loom-autodiff,loom-optimizer",
    "loom-optimizer{func=forward_backward}",
    "loom-pipeline{stages=2 micro-batches=2}",
    "inline,loom-split-stages",
    "inline,loom-auto-shard{func=train_step mesh=2 cluster=cpu-local}",
    "loom-auto-shard{func=forward_backward mesh=2 cluster=cpu-local}",
    "loom-partition{func=train_step}",
    "loom-partition{func=forward_backward}",
    "loom-explain-sharding{func=train_step output=/dev/null}",
    "loom-pad-vocab",
    "loom-fuse",
    "loom-lower-cpu",
    "loom-lower-cuda",
};

mlir::MLIRContext &context() {
  static mlir::MLIRContext *ctx = [] {
    mlir::registerAllPasses();
    loom::registerLoomAutodiffPasses();
    loom::registerLoomLoweringPasses();
    loom::registerLoomOptimizerPasses();
    loom::registerLoomPipelinePasses();
    loom::registerLoomShardingPasses();
    loom::registerLoomTransformPasses();
    mlir::DialectRegistry registry;
    mlir::registerAllDialects(registry);
    mlir::registerAllExtensions(registry);
    registry.insert<loom::LoomDialect>();
    auto *created = new mlir::MLIRContext(registry);
    created->loadAllAvailableDialects();
    created->disableMultithreading();
    // Errors are expected on most inputs; only crashes count.
    created->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &) { return mlir::success(); });
    return created;
  }();
  return *ctx;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Past the seeds' size, inputs grow slow, not more interesting.
  if (size > 65536)
    return 0;
  mlir::MLIRContext &ctx = context();
  // MLIR's lexer reads up to a terminating NUL, as every file the tools
  // read has (MemoryBuffer): the fuzzer's bytes have none, so they are
  // copied into a string that does.
  std::string text(reinterpret_cast<const char *>(data), size);
  // The tools refuse what nests deeper than MLIR's parser can recurse.
  if (llvm::Error tooDeep = loom::checkIRDepth(text, "input")) {
    llvm::consumeError(std::move(tooDeep));
    return 0;
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, mlir::ParserConfig(&ctx));
  if (!module)
    return 0;
  for (const char *pipeline : kPipelines) {
    mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
    mlir::PassManager pm(&ctx);
    if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
      std::abort(); // The list above is Loom's own.
    (void)pm.run(*copy);
  }
  return 0;
}
