//===- MemoryPlan.h - Static workspace layout by liveness -------*- C++ -*-===//
//
// A compiled function keeps every intermediate tensor in one workspace
// (loom_program.h). Each buffer is live from the op that writes it to its
// last reader; planMemory gives each buffer an offset so that buffers that
// are live at the same time never overlap, reusing the space of dead ones.
// The placement is greedy best-fit in order of decreasing size (the
// "greedy by size" strategy of TFLite's arena planner, Pisarchyk & Lee,
// "Efficient Memory Management for Deep Neural Net Inference", 2020),
// which on a straight-line training step comes close to the peak of live
// bytes, the lower bound that planMemory also reports.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_LOWERING_MEMORYPLAN_H
#define LOOM_PASSES_LOWERING_MEMORYPLAN_H

#include <cstdint>
#include <vector>

namespace loom::lowering {

/// A buffer live over the ops [first, last] (inclusive: an op's results
/// never share memory with its operands).
struct LiveBuffer {
  int64_t first = 0, last = 0;
  int64_t bytes = 0;
};

struct MemoryPlan {
  std::vector<int64_t> offsets; ///< one per buffer, multiples of alignment
  int64_t workspaceBytes = 0;   ///< the end of the highest buffer
  int64_t peakLiveBytes = 0;    ///< the most (aligned) bytes live at once
};

/// Lays out `buffers` in one workspace; offsets are multiples of
/// `alignment` (a power of two).
MemoryPlan planMemory(const std::vector<LiveBuffer> &buffers,
                      int64_t alignment = 64);

} // namespace loom::lowering

#endif // LOOM_PASSES_LOWERING_MEMORYPLAN_H
