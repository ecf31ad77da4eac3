//===- ScheduleAttr.h - A schedule as an MLIR attribute ---------*- C++ -*-===//
//
// How a pipelined module carries its schedule (`loom.schedule`, written by
// --loom-split-stages): a dictionary a person can read in the IR, each
// rank's stream one string per instruction (describeInstr's text),
//
//   loom.schedule = {kind = "1f1b", micro_batches = 2 : i64, ranks = 2 : i64,
//                    streams = [["forward stage 0 mb 0",
//                                "send_activation stage 0 mb 0 peer 1", ...],
//                               [...]],
//                    virtual_stages = 1 : i64}
//
// The same object as the JSON of Serialize.h (the artifact's form).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SCHEDULE_SCHEDULEATTR_H
#define LOOM_SCHEDULE_SCHEDULEATTR_H

#include "loom/Schedule/Schedule.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace loom::sched {

mlir::DictionaryAttr scheduleToAttr(mlir::MLIRContext *context,
                                    const Schedule &schedule);

/// The schedule `attr` holds; errors name the malformed entry
/// (`streams[1][4]: unknown instruction "fwd"`). Does not verify.
llvm::Expected<Schedule> scheduleFromAttr(mlir::Attribute attr);

} // namespace loom::sched

#endif // LOOM_SCHEDULE_SCHEDULEATTR_H
