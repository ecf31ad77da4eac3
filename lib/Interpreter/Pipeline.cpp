//===- Pipeline.cpp - The reference interpreter on a pipelined step -------===//
//
// The ranks' instruction streams are executed by one thread, rank after
// rank, each as far as it can go: a receive whose send has not happened,
// or the gradient reduction before every rank has reached it, stops that
// rank until another makes progress. Values are kept per device of the
// stage grid: a stage function's call runs on every device at once
// (runRanks), so the collectives a partitioned stage contains run as they
// would on a real grid.
//
//===----------------------------------------------------------------------===//

#include "loom/Interpreter/Pipeline.h"

#include "DevicePosition.h"

#include "loom/Interpreter/MultiRank.h"
#include "loom/Schedule/Schedule.h"
#include "loom/Schedule/ScheduleAttr.h"
#include "loom/Schedule/Verify.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <set>
#include <tuple>

using namespace mlir;

namespace loom::interp {

std::string stepKey(DictionaryAttr attrs) {
  if (!attrs)
    return "";
  auto role = attrs.getAs<StringAttr>(kRoleAttr);
  if (!role)
    return "";
  if (role.getValue() == "loss")
    return "loss";
  auto name = attrs.getAs<StringAttr>(kNameAttr);
  return (role.getValue() + ":" + (name ? name.getValue() : "")).str();
}

namespace {

/// One tensor per device of the stage grid.
using DeviceTensors = std::vector<Tensor>;
using KeyedValues = std::map<std::string, DeviceTensors>;

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "pipeline: " + message);
}

struct StageFunctions {
  func::FuncOp forward, backward, backwardInput, backwardWeight, optimizer;
};

/// Which way a transfer goes: activations to the next stage, gradients to
/// the previous one.
enum Direction { Activation = 0, Gradient = 1 };

class Runner {
public:
  Runner(ModuleOp module, const NamedTensors &inputs, Precision precision)
      : module(module), inputs(inputs), precision(precision) {}

  llvm::Expected<NamedTensors> run(PipelineRunStats *stats);

private:
  llvm::Error load();
  /// Executes `instr` on `rank`; false when it must wait.
  llvm::Expected<bool> execute(int rank, const sched::Instr &instr);
  llvm::Error callStage(func::FuncOp fn, int stage, int microBatch);
  llvm::Expected<DeviceTensors> argument(func::FuncOp fn, unsigned i, int stage,
                                         int microBatch);
  llvm::Expected<DeviceTensors> shard(const Tensor &whole,
                                      DictionaryAttr attrs) const;
  llvm::Expected<Tensor> assemble(const DeviceTensors &shards,
                                  DictionaryAttr attrs) const;
  llvm::Expected<Tensor> microBatchOf(const Tensor &whole,
                                      int microBatch) const;

  ModuleOp module;
  const NamedTensors &inputs;
  Precision precision;

  sched::Schedule schedule;
  shard::GridOp grid;
  llvm::SmallVector<int64_t> gridShape;
  int64_t devices = 1;
  std::vector<StageFunctions> stages;

  /// Results of stage functions: transfers by (direction, producing stage,
  /// micro-batch), values saved for the backward by (stage, micro-batch),
  /// accumulators by stage.
  std::map<std::tuple<int, int, int>, KeyedValues> outbox;
  std::map<std::pair<int, int>, KeyedValues> saved;
  std::map<int, KeyedValues> accumulators;
  std::map<std::string, DictionaryAttr> accumulatorAttrs;
  std::set<int> atReduction;
  NamedTensors outputs;
  PipelineRunStats counts;
};

