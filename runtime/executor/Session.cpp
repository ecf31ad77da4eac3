//===- Session.cpp - One rank's executor, behind the C ABI ----------------===//
//
// A session holds this rank's shard of the training state (parameters and
// optimizer moments, double-buffered: a step reads one copy and writes the
// other, since compiled code never updates in place), one workspace for the
// largest static memory plan, and the step's batch. A step without a
// pipeline calls `train_step` once; a pipelined step walks this rank's
// stream of the schedule (Pipeline.cpp). Every buffer is its Device's
// (Device.h): the same executor runs the CPU and the CUDA backend.
//
//===----------------------------------------------------------------------===//

#include "Session.h"

#include "GroupSplit.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace loom::rt {

ShardPlace placeOf(const TensorSpec &spec, const std::vector<int64_t> &grid,
                   const std::vector<int64_t> &coords) {
  ShardPlace place;
  place.offsets.assign(spec.shape.size(), 0);
  std::vector<bool> splitting(grid.size(), false);
  for (size_t d = 0; d < spec.splitAxes.size() && d < spec.shape.size(); ++d) {
    int64_t index = 0;
    for (int64_t axis : spec.splitAxes[d]) {
      index = index * grid[axis] + coords[axis];
      splitting[axis] = true;
    }
    place.offsets[d] = index * spec.shape[d];
  }
  for (size_t axis = 0; axis < grid.size(); ++axis)
    if (!splitting[axis] && coords[axis] != 0)
      place.owner = false;
  return place;
}

void copyShard(const TensorSpec &spec, const ShardPlace &place,
               const void *global, void *local, bool toLocal) {
  int64_t rank = static_cast<int64_t>(spec.shape.size());
  int64_t element = loom_dtype_bytes(spec.dtype);
  if (rank == 0) {
    std::memcpy(toLocal ? local : const_cast<void *>(global),
                toLocal ? global : local, element);
    return;
  }
  // Rows of the last dimension are contiguous in both.
  std::vector<int64_t> globalStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    globalStrides[d] = globalStrides[d + 1] * spec.globalShape[d + 1];
  int64_t rowElements = spec.shape[rank - 1];
  int64_t rows = spec.numElements() / rowElements;
  std::vector<int64_t> index(rank, 0);
  auto *g = static_cast<const uint8_t *>(global);
  auto *l = static_cast<uint8_t *>(local);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offset = place.offsets[rank - 1];
    for (int64_t d = 0; d < rank - 1; ++d)
      offset += (place.offsets[d] + index[d]) * globalStrides[d];
    uint8_t *localRow = l + row * rowElements * element;
    uint8_t *globalRow = const_cast<uint8_t *>(g) + offset * element;
    if (toLocal)
      std::memcpy(localRow, globalRow, rowElements * element);
    else
      std::memcpy(globalRow, localRow, rowElements * element);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < spec.shape[d])
        break;
      index[d] = 0;
    }
  }
}

Session::Session(const Artifact &artifact, Device &device, int32_t worldRank,
                 const loom_comm *comm)
    : artifact(artifact), device(device), worldRank(worldRank), comm(comm) {}

