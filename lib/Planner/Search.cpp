//===- Search.cpp - Joint search over parallel plans ----------------------===//
//
// Exhaustive over the discrete dimensions, which stay small (for 1536
// devices and an 80-layer model, about 10^5 plans): a plan's estimate is
// arithmetic on the PlanEvaluator's cached per-layer costs, and the stage DP
// is O(P · L²) additions, so enumerating beats a heuristic that could miss
// the optimum. Plans are screened with the schedules' closed-form bubbles;
// the best `simulated` of them are then timed by the schedule simulator and
// ranked by that, the time --estimate reports. A pipelined plan whose lower
// bound (M times its average stage's work) is slower than the 2·`simulated`
// best screened so far skips the stage DP: it could not rank. Pipelined plans
// get their layers from the stage DP under the device memory; a plan for which
// no layout fits is rejected for memory, with the smallest peak any layout
// reaches.
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/Search.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <queue>

using namespace loom::cost;

namespace loom::plan {

namespace {

template <typename T>
std::vector<T> orDefault(const std::vector<T> &pinned,
                         std::vector<T> defaults) {
  return pinned.empty() ? defaults : pinned;
}

/// The divisors of `n` up to `max`, ascending: O(sqrt(n)), so that a global
/// batch of millions of sequences enumerates its micro-batches at once.
std::vector<int64_t> divisors(int64_t n, int64_t max) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0)
      continue;
    if (d <= max)
      result.push_back(d);
    if (n / d != d && n / d <= max)
      result.push_back(n / d);
  }
  std::sort(result.begin(), result.end());
  return result;
}

bool allowed(const std::vector<int64_t> &pinned, int64_t value) {
  return pinned.empty() || llvm::is_contained(pinned, value);
}

/// Transformer layers per stage from the DP's item bounds (item 0 is the
/// embedding, items 1..L the layers, item L + 1 the head).
std::vector<int64_t> layersOf(const std::vector<int64_t> &bounds,
                              int64_t numLayers) {
  std::vector<int64_t> layers;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    int64_t begin = std::max<int64_t>(bounds[s], 1);
    int64_t end = std::min<int64_t>(bounds[s + 1], numLayers + 1);
    layers.push_back(std::max<int64_t>(end - begin, 0));
  }
  return layers;
}

/// Sorts by step time, then peak memory; the first plan of a run with the
/// same estimate (enumerated first: the simpler) stands for all of it.
void rank(std::vector<RankedPlan> &plans, int64_t topK) {
  std::vector<size_t> order(plans.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Estimate &x = plans[a].estimate, &y = plans[b].estimate;
    if (x.stepTime != y.stepTime)
      return x.stepTime < y.stepTime;
    if (x.memory.peak() != y.memory.peak())
      return x.memory.peak() < y.memory.peak();
    return a < b;
  });
  std::vector<RankedPlan> kept;
  for (size_t i : order) {
    RankedPlan &plan = plans[i];
    if (int64_t(kept.size()) >= topK)
      break;
    if (!kept.empty() &&
        kept.back().estimate.stepTime == plan.estimate.stepTime &&
        kept.back().estimate.memory.peak() == plan.estimate.memory.peak())
      continue;
    kept.push_back(std::move(plan));
  }
  plans = std::move(kept);
}

/// "a vs b" in one unit, that of the larger: seconds in s, ms or us with
/// three decimals, so that "237.144 us vs 0.000 s" never happens.
std::string formatSecondsPair(double a, double b) {
  double larger = std::max(a, b);
  auto [scale, unit] = larger >= 1 || larger == 0 ? std::pair{1.0, "s"}
                       : larger >= 1e-3           ? std::pair{1e3, "ms"}
                                                  : std::pair{1e6, "us"};
  return llvm::formatv("{0:f3} {2} vs {1:f3} {2}", a * scale, b * scale, unit);
}

/// "a vs b" bytes in the binary unit of the larger, two decimals (the
/// units loom-plan prints memory in).
std::string formatBytesPair(double a, double b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double larger = std::max(a, b), scale = 1;
  int unit = 0;
  while (unit < 4 && larger >= 1024 * scale) {
    scale *= 1024;
    ++unit;
  }
  return llvm::formatv("{0:f2} {2} vs {1:f2} {2}", a / scale, b / scale,
                       units[unit]);
}

