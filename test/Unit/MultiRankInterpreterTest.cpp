//===- MultiRankInterpreterTest.cpp - The interpreter on N ranks ----------===//
//
// Each shard collective on 1-D and 2-D grids, with every group shape
// (all axes, one axis of two), against a reference computed here from the
// per-rank inputs by brute force; a Megatron-style MLP written as an SPMD
// program against the unsharded one; send/recv, dynamic roots, the
// shard/assemble helpers, errors that must not hang, and reproducibility.
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestSupport.h"

#include "loom/Interpreter/MultiRank.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace loom::interp::testing {
namespace {

using RankTensors = std::vector<std::vector<Tensor>>;

/// `text` with every `from` replaced by `to`.
std::string replaceAll(std::string text, const std::string &from,
                       const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string joined(ArrayRef<int64_t> values, const char *separator) {
  std::string text;
  for (auto [i, v] : llvm::enumerate(values))
    text += (i ? separator : "") + std::to_string(v);
  return text;
}

/// The multi-index of `rank`, computed independently of the library.
std::vector<int64_t> coordinatesOf(ArrayRef<int64_t> grid, int64_t rank) {
  std::vector<int64_t> index(grid.size());
  for (size_t a = grid.size(); a-- > 0;) {
    index[a] = rank % grid[a];
    rank /= grid[a];
  }
  return index;
}

/// The group of `rank` for `axes` by brute force: every rank that agrees
/// with it off `axes`, sorted by its row-major index on `axes`.
struct RefGroup {
  std::vector<int64_t> members;
  int64_t index = 0;
  int64_t size() const { return static_cast<int64_t>(members.size()); }
};

RefGroup refGroup(ArrayRef<int64_t> grid, ArrayRef<int16_t> axes,
                  int64_t rank) {
  std::vector<int64_t> mine = coordinatesOf(grid, rank);
  std::vector<std::pair<int64_t, int64_t>> keyed;
  for (int64_t q = 0; q < count(grid); ++q) {
    std::vector<int64_t> other = coordinatesOf(grid, q);
    bool same = true;
    for (size_t a = 0; a < grid.size(); ++a)
      if (!llvm::is_contained(axes, static_cast<int16_t>(a)))
        same &= other[a] == mine[a];
    if (!same)
      continue;
    int64_t key = 0;
    for (int16_t a : axes)
      key = key * grid[a] + other[a];
    keyed.push_back({key, q});
  }
  std::sort(keyed.begin(), keyed.end());
  RefGroup group;
  for (auto [key, q] : keyed) {
    if (q == rank)
      group.index = static_cast<int64_t>(group.members.size());
    group.members.push_back(q);
  }
  return group;
}

class MultiRankTest : public InterpreterTest {
protected:
  MultiRankTest() { context.loadDialect<shard::ShardDialect>(); }

  /// Runs @main of `source` on the ranks of its @g; an error or a hang
  /// (past 60 s, which ends the test program) fails the test.
  llvm::Expected<RankTensors> runAllOrError(llvm::StringRef source,
                                            const RankTensors &args,
                                            Precision precision) {
    func::FuncOp fn = parse(source);
    if (!fn)
      return llvm::createStringError("cannot parse");
    auto grid =
        fn->getParentOfType<ModuleOp>().lookupSymbol<shard::GridOp>("g");
    if (!grid)
      return llvm::createStringError("no grid @g");
    // The ranks run on a thread of their own so that a deadlock ends the
    // test program rather than hanging ctest.
    struct Outcome {
      std::mutex mutex;
      std::condition_variable done;
      std::optional<llvm::Expected<RankTensors>> result;
    };
    auto outcome = std::make_shared<Outcome>();
    std::thread runner([=] {
      llvm::Expected<RankTensors> result = runRanks(fn, grid, args, precision);
      std::lock_guard<std::mutex> lock(outcome->mutex);
      outcome->result.emplace(std::move(result));
      outcome->done.notify_all();
    });
    std::unique_lock<std::mutex> lock(outcome->mutex);
    if (!outcome->done.wait_for(lock, std::chrono::seconds(60),
                                [&] { return outcome->result.has_value(); })) {
      std::fprintf(stderr, "runRanks hangs\n");
      std::fflush(stderr);
      std::_Exit(1);
    }
    lock.unlock();
    runner.join();
    return std::move(*outcome->result);
  }

  RankTensors runAll(llvm::StringRef source, const RankTensors &args,
                     Precision precision = Precision::F64) {
    llvm::Expected<RankTensors> results =
        runAllOrError(source, args, precision);
    if (!results) {
      ADD_FAILURE() << llvm::toString(results.takeError());
      return {};
    }
    return std::move(*results);
  }

  std::string runAllError(llvm::StringRef source, const RankTensors &args) {
    llvm::Expected<RankTensors> results =
        runAllOrError(source, args, Precision::F64);
    if (results) {
      ADD_FAILURE() << "expected an error";
      return "";
    }
    return llvm::toString(results.takeError());
  }

  /// One random tensor of `shape` per rank, as the single argument.
  RankTensors randomPerRank(int64_t numRanks, ArrayRef<int64_t> shape) {
    RankTensors args;
    for (int64_t r = 0; r < numRanks; ++r)
      args.push_back({random(shape)});
    return args;
  }
};

//===----------------------------------------------------------------------===//
// Each collective, on every group shape
//===----------------------------------------------------------------------===//

struct GridCase {
  std::vector<int64_t> grid;
  std::vector<int16_t> axes;
};

std::string caseName(const ::testing::TestParamInfo<GridCase> &info) {
  std::vector<int64_t> axes(info.param.axes.begin(), info.param.axes.end());
  return "grid" + joined(info.param.grid, "x") + "_axes" + joined(axes, "");
}

class CollectiveTest : public MultiRankTest,
                       public ::testing::WithParamInterface<GridCase> {
protected:
  ArrayRef<int64_t> grid() const { return GetParam().grid; }
  ArrayRef<int16_t> axes() const { return GetParam().axes; }
  int64_t numRanks() const { return count(grid()); }
  int64_t groupSize() const { return refGroup(grid(), axes(), 0).size(); }

  /// A module with @g and `@main(signature) { body }`, GRID_AXES in the
  /// body standing for the case's axes and G for the group size.
  std::string program(const std::string &signature, const std::string &body) {
    std::vector<int64_t> axes(this->axes().begin(), this->axes().end());
    std::string text = "shard.grid @g(shape = " + joined(grid(), "x") +
                       ")\nfunc.func @main" + signature + " {\n" + body + "}\n";
    text = replaceAll(text, "GRID_AXES",
                      "grid_axes = [" + joined(axes, ", ") + "]");
    return replaceAll(text, "GG", std::to_string(groupSize()));
  }
};

TEST_P(CollectiveTest, AllReduce) {
  std::string source =
      program("(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, "
              "tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>)",
              R"(
  %0 = shard.all_reduce %x on @g GRID_AXES : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = shard.all_reduce %x on @g GRID_AXES reduction = max : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = shard.all_reduce %x on @g GRID_AXES reduction = min : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = shard.all_reduce %x on @g GRID_AXES reduction = product : tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = shard.all_reduce %x on @g GRID_AXES reduction = average : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
)");
  RankTensors args = randomPerRank(numRanks(), {2, 3});
  RankTensors results = runAll(source, args);
  ASSERT_EQ(results.size(), static_cast<size_t>(numRanks()));
  for (int64_t r = 0; r < numRanks(); ++r) {
    RefGroup group = refGroup(grid(), axes(), r);
    std::vector<double> sum(6), max(6), min(6), product(6), average(6);
    for (int e = 0; e < 6; ++e) {
      double s = 0, mx = -INFINITY, mn = INFINITY, p = 1;
      for (int64_t m : group.members) {
        double x = args[m][0].f()[e];
        s += x;
        mx = std::max(mx, x);
        mn = std::min(mn, x);
        p *= x;
      }
      sum[e] = s, max[e] = mx, min[e] = mn, product[e] = p;
      average[e] = s / group.size();
    }
    SCOPED_TRACE("rank " + std::to_string(r));
    expectAllNear(results[r][0].f(), sum, kExact);
    expectAllNear(results[r][1].f(), max, 0.0);
    expectAllNear(results[r][2].f(), min, 0.0);
    expectAllNear(results[r][3].f(), product, kExact);
    expectAllNear(results[r][4].f(), average, kExact);
  }
}

TEST_P(CollectiveTest, AllGather) {
  std::string source = program(
      "(%x: tensor<2x3xf32>) -> (tensor<ROWSx3xf32>, tensor<2x3xGGxf32>)",
      R"(
  %0 = shard.all_gather %x on @g GRID_AXES gather_axis = 0 : tensor<2x3xf32> -> tensor<ROWSx3xf32>
  %e = loom.reshape %x : tensor<2x3xf32> -> tensor<2x3x1xf32>
  %1 = shard.all_gather %e on @g GRID_AXES gather_axis = 2 : tensor<2x3x1xf32> -> tensor<2x3xGGxf32>
  return %0, %1 : tensor<ROWSx3xf32>, tensor<2x3xGGxf32>
)");
  source = replaceAll(source, "ROWS", std::to_string(2 * groupSize()));
  RankTensors args = randomPerRank(numRanks(), {2, 3});
  RankTensors results = runAll(source, args);
  ASSERT_EQ(results.size(), static_cast<size_t>(numRanks()));
  for (int64_t r = 0; r < numRanks(); ++r) {
    RefGroup group = refGroup(grid(), axes(), r);
    int64_t g = group.size();
    std::vector<double> rows(6 * g), last(6 * g);
    for (int64_t m = 0; m < g; ++m)
      for (int64_t e = 0; e < 6; ++e) {
        double x = args[group.members[m]][0].f()[e];
        rows[m * 6 + e] = x; // [g*2, 3]: member m's rows follow m-1's
        last[e * g + m] = x; // [2, 3, g]: member m at index m of the last
      }
    SCOPED_TRACE("rank " + std::to_string(r));
    expectAllNear(results[r][0].f(), rows, 0.0);
    expectAllNear(results[r][1].f(), last, 0.0);
  }
}

TEST_P(CollectiveTest, ReduceScatter) {
  std::string rows = std::to_string(2 * groupSize());
  std::string source =
      program("(%x: tensor<" + rows + "x3xf32>) -> tensor<2x3xf32>",
              R"(
  %0 = shard.reduce_scatter %x on @g GRID_AXES scatter_axis = 0 : tensor<ROWSx3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
)");
  source = replaceAll(source, "ROWS", rows);
  RankTensors args = randomPerRank(numRanks(), {2 * groupSize(), 3});
  RankTensors results = runAll(source, args);
  ASSERT_EQ(results.size(), static_cast<size_t>(numRanks()));
  for (int64_t r = 0; r < numRanks(); ++r) {
    RefGroup group = refGroup(grid(), axes(), r);
    std::vector<double> expected(6, 0.0);
    for (int64_t e = 0; e < 6; ++e)
      for (int64_t m : group.members)
        expected[e] += args[m][0].f()[group.index * 6 + e];
    SCOPED_TRACE("rank " + std::to_string(r));
    expectAllNear(results[r][0].f(), expected, kExact);
  }
}

TEST_P(CollectiveTest, AllToAll) {
  std::string g = std::to_string(groupSize());
  std::string rows = std::to_string(2 * groupSize());
  std::string cols = std::to_string(3 * groupSize());
  std::string source =
      program("(%x: tensor<" + rows + "x3xf32>) -> tensor<2x" + cols + "xf32>",
              "  %0 = shard.all_to_all %x on @g GRID_AXES split_axis = 0 "
              "concat_axis = 1 : tensor<" +
                  rows + "x3xf32> -> tensor<2x" + cols +
                  "xf32>\n  return %0 : tensor<2x" + cols + "xf32>\n");
  RankTensors args = randomPerRank(numRanks(), {2 * groupSize(), 3});
  RankTensors results = runAll(source, args);
  ASSERT_EQ(results.size(), static_cast<size_t>(numRanks()));
  for (int64_t r = 0; r < numRanks(); ++r) {
    RefGroup group = refGroup(grid(), axes(), r);
    int64_t gs = group.size();
    // Row i of the result holds, for each member m, row index*2 + i of m.
    std::vector<double> expected(6 * gs);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t m = 0; m < gs; ++m)
        for (int64_t j = 0; j < 3; ++j)
          expected[i * 3 * gs + m * 3 + j] =
              args[group.members[m]][0].f()[(group.index * 2 + i) * 3 + j];
    SCOPED_TRACE("rank " + std::to_string(r));
    expectAllNear(results[r][0].f(), expected, 0.0);
  }
}

TEST_P(CollectiveTest, AllSliceAndBroadcast) {
  std::string cols = std::to_string(3 * groupSize());
  std::vector<int64_t> root;
  for (int16_t a : axes())
    root.push_back(grid()[a] - 1);
  std::string source = program(
      "(%x: tensor<2x" + cols + "xf32>) -> (tensor<2x3xf32>, tensor<2x" + cols +
          "xf32>)",
      "  %0 = shard.all_slice %x on @g GRID_AXES slice_axis = 1 : tensor<2x" +
          cols +
          "xf32> -> tensor<2x3xf32>\n  %1 = shard.broadcast %x on @g "
          "GRID_AXES root = [" +
          joined(root, ", ") + "] : (tensor<2x" + cols + "xf32>) -> tensor<2x" +
          cols +
          "xf32>\n  return %0, %1 : "
          "tensor<2x3xf32>, tensor<2x" +
          cols + "xf32>\n");
  RankTensors args = randomPerRank(numRanks(), {2, 3 * groupSize()});
  RankTensors results = runAll(source, args);
  ASSERT_EQ(results.size(), static_cast<size_t>(numRanks()));
  for (int64_t r = 0; r < numRanks(); ++r) {
    RefGroup group = refGroup(grid(), axes(), r);
    int64_t width = 3 * group.size();
    std::vector<double> slice(6);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        slice[i * 3 + j] = args[r][0].f()[i * width + group.index * 3 + j];
    SCOPED_TRACE("rank " + std::to_string(r));
    expectAllNear(results[r][0].f(), slice, 0.0);
    // The root is the last member in member order.
    expectAllNear(results[r][1].f(), args[group.members.back()][0].f(), 0.0);
  }
}

TEST_P(CollectiveTest, ProcessIndices) {
  std::string source = program("() -> (index, index, index)", R"(
  %0 = shard.process_linear_index on @g : index
  %1 = shard.process_multi_index on @g axes = [AXIS] : index
  %2 = shard.grid_shape @g axes = [AXIS] : index
  return %0, %1, %2 : index, index, index
)");
  int16_t axis = axes().back();
  source = replaceAll(source, "AXIS", std::to_string(axis));
  RankTensors results = runAll(source, RankTensors(numRanks()));
  ASSERT_EQ(results.size(), static_cast<size_t>(numRanks()));
  for (int64_t r = 0; r < numRanks(); ++r) {
    EXPECT_EQ(results[r][0].i(), std::vector<int64_t>{r});
    EXPECT_EQ(results[r][1].i(),
              std::vector<int64_t>{coordinatesOf(grid(), r)[axis]});
    EXPECT_EQ(results[r][2].i(), std::vector<int64_t>{grid()[axis]});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grids, CollectiveTest,
    ::testing::Values(GridCase{{4}, {0}}, GridCase{{2, 2}, {1}},
                      GridCase{{2, 2}, {0}}, GridCase{{2, 2}, {0, 1}},
                      GridCase{{2, 3}, {0, 1}}, GridCase{{2, 3}, {1}},
                      GridCase{{2, 3}, {0}}),
    caseName);

//===----------------------------------------------------------------------===//
// Other shard ops, precision
//===----------------------------------------------------------------------===//

TEST_F(MultiRankTest, DynamicRootAndIndexConstant) {
  // On a 2x2 grid: a root given by the rank's own coordinate (each rank
  // gets its own input) and one given by an index constant.
  RankTensors args = randomPerRank(4, {3});
  RankTensors results = runAll(R"(
shard.grid @g(shape = 2x2)
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %i = shard.process_multi_index on @g axes = [1] : index
  %c0 = arith.constant 0 : index
  %0 = shard.broadcast %x on @g grid_axes = [1] root = [%i] : (tensor<3xf32>, index) -> tensor<3xf32>
  %1 = shard.broadcast %x on @g grid_axes = [0] root = [%c0] : (tensor<3xf32>, index) -> tensor<3xf32>
  return %0, %1 : tensor<3xf32>, tensor<3xf32>
}
)",
                               args);
  ASSERT_EQ(results.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    expectAllNear(results[r][0].f(), args[r][0].f(), 0.0);
    expectAllNear(results[r][1].f(), args[r % 2][0].f(), 0.0);
  }
}

