//===- Reference.cpp - loom-run on the reference interpreter --------------===//
//
// The parameters come from a safetensors checkpoint by Hugging Face name,
// the optimizer moments start at zero, and step s (1-based) trains on
// batch s - 1 of the token file (loom/Data/Batch.h), whose every id is
// first checked against the vocabulary of the embedding the tokens index.
// Each step prints its loss; --log-json and --save are written at the end.
//
//===----------------------------------------------------------------------===//

#include "Reference.h"
#include "Compiled.h"

#include "loom/Checkpoint/Safetensors.h"
#include "loom/Data/Batch.h"
#include "loom/Data/TokenFile.h"
#include "loom/Interpreter/MultiRank.h"
#include "loom/Interpreter/Pipeline.h"
#include "loom/Schedule/ScheduleAttr.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Training/TrainStep.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/WithColor.h"

#include <cmath>

using namespace llvm;
using loom::interp::Tensor;

namespace loom::run {
namespace {

/// Stops a reference run at the first non-finite loss (a NaN in the
/// weights or the data, or a diverged run), unless asked to go on.
bool stopsAt(int64_t step, double loss, const ReferenceOptions &options) {
  if (std::isfinite(loss) || options.allowNonFiniteLoss)
    return false;
  fail(loom::run::nonFiniteLossMessage(step, loss));
  return true;
}

/// A checkpoint tensor's values as the interpreter holds them: an F64
/// file's unrounded.
std::vector<double> initialValues(const loom::CheckpointTensor &tensor) {
  if (!tensor.doubles.empty())
    return tensor.doubles;
  return std::vector<double>(tensor.values.begin(), tensor.values.end());
}

/// The state carried from step to step: parameters, then m and v.
std::vector<Tensor>
initialState(mlir::func::FuncOp fn, const loom::TrainStepLayout &layout,
             ArrayRef<const loom::CheckpointTensor *> init) {
  std::vector<Tensor> state;
  for (size_t i = 0, e = layout.numStateArgs(); i < e; ++i) {
    auto type = cast<mlir::RankedTensorType>(fn.getArgument(i).getType());
    size_t param = i % layout.params.size();
    std::vector<double> values(type.getNumElements(), 0.0);
    if (i < layout.params.size())
      values = initialValues(*init[param]);
    state.push_back(Tensor::floats(type.getElementType(), type.getShape(),
                                   std::move(values)));
  }
  return state;
}

Tensor intTensor(mlir::Type type, ArrayRef<int32_t> values) {
  auto tensor = cast<mlir::RankedTensorType>(type);
  return Tensor::ints(tensor.getElementType(), tensor.getShape(),
                      std::vector<int64_t>(values.begin(), values.end()));
}

/// Writes `values[i]` as parameter `params[i]` (extra values are ignored),
/// in the run's precision: F64 under --precision f64, so that a double
/// run's result can be checked beyond f32, else F32.
Error saveParameters(StringRef path, ArrayRef<loom::TrainedParam> params,
                     ArrayRef<Tensor> values, int64_t stepsDone,
                     loom::interp::Precision precision) {
  std::vector<loom::CheckpointTensor> tensors;
  for (auto [param, tensor] : llvm::zip_first(params, values)) {
    loom::CheckpointTensor &saved = tensors.emplace_back();
    saved.name = param.name;
    saved.shape = param.shape;
    if (precision == loom::interp::Precision::F64) {
      saved.dtype = "F64";
      saved.doubles.assign(tensor.f().begin(), tensor.f().end());
    } else {
      saved.values.assign(tensor.f().begin(), tensor.f().end());
    }
  }
  return loom::writeSafetensors(
      path, tensors,
      {{"format", "pt"}, {"loom.steps", std::to_string(stepsDone)}});
}
/// Prints each step's loss and keeps the --log-json lines, written whole at
/// the end.
class StepLog {
public:
  explicit StepLog(StringRef path) : path(path.str()) {}
  void record(int64_t step, double loss) {
    outs() << formatv("step {0,4}  loss {1:f6}\n", step, loss);
    lines << json::Value(json::Object{{"step", step},
                                      {"loss", loom::run::jsonNumber(loss)}})
          << "\n";
  }
  Error write() {
    if (path.empty())
      return Error::success();
    return loom::writeFileAtomically(path,
                                     [&](raw_ostream &os) { os << text; });
  }

private:
  std::string path, text;
  raw_string_ostream lines{text};
};

/// Checks the token file against the vocabulary of the embedding the
/// step's tokens index (loom::tokenVocabulary), as the compiled backends
/// check it against plan.json's.
bool tokensFitVocabulary(StringRef dataPath, ArrayRef<uint32_t> ids,
                         mlir::ModuleOp module) {
  std::optional<int64_t> vocab = loom::tokenVocabulary(module);
  if (Error error = checkTokenVocabulary(dataPath, ids, vocab.value_or(0))) {
    fail(toString(std::move(error)));
    return false;
  }
  return true;
}

/// One argument of the pipelined step (a parameter, moment, step or batch
/// tensor), as the stage functions declare it.
struct StepInput {
  std::string key; ///< interp::stepKey: "param:<name>", "data:tokens", ...
  std::string role, name;
  mlir::Type elementType;
  SmallVector<int64_t> shape; ///< whole, unsharded
};

/// The whole shape of a stage function's argument: its local shape times
/// the shards of each dimension (`loom.split_axes` over the grid), and for
/// the batch also times the micro-batches.
SmallVector<int64_t> wholeShape(mlir::RankedTensorType type,
                                mlir::DictionaryAttr attrs,
                                ArrayRef<int64_t> gridShape,
                                int64_t microBatches) {
  SmallVector<int64_t> shape(type.getShape());
  auto split = loom::interp::splitAxesFromAttr(
      attrs.getAs<mlir::ArrayAttr>("loom.split_axes"));
  for (auto [dim, axes] : llvm::enumerate(split))
    for (int16_t axis : axes)
      if (dim < shape.size())
        shape[dim] *= gridShape[axis];
  auto role = attrs.getAs<mlir::StringAttr>(loom::kRoleAttr);
  if (role && role.getValue() == "data" && !shape.empty())
    shape[0] *= microBatches;
  return shape;
}

} // namespace

int fail(const Twine &message) {
  WithColor::error(errs(), "loom-run") << message << "\n";
  return 1;
}

int runPipelined(mlir::ModuleOp module, const ReferenceOptions &options) {
  Expected<loom::sched::Schedule> schedule =
      loom::sched::scheduleFromAttr(module->getAttr(loom::kScheduleAttr));
  if (!schedule)
    return fail(options.modulePath +
                ": loom.schedule: " + toString(schedule.takeError()));
  SmallVector<int64_t> gridShape;
  int64_t devices = 1;
  for (auto grid : module.getOps<mlir::shard::GridOp>()) {
    gridShape.assign(grid.getShape().begin(), grid.getShape().end());
    for (int64_t size : gridShape)
      devices *= size;
  }

  // The step's inputs, in the order the stage functions first name them.
  std::vector<StepInput> stepInputs;
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    if (!fn->hasAttr(loom::kStageFunctionAttr))
      continue;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      mlir::DictionaryAttr attrs = fn.getArgAttrDict(i);
      if (!attrs || attrs.get(loom::kValueKeyAttr))
        continue;
      std::string key = loom::interp::stepKey(attrs);
      if (key.empty() || llvm::any_of(stepInputs, [&](const StepInput &in) {
            return in.key == key;
          }))
        continue;
      auto type = cast<mlir::RankedTensorType>(fn.getArgumentTypes()[i]);
      auto name = attrs.getAs<mlir::StringAttr>(loom::kNameAttr);
      stepInputs.push_back(
          {key, attrs.getAs<mlir::StringAttr>(loom::kRoleAttr).str(),
           name ? name.str() : "", type.getElementType(),
           wholeShape(type, attrs, gridShape, schedule->numMicroBatches)});
    }
  }

  std::vector<loom::TrainedParam> params;
  std::vector<const StepInput *> paramInputs;
  for (const StepInput &in : stepInputs)
    if (in.role == "param") {
      params.push_back({in.name, in.shape});
      paramInputs.push_back(&in);
    }
  Expected<loom::Checkpoint> ckpt = loom::readSafetensors(options.initPath);
  if (!ckpt)
    return fail(toString(ckpt.takeError()));
  auto bound = loom::bindParameters(params, *ckpt, options.initPath);
  if (!bound)
    return fail(toString(bound.takeError()));
  Expected<std::vector<uint32_t>> ids = loom::readTokenFile(options.dataPath);
  if (!ids)
    return fail(toString(ids.takeError()));
  if (!tokensFitVocabulary(options.dataPath, *ids, module))
    return 1;

  loom::interp::NamedTensors state;
  for (auto [in, tensor] : llvm::zip_equal(paramInputs, *bound))
    state[in->key] =
        Tensor::floats(in->elementType, in->shape, initialValues(*tensor));
  int64_t batch = 0, seqLen = 0, numElements = 0;
  for (const loom::TrainedParam &param : params)
    numElements += llvm::product_of(param.shape);
  for (const StepInput &in : stepInputs) {
    if (in.role == "m" || in.role == "v") {
      state[in.key] =
          Tensor::floats(in.elementType, in.shape,
                         std::vector<double>(llvm::product_of(in.shape), 0.0));
    } else if (in.role == "data" && in.shape.size() == 2) {
      batch = in.shape[0];
      seqLen = in.shape[1];
    }
  }
  if (batch == 0)
    return fail(options.modulePath + ": no stage reads the tokens or labels");
  outs() << formatv("loom-run: reference backend, pipelined: {0} ranks x {1}, "
                    "{2} with {3} micro-batches, {4} ({5} values), batch {6} "
                    "x {7} tokens, {8}\n",
                    schedule->numRanks, loom::run::countOf(devices, "device"),
                    loom::sched::stringifyScheduleKind(schedule->kind),
                    schedule->numMicroBatches,
                    loom::run::countOf(params.size(), "parameter tensor"),
                    numElements, batch, seqLen,
                    loom::run::countOf(options.steps, "step"));

  StepLog log(options.logPath);
  for (int64_t step = 1; step <= options.steps; ++step) {
    Expected<loom::Batch> data = loom::makeBatch(*ids, step - 1, batch, seqLen);
    if (!data)
      return fail(options.dataPath + ": " + toString(data.takeError()));
    loom::interp::NamedTensors inputs = state;
    for (const StepInput &in : stepInputs) {
      if (in.role == "step")
        inputs[in.key] = Tensor::ints(in.elementType, in.shape, {step});
      else if (in.role == "data")
        inputs[in.key] =
            intTensor(mlir::RankedTensorType::get(in.shape, in.elementType),
                      in.name == "labels" ? data->labels : data->tokens);
    }
    auto results =
        loom::interp::runPipelineStep(module, inputs, options.precision);
    if (!results)
      return fail(
          formatv("step {0}: {1}", step, toString(results.takeError())));
    log.record(step, results->at("loss").f()[0]);
    if (stopsAt(step, results->at("loss").f()[0], options))
      return 1;
    for (auto &[key, tensor] : *results)
      if (state.count(key))
        state[key] = std::move(tensor);
  }

  if (Error error = log.write())
    return fail(toString(std::move(error)));
  if (!options.savePath.empty()) {
    std::vector<Tensor> values;
    for (const StepInput *in : paramInputs)
      values.push_back(state[in->key]);
    if (Error error = saveParameters(options.savePath, params, values,
                                     options.steps, options.precision))
      return fail(toString(std::move(error)));
  }
  return 0;
}

