//===- Pipeline.cpp - Executing a rank's pipeline schedule ----------------===//
//
// A pipelined artifact carries stage functions (forward, backward or
// backward_input + backward_weight, optimizer per stage) and schedule.json:
// one instruction stream per pipeline rank. World rank r walks the stream
// of pipeline rank r / devices, as device r % devices of the stage grid;
// its peer across a stage boundary is the same device of the peer's grid.
//
// Values between calls are keyed by their `loom.value`, as the reference
// pipeline interpreter keys them (lib/Interpreter/Pipeline.cpp, the oracle
// this executor is tested against):
//   activation      F(s) -> F(s+1), sent by send_activation of stage s
//   activation_grad B(s) -> B(s-1), sent by send_gradient of stage s
//   saved           F(s) -> B(s) of the same micro-batch, kept here
//   accumulator     a stage's running sum over micro-batches (also the
//                   loss); zero before the first. An optimizer argument
//                   with tied stages takes the sum of every tied stage's
//                   accumulator: all_reduce_gradients exchanges them
//                   between the pipeline ranks that hold those stages.
// The step's loss is an accumulator of the last stage; its pipeline rank
// sends it to the others, so every rank returns it.
//
// Every transfer is a tagged send/recv per value, in the order of the
// value keys; sends never wait for their recvs (loom_comm), so the order
// the schedule gives its sends and receives cannot deadlock on buffering.
// A transfer between two stages of one rank (virtual stages) moves
// nothing: the values stay in this rank's outbox.
//
//===----------------------------------------------------------------------===//

#include "Session.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace loom::rt {

namespace {

/// Which way a transfer goes: activations to the next stage, gradients to
/// the previous one.
enum Direction { Activation = 0, Gradient = 1 };

/// Tags 1..kTransferTags carry stage transfers; tied gradients and the
/// loss use the two tags after them.
constexpr int64_t kTransferTags = 30000;
constexpr int32_t kTiedTag = kTransferTags + 1;
constexpr int32_t kLossTag = kTransferTags + 2;

struct Value {
  TensorSpec spec;
  Buffer data;
};
using Values = std::map<std::string, std::unique_ptr<Value>>;

/// A zeroed value of `spec`'s shape on `device`, or null with `error`.
std::unique_ptr<Value> newValue(Device &device, const TensorSpec &spec,
                                Status &error) {
  auto value = std::make_unique<Value>();
  value->spec = spec;
  error = value->data.allocate(device, spec.bytes());
  if (!error.ok()) {
    error = error.withContext("'" + spec.value + "'");
    return nullptr;
  }
  return value;
}

/// One step's values on this rank, and how stage functions bind them.
struct PipelineValues : Bindings {
  explicit PipelineValues(Device &device) : device(device) {}
  Device &device;
  int64_t microBatch = -1;
  std::map<std::tuple<int, int64_t, int64_t>, Values> outbox;
  std::map<std::pair<int64_t, int64_t>, Values> saved;
  std::map<int64_t, Values> accumulators;
  /// Sums of tied accumulators by (optimizer stage, value key).
  std::map<std::pair<int64_t, std::string>, std::unique_ptr<Value>> tiedSums;

  Status argument(const Function &fn, const TensorSpec &arg,
                  Buffer &out) override {
    auto bind = [&](const Values &values, const std::string &what) -> Status {
      auto it = values.find(arg.value);
      if (it == values.end())
        return artifactError(fn.name + ": " + what + " '" + arg.value +
                             "' of micro-batch " + std::to_string(microBatch) +
                             " is not here");
      return fill(fn, arg, *it->second, out);
    };
    if (arg.role == "activation")
      return bind(outbox[{Activation, fn.stage - 1, microBatch}], "activation");
    if (arg.role == "activation_grad")
      return bind(outbox[{Gradient, fn.stage + 1, microBatch}],
                  "activation gradient");
    if (arg.role == "saved")
      return bind(saved[{fn.stage, microBatch}], "saved value");
    if (arg.value.empty())
      return artifactError(fn.name + ": argument \"" + arg.role + ":" +
                           arg.name +
                           "\" is neither state, step, data nor a pipeline "
                           "value");
    if (!arg.tiedStages.empty()) {
      auto it = tiedSums.find({fn.stage, arg.value});
      if (it == tiedSums.end())
        return artifactError(
            fn.name + ": the tied gradient '" + arg.value +
            "' was not summed (no all_reduce_gradients before it)");
      return fill(fn, arg, *it->second, out);
    }
    const Values &mine = accumulators[fn.stage];
    auto it = mine.find(arg.value);
    if (it == mine.end()) // zero before the first: `out` is zeroed
      return Status();
    return fill(fn, arg, *it->second, out);
  }

