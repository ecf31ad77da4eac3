//===- PartitionDropoutTest.cpp - Partitioned dropout draws global masks --===//
//
// Dropout masks are a function of an element's index in the global tensor
// (DropoutMask.h). A partitioned dropout op carries `loom.mask_split_axes`
// and each rank of the multi-rank interpreter draws its elements' masks at
// their global indices. Checked here: the global-index helper, dropout and
// attention kernels on hand-written shards against the unsharded op, the
// single-rank interpreter's refusal of a split op, and full @train_steps
// of a tiny GPT-2 (embedding, residual and attention dropout) and a tiny
// Llama (attention dropout), fused, and GPT-2 with
// --loom-decompose-attention, partitioned by the solver over meshes 4 and
// 2x2 (batch, heads, sequence, features), equal to the unpartitioned step
// in float64 to a relative 1e-9.
//
//===----------------------------------------------------------------------===//

#include "PartitionTestSupport.h"

#include "mlir/Parser/Parser.h"

#include <set>

using namespace mlir;
using namespace loom::unittest;

namespace {

using SplitList = std::vector<llvm::SmallVector<int16_t>>;

/// 0, 1, 2, ... in `shape`.
Tensor iota(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<double> values(n);
  for (int64_t e = 0; e < n; ++e)
    values[e] = static_cast<double>(e);
  return Tensor::floats(nullptr, shape, std::move(values));
}

/// Normally distributed values in `shape`.
Tensor random(llvm::ArrayRef<int64_t> shape, std::mt19937_64 &rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<double> values(n);
  for (double &v : values)
    v = normal(rng);
  return Tensor::floats(nullptr, shape, std::move(values));
}

TEST(GlobalIndicesOfShard, TwoAxesOnOneDimension) {
  // Grid 2x3, a [12, 2] tensor with dimension 0 split over axes (1, 0):
  // rank 1 sits at (0, 1), so its shard index is 1 * 2 + 0 = 2 of 6 and it
  // holds global rows 4 and 5.
  SplitList split = {{1, 0}, {}};
  auto indices = loom::interp::globalIndicesOfShard({2, 2}, {2, 3}, split, 1);
  ASSERT_TRUE(static_cast<bool>(indices))
      << llvm::toString(indices.takeError());
  EXPECT_EQ(*indices, (std::vector<int64_t>{8, 9, 10, 11}));
}

TEST(GlobalIndicesOfShard, AreTheIndicesOfShardOfRank) {
  llvm::SmallVector<int64_t> grid = {2, 2, 3};
  llvm::SmallVector<int64_t> global = {4, 6, 10};
  for (const SplitList &split :
       {SplitList{{0}, {2}, {}}, SplitList{{}, {2, 1}, {0}},
        SplitList{{1, 0}, {}, {}}, SplitList{{}, {}, {}}}) {
    Tensor whole = iota(global);
    for (int64_t rank = 0; rank < 12; ++rank) {
      auto shard = loom::interp::shardOfRank(whole, grid, split, rank);
      ASSERT_TRUE(static_cast<bool>(shard))
          << llvm::toString(shard.takeError());
      auto indices =
          loom::interp::globalIndicesOfShard(shard->shape(), grid, split, rank);
      ASSERT_TRUE(static_cast<bool>(indices))
          << llvm::toString(indices.takeError());
      ASSERT_EQ(indices->size(), shard->f().size());
      for (size_t e = 0; e < indices->size(); ++e)
        EXPECT_EQ(static_cast<double>((*indices)[e]), shard->f()[e])
            << "rank " << rank << ", local element " << e;
    }
  }
}

TEST(GlobalIndicesOfShard, RejectsAnAxisOutsideTheGrid) {
  SplitList split = {{2}, {}};
  auto indices = loom::interp::globalIndicesOfShard({2, 2}, {2, 2}, split, 0);
  ASSERT_FALSE(static_cast<bool>(indices));
  EXPECT_NE(llvm::toString(indices.takeError()).find("grid axis 2"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Kernels on hand-written shards
//===----------------------------------------------------------------------===//

class DropoutShardTest : public ::testing::Test {
protected:
  DropoutShardTest() {
    context.loadDialect<loom::LoomDialect, func::FuncDialect,
                        shard::ShardDialect>();
  }

  OwningOpRef<ModuleOp> parse(const std::string &source) {
    ParserConfig config(&context);
    auto module = parseSourceString<ModuleOp>(source, config, "test.mlir");
    EXPECT_TRUE(module) << "cannot parse:\n" << source;
    return module;
  }

  /// Runs `global` (@main in `globalSource`) on `args` and `local` (@main
  /// in `localSource`, on @mesh) on every rank's shards of `args`, and
  /// checks that the assembled results equal the global ones exactly.
  void checkShardsEqualGlobal(const std::string &globalSource,
                              const std::string &localSource,
                              llvm::ArrayRef<Tensor> args,
                              llvm::ArrayRef<SplitList> argSplits,
                              llvm::ArrayRef<SplitList> resultSplits) {
    OwningOpRef<ModuleOp> global = parse(globalSource);
    OwningOpRef<ModuleOp> local = parse(localSource);
    ASSERT_TRUE(global && local);
    auto expected = loom::interp::run(
        global->lookupSymbol<func::FuncOp>("main"), args, Precision::F64);
    ASSERT_TRUE(static_cast<bool>(expected))
        << llvm::toString(expected.takeError());
    auto grid = local->lookupSymbol<shard::GridOp>("mesh");
    llvm::SmallVector<int64_t> gridShape(grid.getShape());
    int64_t ranks = 1;
    for (int64_t size : gridShape)
      ranks *= size;
    std::vector<std::vector<Tensor>> perRank(ranks);
    for (auto [arg, split] : llvm::zip(args, argSplits))
      for (int64_t rank = 0; rank < ranks; ++rank) {
        auto shard = loom::interp::shardOfRank(arg, gridShape, split, rank);
        ASSERT_TRUE(static_cast<bool>(shard))
            << llvm::toString(shard.takeError());
        perRank[rank].push_back(std::move(*shard));
      }
    auto results =
        loom::interp::runRanks(local->lookupSymbol<func::FuncOp>("main"), grid,
                               perRank, Precision::F64);
    ASSERT_TRUE(static_cast<bool>(results))
        << llvm::toString(results.takeError());
    for (auto [r, split] : llvm::enumerate(resultSplits)) {
      std::vector<Tensor> shards;
      for (int64_t rank = 0; rank < ranks; ++rank)
        shards.push_back((*results)[rank][r]);
      auto assembled =
          loom::interp::assembleFromShards(shards, gridShape, split);
      ASSERT_TRUE(static_cast<bool>(assembled))
          << llvm::toString(assembled.takeError());
      ASSERT_EQ(assembled->shape(), (*expected)[r].shape());
      for (size_t e = 0; e < assembled->f().size(); ++e)
        ASSERT_NEAR(assembled->f()[e], (*expected)[r].f()[e], 1e-12)
            << "result " << r << ", flat index " << e;
    }
  }

  MLIRContext context;
};

constexpr const char *kDropoutAttrs =
    "key = 3 : i64, rate = 5.0e-01 : f64, seed = 1234 : i64";

TEST_F(DropoutShardTest, DropoutAndItsGradientDrawGlobalMasks) {
  std::string attrs = kDropoutAttrs;
  std::string global = R"(
    func.func @main(%x: tensor<4x6xf32>, %step: tensor<i64>)
        -> (tensor<4x6xf32>, tensor<4x6xf32>) {
      %y = loom.dropout %x, %step {)" +
                       attrs + R"(} : tensor<4x6xf32>, tensor<i64>
      %dx = loom.dropout_grad %x, %step {)" +
                       attrs + R"(} : tensor<4x6xf32>, tensor<i64>
      return %y, %dx : tensor<4x6xf32>, tensor<4x6xf32>
    })";
  std::mt19937_64 rng(5);
  Tensor x = random({4, 6}, rng);
  Tensor step = Tensor::ints(nullptr, {}, {7});
  // Dimension 0 over axis 1 and dimension 1 over axis 0 (not the grid's
  // order); then dimension 1 over axes (0, 1).
  std::string simple = R"(
    shard.grid @mesh(shape = 2x2)
    func.func @main(%x: tensor<2x3xf32>, %step: tensor<i64>)
        -> (tensor<2x3xf32>, tensor<2x3xf32>) {
      %y = loom.dropout %x, %step {)" +
                       attrs + R"(,
          loom.mask_split_axes = [[1], [0]], loom.mask_grid = @mesh}
          : tensor<2x3xf32>, tensor<i64>
      %dx = loom.dropout_grad %x, %step {)" +
                       attrs + R"(,
          loom.mask_split_axes = [[1], [0]], loom.mask_grid = @mesh}
          : tensor<2x3xf32>, tensor<i64>
      return %y, %dx : tensor<2x3xf32>, tensor<2x3xf32>
    })";
  checkShardsEqualGlobal(global, simple, {x, step}, {{{1}, {0}}, {}},
                         {{{1}, {0}}, {{1}, {0}}});
  std::string twoAxes = R"(
    shard.grid @mesh(shape = 2x2)
    func.func @main(%x: tensor<4x3xf32>, %step: tensor<i64>)
        -> (tensor<4x3xf32>, tensor<4x3xf32>) {
      %y = loom.dropout %x, %step {)" +
                        attrs + R"(,
          loom.mask_split_axes = [[], [0, 1]], loom.mask_grid = @mesh}
          : tensor<4x3xf32>, tensor<i64>
      %dx = loom.dropout_grad %x, %step {)" +
                        attrs + R"(,
          loom.mask_split_axes = [[], [0, 1]]}
          : tensor<4x3xf32>, tensor<i64>
      return %y, %dx : tensor<4x3xf32>, tensor<4x3xf32>
    })";
  Tensor wide = random({4, 12}, rng);
  std::string wideGlobal = global;
  for (size_t at = wideGlobal.find("4x6"); at != std::string::npos;
       at = wideGlobal.find("4x6", at))
    wideGlobal.replace(at, 3, "4x12");
  checkShardsEqualGlobal(wideGlobal, twoAxes, {wide, step}, {{{}, {0, 1}}, {}},
                         {{{}, {0, 1}}, {{}, {0, 1}}});
}

