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

LogicalResult DropoutOp::verify() {
  return verifyDropoutRate(*this, "rate", getRate().convertToDouble());
}

OpShardingRule DropoutOp::getShardingRule() {
  return getAlignedRule(*this, getType().getShape());
}

LogicalResult DropoutGradOp::verify() {
  return verifyDropoutRate(*this, "rate", getRate().convertToDouble());
}

OpShardingRule DropoutGradOp::getShardingRule() {
  return getAlignedRule(*this, getType().getShape());
}

} // namespace loom