TEST_F(MultiRankTest, SendRecv) {
  // Two ranks exchange through four messages: x to device 1, y to device 0
  // (each rank also sends one to itself), then each receives from 0 and
  // from 1. send returns its input.
  RankTensors args;
  for (int64_t r = 0; r < 2; ++r)
    args.push_back({random({2}), random({2})});
  RankTensors results = runAll(R"(
shard.grid @g(shape = 2)
func.func @main(%x: tensor<2xf32>, %y: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %s = shard.send %x on @g grid_axes = [0] destination = [1] : (tensor<2xf32>) -> tensor<2xf32>
  %t = shard.send %y on @g grid_axes = [0] destination = [0] : (tensor<2xf32>) -> tensor<2xf32>
  %a = shard.recv %x on @g grid_axes = [0] source = [0] : (tensor<2xf32>) -> tensor<2xf32>
  %b = shard.recv %x on @g grid_axes = [0] source = [1] : (tensor<2xf32>) -> tensor<2xf32>
  return %s, %a, %b : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
)",
                               args);
  ASSERT_EQ(results.size(), 2u);
  for (int64_t r = 0; r < 2; ++r)
    expectAllNear(results[r][0].f(), args[r][0].f(), 0.0);
  // Rank 0 gets y from both; rank 1 gets x from both.
  expectAllNear(results[0][1].f(), args[0][1].f(), 0.0);
  expectAllNear(results[0][2].f(), args[1][1].f(), 0.0);
  expectAllNear(results[1][1].f(), args[0][0].f(), 0.0);
  expectAllNear(results[1][2].f(), args[1][0].f(), 0.0);
}

