//===- Session.cpp - One rank's executor, behind the C ABI ----------------===//
//
// A session holds this rank's shard of the training state (parameters and
// optimizer moments, double-buffered: a step reads one copy and writes the
// other, since compiled code never updates in place), one workspace for the
// largest static memory plan, and the step's batch. A step without a
// pipeline calls `train_step` once; a pipelined step walks this rank's
// stream of the schedule (Pipeline.cpp).
//
//===----------------------------------------------------------------------===//

#include "Session.h"

#include "loom/loom_cpu_kernels.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace loom::rt {

AlignedBuffer::AlignedBuffer(int64_t bytes) { resize(bytes); }

void AlignedBuffer::resize(int64_t bytes) {
  std::free(storage);
  size = bytes;
  int64_t rounded = ((std::max<int64_t>(bytes, 1) + 63) / 64) * 64;
  storage = static_cast<uint8_t *>(std::aligned_alloc(64, rounded));
  if (storage)
    std::memset(storage, 0, rounded);
}

AlignedBuffer::~AlignedBuffer() { std::free(storage); }

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

Session::Session(const Artifact &artifact, int32_t worldRank,
                 const loom_comm *comm)
    : artifact(artifact), worldRank(worldRank), comm(comm) {}

std::string Session::init() {
  int64_t devices = artifact.devices();
  if (worldRank < 0 || worldRank >= artifact.worldSize())
    return "rank " + std::to_string(worldRank) + " is outside the job's " +
           std::to_string(artifact.worldSize()) + " ranks";
  if (!comm && artifact.worldSize() > 1)
    return "a job of " + std::to_string(artifact.worldSize()) +
           " ranks needs a communication backend";
  pipelineRank = worldRank / devices;
  int64_t linear = worldRank % devices;
  coords.assign(artifact.gridShape.size(), 0);
  for (int64_t axis = int64_t(coords.size()) - 1; axis >= 0; --axis) {
    coords[axis] = linear % artifact.gridShape[axis];
    linear /= artifact.gridShape[axis];
  }

  // The state this rank holds: the step's own param/m/v arguments of the
  // functions it runs, once each.
  for (const Function &fn : artifact.functions) {
    if (!runsHere(fn))
      continue;
    workspace.resize(std::max(workspace.size, fn.workspaceBytes));
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
        entry.current.resize(arg.bytes());
        entry.next.resize(arg.bytes());
      }
    }
  }
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
          return fn.name + ": result " + entry.key +
                 " has another global shape than the argument";
        entry.next.resize(result.bytes());
      }
  }
  for (auto &entry : state)
    if (entry->resultSpec.shape.empty() && !entry->spec.shape.empty())
      entry->resultSpec = entry->spec;
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
    return "the artifact's functions take no token batch";
  return "";
}

bool Session::runsHere(const Function &fn) const {
  if (artifact.streams.empty())
    return fn.name == "train_step";
  return fn.stage >= 0 && fn.stage % artifact.pipelineRanks == pipelineRank;
}

std::string Session::setBatch(const int32_t *tokens, const int32_t *labels) {
  globalTokens.assign(tokens, tokens + artifact.batchRows * artifact.seqLen);
  globalLabels.assign(labels, labels + artifact.batchRows * artifact.seqLen);
  return "";
}

void Session::setCurrent(const std::string &text) {
  std::snprintf(current, sizeof current, "%s", text.c_str());
}

std::string Session::dataArgument(const TensorSpec &arg, int64_t microBatch,
                                  AlignedBuffer &out) {
  if (arg.name != "tokens" && arg.name != "labels")
    return "unknown data argument \"" + arg.name + "\"";
  const std::vector<int32_t> &whole =
      arg.name == "tokens" ? globalTokens : globalLabels;
  if (whole.empty())
    return "no batch was set before the step";
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
  out.resize(arg.bytes());
  copyShard(arg, placeOf(arg, artifact.gridShape, coords), global.data(),
            out.data(), /*toLocal=*/true);
  return "";
}

