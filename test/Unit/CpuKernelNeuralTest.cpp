//===- CpuKernelNeuralTest.cpp - The neural CPU kernels vs the interpreter ===//
//
// Conformance of runtime/cpu/kernels/Norm.cpp and Attention.cpp: each test
// runs a function of one op (two for attention and its gradient) in the
// reference interpreter (float64) and through the kernels (float32), and
// expects them to agree to a relative 1e-4 unless it says otherwise.
// Dropout must draw exactly the interpreter's masks: unsplit, on the
// shards of a split tensor (each rank's kernels given that rank's grid
// coordinates by a fake loom_comm, against interp::runRanks), and on one
// micro-batch of a pipelined step (against the slice of the whole batch).
//
//===----------------------------------------------------------------------===//

#include "CpuKernelTestSupport.h"

#include "loom/Interpreter/Interpreter.h"
#include "loom/Interpreter/MultiRank.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

using namespace mlir;
using loom::interp::Tensor;
using namespace loom::testing;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;

/// The scalar step operand of the dropout ops.
Tensor stepTensor(int64_t value) { return Tensor::ints(nullptr, {}, {value}); }

/// Runs @f of `source` on `args` in the interpreter and through the
/// kernels and expects the results within `rtol` / `atol`.
void expectKernelsMatch(const std::string &source,
                        const std::vector<Tensor> &args, double rtol = kRtol,
                        double atol = kAtol) {
  auto ctx = makeKernelTestContext();
  OwningOpRef<ModuleOp> module = parseKernelTestModule(*ctx, source);
  ASSERT_TRUE(module);
  auto want = runReference(*module, args);
  ASSERT_TRUE(static_cast<bool>(want)) << llvm::toString(want.takeError());
  auto got = runThroughKernels(*module, args);
  ASSERT_TRUE(static_cast<bool>(got)) << llvm::toString(got.takeError());
  expectAllClose(*want, *got, rtol, atol);
}

/// A loom_comm that knows nothing but one rank's coordinates in a grid.
class FakeRank {
public:
  FakeRank(llvm::ArrayRef<int64_t> gridShape, int64_t rank)
      : coordinates(loom::interp::gridMultiIndex(gridShape, rank)) {
    comm.ctx = this;
    comm.grid_coordinate = &coordinateOf;
  }
  FakeRank(const FakeRank &) = delete;
  FakeRank &operator=(const FakeRank &) = delete;

  const loom_comm *get() const { return &comm; }

private:
  static int64_t coordinateOf(void *ctx, int32_t axis) {
    return static_cast<FakeRank *>(ctx)->coordinates[axis];
  }

  llvm::SmallVector<int64_t> coordinates;
  loom_comm comm{};
};

/// Runs @f of `source` (a module with `shard.grid @mesh`) on every rank of
/// @mesh, on `argsOfRank(rank)`: in interp::runRanks, and through the
/// kernels with a FakeRank of that rank; expects each rank's results to
/// agree.
void expectRanksMatch(
    const std::string &source,
    const std::function<std::vector<Tensor>(int64_t)> &argsOfRank,
    double rtol = kRtol, double atol = kAtol) {
  auto ctx = makeKernelTestContext();
  OwningOpRef<ModuleOp> module = parseKernelTestModule(*ctx, source);
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<func::FuncOp>("f");
  auto grid = module->lookupSymbol<shard::GridOp>("mesh");
  ASSERT_TRUE(fn && grid);
  llvm::SmallVector<int64_t> gridShape(grid.getShape());
  int64_t ranks = 1;
  for (int64_t size : gridShape)
    ranks *= size;
  std::vector<std::vector<Tensor>> perRank;
  for (int64_t rank = 0; rank < ranks; ++rank)
    perRank.push_back(argsOfRank(rank));
  auto want =
      loom::interp::runRanks(fn, grid, perRank, loom::interp::Precision::F64);
  ASSERT_TRUE(static_cast<bool>(want)) << llvm::toString(want.takeError());
  for (int64_t rank = 0; rank < ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    FakeRank fake(gridShape, rank);
    auto got = runThroughKernels(*module, perRank[rank], fake.get());
    ASSERT_TRUE(static_cast<bool>(got)) << llvm::toString(got.takeError());
    expectAllClose((*want)[rank], *got, rtol, atol);
  }
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

TEST(CpuKernelNeuralTest, LayerNorm) {
  expectKernelsMatch(R"(
    func.func @f(%x: tensor<3x5x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>)
        -> tensor<3x5x16xf32> {
      %y = loom.layernorm %x, %g, %b {epsilon = 1.0e-05 : f64}
          : tensor<3x5x16xf32>, tensor<16xf32>
      return %y : tensor<3x5x16xf32>
    })",
                     {randomFloats({3, 5, 16}, 1, -2.0, 3.0),
                      randomFloats({16}, 2), randomFloats({16}, 3)});
}

