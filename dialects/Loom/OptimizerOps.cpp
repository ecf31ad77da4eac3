//===- OptimizerOps.cpp - Fused AdamW and SGD updates ---------------------===//
//
// Updates are elementwise over the parameter, so every dimension may be
// split (ZeRO shards optimizer state this way).
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

using namespace mlir;

namespace loom {

/// Master weights are f32 and the gradient has the parameter's shape.
static LogicalResult verifyParamAndGrad(Operation *op, RankedTensorType param,
                                        RankedTensorType grad) {
  if (!param.getElementType().isF32())
    return op->emitOpError() << "param must be f32 (master weights), got "
                             << param.getElementType();
  if (param.getShape() != grad.getShape())
    return op->emitOpError() << "grad type " << grad
                             << " does not have the shape of param " << param;
  return success();
}

static LogicalResult verifyInRange(Operation *op, StringRef name, APFloat value,
                                   double low, bool lowOpen, double high) {
  double v = value.convertToDouble();
  if (!(lowOpen ? v > low : v >= low) || !(v < high))
    return op->emitOpError()
           << name << " = " << formatNumber(v) << " is not in "
           << (lowOpen ? "(" : "[") << formatNumber(low) << ", "
           << formatNumber(high) << ")";
  return success();
}

LogicalResult AdamWUpdateOp::verify() {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (failed(verifyParamAndGrad(*this, getParam().getType(),
                                getGrad().getType())) ||
      failed(verifyInRange(*this, "lr", getLr(), 0, false, inf)) ||
      failed(verifyInRange(*this, "beta1", getBeta1(), 0, false, 1)) ||
      failed(verifyInRange(*this, "beta2", getBeta2(), 0, false, 1)) ||
      failed(verifyInRange(*this, "eps", getEps(), 0, true, inf)) ||
      failed(verifyInRange(*this, "weight_decay", getWeightDecay(), 0, false,
                           inf)))
    return failure();
  return success();
}

OpShardingRule AdamWUpdateOp::getShardingRule() {
  return getAlignedRule(*this, getParam().getType().getShape());
}

LogicalResult SGDUpdateOp::verify() {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (failed(verifyParamAndGrad(*this, getParam().getType(),
                                getGrad().getType())) ||
      failed(verifyInRange(*this, "lr", getLr(), 0, false, inf)) ||
      failed(verifyInRange(*this, "weight_decay", getWeightDecay(), 0, false,
                           inf)))
    return failure();
  return success();
}

OpShardingRule SGDUpdateOp::getShardingRule() {
  return getAlignedRule(*this, getParam().getType().getShape());
}

} // namespace loom
