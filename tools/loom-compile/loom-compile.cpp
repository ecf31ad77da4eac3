//===- loom-compile.cpp - Build a runnable artifact from a training step --===//
//
// Usage:
//   loom-opt ... --inline | loom-compile -o model.loom
//   loom-compile step.mlir -o model.loom [--target=cpu|cuda]
//     [--ld PATH] [--emit-llvm FILE] [--no-pad-vocab] [--no-fuse]
//     [--no-overlap]
//
// Reads a module holding the per-device training step (`@train_step`,
// after --inline and optionally --loom-auto-shard/--loom-partition) or its
// pipeline stage functions (--loom-split-stages), pads an odd vocabulary's
// logits to a multiple of 64 (--loom-pad-vocab, unless --no-pad-vocab),
// fuses what one kernel call can run (--loom-fuse, unless --no-fuse),
// lowers it with
// --loom-lower-cpu or --loom-lower-cuda (unless it already is; collectives
// split into a start and a wait, unless --no-overlap), compiles
// the LLVM code (host code in both cases: the CUDA kernels are a library
// it calls) to an object for this machine and links it into a shared
// object with ld.lld. The artifact is a directory
// (runtime/include/loom/loom_program.h):
//
//   model.loom/program.so     loom_fn_<function>(const loom_call_frame *)
//                             (cuda: and a loom_cuda_context *)
//   model.loom/plan.json      the backend, grid, groups, the vocabulary
//                             and every function's arguments and results
//                             (docs/runtime.md)
//   model.loom/schedule.json  the pipeline schedule (pipelined steps only)
//
// It is built in a temporary directory next to the output and renamed into
// place, so an interrupted compile never leaves a partial artifact. The
// output must be absent (its parent directory must exist), an empty
// directory, or an artifact, which is replaced whole; anything else is
// never touched. --emit-llvm's file appears only when the artifact does,
// and never inside it.
//
//===----------------------------------------------------------------------===//

#include "passes/Lowering/LowerToKernels.h"
#include "passes/Pipelines/Pipelines.h"

#include "loom/Support/AtomicFile.h"
#include "loom/Support/IRDepth.h"
#include "loom/Training/TrainStep.h"
#include "loom/loom_program.h"

#include "loom/Schedule/ScheduleAttr.h"
#include "loom/Schedule/Serialize.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <optional>

using namespace llvm;

namespace {
cl::OptionCategory category("loom-compile options");
cl::opt<std::string> inputPath(cl::Positional, cl::init("-"),
                               cl::desc("<step.mlir> (default: stdin)"),
                               cl::cat(category));
cl::opt<std::string> outputPath("o", cl::Required, cl::cat(category),
                                cl::value_desc("model.loom"),
                                cl::desc("The artifact directory to write"));
cl::opt<std::string> linkerPath(
    "ld", cl::cat(category), cl::value_desc("path"),
    cl::desc("The ELF linker (default: ld.lld-22 or ld.lld on PATH)"));
enum class Backend { CPU, CUDA };
cl::opt<Backend> backend(
    "target", cl::cat(category), cl::init(Backend::CPU),
    cl::desc("The kernel library the program calls (plan.json's "
             "\"backend\")"),
    cl::values(clEnumValN(Backend::CPU, "cpu",
                          "loom_cpu_kernels.h (--loom-lower-cpu; default)"),
               clEnumValN(Backend::CUDA, "cuda",
                          "loom_cuda_kernels.h (--loom-lower-cuda): device "
                          "buffers, a loom_cuda_context per call")));
cl::opt<bool> noPadVocab(
    "no-pad-vocab", cl::cat(category),
    cl::desc("Keep the logits of a vocabulary that is not a multiple of 64 "
             "as they are: skip --loom-pad-vocab (zero rows on the head's "
             "weight, -inf logits over them)"));
cl::opt<bool> noFuse(
    "no-fuse", cl::cat(category),
    cl::desc("Lower every op to its own kernel call: skip --loom-fuse (matmul "
             "bias/gelu epilogues, elementwise chains)"));
cl::opt<bool> noOverlap(
    "no-overlap", cl::cat(category),
    cl::desc("Wait for every collective in its own call: do not split "
             "all-reduces and contiguous reduce-scatters / all-gathers into "
             "a start and a wait before the first reader"));
cl::opt<std::string> emitLLVM("emit-llvm", cl::cat(category),
                              cl::value_desc("file.ll"),
                              cl::desc("Also write the LLVM IR here"));

int fail(const Twine &message) {
  WithColor::error(errs(), "loom-compile") << message << "\n";
  return 1;
}

json::Value dtypeName(mlir::Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF64())
    return "f64";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  if (type.isBF16())
    return "bf16";
  return "unknown";
}

