//===- CpuCollectivesTest.cpp - The collective kernels on N threads -------===//
//
// Each `shard` collective kernel (runtime/cpu/kernels/Collectives.cpp) runs
// on every device of a grid at once, one thread per rank, called exactly as
// compiled code calls it (runThroughKernels), over ThreadComm: a loom_comm
// whose ranks are the threads, meeting at a barrier and moving contiguous
// member blocks as loom_program.h specifies. The results must be those of
// the reference multi-rank interpreter (runRanks) on the same function:
// the same member order, the same split and concatenated dimensions. The
// cases move non-leading dimensions (where the kernels pack and unpack),
// name groups of two grid axes in both orders, and convert element types;
// the last ones check that a callback's status comes back unchanged.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelTestSupport.h"

#include "passes/Lowering/KernelCall.h"

#include "loom/Interpreter/MultiRank.h"
#include "loom/loom_cpu_kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>

using namespace mlir;
using loom::interp::Tensor;

namespace loom::testing {
namespace {

/// The loom_comm of the ranks of a grid run as threads of this process. A
/// collective publishes each rank's send buffer, waits for every rank,
/// lets each rank read its group members' buffers, and waits again before
/// any buffer may change. Reductions combine the members in member order,
/// floats in double and integers in int64, as the interpreter does. A
/// split collective's start only records the transfer and its wait runs
/// it, the latest a backend may: code that read the result or changed a
/// buffer before the wait would get wrong values.
class ThreadComm {
public:
  ThreadComm(std::vector<int64_t> grid,
             std::vector<std::vector<int16_t>> groups)
      : grid(std::move(grid)), groups(std::move(groups)) {
    int64_t n = 1;
    for (int64_t extent : this->grid)
      n *= extent;
    slots.resize(n);
    ranks.resize(n);
    for (int64_t r = 0; r < n; ++r) {
      Rank &rank = ranks[r];
      rank.shared = this;
      rank.rank = r;
      rank.table = loom_comm{&rank,          allReduce,          allGather,
                             reduceScatter,  allToAll,           nullptr,
                             nullptr,        coordinate,         allReduceStart,
                             allGatherStart, reduceScatterStart, wait};
    }
  }

  const loom_comm *comm(int64_t rank) const { return &ranks[rank].table; }

private:
  struct Rank {
    ThreadComm *shared = nullptr;
    int64_t rank = 0;
    loom_comm table{};
    /// The split collectives started and not yet waited for, by slot.
    std::map<int32_t, std::function<int32_t()>> started;
  };

  /// Records `transfer` under `slot`: 0, or 5 when the slot is busy.
  static int32_t start(void *ctx, int32_t slot,
                       std::function<int32_t()> transfer) {
    auto &started = static_cast<Rank *>(ctx)->started;
    return started.emplace(slot, std::move(transfer)).second ? 0 : 5;
  }

  static int32_t allReduceStart(void *ctx, int32_t slot, int32_t group,
                                void *buf, int64_t count, loom_dtype dtype,
                                loom_reduction op) {
    return start(ctx, slot,
                 [=] { return allReduce(ctx, group, buf, count, dtype, op); });
  }

  static int32_t allGatherStart(void *ctx, int32_t slot, int32_t group,
                                const void *send, void *recv, int64_t count,
                                loom_dtype dtype) {
    return start(ctx, slot, [=] {
      return allGather(ctx, group, send, recv, count, dtype);
    });
  }

  static int32_t reduceScatterStart(void *ctx, int32_t slot, int32_t group,
                                    const void *send, void *recv, int64_t count,
                                    loom_dtype dtype, loom_reduction op) {
    return start(ctx, slot, [=] {
      return reduceScatter(ctx, group, send, recv, count, dtype, op);
    });
  }

  /// Runs the transfer started under `slot`: its status, or 6 when none.
  static int32_t wait(void *ctx, int32_t slot) {
    auto &started = static_cast<Rank *>(ctx)->started;
    auto it = started.find(slot);
    if (it == started.end())
      return 6;
    std::function<int32_t()> transfer = std::move(it->second);
    started.erase(it);
    return transfer();
  }

  /// The multi-index of `rank` in the grid (row-major).
  std::vector<int64_t> coordinatesOf(int64_t rank) const {
    std::vector<int64_t> index(grid.size());
    for (size_t a = grid.size(); a-- > 0;) {
      index[a] = rank % grid[a];
      rank /= grid[a];
    }
    return index;
  }

