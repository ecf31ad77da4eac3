//===- AutoShardTest.cpp - Strategies from rules, resharding collectives
//---===//
//
// Strategies of a matmul on a 2-D mesh include Megatron's column and row
// splits with the shardings they imply; whole factors are never split;
// resharding picks the collective the layouts call for, at the cost
// cost::collectiveCost gives that collective, computed here separately.
//
//===----------------------------------------------------------------------===//

#include "loom/AutoShard/Layers.h"
#include "loom/AutoShard/Problem.h"
#include "loom/AutoShard/Resharding.h"
#include "loom/AutoShard/Strategies.h"

#include "dialects/Loom/LoomOps.h"
#include "loom/Import/ModelImporter.h"
#include "passes/Autodiff/Passes.h"

#include "TestModels.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

#include <set>

using namespace mlir;
using namespace loom;
using namespace loom::autoshard;

namespace {

using unittest::testCluster;

class AutoShardTest : public ::testing::Test {
protected:
  AutoShardTest() { context.loadDialect<LoomDialect, func::FuncDialect>(); }

  /// Parses `op` inside a function with `args` and returns it.
  Operation *parseOp(const std::string &args, const std::string &op) {
    std::string text =
        "func.func @f(" + args + ") {\n  %r = " + op + "\n  return\n}";
    module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text;
    Operation *result = nullptr;
    module->walk(
        [&](ShardingRuleOpInterface op) { result = op.getOperation(); });
    return result;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TensorSharding sharding(std::initializer_list<std::vector<int64_t>> dims,
                        std::vector<int64_t> partial = {}) {
  TensorSharding result;
  for (const auto &axes : dims)
    result.dimAxes.emplace_back(axes.begin(), axes.end());
  result.partialAxes.assign(partial.begin(), partial.end());
  return result;
}

const Strategy *find(const std::vector<Strategy> &strategies,
                     llvm::ArrayRef<int64_t> axisFactor) {
  for (const Strategy &strategy : strategies)
    if (llvm::ArrayRef<int64_t>(strategy.axisFactor) == axisFactor)
      return &strategy;
  return nullptr;
}

TEST_F(AutoShardTest, MatmulHasMegatronsColumnAndRowSplits) {
  Operation *op = parseOp(
      "%x: tensor<8x16x64xf32>, %w: tensor<64x128xf32>",
      "loom.matmul %x, %w : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> "
      "tensor<8x16x128xf32>");
  OpShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
  // ([i, j, l], [l, k]) -> ([i, j, k]): factors i=8, j=16, k=128, l=64.
  DeviceMesh mesh{{2, 4}}; // data x tensor
  cost::ClusterSpec cluster = testCluster();
  std::vector<Strategy> strategies =
      enumerateStrategies(op, rule, mesh, cluster.device);
  // Each axis takes one of 4 factors or none, never the same factor twice
  // unless it is divisible by both: 5 x 5 assignments, all sizes divide.
  EXPECT_EQ(strategies.size(), 25u);
  ASSERT_EQ(strategies.front().axisFactor,
            (llvm::SmallVector<int64_t, 3>{-1, -1}));

  // Data parallel on axis 0 (i), column-parallel on axis 1 (k).
  const Strategy *column = find(strategies, {0, 2});
  ASSERT_TRUE(column);
  EXPECT_EQ(column->operands[0], sharding({{0}, {}, {}}));
  EXPECT_EQ(column->operands[1], sharding({{}, {1}}));
  EXPECT_EQ(column->results[0], sharding({{0}, {}, {1}}));
  EXPECT_EQ(column->localShapes.results[0],
            (llvm::SmallVector<int64_t, 4>{4, 16, 32}));
  // Row-parallel on axis 1 (l): the result is a partial sum over axis 1.
  const Strategy *row = find(strategies, {0, 3});
  ASSERT_TRUE(row);
  EXPECT_EQ(row->operands[0], sharding({{0}, {}, {1}}));
  EXPECT_EQ(row->operands[1], sharding({{1}, {}}));
  EXPECT_EQ(row->results[0], sharding({{0}, {}, {}}, {1}));
  // A quarter of the work per device for the tensor split, an eighth with
  // both axes: the compute time falls.
  EXPECT_LT(column->computeSeconds, strategies.front().computeSeconds);
  // One factor over both axes: i = 8 split 2 x 4 ways.
  const Strategy *both = find(strategies, {0, 0});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->results[0], sharding({{0, 1}, {}, {}}));
  EXPECT_EQ(both->localShapes.results[0],
            (llvm::SmallVector<int64_t, 4>{1, 16, 128}));
}

TEST_F(AutoShardTest, WholeAndIndivisibleFactorsAreNeverSplit) {
  Operation *op = parseOp("%x: tensor<6x64xf32>, %g: tensor<64xf32>, "
                          "%b: tensor<64xf32>",
                          "loom.layernorm %x, %g, %b {epsilon = 1.0e-05 : f64} "
                          ": tensor<6x64xf32>, tensor<64xf32>");
  OpShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
  DeviceMesh mesh{{4}};
  std::vector<Strategy> strategies =
      enumerateStrategies(op, rule, mesh, testCluster().device);
  // The normalized dimension is whole and 4 does not divide 6: only the
  // replicated strategy is left.
  ASSERT_EQ(strategies.size(), 1u);
  EXPECT_EQ(strategies[0].results[0], TensorSharding::replicated(2));
  mesh.shape = {2};
  EXPECT_EQ(enumerateStrategies(op, rule, mesh, testCluster().device).size(),
            2u);
}

TEST(ReshardingTest, PicksTheCollectiveTheLayoutsNeed) {
  cost::ClusterSpec cluster = testCluster();
  DeviceMesh mesh{{2, 4}};
  llvm::SmallVector<int64_t> shape{8, 16, 128};
  double bytes = 8 * 16 * 128 * 4.0;
  auto plan = [&](const TensorSharding &from, const TensorSharding &to) {
    return planResharding(from, to, shape, 4, mesh, cluster);
  };
  auto cost = [&](cost::Collective kind, double n, int64_t axis) {
    return cost::collectiveCost(kind, n, mesh.placement(axis, cluster), cluster)
        .seconds;
  };
  TensorSharding dataSplit = sharding({{0}, {}, {}});

  // Nothing to do.
  ReshardPlan same = plan(dataSplit, dataSplit);
  EXPECT_TRUE(same.steps.empty());
  EXPECT_EQ(same.cost(), 0);

  // Partial over the tensor axis to replicated on it: all-reduce of the
  // local (data-split) tensor.
  ReshardPlan reduce = plan(sharding({{0}, {}, {}}, {1}), dataSplit);
  ASSERT_EQ(reduce.steps.size(), 1u);
  EXPECT_EQ(reduce.steps[0].kind, ReshardKind::AllReduce);
  EXPECT_DOUBLE_EQ(reduce.seconds,
                   cost(cost::Collective::AllReduce, bytes / 2, 1));

  // Partial to split along the sequence: reduce-scatter (sequence
  // parallelism), cheaper than the all-reduce.
  ReshardPlan scatter =
      plan(sharding({{0}, {}, {}}, {1}), sharding({{0}, {1}, {}}));
  ASSERT_EQ(scatter.steps.size(), 1u);
  EXPECT_EQ(scatter.steps[0].kind, ReshardKind::ReduceScatter);
  EXPECT_EQ(scatter.steps[0].dim, 1);
  EXPECT_LT(scatter.seconds, reduce.seconds);

  // Split moved from one dimension to another: all-to-all.
  ReshardPlan move = plan(sharding({{0}, {1}, {}}), sharding({{0}, {}, {1}}));
  ASSERT_EQ(move.steps.size(), 1u);
  EXPECT_EQ(move.steps[0].kind, ReshardKind::AllToAll);
  EXPECT_DOUBLE_EQ(move.seconds,
                   cost(cost::Collective::AllToAll, bytes / 8, 1));

  // Split to replicated: all-gather whose n is the gathered tensor.
  ReshardPlan gather = plan(sharding({{0}, {1}, {}}), dataSplit);
  ASSERT_EQ(gather.steps.size(), 1u);
  EXPECT_EQ(gather.steps[0].kind, ReshardKind::AllGather);
  EXPECT_DOUBLE_EQ(gather.seconds,
                   cost(cost::Collective::AllGather, bytes / 2, 1));

  // Replicated to split: a local slice, free.
  ReshardPlan slice = plan(dataSplit, sharding({{0}, {1}, {}}));
  ASSERT_EQ(slice.steps.size(), 1u);
  EXPECT_EQ(slice.steps[0].kind, ReshardKind::Slice);
  EXPECT_EQ(slice.cost(), 0);

  // Nothing makes a full value partial again; splits must divide.
  EXPECT_FALSE(plan(dataSplit, sharding({{0}, {}, {}}, {1})).possible);
  EXPECT_FALSE(planResharding(dataSplit, sharding({{0}, {}, {}}), {3, 16, 128},
                              4, mesh, cluster)
                   .possible);
}

} // namespace

namespace {

TEST_F(AutoShardTest, ProblemOfAnMLPHasMegatronsFreePath) {
  std::string text = R"mlir(
    func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>,
                   %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
      %h = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
      %g = loom.gelu %h : tensor<8x32xf32>
      %y = loom.matmul %g, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
      return %y : tensor<8x16xf32>
    })mlir";
  module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  DeviceMesh mesh{{2}};
  auto problem =
      buildShardingProblem(fn, mesh, testCluster(), ProblemOptions{});
  ASSERT_TRUE(static_cast<bool>(problem))
      << llvm::toString(problem.takeError());
  // Three arguments, three ops, the returned value; six uses.
  ASSERT_EQ(problem->nodes.size(), 7u);
  ASSERT_EQ(problem->edges.size(), 6u);
  // %x may be replicated or split along either dimension.
  EXPECT_EQ(problem->nodes[0].strategies.size(), 3u);
  for (const ProblemEdge &edge : problem->edges) {
    ASSERT_EQ(edge.reshard.size(), problem->nodes[edge.from].strategies.size());
    ASSERT_EQ(edge.reshard[0].size(),
              problem->nodes[edge.to].strategies.size());
    // Replicated in, replicated out: free.
    EXPECT_EQ(edge.reshard[0][0], 0);
  }
  // Column-parallel first matmul (factor k = 32 of ([i, k0], [k0, k]) ...),
  // gelu split the same way, row-parallel second matmul: no resharding
  // between them.
  auto strategyIndex = [&](unsigned node, auto predicate) {
    const auto &strategies = problem->nodes[node].strategies;
    for (size_t i = 0; i < strategies.size(); ++i)
      if (predicate(strategies[i]))
        return int(i);
    return -1;
  };
  int column = strategyIndex(3, [&](const Strategy &s) {
    return s.results[0] == sharding({{}, {0}});
  });
  int gelu = strategyIndex(4, [&](const Strategy &s) {
    return s.operands[0] == sharding({{}, {0}});
  });
  int row = strategyIndex(5, [&](const Strategy &s) {
    return s.operands[0] == sharding({{}, {0}}) &&
           s.results[0] == sharding({{}, {}}, {0});
  });
  ASSERT_GE(column, 0);
  ASSERT_GE(gelu, 0);
  ASSERT_GE(row, 0);
  for (const ProblemEdge &edge : problem->edges) {
    if (edge.from == 3 && edge.to == 4)
      EXPECT_EQ(edge.reshard[column][gelu], 0);
    if (edge.from == 4 && edge.to == 5)
      EXPECT_EQ(edge.reshard[gelu][row], 0);
  }
  // The returned value must leave whole: from the row-parallel partial sum
  // that takes an all-reduce.
  const ProblemEdge &out = problem->edges.back();
  ASSERT_EQ(out.to, 6u);
  EXPECT_GT(out.reshard[row][0], 0);
}

