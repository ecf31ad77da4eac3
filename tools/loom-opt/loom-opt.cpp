//===- loom-opt.cpp - The Loom optimizer driver ---------------------------===//
//
// mlir-opt with Loom's dialects and passes added: every upstream dialect,
// pass and extension is registered, so any stage of the Loom pipeline can be
// inspected and mixed with upstream passes. The input's nesting is
// checked before MLIR's recursive parser sees it (loom/Support/IRDepth.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomDialect.h"
#include "passes/Autodiff/Passes.h"
#include "passes/Lowering/Passes.h"
#include "passes/Optimizer/Passes.h"
#include "passes/Pipeline/Passes.h"
#include "passes/Pipelines/Pipelines.h"
#include "passes/Sharding/Passes.h"
#include "passes/Transforms/Passes.h"

#include "loom/Support/IRDepth.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  loom::registerLoomAutodiffPasses();
  loom::registerLoomLoweringPasses();
  loom::registerLoomOptimizerPasses();
  loom::registerLoomPipelinePasses();
  loom::registerLoomShardingPasses();
  loom::registerLoomTransformPasses();
  loom::registerLoomPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<loom::LoomDialect>();

  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "Loom optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, input, output, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "loom-opt: error: " << error << "\n";
    return 1;
  }
  if (llvm::Error tooDeep = loom::checkIRDepth(
          file->getBuffer(), input == "-" ? "<stdin>" : input)) {
    llvm::errs() << "loom-opt: error: " << llvm::toString(std::move(tooDeep))
                 << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> out =
      mlir::openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "loom-opt: error: " << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(out->os(), std::move(file), registry, config)))
    return 1;
  out->keep(); // Written only when the whole run succeeded.
  return 0;
}