  /// The members of `rank`'s group `group`, in member order, and `rank`'s
  /// index among them (brute force: every rank that agrees off the group's
  /// axes, keyed by the row-major index of its coordinates on them).
  std::vector<int64_t> membersOf(int64_t rank, int32_t group,
                                 int64_t &index) const {
    const std::vector<int16_t> &axes = groups.at(group);
    std::vector<int64_t> mine = coordinatesOf(rank);
    std::vector<std::pair<int64_t, int64_t>> keyed;
    for (int64_t q = 0; q < static_cast<int64_t>(slots.size()); ++q) {
      std::vector<int64_t> other = coordinatesOf(q);
      bool same = true;
      for (size_t a = 0; a < grid.size(); ++a)
        if (std::find(axes.begin(), axes.end(), static_cast<int16_t>(a)) ==
            axes.end())
          same &= other[a] == mine[a];
      if (!same)
        continue;
      int64_t key = 0;
      for (int16_t a : axes)
        key = key * grid[a] + other[a];
      keyed.push_back({key, q});
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<int64_t> members;
    for (auto [key, q] : keyed) {
      if (q == rank)
        index = static_cast<int64_t>(members.size());
      members.push_back(q);
    }
    return members;
  }

  /// Waits for every rank; false after 30 s (a rank that never comes).
  bool barrier() {
    std::unique_lock<std::mutex> lock(mutex);
    int64_t generation = this->generation;
    if (++arrived == static_cast<int64_t>(slots.size())) {
      arrived = 0;
      ++this->generation;
      arrivedAll.notify_all();
      return true;
    }
    return arrivedAll.wait_for(lock, std::chrono::seconds(30),
                               [&] { return this->generation != generation; });
  }

  /// Publishes `data` as `rank`'s buffer, then runs `read(members, index)`
  /// while every rank's buffer is published. Returns a status.
  template <typename Read>
  int32_t exchange(int64_t rank, int32_t group, const void *data, Read read) {
    if (group < 0 || group >= static_cast<int32_t>(groups.size()))
      return 2;
    slots[rank] = data;
    if (!barrier())
      return 3;
    int64_t index = 0;
    std::vector<int64_t> members = membersOf(rank, group, index);
    read(members, index);
    return barrier() ? 0 : 3;
  }

  /// `out[e]` = the reduction of element `offset + e` of each member's
  /// buffer, in member order.
  void reduce(const std::vector<int64_t> &members, int64_t offset, void *out,
              int64_t count, loom_dtype dtype, loom_reduction op) const {
    auto combine = [op](auto acc, auto x) {
      return op == LOOM_REDUCE_MAX   ? std::max(acc, x)
             : op == LOOM_REDUCE_MIN ? std::min(acc, x)
                                     : acc + x;
    };
    auto run = [&](auto *typed, auto accumulator) {
      using T = std::remove_pointer_t<decltype(typed)>;
      using Acc = decltype(accumulator);
      for (int64_t e = 0; e < count; ++e) {
        Acc acc = 0;
        for (size_t m = 0; m < members.size(); ++m) {
          Acc x = static_cast<const T *>(slots[members[m]])[offset + e];
          acc = m == 0 ? x : combine(acc, x);
        }
        typed[e] = static_cast<T>(acc);
      }
    };
    switch (dtype) {
    case LOOM_DTYPE_F64:
      return run(static_cast<double *>(out), 0.0);
    case LOOM_DTYPE_I32:
      return run(static_cast<int32_t *>(out), int64_t());
    case LOOM_DTYPE_I64:
      return run(static_cast<int64_t *>(out), int64_t());
    default:
      return run(static_cast<float *>(out), 0.0);
    }
  }

  static int64_t bytesOf(loom_dtype dtype) {
    return dtype == LOOM_DTYPE_F64 || dtype == LOOM_DTYPE_I64 ? 8
           : dtype == LOOM_DTYPE_BF16                         ? 2
                                                              : 4;
  }

  static int32_t allReduce(void *ctx, int32_t group, void *buf, int64_t count,
                           loom_dtype dtype, loom_reduction op) {
    auto *self = static_cast<Rank *>(ctx);
    // In place: publish a copy, since the members read while we write.
    std::vector<char> copy(count * bytesOf(dtype));
    std::memcpy(copy.data(), buf, copy.size());
    return self->shared->exchange(
        self->rank, group, copy.data(),
        [&](const std::vector<int64_t> &members, int64_t) {
          self->shared->reduce(members, 0, buf, count, dtype, op);
        });
  }

  static int32_t allGather(void *ctx, int32_t group, const void *send,
                           void *recv, int64_t count, loom_dtype dtype) {
    auto *self = static_cast<Rank *>(ctx);
    int64_t bytes = count * bytesOf(dtype);
    return self->shared->exchange(
        self->rank, group, send,
        [&](const std::vector<int64_t> &members, int64_t) {
          for (size_t m = 0; m < members.size(); ++m)
            std::memcpy(static_cast<char *>(recv) + m * bytes,
                        self->shared->slots[members[m]], bytes);
        });
  }

  static int32_t reduceScatter(void *ctx, int32_t group, const void *send,
                               void *recv, int64_t count, loom_dtype dtype,
                               loom_reduction op) {
    auto *self = static_cast<Rank *>(ctx);
    return self->shared->exchange(
        self->rank, group, send,
        [&](const std::vector<int64_t> &members, int64_t index) {
          self->shared->reduce(members, index * count, recv, count, dtype, op);
        });
  }

  static int32_t allToAll(void *ctx, int32_t group, const void *send,
                          void *recv, int64_t count, loom_dtype dtype) {
    auto *self = static_cast<Rank *>(ctx);
    int64_t bytes = count * bytesOf(dtype);
    return self->shared->exchange(
        self->rank, group, send,
        [&](const std::vector<int64_t> &members, int64_t index) {
          for (size_t m = 0; m < members.size(); ++m)
            std::memcpy(
                static_cast<char *>(recv) + m * bytes,
                static_cast<const char *>(self->shared->slots[members[m]]) +
                    index * bytes,
                bytes);
        });
  }

  static int64_t coordinate(void *ctx, int32_t axis) {
    auto *self = static_cast<Rank *>(ctx);
    return self->shared->coordinatesOf(self->rank).at(axis);
  }

  std::vector<int64_t> grid;
  std::vector<std::vector<int16_t>> groups;
  std::vector<const void *> slots;
  std::vector<Rank> ranks;
  std::mutex mutex;
  std::condition_variable arrivedAll;
  int64_t arrived = 0, generation = 0;
};

/// Arguments of `fn` for `rank`: random floats, or small integers, that
/// differ between ranks.
std::vector<Tensor> argumentsFor(func::FuncOp fn, int64_t rank) {
  std::vector<Tensor> args;
  for (auto [i, type] : llvm::enumerate(fn.getArgumentTypes())) {
    auto ranked = cast<RankedTensorType>(type);
    unsigned seed = static_cast<unsigned>(1000 * rank + i);
    if (isa<FloatType>(ranked.getElementType())) {
      args.push_back(randomFloats(ranked.getShape(), seed));
      continue;
    }
    std::vector<int64_t> values(ranked.getNumElements());
    for (size_t e = 0; e < values.size(); ++e)
      values[e] = static_cast<int64_t>((seed * 37 + e * 11) % 97) - 48;
    args.push_back(Tensor::ints(nullptr, ranked.getShape(), values));
  }
  return args;
}

/// Runs @f of `source` (a module with `shard.grid @g` and `func.func @f`)
/// on every rank of @g, in the reference interpreter and through the
/// kernels on one thread per rank, and expects every rank's results within
/// `tolerance` (relative and absolute) of the reference's: once with every
/// collective waiting in its own call, once with the splittable ones split
/// into a start and a collective_wait.
void expectKernelsMatchReference(StringRef source, double tolerance) {
  auto ctx = makeKernelTestContext();
  auto module = parseKernelTestModule(*ctx, source);
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<func::FuncOp>("f");
  auto grid = module->lookupSymbol<shard::GridOp>("g");
  ASSERT_TRUE(fn && grid);
  // The group indices runThroughKernels' encoder hands out, in op order.
  lowering::GroupTable table;
  for (Operation &op : fn.getBody().front())
    if (isa<shard::ShardDialect>(op.getDialect()))
      ASSERT_TRUE(succeeded(lowering::encodeKernelCall(&op, table)));
  std::vector<std::vector<int16_t>> groups;
  for (const auto &axes : table.groups())
    groups.emplace_back(axes.begin(), axes.end());
  std::vector<int64_t> shape(grid.getShape().begin(), grid.getShape().end());
  int64_t numRanks = 1;
  for (int64_t extent : shape)
    numRanks *= extent;

  std::vector<std::vector<Tensor>> args;
  for (int64_t r = 0; r < numRanks; ++r)
    args.push_back(argumentsFor(fn, r));
  auto reference = interp::runRanks(fn, grid, args, interp::Precision::F64);
  ASSERT_TRUE(static_cast<bool>(reference))
      << llvm::toString(reference.takeError());

  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split collectives" : "blocking collectives");
    ThreadComm comm(shape, groups);
    std::vector<std::vector<Tensor>> results(numRanks);
    std::vector<std::string> errors(numRanks);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < numRanks; ++r)
      threads.emplace_back([&, r] {
        auto mine = runThroughKernels(*module, args[r], comm.comm(r),
                                      /*microBatch=*/0, split);
        if (mine)
          results[r] = std::move(*mine);
        else
          errors[r] = llvm::toString(mine.takeError());
      });
    for (std::thread &thread : threads)
      thread.join();
    for (int64_t r = 0; r < numRanks; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      ASSERT_EQ(errors[r], "");
      expectAllClose((*reference)[r], results[r], tolerance, tolerance);
    }
  }
}

/// Data moves exactly; reductions round once to f32 where the reference
/// keeps double.
constexpr double kMoved = 0.0, kReduced = 1e-6;

TEST(CpuCollectivesTest, AllReduceOnEveryGroup) {
  expectKernelsMatchReference(R"(
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<3x5xf32>, %i: tensor<3x5xi32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xi32>, tensor<3x5xf64>) {
  %0 = shard.all_reduce %x on @g grid_axes = [1] : tensor<3x5xf32> -> tensor<3x5xf32>
  %1 = shard.all_reduce %x on @g grid_axes = [0] reduction = max : tensor<3x5xf32> -> tensor<3x5xf32>
  %2 = shard.all_reduce %x on @g grid_axes = [0, 1] reduction = min : tensor<3x5xf32> -> tensor<3x5xf32>
  %3 = shard.all_reduce %x on @g grid_axes = [1, 0] : tensor<3x5xf32> -> tensor<3x5xf32>
  %4 = shard.all_reduce %i on @g grid_axes = [1] : tensor<3x5xi32> -> tensor<3x5xi32>
  %5 = shard.all_reduce %x on @g grid_axes = [0] : tensor<3x5xf32> -> tensor<3x5xf64>
  return %0, %1, %2, %3, %4, %5 : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xi32>, tensor<3x5xf64>
}
)",
                              kReduced);
}

