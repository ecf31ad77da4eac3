//===- LayoutOps.cpp - Reshape, transpose, broadcast, slice, pad, concat --===//
//
// Layout ops move elements without arithmetic. Their sharding rules say
// which splits survive the move: a transposed or broadcast dimension keeps
// its factor, a reshaped one is factored (Shardy's compound factors), a
// sliced, padded or concatenated one stays whole.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

using namespace mlir;

namespace loom {

static LogicalResult verifySameElementType(Operation *op, RankedTensorType x,
                                           RankedTensorType result) {
  if (x.getElementType() != result.getElementType())
    return op->emitOpError()
           << "result element type " << result.getElementType()
           << " differs from " << x.getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// reshape
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (failed(verifySameElementType(*this, getX().getType(), getType())))
    return failure();
  if (getX().getType().getNumElements() != getType().getNumElements())
    return emitOpError() << "reshapes " << getX().getType().getNumElements()
                         << " elements into " << getType().getNumElements();
  return success();
}

namespace {
/// Walks the dimensions of one side of a reshape, skipping size-1 ones and
/// tracking how much of the current dimension is not yet mapped.
struct DimCursor {
  ArrayRef<int64_t> shape;
  size_t dim = 0;
  int64_t left = 1;

  explicit DimCursor(ArrayRef<int64_t> shape) : shape(shape) { skipOnes(); }
  bool done() const { return dim >= shape.size(); }
  void skipOnes() {
    while (dim < shape.size() && shape[dim] == 1)
      ++dim;
    left = done() ? 1 : shape[dim];
  }
  /// Consumes `size` of the current dimension, moving on once it is used up.
  void consume(int64_t size) {
    left /= size;
    if (left == 1) {
      ++dim;
      skipOnes();
    }
  }
};
} // namespace

/// Factors the two shapes into their common refinement: while one side's
/// remaining extent divides the other's, they share a factor of that size
/// (major first). Runs where neither divides the other (6x4 -> 4x6) cannot be
/// split consistently and get whole factors on each side.
OpShardingRule ReshapeOp::getShardingRule() {
  OpShardingRule rule;
  ArrayRef<int64_t> inShape = getX().getType().getShape();
  ArrayRef<int64_t> outShape = getType().getShape();
  TensorMapping in(inShape.size()), out(outShape.size());
  DimCursor a(inShape), b(outShape);
  while (!a.done() && !b.done()) {
    if (a.left % b.left == 0 || b.left % a.left == 0) {
      int64_t size = std::min(a.left, b.left);
      int64_t factor = rule.addFactor(size);
      in[a.dim].push_back(factor);
      out[b.dim].push_back(factor);
      a.consume(size);
      b.consume(size);
      continue;
    }
    int64_t inExtent = a.left, outExtent = b.left;
    in[a.dim].push_back(rule.addFactor(a.left, /*whole=*/true));
    out[b.dim].push_back(rule.addFactor(b.left, /*whole=*/true));
    a.consume(a.left);
    b.consume(b.left);
    while (inExtent != outExtent) {
      DimCursor &side = inExtent < outExtent ? a : b;
      TensorMapping &mapping = inExtent < outExtent ? in : out;
      (inExtent < outExtent ? inExtent : outExtent) *= side.left;
      mapping[side.dim].push_back(rule.addFactor(side.left, /*whole=*/true));
      side.consume(side.left);
    }
  }
  rule.addOperand(in);
  rule.addResult(out);
  return rule;
}

//===----------------------------------------------------------------------===//
// transpose, broadcast
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::verify() {
  return verifyInferredTypes(
      *this, inferTransposeType(getX().getType(), getPermutation(),
                                [&] { return emitOpError(); }));
}

OpShardingRule TransposeOp::getShardingRule() {
  OpShardingRule rule;
  ArrayRef<int64_t> shape = getX().getType().getShape();
  SmallVector<int64_t> factors = rule.addFactors(shape);
  rule.addOperand(OpShardingRule::alignLeft(shape, factors));
  TensorMapping result;
  for (int64_t p : getPermutation())
    result.push_back({factors[p]});
  rule.addResult(result);
  return rule;
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType x = getX().getType(), result = getType();
  if (failed(verifySameElementType(*this, x, result)))
    return failure();
  if (x.getRank() > result.getRank())
    return emitOpError() << "cannot broadcast rank " << x.getRank()
                         << " to rank " << result.getRank();
  int64_t shift = result.getRank() - x.getRank();
  for (int64_t d = 0; d < x.getRank(); ++d)
    if (x.getDimSize(d) != 1 && x.getDimSize(d) != result.getDimSize(shift + d))
      return emitOpError() << "operand dimension " << d << " of size "
                           << x.getDimSize(d) << " cannot broadcast to "
                           << result.getDimSize(shift + d);
  return success();
}

OpShardingRule BroadcastOp::getShardingRule() {
  return getAlignedRule(*this, getType().getShape());
}

//===----------------------------------------------------------------------===//
// slice, pad
//===----------------------------------------------------------------------===//

/// Checks that `small` fits in `large` at `offsets` (slice: the result in
/// the operand; pad: the operand in the result).
static LogicalResult verifyBox(Operation *op, RankedTensorType small,
                               RankedTensorType large,
                               ArrayRef<int64_t> offsets, StringRef what) {
  if (small.getRank() != large.getRank())
    return op->emitOpError()
           << "operand and result ranks differ: " << op->getOperand(0).getType()
           << " and " << op->getResult(0).getType();
  if (failed(verifySameElementType(
          op, cast<RankedTensorType>(op->getOperand(0).getType()),
          cast<RankedTensorType>(op->getResult(0).getType()))))
    return failure();
  if (static_cast<int64_t>(offsets.size()) != small.getRank())
    return op->emitOpError() << what << " has " << offsets.size()
                             << " entries for rank " << small.getRank();
  for (int64_t d = 0; d < small.getRank(); ++d)
    if (offsets[d] < 0 ||
        offsets[d] > large.getDimSize(d) - small.getDimSize(d))
      return op->emitOpError()
             << "dimension " << d << ": " << small.getDimSize(d)
             << " elements at " << what << " " << offsets[d]
             << " do not fit in " << large.getDimSize(d);
  return success();
}

/// Dimensions of equal extent share a factor; the others stay whole.
static OpShardingRule getBoxRule(RankedTensorType x, RankedTensorType result) {
  OpShardingRule rule;
  SmallVector<int64_t> factors = rule.addFactors(x.getShape());
  TensorMapping in = OpShardingRule::alignLeft(x.getShape(), factors), out;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    if (x.getDimSize(d) == result.getDimSize(d)) {
      out.push_back({factors[d]});
      continue;
    }
    rule.setWhole(factors[d]);
    out.push_back({rule.addFactor(result.getDimSize(d), /*whole=*/true)});
  }
  rule.addOperand(in);
  rule.addResult(out);
  return rule;
}