TEST(CpuKernelNeuralTest, LayerNormGrad) {
  expectKernelsMatch(R"(
    func.func @f(%dy: tensor<3x5x16xf32>, %x: tensor<3x5x16xf32>, %g: tensor<16xf32>)
        -> (tensor<3x5x16xf32>, tensor<16xf32>, tensor<16xf32>) {
      %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64}
          : tensor<3x5x16xf32>, tensor<16xf32>
      return %dx, %dg, %db : tensor<3x5x16xf32>, tensor<16xf32>, tensor<16xf32>
    })",
                     {randomFloats({3, 5, 16}, 4), randomFloats({3, 5, 16}, 5),
                      randomFloats({16}, 6)});
}

TEST(CpuKernelNeuralTest, RMSNorm) {
  expectKernelsMatch(R"(
    func.func @f(%x: tensor<4x6x12xf32>, %g: tensor<12xf32>) -> tensor<4x6x12xf32> {
      %y = loom.rmsnorm %x, %g {epsilon = 1.0e-06 : f64}
          : tensor<4x6x12xf32>, tensor<12xf32>
      return %y : tensor<4x6x12xf32>
    })",
                     {randomFloats({4, 6, 12}, 7), randomFloats({12}, 8)});
}

TEST(CpuKernelNeuralTest, RMSNormGrad) {
  expectKernelsMatch(R"(
    func.func @f(%dy: tensor<4x6x12xf32>, %x: tensor<4x6x12xf32>, %g: tensor<12xf32>)
        -> (tensor<4x6x12xf32>, tensor<12xf32>) {
      %dx, %dg = loom.rmsnorm_grad %dy, %x, %g {epsilon = 1.0e-06 : f64}
          : tensor<4x6x12xf32>, tensor<12xf32>
      return %dx, %dg : tensor<4x6x12xf32>, tensor<12xf32>
    })",
                     {randomFloats({4, 6, 12}, 9), randomFloats({4, 6, 12}, 10),
                      randomFloats({12}, 11)});
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// @f applying the unary `op` to a [64, 32] tensor.
std::string unarySource(const std::string &op) {
  return R"(
    func.func @f(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
      %y = loom.)" +
         op + R"( %x : tensor<64x32xf32>
      return %y : tensor<64x32xf32>
    })";
}

/// @f applying the activation gradient `op` to dy and x [64, 32].
std::string gradSource(const std::string &op) {
  return R"(
    func.func @f(%dy: tensor<64x32xf32>, %x: tensor<64x32xf32>) -> tensor<64x32xf32> {
      %dx = loom.)" +
         op + R"( %dy, %x : tensor<64x32xf32>
      return %dx : tensor<64x32xf32>
    })";
}

// Inputs span the saturated tails, where 1 + tanh(u) would cancel in float.
TEST(CpuKernelNeuralTest, Gelu) {
  expectKernelsMatch(unarySource("gelu"),
                     {randomFloats({64, 32}, 12, -8.0, 8.0)});
}

