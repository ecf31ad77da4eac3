//===- Schedule.h - Pipeline schedules as per-rank instruction streams -*- C++
//-*-//
//
// One schedule: the object the simulator times, the timeline draws
// and the runtime executes. A schedule is, for every pipeline rank, the
// ordered list of what that rank does in one training step: forward and
// backward passes of its stages on micro-batches, the point-to-point
// transfers between neighbouring stages, and the final gradient all-reduce
// and optimizer step.
//
// Stages: the model is cut into numStages() = P * V stages; stage s runs on
// pipeline rank s % P (with V > 1 each rank holds V non-adjacent "virtual"
// stages, Megatron-LM's interleaved layout).
//
// Transfers: `stage` of a send/recv is the stage that PRODUCED the tensor.
// send_activation/recv_activation of stage s carry F(s)'s output to stage
// s+1; send_gradient/recv_gradient of stage s carry B(s)'s input gradient to
// stage s-1. A send and its recv therefore carry the same stage and
// micro-batch. When both ends are on the same rank (P = 1) no transfer is
// emitted.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SCHEDULE_SCHEDULE_H
#define LOOM_SCHEDULE_SCHEDULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace loom::sched {

enum class InstrKind {
  Forward,
  Backward,       ///< input and weight gradients together
  BackwardInput,  ///< "B" of zero-bubble schedules: input gradient only
  BackwardWeight, ///< "W": weight gradient, after B of the same micro-batch
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
  AllReduceGradients, ///< data-parallel gradient reduction of the rank
  Optimizer,
};

/// "forward", "backward", "backward_input", "backward_weight",
/// "send_activation", "recv_activation", "send_gradient", "recv_gradient",
/// "all_reduce_gradients", "optimizer".
llvm::StringRef stringifyInstrKind(InstrKind kind);
std::optional<InstrKind> parseInstrKind(llvm::StringRef name);

/// True for forward/backward/backward_input/backward_weight.
bool isCompute(InstrKind kind);
/// True for the four send/recv kinds.
bool isTransfer(InstrKind kind);

struct Instr {
  InstrKind kind;
  int stage = -1;
  int microBatch = -1;
  /// World rank of the other end for send/recv, else -1.
  int peer = -1;

  bool operator==(const Instr &other) const {
    return kind == other.kind && stage == other.stage &&
           microBatch == other.microBatch && peer == other.peer;
  }
};

/// "forward stage 1 mb 3" (with " peer 2" for transfers); for diagnostics.
/// "forward stage 0 mb 1", "send_activation stage 0 mb 1 peer 1",
/// "optimizer": the instruction's kind, then its stage, micro-batch and
/// peer where it has them.
std::string describeInstr(const Instr &instr);

/// The instruction describeInstr describes; none for other text.
std::optional<Instr> parseInstr(llvm::StringRef text);

enum class ScheduleKind {
  GPipe,           ///< all forwards, then all backwards (Huang et al. 2019)
  OneFOneB,        ///< PipeDream-Flush / Megatron 1F1B (Narayanan et al. 2021)
  Interleaved1F1B, ///< Megatron-LM's interleaved 1F1B, V virtual stages
  ZeroBubbleH1,    ///< ZB-H1 (Qi et al. 2023): B split into B and W
};

/// "gpipe", "1f1b", "interleaved-1f1b", "zb-h1".
llvm::StringRef stringifyScheduleKind(ScheduleKind kind);
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);

struct Schedule {
  ScheduleKind kind;
  int numRanks = 1;        ///< P: pipeline ranks
  int numMicroBatches = 1; ///< M
  int virtualStages = 1;   ///< V: stages per rank
  int numStages() const { return numRanks * virtualStages; }
  int rankOfStage(int s) const { return s % numRanks; }
  /// One instruction stream per pipeline rank.
  std::vector<std::vector<Instr>> streams;
};

/// The schedule of `kind` for P ranks, M micro-batches and V stages per rank.
/// Errors (checkScheduleShape's) for P < 1, M < 1, V != 1 for
/// gpipe/1f1b/zb-h1, and for interleaved-1f1b V < 2 or M not a multiple of P.
llvm::Expected<Schedule> buildSchedule(ScheduleKind kind, int P, int M,
                                       int V = 1);

/// buildSchedule's errors, without building it.
llvm::Error checkScheduleShape(ScheduleKind kind, int P, int M, int V);

/// The most (stage, micro-batch) pairs rank `rank` of buildSchedule(kind, P,
/// M, V) holds between a forward and the end of its backward (its
/// backward_weight for zb-h1), without building it: M for gpipe,
/// min(P - rank, M) for 1f1b, min(P, M) for zb-h1, Megatron's warm-up plus
/// one for interleaved-1f1b. Equals simulate()'s peakInFlight.
int peakInFlight(ScheduleKind kind, int P, int M, int V, int rank);

} // namespace loom::sched

#endif // LOOM_SCHEDULE_SCHEDULE_H
