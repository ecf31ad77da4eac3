//===- RankSession.cpp - One rank's compiled session, on either backend ---===//
//
// One code path for both backends: loom_runtime.h's session on the backend
// the artifact was compiled for; the runtime opens the CUDA driver itself.
//
//===----------------------------------------------------------------------===//

#include "RankSession.h"

#include <mpi.h>

namespace loom::run {
namespace {

int worldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// "1 MPI rank", "4 MPI ranks".
std::string mpiRanks(int count) {
  return std::to_string(count) + (count == 1 ? " MPI rank" : " MPI ranks");
}

class CompiledRankSession final : public RankSession {
public:
  ~CompiledRankSession() override {
    loom_session_free(session);
    loom_artifact_free(artifact);
  }

  std::string open(const std::string &backend, const std::string &path,
                   const CudaRankOptions &cuda) {
    char error[1024] = "";
    if (loom_artifact_load(path.c_str(), &artifact, error, sizeof error))
      return error;
    loom_session_options options;
    loom_session_options_init(&options);
    cudaBackend = backend == "cuda";
    if (cudaBackend) {
      options.backend = LOOM_BACKEND_CUDA;
      options.device = cuda.device;
      options.comm = cuda.comm == "nccl"     ? LOOM_COMM_NCCL
                     : cuda.comm == "staged" ? LOOM_COMM_STAGED
                                             : LOOM_COMM_AUTO;
      options.timeout_seconds = cuda.timeoutSeconds;
    }
    if (loom_session_create(artifact, &options, &session, error, sizeof error))
      return error;
    return "";
  }

  std::string describe() const override {
    if (!cudaBackend)
      return "compiled CPU backend, " + mpiRanks(worldSize());
    return "compiled CUDA backend, " + mpiRanks(worldSize()) + ", " +
           loom_session_comm_name(session) + " communication";
  }
  int64_t batchRows() const override {
    return loom_artifact_batch_rows(artifact);
  }
  int64_t seqLen() const override { return loom_artifact_seq_len(artifact); }
  int64_t vocabSize() const override {
    return loom_artifact_vocab_size(artifact);
  }
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
    return status(loom_session_get_state(session, index, local));
  }
  std::string setState(int32_t index, const void *local) override {
    return status(loom_session_set_state(session, index, local));
  }
  std::string setStateGlobal(int32_t index, const float *global) override {
    return status(loom_session_set_state_global(session, index, global));
  }
  std::string setBatch(const int32_t *tokens, const int32_t *labels) override {
    return status(loom_session_set_batch(session, tokens, labels));
  }
  std::string step(int64_t step, double &loss) override {
    return status(loom_session_step(session, step, &loss));
  }
  const char *current() const override { return loom_session_current(session); }

private:
  std::string status(int32_t code) const {
    return code ? loom_session_error(session) : "";
  }

  loom_artifact *artifact = nullptr;
  loom_session *session = nullptr;
  bool cudaBackend = false;
};

} // namespace

std::unique_ptr<RankSession> RankSession::open(const std::string &backend,
                                               const std::string &artifactPath,
                                               const CudaRankOptions &cuda,
                                               std::string &error) {
  auto session = std::make_unique<CompiledRankSession>();
  error = session->open(backend, artifactPath, cuda);
  return error.empty() ? std::move(session) : nullptr;
}

} // namespace loom::run