/// One argument or result of a lowered function, as plan.json lists it.
Expected<json::Object> describeTensor(mlir::DictionaryAttr entry,
                                      ArrayRef<int64_t> gridShape,
                                      StringRef function) {
  auto type = cast<mlir::RankedTensorType>(
      cast<mlir::TypeAttr>(entry.get("type")).getValue());
  auto attrs = entry.getAs<mlir::DictionaryAttr>("attrs");
  json::Object object;
  for (auto [key, attr] : {std::pair{"role", loom::kRoleAttr},
                           {"name", loom::kNameAttr},
                           {"value", loom::kValueKeyAttr}})
    if (auto value =
            attrs ? attrs.getAs<mlir::StringAttr>(attr) : mlir::StringAttr())
      object[key] = value.getValue();
  object["dtype"] = dtypeName(type.getElementType());
  object["shape"] = json::Array(type.getShape());
  json::Array splitAxes;
  SmallVector<int64_t> global(type.getShape());
  if (auto split = attrs ? attrs.getAs<mlir::ArrayAttr>(loom::kSplitAxesAttr)
                         : mlir::ArrayAttr()) {
    for (auto [dim, axesAttr] : llvm::enumerate(split)) {
      json::Array axes;
      for (mlir::Attribute axis : cast<mlir::ArrayAttr>(axesAttr)) {
        int64_t a = cast<mlir::IntegerAttr>(axis).getInt();
        // The runtime places shards by these axes: one the grid lacks
        // would index past its coordinates.
        if (dim >= global.size() || a < 0 ||
            a >= static_cast<int64_t>(gridShape.size()))
          return createStringError(
              formatv("@{0}: loom.split_axes names grid axis {1} for "
                      "dimension {2}, but the tensor has rank {3} and the "
                      "grid {4} axes",
                      function, a, dim, global.size(), gridShape.size()));
        axes.push_back(a);
        global[dim] *= gridShape[a];
      }
      splitAxes.push_back(std::move(axes));
    }
  }
  object["global_shape"] = json::Array(global);
  object["split_axes"] = std::move(splitAxes);
  if (auto tied = attrs ? attrs.getAs<mlir::ArrayAttr>(loom::kTiedStagesAttr)
                        : mlir::ArrayAttr()) {
    json::Array stages;
    for (mlir::Attribute stage : tied)
      stages.push_back(cast<mlir::IntegerAttr>(stage).getInt());
    object["tied_stages"] = std::move(stages);
  }
  return object;
}

StringRef backendName() {
  return backend == Backend::CUDA ? loom::lowering::cudaTarget().backend
                                  : loom::lowering::cpuTarget().backend;
}