/// The (schedule, virtual stages) pairs to try for P stages and M
/// micro-batches: GPipe, 1F1B and ZB-H1, and interleaved 1F1B with V = 2
/// or 4 where P is at least 2, P · V is at most the layers plus two (the
/// first and last stages may hold only the embedding and the head) and P
/// divides the micro-batches; the stage DP places the layers, evenly or not.
std::vector<std::pair<Schedule, int64_t>>
schedulesFor(const SearchSpace &space, const ModelConfig &config, int64_t p,
             int64_t m) {
  std::vector<Schedule> kinds = orDefault(
      space.schedules,
      p > 1 ? std::vector<Schedule>{Schedule::OneFOneB, Schedule::GPipe,
                                    Schedule::Interleaved1F1B,
                                    Schedule::ZeroBubbleH1}
            : std::vector<Schedule>{Schedule::OneFOneB});
  std::vector<std::pair<Schedule, int64_t>> result;
  for (Schedule kind : kinds) {
    if (kind != Schedule::Interleaved1F1B) {
      if (allowed(space.virtualStages, 1))
        result.push_back({kind, 1});
      continue;
    }
    for (int64_t v : orDefault(space.virtualStages, {2, 4}))
      if (p >= 2 && v >= 2 && p * v <= config.numLayers + 2 && m % p == 0)
        result.push_back({kind, v});
  }
  return result;
}

/// A cost the model cannot give is a defect to report, never a winner.
llvm::Error nonFinite(const ParallelPlan &plan, const Estimate &estimate) {
  return llvm::createStringError(llvm::formatv(
      "internal error: the cost model gives a step time of {0} s and a peak "
      "of {1} bytes for D={2} T={3} P={4}, micro-batch {5}, {6} (V={7}), "
      "ZeRO-{8}, recompute {9}, ranks {10}; this is a bug in Loom, please "
      "report it with the command line",
      estimate.stepTime, estimate.memory.peak(), plan.dp, plan.tp, plan.pp,
      plan.microBatch, stringifySchedule(plan.schedule), plan.virtualStages,
      int(plan.zero), stringifyRecompute(plan.recompute),
      stringifyRankOrder(plan.rankOrder)));
}

/// Why enumeratePlans found nothing: the constraints of the split, those of
/// the pinned dimensions named.
std::string noPlanRuns(const ModelConfig &config, const ClusterSpec &cluster,
                       const TrainingSetup &setup, const SearchSpace &space) {
  bool pinned = !space.dp.empty() || !space.tp.empty() || !space.pp.empty() ||
                !space.cp.empty() || !space.microBatch.empty() ||
                !space.schedules.empty() || !space.virtualStages.empty();
  std::string context, within;
  if (!space.cp.empty())
    context = llvm::formatv("context dividing the {0}-token sequence; ",
                            setup.seqLen ? setup.seqLen : config.maxPositions)
                  .str();
  if (llvm::is_contained(space.schedules, Schedule::Interleaved1F1B))
    within = llvm::formatv(" within the pinned degrees and schedule "
                           "(interleaved-1f1b needs P of at least 2, P x V "
                           "at most the {0} layers plus 2 and P dividing "
                           "the micro-batches)",
                           config.numLayers)
                 .str();
  else if (pinned)
    within = " within the pinned degrees";
  return llvm::formatv(
      "no plan runs on the {0} devices: no data x {1}tensor x pipeline split "
      "of them (tensor a power of two up to the {2} devices of a node unless "
      "pinned, dividing the {3} heads; {4}at most {5} stages) also divides "
      "the global batch {6} into whole micro-batches{7}",
      cluster.numDevices(), space.cp.empty() ? "" : "context x ",
      cluster.devicesPerNode, config.numHeads, context, config.numLayers,
      setup.globalBatch, within);
}

} // namespace