TEST_F(DropoutShardTest, AttentionAndItsGradientDrawGlobalMasks) {
  // q, k, v [B=2, S=4, H=4, D=2], not causal, so the query sequence may be
  // split: batch over axis 0, queries over axis 1 (k and v whole along
  // keys), then heads over axes (1, 0). The mask is [B, H, S, T].
  std::string attrs = "scale = 0.5 : f64, dropout_rate = 5.0e-01 : f64, "
                      "dropout_seed = 99 : i64, dropout_key = 4 : i64";
  auto program = [&](const std::string &q, const std::string &kv,
                     const std::string &lse, const std::string &extra,
                     bool grid) {
    std::string types =
        "tensor<" + q + "xf32>, tensor<" + kv + "xf32>, tensor<" + kv + "xf32>";
    return std::string(grid ? "shard.grid @mesh(shape = 2x2)\n" : "") +
           "func.func @main(%q: tensor<" + q + "xf32>, %k: tensor<" + kv +
           "xf32>, %v: tensor<" + kv +
           "xf32>, %step: tensor<i64>, %do: "
           "tensor<" +
           q + "xf32>) -> (tensor<" + q + "xf32>, tensor<" + q +
           "xf32>, tensor<" + kv + "xf32>, tensor<" + kv +
           "xf32>) {\n"
           "  %o, %lse = loom.attention %q, %k, %v, %step {" +
           attrs + extra + "} : (" + types + ", tensor<i64>) -> (tensor<" + q +
           "xf32>, tensor<" + lse +
           "xf32>)\n"
           "  %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %v, %o, %lse, "
           "%step {" +
           attrs + extra + "} : (tensor<" + q + "xf32>, " + types +
           ", tensor<" + q + "xf32>, tensor<" + lse +
           "xf32>, tensor<i64>) -> (tensor<" + q + "xf32>, " +
           types.substr(types.find(',') + 2) +
           ")\n"
           "  return %o, %dq, %dk, %dv : tensor<" +
           q + "xf32>, tensor<" + q + "xf32>, tensor<" + kv + "xf32>, tensor<" +
           kv + "xf32>\n}";
  };
  std::mt19937_64 rng(6);
  Tensor q = random({2, 4, 4, 2}, rng), k = random({2, 4, 4, 2}, rng),
         v = random({2, 4, 4, 2}, rng), dout = random({2, 4, 4, 2}, rng);
  Tensor step = Tensor::ints(nullptr, {}, {2});
  std::string global = program("2x4x4x2", "2x4x4x2", "2x4x4", "", false);

  // Batch over axis 0, query positions over axis 1: dk and dv are partial
  // over axis 1, so the program returns only o and dq split, and k, v's
  // gradients after an all_reduce.
  std::string bySequence =
      "shard.grid @mesh(shape = 2x2)\n"
      "func.func @main(%q: tensor<1x2x4x2xf32>, %k: tensor<1x4x4x2xf32>, "
      "%v: tensor<1x4x4x2xf32>, %step: tensor<i64>, %do: "
      "tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, "
      "tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {\n"
      "  %o, %lse = loom.attention %q, %k, %v, %step {" +
      attrs +
      ", loom.mask_split_axes = [[0], [1], [], []], loom.mask_grid = @mesh} "
      ": (tensor<1x2x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, "
      "tensor<i64>) -> (tensor<1x2x4x2xf32>, tensor<1x4x2xf32>)\n"
      "  %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %v, %o, %lse, "
      "%step {" +
      attrs +
      ", loom.mask_split_axes = [[0], [1], [], []], loom.mask_grid = @mesh} "
      ": (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x4x4x2xf32>, "
      "tensor<1x4x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x4x2xf32>, "
      "tensor<i64>) -> (tensor<1x2x4x2xf32>, tensor<1x4x4x2xf32>, "
      "tensor<1x4x4x2xf32>)\n"
      "  %rk = shard.all_reduce %dk on @mesh grid_axes = [1] : "
      "tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>\n"
      "  %rv = shard.all_reduce %dv on @mesh grid_axes = [1] : "
      "tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>\n"
      "  return %o, %dq, %rk, %rv : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, "
      "tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>\n}";
  SplitList qSplit = {{0}, {1}}, kvSplit = {{0}};
  checkShardsEqualGlobal(global, bySequence, {q, k, v, step, dout},
                         {qSplit, kvSplit, kvSplit, {}, qSplit},
                         {qSplit, qSplit, kvSplit, kvSplit});

  std::string byHeads =
      program("2x4x1x2", "2x4x1x2", "2x1x4",
              ", loom.mask_split_axes = [[], [], [1, 0], []], "
              "loom.mask_grid = @mesh",
              true);
  SplitList headSplit = {{}, {}, {1, 0}};
  checkShardsEqualGlobal(global, byHeads, {q, k, v, step, dout},
                         {headSplit, headSplit, headSplit, {}, headSplit},
                         {headSplit, headSplit, headSplit, headSplit});
}