TEST(CpuKernelNeuralTest, GeluGrad) {
  expectKernelsMatch(
      gradSource("gelu_grad"),
      {randomFloats({64, 32}, 13), randomFloats({64, 32}, 14, -8.0, 8.0)});
}

// Inputs span both tails: erfc keeps the small values at negative x.
TEST(CpuKernelNeuralTest, GeluErf) {
  expectKernelsMatch(unarySource("gelu_erf"),
                     {randomFloats({64, 32}, 41, -8.0, 8.0)});
}

TEST(CpuKernelNeuralTest, GeluErfGrad) {
  expectKernelsMatch(
      gradSource("gelu_erf_grad"),
      {randomFloats({64, 32}, 42), randomFloats({64, 32}, 43, -8.0, 8.0)});
}

TEST(CpuKernelNeuralTest, Silu) {
  expectKernelsMatch(unarySource("silu"),
                     {randomFloats({64, 32}, 15, -20.0, 20.0)});
}

TEST(CpuKernelNeuralTest, SiluGrad) {
  expectKernelsMatch(
      gradSource("silu_grad"),
      {randomFloats({64, 32}, 16), randomFloats({64, 32}, 17, -20.0, 20.0)});
}

//===----------------------------------------------------------------------===//
// Softmax and rope
//===----------------------------------------------------------------------===//

TEST(CpuKernelNeuralTest, Softmax) {
  expectKernelsMatch(R"(
    func.func @f(%x: tensor<2x3x7x9xf32>) -> tensor<2x3x7x9xf32> {
      %y = loom.softmax %x : tensor<2x3x7x9xf32>
      return %y : tensor<2x3x7x9xf32>
    })",
                     {randomFloats({2, 3, 7, 9}, 18, -6.0, 6.0)});
}

TEST(CpuKernelNeuralTest, CausalSoftmax) {
  expectKernelsMatch(R"(
    func.func @f(%x: tensor<2x3x7x7xf32>) -> tensor<2x3x7x7xf32> {
      %y = loom.softmax %x {causal} : tensor<2x3x7x7xf32>
      return %y : tensor<2x3x7x7xf32>
    })",
                     {randomFloats({2, 3, 7, 7}, 19, -6.0, 6.0)});
}

TEST(CpuKernelNeuralTest, SoftmaxGrad) {
  expectKernelsMatch(R"(
    func.func @f(%dy: tensor<2x3x7x9xf32>, %y: tensor<2x3x7x9xf32>)
        -> tensor<2x3x7x9xf32> {
      %dx = loom.softmax_grad %dy, %y : tensor<2x3x7x9xf32>
      return %dx : tensor<2x3x7x9xf32>
    })",
                     {randomFloats({2, 3, 7, 9}, 20),
                      randomFloats({2, 3, 7, 9}, 21, 0.0, 1.0)});
}

TEST(CpuKernelNeuralTest, Rope) {
  expectKernelsMatch(R"(
    func.func @f(%x: tensor<2x9x3x8xf32>) -> tensor<2x9x3x8xf32> {
      %y = loom.rope %x {theta = 10000.0 : f64} : tensor<2x9x3x8xf32>
      return %y : tensor<2x9x3x8xf32>
    })",
                     {randomFloats({2, 9, 3, 8}, 22)});
}

TEST(CpuKernelNeuralTest, RopeGrad) {
  expectKernelsMatch(R"(
    func.func @f(%dy: tensor<2x9x3x8xf32>) -> tensor<2x9x3x8xf32> {
      %dx = loom.rope_grad %dy {theta = 500.0 : f64} : tensor<2x9x3x8xf32>
      return %dx : tensor<2x9x3x8xf32>
    })",
                     {randomFloats({2, 9, 3, 8}, 23)});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// "AxBxC" for a shape.
std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  for (int64_t size : shape)
    text += (text.empty() ? "" : "x") + std::to_string(size);
  return text;
}