  Status result(const Function &fn, const TensorSpec &result,
                const void *data) override {
    if (result.value.empty())
      return artifactError(fn.name + ": result \"" + result.role + ":" +
                           result.name +
                           "\" is neither state nor a pipeline value");
    Status error;
    std::unique_ptr<Value> value = newValue(device, result, error);
    if (!value)
      return error.withContext(fn.name);
    if (Status error = device.copy(value->data.data(), data, result.bytes());
        !error.ok())
      return error.withContext(fn.name + ": '" + result.value + "'");
    if (result.role == "activation")
      outbox[{Activation, fn.stage, microBatch}][result.value] =
          std::move(value);
    else if (result.role == "activation_grad")
      outbox[{Gradient, fn.stage, microBatch}][result.value] = std::move(value);
    else if (result.role == "saved")
      saved[{fn.stage, microBatch}][result.value] = std::move(value);
    else
      accumulators[fn.stage][result.value] = std::move(value);
    return Status();
  }

  Status fill(const Function &fn, const TensorSpec &arg, const Value &value,
              Buffer &out) {
    if (value.spec.shape != arg.shape || value.spec.dtype != arg.dtype)
      return artifactError(fn.name + ": '" + arg.value +
                           "' arrives with another shape or type than it "
                           "takes");
    return device.copy(out.data(), value.data.data(), arg.bytes());
  }
};

/// The results of `fn` with role `role`, by value key (the order both ends
/// of a transfer send and receive them in).
std::vector<const TensorSpec *> resultsWithRole(const Function &fn,
                                                const std::string &role) {
  std::vector<const TensorSpec *> specs;
  for (const TensorSpec &result : fn.results)
    if (result.role == role)
      specs.push_back(&result);
  std::sort(specs.begin(), specs.end(),
            [](const TensorSpec *a, const TensorSpec *b) {
              return a->value < b->value;
            });
  return specs;
}

int64_t stageCount(const Artifact &artifact) {
  int64_t stages = 0;
  for (const Function &fn : artifact.functions)
    stages = std::max(stages, fn.stage + 1);
  return stages;
}

/// The tag of the transfer of micro-batch `mb`'s values from `stage` in
/// `direction`.
int32_t transferTag(int64_t stages, int direction, int64_t stage, int64_t mb) {
  return static_cast<int32_t>(1 + (mb * stages + stage) * 2 + direction);
}

} // namespace