TEST_F(AutoShardTest, TheSolverPicksDataParallelThenMegatronUnderABudget) {
  std::string text = R"mlir(
    func.func @mlp(%x: tensor<64x1024xf32>, %w1: tensor<1024x4096xf32>,
                   %w2: tensor<4096x1024xf32>) -> tensor<64x1024xf32> {
      %h = loom.matmul %x, %w1 : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32>
      %g = loom.gelu %h : tensor<64x4096xf32>
      %y = loom.matmul %g, %w2 : (tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32>
      return %y : tensor<64x1024xf32>
    })mlir";
  module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  DeviceMesh mesh{{4}};
  auto problem =
      buildShardingProblem(fn, mesh, testCluster(), ProblemOptions{});
  ASSERT_TRUE(static_cast<bool>(problem))
      << llvm::toString(problem.takeError());
  auto chosen = [&](const solver::StrategyPlan &plan, unsigned node) {
    return problem->nodes[node].strategies[plan.strategy[node]];
  };

  // Unconstrained: split the batch, replicate the weights, communicate
  // nothing.
  auto free = solveShardingProblem(*problem);
  ASSERT_TRUE(static_cast<bool>(free)) << llvm::toString(free.takeError());
  EXPECT_EQ(chosen(*free, 3).operands[0], sharding({{0}, {}}));
  EXPECT_EQ(chosen(*free, 3).operands[1], sharding({{}, {}}));
  EXPECT_EQ(free->reshardCost, 0);

  // 12 MB per device does not hold the two 16 MB weights replicated: the
  // weights are split Megatron's way, column then row, and the only
  // communication reduces the output's partial sums: a reduce-scatter, as
  // the output may leave in any whole layout (with sequence parallelism's
  // cost, half an all-reduce's bandwidth).
  solver::StrategyOptions budget;
  budget.memoryBudget = 12e6;
  auto megatron = solveShardingProblem(*problem, budget);
  ASSERT_TRUE(static_cast<bool>(megatron))
      << llvm::toString(megatron.takeError());
  EXPECT_EQ(chosen(*megatron, 3).operands[1], sharding({{}, {0}}));
  EXPECT_EQ(chosen(*megatron, 3).results[0], sharding({{}, {0}}));
  EXPECT_EQ(chosen(*megatron, 5).operands[1], sharding({{0}, {}}));
  EXPECT_EQ(chosen(*megatron, 5).results[0], sharding({{}, {}}, {0}));
  double reduceScatter =
      cost::collectiveCost(cost::Collective::ReduceScatter, 64 * 1024 * 4.0,
                           mesh.placement(0, testCluster()), testCluster())
          .seconds;
  EXPECT_NEAR(megatron->reshardCost, reduceScatter, 1e-12);
  EXPECT_FALSE(chosen(*megatron, 6).operands[0].dimAxes[0].empty() &&
               chosen(*megatron, 6).operands[0].dimAxes[1].empty());
  EXPECT_LE(megatron->memory, 12e6);
}

