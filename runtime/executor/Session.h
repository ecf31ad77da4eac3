//===- Session.h - One rank's executor --------------------------*- C++ -*-===//
//
// The executor behind loom_session (loom_runtime.h), for every backend:
// this rank's place in the job, its shard of the state, the workspace, and
// the step loop, on the buffers of a Device (its driver's, Driver.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_SESSION_H
#define LOOM_RUNTIME_EXECUTOR_SESSION_H

#include "Device.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loom::rt {

/// Where a rank's shard of a tensor sits in the global tensor.
struct ShardPlace {
  std::vector<int64_t> offsets;
  bool owner = true; ///< the replica that checkpoints write
};

/// The shard of `spec` that the device at `coords` of `grid` holds.
ShardPlace placeOf(const TensorSpec &spec, const std::vector<int64_t> &grid,
                   const std::vector<int64_t> &coords);

/// Copies between a global row-major tensor and the shard at `place`.
void copyShard(const TensorSpec &spec, const ShardPlace &place,
               const void *global, void *local, bool toLocal);

struct StateEntry {
  std::string key;
  TensorSpec spec;       ///< as the step reads it
  TensorSpec resultSpec; ///< as the step writes it (may be split further)
  ShardPlace place;
  Buffer current, next;
  bool updated = false;
};

/// Where a function's arguments that are not state, step or data come from
/// and where its results that are not state go (the pipeline's values).
struct Bindings {
  virtual ~Bindings() = default;
  virtual Status argument(const Function &fn, const TensorSpec &arg,
                          Buffer &out) = 0;
  virtual Status result(const Function &fn, const TensorSpec &result,
                        const void *data) = 0;
};

/// "" when, for every pair of pipeline ranks, `artifact`'s schedule has
/// one receive its peer's transfers in the order the other sends them
/// (tagged send/recv need not, NCCL's untagged ones do); else which pair
/// does not.
std::string transfersInOrder(const Artifact &artifact);

class Session {
public:
  Session(const Artifact &artifact, Device &device, int32_t worldRank,
          const loom_comm *comm);

  /// Places this rank and allocates its state.
  Status init();
  Status setBatch(const int32_t *tokens, const int32_t *labels);
  Status step(int64_t stepNumber, double &loss);

  /// State tensor `index`'s shard to or from host memory (its local
  /// shape).
  Status readState(size_t index, void *host);
  Status writeState(size_t index, const void *host);
  /// Sets state tensor `index` (f32) from the whole tensor: this rank's
  /// shard of `global`.
  Status setStateGlobal(size_t index, const float *global);

  const Artifact &artifact;
  Device &device;
  int32_t worldRank;
  const loom_comm *comm;
  int64_t pipelineRank = 0;
  std::vector<int64_t> coords;
  std::vector<std::unique_ptr<StateEntry>> state;
  std::map<std::string, size_t> stateIndex;
  Buffer workspace;
  char current[128] = "";

private:
  bool runsHere(const Function &fn) const;
  void setCurrent(const std::string &text);
  Status dataArgument(const TensorSpec &arg, int64_t microBatch, Buffer &out);
  /// Calls `fn` once: state and data bound here, other values by
  /// `bindings`; updated state goes to the next buffers.
  Status call(const Function &fn, int64_t step, int64_t microBatch,
              Bindings &bindings);
  Status commitState();
  /// Brings `entry.next` (resultSpec's layout) to `entry.current` (spec's).
  Status reshard(StateEntry &entry);
  Status runStep(int64_t stepNumber, double &loss);
  Status runPipelineStep(int64_t stepNumber, double &loss);

  std::vector<int32_t> globalTokens, globalLabels;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_EXECUTOR_SESSION_H
