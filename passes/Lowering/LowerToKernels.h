//===- LowerToKernels.h - Per-device programs to kernel calls ---*- C++ -*-===//
//
// The lowering --loom-lower-cpu and --loom-lower-cuda share, parameterized
// by the kernel library it targets (Target.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_LOWERING_LOWERTOKERNELS_H
#define LOOM_PASSES_LOWERING_LOWERTOKERNELS_H

#include "passes/Lowering/Target.h"

#include "mlir/IR/BuiltinOps.h"

namespace loom::lowering {

/// Lowers the functions the runtime calls (the stage functions, else
/// @train_step) to `loom_fn_<name>` calling `target`'s kernels, and removes
/// the other functions; emits a diagnostic and fails on what the target
/// cannot run. A collective marked `loom.overlap`
/// (--loom-overlap-collectives) becomes a start where it stands and a
/// `collective_wait` just before the first call that reads its result, so
/// that the calls between overlap the transfer; every other collective
/// waits in its own call.
mlir::LogicalResult lowerToKernels(mlir::ModuleOp module, const Target &target);

/// The version of loom_program.h's contract the lowered code follows
/// (LOOM_PROGRAM_ABI_VERSION): plan.json and program.so both state it.
int programAbiVersion();

} // namespace loom::lowering

#endif // LOOM_PASSES_LOWERING_LOWERTOKERNELS_H
