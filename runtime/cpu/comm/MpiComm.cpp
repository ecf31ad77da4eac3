//===- MpiComm.cpp - loom_comm over MPI -----------------------------------===//
//
// create() checks the configuration, then splits one communicator per
// group index off a duplicate of the world communicator. MPI_Comm_split is
// collective over the world, so every rank splits as many times as the
// rank with the most groups (stages may list different groups), with
// MPI_UNDEFINED past its own list. A group's color is the world rank of its
// member 0, which no other group of the same index shares (stages hold
// disjoint ranks); its key is the member index, so the new communicator's
// ranks are the member order.
//
//===----------------------------------------------------------------------===//

#include "MpiComm.h"

#include "Bf16.h"
#include "GroupSplit.h"
#include "Status.h"

#include <climits>
#include <cstring>

namespace loom::rt {
namespace {

/// Pipeline send / recv tags are 0..kMaxTag (MPI guarantees 32767).
constexpr int kMaxTag = 32767;

/// MPI's text for error `code`.
std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

/// MPI's text for error `code` and where the failed call is (a foreign
/// error's file and line, Status.h).
std::string mpiErrorString(int code, int line = __builtin_LINE()) {
  return mpiErrorText(code) + foreignWhere(__FILE__, line);
}

std::string axesString(const std::vector<int16_t> &axes) {
  std::string text = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? ", " : "") + std::to_string(axes[i]);
  return text + "]";
}

/// The user-defined MPI operations on bf16 (carried as MPI_UINT16_T): each
/// combines in float and rounds once.
template <typename Combine> void bf16Reduce(void *in, void *inout, int *len) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = toBf16Bits(Combine()(fromBf16Bits(a[i]), fromBf16Bits(b[i])));
}
struct Sum {
  float operator()(float a, float b) const { return a + b; }
};
struct Max {
  float operator()(float a, float b) const { return a > b ? a : b; }
};
struct Min {
  float operator()(float a, float b) const { return a < b ? a : b; }
};
void bf16Sum(void *in, void *inout, int *len, MPI_Datatype *) {
  bf16Reduce<Sum>(in, inout, len);
}
void bf16Max(void *in, void *inout, int *len, MPI_Datatype *) {
  bf16Reduce<Max>(in, inout, len);
}
void bf16Min(void *in, void *inout, int *len, MPI_Datatype *) {
  bf16Reduce<Min>(in, inout, len);
}

/// Checks `config` on its own; returns the problem, or "" when it is fine.
/// Sets `linear` to this rank's grid index.
std::string checkConfig(const MpiCommConfig &config, int worldRank,
                        int worldSize, int64_t &linear) {
  int64_t devices = 1;
  for (int64_t extent : config.gridShape) {
    if (extent <= 0)
      return "the grid has an axis of size " + std::to_string(extent);
    devices *= extent;
  }
  if (static_cast<int64_t>(config.gridRanks.size()) != devices)
    return "the grid has " + std::to_string(devices) + " devices but " +
           std::to_string(config.gridRanks.size()) + " world ranks";
  linear = -1;
  for (size_t i = 0; i < config.gridRanks.size(); ++i) {
    int rank = config.gridRanks[i];
    if (rank < 0 || rank >= worldSize)
      return "world rank " + std::to_string(rank) + " of the grid is not in " +
             "a world of " + std::to_string(worldSize);
    if (rank != worldRank)
      continue;
    if (linear >= 0)
      return "world rank " + std::to_string(worldRank) +
             " is listed twice in the grid";
    linear = static_cast<int64_t>(i);
  }
  if (linear < 0)
    return "world rank " + std::to_string(worldRank) +
           " is not in its stage's grid";
  int64_t gridRank = static_cast<int64_t>(config.gridShape.size());
  for (size_t g = 0; g < config.groups.size(); ++g) {
    const std::vector<int16_t> &axes = config.groups[g];
    for (size_t i = 0; i < axes.size(); ++i) {
      bool repeated = false;
      for (size_t j = 0; j < i; ++j)
        repeated |= axes[j] == axes[i];
      if (axes[i] < 0 || axes[i] >= gridRank || repeated)
        return "group " + std::to_string(g) + " (axes " + axesString(axes) +
               ") names an axis twice or one outside a " +
               std::to_string(gridRank) + "-d grid";
    }
  }
  return "";
}

} // namespace

