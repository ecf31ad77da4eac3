//===- CApi.cpp - loom_cuda_runtime.h over the C++ runtime ----------------===//
//
// The C ABI's boundary: C++ exceptions (plan parsing) become statuses, and
// statuses their code and message here; nothing crosses as an exception.
// The code is the one the failing layer set (Status.h).
//
//===----------------------------------------------------------------------===//

#include "loom/loom_cuda_runtime.h"

#include "CudaDevice.h"
#include "Session.h"
#include "StagedComm.h"
#ifdef LOOM_HAVE_NCCL
#include "NcclComm.h"
#endif

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <dlfcn.h>
#include <exception>
#include <new>

struct loom_cuda_artifact {
  loom::rt::Artifact impl;
};

/// One rank: its GPU, how it reaches the others, the executor. Members go
/// in reverse order: the executor, then the communicators (which drain
/// their transfers on the stream), then the device and its stream.
struct loom_cuda_session {
  loom::cuda_rt::CudaDevice device;
  std::unique_ptr<loom::rt::MpiComm> hostComm;
  std::unique_ptr<loom::cuda_rt::StagedComm> staged;
#ifdef LOOM_HAVE_NCCL
  std::unique_ptr<loom::cuda_rt::NcclComm> nccl;
#endif
  std::unique_ptr<loom::rt::Session> impl;
  std::string commName = "none";
  std::string error;
};

namespace {

int32_t report(char *error, size_t size, const std::string &message,
               int32_t code) {
  if (error && size)
    std::snprintf(error, size, "%s", message.c_str());
  return code;
}

int32_t report(char *error, size_t size, const loom::rt::Status &status) {
  return report(error, size, status.message(), status.code());
}

int32_t sessionError(loom_cuda_session *session,
                     const loom::rt::Status &status) {
  session->error = status.message();
  return status.code();
}

/// Picks this rank's GPU: `device`, or when it is negative the rank's
/// index among the ranks of its node modulo the node's GPUs; and tells
/// whether another rank of the node drives the same one (NCCL refuses
/// that). Collective over MPI_COMM_WORLD, also when it fails: "" or why.
std::string pickDevice(int &device, bool &shared) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                          MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return "MPI_Comm_split_type failed";
  int local = 0, size = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &size);
  std::string error;
  if (device < 0) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      error = "no CUDA device on this node";
    else
      device = local % count;
  }
  std::vector<int> devices(size);
  MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  shared = std::count(devices.begin(), devices.end(), device) > 1;
  return error;
}

/// Gives `session` (its device and communication set up) the executor of
/// world rank `rank` over `comm`, allocates the state and the kernels'
/// context, and hands it out: a status, the message in `error`.
int32_t finishSession(std::unique_ptr<loom_cuda_session> session,
                      const loom::rt::Artifact &artifact, int32_t rank,
                      const loom_comm *comm, loom_cuda_session **out,
                      char *error, size_t errorSize) {
  loom::rt::Status status;
  try {
    session->impl = std::make_unique<loom::rt::Session>(
        artifact, session->device, rank, comm);
    status = session->impl->init();
  } catch (const std::exception &e) {
    status = loom::rt::invalidArgument(e.what());
  }
  if (status.ok()) {
    // The kernels' scratch: 64 MiB covers all but a bf16 embedding_grad,
    // which accumulates its table in f32 there (4 * V * D bytes: 154 MB
    // for GPT-2's 50257 x 768); the table is a parameter, so 4 bytes per
    // element of the largest one covers it.
    int64_t scratchBytes = int64_t(64) << 20;
    for (const auto &entry : session->impl->state)
      scratchBytes = std::max(scratchBytes, 4 * entry->spec.numElements());
    status = session->device.createContext(scratchBytes);
  }
  if (!status.ok())
    return report(error, errorSize, status);
  *out = session.release();
  return LOOM_OK;
}

