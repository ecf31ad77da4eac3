//===- ScheduleTest.cpp - Pipeline schedule builders, JSON, verifier ------===//

#include "loom/Schedule/Schedule.h"
#include "loom/Schedule/ScheduleAttr.h"
#include "loom/Schedule/Serialize.h"
#include "loom/Schedule/Verify.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

#include <algorithm>

using namespace loom::sched;

namespace {

Schedule build(ScheduleKind kind, int P, int M, int V = 1) {
  llvm::Expected<Schedule> schedule = buildSchedule(kind, P, M, V);
  if (!schedule) {
    ADD_FAILURE() << llvm::toString(schedule.takeError());
    return Schedule{kind, 1, 1, 1, {}};
  }
  return std::move(*schedule);
}

std::string errorOf(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

/// The compute instructions of rank r as "F0.1" (forward stage 0 mb 1),
/// "B", "b" (backward_input), "W".
std::vector<std::string> computeOrder(const Schedule &schedule, int r) {
  std::vector<std::string> order;
  for (const Instr &instr : schedule.streams[r]) {
    const char *letter = nullptr;
    switch (instr.kind) {
    case InstrKind::Forward:
      letter = "F";
      break;
    case InstrKind::Backward:
      letter = "B";
      break;
    case InstrKind::BackwardInput:
      letter = "b";
      break;
    case InstrKind::BackwardWeight:
      letter = "W";
      break;
    default:
      continue;
    }
    order.push_back(letter + std::to_string(instr.stage) + "." +
                    std::to_string(instr.microBatch));
  }
  return order;
}

TEST(ScheduleTest, NamesRoundTrip) {
  for (int k = 0; k <= int(InstrKind::Optimizer); ++k) {
    InstrKind kind = InstrKind(k);
    EXPECT_EQ(parseInstrKind(stringifyInstrKind(kind)), kind);
  }
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                    ScheduleKind::Interleaved1F1B, ScheduleKind::ZeroBubbleH1})
    EXPECT_EQ(parseScheduleKind(stringifyScheduleKind(kind)), kind);
  EXPECT_EQ(stringifyInstrKind(InstrKind::AllReduceGradients),
            "all_reduce_gradients");
  EXPECT_EQ(stringifyScheduleKind(ScheduleKind::Interleaved1F1B),
            "interleaved-1f1b");
  EXPECT_FALSE(parseScheduleKind("pipedream"));
  EXPECT_FALSE(parseInstrKind("fwd"));
}

TEST(ScheduleTest, OneFOneBStreamOfRankOne) {
  // P=3, M=3: rank 1 warms up with one forward, then alternates.
  Schedule s = build(ScheduleKind::OneFOneB, 3, 3);
  using K = InstrKind;
  std::vector<Instr> expected = {
      {K::RecvActivation, 0, 0, 0}, {K::Forward, 1, 0},
      {K::SendActivation, 1, 0, 2}, {K::RecvActivation, 0, 1, 0},
      {K::Forward, 1, 1},           {K::SendActivation, 1, 1, 2},
      {K::RecvGradient, 2, 0, 2},   {K::Backward, 1, 0},
      {K::SendGradient, 1, 0, 0},   {K::RecvActivation, 0, 2, 0},
      {K::Forward, 1, 2},           {K::SendActivation, 1, 2, 2},
      {K::RecvGradient, 2, 1, 2},   {K::Backward, 1, 1},
      {K::SendGradient, 1, 1, 0},   {K::RecvGradient, 2, 2, 2},
      {K::Backward, 1, 2},          {K::SendGradient, 1, 2, 0},
      {K::AllReduceGradients},      {K::Optimizer}};
  EXPECT_EQ(s.streams[1], expected);
}

TEST(ScheduleTest, GPipeRunsAllForwardsFirst) {
  Schedule s = build(ScheduleKind::GPipe, 2, 3);
  EXPECT_EQ(computeOrder(s, 0),
            (std::vector<std::string>{"F0.0", "F0.1", "F0.2", "B0.0", "B0.1",
                                      "B0.2"}));
}

TEST(ScheduleTest, OneFOneBWarmupIsPMinusRankMinusOne) {
  Schedule s = build(ScheduleKind::OneFOneB, 4, 6);
  for (int r = 0; r < 4; ++r) {
    std::vector<std::string> order = computeOrder(s, r);
    auto firstB = std::find_if(order.begin(), order.end(),
                               [](auto &x) { return x[0] == 'B'; });
    // Forwards before the first backward: warm-up plus one.
    EXPECT_EQ(firstB - order.begin(), 4 - r) << "rank " << r;
  }
  // Fewer micro-batches than ranks: warm-up capped at M.
  Schedule few = build(ScheduleKind::OneFOneB, 4, 2);
  EXPECT_EQ(computeOrder(few, 0),
            (std::vector<std::string>{"F0.0", "F0.1", "B0.0", "B0.1"}));
}

