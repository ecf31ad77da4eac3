//===- SequenceSplitTest.cpp - Where the planner may split the sequence ---===//
//
// The sequence and the residual width are found from the dataflow (token
// arguments, attention, layer norms) and carried through every rule; the
// modes forbid exactly the strategies that split them where Megatron-LM's
// forms do not; partial sums flow through linear ops only; a value with
// several uses reaches them through one fan-out node; saved activations
// count in the memory of the op that keeps them.
//
//===----------------------------------------------------------------------===//

#include "loom/AutoShard/SequenceSplit.h"
#include "loom/AutoShard/Problem.h"

#include "dialects/Loom/LoomOps.h"

#include "TestModels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using namespace loom;
using namespace loom::autoshard;

namespace {

// x [batch 2, sequence 8, width 16] -> layer norm -> column-split matmul
// (width 16 -> 32) -> mean. The layer norm's input is read after the loss
// by a (stand-in) backward op, so it is a saved activation.
constexpr const char *kBlock = R"(
func.func @f(%x: tensor<2x8x16xf32> {loom.role = "data"},
             %g: tensor<16xf32>, %b: tensor<16xf32>,
             %w: tensor<16x32xf32>) -> (tensor<f32>, tensor<2x8x16xf32>) {
  %n = loom.layernorm %x, %g, %b {epsilon = 1.0e-05 : f64} : tensor<2x8x16xf32>, tensor<16xf32>
  %y = loom.matmul %n, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %l = loom.reduce_mean %y [0, 1, 2] : tensor<2x8x32xf32> -> tensor<f32>
  %back = loom.neg %n : tensor<2x8x16xf32>
  return %l, %back : tensor<f32>, tensor<2x8x16xf32>
}
)";