TEST(CpuCollectivesTest, ReduceScatterOnNonLeadingAxes) {
  expectKernelsMatchReference(R"(
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<4x4x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x4x2xf32>, tensor<2x4x8xf32>, tensor<4x1x8xf32>, tensor<4x4x4xf64>) {
  %0 = shard.reduce_scatter %x on @g grid_axes = [1] scatter_axis = 1 : tensor<4x4x8xf32> -> tensor<4x2x8xf32>
  %1 = shard.reduce_scatter %x on @g grid_axes = [0, 1] scatter_axis = 2 : tensor<4x4x8xf32> -> tensor<4x4x2xf32>
  %2 = shard.reduce_scatter %x on @g grid_axes = [0] scatter_axis = 0 : tensor<4x4x8xf32> -> tensor<2x4x8xf32>
  %3 = shard.reduce_scatter %x on @g grid_axes = [1, 0] reduction = max scatter_axis = 1 : tensor<4x4x8xf32> -> tensor<4x1x8xf32>
  %4 = shard.reduce_scatter %x on @g grid_axes = [1] scatter_axis = 2 : tensor<4x4x8xf32> -> tensor<4x4x4xf64>
  return %0, %1, %2, %3, %4 : tensor<4x2x8xf32>, tensor<4x4x2xf32>, tensor<2x4x8xf32>, tensor<4x1x8xf32>, tensor<4x4x4xf64>
}
)",
                              kReduced);
}

