//===- PartitionTest.cpp - Partitioned training steps equal the original --===//
//
// The partitioner's bar (docs/design.md, principle 4): one full @train_step of
// a tiny GPT-2 and a tiny Llama (grouped-query attention), planned by
// --loom-auto-shard under the pins of a parallelism scheme, partitioned by
// --loom-partition and run on every rank of the mesh by the multi-rank
// interpreter, gives the loss and every updated parameter and optimizer
// moment of the unpartitioned step run by the single-rank interpreter, in
// float64 to a relative 1e-9. Each case also checks that the scheme is the
// one asked for (which arguments are split, which collectives appear).
//
//===----------------------------------------------------------------------===//

#include "PartitionTestSupport.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom::unittest;

namespace {
class PartitionTest : public PartitionFixture {};
} // namespace

#define FOR_EACH_MODEL(NAME, SCHEME, CHECK)                                    \
  TEST_F(PartitionTest, Gpt2##NAME) {                                          \
    checkScheme(gpt2Json(), SCHEME, CHECK);                                    \
  }                                                                            \
  TEST_F(PartitionTest, Llama##NAME) {                                         \
    checkScheme(llamaJson(), SCHEME, CHECK);                                   \
  }

// The batch is split, parameters stay whole, gradients are all-reduced.
FOR_EACH_MODEL(DataParallel4, dp4(), [](ModuleOp m) {
  EXPECT_TRUE(argSplit(m, "data", 0));
  EXPECT_FALSE(argSplit(m, "param", 0));
  EXPECT_GT(count(m, "shard.all_reduce"), 0);
})

// Weights split by Megatron's rule; activations reduced inside each layer.
FOR_EACH_MODEL(TensorParallel2, tp(2), [](ModuleOp m) {
  EXPECT_FALSE(argSplit(m, "data", 0));
  EXPECT_TRUE(argSplit(m, "param", 0));
  EXPECT_GT(count(m, "shard.all_reduce"), 0);
})
FOR_EACH_MODEL(TensorParallel4, tp(4),
               [](ModuleOp m) { EXPECT_TRUE(argSplit(m, "param", 0)); })

FOR_EACH_MODEL(DataTimesTensor2x2, dp2tp2(), [](ModuleOp m) {
  EXPECT_TRUE(argSplit(m, "data", 0));
  EXPECT_TRUE(argSplit(m, "param", 1));
  EXPECT_FALSE(argSplit(m, "param", 0));
})

// ZeRO-1 all-reduces the gradients whole and slices them; ZeRO-2
// reduce-scatters them; ZeRO-3 also gathers the split parameters.
FOR_EACH_MODEL(Zero1, zero(1), [](ModuleOp m) {
  EXPECT_TRUE(argSplit(m, "m", 0));
  EXPECT_FALSE(argSplit(m, "param", 0));
  EXPECT_GT(count(m, "shard.all_slice"), 0);
})
FOR_EACH_MODEL(Zero2, zero(2), [](ModuleOp m) {
  EXPECT_TRUE(argSplit(m, "m", 0));
  EXPECT_FALSE(argSplit(m, "param", 0));
  EXPECT_GT(count(m, "shard.reduce_scatter"), 0);
})
FOR_EACH_MODEL(Zero3, zero(3), [](ModuleOp m) {
  EXPECT_TRUE(argSplit(m, "param", 0));
  EXPECT_GT(count(m, "shard.all_gather"), 0);
  EXPECT_GT(count(m, "shard.reduce_scatter"), 0);
})

// Sequence parallelism: the tokens split by position; row-parallel outputs
// are reduce-scattered along the sequence and gathered again before the
// next column-parallel matmul.
FOR_EACH_MODEL(TensorSequenceParallel2, tpSequenceParallel(), [](ModuleOp m) {
  EXPECT_TRUE(argSplit(m, "param", 0));
  EXPECT_GT(count(m, "shard.reduce_scatter"), 0);
  EXPECT_GT(count(m, "shard.all_gather"), 0);
})

// Context parallelism: every device keeps its part of each sequence
// through the layers; a causal attention's queries are rows of the
// gathered keys at the device's offset, rotary positions likewise, and
// the keys' and values' gradients go back as partial sums, reduced and
// scattered along the sequence.
FOR_EACH_MODEL(ContextParallel2, contextParallel(2), [](ModuleOp m) {
  EXPECT_TRUE(argSplit(m, "data", 0));
  EXPECT_FALSE(argSplit(m, "param", 0));
  auto step = m.lookupSymbol<func::FuncOp>("train_step");
  int64_t attentions = 0;
  step.walk([&](loom::AttentionOp op) {
    ++attentions;
    EXPECT_EQ(op.getQ().getType().getDimSize(1) * 2,
              op.getK().getType().getDimSize(1));
    EXPECT_TRUE(op->hasAttr(loom::kMaskSplitAxesAttr));
  });
  EXPECT_EQ(attentions, 2);
  step.walk([&](loom::AttentionGradOp op) {
    EXPECT_EQ(op.getQ().getType().getDimSize(1) * 2,
              op.getK().getType().getDimSize(1));
  });
  step.walk([&](loom::RopeOp op) {
    EXPECT_TRUE(op->hasAttr(loom::kMaskSplitAxesAttr));
  });
  EXPECT_GT(count(m, "shard.all_gather"), 0);
  EXPECT_GT(count(m, "shard.reduce_scatter"), 0);
})

FOR_EACH_MODEL(SolverSplitsEverything4, computeBound("4"), [](ModuleOp m) {
  EXPECT_GT(count(m, "shard.all_to_all"), 0);
  EXPECT_GT(count(m, "shard.reduce_scatter"), 0);
})
FOR_EACH_MODEL(SolverSplitsEverything2x2, computeBound("2x2"),
               [](ModuleOp m) { EXPECT_GT(count(m, "shard.all_gather"), 0); })
