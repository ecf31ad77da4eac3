//===- Compiled.h - loom-run on a compiled artifact -------------*- C++ -*-===//

#ifndef LOOM_TOOLS_LOOM_RUN_COMPILED_H
#define LOOM_TOOLS_LOOM_RUN_COMPILED_H

#include <cstdint>
#include <string>

namespace loom::run {

struct CompiledOptions {
  std::string artifactPath, initPath, dataPath, logPath;
  int64_t steps = 1;
  double timeoutSeconds = 300; ///< 0: no watchdog
};

/// Trains `options.artifactPath` on this MPI rank (MPI_Init included);
/// returns the process's exit status.
int runCompiled(const CompiledOptions &options);

/// Runs this program again under `mpirun -np np`, without --np.
int launchUnderMpirun(int np, int argc, char **argv);

} // namespace loom::run

#endif // LOOM_TOOLS_LOOM_RUN_COMPILED_H
