//===- NcclComm.cpp - loom_comm over NCCL ---------------------------------===//
//
// create() first builds an MpiComm of the same configuration and drops it:
// MpiComm checks the configuration collectively (a mistake on one rank
// fails every rank instead of leaving the others in an NCCL call) and
// computes this rank's coordinates. Then rank 0's ncclUniqueId goes to
// every rank (MPI_Bcast) for ncclCommInitRank, and the world communicator
// is split once per group index, on every rank in the same order: as many
// splits as the rank with the most groups (stages may list different
// groups), NCCL_SPLIT_NOCOLOR past its own list. A group's color is the
// world rank of its member 0 (no other group of that index has it: stages
// hold disjoint ranks) and its key the member index (GroupSplit.h), so the
// split's ranks are the member order. The ranks agree (MPI_Allreduce) after
// each step that can fail on one rank alone, so that none waits in an NCCL
// call the others skip.
//
// A collective is a few steps on either side of its NCCL calls
// (onCommStream, through CommStream): an event from the compute stream to
// the communication stream, the calls, then an event back, at once
// (blocking) or at the slot's wait (a start).
//
//===----------------------------------------------------------------------===//

#include "NcclComm.h"

#include "GroupSplit.h"
#include "Status.h"

#include <chrono>
#include <cstdio>
#include <iterator>
#include <thread>

namespace loom::cuda_rt {
namespace {

/// Pipeline send / recv tags are 0..kMaxTag (loom_program.h).
constexpr int kMaxTag = 32767;

std::string axesString(const std::vector<int16_t> &axes) {
  std::string text = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? ", " : "") + std::to_string(axes[i]);
  return text + "]";
}

/// NCCL's text for `result`, with the last error NCCL recorded (`comm` may
/// be null).
std::string ncclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    text += std::string(" (") + last + ")";
  return text;
}

/// Tells every rank of `world` whether any rank failed: "" when none did,
/// else this rank's own message or one naming `step` for the others.
std::string agree(MPI_Comm world, const std::string &local,
                  const std::string &step) {
  int failed = local.empty() ? 0 : 1;
  if (int code =
          MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, world))
    return "MPI_Allreduce after " + step + " failed (MPI error " +
           std::to_string(code) + ")";
  if (!failed)
    return "";
  return local.empty() ? "another rank failed in " + step : local;
}

} // namespace

std::unique_ptr<NcclComm> NcclComm::create(const NcclCommConfig &config,
                                           cudaStream_t stream,
                                           rt::Status &status) {
  std::vector<int64_t> coords;
  {
    std::unique_ptr<rt::MpiComm> mpi = rt::MpiComm::create(config, status);
    if (!mpi)
      return nullptr;
    coords = mpi->coordinates();
  }
  // From here on every failure is NCCL's, MPI's or CUDA's: the
  // communicator's.
  std::string error;
  std::unique_ptr<NcclComm> self = setUp(config, stream, coords, error);
  if (!self)
    status = rt::communicationError(error);
  return self;
}