int runWholeStep(mlir::func::FuncOp fn, const ReferenceOptions &options) {
  Expected<loom::TrainStepLayout> layout = loom::analyzeTrainStep(fn);
  if (!layout)
    return fail(options.modulePath + ": " + toString(layout.takeError()));

  Expected<loom::Checkpoint> ckpt = loom::readSafetensors(options.initPath);
  if (!ckpt)
    return fail(toString(ckpt.takeError()));
  auto bound = loom::bindParameters(*layout, *ckpt, options.initPath);
  if (!bound)
    return fail(toString(bound.takeError()));
  Expected<std::vector<uint32_t>> ids = loom::readTokenFile(options.dataPath);
  if (!ids)
    return fail(toString(ids.takeError()));
  if (!tokensFitVocabulary(options.dataPath, *ids,
                           fn->getParentOfType<mlir::ModuleOp>()))
    return 1;

  int64_t numElements = 0;
  for (const loom::TrainedParam &param : layout->params)
    numElements += llvm::product_of(param.shape);
  // The step's whole batch, as the pipelined and compiled headers say it.
  outs() << formatv(
      "loom-run: reference backend, {0} ({1} values), batch "
      "{2} x {3} tokens, {4}\n",
      loom::run::countOf(layout->params.size(), "parameter tensor"),
      numElements, layout->microBatch, layout->seqLen,
      loom::run::countOf(options.steps, "step"));

  std::vector<Tensor> state = initialState(fn, *layout, *bound);
  StepLog log(options.logPath);
  mlir::Type stepType =
      cast<mlir::RankedTensorType>(fn.getArgument(layout->stepArg).getType())
          .getElementType();
  for (int64_t step = 1; step <= options.steps; ++step) {
    Expected<loom::Batch> batch =
        loom::makeBatch(*ids, step - 1, layout->microBatch, layout->seqLen);
    if (!batch)
      return fail(options.dataPath + ": " + toString(batch.takeError()));
    std::vector<Tensor> args(fn.getNumArguments(), Tensor());
    for (size_t i = 0; i < state.size(); ++i)
      args[i] = std::move(state[i]);
    args[layout->stepArg] = Tensor::ints(stepType, {}, {step});
    args[layout->tokensArg] =
        intTensor(fn.getArgument(layout->tokensArg).getType(), batch->tokens);
    args[layout->labelsArg] =
        intTensor(fn.getArgument(layout->labelsArg).getType(), batch->labels);

    auto results = loom::interp::run(fn, args, options.precision);
    if (!results)
      return fail(
          formatv("step {0}: {1}", step, toString(results.takeError())));
    log.record(step, (*results)[layout->lossResult].f()[0]);
    if (stopsAt(step, (*results)[layout->lossResult].f()[0], options))
      return 1;
    results->resize(layout->numStateArgs());
    state = std::move(*results);
  }

  if (Error error = log.write())
    return fail(toString(std::move(error)));
  if (!options.savePath.empty())
    if (Error error = saveParameters(options.savePath, layout->params, state,
                                     options.steps, options.precision))
      return fail(toString(std::move(error)));
  return 0;
}

} // namespace loom::run
