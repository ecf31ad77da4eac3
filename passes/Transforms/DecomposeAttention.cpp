//===- DecomposeAttention.cpp - Fused attention to unfused ops ------------===//
//
// Implements --loom-decompose-attention: each loom.attention becomes the
// transposes, head repetition (GQA), Q scaling, scores matmul, softmax,
// dropout and output matmul of unfused attention, so that the memory model
// counts the activations of Megatron-LM's attention (Korthikanti et al.
// 2022). The rewrite is exact: the fused op's dropout mask indexes the
// [B, Hq, S, Skv] probabilities as loom.dropout indexes `p` here.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#define DEBUG_TYPE "loom-decompose-attention"

namespace loom {
#define GEN_PASS_DEF_LOOMDECOMPOSEATTENTION
#include "passes/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom {
namespace {

/// [B, S, H, D] <-> [B, H, S, D] (the permutation is its own inverse).
constexpr int64_t kSwapSeqAndHeads[] = {0, 2, 1, 3};

/// Repeats each of the Hkv heads of `x` [B, Hkv, Skv, D] for the `groups`
/// query heads that share it: [B, Hkv * groups, Skv, D], query head h
/// reading head h / groups.
Value repeatHeads(OpBuilder &b, Location loc, Value x, int64_t groups) {
  if (groups == 1)
    return x;
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
  int64_t batch = shape[0], heads = shape[1], seq = shape[2], dim = shape[3];
  Value one = ReshapeOp::create(b, loc, x, {batch, heads, 1, seq, dim});
  Value repeated =
      BroadcastOp::create(b, loc, one, {batch, heads, groups, seq, dim});
  return ReshapeOp::create(b, loc, repeated, {batch, heads * groups, seq, dim});
}

/// Builds the unfused form of `op` in front of it and returns its output
/// [B, S, Hq, D]. The ops from the scores matmul to the output matmul get
/// kAttentionCoreAttr.
Value buildUnfused(OpBuilder &b, AttentionOp op) {
  Location loc = op.getLoc();
  RankedTensorType qType = op.getQ().getType();
  int64_t groups = qType.getDimSize(2) / op.getK().getType().getDimSize(2);

  Value q = TransposeOp::create(b, loc, op.getQ(), kSwapSeqAndHeads);
  Value k = repeatHeads(
      b, loc, TransposeOp::create(b, loc, op.getK(), kSwapSeqAndHeads), groups);
  Value v = repeatHeads(
      b, loc, TransposeOp::create(b, loc, op.getV(), kSwapSeqAndHeads), groups);

  Type element = qType.getElementType();
  Value scale = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          RankedTensorType::get({}, element),
          b.getFloatAttr(element, op.getScale().convertToDouble())));
  Value scaledQ = MulOp::create(b, loc, q, scale);

  SmallVector<Operation *, 4> core;
  auto scores = MatmulOp::create(b, loc, scaledQ, k, /*transposeLhs=*/false,
                                 /*transposeRhs=*/true);
  core.push_back(scores);
  Value probs =
      SoftmaxOp::create(b, loc, scores.getType(), scores, op.getCausalAttr());
  core.push_back(probs.getDefiningOp());
  if (op.getDropoutRate()) {
    probs = DropoutOp::create(b, loc, probs.getType(), probs, op.getStep(),
                              op.getDropoutRateAttr(), op.getDropoutSeedAttr(),
                              op.getDropoutKeyAttr());
    core.push_back(probs.getDefiningOp());
  }
  auto out = MatmulOp::create(b, loc, probs, v);
  core.push_back(out);
  for (Operation *coreOp : core)
    coreOp->setAttr(kAttentionCoreAttr, b.getUnitAttr());

  return TransposeOp::create(b, loc, out, kSwapSeqAndHeads);
}

struct DecomposeAttentionPass
    : impl::LoomDecomposeAttentionBase<DecomposeAttentionPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation()->walk([&](AttentionOp op) { ops.push_back(op); });
    bool failedAny = false;
    for (AttentionOp op : ops) {
      if (!op.getLse().use_empty()) {
        InFlightDiagnostic diag =
            emitError(op.getLoc(), "loom-decompose-attention: the log-sum-exp "
                                   "result of this attention has uses; the "
                                   "unfused form does not compute it");
        diag.attachNote(op.getLse().use_begin()->getOwner()->getLoc())
            << "used here";
        failedAny = true;
        continue;
      }
      OpBuilder b(op);
      op.getOut().replaceAllUsesWith(buildUnfused(b, op));
      op.erase();
    }
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
