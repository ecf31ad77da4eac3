//===- MemoryPlan.cpp - Static workspace layout by liveness ---------------===//

#include "passes/Lowering/MemoryPlan.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace loom::lowering {

namespace {

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

bool overlapsInTime(const LiveBuffer &a, const LiveBuffer &b) {
  return a.first <= b.last && b.first <= a.last;
}

} // namespace

MemoryPlan planMemory(const std::vector<LiveBuffer> &buffers,
                      int64_t alignment) {
  MemoryPlan plan;
  size_t n = buffers.size();
  plan.offsets.assign(n, 0);

  // Largest first; ties by first use, so the plan does not depend on sort
  // stability.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return a < b;
  });

  std::vector<size_t> placed;
  for (size_t index : order) {
    const LiveBuffer &buffer = buffers[index];
    int64_t size = alignUp(std::max<int64_t>(buffer.bytes, 1), alignment);
    // The placed buffers live at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t other : placed)
      if (overlapsInTime(buffer, buffers[other]))
        busy.push_back({plan.offsets[other],
                        plan.offsets[other] +
                            alignUp(std::max<int64_t>(buffers[other].bytes, 1),
                                    alignment)});
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds the buffer, else after the end.
    int64_t best = -1, bestGap = INT64_MAX, cursor = 0;
    for (auto [begin, end] : busy) {
      if (begin - cursor >= size && begin - cursor < bestGap) {
        best = cursor;
        bestGap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    if (best < 0)
      best = cursor;
    plan.offsets[index] = best;
    plan.workspaceBytes = std::max(plan.workspaceBytes, best + size);
    placed.push_back(index);
  }

  // The lower bound: the most bytes live during any one op.
  std::map<int64_t, int64_t> delta;
  for (const LiveBuffer &buffer : buffers) {
    int64_t size = alignUp(std::max<int64_t>(buffer.bytes, 1), alignment);
    delta[buffer.first] += size;
    delta[buffer.last + 1] -= size;
  }
  int64_t live = 0;
  for (auto [op, change] : delta) {
    live += change;
    plan.peakLiveBytes = std::max(plan.peakLiveBytes, live);
  }
  return plan;
}

} // namespace loom::lowering