TEST_F(MultiRankTest, RecvWithoutSendIsAnError) {
  std::string error = runAllError(R"(
shard.grid @g(shape = 2)
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = shard.recv %x on @g grid_axes = [0] source = [1] : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
)",
                                  randomPerRank(2, {2}));
  EXPECT_NE(error.find("wait for each other forever"), std::string::npos)
      << error;
  EXPECT_NE(error.find("test.mlir:4"), std::string::npos) << error;
}

TEST_F(MultiRankTest, AllReduceConvertsToTheResultTypeInF32) {
  // f32 inputs reduced into an f64 result keep their f32 values; an integer
  // all-reduce sums int64.
  RankTensors args;
  for (int64_t r = 0; r < 2; ++r)
    args.push_back({floats({1}, {0.1 * (r + 1)}), ints({2}, {r + 1, 10 * r})});
  RankTensors results = runAll(R"(
shard.grid @g(shape = 2)
func.func @main(%x: tensor<1xf32>, %n: tensor<2xi32>) -> (tensor<1xf64>, tensor<2xi32>) {
  %0 = shard.all_reduce %x on @g grid_axes = [0] : tensor<1xf32> -> tensor<1xf64>
  %1 = shard.all_reduce %n on @g grid_axes = [0] : tensor<2xi32> -> tensor<2xi32>
  return %0, %1 : tensor<1xf64>, tensor<2xi32>
}
)",
                               args, Precision::F32);
  ASSERT_EQ(results.size(), 2u);
  double expected = static_cast<double>(0.1f) + static_cast<double>(0.2f);
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r][0].f().front(), expected);
    EXPECT_EQ(results[r][1].i(), (std::vector<int64_t>{3, 10}));
  }
}