/// plan.json: what the runtime needs to call the functions; removes the
/// attributes and ops LLVM translation does not take. `vocab` is the
/// vocabulary, found before the lowering (none when unknown).
Expected<json::Object> takePlan(mlir::ModuleOp module,
                                std::optional<int64_t> vocab) {
  json::Object plan{{"format", "loom-plan"},
                    {"abi_version", loom::lowering::programAbiVersion()},
                    {"target", sys::getProcessTriple()},
                    {"backend", backendName()}};
  if (vocab)
    plan["vocab_size"] = *vocab;
  SmallVector<int64_t> gridShape;
  SmallVector<mlir::Operation *> grids;
  for (auto grid : module.getOps<mlir::shard::GridOp>()) {
    if (!grids.empty())
      return createStringError("the module has more than one shard.grid");
    gridShape.assign(grid.getShape().begin(), grid.getShape().end());
    plan["grid"] = json::Object{{"name", grid.getSymName()},
                                {"shape", json::Array(gridShape)}};
    grids.push_back(grid);
  }
  json::Array groups;
  if (auto attr = module->getAttrOfType<mlir::ArrayAttr>(loom::kGroupsAttr))
    for (mlir::Attribute group : attr)
      groups.push_back(
          json::Array(cast<mlir::DenseI64ArrayAttr>(group).asArrayRef()));
  plan["groups"] = std::move(groups);

  json::Array functions;
  for (auto fn : module.getOps<mlir::LLVM::LLVMFuncOp>()) {
    StringRef symbol = fn.getSymName();
    if (!symbol.starts_with("loom_fn_"))
      continue;
    json::Object object{{"name", symbol.drop_front(strlen("loom_fn_"))},
                        {"symbol", symbol}};
    if (auto stage =
            fn->getAttrOfType<mlir::DictionaryAttr>(loom::kStageFunctionAttr)) {
      object["kind"] = stage.getAs<mlir::StringAttr>("kind").getValue();
      object["stage"] = stage.getAs<mlir::IntegerAttr>("stage").getInt();
    }
    for (auto [list, attr] : {std::pair{"args", loom::kArgsAttr},
                              {"results", loom::kResultsAttr}}) {
      json::Array entries;
      for (mlir::Attribute entry : fn->getAttrOfType<mlir::ArrayAttr>(attr)) {
        Expected<json::Object> tensor = describeTensor(
            cast<mlir::DictionaryAttr>(entry), gridShape, symbol);
        if (!tensor)
          return tensor.takeError();
        entries.push_back(std::move(*tensor));
      }
      object[list] = std::move(entries);
    }
    for (auto [key, attr] :
         {std::pair{"workspace_bytes", loom::kWorkspaceBytesAttr},
          {"peak_live_bytes", loom::kPeakLiveBytesAttr}})
      object[key] = fn->getAttrOfType<mlir::IntegerAttr>(attr).getInt();
    functions.push_back(std::move(object));
    for (StringRef attr : {loom::kArgsAttr, loom::kResultsAttr,
                           loom::kWorkspaceBytesAttr, loom::kPeakLiveBytesAttr,
                           loom::kStageFunctionAttr, loom::kTargetAttr})
      fn->removeAttr(attr);
  }
  plan["functions"] = std::move(functions);
  for (mlir::Operation *grid : grids)
    grid->erase();
  return plan;
}

/// The schedule's JSON (pipelined steps), or "" without one.
Expected<std::string> takeSchedule(mlir::ModuleOp module) {
  mlir::Attribute attr = module->getAttr(loom::kScheduleAttr);
  if (!attr)
    return "";
  auto schedule = loom::sched::scheduleFromAttr(attr);
  if (!schedule)
    return schedule.takeError();
  return loom::sched::scheduleToJson(*schedule);
}

/// Compiles `llvmModule` for this machine into the object file `path`.
Error emitObject(llvm::Module &llvmModule, StringRef path) {
  std::string triple = sys::getProcessTriple();
  std::string error;
  const Target *target = TargetRegistry::lookupTarget(Triple(triple), error);
  if (!target)
    return createStringError("no LLVM target for " + triple + ": " + error);
  TargetOptions options;
  std::unique_ptr<TargetMachine> machine(target->createTargetMachine(
      Triple(triple), "generic", "", options, Reloc::PIC_));
  llvmModule.setTargetTriple(Triple(triple));
  llvmModule.setDataLayout(machine->createDataLayout());
  std::error_code ec;
  raw_fd_ostream out(path, ec, sys::fs::OF_None);
  if (ec)
    return createStringError("cannot write " + path + ": " + ec.message());
  legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, out, nullptr,
                                   CodeGenFileType::ObjectFile))
    return createStringError("LLVM cannot emit an object file for " + triple);
  passes.run(llvmModule);
  return Error::success();
}