MpiCommConfig
MpiCommConfig::forStageGrid(int rank, const std::vector<int64_t> &gridShape,
                            const std::vector<std::vector<int64_t>> &groups) {
  MpiCommConfig config;
  config.gridShape = gridShape;
  if (config.gridShape.empty())
    config.gridShape = {1};
  int64_t devices = 1;
  for (int64_t extent : config.gridShape)
    devices *= extent;
  int64_t first = (rank / devices) * devices;
  for (int64_t d = 0; d < devices; ++d)
    config.gridRanks.push_back(static_cast<int>(first + d));
  for (const auto &group : groups)
    config.groups.emplace_back(group.begin(), group.end());
  return config;
}

std::unique_ptr<MpiComm> MpiComm::create(const MpiCommConfig &config,
                                         Status &status) {
  auto fail = [&status](loom_status_code code, std::string message) {
    status = Status(code, std::move(message));
    return nullptr;
  };
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    return fail(LOOM_ERROR_INVALID_ARGUMENT, "MPI is not initialized");
  }
  std::unique_ptr<MpiComm> self(new MpiComm());
  // A duplicate keeps our traffic apart from the caller's and lets us set
  // MPI_ERRORS_RETURN without touching the caller's communicator.
  if (int code = MPI_Comm_dup(config.world, &self->world)) {
    return fail(LOOM_ERROR_COMMUNICATION,
                "MPI_Comm_dup failed: " + mpiErrorString(code));
  }
  MPI_Comm_set_errhandler(self->world, MPI_ERRORS_RETURN);
  int worldRank = 0, worldSize = 0;
  MPI_Comm_rank(self->world, &worldRank);
  MPI_Comm_size(self->world, &worldSize);
  int64_t linear = 0;
  std::string local = checkConfig(config, worldRank, worldSize, linear);

  // Every rank learns whether any rank's configuration is wrong (so that
  // none waits in a split the others skip) and how many splits to make.
  int agreed[2] = {local.empty() ? 0 : 1,
                   static_cast<int>(config.groups.size())};
  if (int code = MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MAX,
                               self->world)) {
    return fail(LOOM_ERROR_COMMUNICATION,
                "MPI_Allreduce of the configuration failed: " +
                    mpiErrorString(code));
  }
  if (agreed[0]) {
    return fail(LOOM_ERROR_INVALID_ARGUMENT,
                local.empty() ? "another rank's communicator configuration is "
                                "invalid"
                              : local);
  }

  self->coords = gridCoordinates(linear, config.gridShape);
  self->groupAxes = config.groups;
  for (int g = 0; g < agreed[1]; ++g) {
    int color = MPI_UNDEFINED, key = 0;
    int64_t members = 1;
    if (g < static_cast<int>(config.groups.size())) {
      GroupSplit split = groupSplit(config.gridShape, config.gridRanks,
                                    self->coords, config.groups[g]);
      color = split.color;
      key = split.key;
      members = split.members;
    }
    MPI_Comm comm = MPI_COMM_NULL;
    if (int code = MPI_Comm_split(self->world, color, key, &comm)) {
      return fail(LOOM_ERROR_COMMUNICATION,
                  "MPI_Comm_split for group " + std::to_string(g) +
                      " failed: " + mpiErrorString(code));
    }
    self->groups.push_back(comm);
    if (comm == MPI_COMM_NULL)
      continue;
    int size = 0, rank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    if ((size != members || rank != key) && local.empty())
      local = "group " + std::to_string(g) + " (axes " +
              axesString(config.groups[g]) + ") has " + std::to_string(size) +
              " members where the grid gives " + std::to_string(members) +
              ": the ranks of a stage disagree on its grid or groups";
  }
  int failed = local.empty() ? 0 : 1;
  if (int code = MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX,
                               self->world)) {
    return fail(LOOM_ERROR_COMMUNICATION,
                "MPI_Allreduce of the group check failed: " +
                    mpiErrorString(code));
  }
  if (failed) {
    return fail(LOOM_ERROR_INVALID_ARGUMENT,
                local.empty() ? "another rank's groups do not match its grid"
                              : local);
  }

  MPI_User_function *bf16Functions[3] = {bf16Sum, bf16Max, bf16Min};
  for (int k = 0; k < 3; ++k)
    if (int code =
            MPI_Op_create(bf16Functions[k], /*commute=*/1, &self->bf16Ops[k])) {
      return fail(LOOM_ERROR_COMMUNICATION,
                  "MPI_Op_create failed: " + mpiErrorString(code));
    }

  fillCommTable(self->table, self.get());
  return self;
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  for (auto &pending : pendingSends)
    MPI_Wait(&pending->request, MPI_STATUS_IGNORE);
  // Left in flight by a function that failed before its waits (MPI has no
  // way to cancel a collective).
  for (InFlight &transfer : inFlight)
    MPI_Wait(&transfer.request, MPI_STATUS_IGNORE);
  for (MPI_Comm &comm : groups)
    if (comm != MPI_COMM_NULL)
      MPI_Comm_free(&comm);
  if (world != MPI_COMM_NULL)
    MPI_Comm_free(&world);
  for (MPI_Op &op : bf16Ops)
    if (op != MPI_OP_NULL)
      MPI_Op_free(&op);
}