llvm::Error Runner::load() {
  Attribute attr = module->getAttr(kScheduleAttr);
  if (!attr)
    return failure("the module has no `" + kScheduleAttr +
                   "` (run --loom-split-stages)");
  auto parsed = sched::scheduleFromAttr(attr);
  if (!parsed)
    return failure("`" + kScheduleAttr +
                   "`: " + llvm::toString(parsed.takeError()));
  schedule = std::move(*parsed);
  if (llvm::Error err = sched::verifySchedule(schedule))
    return failure("`" + kScheduleAttr +
                   "`: " + llvm::toString(std::move(err)));

  for (auto candidate : module.getOps<shard::GridOp>()) {
    if (grid)
      return failure("the module has more than one shard.grid");
    grid = candidate;
  }
  if (grid) {
    gridShape.assign(grid.getShape().begin(), grid.getShape().end());
    for (int64_t size : gridShape) {
      if (size <= 0)
        return failure("the grid must have a static shape");
      devices *= size;
    }
  }

  stages.resize(schedule.numStages());
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto attr = fn->getAttrOfType<DictionaryAttr>(kStageFunctionAttr);
    if (!attr)
      continue;
    auto stage = attr.getAs<IntegerAttr>("stage");
    auto kind = attr.getAs<StringAttr>("kind");
    if (!stage || !kind || stage.getInt() < 0 ||
        stage.getInt() >= int64_t(stages.size()))
      return failure("@" + fn.getSymName() + " has a malformed `" +
                     kStageFunctionAttr + "`");
    StageFunctions &fns = stages[stage.getInt()];
    llvm::StringRef k = kind.getValue();
    func::FuncOp *slot = k == "forward"           ? &fns.forward
                         : k == "backward"        ? &fns.backward
                         : k == "backward_input"  ? &fns.backwardInput
                         : k == "backward_weight" ? &fns.backwardWeight
                         : k == "optimizer"       ? &fns.optimizer
                                                  : nullptr;
    if (!slot)
      return failure("@" + fn.getSymName() + ": unknown stage function kind '" +
                     k + "'");
    *slot = fn;
  }
  for (auto [s, fns] : llvm::enumerate(stages)) {
    bool split = schedule.kind == sched::ScheduleKind::ZeroBubbleH1;
    if (!fns.forward || !fns.optimizer ||
        (split ? !fns.backwardInput || !fns.backwardWeight : !fns.backward))
      return failure("stage " + llvm::Twine(s) +
                     " lacks a function its schedule runs");
  }
  return llvm::Error::success();
}

/// `attrs`' loom.split_axes (none: replicated).
std::vector<llvm::SmallVector<int16_t>> splitAxesOf(DictionaryAttr attrs) {
  return splitAxesFromAttr(attrs ? attrs.getAs<ArrayAttr>(kSplitAxesAttr)
                                 : ArrayAttr());
}

llvm::Expected<DeviceTensors> Runner::shard(const Tensor &whole,
                                            DictionaryAttr attrs) const {
  if (!grid)
    return DeviceTensors{whole};
  auto split = splitAxesOf(attrs);
  DeviceTensors shards;
  for (int64_t rank = 0; rank < devices; ++rank) {
    auto piece = shardOfRank(whole, gridShape, split, rank);
    if (!piece)
      return piece.takeError();
    shards.push_back(std::move(*piece));
  }
  return shards;
}

llvm::Expected<Tensor> Runner::assemble(const DeviceTensors &shards,
                                        DictionaryAttr attrs) const {
  if (!grid)
    return shards.front();
  return assembleFromShards(shards, gridShape, splitAxesOf(attrs));
}

llvm::Expected<Tensor> Runner::microBatchOf(const Tensor &whole,
                                            int microBatch) const {
  int64_t m = schedule.numMicroBatches;
  if (whole.rank() == 0 || whole.shape()[0] % m != 0)
    return failure("a batch of shape [" +
                   llvm::Twine(whole.rank() ? whole.shape()[0] : 0) +
                   ", ...] does not divide into " + llvm::Twine(m) +
                   " micro-batches");
  llvm::SmallVector<int64_t> shape(whole.shape());
  shape[0] /= m;
  int64_t n = whole.numElements() / m;
  int64_t begin = n * microBatch;
  if (whole.isFloat())
    return Tensor::floats(whole.elementType(), shape,
                          std::vector<double>(whole.f().begin() + begin,
                                              whole.f().begin() + begin + n));
  return Tensor::ints(whole.elementType(), shape,
                      std::vector<int64_t>(whole.i().begin() + begin,
                                           whole.i().begin() + begin + n));
}

