//===- TimelineTest.cpp - Chrome trace and SVG of a simulated step --------===//

#include "TestFiles.h"

#include "loom/Schedule/Timeline.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

using namespace loom::sched;

namespace {

Simulation simulateZeroBubble(int P, int M) {
  llvm::Expected<Schedule> s = buildSchedule(ScheduleKind::ZeroBubbleH1, P, M);
  EXPECT_TRUE(bool(s));
  ScheduleCosts costs = ScheduleCosts::uniform(*s, 1e-3, 2e-3, 1e-4);
  costs.optimizer.assign(P, 5e-4);
  return simulate(*s, costs);
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : "";
}

TEST(TimelineTest, ChromeTraceHasOneThreadPerDeviceAndNamedEvents) {
  loom::unittest::TempDir dir;
  Simulation sim = simulateZeroBubble(2, 2);
  std::string path = dir.file("step.json");
  ASSERT_FALSE(bool(writeChromeTrace(sim, path)));
  llvm::Expected<llvm::json::Value> trace = llvm::json::parse(readFile(path));
  ASSERT_TRUE(bool(trace)) << llvm::toString(trace.takeError());
  const llvm::json::Array *events =
      trace->getAsObject()->getArray("traceEvents");
  ASSERT_TRUE(events);
  std::vector<std::string> threads;
  int complete = 0;
  bool sawWeight = false, sawRecv = false;
  for (const llvm::json::Value &value : *events) {
    const llvm::json::Object &event = *value.getAsObject();
    if (event.getString("name") == llvm::StringRef("thread_name")) {
      threads.push_back(event.getObject("args")->getString("name")->str());
      continue;
    }
    if (event.getString("ph") != llvm::StringRef("X"))
      continue;
    ++complete;
    std::string name = event.getString("name")->str();
    llvm::StringRef category = *event.getString("cat");
    if (name == "W s1 mb0") {
      sawWeight = true;
      EXPECT_EQ(category, "backward_weight");
      EXPECT_EQ(event.getInteger("tid"), 1);
    }
    if (name == "recv act s0 mb0") {
      // The activation of F(0,0), ready at 1 ms, arrives 0.1 ms later.
      sawRecv = true;
      EXPECT_EQ(category, "comm");
      EXPECT_NEAR(*event.getNumber("ts"), 1000, 1e-9);
      EXPECT_NEAR(*event.getNumber("dur"), 100, 1e-9);
    }
  }
  EXPECT_EQ(threads, (std::vector<std::string>{"device 0", "device 1"}));
  EXPECT_EQ(complete, int(sim.events.size()));
  EXPECT_TRUE(sawWeight);
  EXPECT_TRUE(sawRecv);
}

TEST(TimelineTest, SvgHasRowsLegendAxisAndNumbers) {
  loom::unittest::TempDir dir;
  Simulation sim = simulateZeroBubble(2, 2);
  std::string path = dir.file("step.svg");
  ASSERT_FALSE(bool(writeSvg(sim, path, "ZB-H1 <test>")));
  std::string svg = readFile(path);
  EXPECT_EQ(svg, renderSvg(sim, "ZB-H1 <test>"));
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("ZB-H1 &lt;test&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">device 1</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">device 2</text>"), std::string::npos);
  for (const char *label : {">forward<", ">backward<", ">weight gradient<",
                            ">communication<", ">idle<", ">0 ms<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  // One box (with a tooltip) per event.
  size_t boxes = 0;
  for (size_t at = 0; (at = svg.find("<title>", at)) != std::string::npos; ++at)
    ++boxes;
  EXPECT_EQ(boxes, sim.events.size());
  EXPECT_NE(svg.find("<title>W s0 mb1 (1.000 ms)</title>"), std::string::npos);
}

/// The legend lists only the kinds of work drawn: 1F1B has no separate
/// weight-gradient boxes.
TEST(TimelineTest, LegendListsWhatIsDrawn) {
  llvm::Expected<Schedule> s = buildSchedule(ScheduleKind::OneFOneB, 2, 2);
  ASSERT_TRUE(bool(s));
  Simulation sim = simulate(*s, ScheduleCosts::uniform(*s, 1e-3, 2e-3, 1e-4));
  std::string svg = renderSvg(sim, "1F1B");
  EXPECT_NE(svg.find(">backward<"), std::string::npos);
  EXPECT_EQ(svg.find(">weight gradient<"), std::string::npos);
  EXPECT_NE(svg.find("devices idle"), std::string::npos);
}

TEST(TimelineTest, BadPathIsAnError) {
  Simulation sim = simulateZeroBubble(2, 2);
  llvm::Error error = writeSvg(sim, "/nonexistent-dir/x.svg", "t");
  ASSERT_TRUE(bool(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("/nonexistent-dir/x.svg"),
            std::string::npos);
  error = writeChromeTrace(sim, "/nonexistent-dir/x.json");
  EXPECT_TRUE(bool(error));
  llvm::consumeError(std::move(error));
}

} // namespace
