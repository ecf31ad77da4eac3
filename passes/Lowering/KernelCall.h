//===- KernelCall.h - How an op calls its kernel ----------------*- C++ -*-===//
//
// `--loom-lower-cpu` / `--loom-lower-cuda` turn every op into one call of a
// kernel of the CPU or CUDA kernel library (runtime/include/loom/
// loom_cpu_kernels.h, loom_cuda_kernels.h): the kernel's symbol and a
// constant `meta` array describing the operands, results and attributes,
// the same for both libraries. This file is that encoding, kept apart from
// the pass so that the kernel conformance tests call kernels exactly as
// compiled code does.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_LOWERING_KERNELCALL_H
#define LOOM_PASSES_LOWERING_KERNELCALL_H

#include "passes/Lowering/Target.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace loom::lowering {

/// The communicator groups of a program: each is a list of grid axes, and a
/// collective names its group by index (loom_program.h).
class GroupTable {
public:
  /// The index of the group of `axes`, added if new.
  int64_t indexOf(llvm::ArrayRef<int16_t> axes);
  const std::vector<llvm::SmallVector<int16_t>> &groups() const { return list; }

private:
  std::vector<llvm::SmallVector<int16_t>> list;
};

/// One kernel call: `symbol(frame, buffers, meta)`.
struct KernelCall {
  std::string symbol;
  llvm::SmallVector<int64_t> meta;
};

/// The loom_dtype code of an element type (f32, f64, i32, i64, bf16), or -1.
int64_t dtypeCode(mlir::Type elementType);

/// The kernel call of `op` (a `loom` op or a `shard` collective); emits an
/// error at `op` and fails for an op, element type or attribute the
/// target's kernels do not support.
mlir::FailureOr<KernelCall>
encodeKernelCall(mlir::Operation *op, GroupTable &groups,
                 const Target &target = cpuTarget());

/// The call of the `copy` kernel (or another with copy's meta, `upload`)
/// from a tensor of `type` to another.
KernelCall copyCall(mlir::Type type, const Target &target = cpuTarget(),
                    llvm::StringRef kernel = "copy");

} // namespace loom::lowering

#endif // LOOM_PASSES_LOWERING_KERNELCALL_H
