//===- NcclComm.h - loom_comm over NCCL -------------------------*- C++ -*-===//
//
// The communication callbacks of one rank of a GPU run (loom_program.h's
// loom_comm) over NCCL: every buffer is a device pointer, and every
// callback is ordered with the session's compute stream (it sees all the
// work enqueued on that stream before it, and work enqueued after it, or
// after a split collective's wait, sees its results). The callbacks only
// enqueue: none waits on the host for a transfer (connecting aside, below).
//
// Two streams. The collectives (all_reduce, all_gather, reduce_scatter,
// all_to_all, blocking or split) run on a communication stream of
// NcclComm's own (CommStream.h), so that every rank issues its NCCL
// collectives on one stream in program order (collectives on several
// streams could run in a different order on each rank, and an NCCL kernel
// waiting for its peers may hold what the other one needs to run: a
// deadlock). Each collective waits for the work enqueued on the compute
// stream before it. After it, a blocking collective makes the compute
// stream wait at once, which orders it as if it ran on the compute
// stream; a start (loom_comm's *_start) records the event of its slot
// instead and returns, and wait(slot) makes the compute stream wait for
// that event, so that the kernels enqueued between the two run beside the
// transfer. A start on a slot still in flight, a wait on a slot with
// nothing in flight and a negative slot fail with a message. Pipeline
// send / recv stay on the compute stream (below).
//
// The communicators mirror MpiComm's (runtime/cpu/comm/MpiComm.h): MPI
// bootstraps one NCCL communicator over the world (rank 0's
// ncclGetUniqueId, broadcast), and each of plan.json's groups gets one
// ncclCommSplit of it, whose ranks are the group's member order. The
// collectives are then ncclAllReduce, ncclAllGather and ncclReduceScatter
// on contiguous member blocks; all_to_all is one ncclSend and one ncclRecv
// per member inside a ncclGroupStart / ncclGroupEnd.
//
// send / recv go between world ranks on the world communicator. NCCL has
// no tags: transfers between two ranks match in the order they were
// posted. The caller (the executor) guarantees that, per ordered pair of
// ranks, the receiver's recvs come in the order of the sender's sends, so
// a tag is only checked to be in 0..32767. loom_comm's send must not wait
// for its recv, and two ranks that both send before they receive must not
// deadlock; a bare ncclSend would block the stream until the peer's recv.
// So a send copies its buffer into a staging allocation (cudaMallocAsync
// and cudaMemcpyAsync on the compute stream, so the caller may reuse the
// buffer) and is queued. The queued sends are issued, on the compute
// stream, together with the next recv in one NCCL group (so a pair of
// ranks exchanging messages posts both directions at once), or on their
// own by flush(), before any collective (which the communication stream
// then runs after them), and by synchronize(). The staging is freed
// (cudaFreeAsync) after the group.
//
// Every NCCL or CUDA failure becomes LOOM_ERROR_COMMUNICATION with a
// message that lastError() returns, naming the call and the group (its axes) or
// peer, with NCCL's error string and ncclGetLastError's text, for example
// "ncclAllReduce on group 1 (axes [0]) failed: invalid argument (...)".
//
// A peer that dies or hangs leaves this rank's streams waiting forever,
// so the executor calls synchronize(timeout) once per step: a watchdog
// that polls both streams (a function that failed between a start and its
// wait leaves the transfer on the communication stream alone) and every
// communicator's asynchronous error, and on an error or when the deadline
// passes aborts every communicator (ncclCommAbort); every later callback
// then fails with that message. It runs on the caller's thread, so it
// cannot reach a host call that blocks: the communicators are NCCL's
// blocking ones, whose first transfer between two ranks connects them
// (NCCL_RUNTIME_CONNECT) and waits on the host for the peer to do the
// same; a dead peer there is for loom-run's own watchdog thread.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_COMM_NCCLCOMM_H
#define LOOM_RUNTIME_CUDA_COMM_NCCLCOMM_H

#include "CommStream.h"
#include "MpiComm.h"

#include "loom/loom_program.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::cuda_rt {