TEST_F(DropoutShardTest, SingleRankInterpreterRefusesASplitMask) {
  OwningOpRef<ModuleOp> module = parse(R"(
    func.func @main(%x: tensor<2x3xf32>, %step: tensor<i64>) -> tensor<2x3xf32> {
      %y = loom.dropout %x, %step {key = 3 : i64, rate = 1.0e-01 : f64,
          seed = 1 : i64, loom.mask_split_axes = [[0], []]}
          : tensor<2x3xf32>, tensor<i64>
      return %y : tensor<2x3xf32>
    })");
  ASSERT_TRUE(module);
  std::mt19937_64 rng(1);
  std::vector<Tensor> args = {random({2, 3}, rng),
                              Tensor::ints(nullptr, {}, {1})};
  auto results = loom::interp::run(module->lookupSymbol<func::FuncOp>("main"),
                                   args, Precision::F64);
  ASSERT_FALSE(static_cast<bool>(results));
  std::string message = llvm::toString(results.takeError());
  EXPECT_NE(message.find("'loom.dropout'"), std::string::npos) << message;
  EXPECT_NE(message.find("needs the multi-rank interpreter"), std::string::npos)
      << message;
}

TEST_F(DropoutShardTest, SingleRankInterpreterRunsAnUnsplitMask) {
  auto source = [](const std::string &extra) {
    return R"(
    func.func @main(%x: tensor<2x3xf32>, %step: tensor<i64>) -> tensor<2x3xf32> {
      %y = loom.dropout %x, %step {key = 3 : i64, rate = 5.0e-01 : f64,
          seed = 1 : i64)" +
           extra + R"(} : tensor<2x3xf32>, tensor<i64>
      return %y : tensor<2x3xf32>
    })";
  };
  OwningOpRef<ModuleOp> plain = parse(source(""));
  OwningOpRef<ModuleOp> unsplit =
      parse(source(", loom.mask_split_axes = [[], []]"));
  ASSERT_TRUE(plain && unsplit);
  std::mt19937_64 rng(1);
  std::vector<Tensor> args = {random({2, 3}, rng),
                              Tensor::ints(nullptr, {}, {1})};
  auto want = loom::interp::run(plain->lookupSymbol<func::FuncOp>("main"), args,
                                Precision::F64);
  auto got = loom::interp::run(unsplit->lookupSymbol<func::FuncOp>("main"),
                               args, Precision::F64);
  ASSERT_TRUE(want && got);
  EXPECT_EQ(want->front().f(), got->front().f());
}