/// Links `object` into the shared object `output`.
Error linkShared(StringRef object, StringRef output) {
  std::string linker = linkerPath;
  if (linker.empty()) {
    for (StringRef name : {"ld.lld-22", "ld.lld"})
      if (auto found = sys::findProgramByName(name)) {
        linker = *found;
        break;
      }
    if (linker.empty())
      if (auto found =
              sys::findProgramByName("ld.lld", {"/usr/lib/llvm-22/bin"}))
        linker = *found;
  }
  if (linker.empty())
    return createStringError("no ELF linker: install lld-22 (ld.lld) or pass "
                             "--ld");
  std::string message;
  SmallVector<StringRef> argv = {linker, "-shared", "-o", output, object};
  int rc = sys::ExecuteAndWait(linker, argv, std::nullopt, {}, 0, 0, &message);
  if (rc != 0)
    return createStringError(linker + " failed (exit " + Twine(rc) + ")" +
                             (message.empty() ? "" : ": " + message));
  return Error::success();
}

Error writeText(StringRef path, StringRef text) {
  std::error_code ec;
  raw_fd_ostream out(path, ec, sys::fs::OF_Text);
  if (ec)
    return createStringError("cannot write " + path + ": " + ec.message());
  out << text;
  return Error::success();
}

/// Adds `uint64_t loom_program_plan_digest(void)` returning `digest`
/// (loom_program.h), so that the runtime can tell the plan.json written
/// with program.so from any other.
void addPlanDigest(mlir::ModuleOp module, uint64_t digest) {
  mlir::OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToEnd(module.getBody());
  mlir::Location loc = module.getLoc();
  auto fn = mlir::LLVM::LLVMFuncOp::create(
      b, loc, "loom_program_plan_digest",
      mlir::LLVM::LLVMFunctionType::get(b.getI64Type(), {}));
  b.setInsertionPointToStart(fn.addEntryBlock(b));
  mlir::Value value = mlir::LLVM::ConstantOp::create(
      b, loc, b.getI64Type(), b.getI64IntegerAttr(int64_t(digest)));
  mlir::LLVM::ReturnOp::create(b, loc, value);
}

/// Builds the artifact in `dir`; `llvmText` gets the LLVM IR when
/// --emit-llvm asks for it.
Error build(mlir::ModuleOp module, std::optional<int64_t> vocab, StringRef dir,
            std::string &llvmText) {
  auto plan = takePlan(module, vocab);
  if (!plan)
    return plan.takeError();
  auto schedule = takeSchedule(module);
  if (!schedule)
    return schedule.takeError();
  // Attributes of Loom's passes mean nothing to LLVM.
  for (mlir::NamedAttribute attr : module->getAttrs())
    if (attr.getName().getValue().starts_with("loom."))
      module->removeAttr(attr.getName());
  std::string planText;
  raw_string_ostream os(planText);
  os << formatv("{0:2}", json::Value(std::move(*plan))) << "\n";
  uint64_t digest = loom_plan_digest_update(LOOM_PLAN_DIGEST_SEED,
                                            planText.data(), planText.size());
  digest = loom_plan_digest_update(digest, schedule->data(), schedule->size());
  addPlanDigest(module, digest);

  llvm::LLVMContext llvmContext;
  auto llvmModule = mlir::translateModuleToLLVMIR(module, llvmContext, "loom");
  if (!llvmModule)
    return createStringError("LLVM translation failed");
  if (!emitLLVM.empty()) {
    raw_string_ostream os(llvmText);
    llvmModule->print(os, nullptr);
  }
  SmallString<256> object(dir), library(dir), planPath(dir), schedulePath(dir);
  sys::path::append(object, "program.o");
  sys::path::append(library, "program.so");
  sys::path::append(planPath, "plan.json");
  sys::path::append(schedulePath, "schedule.json");
  if (Error err = emitObject(*llvmModule, object))
    return err;
  if (Error err = linkShared(object, library))
    return err;
  sys::fs::remove(object);
  if (Error err = writeText(planPath, planText))
    return err;
  if (!schedule->empty())
    if (Error err = writeText(schedulePath, *schedule))
      return err;
  return Error::success();
}

