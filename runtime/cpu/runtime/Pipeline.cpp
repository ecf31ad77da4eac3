//===- Pipeline.cpp - Executing a rank's pipeline schedule ----------------===//
//
// A pipelined artifact (schedule.json) is not executed by the compiled
// runtime yet: the reference backend (loom-run --backend=reference) runs
// pipelined modules. The session refuses such a step with that message
// rather than running something else.
//
//===----------------------------------------------------------------------===//

#include "Session.h"

namespace loom::rt {

std::string Session::runPipelineStep(int64_t, double &) {
  return "this artifact is pipelined (schedule.json); the compiled runtime "
         "does not execute pipeline schedules yet: run the module with "
         "loom-run --backend=reference";
}

} // namespace loom::rt
