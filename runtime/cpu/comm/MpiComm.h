//===- MpiComm.h - loom_comm over MPI ---------------------------*- C++ -*-===//
//
// The communication callbacks of one rank of a CPU run (loom_program.h's
// loom_comm) over MPI. Every pipeline stage runs its own device grid; each
// world rank is one device of one stage's grid. The collectives of a
// program name plan.json's groups (lists of grid axes): a group's members
// are the devices of the stage that share every coordinate outside its
// axes, in the row-major order of their coordinates on its axes, listed
// order. MpiComm gives each group its own communicator (MPI_Comm_split),
// whose ranks are exactly that member order, so the collectives are plain
// MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block and MPI_Alltoall
// on contiguous member blocks. send / recv go between world ranks (the
// pipeline's stage boundaries): a send copies its buffer and posts
// MPI_Isend, so it never waits for the peer's recv; finished sends are
// reaped on later calls and the rest are waited for when MpiComm goes.
// The split collectives' starts post MPI_Iallreduce, MPI_Iallgather and
// MPI_Ireduce_scatter_block under their slot, and wait is MPI_Wait. (With
// OpenMPI's default progress, a transfer advances inside MPI calls: the
// CPU backend keeps the split for the schedule's sake, and the compute in
// between overlaps little of it.)
//
// Every MPI error becomes the status LOOM_ERROR_COMMUNICATION (the
// communicator is the layer that failed; MPI_ERRORS_RETURN on every
// communicator MpiComm makes) with a message that lastError() returns, for
// example "MPI_Allreduce on group 1 (axes [0]) failed: <MPI's text>".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_COMM_MPICOMM_H
#define LOOM_RUNTIME_CPU_COMM_MPICOMM_H

#include "CommTable.h"
#include "Status.h"
#include "loom/loom_program.h"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

/// Where this rank sits: its stage's grid and the program's groups.
struct MpiCommConfig {
  /// Every rank of the run (every stage's devices). MpiComm duplicates it.
  MPI_Comm world = MPI_COMM_WORLD;
  /// The grid shape of this rank's pipeline stage (plan.json's grid).
  std::vector<int64_t> gridShape;
  /// The world rank of each device of the stage's grid, by its row-major
  /// linear index. This rank must appear exactly once.
  std::vector<int> gridRanks;
  /// plan.json's groups: a collective's `group` indexes this list.
  std::vector<std::vector<int16_t>> groups;

  /// World rank `rank`'s configuration in a job whose pipeline stages each
  /// run a grid of `gridShape` (plan.json's; empty: one device) with the
  /// communicator `groups`: the devices of its stage are the world ranks
  /// from (rank / devices) * devices on, in row-major order.
  static MpiCommConfig
  forStageGrid(int rank, const std::vector<int64_t> &gridShape,
               const std::vector<std::vector<int64_t>> &groups);
};

class MpiComm {
public:
  /// Sets up the communicators of `config`. Collective over `config.world`:
  /// every rank of it calls create, whatever its stage, and the ranks of a
  /// stage pass the same grid and groups. Returns null and sets `status`
  /// on invalid input (an invalid argument) or an MPI error (a
  /// communication error). MPI must be initialized; destroy the MpiComm
  /// before MPI_Finalize.
  static std::unique_ptr<MpiComm> create(const MpiCommConfig &config,
                                         Status &status);
  ~MpiComm();
  MpiComm(const MpiComm &) = delete;
  MpiComm &operator=(const MpiComm &) = delete;

  /// The callback table handed to compiled code (loom_call_frame::comm);
  /// valid as long as this MpiComm.
  const loom_comm *comm() const { return &table; }
  /// The message of the last callback that returned a non-zero status.
  const std::string &lastError() const { return error; }

  /// This rank's coordinates in its stage's grid.
  const std::vector<int64_t> &coordinates() const { return coords; }

private:
  MpiComm() = default;

