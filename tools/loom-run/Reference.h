//===- Reference.h - loom-run on the reference interpreter ------*- C++ -*-===//
//
// The reference backend: a whole @train_step, or a step cut into pipeline
// stages, trained in the reference interpreter in one process.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_REFERENCE_H
#define LOOM_TOOLS_LOOM_RUN_REFERENCE_H

#include "loom/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <string>

namespace loom::run {

struct ReferenceOptions {
  std::string modulePath, initPath, dataPath;
  std::string savePath, logPath; ///< "" when not asked for
  int64_t steps = 1;
  interp::Precision precision = interp::Precision::F32;
  /// Train on after a NaN or infinite loss instead of stopping there.
  bool allowNonFiniteLoss = false;
};

/// Prints "loom-run: error: <message>"; returns 1, the exit status.
int fail(const llvm::Twine &message);

/// Trains the whole step `fn` (@train_step); returns the exit status.
int runWholeStep(mlir::func::FuncOp fn, const ReferenceOptions &options);

/// Trains `module`, cut into pipeline stages (--loom-split-stages): the
/// pipeline interpreter runs every pipeline rank's instruction stream,
/// every stage on its grid's devices. Returns the exit status.
int runPipelined(mlir::ModuleOp module, const ReferenceOptions &options);

} // namespace loom::run

#endif // LOOM_TOOLS_LOOM_RUN_REFERENCE_H
