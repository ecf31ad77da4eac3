//===- Simulator.h - Timing a pipeline schedule -----------------*- C++ -*-===//
//
// A discrete-event model of one training step under a schedule:
//  - each rank has one compute stream that runs its instructions in stream
//    order, each compute instruction taking its stage's cost;
//  - a send is asynchronous: it costs the compute stream nothing and its
//    data is ready when the rank reaches it (after the computation that
//    produced the tensor);
//  - a recv completes p2p seconds after the matching send's data is ready;
//    the rank's next instruction waits for it;
//  - all_reduce_gradients and optimizer run on the compute stream at the end
//    of each rank's stream, with their per-rank costs.
//
// Bubble. The pipelined part of the step is [0, pipelineTime], where
// pipelineTime is the moment the last rank finishes its last instruction
// before all_reduce_gradients. A rank's idle time is pipelineTime minus its
// compute (forward/backward) time; exposed communication counts as idle.
//   bubbleFraction = sum of idle / (P * pipelineTime)
// so that, with uniform stages and free communication, GPipe and 1F1B give
// (P-1)/(M+P-1) and idle / compute = (P-1)/M (Narayanan et al. 2021 §2.2):
// P=4, M=8 is 3/11 of the pipelined time, 3/8 of the ideal time.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SCHEDULE_SIMULATOR_H
#define LOOM_SCHEDULE_SIMULATOR_H

#include "loom/Schedule/Schedule.h"

namespace loom::sched {

/// Seconds. Stage vectors have numStages() entries; rank vectors numRanks
/// entries or are empty (no cost).
struct ScheduleCosts {
  /// Per stage. backward is used for `backward`; backwardInput and
  /// backwardWeight for the split pair (when they are empty, each is half
  /// of backward: the two GEMMs of a linear layer's backward have the same
  /// FLOPs).
  std::vector<double> forward, backward, backwardInput, backwardWeight;
  double p2p = 0;                ///< per send, from data ready to data received
  std::vector<double> allReduce; ///< per rank
  std::vector<double> optimizer; ///< per rank

  /// Every stage costs f forward and b backward (split into b/2 + b/2).
  static ScheduleCosts uniform(const Schedule &schedule, double f, double b,
                               double p2p = 0);
};

struct Simulation {
  struct Event {
    int rank;
    InstrKind kind; ///< compute kinds; recv kinds for exposed transfers;
                    ///< all_reduce_gradients; optimizer
    int stage, microBatch;
    double start, end;
  };
  int numRanks = 0;
  /// Per rank in time order.
  std::vector<Event> events;
  double stepTime = 0;
  /// See the file comment.
  double bubbleFraction = 0;
  double pipelineTime = 0;
  /// Sum over ranks of idle and of compute time in the pipelined part.
  double idleTime = 0, computeTime = 0;
  /// Per rank: compute (forward/backward) time.
  std::vector<double> rankCompute;
  /// Per rank: the most (stage, micro-batch) pairs whose forward ran and
  /// whose backward (backward_weight when split) did not finish.
  std::vector<int> peakInFlight;
};

/// Times `schedule`, which must verify (verifySchedule).
Simulation simulate(const Schedule &schedule, const ScheduleCosts &costs);

} // namespace loom::sched

#endif // LOOM_SCHEDULE_SIMULATOR_H