TEST(ArgumentShardingsTest, EveryAxisSplitsOneDividingDimensionOrNone) {
  DeviceMesh mesh{{2, 4}};
  std::vector<TensorSharding> shardings = argumentShardings({8, 6}, mesh);
  // Axis 0 (2): none, dim 0, dim 1; axis 1 (4): none, dim 0 (8/2/4 or 8/4),
  // not dim 1 (6 is not divisible by 4).
  EXPECT_EQ(shardings.front(), TensorSharding::replicated(2));
  EXPECT_EQ(shardings.size(), 6u);
  for (const TensorSharding &s : shardings)
    EXPECT_FALSE(s.localShape({8, 6}, mesh).empty()) << s.str();
}

TEST(LayerNameTest, FindsTheLayerIndexOfAParameterName) {
  EXPECT_EQ(layerOfName("transformer.h.11.attn.c_attn.weight"), 11);
  EXPECT_EQ(layerOfName("model.layers.3.mlp.up_proj.weight"), 3);
  EXPECT_EQ(layerOfName("blocks.0.ln.weight"), 0);
  EXPECT_EQ(layerOfName("transformer.wte.weight"), -1);
  EXPECT_EQ(layerOfName("transformer.ln_f.weight"), -1);
  EXPECT_EQ(layerOfName("graph.2.weight"), -1);
  EXPECT_EQ(layerOfName("transformer.h.x.weight"), -1);
}