std::vector<ParallelPlan> enumeratePlans(const ModelConfig &config,
                                         const ClusterSpec &cluster,
                                         const TrainingSetup &setup,
                                         const SearchSpace &space) {
  const int64_t n = cluster.numDevices();
  std::vector<int64_t> tps;
  for (int64_t t = 1; t <= std::min(n, cluster.devicesPerNode); t *= 2)
    tps.push_back(t);
  // Context parallelism splits the sequence in powers of two, as
  // Megatron-Core and torchtitan do, down to 1024 tokens a device (shorter
  // blocks leave the ring's transfers little to hide behind).
  const int64_t seq = setup.seqLen ? setup.seqLen : config.maxPositions;
  std::vector<int64_t> cps;
  for (int64_t c = 1; c <= n && seq % c == 0 && (c == 1 || seq / c >= 1024);
       c *= 2)
    cps.push_back(c);
  // The degrees, then everything a plan of those degrees may vary.
  struct Degrees {
    int64_t d, t, c, p;
  };
  std::vector<Degrees> degrees;
  for (int64_t t : orDefault(space.tp, tps))
    for (int64_t c : orDefault(space.cp, cps)) {
      if (t < 1 || c < 1 || n % (t * c) != 0)
        continue;
      for (int64_t p : divisors(n / (t * c), config.numLayers)) {
        int64_t d = n / (t * c * p);
        if (allowed(space.pp, p) && allowed(space.dp, d) &&
            setup.globalBatch % d == 0)
          degrees.push_back({d, t, c, p});
      }
    }
  std::vector<ParallelPlan> plans;
  for (auto [d, t, c, p] : degrees) {
    std::vector<ZeroStage> zeros =
        d * c > 1 ? std::vector<ZeroStage>{ZeroStage::None,
                                           ZeroStage::OptimizerStates,
                                           ZeroStage::Gradients,
                                           ZeroStage::Parameters}
                  : std::vector<ZeroStage>{ZeroStage::None};
    std::vector<bool> sps =
        t > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
    std::vector<RankOrder> orders =
        d > 1 && p > 1 ? std::vector<RankOrder>{RankOrder::TensorDataPipeline,
                                                RankOrder::TensorPipelineData}
                       : std::vector<RankOrder>{RankOrder::TensorDataPipeline};
    for (int64_t b : divisors(setup.globalBatch / d, setup.globalBatch)) {
      if (!allowed(space.microBatch, b))
        continue;
      int64_t m = setup.globalBatch / (d * b);
      for (auto [schedule, v] : schedulesFor(space, config, p, m))
        for (ZeroStage zero : orDefault(space.zero, zeros))
          for (bool sp : orDefault(space.sequenceParallel, sps))
            for (Recompute recompute : orDefault(
                     space.recompute,
                     {Recompute::None, Recompute::Selective, Recompute::Full}))
              for (RankOrder order : orDefault(space.rankOrders, orders)) {
                ParallelPlan plan;
                plan.dp = d;
                plan.tp = t;
                plan.pp = p;
                plan.cp = c;
                plan.microBatch = b;
                plan.schedule = schedule;
                plan.virtualStages = v;
                plan.zero = zero;
                plan.sequenceParallel = sp;
                plan.recompute = recompute;
                plan.rankOrder = order;
                if (checkPlan(config, cluster, plan, setup).empty())
                  plans.push_back(plan);
              }
    }
  }
  return plans;
}