std::unique_ptr<NcclComm> NcclComm::setUp(const NcclCommConfig &config,
                                          cudaStream_t stream,
                                          std::vector<int64_t> coords,
                                          std::string &error) {
  std::unique_ptr<NcclComm> self(new NcclComm());
  self->coords = std::move(coords);
  self->groupAxes = config.groups;
  for (const std::vector<int16_t> &axes : config.groups) {
    int64_t members = 1;
    for (int16_t axis : axes)
      members *= config.gridShape[axis];
    self->groupMembers.push_back(members);
  }
  MPI_Comm_rank(config.world, &self->worldRank);
  MPI_Comm_size(config.world, &self->worldSize);
  // Until every communicator exists, a failure lets go of the ones made
  // without waiting (the destructor aborts them).
  self->aborted = true;
  std::string where = " (world rank " + std::to_string(self->worldRank) +
                      " of " + std::to_string(self->worldSize) + ", device " +
                      std::to_string(config.device) + ")";

  std::string local;
  if (cudaError_t code = cudaSetDevice(config.device))
    local = "cudaSetDevice" + where + " failed: " + cudaGetErrorString(code);
  if (local.empty())
    local = self->streams.create(stream, where);
  ncclUniqueId id = {};
  if (self->worldRank == 0 && local.empty())
    if (ncclResult_t result = ncclGetUniqueId(&id))
      local = "ncclGetUniqueId failed: " + ncclText(result, nullptr);
  if (int code = MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, config.world)) {
    error = "MPI_Bcast of the NCCL unique id failed (MPI error " +
            std::to_string(code) + ")";
    return nullptr;
  }
  error = agree(config.world, local,
                "cudaSetDevice, the communication stream or ncclGetUniqueId");
  if (!error.empty())
    return nullptr;

  if (ncclResult_t result = ncclCommInitRank(&self->world, self->worldSize, id,
                                             self->worldRank)) {
    local =
        "ncclCommInitRank" + where + " failed: " + ncclText(result, nullptr);
    self->world = nullptr;
  }
  error = agree(config.world, local, "ncclCommInitRank");
  if (!error.empty())
    return nullptr;

  int splits = static_cast<int>(config.groups.size());
  if (int code = MPI_Allreduce(MPI_IN_PLACE, &splits, 1, MPI_INT, MPI_MAX,
                               config.world)) {
    error = "MPI_Allreduce of the group count failed (MPI error " +
            std::to_string(code) + ")";
    return nullptr;
  }
  for (int g = 0; g < splits; ++g) {
    bool mine = g < static_cast<int>(config.groups.size());
    int color = NCCL_SPLIT_NOCOLOR, key = 0;
    if (mine) {
      rt::GroupSplit split = rt::groupSplit(config.gridShape, config.gridRanks,
                                            self->coords, config.groups[g]);
      color = split.color;
      key = split.key;
    }
    ncclComm_t comm = nullptr;
    ncclResult_t result =
        ncclCommSplit(self->world, color, key, &comm, /*config=*/nullptr);
    if (result != ncclSuccess) {
      comm = nullptr;
      if (local.empty())
        local = "ncclCommSplit for " +
                (mine ? self->groupName(g) : "group " + std::to_string(g)) +
                where + " failed: " + ncclText(result, self->world);
    }
    if (mine)
      self->groups.push_back(comm);
  }
  error = agree(config.world, local, "ncclCommSplit");
  if (!error.empty())
    return nullptr;
  self->aborted = false;

  loom::rt::fillCommTable(self->table, self.get());
  return self;
}

NcclComm::~NcclComm() {
  // A queued send is a promise to a peer that will wait for it.
  if (!aborted && !queuedSends.empty())
    issue(nullptr);
  std::vector<ncclComm_t> all = groups;
  all.push_back(world);
  for (ncclComm_t comm : all) {
    if (!comm)
      continue;
    if (aborted)
      ncclCommAbort(comm);
    else
      ncclCommDestroy(comm);
  }
  // `streams` goes after the communicators: the transfers they ran are
  // over (or aborted) by now.
}

int32_t NcclComm::failWith(std::string message) {
  error = std::move(message);
  return LOOM_ERROR_COMMUNICATION;
}

int32_t NcclComm::checkNccl(ncclResult_t result, const std::string &what,
                            ncclComm_t comm, int line) {
  if (result == ncclSuccess)
    return 0;
  return failWith(what + " failed: " + ncclText(result, comm) +
                  rt::foreignWhere(__FILE__, line));
}

int32_t NcclComm::checkCuda(cudaError_t result, const std::string &what,
                            int line) {
  if (result == cudaSuccess)
    return 0;
  return failWith(what + " failed: " + cudaGetErrorString(result) +
                  rt::foreignWhere(__FILE__, line));
}

std::string NcclComm::groupName(int32_t group) const {
  return "group " + std::to_string(group) + " (axes " +
         axesString(groupAxes[group]) + ")";
}

