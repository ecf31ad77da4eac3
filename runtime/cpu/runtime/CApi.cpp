//===- CApi.cpp - loom_runtime.h: one session API over the drivers --------===//
//
// The C ABI's boundary: C++ exceptions (plan parsing) become statuses, and
// statuses their code and message here; nothing crosses as an exception.
// The code is the one the failing layer set (Status.h). A session is the
// one executor (Session.h) on what its backend's driver (Driver.h) gives
// the rank: the CPU driver built in, the CUDA driver opened from
// libloom_cuda_driver.so on first use.
//
//===----------------------------------------------------------------------===//

#include "loom/loom_runtime.h"

#include "loom/loom_cpu_kernels.h"

#include "Driver.h"
#include "Session.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <exception>
#include <new>

struct loom_artifact {
  loom::rt::Artifact impl;
  loom::rt::Driver *driver = nullptr;
};

/// Members go in reverse order: the executor, then the rank's backend (its
/// communicators drain before its device goes).
struct loom_session {
  std::unique_ptr<loom::rt::RankBackend> backend;
  std::unique_ptr<loom::rt::Session> impl;
  std::string error;
};

namespace {

using loom::rt::Status;

int32_t report(char *error, size_t size, const Status &status) {
  if (error && size)
    std::snprintf(error, size, "%s", status.message().c_str());
  return status.code();
}

int32_t sessionError(loom_session *session, const Status &status) {
  session->error = status.message();
  return status.code();
}

/// The directory of this library (where libloom_cuda_driver.so is built
/// and installed next to it), or "".
std::string ownDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&loom_session_options_init), &info) ||
      !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

/// The CUDA driver: $LOOM_CUDA_DRIVER when it is set (and only it: a
/// library the user named that does not load is an error, not a reason to
/// run another), else libloom_cuda_driver.so next to this library, else
/// wherever the dynamic linker finds it. Opened once, RTLD_GLOBAL: a cuda
/// program.so's loom_cuda_* calls resolve against the kernel library it
/// brings.
Status cudaDriver(loom::rt::Driver *&out) {
  static loom::rt::Driver *driver = nullptr;
  static Status failure;
  if (driver || !failure.ok()) {
    out = driver;
    return failure;
  }
  std::vector<std::string> candidates;
  const char *named = std::getenv("LOOM_CUDA_DRIVER");
  if (named && *named) {
    candidates.push_back(named);
  } else {
    if (std::string dir = ownDirectory(); !dir.empty())
      candidates.push_back(dir + "libloom_cuda_driver.so");
    candidates.push_back("libloom_cuda_driver.so");
  }
  std::string tried;
  void *handle = nullptr;
  for (const std::string &path : candidates) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle)
      break;
    tried += std::string("\n  ") + dlerror();
  }
  if (!handle) {
    failure = loom::rt::unavailable(
        "the cuda backend needs libloom_cuda_driver.so (a Loom build with "
        "CUDA, LOOM_ENABLE_CUDA=ON; or set LOOM_CUDA_DRIVER):" +
        tried);
    return failure;
  }
  auto entry =
      reinterpret_cast<LoomDriverEntry>(dlsym(handle, LOOM_DRIVER_ENTRY));
  if (!entry) {
    failure = loom::rt::unavailable(std::string("the CUDA driver lacks ") +
                                    LOOM_DRIVER_ENTRY +
                                    " (built from another Loom version?)");
    return failure;
  }
  driver = entry();
  out = driver;
  return Status();
}

/// A cpu program.so's loom_cpu_* calls resolve in the global scope. This
/// library links libloom_cpu_kernels.so, but a host that loaded it
/// RTLD_LOCAL (Python's ctypes does) left that out of the global scope:
/// promote it.
Status exposeCpuKernels() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&loom_cpu_last_error), &info) ||
      !info.dli_fname)
    return loom::rt::unavailable("cannot locate the CPU kernel library");
  if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
    return loom::rt::unavailable(std::string("cannot expose ") +
                                 info.dli_fname + ": " + dlerror());
  return Status();
}

/// The driver of `backend` ("cpu" or "cuda"), its kernels loaded.
Status driverOf(const std::string &backend, loom::rt::Driver *&out) {
  if (backend == "cuda")
    return cudaDriver(out);
  LOOM_RETURN_IF_ERROR(exposeCpuKernels());
  out = &loom::rt::cpuDriver();
  return Status();
}

/// Runs `action` on state tensor `index`, its status as the call's.
template <typename Action>
int32_t onState(loom_session *session, int32_t index, Action action) {
  if (index < 0 || index >= static_cast<int32_t>(session->impl->state.size()))
    return sessionError(
        session,
        loom::rt::invalidArgument("no state tensor " + std::to_string(index)));
  if (Status status = action(*session->impl->state[index]); !status.ok())
    return sessionError(session, status);
  return LOOM_OK;
}

} // namespace