std::string transfersInOrder(const Artifact &artifact) {
  // Per ordered pair of pipeline ranks, the tags of the sends of one and
  // of the recvs of the other, in the order their streams post them.
  int64_t stages = stageCount(artifact);
  int64_t ranks = artifact.pipelineRanks;
  auto rankOf = [&](int64_t stage) { return stage % ranks; };
  std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>> sent, received;
  for (int64_t me = 0; me < int64_t(artifact.streams.size()); ++me) {
    for (const Instr &instr : artifact.streams[me]) {
      const std::string &op = instr.op;
      if (instr.peer == me)
        continue; // stays on this rank
      if (op == "send_activation" || op == "send_gradient")
        sent[{me, instr.peer}].push_back(
            transferTag(stages, op == "send_activation" ? Activation : Gradient,
                        instr.stage, instr.microBatch));
      if (op == "recv_activation" || op == "recv_gradient")
        received[{instr.peer, me}].push_back(
            transferTag(stages, op == "recv_activation" ? Activation : Gradient,
                        instr.stage, instr.microBatch));
      if (op != "all_reduce_gradients")
        continue;
      for (const Function &fn : artifact.functions) {
        if (fn.kind != "optimizer")
          continue;
        for (const TensorSpec &arg : fn.args)
          for (int64_t tied : arg.tiedStages) {
            int64_t from = rankOf(tied), to = rankOf(fn.stage);
            if (from != to && from == me)
              sent[{from, to}].push_back(kTiedTag);
            if (from != to && to == me)
              received[{from, to}].push_back(kTiedTag);
          }
      }
    }
  }
  int64_t lossStage = -1;
  for (const Function &fn : artifact.functions)
    for (const TensorSpec &result : fn.results)
      if (fn.kind == "forward" && result.role == "loss")
        lossStage = fn.stage;
  if (lossStage >= 0)
    for (int64_t p = 0; p < ranks; ++p)
      if (p != rankOf(lossStage)) {
        sent[{rankOf(lossStage), p}].push_back(kLossTag);
        received[{rankOf(lossStage), p}].push_back(kLossTag);
      }
  for (int64_t from = 0; from < ranks; ++from)
    for (int64_t to = 0; to < ranks; ++to)
      if (sent[{from, to}] != received[{from, to}])
        return "pipeline rank " + std::to_string(to) +
               " receives the transfers of pipeline rank " +
               std::to_string(from) + " in another order than they are sent";
  return "";
}