int32_t MpiComm::failWith(std::string message) {
  error = std::move(message);
  return LOOM_ERROR_COMMUNICATION;
}

MPI_Comm MpiComm::groupComm(const char *call, int32_t group) {
  if (group < 0 || group >= static_cast<int32_t>(groupAxes.size())) {
    failWith(std::string(call) + ": no group " + std::to_string(group) +
             " (the program has " + std::to_string(groupAxes.size()) + ")");
    return MPI_COMM_NULL;
  }
  return groups[group];
}

int32_t MpiComm::check(int code, const char *call, int32_t group, int line) {
  if (code == MPI_SUCCESS)
    return 0;
  return failWith(std::string(call) + " on group " + std::to_string(group) +
                  " (axes " + axesString(groupAxes[group]) + ") failed: " +
                  mpiErrorText(code) + foreignWhere(__FILE__, line));
}

int32_t MpiComm::prepare(const char *call, int64_t count, loom_dtype dtype,
                         MPI_Datatype &type, int &mpiCount) {
  type = MPI_DATATYPE_NULL;
  switch (dtype) {
  case LOOM_DTYPE_F32:
    type = MPI_FLOAT;
    break;
  case LOOM_DTYPE_F64:
    type = MPI_DOUBLE;
    break;
  case LOOM_DTYPE_I32:
    type = MPI_INT32_T;
    break;
  case LOOM_DTYPE_I64:
    type = MPI_INT64_T;
    break;
  case LOOM_DTYPE_BF16:
    type = MPI_UINT16_T;
    break;
  }
  if (type == MPI_DATATYPE_NULL)
    return failWith(std::string(call) + ": unknown dtype " +
                    std::to_string(static_cast<int>(dtype)));
  if (count < 0 || count > INT_MAX)
    return failWith(std::string(call) + ": " + std::to_string(count) +
                    " elements do not fit MPI's int counts");
  mpiCount = static_cast<int>(count);
  return 0;
}