TEST(CpuCollectivesTest, AllGatherOnNonLeadingAxes) {
  expectKernelsMatchReference(R"(
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi64>) -> (tensor<2x6x4xf32>, tensor<2x3x16xf32>, tensor<4x3x4xf32>, tensor<2x12x4xf32>, tensor<2x6xi64>) {
  %0 = shard.all_gather %x on @g grid_axes = [1] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  %1 = shard.all_gather %x on @g grid_axes = [0, 1] gather_axis = 2 : tensor<2x3x4xf32> -> tensor<2x3x16xf32>
  %2 = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<2x3x4xf32> -> tensor<4x3x4xf32>
  %3 = shard.all_gather %x on @g grid_axes = [1, 0] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x12x4xf32>
  %4 = shard.all_gather %i on @g grid_axes = [0] gather_axis = 1 : tensor<2x3xi64> -> tensor<2x6xi64>
  return %0, %1, %2, %3, %4 : tensor<2x6x4xf32>, tensor<2x3x16xf32>, tensor<4x3x4xf32>, tensor<2x12x4xf32>, tensor<2x6xi64>
}
)",
                              kMoved);
}

TEST(CpuCollectivesTest, AllToAllOnNonLeadingAxes) {
  expectKernelsMatchReference(R"(
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<4x8x8xf32>) -> (tensor<8x8x4xf32>, tensor<1x8x32xf32>, tensor<4x8x8xf32>, tensor<4x2x32xf32>) {
  %0 = shard.all_to_all %x on @g grid_axes = [1] split_axis = 2 concat_axis = 0 : tensor<4x8x8xf32> -> tensor<8x8x4xf32>
  %1 = shard.all_to_all %x on @g grid_axes = [0, 1] split_axis = 0 concat_axis = 2 : tensor<4x8x8xf32> -> tensor<1x8x32xf32>
  %2 = shard.all_to_all %x on @g grid_axes = [0] split_axis = 1 concat_axis = 1 : tensor<4x8x8xf32> -> tensor<4x8x8xf32>
  %3 = shard.all_to_all %x on @g grid_axes = [1, 0] split_axis = 1 concat_axis = 2 : tensor<4x8x8xf32> -> tensor<4x2x32xf32>
  return %0, %1, %2, %3 : tensor<8x8x4xf32>, tensor<1x8x32xf32>, tensor<4x8x8xf32>, tensor<4x2x32xf32>
}
)",
                              kMoved);
}

