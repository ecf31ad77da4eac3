//===- Tensor.h - The values of the reference interpreter -------*- C++ -*-===//
//
// The interpreter holds every tensor densely in row-major order: floating-
// point elements as double, integer elements as int64_t, together with the
// MLIR element type they stand for (f32, bf16, f16, i32, i64). Keeping one
// wide representation keeps the kernels simple; the declared width is
// applied by rounding (roundToElementType) where the precision mode asks
// for it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INTERPRETER_TENSOR_H
#define LOOM_INTERPRETER_TENSOR_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <vector>

namespace loom::interp {

/// A dense row-major tensor with value semantics.
class Tensor {
public:
  /// An empty f32 scalar placeholder; holds no element.
  Tensor() = default;

  /// A floating-point tensor; `values` has one element per entry of
  /// `shape` (one for a 0-d tensor). A null `elementType` stands for f32.
  static Tensor floats(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                       std::vector<double> values);
  /// An integer tensor; a null `elementType` stands for i64.
  static Tensor ints(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                     std::vector<int64_t> values);

  llvm::ArrayRef<int64_t> shape() const { return dims; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numElements() const;
  bool isFloat() const { return floating; }
  /// The element type; null when the tensor was created without one.
  mlir::Type elementType() const { return type; }
  void setElementType(mlir::Type elementType) { type = elementType; }

  /// The elements of a floating-point tensor.
  std::vector<double> &f() { return floatData; }
  const std::vector<double> &f() const { return floatData; }
  /// The elements of an integer tensor.
  std::vector<int64_t> &i() { return intData; }
  const std::vector<int64_t> &i() const { return intData; }

  /// The number of elements actually held (numElements() when well formed).
  size_t size() const { return floating ? floatData.size() : intData.size(); }

private:
  mlir::Type type;
  llvm::SmallVector<int64_t, 4> dims;
  bool floating = true;
  std::vector<double> floatData;
  std::vector<int64_t> intData;
};

/// Rounds `value` to the nearest number of `elementType` (f32, bf16 or f16;
/// ties to even, overflow to infinity, gradual underflow), as a conversion
/// of the exact value would. Returns `value` unchanged for other types.
double roundToElementType(double value, mlir::Type elementType);

} // namespace loom::interp

#endif // LOOM_INTERPRETER_TENSOR_H
