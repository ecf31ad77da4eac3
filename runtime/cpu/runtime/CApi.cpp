//===- CApi.cpp - loom_runtime.h over the C++ runtime ---------------------===//
//
// The C ABI's boundary: C++ exceptions (plan parsing) become statuses, and
// statuses their code and message here; nothing crosses as an exception.
// The code is the one the failing layer set (Status.h).
//
//===----------------------------------------------------------------------===//

#include "loom/loom_runtime.h"

#include "Artifact.h"
#include "CpuDevice.h"
#include "Session.h"
#include "comm/MpiComm.h"

#include <cstdio>
#include <exception>
#include <new>

struct loom_artifact {
  loom::rt::Artifact impl;
};

struct loom_session {
  explicit loom_session(const loom::rt::Artifact &artifact, int32_t rank,
                        const loom_comm *comm)
      : impl(artifact, device, rank, comm) {}
  loom::rt::CpuDevice device;
  loom::rt::Session impl;
};

struct loom_mpi_comm {
  std::unique_ptr<loom::rt::MpiComm> impl;
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

int32_t sessionError(loom_session *session, const loom::rt::Status &status) {
  session->impl.error = status.message();
  return status.code();
}

} // namespace

extern "C" {

int32_t loom_artifact_load(const char *path, loom_artifact **out_artifact,
                           char *error, size_t error_size) {
  *out_artifact = nullptr;
  auto artifact = std::make_unique<loom_artifact>();
  std::string message;
  try {
    message = artifact->impl.load(path);
  } catch (const std::exception &e) {
    message = std::string(path) + ": " + e.what();
  }
  if (!message.empty())
    return report(error, error_size, message, LOOM_ERROR_ARTIFACT);
  *out_artifact = artifact.release();
  return LOOM_OK;
}

void loom_artifact_free(loom_artifact *artifact) { delete artifact; }

int32_t loom_artifact_world_size(const loom_artifact *artifact) {
  return static_cast<int32_t>(artifact->impl.worldSize());
}

int32_t loom_mpi_comm_create(const loom_artifact *artifact,
                             loom_mpi_comm **out_comm, char *error,
                             size_t error_size) {
  *out_comm = nullptr;
  const loom::rt::Artifact &a = artifact->impl;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != a.worldSize())
    return report(error, error_size,
                  "the artifact runs on " + std::to_string(a.worldSize()) +
                      " ranks, but MPI started " + std::to_string(size),
                  LOOM_ERROR_INVALID_ARGUMENT);
  std::string message;
  auto comm = loom::rt::MpiComm::create(
      loom::rt::MpiCommConfig::forStageGrid(rank, a.gridShape, a.groups),
      message);
  if (!comm)
    return report(error, error_size, message, LOOM_ERROR_COMMUNICATION);
  *out_comm = new loom_mpi_comm{std::move(comm)};
  return LOOM_OK;
}

const loom_comm *loom_mpi_comm_table(loom_mpi_comm *comm) {
  return comm->impl->comm();
}

const char *loom_mpi_comm_error(const loom_mpi_comm *comm) {
  return comm->impl->lastError().c_str();
}

void loom_mpi_comm_free(loom_mpi_comm *comm) { delete comm; }

int32_t loom_session_create(const loom_artifact *artifact, int32_t world_rank,
                            const loom_comm *comm, loom_session **out_session,
                            char *error, size_t error_size) {
  *out_session = nullptr;
  auto session =
      std::make_unique<loom_session>(artifact->impl, world_rank, comm);
  if (loom::rt::Status status = session->impl.init(); !status.ok())
    return report(error, error_size, status);
  *out_session = session.release();
  return LOOM_OK;
}

void loom_session_free(loom_session *session) { delete session; }

const char *loom_session_error(const loom_session *session) {
  return session->impl.error.c_str();
}

const char *loom_session_current(const loom_session *session) {
  return session->impl.current;
}

int64_t loom_artifact_batch_rows(const loom_artifact *artifact) {
  return artifact->impl.batchRows;
}

int64_t loom_artifact_seq_len(const loom_artifact *artifact) {
  return artifact->impl.seqLen;
}

int64_t loom_session_workspace_bytes(const loom_session *session) {
  return session->impl.workspace.size;
}

int64_t loom_session_state_bytes(const loom_session *session) {
  int64_t bytes = 0;
  for (const auto &entry : session->impl.state)
    bytes += 2 * entry->spec.bytes();
  return bytes;
}

int32_t loom_session_state_count(const loom_session *session) {
  return static_cast<int32_t>(session->impl.state.size());
}

int32_t loom_session_state_info(const loom_session *session, int32_t index,
                                loom_state_info *out_info) {
  if (index < 0 || index >= loom_session_state_count(session))
    return LOOM_ERROR_INVALID_ARGUMENT;
  const auto &entry = *session->impl.state[index];
  out_info->key = entry.key.c_str();
  out_info->dtype = entry.spec.dtype;
  out_info->rank = static_cast<int32_t>(entry.spec.shape.size());
  out_info->shape = entry.spec.shape.data();
  out_info->global_shape = entry.spec.globalShape.data();
  out_info->offsets = entry.place.offsets.data();
  out_info->owner = entry.place.owner ? 1 : 0;
  return LOOM_OK;
}

void *loom_session_state_data(loom_session *session, int32_t index) {
  if (index < 0 || index >= loom_session_state_count(session))
    return nullptr;
  return session->impl.state[index]->current.data();
}

int32_t loom_session_set_state_global(loom_session *session, int32_t index,
                                      const float *global) {
  if (index < 0 || index >= loom_session_state_count(session))
    return sessionError(
        session,
        loom::rt::invalidArgument("no state tensor " + std::to_string(index)));
  if (loom::rt::Status status = session->impl.setStateGlobal(index, global);
      !status.ok())
    return sessionError(session, status);
  return LOOM_OK;
}

int32_t loom_session_set_batch(loom_session *session, const int32_t *tokens,
                               const int32_t *labels) {
  if (loom::rt::Status status = session->impl.setBatch(tokens, labels);
      !status.ok())
    return sessionError(session, status);
  return LOOM_OK;
}

int32_t loom_session_step(loom_session *session, int64_t step,
                          double *out_loss) {
  double loss = 0.0;
  loom::rt::Status status;
  try {
    status = session->impl.step(step, loss);
  } catch (const std::bad_alloc &) {
    status = loom::rt::outOfMemory("out of host memory");
  } catch (const std::exception &e) {
    status = loom::rt::invalidArgument(e.what());
  }
  if (!status.ok())
    return sessionError(
        session,
        status.withContext("rank " + std::to_string(session->impl.worldRank) +
                           ", step " + std::to_string(step)));
  *out_loss = loss;
  return LOOM_OK;
}

} // extern "C"