/// The files an artifact directory holds (program.o only while it is built).
bool isArtifactFile(StringRef name) {
  return name == "program.so" || name == "plan.json" ||
         name == "schedule.json" || name == "program.o";
}

/// Checks that `output` is Loom's to write: absent with an existing parent
/// directory, an empty directory, or an artifact (plan.json and nothing but
/// artifact files), which the new one replaces.
Error checkOutputTarget(StringRef output) {
  StringRef parent = sys::path::parent_path(output);
  if (parent.empty())
    parent = ".";
  if (!sys::fs::is_directory(parent))
    return createStringError(output + ": the directory '" + parent +
                             "' does not exist");
  sys::fs::file_status status;
  if (std::error_code ec = sys::fs::status(output, status, /*follow=*/false)) {
    if (ec == std::errc::no_such_file_or_directory)
      return Error::success();
    return createStringError(output + ": " + ec.message());
  }
  if (status.type() != sys::fs::file_type::directory_file)
    return createStringError(output + ": exists and is not a Loom artifact "
                                      "directory; not replacing it");
  std::error_code ec;
  bool hasPlan = false, empty = true;
  for (sys::fs::directory_iterator it(output, ec), end; it != end && !ec;
       it.increment(ec)) {
    StringRef name = sys::path::filename(it->path());
    empty = false;
    hasPlan |= name == "plan.json";
    if (!isArtifactFile(name) || it->type() != sys::fs::file_type::regular_file)
      return createStringError(output +
                               ": exists and is not a Loom artifact "
                               "(it holds '" +
                               name + "'); not replacing it");
  }
  if (ec)
    return createStringError(output + ": " + ec.message());
  if (!empty && !hasPlan)
    return createStringError(output + ": exists and is not a Loom artifact "
                                      "(no plan.json); not replacing it");
  return Error::success();
}

/// `path` absolute, without `.` and `..`, and with its longest existing
/// prefix resolved through symbolic links, so that two spellings of one
/// place compare equal whether or not its end exists yet.
SmallString<256> resolvedPath(StringRef path) {
  SmallString<256> absolute(path);
  sys::fs::make_absolute(absolute);
  sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  StringRef existing = absolute;
  while (!existing.empty() && !sys::fs::exists(existing))
    existing = sys::path::parent_path(existing);
  SmallString<256> real;
  if (existing.empty() || sys::fs::real_path(existing, real))
    return absolute;
  real.append(absolute.substr(existing.size()));
  return real;
}