llvm::Expected<DeviceTensors> Runner::argument(func::FuncOp fn, unsigned i,
                                               int stage, int microBatch) {
  DictionaryAttr attrs = fn.getArgAttrDict(i);
  auto role = attrs ? attrs.getAs<StringAttr>(kRoleAttr) : StringAttr();
  auto key = attrs ? attrs.getAs<StringAttr>(kValueKeyAttr) : StringAttr();
  std::string where =
      "@" + fn.getSymName().str() + " argument " + std::to_string(i);
  if (!role)
    return failure(where + " has no loom.role");
  if (!key) { // One of the step's own arguments.
    std::string name = stepKey(attrs);
    auto it = inputs.find(name);
    if (it == inputs.end())
      return failure(where + ": no input '" + name + "'");
    if (role.getValue() != "data")
      return shard(it->second, attrs);
    auto slice = microBatchOf(it->second, microBatch);
    if (!slice)
      return slice.takeError();
    return shard(*slice, attrs);
  }
  llvm::StringRef r = role.getValue();
  auto lookup = [&](KeyedValues &values,
                    llvm::StringRef what) -> llvm::Expected<DeviceTensors> {
    auto it = values.find(key.getValue().str());
    if (it == values.end())
      return failure(where + ": " + what + " '" + key.getValue() +
                     "' of micro-batch " + llvm::Twine(microBatch) +
                     " is not there");
    return it->second;
  };
  if (r == "activation")
    return lookup(outbox[{Activation, stage - 1, microBatch}], "activation");
  if (r == "activation_grad")
    return lookup(outbox[{Gradient, stage + 1, microBatch}],
                  "activation gradient");
  if (r == "saved")
    return lookup(saved[{stage, microBatch}], "saved value");

  // An accumulator: this stage's running sum (zero before its first
  // micro-batch), or for a tied gradient the sum of the tied stages'.
  auto zeros = [&]() {
    auto type = cast<RankedTensorType>(fn.getArgumentTypes()[i]);
    return DeviceTensors(
        devices, Tensor::floats(type.getElementType(), type.getShape(),
                                std::vector<double>(type.getNumElements())));
  };
  auto tied = attrs.getAs<ArrayAttr>(kTiedStagesAttr);
  if (!tied) {
    auto &mine = accumulators[stage];
    auto it = mine.find(key.getValue().str());
    return it == mine.end() ? zeros() : it->second;
  }
  DeviceTensors sum = zeros();
  for (Attribute other : tied) {
    auto &theirs = accumulators[cast<IntegerAttr>(other).getInt()];
    auto it = theirs.find(key.getValue().str());
    if (it == theirs.end())
      continue;
    for (int64_t d = 0; d < devices; ++d)
      for (size_t e = 0; e < sum[d].f().size(); ++e)
        sum[d].f()[e] += it->second[d].f()[e];
  }
  return sum;
}

llvm::Error Runner::callStage(func::FuncOp fn, int stage, int microBatch) {
  // Dropout draws the masks of this micro-batch's rows of the batch.
  ScopedMicroBatch micro(microBatch);
  std::vector<std::vector<Tensor>> perDevice(devices);
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto values = argument(fn, i, stage, microBatch);
    if (!values)
      return values.takeError();
    for (int64_t d = 0; d < devices; ++d)
      perDevice[d].push_back(std::move((*values)[d]));
  }
  std::vector<std::vector<Tensor>> results;
  if (grid) {
    auto ran = runRanks(fn, grid, perDevice, precision);
    if (!ran)
      return failure("@" + fn.getSymName() + ": " +
                     llvm::toString(ran.takeError()));
    results = std::move(*ran);
  } else {
    auto ran = interp::run(fn, perDevice[0], precision);
    if (!ran)
      return failure("@" + fn.getSymName() + ": " +
                     llvm::toString(ran.takeError()));
    results.push_back(std::move(*ran));
  }

  for (unsigned j = 0; j < fn.getNumResults(); ++j) {
    DictionaryAttr attrs = fn.getResultAttrDict(j);
    DeviceTensors values;
    for (int64_t d = 0; d < devices; ++d)
      values.push_back(std::move(results[d][j]));
    auto role = attrs ? attrs.getAs<StringAttr>(kRoleAttr) : StringAttr();
    auto key = attrs ? attrs.getAs<StringAttr>(kValueKeyAttr) : StringAttr();
    if (!key) { // An updated parameter or moment.
      std::string name = stepKey(attrs);
      if (!outputs.count(name)) {
        auto whole = assemble(values, attrs);
        if (!whole)
          return failure("@" + fn.getSymName() + " result " + llvm::Twine(j) +
                         ": " + llvm::toString(whole.takeError()));
        outputs[name] = std::move(*whole);
      }
      continue;
    }
    llvm::StringRef r = role ? role.getValue() : "";
    std::string k = key.getValue().str();
    if (r == "activation")
      outbox[{Activation, stage, microBatch}][k] = std::move(values);
    else if (r == "activation_grad")
      outbox[{Gradient, stage, microBatch}][k] = std::move(values);
    else if (r == "saved")
      saved[{stage, microBatch}][k] = std::move(values);
    else {
      accumulators[stage][k] = std::move(values);
      if (r != "accumulator")
        accumulatorAttrs[k] = attrs;
    }
  }
  counts.peakSavedSets =
      std::max<int64_t>(counts.peakSavedSets, int64_t(saved.size()));
  return llvm::Error::success();
}