MPI_Op MpiComm::reductionOp(const char *call, loom_dtype dtype,
                            loom_reduction op) {
  int index = op == LOOM_REDUCE_SUM   ? 0
              : op == LOOM_REDUCE_MAX ? 1
              : op == LOOM_REDUCE_MIN ? 2
                                      : -1;
  if (index < 0) {
    failWith(std::string(call) + ": unknown reduction " +
             std::to_string(static_cast<int>(op)));
    return MPI_OP_NULL;
  }
  if (dtype == LOOM_DTYPE_BF16)
    return bf16Ops[index];
  MPI_Op ops[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
  return ops[index];
}

int32_t MpiComm::prepareCollective(const char *call, int32_t group,
                                   int64_t count, loom_dtype dtype,
                                   const loom_reduction *op, Collective &out) {
  out.comm = groupComm(call, group);
  if (out.comm == MPI_COMM_NULL)
    return LOOM_ERROR_COMMUNICATION;
  if (int32_t status = prepare(call, count, dtype, out.type, out.count))
    return status;
  if (op) {
    out.op = reductionOp(call, dtype, *op);
    if (out.op == MPI_OP_NULL)
      return LOOM_ERROR_COMMUNICATION;
  }
  return 0;
}

int32_t MpiComm::allReduce(int32_t group, void *buf, int64_t count,
                           loom_dtype dtype, loom_reduction op) {
  const char *call = "MPI_Allreduce";
  Collective c;
  if (int32_t status = prepareCollective(call, group, count, dtype, &op, c))
    return status;
  return check(MPI_Allreduce(MPI_IN_PLACE, buf, c.count, c.type, c.op, c.comm),
               call, group);
}

int32_t MpiComm::allGather(int32_t group, const void *send, void *recv,
                           int64_t count, loom_dtype dtype) {
  const char *call = "MPI_Allgather";
  Collective c;
  if (int32_t status = prepareCollective(call, group, count, dtype, nullptr, c))
    return status;
  return check(
      MPI_Allgather(send, c.count, c.type, recv, c.count, c.type, c.comm), call,
      group);
}

int32_t MpiComm::reduceScatter(int32_t group, const void *send, void *recv,
                               int64_t count, loom_dtype dtype,
                               loom_reduction op) {
  const char *call = "MPI_Reduce_scatter_block";
  Collective c;
  if (int32_t status = prepareCollective(call, group, count, dtype, &op, c))
    return status;
  return check(
      MPI_Reduce_scatter_block(send, recv, c.count, c.type, c.op, c.comm), call,
      group);
}

int32_t MpiComm::allToAll(int32_t group, const void *send, void *recv,
                          int64_t count, loom_dtype dtype) {
  const char *call = "MPI_Alltoall";
  Collective c;
  if (int32_t status = prepareCollective(call, group, count, dtype, nullptr, c))
    return status;
  return check(
      MPI_Alltoall(send, c.count, c.type, recv, c.count, c.type, c.comm), call,
      group);
}

MPI_Request *MpiComm::startSlot(const char *call, int32_t slot, int32_t group) {
  if (slot < 0) {
    failWith(std::string(call) + ": slot " + std::to_string(slot));
    return nullptr;
  }
  if (static_cast<size_t>(slot) >= inFlight.size())
    inFlight.resize(slot + 1);
  InFlight &transfer = inFlight[slot];
  if (transfer.request != MPI_REQUEST_NULL) {
    failWith(std::string(call) + " on group " + std::to_string(group) +
             ": slot " + std::to_string(slot) + " still has " + transfer.call +
             " on group " + std::to_string(transfer.group) + " in flight");
    return nullptr;
  }
  transfer.call = call;
  transfer.group = group;
  return &transfer.request;
}

template <typename Post>
int32_t MpiComm::start(const char *call, int32_t slot, int32_t group,
                       int64_t count, loom_dtype dtype,
                       const loom_reduction *op, Post post) {
  Collective c;
  if (int32_t status = prepareCollective(call, group, count, dtype, op, c))
    return status;
  MPI_Request *request = startSlot(call, slot, group);
  if (!request)
    return LOOM_ERROR_COMMUNICATION;
  return check(post(c, request), call, group);
}

int32_t MpiComm::allReduceStart(int32_t slot, int32_t group, void *buf,
                                int64_t count, loom_dtype dtype,
                                loom_reduction op) {
  return start("MPI_Iallreduce", slot, group, count, dtype, &op,
               [&](const Collective &c, MPI_Request *request) {
                 return MPI_Iallreduce(MPI_IN_PLACE, buf, c.count, c.type, c.op,
                                       c.comm, request);
               });
}

int32_t MpiComm::allGatherStart(int32_t slot, int32_t group, const void *send,
                                void *recv, int64_t count, loom_dtype dtype) {
  return start("MPI_Iallgather", slot, group, count, dtype, nullptr,
               [&](const Collective &c, MPI_Request *request) {
                 return MPI_Iallgather(send, c.count, c.type, recv, c.count,
                                       c.type, c.comm, request);
               });
}

int32_t MpiComm::reduceScatterStart(int32_t slot, int32_t group,
                                    const void *send, void *recv, int64_t count,
                                    loom_dtype dtype, loom_reduction op) {
  return start("MPI_Ireduce_scatter_block", slot, group, count, dtype, &op,
               [&](const Collective &c, MPI_Request *request) {
                 return MPI_Ireduce_scatter_block(send, recv, c.count, c.type,
                                                  c.op, c.comm, request);
               });
}

int32_t MpiComm::wait(int32_t slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= inFlight.size() ||
      inFlight[slot].request == MPI_REQUEST_NULL)
    return failWith("wait: nothing is in flight under slot " +
                    std::to_string(slot));
  InFlight &transfer = inFlight[slot];
  // MPI_Wait frees the request (MPI_REQUEST_NULL: the slot is free again).
  int code = MPI_Wait(&transfer.request, MPI_STATUS_IGNORE);
  if (code == MPI_SUCCESS)
    return 0;
  transfer.request = MPI_REQUEST_NULL;
  return failWith(std::string("MPI_Wait for ") + transfer.call + " on group " +
                  std::to_string(transfer.group) + " (axes " +
                  axesString(groupAxes[transfer.group]) +
                  ") failed: " + mpiErrorString(code));
}

