//===- Schedule.cpp - Building pipeline schedules -------------------------===//
//
// Every builder first decides, per rank, the order of its compute work
// (forward, backward or backward_input + backward_weight of a stage on a
// micro-batch); expandTransfers then wraps each compute instruction with the
// recv that brings its input and the send that passes its output on, and
// appends the all-reduce and the optimizer step.
//
//===----------------------------------------------------------------------===//

#include "loom/Schedule/Schedule.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace llvm;

namespace loom::sched {

StringRef stringifyInstrKind(InstrKind kind) {
  switch (kind) {
  case InstrKind::Forward:
    return "forward";
  case InstrKind::Backward:
    return "backward";
  case InstrKind::BackwardInput:
    return "backward_input";
  case InstrKind::BackwardWeight:
    return "backward_weight";
  case InstrKind::SendActivation:
    return "send_activation";
  case InstrKind::RecvActivation:
    return "recv_activation";
  case InstrKind::SendGradient:
    return "send_gradient";
  case InstrKind::RecvGradient:
    return "recv_gradient";
  case InstrKind::AllReduceGradients:
    return "all_reduce_gradients";
  case InstrKind::Optimizer:
    return "optimizer";
  }
  llvm_unreachable("unknown instruction kind");
}

std::optional<InstrKind> parseInstrKind(StringRef name) {
  return StringSwitch<std::optional<InstrKind>>(name)
      .Case("forward", InstrKind::Forward)
      .Case("backward", InstrKind::Backward)
      .Case("backward_input", InstrKind::BackwardInput)
      .Case("backward_weight", InstrKind::BackwardWeight)
      .Case("send_activation", InstrKind::SendActivation)
      .Case("recv_activation", InstrKind::RecvActivation)
      .Case("send_gradient", InstrKind::SendGradient)
      .Case("recv_gradient", InstrKind::RecvGradient)
      .Case("all_reduce_gradients", InstrKind::AllReduceGradients)
      .Case("optimizer", InstrKind::Optimizer)
      .Default(std::nullopt);
}

bool isCompute(InstrKind kind) {
  return kind == InstrKind::Forward || kind == InstrKind::Backward ||
         kind == InstrKind::BackwardInput || kind == InstrKind::BackwardWeight;
}

bool isTransfer(InstrKind kind) {
  return kind == InstrKind::SendActivation ||
         kind == InstrKind::RecvActivation || kind == InstrKind::SendGradient ||
         kind == InstrKind::RecvGradient;
}

std::string describeInstr(const Instr &instr) {
  std::string text = stringifyInstrKind(instr.kind).str();
  if (instr.kind == InstrKind::AllReduceGradients ||
      instr.kind == InstrKind::Optimizer)
    return text;
  text += formatv(" stage {0} mb {1}", instr.stage, instr.microBatch).str();
  if (isTransfer(instr.kind))
    text += formatv(" peer {0}", instr.peer).str();
  return text;
}

std::optional<Instr> parseInstr(StringRef text) {
  SmallVector<StringRef> words;
  text.split(words, ' ', -1, /*KeepEmpty=*/false);
  if (words.empty())
    return std::nullopt;
  std::optional<InstrKind> kind = parseInstrKind(words[0]);
  if (!kind)
    return std::nullopt;
  Instr instr{*kind};
  bool global =
      *kind == InstrKind::AllReduceGradients || *kind == InstrKind::Optimizer;
  size_t expected = global ? 1 : isTransfer(*kind) ? 7 : 5;
  if (words.size() != expected)
    return std::nullopt;
  auto field = [&](size_t at, StringRef name, int &out) {
    return words[at] == name && !words[at + 1].getAsInteger(10, out) &&
           out >= 0;
  };
  if (!global &&
      (!field(1, "stage", instr.stage) || !field(3, "mb", instr.microBatch)))
    return std::nullopt;
  if (isTransfer(*kind) && !field(5, "peer", instr.peer))
    return std::nullopt;
  return instr;
}

StringRef stringifyScheduleKind(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved1F1B:
    return "interleaved-1f1b";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  llvm_unreachable("unknown schedule kind");
}

std::optional<ScheduleKind> parseScheduleKind(StringRef name) {
  return StringSwitch<std::optional<ScheduleKind>>(name)
      .Case("gpipe", ScheduleKind::GPipe)
      .Case("1f1b", ScheduleKind::OneFOneB)
      .Case("interleaved-1f1b", ScheduleKind::Interleaved1F1B)
      .Case("zb-h1", ScheduleKind::ZeroBubbleH1)
      .Default(std::nullopt);
}

namespace {

using ComputeOrder = std::vector<Instr>;

Instr compute(InstrKind kind, int stage, int mb) { return {kind, stage, mb}; }

/// GPipe: every forward, then every backward, in micro-batch order.
ComputeOrder gpipeOrder(int rank, int M) {
  ComputeOrder order;
  for (int k = 0; k < M; ++k)
    order.push_back(compute(InstrKind::Forward, rank, k));
  for (int k = 0; k < M; ++k)
    order.push_back(compute(InstrKind::Backward, rank, k));
  return order;
}

/// 1F1B (PipeDream-Flush): min(P-r-1, M) warm-up forwards, then one forward
/// and one backward alternately, then the remaining backwards. Rank r keeps
/// at most P-r micro-batches in flight.
ComputeOrder oneFOneBOrder(int rank, int P, int M) {
  ComputeOrder order;
  int warmup = std::min(P - rank - 1, M);
  for (int k = 0; k < warmup; ++k)
    order.push_back(compute(InstrKind::Forward, rank, k));
  for (int i = 0; i < M - warmup; ++i) {
    order.push_back(compute(InstrKind::Forward, rank, warmup + i));
    order.push_back(compute(InstrKind::Backward, rank, i));
  }
  for (int k = M - warmup; k < M; ++k)
    order.push_back(compute(InstrKind::Backward, rank, k));
  return order;
}

/// Megatron-LM's interleaved 1F1B (Narayanan et al. 2021 §2.2;
/// megatron/core/pipeline_parallel/schedules.py,
/// forward_backward_pipelining_with_interleaving). Work unit i of a rank
/// runs micro-batch (i / PV) * P + i % P on model chunk (i % PV) / P for
/// forwards, chunk V-1 minus that for backwards; chunk c of rank r is stage
/// c * P + r. Warm-up: (P-r-1)*2 + (V-1)*P units (all when M == P).
int interleavedWarmup(int rank, int P, int M, int V) {
  int total = M * V;
  return M == P ? total : std::min((P - rank - 1) * 2 + (V - 1) * P, total);
}

ComputeOrder interleavedOrder(int rank, int P, int M, int V) {
  int total = M * V;
  int warmup = interleavedWarmup(rank, P, M, V);
  auto unit = [&](int i, bool forward) {
    int chunk = (i % (P * V)) / P;
    if (!forward)
      chunk = V - 1 - chunk;
    int mb = (i / (P * V)) * P + i % P;
    return compute(forward ? InstrKind::Forward : InstrKind::Backward,
                   chunk * P + rank, mb);
  };
  ComputeOrder order;
  for (int i = 0; i < warmup; ++i)
    order.push_back(unit(i, true));
  for (int i = 0; i < total - warmup; ++i) {
    order.push_back(unit(warmup + i, true));
    order.push_back(unit(i, false));
  }
  for (int i = total - warmup; i < total; ++i)
    order.push_back(unit(i, false));
  return order;
}

/// ZB-H1 (Qi et al. 2023 §3, Figure 3 top): 1F1B's order with each backward
/// split into B (input gradient, on the critical path) and W (weight
/// gradient). Rank r defers W by r micro-batches: W(k) follows B(k+r), the
/// last r W's close the step. The later ranks run their B's early, which
/// lets the gradients reach the earlier ranks sooner, and the deferred W's
/// fill the bubble the wait leaves. In flight (forward done, W not done):
/// (P-r-1) + 1 + r = P micro-batches at most, 1F1B's peak on rank 0.
ComputeOrder zeroBubbleH1Order(int rank, int P, int M) {
  ComputeOrder order;
  int nextW = 0;
  for (const Instr &instr : oneFOneBOrder(rank, P, M)) {
    if (instr.kind == InstrKind::Forward) {
      order.push_back(instr);
      continue;
    }
    order.push_back(compute(InstrKind::BackwardInput, rank, instr.microBatch));
    if (instr.microBatch - nextW >= rank)
      order.push_back(compute(InstrKind::BackwardWeight, rank, nextW++));
  }
  while (nextW < M)
    order.push_back(compute(InstrKind::BackwardWeight, rank, nextW++));
  return order;
}

/// Wraps each compute instruction of `order` with its transfers: a forward
/// of stage s > 0 receives stage s-1's activation first, a forward of a
/// stage before the last sends its activation after; a backward of a stage
/// before the last receives stage s+1's gradient first, a backward (or
/// backward_input) of stage s > 0 sends its gradient after.
std::vector<Instr> expandTransfers(const Schedule &schedule, int rank,
                                   const ComputeOrder &order) {
  int last = schedule.numStages() - 1;
  std::vector<Instr> stream;
  auto transfer = [&](InstrKind kind, int stage, int mb, int peerStage) {
    int peer = schedule.rankOfStage(peerStage);
    if (peer != rank)
      stream.push_back({kind, stage, mb, peer});
  };
  for (const Instr &instr : order) {
    int s = instr.stage, k = instr.microBatch;
    bool backward = instr.kind == InstrKind::Backward ||
                    instr.kind == InstrKind::BackwardInput;
    if (instr.kind == InstrKind::Forward && s > 0)
      transfer(InstrKind::RecvActivation, s - 1, k, s - 1);
    if (backward && s < last)
      transfer(InstrKind::RecvGradient, s + 1, k, s + 1);
    stream.push_back(instr);
    if (instr.kind == InstrKind::Forward && s < last)
      transfer(InstrKind::SendActivation, s, k, s + 1);
    if (backward && s > 0)
      transfer(InstrKind::SendGradient, s, k, s - 1);
  }
  stream.push_back({InstrKind::AllReduceGradients});
  stream.push_back({InstrKind::Optimizer});
  return stream;
}

} // namespace

Error checkScheduleShape(ScheduleKind kind, int P, int M, int V) {
  StringRef name = stringifyScheduleKind(kind);
  if (P < 1)
    return createStringError(
        formatv("{0}: pipeline ranks must be at least 1, got {1}", name, P));
  if (M < 1)
    return createStringError(
        formatv("{0}: micro-batches must be at least 1, got {1}", name, M));
  if (kind == ScheduleKind::Interleaved1F1B) {
    if (V < 2)
      return createStringError(formatv(
          "{0}: needs at least 2 virtual stages per rank, got {1}", name, V));
    if (M % P != 0)
      return createStringError(
          formatv("{0}: micro-batches ({1}) must be a multiple of the "
                  "pipeline ranks ({2})",
                  name, M, P));
  } else if (V != 1) {
    return createStringError(formatv(
        "{0}: has one stage per rank, got {1} virtual stages", name, V));
  }
  return Error::success();
}

int peakInFlight(ScheduleKind kind, int P, int M, int V, int rank) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return M;
  case ScheduleKind::OneFOneB:
    return std::min(P - rank, M);
  case ScheduleKind::ZeroBubbleH1:
    // Warm-up, the forward before the first B, and r deferred W's.
    return std::min(P, M);
  case ScheduleKind::Interleaved1F1B:
    return std::min(interleavedWarmup(rank, P, M, V) + 1, M * V);
  }
  llvm_unreachable("unknown schedule kind");
}

Expected<Schedule> buildSchedule(ScheduleKind kind, int P, int M, int V) {
  if (Error error = checkScheduleShape(kind, P, M, V))
    return std::move(error);
  Schedule schedule{kind, P, M, V, {}};
  for (int rank = 0; rank < P; ++rank) {
    ComputeOrder order;
    switch (kind) {
    case ScheduleKind::GPipe:
      order = gpipeOrder(rank, M);
      break;
    case ScheduleKind::OneFOneB:
      order = oneFOneBOrder(rank, P, M);
      break;
    case ScheduleKind::Interleaved1F1B:
      order = interleavedOrder(rank, P, M, V);
      break;
    case ScheduleKind::ZeroBubbleH1:
      order = zeroBubbleH1Order(rank, P, M);
      break;
    }
    schedule.streams.push_back(expandTransfers(schedule, rank, order));
  }
  return schedule;
}

} // namespace loom::sched