TEST(CpuCollectivesTest, AllSliceOnNonLeadingAxes) {
  expectKernelsMatchReference(R"(
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<4x8x8xf32>) -> (tensor<4x4x8xf32>, tensor<4x8x2xf32>, tensor<4x8x2xf32>, tensor<2x8x8xf32>) {
  %0 = shard.all_slice %x on @g grid_axes = [1] slice_axis = 1 : tensor<4x8x8xf32> -> tensor<4x4x8xf32>
  %1 = shard.all_slice %x on @g grid_axes = [0, 1] slice_axis = 2 : tensor<4x8x8xf32> -> tensor<4x8x2xf32>
  %2 = shard.all_slice %x on @g grid_axes = [1, 0] slice_axis = 2 : tensor<4x8x8xf32> -> tensor<4x8x2xf32>
  %3 = shard.all_slice %x on @g grid_axes = [0] slice_axis = 0 : tensor<4x8x8xf32> -> tensor<2x8x8xf32>
  return %0, %1, %2, %3 : tensor<4x4x8xf32>, tensor<4x8x2xf32>, tensor<4x8x2xf32>, tensor<2x8x8xf32>
}
)",
                              kMoved);
}

// A chain on a 1-D grid of 4: each collective consumes another's result.
TEST(CpuCollectivesTest, ChainOnOneDimensionalGrid) {
  expectKernelsMatchReference(R"(
shard.grid @g(shape = 4)
func.func @f(%x: tensor<2x4x3xf32>) -> (tensor<2x16x3xf32>, tensor<8x4x3xf32>, tensor<2x4x3xf32>, tensor<2x1x3xf32>) {
  %0 = shard.all_gather %x on @g grid_axes = [0] gather_axis = 1 : tensor<2x4x3xf32> -> tensor<2x16x3xf32>
  %1 = shard.all_to_all %0 on @g grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<2x16x3xf32> -> tensor<8x4x3xf32>
  %2 = shard.reduce_scatter %1 on @g grid_axes = [0] scatter_axis = 0 : tensor<8x4x3xf32> -> tensor<2x4x3xf32>
  %3 = shard.all_slice %2 on @g grid_axes = [0] slice_axis = 1 : tensor<2x4x3xf32> -> tensor<2x1x3xf32>
  return %0, %1, %2, %3 : tensor<2x16x3xf32>, tensor<8x4x3xf32>, tensor<2x4x3xf32>, tensor<2x1x3xf32>
}
)",
                              kReduced);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// A loom_comm whose collectives all fail with status 7 (split ones at the