//===----------------------------------------------------------------------===//
// An SPMD program against the unsharded one
//===----------------------------------------------------------------------===//

constexpr const char *kMlp = R"(
func.func @main(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %h = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %g = loom.gelu %h : tensor<4x16xf32>
  %y = loom.matmul %g, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
)";

/// The MLP of kMlp written for `n` ranks: w1 split by columns, w2 by rows
/// (Megatron's column- then row-parallel matmul), the partial sums
/// all-reduced.
std::string spmdMlp(int64_t n) {
  std::string source = replaceAll(R"(
shard.grid @g(shape = N)
func.func @main(%x: tensor<4x8xf32>, %w1: tensor<8xKxf32>, %w2: tensor<Kx8xf32>) -> tensor<4x8xf32> {
  %h = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8xKxf32>) -> tensor<4xKxf32>
  %g = loom.gelu %h : tensor<4xKxf32>
  %p = loom.matmul %g, %w2 : (tensor<4xKxf32>, tensor<Kx8xf32>) -> tensor<4x8xf32>
  %y = shard.all_reduce %p on @g grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
)",
                                  "N", std::to_string(n));
  return replaceAll(source, "K", std::to_string(16 / n));
}

class MegatronMlpTest : public MultiRankTest,
                        public ::testing::WithParamInterface<int64_t> {
protected:
  /// The SPMD MLP's output on each rank, for global weights split as
  /// Megatron splits them.
  RankTensors runSharded(const Tensor &x, const Tensor &w1, const Tensor &w2,
                         Precision precision) {
    int64_t n = GetParam();
    std::string source = spmdMlp(n);
    std::vector<int64_t> grid = {n};
    RankTensors args;
    for (int64_t r = 0; r < n; ++r) {
      auto w1Shard = shardOfRank(w1, grid, {{}, {0}}, r);
      auto w2Shard = shardOfRank(w2, grid, {{0}}, r);
      EXPECT_TRUE(w1Shard && w2Shard);
      if (!w1Shard || !w2Shard)
        return {};
      args.push_back({x, *w1Shard, *w2Shard});
    }
    return runAll(source, args, precision);
  }
};