llvm::Expected<bool> Runner::execute(int rank, const sched::Instr &instr) {
  using K = sched::InstrKind;
  switch (instr.kind) {
  case K::Forward:
  case K::Backward:
  case K::BackwardInput:
  case K::BackwardWeight: {
    const StageFunctions &fns = stages[instr.stage];
    func::FuncOp fn = instr.kind == K::Forward         ? fns.forward
                      : instr.kind == K::Backward      ? fns.backward
                      : instr.kind == K::BackwardInput ? fns.backwardInput
                                                       : fns.backwardWeight;
    if (llvm::Error err = callStage(fn, instr.stage, instr.microBatch))
      return std::move(err);
    // The last backward part of a micro-batch frees what its forward saved.
    if (instr.kind == K::Backward || instr.kind == K::BackwardWeight)
      saved.erase({instr.stage, instr.microBatch});
    return true;
  }
  case K::SendActivation:
  case K::SendGradient:
    return true; // The values sit in the outbox from the computation.
  case K::RecvActivation:
  case K::RecvGradient: {
    // Waits until the sender's computation has put the values out.
    Direction direction =
        instr.kind == K::RecvActivation ? Activation : Gradient;
    if (!outbox.count({int(direction), instr.stage, instr.microBatch}))
      return false;
    ++counts.transfers;
    return true;
  }
  case K::AllReduceGradients:
    // Every rank's backward work is done before any stage sums tied
    // gradients; data-parallel reductions run inside the optimizer
    // functions, where the partitioner put them.
    atReduction.insert(rank);
    return int(atReduction.size()) == schedule.numRanks;
  case K::Optimizer:
    for (int s = 0; s < schedule.numStages(); ++s)
      if (schedule.rankOfStage(s) == rank)
        if (llvm::Error err = callStage(stages[s].optimizer, s, -1))
          return std::move(err);
    return true;
  }
  return failure("unknown instruction");
}

llvm::Expected<NamedTensors> Runner::run(PipelineRunStats *stats) {
  if (llvm::Error err = load())
    return std::move(err);
  std::vector<size_t> next(schedule.numRanks, 0);
  while (true) {
    bool progress = false, done = true;
    for (int rank = 0; rank < schedule.numRanks; ++rank) {
      const auto &stream = schedule.streams[rank];
      while (next[rank] < stream.size()) {
        auto ran = execute(rank, stream[next[rank]]);
        if (!ran)
          return failure("rank " + llvm::Twine(rank) + " at " +
                         sched::describeInstr(stream[next[rank]]) + ": " +
                         llvm::toString(ran.takeError()));
        if (!*ran)
          break;
        ++next[rank];
        ++counts.instructions;
        progress = true;
      }
      done &= next[rank] == stream.size();
    }
    if (done)
      break;
    if (!progress) {
      std::string blocked;
      for (int rank = 0; rank < schedule.numRanks; ++rank)
        if (next[rank] < schedule.streams[rank].size())
          blocked += "\n  rank " + std::to_string(rank) + " waits at " +
                     sched::describeInstr(schedule.streams[rank][next[rank]]);
      return failure("deadlock:" + blocked);
    }
  }
  for (auto &[stage, values] : accumulators)
    for (auto &[key, shards] : values) {
      auto it = accumulatorAttrs.find(key);
      if (it == accumulatorAttrs.end())
        continue;
      auto whole = assemble(shards, it->second);
      if (!whole)
        return whole.takeError();
      outputs[stepKey(it->second)] = std::move(*whole);
    }
  if (stats)
    *stats = counts;
  return std::move(outputs);
}

} // namespace

llvm::Expected<NamedTensors> runPipelineStep(ModuleOp module,
                                             const NamedTensors &inputs,
                                             Precision precision,
                                             PipelineRunStats *stats) {
  return Runner(module, inputs, precision).run(stats);
}

} // namespace loom::interp
