//===- GradientBuilders.cpp - Builders the gradient rules share -----------===//

#include "dialects/Loom/GradientBuilders.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <numeric>

using namespace mlir;

namespace loom {
namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

} // namespace

Value buildSplat(OpBuilder &b, Location loc, RankedTensorType type,
                 double value) {
  Attribute element = b.getFloatAttr(type.getElementType(), value);
  return arith::ConstantOp::create(b, loc,
                                   DenseElementsAttr::get(type, element));
}

Value buildScalar(OpBuilder &b, Location loc, Value like, double value) {
  return buildSplat(
      b, loc, RankedTensorType::get({}, tensorType(like).getElementType()),
      value);
}

Value reduceToType(OpBuilder &b, Location loc, Value grad,
                   RankedTensorType target) {
  ArrayRef<int64_t> from = tensorType(grad).getShape();
  ArrayRef<int64_t> to = target.getShape();
  int64_t extra = from.size() - to.size();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < static_cast<int64_t>(from.size()); ++i)
    if (i < extra || (to[i - extra] == 1 && from[i] != 1))
      dims.push_back(i);
  if (!dims.empty())
    grad = ReduceSumOp::create(b, loc, grad, dims, /*keepDims=*/false);
  if (tensorType(grad).getShape() != to)
    grad = ReshapeOp::create(b, loc, grad, to);
  return grad;
}

Value unreduce(OpBuilder &b, Location loc, Value grad, RankedTensorType input,
               ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept(input.getShape());
  for (int64_t dim : dims)
    kept[dim] = 1;
  if (tensorType(grad).getShape() != ArrayRef<int64_t>(kept))
    grad = ReshapeOp::create(b, loc, grad, kept);
  return BroadcastOp::create(b, loc, grad, input.getShape());
}

Value transposeLast2(OpBuilder &b, Location loc, Value x) {
  int64_t rank = tensorType(x).getRank();
  SmallVector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return TransposeOp::create(b, loc, x, perm);
}

Value flattenRows(OpBuilder &b, Location loc, Value x) {
  ArrayRef<int64_t> shape = tensorType(x).getShape();
  int64_t rows = 1;
  for (int64_t size : shape.drop_back())
    rows *= size;
  return ReshapeOp::create(b, loc, x, {rows, shape.back()});
}

Value ElementwiseBuilder::add(Value lhs, Value rhs) const {
  return AddOp::create(b, loc, lhs, rhs);
}

Value ElementwiseBuilder::sub(Value lhs, Value rhs) const {
  return SubOp::create(b, loc, lhs, rhs);
}

Value ElementwiseBuilder::mul(Value lhs, Value rhs) const {
  return MulOp::create(b, loc, lhs, rhs);
}

Value ElementwiseBuilder::div(Value lhs, Value rhs) const {
  return DivOp::create(b, loc, lhs, rhs);
}

Value ElementwiseBuilder::neg(Value x) const {
  return NegOp::create(b, loc, x);
}

Value ElementwiseBuilder::scalar(Value like, double value) const {
  return buildScalar(b, loc, like, value);
}

} // namespace loom