/// @f(q, k, v[, step], dout) -> (out, lse, dq, dk, dv): attention and its
/// gradient with `attrs`; `prefix` goes before the function (a grid).
std::string attentionSource(llvm::ArrayRef<int64_t> qShape,
                            llvm::ArrayRef<int64_t> kvShape,
                            const std::string &attrs, bool withStep,
                            const std::string &prefix = "") {
  std::string q = "tensor<" + shapeText(qShape) + "xf32>";
  std::string kv = "tensor<" + shapeText(kvShape) + "xf32>";
  std::string lse =
      "tensor<" + shapeText({qShape[0], qShape[2], qShape[1]}) + "xf32>";
  std::string step = withStep ? ", %step" : "";
  std::string stepType = withStep ? ", tensor<i64>" : "";
  return prefix + "\nfunc.func @f(%q: " + q + ", %k: " + kv + ", %v: " + kv +
         (withStep ? ", %step: tensor<i64>" : "") + ", %do: " + q + ") -> (" +
         q + ", " + lse + ", " + q + ", " + kv + ", " + kv + ") {\n" +
         "  %o, %lse = loom.attention %q, %k, %v" + step + " {" + attrs +
         "} : (" + q + ", " + kv + ", " + kv + stepType + ") -> (" + q + ", " +
         lse + ")\n" +
         "  %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %v, %o, %lse" +
         step + " {" + attrs + "} : (" + q + ", " + q + ", " + kv + ", " + kv +
         ", " + q + ", " + lse + stepType + ") -> (" + q + ", " + kv + ", " +
         kv + ")\n" + "  return %o, %lse, %dq, %dk, %dv : " + q + ", " + lse +
         ", " + q + ", " + kv + ", " + kv + "\n}\n";
}

/// Random q, k, v[, step], dout for attentionSource.
std::vector<Tensor> attentionArgs(llvm::ArrayRef<int64_t> qShape,
                                  llvm::ArrayRef<int64_t> kvShape,
                                  unsigned seed, bool withStep) {
  std::vector<Tensor> args = {randomFloats(qShape, seed, -2.0, 2.0),
                              randomFloats(kvShape, seed + 1, -2.0, 2.0),
                              randomFloats(kvShape, seed + 2)};
  if (withStep)
    args.push_back(stepTensor(7));
  args.push_back(randomFloats(qShape, seed + 3));
  return args;
}

TEST(CpuKernelNeuralTest, GroupedQueryAttention) {
  // q heads 4, key/value heads 2, more keys than queries.
  expectKernelsMatch(
      attentionSource({2, 5, 4, 8}, {2, 7, 2, 8}, "scale = 0.35 : f64", false),
      attentionArgs({2, 5, 4, 8}, {2, 7, 2, 8}, 30, false));
}

TEST(CpuKernelNeuralTest, CausalGroupedQueryAttention) {
  expectKernelsMatch(attentionSource({2, 6, 4, 8}, {2, 6, 2, 8},
                                     "causal, scale = 0.35 : f64", false),
                     attentionArgs({2, 6, 4, 8}, {2, 6, 2, 8}, 40, false));
}

TEST(CpuKernelNeuralTest, AttentionWithDropout) {
  std::string attrs = "causal, scale = 0.35 : f64, dropout_rate = 3.0e-01 : "
                      "f64, dropout_seed = 1234 : i64, dropout_key = 2 : i64";
  expectKernelsMatch(attentionSource({2, 6, 4, 8}, {2, 6, 2, 8}, attrs, true),
                     attentionArgs({2, 6, 4, 8}, {2, 6, 2, 8}, 50, true));
}

