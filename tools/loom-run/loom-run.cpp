//===- loom-run.cpp - Run training steps of a compiled model --------------===//
//
//   loom-run --backend=reference MODULE --init CKPT --data TOKENS
//            [--steps K] [--save CKPT] [--log-json FILE] [--precision f32|f64]
//   loom-run [--np N] ARTIFACT (--init CKPT | --resume DIR) --data TOKENS
//            [--steps K] [--save DIR [--save-every S]] [--log-json FILE]
//
// MODULE holds @train_step (loom-import | loom-opt --loom-autodiff
// --loom-optimizer), or the stage functions and schedule of a pipelined
// step (--loom-pipeline ... --loom-split-stages), which the pipeline
// interpreter runs: every pipeline rank's instruction stream, every stage
// on its grid's devices. The parameters come from a safetensors checkpoint by
// Hugging Face name, the optimizer moments start at zero, and step s
// (1-based) trains on batch s - 1 of the token file (loom/Data/Batch.h).
// Each step prints its loss; --log-json writes one JSON line per step and
// --save the trained parameters. Output files are written whole at the end
// (temporary file, then rename), never half, and their paths are checked
// before step 1, so that no training is lost to a bad path. A loom-compile
// artifact runs on MPI ranks (Compiled.h); there --save writes a sharded
// checkpoint directory of the whole state, which --resume continues
// (docs/runtime.md).
//
//===----------------------------------------------------------------------===//

#include "Compiled.h"

#include "loom/Checkpoint/Safetensors.h"
#include "loom/Data/Batch.h"
#include "loom/Data/TokenFile.h"
#include "loom/Interpreter/Interpreter.h"
#include "loom/Interpreter/MultiRank.h"
#include "loom/Interpreter/Pipeline.h"
#include "loom/Schedule/ScheduleAttr.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/IRDepth.h"
#include "loom/Support/InputFile.h"
#include "loom/Support/Json.h"
#include "loom/Training/TrainStep.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <limits>

using namespace llvm;
using loom::interp::Tensor;