int32_t MpiComm::send(int32_t peer, int32_t tag, const void *buf, int64_t count,
                      loom_dtype dtype) {
  const char *call = "MPI_Isend";
  MPI_Datatype type;
  int n = 0;
  if (int32_t status = prepare(call, count, dtype, type, n))
    return status;
  if (tag < 0 || tag > kMaxTag)
    return failWith("send to world rank " + std::to_string(peer) + ": tag " +
                    std::to_string(tag) + " is outside 0.." +
                    std::to_string(kMaxTag));
  reapSends();
  auto pending = std::make_unique<PendingSend>();
  const auto *bytes = static_cast<const unsigned char *>(buf);
  pending->data.assign(bytes, bytes + count * loom_dtype_bytes(dtype));
  if (int code = MPI_Isend(pending->data.data(), n, type, peer, tag, world,
                           &pending->request))
    return failWith("MPI_Isend to world rank " + std::to_string(peer) +
                    " failed: " + mpiErrorString(code));
  pendingSends.push_back(std::move(pending));
  return 0;
}

void MpiComm::reapSends() {
  size_t kept = 0;
  for (auto &pending : pendingSends) {
    int done = 0;
    MPI_Test(&pending->request, &done, MPI_STATUS_IGNORE);
    if (!done)
      pendingSends[kept++] = std::move(pending);
  }
  pendingSends.resize(kept);
}

int32_t MpiComm::recv(int32_t peer, int32_t tag, void *buf, int64_t count,
                      loom_dtype dtype) {
  const char *call = "MPI_Recv";
  MPI_Datatype type;
  int n = 0;
  if (int32_t status = prepare(call, count, dtype, type, n))
    return status;
  MPI_Status status;
  if (int code = MPI_Recv(buf, n, type, peer, tag, world, &status))
    return failWith("MPI_Recv from world rank " + std::to_string(peer) +
                    " failed: " + mpiErrorString(code));
  int received = 0;
  MPI_Get_count(&status, type, &received);
  if (received != n)
    return failWith("MPI_Recv from world rank " + std::to_string(peer) +
                    " got " + std::to_string(received) + " elements, " +
                    "expected " + std::to_string(n));
  return 0;
}

} // namespace loom::rt
