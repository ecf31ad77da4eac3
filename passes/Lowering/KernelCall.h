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

#include "KernelAttrs.h"

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

/// The last meta value of all_reduce, reduce_scatter and all_gather: the
/// slot of a split collective (loom_comm's *_start / wait), or this for
/// one that communicates and waits in its own call.
constexpr int64_t kBlockingSlot = -1;

/// The opcode of `op` as an instruction of a fused_elementwise program
/// (loom_fused_opcode: the LOOM_FUSIBLE_KERNEL row of the op's kernel in
/// loom/loom_kernels.def), or -1 when its kernel is not fusible.
int64_t fusedOpcode(mlir::Operation *op);

/// Whether collective `op` may be split into a start and a wait: an
/// all_reduce, or a reduce_scatter / all_gather whose operand already holds
/// contiguous member blocks of the result's element type (no dimension
/// before the moved one is larger than 1), so that the transfer works on
/// the kernel's own buffers and nothing is left to unpack at the wait.
bool splittable(mlir::Operation *op);

/// Makes the collective `call` (encodeKernelCall of a splittable op) start
/// its transfer under `slot` and return.
void setSlot(KernelCall &call, int64_t slot);

/// The call of `collective_wait` for the transfer started under `slot`.
/// `tensors` are the types of the buffers the transfer uses (listed so
/// that the memory plan keeps them until the wait); the kernel reads none.
KernelCall waitCall(mlir::TypeRange tensors, int64_t slot,
                    const Target &target = cpuTarget());

/// The call of the `copy` kernel (or another with copy's meta, `upload`)
/// from a tensor of `type` to another.
KernelCall copyCall(mlir::Type type, const Target &target = cpuTarget(),
                    kernels::Kernel kernel = kernels::Kernel::copy);

} // namespace loom::lowering

#endif // LOOM_PASSES_LOWERING_KERNELCALL_H
