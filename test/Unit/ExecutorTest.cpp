//===- ExecutorTest.cpp - The backend-independent executor's checks -------===//
//
// transfersInOrder (runtime/executor/Session.h): NCCL's point-to-point
// transfers match in posting order, so the CUDA runtime refuses a schedule
// whose receiver takes a peer's transfers in another order than they were
// sent. The schedules here are hand-written instruction streams.
//
//===----------------------------------------------------------------------===//

#include "Session.h"

#include <gtest/gtest.h>

using namespace loom::rt;

namespace {

Instr instr(const std::string &op, int64_t stage, int64_t mb, int64_t peer) {
  Instr i;
  i.op = op;
  i.stage = stage;
  i.microBatch = mb;
  i.peer = peer;
  return i;
}

/// Two stages on two pipeline ranks; the last stage's forward returns the
/// loss.
Artifact twoStages() {
  Artifact artifact;
  artifact.pipelineRanks = 2;
  artifact.microBatches = 2;
  for (int64_t stage = 0; stage < 2; ++stage) {
    Function fn;
    fn.name = "forward_" + std::to_string(stage);
    fn.kind = "forward";
    fn.stage = stage;
    if (stage == 1) {
      TensorSpec loss;
      loss.role = "loss";
      loss.value = "loss";
      fn.results.push_back(loss);
    }
    artifact.functions.push_back(fn);
  }
  return artifact;
}

TEST(ExecutorTest, TransfersInTheSendersOrderPass) {
  Artifact artifact = twoStages();
  artifact.streams = {
      {instr("forward", 0, 0, -1), instr("send_activation", 0, 0, 1),
       instr("forward", 0, 1, -1), instr("send_activation", 0, 1, 1),
       instr("recv_gradient", 1, 0, 1), instr("recv_gradient", 1, 1, 1)},
      {instr("recv_activation", 0, 0, 0), instr("recv_activation", 0, 1, 0),
       instr("send_gradient", 1, 0, 0), instr("send_gradient", 1, 1, 0)}};
  EXPECT_EQ(transfersInOrder(artifact), "");
}

TEST(ExecutorTest, ReceivingInAnotherOrderFails) {
  Artifact artifact = twoStages();
  artifact.streams = {
      {instr("send_activation", 0, 0, 1), instr("send_activation", 0, 1, 1)},
      {instr("recv_activation", 0, 1, 0), instr("recv_activation", 0, 0, 0)}};
  EXPECT_EQ(transfersInOrder(artifact),
            "pipeline rank 1 receives the transfers of pipeline rank 0 in "
            "another order than they are sent");
}

TEST(ExecutorTest, AMissingReceiveFails) {
  Artifact artifact = twoStages();
  artifact.streams = {{instr("send_activation", 0, 0, 1)}, {}};
  EXPECT_NE(transfersInOrder(artifact), "");
}

TEST(ExecutorTest, TransfersWithinARankAreNotMatched) {
  // Virtual stages on one rank: the values stay in its outbox, so their
  // order does not matter.
  Artifact artifact = twoStages();
  artifact.pipelineRanks = 1;
  artifact.streams = {
      {instr("send_activation", 0, 0, 0), instr("send_activation", 0, 1, 0),
       instr("recv_activation", 0, 1, 0), instr("recv_activation", 0, 0, 0)}};
  EXPECT_EQ(transfersInOrder(artifact), "");
}

TEST(ExecutorTest, TiedGradientsGoWhereTheScheduleExchangesThem) {
  // Stage 0's optimizer sums the tied gradient of stages 0 and 1: rank 1
  // sends its accumulator at all_reduce_gradients, where rank 0 takes it.
  Artifact artifact = twoStages();
  for (int64_t stage = 0; stage < 2; ++stage) {
    Function optimizer;
    optimizer.name = "optimizer_" + std::to_string(stage);
    optimizer.kind = "optimizer";
    optimizer.stage = stage;
    if (stage == 0) {
      TensorSpec tied;
      tied.role = "accumulator";
      tied.value = "wte_grad";
      tied.tiedStages = {0, 1};
      optimizer.args.push_back(tied);
    }
    artifact.functions.push_back(optimizer);
  }
  artifact.streams = {{instr("recv_gradient", 1, 0, 1),
                       instr("all_reduce_gradients", -1, -1, -1)},
                      {instr("send_gradient", 1, 0, 0),
                       instr("all_reduce_gradients", -1, -1, -1)}};
  EXPECT_EQ(transfersInOrder(artifact), "");
  // Rank 1 exchanging before it sends its gradient: rank 0 would take the
  // tied gradient for the activation gradient.
  std::swap(artifact.streams[1][0], artifact.streams[1][1]);
  EXPECT_EQ(transfersInOrder(artifact),
            "pipeline rank 0 receives the transfers of pipeline rank 1 in "
            "another order than they are sent");
}

} // namespace