/// Runs `action` on state tensor `index`: "" or its error, as a status.
template <typename Action>
int32_t onState(loom_cuda_session *session, int32_t index, Action action) {
  if (index < 0 || index >= static_cast<int32_t>(session->impl->state.size()))
    return sessionError(
        session,
        loom::rt::invalidArgument("no state tensor " + std::to_string(index)));
  if (loom::rt::Status status = action(*session->impl->state[index]);
      !status.ok())
    return sessionError(session, status);
  return LOOM_OK;
}

/// program.so's loom_cuda_* calls resolve in the global scope. This
/// library links libloom_cuda_kernels.so, but a host that loaded us with
/// RTLD_LOCAL (Python's ctypes does) left it out of that scope: promote it.
std::string exposeKernels() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&loom_cuda_context_create), &info) ||
      !info.dli_fname)
    return "cannot locate the CUDA kernel library";
  if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
    return std::string("cannot expose ") + info.dli_fname + ": " + dlerror();
  return "";
}

} // namespace

extern "C" {

int32_t loom_cuda_artifact_load(const char *path,
                                loom_cuda_artifact **out_artifact, char *error,
                                size_t error_size) {
  *out_artifact = nullptr;
  if (std::string message = exposeKernels(); !message.empty())
    return report(error, error_size, message, LOOM_ERROR_ARTIFACT);
  auto artifact = std::make_unique<loom_cuda_artifact>();
  std::string message;
  try {
    message = artifact->impl.load(path, "cuda");
  } catch (const std::exception &e) {
    message = std::string(path) + ": " + e.what();
  }
  if (!message.empty())
    return report(error, error_size, message, LOOM_ERROR_ARTIFACT);
  *out_artifact = artifact.release();
  return LOOM_OK;
}

void loom_cuda_artifact_free(loom_cuda_artifact *artifact) { delete artifact; }

int64_t loom_cuda_artifact_batch_rows(const loom_cuda_artifact *artifact) {
  return artifact->impl.batchRows;
}

int64_t loom_cuda_artifact_seq_len(const loom_cuda_artifact *artifact) {
  return artifact->impl.seqLen;
}

int32_t loom_cuda_artifact_world_size(const loom_cuda_artifact *artifact) {
  return static_cast<int32_t>(artifact->impl.worldSize());
}

int32_t loom_cuda_session_create(const loom_cuda_artifact *artifact,
                                 int32_t device,
                                 loom_cuda_session **out_session, char *error,
                                 size_t error_size) {
  *out_session = nullptr;
  const loom::rt::Artifact &a = artifact->impl;
  if (a.worldSize() != 1)
    return report(error, error_size,
                  "the artifact runs on " + std::to_string(a.worldSize()) +
                      " ranks: start them with MPI and create each with "
                      "loom_cuda_session_create_rank",
                  LOOM_ERROR_INVALID_ARGUMENT);
  auto session = std::make_unique<loom_cuda_session>();
  if (loom::rt::Status status = session->device.init(device); !status.ok())
    return report(error, error_size, status);
  return finishSession(std::move(session), a, 0, nullptr, out_session, error,
                       error_size);
}

int32_t loom_cuda_session_create_rank(const loom_cuda_artifact *artifact,
                                      int32_t device, loom_cuda_comm_kind comm,
                                      double timeout_seconds,
                                      loom_cuda_session **out_session,
                                      char *error, size_t error_size) {
  *out_session = nullptr;
  const loom::rt::Artifact &a = artifact->impl;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return report(error, error_size,
                  "MPI is not initialized (loom_cuda_session_create_rank "
                  "runs one rank of an MPI job)",
                  LOOM_ERROR_INVALID_ARGUMENT);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != a.worldSize())
    return report(error, error_size,
                  "the artifact runs on " + std::to_string(a.worldSize()) +
                      " ranks, but MPI started " + std::to_string(size),
                  LOOM_ERROR_INVALID_ARGUMENT);
  bool shared = false;
  auto session = std::make_unique<loom_cuda_session>();
  std::string message = pickDevice(device, shared);
  loom::rt::Status status = message.empty()
                                ? session->device.init(device)
                                : loom::rt::invalidArgument(message);

  // Every rank takes the same path: the choice is collective, and so is a
  // rank's failure to set up its GPU (the others would wait for it in the
  // collective setup below).
  int anywhere[2] = {shared ? 1 : 0, status.ok() ? 0 : 1};
  MPI_Allreduce(MPI_IN_PLACE, anywhere, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!status.ok())
    return report(error, error_size, status);
  if (anywhere[1])
    return report(error, error_size, "another rank could not set up its GPU",
                  LOOM_ERROR_INVALID_ARGUMENT);
  bool sharedAnywhere = anywhere[0] != 0;
#ifdef LOOM_HAVE_NCCL
  bool haveNccl = true;
#else
  bool haveNccl = false;
#endif
  if (comm == LOOM_CUDA_COMM_AUTO)
    comm = haveNccl && !sharedAnywhere ? LOOM_CUDA_COMM_NCCL
                                       : LOOM_CUDA_COMM_STAGED;
  if (comm == LOOM_CUDA_COMM_NCCL && !haveNccl)
    return report(error, error_size, "this runtime was built without NCCL",
                  LOOM_ERROR_INVALID_ARGUMENT);
  if (comm == LOOM_CUDA_COMM_NCCL && sharedAnywhere)
    return report(error, error_size,
                  "ranks share a GPU, which NCCL refuses: use the "
                  "staged backend (or one GPU per rank)",
                  LOOM_ERROR_INVALID_ARGUMENT);
  if (comm == LOOM_CUDA_COMM_NCCL) {
    std::string order = loom::rt::transfersInOrder(a);
    int ordered = order.empty() ? 1 : 0;
    if (!ordered)
      return report(error, error_size,
                    order + ": NCCL transfers match in order; use the staged "
                            "backend for this schedule",
                    LOOM_ERROR_INVALID_ARGUMENT);
  }

  loom::rt::MpiCommConfig config =
      loom::rt::MpiCommConfig::forStageGrid(rank, a.gridShape, a.groups);
  cudaStream_t stream = session->device.stream();
  const loom_comm *table = nullptr;
  if (comm == LOOM_CUDA_COMM_STAGED) {
    session->hostComm = loom::rt::MpiComm::create(config, message);
    if (!session->hostComm)
      return report(error, error_size, message, LOOM_ERROR_COMMUNICATION);
    loom::cuda_rt::StagedCommConfig staged;
    staged.host = session->hostComm->comm();
    loom::rt::MpiComm *host = session->hostComm.get();
    staged.hostError = [host] { return host->lastError(); };
    staged.gridShape = config.gridShape;
    staged.groups = config.groups;
    session->staged =
        loom::cuda_rt::StagedComm::create(staged, stream, message);
    if (!session->staged)
      return report(error, error_size, message, LOOM_ERROR_COMMUNICATION);
    table = session->staged->comm();
    session->commName = "staged";
  }
#ifdef LOOM_HAVE_NCCL
  if (comm == LOOM_CUDA_COMM_NCCL) {
    loom::cuda_rt::NcclCommConfig nccl;
    static_cast<loom::rt::MpiCommConfig &>(nccl) = config;
    nccl.device = device;
    session->nccl = loom::cuda_rt::NcclComm::create(nccl, stream, message);
    if (!session->nccl)
      return report(error, error_size, message, LOOM_ERROR_COMMUNICATION);
    loom::cuda_rt::NcclComm *channel = session->nccl.get();
    // The watchdog's verdict is the communicator's.
    session->device.setWaiter([channel, timeout_seconds] {
      std::string failure = channel->synchronize(timeout_seconds);
      return failure.empty() ? loom::rt::Status()
                             : loom::rt::communicationError(failure);
    });
    table = session->nccl->comm();
    session->commName = "nccl";
  }
#endif
  (void)timeout_seconds; // only NCCL's watchdog reads it
  return finishSession(std::move(session), a, rank, table, out_session, error,
                       error_size);
}

