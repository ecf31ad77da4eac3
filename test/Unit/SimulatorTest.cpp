//===- SimulatorTest.cpp - Timing pipeline schedules ----------------------===//
//
// The bubble formulas of the papers, with uniform stages and free
// communication, as the independent reference: GPipe and 1F1B idle/compute
// = (P-1)/M (Huang et al. 2019; Narayanan et al. 2021 §2.2), interleaved
// (P-1)/(V*M) (Narayanan et al. 2021 §2.2.2), ZB-H1 (P-1)(F+B-W) against
// 1F1B's (P-1)(F+B+W) (Qi et al. 2023 §3). Tolerance 1e-12.
//
//===----------------------------------------------------------------------===//

#include "loom/Schedule/Simulator.h"

#include "gtest/gtest.h"

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

double bubbleOverIdeal(const Simulation &sim) {
  return sim.idleTime / sim.computeTime;
}

TEST(SimulatorTest, GPipeAndOneFOneBBubbleIsPMinusOneOverM) {
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    for (auto [P, M] : {std::pair{4, 8}, {2, 3}, {8, 16}, {3, 7}, {1, 4}}) {
      Schedule s = build(kind, P, M);
      Simulation sim = simulate(s, ScheduleCosts::uniform(s, 1.0, 1.0));
      EXPECT_NEAR(bubbleOverIdeal(sim), double(P - 1) / M, 1e-12)
          << stringifyScheduleKind(kind).str() << " P=" << P << " M=" << M;
      EXPECT_NEAR(sim.pipelineTime, (M + P - 1) * 2.0, 1e-12);
    }
  }
  Schedule s = build(ScheduleKind::OneFOneB, 4, 8);
  Simulation sim = simulate(s, ScheduleCosts::uniform(s, 1.0, 1.0));
  EXPECT_NEAR(sim.bubbleFraction, 3.0 / 11.0, 1e-12);
  EXPECT_NEAR(sim.stepTime, 22.0, 1e-12);
}

TEST(SimulatorTest, InterleavedBubbleIsPMinusOneOverVM) {
  for (auto [P, M, V] :
       {std::tuple{4, 8, 2}, {2, 4, 2}, {4, 8, 4}, {2, 6, 3}, {8, 16, 2}}) {
    Schedule s = build(ScheduleKind::Interleaved1F1B, P, M, V);
    // A rank's V stages together cost what one 1F1B stage costs.
    Simulation sim = simulate(s, ScheduleCosts::uniform(s, 1.0 / V, 1.0 / V));
    EXPECT_NEAR(bubbleOverIdeal(sim), double(P - 1) / (V * M), 1e-12)
        << "P=" << P << " M=" << M << " V=" << V;
  }
}

TEST(SimulatorTest, ZeroBubbleH1IsAThirdOfOneFOneB) {
  // F = B = W = 1, the setting of Qi et al.'s analysis.
  for (auto [P, M] : {std::pair{4, 8}, {4, 12}, {8, 16}, {2, 4}}) {
    Schedule zb = build(ScheduleKind::ZeroBubbleH1, P, M);
    Schedule base = build(ScheduleKind::OneFOneB, P, M);
    Simulation zbSim = simulate(zb, ScheduleCosts::uniform(zb, 1.0, 2.0));
    Simulation baseSim = simulate(base, ScheduleCosts::uniform(base, 1.0, 2.0));
    EXPECT_NEAR(baseSim.idleTime, P * 3.0 * (P - 1), 1e-12);
    EXPECT_LE(zbSim.idleTime, 0.4 * baseSim.idleTime) << "P=" << P;
    EXPECT_NEAR(zbSim.idleTime, P * 1.0 * (P - 1), 1e-12) << "P=" << P;
    // Same peak memory as 1F1B: P micro-batches at most on any rank.
    for (int r = 0; r < P; ++r)
      EXPECT_LE(zbSim.peakInFlight[r], P);
  }
}

