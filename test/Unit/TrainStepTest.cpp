//===- TrainStepTest.cpp - Reading @train_step's conventions --------------===//
//
// embeddingTablesOf finds the vocabulary a token file is checked against
// before training: the table that the tokens index, followed through the
// call into @forward_backward and through a reshape, and not a table that
// other ids (positions) index; tokenVocabulary reads the whole table's
// rows when a device holds a split of them.
//
//===----------------------------------------------------------------------===//

#include "loom/Training/TrainStep.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class TrainStepTest : public ::testing::Test {
protected:
  TrainStepTest() {
    context.loadDialect<loom::LoomDialect, func::FuncDialect,
                        shard::ShardDialect>();
  }

  /// The first dimension of every table `@step`'s argument `arg` indexes.
  std::vector<int64_t> vocabularies(const char *text, unsigned arg) {
    module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module);
    if (!module)
      return {};
    auto fn = module->lookupSymbol<func::FuncOp>("step");
    std::vector<int64_t> rows;
    for (Value table : loom::embeddingTablesOf(fn.getArgument(arg)))
      rows.push_back(cast<RankedTensorType>(table.getType()).getDimSize(0));
    return rows;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(TrainStepTest, TokensThroughACallAndAReshape) {
  const char *text = R"mlir(
    func.func @inner(%wte: tensor<300x4xf32>, %wpe: tensor<8x4xf32>,
                     %ids: tensor<2x8xi32>, %pos: tensor<2x8xi32>) -> tensor<16x4xf32> {
      %flat = loom.reshape %ids : tensor<2x8xi32> -> tensor<16xi32>
      %x = loom.embedding %wte, %flat : (tensor<300x4xf32>, tensor<16xi32>) -> tensor<16x4xf32>
      %p = loom.embedding %wpe, %pos : (tensor<8x4xf32>, tensor<2x8xi32>) -> tensor<2x8x4xf32>
      return %x : tensor<16x4xf32>
    }
    func.func @step(%wte: tensor<300x4xf32>, %wpe: tensor<8x4xf32>,
                    %tokens: tensor<2x8xi32>, %pos: tensor<2x8xi32>) -> tensor<16x4xf32> {
      %0 = func.call @inner(%wte, %wpe, %tokens, %pos)
          : (tensor<300x4xf32>, tensor<8x4xf32>, tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<16x4xf32>
      return %0 : tensor<16x4xf32>
    }
  )mlir";
  EXPECT_EQ(vocabularies(text, 2), std::vector<int64_t>{300});
  // The positions index only the position table.
  EXPECT_EQ(vocabularies(text, 3), std::vector<int64_t>{8});
}

TEST_F(TrainStepTest, NoEmbeddingReadsTheIds) {
  const char *text = R"mlir(
    func.func @step(%wte: tensor<300x4xf32>, %tokens: tensor<2x8xi32>) -> tensor<2x8xi32> {
      return %tokens : tensor<2x8xi32>
    }
  )mlir";
  EXPECT_TRUE(vocabularies(text, 1).empty());
}

TEST_F(TrainStepTest, ASplitTableCountsEveryShardsRows) {
  // Each of the 4 devices of axis 1 holds 75 of the table's 300 rows.
  const char *text = R"mlir(
    shard.grid @g(shape = 2x4)
    func.func @train_step(
        %wte: tensor<75x4xf32> {loom.role = "param", loom.name = "wte",
                                loom.split_axes = [[1]]},
        %tokens: tensor<2x8xi32> {loom.role = "data", loom.name = "tokens"})
        -> tensor<2x8x4xf32> {
      %x = loom.embedding %wte, %tokens : (tensor<75x4xf32>, tensor<2x8xi32>) -> tensor<2x8x4xf32>
      return %x : tensor<2x8x4xf32>
    }
  )mlir";
  module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  EXPECT_EQ(loom::tokenVocabulary(*module), std::optional<int64_t>(300));
}

TEST_F(TrainStepTest, NoVocabularyWithoutAnEmbeddingOfTheTokens) {
  const char *text = R"mlir(
    func.func @train_step(
        %tokens: tensor<2x8xi32> {loom.role = "data", loom.name = "tokens"})
        -> tensor<2x8xi32> {
      return %tokens : tensor<2x8xi32>
    }
  )mlir";
  module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  EXPECT_EQ(loom::tokenVocabulary(*module), std::nullopt);
}

} // namespace
