//===- NormOps.cpp - Layer/RMS normalization and softmax ------------------===//
//
// All of them reduce over the last dimension, which therefore stays whole;
// the leading dimensions are split freely (and leave partial sums in the
// gradients of gamma and beta).
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
  if (getType().getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  return success();
}

OpShardingRule SoftmaxOp::getShardingRule() {
  return getRowwiseRule(*this, getType());
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
