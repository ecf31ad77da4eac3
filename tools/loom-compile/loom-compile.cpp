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
//   model.loom/plan.json      the backend, grid, groups and every
//                             function's arguments and results
//                             (docs/runtime.md)
//   model.loom/schedule.json  the pipeline schedule (pipelined steps only)
//
// It is built in a temporary directory next to the output and renamed into
// place, so an interrupted compile never leaves a partial artifact.
//
//===----------------------------------------------------------------------===//

#include "passes/Lowering/LowerToKernels.h"
#include "passes/Pipelines/Pipelines.h"

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

#include <unistd.h>

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
json::Object describeTensor(mlir::DictionaryAttr entry,
                            ArrayRef<int64_t> gridShape) {
  auto type = cast<mlir::RankedTensorType>(
      cast<mlir::TypeAttr>(entry.get("type")).getValue());
  auto attrs = entry.getAs<mlir::DictionaryAttr>("attrs");
  json::Object object;
  for (StringRef key : {"role", "name", "value"})
    if (auto value = attrs
                         ? attrs.getAs<mlir::StringAttr>(("loom." + key).str())
                         : mlir::StringAttr())
      object[key] = value.getValue();
  object["dtype"] = dtypeName(type.getElementType());
  object["shape"] = json::Array(type.getShape());
  json::Array splitAxes;
  SmallVector<int64_t> global(type.getShape());
  if (auto split = attrs ? attrs.getAs<mlir::ArrayAttr>("loom.split_axes")
                         : mlir::ArrayAttr()) {
    for (auto [dim, axesAttr] : llvm::enumerate(split)) {
      json::Array axes;
      for (mlir::Attribute axis : cast<mlir::ArrayAttr>(axesAttr)) {
        int64_t a = cast<mlir::IntegerAttr>(axis).getInt();
        axes.push_back(a);
        if (dim < global.size() && a < static_cast<int64_t>(gridShape.size()))
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
/// attributes and ops LLVM translation does not take.
Expected<json::Object> takePlan(mlir::ModuleOp module) {
  json::Object plan{{"format", "loom-plan"},
                    {"abi_version", loom::lowering::programAbiVersion()},
                    {"target", sys::getProcessTriple()},
                    {"backend", backendName()}};
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
  if (auto attr = module->getAttrOfType<mlir::ArrayAttr>("loom.groups"))
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
    for (StringRef list : {"args", "results"}) {
      json::Array entries;
      for (mlir::Attribute entry :
           fn->getAttrOfType<mlir::ArrayAttr>(("loom." + list).str()))
        entries.push_back(
            describeTensor(cast<mlir::DictionaryAttr>(entry), gridShape));
      object[list] = std::move(entries);
    }
    for (StringRef bytes : {"workspace_bytes", "peak_live_bytes"})
      object[bytes] =
          fn->getAttrOfType<mlir::IntegerAttr>(("loom." + bytes).str())
              .getInt();
    functions.push_back(std::move(object));
    for (StringRef attr : {"loom.args", "loom.results", "loom.workspace_bytes",
                           "loom.peak_live_bytes", "loom.stage_function",
                           loom::lowering::kTargetAttr.data()})
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

/// Builds the artifact in `dir`.
Error build(mlir::ModuleOp module, StringRef dir) {
  auto plan = takePlan(module);
  if (!plan)
    return plan.takeError();
  auto schedule = takeSchedule(module);
  if (!schedule)
    return schedule.takeError();
  // Attributes of Loom's passes mean nothing to LLVM.
  for (mlir::NamedAttribute attr : module->getAttrs())
    if (attr.getName().getValue().starts_with("loom."))
      module->removeAttr(attr.getName());

  llvm::LLVMContext llvmContext;
  auto llvmModule = mlir::translateModuleToLLVMIR(module, llvmContext, "loom");
  if (!llvmModule)
    return createStringError("LLVM translation failed");
  if (!emitLLVM.empty()) {
    std::string text;
    raw_string_ostream os(text);
    llvmModule->print(os, nullptr);
    if (Error err = writeText(emitLLVM, text))
      return err;
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
  std::string planText;
  raw_string_ostream os(planText);
  os << formatv("{0:2}", json::Value(std::move(*plan))) << "\n";
  if (Error err = writeText(planPath, planText))
    return err;
  if (!schedule->empty())
    if (Error err = writeText(schedulePath, *schedule))
      return err;
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
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  bool lowered = false;
  for (auto fn : module->getOps<mlir::LLVM::LLVMFuncOp>()) {
    if (!fn.getSymName().starts_with("loom_fn_"))
      continue;
    lowered = true;
    // A module lowered already must call the kernels asked for.
    auto target =
        fn->getAttrOfType<mlir::StringAttr>(loom::lowering::kTargetAttr);
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
  SmallString<256> output(outputPath);
  sys::path::remove_dots(output, /*remove_dot_dot=*/true);
  SmallString<256> temp(output);
  temp += formatv(".tmp-{0}", ::getpid()).str();
  sys::fs::remove_directories(temp);
  if (std::error_code ec = sys::fs::create_directories(temp))
    return fail("cannot create " + temp + ": " + ec.message());
  if (Error err = build(*module, temp)) {
    sys::fs::remove_directories(temp);
    return fail(toString(std::move(err)));
  }
  sys::fs::remove_directories(output);
  if (std::error_code ec = sys::fs::rename(temp, output)) {
    sys::fs::remove_directories(temp);
    return fail("cannot rename " + temp + " to " + output + ": " +
                ec.message());
  }
  return 0;
}
