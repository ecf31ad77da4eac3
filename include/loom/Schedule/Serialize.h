//===- Serialize.h - A schedule as JSON -------------------------*- C++ -*-===//
//
// The on-disk form of a schedule, read by the runtime and written by the
// planner:
//
//   {"format": "loom-schedule", "version": 1, "kind": "1f1b",
//    "ranks": P, "micro_batches": M, "virtual_stages": V,
//    "streams": [[{"op": "forward", "stage": 0, "mb": 0},
//                 {"op": "send_activation", "stage": 0, "mb": 0, "peer": 1},
//                 ..., {"op": "optimizer"}], ...]}
//
// "stage" and "mb" are omitted for all_reduce_gradients and optimizer,
// "peer" for everything but transfers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SCHEDULE_SERIALIZE_H
#define LOOM_SCHEDULE_SERIALIZE_H

#include "loom/Schedule/Schedule.h"

namespace loom::sched {

/// The JSON text of `schedule` (one instruction per line, stable).
std::string scheduleToJson(const Schedule &schedule);

/// Parses scheduleToJson's format. Errors name the JSON path, e.g.
/// `streams[1][4].op: unknown instruction "fwd"`. The result is not
/// verified: call verifySchedule for that.
llvm::Expected<Schedule> parseSchedule(llvm::StringRef json);

} // namespace loom::sched

#endif // LOOM_SCHEDULE_SERIALIZE_H
