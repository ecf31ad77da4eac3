//===- RankSession.cpp - One rank's compiled session, of either runtime ---===//

#include "RankSession.h"

#include "loom/loom_cuda_runtime.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <mpi.h>

#include <cstring>
#include <dlfcn.h>

namespace loom::run {
namespace {

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int worldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// "1 MPI rank", "4 MPI ranks".
std::string mpiRanks(int count) {
  return std::to_string(count) + (count == 1 ? " MPI rank" : " MPI ranks");
}

int64_t elementsOf(const loom_state_info &info) {
  int64_t count = 1;
  for (int32_t d = 0; d < info.rank; ++d)
    count *= info.shape[d];
  return count;
}

/// The CPU runtime (linked in): host memory, so state moves by memcpy.
class CpuRankSession final : public RankSession {
public:
  ~CpuRankSession() override {
    loom_session_free(session);
    loom_mpi_comm_free(mpi);
    loom_artifact_free(artifact);
  }

  std::string open(const std::string &path) {
    char error[1024] = "";
    if (loom_artifact_load(path.c_str(), &artifact, error, sizeof error) ||
        loom_mpi_comm_create(artifact, &mpi, error, sizeof error) ||
        loom_session_create(artifact, worldRank(), loom_mpi_comm_table(mpi),
                            &session, error, sizeof error))
      return error;
    return "";
  }

  std::string describe() const override {
    return "compiled CPU backend, " + mpiRanks(worldSize());
  }
  int64_t batchRows() const override {
    return loom_artifact_batch_rows(artifact);
  }
  int64_t seqLen() const override { return loom_artifact_seq_len(artifact); }
  int64_t workspaceBytes() const override {
    return loom_session_workspace_bytes(session);
  }
  int64_t stateBytes() const override {
    return loom_session_state_bytes(session);
  }
  int32_t stateCount() const override {
    return loom_session_state_count(session);
  }
  loom_state_info stateInfo(int32_t index) const override {
    loom_state_info info{};
    loom_session_state_info(session, index, &info);
    return info;
  }
  std::string getState(int32_t index, void *local) override {
    loom_state_info info = stateInfo(index);
    std::memcpy(local, loom_session_state_data(session, index),
                elementsOf(info) * loom_dtype_bytes(info.dtype));
    return "";
  }
  std::string setState(int32_t index, const void *local) override {
    loom_state_info info = stateInfo(index);
    std::memcpy(loom_session_state_data(session, index), local,
                elementsOf(info) * loom_dtype_bytes(info.dtype));
    return "";
  }
  std::string setStateGlobal(int32_t index, const float *global) override {
    if (loom_session_set_state_global(session, index, global))
      return loom_session_error(session);
    return "";
  }
  std::string setBatch(const int32_t *tokens, const int32_t *labels) override {
    if (loom_session_set_batch(session, tokens, labels))
      return loom_session_error(session);
    return "";
  }
  std::string step(int64_t step, double &loss) override {
    if (!loom_session_step(session, step, &loss))
      return "";
    std::string message = loom_session_error(session);
    if (*loom_mpi_comm_error(mpi))
      message += std::string(" (") + loom_mpi_comm_error(mpi) + ")";
    return message;
  }
  const char *current() const override { return loom_session_current(session); }

private:
  loom_artifact *artifact = nullptr;
  loom_mpi_comm *mpi = nullptr;
  loom_session *session = nullptr;
};

/// The CUDA runtime, opened from libloom_cuda_runtime.so.
class CudaRankSession final : public RankSession {
public:
  ~CudaRankSession() override {
    if (session)
      api.sessionFree(session);
    if (artifact)
      api.artifactFree(artifact);
    // The library stays loaded: CUDA and NCCL tear down at exit.
  }

  std::string open(const std::string &path, const CudaRankOptions &options) {
    if (std::string error = loadLibrary(); !error.empty())
      return error;
    char error[1024] = "";
    if (api.artifactLoad(path.c_str(), &artifact, error, sizeof error))
      return error;
    loom_cuda_comm_kind kind = options.comm == "nccl" ? LOOM_CUDA_COMM_NCCL
                               : options.comm == "staged"
                                   ? LOOM_CUDA_COMM_STAGED
                                   : LOOM_CUDA_COMM_AUTO;
    if (api.sessionCreateRank(artifact, options.device, kind,
                              options.timeoutSeconds, &session, error,
                              sizeof error))
      return error;
    return "";
  }

  std::string describe() const override {
    return "compiled CUDA backend, " + mpiRanks(worldSize()) + ", " +
           api.commName(session) + " communication";
  }
  int64_t batchRows() const override { return api.batchRows(artifact); }
  int64_t seqLen() const override { return api.seqLen(artifact); }
  int64_t workspaceBytes() const override {
    return api.workspaceBytes(session);
  }
  int64_t stateBytes() const override { return api.stateBytes(session); }
  int32_t stateCount() const override { return api.stateCount(session); }
  loom_state_info stateInfo(int32_t index) const override {
    loom_state_info info{};
    api.stateInfo(session, index, &info);
    return info;
  }
  std::string getState(int32_t index, void *local) override {
    return status(api.getState(session, index, local));
  }
  std::string setState(int32_t index, const void *local) override {
    return status(api.setState(session, index, local));
  }
  std::string setStateGlobal(int32_t index, const float *global) override {
    return status(api.setStateGlobal(session, index, global));
  }
  std::string setBatch(const int32_t *tokens, const int32_t *labels) override {
    return status(api.setBatch(session, tokens, labels));
  }
  std::string step(int64_t step, double &loss) override {
    return status(api.step(session, step, &loss));
  }
  const char *current() const override { return api.current(session); }

private:
  std::string status(int32_t code) const {
    return code ? api.error(session) : "";
  }

