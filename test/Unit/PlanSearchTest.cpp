//===- PlanSearchTest.cpp - loom-plan's joint plan search -----------------===//
//
// The enumeration against an independent count of the device splits, pinned
// dimensions, the search on GPT-2 small (sorted, fitting, the best plan no
// slower than any plan estimated directly), the cache (one costing per
// tensor degree and micro-batch), and the reason an alternative lost.
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/Search.h"
#include "passes/Pipelines/Pipelines.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>
#include <tuple>

using namespace loom;
using namespace loom::plan;

namespace {

ModelConfig loadConfig(llvm::StringRef name) {
  std::string path =
      (llvm::Twine(LOOM_EXAMPLES_DIR) + "/configs/" + name).str();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buffer)) << path;
  auto config = parseModelConfig((*buffer)->getBuffer(), path);
  EXPECT_TRUE(bool(config));
  return *config;
}

cost::ClusterSpec loadCluster(llvm::StringRef spec) {
  auto cluster = cost::resolveClusterSpec(spec);
  EXPECT_TRUE(bool(cluster));
  return *cluster;
}

TEST(PlanSearchTest, EnumerationCoversEverySplit) {
  // GPT-2 small (12 heads, 12 layers) on 16 devices, batch 64: T in {1, 2,
  // 4} (8 does not divide 12 heads), P ≤ 12 dividing 16 / T, D dividing 64.
  ModelConfig config = loadConfig("gpt2.json");
  cost::ClusterSpec cluster = loadCluster("a100-80g:2");
  TrainingSetup setup;
  setup.globalBatch = 64;
  setup.seqLen = 1024;
  std::set<std::tuple<int64_t, int64_t, int64_t>> expected, found;
  for (int64_t t : {1, 2, 4, 8, 16})
    for (int64_t p = 1; p <= 16; ++p)
      if (16 % (t * p) == 0 && t <= 8 && 12 % t == 0 && p <= 12 &&
          64 % (16 / (t * p)) == 0)
        expected.insert({16 / (t * p), t, p});
  std::vector<ParallelPlan> plans = enumeratePlans(config, cluster, setup, {});
  for (const ParallelPlan &plan : plans) {
    found.insert({plan.dp, plan.tp, plan.pp});
    EXPECT_EQ(checkPlan(config, cluster, plan, setup), "");
    if (plan.tp == 1)
      EXPECT_FALSE(plan.sequenceParallel);
    if (plan.dp == 1)
      EXPECT_EQ(plan.zero, cost::ZeroStage::None);
  }
  EXPECT_EQ(found, expected);

  SearchSpace pinned;
  pinned.tp = {2};
  pinned.recompute = {cost::Recompute::Full};
  for (const ParallelPlan &plan :
       enumeratePlans(config, cluster, setup, pinned)) {
    EXPECT_EQ(plan.tp, 2);
    EXPECT_EQ(plan.recompute, cost::Recompute::Full);
  }
}