void loom_cuda_session_free(loom_cuda_session *session) { delete session; }

const char *loom_cuda_session_error(const loom_cuda_session *session) {
  return session->error.c_str();
}

const char *loom_cuda_session_comm_name(const loom_cuda_session *session) {
  return session->commName.c_str();
}

const char *loom_cuda_session_current(const loom_cuda_session *session) {
  return session->impl->current;
}

int64_t loom_cuda_session_workspace_bytes(const loom_cuda_session *session) {
  return session->impl->workspace.size;
}

int64_t loom_cuda_session_state_bytes(const loom_cuda_session *session) {
  int64_t bytes = 0;
  for (const auto &entry : session->impl->state)
    bytes += entry->current.size + entry->next.size;
  return bytes;
}

int32_t loom_cuda_session_state_count(const loom_cuda_session *session) {
  return static_cast<int32_t>(session->impl->state.size());
}

int32_t loom_cuda_session_state_info(const loom_cuda_session *session,
                                     int32_t index, loom_state_info *out_info) {
  if (index < 0 || index >= loom_cuda_session_state_count(session))
    return LOOM_ERROR_INVALID_ARGUMENT;
  const auto &entry = *session->impl->state[index];
  out_info->key = entry.key.c_str();
  out_info->dtype = entry.spec.dtype;
  out_info->rank = static_cast<int32_t>(entry.spec.shape.size());
  out_info->shape = entry.spec.shape.data();
  out_info->global_shape = entry.spec.globalShape.data();
  out_info->offsets = entry.place.offsets.data();
  out_info->owner = entry.place.owner ? 1 : 0;
  return LOOM_OK;
}

