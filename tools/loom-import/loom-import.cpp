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

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

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
  if (microBatch.getNumOccurrences() && microBatch <= 0)
    return fail("--micro-batch must be positive");
  if (seqLen < 0)
    return fail("--seq-len must be positive");
  mlir::MLIRContext context;
  auto imported = loom::importOnnx(context, configPath, options);
  if (!imported)
    return fail(toString(imported.takeError()));
  if (!initWeights.empty())
    if (Error error = loom::writeSafetensors(initWeights, imported->parameters,
                                             {{"format", "pt"}}))
      return fail(toString(std::move(error)));
  Error written = writeToOutput(outputPath, [&](raw_ostream &os) -> Error {
    if (!summary)
      imported->module->print(os);
    else if (json)
      loom::printOnnxSummaryJSON(os, configPath, *imported);
    else
      loom::printOnnxSummary(os, configPath, *imported);
    return Error::success();
  });
  if (written)
    return fail(toString(std::move(written)));
  return 0;
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
  if (loom::isOnnxPath(configPath))
    return importGraph();
  if (weightsPath.getNumOccurrences())
    return fail("--weights applies to ONNX models (MODEL.onnx)");

  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFileOrSTDIN(configPath);
  if (!buffer)
    return fail(configPath + ": " + buffer.getError().message());
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

  // The weights first: if they cannot be written, no module is either.
  if (!initWeights.empty())
    if (Error error = loom::writeSafetensors(
            initWeights, loom::initParameters(*config, initSeed),
            {{"format", "pt"}}))
      return fail(toString(std::move(error)));
  Error written = writeToOutput(outputPath, [&](raw_ostream &os) -> Error {
    if (!summary) {
      (*module)->print(os);
      return Error::success();
    }
    auto forward = (*module)->lookupSymbol<mlir::func::FuncOp>("forward");
    loom::ModelSummary stats = loom::summarizeModel(*config, forward);
    if (json)
      loom::printSummaryJSON(os, *config, options, stats);
    else
      loom::printSummary(os, *config, options, stats);
    return Error::success();
  });
  if (written)
    return fail(toString(std::move(written)));
  return 0;
}