/// --emit-llvm's file may not lie inside the artifact directory: the
/// artifact is built beside it and renamed over it whole, so the file
/// would either be lost or make the directory hold a file no artifact
/// holds.
Error checkLLVMPathOutside(StringRef output, StringRef llvmPath) {
  SmallString<256> dir = resolvedPath(output), file = resolvedPath(llvmPath);
  if (file == dir || (file.starts_with(dir) && file.size() > dir.size() &&
                      sys::path::is_separator(file[dir.size()])))
    return createStringError("--emit-llvm " + llvmPath +
                             ": inside the artifact directory " + output +
                             ", which loom-compile replaces whole; write "
                             "the LLVM IR elsewhere");
  return Error::success();
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Loom: compile a training step into a runnable "
                              "artifact (program.so + plan.json)\n");

  mlir::DialectRegistry registry;
  registry.insert<loom::LoomDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::shard::ShardDialect,
                  mlir::LLVM::LLVMDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::MLIRContext context(registry);

  std::string error;
  auto file = mlir::openInputFile(inputPath, &error);
  if (!file)
    return fail(error);
  if (Error tooDeep = loom::checkIRDepth(file->getBuffer(), inputPath))
    return fail(toString(std::move(tooDeep)));
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  // Refused before any work, and checked again before the rename.
  SmallString<256> output(outputPath);
  sys::path::remove_dots(output, /*remove_dot_dot=*/true);
  while (output.size() > 1 && sys::path::is_separator(output.back()))
    output.pop_back();
  if (Error err = checkOutputTarget(output))
    return fail(toString(std::move(err)));
  if (!emitLLVM.empty() && !loom::isStreamOutput(emitLLVM))
    if (Error err = checkLLVMPathOutside(output, emitLLVM))
      return fail(toString(std::move(err)));

  if (Error err = loom::checkExecutable(*module,
                                        {loom::ModuleState::Whole,
                                         loom::ModuleState::Partitioned,
                                         loom::ModuleState::Split},
                                        "loom-compile"))
    return fail(inputPath + ": " + toString(std::move(err)));

  // The vocabulary the runtime checks token ids against (plan.json's
  // "vocab_size"): read off the embedding while the step is still Loom's
  // ops. A module lowered already no longer says; its plan omits it.
  std::optional<int64_t> vocab = loom::tokenVocabulary(*module);
  bool lowered = false;
  for (auto fn : module->getOps<mlir::LLVM::LLVMFuncOp>()) {
    if (!fn.getSymName().starts_with("loom_fn_"))
      continue;
    lowered = true;
    // A module lowered already must call the kernels asked for.
    auto target = fn->getAttrOfType<mlir::StringAttr>(loom::kTargetAttr);
    if (!target || target.getValue() != backendName())
      return fail(
          "@" + fn.getSymName() + " was lowered for " +
          (target ? "'" + target.getValue() + "'" : Twine("no target")) +
          ", not --target=" + backendName());
  }
  if (!lowered) {
    mlir::PassManager pm(&context);
    loom::CompilePipelineOptions options;
    options.target = backend == Backend::CUDA ? loom::CompileTarget::CUDA
                                              : loom::CompileTarget::CPU;
    options.padVocab = !noPadVocab;
    options.fuse = !noFuse;
    options.overlap = !noOverlap;
    loom::addCompilePipeline(pm, options);
    if (mlir::failed(pm.run(*module)))
      return 1;
  }

  // Build next to the output, then rename into place.
  Expected<std::string> tempDir = loom::createTempDirectoryBeside(output);
  if (!tempDir)
    return fail(toString(tempDir.takeError()));
  std::string temp = std::move(*tempDir);
  std::string llvmText;
  if (Error err = build(*module, vocab, temp, llvmText)) {
    sys::fs::remove_directories(temp);
    return fail(toString(std::move(err)));
  }
  // The LLVM IR waits in a temporary file until the artifact is in place.
  std::optional<sys::fs::TempFile> llvmFile;
  bool llvmStream = !emitLLVM.empty() && loom::isStreamOutput(emitLLVM);
  if (!emitLLVM.empty() && !llvmStream) {
    Expected<sys::fs::TempFile> file = sys::fs::TempFile::create(
        loom::atomicOutputPath(emitLLVM) + ".tmp-%%%%%%");
    Error err = file ? Error::success() : file.takeError();
    if (!err) {
      raw_fd_ostream os(file->FD, /*shouldClose=*/false);
      os << llvmText;
      os.flush();
      if (os.has_error()) {
        err = createStringError(os.error().message());
        os.clear_error();
        consumeError(file->discard());
      } else {
        llvmFile = std::move(*file);
      }
    }
    if (err) {
      sys::fs::remove_directories(temp);
      return fail(emitLLVM + ": " + toString(std::move(err)));
    }
  }
  Error err = checkOutputTarget(output);
  if (!err)
    err = loom::replaceDirectory(temp, output);
  if (err) {
    sys::fs::remove_directories(temp);
    if (llvmFile)
      consumeError(llvmFile->discard());
    return fail(toString(std::move(err)));
  }
  if (llvmFile)
    if (Error err = llvmFile->keep(loom::atomicOutputPath(emitLLVM)))
      return fail(emitLLVM + ": " + toString(std::move(err)));
  // /dev/null, a FIFO: written in place, never renamed over.
  if (llvmStream)
    if (Error err = loom::writeFileAtomically(
            emitLLVM, [&](raw_ostream &os) { os << llvmText; }))
      return fail(toString(std::move(err)));
  return 0;
}