Status Session::runPipelineStep(int64_t stepNumber, double &loss) {
  int64_t devices = artifact.devices();
  int64_t gridIndex = worldRank % devices; // this rank's device of the grid
  int64_t stages = stageCount(artifact);
  if (stages * artifact.microBatches * 2 > kTransferTags)
    return artifactError("the schedule has more transfers per step (" +
                         std::to_string(stages * artifact.microBatches * 2) +
                         ") than the runtime has tags for (" +
                         std::to_string(kTransferTags) + ")");
  auto rankOf = [&](int64_t stage) { return stage % artifact.pipelineRanks; };
  auto worldOf = [&](int64_t pipeline) {
    return static_cast<int32_t>(pipeline * devices + gridIndex);
  };
  // A callback's failure is the communicator's: its own message follows at
  // the C ABI.
  auto commError = [](const std::string &what) {
    return communicationError(what + " failed");
  };

  PipelineValues values(device);
  const std::vector<Instr> &stream = artifact.streams[pipelineRank];
  for (const Instr &instr : stream) {
    setCurrent(instr.describe());
    std::string where = instr.describe() + ": ";
    values.microBatch = instr.microBatch;
    const std::string &op = instr.op;
    if (op == "forward" || op == "backward" || op == "backward_input" ||
        op == "backward_weight") {
      const Function *fn = artifact.stageFunction(instr.stage, op);
      if (!fn)
        return artifactError(where + "the artifact has no " + op +
                             " function of stage " +
                             std::to_string(instr.stage));
      if (Status error = call(*fn, stepNumber, instr.microBatch, values);
          !error.ok())
        return error.withContext(instr.describe());
      // What a call consumed is not needed again: a forward's incoming
      // activations, a micro-batch's saved values and incoming gradients
      // after its last backward part.
      if (op == "forward")
        values.outbox.erase({Activation, instr.stage - 1, instr.microBatch});
      if (op == "backward" || op == "backward_weight") {
        values.saved.erase({instr.stage, instr.microBatch});
        values.outbox.erase({Gradient, instr.stage + 1, instr.microBatch});
      }
      continue;
    }
    if (op == "send_activation" || op == "send_gradient") {
      int direction = op == "send_activation" ? Activation : Gradient;
      auto it = values.outbox.find({direction, instr.stage, instr.microBatch});
      if (it == values.outbox.end())
        return artifactError(where +
                             "nothing to send (its computation has not run)");
      // To a stage of this rank (virtual stages): the values stay where
      // its recv would put them.
      if (instr.peer == pipelineRank)
        continue;
      for (auto &[key, value] : it->second)
        if (comm->send(
                comm->ctx, worldOf(instr.peer),
                transferTag(stages, direction, instr.stage, instr.microBatch),
                value->data.data(), value->spec.numElements(),
                value->spec.dtype))
          return commError(where + "sending '" + key + "' to world rank " +
                           std::to_string(worldOf(instr.peer)));
      values.outbox.erase(it);
      continue;
    }
    if (op == "recv_activation" || op == "recv_gradient") {
      int direction = op == "recv_activation" ? Activation : Gradient;
      if (instr.peer == pipelineRank) {
        if (!values.outbox.count({direction, instr.stage, instr.microBatch}))
          return artifactError(where + "nothing was sent (its computation "
                                       "has not run)");
        continue;
      }
      const Function *producer =
          direction == Activation
              ? artifact.stageFunction(instr.stage, "forward")
              : artifact.stageFunction(instr.stage, "backward");
      if (!producer && direction == Gradient)
        producer = artifact.stageFunction(instr.stage, "backward_input");
      if (!producer)
        return artifactError(where + "the artifact has no function of stage " +
                             std::to_string(instr.stage) + " that produces it");
      Values &into = values.outbox[{direction, instr.stage, instr.microBatch}];
      for (const TensorSpec *spec : resultsWithRole(
               *producer,
               direction == Activation ? "activation" : "activation_grad")) {
        Status error;
        std::unique_ptr<Value> value = newValue(device, *spec, error);
        if (!value)
          return error.withContext(instr.describe());
        if (comm->recv(
                comm->ctx, worldOf(instr.peer),
                transferTag(stages, direction, instr.stage, instr.microBatch),
                value->data.data(), spec->numElements(), spec->dtype))
          return commError(where + "receiving '" + spec->value +
                           "' from world rank " +
                           std::to_string(worldOf(instr.peer)));
        into[spec->value] = std::move(value);
      }
      continue;
    }
    if (op == "all_reduce_gradients") {
      // Every optimizer argument with tied stages, on every rank, in the
      // artifact's order: the holders of the tied stages send their
      // accumulators to the optimizer's rank, which sums them in the order
      // of the tied list (zero where a stage accumulated nothing).
      std::map<std::tuple<int64_t, std::string, int64_t>,
               std::unique_ptr<Value>>
          received;
      Status error;
      auto accumulatorOf = [&](int64_t stage,
                               const TensorSpec &arg) -> Value * {
        std::unique_ptr<Value> &slot = values.accumulators[stage][arg.value];
        if (!slot) // zero: the stage accumulated nothing
          slot = newValue(device, arg, error);
        return slot.get();
      };
      for (int pass = 0; pass < 2; ++pass) // sends, then receives
        for (const Function &fn : artifact.functions) {
          if (fn.kind != "optimizer")
            continue;
          for (const TensorSpec &arg : fn.args)
            for (int64_t tied : arg.tiedStages) {
              int64_t from = rankOf(tied), to = rankOf(fn.stage);
              if (from == to)
                continue;
              if (pass == 0 && from == pipelineRank) {
                Value *value = accumulatorOf(tied, arg);
                if (!value)
                  return error.withContext(instr.describe());
                if (comm->send(comm->ctx, worldOf(to), kTiedTag,
                               value->data.data(), arg.numElements(),
                               arg.dtype))
                  return commError(where + "sending tied gradient '" +
                                   arg.value + "' of stage " +
                                   std::to_string(tied));
              }
              if (pass == 1 && to == pipelineRank) {
                std::unique_ptr<Value> value = newValue(device, arg, error);
                if (!value)
                  return error.withContext(instr.describe());
                if (comm->recv(comm->ctx, worldOf(from), kTiedTag,
                               value->data.data(), arg.numElements(),
                               arg.dtype))
                  return commError(where + "receiving tied gradient '" +
                                   arg.value + "' of stage " +
                                   std::to_string(tied));
                received[{fn.stage, arg.value, tied}] = std::move(value);
              }
            }
        }
      for (const Function &fn : artifact.functions) {
        if (fn.kind != "optimizer" || rankOf(fn.stage) != pipelineRank)
          continue;
        for (const TensorSpec &arg : fn.args) {
          if (arg.tiedStages.empty())
            continue;
          if (arg.dtype != LOOM_DTYPE_F32)
            return artifactError(where + "tied gradient '" + arg.value +
                                 "' is not f32");
          std::unique_ptr<Value> sum = newValue(device, arg, error);
          if (!sum)
            return error.withContext(instr.describe());
          for (int64_t tied : arg.tiedStages) {
            Value *part = rankOf(tied) == pipelineRank
                              ? accumulatorOf(tied, arg)
                              : received.at({fn.stage, arg.value, tied}).get();
            if (!part)
              return error.withContext(instr.describe());
            if (part->spec.shape != arg.shape)
              return artifactError(where + "tied gradient '" + arg.value +
                                   "' of stage " + std::to_string(tied) +
                                   " has another shape");
            if (Status error = device.accumulate(
                    static_cast<float *>(sum->data.data()),
                    static_cast<const float *>(part->data.data()),
                    arg.numElements());
                !error.ok())
              return error.withContext(where + "summing tied gradient '" +
                                       arg.value + "'");
          }
          values.tiedSums[{fn.stage, arg.value}] = std::move(sum);
        }
      }
      continue;
    }
    if (op == "optimizer") {
      for (const Function &fn : artifact.functions)
        if (fn.kind == "optimizer" && rankOf(fn.stage) == pipelineRank)
          if (Status error = call(fn, stepNumber, -1, values); !error.ok())
            return error.withContext(instr.describe());
      continue;
    }
    return artifactError(where + "unknown instruction '" + op + "'");
  }
  setCurrent("");
  LOOM_RETURN_IF_ERROR(commitState());

  // The loss: an accumulator of the stage whose forward returns it.
  const Function *lossFn = nullptr;
  const TensorSpec *lossSpec = nullptr;
  for (const Function &fn : artifact.functions)
    for (const TensorSpec &result : fn.results)
      if (fn.kind == "forward" && result.role == "loss") {
        lossFn = &fn;
        lossSpec = &result;
      }
  if (!lossFn)
    return artifactError("no stage function returns the loss");
  if (lossSpec->dtype != LOOM_DTYPE_F32 || lossSpec->numElements() != 1)
    return artifactError(lossFn->name + ": the loss is not one f32");
  int64_t lossRank = rankOf(lossFn->stage);
  float value = 0;
  setCurrent("share the loss");
  // Sent and received in the device's buffers (a GPU backend's comm moves
  // device memory), then read here.
  Buffer lossBuffer;
  const void *lossData = nullptr;
  if (lossRank == pipelineRank) {
    auto &mine = values.accumulators[lossFn->stage];
    auto it = mine.find(lossSpec->value);
    if (it == mine.end())
      return artifactError(lossFn->name + ": the loss was never computed");
    lossData = it->second->data.data();
    for (int64_t p = 0; p < artifact.pipelineRanks; ++p)
      if (p != pipelineRank && comm->send(comm->ctx, worldOf(p), kLossTag,
                                          lossData, 1, LOOM_DTYPE_F32))
        return commError("sending the loss to world rank " +
                         std::to_string(worldOf(p)));
  } else {
    if (Status error = lossBuffer.allocate(device, sizeof value); !error.ok())
      return error.withContext("the loss");
    if (comm->recv(comm->ctx, worldOf(lossRank), kLossTag, lossBuffer.data(), 1,
                   LOOM_DTYPE_F32))
      return commError("receiving the loss from world rank " +
                       std::to_string(worldOf(lossRank)));
    lossData = lossBuffer.data();
  }
  if (Status error = device.download(&value, lossData, sizeof value);
      !error.ok())
    return error.withContext("reading the loss");
  setCurrent("");
  loss = value;
  return Status();
}

} // namespace loom::rt