  /// Records `message` as the last error; returns LOOM_ERROR_COMMUNICATION.
  int32_t failWith(std::string message);
  /// The communicator of `group`, or null after failWith (an unknown group).
  MPI_Comm groupComm(const char *call, int32_t group);
  /// Converts `code` of the MPI call `call` on `group` to a status, the
  /// message naming the caller's line.
  int32_t check(int code, const char *call, int32_t group,
                int line = __builtin_LINE());
  /// Fails unless `count` fits MPI's int counts and `dtype` is known; sets
  /// `type`.
  int32_t prepare(const char *call, int64_t count, loom_dtype dtype,
                  MPI_Datatype &type, int &mpiCount);
  /// The MPI_Op of `op` on `dtype`, or MPI_OP_NULL after failWith.
  MPI_Op reductionOp(const char *call, loom_dtype dtype, loom_reduction op);

  /// What a collective callback hands MPI.
  struct Collective {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Datatype type;
    int count = 0;
    MPI_Op op = MPI_OP_NULL;
  };
  /// The communicator, datatype, count and (with `op`) reduction of the
  /// collective `call` on `group`; a non-zero status after failWith.
  int32_t prepareCollective(const char *call, int32_t group, int64_t count,
                            loom_dtype dtype, const loom_reduction *op,
                            Collective &out);

  template <typename Comm> friend void fillCommTable(loom_comm &, Comm *);
  int64_t gridCoordinate(int32_t axis) const {
    return coordinateOf(coords, axis);
  }
  int32_t allReduce(int32_t group, void *buf, int64_t count, loom_dtype dtype,
                    loom_reduction op);
  int32_t allGather(int32_t group, const void *send, void *recv, int64_t count,
                    loom_dtype dtype);
  int32_t reduceScatter(int32_t group, const void *send, void *recv,
                        int64_t count, loom_dtype dtype, loom_reduction op);
  int32_t allToAll(int32_t group, const void *send, void *recv, int64_t count,
                   loom_dtype dtype);
  int32_t allReduceStart(int32_t slot, int32_t group, void *buf, int64_t count,
                         loom_dtype dtype, loom_reduction op);
  int32_t allGatherStart(int32_t slot, int32_t group, const void *send,
                         void *recv, int64_t count, loom_dtype dtype);
  int32_t reduceScatterStart(int32_t slot, int32_t group, const void *send,
                             void *recv, int64_t count, loom_dtype dtype,
                             loom_reduction op);
  /// The transfer in flight under `slot`, recorded as posted by `call` on
  /// `group`; null after failWith when the slot is negative or busy.
  MPI_Request *startSlot(const char *call, int32_t slot, int32_t group);
  /// The start of a split collective: the checks of prepareCollective and
  /// startSlot, then `post(collective, request)`, the nonblocking MPI call.
  template <typename Post>
  int32_t start(const char *call, int32_t slot, int32_t group, int64_t count,
                loom_dtype dtype, const loom_reduction *op, Post post);
  int32_t wait(int32_t slot);
  int32_t send(int32_t peer, int32_t tag, const void *buf, int64_t count,
               loom_dtype dtype);
  int32_t recv(int32_t peer, int32_t tag, void *buf, int64_t count,
               loom_dtype dtype);
  /// Frees the copies of sends the peers have taken.
  void reapSends();

  loom_comm table = {};
  MPI_Comm world = MPI_COMM_NULL;
  std::vector<MPI_Comm> groups;
  std::vector<std::vector<int16_t>> groupAxes;
  std::vector<int64_t> coords;
  /// bf16 sum, max, min (MPI has no bf16): user-defined operations.
  MPI_Op bf16Ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  /// Sends in flight and the copies they send from.
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<unsigned char> data;
  };
  std::vector<std::unique_ptr<PendingSend>> pendingSends;
  /// Split collectives by slot (MPI_REQUEST_NULL: free), with the call
  /// that posted each and its group, for wait's messages.
  struct InFlight {
    MPI_Request request = MPI_REQUEST_NULL;
    const char *call = "";
    int32_t group = 0;
  };
  std::vector<InFlight> inFlight;
  std::string error;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_CPU_COMM_MPICOMM_H
