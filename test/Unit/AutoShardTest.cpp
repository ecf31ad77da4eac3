//===- AutoShardTest.cpp - Strategies from rules, resharding collectives
//---===//
//
// Strategies of a matmul on a 2-D mesh include Megatron's column and row
// splits with the shardings they imply; whole factors are never split;
// resharding picks the collective the layouts call for, at the cost
// cost::collectiveCost gives that collective, computed here separately.
//
//===----------------------------------------------------------------------===//

#include "loom/AutoShard/Resharding.h"
#include "loom/AutoShard/Strategies.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;
using namespace loom::autoshard;

namespace {

cost::ClusterSpec testCluster() {
  cost::ClusterSpec spec;
  spec.name = "test";
  spec.devicesPerNode = 8;
  spec.device.peakFlopsFP32 = spec.device.peakFlopsTF32 = 20e12;
  spec.device.peakFlopsBF16 = spec.device.peakFlopsFP16 = 300e12;
  spec.device.memoryBandwidth = 2e12;
  spec.device.memoryBytes = 80e9;
  spec.device.memoryEfficiency = spec.device.gemmEfficiency = 0.8;
  spec.device.gemmHalfWork = 1e9;
  spec.device.launchOverhead = 4e-6;
  spec.intraNode = {"nvlink", 300e9, 3e-6};
  return spec;
}

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