/// wait, with 8) and whose grid coordinates are all 9 (outside a 2x2 grid).
loom_comm failingComm() {
  loom_comm comm{};
  comm.all_reduce_start = [](void *, int32_t, int32_t, void *, int64_t,
                             loom_dtype, loom_reduction) { return 0; };
  comm.all_gather_start = [](void *, int32_t, int32_t, const void *, void *,
                             int64_t, loom_dtype) { return 0; };
  comm.reduce_scatter_start = [](void *, int32_t, int32_t, const void *, void *,
                                 int64_t, loom_dtype,
                                 loom_reduction) { return 0; };
  comm.wait = [](void *, int32_t) { return 8; };
  comm.all_reduce = [](void *, int32_t, void *, int64_t, loom_dtype,
                       loom_reduction) { return 7; };
  comm.all_gather = [](void *, int32_t, const void *, void *, int64_t,
                       loom_dtype) { return 7; };
  comm.reduce_scatter = [](void *, int32_t, const void *, void *, int64_t,
                           loom_dtype, loom_reduction) { return 7; };
  comm.all_to_all = [](void *, int32_t, const void *, void *, int64_t,
                       loom_dtype) { return 7; };
  comm.grid_coordinate = [](void *, int32_t) -> int64_t { return 9; };
  return comm;
}

/// The error of running the one-op body `op` (on @g, 2x2) from a
/// tensor<4x4xf32> to `resultType` over `comm` (failingComm), with the
/// splittable collectives `split`.
std::string errorOf(const std::string &op, const std::string &resultType,
                    bool split = false, loom_comm comm = failingComm()) {
  std::string source = "shard.grid @g(shape = 2x2)\n"
                       "func.func @f(%x: tensor<4x4xf32>) -> " +
                       resultType + " {\n  %0 = " + op +
                       " : tensor<4x4xf32> -> " + resultType +
                       "\n  return %0 : " + resultType + "\n}\n";
  auto ctx = makeKernelTestContext();
  auto module = parseKernelTestModule(*ctx, source);
  if (!module)
    return "";
  auto results = runThroughKernels(*module, {randomFloats({4, 4}, 1)}, &comm,
                                   /*microBatch=*/0, split);
  if (results)
    return "no error";
  return llvm::toString(results.takeError());
}

TEST(CpuCollectivesTest, CallbackStatusComesBackUnchanged) {
  EXPECT_EQ(
      errorOf("shard.all_reduce %x on @g grid_axes = [1]", "tensor<4x4xf32>"),
      "loom_cpu_all_reduce returned 7: all_reduce on group 0: the "
      "communication callback returned 7");
  EXPECT_EQ(errorOf("shard.reduce_scatter %x on @g grid_axes = [0, 1] "
                    "scatter_axis = 1",
                    "tensor<4x1xf32>"),
            "loom_cpu_reduce_scatter returned 7: reduce_scatter on group 0: "
            "the communication callback returned 7");
  EXPECT_EQ(errorOf("shard.all_gather %x on @g grid_axes = [1] gather_axis = 1",
                    "tensor<4x8xf32>"),
            "loom_cpu_all_gather returned 7: all_gather on group 0: the "
            "communication callback returned 7");
  EXPECT_EQ(errorOf("shard.all_to_all %x on @g grid_axes = [0] split_axis = 1 "
                    "concat_axis = 0",
                    "tensor<8x2xf32>"),
            "loom_cpu_all_to_all returned 7: all_to_all on group 0: the "
            "communication callback returned 7");
}

TEST(CpuCollectivesTest, AllSliceRejectsACoordinateOutsideTheGrid) {
  EXPECT_EQ(errorOf("shard.all_slice %x on @g grid_axes = [1] slice_axis = 1",
                    "tensor<4x2xf32>"),
            "loom_cpu_all_slice returned 1: all_slice: coordinate 9 on grid "
            "axis 1 of size 2");
}

