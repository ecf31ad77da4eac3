//===- NormOps.cpp - Layer/RMS normalization and softmax ------------------===//
//
// All of them reduce over the last dimension, which therefore stays whole;
// the leading dimensions are split freely (and leave partial sums in the
// gradients of gamma and beta). A causal softmax keeps its row axis whole
// too.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

using namespace mlir;

namespace loom {

static LogicalResult verifyEpsilon(Operation *op, APFloat epsilon) {
  double value = epsilon.convertToDouble();
  if (!(value >= 0.0))
    return op->emitOpError()
           << "epsilon must be non-negative, got " << formatNumber(value);
  return success();
}

/// gamma is [D] with x's element type (beta has gamma's type through
/// AllTypesMatch, so checking gamma covers it), and epsilon is >= 0.
static LogicalResult verifyNorm(Operation *op, Type x, Type gamma,
                                APFloat epsilon) {
  if (failed(verifyNormParam(x, gamma, "gamma",
                             [&] { return op->emitOpError(); })))
    return failure();
  return verifyEpsilon(op, epsilon);
}

/// The rule of every op here: aligned with the input, last dimension whole.
static OpShardingRule getRowwiseRule(Operation *op, Type input) {
  auto shape = cast<RankedTensorType>(input).getShape();
  return getAlignedRule(op, shape, {static_cast<int64_t>(shape.size()) - 1});
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getX().getType(), getGamma().getType(),
                    getEpsilon());
}

OpShardingRule LayerNormOp::getShardingRule() {
  return getRowwiseRule(*this, getX().getType());
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNorm(*this, getX().getType(), getGamma().getType(),
                    getEpsilon());
}

OpShardingRule LayerNormGradOp::getShardingRule() {
  return getRowwiseRule(*this, getX().getType());
}

LogicalResult RMSNormOp::verify() {
  return verifyNorm(*this, getX().getType(), getGamma().getType(),
                    getEpsilon());
}

OpShardingRule RMSNormOp::getShardingRule() {
  return getRowwiseRule(*this, getX().getType());
}

LogicalResult RMSNormGradOp::verify() {
  return verifyNorm(*this, getX().getType(), getGamma().getType(),
                    getEpsilon());
}

OpShardingRule RMSNormGradOp::getShardingRule() {
  return getRowwiseRule(*this, getX().getType());
}

LogicalResult SoftmaxOp::verify() {
  RankedTensorType type = getType();
  if (type.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  if (!getCausal())
    return success();
  if (type.getRank() < 2)
    return emitOpError() << "causal softmax needs rank >= 2";
  int64_t rows = type.getDimSize(type.getRank() - 2);
  int64_t columns = type.getDimSize(type.getRank() - 1);
  if (rows != columns)
    return emitOpError() << "causal softmax needs the last two dimensions "
                            "equal, got "
                         << rows << " and " << columns;
  return success();
}

/// The causal mask compares an element's row with its column, so both stay
/// whole (a split row axis would need its global offset).
OpShardingRule SoftmaxOp::getShardingRule() {
  if (!getCausal())
    return getRowwiseRule(*this, getType());
  int64_t rank = getType().getRank();
  return getAlignedRule(*this, getType().getShape(), {rank - 2, rank - 1});
}

LogicalResult SoftmaxGradOp::verify() {
  if (getType().getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  return success();
}

OpShardingRule SoftmaxGradOp::getShardingRule() {
  return getRowwiseRule(*this, getType());
}

} // namespace loom