Status Session::init() {
  int64_t devices = artifact.devices();
  if (worldRank < 0 || worldRank >= artifact.worldSize())
    return invalidArgument("rank " + std::to_string(worldRank) +
                           " is outside the job's " +
                           std::to_string(artifact.worldSize()) + " ranks");
  if (!comm && artifact.worldSize() > 1)
    return invalidArgument("a job of " + std::to_string(artifact.worldSize()) +
                           " ranks needs a communication backend");
  pipelineRank = worldRank / devices;
  int64_t linear = worldRank % devices;
  coords = gridCoordinates(linear, artifact.gridShape);

  // The state this rank holds: the step's own param/m/v arguments of the
  // functions it runs, once each.
  int64_t workspaceBytes = 0;
  for (const Function &fn : artifact.functions) {
    if (!runsHere(fn))
      continue;
    workspaceBytes = std::max(workspaceBytes, fn.workspaceBytes);
    for (const TensorSpec &arg : fn.args) {
      std::string key = arg.stepKey();
      if (arg.role == "param" || arg.role == "m" || arg.role == "v") {
        if (stateIndex.count(key))
          continue;
        stateIndex[key] = state.size();
        state.push_back(std::make_unique<StateEntry>());
        StateEntry &entry = *state.back();
        entry.key = key;
        entry.spec = arg;
        entry.place = placeOf(arg, artifact.gridShape, coords);
        if (Status error = entry.current.allocate(device, arg.bytes());
            !error.ok())
          return error.withContext(key);
      }
    }
  }
  if (Status error = workspace.allocate(device, workspaceBytes); !error.ok())
    return error.withContext("the workspace");
  // What the step writes back may be laid out differently (ZeRO: updated
  // parameters sharded over the data-parallel axes).
  for (const Function &fn : artifact.functions) {
    if (!runsHere(fn))
      continue;
    for (const TensorSpec &result : fn.results)
      if (auto it = stateIndex.find(result.stepKey()); it != stateIndex.end()) {
        StateEntry &entry = *state[it->second];
        entry.resultSpec = result;
        if (result.globalShape != entry.spec.globalShape)
          return artifactError(fn.name + ": result " + entry.key +
                               " has another global shape than the argument");
      }
  }
  for (auto &entry : state) {
    if (entry->resultSpec.shape.empty() && !entry->spec.shape.empty())
      entry->resultSpec = entry->spec;
    if (Status error = entry->next.allocate(device, entry->resultSpec.bytes());
        !error.ok())
      return error.withContext(entry->key);
  }
  // A parameter tied across stages on several pipeline ranks (embedding and
  // output layer) is held by each; the lowest of them owns it.
  for (const Function &fn : artifact.functions) {
    if (fn.stage < 0 || fn.stage % artifact.pipelineRanks >= pipelineRank)
      continue;
    for (const TensorSpec &arg : fn.args)
      if (auto it = stateIndex.find(arg.stepKey()); it != stateIndex.end())
        state[it->second]->place.owner = false;
  }
  if (artifact.batchRows == 0)
    return artifactError("the artifact's functions take no token batch");
  return Status();
}

bool Session::runsHere(const Function &fn) const {
  if (artifact.streams.empty())
    return fn.name == "train_step";
  return fn.stage >= 0 && fn.stage % artifact.pipelineRanks == pipelineRank;
}

Status Session::setBatch(const int32_t *tokens, const int32_t *labels) {
  globalTokens.assign(tokens, tokens + artifact.batchRows * artifact.seqLen);
  globalLabels.assign(labels, labels + artifact.batchRows * artifact.seqLen);
  return Status();
}

void Session::setCurrent(const std::string &text) {
  std::snprintf(current, sizeof current, "%s", text.c_str());
}

Status Session::dataArgument(const TensorSpec &arg, int64_t microBatch,
                             Buffer &out) {
  if (arg.name != "tokens" && arg.name != "labels")
    return artifactError("unknown data argument \"" + arg.name + "\"");
  const std::vector<int32_t> &whole =
      arg.name == "tokens" ? globalTokens : globalLabels;
  if (whole.empty())
    return invalidArgument("no batch was set before the step");
  // The micro-batch's rows of the batch, then this device's shard of them.
  int64_t rowsPerMicroBatch = arg.globalShape[0];
  int64_t first = std::max<int64_t>(microBatch, 0) * rowsPerMicroBatch;
  std::vector<int32_t> slice(whole.begin() + first * artifact.seqLen,
                             whole.begin() +
                                 (first + rowsPerMicroBatch) * artifact.seqLen);
  std::vector<uint8_t> global;
  if (arg.dtype == LOOM_DTYPE_I64) {
    std::vector<int64_t> wide(slice.begin(), slice.end());
    global.assign(reinterpret_cast<uint8_t *>(wide.data()),
                  reinterpret_cast<uint8_t *>(wide.data() + wide.size()));
  } else {
    global.assign(reinterpret_cast<uint8_t *>(slice.data()),
                  reinterpret_cast<uint8_t *>(slice.data() + slice.size()));
  }
  std::vector<uint8_t> local(arg.bytes());
  copyShard(arg, placeOf(arg, artifact.gridShape, coords), global.data(),
            local.data(), /*toLocal=*/true);
  return device.upload(out.data(), local.data(), arg.bytes());
}