TEST(ScheduleTest, InterleavedFollowsMegatron) {
  // P=2, M=4, V=2: stages 0,2 on rank 0, 1,3 on rank 1. Rank 0 warms up
  // with (2-0-1)*2 + (2-1)*2 = 4 forwards: mb 0,1 on chunk 0, then on
  // chunk 1; backwards start on the last chunk.
  Schedule s = build(ScheduleKind::Interleaved1F1B, 2, 4, 2);
  EXPECT_EQ(
      computeOrder(s, 0),
      (std::vector<std::string>{"F0.0", "F0.1", "F2.0", "F2.1", "F0.2", "B2.0",
                                "F0.3", "B2.1", "F2.2", "B0.0", "F2.3", "B0.1",
                                "B2.2", "B2.3", "B0.2", "B0.3"}));
}

TEST(ScheduleTest, ZeroBubbleH1DefersWeightGradients) {
  Schedule s = build(ScheduleKind::ZeroBubbleH1, 2, 4);
  // Rank 0 runs W right after B; rank 1 defers W by one micro-batch.
  EXPECT_EQ(computeOrder(s, 0),
            (std::vector<std::string>{"F0.0", "F0.1", "b0.0", "W0.0", "F0.2",
                                      "b0.1", "W0.1", "F0.3", "b0.2", "W0.2",
                                      "b0.3", "W0.3"}));
  EXPECT_EQ(computeOrder(s, 1),
            (std::vector<std::string>{"F1.0", "b1.0", "F1.1", "b1.1", "W1.0",
                                      "F1.2", "b1.2", "W1.1", "F1.3", "b1.3",
                                      "W1.2", "W1.3"}));
}

TEST(ScheduleTest, BuildErrors) {
  auto error = [](ScheduleKind kind, int P, int M, int V) {
    llvm::Expected<Schedule> s = buildSchedule(kind, P, M, V);
    return s ? std::string() : llvm::toString(s.takeError());
  };
  EXPECT_EQ(error(ScheduleKind::OneFOneB, 0, 4, 1),
            "1f1b: pipeline ranks must be at least 1, got 0");
  EXPECT_EQ(error(ScheduleKind::GPipe, 2, 0, 1),
            "gpipe: micro-batches must be at least 1, got 0");
  EXPECT_EQ(error(ScheduleKind::ZeroBubbleH1, 2, 4, 2),
            "zb-h1: has one stage per rank, got 2 virtual stages");
  EXPECT_EQ(
      error(ScheduleKind::Interleaved1F1B, 2, 4, 1),
      "interleaved-1f1b: needs at least 2 virtual stages per rank, got 1");
  EXPECT_EQ(error(ScheduleKind::Interleaved1F1B, 4, 6, 2),
            "interleaved-1f1b: micro-batches (6) must be a multiple of the "
            "pipeline ranks (4)");
}

TEST(ScheduleTest, AllBuildersVerify) {
  int built = 0;
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 16; ++M) {
      for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                        ScheduleKind::ZeroBubbleH1}) {
        Schedule s = build(kind, P, M);
        EXPECT_EQ(errorOf(verifySchedule(s)), "")
            << stringifyScheduleKind(kind).str() << " P=" << P << " M=" << M;
        ++built;
      }
      for (int V = 2; V <= 4 && M % P == 0; ++V) {
        Schedule s = build(ScheduleKind::Interleaved1F1B, P, M, V);
        EXPECT_EQ(errorOf(verifySchedule(s)), "")
            << "interleaved P=" << P << " M=" << M << " V=" << V;
        ++built;
      }
    }
  }
  EXPECT_GT(built, 384);
}

TEST(ScheduleTest, VerifierReportsDeadlock) {
  // Swap rank 1's first recv_activation with the first recv_gradient: it
  // waits for a gradient of micro-batch 0 that needs its own forward.
  Schedule s = build(ScheduleKind::OneFOneB, 2, 2);
  std::vector<Instr> &stream = s.streams[0];
  // Rank 0: F0 send F1 send recvG B ... ; move recv_gradient mb 0 first.
  auto recv = std::find_if(stream.begin(), stream.end(), [](const Instr &i) {
    return i.kind == InstrKind::RecvGradient;
  });
  Instr moved = *recv;
  stream.erase(recv);
  stream.insert(stream.begin(), moved);
  EXPECT_EQ(errorOf(verifySchedule(s)),
            "deadlock:\n"
            "  rank 0 waits at streams[0][0] (recv_gradient stage 1 mb 0 "
            "peer 1)\n"
            "  rank 1 waits at streams[1][0] (recv_activation stage 0 mb 0 "
            "peer 0)");
}

