//===- Kernels.h - The per-op kernels of the interpreter --------*- C++ -*-===//
//
// Each op group registers one kernel per op in a KernelTable; the files
// follow the dialect's (Elementwise, Layout, Linear, Norm, Attention,
// Optimizer), with each fused op's gradient next to the op. A kernel reads
// its operands and attributes and computes the op's results in double, with
// the result types' shapes and element types; the driver (Interpreter.cpp)
// checks the shapes and applies the precision mode.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_INTERPRETER_KERNELS_H
#define LOOM_LIB_INTERPRETER_KERNELS_H

#include "loom/Interpreter/Tensor.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <type_traits>

namespace loom::interp {

/// The operands of the op being run, in operand order.
using Operands = llvm::ArrayRef<const Tensor *>;
/// The results of one op, in result order.
using Results = llvm::SmallVector<Tensor, 3>;
using Kernel =
    std::function<llvm::Expected<Results>(mlir::Operation *, Operands)>;

/// The kernels by op, keyed by the op's TypeID.
class KernelTable {
public:
  /// Registers `fn(OpTy, Operands)`, which returns the single result as a
  /// Tensor, or all results as Results or llvm::Expected<Results>.
  template <typename OpTy, typename Fn> void add(Fn fn) {
    kernels[mlir::TypeID::get<OpTy>()] =
        [fn](mlir::Operation *op, Operands in) -> llvm::Expected<Results> {
      auto result = fn(mlir::cast<OpTy>(op), in);
      if constexpr (std::is_same_v<decltype(result), Tensor>)
        return Results{std::move(result)};
      else
        return std::move(result);
    };
  }

  /// The kernel of `op`, or null when none is registered.
  const Kernel *lookup(mlir::Operation *op) const;

private:
  llvm::DenseMap<mlir::TypeID, Kernel> kernels;
};

void addElementwiseKernels(KernelTable &table);
void addLayoutKernels(KernelTable &table);
void addLinearKernels(KernelTable &table);
void addNormKernels(KernelTable &table);
void addAttentionKernels(KernelTable &table);
void addOptimizerKernels(KernelTable &table);

/// An error about `op`: "<location>: 'op.name' <message>".
llvm::Error opError(mlir::Operation *op, const llvm::Twine &message);

/// The shape of a value of ranked tensor type.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);
/// "2x3", or "scalar" for a 0-d shape (for messages).
std::string shapeString(llvm::ArrayRef<int64_t> shape);
/// The element type of a value of ranked tensor type.
mlir::Type elementTypeOf(mlir::Value value);

/// A float tensor with the type (shape and element type) of `value`, filled
/// with `values`.
Tensor floatsLike(mlir::Value value, std::vector<double> values);

/// The value of a 0-d integer tensor (the optimizer and dropout step).
inline int64_t scalarInt(const Tensor &t) { return t.i().front(); }

/// The number of elements of a tensor of `shape` (1 for a 0-d tensor).
int64_t numElementsOf(llvm::ArrayRef<int64_t> shape);

/// Row-major strides of `shape`, in elements.
llvm::SmallVector<int64_t, 4> stridesOf(llvm::ArrayRef<int64_t> shape);

/// For each element of a tensor of `shape` in row-major order, the offset
/// `base + sum_d index[d] * strides[d]`: the source offsets of a strided
/// view (transpose, broadcast, slice) or the target offsets of a placement
/// (pad).
std::vector<int64_t> stridedOffsets(llvm::ArrayRef<int64_t> shape,
                                    llvm::ArrayRef<int64_t> strides,
                                    int64_t base = 0);

/// The elements of `x` broadcast to `shape` (numpy rules: aligned at the
/// last dimension, size-1 dimensions stretch).
std::vector<double> broadcastTo(const Tensor &x, llvm::ArrayRef<int64_t> shape);

} // namespace loom::interp

#endif // LOOM_LIB_INTERPRETER_KERNELS_H