/// Where this rank sits (MpiCommConfig: the MPI world that bootstraps
/// NCCL, the stage's grid and the world ranks of its devices, the groups)
/// and the GPU it drives.
struct NcclCommConfig : rt::MpiCommConfig {
  /// The CUDA device of this rank; no other rank of the world may use it
  /// (NCCL refuses two ranks on one device: StagedComm is for that).
  int device = 0;
};

class NcclComm {
public:
  /// Sets up the world communicator and one communicator per group.
  /// Collective over `config.world`, as MpiComm::create is: every rank calls
  /// it, and a configuration that any rank gets wrong makes every rank fail
  /// instead of hang. Makes `config.device` the current device (the
  /// callbacks expect it to stay current) and creates the communication
  /// stream there. The callbacks are ordered with `stream`, which must
  /// belong to that device and outlive the NcclComm. Returns null and sets
  /// `status` on failure (MpiComm's for the configuration, else a
  /// communication error). MPI must be initialized.
  static std::unique_ptr<NcclComm>
  create(const NcclCommConfig &config, cudaStream_t stream, rt::Status &status);
  /// Issues the queued sends and destroys the communicators (ncclCommDestroy
  /// waits for what is in flight), or only lets go of them once aborted;
  /// then (as a member) the communication stream and its events.
  ~NcclComm();
  NcclComm(const NcclComm &) = delete;
  NcclComm &operator=(const NcclComm &) = delete;

  /// The callback table handed to compiled code (loom_call_frame::comm);
  /// valid as long as this NcclComm.
  const loom_comm *comm() const { return &table; }
  /// The message of the last callback that returned a non-zero status.
  const std::string &lastError() const { return error; }
  /// This rank's coordinates in its stage's grid.
  const std::vector<int64_t> &coordinates() const { return coords; }

  /// Issues the queued sends in a group of their own; a non-zero status
  /// (lastError()) on failure.
  int32_t flush();
  /// Flushes, then waits until both streams have run everything enqueued
  /// on them. Returns "" or the failure; on an asynchronous NCCL error, a
  /// CUDA error, or when `timeoutSeconds` pass first (never when it is
  /// <= 0), it aborts every communicator and returns, for example, "NCCL
  /// watchdog: no progress for 30 s; communicators aborted (rank 3)".
  std::string synchronize(double timeoutSeconds);

private:
  /// create() past the configuration check: the NCCL communicators of this
  /// rank at `coords`; null and `error` on failure.
  static std::unique_ptr<NcclComm> setUp(const NcclCommConfig &config,
                                         cudaStream_t stream,
                                         std::vector<int64_t> coords,
                                         std::string &error);
  NcclComm() = default;

  /// Records `message` as the last error; returns LOOM_ERROR_COMMUNICATION.
  int32_t failWith(std::string message);
  /// A status for `result` of the NCCL call `what` on `comm`, the message
  /// naming the caller's line.
  int32_t checkNccl(ncclResult_t result, const std::string &what,
                    ncclComm_t comm, int line = __builtin_LINE());
  /// A status for `result` of the CUDA call `what` (the caller's line too).
  int32_t checkCuda(cudaError_t result, const std::string &what,
                    int line = __builtin_LINE());
  /// Fails once aborted, or when `count` or `dtype` is invalid; sets `type`
  /// and `bytes` (of `count` elements).
  int32_t prepare(const char *call, int64_t count, loom_dtype dtype,
                  ncclDataType_t &type, size_t &bytes);
  /// What a collective callback hands NCCL.
  struct Collective {
    ncclComm_t comm = nullptr;
    ncclDataType_t type = ncclFloat32;
    size_t bytes = 0; ///< of `count` elements
    ncclRedOp_t op = ncclSum;
    /// The call and its group, "ncclAllReduce on group 1 (axes [0])".
    std::string what;
    /// The start's slot, or nullopt for a blocking collective.
    std::optional<int32_t> slot;
    /// How messages name the collective: `what`, and " under slot 2" for
    /// a start.
    std::string named() const;
  };
  /// The checks of the collective `call` on `group` (with its reduction
  /// when `op` is given, as a start under `slot` when it is given: the slot
  /// claimed), then a flush of the queued sends; a non-zero status after
  /// failWith.
  int32_t prepareCollective(const char *call, int32_t group, int64_t count,
                            loom_dtype dtype, const loom_reduction *op,
                            std::optional<int32_t> slot, Collective &out);
  /// Runs `issue(stream)` (which enqueues `c`'s NCCL calls on `stream`, the
  /// communication stream, and returns a status) after the work enqueued on
  /// the compute stream; then records the slot's event for a start, or
  /// makes the compute stream wait for the transfer (a blocking collective,
  /// and a start that failed: nothing it may have enqueued outlives the
  /// call). A failure of CommStream's is recorded with failWith.
  template <typename Issue>
  int32_t onCommStream(const Collective &c, Issue issue);
  /// "group G (axes [...])".
  std::string groupName(int32_t group) const;
  /// A transfer between world ranks: a queued send (from its staging) or
  /// a recv.
  struct Transfer {
    void *buf;
    size_t count;
    ncclDataType_t type;
    int peer;
  };
  /// Issues the queued sends, and `recv` when not null, in one NCCL group,
  /// then frees the sends' staging.
  int32_t issue(const Transfer *recv);
  /// Aborts every communicator, records `message` as what every later
  /// callback fails with, and returns it.
  std::string abortAll(std::string message);

