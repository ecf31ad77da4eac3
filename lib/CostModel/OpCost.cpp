//===- OpCost.cpp - Roofline time of loom ops -----------------------------===//
//
// What an op computes and moves is its own to say (OpCostInterface,
// dialects/Loom/OpCost.cpp); this file adds the device: the arithmetic's
// precision, and the time by a roofline with per-class efficiencies.
//
// Sources:
//  [W09] S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful
//        visual performance model for multicore architectures", CACM 52(4),
//        2009: time = max(FLOPs / compute rate, bytes / bandwidth).
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/OpCost.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

using namespace mlir;

namespace loom::cost {
namespace {

MathMode mathModeOf(Type type) {
  if (!type)
    return MathMode::FP32;
  auto tensor = dyn_cast<ShapedType>(type);
  Type element = tensor ? tensor.getElementType() : type;
  if (element.isBF16())
    return MathMode::BF16;
  if (element.isF16())
    return MathMode::FP16;
  // Loom's f32 matrix products are IEEE fp32 (no TF32 rounding).
  return MathMode::FP32;
}

} // namespace

OpWork getOpWork(Operation *op, const OpShapes &shapes) {
  OpWork work;
  auto costed = dyn_cast<OpCostInterface>(op);
  if (!costed) {
    // Another dialect's op (a return, a constant) or loom.yield: no kernel.
    work.mathMode = op->getNumOperands()
                        ? mathModeOf(op->getOperand(0).getType())
                        : MathMode::FP32;
    return work;
  }
  work.mathMode = mathModeOf(costed.getComputeType());
  work.opClass = costed.getCostClass();
  if (work.opClass == OpClass::Free)
    return work;
  work.flops = costed.getFlops(shapes);
  work.modelFlops = costed.getModelFlops(shapes);
  work.bytes = costed.getBytes(shapes);
  return work;
}

double opTime(const OpWork &work, const DeviceSpec &device) {
  if (work.opClass == OpClass::Free)
    return 0;
  double memory =
      work.bytes / (device.memoryEfficiency * device.memoryBandwidth);
  double compute;
  if (work.opClass == OpClass::Gemm)
    // Matrix units at the size-dependent efficiency (ClusterSpec.h).
    compute = (work.flops + device.gemmHalfWork) /
              (device.gemmEfficiency * device.peakFlops(work.mathMode));
  else if (work.opClass == OpClass::Attention)
    // Fused attention at its own kernels' rate, on the work they do.
    compute = work.flops / (device.attentionEfficiencyOrGemm() *
                            device.peakFlops(work.mathMode));
  else
    // Vector units: elementwise arithmetic runs at the FP32 rate.
    compute = work.flops / device.peakFlops(MathMode::FP32);
  return device.launchOverhead + std::max(compute, memory); // [W09]
}

} // namespace loom::cost
