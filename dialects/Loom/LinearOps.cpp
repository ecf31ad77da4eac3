//===- LinearOps.cpp - Matmul, embedding and cross-entropy ----------------===//
//
// The ops that carry the model's weights and its loss. A split contraction
// (matmul's K, embedding's vocabulary) leaves partial sums; cross-entropy's
// vocabulary stays whole since its log-sum-exp is not a plain sum.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

using namespace mlir;

namespace loom {

LogicalResult MatmulOp::verify() {
  return verifyInferredTypes(
      *this,
      inferMatmulType(getLhs().getType(), getRhs().getType(), getTransposeLhs(),
                      getTransposeRhs(), [&] { return emitOpError(); }));
}

OpShardingRule MatmulOp::getShardingRule() {
  OpShardingRule rule;
  ArrayRef<int64_t> lhs = getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = getRhs().getType().getShape();
  ArrayRef<int64_t> result = getType().getShape();
  SmallVector<int64_t> batch = rule.addFactors(lhs.drop_back(2));
  int64_t m = rule.addFactor(result[result.size() - 2]);
  int64_t n = rule.addFactor(result.back());
  int64_t k =
      rule.addFactor(getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back());

  TensorMapping batchDims = OpShardingRule::alignLeft(lhs.drop_back(2), batch);
  TensorMapping lhsMap = batchDims, rhsMap, resultMap = batchDims;
  lhsMap.append(getTransposeLhs() ? TensorMapping{{k}, {m}}
                                  : TensorMapping{{m}, {k}});
  if (rhs.size() > 2)
    rhsMap = batchDims;
  rhsMap.append(getTransposeRhs() ? TensorMapping{{n}, {k}}
                                  : TensorMapping{{k}, {n}});
  resultMap.append(TensorMapping{{m}, {n}});
  rule.addOperand(lhsMap);
  rule.addOperand(rhsMap);
  rule.addResult(resultMap);
  return rule;
}

LogicalResult EmbeddingOp::verify() {
  return verifyInferredTypes(
      *this, inferEmbeddingType(getTable().getType(), getIds().getType(),
                                [&] { return emitOpError(); }));
}

/// Splitting the vocabulary leaves partial sums (Megatron's vocab-parallel
/// embedding: each device gathers the rows it holds, zeros elsewhere).
OpShardingRule EmbeddingOp::getShardingRule() {
  OpShardingRule rule;
  ArrayRef<int64_t> table = getTable().getType().getShape();
  ArrayRef<int64_t> ids = getIds().getType().getShape();
  // A device holding rows [r, r + V/n) of a split table would need r to
  // look ids up (Megatron's vocabulary-parallel embedding); no op takes a
  // device's offset yet, so the vocabulary stays whole.
  int64_t vocab = rule.addFactor(table[0], /*whole=*/true);
  int64_t dim = rule.addFactor(table[1]);
  SmallVector<int64_t> tokens = rule.addFactors(ids);
  TensorMapping result = OpShardingRule::alignLeft(ids, tokens);
  result.push_back({dim});
  rule.addOperand({{vocab}, {dim}});
  rule.addOperand(OpShardingRule::alignLeft(ids, tokens));
  rule.addResult(result);
  return rule;
}

LogicalResult EmbeddingGradOp::verify() {
  if (getType().getRank() != 2)
    return emitOpError() << "result must be [vocab, dim], got rank "
                         << getType().getRank();
  auto expected = inferEmbeddingType(getType(), getIds().getType(), nullptr);
  if (getDy().getType() != *expected)
    return emitOpError() << "dy has type " << getDy().getType()
                         << ", the ids and the result give " << *expected;
  return success();
}

/// Splitting the tokens leaves partial sums of the scatter-add.
OpShardingRule EmbeddingGradOp::getShardingRule() {
  OpShardingRule rule;
  ArrayRef<int64_t> ids = getIds().getType().getShape();
  // Whole vocabulary, as for `embedding`.
  int64_t vocab = rule.addFactor(getType().getDimSize(0), /*whole=*/true);
  int64_t dim = rule.addFactor(getType().getDimSize(1));
  SmallVector<int64_t> tokens = rule.addFactors(ids);
  TensorMapping dy = OpShardingRule::alignLeft(ids, tokens);
  dy.push_back({dim});
  rule.addOperand(dy);
  rule.addOperand(OpShardingRule::alignLeft(ids, tokens));
  rule.addResult({{vocab}, {dim}});
  return rule;
}

/// `token_count` divides a sum over at least the tokens of `labels`.
static LogicalResult verifyTokenCount(Operation *op, Type labels,
                                      std::optional<uint64_t> count) {
  if (!count)
    return success();
  int64_t local = cast<RankedTensorType>(labels).getNumElements();
  if (static_cast<int64_t>(*count) < local)
    return op->emitOpError()
           << "token_count " << static_cast<int64_t>(*count)
           << " is less than the " << local << " tokens of the labels";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyLabels(getLogits().getType(), getLabels().getType(),
                          [&] { return emitOpError(); })))
    return failure();
  return verifyTokenCount(*this, getLabels().getType(), getTokenCount());
}

/// The tokens of `logits` and `labels`, plus a whole vocabulary factor.
static std::pair<TensorMapping, TensorMapping>
addTokenFactors(OpShardingRule &rule, RankedTensorType logits) {
  ArrayRef<int64_t> tokenShape = logits.getShape().drop_back();
  SmallVector<int64_t> tokens = rule.addFactors(tokenShape);
  int64_t vocab = rule.addFactor(logits.getShape().back(), /*whole=*/true);
  TensorMapping labels = OpShardingRule::alignLeft(tokenShape, tokens);
  TensorMapping logitsMap = labels;
  logitsMap.push_back({vocab});
  return {logitsMap, labels};
}

/// The mean over tokens is a sum of per-token terms: split tokens leave
/// partial sums.
OpShardingRule CrossEntropyOp::getShardingRule() {
  OpShardingRule rule;
  auto [logits, labels] = addTokenFactors(rule, getLogits().getType());
  rule.addOperand(logits);
  rule.addOperand(labels);
  rule.addResult({});
  return rule;
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyLabels(getLogits().getType(), getLabels().getType(),
                          [&] { return emitOpError(); })))
    return failure();
  return verifyTokenCount(*this, getLabels().getType(), getTokenCount());
}

OpShardingRule CrossEntropyGradOp::getShardingRule() {
  OpShardingRule rule;
  auto [logits, labels] = addTokenFactors(rule, getLogits().getType());
  rule.addOperand({});
  rule.addOperand(logits);
  rule.addOperand(labels);
  rule.addResult(logits);
  return rule;
}

} // namespace loom
