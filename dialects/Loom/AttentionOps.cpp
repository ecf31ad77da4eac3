//===- AttentionOps.cpp - Rotary embeddings and fused attention -----------===//
//
// Attention splits freely over batch and heads (Megatron's head-parallel
// attention); with grouped-query heads a query head is a (kv head, group)
// pair, so splitting the group factor leaves partial sums in dk and dv. The
// queries split along the sequence too (context parallelism): the keys
// stay whole, so a device's queries meet all of them (the partitioner
// gathers keys and values around the mesh axis), the gradient leaves
// partial sums in dk and dv, and a causal shard finds its rows' global
// positions from `loom.mask_split_axes`. The head dimension stays whole,
// and so do rotary positions' other axes.
//
// Attention dropout adds nothing whole: like `loom.dropout`, its mask is a
// function of an element's index in the global [B, Hq, S, Skv] probability
// tensor, so a shard draws the masks of the unsharded op by offsetting its
// local (b, h, i) by the global offsets of its batch, head (kv head times
// group size plus group) and query slices; the key axis is whole anyway.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

using namespace mlir;

namespace loom {

/// The frequency scaling of a rope or rope_grad: all four attributes or
/// none, positive, the high-frequency factor above the low one.
template <typename RopeLikeOp>
static LogicalResult verifyRopeScaling(RopeLikeOp op) {
  std::optional<APFloat> values[] = {
      op.getScalingFactor(), op.getLowFreqFactor(), op.getHighFreqFactor(),
      op.getOriginalMaxPositions()};
  int given = 0;
  for (const std::optional<APFloat> &value : values)
    given += value.has_value();
  if (given == 0)
    return success();
  if (given != 4)
    return op.emitOpError()
           << "scaling_factor, low_freq_factor, high_freq_factor and "
              "original_max_positions go together: all or none";
  for (const std::optional<APFloat> &value : values)
    if (!(value->convertToDouble() > 0))
      return op.emitOpError() << "the frequency scaling must be positive";
  if (!(op.getHighFreqFactor()->convertToDouble() >
        op.getLowFreqFactor()->convertToDouble()))
    return op.emitOpError() << "high_freq_factor must be above low_freq_factor";
  return success();
}

static LogicalResult verifyRope(Operation *op, RankedTensorType type,
                                APFloat theta) {
  if (type.getRank() != 4)
    return op->emitOpError() << "input must be [batch, seq, heads, head_dim], "
                                "got rank "
                             << type.getRank();
  if (type.getDimSize(3) % 2 != 0)
    return op->emitOpError()
           << "head_dim " << type.getDimSize(3) << " must be even";
  if (!(theta.convertToDouble() > 0.0))
    return op->emitOpError() << "theta must be positive";
  return success();
}

/// The rotated pairs lie along the head dimension, which stays whole; a
/// shard along the sequence finds its positions from the global index of
/// its rows (`loom.mask_split_axes`, which the partitioner sets).
static OpShardingRule getRopeRule(Operation *op, RankedTensorType type) {
  return getAlignedRule(op, type.getShape(), {3});
}

LogicalResult RopeOp::verify() {
  if (failed(verifyRope(*this, getType(), getTheta())))
    return failure();
  return verifyRopeScaling(*this);
}

OpShardingRule RopeOp::getShardingRule() {
  return getRopeRule(*this, getType());
}

LogicalResult RopeGradOp::verify() {
  if (failed(verifyRope(*this, getType(), getTheta())))
    return failure();
  return verifyRopeScaling(*this);
}

OpShardingRule RopeGradOp::getShardingRule() {
  return getRopeRule(*this, getType());
}

static LogicalResult verifyScale(Operation *op, APFloat scale) {
  if (!(scale.convertToDouble() > 0.0))
    return op->emitOpError() << "scale must be positive";
  return success();
}

/// Attention dropout is all or nothing: `dropout_rate`, `dropout_seed`,
/// `dropout_key` and the `step` operand come together.
template <typename AttentionLikeOp>
static LogicalResult verifyAttentionDropout(AttentionLikeOp op) {
  std::optional<APFloat> rate = op.getDropoutRate();
  if (rate && !op.getStep())
    return op.emitOpError() << "dropout_rate needs a step operand";
  if (!rate && op.getStep())
    return op.emitOpError() << "has a step operand but no dropout_rate";
  if (static_cast<bool>(op.getDropoutSeedAttr()) != rate.has_value() ||
      static_cast<bool>(op.getDropoutKeyAttr()) != rate.has_value())
    return op.emitOpError() << "dropout_seed and dropout_key go with "
                               "dropout_rate: all or none";
  if (rate)
    return verifyDropoutRate(op, "dropout_rate", rate->convertToDouble());
  return success();
}

namespace {
/// The factor mappings of attention's tensors.
struct AttentionMappings {
  TensorMapping q;   // q, out, dout, dq: [B, S, (Hkv G), D]
  TensorMapping kv;  // k, v, dk, dv:     [B, Skv, Hkv, D]
  TensorMapping lse; // lse:              [B, (Hkv G), S]
};
} // namespace

static AttentionMappings addAttentionFactors(OpShardingRule &rule,
                                             RankedTensorType q,
                                             RankedTensorType k, bool causal) {
  int64_t b = rule.addFactor(q.getDimSize(0));
  // Split queries meet every key; under the causal mask a shard finds its
  // rows' global positions from its split (the kernels read it).
  int64_t s = rule.addFactor(q.getDimSize(1));
  int64_t skv = rule.addFactor(k.getDimSize(1), /*whole=*/true);
  int64_t hkv = rule.addFactor(k.getDimSize(2));
  int64_t g = rule.addFactor(q.getDimSize(2) / k.getDimSize(2));
  int64_t d = rule.addFactor(q.getDimSize(3), /*whole=*/true);
  return {{{b}, {s}, {hkv, g}, {d}},
          {{b}, {skv}, {hkv}, {d}},
          {{b}, {hkv, g}, {s}}};
}

/// A causal attention with fewer queries than keys is one device's rows of
/// a whole one: it needs the split that places them.
template <typename AttentionLikeOp>
static LogicalResult verifyCausalShard(AttentionLikeOp op) {
  if (op.getCausal() &&
      op.getQ().getType().getDimSize(1) != op.getK().getType().getDimSize(1) &&
      !op->hasAttr(kMaskSplitAxesAttr))
    return op.emitOpError()
           << "has fewer queries than keys under the causal mask, but no "
           << kMaskSplitAxesAttr << " to place them among the keys";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyInferredTypes(
          *this, inferAttentionTypes(getQ().getType(), getK().getType(),
                                     getV().getType(), getCausal(),
                                     [&] { return emitOpError(); }))) ||
      failed(verifyScale(*this, getScale())) ||
      failed(verifyCausalShard(*this)))
    return failure();
  return verifyAttentionDropout(*this);
}