int32_t NcclComm::prepare(const char *call, int64_t count, loom_dtype dtype,
                          ncclDataType_t &type, size_t &bytes) {
  if (aborted)
    return failWith(abortMessage);
  // Indexed by loom_dtype.
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclInt32,
                                  ncclInt64, ncclBfloat16};
  int index = static_cast<int>(dtype);
  if (index < 0 || index >= static_cast<int>(std::size(types)))
    return failWith(std::string(call) + ": unknown dtype " +
                    std::to_string(index));
  type = types[index];
  if (count < 0)
    return failWith(std::string(call) + ": negative count " +
                    std::to_string(count));
  bytes = static_cast<size_t>(count * loom_dtype_bytes(dtype));
  return 0;
}

int32_t NcclComm::prepareCollective(const char *call, int32_t group,
                                    int64_t count, loom_dtype dtype,
                                    const loom_reduction *op,
                                    std::optional<int32_t> slot,
                                    Collective &out) {
  if (int32_t status = prepare(call, count, dtype, out.type, out.bytes))
    return status;
  if (group < 0 || group >= static_cast<int32_t>(groups.size()))
    return failWith(std::string(call) + ": no group " + std::to_string(group) +
                    " (the program has " + std::to_string(groups.size()) + ")");
  out.comm = groups[group];
  out.what = std::string(call) + " on " + groupName(group);
  if (op) {
    // Indexed by loom_reduction.
    const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclMin};
    int index = static_cast<int>(*op);
    if (index < 0 || index >= static_cast<int>(std::size(ops)))
      return failWith(std::string(call) + ": unknown reduction " +
                      std::to_string(index));
    out.op = ops[index];
  }
  if (slot) {
    if (std::string failure = streams.claim(*slot, out.what); !failure.empty())
      return failWith(failure);
    out.slot = slot;
  }
  // The sends before a collective go first, in the program's order.
  return flush();
}

std::string NcclComm::Collective::named() const {
  return slot ? what + " under slot " + std::to_string(*slot) : what;
}

template <typename Issue>
int32_t NcclComm::onCommStream(const Collective &c, Issue issue) {
  std::string name = c.named();
  // The transfer waits for the work enqueued on the compute stream so far:
  // its operand, and the kernels that last used the buffers it writes.
  if (std::string failure = streams.waitForCompute(name); !failure.empty())
    return failWith(failure);
  int32_t status = issue(streams.communication());
  if (status == 0 && c.slot) {
    // A start: the compute stream waits for the slot's event in wait(slot).
    std::string failure = streams.recordStart(*c.slot, c.what, name);
    if (failure.empty())
      return 0;
    status = failWith(failure);
  }
  // A blocking collective, or a start that failed: the compute stream
  // waits at once, so that nothing the call left on the communication
  // stream touches a buffer the caller reuses (a failure keeps its own
  // message).
  std::string failure = streams.computeWaits(name);
  if (status != 0)
    return status;
  return failure.empty() ? 0 : failWith(failure);
}

int32_t NcclComm::allReduce(int32_t group, void *buf, int64_t count,
                            loom_dtype dtype, loom_reduction op,
                            std::optional<int32_t> slot) {
  Collective c;
  if (int32_t status =
          prepareCollective("ncclAllReduce", group, count, dtype, &op, slot, c))
    return status;
  return onCommStream(c, [&](cudaStream_t stream) {
    return checkNccl(ncclAllReduce(buf, buf, static_cast<size_t>(count), c.type,
                                   c.op, c.comm, stream),
                     c.named(), c.comm);
  });
}

int32_t NcclComm::allGather(int32_t group, const void *send, void *recv,
                            int64_t count, loom_dtype dtype,
                            std::optional<int32_t> slot) {
  Collective c;
  if (int32_t status = prepareCollective("ncclAllGather", group, count, dtype,
                                         nullptr, slot, c))
    return status;
  return onCommStream(c, [&](cudaStream_t stream) {
    return checkNccl(ncclAllGather(send, recv, static_cast<size_t>(count),
                                   c.type, c.comm, stream),
                     c.named(), c.comm);
  });
}