TEST_F(DropoutShardTest, RanksOfAnotherGridAreAnError) {
  OwningOpRef<ModuleOp> module = parse(R"(
    shard.grid @mesh(shape = 2)
    shard.grid @other(shape = 2)
    func.func @main(%x: tensor<1x3xf32>, %step: tensor<i64>) -> tensor<1x3xf32> {
      %y = loom.dropout %x, %step {key = 3 : i64, rate = 1.0e-01 : f64,
          seed = 1 : i64, loom.mask_split_axes = [[0], []],
          loom.mask_grid = @other} : tensor<1x3xf32>, tensor<i64>
      return %y : tensor<1x3xf32>
    })");
  ASSERT_TRUE(module);
  std::mt19937_64 rng(1);
  std::vector<std::vector<Tensor>> args(
      2, {random({1, 3}, rng), Tensor::ints(nullptr, {}, {1})});
  auto results = loom::interp::runRanks(
      module->lookupSymbol<func::FuncOp>("main"),
      module->lookupSymbol<shard::GridOp>("mesh"), args, Precision::F64);
  ASSERT_FALSE(static_cast<bool>(results));
  std::string message = llvm::toString(results.takeError());
  EXPECT_NE(message.find("@other"), std::string::npos) << message;
}

//===----------------------------------------------------------------------===//
// Partitioned training steps
//===----------------------------------------------------------------------===//