TEST_P(MegatronMlpTest, MatchesTheUnshardedProgram) {
  Tensor x = random({4, 8}), w1 = random({8, 16}, 0.3),
         w2 = random({16, 8}, 0.3);
  std::vector<Tensor> unsharded = run(parse(kMlp), {x, w1, w2});
  ASSERT_EQ(unsharded.size(), 1u);
  RankTensors sharded = runSharded(x, w1, w2, Precision::F64);
  ASSERT_EQ(sharded.size(), static_cast<size_t>(GetParam()));
  std::vector<Tensor> outputs;
  for (auto &results : sharded)
    outputs.push_back(results.front());
  // The output is replicated: every rank must hold the same bits.
  llvm::Expected<Tensor> y =
      assembleFromShards(outputs, {GetParam()}, /*splitAxes=*/{});
  ASSERT_TRUE(static_cast<bool>(y)) << llvm::toString(y.takeError());
  const std::vector<double> &expected = unsharded.front().f();
  ASSERT_EQ(y->f().size(), expected.size());
  for (size_t e = 0; e < expected.size(); ++e)
    EXPECT_LE(std::fabs(y->f()[e] - expected[e]),
              1e-12 * std::max(1.0, std::fabs(expected[e])))
        << "at flat index " << e;
}

TEST_P(MegatronMlpTest, IsBitReproducible) {
  Tensor x = random({4, 8}), w1 = random({8, 16}, 0.3),
         w2 = random({16, 8}, 0.3);
  for (Precision precision : {Precision::F64, Precision::F32}) {
    RankTensors first = runSharded(x, w1, w2, precision);
    RankTensors second = runSharded(x, w1, w2, precision);
    ASSERT_EQ(first.size(), second.size());
    for (size_t r = 0; r < first.size(); ++r)
      EXPECT_EQ(first[r].front().f(), second[r].front().f()) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MegatronMlpTest, ::testing::Values(2, 4));

//===----------------------------------------------------------------------===//
// Shards of global tensors
//===----------------------------------------------------------------------===//

TEST_F(MultiRankTest, ShardAndAssembleRoundTrip) {
  // A 4x6 tensor on a 2x3 grid: dim 0 over axis 0, dim 1 over axis 1.
  Tensor global = iota({4, 6});
  std::vector<int64_t> grid = {2, 3};
  std::vector<Tensor> shards;
  for (int64_t r = 0; r < 6; ++r) {
    auto shard = shardOfRank(global, grid, {{0}, {1}}, r);
    ASSERT_TRUE(static_cast<bool>(shard)) << llvm::toString(shard.takeError());
    shards.push_back(*shard);
  }
  // Rank 4 is (1, 1): rows 2-3, columns 2-3.
  expectAllNear(shards[4].f(), {14, 15, 20, 21}, 0.0);
  auto back = assembleFromShards(shards, grid, {{0}, {1}});
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->shape(), global.shape());
  expectAllNear(back->f(), global.f(), 0.0);

  // Dim 1 over both axes, major first: rank (r0, r1) holds column block
  // r0 * 3 + r1 of 6.
  auto both = shardOfRank(global, grid, {{}, {0, 1}}, 4);
  ASSERT_TRUE(static_cast<bool>(both)) << llvm::toString(both.takeError());
  expectAllNear(both->f(), {4, 10, 16, 22}, 0.0);
}

