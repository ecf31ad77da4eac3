//===- Driver.h - The run loop shared by the interpreters -------*- C++ -*-===//
//
// The single-rank interpreter (Interpreter.h) and the multi-rank one
// (MultiRank.h) walk a function the same way: check the arguments, run the
// ops of its single block in order, round each result to its declared type.
// They differ only in who runs the shard ops, which the multi-rank
// interpreter supplies through an OpHook, one per rank.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_INTERPRETER_DRIVER_H
#define LOOM_LIB_INTERPRETER_DRIVER_H

#include "Kernels.h"

#include "loom/Interpreter/Interpreter.h"

namespace loom::interp {

/// Ops that the caller of the driver runs itself, consulted before the
/// kernel table (the multi-rank interpreter's shard ops).
class OpHook {
public:
  virtual ~OpHook() = default;
  /// Whether `op` is run by this hook rather than by a kernel.
  virtual bool handles(mlir::Operation *op) const = 0;
  /// Runs `op`, one result per op result (a 0-d integer tensor of element
  /// type index for an `index` result).
  virtual llvm::Expected<Results> run(mlir::Operation *op,
                                      Operands operands) = 0;
};

struct DriverOptions {
  Precision precision = Precision::F64;
  /// Runs the ops it handles; null for none.
  OpHook *hook = nullptr;
  /// Verify each function before it runs; the multi-rank interpreter
  /// verifies the module once before its threads start instead.
  bool verify = true;
};

/// Runs `fn` on `args` (see interp::run) with `options`.
llvm::Expected<std::vector<Tensor>> runFunction(mlir::func::FuncOp fn,
                                                llvm::ArrayRef<Tensor> args,
                                                const DriverOptions &options);

/// Verifies `op`; the error lists the diagnostics with their locations.
llvm::Error verifyForInterpreter(mlir::Operation *op);

} // namespace loom::interp

#endif // LOOM_LIB_INTERPRETER_DRIVER_H
