//===- Compiled.h - loom-run on a compiled artifact -------------*- C++ -*-===//

#ifndef LOOM_TOOLS_LOOM_RUN_COMPILED_H
#define LOOM_TOOLS_LOOM_RUN_COMPILED_H

#include "RankSession.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>

namespace loom::run {

struct CompiledOptions {
  std::string artifactPath, dataPath, logPath;
  /// Where the state comes from: initial parameters (safetensors, Hugging
  /// Face names) or a checkpoint directory to continue; one is empty.
  std::string initPath, resumePath;
  std::string savePath;  ///< checkpoint directory written at the end, or ""
  int64_t saveEvery = 0; ///< also save after every step divisible by it
  int64_t steps = 1;     ///< steps to run (after the resumed ones)
  double timeoutSeconds = 300; ///< 0: no watchdog
  /// Train on after a NaN or infinite loss instead of stopping there.
  bool allowNonFiniteLoss = false;
  std::string backend = "cpu"; ///< "cpu" or "cuda"
  CudaRankOptions cuda;        ///< the cuda backend's device and comm
};

/// "step S: the loss is nan; stopping (...)": both backends stop at the
/// first step whose loss is not finite, unless told to train on.
std::string nonFiniteLossMessage(int64_t step, double loss);

/// Checks every id of the token file `dataPath` (read into `ids`) against
/// the model's vocabulary before the first step, which would otherwise stop
/// at the first id past it deep inside the step: "<dataPath>: token id I at
/// position P is not below the vocabulary size V", the same from every
/// backend. A `vocab` of 0 (an artifact that does not record it) checks
/// nothing.
llvm::Error checkTokenVocabulary(llvm::StringRef dataPath,
                                 llvm::ArrayRef<uint32_t> ids, int64_t vocab);

/// "1 step", "3 steps": the count and its noun, plural unless 1.
std::string countOf(int64_t count, llvm::StringRef noun);

/// `value` as a --log-json number: null when it is NaN or infinite, which
/// JSON cannot write (llvm::json would print a bare `nan`, and readers
/// refuse the line).
llvm::json::Value jsonNumber(double value);

/// Refuses a --log-json path that is the --save path or inside its
/// directory: the save (a checkpoint directory swapped in whole, or the
/// reference backend's safetensors file) would replace the log, or the log
/// a file of the checkpoint. Either may be empty.
llvm::Error checkLogOutsideSave(llvm::StringRef logPath,
                                llvm::StringRef savePath);

/// Checks that the --save checkpoint directory and the --log-json file can
/// be written, and that the log is not inside the checkpoint, before the
/// steps whose results they hold.
llvm::Error checkOutputs(const CompiledOptions &options);

/// Trains `options.artifactPath` on this MPI rank (MPI_Init included);
/// returns the process's exit status.
int runCompiled(const CompiledOptions &options);

/// What `loom-run --np np` checks before starting mpirun, so that an error
/// the ranks would each report inside the job (under OpenMPI's abort
/// banner) is one line: the artifact loads and runs on `np` ranks, the
/// --init file exists and begins as a safetensors file, the --resume
/// checkpoint's index reads, the token file reads and its ids are in the
/// vocabulary (checkTokenVocabulary), and the outputs can be written
/// (checkOutputs).
llvm::Error checkBeforeLaunch(const CompiledOptions &options, int np);

/// Runs this program again under `mpirun -np np`, without --np.
int launchUnderMpirun(int np, int argc, char **argv);

} // namespace loom::run

#endif // LOOM_TOOLS_LOOM_RUN_COMPILED_H
