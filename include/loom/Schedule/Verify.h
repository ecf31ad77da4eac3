//===- Verify.h - Checking that a schedule can run --------------*- C++ -*-===//
//
// verifySchedule checks, in order:
//  1. shape: P, M, V positive; one stream per rank; stages and micro-batches
//     in range; every instruction on the rank that owns its stage; peers
//     are the neighbouring stage's rank;
//  2. coverage: every (stage, micro-batch) has exactly one forward and
//     either one backward or one backward_input and one backward_weight;
//     each rank has exactly one all_reduce_gradients followed by exactly one
//     optimizer, after all its backward work;
//  3. matching: every send has a recv of the same kind, stage and
//     micro-batch on the peer, and the other way round;
//  4. progress: the streams are executed abstractly (recvs block until the
//     matching send ran, sends are buffered) and every compute instruction
//     must find its inputs present: F(s,k) needs F(s-1,k)'s activation,
//     B(s,k) needs F(s,k) and B(s+1,k)'s gradient, W after B. A recv takes
//     its peer's messages in the order they were sent (as MPI and NCCL
//     match point-to-point messages). A deadlock is reported naming every
//     blocked rank and the recv it waits on.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SCHEDULE_VERIFY_H
#define LOOM_SCHEDULE_VERIFY_H

#include "loom/Schedule/Schedule.h"

namespace loom::sched {

/// Success, or an error saying what is wrong and where
/// (`streams[r][i] (forward stage 1 mb 0): ...`).
llvm::Error verifySchedule(const Schedule &schedule);

} // namespace loom::sched

#endif // LOOM_SCHEDULE_VERIFY_H
