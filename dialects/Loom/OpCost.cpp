//===- OpCost.cpp - The ops' FLOPs and bytes (OpCostInterface) ------------===//
//
// The shape arithmetic of the cost interface and the ops whose work is not
// the default's (one FLOP per result element, every tensor moved once).
// The cost model turns these counts into time (lib/CostModel/OpCost.cpp).
//
// Sources:
//  [N21] D. Narayanan et al., "Efficient Large-Scale Language Model Training
//        on GPU Clusters Using Megatron-LM", SC'21, Appendix: a GEMM of
//        [m,k]x[k,n] is 2mkn FLOPs; backward is twice the forward; model
//        FLOPs count matrix products only.
//  [D22] T. Dao et al., "FlashAttention", NeurIPS 2022: the fused backward
//        recomputes the scores (one extra QKᵀ product) and reads/writes no
//        s² tensor.
//  [D23] T. Dao, "FlashAttention-2: Faster Attention with Better
//        Parallelism and Work Partitioning", arXiv 2307.08691, and its
//        benchmarks/benchmark_flash_attention.py: a causal kernel's FLOPs
//        are half the score matrix's, the backward's 2.5 times the forward's.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/TypeUtilities.h"

#include <algorithm>

using namespace mlir;

namespace loom {

double numElements(llvm::ArrayRef<int64_t> shape) {
  double result = 1;
  for (int64_t dim : shape)
    result *= double(dim);
  return result;
}

double elementBytes(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (!element.isIntOrFloat())
    return 0;
  return std::max(1u, element.getIntOrFloatBitWidth() / 8);
}

double tensorBytes(Operation *op, const OpShapes &shapes) {
  double bytes = 0;
  for (auto [value, shape] : llvm::zip(op->getOperands(), shapes.operands))
    if (isa<ShapedType>(value.getType()))
      bytes += numElements(shape) * elementBytes(value.getType());
  for (auto [value, shape] : llvm::zip(op->getResults(), shapes.results))
    if (isa<ShapedType>(value.getType()))
      bytes += numElements(shape) * elementBytes(value.getType());
  return bytes;
}

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

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

CostClass MatmulOp::getCostClass() { return CostClass::Gemm; }

double MatmulOp::getFlops(const OpShapes &shapes) {
  llvm::ArrayRef<int64_t> lhs = shapes.operands[0], rhs = shapes.operands[1];
  size_t rank = lhs.size();
  double m = double(lhs[rank - (getTransposeLhs() ? 1 : 2)]);
  double k = double(lhs[rank - (getTransposeLhs() ? 2 : 1)]);
  double n = double(rhs[rhs.size() - (getTransposeRhs() ? 2 : 1)]);
  double batch = numElements(lhs.drop_back(2));
  return 2 * batch * m * n * k; // [N21]
}

double MatmulOp::getModelFlops(const OpShapes &shapes) {
  return getFlops(shapes);
}

namespace {
/// 2·B·Hq·S·Skv·D FLOPs for one product of q [B,S,Hq,D] with k or v
/// [B,Skv,Hkv,D], the first two of `operands` (the whole score matrix, as
/// [N21] counts it, even when causal).
double
attentionProductFlops(llvm::ArrayRef<llvm::SmallVector<int64_t, 4>> operands) {
  llvm::ArrayRef<int64_t> q = operands[0], k = operands[1];
  return 2 * double(q[0]) * double(q[2]) * double(q[1]) * double(k[1]) *
         double(q[3]);
}

/// The share of the score matrix a fused kernel computes: all of it, or
/// under a causal mask the S·Skv - S(S-1)/2 scores on and below the
/// diagonal of the last S keys ([D22]'s kernels skip the tiles above it;
/// FlashAttention's benchmarks count causal work as half [D23]).
double kernelShare(llvm::ArrayRef<llvm::SmallVector<int64_t, 4>> operands,
                   bool causal) {
  if (!causal)
    return 1;
  double s = double(operands[0][1]), skv = double(operands[1][1]);
  if (s <= 0 || skv < s)
    return 1;
  return (s * skv - s * (s - 1) / 2) / (s * skv);
}
} // namespace

CostClass AttentionOp::getCostClass() { return CostClass::Attention; }

// QKᵀ and PV [N21]; the kernel keeps scores on chip [D22].
double AttentionOp::getFlops(const OpShapes &shapes) {
  return getModelFlops(shapes) * kernelShare(shapes.operands, getCausal());
}

double AttentionOp::getModelFlops(const OpShapes &shapes) {
  return 2 * attentionProductFlops(shapes.operands);
}

// Every query against every key: quadratic in the sequence.
int AttentionOp::getSequenceExponent() { return 2; }

CostClass AttentionGradOp::getCostClass() { return CostClass::Attention; }

// dV = PᵀdO, dP = dO Vᵀ, dQ = dS K, dK = dSᵀQ are the model's backward
// (twice the forward [N21]); recomputing S = QKᵀ is one more product [D22].
// Operands from `q` on have the forward's shapes.
double AttentionGradOp::getFlops(const OpShapes &shapes) {
  auto forward = llvm::ArrayRef(shapes.operands).drop_front();
  return 5 * attentionProductFlops(forward) * kernelShare(forward, getCausal());
}

double AttentionGradOp::getModelFlops(const OpShapes &shapes) {
  return 4 *
         attentionProductFlops(llvm::ArrayRef(shapes.operands).drop_front());
}

int AttentionGradOp::getSequenceExponent() { return 2; }

Type AttentionGradOp::getComputeType() { return getQ().getType(); }

//===----------------------------------------------------------------------===//
// Views and gathers
//===----------------------------------------------------------------------===//

CostClass ReshapeOp::getCostClass() { return CostClass::Free; }

double EmbeddingOp::getFlops(const OpShapes &) { return 0; }

// A gather reads only the rows it copies: the result twice (rows read,
// result written) and the ids, counted at 4 bytes.
double EmbeddingOp::getBytes(const OpShapes &shapes) {
  return 2 * numElements(shapes.results[0]) * elementBytes(getType()) +
         numElements(shapes.operands[1]) * 4;
}

//===----------------------------------------------------------------------===//
// Arithmetic per result element of bandwidth-bound kernels
//===----------------------------------------------------------------------===//
//
// Rough counts of the scalar operations of a straightforward kernel. They
// only matter on a device whose vector units are slower than its memory,
// which no GPU is.

double LayerNormOp::getFlopsPerElement() { return 8; }
double RMSNormOp::getFlopsPerElement() { return 8; }
double LayerNormGradOp::getFlopsPerElement() { return 12; }
double RMSNormGradOp::getFlopsPerElement() { return 12; }
double GeluOp::getFlopsPerElement() { return 8; }
double GeluErfOp::getFlopsPerElement() { return 8; }
double SiluOp::getFlopsPerElement() { return 8; }
double SoftmaxOp::getFlopsPerElement() { return 8; }
double CrossEntropyOp::getFlopsPerElement() { return 8; }
double GeluGradOp::getFlopsPerElement() { return 12; }
double GeluErfGradOp::getFlopsPerElement() { return 12; }
double SiluGradOp::getFlopsPerElement() { return 12; }
double SoftmaxGradOp::getFlopsPerElement() { return 12; }
double CrossEntropyGradOp::getFlopsPerElement() { return 12; }
double RopeOp::getFlopsPerElement() { return 6; }
double RopeGradOp::getFlopsPerElement() { return 6; }
double AdamWUpdateOp::getFlopsPerElement() { return 16; }
double SGDUpdateOp::getFlopsPerElement() { return 3; }
// Philox draws a mask element's random bits.
double DropoutOp::getFlopsPerElement() { return 12; }
double DropoutGradOp::getFlopsPerElement() { return 12; }

} // namespace loom