TEST(ScheduleTest, VerifierWantsMessagesInSendOrder) {
  // Rank 1 of GPipe P=2 M=2 receives mb 1's activation before mb 0's.
  Schedule s = build(ScheduleKind::GPipe, 2, 2);
  std::vector<Instr> &stream = s.streams[1];
  ASSERT_EQ(stream[0].kind, InstrKind::RecvActivation);
  ASSERT_EQ(stream[2].kind, InstrKind::RecvActivation);
  std::swap(stream[0], stream[2]);
  std::swap(stream[1], stream[3]);
  EXPECT_EQ(errorOf(verifySchedule(s)),
            "streams[1][0] (recv_activation stage 0 mb 1 peer 0): rank 0 "
            "sent send_activation stage 0 mb 0 peer 1 first: receives must "
            "take a peer's messages in the order it sends them");
}

TEST(ScheduleTest, VerifierReportsMissingAndMisplacedWork) {
  Schedule s = build(ScheduleKind::GPipe, 2, 2);
  Schedule dropped = s;
  dropped.streams[1].erase(dropped.streams[1].begin() + 1); // F1.0
  EXPECT_EQ(errorOf(verifySchedule(dropped)), "stage 1 mb 0: no forward");

  Schedule huge = s; // a file claiming 2^30 micro-batches
  huge.numMicroBatches = 1 << 30;
  EXPECT_EQ(errorOf(verifySchedule(huge)),
            "8 forward/backward instructions cannot cover 2 stages x "
            "1073741824 micro-batches");

  Schedule wrongRank = s;
  wrongRank.streams[0][0].stage = 1;
  EXPECT_EQ(errorOf(verifySchedule(wrongRank)),
            "streams[0][0] (forward stage 1 mb 0): stage 1 belongs to rank 1");

  Schedule early = s; // rank 1: recv, F1.0, recv, F1.1, B1.0 ...
  std::swap(early.streams[1][0], early.streams[1][1]);
  EXPECT_EQ(errorOf(verifySchedule(early)),
            "streams[1][0] (forward stage 1 mb 0): runs before the "
            "activation of stage 0 is computed or received");

  Schedule unmatched = s;
  unmatched.streams[0].erase(unmatched.streams[0].begin() + 1); // send
  EXPECT_EQ(errorOf(verifySchedule(unmatched)),
            "streams[1][0] (recv_activation stage 0 mb 0 peer 0): no matching "
            "send on the peer");

  Schedule weightFirst = build(ScheduleKind::ZeroBubbleH1, 1, 1);
  std::swap(weightFirst.streams[0][1], weightFirst.streams[0][2]);
  EXPECT_EQ(errorOf(verifySchedule(weightFirst)),
            "streams[0][1] (backward_weight stage 0 mb 0): runs before its "
            "backward_input");
}

TEST(ScheduleTest, JsonRoundTrip) {
  for (auto [kind, V] : {std::pair{ScheduleKind::OneFOneB, 1},
                         {ScheduleKind::Interleaved1F1B, 2},
                         {ScheduleKind::ZeroBubbleH1, 1}}) {
    Schedule s = build(kind, 2, 4, V);
    std::string json = scheduleToJson(s);
    llvm::Expected<Schedule> back = parseSchedule(json);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(back->kind, kind);
    EXPECT_EQ(back->numRanks, 2);
    EXPECT_EQ(back->numMicroBatches, 4);
    EXPECT_EQ(back->virtualStages, V);
    EXPECT_EQ(back->streams, s.streams);
  }
  Schedule s = build(ScheduleKind::OneFOneB, 2, 1);
  EXPECT_EQ(scheduleToJson(s),
            R"({"format": "loom-schedule", "version": 1, "kind": "1f1b", )"
            R"("ranks": 2, "micro_batches": 1, "virtual_stages": 1,
 "streams": [
  [
   {"op": "forward", "stage": 0, "mb": 0},
   {"op": "send_activation", "stage": 0, "mb": 0, "peer": 1},
   {"op": "recv_gradient", "stage": 1, "mb": 0, "peer": 1},
   {"op": "backward", "stage": 0, "mb": 0},
   {"op": "all_reduce_gradients"},
   {"op": "optimizer"}],
  [
   {"op": "recv_activation", "stage": 0, "mb": 0, "peer": 0},
   {"op": "forward", "stage": 1, "mb": 0},
   {"op": "backward", "stage": 1, "mb": 0},
   {"op": "send_gradient", "stage": 1, "mb": 0, "peer": 0},
   {"op": "all_reduce_gradients"},
   {"op": "optimizer"}]]}
)");
}

