//===- SolverTest.cpp - The ILP layer and Alpa's sharding ILP -------------===//
//
// ILP: a knapsack with a known optimum, integrality, infeasible / unbounded /
// time-limited models as distinct errors. StrategyGraph: hand-computed
// optima (a costly node choice that avoids resharding, a memory budget that
// forces sharding, ties, fixed nodes), the budget error, and random graphs
// against exhaustive enumeration. DISABLED_ScaleChain prints planning times
// for a 96 x 20 node chain (run with --gtest_also_run_disabled_tests).
//
//===----------------------------------------------------------------------===//

#include "loom/Solver/ILP.h"
#include "loom/Solver/StrategyGraph.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

using namespace loom::solver;

namespace {

constexpr double kGiB = double(1ull << 30);

std::string message(llvm::Error error) {
  return llvm::toString(std::move(error));
}

//===----------------------------------------------------------------------===//
// ILP
//===----------------------------------------------------------------------===//

TEST(ILPTest, KnapsackOptimum) {
  // max 60a + 100b + 120c, 10a + 20b + 30c <= 50: b and c, 220.
  ILP ilp;
  int a = ilp.addBinary(-60), b = ilp.addBinary(-100), c = ilp.addBinary(-120);
  ilp.addRow({{a, 10}, {b, 20}, {c, 30}}, -kInfinity, 50);
  auto solution = solve(ilp);
  ASSERT_TRUE(!!solution) << message(solution.takeError());
  EXPECT_EQ(solution->status, SolveStatus::Optimal);
  EXPECT_DOUBLE_EQ(solution->objective, -220);
  EXPECT_EQ(solution->values, (std::vector<double>{0, 1, 1}));
}

TEST(ILPTest, IntegerAgainstContinuous) {
  // min -x - y, 2x + 2y <= 3, x - y = 0 (ranged row with equal bounds).
  for (VarKind kind : {VarKind::Integer, VarKind::Continuous}) {
    ILP ilp;
    int x = ilp.addVariable(kind, 0, 10, -1, "x");
    int y = ilp.addVariable(kind, 0, 10, -1, "y");
    ilp.addRow({{x, 2}, {y, 2}}, -kInfinity, 3);
    ilp.addRow({{x, 1}, {y, -1}}, 0, 0);
    auto solution = solve(ilp);
    ASSERT_TRUE(!!solution) << message(solution.takeError());
    bool integer = kind == VarKind::Integer;
    EXPECT_NEAR(solution->objective, integer ? -0.0 : -1.5, 1e-9);
    EXPECT_NEAR(solution->values[x], integer ? 0.0 : 0.75, 1e-9);
  }
}

TEST(ILPTest, RangedRowAndFixedVariable) {
  // min x + y, 4 <= x + y <= 6 with x integer fixed to 3: y = 1.
  ILP ilp;
  int x = ilp.addVariable(VarKind::Integer, 0, 10, 1);
  int y = ilp.addVariable(VarKind::Continuous, 0, kInfinity, 1);
  ilp.fix(x, 3);
  ilp.addRow({{x, 1}, {y, 1}}, 4, 6);
  auto solution = solve(ilp);
  ASSERT_TRUE(!!solution) << message(solution.takeError());
  EXPECT_NEAR(solution->values[y], 1, 1e-9);
  EXPECT_NEAR(solution->objective, 4, 1e-9);
}

TEST(ILPTest, InfeasibleIsReported) {
  ILP ilp;
  int a = ilp.addBinary(1), b = ilp.addBinary(1);
  ilp.addRow({{a, 1}, {b, 1}}, 3, kInfinity);
  auto solution = solve(ilp);
  ASSERT_FALSE(!!solution);
  EXPECT_EQ(takeILPFailure(solution.takeError()), ILPFailure::Infeasible);
}

TEST(ILPTest, UnboundedIsReported) {
  ILP ilp;
  int x = ilp.addVariable(VarKind::Continuous, 0, kInfinity, -1);
  int y = ilp.addVariable(VarKind::Integer, 0, kInfinity, 0);
  ilp.addRow({{x, 1}, {y, -1}}, -kInfinity, 1);
  auto solution = solve(ilp);
  ASSERT_FALSE(!!solution);
  EXPECT_EQ(takeILPFailure(solution.takeError()), ILPFailure::Unbounded);
}

TEST(ILPTest, EmptyAndRowlessModels) {
  auto empty = solve(ILP{});
  ASSERT_TRUE(!!empty) << message(empty.takeError());
  EXPECT_EQ(empty->objective, 0);

  ILP rowless;
  rowless.addVariable(VarKind::Integer, -2.5, 4, 1);
  auto solution = solve(rowless);
  ASSERT_TRUE(!!solution) << message(solution.takeError());
  EXPECT_NEAR(solution->values[0], -2, 1e-9);
}

TEST(ILPTest, InvalidModelAndOptions) {
  ILP ilp;
  ilp.addVariable(VarKind::Continuous, 0, 1, std::nan(""));
  EXPECT_EQ(takeILPFailure(solve(ilp).takeError()), ILPFailure::InvalidModel);
  ILP bounds;
  bounds.addVariable(VarKind::Integer, 0.2, 0.8, 1);
  EXPECT_EQ(takeILPFailure(solve(bounds).takeError()),
            ILPFailure::InvalidModel);
  SolveOptions options;
  options.threads = 0;
  EXPECT_EQ(takeILPFailure(solve(ILP{}, options).takeError()),
            ILPFailure::InvalidModel);
}

TEST(ILPTest, TimeLimitWithoutSolution) {
  // A market split instance (Cornuéjols & Dawande 1999): equality rows
  // with random coefficients; branch and bound neither finds a point nor
  // proves there is none in a fraction of a second.
  std::mt19937 rng(1);
  ILP ilp;
  const int rows = 6, cols = 50;
  for (int j = 0; j < cols; ++j)
    ilp.addBinary(0);
  for (int r = 0; r < rows; ++r) {
    std::vector<std::pair<int, double>> terms;
    double sum = 0;
    for (int j = 0; j < cols; ++j) {
      double a = rng() % 100;
      terms.push_back({j, a});
      sum += a;
    }
    ilp.addRow(terms, std::floor(sum / 2), std::floor(sum / 2));
  }
  SolveOptions options;
  options.timeLimitSeconds = 0.3;
  auto begin = std::chrono::steady_clock::now();
  auto solution = solve(ilp, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  ASSERT_FALSE(!!solution);
  EXPECT_EQ(takeILPFailure(solution.takeError()),
            ILPFailure::TimeLimitWithoutSolution);
  EXPECT_LT(seconds, 5.0);
}

//===----------------------------------------------------------------------===//
// StrategyGraph
//===----------------------------------------------------------------------===//

TEST(StrategyGraphTest, CostlyChoiceAvoidsResharding) {
  // A prefers 0, C prefers 1; B's strategies 0 and 1 each match one end
  // only (resharding 8), strategy 2 (e.g. replicated) costs 3 but takes
  // and gives any layout for free. By hand: (0,2,1) costs 3; the next best,
  // (0,1,1) and (0,0,1), cost 8.
  StrategyGraph graph;
  int a = graph.addNode("A", {0, 10}, {0, 0});
  int b = graph.addNode("B", {0, 0, 3}, {0, 0, 0});
  int c = graph.addNode("C", {10, 0}, {0, 0});
  graph.addEdge(a, b, {0, 8, 0, 8, 0, 0});
  graph.addEdge(b, c, {0, 8, 8, 0, 0, 0});
  auto plan = solveStrategyGraph(graph);
  ASSERT_TRUE(!!plan) << message(plan.takeError());
  EXPECT_EQ(plan->strategy, (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(plan->computeCost, 3);
  EXPECT_EQ(plan->reshardCost, 0);
  EXPECT_EQ(plan->status, SolveStatus::Optimal);
}

/// Two weights, each replicated (no communication, the full optimizer
/// state) or sharded ZeRO-style (a reduce-scatter and an all-gather, an
/// eighth of the state).
StrategyGraph zeroGraph() {
  StrategyGraph graph;
  int w1 = graph.addNode("w1", {0, 2}, {8 * kGiB, 1 * kGiB});
  int w2 = graph.addNode("w2", {0, 3}, {6 * kGiB, 1 * kGiB});
  int use = graph.addNode("matmul", {1}, {0.5 * kGiB});
  graph.addEdge(w1, use, {0, 0});
  graph.addEdge(w2, use, {0, 0});
  return graph;
}

TEST(StrategyGraphTest, MemoryBudgetForcesSharding) {
  StrategyGraph graph = zeroGraph();
  struct Case {
    double budget;
    std::vector<int> strategy;
    double cost;
  };
  // Unbounded: both replicated (14.5 GiB). 10 GiB: sharding w1 (7.5 GiB,
  // +2) beats sharding w2 (9.5 GiB, +3). 2.5 GiB: both sharded.
  for (const Case &c :
       {Case{kInfinity, {0, 0, 0}, 1}, Case{10 * kGiB, {1, 0, 0}, 3},
        Case{2.5 * kGiB, {1, 1, 0}, 6}}) {
    StrategyOptions options;
    options.memoryBudget = c.budget;
    auto plan = solveStrategyGraph(graph, options);
    ASSERT_TRUE(!!plan) << message(plan.takeError());
    EXPECT_EQ(plan->strategy, c.strategy) << c.budget;
    EXPECT_EQ(plan->totalCost(), c.cost);
    EXPECT_LE(plan->memory, c.budget);
  }
}

TEST(StrategyGraphTest, InfeasibleBudgetSaysTheMinimum) {
  StrategyOptions options;
  options.memoryBudget = 2 * kGiB;
  auto plan = solveStrategyGraph(zeroGraph(), options);
  ASSERT_FALSE(!!plan);
  double minimum = -1;
  std::string text;
  llvm::handleAllErrors(plan.takeError(), [&](const MemoryBudgetError &e) {
    minimum = e.minimumMemory;
    text = e.message();
  });
  EXPECT_EQ(minimum, 2.5 * kGiB);
  EXPECT_NE(text.find("memory budget of 2147483648 bytes (2.000 GiB)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("at least 2684354560 bytes (2.500 GiB)"),
            std::string::npos)
      << text;
}

TEST(StrategyGraphTest, MinimumMemoryWithForbiddenPairs) {
  // The least-memory strategies of a and b (1 and 1) may not be taken
  // together, so the minimum is min(1 + 4, 3 + 1) = 4 (an ILP, not the sum
  // of per-node minima, 2).
  StrategyGraph graph;
  int a = graph.addNode("a", {0, 0}, {1, 3});
  int b = graph.addNode("b", {0, 0}, {1, 4});
  graph.addEdge(a, b, {kInfinity, 0, 0, 0});
  StrategyOptions options;
  options.memoryBudget = 3.5;
  auto plan = solveStrategyGraph(graph, options);
  ASSERT_FALSE(!!plan);
  double minimum = -1;
  llvm::handleAllErrors(plan.takeError(), [&](const MemoryBudgetError &e) {
    minimum = e.minimumMemory;
  });
  EXPECT_EQ(minimum, 4);
}

TEST(StrategyGraphTest, FollowersTakeTheLeadersStrategy) {
  // Alone, layer0 picks 0 and layer1 picks 1 (cost 0). Tied, index 0
  // costs 10 + 1 (diagonal resharding) and index 1 costs 5 + 2.
  StrategyGraph graph;
  int leader = graph.addNode("layer0", {0, 5}, {0, 0});
  int follower = graph.addNode("layer1", {10, 0}, {0, 0}, leader);
  graph.addEdge(leader, follower, {1, 100, 100, 2});
  int other = graph.addNode("head", {0, 0}, {0, 0});
  graph.addEdge(follower, other, {0, 7, 7, 0});
  auto plan = solveStrategyGraph(graph);
  ASSERT_TRUE(!!plan) << message(plan.takeError());
  EXPECT_EQ(plan->strategy, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(plan->computeCost, 5);
  EXPECT_EQ(plan->reshardCost, 2);
}

TEST(StrategyGraphTest, TiedLayersShareVariables) {
  // Four identical layers of two ops: with ties the ILP is one layer's.
  StrategyGraph graph;
  int prev = -1;
  std::vector<int> firstLayer;
  for (int layer = 0; layer < 4; ++layer) {
    for (int op = 0; op < 2; ++op) {
      std::optional<int> lead;
      if (layer > 0)
        lead = firstLayer[op];
      int v = graph.addNode("op", {1, 2, 3}, {3, 2, 1}, lead);
      if (layer == 0)
        firstLayer.push_back(v);
      if (prev >= 0)
        graph.addEdge(prev, v, {0, 1, 1, 1, 0, 1, 1, 1, 0});
      prev = v;
    }
  }
  auto plan = solveStrategyGraph(graph);
  ASSERT_TRUE(!!plan) << message(plan.takeError());
  EXPECT_EQ(plan->strategy, std::vector<int>(8, 0));
  // Two classes of 3 strategies, one merged edge of 3 x 3.
  EXPECT_EQ(plan->numVariables, 3 + 3 + 9);
}

TEST(StrategyGraphTest, SingleStrategyNodesAreFixed) {
  // x has one strategy, z one allowed one; y's choice then only depends on
  // the folded edges: y = 1 (5 + 0 + 0) beats y = 2 (5 + 1 + 0).
  StrategyGraph graph;
  int x = graph.addNode("x", {1}, {10});
  int y = graph.addNode("y", {5, 5, 5}, {1, 1, 1});
  int z = graph.addNode("z", {kInfinity, 4}, {0, 2});
  graph.addEdge(x, y, {2, 0, 1});
  graph.addEdge(y, z, {0, 3, 0, 0, 0, 0});
  auto plan = solveStrategyGraph(graph);
  ASSERT_TRUE(!!plan) << message(plan.takeError());
  EXPECT_EQ(plan->strategy, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(plan->totalCost(), 10);
  EXPECT_EQ(plan->memory, 13);
  EXPECT_EQ(plan->numVariables, 3); // only y's s

  StrategyGraph fixedOnly;
  int p = fixedOnly.addNode("p", {1}, {4});
  int q = fixedOnly.addNode("q", {kInfinity, 2}, {1, 1});
  fixedOnly.addEdge(p, q, {5, 6});
  auto fixedPlan = solveStrategyGraph(fixedOnly);
  ASSERT_TRUE(!!fixedPlan) << message(fixedPlan.takeError());
  EXPECT_EQ(fixedPlan->numVariables, 0);
  EXPECT_EQ(fixedPlan->totalCost(), 9);
  StrategyOptions tight;
  tight.memoryBudget = 4;
  auto over = solveStrategyGraph(fixedOnly, tight);
  ASSERT_FALSE(!!over);
  EXPECT_NE(message(over.takeError()).find("at least 5 bytes"),
            std::string::npos);
}

TEST(StrategyGraphTest, ForbiddenEverythingIsInfeasible) {
  StrategyGraph graph;
  int a = graph.addNode("a", {0, 0}, {0, 0});
  int b = graph.addNode("b", {0, 0}, {0, 0});
  graph.addEdge(a, b, {kInfinity, 0, 0, kInfinity});
  int c = graph.addNode("c", {0, 0}, {0, 0});
  graph.addEdge(b, c, {kInfinity, 0, 0, kInfinity});
  graph.addEdge(a, c, {kInfinity, 0, 0, kInfinity}); // odd cycle
  auto plan = solveStrategyGraph(graph);
  ASSERT_FALSE(!!plan);
  EXPECT_EQ(takeILPFailure(plan.takeError()), ILPFailure::Infeasible);
}

TEST(StrategyGraphTest, MalformedGraphsAreRejected) {
  StrategyGraph sizes;
  sizes.addNode("a", {0, 1}, {0});
  EXPECT_NE(message(solveStrategyGraph(sizes).takeError()).find("node 'a'"),
            std::string::npos);
  StrategyGraph ties;
  int a = ties.addNode("a", {0, 1}, {0, 0});
  ties.addNode("b", {0, 1, 2}, {0, 0, 0}, a);
  EXPECT_NE(message(solveStrategyGraph(ties).takeError()).find("follows"),
            std::string::npos);
  StrategyGraph edge;
  int x = edge.addNode("x", {0, 1}, {0, 0});
  int y = edge.addNode("y", {0}, {0});
  edge.addEdge(x, y, {0});
  EXPECT_NE(message(solveStrategyGraph(edge).takeError()).find("resharding"),
            std::string::npos);
}

/// The best total cost over every choice within `budget` (+inf if none).
double bruteForce(const StrategyGraph &graph, double budget) {
  int n = graph.numNodes();
  std::vector<int> choice(n, 0);
  double best = kInfinity;
  while (true) {
    bool tiesHeld = true;
    for (int v = 0; v < n; ++v)
      if (auto lead = graph.node(v).followerOf)
        tiesHeld &= choice[v] == choice[*lead];
    if (tiesHeld && graph.memoryOf(choice) <= budget)
      best = std::min(best, graph.computeCostOf(choice) +
                                graph.reshardCostOf(choice));
    int v = 0;
    while (v < n && ++choice[v] == graph.node(v).numStrategies())
      choice[v++] = 0;
    if (v == n)
      return best;
  }
}

TEST(StrategyGraphTest, MatchesExhaustiveEnumeration) {
  std::mt19937 rng(20240601);
  std::uniform_real_distribution<double> uniform(0, 1);
  int checked = 0, infeasible = 0;
  for (int trial = 0; trial < 60; ++trial) {
    StrategyGraph graph;
    const int n = 6;
    for (int v = 0; v < n; ++v) {
      int k = 2 + rng() % 3;
      std::vector<double> cost, memory;
      for (int i = 0; i < k; ++i) {
        cost.push_back(uniform(rng) < 0.08 ? kInfinity : 10 * uniform(rng));
        memory.push_back(std::floor(100 * uniform(rng)) * kGiB / 64);
      }
      if (llvm::none_of(cost, [](double c) { return std::isfinite(c); }))
        cost[0] = 1;
      std::optional<int> lead;
      if (v >= 3 && graph.node(v - 3).numStrategies() == k &&
          uniform(rng) < 0.3)
        lead = v - 3;
      graph.addNode("n" + std::to_string(v), cost, memory, lead);
    }
    for (int u = 0; u < n; ++u)
      for (int v = u + 1; v < n; ++v) {
        if (uniform(rng) > 0.45)
          continue;
        std::vector<double> reshard;
        bool zero = uniform(rng) < 0.15;
        for (int i = 0;
             i < graph.node(u).numStrategies() * graph.node(v).numStrategies();
             ++i)
          reshard.push_back(zero                  ? 0
                            : uniform(rng) < 0.05 ? kInfinity
                                                  : 20 * uniform(rng));
        graph.addEdge(u, v, reshard);
      }
    StrategyOptions options;
    options.memoryBudget =
        trial % 3 == 0 ? kInfinity : (100 + 300 * uniform(rng)) * kGiB / 64;
    double expected = bruteForce(graph, options.memoryBudget);
    auto plan = solveStrategyGraph(graph, options);
    if (std::isinf(expected)) {
      ++infeasible;
      EXPECT_FALSE(!!plan) << "trial " << trial;
      if (!plan)
        llvm::consumeError(plan.takeError());
      continue;
    }
    ASSERT_TRUE(!!plan) << "trial " << trial << ": "
                        << message(plan.takeError());
    EXPECT_NEAR(plan->totalCost(), expected,
                1e-9 * std::max(1.0, std::fabs(expected)))
        << "trial " << trial;
    EXPECT_LE(plan->memory, options.memoryBudget);
    ++checked;
  }
  EXPECT_GT(checked, 40);
  EXPECT_GT(infeasible, 0);
}

/// A chain of `layers` x `opsPerLayer` nodes with 4-8 strategies, edges
/// between consecutive nodes, optionally every layer tied to the first.
StrategyGraph chain(int layers, int opsPerLayer, bool tied, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  StrategyGraph graph;
  std::vector<int> ks;
  for (int op = 0; op < opsPerLayer; ++op)
    ks.push_back(4 + rng() % 5);
  for (int layer = 0; layer < layers; ++layer)
    for (int op = 0; op < opsPerLayer; ++op) {
      int k = ks[op];
      std::vector<double> cost, memory;
      for (int i = 0; i < k; ++i) {
        cost.push_back(uniform(rng));
        memory.push_back(std::floor(64 * uniform(rng)) * kGiB / 1024);
      }
      std::optional<int> lead;
      if (tied && layer > 0)
        lead = op;
      int v = graph.addNode("op", cost, memory, lead);
      if (v > 0) {
        std::vector<double> reshard;
        for (int i = 0; i < graph.node(v - 1).numStrategies() * k; ++i)
          reshard.push_back(uniform(rng) < 0.2 ? 0 : uniform(rng));
        graph.addEdge(v - 1, v, reshard);
      }
    }
  return graph;
}

TEST(StrategyGraphTest, DISABLED_ScaleChain) {
  for (bool tied : {true, false}) {
    for (bool budget : {false, true}) {
      StrategyGraph graph = chain(96, 20, tied, 7);
      StrategyOptions options;
      options.solve.timeLimitSeconds = 600;
      if (budget) {
        // A quarter of the way from the least memory to the most.
        double low = 0, high = 0;
        for (int v = 0; v < graph.numNodes(); ++v) {
          const auto &m = graph.node(v).memory;
          low += *std::min_element(m.begin(), m.end());
          high += *std::max_element(m.begin(), m.end());
        }
        options.memoryBudget = low + (high - low) / 4;
      }
      auto begin = std::chrono::steady_clock::now();
      auto plan = solveStrategyGraph(graph, options);
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - begin)
                           .count();
      if (!plan) { // ties can make the budget infeasible: print it
        llvm::outs() << "chain 96x20 " << (tied ? "tied" : "untied") << ": "
                     << message(plan.takeError()) << "\n";
        continue;
      }
      llvm::outs() << llvm::formatv(
          "chain 96x20 {0} {1}: {2} variables, {3} rows, cost {4:F4}, "
          "{5}, {6:F2} s\n",
          tied ? "tied" : "untied", budget ? "budget" : "no budget",
          plan->numVariables, plan->numRows, plan->totalCost(),
          stringifySolveStatus(plan->status), seconds);
      llvm::outs().flush();
    }
  }
}

} // namespace
