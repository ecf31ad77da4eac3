//===- StageDP.h - Contiguous pipeline stages by dynamic programming -*- C++
//-*-//
//
// Alpa's stage partitioning (Zheng et al., OSDI'22, §5.2) on a chain of
// "items" (the embedding, the transformer layers, the head): split the chain
// into P contiguous, non-empty stages minimizing the pipelined step time
//
//     T = Σ_s t_s + (M − 1) · max_s t_s
//
// where t_s is stage s's time for one micro-batch (forward and backward of
// its items plus a per-stage constant such as its point-to-point transfers),
// under per-device memory: stage s holds its items' model states, the saved
// activations of `inFlight[s]` micro-batches (P − s under 1F1B, M under
// GPipe) and a fixed amount (temporaries).
//
// Alpa enumerates a bound t_max and, for each, minimizes Σ t_s over stages
// no slower than t_max. With stage times additive over items, Σ t_s is the
// same for every partition, so the optimum is the partition with the
// smallest feasible max_s t_s; the program computes it directly:
//
//     G(s, k) = min_{j<k} max(G(s−1, j), t(s, j..k))   over memory-feasible
//                                                       stages s = [j, k)
//
// in O(P · N²) for N items. The same recurrence with memory as the cost
// gives the smallest peak memory any partition can reach, which is what an
// infeasible problem reports.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PLANNER_STAGEDP_H
#define LOOM_PLANNER_STAGEDP_H

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace loom::plan {

/// One unit of the chain, costed on one device of the stage holding it.
struct StageItem {
  double seconds = 0;         ///< forward + backward of one micro-batch
  double staticBytes = 0;     ///< model states
  double activationBytes = 0; ///< kept per micro-batch in flight
};

struct StageProblem {
  std::vector<StageItem> items;
  int64_t numStages = 1;
  int64_t numMicroBatches = 1;
  /// Micro-batches stage s keeps in flight (numStages entries).
  std::vector<double> inFlight;
  /// Seconds stage s adds per micro-batch whatever it holds (numStages
  /// entries, or empty for none), e.g. its sends and receives.
  std::vector<double> stageSeconds;
  /// Bytes every stage holds whatever it holds (temporaries).
  double stageBytes = 0;
  double capacity = std::numeric_limits<double>::infinity();
};

struct StagePartition {
  /// Stage s holds items [bounds[s], bounds[s+1]); numStages + 1 entries.
  std::vector<int64_t> bounds;
  double sumSeconds = 0, maxSeconds = 0;
  /// Σ t_s + (M − 1) · max t_s.
  double pipelineSeconds = 0;
  double peakBytes = 0;
};

/// Seconds, bytes of stage `s` holding items [begin, end).
double stageSeconds(const StageProblem &problem, int64_t s, int64_t begin,
                    int64_t end);
double stageBytes(const StageProblem &problem, int64_t s, int64_t begin,
                  int64_t end);

/// Fills sumSeconds, maxSeconds, pipelineSeconds and peakBytes of a
/// partition given by its bounds.
StagePartition evaluatePartition(const StageProblem &problem,
                                 std::vector<int64_t> bounds);

/// The fastest partition whose every stage fits `capacity`, or none when
/// no partition fits (or there are fewer items than stages).
std::optional<StagePartition> partitionStages(const StageProblem &problem);

/// The partition with the smallest peak memory, ignoring time: what the
/// tightest plan needs when none fits.
std::optional<StagePartition> partitionForMemory(const StageProblem &problem);

} // namespace loom::plan

#endif // LOOM_PLANNER_STAGEDP_H
