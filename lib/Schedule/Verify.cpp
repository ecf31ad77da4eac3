//===- Verify.cpp - Checking that a schedule can run ----------------------===//
//
// See Verify.h for the list of checks. The progress check is an abstract
// execution: each rank's stream runs until it reaches a recv whose send has
// not run yet; sends are buffered, so they never block. Compute
// instructions find their inputs in the rank's local set of tensors
// (activations and gradients it computed or received).
//
//===----------------------------------------------------------------------===//

#include "loom/Schedule/Verify.h"

#include "llvm/Support/FormatVariadic.h"

#include <deque>
#include <map>
#include <set>
#include <tuple>

using namespace llvm;

namespace loom::sched {
namespace {

Error errorAt(int rank, size_t index, const Instr &instr, const Twine &what) {
  return createStringError(
      formatv("streams[{0}][{1}] ({2}): ", rank, index, describeInstr(instr))
          .str() +
      what);
}

/// Check 1: ranges, ownership and peers.
Error checkShape(const Schedule &schedule) {
  int P = schedule.numRanks, M = schedule.numMicroBatches,
      S = schedule.numStages();
  if (P < 1 || M < 1 || schedule.virtualStages < 1)
    return createStringError(
        formatv("ranks ({0}), micro-batches ({1}) and virtual stages ({2}) "
                "must be positive",
                P, M, schedule.virtualStages));
  if (int(schedule.streams.size()) != P)
    return createStringError(
        formatv("{0} streams for {1} ranks", schedule.streams.size(), P));
  for (int r = 0; r < P; ++r) {
    for (auto [i, instr] : enumerate(schedule.streams[r])) {
      if (instr.kind == InstrKind::AllReduceGradients ||
          instr.kind == InstrKind::Optimizer)
        continue;
      if (instr.stage < 0 || instr.stage >= S)
        return errorAt(r, i, instr, formatv("stage out of range [0, {0})", S));
      if (instr.microBatch < 0 || instr.microBatch >= M)
        return errorAt(r, i, instr,
                       formatv("micro-batch out of range [0, {0})", M));
      int s = instr.stage;
      int owner = schedule.rankOfStage(s);
      bool isSend = instr.kind == InstrKind::SendActivation ||
                    instr.kind == InstrKind::SendGradient;
      bool isActivation = instr.kind == InstrKind::SendActivation ||
                          instr.kind == InstrKind::RecvActivation;
      if (!isTransfer(instr.kind)) {
        if (owner != r)
          return errorAt(r, i, instr,
                         formatv("stage {0} belongs to rank {1}", s, owner));
        continue;
      }
      // The produced-by stage and the stage the tensor goes to.
      int toStage = isActivation ? s + 1 : s - 1;
      if (toStage < 0 || toStage >= S)
        return errorAt(r, i, instr,
                       formatv("stage {0} has no {1} neighbour", s,
                               isActivation ? "next" : "previous"));
      int self = isSend ? owner : schedule.rankOfStage(toStage);
      int peer = isSend ? schedule.rankOfStage(toStage) : owner;
      if (self != r)
        return errorAt(r, i, instr,
                       formatv("this transfer belongs on rank {0}", self));
      if (instr.peer != peer)
        return errorAt(r, i, instr, formatv("the peer must be rank {0}", peer));
    }
  }
  return Error::success();
}

/// Check 2: every (stage, micro-batch) computed exactly once; all-reduce
/// then optimizer close each rank's work.
Error checkCoverage(const Schedule &schedule) {
  int M = schedule.numMicroBatches, S = schedule.numStages();
  // Before sizing the tables by S x M (from the file, maybe absurd): a
  // complete schedule has more than S M compute instructions.
  size_t numCompute = 0;
  for (const std::vector<Instr> &stream : schedule.streams)
    numCompute += count_if(
        stream, [](const Instr &instr) { return isCompute(instr.kind); });
  if (numCompute < size_t(S) * size_t(M))
    return createStringError(
        formatv("{0} forward/backward instructions cannot cover {1} stages "
                "x {2} micro-batches",
                numCompute, S, M));
  // counts[kind][stage * M + mb]
  std::map<InstrKind, std::vector<int>> counts;
  for (InstrKind kind : {InstrKind::Forward, InstrKind::Backward,
                         InstrKind::BackwardInput, InstrKind::BackwardWeight})
    counts[kind].assign(size_t(S) * M, 0);
  for (auto [r, stream] : enumerate(schedule.streams)) {
    int allReduce = -1, optimizer = -1, lastBackward = -1;
    for (auto [i, instr] : enumerate(stream)) {
      if (isCompute(instr.kind)) {
        if (++counts[instr.kind][instr.stage * M + instr.microBatch] > 1)
          return errorAt(r, i, instr, "appears twice");
        if (instr.kind != InstrKind::Forward)
          lastBackward = i;
      } else if (instr.kind == InstrKind::AllReduceGradients) {
        if (allReduce >= 0)
          return errorAt(r, i, instr, "appears twice");
        allReduce = i;
      } else if (instr.kind == InstrKind::Optimizer) {
        if (optimizer >= 0)
          return errorAt(r, i, instr, "appears twice");
        if (allReduce < 0)
          return errorAt(r, i, instr, "runs before all_reduce_gradients");
        optimizer = i;
      }
    }
    if (allReduce < 0 || optimizer < 0)
      return createStringError(
          formatv("streams[{0}]: needs one all_reduce_gradients and one "
                  "optimizer",
                  r));
    if (lastBackward > allReduce)
      return errorAt(r, lastBackward, stream[lastBackward],
                     "runs after all_reduce_gradients");
  }
  for (int s = 0; s < S; ++s) {
    for (int k = 0; k < M; ++k) {
      auto count = [&](InstrKind kind) { return counts[kind][s * M + k]; };
      std::string where = formatv("stage {0} mb {1}", s, k).str();
      if (count(InstrKind::Forward) != 1)
        return createStringError(where + ": no forward");
      bool whole = count(InstrKind::Backward) == 1;
      bool split = count(InstrKind::BackwardInput) == 1 &&
                   count(InstrKind::BackwardWeight) == 1;
      if (whole == split)
        return createStringError(
            where + ": needs either one backward or one backward_input and "
                    "one backward_weight");
    }
  }
  return Error::success();
}

using Message = std::tuple<int, int, InstrKind, int, int>; // from, to, kind,
                                                           // stage, mb

InstrKind sendOf(InstrKind recv) {
  return recv == InstrKind::RecvActivation ? InstrKind::SendActivation
                                           : InstrKind::SendGradient;
}

/// Check 3: sends and recvs pair up.
Error checkMatching(const Schedule &schedule) {
  std::map<Message, std::pair<int, size_t>> sends, recvs;
  for (auto [r, stream] : enumerate(schedule.streams)) {
    for (auto [i, instr] : enumerate(stream)) {
      if (instr.kind == InstrKind::SendActivation ||
          instr.kind == InstrKind::SendGradient) {
        Message m{int(r), instr.peer, instr.kind, instr.stage,
                  instr.microBatch};
        if (!sends.try_emplace(m, int(r), i).second)
          return errorAt(r, i, instr, "sent twice");
      } else if (instr.kind == InstrKind::RecvActivation ||
                 instr.kind == InstrKind::RecvGradient) {
        Message m{instr.peer, int(r), sendOf(instr.kind), instr.stage,
                  instr.microBatch};
        if (!recvs.try_emplace(m, int(r), i).second)
          return errorAt(r, i, instr, "received twice");
      }
    }
  }
  for (auto &[m, at] : sends)
    if (!recvs.count(m))
      return errorAt(at.first, at.second, schedule.streams[at.first][at.second],
                     "no matching recv on the peer");
  for (auto &[m, at] : recvs)
    if (!sends.count(m))
      return errorAt(at.first, at.second, schedule.streams[at.first][at.second],
                     "no matching send on the peer");
  return Error::success();
}

/// What one rank holds during the abstract execution.
struct RankState {
  size_t pc = 0;
  std::set<std::pair<int, int>> activations, gradients, forwards, inputGrads;
};

/// Messages sent and not yet received, per (from, to) pair in send order.
using Channels =
    std::map<std::pair<int, int>, std::deque<std::tuple<InstrKind, int, int>>>;

/// Runs instruction `instr` of rank `r` if it can; returns false when it is
/// a recv whose message has not been sent yet.
Expected<bool> step(int r, size_t i, const Instr &instr, RankState &state,
                    Channels &inFlight, int last) {
  std::pair<int, int> key{instr.stage, instr.microBatch};
  std::pair<int, int> before{instr.stage - 1, instr.microBatch};
  std::pair<int, int> after{instr.stage + 1, instr.microBatch};
  switch (instr.kind) {
  case InstrKind::Forward:
    if (instr.stage > 0 && !state.activations.count(before))
      return errorAt(r, i, instr,
                     formatv("runs before the activation of stage {0} is "
                             "computed or received",
                             instr.stage - 1));
    state.activations.insert(key);
    state.forwards.insert(key);
    return true;
  case InstrKind::Backward:
  case InstrKind::BackwardInput:
    if (!state.forwards.count(key))
      return errorAt(r, i, instr, "runs before its forward");
    if (instr.stage < last && !state.gradients.count(after))
      return errorAt(r, i, instr,
                     formatv("runs before the gradient of stage {0} is "
                             "computed or received",
                             instr.stage + 1));
    state.gradients.insert(key);
    state.inputGrads.insert(key);
    return true;
  case InstrKind::BackwardWeight:
    if (!state.inputGrads.count(key))
      return errorAt(r, i, instr, "runs before its backward_input");
    return true;
  case InstrKind::SendActivation:
  case InstrKind::SendGradient: {
    bool activation = instr.kind == InstrKind::SendActivation;
    if (!(activation ? state.activations : state.gradients).count(key))
      return errorAt(r, i, instr, "sends a tensor not computed yet");
    inFlight[{r, instr.peer}].push_back(
        {instr.kind, instr.stage, instr.microBatch});
    return true;
  }
  case InstrKind::RecvActivation:
  case InstrKind::RecvGradient: {
    // MPI and NCCL match the messages between two ranks in order.
    auto &channel = inFlight[{instr.peer, r}];
    if (channel.empty())
      return false;
    auto [kind, stage, mb] = channel.front();
    if (kind != sendOf(instr.kind) || stage != instr.stage ||
        mb != instr.microBatch)
      return errorAt(r, i, instr,
                     formatv("rank {0} sent {1} first: receives must take a "
                             "peer's messages in the order it sends them",
                             instr.peer, describeInstr({kind, stage, mb, r})));
    channel.pop_front();
    (instr.kind == InstrKind::RecvActivation ? state.activations
                                             : state.gradients)
        .insert(key);
    return true;
  }
  case InstrKind::AllReduceGradients:
  case InstrKind::Optimizer:
    return true;
  }
  llvm_unreachable("unknown instruction kind");
}

/// Check 4: abstract execution to the end, or a deadlock report.
Error checkProgress(const Schedule &schedule) {
  int P = schedule.numRanks, last = schedule.numStages() - 1;
  std::vector<RankState> states(P);
  Channels inFlight;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      const std::vector<Instr> &stream = schedule.streams[r];
      RankState &state = states[r];
      while (state.pc < stream.size()) {
        Expected<bool> ran =
            step(r, state.pc, stream[state.pc], state, inFlight, last);
        if (!ran)
          return ran.takeError();
        if (!*ran)
          break;
        ++state.pc;
        progress = true;
      }
    }
  }
  std::string blocked;
  for (int r = 0; r < P; ++r) {
    if (states[r].pc == schedule.streams[r].size())
      continue;
    blocked +=
        formatv("\n  rank {0} waits at streams[{0}][{1}] ({2})", r,
                states[r].pc, describeInstr(schedule.streams[r][states[r].pc]))
            .str();
  }
  if (!blocked.empty())
    return createStringError("deadlock:" + blocked);
  return Error::success();
}

} // namespace

Error verifySchedule(const Schedule &schedule) {
  if (Error error = checkShape(schedule))
    return error;
  if (Error error = checkCoverage(schedule))
    return error;
  if (Error error = checkMatching(schedule))
    return error;
  return checkProgress(schedule);
}

} // namespace loom::sched
