//===- StageDP.cpp - Contiguous pipeline stages by dynamic programming ----===//
//
// The recurrence of StageDP.h over prefix sums, so a stage's time and memory
// are O(1). Ties in the primary cost (equal bottleneck times, common with
// identical layers) go to the partition with the smaller secondary cost
// (peak memory when minimizing time, bottleneck time when minimizing memory).
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/StageDP.h"

#include <algorithm>
#include <cmath>

namespace loom::plan {

namespace {

/// Prefix sums of the items' costs.
struct Prefix {
  std::vector<double> seconds, staticBytes, activationBytes;

  explicit Prefix(const std::vector<StageItem> &items)
      : seconds(items.size() + 1), staticBytes(items.size() + 1),
        activationBytes(items.size() + 1) {
    for (size_t i = 0; i < items.size(); ++i) {
      seconds[i + 1] = seconds[i] + items[i].seconds;
      staticBytes[i + 1] = staticBytes[i] + items[i].staticBytes;
      activationBytes[i + 1] = activationBytes[i] + items[i].activationBytes;
    }
  }
};

struct Costs {
  const StageProblem &problem;
  Prefix prefix;

  double seconds(int64_t s, int64_t begin, int64_t end) const {
    double extra = problem.stageSeconds.empty() ? 0 : problem.stageSeconds[s];
    return prefix.seconds[end] - prefix.seconds[begin] + extra;
  }
  double bytes(int64_t s, int64_t begin, int64_t end) const {
    return prefix.staticBytes[end] - prefix.staticBytes[begin] +
           double(problem.inFlight[s]) *
               (prefix.activationBytes[end] - prefix.activationBytes[begin]) +
           problem.stageBytes;
  }
};

/// (primary, secondary) cost, compared lexicographically with a relative
/// tolerance on the primary so rounding does not break ties.
struct Key {
  double primary = std::numeric_limits<double>::infinity(), secondary = 0;
  bool operator<(const Key &other) const {
    double tolerance = 1e-12 * std::max(std::abs(primary), 1.0);
    if (primary < other.primary - tolerance)
      return true;
    if (primary > other.primary + tolerance)
      return false;
    return secondary < other.secondary;
  }
};

std::optional<StagePartition> solve(const StageProblem &problem,
                                    bool forMemory) {
  const int64_t n = int64_t(problem.items.size()), p = problem.numStages;
  if (p < 1 || n < p || int64_t(problem.inFlight.size()) != p)
    return std::nullopt;
  Costs costs{problem, Prefix(problem.items)};
  auto stageKey = [&](int64_t s, int64_t j, int64_t k) {
    double t = costs.seconds(s, j, k), m = costs.bytes(s, j, k);
    return forMemory ? Key{m, t} : Key{t, m};
  };
  auto fits = [&](int64_t s, int64_t j, int64_t k) {
    return forMemory || costs.bytes(s, j, k) <= problem.capacity;
  };
  // best[s][k]: stages 0..s over items [0, k); from[s][k]: where stage s
  // begins.
  std::vector<std::vector<Key>> best(p, std::vector<Key>(n + 1));
  std::vector<std::vector<int64_t>> from(p, std::vector<int64_t>(n + 1, -1));
  for (int64_t k = 1; k <= n - (p - 1); ++k)
    if (fits(0, 0, k)) {
      best[0][k] = stageKey(0, 0, k);
      from[0][k] = 0;
    }
  for (int64_t s = 1; s < p; ++s) {
    for (int64_t k = s + 1; k <= n - (p - 1 - s); ++k) {
      for (int64_t j = s; j < k; ++j) {
        if (from[s - 1][j] < 0 || !fits(s, j, k))
          continue;
        Key stage = stageKey(s, j, k), before = best[s - 1][j];
        Key key{std::max(stage.primary, before.primary),
                std::max(stage.secondary, before.secondary)};
        if (key < best[s][k]) {
          best[s][k] = key;
          from[s][k] = j;
        }
      }
    }
  }
  if (from[p - 1][n] < 0)
    return std::nullopt;
  std::vector<int64_t> bounds(p + 1);
  bounds[p] = n;
  for (int64_t s = p - 1; s >= 0; --s)
    bounds[s] = from[s][bounds[s + 1]];
  return evaluatePartition(problem, std::move(bounds));
}

} // namespace

double stageSeconds(const StageProblem &problem, int64_t s, int64_t begin,
                    int64_t end) {
  return Costs{problem, Prefix(problem.items)}.seconds(s, begin, end);
}

double stageBytes(const StageProblem &problem, int64_t s, int64_t begin,
                  int64_t end) {
  return Costs{problem, Prefix(problem.items)}.bytes(s, begin, end);
}

StagePartition evaluatePartition(const StageProblem &problem,
                                 std::vector<int64_t> bounds) {
  Costs costs{problem, Prefix(problem.items)};
  StagePartition partition;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    double t = costs.seconds(s, bounds[s], bounds[s + 1]);
    partition.sumSeconds += t;
    partition.maxSeconds = std::max(partition.maxSeconds, t);
    partition.peakBytes =
        std::max(partition.peakBytes, costs.bytes(s, bounds[s], bounds[s + 1]));
  }
  partition.pipelineSeconds =
      partition.sumSeconds +
      double(problem.numMicroBatches - 1) * partition.maxSeconds;
  partition.bounds = std::move(bounds);
  return partition;
}

std::optional<StagePartition> partitionStages(const StageProblem &problem) {
  return solve(problem, /*forMemory=*/false);
}

std::optional<StagePartition> partitionForMemory(const StageProblem &problem) {
  return solve(problem, /*forMemory=*/true);
}

} // namespace loom::plan
