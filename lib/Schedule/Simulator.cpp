//===- Simulator.cpp - Timing a pipeline schedule -------------------------===//
//
// The ranks are advanced in turn, each as far as its recvs allow, exactly
// like the verifier's abstract execution; a send records when its data is
// ready, a recv waits until that time plus p2p. Because a rank only blocks
// on recvs whose send has not been reached yet, the result does not depend
// on the order the ranks are visited in.
//
//===----------------------------------------------------------------------===//

#include "loom/Schedule/Simulator.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>

namespace loom::sched {
namespace {

/// When each transfer's data is ready, by direction, stage and micro-batch
/// (a verified schedule sends each at most once); negative: not sent yet.
class ReadyTimes {
public:
  explicit ReadyTimes(const Schedule &schedule)
      : numMicroBatches(schedule.numMicroBatches),
        times(2 * size_t(schedule.numStages()) * schedule.numMicroBatches,
              -1.0) {}
  double &operator[](const Instr &instr) {
    bool activation = instr.kind == InstrKind::SendActivation ||
                      instr.kind == InstrKind::RecvActivation;
    return times[(size_t(instr.stage) * 2 + activation) * numMicroBatches +
                 instr.microBatch];
  }

private:
  int numMicroBatches;
  std::vector<double> times;
};

double at(const std::vector<double> &costs, int i) {
  return i >= 0 && size_t(i) < costs.size() ? costs[i] : 0.0;
}

double computeCost(const ScheduleCosts &costs, const Instr &instr) {
  int s = instr.stage;
  switch (instr.kind) {
  case InstrKind::Forward:
    return at(costs.forward, s);
  case InstrKind::Backward:
    return at(costs.backward, s);
  case InstrKind::BackwardInput:
    return costs.backwardInput.empty() ? at(costs.backward, s) / 2
                                       : at(costs.backwardInput, s);
  case InstrKind::BackwardWeight:
    return costs.backwardWeight.empty() ? at(costs.backward, s) / 2
                                        : at(costs.backwardWeight, s);
  default:
    return 0;
  }
}

struct RankClock {
  size_t pc = 0;
  double now = 0;
  /// End of the last instruction before all_reduce_gradients.
  double pipelineEnd = 0;
  double compute = 0;
};

/// The most micro-batches in flight on each rank, in stream order.
void countInFlight(const Schedule &schedule, Simulation &result) {
  for (const std::vector<Instr> &stream : schedule.streams) {
    int inFlight = 0, peak = 0;
    for (const Instr &instr : stream) {
      if (instr.kind == InstrKind::Forward)
        peak = std::max(peak, ++inFlight);
      else if (instr.kind == InstrKind::Backward ||
               instr.kind == InstrKind::BackwardWeight)
        --inFlight;
    }
    result.peakInFlight.push_back(peak);
  }
}

} // namespace

ScheduleCosts ScheduleCosts::uniform(const Schedule &schedule, double f,
                                     double b, double p2p) {
  ScheduleCosts costs;
  size_t S = schedule.numStages();
  costs.forward.assign(S, f);
  costs.backward.assign(S, b);
  costs.backwardInput.assign(S, b / 2);
  costs.backwardWeight.assign(S, b / 2);
  costs.p2p = p2p;
  return costs;
}

Simulation simulate(const Schedule &schedule, const ScheduleCosts &costs) {
  int P = schedule.numRanks;
  Simulation result;
  result.numRanks = P;
  std::vector<RankClock> clocks(P);
  std::vector<std::vector<Simulation::Event>> events(P);
  ReadyTimes ready(schedule);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      const std::vector<Instr> &stream = schedule.streams[r];
      RankClock &clock = clocks[r];
      for (; clock.pc < stream.size(); ++clock.pc, progress = true) {
        const Instr &instr = stream[clock.pc];
        auto record = [&](double start, double end) {
          events[r].push_back(
              {r, instr.kind, instr.stage, instr.microBatch, start, end});
        };
        if (instr.kind == InstrKind::SendActivation ||
            instr.kind == InstrKind::SendGradient) {
          ready[instr] = clock.now;
          continue;
        }
        if (instr.kind == InstrKind::RecvActivation ||
            instr.kind == InstrKind::RecvGradient) {
          double sent = ready[instr];
          if (sent < 0)
            break;
          double arrival = sent + costs.p2p;
          double start = std::max(clock.now, sent);
          if (arrival > start)
            record(start, arrival);
          clock.now = std::max(clock.now, arrival);
          clock.pipelineEnd = clock.now;
          continue;
        }
        double cost;
        if (instr.kind == InstrKind::AllReduceGradients)
          cost = at(costs.allReduce, r);
        else if (instr.kind == InstrKind::Optimizer)
          cost = at(costs.optimizer, r);
        else
          cost = computeCost(costs, instr);
        record(clock.now, clock.now + cost);
        clock.now += cost;
        if (isCompute(instr.kind)) {
          clock.compute += cost;
          clock.pipelineEnd = clock.now;
        }
      }
    }
  }
  for (int r = 0; r < P; ++r) {
    assert(clocks[r].pc == schedule.streams[r].size() &&
           "simulate: the schedule deadlocks; run verifySchedule first");
    result.stepTime = std::max(result.stepTime, clocks[r].now);
    result.pipelineTime = std::max(result.pipelineTime, clocks[r].pipelineEnd);
    result.computeTime += clocks[r].compute;
    result.rankCompute.push_back(clocks[r].compute);
    llvm::append_range(result.events, events[r]);
  }
  result.idleTime = P * result.pipelineTime - result.computeTime;
  if (result.pipelineTime > 0)
    result.bubbleFraction = result.idleTime / (P * result.pipelineTime);
  countInFlight(schedule, result);
  return result;
}

} // namespace loom::sched