constexpr double kDropout = 0.1;

class PartitionDropoutTest : public PartitionFixture {
protected:
  /// The mesh axes splitting dimension `dim` of each op named `name` of
  /// @train_step that carries loom.mask_split_axes (entries of a tensor of
  /// rank `rank` only; any rank when negative), all ops together.
  static std::set<int64_t> maskAxes(ModuleOp module, llvm::StringRef name,
                                    int64_t dim, int64_t rank = -1) {
    std::set<int64_t> axes;
    module.lookupSymbol<func::FuncOp>("train_step").walk([&](Operation *op) {
      auto split = op->getAttrOfType<ArrayAttr>(loom::kMaskSplitAxesAttr);
      if (!split || op->getName().getStringRef() != name)
        return;
      EXPECT_TRUE(op->getAttr(loom::kMaskGridAttr)) << "no loom.mask_grid";
      if ((rank >= 0 && static_cast<int64_t>(split.size()) != rank) ||
          dim >= static_cast<int64_t>(split.size()))
        return;
      for (Attribute axis : cast<ArrayAttr>(split[dim]))
        axes.insert(cast<IntegerAttr>(axis).getInt());
    });
    return axes;
  }

  /// The grid axes that split any dimension from `firstDim` on of the
  /// masked tensors of `opName` ops of rank `rank` (which of heads and
  /// positions the solver splits is a near-tie on these free networks).
  static std::set<int64_t> axesOfAnyDim(ModuleOp m, llvm::StringRef opName,
                                        int64_t firstDim, int64_t rank) {
    std::set<int64_t> axes;
    for (int64_t dim = firstDim; dim < rank; ++dim)
      axes.merge(maskAxes(m, opName, dim, rank));
    return axes;
  }