LogicalResult SliceOp::verify() {
  return verifyBox(*this, getType(), getX().getType(), getOffsets(), "offsets");
}

OpShardingRule SliceOp::getShardingRule() {
  return getBoxRule(getX().getType(), getType());
}

LogicalResult PadOp::verify() {
  return verifyBox(*this, getX().getType(), getType(), getLow(), "low");
}

OpShardingRule PadOp::getShardingRule() {
  return getBoxRule(getX().getType(), getType());
}

//===----------------------------------------------------------------------===//
// concat
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::verify() {
  return verifyInferredTypes(*this,
                             inferConcatType(getInputs().getTypes(), getAxis(),
                                             [&] { return emitOpError(); }));
}

OpShardingRule ConcatOp::getShardingRule() {
  OpShardingRule rule;
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t axis = getAxis();
  SmallVector<int64_t> factors = rule.addFactors(shape);
  rule.setWhole(factors[axis]);
  for (Value input : getInputs()) {
    TensorMapping mapping = OpShardingRule::alignLeft(shape, factors);
    int64_t extent = cast<RankedTensorType>(input.getType()).getDimSize(axis);
    mapping[axis] = {rule.addFactor(extent, /*whole=*/true)};
    rule.addOperand(mapping);
  }
  rule.addResult(OpShardingRule::alignLeft(shape, factors));
  return rule;
}

//===----------------------------------------------------------------------===//
// reduce_max_grad
//===----------------------------------------------------------------------===//

LogicalResult ReduceMaxGradOp::verify() {
  FailureOr<RankedTensorType> reduced =
      inferReduceType(getX().getType(), getDims(), getKeepDims(),
                      [&] { return emitOpError(); });
  if (failed(reduced))
    return failure();
  if (*reduced != getDy().getType())
    return emitOpError() << "dy has type " << getDy().getType()
                         << ", the reduction of x gives " << *reduced;
  return success();
}

/// Like the forward reduction's rule, except that the reduced factors are
/// whole: each group's maximum is recomputed from all of it.
OpShardingRule ReduceMaxGradOp::getShardingRule() {
  OpShardingRule rule;
  ArrayRef<int64_t> shape = getX().getType().getShape();
  SmallVector<int64_t> factors = rule.addFactors(shape);
  TensorMapping dy;
  for (auto [dim, factor] : llvm::enumerate(factors)) {
    if (!llvm::is_contained(getDims(), static_cast<int64_t>(dim))) {
      dy.push_back({factor});
      continue;
    }
    rule.setWhole(factor);
    if (getKeepDims())
      dy.push_back({}); // a size-1 dimension
  }
  rule.addOperand(dy);
  rule.addOperand(OpShardingRule::alignLeft(shape, factors));
  rule.addResult(OpShardingRule::alignLeft(shape, factors));
  return rule;
}

} // namespace loom
