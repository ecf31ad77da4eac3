//===- Interpreter.h - The reference interpreter of loom IR -----*- C++ -*-===//
//
// Executes a `func.func` of loom ops on the CPU, one op at a time, with
// kernels written for clarity. It is the first link of Loom's chain of
// numerical trust: finite-difference gradient checks run through it in
// float64, and every compiled backend is compared against it.
//
// Besides the loom ops it runs `func.return`, `func.call` of a function in
// the same module and `arith.constant` with dense (or splat) float or
// integer tensor elements (or an `index` scalar). Anything else is an error
// naming the op and its location; the interpreter never aborts on bad input.
// The shard ops of a partitioned program run in the multi-rank interpreter
// (MultiRank.h), which shares this one's run loop and kernels.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INTERPRETER_INTERPRETER_H
#define LOOM_INTERPRETER_INTERPRETER_H

#include "loom/Interpreter/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace loom::interp {

enum class Precision {
  /// Every op computes in double and its result is rounded to its declared
  /// element type (f32 -> float, bf16 and f16 to nearest even), as a device
  /// that stores each result in its type would. Arguments are rounded the
  /// same way on entry. Reductions accumulate in double.
  F32,
  /// Everything stays in double whatever the declared float width: the mode
  /// for finite-difference gradient checks of f32-typed IR.
  F64,
};

/// Runs `fn` on `args`, one per function argument with the argument's shape
/// and kind (float or integer; the element type too when the tensor has
/// one), and returns one tensor per function result, each carrying its
/// declared element type. Mismatched arguments, unsupported ops and run-time
/// errors (an embedding id out of range, ...) give an error that names the
/// argument, or the op and its location.
llvm::Expected<std::vector<Tensor>>
run(mlir::func::FuncOp fn, llvm::ArrayRef<Tensor> args, Precision precision);

} // namespace loom::interp

#endif // LOOM_INTERPRETER_INTERPRETER_H
