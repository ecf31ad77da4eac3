//===- StageCostTest.cpp - The stage DP costs stages as the planner does --===//
//
// --loom-pipeline balances its stages with the costs of passes/Pipeline/
// Stages.h (itemCosts); loom-plan chooses plans with the planner's
// (PlanEvaluator::stageProblem). They are one model: a layer costs the same
// seconds per micro-batch in both, and the whole chain sums to the same
// forward and backward time.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelImporter.h"
#include "loom/Planner/Estimate.h"
#include "passes/Pipeline/Stages.h"
#include "passes/Pipelines/Pipelines.h"

#include "dialects/Loom/LoomDialect.h"

#include "TestModels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <gtest/gtest.h>

using namespace loom;

namespace {

/// Relative agreement of two sums of the same roofline times (only the
/// order of the additions differs).
constexpr double kTolerance = 1e-9;

void expectSameStageCosts(bool mixedPrecision) {
  mlir::MLIRContext context;
  context.loadDialect<LoomDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect>();
  ModelConfig config = unittest::gpt2Config({4, 64, 4, 256, 32});
  cost::ClusterSpec cluster = unittest::testCluster();
  const int64_t microBatch = 2, seqLen = 32;

  plan::TrainingSetup setup;
  setup.seqLen = seqLen;
  setup.globalBatch = 32;
  setup.mixedPrecision = mixedPrecision;
  plan::ParallelPlan parallel;
  parallel.dp = 4;
  parallel.pp = 2;
  parallel.microBatch = microBatch;
  plan::PlanEvaluator evaluator(context, config, cluster, setup,
                                buildForwardBackward);
  auto problem = evaluator.stageProblem(parallel);
  ASSERT_TRUE(static_cast<bool>(problem))
      << llvm::toString(problem.takeError());

  ImportOptions options;
  options.microBatch = microBatch;
  options.seqLen = seqLen;
  options.precision = mixedPrecision ? Precision::BF16 : Precision::F32;
  auto module = importModel(context, config, options);
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto forward = (*module)->lookupSymbol<mlir::func::FuncOp>("forward");
  auto items = findForwardItems(forward);
  ASSERT_TRUE(mlir::succeeded(items));
  auto costs = itemCosts(forward, *items, cluster.device, 4);
  ASSERT_TRUE(mlir::succeeded(costs));

  ASSERT_EQ(costs->size(), problem->items.size());
  double passTotal = 0, plannerTotal = 0;
  for (size_t i = 0; i < costs->size(); ++i) {
    passTotal += (*costs)[i].seconds;
    plannerTotal += problem->items[i].seconds;
    bool layer = i > 0 && i + 1 < costs->size();
    if (layer)
      EXPECT_NEAR((*costs)[i].seconds, problem->items[i].seconds,
                  kTolerance * problem->items[i].seconds)
          << "layer " << i - 1;
  }
  EXPECT_GT(passTotal, 0);
  EXPECT_NEAR(passTotal, plannerTotal, kTolerance * plannerTotal);
}

TEST(StageCostTest, PipelinePassCostsStagesAsThePlannerF32) {
  expectSameStageCosts(/*mixedPrecision=*/false);
}

TEST(StageCostTest, PipelinePassCostsStagesAsThePlannerBF16) {
  expectSameStageCosts(/*mixedPrecision=*/true);
}

} // namespace
