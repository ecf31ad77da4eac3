//===- StagedComm.cpp - loom_comm through pinned host memory --------------===//
//
// Each collective lays its send blocks at the start of the staging area
// and its receive blocks after them (64-byte aligned), so that the host
// callback never reads and writes the same bytes unless it is in place
// (all_reduce).
//
//===----------------------------------------------------------------------===//

#include "StagedComm.h"

namespace loom::cuda_rt {
namespace {

/// CUDA's text for `code` and where the failed call is (the caller's line).
std::string cudaText(cudaError_t code, int line = __builtin_LINE()) {
  return cudaGetErrorString(code) + rt::foreignWhere(__FILE__, line);
}

/// Where the receive blocks start after `sendBytes` of send blocks.
size_t receiveOffset(size_t sendBytes) { return (sendBytes + 63) / 64 * 64; }

} // namespace

template <typename Transfer>
int32_t StagedComm::start(const char *call, int32_t slot, int32_t group,
                          Transfer transfer) {
  std::string named = std::string(call) + " on group " + std::to_string(group);
  if (slot < 0)
    return failWith(named + ": negative slot " + std::to_string(slot));
  if (static_cast<size_t>(slot) < started.size() && started[slot].call)
    return failWith(named + ": slot " + std::to_string(slot) + " still has " +
                    started[slot].call + " on group " +
                    std::to_string(started[slot].group) + " in flight");
  if (int32_t status = transfer())
    return status;
  if (static_cast<size_t>(slot) >= started.size())
    started.resize(static_cast<size_t>(slot) + 1);
  started[slot] = {call, group};
  return 0;
}

std::unique_ptr<StagedComm> StagedComm::create(const StagedCommConfig &config,
                                               cudaStream_t stream,
                                               rt::Status &status) {
  auto fail = [&status](loom_status_code code, std::string message) {
    status = rt::Status(code, std::move(message));
    return nullptr;
  };
  if (!config.host || !config.hostError) {
    return fail(LOOM_ERROR_INVALID_ARGUMENT,
                "StagedComm needs a host communicator and its error function");
  }
  std::unique_ptr<StagedComm> self(new StagedComm());
  int64_t gridRank = static_cast<int64_t>(config.gridShape.size());
  for (size_t g = 0; g < config.groups.size(); ++g) {
    int64_t members = 1;
    for (int16_t axis : config.groups[g]) {
      if (axis < 0 || axis >= gridRank) {
        return fail(LOOM_ERROR_INVALID_ARGUMENT,
                    "group " + std::to_string(g) + " names axis " +
                        std::to_string(axis) + " of a " +
                        std::to_string(gridRank) + "-d grid");
      }
      members *= config.gridShape[axis];
    }
    self->groupMembers.push_back(members);
  }
  self->host = config.host;
  self->hostError = config.hostError;
  self->stream = stream;

  loom::rt::fillCommTable(self->table, self.get());
  return self;
}

int32_t StagedComm::allReduceStart(int32_t slot, int32_t group, void *buf,
                                   int64_t count, loom_dtype dtype,
                                   loom_reduction op) {
  return start("all_reduce", slot, group,
               [&] { return allReduce(group, buf, count, dtype, op); });
}

int32_t StagedComm::allGatherStart(int32_t slot, int32_t group,
                                   const void *send, void *recv, int64_t count,
                                   loom_dtype dtype) {
  return start("all_gather", slot, group,
               [&] { return allGather(group, send, recv, count, dtype); });
}

int32_t StagedComm::reduceScatterStart(int32_t slot, int32_t group,
                                       const void *send, void *recv,
                                       int64_t count, loom_dtype dtype,
                                       loom_reduction op) {
  return start("reduce_scatter", slot, group, [&] {
    return reduceScatter(group, send, recv, count, dtype, op);
  });
}

StagedComm::~StagedComm() {
  if (staging)
    cudaFreeHost(staging);
}

int32_t StagedComm::failWith(std::string message) {
  error = std::move(message);
  return LOOM_ERROR_COMMUNICATION;
}

int32_t StagedComm::prepare(const char *call, int64_t count, loom_dtype dtype,
                            size_t &bytes) {
  int index = static_cast<int>(dtype);
  if (index < LOOM_DTYPE_F32 || index > LOOM_DTYPE_BF16)
    return failWith(std::string(call) + ": unknown dtype " +
                    std::to_string(index));
  if (count < 0)
    return failWith(std::string(call) + ": negative count " +
                    std::to_string(count));
  bytes = static_cast<size_t>(count * loom_dtype_bytes(dtype));
  return 0;
}

int32_t StagedComm::prepareCollective(const char *call, int32_t group,
                                      int64_t count, loom_dtype dtype,
                                      size_t &bytes, size_t &members) {
  if (int32_t status = prepare(call, count, dtype, bytes))
    return status;
  if (group < 0 || group >= static_cast<int32_t>(groupMembers.size()))
    return failWith(std::string(call) + ": no group " + std::to_string(group) +
                    " (the program has " + std::to_string(groupMembers.size()) +
                    ")");
  members = static_cast<size_t>(groupMembers[group]);
  return 0;
}

int32_t StagedComm::reserve(const char *call, size_t bytes) {
  if (bytes <= stagingBytes)
    return 0;
  if (staging)
    cudaFreeHost(staging);
  staging = nullptr;
  stagingBytes = 0;
  void *pinned = nullptr;
  if (cudaError_t code = cudaMallocHost(&pinned, bytes))
    return failWith(std::string(call) + ": cudaMallocHost of " +
                    std::to_string(bytes) + " bytes failed: " + cudaText(code));
  staging = static_cast<unsigned char *>(pinned);
  stagingBytes = bytes;
  return 0;
}

int32_t StagedComm::download(const char *call, const void *from, size_t bytes,
                             size_t offset) {
  if (bytes == 0)
    return 0;
  if (cudaError_t code = cudaMemcpyAsync(staging + offset, from, bytes,
                                         cudaMemcpyDeviceToHost, stream))
    return failWith(std::string(call) +
                    ": cudaMemcpyAsync to the host failed: " + cudaText(code));
  if (cudaError_t code = cudaStreamSynchronize(stream))
    return failWith(std::string(call) +
                    ": cudaStreamSynchronize after the copy to the host "
                    "failed: " +
                    cudaText(code));
  return 0;
}

int32_t StagedComm::upload(const char *call, void *to, size_t bytes,
                           size_t offset) {
  if (bytes == 0)
    return 0;
  if (cudaError_t code = cudaMemcpyAsync(to, staging + offset, bytes,
                                         cudaMemcpyHostToDevice, stream))
    return failWith(
        std::string(call) +
        ": cudaMemcpyAsync to the device failed: " + cudaText(code));
  // The staging area is reused by the next callback.
  if (cudaError_t code = cudaStreamSynchronize(stream))
    return failWith(std::string(call) +
                    ": cudaStreamSynchronize after the copy to the device "
                    "failed: " +
                    cudaText(code));
  return 0;
}

int32_t StagedComm::checkHost(int32_t status) {
  if (status != 0)
    error = hostError();
  return status;
}

int32_t StagedComm::allReduce(int32_t group, void *buf, int64_t count,
                              loom_dtype dtype, loom_reduction op) {
  const char *call = "all_reduce";
  size_t bytes = 0, members = 0;
  if (prepareCollective(call, group, count, dtype, bytes, members) ||
      reserve(call, bytes) || download(call, buf, bytes, 0))
    return LOOM_ERROR_COMMUNICATION;
  if (int32_t status = checkHost(
          host->all_reduce(host->ctx, group, staging, count, dtype, op)))
    return status;
  return upload(call, buf, bytes, 0);
}

int32_t StagedComm::allGather(int32_t group, const void *send, void *recv,
                              int64_t count, loom_dtype dtype) {
  const char *call = "all_gather";
  size_t bytes = 0, members = 0;
  if (prepareCollective(call, group, count, dtype, bytes, members))
    return LOOM_ERROR_COMMUNICATION;
  size_t offset = receiveOffset(bytes), received = bytes * members;
  if (reserve(call, offset + received) || download(call, send, bytes, 0))
    return LOOM_ERROR_COMMUNICATION;
  if (int32_t status = checkHost(host->all_gather(
          host->ctx, group, staging, staging + offset, count, dtype)))
    return status;
  return upload(call, recv, received, offset);
}

int32_t StagedComm::reduceScatter(int32_t group, const void *send, void *recv,
                                  int64_t count, loom_dtype dtype,
                                  loom_reduction op) {
  const char *call = "reduce_scatter";
  size_t bytes = 0, members = 0;
  if (prepareCollective(call, group, count, dtype, bytes, members))
    return LOOM_ERROR_COMMUNICATION;
  size_t sent = bytes * members, offset = receiveOffset(sent);
  if (reserve(call, offset + bytes) || download(call, send, sent, 0))
    return LOOM_ERROR_COMMUNICATION;
  if (int32_t status = checkHost(host->reduce_scatter(
          host->ctx, group, staging, staging + offset, count, dtype, op)))
    return status;
  return upload(call, recv, bytes, offset);
}

int32_t StagedComm::allToAll(int32_t group, const void *send, void *recv,
                             int64_t count, loom_dtype dtype) {
  const char *call = "all_to_all";
  size_t bytes = 0, members = 0;
  if (prepareCollective(call, group, count, dtype, bytes, members))
    return LOOM_ERROR_COMMUNICATION;
  size_t sent = bytes * members, offset = receiveOffset(sent);
  if (reserve(call, offset + sent) || download(call, send, sent, 0))
    return LOOM_ERROR_COMMUNICATION;
  if (int32_t status = checkHost(host->all_to_all(
          host->ctx, group, staging, staging + offset, count, dtype)))
    return status;
  return upload(call, recv, sent, offset);
}

int32_t StagedComm::wait(int32_t slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= started.size() ||
      !started[slot].call)
    return failWith("wait: nothing is in flight under slot " +
                    std::to_string(slot));
  // The start finished its transfer before it returned.
  started[slot] = {};
  return 0;
}

int32_t StagedComm::send(int32_t peer, int32_t tag, const void *buf,
                         int64_t count, loom_dtype dtype) {
  const char *call = "send";
  size_t bytes = 0;
  if (prepare(call, count, dtype, bytes) || reserve(call, bytes) ||
      download(call, buf, bytes, 0))
    return LOOM_ERROR_COMMUNICATION;
  // The host send keeps its own copy: the staging area is free at once.
  return checkHost(host->send(host->ctx, peer, tag, staging, count, dtype));
}

int32_t StagedComm::recv(int32_t peer, int32_t tag, void *buf, int64_t count,
                         loom_dtype dtype) {
  const char *call = "recv";
  size_t bytes = 0;
  if (prepare(call, count, dtype, bytes) || reserve(call, bytes))
    return LOOM_ERROR_COMMUNICATION;
  if (int32_t status =
          checkHost(host->recv(host->ctx, peer, tag, staging, count, dtype)))
    return status;
  return upload(call, buf, bytes, 0);
}

std::string StagedComm::synchronize(double) {
  if (cudaError_t code = cudaStreamSynchronize(stream))
    return std::string("cudaStreamSynchronize failed: ") + cudaText(code);
  return "";
}

} // namespace loom::cuda_rt