/// A 4-layer GPT-2's @forward_backward, planned on 2 devices with and
/// without tying its repeated layers.
class LayerReuseTest : public AutoShardTest {
protected:
  void SetUp() override {
    context.loadDialect<arith::ArithDialect>();
    ModelConfig config = unittest::gpt2Config({/*layers=*/4, /*hidden=*/16,
                                               /*heads=*/2, /*vocab=*/32,
                                               /*positions=*/8});
    ImportOptions options;
    options.microBatch = 2;
    options.seqLen = 8;
    auto imported = importModel(context, config, options);
    ASSERT_TRUE(static_cast<bool>(imported))
        << llvm::toString(imported.takeError());
    module = std::move(*imported);
    PassManager pm(&context);
    pm.addPass(createLoomAutodiff());
    ASSERT_TRUE(succeeded(pm.run(*module)));
    fn = module->lookupSymbol<func::FuncOp>("forward_backward");
    ASSERT_TRUE(fn);
  }

  ShardingProblem build(bool reuse) {
    ProblemOptions options;
    options.reuseLayers = reuse;
    auto problem = buildShardingProblem(fn, mesh, testCluster(), options);
    EXPECT_TRUE(static_cast<bool>(problem))
        << llvm::toString(problem.takeError());
    return problem ? std::move(*problem) : ShardingProblem{};
  }