int32_t NcclComm::reduceScatter(int32_t group, const void *send, void *recv,
                                int64_t count, loom_dtype dtype,
                                loom_reduction op,
                                std::optional<int32_t> slot) {
  Collective c;
  if (int32_t status = prepareCollective("ncclReduceScatter", group, count,
                                         dtype, &op, slot, c))
    return status;
  return onCommStream(c, [&](cudaStream_t stream) {
    return checkNccl(ncclReduceScatter(send, recv, static_cast<size_t>(count),
                                       c.type, c.op, c.comm, stream),
                     c.named(), c.comm);
  });
}

int32_t NcclComm::allToAll(int32_t group, const void *send, void *recv,
                           int64_t count, loom_dtype dtype) {
  Collective c;
  if (int32_t status = prepareCollective("all_to_all", group, count, dtype,
                                         nullptr, std::nullopt, c))
    return status;
  return onCommStream(c, [&](cudaStream_t stream) {
    std::string on = " of all_to_all on " + groupName(group);
    if (ncclResult_t result = ncclGroupStart())
      return checkNccl(result, "ncclGroupStart" + on, c.comm);
    // Block j goes to member j; block i comes from member i.
    const auto *from = static_cast<const unsigned char *>(send);
    auto *to = static_cast<unsigned char *>(recv);
    std::string what = "ncclGroupEnd" + on;
    ncclResult_t result = ncclSuccess;
    for (int64_t j = 0; j < groupMembers[group] && result == ncclSuccess; ++j) {
      int member = static_cast<int>(j);
      result = ncclSend(from + j * c.bytes, static_cast<size_t>(count), c.type,
                        member, c.comm, stream);
      if (result == ncclSuccess)
        result = ncclRecv(to + j * c.bytes, static_cast<size_t>(count), c.type,
                          member, c.comm, stream);
      if (result != ncclSuccess)
        what = "ncclSend / ncclRecv with member " + std::to_string(j) + on;
    }
    ncclResult_t end = ncclGroupEnd();
    return checkNccl(result != ncclSuccess ? result : end, what, c.comm);
  });
}

int32_t NcclComm::wait(int32_t slot) {
  // Once aborted, every start fails too: the slots are never looked at
  // again.
  if (aborted)
    return failWith(abortMessage);
  std::string failure = streams.wait(slot);
  return failure.empty() ? 0 : failWith(failure);
}

int32_t NcclComm::send(int32_t peer, int32_t tag, const void *buf,
                       int64_t count, loom_dtype dtype) {
  ncclDataType_t type;
  size_t bytes = 0;
  if (int32_t status = prepare("send", count, dtype, type, bytes))
    return status;
  std::string to = "send to world rank " + std::to_string(peer);
  if (peer < 0 || peer >= worldSize)
    return failWith(to + ": not a rank of a world of " +
                    std::to_string(worldSize));
  if (tag < 0 || tag > kMaxTag)
    return failWith(to + ": tag " + std::to_string(tag) + " is outside 0.." +
                    std::to_string(kMaxTag));
  // Nothing to stage (the recv of no elements does nothing either).
  if (count == 0)
    return 0;
  // The copy lets the caller reuse `buf` at once (stream order) and the
  // send wait, queued, for the recv it pairs with.
  cudaStream_t stream = streams.compute();
  void *staging = nullptr;
  if (checkCuda(cudaMallocAsync(&staging, bytes, stream),
                "cudaMallocAsync for the " + to))
    return LOOM_ERROR_COMMUNICATION;
  if (checkCuda(cudaMemcpyAsync(staging, buf, bytes, cudaMemcpyDeviceToDevice,
                                stream),
                "cudaMemcpyAsync for the " + to)) {
    cudaFreeAsync(staging, stream);
    return LOOM_ERROR_COMMUNICATION;
  }
  queuedSends.push_back({staging, static_cast<size_t>(count), type, peer});
  return 0;
}

