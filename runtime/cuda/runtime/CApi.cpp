//===- CApi.cpp - loom_cuda_runtime.h over the C++ runtime ----------------===//
//
// The C ABI's boundary: C++ exceptions (plan parsing) and error strings
// become status codes and messages here; nothing crosses as an exception.
//
//===----------------------------------------------------------------------===//

#include "loom/loom_cuda_runtime.h"

#include "Session.h"

#include <cstdio>
#include <dlfcn.h>
#include <exception>

struct loom_cuda_artifact {
  loom::rt::Artifact impl;
};

struct loom_cuda_session {
  explicit loom_cuda_session(const loom::rt::Artifact &artifact)
      : impl(artifact) {}
  loom::cuda_rt::Session impl;
};

namespace {

int32_t report(char *error, size_t size, const std::string &message,
               int32_t code) {
  if (error && size)
    std::snprintf(error, size, "%s", message.c_str());
  return code;
}

int32_t sessionError(loom_cuda_session *session, std::string message,
                     int32_t code) {
  session->impl.error = std::move(message);
  return code;
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

int32_t loom_cuda_session_create(const loom_cuda_artifact *artifact,
                                 int32_t device,
                                 loom_cuda_session **out_session, char *error,
                                 size_t error_size) {
  *out_session = nullptr;
  auto session = std::make_unique<loom_cuda_session>(artifact->impl);
  std::string message;
  try {
    message = session->impl.init(device);
  } catch (const std::exception &e) {
    message = e.what();
  }
  if (!message.empty())
    return report(error, error_size, message, LOOM_ERROR_INVALID_ARGUMENT);
  *out_session = session.release();
  return LOOM_OK;
}

void loom_cuda_session_free(loom_cuda_session *session) { delete session; }

const char *loom_cuda_session_error(const loom_cuda_session *session) {
  return session->impl.error.c_str();
}

int64_t loom_cuda_session_workspace_bytes(const loom_cuda_session *session) {
  return session->impl.workspace.size;
}

int64_t loom_cuda_session_state_bytes(const loom_cuda_session *session) {
  return session->impl.stateBytes();
}

int32_t loom_cuda_session_state_count(const loom_cuda_session *session) {
  return static_cast<int32_t>(session->impl.state.size());
}

int32_t loom_cuda_session_state_info(const loom_cuda_session *session,
                                     int32_t index, loom_state_info *out_info) {
  if (index < 0 || index >= loom_cuda_session_state_count(session))
    return LOOM_ERROR_INVALID_ARGUMENT;
  const auto &entry = *session->impl.state[index];
  out_info->key = entry.key.c_str();
  out_info->dtype = entry.spec.dtype;
  out_info->rank = static_cast<int32_t>(entry.spec.shape.size());
  out_info->shape = entry.spec.shape.data();
  out_info->global_shape = entry.spec.globalShape.data();
  out_info->offsets = entry.offsets.data();
  out_info->owner = 1;
  return LOOM_OK;
}

int32_t loom_cuda_session_set_state_global(loom_cuda_session *session,
                                           int32_t index, const float *global) {
  if (index < 0 || index >= loom_cuda_session_state_count(session))
    return sessionError(session, "no state tensor " + std::to_string(index),
                        LOOM_ERROR_INVALID_ARGUMENT);
  std::string message = session->impl.setState(index, global);
  if (!message.empty())
    return sessionError(session, message, LOOM_ERROR_INVALID_ARGUMENT);
  return LOOM_OK;
}

int32_t loom_cuda_session_get_state_global(loom_cuda_session *session,
                                           int32_t index, float *out_global) {
  if (index < 0 || index >= loom_cuda_session_state_count(session))
    return sessionError(session, "no state tensor " + std::to_string(index),
                        LOOM_ERROR_INVALID_ARGUMENT);
  std::string message = session->impl.getState(index, out_global);
  if (!message.empty())
    return sessionError(session, message, LOOM_ERROR_INVALID_ARGUMENT);
  return LOOM_OK;
}

int32_t loom_cuda_session_set_batch(loom_cuda_session *session,
                                    const int32_t *tokens,
                                    const int32_t *labels) {
  std::string message = session->impl.setBatch(tokens, labels);
  if (!message.empty())
    return sessionError(session, message, LOOM_ERROR_KERNEL);
  return LOOM_OK;
}

int32_t loom_cuda_session_step(loom_cuda_session *session, int64_t step,
                               double *out_loss) {
  double loss = 0.0;
  std::string message;
  try {
    message = session->impl.step(step, loss);
  } catch (const std::exception &e) {
    message = e.what();
  }
  if (!message.empty())
    return sessionError(session, message, LOOM_ERROR_KERNEL);
  *out_loss = loss;
  return LOOM_OK;
}

} // extern "C"