  DeviceMesh mesh{{2}};
  func::FuncOp fn;
};

TEST_F(LayerReuseTest, MiddleLayersAreTiedToARepresentative) {
  LayerTies ties = findRepeatedLayers(fn);
  // Layer 0 follows the embedding and layer 3 precedes the head (and holds
  // the loss): both differ from the middle layers, and layer 2 is layer 1
  // again.
  EXPECT_EQ(ties.numLayers, 4);
  EXPECT_EQ(ties.numRepresentatives, 3);
  ASSERT_FALSE(ties.ops.empty());
  for (auto [member, leader] : ties.arguments) {
    auto name = [&](unsigned i) {
      return fn.getArgAttrOfType<StringAttr>(i, kNameAttr).getValue();
    };
    EXPECT_EQ(layerOfName(name(member)), 2) << name(member).str();
    EXPECT_EQ(layerOfName(name(leader)), 1) << name(leader).str();
    EXPECT_EQ(name(member).drop_front(name(member).find(".attn")),
              name(leader).drop_front(name(leader).find(".attn")));
  }
  for (auto [member, leader] : ties.ops) {
    EXPECT_EQ(member->getName(), leader->getName());
    EXPECT_EQ(member->getResultTypes(), leader->getResultTypes());
    EXPECT_TRUE(leader->isBeforeInBlock(member) ||
                member->isBeforeInBlock(leader));
  }

  ShardingProblem problem = build(/*reuse=*/true);
  EXPECT_EQ(problem.numLayers, 4);
  EXPECT_EQ(problem.numRepresentativeLayers, 3);
  int tied = 0;
  int tiedFanouts = 0;
  for (const ProblemNode &node : problem.nodes) {
    if (node.leader < 0)
      continue;
    if (node.isFanout()) {
      // A fan-out follows the fan-out of its producer's leader.
      ++tiedFanouts;
      EXPECT_EQ(problem.nodes[node.fanoutSource].leader,
                problem.nodes[node.leader].fanoutSource);
    } else {
      ++tied;
    }
    // A follower shares its leader's very strategies, and costs.
    const ProblemNode &leader = problem.nodes[node.leader];
    EXPECT_TRUE(node.strategies.sameAs(leader.strategies));
    EXPECT_EQ(node.seconds, leader.seconds);
    EXPECT_EQ(leader.leader, -1);
  }
  // Every argument and op of layer 2 (the returned values are outside).
  EXPECT_EQ(size_t(tied), ties.arguments.size() + ties.ops.size());
  EXPECT_GT(tiedFanouts, 0);
  // Identical ops share their matrices too: far fewer distinct matrices
  // than edges.
  std::set<const std::vector<double> *> matrices;
  for (const ProblemEdge &edge : problem.edges)
    matrices.insert(edge.reshard.flat().get());
  EXPECT_LT(matrices.size(), problem.edges.size() / 2);
}