OpShardingRule AttentionOp::getShardingRule() {
  OpShardingRule rule;
  AttentionMappings maps = addAttentionFactors(rule, getQ().getType(),
                                               getK().getType(), getCausal());
  for (const TensorMapping &operand : {maps.q, maps.kv, maps.kv})
    rule.addOperand(operand);
  if (getStep())
    rule.addOperand({}); // The 0-d step.
  rule.addResult(maps.q);
  rule.addResult(maps.lse);
  return rule;
}

LogicalResult AttentionGradOp::verify() {
  auto inferred =
      inferAttentionTypes(getQ().getType(), getK().getType(), getV().getType(),
                          getCausal(), [&] { return emitOpError(); });
  if (failed(inferred))
    return failure();
  if (getLse().getType() != (*inferred)[1])
    return emitOpError() << "lse has type " << getLse().getType()
                         << ", attention of q, k and v gives "
                         << (*inferred)[1];
  if (failed(verifyScale(*this, getScale())) ||
      failed(verifyCausalShard(*this)))
    return failure();
  return verifyAttentionDropout(*this);
}

OpShardingRule AttentionGradOp::getShardingRule() {
  OpShardingRule rule;
  AttentionMappings maps = addAttentionFactors(rule, getQ().getType(),
                                               getK().getType(), getCausal());
  for (const TensorMapping &operand :
       {maps.q, maps.q, maps.kv, maps.kv, maps.q, maps.lse})
    rule.addOperand(operand);
  if (getStep())
    rule.addOperand({}); // The 0-d step.
  for (const TensorMapping &result : {maps.q, maps.kv, maps.kv})
    rule.addResult(result);
  return rule;
}

} // namespace loom
