//===- loom-run.cpp - Run training steps of a compiled model --------------===//
//
//   loom-run --backend=reference MODULE --init CKPT --data TOKENS
//            [--steps K] [--save CKPT] [--log-json FILE] [--precision f32|f64]
//   loom-run [--np N] ARTIFACT (--init CKPT | --resume DIR) --data TOKENS
//            [--steps K] [--save DIR [--save-every S]] [--log-json FILE]
//
// MODULE holds @train_step (loom-import | loom-opt --loom-autodiff
// --loom-optimizer), or the stage functions and schedule of a pipelined
// step (--loom-pipeline ... --loom-split-stages); the reference interpreter
// trains it in one process (Reference.h). A loom-compile artifact runs on
// MPI ranks (Compiled.h); there --save writes a sharded checkpoint
// directory of the whole state, which --resume continues
// (docs/runtime.md). This file reads and checks the options, and the
// paths they name, before either backend starts: output paths are checked
// before step 1, so that no training is lost to a bad path.
//
//===----------------------------------------------------------------------===//

#include "Compiled.h"
#include "Reference.h"

#include "loom/Checkpoint/Safetensors.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/IRDepth.h"
#include "loom/Support/InputFile.h"
#include "loom/Support/Json.h"

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

#include <cmath>

using namespace llvm;

using loom::run::fail;

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
    if (saveEvery.getNumOccurrences() && saveEvery < 1)
      return fail("--save-every " + std::to_string(saveEvery) +
                  ": must be a positive step count");
    if (saveEvery.getNumOccurrences() && savePath.empty())
      return fail("--save-every needs --save DIR (where to save)");
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
  if (Error error = loom::run::checkLogOutsideSave(logPath, savePath))
    return fail(toString(std::move(error)));
  // --save replaces an earlier run's parameters (or an empty file), never
  // some other file.
  uint64_t saveSize = 0;
  if (!savePath.empty() && llvm::sys::fs::is_regular_file(savePath) &&
      !llvm::sys::fs::file_size(savePath, saveSize) && saveSize > 0 &&
      !loom::hasSafetensorsHeader(savePath))
    return fail(savePath + ": exists and is not a safetensors file; not "
                           "replacing it");

  loom::run::ReferenceOptions options{modulePath,
                                      initPath,
                                      dataPath,
                                      savePath,
                                      logPath,
                                      steps,
                                      precision.getValue(),
                                      allowNonFiniteLoss};
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
    return loom::run::runPipelined(*module, options);
  if (!fn)
    return fail(modulePath + ": no @train_step (run loom-opt --loom-autodiff "
                             "--loom-optimizer first) and no pipeline "
                             "schedule (--loom-split-stages)");
  return loom::run::runWholeStep(fn, options);
}
