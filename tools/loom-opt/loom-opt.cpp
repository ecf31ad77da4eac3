//===- loom-opt.cpp - The Loom optimizer driver ---------------------------===//
//
// mlir-opt with Loom's dialects and passes added: every upstream dialect,
// pass and extension is registered, so any stage of the Loom pipeline can be
// inspected and mixed with upstream passes.
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

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

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

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