class SequenceSplitTest : public ::testing::Test {
protected:
  SequenceSplitTest() {
    context.loadDialect<LoomDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kBlock, &context);
  }
  func::FuncOp fn() { return module->lookupSymbol<func::FuncOp>("f"); }
  template <typename OpT> Operation *first() {
    Operation *found = nullptr;
    fn().walk([&](OpT op) {
      if (!found)
        found = op;
    });
    return found;
  }
  ShardingProblem problem(const DeviceMesh &mesh) {
    auto built = buildShardingProblem(fn(), mesh, unittest::testCluster(1),
                                      ProblemOptions{});
    EXPECT_TRUE(bool(built)) << llvm::toString(built.takeError());
    return std::move(*built);
  }
  const ProblemNode &nodeOf(const ShardingProblem &problem, Operation *op) {
    for (const ProblemNode &node : problem.nodes)
      if (node.op == op)
        return node;
    ADD_FAILURE() << "no node";
    return problem.nodes.front();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(SequenceSplitTest, FindsTheSequenceAndTheResidualWidth) {
  ASSERT_TRUE(module);
  auto factors = findResidualFactors(fn());
  auto kinds = [&](Operation *op) {
    auto rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
    // Which factor maps dimension `dim` of operand 0.
    return [&, rule, op](int64_t dim) {
      return factors[op][rule.getOperands()[0][dim].front()];
    };
  };
  auto norm = kinds(first<LayerNormOp>());
  EXPECT_EQ(norm(0), 0); // the batch
  EXPECT_EQ(norm(1), kSequenceFactor | kTokenFactor);
  EXPECT_EQ(norm(2), kModelFactor);
  // The matmul's contraction is the residual width; its output width is
  // not.
  Operation *matmul = first<MatmulOp>();
  auto rule = cast<ShardingRuleOpInterface>(matmul).getShardingRule();
  EXPECT_EQ(factors[matmul][rule.getOperands()[0][1].front()],
            kSequenceFactor | kTokenFactor);
  EXPECT_EQ(factors[matmul][rule.getOperands()[0][2].front()], kModelFactor);
  EXPECT_EQ(factors[matmul][rule.getOperands()[1][1].front()], 0);
}

TEST_F(SequenceSplitTest, ModesForbidWhatMegatronDoesNotSplit) {
  ASSERT_TRUE(module);
  DeviceMesh mesh{{2}};
  // Strategy seconds are infinite where forbidden: whether `op` may still
  // split the dimension `dim` of its operand 0.
  auto allowed = [&](const ShardingProblem &problem, Operation *op,
                     int64_t dim) {
    const ProblemNode &node = nodeOf(problem, op);
    for (auto [i, strategy] : llvm::enumerate(node.strategies))
      if (!strategy.operands[0].dimAxes[dim].empty() &&
          std::isfinite(node.seconds[i]))
        return true;
    return false;
  };
  Operation *norm = first<LayerNormOp>(), *matmul = first<MatmulOp>();
  Operation *neg = first<NegOp>();

  ShardingProblem any = problem(mesh);
  EXPECT_EQ(restrictSequenceSplits(any, SequenceSplit::Any, fn()), 0);
  EXPECT_TRUE(allowed(any, norm, 1));
  EXPECT_TRUE(allowed(any, neg, 2));

  ShardingProblem none = problem(mesh);
  EXPECT_GT(restrictSequenceSplits(none, SequenceSplit::None, fn()), 0);
  EXPECT_TRUE(allowed(none, norm, 0)); // data parallelism stays
  EXPECT_FALSE(allowed(none, norm, 1));
  EXPECT_FALSE(allowed(none, matmul, 1));
  EXPECT_FALSE(allowed(none, neg, 2));   // the residual width outside GEMMs
  EXPECT_TRUE(allowed(none, matmul, 2)); // row-parallel contraction

  ShardingProblem megatron = problem(mesh);
  EXPECT_GT(restrictSequenceSplits(megatron, SequenceSplit::Megatron, fn()), 0);
  EXPECT_TRUE(allowed(megatron, norm, 1)); // sequence parallelism
  EXPECT_FALSE(allowed(megatron, matmul, 1));
  EXPECT_FALSE(allowed(megatron, neg, 2));
  EXPECT_TRUE(allowed(megatron, matmul, 2));

  auto parsed = parseSequenceSplit("sometimes");
  ASSERT_FALSE(bool(parsed));
  EXPECT_EQ(llvm::toString(parsed.takeError()),
            "sequence-parallel=\"sometimes\" is not one of: any, megatron, "
            "none");
}

TEST_F(SequenceSplitTest, LinearOpsPassPartialSums) {
  ASSERT_TRUE(module);
  ShardingProblem built = problem(DeviceMesh{{2}});
  auto passes = [&](Operation *op) {
    for (const Strategy &strategy : nodeOf(built, op).strategies)
      if (llvm::is_contained(strategy.axisFactor, kPassPartial)) {
        EXPECT_EQ(strategy.operands[0].partialAxes,
                  llvm::SmallVector<int64_t>{0});
        EXPECT_EQ(strategy.results[0].partialAxes,
                  llvm::SmallVector<int64_t>{0});
        return true;
      }
    return false;
  };
  EXPECT_TRUE(passes(first<NegOp>()));
  EXPECT_TRUE(passes(first<ReduceMeanOp>()));
  EXPECT_FALSE(passes(first<LayerNormOp>()));
  EXPECT_FALSE(passes(first<MatmulOp>()));
}

TEST_F(SequenceSplitTest, SeveralUsesGoThroughOneFanout) {
  ASSERT_TRUE(module);
  ShardingProblem built = problem(DeviceMesh{{2}});
  Operation *norm = first<LayerNormOp>();
  int fanouts = 0;
  for (auto [index, node] : llvm::enumerate(built.nodes)) {
    if (!node.isFanout())
      continue;
    ++fanouts;
    EXPECT_EQ(node.fanoutOf, norm->getResult(0));
    EXPECT_EQ(built.nodes[node.fanoutSource].op, norm);
    // One edge in, one per use out.
    int in = 0, out = 0;
    for (const ProblemEdge &edge : built.edges) {
      in += edge.to == index;
      out += edge.from == index;
    }
    EXPECT_EQ(in, 1);
    EXPECT_EQ(out, 2);
    // Whole, split, and partial layouts to pass the value on in.
    bool partial = false;
    for (const Strategy &strategy : node.strategies)
      partial |= !strategy.results[0].partialAxes.empty();
    EXPECT_TRUE(partial);
  }
  EXPECT_EQ(fanouts, 1);
}

TEST_F(SequenceSplitTest, SavedActivationsCountInTheirProducersMemory) {
  ASSERT_TRUE(module);
  ShardingProblem built = problem(DeviceMesh{{2}});
  // The norm's output (2*8*16 floats) is read after the loss: each strategy
  // keeps its local share; the matmul's output dies at the loss.
  const ProblemNode &norm = nodeOf(built, first<LayerNormOp>());
  for (auto [i, strategy] : llvm::enumerate(norm.strategies)) {
    double devices = 1;
    for (const auto &axes : strategy.results[0].dimAxes)
      devices *= axes.empty() ? 1 : 2;
    EXPECT_DOUBLE_EQ(norm.memory[i], 2 * 8 * 16 * 4 / devices);
  }
  for (double bytes : nodeOf(built, first<MatmulOp>()).memory)
    EXPECT_EQ(bytes, 0);
}

} // namespace
