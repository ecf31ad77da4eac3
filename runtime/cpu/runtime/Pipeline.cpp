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
  AlignedBuffer data;
};
using Values = std::map<std::string, std::unique_ptr<Value>>;

std::unique_ptr<Value> copyValue(const TensorSpec &spec, const void *data) {
  auto value = std::make_unique<Value>();
  value->spec = spec;
  value->data.resize(spec.bytes());
  std::memcpy(value->data.data(), data, spec.bytes());
  return value;
}

/// One step's values on this rank, and how stage functions bind them.
struct PipelineValues : Bindings {
  int64_t microBatch = -1;
  std::map<std::tuple<int, int64_t, int64_t>, Values> outbox;
  std::map<std::pair<int64_t, int64_t>, Values> saved;
  std::map<int64_t, Values> accumulators;
  /// Sums of tied accumulators by (optimizer stage, value key).
  std::map<std::pair<int64_t, std::string>, std::unique_ptr<Value>> tiedSums;

  std::string argument(const Function &fn, const TensorSpec &arg,
                       AlignedBuffer &out) override {
    auto bind = [&](const Values &values,
                    const std::string &what) -> std::string {
      auto it = values.find(arg.value);
      if (it == values.end())
        return fn.name + ": " + what + " '" + arg.value + "' of micro-batch " +
               std::to_string(microBatch) + " is not here";
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
      return fn.name + ": argument \"" + arg.role + ":" + arg.name +
             "\" is neither state, step, data nor a pipeline value";
    if (!arg.tiedStages.empty()) {
      auto it = tiedSums.find({fn.stage, arg.value});
      if (it == tiedSums.end())
        return fn.name + ": the tied gradient '" + arg.value +
               "' was not summed (no all_reduce_gradients before it)";
      return fill(fn, arg, *it->second, out);
    }
    const Values &mine = accumulators[fn.stage];
    auto it = mine.find(arg.value);
    if (it == mine.end()) {
      std::memset(out.data(), 0, arg.bytes());
      return "";
    }
    return fill(fn, arg, *it->second, out);
  }

  std::string result(const Function &fn, const TensorSpec &result,
                     const void *data) override {
    if (result.value.empty())
      return fn.name + ": result \"" + result.role + ":" + result.name +
             "\" is neither state nor a pipeline value";
    std::unique_ptr<Value> value = copyValue(result, data);
    if (result.role == "activation")
      outbox[{Activation, fn.stage, microBatch}][result.value] =
          std::move(value);
    else if (result.role == "activation_grad")
      outbox[{Gradient, fn.stage, microBatch}][result.value] = std::move(value);
    else if (result.role == "saved")
      saved[{fn.stage, microBatch}][result.value] = std::move(value);
    else
      accumulators[fn.stage][result.value] = std::move(value);
    return "";
  }

  static std::string fill(const Function &fn, const TensorSpec &arg,
                          const Value &value, AlignedBuffer &out) {
    if (value.spec.shape != arg.shape || value.spec.dtype != arg.dtype)
      return fn.name + ": '" + arg.value +
             "' arrives with another shape or type than it takes";
    std::memcpy(out.data(), value.data.data(), arg.bytes());
    return "";
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

} // namespace

std::string Session::runPipelineStep(int64_t stepNumber, double &loss) {
  int64_t devices = artifact.devices();
  int64_t device = worldRank % devices;
  int64_t stages = 0;
  for (const Function &fn : artifact.functions)
    stages = std::max(stages, fn.stage + 1);
  if (stages * artifact.microBatches * 2 > kTransferTags)
    return "the schedule has more transfers per step (" +
           std::to_string(stages * artifact.microBatches * 2) +
           ") than the runtime has tags for (" + std::to_string(kTransferTags) +
           ")";
  auto rankOf = [&](int64_t stage) { return stage % artifact.pipelineRanks; };
  auto worldOf = [&](int64_t pipeline) {
    return static_cast<int32_t>(pipeline * devices + device);
  };
  auto transferTag = [&](int direction, int64_t stage, int64_t mb) {
    return static_cast<int32_t>(1 + (mb * stages + stage) * 2 + direction);
  };
  // The backend's own message follows at the C ABI (loom_mpi_comm_error).
  auto commError = [](const std::string &what) { return what + " failed"; };

  PipelineValues values;
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
        return where + "the artifact has no " + op + " function of stage " +
               std::to_string(instr.stage);
      if (std::string error = call(*fn, stepNumber, instr.microBatch, values);
          !error.empty())
        return where + error;
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
        return where + "nothing to send (its computation has not run)";
      for (auto &[key, value] : it->second)
        if (comm->send(comm->ctx, worldOf(instr.peer),
                       transferTag(direction, instr.stage, instr.microBatch),
                       value->data.data(), value->spec.numElements(),
                       value->spec.dtype))
          return where + commError("sending '" + key + "' to world rank " +
                                   std::to_string(worldOf(instr.peer)));
      values.outbox.erase(it);
      continue;
    }
    if (op == "recv_activation" || op == "recv_gradient") {
      int direction = op == "recv_activation" ? Activation : Gradient;
      const Function *producer =
          direction == Activation
              ? artifact.stageFunction(instr.stage, "forward")
              : artifact.stageFunction(instr.stage, "backward");
      if (!producer && direction == Gradient)
        producer = artifact.stageFunction(instr.stage, "backward_input");
      if (!producer)
        return where + "the artifact has no function of stage " +
               std::to_string(instr.stage) + " that produces it";
      Values &into = values.outbox[{direction, instr.stage, instr.microBatch}];
      for (const TensorSpec *spec : resultsWithRole(
               *producer,
               direction == Activation ? "activation" : "activation_grad")) {
        auto value = std::make_unique<Value>();
        value->spec = *spec;
        value->data.resize(spec->bytes());
        if (comm->recv(comm->ctx, worldOf(instr.peer),
                       transferTag(direction, instr.stage, instr.microBatch),
                       value->data.data(), spec->numElements(), spec->dtype))
          return where +
                 commError("receiving '" + spec->value + "' from world rank " +
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
      auto accumulatorOf = [&](int64_t stage, const TensorSpec &arg) {
        std::unique_ptr<Value> &slot = values.accumulators[stage][arg.value];
        if (!slot) { // zero: the stage accumulated nothing
          slot = std::make_unique<Value>();
          slot->spec = arg;
          slot->data.resize(arg.bytes());
        }
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
                if (comm->send(comm->ctx, worldOf(to), kTiedTag,
                               value->data.data(), arg.numElements(),
                               arg.dtype))
                  return where +
                         commError("sending tied gradient '" + arg.value +
                                   "' of stage " + std::to_string(tied));
              }
              if (pass == 1 && to == pipelineRank) {
                auto value = std::make_unique<Value>();
                value->spec = arg;
                value->data.resize(arg.bytes());
                if (comm->recv(comm->ctx, worldOf(from), kTiedTag,
                               value->data.data(), arg.numElements(),
                               arg.dtype))
                  return where +
                         commError("receiving tied gradient '" + arg.value +
                                   "' of stage " + std::to_string(tied));
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
            return where + "tied gradient '" + arg.value + "' is not f32";
          auto sum = std::make_unique<Value>();
          sum->spec = arg;
          sum->data.resize(arg.bytes());
          auto *total = reinterpret_cast<float *>(sum->data.data());
          for (int64_t tied : arg.tiedStages) {
            Value *part = rankOf(tied) == pipelineRank
                              ? accumulatorOf(tied, arg)
                              : received.at({fn.stage, arg.value, tied}).get();
            if (part->spec.shape != arg.shape)
              return where + "tied gradient '" + arg.value + "' of stage " +
                     std::to_string(tied) + " has another shape";
            auto *add = reinterpret_cast<const float *>(part->data.data());
            for (int64_t e = 0, n = arg.numElements(); e < n; ++e)
              total[e] += add[e];
          }
          values.tiedSums[{fn.stage, arg.value}] = std::move(sum);
        }
      }
      continue;
    }
    if (op == "optimizer") {
      for (const Function &fn : artifact.functions)
        if (fn.kind == "optimizer" && rankOf(fn.stage) == pipelineRank)
          if (std::string error = call(fn, stepNumber, -1, values);
              !error.empty())
            return where + error;
      continue;
    }
    return where + "unknown instruction '" + op + "'";
  }
  setCurrent("");
  if (std::string error = commitState(); !error.empty())
    return error;

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
    return "no stage function returns the loss";
  if (lossSpec->dtype != LOOM_DTYPE_F32 || lossSpec->numElements() != 1)
    return lossFn->name + ": the loss is not one f32";
  int64_t lossRank = rankOf(lossFn->stage);
  float value = 0;
  setCurrent("share the loss");
  if (lossRank == pipelineRank) {
    auto &mine = values.accumulators[lossFn->stage];
    auto it = mine.find(lossSpec->value);
    if (it == mine.end())
      return lossFn->name + ": the loss was never computed";
    std::memcpy(&value, it->second->data.data(), sizeof value);
    for (int64_t p = 0; p < artifact.pipelineRanks; ++p)
      if (p != pipelineRank && comm->send(comm->ctx, worldOf(p), kLossTag,
                                          &value, 1, LOOM_DTYPE_F32))
        return commError("sending the loss to world rank " +
                         std::to_string(worldOf(p)));
  } else if (comm->recv(comm->ctx, worldOf(lossRank), kLossTag, &value, 1,
                        LOOM_DTYPE_F32)) {
    return commError("receiving the loss from world rank " +
                     std::to_string(worldOf(lossRank)));
  }
  setCurrent("");
  loss = value;
  return "";
}

} // namespace loom::rt
