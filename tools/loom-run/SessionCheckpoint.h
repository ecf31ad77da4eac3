//===- SessionCheckpoint.h - Sharded checkpoints of a job's sessions -*- C++
//-*-//
//
// Saving and resuming the state of a compiled job (loom_runtime.h) as the
// checkpoint directories of loom/Checkpoint/ShardedCheckpoint.h: every rank
// writes the shards it owns, rank 0 the index; every rank reads back the
// boxes its own shards cover, whatever plan wrote them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_SESSIONCHECKPOINT_H
#define LOOM_TOOLS_LOOM_RUN_SESSIONCHECKPOINT_H

#include "RankSession.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace loom::run {

/// Where this rank sits and what a checkpoint of the job records.
struct JobShape {
  int rank = 0, worldSize = 1;
  int64_t batchRows = 0, seqLen = 0;
};

/// Saves the state of every rank's session as checkpoint `dir` after
/// `steps` steps. Collective over MPI_COMM_WORLD. Returns "" or what failed,
/// naming the rank, on every rank alike; nothing of a failed save is left.
std::string saveCheckpoint(RankSession &session, const JobShape &job,
                           llvm::StringRef dir, int64_t steps);

/// Fills this rank's state from checkpoint `dir` (written under any plan)
/// and returns the steps it was saved after. Not collective.
llvm::Expected<int64_t> resumeCheckpoint(RankSession &session,
                                         const JobShape &job,
                                         llvm::StringRef dir);

} // namespace loom::run

#endif // LOOM_TOOLS_LOOM_RUN_SESSIONCHECKPOINT_H