Status Session::call(const Function &fn, int64_t step, int64_t microBatch,
                     Bindings &bindings) {
  std::vector<void *> args, results;
  std::vector<std::unique_ptr<Buffer>> scratch;
  auto newBuffer = [&](const TensorSpec &spec, Buffer *&out) -> Status {
    scratch.push_back(std::make_unique<Buffer>());
    out = scratch.back().get();
    if (Status error = out->allocate(device, spec.bytes()); !error.ok())
      return error.withContext(fn.name + ": " + spec.role + ":" + spec.name);
    return Status();
  };
  for (const TensorSpec &arg : fn.args) {
    std::string key = arg.stepKey();
    if (auto it = stateIndex.find(key); it != stateIndex.end()) {
      args.push_back(state[it->second]->current.data());
      continue;
    }
    Buffer *out = nullptr;
    if (Status error = newBuffer(arg, out); !error.ok())
      return error;
    Buffer &buffer = *out;
    if (arg.role == "step") {
      int32_t narrow = static_cast<int32_t>(step);
      if (Status error = device.upload(buffer.data(),
                                       arg.dtype == LOOM_DTYPE_I64
                                           ? static_cast<const void *>(&step)
                                           : static_cast<const void *>(&narrow),
                                       arg.bytes());
          !error.ok())
        return error;
    } else if (arg.role == "data") {
      if (Status error = dataArgument(arg, microBatch, buffer); !error.ok())
        return error;
    } else if (Status error = bindings.argument(fn, arg, buffer); !error.ok()) {
      return error;
    }
    args.push_back(buffer.data());
  }
  for (const TensorSpec &result : fn.results) {
    std::string key = result.stepKey();
    if (auto it = stateIndex.find(key); it != stateIndex.end()) {
      results.push_back(state[it->second]->next.data());
      continue;
    }
    Buffer *out = nullptr;
    if (Status error = newBuffer(result, out); !error.ok())
      return error;
    results.push_back(out->data());
  }
  loom_call_frame frame{args.data(), results.data(),
                        static_cast<uint8_t *>(workspace.data()), comm,
                        std::max<int64_t>(microBatch, 0)};
  if (Status error = device.call(fn, frame); !error.ok())
    return error.withContext(fn.name);
  // Updated state becomes current; other results go to the bindings.
  for (size_t j = 0; j < fn.results.size(); ++j) {
    const TensorSpec &result = fn.results[j];
    std::string key = result.stepKey();
    if (auto it = stateIndex.find(key); it != stateIndex.end()) {
      state[it->second]->updated = true;
      continue;
    }
    if (Status error = bindings.result(fn, result, results[j]); !error.ok())
      return error;
  }
  return Status();
}

Status Session::commitState() {
  for (auto &entry : state) {
    if (!entry->updated)
      continue;
    entry->updated = false;
    if (entry->resultSpec.splitAxes == entry->spec.splitAxes &&
        entry->resultSpec.shape == entry->spec.shape) {
      entry->current.swap(entry->next);
      continue;
    }
    if (Status error = reshard(*entry); !error.ok())
      return error;
  }
  return Status();
}