TEST(CpuCollectivesTest, SplitCollectiveStatusComesFromTheWait) {
  EXPECT_EQ(errorOf("shard.all_reduce %x on @g grid_axes = [1]",
                    "tensor<4x4xf32>", /*split=*/true),
            "loom_cpu_collective_wait returned 8: collective_wait for slot 0: "
            "the communication callback returned 8");
  EXPECT_EQ(errorOf("shard.all_gather %x on @g grid_axes = [1] gather_axis = 0",
                    "tensor<8x4xf32>", /*split=*/true),
            "loom_cpu_collective_wait returned 8: collective_wait for slot 0: "
            "the communication callback returned 8");
}

TEST(CpuCollectivesTest, SplitCollectiveNeedsTheStartAndWaitCallbacks) {
  loom_comm blockingOnly = failingComm();
  blockingOnly.all_reduce_start = nullptr;
  EXPECT_EQ(errorOf("shard.all_reduce %x on @g grid_axes = [1]",
                    "tensor<4x4xf32>", /*split=*/true, blockingOnly),
            "loom_cpu_all_reduce returned 1: all_reduce: the call frame has no "
            "communication callback for it");
  loom_comm noWait = failingComm();
  noWait.wait = nullptr;
  EXPECT_EQ(errorOf("shard.reduce_scatter %x on @g grid_axes = [1] "
                    "scatter_axis = 0",
                    "tensor<2x4xf32>", /*split=*/true, noWait),
            "loom_cpu_reduce_scatter returned 1: reduce_scatter: the call "
            "frame has no communication callback for it");
}

// The lowering splits only transfers on contiguous member blocks; a slot on
// another (hand-made meta) is refused, not packed and left half done.
TEST(CpuCollectivesTest, SplitCollectiveRefusesBlocksToPack) {
  auto ctx = makeKernelTestContext();
  auto module = parseKernelTestModule(*ctx, R"(
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<4x4xf32>) -> tensor<4x8xf32> {
  %0 = shard.all_gather %x on @g grid_axes = [1] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
)");
  ASSERT_TRUE(module);
  Operation &gather =
      module->lookupSymbol<func::FuncOp>("f").getBody().front().front();
  EXPECT_FALSE(lowering::splittable(&gather));
  lowering::GroupTable groups;
  auto call = lowering::encodeKernelCall(&gather, groups);
  ASSERT_TRUE(succeeded(call));
  lowering::setSlot(*call, 0);
  std::vector<float> in(16, 1.0f), out(32, 0.0f);
  void *buffers[] = {in.data(), out.data()};
  loom_comm comm = failingComm();
  loom_call_frame frame{nullptr, nullptr, nullptr, &comm, 0};
  EXPECT_EQ(loom_cpu_all_gather(&frame, buffers, call->meta.data()), 1);
  EXPECT_STREQ(loom_cpu_last_error(),
               "all_gather: a split collective (slot 0) needs an operand of "
               "contiguous member blocks of the result's element type");
}

TEST(CpuCollectivesTest, SplittableCollectives) {
  auto ctx = makeKernelTestContext();
  auto module = parseKernelTestModule(*ctx, R"(
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<4x4xf32>, %y: tensor<1x4x4xf32>) -> (tensor<4x4xf64>, tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4x4xf32>, tensor<1x8x4xf32>, tensor<8x2xf32>) {
  %0 = shard.all_reduce %x on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf64>
  %1 = shard.reduce_scatter %x on @g grid_axes = [1] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %2 = shard.reduce_scatter %x on @g grid_axes = [1] scatter_axis = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
  %3 = shard.all_gather %y on @g grid_axes = [1] gather_axis = 0 : tensor<1x4x4xf32> -> tensor<2x4x4xf32>
  %4 = shard.all_gather %y on @g grid_axes = [1] gather_axis = 1 : tensor<1x4x4xf32> -> tensor<1x8x4xf32>
  %5 = shard.all_to_all %x on @g grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x4xf32> -> tensor<8x2xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x4xf64>, tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4x4xf32>, tensor<1x8x4xf32>, tensor<8x2xf32>
}
)");
  ASSERT_TRUE(module);
  std::vector<bool> splits;
  for (Operation &op :
       module->lookupSymbol<func::FuncOp>("f").getBody().front())
    if (isa<shard::ShardDialect>(op.getDialect()))
      splits.push_back(lowering::splittable(&op));
  // all_reduce converts at its copy; leading dimensions of 1 leave the
  // member blocks contiguous; all_to_all is never split.
  EXPECT_EQ(splits, (std::vector<bool>{true, true, false, true, true, false}));
}

} // namespace
} // namespace loom::testing