  template <typename Comm>
  friend void loom::rt::fillCommTable(loom_comm &, Comm *);
  int64_t gridCoordinate(int32_t axis) const {
    return loom::rt::coordinateOf(coords, axis);
  }
  /// The collectives: blocking when `slot` is nullopt, else the start of
  /// the transfer under `slot`.
  int32_t allReduce(int32_t group, void *buf, int64_t count, loom_dtype dtype,
                    loom_reduction op,
                    std::optional<int32_t> slot = std::nullopt);
  int32_t allGather(int32_t group, const void *send, void *recv, int64_t count,
                    loom_dtype dtype,
                    std::optional<int32_t> slot = std::nullopt);
  int32_t reduceScatter(int32_t group, const void *send, void *recv,
                        int64_t count, loom_dtype dtype, loom_reduction op,
                        std::optional<int32_t> slot = std::nullopt);
  int32_t allReduceStart(int32_t slot, int32_t group, void *buf, int64_t count,
                         loom_dtype dtype, loom_reduction op) {
    return allReduce(group, buf, count, dtype, op, slot);
  }
  int32_t allGatherStart(int32_t slot, int32_t group, const void *send,
                         void *recv, int64_t count, loom_dtype dtype) {
    return allGather(group, send, recv, count, dtype, slot);
  }
  int32_t reduceScatterStart(int32_t slot, int32_t group, const void *send,
                             void *recv, int64_t count, loom_dtype dtype,
                             loom_reduction op) {
    return reduceScatter(group, send, recv, count, dtype, op, slot);
  }
  int32_t allToAll(int32_t group, const void *send, void *recv, int64_t count,
                   loom_dtype dtype);
  /// Makes the compute stream wait for the transfer started under `slot`
  /// and frees the slot.
  int32_t wait(int32_t slot);
  int32_t send(int32_t peer, int32_t tag, const void *buf, int64_t count,
               loom_dtype dtype);
  int32_t recv(int32_t peer, int32_t tag, void *buf, int64_t count,
               loom_dtype dtype);

  loom_comm table = {};
  /// The session's compute stream (send / recv run there), and the
  /// communication stream the collectives run on, with the events between
  /// the two; destroyed after ~NcclComm has let go of the communicators.
  CommStream streams;
  int worldRank = 0;
  int worldSize = 0;
  ncclComm_t world = nullptr;
  /// One communicator per group index, and its axes and member count.
  std::vector<ncclComm_t> groups;
  std::vector<std::vector<int16_t>> groupAxes;
  std::vector<int64_t> groupMembers;
  std::vector<int64_t> coords;
  /// Sends copied to staging and not yet issued, in their order.
  std::vector<Transfer> queuedSends;
  /// Set once the communicators are aborted: what every callback returns.
  bool aborted = false;
  std::string abortMessage;
  std::string error;
};

} // namespace loom::cuda_rt

#endif // LOOM_RUNTIME_CUDA_COMM_NCCLCOMM_H