int32_t NcclComm::recv(int32_t peer, int32_t tag, void *buf, int64_t count,
                       loom_dtype dtype) {
  Transfer transfer = {buf, 0, ncclFloat32, peer};
  size_t bytes = 0;
  if (int32_t status = prepare("recv", count, dtype, transfer.type, bytes))
    return status;
  std::string from = "recv from world rank " + std::to_string(peer);
  if (peer < 0 || peer >= worldSize)
    return failWith(from + ": not a rank of a world of " +
                    std::to_string(worldSize));
  if (tag < 0 || tag > kMaxTag)
    return failWith(from + ": tag " + std::to_string(tag) + " is outside 0.." +
                    std::to_string(kMaxTag));
  if (count == 0)
    return 0;
  transfer.count = static_cast<size_t>(count);
  return issue(&transfer);
}

int32_t NcclComm::flush() {
  if (aborted)
    return failWith(abortMessage);
  return queuedSends.empty() ? 0 : issue(nullptr);
}

int32_t NcclComm::issue(const Transfer *recv) {
  std::string what =
      "ncclGroupEnd of " + std::to_string(queuedSends.size()) +
      " queued send(s)" +
      (recv ? " and the recv from world rank " + std::to_string(recv->peer)
            : std::string());
  cudaStream_t stream = streams.compute();
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) {
    what = "ncclGroupStart";
  } else {
    for (const Transfer &send : queuedSends) {
      result =
          ncclSend(send.buf, send.count, send.type, send.peer, world, stream);
      if (result != ncclSuccess) {
        what = "ncclSend to world rank " + std::to_string(send.peer);
        break;
      }
    }
    if (result == ncclSuccess && recv) {
      result = ncclRecv(recv->buf, recv->count, recv->type, recv->peer, world,
                        stream);
      if (result != ncclSuccess)
        what = "ncclRecv from world rank " + std::to_string(recv->peer);
    }
    ncclResult_t end = ncclGroupEnd();
    if (result == ncclSuccess)
      result = end;
  }
  // Stream-ordered: freed once the group's transfers are done.
  for (const Transfer &send : queuedSends)
    cudaFreeAsync(send.buf, stream);
  queuedSends.clear();
  return checkNccl(result, what, world);
}

std::string NcclComm::abortAll(std::string message) {
  for (const Transfer &send : queuedSends)
    cudaFreeAsync(send.buf, streams.compute());
  queuedSends.clear();
  for (ncclComm_t &comm : groups)
    if (comm) {
      ncclCommAbort(comm);
      comm = nullptr;
    }
  if (world) {
    ncclCommAbort(world);
    world = nullptr;
  }
  aborted = true;
  abortMessage = message;
  error = message;
  return message;
}

std::string NcclComm::synchronize(double timeoutSeconds) {
  if (aborted)
    return abortMessage;
  std::string aborting =
      "; communicators aborted (rank " + std::to_string(worldRank) + ")";
  if (flush())
    return abortAll("NCCL watchdog: " + error + aborting);
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    // Both streams: a function that failed between a start and its wait
    // leaves the transfer on the communication stream alone.
    bool done = false;
    if (std::string failure = streams.poll(done); !failure.empty())
      return abortAll("NCCL watchdog: " + failure + aborting);
    if (done)
      return "";
    for (size_t g = 0; g <= groups.size(); ++g) {
      ncclComm_t comm = g < groups.size() ? groups[g] : world;
      ncclResult_t async = ncclSuccess;
      if (ncclResult_t result = ncclCommGetAsyncError(comm, &async))
        async = result;
      if (async == ncclSuccess || async == ncclInProgress)
        continue;
      std::string which =
          g < groups.size()
              ? "the communicator of " + groupName(static_cast<int32_t>(g))
              : std::string("the world communicator");
      return abortAll("NCCL watchdog: " + which +
                      " failed: " + ncclText(async, comm) + aborting);
    }
    std::chrono::duration<double> waited =
        std::chrono::steady_clock::now() - start;
    if (timeoutSeconds > 0 && waited.count() >= timeoutSeconds) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
      return abortAll(std::string("NCCL watchdog: no progress for ") + seconds +
                      " s" + aborting);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

} // namespace loom::cuda_rt