  /// Opens libloom_cuda_runtime.so: $LOOM_CUDA_RUNTIME when it is set (and
  /// only it: a library the user named and that does not load is an
  /// error, not a reason to run another), else next to this program's
  /// build (../lib), else wherever the dynamic linker finds it.
  std::string loadLibrary() {
    std::vector<std::string> candidates;
    const char *named = std::getenv("LOOM_CUDA_RUNTIME");
    if (named && *named) {
      candidates.push_back(named);
    } else {
      std::string self = llvm::sys::fs::getMainExecutable(
          nullptr, reinterpret_cast<void *>(&worldRank));
      if (!self.empty())
        candidates.push_back(
            (llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)) +
             "/lib/libloom_cuda_runtime.so")
                .str());
      candidates.push_back("libloom_cuda_runtime.so");
    }
    std::string tried;
    void *handle = nullptr;
    for (const std::string &path : candidates) {
      // RTLD_GLOBAL: program.so's loom_cuda_* calls resolve against the
      // kernel library this one brings.
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle)
        break;
      tried += std::string("\n  ") + dlerror();
    }
    if (!handle)
      return "the cuda backend needs libloom_cuda_runtime.so (a Loom build "
             "with CUDA, LOOM_ENABLE_CUDA=ON; or set LOOM_CUDA_RUNTIME):" +
             tried;
    std::string missing;
    auto bind = [&](auto &function, const char *name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(
          dlsym(handle, name));
      if (!function)
        missing += std::string(" ") + name;
    };
    bind(api.artifactLoad, "loom_cuda_artifact_load");
    bind(api.artifactFree, "loom_cuda_artifact_free");
    bind(api.batchRows, "loom_cuda_artifact_batch_rows");
    bind(api.seqLen, "loom_cuda_artifact_seq_len");
    bind(api.sessionCreateRank, "loom_cuda_session_create_rank");
    bind(api.sessionFree, "loom_cuda_session_free");
    bind(api.error, "loom_cuda_session_error");
    bind(api.commName, "loom_cuda_session_comm_name");
    bind(api.current, "loom_cuda_session_current");
    bind(api.workspaceBytes, "loom_cuda_session_workspace_bytes");
    bind(api.stateBytes, "loom_cuda_session_state_bytes");
    bind(api.stateCount, "loom_cuda_session_state_count");
    bind(api.stateInfo, "loom_cuda_session_state_info");
    bind(api.getState, "loom_cuda_session_get_state");
    bind(api.setState, "loom_cuda_session_set_state");
    bind(api.setStateGlobal, "loom_cuda_session_set_state_global");
    bind(api.setBatch, "loom_cuda_session_set_batch");
    bind(api.step, "loom_cuda_session_step");
    if (!missing.empty())
      return "libloom_cuda_runtime.so lacks" + missing +
             " (built from another Loom version?)";
    return "";
  }

  struct Api {
    decltype(&loom_cuda_artifact_load) artifactLoad = nullptr;
    decltype(&loom_cuda_artifact_free) artifactFree = nullptr;
    decltype(&loom_cuda_artifact_batch_rows) batchRows = nullptr;
    decltype(&loom_cuda_artifact_seq_len) seqLen = nullptr;
    decltype(&loom_cuda_session_create_rank) sessionCreateRank = nullptr;
    decltype(&loom_cuda_session_free) sessionFree = nullptr;
    decltype(&loom_cuda_session_error) error = nullptr;
    decltype(&loom_cuda_session_comm_name) commName = nullptr;
    decltype(&loom_cuda_session_current) current = nullptr;
    decltype(&loom_cuda_session_workspace_bytes) workspaceBytes = nullptr;
    decltype(&loom_cuda_session_state_bytes) stateBytes = nullptr;
    decltype(&loom_cuda_session_state_count) stateCount = nullptr;
    decltype(&loom_cuda_session_state_info) stateInfo = nullptr;
    decltype(&loom_cuda_session_get_state) getState = nullptr;
    decltype(&loom_cuda_session_set_state) setState = nullptr;
    decltype(&loom_cuda_session_set_state_global) setStateGlobal = nullptr;
    decltype(&loom_cuda_session_set_batch) setBatch = nullptr;
    decltype(&loom_cuda_session_step) step = nullptr;
  } api;
  loom_cuda_artifact *artifact = nullptr;
  loom_cuda_session *session = nullptr;
};

} // namespace

std::unique_ptr<RankSession> RankSession::open(const std::string &backend,
                                               const std::string &artifactPath,
                                               const CudaRankOptions &cuda,
                                               std::string &error) {
  if (backend == "cuda") {
    auto session = std::make_unique<CudaRankSession>();
    error = session->open(artifactPath, cuda);
    return error.empty() ? std::move(session) : nullptr;
  }
  auto session = std::make_unique<CpuRankSession>();
  error = session->open(artifactPath);
  return error.empty() ? std::move(session) : nullptr;
}

} // namespace loom::run
