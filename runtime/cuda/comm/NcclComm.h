//===- NcclComm.h - loom_comm over NCCL -------------------------*- C++ -*-===//
//
// The communication callbacks of one rank of a GPU run (loom_program.h's
// loom_comm) over NCCL: every buffer is a device pointer, and every
// callback is ordered on the session's compute stream (it sees all the
// work enqueued on that stream before it, and work enqueued after it sees
// its results). Nothing waits on the host: the callbacks only enqueue.
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
// and cudaMemcpyAsync on the stream, so the caller may reuse the buffer)
// and is queued. The queued sends are issued together with the next recv
// in one NCCL group (so a pair of ranks exchanging messages posts both
// directions at once), or on their own by flush(), before any collective,
// and by synchronize(). The staging is freed (cudaFreeAsync) after the
// group.
//
// Every NCCL or CUDA failure becomes a non-zero status with a message that
// lastError() returns, naming the call and the group (its axes) or peer,
// with NCCL's error string and ncclGetLastError's text, for example
// "ncclAllReduce on group 1 (axes [0]) failed: invalid argument (...)".
//
// A peer that dies or hangs leaves this rank's stream waiting forever, so
// the executor calls synchronize(timeout) once per step: a watchdog that
// polls the stream and every communicator's asynchronous error, and on an
// error or when the deadline passes aborts every communicator
// (ncclCommAbort); every later callback then fails with that message.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_COMM_NCCLCOMM_H
#define LOOM_RUNTIME_CUDA_COMM_NCCLCOMM_H

#include "MpiComm.h"

#include "loom/loom_program.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
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
  /// instead of hang. Makes `config.device` the current device. The
  /// callbacks enqueue on `stream`, which must belong to that device and
  /// outlive the NcclComm. Returns null and sets `error` on failure. MPI
  /// must be initialized.
  static std::unique_ptr<NcclComm>
  create(const NcclCommConfig &config, cudaStream_t stream, std::string &error);
  /// Issues the queued sends and destroys the communicators (ncclCommDestroy
  /// waits for what is in flight), or only lets go of them once aborted.
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
  /// Flushes, then waits until the stream has run everything enqueued on
  /// it. Returns "" or the failure; on an asynchronous NCCL error, a CUDA
  /// error, or when `timeoutSeconds` pass first (never when it is <= 0), it
  /// aborts every communicator and returns, for example, "NCCL watchdog: no
  /// progress for 30 s; communicators aborted (rank 3)".
  std::string synchronize(double timeoutSeconds);

private:
  NcclComm() = default;

  /// Records `message` as the last error; returns a non-zero status.
  int32_t failWith(std::string message);
  /// A status for `result` of the NCCL call `what` on `comm`.
  int32_t checkNccl(ncclResult_t result, const std::string &what,
                    ncclComm_t comm);
  /// A status for `result` of the CUDA call `what`.
  int32_t checkCuda(cudaError_t result, const std::string &what);
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
  };
  /// The checks of the collective `call` on `group` (with its reduction
  /// when `op` is given), then a flush of the queued sends; a non-zero
  /// status after failWith.
  int32_t prepareCollective(const char *call, int32_t group, int64_t count,
                            loom_dtype dtype, const loom_reduction *op,
                            Collective &out);
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

  int32_t allReduce(int32_t group, void *buf, int64_t count, loom_dtype dtype,
                    loom_reduction op);
  int32_t allGather(int32_t group, const void *send, void *recv, int64_t count,
                    loom_dtype dtype);
  int32_t reduceScatter(int32_t group, const void *send, void *recv,
                        int64_t count, loom_dtype dtype, loom_reduction op);
  int32_t allToAll(int32_t group, const void *send, void *recv, int64_t count,
                   loom_dtype dtype);
  int32_t send(int32_t peer, int32_t tag, const void *buf, int64_t count,
               loom_dtype dtype);
  int32_t recv(int32_t peer, int32_t tag, void *buf, int64_t count,
               loom_dtype dtype);

  loom_comm table = {};
  cudaStream_t stream = nullptr;
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
