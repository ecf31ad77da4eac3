//===- Timeline.h - Drawing a simulated pipeline step -----------*- C++ -*-===//
//
// Two views of a Simulation, both written atomically:
//  - a Chrome trace-event JSON file (open in https://ui.perfetto.dev or
//    chrome://tracing): one thread "device r" per pipeline rank, complete
//    events named "F s3 mb2", "B s3 mb2", "W s3 mb2", "recv act s2 mb2",
//    "all-reduce", "optimizer", in categories forward, backward,
//    backward_weight, comm, optimizer; times in microseconds;
//  - an SVG picture: one row per device, forward / backward /
//    weight-gradient / communication / optimizer boxes in distinct colours
//    on an idle-coloured row, micro-batch numbers in the boxes wide enough
//    for them, a time axis in ms and a legend.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SCHEDULE_TIMELINE_H
#define LOOM_SCHEDULE_TIMELINE_H

#include "loom/Schedule/Simulator.h"

namespace loom::sched {

llvm::Error writeChromeTrace(const Simulation &simulation,
                             llvm::StringRef path);

llvm::Error writeSvg(const Simulation &simulation, llvm::StringRef path,
                     llvm::StringRef title);

/// The text writeSvg writes, for tests.
std::string renderSvg(const Simulation &simulation, llvm::StringRef title);

} // namespace loom::sched

#endif // LOOM_SCHEDULE_TIMELINE_H