TEST(PlanSearchTest, BestPlanBeatsEveryPlanEstimatedAlone) {
  mlir::MLIRContext context;
  context.loadDialect<LoomDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect>();
  ModelConfig config = loadConfig("gpt2.json");
  cost::ClusterSpec cluster = loadCluster("a100-80g");
  TrainingSetup setup;
  setup.globalBatch = 16;
  setup.seqLen = 1024;
  PlanEvaluator evaluator(context, config, cluster, setup,
                          buildForwardBackward);
  SearchOptions options;
  options.topK = 3;
  auto result = searchPlans(evaluator, config, cluster, setup, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_EQ(result->best.size(), 3u);
  for (size_t i = 1; i < result->best.size(); ++i)
    EXPECT_LE(result->best[i - 1].estimate.stepTime,
              result->best[i].estimate.stepTime);
  // Every plan with the even layer split, estimated on its own, is no
  // faster than the chosen one (the DP layout can only be better).
  std::set<std::pair<int64_t, int64_t>> pairs;
  PlanEvaluator fresh(context, config, cluster, setup, buildForwardBackward);
  for (const ParallelPlan &plan : enumeratePlans(config, cluster, setup, {})) {
    pairs.insert({plan.tp, plan.microBatch});
    auto estimate = fresh.estimate(plan);
    ASSERT_TRUE(bool(estimate));
    if (estimate->fits)
      EXPECT_GE(estimate->stepTime,
                result->best[0].estimate.stepTime * (1 - 1e-12));
  }
  // One costing of the model per (tensor degree, micro-batch).
  EXPECT_EQ(result->numCostedModels, int64_t(pairs.size()));
  EXPECT_EQ(fresh.numCostedModels(), pairs.size());
}

TEST(PlanSearchTest, AnEarlyStopSaysHowFarItGot) {
  // GPT-3 175B fits no plan on one DGX A100. The progress callback (called
  // every 256 plans, before the clock is read) stalls the search past its
  // limit at plan 256: it stops there, with every plan it estimated
  // rejected, and must say that it stopped, not that all plans failed.
  mlir::MLIRContext context;
  context.loadDialect<LoomDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect>();
  ModelConfig config = loadConfig("gpt3-175b.json");
  cost::ClusterSpec cluster = loadCluster("a100-80g");
  TrainingSetup setup;
  setup.globalBatch = 64;
  PlanEvaluator evaluator(context, config, cluster, setup,
                          buildForwardBackward);
  SearchOptions options;
  options.timeLimitSeconds = 1;
  options.progress = [&](int64_t done, int64_t) {
    if (done == 256)
      std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  };
  auto result = searchPlans(evaluator, config, cluster, setup, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_TRUE(result->best.empty());
  EXPECT_TRUE(result->stoppedEarly());
  EXPECT_EQ(result->numEstimated, 256);
  EXPECT_GT(result->numPlans, 256);
  EXPECT_EQ(result->numRejectedForMemory, 256);
  EXPECT_TRUE(result->closestRejected.has_value());

  // Stopped before the first plan: an empty result, not an error.
  options.timeLimitSeconds = 0.05;
  options.progress = [&](int64_t done, int64_t) {
    if (done == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  result = searchPlans(evaluator, config, cluster, setup, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->numEstimated, 0);
  EXPECT_TRUE(result->best.empty());
  EXPECT_FALSE(result->closestRejected.has_value());
}

TEST(PlanSearchTest, WhyLostNamesTheComponentThatGrew) {
  Estimate winner, loser;
  winner.stepTime = 1.0;
  winner.compute = 0.7;
  winner.exposedComm = 0.2;
  winner.bubble = 0.1;
  loser = winner;
  loser.stepTime = 1.14;
  loser.bubble = 0.2;
  loser.exposedComm = 0.24;
  EXPECT_EQ(whyLost(winner, loser),
            "+14.0% step time: pipeline bubble 200.000 ms vs 100.000 ms");
  // Compute as the step-time line prints it, the optimizer step included;
  // both sides of a reason in one unit.
  loser = winner;
  winner.optimizer = 0.1;
  loser.compute = 0.75;
  loser.stepTime = 1.05;
  EXPECT_EQ(whyLost(winner, loser),
            "+5.0% step time: compute 750.000 ms vs 700.000 ms");
  loser = winner;
  loser.exposedComm = 0.2002;
  loser.stepTime = 1.0002;
  winner.exposedComm = 0.2;
  EXPECT_EQ(whyLost(winner, loser),
            "+0.0% step time: exposed communication 200.200 ms vs 200.000 ms");
  winner.exposedComm = 0;
  loser.exposedComm = 237.144e-6;
  loser.stepTime = winner.stepTime + loser.exposedComm;
  EXPECT_EQ(whyLost(winner, loser),
            "+0.0% step time: exposed communication 237.144 us vs 0.000 us");
  // A tie in time loses on memory, in the GiB the plans print.
  loser = winner;
  loser.memory.activations = 3.5 * double(1 << 30);
  winner.memory.activations = 3.0 * double(1 << 30);
  EXPECT_EQ(whyLost(winner, loser),
            "same step time, more memory: 3.50 GiB vs 3.00 GiB");
}

} // namespace

namespace {

TEST(PlanSearchTest, LongSequencesGetContextParallelPlans) {
  // Llama 7B on 32 H100s, 32 sequences: at 8192 tokens data parallelism
  // fits and wins; at 32768 a device cannot hold a whole sequence's
  // activations without recomputation, and the best plan splits it.
  mlir::MLIRContext context;
  context.loadDialect<LoomDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect>();
  ModelConfig config = loadConfig("llama-7b.json");
  config.maxPositions = 32768;
  cost::ClusterSpec cluster = loadCluster("h100-80g:4");
  auto best = [&](int64_t seq) {
    TrainingSetup setup;
    setup.globalBatch = 32;
    setup.seqLen = seq;
    PlanEvaluator evaluator(context, config, cluster, setup,
                            buildForwardBackward);
    SearchOptions options;
    options.topK = 1;
    auto result = searchPlans(evaluator, config, cluster, setup, options);
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    EXPECT_FALSE(result->best.empty());
    return result->best.front().plan;
  };
  EXPECT_EQ(best(8192).cp, 1);
  ParallelPlan long32k = best(32768);
  EXPECT_GT(long32k.cp, 1);
  EXPECT_EQ(long32k.dp * long32k.cp * long32k.tp * long32k.pp, 32);
}

} // namespace
