//===- Tensor.cpp - The values of the reference interpreter ---------------===//

#include "loom/Interpreter/Tensor.h"

#include "Kernels.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace loom::interp {

Tensor Tensor::floats(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                      std::vector<double> values) {
  Tensor t;
  t.type = elementType;
  t.dims.assign(shape.begin(), shape.end());
  t.floating = true;
  t.floatData = std::move(values);
  assert(static_cast<int64_t>(t.floatData.size()) == numElementsOf(shape) &&
         "one value per element");
  return t;
}

Tensor Tensor::ints(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                    std::vector<int64_t> values) {
  Tensor t;
  t.type = elementType;
  t.dims.assign(shape.begin(), shape.end());
  t.floating = false;
  t.intData = std::move(values);
  assert(static_cast<int64_t>(t.intData.size()) == numElementsOf(shape) &&
         "one value per element");
  return t;
}

int64_t Tensor::numElements() const { return numElementsOf(dims); }

int64_t numElementsOf(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

llvm::SmallVector<int64_t, 4> stridesOf(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 4> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Rounds to a binary format with `precision` significand bits (the implicit
/// one included) whose smallest normal number is 0.5 * 2^minExponent (the
/// exponent convention of frexp). Scaling by powers of two is exact, so the
/// only rounding is nearbyint's, to nearest even in the default mode; below
/// the normal range the exponent is clamped, which keeps the absolute
/// spacing of subnormals.
static double roundToFormat(double value, int precision, int minExponent,
                            double maxFinite) {
  if (!std::isfinite(value) || value == 0.0)
    return value;
  int exponent;
  std::frexp(value, &exponent);
  exponent = std::max(exponent, minExponent);
  double rounded =
      std::ldexp(std::nearbyint(std::ldexp(value, precision - exponent)),
                 exponent - precision);
  if (std::fabs(rounded) > maxFinite)
    return std::copysign(INFINITY, value);
  return rounded;
}

double roundToElementType(double value, mlir::Type elementType) {
  if (!elementType)
    return value;
  if (elementType.isF32())
    return static_cast<double>(static_cast<float>(value));
  // bf16: 8 significand bits, f32's exponent range, largest 0x7F7F.
  if (elementType.isBF16())
    return roundToFormat(value, 8, -125, std::ldexp(255.0, 120));
  // f16: 11 significand bits, smallest normal 2^-14, largest 65504.
  if (elementType.isF16())
    return roundToFormat(value, 11, -13, 65504.0);
  return value;
}

} // namespace loom::interp