extern "C" {

int32_t loom_artifact_load(const char *path, loom_artifact **out_artifact,
                           char *error, size_t error_size) {
  *out_artifact = nullptr;
  auto artifact = std::make_unique<loom_artifact>();
  // The backend's driver opens before program.so loads (its kernels).
  Status opened;
  auto openBackend = [&](const std::string &backend) -> std::string {
    opened = driverOf(backend, artifact->driver);
    return opened.message();
  };
  std::string message;
  try {
    message = artifact->impl.load(path, "", openBackend);
  } catch (const std::exception &e) {
    message = std::string(path) + ": " + e.what();
  }
  if (!opened.ok())
    return report(error, error_size, opened.withContext(path));
  if (!message.empty())
    return report(error, error_size, loom::rt::artifactError(message));
  *out_artifact = artifact.release();
  return LOOM_OK;
}

void loom_artifact_free(loom_artifact *artifact) { delete artifact; }

const char *loom_artifact_backend(const loom_artifact *artifact) {
  return artifact->impl.backend.c_str();
}

int32_t loom_artifact_world_size(const loom_artifact *artifact) {
  return static_cast<int32_t>(artifact->impl.worldSize());
}

int64_t loom_artifact_batch_rows(const loom_artifact *artifact) {
  return artifact->impl.batchRows;
}

int64_t loom_artifact_seq_len(const loom_artifact *artifact) {
  return artifact->impl.seqLen;
}

int64_t loom_artifact_vocab_size(const loom_artifact *artifact) {
  return artifact->impl.vocabSize;
}

void loom_session_options_init(loom_session_options *options) {
  options->backend = LOOM_BACKEND_CPU;
  options->device = -1;
  options->comm = LOOM_COMM_AUTO;
  options->timeout_seconds = 0;
}

int32_t loom_session_create(const loom_artifact *artifact,
                            const loom_session_options *options,
                            loom_session **out_session, char *error,
                            size_t error_size) {
  *out_session = nullptr;
  const loom::rt::Artifact &a = artifact->impl;
  const char *asked = options->backend == LOOM_BACKEND_CUDA  ? "cuda"
                      : options->backend == LOOM_BACKEND_CPU ? "cpu"
                                                             : nullptr;
  if (!asked)
    return report(error, error_size,
                  loom::rt::invalidArgument("unknown backend " +
                                            std::to_string(options->backend)));
  if (a.backend != asked)
    return report(error, error_size,
                  loom::rt::invalidArgument(
                      a.path + " was compiled for the " + a.backend +
                      " backend (plan.json \"backend\"; loom-compile "
                      "--target=" +
                      a.backend + "), but the session asks for " + asked));
  auto session = std::make_unique<loom_session>();
  Status status;
  try {
    int32_t rank = 0;
    status = artifact->driver->createRank(a, *options, rank, session->backend);
    if (status.ok()) {
      session->impl = std::make_unique<loom::rt::Session>(
          a, session->backend->device(), rank, session->backend->comm());
      status = session->impl->init();
    }
    if (status.ok())
      status = session->backend->prepare(*session->impl);
  } catch (const std::bad_alloc &) {
    status = loom::rt::outOfMemory("out of host memory");
  } catch (const std::exception &e) {
    status = loom::rt::invalidArgument(e.what());
  }
  if (!status.ok())
    return report(error, error_size, status);
  *out_session = session.release();
  return LOOM_OK;
}

void loom_session_free(loom_session *session) { delete session; }

const char *loom_session_error(const loom_session *session) {
  return session->error.c_str();
}

const char *loom_session_comm_name(const loom_session *session) {
  return session->backend->commName();
}

const char *loom_session_current(const loom_session *session) {
  return session->impl->current;
}

int64_t loom_session_workspace_bytes(const loom_session *session) {
  return session->impl->workspace.size;
}

int64_t loom_session_state_bytes(const loom_session *session) {
  int64_t bytes = 0;
  for (const auto &entry : session->impl->state)
    bytes += entry->current.size + entry->next.size;
  return bytes;
}

int32_t loom_session_state_count(const loom_session *session) {
  return static_cast<int32_t>(session->impl->state.size());
}

int32_t loom_session_state_info(const loom_session *session, int32_t index,
                                loom_state_info *out_info) {
  if (index < 0 || index >= loom_session_state_count(session))
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

int32_t loom_session_get_state(loom_session *session, int32_t index,
                               void *out_local) {
  return onState(session, index, [&](loom::rt::StateEntry &) {
    return session->impl->readState(index, out_local);
  });
}

int32_t loom_session_set_state(loom_session *session, int32_t index,
                               const void *local) {
  return onState(session, index, [&](loom::rt::StateEntry &) {
    return session->impl->writeState(index, local);
  });
}

int32_t loom_session_set_state_global(loom_session *session, int32_t index,
                                      const float *global) {
  return onState(session, index, [&](loom::rt::StateEntry &) {
    return session->impl->setStateGlobal(index, global);
  });
}

int32_t loom_session_get_state_global(loom_session *session, int32_t index,
                                      float *out_global) {
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

int32_t loom_session_set_batch(loom_session *session, const int32_t *tokens,
                               const int32_t *labels) {
  if (Status status = session->impl->setBatch(tokens, labels); !status.ok())
    return sessionError(session, status);
  return LOOM_OK;
}

int32_t loom_session_step(loom_session *session, int64_t step,
                          double *out_loss) {
  double loss = 0.0;
  Status status;
  try {
    status = session->impl->step(step, loss);
  } catch (const std::bad_alloc &) {
    status = loom::rt::outOfMemory("out of host memory");
  } catch (const std::exception &e) {
    status = loom::rt::invalidArgument(e.what());
  }
  if (status.ok()) {
    *out_loss = loss;
    return LOOM_OK;
  }
  std::string message = "rank " + std::to_string(session->impl->worldRank) +
                        ", step " + std::to_string(step) + ": " +
                        status.message();
  // The communicator's own message, when it was the layer that failed.
  if (status.code() == LOOM_ERROR_COMMUNICATION) {
    std::string detail = session->backend->commDetail();
    if (!detail.empty() && message.find(detail) == std::string::npos)
      message += " (" + detail + ")";
  }
  return sessionError(session, Status(status.code(), message));
}

} // extern "C"
