//===- MemoryPlanTest.cpp - The static workspace layout -------------------===//

#include "passes/Lowering/MemoryPlan.h"

#include <gtest/gtest.h>

#include <random>

using loom::lowering::LiveBuffer;
using loom::lowering::planMemory;

namespace {

/// No two buffers live at the same time share a byte, and every offset is
/// aligned and inside the workspace.
void expectValid(const std::vector<LiveBuffer> &buffers,
                 const loom::lowering::MemoryPlan &plan, int64_t alignment) {
  ASSERT_EQ(plan.offsets.size(), buffers.size());
  for (size_t a = 0; a < buffers.size(); ++a) {
    EXPECT_EQ(plan.offsets[a] % alignment, 0);
    EXPECT_LE(plan.offsets[a] + buffers[a].bytes, plan.workspaceBytes);
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      bool together = buffers[a].first <= buffers[b].last &&
                      buffers[b].first <= buffers[a].last;
      bool overlap = plan.offsets[a] < plan.offsets[b] + buffers[b].bytes &&
                     plan.offsets[b] < plan.offsets[a] + buffers[a].bytes;
      EXPECT_FALSE(together && overlap) << "buffers " << a << " and " << b;
    }
  }
  EXPECT_GE(plan.workspaceBytes, plan.peakLiveBytes);
}

TEST(MemoryPlanTest, AChainReusesTwoSlots) {
  // Each op reads the previous op's result: two buffers are live at once.
  std::vector<LiveBuffer> chain;
  for (int64_t op = 0; op < 10; ++op)
    chain.push_back({op, op + 1, 1000});
  auto plan = planMemory(chain);
  expectValid(chain, plan, 64);
  EXPECT_EQ(plan.peakLiveBytes, 2 * 1024);
  EXPECT_EQ(plan.workspaceBytes, 2 * 1024);
}

TEST(MemoryPlanTest, BuffersLiveTogetherNeverShare) {
  std::vector<LiveBuffer> all = {{0, 5, 100}, {1, 5, 200}, {2, 5, 300}};
  auto plan = planMemory(all);
  expectValid(all, plan, 64);
  EXPECT_EQ(plan.workspaceBytes, 128 + 256 + 320);
}

TEST(MemoryPlanTest, RandomLifetimesStayDisjointAndNearThePeak) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<LiveBuffer> buffers;
    for (int64_t op = 0; op < 200; ++op) {
      int64_t length = std::uniform_int_distribution<int64_t>(0, 30)(rng);
      int64_t bytes = std::uniform_int_distribution<int64_t>(1, 1 << 16)(rng);
      buffers.push_back({op, op + length, bytes});
    }
    auto plan = planMemory(buffers);
    expectValid(buffers, plan, 64);
    // Greedy by size stays within a small factor of the lower bound.
    EXPECT_LE(plan.workspaceBytes, 2 * plan.peakLiveBytes);
  }
}

} // namespace