TEST_F(MultiRankTest, AssembleChecksReplicas) {
  // Split over axis 1 only: the copies along axis 0 must agree.
  std::vector<int64_t> grid = {2, 2};
  std::vector<Tensor> shards = {floats({1}, {1}), floats({1}, {2}),
                                floats({1}, {1}), floats({1}, {5})};
  auto global = assembleFromShards(shards, grid, {{1}});
  ASSERT_FALSE(static_cast<bool>(global));
  std::string error = llvm::toString(global.takeError());
  EXPECT_NE(error.find("rank 3 holds 5 where rank 1 holds 2"),
            std::string::npos)
      << error;
  shards[3] = floats({1}, {2});
  auto fixed = assembleFromShards(shards, grid, {{1}});
  ASSERT_TRUE(static_cast<bool>(fixed)) << llvm::toString(fixed.takeError());
  expectAllNear(fixed->f(), {1, 2}, 0.0);

  auto uneven = shardOfRank(iota({3}), grid, {{0}}, 0);
  ASSERT_FALSE(static_cast<bool>(uneven));
  EXPECT_NE(llvm::toString(uneven.takeError()).find("does not split"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(MultiRankTest, OneRankFailingAbortsTheOthers) {
  // Rank 2's id is out of range: it fails before the all-reduce while the
  // others wait there; they must abort, and the error must name rank 2.
  RankTensors args;
  for (int64_t r = 0; r < 4; ++r)
    args.push_back({random({5, 3}), ints({2}, {1, r == 2 ? 7 : 4})});
  std::string error = runAllError(R"(
shard.grid @g(shape = 4)
func.func @main(%t: tensor<5x3xf32>, %ids: tensor<2xi32>) -> tensor<2x3xf32> {
  %e = loom.embedding %t, %ids : (tensor<5x3xf32>, tensor<2xi32>) -> tensor<2x3xf32>
  %y = shard.all_reduce %e on @g grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
)",
                                  args);
  EXPECT_EQ(error.rfind("rank 2: test.mlir:4:", 0), 0u) << error;
  EXPECT_NE(error.find("loom.embedding"), std::string::npos) << error;
}

TEST_F(MultiRankTest, UnsupportedShardOpIsAnError) {
  std::string error = runAllError(R"(
shard.grid @g(shape = 2)
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = shard.shift %x on @g grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<2xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}
)",
                                  randomPerRank(2, {2}));
  EXPECT_NE(error.find("test.mlir:4:"), std::string::npos) << error;
  EXPECT_NE(error.find("'shard.shift' is not supported by the multi-rank "
                       "interpreter"),
            std::string::npos)
      << error;
}

TEST_F(MultiRankTest, CollectiveOnAnotherGridIsAnError) {
  std::string error = runAllError(R"(
shard.grid @g(shape = 2)
shard.grid @h(shape = 2)
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = shard.all_reduce %x on @h grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}
)",
                                  randomPerRank(2, {2}));
  EXPECT_NE(error.find("runs on @h but the ranks form @g"), std::string::npos)
      << error;
}

TEST_F(MultiRankTest, WrongNumberOfRanksIsAnError) {
  std::string error = runAllError(R"(
shard.grid @g(shape = 2x2)
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
)",
                                  randomPerRank(3, {2}));
  EXPECT_NE(error.find("has 4 devices, got arguments for 3"), std::string::npos)
      << error;
}

} // namespace
} // namespace loom::interp::testing
