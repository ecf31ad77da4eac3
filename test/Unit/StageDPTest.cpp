//===- StageDPTest.cpp - Pipeline stage partitioning ----------------------===//
//
// Hand-checked cases (identical layers split evenly, a heavy head leaves the
// last stage fewer layers, memory forcing an uneven split, no partition
// fitting and the smallest peak that one could reach) and random chains
// against exhaustive enumeration of every partition.
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/StageDP.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace loom::plan;

namespace {

/// An embedding, `layers` identical layers of one second, and a head.
StageProblem chain(int64_t layers, double embedding, double head,
                   int64_t stages, int64_t microBatches) {
  StageProblem problem;
  problem.items.push_back({embedding, 0, 0});
  for (int64_t l = 0; l < layers; ++l)
    problem.items.push_back({1.0, 0, 0});
  problem.items.push_back({head, 0, 0});
  problem.numStages = stages;
  problem.numMicroBatches = microBatches;
  for (int64_t s = 0; s < stages; ++s) // 1F1B
    problem.inFlight.push_back(stages - s);
  return problem;
}

TEST(StageDPTest, UniformLayersSplitEvenly) {
  // 8 layers over 4 stages: two each, the embedding and head (free) at the
  // ends. Step time: Σ = 8 s, max = 2 s, 8 micro-batches: 8 + 7·2 = 22 s.
  auto partition = partitionStages(chain(8, 0, 0, 4, 8));
  ASSERT_TRUE(partition);
  EXPECT_EQ(partition->bounds, (std::vector<int64_t>{0, 3, 5, 7, 10}));
  EXPECT_DOUBLE_EQ(partition->maxSeconds, 2);
  EXPECT_DOUBLE_EQ(partition->pipelineSeconds, 22);
}

TEST(StageDPTest, HeavyHeadGetsFewerLayers) {
  // Head = 3 layers' time: stage 1 = head + 3 layers (6 s), stage 0 =
  // embedding + 5 layers (5.1 s); 2 layers on stage 1 would leave 6.1 s.
  auto partition = partitionStages(chain(8, 0.1, 3, 2, 4));
  ASSERT_TRUE(partition);
  EXPECT_EQ(partition->bounds, (std::vector<int64_t>{0, 6, 10}));
  EXPECT_DOUBLE_EQ(partition->maxSeconds, 6);
  EXPECT_DOUBLE_EQ(partition->pipelineSeconds, 11.1 + 3 * 6);
}

TEST(StageDPTest, StageSecondsCountOncePerStage) {
  // 1.5 s of sends on stage 0 only: 2 + 1.5 > 3, so the second stage takes
  // one more layer (stage 0: 1 + 1.5 s, stage 1: 3 s).
  StageProblem problem = chain(4, 0, 0, 2, 2);
  problem.stageSeconds = {1.5, 0};
  auto partition = partitionStages(problem);
  ASSERT_TRUE(partition);
  EXPECT_EQ(partition->bounds, (std::vector<int64_t>{0, 2, 6}));
  EXPECT_DOUBLE_EQ(partition->maxSeconds, 3);
  EXPECT_DOUBLE_EQ(partition->sumSeconds, 5.5);
}

TEST(StageDPTest, MemoryForcesUnevenSplit) {
  // One byte of activations per layer and micro-batch; stage 0 keeps two
  // micro-batches (1F1B over 2 stages), stage 1 one. With 3 bytes stage 0
  // fits one layer (2 bytes), not two (4): the split is 1 + 3.
  StageProblem problem = chain(4, 0, 0, 2, 4);
  for (StageItem &item : problem.items)
    item.activationBytes = item.seconds;
  EXPECT_EQ(partitionStages(problem)->bounds, (std::vector<int64_t>{0, 3, 6}));
  problem.capacity = 3;
  auto partition = partitionStages(problem);
  ASSERT_TRUE(partition);
  EXPECT_EQ(partition->bounds, (std::vector<int64_t>{0, 2, 6}));
  EXPECT_DOUBLE_EQ(partition->maxSeconds, 3);
  EXPECT_DOUBLE_EQ(partition->peakBytes, 3);
  EXPECT_DOUBLE_EQ(partition->pipelineSeconds, 4 + 3 * 3);
}

TEST(StageDPTest, NothingFitsReportsSmallestPeak) {
  // Static bytes 1 per layer plus a fixed 0.5 per stage: no stage holding
  // a layer fits 1 byte; the smallest peak is the 2 + 2 split's: 2 layers
  // + 0.5 = 2.5 bytes.
  StageProblem problem = chain(4, 0, 0, 2, 4);
  for (StageItem &item : problem.items)
    item.staticBytes = item.seconds;
  problem.stageBytes = 0.5;
  problem.capacity = 1;
  EXPECT_FALSE(partitionStages(problem));
  auto tightest = partitionForMemory(problem);
  ASSERT_TRUE(tightest);
  EXPECT_DOUBLE_EQ(tightest->peakBytes, 2.5);
  // Fewer items than stages has no partition at all.
  EXPECT_FALSE(partitionStages(chain(1, 0, 0, 4, 4)));
}

/// Every partition of `problem`, the fastest one that fits.
double bruteForce(const StageProblem &problem) {
  const int64_t n = problem.items.size(), p = problem.numStages;
  double best = std::numeric_limits<double>::infinity();
  std::vector<int64_t> bounds(p + 1);
  bounds[0] = 0;
  bounds[p] = n;
  std::function<void(int64_t)> place = [&](int64_t s) {
    if (s == p) {
      StagePartition partition = evaluatePartition(problem, bounds);
      if (partition.peakBytes <= problem.capacity)
        best = std::min(best, partition.pipelineSeconds);
      return;
    }
    for (int64_t b = bounds[s - 1] + 1; b <= n - (p - s); ++b) {
      bounds[s] = b;
      place(s + 1);
    }
  };
  if (p == 1) {
    StagePartition partition = evaluatePartition(problem, bounds);
    return partition.peakBytes <= problem.capacity ? partition.pipelineSeconds
                                                   : best;
  }
  place(1);
  return best;
}

TEST(StageDPTest, RandomChainsMatchExhaustiveSearch) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(0.1, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    StageProblem problem;
    int64_t n = 2 + rng() % 8;
    for (int64_t i = 0; i < n; ++i)
      problem.items.push_back({uniform(rng), uniform(rng), uniform(rng)});
    problem.numStages = 1 + rng() % std::min<int64_t>(n, 4);
    problem.numMicroBatches = 1 + rng() % 8;
    for (int64_t s = 0; s < problem.numStages; ++s)
      problem.inFlight.push_back(problem.numStages - s);
    problem.capacity = 4 + uniform(rng) * 4;
    double expected = bruteForce(problem);
    auto partition = partitionStages(problem);
    if (std::isinf(expected)) {
      EXPECT_FALSE(partition) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(partition) << "trial " << trial;
    EXPECT_NEAR(partition->pipelineSeconds, expected, 1e-9 * expected)
        << "trial " << trial;
    EXPECT_LE(partition->peakBytes, problem.capacity);
  }
}

} // namespace
