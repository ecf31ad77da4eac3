//===- Search.h - Joint search over parallel plans -------------*- C++ -*-===//
//
// `loom-plan` without --estimate: enumerates every plan of a model on a
// cluster — data/context/tensor/pipeline degrees whose product is the
// device count (tensor degree a power of two up to a node, dividing the
// heads and the MLP; context degree a power of two dividing the sequence)
// and their order over the nodes, micro-batch size (so the global batch
// splits into whole micro-batches), pipeline schedule, ZeRO stage, sequence
// parallelism and recomputation — places the layers of every pipelined plan
// with the stage DP (StageDP.h; interleaved plans' P x V stages too),
// estimates each with the PlanEvaluator (Estimate.h) and keeps the fastest
// that fit in memory.
//
// Each dimension can be pinned (a command-line flag given in search mode),
// which restricts the enumeration to that value.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PLANNER_SEARCH_H
#define LOOM_PLANNER_SEARCH_H

#include "loom/Planner/Estimate.h"

#include <functional>
#include <optional>

namespace loom::plan {

/// Values a dimension may take; empty: every value that can run.
struct SearchSpace {
  std::vector<int64_t> dp, tp, pp, cp, microBatch;
  std::vector<Schedule> schedules;
  std::vector<int64_t> virtualStages;
  std::vector<cost::ZeroStage> zero;
  std::vector<bool> sequenceParallel;
  std::vector<cost::Recompute> recompute;
  std::vector<RankOrder> rankOrders;
};

struct SearchOptions {
  SearchSpace space;
  /// Plans to keep: the best and K - 1 alternatives.
  int64_t topK = 5;
  /// Plans screened with the closed-form pipeline times whose pipelines
  /// are then simulated (Estimate.h) to rank them: at least topK.
  int64_t simulated = 32;
  /// Called now and then with (plans estimated, plans in all).
  std::function<void(int64_t, int64_t)> progress;
  /// Seconds after which the search stops estimating more plans and ranks
  /// those it has (0: no limit); SearchResult::numEstimated says how far it
  /// got.
  double timeLimitSeconds = 0;
};

struct RankedPlan {
  ParallelPlan plan;
  Estimate estimate;
};

struct SearchResult {
  /// The fastest plans that fit, fastest first (at most topK; plans whose
  /// estimate equals an earlier, simpler one's are left out).
  std::vector<RankedPlan> best;
  int64_t numPlans = 0;
  /// Pipelined plans skipped by their lower bound (not placed, so neither
  /// fitting nor rejected).
  int64_t numPruned = 0;
  /// Plans that fit no device's memory, and the one needing least.
  int64_t numRejectedForMemory = 0;
  std::optional<RankedPlan> closestRejected;
  /// (tensor degree, micro-batch, context degree) triples whose programs
  /// were costed.
  int64_t numCostedModels = 0;
  /// Plans looked at before the time limit (numPlans without one).
  int64_t numEstimated = 0;
  bool stoppedEarly() const { return numEstimated < numPlans; }
};

/// Every plan of `space` that can run (checkPlan accepts it), in the order
/// the search tries them: simpler plans first, so ties go to them.
std::vector<ParallelPlan> enumeratePlans(const ModelConfig &config,
                                         const cost::ClusterSpec &cluster,
                                         const TrainingSetup &setup,
                                         const SearchSpace &space);

/// The search; an error when no plan can run at all (the reason), or the
/// model cannot be costed. No plan fitting is not an error: `best` is empty
/// and `closestRejected` says what the tightest plan needs (empty too when
/// the time limit passed before any plan was estimated). When the search
/// stopped early (stoppedEarly()), only the plans it estimated were ranked
/// or rejected: an empty `best` then says nothing of the others.
llvm::Expected<SearchResult> searchPlans(PlanEvaluator &evaluator,
                                         const ModelConfig &config,
                                         const cost::ClusterSpec &cluster,
                                         const TrainingSetup &setup,
                                         const SearchOptions &options);

/// Why `loser` is slower than `winner`: "+14.0% step time: pipeline bubble
/// 0.900 s vs 0.400 s", naming the part of the step time (compute, the
/// optimizer step included; exposed communication; pipeline bubble) that
/// grew most, both numbers in one unit; a tie names the peak memory, in
/// GiB or the unit that fits.
std::string whyLost(const Estimate &winner, const Estimate &loser);

} // namespace loom::plan

#endif // LOOM_PLANNER_SEARCH_H