  /// Builds (fused or decomposed attention), partitions under `scheme`,
  /// checks the plan and checks equivalence.
  void check(const std::string &json, bool decompose, const Scheme &scheme,
             const std::function<void(ModuleOp)> &checkPlan) {
    OwningOpRef<ModuleOp> original = build(json, decompose);
    ASSERT_TRUE(original);
    OwningOpRef<ModuleOp> partitioned = partition(*original, scheme);
    ASSERT_TRUE(partitioned);
    checkPlan(*partitioned);
    checkEquivalent(*original, *partitioned);
  }
};

// Mesh 4: every dropout site and attention split, over the batch or the
// sequence (a tie on this free network; the masks must be right whichever
// the solver picks).
TEST_F(PartitionDropoutTest, Gpt2SolverSplitsEverything4) {
  check(gpt2Json(kDropout), false, computeBound("4"), [](ModuleOp m) {
    EXPECT_EQ(axesOfAnyDim(m, "loom.dropout", 0, 3), std::set<int64_t>{0});
    EXPECT_EQ(axesOfAnyDim(m, "loom.attention", 0, 4), std::set<int64_t>{0});
    EXPECT_EQ(axesOfAnyDim(m, "loom.attention_grad", 0, 4),
              std::set<int64_t>{0});
  });
}

// Mesh 2x2: dropouts split by batch and by sequence position, attention by
// heads or positions. (Which axis takes which dimension is a near-tie on
// this free network; the masks must be right whichever the solver picks.)
TEST_F(PartitionDropoutTest, Gpt2SolverSplitsEverything2x2) {
  check(gpt2Json(kDropout), false, computeBound("2x2"), [](ModuleOp m) {
    EXPECT_FALSE(maskAxes(m, "loom.dropout", 0, 3).empty());
    EXPECT_FALSE(maskAxes(m, "loom.dropout", 1, 3).empty());
    EXPECT_FALSE(maskAxes(m, "loom.dropout_grad", 1, 3).empty());
    EXPECT_FALSE(axesOfAnyDim(m, "loom.attention", 0, 4).empty());
    std::set<int64_t> gradAxes;
    for (int64_t dim = 0; dim < 4; ++dim)
      gradAxes.merge(maskAxes(m, "loom.attention_grad", dim));
    EXPECT_FALSE(gradAxes.empty());
  });
}

// Llama's attention dropout with grouped-query heads.
TEST_F(PartitionDropoutTest, LlamaSolverSplitsEverything4) {
  check(llamaJson(kDropout), false, computeBound("4"), [](ModuleOp m) {
    EXPECT_EQ(axesOfAnyDim(m, "loom.attention", 0, 4), std::set<int64_t>{0});
    EXPECT_EQ(axesOfAnyDim(m, "loom.attention_grad", 0, 4),
              std::set<int64_t>{0});
  });
}

TEST_F(PartitionDropoutTest, LlamaSolverSplitsEverything2x2) {
  check(llamaJson(kDropout), false, computeBound("2x2"), [](ModuleOp m) {
    EXPECT_FALSE(maskAxes(m, "loom.attention", 0).empty());
    EXPECT_FALSE(axesOfAnyDim(m, "loom.attention_grad", 0, 4).empty());
  });
}

// --loom-decompose-attention: loom.dropout on the [B, H, S, T]
// probabilities, split (by batch or position; the 2x2 case below splits
// more).
TEST_F(PartitionDropoutTest, Gpt2DecomposedSolverSplitsEverything4) {
  check(gpt2Json(kDropout), true, computeBound("4"), [](ModuleOp m) {
    EXPECT_EQ(axesOfAnyDim(m, "loom.dropout", 0, 4), std::set<int64_t>{0});
    EXPECT_EQ(axesOfAnyDim(m, "loom.dropout_grad", 0, 4), std::set<int64_t>{0});
  });
}

TEST_F(PartitionDropoutTest, Gpt2DecomposedSolverSplitsEverything2x2) {
  check(gpt2Json(kDropout), true, computeBound("2x2"), [](ModuleOp m) {
    std::set<int64_t> axes;
    for (int64_t dim = 0; dim < 4; ++dim)
      for (int64_t axis : maskAxes(m, "loom.dropout_grad", dim, 4))
        axes.insert(axis);
    EXPECT_FALSE(axes.empty());
  });
}

} // namespace