TEST(SimulatorTest, PeakInFlight) {
  Schedule oneF = build(ScheduleKind::OneFOneB, 4, 8);
  Simulation sim = simulate(oneF, ScheduleCosts::uniform(oneF, 1, 1));
  EXPECT_EQ(sim.peakInFlight, (std::vector<int>{4, 3, 2, 1}));
  Schedule gpipe = build(ScheduleKind::GPipe, 4, 8);
  sim = simulate(gpipe, ScheduleCosts::uniform(gpipe, 1, 1));
  EXPECT_EQ(sim.peakInFlight, (std::vector<int>{8, 8, 8, 8}));
}

TEST(SimulatorTest, ClosedFormPeakInFlightMatchesTheStreams) {
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 16; ++M) {
      for (int V = 1; V <= 4; ++V) {
        for (auto kind :
             {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
              ScheduleKind::ZeroBubbleH1, ScheduleKind::Interleaved1F1B}) {
          if ((kind == ScheduleKind::Interleaved1F1B) != (V > 1) ||
              (V > 1 && M % P != 0))
            continue;
          Schedule s = build(kind, P, M, V);
          Simulation sim = simulate(s, ScheduleCosts::uniform(s, 1, 1));
          for (int r = 0; r < P; ++r)
            EXPECT_EQ(peakInFlight(kind, P, M, V, r), sim.peakInFlight[r])
                << stringifyScheduleKind(kind).str() << " P=" << P << " M=" << M
                << " V=" << V << " rank " << r;
        }
      }
    }
  }
}

TEST(SimulatorTest, TransfersAndStepEnd) {
  // P=2, M=1: F0 [0,1], activation arrives at 1.5, F1 [1.5,2.5],
  // B1 [2.5,4.5], gradient arrives at 5, B0 [5,7]; then all-reduce and
  // optimizer per rank.
  Schedule s = build(ScheduleKind::OneFOneB, 2, 1);
  ScheduleCosts costs = ScheduleCosts::uniform(s, 1.0, 2.0, 0.5);
  costs.allReduce = {0.25, 0.5};
  costs.optimizer = {0.125, 0.125};
  Simulation sim = simulate(s, costs);
  using K = InstrKind;
  auto event = [](int r, K kind, int stage, int mb, double a, double b) {
    return Simulation::Event{r, kind, stage, mb, a, b};
  };
  std::vector<Simulation::Event> expected = {
      event(0, K::Forward, 0, 0, 0, 1),
      event(0, K::RecvGradient, 1, 0, 4.5, 5),
      event(0, K::Backward, 0, 0, 5, 7),
      event(0, K::AllReduceGradients, -1, -1, 7, 7.25),
      event(0, K::Optimizer, -1, -1, 7.25, 7.375),
      event(1, K::RecvActivation, 0, 0, 1, 1.5),
      event(1, K::Forward, 1, 0, 1.5, 2.5),
      event(1, K::Backward, 1, 0, 2.5, 4.5),
      event(1, K::AllReduceGradients, -1, -1, 4.5, 5),
      event(1, K::Optimizer, -1, -1, 5, 5.125)};
  ASSERT_EQ(sim.events.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(sim.events[i].rank, expected[i].rank) << i;
    EXPECT_EQ(sim.events[i].kind, expected[i].kind) << i;
    EXPECT_EQ(sim.events[i].stage, expected[i].stage) << i;
    EXPECT_NEAR(sim.events[i].start, expected[i].start, 1e-12) << i;
    EXPECT_NEAR(sim.events[i].end, expected[i].end, 1e-12) << i;
  }
  EXPECT_NEAR(sim.stepTime, 7.375, 1e-12);
  EXPECT_NEAR(sim.pipelineTime, 7, 1e-12);
  // Compute 6 of 14 device-seconds: idle 8.
  EXPECT_NEAR(sim.idleTime, 8, 1e-12);
  EXPECT_EQ(sim.rankCompute, (std::vector<double>{3, 3}));
  EXPECT_NEAR(sim.bubbleFraction, 8.0 / 14.0, 1e-12);
}

} // namespace
