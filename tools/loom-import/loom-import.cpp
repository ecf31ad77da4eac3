//===- loom-import.cpp - Models to the loom dialect -----------------------===//
//
//   loom-import CONFIG.json [-o FILE] [--micro-batch N] [--seq-len S]
//               [--precision f32|bf16] [--embd-pdrop P] [--resid-pdrop P]
//               [--attn-pdrop P] [--seed N]
//   loom-import CONFIG.json --summary [--json] [...]
//   loom-import CONFIG.json --init-weights FILE [--init-seed N] [...]
//   loom-import MODEL.onnx [-o FILE] [--weights FILE.safetensors]
//               [--micro-batch B --seq-len S] [--precision f32|bf16]
//               [--summary [--json]] [--init-weights FILE]
//
// Writes a module with @forward (see ModelImporter.h and OnnxImporter.h),
// or with --summary the parameter count, FLOPs per token and shapes (and
// for a graph, the patterns fused); with --init-weights also the initial
// weights as safetensors: a freshly initialized model
// (loom/Import/ParamInit.h), or a graph's parameters. Errors name the file
// and key or node, exit 1 and leave no output file behind (the output is
// written to a temporary file and renamed).
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelSummary.h"
#include "loom/Import/OnnxImporter.h"
#include "loom/Import/ParamInit.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/InputFile.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

#include <optional>
#include <unistd.h>

using namespace llvm;