TEST_F(LayerReuseTest, TiedPlanCostsWhatThePlanOfEveryLayerCosts) {
  ShardingProblem tiedProblem = build(/*reuse=*/true);
  ShardingProblem freeProblem = build(/*reuse=*/false);
  EXPECT_EQ(freeProblem.numLayers, 0);
  ASSERT_EQ(tiedProblem.nodes.size(), freeProblem.nodes.size());
  solver::StrategyOptions options;
  auto tied = solveShardingProblem(tiedProblem, options);
  auto free = solveShardingProblem(freeProblem, options);
  ASSERT_TRUE(static_cast<bool>(tied)) << llvm::toString(tied.takeError());
  ASSERT_TRUE(static_cast<bool>(free)) << llvm::toString(free.takeError());
  // Followers take their leader's strategy.
  for (auto [v, node] : llvm::enumerate(tiedProblem.nodes))
    if (node.leader >= 0)
      EXPECT_EQ(tied->strategy[v], tied->strategy[node.leader]);
  // The memory of every layer counts, the followers' too.
  EXPECT_EQ(tied->memory, free->memory);
  // Tying is a restriction, so it never costs less; identical layers of
  // this model lose nothing by taking the same strategies (to 0.1%).
  EXPECT_GE(tied->totalCost(), free->totalCost() * (1 - 1e-9));
  EXPECT_NEAR(tied->totalCost(), free->totalCost(), 1e-3 * free->totalCost());
  // The tied ILP is smaller.
  EXPECT_LT(tied->numVariables, free->numVariables);
}

} // namespace

