//===- Target.h - The kernel libraries compiled code can call ---*- C++ -*-===//
//
// `--loom-lower-cpu` and `--loom-lower-cuda` are one lowering (every op
// one kernel call, buffers from a static memory plan) aimed at two kernel
// libraries with the same buffers and meta: loom_cpu_kernels.h and
// loom_cuda_kernels.h. A Target is what differs between them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_LOWERING_TARGET_H
#define LOOM_PASSES_LOWERING_TARGET_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace loom::lowering {

/// A kernel library and how compiled code calls it.
struct Target {
  /// "cpu" or "cuda": the module's `loom.backend` and plan.json's "backend",
  /// so that a runtime refuses an artifact built for another.
  llvm::StringRef backend;
  /// The pass's flag and the library's name, for diagnostics.
  llvm::StringRef flag, library;
  /// Kernel symbols are `<prefix><op>`.
  llvm::StringRef kernelPrefix;
  /// `loom_fn_<f>(frame, context)` passes its context to every kernel
  /// (loom_cuda_context); without one, `loom_fn_<f>(frame)`.
  bool passesContext;
  /// The buffers are device memory: constants, which the compiled code
  /// holds in host memory, are uploaded (`<prefix>upload`) before use.
  bool deviceBuffers;
  /// Workspace offsets are multiples of this (a power of two).
  int64_t workspaceAlignment;
  /// Every kernel takes bf16 tensors (bf16 storage, f32 arithmetic);
  /// without, bf16 only moves through the collectives. The other element
  /// types with a loom_dtype (f32, i32, i64; f64, which only the
  /// collectives and constants can have) are the same for both libraries.
  bool bf16Arithmetic;
};

/// loom_cpu_kernels.h: f32 arithmetic.
const Target &cpuTarget();

/// loom_cuda_kernels.h: f32 or bf16 storage, f32 arithmetic.
const Target &cudaTarget();

} // namespace loom::lowering

#endif // LOOM_PASSES_LOWERING_TARGET_H
