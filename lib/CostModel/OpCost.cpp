//===- OpCost.cpp - FLOPs, bytes and roofline time of loom ops ------------===//
//
// Sources:
//  [W09] S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful
//        visual performance model for multicore architectures", CACM 52(4),
//        2009: time = max(FLOPs / compute rate, bytes / bandwidth).
//  [N21] D. Narayanan et al., "Efficient Large-Scale Language Model Training
//        on GPU Clusters Using Megatron-LM", SC'21, Appendix: a GEMM of
//        [m,k]x[k,n] is 2mkn FLOPs; backward is twice the forward; model
//        FLOPs count matrix products only.
//  [D22] T. Dao et al., "FlashAttention", NeurIPS 2022: the fused backward
//        recomputes the scores (one extra QKᵀ product) and reads/writes no
//        s² tensor.
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/OpCost.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;

namespace loom::cost {
namespace {

double product(llvm::ArrayRef<int64_t> shape, size_t begin = 0,
               size_t end = ~size_t(0)) {
  double result = 1;
  for (size_t i = begin; i < std::min(end, shape.size()); ++i)
    result *= double(shape[i]);
  return result;
}

MathMode mathModeOf(Type type) {
  auto tensor = dyn_cast<ShapedType>(type);
  Type element = tensor ? tensor.getElementType() : type;
  if (element.isBF16())
    return MathMode::BF16;
  if (element.isF16())
    return MathMode::FP16;
  // Loom's f32 matrix products are IEEE fp32 (no TF32 rounding).
  return MathMode::FP32;
}

/// Bytes of every operand and result at `shapes`, at the op's element types.
double tensorBytes(Operation *op, const OpShapes &shapes) {
  double bytes = 0;
  for (auto [value, shape] : llvm::zip(op->getOperands(), shapes.operands))
    if (isa<ShapedType>(value.getType()))
      bytes += product(shape) * elementBytes(value.getType());
  for (auto [value, shape] : llvm::zip(op->getResults(), shapes.results))
    if (isa<ShapedType>(value.getType()))
      bytes += product(shape) * elementBytes(value.getType());
  return bytes;
}

/// Arithmetic per output element of bandwidth-bound ops: rough counts of
/// the scalar operations of a straightforward kernel. They only matter on a
/// device whose vector units are slower than its memory, which no GPU is.
double flopsPerElement(Operation *op) {
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case<LayerNormOp, RMSNormOp>([](auto) { return 8.0; })
      .Case<LayerNormGradOp, RMSNormGradOp>([](auto) { return 12.0; })
      .Case<GeluOp, GeluErfOp, SiluOp, SoftmaxOp, CrossEntropyOp>(
          [](auto) { return 8.0; })
      .Case<GeluGradOp, GeluErfGradOp, SiluGradOp, SoftmaxGradOp,
            CrossEntropyGradOp>([](auto) { return 12.0; })
      .Case<RopeOp, RopeGradOp>([](auto) { return 6.0; })
      .Case<AdamWUpdateOp>([](auto) { return 16.0; })
      .Case<SGDUpdateOp>([](auto) { return 3.0; })
      .Case<DropoutOp, DropoutGradOp>([](auto) { return 12.0; }) // Philox
      .Default([](auto) { return 1.0; });
}

OpWork matmulWork(MatmulOp op, const OpShapes &shapes) {
  llvm::ArrayRef<int64_t> lhs = shapes.operands[0], rhs = shapes.operands[1];
  size_t rank = lhs.size();
  double m = double(lhs[rank - (op.getTransposeLhs() ? 1 : 2)]);
  double k = double(lhs[rank - (op.getTransposeLhs() ? 2 : 1)]);
  double n = double(rhs[rhs.size() - (op.getTransposeRhs() ? 2 : 1)]);
  double batch = product(lhs, 0, rank - 2);
  OpWork work;
  work.opClass = OpClass::Gemm;
  work.flops = work.modelFlops = 2 * batch * m * n * k; // [N21]
  work.bytes = tensorBytes(op, shapes);
  work.mathMode = mathModeOf(op.getLhs().getType());
  return work;
}

/// 2·B·Hq·S·Skv·D FLOPs for one product of q [B,S,Hq,D] with k or v
/// [B,Skv,Hkv,D] (the whole score matrix, as [N21] counts it, even when
/// causal).
double attentionProductFlops(const OpShapes &shapes) {
  llvm::ArrayRef<int64_t> q = shapes.operands.front(), k = shapes.operands[1];
  return 2 * double(q[0]) * double(q[2]) * double(q[1]) * double(k[1]) *
         double(q[3]);
}

} // namespace

double elementBytes(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (!element.isIntOrFloat())
    return 0;
  return std::max(1u, element.getIntOrFloatBitWidth() / 8);
}

double numElements(llvm::ArrayRef<int64_t> shape) { return product(shape); }

OpShapes OpShapes::of(Operation *op) {
  OpShapes shapes;
  auto shapeOf = [](Value value) {
    llvm::SmallVector<int64_t, 4> shape;
    if (auto tensor = dyn_cast<RankedTensorType>(value.getType()))
      shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    return shape;
  };
  for (Value operand : op->getOperands())
    shapes.operands.push_back(shapeOf(operand));
  for (Value result : op->getResults())
    shapes.results.push_back(shapeOf(result));
  return shapes;
}

OpWork getOpWork(Operation *op, const OpShapes &shapes) {
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return matmulWork(matmul, shapes);
  OpWork work;
  work.mathMode = op->getNumOperands() ? mathModeOf(op->getOperand(0).getType())
                                       : MathMode::FP32;
  if (isa<AttentionOp>(op)) {
    // QKᵀ and PV [N21]; the kernel keeps scores on chip [D22].
    work.opClass = OpClass::Gemm;
    work.flops = work.modelFlops = 2 * attentionProductFlops(shapes);
    work.bytes = tensorBytes(op, shapes);
    return work;
  }
  if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    // dV = PᵀdO, dP = dO Vᵀ, dQ = dS K, dK = dSᵀQ are the model's backward
    // (twice the forward [N21]); recomputing S = QKᵀ is one more product
    // [D22]. Operands from `q` on have the forward's shapes.
    OpShapes forward;
    forward.operands.assign(shapes.operands.begin() + 1, shapes.operands.end());
    work.opClass = OpClass::Gemm;
    work.modelFlops = 4 * attentionProductFlops(forward);
    work.flops = 5 * attentionProductFlops(forward);
    work.bytes = tensorBytes(op, shapes);
    work.mathMode = mathModeOf(grad.getQ().getType());
    return work;
  }
  // Views and constants launch no kernel.
  if (isa<ReshapeOp>(op) || op->hasTrait<OpTrait::ConstantLike>() ||
      op->getNumResults() == 0 || op->getDialect() == nullptr ||
      !isa<LoomDialect>(op->getDialect())) {
    work.opClass = OpClass::Free;
    return work;
  }
  work.opClass = OpClass::Bandwidth;
  double elements = 0;
  for (const auto &shape : shapes.results)
    elements += product(shape);
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    // A gather reads only the rows it copies.
    work.bytes =
        2 * product(shapes.results[0]) * elementBytes(embedding.getType()) +
        product(shapes.operands[1]) * 4;
    return work;
  }
  work.flops = flopsPerElement(op) * elements;
  work.bytes = tensorBytes(op, shapes);
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
  else
    // Vector units: elementwise arithmetic runs at the FP32 rate.
    compute = work.flops / device.peakFlops(MathMode::FP32);
  return device.launchOverhead + std::max(compute, memory); // [W09]
}

} // namespace loom::cost