namespace {

// loom.split_axes, the attribute that pins an argument's layout and that
// the partitioner marks partitioned arguments with: one list of mesh axes
// per dimension, trailing ones optional.
TEST(SplitAxesAttrTest, RoundTripsAndFillsTrailingDimensions) {
  MLIRContext context;
  DeviceMesh mesh{{2, 4}};
  TensorSharding layout = sharding({{0}, {}, {1}});
  ArrayAttr attr = splitAxesAttr(&context, layout);
  std::string text;
  llvm::raw_string_ostream(text) << attr;
  EXPECT_EQ(text, "[[0], [], [1]]");
  auto parsed = parseSplitAxesAttr(attr, 3, mesh);
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(*parsed, layout);

  // [[1, 0]]: dimension 0 over both axes, axis 1 major; the others whole.
  auto trailing =
      parseSplitAxesAttr(parseAttribute("[[1, 0]]", &context), 3, mesh);
  ASSERT_TRUE(static_cast<bool>(trailing))
      << llvm::toString(trailing.takeError());
  EXPECT_EQ(*trailing, sharding({{1, 0}, {}, {}}));
  EXPECT_EQ(*parseSplitAxesAttr(parseAttribute("[]", &context), 2, mesh),
            TensorSharding::replicated(2));
}

TEST(SplitAxesAttrTest, RejectsMalformedAxes) {
  MLIRContext context;
  DeviceMesh mesh{{2, 4}};
  auto error = [&](const char *text, int64_t rank) {
    auto parsed =
        parseSplitAxesAttr(parseAttribute(text, &context), rank, mesh);
    EXPECT_FALSE(static_cast<bool>(parsed)) << text;
    return parsed ? std::string() : llvm::toString(parsed.takeError());
  };
  EXPECT_EQ(error("[[2]]", 2), "mesh axis 2 (dimension 0) is out of range: "
                               "the mesh has 2 axes");
  EXPECT_EQ(error("[[-1]]", 2), "mesh axis -1 (dimension 0) is out of range: "
                                "the mesh has 2 axes");
  EXPECT_EQ(error("[[0], [0]]", 2), "mesh axis 0 splits more than once");
  EXPECT_EQ(error("[[], [], []]", 2),
            "3 lists of split axes for a tensor of rank 2");
  std::string malformed =
      "expected an array of arrays of mesh axes, e.g. [[0], [], [1]]";
  EXPECT_EQ(error("[0]", 2), malformed);
  EXPECT_EQ(error("[[\"a\"]]", 2), malformed);
  EXPECT_EQ(error("0", 2), malformed);
}

// A pin keeps only the strategies that leave the value in its layout, with
// the matching rows and columns of the edges; a pin nothing meets is
// returned with its reason and changes nothing.
TEST_F(AutoShardTest, PinsRestrictStrategiesOrSayWhyNot) {
  std::string text = R"mlir(
    func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x6xf32>) -> tensor<8x6xf32> {
      %h = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x6xf32>) -> tensor<8x6xf32>
      %s = loom.softmax %h : tensor<8x6xf32>
      return %s : tensor<8x6xf32>
    })mlir";
  module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  DeviceMesh mesh{{2}};
  auto problem =
      buildShardingProblem(fn, mesh, testCluster(), ProblemOptions{});
  ASSERT_TRUE(static_cast<bool>(problem))
      << llvm::toString(problem.takeError());
  Operation *matmul = &fn.getBody().front().front();
  Operation *softmax = matmul->getNextNode();
  size_t softmaxStrategies = problem->nodes[3].strategies.size();

  std::vector<ShardingPin> pins = {
      {fn.getArgument(0), sharding({{0}, {}})},
      {matmul->getResult(0), sharding({{}, {0}})},
      // 6 splits over 2, but the softmax normalizes over it.
      {softmax->getResult(0), sharding({{}, {0}})},
      // 6 / 4 does not divide.
      {fn.getArgument(1), sharding({{}, {0}})},
  };
  DeviceMesh wide{{4}};
  std::vector<UnmetPin> unmet = applyPins(*problem, pins, mesh);
  ASSERT_EQ(unmet.size(), 1u);
  EXPECT_EQ(unmet[0].pin, 2u);
  EXPECT_EQ(unmet[0].reason,
            "'loom.softmax' has no strategy that leaves result 0 in this "
            "layout");
  // A pinned node keeps only the strategies that meet its pin allowed (the
  // others cost +inf); an unmet pin changes nothing.
  auto allowed = [&](unsigned node) {
    std::vector<const Strategy *> strategies;
    for (auto [i, strategy] : llvm::enumerate(problem->nodes[node].strategies))
      if (!std::isinf(problem->nodes[node].seconds[i]))
        strategies.push_back(&strategy);
    return strategies;
  };
  EXPECT_EQ(allowed(3).size(), softmaxStrategies);
  ASSERT_EQ(allowed(0).size(), 1u);
  EXPECT_EQ(allowed(0)[0]->results[0], sharding({{0}, {}}));
  ASSERT_EQ(allowed(1).size(), 1u);
  EXPECT_EQ(allowed(1)[0]->results[0], sharding({{}, {0}}));
  ASSERT_FALSE(allowed(2).empty());
  for (const Strategy *strategy : allowed(2))
    EXPECT_EQ(strategy->results[0], sharding({{}, {0}}));
  auto plan = solveShardingProblem(*problem);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(problem->nodes[0].strategies[plan->strategy[0]].results[0],
            sharding({{0}, {}}));

  std::vector<ShardingPin> indivisible = {
      {fn.getArgument(1), sharding({{}, {0}})}};
  auto widened =
      buildShardingProblem(fn, wide, testCluster(), ProblemOptions{});
  ASSERT_TRUE(static_cast<bool>(widened));
  unmet = applyPins(*widened, indivisible, wide);
  ASSERT_EQ(unmet.size(), 1u);
  EXPECT_EQ(unmet[0].reason,
            "dimension 1 of size 6 does not divide over 4 devices");
}

} // namespace

namespace {

// A 0-d tensor (a loss, a step counter) is always laid out whole: it may
// be stored replicated, and its partial sums are all-reduced.
TEST(ScalarShardingTest, ZeroDimensionalTensorsAreReplicatedOrPartial) {
  DeviceMesh mesh{{4}};
  EXPECT_TRUE(TensorSharding::replicated(0).divides({}, mesh));
  std::vector<TensorSharding> shardings = argumentShardings({}, mesh);
  ASSERT_EQ(shardings.size(), 1u);
  EXPECT_EQ(shardings[0], TensorSharding::replicated(0));
  ReshardPlan plan =
      planResharding(sharding({}, {0}), TensorSharding::replicated(0), {}, 4,
                     mesh, testCluster());
  ASSERT_TRUE(plan.possible);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, ReshardKind::AllReduce);
}

} // namespace