// The mask [B, H, S, T] is split as q's dimensions 0, 2 and 1: batch over
// one axis and heads (or queries, not causal) over the other, or heads
// over both axes minor first.
TEST(CpuKernelNeuralTest, AttentionDropoutOnShards) {
  std::string attrs = "scale = 0.5 : f64, dropout_rate = 5.0e-01 : f64, "
                      "dropout_seed = 99 : i64, dropout_key = 4 : i64, "
                      "loom.mask_grid = @mesh, loom.mask_split_axes = ";
  struct Case {
    std::string split;
    llvm::SmallVector<int64_t> q, kv;
  };
  for (const Case &c :
       {Case{"[[0], [], [1], []]", {1, 3, 2, 4}, {1, 3, 1, 4}},
        Case{"[[0], [1], [], []]", {1, 2, 4, 4}, {1, 4, 2, 4}},
        Case{"[[], [], [1, 0], []]", {2, 3, 1, 4}, {2, 3, 1, 4}}}) {
    SCOPED_TRACE(c.split);
    expectRanksMatch(attentionSource(c.q, c.kv, attrs + c.split, true,
                                     "shard.grid @mesh(shape = 2x2)"),
                     [&](int64_t rank) {
                       return attentionArgs(c.q, c.kv, 60 + 4 * rank, true);
                     });
  }
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// @f(x, step) -> (dropout(x), dropout_grad(x)) on `shape` with `attrs`
/// after the rate, seed and key; `prefix` goes before the function.
std::string dropoutSource(llvm::ArrayRef<int64_t> shape,
                          const std::string &stepType,
                          const std::string &attrs = "",
                          const std::string &prefix = "") {
  std::string t = "tensor<" + shapeText(shape) + "xf32>";
  std::string all =
      "key = 3 : i64, rate = 3.0e-01 : f64, seed = 1234 : i64" + attrs;
  return prefix + "\nfunc.func @f(%x: " + t + ", %step: " + stepType +
         ") -> (" + t + ", " + t + ") {\n" + "  %y = loom.dropout %x, %step {" +
         all + "} : " + t + ", " + stepType + "\n" +
         "  %dx = loom.dropout_grad %x, %step {" + all + "} : " + t + ", " +
         stepType + "\n" + "  return %y, %dx : " + t + ", " + t + "\n}\n";
}

TEST(CpuKernelNeuralTest, Dropout) {
  expectKernelsMatch(dropoutSource({4, 6, 8}, "tensor<i64>"),
                     {randomFloats({4, 6, 8}, 70), stepTensor(11)}, 1e-6, 0.0);
  // A step past 2^32 and an i32 step.
  expectKernelsMatch(dropoutSource({4, 6, 8}, "tensor<i64>"),
                     {randomFloats({4, 6, 8}, 71), stepTensor(0x500000003)},
                     1e-6, 0.0);
  expectKernelsMatch(dropoutSource({5, 7}, "tensor<i32>"),
                     {randomFloats({5, 7}, 72), stepTensor(3)}, 1e-6, 0.0);
}

// Dimension 0 over axis 1 and dimension 1 over axis 0 (not the grid's
// order); then dimension 1 over axes (0, 1) and dimension 2 whole.
TEST(CpuKernelNeuralTest, DropoutOnShards) {
  std::string grid = "shard.grid @mesh(shape = 2x2)";
  expectRanksMatch(
      dropoutSource({2, 3}, "tensor<i64>",
                    ", loom.mask_grid = @mesh, loom.mask_split_axes = [[1], "
                    "[0]]",
                    grid),
      [](int64_t rank) {
        return std::vector<Tensor>{randomFloats({2, 3}, 80 + rank),
                                   stepTensor(5)};
      },
      1e-6, 0.0);
  expectRanksMatch(
      dropoutSource({3, 2, 5}, "tensor<i64>",
                    ", loom.mask_grid = @mesh, loom.mask_split_axes = [[], "
                    "[0, 1], []]",
                    grid),
      [](int64_t rank) {
        return std::vector<Tensor>{randomFloats({3, 2, 5}, 90 + rank),
                                   stepTensor(6)};
      },
      1e-6, 0.0);
}

TEST(CpuKernelNeuralTest, SplitDropoutNeedsGridCoordinates) {
  auto ctx = makeKernelTestContext();
  OwningOpRef<ModuleOp> module = parseKernelTestModule(
      *ctx, dropoutSource({2, 3}, "tensor<i64>",
                          ", loom.mask_grid = @mesh, loom.mask_split_axes = "
                          "[[0], []]",
                          "shard.grid @mesh(shape = 2)"));
  ASSERT_TRUE(module);
  auto got =
      runThroughKernels(*module, {randomFloats({2, 3}, 100), stepTensor(1)});
  ASSERT_FALSE(static_cast<bool>(got));
  std::string message = llvm::toString(got.takeError());
  EXPECT_NE(message.find("grid_coordinate"), std::string::npos) << message;
}

/// Rows [first, first + count) of `t` along dimension 0.
Tensor rowsOf(const Tensor &t, int64_t first, int64_t count) {
  llvm::SmallVector<int64_t> shape(t.shape());
  int64_t row = t.f().size() / shape[0];
  shape[0] = count;
  return Tensor::floats(
      t.elementType(), shape,
      std::vector<double>(t.f().begin() + first * row,
                          t.f().begin() + (first + count) * row));
}

// Micro-batch k of M draws the masks of rows [k b, (k + 1) b) of the whole
// [M b, ...] batch: unsplit, and with dimension 1 split over a grid of 2
// (rank r holding columns [3 r, 3 r + 3)).
TEST(CpuKernelNeuralTest, DropoutOnMicroBatches) {
  constexpr int64_t kMicroBatches = 3;
  const std::vector<llvm::SmallVector<int16_t>> kByColumns = {{}, {0}};
  auto ctx = makeKernelTestContext();
  OwningOpRef<ModuleOp> whole =
      parseKernelTestModule(*ctx, dropoutSource({6, 6}, "tensor<i64>"));
  OwningOpRef<ModuleOp> micro = parseKernelTestModule(
      *ctx, dropoutSource({2, 6}, "tensor<i64>",
                          ", loom.mask_micro_batches = 3 : i64"));
  OwningOpRef<ModuleOp> split = parseKernelTestModule(
      *ctx, dropoutSource({2, 3}, "tensor<i64>",
                          ", loom.mask_micro_batches = 3 : i64, "
                          "loom.mask_grid = @mesh, loom.mask_split_axes = "
                          "[[], [0]]",
                          "shard.grid @mesh(shape = 2)"));
  ASSERT_TRUE(whole && micro && split);
  Tensor x = randomFloats({6, 6}, 110);
  auto want = runReference(*whole, {x, stepTensor(9)});
  ASSERT_TRUE(static_cast<bool>(want)) << llvm::toString(want.takeError());
  for (int64_t k = 0; k < kMicroBatches; ++k) {
    SCOPED_TRACE("micro-batch " + std::to_string(k));
    std::vector<Tensor> wantRows;
    for (const Tensor &result : *want)
      wantRows.push_back(rowsOf(result, 2 * k, 2));
    auto got = runThroughKernels(*micro, {rowsOf(x, 2 * k, 2), stepTensor(9)},
                                 nullptr, k);
    ASSERT_TRUE(static_cast<bool>(got)) << llvm::toString(got.takeError());
    expectAllClose(wantRows, *got, 1e-6, 0.0);

    for (int64_t rank = 0; rank < 2; ++rank) {
      // This rank's columns of each of `tensors`.
      auto columns = [&](llvm::ArrayRef<Tensor> tensors) {
        std::vector<Tensor> shards;
        for (const Tensor &t : tensors)
          shards.push_back(llvm::cantFail(
              loom::interp::shardOfRank(t, {2}, kByColumns, rank)));
        return shards;
      };
      std::vector<Tensor> wantShards = columns(wantRows);
      FakeRank fake({2}, rank);
      auto gotShard = runThroughKernels(
          *split, {columns({rowsOf(x, 2 * k, 2)})[0], stepTensor(9)},
          fake.get(), k);
      ASSERT_TRUE(static_cast<bool>(gotShard))
          << llvm::toString(gotShard.takeError());
      expectAllClose(wantShards, *gotShard, 1e-6, 0.0);
    }
  }
}

} // namespace