std::string Session::call(const Function &fn, int64_t step, int64_t microBatch,
                          Bindings &bindings) {
  std::vector<void *> args, results;
  std::vector<std::unique_ptr<AlignedBuffer>> scratch;
  for (const TensorSpec &arg : fn.args) {
    std::string key = arg.stepKey();
    if (auto it = stateIndex.find(key); it != stateIndex.end()) {
      args.push_back(state[it->second]->current.data());
      continue;
    }
    scratch.push_back(std::make_unique<AlignedBuffer>(arg.bytes()));
    AlignedBuffer &buffer = *scratch.back();
    if (arg.role == "step") {
      if (arg.dtype == LOOM_DTYPE_I64)
        *reinterpret_cast<int64_t *>(buffer.data()) = step;
      else
        *reinterpret_cast<int32_t *>(buffer.data()) = int32_t(step);
    } else if (arg.role == "data") {
      if (std::string error = dataArgument(arg, microBatch, buffer);
          !error.empty())
        return error;
    } else if (std::string error = bindings.argument(fn, arg, buffer);
               !error.empty()) {
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
    scratch.push_back(std::make_unique<AlignedBuffer>(result.bytes()));
    results.push_back(scratch.back()->data());
  }
  loom_call_frame frame{args.data(), results.data(), workspace.data(), comm,
                        std::max<int64_t>(microBatch, 0)};
  if (int32_t status = fn.entry(&frame))
    return fn.name + ": " + loom_cpu_last_error() + " (status " +
           std::to_string(status) + ")";
  // Updated state becomes current; other results go to the bindings.
  for (size_t j = 0; j < fn.results.size(); ++j) {
    const TensorSpec &result = fn.results[j];
    std::string key = result.stepKey();
    if (auto it = stateIndex.find(key); it != stateIndex.end()) {
      state[it->second]->updated = true;
      continue;
    }
    if (std::string error = bindings.result(fn, result, results[j]);
        !error.empty())
      return error;
  }
  return "";
}

std::string Session::commitState() {
  for (auto &entry : state) {
    if (!entry->updated)
      continue;
    entry->updated = false;
    if (entry->resultSpec.splitAxes == entry->spec.splitAxes &&
        entry->resultSpec.shape == entry->spec.shape) {
      entry->current.swap(entry->next);
      continue;
    }
    if (std::string error = reshard(*entry); !error.empty())
      return error;
  }
  return "";
}

std::string Session::reshard(StateEntry &entry) {
  // Gather every split dimension of the result (all_gather over the axes
  // that split it, whose member order is the shard order), then take this
  // device's shard of the whole tensor in the layout the step reads.
  const TensorSpec &from = entry.resultSpec;
  std::vector<int64_t> shape = from.shape;
  AlignedBuffer whole(from.bytes());
  std::memcpy(whole.data(), entry.next.data(), from.bytes());
  loom_call_frame frame{nullptr, nullptr, nullptr, comm, 0};
  int64_t rank = static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < rank && d < int64_t(from.splitAxes.size()); ++d) {
    const std::vector<int64_t> &axes = from.splitAxes[d];
    if (axes.empty())
      continue;
    int64_t group = -1;
    for (size_t g = 0; g < artifact.groups.size(); ++g)
      if (artifact.groups[g] == axes)
        group = static_cast<int64_t>(g);
    if (group < 0)
      return entry.key + ": the plan has no communicator group for its "
                         "layout (recompile with this loom-compile)";
    int64_t members = 1;
    for (int64_t axis : axes)
      members *= artifact.gridShape[axis];
    std::vector<int64_t> gathered = shape;
    gathered[d] *= members;
    std::vector<int64_t> meta = {1, 1, from.dtype, rank};
    meta.insert(meta.end(), shape.begin(), shape.end());
    meta.push_back(from.dtype);
    meta.push_back(rank);
    meta.insert(meta.end(), gathered.begin(), gathered.end());
    meta.insert(meta.end(), {group, members, d});
    int64_t bytes = loom_dtype_bytes(from.dtype);
    for (int64_t extent : gathered)
      bytes *= extent;
    AlignedBuffer next(bytes);
    void *buffers[] = {whole.data(), next.data()};
    if (loom_cpu_all_gather(&frame, buffers, meta.data()))
      return entry.key +
             ": gathering the updated shards: " + loom_cpu_last_error();
    whole.swap(next);
    shape = gathered;
  }
  copyShard(entry.spec, entry.place, whole.data(), entry.current.data(),
            /*toLocal=*/true);
  return "";
}

namespace {

/// The bindings of `train_step`: its only non-state result is the loss.
struct StepBindings : Bindings {
  double loss = 0.0;
  std::string argument(const Function &fn, const TensorSpec &arg,
                       AlignedBuffer &) override {
    return fn.name + ": argument \"" + arg.role + ":" + arg.name +
           "\" is neither state, step nor data";
  }
  std::string result(const Function &, const TensorSpec &result,
                     const void *data) override {
    if (result.role == "loss")
      loss = *static_cast<const float *>(data);
    return "";
  }
};

} // namespace

std::string Session::step(int64_t stepNumber, double &loss) {
  if (!artifact.streams.empty())
    return runPipelineStep(stepNumber, loss);
  const Function *fn = artifact.find("train_step");
  setCurrent("call " + fn->name);
  StepBindings bindings;
  std::string error = call(*fn, stepNumber, -1, bindings);
  setCurrent("");
  if (!error.empty())
    return error;
  if (std::string error = commitState(); !error.empty())
    return error;
  loss = bindings.loss;
  return "";
}

} // namespace loom::rt
