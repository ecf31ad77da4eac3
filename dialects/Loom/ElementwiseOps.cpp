//===- ElementwiseOps.cpp - Casts and dropout -----------------------------===//
//
// Binary, unary and activation ops get their verifier and sharding rule from
// their ODS class; this file holds the pointwise ops with something of
// their own to check.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

using namespace mlir;

namespace loom {

LogicalResult CastOp::verify() {
  if (getX().getType().getShape() != getType().getShape())
    return emitOpError() << "result type " << getType()
                         << " changes the shape of " << getX().getType();
  return success();
}

OpShardingRule CastOp::getShardingRule() {
  return getAlignedRule(*this, getType().getShape());
}

/// Dropout keeps elements with probability 1 - rate, so rate must be a
/// probability below 1.
static LogicalResult verifyDropoutRate(Operation *op, double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    return op->emitOpError()
           << "rate " << formatNumber(rate) << " is not in [0, 1)";
  return success();
}

LogicalResult DropoutOp::verify() {
  return verifyDropoutRate(*this, getRate().convertToDouble());
}

OpShardingRule DropoutOp::getShardingRule() {
  return getAlignedRule(*this, getType().getShape());
}

LogicalResult DropoutGradOp::verify() {
  return verifyDropoutRate(*this, getRate().convertToDouble());
}

OpShardingRule DropoutGradOp::getShardingRule() {
  return getAlignedRule(*this, getType().getShape());
}

} // namespace loom