llvm::Expected<SearchResult> searchPlans(PlanEvaluator &evaluator,
                                         const ModelConfig &config,
                                         const ClusterSpec &cluster,
                                         const TrainingSetup &setup,
                                         const SearchOptions &options) {
  for (const std::vector<int64_t> *pinned :
       {&options.space.dp, &options.space.tp, &options.space.pp,
        &options.space.cp, &options.space.microBatch,
        &options.space.virtualStages})
    for (int64_t value : *pinned)
      if (value < 1)
        return llvm::createStringError(llvm::formatv(
            "a pinned degree, micro-batch or virtual stage count of {0}: each "
            "must be positive",
            value));
  if (setup.globalBatch < 1)
    return llvm::createStringError("the global batch must be positive");
  std::vector<ParallelPlan> plans =
      enumeratePlans(config, cluster, setup, options.space);
  if (plans.empty())
    return llvm::createStringError(
        noPlanRuns(config, cluster, setup, options.space));
  SearchResult result;
  result.numPlans = int64_t(plans.size());
  std::vector<RankedPlan> fitting;
  auto reject = [&](const ParallelPlan &plan, const Estimate &estimate) {
    ++result.numRejectedForMemory;
    if (!result.closestRejected ||
        estimate.memory.peak() < result.closestRejected->estimate.memory.peak())
      result.closestRejected = RankedPlan{plan, estimate};
  };
  // Step times of the best screened plans so far, at most `keep` of them
  // (a max-heap): a plan whose lower bound exceeds the largest cannot rank.
  const size_t keep = 2 * size_t(std::max(options.simulated, options.topK));
  std::priority_queue<double> bestTimes;
  auto start = std::chrono::steady_clock::now();
  result.numEstimated = result.numPlans;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (options.progress && i % 256 == 0)
      options.progress(int64_t(i), result.numPlans);
    // Deep models on many devices have 10^5 plans whose stage DPs take
    // long: past the limit the plans estimated so far are ranked.
    if (options.timeLimitSeconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                .count() > options.timeLimitSeconds) {
      result.numEstimated = int64_t(i);
      break;
    }
    ParallelPlan plan = plans[i];
    // The estimate of the layout the memory fallback placed, if any.
    std::optional<Estimate> placed;
    if (plan.pp > 1) {
      auto problem = evaluator.stageProblem(plan);
      if (!problem)
        return problem.takeError();
      // M micro-batches through the slowest stage take at least M times
      // the average stage's work, however the layers are placed.
      double work = 0;
      for (const StageItem &item : problem->items)
        work += item.seconds;
      if (bestTimes.size() >= keep &&
          double(problem->numMicroBatches) * work / double(plan.pp) >
              bestTimes.top()) {
        ++result.numPruned;
        continue;
      }
      // Every layout's peak is at least its stages' average.
      double staticBytes = 0, activationBytes = 0;
      for (const StageItem &item : problem->items) {
        staticBytes += item.staticBytes;
        activationBytes += item.activationBytes;
      }
      double leastInFlight =
          *std::min_element(problem->inFlight.begin(), problem->inFlight.end());
      double leastPeak = (staticBytes + leastInFlight * activationBytes) /
                             double(problem->numStages) +
                         problem->stageBytes;
      std::optional<StagePartition> partition;
      if (leastPeak <= problem->capacity)
        partition = partitionStages(*problem);
      if (!partition) {
        // An interleaved rank's V stages share its memory, which the DP
        // gave them a V-th each of: its bytes are not a rank's, and its
        // tightest layout may still fit the rank as a whole.
        bool interleaved = plan.virtualStages > 1;
        if (!interleaved && result.closestRejected &&
            leastPeak >= result.closestRejected->estimate.memory.peak()) {
          ++result.numRejectedForMemory;
          continue;
        }
        // Estimate the tightest layout only when it could be the closest.
        std::optional<StagePartition> tightest = partitionForMemory(*problem);
        if (!tightest || (!interleaved && result.closestRejected &&
                          tightest->peakBytes >=
                              result.closestRejected->estimate.memory.peak())) {
          ++result.numRejectedForMemory;
          continue;
        }
        plan.stageLayers = layersOf(tightest->bounds, config.numLayers);
        auto estimate = evaluator.estimate(plan, /*simulate=*/false);
        if (!estimate)
          return estimate.takeError();
        if (!interleaved || !estimate->fits) {
          reject(plan, *estimate);
          continue;
        }
        placed = std::move(*estimate);
      } else {
        plan.stageLayers = layersOf(partition->bounds, config.numLayers);
      }
    }
    if (!placed) {
      auto estimate = evaluator.estimate(plan, /*simulate=*/false);
      if (!estimate)
        return estimate.takeError();
      placed = std::move(*estimate);
    }
    // A NaN compares false with everything: it would rank first.
    if (!std::isfinite(placed->stepTime) ||
        !std::isfinite(placed->memory.peak()))
      return nonFinite(plan, *placed);
    if (!placed->fits) {
      reject(plan, *placed);
      continue;
    }
    bestTimes.push(placed->stepTime);
    if (bestTimes.size() > keep)
      bestTimes.pop();
    fitting.push_back({plan, std::move(*placed)});
  }
  if (options.progress)
    options.progress(result.numEstimated, result.numEstimated);
  // The best screened plans, ranked again by their simulated pipelines.
  rank(fitting, std::max(options.simulated, options.topK));
  for (RankedPlan &ranked : fitting) {
    auto estimate = evaluator.estimate(ranked.plan);
    if (!estimate)
      return estimate.takeError();
    if (!std::isfinite(estimate->stepTime))
      return nonFinite(ranked.plan, *estimate);
    ranked.estimate = std::move(*estimate);
  }
  rank(fitting, options.topK);
  result.best = std::move(fitting);
  result.numCostedModels = int64_t(evaluator.numCostedModels());
  return result;
}

std::string whyLost(const Estimate &winner, const Estimate &loser) {
  struct Component {
    const char *name;
    double winner, loser;
  };
  // The three parts the step time is printed as (compute includes the
  // optimizer step), so that the reason quotes numbers the plans show.
  Component components[] = {
      {"compute", winner.compute, loser.compute},
      {"exposed communication", winner.exposedComm, loser.exposedComm},
      {"pipeline bubble", winner.bubble, loser.bubble},
  };
  if (loser.stepTime == winner.stepTime)
    return "same step time, more memory: " +
           formatBytesPair(loser.memory.peak(), winner.memory.peak());
  const Component *largest = &components[0];
  for (const Component &c : components)
    if (c.loser - c.winner > largest->loser - largest->winner)
      largest = &c;
  return llvm::formatv("+{0:f1}% step time: {1} {2}",
                       100 * (loser.stepTime / winner.stepTime - 1),
                       largest->name,
                       formatSecondsPair(largest->loser, largest->winner));
}

} // namespace loom::plan