/// The IR form (ScheduleAttr.h): every builder's schedule survives the
/// round trip, each instruction as describeInstr's text.
TEST(ScheduleTest, AttrRoundTrip) {
  mlir::MLIRContext context;
  for (auto [kind, v] : {std::pair{ScheduleKind::GPipe, 1},
                         {ScheduleKind::OneFOneB, 1},
                         {ScheduleKind::Interleaved1F1B, 2},
                         {ScheduleKind::ZeroBubbleH1, 1}}) {
    auto schedule = buildSchedule(kind, 4, 8, v);
    ASSERT_TRUE(bool(schedule));
    mlir::DictionaryAttr attr = scheduleToAttr(&context, *schedule);
    auto back = scheduleFromAttr(attr);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(back->kind, schedule->kind);
    EXPECT_EQ(back->numMicroBatches, 8);
    EXPECT_EQ(back->virtualStages, v);
    EXPECT_EQ(back->streams, schedule->streams);
    for (const auto &stream : schedule->streams)
      for (const Instr &instr : stream) {
        std::optional<Instr> parsed = parseInstr(describeInstr(instr));
        ASSERT_TRUE(parsed.has_value()) << describeInstr(instr);
        EXPECT_EQ(*parsed, instr);
      }
  }
  for (llvm::StringRef bad :
       {"", "fwd stage 0 mb 0", "forward stage 0", "forward stage x mb 0",
        "send_activation stage 0 mb 0", "optimizer stage 0 mb 0",
        "forward mb 0 stage 0", "forward stage -1 mb 0"})
    EXPECT_FALSE(parseInstr(bad).has_value()) << bad.str();

  mlir::Builder b(&context);
  auto schedule = buildSchedule(ScheduleKind::OneFOneB, 2, 1);
  ASSERT_TRUE(bool(schedule));
  mlir::NamedAttrList attrs(scheduleToAttr(&context, *schedule));
  auto error = [&](mlir::Attribute attr) {
    auto parsed = scheduleFromAttr(attr);
    return parsed ? std::string("ok") : llvm::toString(parsed.takeError());
  };
  attrs.set("kind", b.getStringAttr("zb"));
  EXPECT_EQ(error(attrs.getDictionary(&context)),
            "kind: unknown schedule \"zb\"");
  attrs.set("kind", b.getStringAttr("1f1b"));
  attrs.set("streams",
            b.getArrayAttr(
                {b.getArrayAttr({}), b.getArrayAttr({b.getStringAttr("x")})}));
  EXPECT_EQ(error(attrs.getDictionary(&context)),
            "streams[1][0]: not an instruction: \"x\"");
  attrs.set("ranks", b.getI64IntegerAttr(0));
  EXPECT_EQ(error(attrs.getDictionary(&context)),
            "ranks: expected a positive integer");
  EXPECT_EQ(error(b.getUnitAttr()), "expected a dictionary");
}

TEST(ScheduleTest, JsonErrorsNameThePath) {
  auto error = [](llvm::StringRef json) {
    llvm::Expected<Schedule> s = parseSchedule(json);
    return s ? std::string() : llvm::toString(s.takeError());
  };
  std::string head = R"({"format":"loom-schedule","version":1,"kind":"1f1b",)"
                     R"("ranks":2,"micro_batches":1,"virtual_stages":1,)";
  EXPECT_EQ(error(head + R"("streams":[[],[{"op":"optimizer"},)"
                         R"({"op":"fwd","stage":0,"mb":0}]]})"),
            "streams[1][1].op: unknown instruction \"fwd\"");
  EXPECT_EQ(error(head + R"("streams":[[{"op":"forward","stage":0}]]})"),
            "streams[0][0].mb: missing");
  EXPECT_EQ(error(head + R"("streams":[[{"op":"recv_gradient","stage":1,)"
                         R"("mb":0,"peer":"one"}]]})"),
            "streams[0][0].peer: expected an integer");
  EXPECT_EQ(error(R"({"format":"loom-schedule","version":2})"),
            "version: unsupported version 2, expected 1");
  EXPECT_EQ(error(R"({"format":"loom-schedule","version":1,"kind":"x"})"),
            "kind: unknown schedule \"x\"");
  EXPECT_EQ(error(R"({"format":"other"})"),
            "format: expected \"loom-schedule\"");
  EXPECT_NE(error("{"), "");
}

} // namespace