int32_t loom_cuda_session_set_state_global(loom_cuda_session *session,
                                           int32_t index, const float *global) {
  return onState(session, index, [&](loom::rt::StateEntry &) {
    return session->impl->setStateGlobal(index, global);
  });
}

int32_t loom_cuda_session_get_state_global(loom_cuda_session *session,
                                           int32_t index, float *out_global) {
  return onState(session, index, [&](loom::rt::StateEntry &entry) {
    if (entry.spec.dtype != LOOM_DTYPE_F32)
      return loom::rt::invalidArgument(entry.key + " is not f32");
    if (entry.spec.shape != entry.spec.globalShape)
      return loom::rt::invalidArgument(
          entry.key + " is sharded on this rank: read its shard with "
                      "get_state");
    return session->impl->readState(index, out_global);
  });
}

int32_t loom_cuda_session_get_state(loom_cuda_session *session, int32_t index,
                                    void *out_local) {
  return onState(session, index, [&](loom::rt::StateEntry &) {
    return session->impl->readState(index, out_local);
  });
}

int32_t loom_cuda_session_set_state(loom_cuda_session *session, int32_t index,
                                    const void *local) {
  return onState(session, index, [&](loom::rt::StateEntry &) {
    return session->impl->writeState(index, local);
  });
}

int32_t loom_cuda_session_set_batch(loom_cuda_session *session,
                                    const int32_t *tokens,
                                    const int32_t *labels) {
  if (loom::rt::Status status = session->impl->setBatch(tokens, labels);
      !status.ok())
    return sessionError(session, status);
  return LOOM_OK;
}

int32_t loom_cuda_session_step(loom_cuda_session *session, int64_t step,
                               double *out_loss) {
  double loss = 0.0;
  loom::rt::Status status;
  try {
    status = session->impl->step(step, loss);
  } catch (const std::bad_alloc &) {
    status = loom::rt::outOfMemory("out of host memory");
  } catch (const std::exception &e) {
    status = loom::rt::invalidArgument(e.what());
  }
  if (!status.ok()) {
    std::string message = "rank " + std::to_string(session->impl->worldRank) +
                          ", step " + std::to_string(step) + ": " +
                          status.message();
    // The communicator's own message, when it was the layer that failed.
    if (status.code() == LOOM_ERROR_COMMUNICATION) {
      std::string detail;
      if (session->staged && !session->staged->lastError().empty())
        detail = session->staged->lastError();
#ifdef LOOM_HAVE_NCCL
      if (session->nccl && !session->nccl->lastError().empty())
        detail = session->nccl->lastError();
#endif
      if (!detail.empty() && message.find(detail) == std::string::npos)
        message += ": " + detail;
    }
    return sessionError(session, loom::rt::Status(status.code(), message));
  }
  *out_loss = loss;
  return LOOM_OK;
}

} // extern "C"
