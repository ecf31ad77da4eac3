//===- StagedComm.h - loom_comm through pinned host memory ------*- C++ -*-===//
//
// The communication callbacks of one rank of a GPU run (loom_program.h's
// loom_comm, every buffer a device pointer) carried out by a host
// loom_comm, normally an MpiComm's (runtime/cpu/comm/MpiComm.h), through
// pinned host memory. It exists so that several ranks can share one GPU,
// which NCCL refuses (NcclComm.h): tests and small runs on a single-GPU
// machine. It is slow and never overlaps communication with compute.
//
// Every callback waits for the session's stream: it copies the device
// buffers into a pinned staging area (cudaMemcpyAsync on the stream, then
// cudaStreamSynchronize, so it sees all the work enqueued before it), calls
// the host callback on the staging area and copies the result back, again
// waiting, so the staging area may be reused and the work enqueued after
// the callback sees the result. A send hands the host comm a host copy
// (MpiComm copies it again and never waits for the peer); a recv receives
// into the staging area and copies it to the device. The staging area is
// one cudaMallocHost allocation, grown when a callback needs more and kept.
//
// The split collectives do not overlap here: a start (loom_comm's *_start)
// runs the blocking transfer at once, host-staged as above, and marks its
// slot; wait(slot) only checks that a start took the slot and frees it.
// A start on a slot not yet waited for, a negative slot and a wait on a
// slot no start took fail with a message, as they do over NCCL, so a
// program that misuses its slots fails on one GPU too.
//
// Every CUDA failure becomes LOOM_ERROR_COMMUNICATION with a message that
// lastError() returns, naming the callback, the copy and CUDA's text; a
// failing host callback's status is returned with the host comm's own
// message (StagedCommConfig::hostError).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_COMM_STAGEDCOMM_H
#define LOOM_RUNTIME_CUDA_COMM_STAGEDCOMM_H

#include "CommTable.h"
#include "Status.h"
#include "loom/loom_program.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom::cuda_rt {

struct StagedCommConfig {
  /// The host communicator that moves the data (an MpiComm's comm()); it
  /// must outlive the StagedComm.
  const loom_comm *host = nullptr;
  /// The message of the host communicator's last failure (MpiComm's
  /// lastError()).
  std::function<std::string()> hostError;
  /// The grid shape of this rank's stage and plan.json's groups, as the
  /// host communicator was given them: the member count of a group sizes
  /// the staging of all_gather, reduce_scatter and all_to_all.
  std::vector<int64_t> gridShape;
  std::vector<std::vector<int16_t>> groups;
};

class StagedComm {
public:
  /// Returns null and sets `status` (an invalid argument) when `config`
  /// lacks the host communicator or its error function, or a group names
  /// an axis outside the grid. The callbacks copy on `stream`, which must
  /// outlive the StagedComm.
  static std::unique_ptr<StagedComm> create(const StagedCommConfig &config,
                                            cudaStream_t stream,
                                            rt::Status &status);
  ~StagedComm();
  StagedComm(const StagedComm &) = delete;
  StagedComm &operator=(const StagedComm &) = delete;

  /// The callback table handed to compiled code (loom_call_frame::comm);
  /// valid as long as this StagedComm.
  const loom_comm *comm() const { return &table; }
  /// The message of the last callback that returned a non-zero status.
  const std::string &lastError() const { return error; }

  /// Waits for the stream; "" or CUDA's error. Nothing of the callbacks is
  /// left in flight (each waited for its own transfers), so there is no
  /// watchdog and `timeoutSeconds` is unused: it is there so that the
  /// executor drives StagedComm and NcclComm alike.
  std::string synchronize(double timeoutSeconds);

private:
  StagedComm() = default;

  /// Records `message` as the last error; returns LOOM_ERROR_COMMUNICATION.
  int32_t failWith(std::string message);
  /// Fails unless `count` and `dtype` are valid; sets the bytes of `count`
  /// elements.
  int32_t prepare(const char *call, int64_t count, loom_dtype dtype,
                  size_t &bytes);
  /// prepare, and fails unless `group` exists; sets its member count.
  int32_t prepareCollective(const char *call, int32_t group, int64_t count,
                            loom_dtype dtype, size_t &bytes, size_t &members);
  /// Grows the staging area to at least `bytes`.
  int32_t reserve(const char *call, size_t bytes);
  /// Copies `bytes` from device `from` to staging + `offset`, or from
  /// staging + `offset` to device `to`, and waits for the stream.
  int32_t download(const char *call, const void *from, size_t bytes,
                   size_t offset);
  int32_t upload(const char *call, void *to, size_t bytes, size_t offset);
  /// Passes on the status of a host callback, recording the host's message
  /// when it is not 0.
  int32_t checkHost(int32_t status);

  template <typename Comm>
  friend void loom::rt::fillCommTable(loom_comm &, Comm *);
  int64_t gridCoordinate(int32_t axis) const {
    return host->grid_coordinate(host->ctx, axis);
  }
  int32_t allReduce(int32_t group, void *buf, int64_t count, loom_dtype dtype,
                    loom_reduction op);
  int32_t allGather(int32_t group, const void *send, void *recv, int64_t count,
                    loom_dtype dtype);
  int32_t reduceScatter(int32_t group, const void *send, void *recv,
                        int64_t count, loom_dtype dtype, loom_reduction op);
  int32_t allToAll(int32_t group, const void *send, void *recv, int64_t count,
                   loom_dtype dtype);
  /// A start of `call` on `group` under `slot`: fails when the slot is
  /// negative or taken, else runs `transfer` (the blocking collective,
  /// which returns a status) and, when it succeeds, marks the slot taken
  /// until wait(slot).
  template <typename Transfer>
  int32_t start(const char *call, int32_t slot, int32_t group,
                Transfer transfer);
  /// The starts: the blocking transfer, done before they return.
  int32_t allReduceStart(int32_t slot, int32_t group, void *buf, int64_t count,
                         loom_dtype dtype, loom_reduction op);
  int32_t allGatherStart(int32_t slot, int32_t group, const void *send,
                         void *recv, int64_t count, loom_dtype dtype);
  int32_t reduceScatterStart(int32_t slot, int32_t group, const void *send,
                             void *recv, int64_t count, loom_dtype dtype,
                             loom_reduction op);
  /// Frees `slot`, which a start must have taken.
  int32_t wait(int32_t slot);
  int32_t send(int32_t peer, int32_t tag, const void *buf, int64_t count,
               loom_dtype dtype);
  int32_t recv(int32_t peer, int32_t tag, void *buf, int64_t count,
               loom_dtype dtype);

  loom_comm table = {};
  const loom_comm *host = nullptr;
  std::function<std::string()> hostError;
  cudaStream_t stream = nullptr;
  /// The member count of each group.
  std::vector<int64_t> groupMembers;
  /// The slots of the split collectives, done but not yet waited for: the
  /// call that started each (null: free) and its group, for messages.
  struct Started {
    const char *call = nullptr;
    int32_t group = 0;
  };
  std::vector<Started> started;
  /// Pinned host memory (cudaMallocHost) of `stagingBytes`.
  unsigned char *staging = nullptr;
  size_t stagingBytes = 0;
  std::string error;
};

} // namespace loom::cuda_rt

#endif // LOOM_RUNTIME_CUDA_COMM_STAGEDCOMM_H