namespace {
cl::OptionCategory category("loom-run options");

enum class Backend { Auto, Reference, CPU, CUDA };

cl::opt<std::string> modulePath(cl::Positional, cl::Required,
                                cl::desc("<module.mlir | model.loom>"),
                                cl::cat(category));
cl::opt<Backend> backend(
    "backend", cl::init(Backend::Auto), cl::cat(category),
    cl::desc("Which engine executes the steps (default: cpu for a "
             "loom-compile artifact directory, reference for a module)"),
    cl::values(clEnumValN(Backend::Reference, "reference",
                          "the reference interpreter (unsharded, CPU)"),
               clEnumValN(Backend::CPU, "cpu",
                          "the compiled artifact on MPI ranks (run under "
                          "mpirun, or give --np)"),
               clEnumValN(Backend::CUDA, "cuda",
                          "a --target=cuda artifact, one GPU per MPI rank "
                          "(or shared, --comm=staged); needs "
                          "the CUDA driver, libloom_cuda_driver.so")));
cl::opt<std::string> commKind(
    "comm", cl::init("auto"), cl::cat(category),
    cl::value_desc("auto|nccl|staged"),
    cl::desc("How the cuda backend's ranks talk: nccl (one GPU per rank), "
             "staged (MPI through host memory; ranks may share a GPU) or "
             "auto (nccl unless ranks share a GPU; default)"));
cl::opt<int> cudaDevice(
    "device", cl::init(-1), cl::cat(category), cl::value_desc("N"),
    cl::desc("The GPU of this rank (cuda backend; default: the rank's index "
             "on its node modulo the node's GPUs)"));
cl::opt<int> numRanks("np", cl::init(0), cl::cat(category),
                      cl::desc("Start this many MPI ranks on this machine "
                               "(runs mpirun; cpu and cuda backends)"));
cl::opt<double> timeoutSeconds(
    "timeout", cl::init(300), cl::cat(category), cl::value_desc("seconds"),
    cl::desc(
        "End the job when a step makes no progress this long (cpu and cuda "
        "backend; 0: never; default 300)"));
cl::opt<std::string> initPath("init", cl::cat(category),
                              cl::value_desc("ckpt.safetensors"),
                              cl::desc("Initial parameters (safetensors, "
                                       "Hugging Face names)"));
cl::opt<std::string>
    resumePath("resume", cl::cat(category), cl::value_desc("dir"),
               cl::desc("Continue from a checkpoint directory instead of "
                        "--init: its state and step count; --steps more "
                        "steps follow (cpu and cuda backends)"));
cl::opt<std::string> dataPath("data", cl::cat(category),
                              cl::value_desc("file.tokens"),
                              cl::desc("Training tokens (see "
                                       "docs/token-file.md)"));
cl::opt<int64_t> steps("steps", cl::init(1), cl::cat(category),
                       cl::desc("Training steps to run (default 1)"));
cl::opt<std::string>
    savePath("save", cl::cat(category), cl::value_desc("path"),
             cl::desc("Write the trained parameters here (reference: one "
                      "safetensors file, F64 under --precision f64; cpu: a "
                      "checkpoint directory of every rank's parameters and "
                      "optimizer state)"));
cl::opt<int64_t> saveEvery("save-every", cl::init(0), cl::cat(category),
                           cl::value_desc("S"),
                           cl::desc("Also save after every step divisible "
                                    "by S >= 1 (cpu and cuda backends)"));
cl::opt<std::string> logPath("log-json", cl::cat(category),
                             cl::value_desc("file"),
                             cl::desc("Write one JSON line per step: "
                                      "{\"step\": s, \"loss\": x} (x null "
                                      "when not finite), and on the cpu and "
                                      "cuda backends \"tokens_per_second\" "
                                      "and \"step_ms\""));
cl::opt<loom::interp::Precision>
    precision("precision", cl::init(loom::interp::Precision::F32),
              cl::cat(category),
              cl::desc("Arithmetic of the reference backend"),
              cl::values(clEnumValN(loom::interp::Precision::F32, "f32",
                                    "round every result to its declared type"),
                         clEnumValN(loom::interp::Precision::F64, "f64",
                                    "compute everything in double")));

cl::opt<bool> allowNonFiniteLoss(
    "allow-non-finite-loss", cl::cat(category),
    cl::desc("Train on after a step whose loss is NaN or infinite (default: "
             "stop there with an error naming the step)"));

int fail(const Twine &message) {
  WithColor::error(errs(), "loom-run") << message << "\n";
  return 1;
}

/// Stops a reference run at the first non-finite loss (a NaN in the
/// weights or the data, or a diverged run), unless asked to go on.
bool stopsAt(int64_t step, double loss) {
  if (std::isfinite(loss) || allowNonFiniteLoss)
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
                     ArrayRef<Tensor> values, int64_t stepsDone) {
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
  void record(int64_t step, double loss) {
    outs() << formatv("step {0,4}  loss {1:f6}\n", step, loss);
    lines << json::Value(json::Object{{"step", step},
                                      {"loss", loom::run::jsonNumber(loss)}})
          << "\n";
  }
  Error write() {
    if (logPath.empty())
      return Error::success();
    return loom::writeFileAtomically(logPath,
                                     [&](raw_ostream &os) { os << text; });
  }

private:
  std::string text;
  raw_string_ostream lines{text};
};

/// Checks every id of the token file against the vocabulary of the
/// embeddings `tables` (the smallest, if several) before the first step,
/// which would stop at the first id past it deep inside the step; `rows`
/// gives a table's whole first dimension.
bool tokensFitVocabulary(ArrayRef<uint32_t> ids, ArrayRef<mlir::Value> tables,
                         function_ref<int64_t(mlir::Value)> rows) {
  if (tables.empty())
    return true;
  int64_t vocab = std::numeric_limits<int64_t>::max();
  for (mlir::Value table : tables)
    vocab = std::min(vocab, rows(table));
  if (Error error = loom::checkTokenIds(
          ids, static_cast<uint32_t>(std::min<int64_t>(vocab, UINT32_MAX)))) {
    fail(dataPath + ": " + toString(std::move(error)));
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

/// The devices of the module's grids (1 without one).
int64_t gridDevices(mlir::ModuleOp module) {
  int64_t devices = 1;
  for (auto grid : module.getOps<mlir::shard::GridOp>())
    for (int64_t size : grid.getShape())
      devices *= size;
  return devices;
}

/// "2x2" when `fn` is a per-device program (--loom-partition gives its
/// results `loom.split_axes` and puts collectives in its body; layouts
/// pinned before planning sit on arguments only), else "".
std::string partitionedGrid(mlir::ModuleOp module, mlir::func::FuncOp fn) {
  bool partitioned =
      loom::getModuleState(module) == loom::ModuleState::Partitioned;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    partitioned |= static_cast<bool>(fn.getResultAttr(i, "loom.split_axes"));
  fn.walk([&](mlir::Operation *op) {
    if (op->getDialect() && isa<mlir::shard::ShardDialect>(op->getDialect()) &&
        !isa<mlir::shard::ShardOp, mlir::shard::ShardingOp>(op))
      partitioned = true;
  });
  if (!partitioned)
    return "";
  std::string shape;
  for (auto grid : module.getOps<mlir::shard::GridOp>())
    for (int64_t size : grid.getShape())
      shape += (shape.empty() ? "" : "x") + std::to_string(size);
  return shape.empty() ? "device" : shape;
}

/// Trains a module cut into pipeline stages (--loom-split-stages).
int runPipelined(mlir::ModuleOp module) {
  Expected<loom::sched::Schedule> schedule =
      loom::sched::scheduleFromAttr(module->getAttr(loom::kScheduleAttr));
  if (!schedule)
    return fail(modulePath +
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
  Expected<loom::Checkpoint> ckpt = loom::readSafetensors(initPath);
  if (!ckpt)
    return fail(toString(ckpt.takeError()));
  auto bound = loom::bindParameters(params, *ckpt, initPath);
  if (!bound)
    return fail(toString(bound.takeError()));
  Expected<std::vector<uint32_t>> ids = loom::readTokenFile(dataPath);
  if (!ids)
    return fail(toString(ids.takeError()));
  SmallVector<mlir::Value> tables;
  for (auto fn : module.getOps<mlir::func::FuncOp>())
    if (fn->hasAttr(loom::kStageFunctionAttr))
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (mlir::DictionaryAttr attrs = fn.getArgAttrDict(i);
            attrs && loom::interp::stepKey(attrs) == "data:tokens")
          llvm::append_range(tables,
                             loom::embeddingTablesOf(fn.getArgument(i)));
  // A stage's table may be its shard of the whole one.
  auto wholeRows = [&](mlir::Value table) {
    auto type = cast<mlir::RankedTensorType>(table.getType());
    auto arg = dyn_cast<mlir::BlockArgument>(table);
    auto fn = arg ? dyn_cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp())
                  : nullptr;
    mlir::DictionaryAttr attrs =
        fn ? fn.getArgAttrDict(arg.getArgNumber()) : mlir::DictionaryAttr();
    return attrs ? wholeShape(type, attrs, gridShape, 1)[0]
                 : type.getDimSize(0);
  };
  if (!tokensFitVocabulary(*ids, tables, wholeRows))
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
    return fail(modulePath + ": no stage reads the tokens or labels");
  outs() << formatv("loom-run: reference backend, pipelined: {0} ranks x {1}, "
                    "{2} with {3} micro-batches, {4} ({5} values), batch {6} "
                    "x {7} tokens, {8}\n",
                    schedule->numRanks, loom::run::countOf(devices, "device"),
                    loom::sched::stringifyScheduleKind(schedule->kind),
                    schedule->numMicroBatches,
                    loom::run::countOf(params.size(), "parameter tensor"),
                    numElements, batch, seqLen,
                    loom::run::countOf(steps, "step"));

  StepLog log;
  for (int64_t step = 1; step <= steps; ++step) {
    Expected<loom::Batch> data = loom::makeBatch(*ids, step - 1, batch, seqLen);
    if (!data)
      return fail(dataPath + ": " + toString(data.takeError()));
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
        loom::interp::runPipelineStep(module, inputs, precision.getValue());
    if (!results)
      return fail(
          formatv("step {0}: {1}", step, toString(results.takeError())));
    log.record(step, results->at("loss").f()[0]);
    if (stopsAt(step, results->at("loss").f()[0]))
      return 1;
    for (auto &[key, tensor] : *results)
      if (state.count(key))
        state[key] = std::move(tensor);
  }

  if (Error error = log.write())
    return fail(toString(std::move(error)));
  if (!savePath.empty()) {
    std::vector<Tensor> values;
    for (const StepInput *in : paramInputs)
      values.push_back(state[in->key]);
    if (Error error = saveParameters(savePath, params, values, steps))
      return fail(toString(std::move(error)));
  }
  return 0;
}
} // namespace

/// The backend an artifact directory was compiled for (plan.json's
/// "backend"; "cpu" when it does not say, or cannot be read: the runtime
/// then reports why).
std::string compiledBackend(llvm::StringRef dir) {
  auto text =
      loom::readInputFile((dir + "/plan.json").str(), loom::kMaxJsonFileBytes);
  if (!text) {
    llvm::consumeError(text.takeError());
    return "cpu";
  }
  llvm::Expected<llvm::json::Value> plan =
      loom::parseJson((*text)->getBuffer());
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return "cpu";
  }
  if (const llvm::json::Object *object = plan->getAsObject())
    if (auto name = object->getString("backend"))
      return name->str();
  return "cpu";
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Run training steps of a Loom module\n");
  // Checked here rather than by cl::Required, so that every missing input
  // is worded alike ("--init is required").
  if (dataPath.empty())
    return fail("--data is required");
  if (steps < 1)
    return fail("--steps must be at least 1");
  // An explicit 0 is a mistake, not "no --np": only absence means that.
  if (numRanks.getNumOccurrences() && numRanks < 1)
    return fail("--np must be positive");
  if (!std::isfinite(timeoutSeconds) || timeoutSeconds < 0)
    return fail("--timeout must be a number of seconds >= 0 (0: never)");
  // A path that is not there is neither backend's input: say so, rather
  // than what the backend it would pick cannot do.
  llvm::sys::fs::file_status status;
  if (modulePath != "-")
    if (std::error_code error = llvm::sys::fs::status(modulePath, status))
      return fail(modulePath + ": " + error.message());
  if (backend == Backend::Auto)
    backend = !llvm::sys::fs::is_directory(modulePath) ? Backend::Reference
              : compiledBackend(modulePath) == "cuda"  ? Backend::CUDA
                                                       : Backend::CPU;
  if (backend == Backend::CPU || backend == Backend::CUDA) {
    if (!llvm::sys::fs::is_directory(modulePath))
      return fail(modulePath + ": not a loom-compile artifact directory (the "
                               "compiled backends run one; a module runs on "
                               "--backend=reference)");
    if (commKind != "auto" && commKind != "nccl" && commKind != "staged")
      return fail("--comm must be auto, nccl or staged, not '" + commKind +
                  "'");
    if (backend == Backend::CPU && (commKind != "auto" || cudaDevice >= 0))
      return fail("--comm and --device choose how the cuda backend runs");
    if (precision.getNumOccurrences())
      return fail("--precision sets the reference backend's arithmetic; a "
                  "compiled artifact computes in the types it was compiled "
                  "for");
    if (initPath.empty() == resumePath.empty())
      return fail("give either --init (parameters to start from) or --resume "
                  "(a checkpoint directory to continue)");
    if (saveEvery.getNumOccurrences() && (saveEvery < 1 || savePath.empty()))
      return fail("--save-every needs a positive step count and --save");
    loom::run::CompiledOptions options{modulePath,
                                       dataPath,
                                       logPath,
                                       initPath,
                                       resumePath,
                                       savePath,
                                       saveEvery,
                                       steps,
                                       timeoutSeconds,
                                       allowNonFiniteLoss,
                                       backend == Backend::CUDA ? "cuda"
                                                                : "cpu",
                                       {cudaDevice, commKind, timeoutSeconds}};
    if (numRanks.getNumOccurrences()) {
      if (Error error = loom::run::checkBeforeLaunch(options, numRanks))
        return fail(toString(std::move(error)));
      return loom::run::launchUnderMpirun(numRanks, argc, argv);
    }
    return loom::run::runCompiled(options);
  }
  if (numRanks.getNumOccurrences())
    return fail(
        "--np runs the compiled backends; the reference backend runs in "
        "one process");
  if (commKind.getNumOccurrences() || cudaDevice.getNumOccurrences() ||
      timeoutSeconds.getNumOccurrences())
    return fail("--comm, --device and --timeout apply to the compiled "
                "backends, not the reference interpreter");
  if (!resumePath.empty() || saveEvery.getNumOccurrences())
    return fail("--resume and --save-every need a compiled backend (a "
                "loom-compile artifact)");
  if (initPath.empty())
    return fail("--init is required");
  // Outputs that cannot be written fail now, not after the training.
  for (const std::string &path : {logPath.getValue(), savePath.getValue()})
    if (!path.empty())
      if (Error error = loom::checkOutputFile(path))
        return fail(toString(std::move(error)));
  // --save replaces an earlier run's parameters, never some other file.
  if (!savePath.empty() && llvm::sys::fs::is_regular_file(savePath) &&
      !loom::hasSafetensorsHeader(savePath))
    return fail(savePath + ": exists and is not a safetensors file; not "
                           "replacing it");

  mlir::MLIRContext context;
  context.loadDialect<loom::LoomDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect, mlir::shard::ShardDialect>();
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(modulePath, &openError);
  if (!file)
    return fail(openError);
  if (Error tooDeep = loom::checkIRDepth(file->getBuffer(), modulePath))
    return fail(toString(std::move(tooDeep)));
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr,
                                            mlir::ParserConfig(&context));
  if (!module)
    return 1; // The parser reported the error with its location.
  // A partitioned step first: its message names the grid and the commands
  // that run it, which the module state alone cannot.
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  if (std::string grid = fn ? partitionedGrid(*module, fn) : std::string();
      !grid.empty()) {
    int64_t devices = gridDevices(*module);
    std::string shape =
        grid.find('x') == std::string::npos
            ? "a grid of " + loom::run::countOf(devices, "device")
            : formatv("a {0} grid of {1} devices", grid, devices).str();
    return fail(formatv(
        "{0}: @train_step is --loom-partition's program for one device of "
        "{1}, and the reference backend runs the whole step; compile it "
        "(loom-compile -o model.loom) and run it on {2} MPI ranks (loom-run "
        "model.loom --np {2}), or give the reference backend the step from "
        "before --loom-auto-shard",
        modulePath, shape, devices));
  }
  if (Error error = loom::checkExecutable(
          *module, {loom::ModuleState::Whole, loom::ModuleState::Split},
          "loom-run --backend=reference"))
    return fail(modulePath + ": " + toString(std::move(error)));
  if (loom::getModuleState(*module) == loom::ModuleState::Split)
    return runPipelined(*module);
  if (!fn)
    return fail(modulePath + ": no @train_step (run loom-opt --loom-autodiff "
                             "--loom-optimizer first) and no pipeline "
                             "schedule (--loom-split-stages)");
  Expected<loom::TrainStepLayout> layout = loom::analyzeTrainStep(fn);
  if (!layout)
    return fail(modulePath + ": " + toString(layout.takeError()));

