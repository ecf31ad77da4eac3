//===- loom-checkpoint.cpp - Work with sharded training checkpoints -------===//
//
//   loom-checkpoint consolidate DIR -o model.safetensors
//
// DIR is a checkpoint directory of `loom-run --save` on the cpu backend
// (every rank's shards and an index, loom/Checkpoint/ShardedCheckpoint.h).
// `consolidate` assembles its parameters into one safetensors file under
// their Hugging Face names, the file `loom-run --init` takes under any plan
// (the optimizer moments stay behind). Errors are one line naming the file,
// exit 1 and leave no output file behind.
//
//===----------------------------------------------------------------------===//

#include "loom/Checkpoint/ShardedCheckpoint.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace {
cl::OptionCategory category("loom-checkpoint options");

cl::SubCommand consolidate("consolidate",
                           "Write a checkpoint's parameters as one "
                           "safetensors file with Hugging Face names (what "
                           "loom-run --init takes)");
cl::opt<std::string> checkpointDir(cl::Positional, cl::Required,
                                   cl::desc("<checkpoint directory>"),
                                   cl::sub(consolidate), cl::cat(category));
cl::opt<std::string> outputPath("o", cl::Required, cl::sub(consolidate),
                                cl::value_desc("model.safetensors"),
                                cl::desc("The consolidated file"),
                                cl::cat(category));
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // Only Loom's options in --help, as the other tools show (LLVM's backend
  // options come with the libraries linked in).
  cl::HideUnrelatedOptions(category);
  cl::HideUnrelatedOptions(category, consolidate);
  cl::ParseCommandLineOptions(argc, argv,
                              "Work with Loom's sharded checkpoints\n");
  if (!consolidate) {
    WithColor::error(errs(), "loom-checkpoint")
        << "give a command: consolidate (see --help)\n";
    return 1;
  }
  if (Error error = loom::consolidateCheckpoint(checkpointDir, outputPath)) {
    WithColor::error(errs(), "loom-checkpoint")
        << toString(std::move(error)) << "\n";
    return 1;
  }
  return 0;
}