namespace {
cl::OptionCategory category("loom-import options");

cl::opt<std::string> configPath(cl::Positional, cl::Required,
                                cl::desc("<config.json | model.onnx>"),
                                cl::cat(category));
cl::opt<std::string> outputPath("o", cl::init("-"), cl::cat(category),
                                cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"));
cl::opt<int64_t> microBatch("micro-batch", cl::init(1), cl::cat(category),
                            cl::desc("Sequences per micro-batch (default 1)"));
cl::opt<int64_t> seqLen("seq-len", cl::init(0), cl::cat(category),
                        cl::desc("Tokens per sequence (default: the "
                                 "model's n_positions / "
                                 "max_position_embeddings; a graph's "
                                 "static sequence length)"));
cl::opt<std::string> weightsPath(
    "weights", cl::cat(category), cl::value_desc("file.safetensors"),
    cl::desc("ONNX: the model's parameters, for graph inputs without "
             "initializers and to restore names the exporter changed"));
cl::opt<loom::Precision> precision(
    "precision", cl::init(loom::Precision::F32), cl::cat(category),
    cl::desc("Precision policy"),
    cl::values(clEnumValN(loom::Precision::F32, "f32", "f32 everywhere"),
               clEnumValN(loom::Precision::BF16, "bf16",
                          "bf16 compute, f32 master weights")));
cl::opt<double> embdPdrop("embd-pdrop", cl::cat(category),
                          cl::desc("Override the config's embd_pdrop"));
cl::opt<double> residPdrop("resid-pdrop", cl::cat(category),
                           cl::desc("Override the config's resid_pdrop"));
cl::opt<double> attnPdrop("attn-pdrop", cl::cat(category),
                          cl::desc("Override the config's attn_pdrop / "
                                   "attention_dropout (dropout of the "
                                   "attention probabilities)"));
cl::opt<int64_t> seed("seed", cl::init(0), cl::cat(category),
                      cl::desc("Seed of the dropout masks (default 0)"));
cl::opt<std::string> initWeights(
    "init-weights", cl::cat(category), cl::value_desc("file.safetensors"),
    cl::desc("Also write the initial weights to this file: freshly "
             "initialized as Hugging Face does (config.json), or the "
             "graph's parameters (ONNX)"));
cl::opt<uint64_t> initSeed("init-seed", cl::init(0), cl::cat(category),
                           cl::desc("Seed of --init-weights (default 0)"));
cl::opt<bool> summary("summary", cl::cat(category),
                      cl::desc("Print parameters, FLOPs per token and "
                               "per-layer shapes instead of the module"));
cl::opt<bool> json("json", cl::cat(category),
                   cl::desc("With --summary: print it as JSON"));

int fail(const Twine &message) {
  WithColor::error(errs(), "loom-import") << message << "\n";
  return 1;
}

/// --init-weights holds every parameter in memory as f32 while it writes
/// them: a model that cannot fit is an error, not an out-of-memory abort.
Error checkWeightsFit(const loom::ModelConfig &config) {
  uint64_t bytes = 0;
  for (const loom::ParamSpec &spec : loom::listParameters(config))
    bytes += 4 * uint64_t(spec.numElements());
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGE_SIZE);
  uint64_t memory = pages > 0 && pageSize > 0 ? uint64_t(pages) * pageSize : 0;
  if (memory == 0 || bytes <= memory / 2)
    return Error::success();
  return createStringError(
      inconvertibleErrorCode(),
      formatv("{0}: {1:f1} GiB of f32 parameters is more than half of this "
              "machine's {2:f1} GiB of memory; initialize the weights where "
              "they fit",
              initWeights, double(bytes) / (1ull << 30),
              double(memory) / (1ull << 30)));
}

/// Writes `text` to -o and, with --init-weights, the weights by
/// `writeWeights`: both outputs or neither. The module waits in a temporary
/// file while the weights are written, and appears only once they are.
int writeOutputs(const std::string &text,
                 llvm::function_ref<Error()> writeWeights) {
  std::optional<sys::fs::TempFile> pending;
  bool stream = outputPath == "-" || loom::isStreamOutput(outputPath);
  std::string target = loom::atomicOutputPath(outputPath);
  if (!stream) {
    Expected<sys::fs::TempFile> temp =
        sys::fs::TempFile::create(target + ".tmp-%%%%%%");
    if (!temp)
      return fail(outputPath + ": " + toString(temp.takeError()));
    raw_fd_ostream out(temp->FD, /*shouldClose=*/false);
    out << text;
    out.flush();
    if (out.has_error()) {
      std::string message = out.error().message();
      out.clear_error();
      consumeError(temp->discard());
      return fail(outputPath + ": " + message);
    }
    pending = std::move(*temp);
  }
  if (!initWeights.empty())
    if (Error error = writeWeights()) {
      if (pending)
        consumeError(pending->discard());
      return fail(toString(std::move(error)));
    }
  if (stream && outputPath == "-") {
    outs() << text;
    return 0;
  }
  // /dev/null, a FIFO: written in place, never renamed over.
  if (stream) {
    if (Error error = loom::writeFileAtomically(
            outputPath, [&](raw_ostream &os) { os << text; }))
      return fail(toString(std::move(error)));
    return 0;
  }
  if (Error error = pending->keep(target)) {
    if (!initWeights.empty())
      sys::fs::remove(initWeights);
    return fail(outputPath + ": " + toString(std::move(error)));
  }
  return 0;
}

/// loom-import MODEL.onnx: the graph's @forward, summary, parameters.
int importGraph() {
  for (const cl::Option *option : std::initializer_list<const cl::Option *>{
           &embdPdrop, &residPdrop, &attnPdrop, &seed, &initSeed})
    if (option->getNumOccurrences())
      return fail("--" + option->ArgStr +
                  " applies to config.json imports, not to ONNX graphs");
  loom::OnnxImportOptions options;
  options.microBatch = microBatch.getNumOccurrences() ? microBatch : 0;
  options.seqLen = seqLen;
  options.precision = precision;
  options.weightsPath = weightsPath;
  options.parameterValues = !initWeights.empty();
  mlir::MLIRContext context;
  auto imported = loom::importOnnx(context, configPath, options);
  if (!imported)
    return fail(toString(imported.takeError()));
  std::string text;
  raw_string_ostream os(text);
  if (!summary)
    imported->module->print(os);
  else if (json)
    loom::printOnnxSummaryJSON(os, configPath, *imported);
  else
    loom::printOnnxSummary(os, configPath, *imported);
  return writeOutputs(text, [&] {
    return loom::writeSafetensors(initWeights, imported->parameters,
                                  {{"format", "pt"}});
  });
}

std::optional<double> ifGiven(const cl::opt<double> &option) {
  if (option.getNumOccurrences() == 0)
    return std::nullopt;
  return option.getValue();
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Hugging Face config.json or ONNX graph to the loom dialect\n");
  if (initSeed.getNumOccurrences() && initWeights.empty())
    return fail("--init-seed needs --init-weights");
  if (json && !summary)
    return fail("--json needs --summary");
  // Given, a size must be positive; 0 is not "not given" (the importers'
  // options use 0 for the model's or the graph's own size).
  for (const cl::opt<int64_t> *size : {&microBatch, &seqLen})
    if (size->getNumOccurrences() && *size <= 0)
      return fail("--" + size->ArgStr + " must be positive, not " +
                  Twine(int64_t(*size)));
  if (loom::isOnnxPath(configPath))
    return importGraph();
  if (weightsPath.getNumOccurrences())
    return fail("--weights applies to ONNX models (MODEL.onnx)");

  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      loom::readInputFile(configPath, loom::kMaxJsonFileBytes);
  if (!buffer)
    return fail(toString(buffer.takeError()));
  Expected<loom::ModelConfig> config =
      loom::parseModelConfig((*buffer)->getBuffer(), configPath);
  if (!config)
    return fail(toString(config.takeError()));

  loom::ImportOptions options;
  options.microBatch = microBatch;
  options.seqLen = seqLen;
  options.precision = precision;
  options.embdDropout = ifGiven(embdPdrop);
  options.residDropout = ifGiven(residPdrop);
  options.attnDropout = ifGiven(attnPdrop);
  options.seed = seed;

  mlir::MLIRContext context;
  auto module = loom::importModel(context, *config, options);
  if (!module)
    return fail(configPath + ": " + toString(module.takeError()));

  if (!initWeights.empty())
    if (Error error = checkWeightsFit(*config))
      return fail(toString(std::move(error)));

  std::string text;
  raw_string_ostream os(text);
  if (!summary) {
    (*module)->print(os);
  } else {
    auto forward = (*module)->lookupSymbol<mlir::func::FuncOp>("forward");
    loom::ModelSummary stats = loom::summarizeModel(*config, forward);
    if (json)
      loom::printSummaryJSON(os, *config, options, stats);
    else
      loom::printSummary(os, *config, options, stats);
  }
  return writeOutputs(text, [&]() -> Error {
    return loom::writeSafetensors(initWeights,
                                  loom::initParameters(*config, initSeed),
                                  {{"format", "pt"}});
  });
}