Status Session::reshard(StateEntry &entry) {
  // Gather every split dimension of the result (all_gather over the axes
  // that split it, whose member order is the shard order), then keep this
  // device's piece of every dimension the step reads split (all_slice over
  // the same axes, whose member index is the shard's index in placeOf).
  const TensorSpec &from = entry.resultSpec;
  int64_t rank = static_cast<int64_t>(from.shape.size());
  std::vector<int64_t> shape = from.shape;
  Buffer whole;
  whole.swap(entry.next);
  loom_call_frame frame{nullptr, nullptr, nullptr, comm, 0};
  auto step = [&](const std::string &op, int64_t d,
                  const std::vector<int64_t> &axes) -> Status {
    int64_t members = 1;
    std::vector<int64_t> sizes;
    for (int64_t axis : axes) {
      members *= artifact.gridShape[axis];
      sizes.push_back(artifact.gridShape[axis]);
    }
    std::vector<int64_t> reshaped = shape;
    if (op == "all_gather")
      reshaped[d] *= members;
    else
      reshaped[d] /= members;
    std::vector<int64_t> meta = {1, 1, from.dtype, rank};
    meta.insert(meta.end(), shape.begin(), shape.end());
    meta.push_back(from.dtype);
    meta.push_back(rank);
    meta.insert(meta.end(), reshaped.begin(), reshaped.end());
    if (op == "all_gather") {
      int64_t group = -1;
      for (size_t g = 0; g < artifact.groups.size(); ++g)
        if (artifact.groups[g] == axes)
          group = static_cast<int64_t>(g);
      if (group < 0)
        return artifactError("the plan has no communicator group for its "
                             "layout (recompile with this loom-compile)");
      // Slot -1: the gather waits in its own call.
      meta.insert(meta.end(), {group, members, d, -1});
    } else {
      meta.insert(meta.end(), {0, d, int64_t(axes.size())});
      meta.insert(meta.end(), axes.begin(), axes.end());
      meta.push_back(static_cast<int64_t>(sizes.size()));
      meta.insert(meta.end(), sizes.begin(), sizes.end());
    }
    int64_t bytes = loom_dtype_bytes(from.dtype);
    for (int64_t extent : reshaped)
      bytes *= extent;
    Buffer next;
    if (Status error = next.allocate(device, bytes); !error.ok())
      return error;
    void *buffers[] = {whole.data(), next.data()};
    if (Status error = device.collective(op, frame, buffers, meta.data());
        !error.ok())
      return error;
    whole.swap(next);
    shape = reshaped;
    return Status();
  };
  for (int64_t d = 0; d < rank && d < int64_t(from.splitAxes.size()); ++d)
    if (!from.splitAxes[d].empty())
      if (Status error = step("all_gather", d, from.splitAxes[d]); !error.ok())
        return error.withContext(entry.key + ": gathering the updated shards");
  const TensorSpec &to = entry.spec;
  for (int64_t d = 0; d < rank && d < int64_t(to.splitAxes.size()); ++d)
    if (!to.splitAxes[d].empty())
      if (Status error = step("all_slice", d, to.splitAxes[d]); !error.ok())
        return error.withContext(entry.key + ": taking this rank's shard");
  if (shape != to.shape)
    return artifactError(entry.key + ": the resharded state has another shape "
                                     "than the step reads");
  entry.current.swap(whole);
  if (Status error = entry.next.allocate(device, from.bytes()); !error.ok())
    return error.withContext(entry.key);
  return Status();
}

namespace {

/// The bindings of `train_step`: its only non-state result is the loss.
struct StepBindings : Bindings {
  explicit StepBindings(Device &device) : device(device) {}
  Device &device;
  float loss = 0.0f;
  Status argument(const Function &fn, const TensorSpec &arg,
                  Buffer &) override {
    return artifactError(fn.name + ": argument \"" + arg.role + ":" + arg.name +
                         "\" is neither state, step nor data");
  }
  Status result(const Function &fn, const TensorSpec &result,
                const void *data) override {
    if (result.role != "loss")
      return Status();
    if (result.dtype != LOOM_DTYPE_F32 || result.numElements() != 1)
      return artifactError(fn.name + ": the loss is not one f32");
    return device.download(&loss, data, sizeof loss);
  }
};

} // namespace

Status Session::step(int64_t stepNumber, double &loss) {
  Status error = artifact.streams.empty() ? runStep(stepNumber, loss)
                                          : runPipelineStep(stepNumber, loss);
  // What only the device saw (a token id outside the vocabulary) comes
  // with its synchronize; the step's own error, if any, comes first.
  Status late = device.synchronize();
  return error.ok() ? late : error;
}

Status Session::runStep(int64_t stepNumber, double &loss) {
  const Function *fn = artifact.find("train_step");
  setCurrent("call " + fn->name);
  StepBindings bindings(device);
  Status error = call(*fn, stepNumber, -1, bindings);
  setCurrent("");
  if (!error.ok())
    return error;
  if (Status error = commitState(); !error.ok())
    return error;
  loss = bindings.loss;
  return Status();
}

Status Session::readState(size_t index, void *host) {
  StateEntry &entry = *state.at(index);
  return device.download(host, entry.current.data(), entry.spec.bytes());
}

Status Session::writeState(size_t index, const void *host) {
  StateEntry &entry = *state.at(index);
  return device.upload(entry.current.data(), host, entry.spec.bytes());
}

Status Session::setStateGlobal(size_t index, const float *global) {
  StateEntry &entry = *state.at(index);
  if (entry.spec.dtype != LOOM_DTYPE_F32)
    return invalidArgument(entry.key + " is not f32");
  std::vector<uint8_t> local(entry.spec.bytes());
  copyShard(entry.spec, entry.place, global, local.data(), /*toLocal=*/true);
  return device.upload(entry.current.data(), local.data(), local.size());
}

} // namespace loom::rt