  Expected<loom::Checkpoint> ckpt = loom::readSafetensors(initPath);
  if (!ckpt)
    return fail(toString(ckpt.takeError()));
  auto bound = loom::bindParameters(*layout, *ckpt, initPath);
  if (!bound)
    return fail(toString(bound.takeError()));
  Expected<std::vector<uint32_t>> ids = loom::readTokenFile(dataPath);
  if (!ids)
    return fail(toString(ids.takeError()));
  if (!tokensFitVocabulary(
          *ids, loom::embeddingTablesOf(fn.getArgument(layout->tokensArg)),
          [](mlir::Value table) {
            return cast<mlir::RankedTensorType>(table.getType()).getDimSize(0);
          }))
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
      loom::run::countOf(steps, "step"));

  std::vector<Tensor> state = initialState(fn, *layout, *bound);
  StepLog log;
  mlir::Type stepType =
      cast<mlir::RankedTensorType>(fn.getArgument(layout->stepArg).getType())
          .getElementType();
  for (int64_t step = 1; step <= steps; ++step) {
    Expected<loom::Batch> batch =
        loom::makeBatch(*ids, step - 1, layout->microBatch, layout->seqLen);
    if (!batch)
      return fail(dataPath + ": " + toString(batch.takeError()));
    std::vector<Tensor> args(fn.getNumArguments(), Tensor());
    for (size_t i = 0; i < state.size(); ++i)
      args[i] = std::move(state[i]);
    args[layout->stepArg] = Tensor::ints(stepType, {}, {step});
    args[layout->tokensArg] =
        intTensor(fn.getArgument(layout->tokensArg).getType(), batch->tokens);
    args[layout->labelsArg] =
        intTensor(fn.getArgument(layout->labelsArg).getType(), batch->labels);

    auto results = loom::interp::run(fn, args, precision);
    if (!results)
      return fail(
          formatv("step {0}: {1}", step, toString(results.takeError())));
    log.record(step, (*results)[layout->lossResult].f()[0]);
    if (stopsAt(step, (*results)[layout->lossResult].f()[0]))
      return 1;
    results->resize(layout->numStateArgs());
    state = std::move(*results);
  }

  if (Error error = log.write())
    return fail(toString(std::move(error)));
  if (!savePath.empty())
    if (Error error = saveParameters(savePath, layout->params, state, steps))
      return fail(toString(std::move(error)));
  return 0;
}
