//===- loom-import.cpp - Hugging Face config.json to the loom dialect -----===//
//
//   loom-import CONFIG.json [-o FILE] [--micro-batch N] [--seq-len S]
//               [--precision f32|bf16] [--embd-pdrop P] [--resid-pdrop P]
//               [--attn-pdrop P] [--seed N]
//   loom-import CONFIG.json --summary [--json] [...]
//   loom-import CONFIG.json --init-weights FILE [--init-seed N] [...]
//
// Writes a module with @forward (see ModelImporter.h), or with --summary
// the parameter count, FLOPs per token and per-layer shapes; with
// --init-weights also the weights of a freshly initialized model
// (loom/Import/ParamInit.h) as safetensors. Errors name
// the file and key, exit 1 and leave no output file behind (the output is
// written to a temporary file and renamed).
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelSummary.h"
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
                                cl::desc("<config.json>"), cl::cat(category));
cl::opt<std::string> outputPath("o", cl::init("-"), cl::cat(category),
                                cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"));
cl::opt<int64_t> microBatch("micro-batch", cl::init(1), cl::cat(category),
                            cl::desc("Sequences per micro-batch (default 1)"));
cl::opt<int64_t> seqLen("seq-len", cl::init(0), cl::cat(category),
                        cl::desc("Tokens per sequence (default: the "
                                 "model's n_positions / "
                                 "max_position_embeddings)"));
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
    cl::desc("Also write freshly initialized weights (Hugging Face's "
             "initialization, Hugging Face names) to this file"));
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

std::optional<double> ifGiven(const cl::opt<double> &option) {
  if (option.getNumOccurrences() == 0)
    return std::nullopt;
  return option.getValue();
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Hugging Face config.json to the loom dialect\n");
  if (initSeed.getNumOccurrences() && initWeights.empty())
    return fail("--init-seed needs --init-weights");
  if (json && !summary)
    return fail("--json needs --summary");

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
  // Both outputs or neither: the module waits in a temporary file while
  // the weights are written, and appears only once they are.
  std::optional<sys::fs::TempFile> pending;
  bool stream = outputPath == "-" || loom::isStreamOutput(outputPath);
  if (!stream) {
    Expected<sys::fs::TempFile> temp =
        sys::fs::TempFile::create(outputPath + ".tmp-%%%%%%");
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
    if (Error error = loom::writeSafetensors(
            initWeights, loom::initParameters(*config, initSeed),
            {{"format", "pt"}})) {
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
  if (Error error = pending->keep(outputPath)) {
    if (!initWeights.empty())
      sys::fs::remove(initWeights);
    return fail(outputPath + ": " + toString(std::move(error)));
  }
  return 0;
}
