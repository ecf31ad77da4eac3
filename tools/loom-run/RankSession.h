//===- RankSession.h - One rank's compiled session --------------*- C++ -*-===//
//
// What loom-run asks of a compiled artifact's runtime on one MPI rank: the
// state (to load, checkpoint and resume it), the batch, the step, through
// loom_runtime.h on either backend. The runtime opens the CUDA driver
// (libloom_cuda_driver.so) only when a cuda session asks for it, so that
// loom-run builds and runs on machines without CUDA and says what is
// missing only then.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_RANKSESSION_H
#define LOOM_TOOLS_LOOM_RUN_RANKSESSION_H

#include "loom/loom_runtime.h"

#include <cstdint>
#include <memory>
#include <string>

namespace loom::run {

/// How a rank of the cuda backend picks its GPU and talks to the others.
struct CudaRankOptions {
  int device = -1;           ///< -1: the rank's index on its node modulo GPUs
  std::string comm = "auto"; ///< "auto", "nccl" or "staged"
  double timeoutSeconds = 300;
};

class RankSession {
public:
  virtual ~RankSession() = default;

  /// Loads `artifactPath` and creates this MPI rank's session (MPI is
  /// initialized; collective over MPI_COMM_WORLD) on `backend`, "cpu" or
  /// "cuda". Null with `error` on failure.
  static std::unique_ptr<RankSession> open(const std::string &backend,
                                           const std::string &artifactPath,
                                           const CudaRankOptions &cuda,
                                           std::string &error);

  /// "compiled CPU backend, 4 MPI ranks" and the like.
  virtual std::string describe() const = 0;
  virtual int64_t batchRows() const = 0;
  virtual int64_t seqLen() const = 0;
  /// The vocabulary the token ids must stay below; 0 when the artifact
  /// does not record it.
  virtual int64_t vocabSize() const = 0;
  virtual int64_t workspaceBytes() const = 0;
  virtual int64_t stateBytes() const = 0;

  virtual int32_t stateCount() const = 0;
  virtual loom_state_info stateInfo(int32_t index) const = 0;
  /// This rank's shard of state tensor `index` to or from host memory
  /// (local shape, its dtype); "" or the error.
  virtual std::string getState(int32_t index, void *local) = 0;
  virtual std::string setState(int32_t index, const void *local) = 0;
  /// This rank's shard of the whole f32 tensor `global`.
  virtual std::string setStateGlobal(int32_t index, const float *global) = 0;

  virtual std::string setBatch(const int32_t *tokens,
                               const int32_t *labels) = 0;
  /// Runs step `step`; "" and its loss, or the error (with what the
  /// communication backend said).
  virtual std::string step(int64_t step, double &loss) = 0;
  /// The instruction the running step is at (the watchdog reads it from
  /// another thread).
  virtual const char *current() const = 0;
};

} // namespace loom::run

#endif // LOOM_TOOLS_LOOM_RUN_RANKSESSION_H
