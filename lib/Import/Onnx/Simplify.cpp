//===- Simplify.cpp - Layout cleanup of an imported graph -----------------===//
//
// An exported graph moves heads between [B, S, H, D] and [B, H, S, D] with
// transposes, flattens tokens to [B*S, K] around GEMMs (GPT-2's Conv1D),
// slices whole tensors, and keeps a Linear layer's weight transposed; the
// fused ops add their own transposes (loom.attention and loom.rope take
// [B, S, H, D]). These rewrites remove what cancels, so that the imported
// function has the layout the config importer builds (and the planner sees
// the same program): transposes and reshapes composed, whole slices and
// no-op broadcasts dropped, matmuls on the unflattened tokens, transposed
// weights as transpose_rhs, and leading unit dimensions added only to
// broadcast dropped.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace loom::onnx_import {
namespace {

bool isIdentity(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (int64_t(i) != p)
      return false;
  return true;
}

/// transpose(transpose(x, p), q) = transpose(x, p o q); identity: x.
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> outer = op.getPermutation();
    if (isIdentity(outer)) {
      rewriter.replaceOp(op, op.getX());
      return success();
    }
    auto inner = op.getX().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t, 4> perm;
    for (int64_t p : outer)
      perm.push_back(inner.getPermutation()[p]);
    if (isIdentity(perm))
      rewriter.replaceOp(op, inner.getX());
    else
      rewriter.replaceOpWithNewOp<TransposeOp>(op, inner.getX(), perm);
    return success();
  }
};

/// reshape(reshape(x)) = reshape(x); a reshape to the same type is x.
struct ComposeReshapes : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getX().getType() == op.getType()) {
      rewriter.replaceOp(op, op.getX());
      return success();
    }
    auto inner = op.getX().getDefiningOp<ReshapeOp>();
    if (!inner)
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), inner.getX());
    return success();
  }
};

/// A slice of the whole tensor (x[..., :D] of a D-wide x).
struct DropWholeSlice : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getX().getType() != op.getType())
      return failure();
    rewriter.replaceOp(op, op.getX());
    return success();
  }
};

struct DropNoOpBroadcast : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getX().getType() != op.getType())
      return failure();
    rewriter.replaceOp(op, op.getX());
    return success();
  }
};

/// matmul(x, transpose(w)) with a 2-D w: matmul(x, w) {transpose_rhs}.
struct TransposedWeight : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto transpose = op.getRhs().getDefiningOp<TransposeOp>();
    if (!transpose || transpose.getType().getRank() != 2)
      return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(
        op, op.getType(), op.getLhs(), transpose.getX(), op.getTransposeLhs(),
        !op.getTransposeRhs());
    return success();
  }
};

/// reshape([add(] matmul(reshape(x), w) [, bias)]) where the inner reshape
/// flattens x's leading dimensions and the outer one restores them: the
/// matmul (and bias) on x itself.
struct UnflattenLinear : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    Value y = op.getX();
    auto add = y.getDefiningOp<AddOp>();
    Value bias;
    MatmulOp matmul;
    if (add) {
      for (auto [product, other] : {std::pair(add.getLhs(), add.getRhs()),
                                    std::pair(add.getRhs(), add.getLhs())})
        if (auto candidate = product.getDefiningOp<MatmulOp>();
            candidate &&
            cast<RankedTensorType>(other.getType()).getRank() <= 1) {
          matmul = candidate;
          bias = other;
        }
    } else {
      matmul = y.getDefiningOp<MatmulOp>();
    }
    if (!matmul || matmul.getTransposeLhs() || !matmul->hasOneUse() ||
        (add && !add->hasOneUse()))
      return failure();
    auto flatten = matmul.getLhs().getDefiningOp<ReshapeOp>();
    auto weight = cast<RankedTensorType>(matmul.getRhs().getType());
    if (!flatten || weight.getRank() != 2 || !flatten->hasOneUse())
      return failure();
    ArrayRef<int64_t> x = flatten.getX().getType().getShape();
    ArrayRef<int64_t> flat = flatten.getType().getShape();
    ArrayRef<int64_t> out = op.getType().getShape();
    if (flat.size() != 2 || x.size() < 2 || out.size() != x.size() ||
        x.back() != flat.back() || out.drop_back() != x.drop_back())
      return failure();
    Value product =
        MatmulOp::create(rewriter, op.getLoc(), flatten.getX(), matmul.getRhs(),
                         false, matmul.getTransposeRhs());
    if (bias)
      product = AddOp::create(rewriter, op.getLoc(), product, bias);
    if (product.getType() != op.getType())
      return failure();
    rewriter.replaceOp(op, product);
    return success();
  }
};

/// A binary op's operand reshaped only to add leading unit dimensions
/// (broadcasting adds them anyway): the operand itself, when the result's
/// type stays.
template <typename BinaryOp>
struct DropLeadingUnitReshape : OpRewritePattern<BinaryOp> {
  using OpRewritePattern<BinaryOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(BinaryOp op,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      Value operand = op->getOperand(i);
      auto reshape = operand.template getDefiningOp<ReshapeOp>();
      if (!reshape)
        continue;
      ArrayRef<int64_t> from = reshape.getX().getType().getShape();
      ArrayRef<int64_t> to = reshape.getType().getShape();
      size_t extra = to.size() - from.size();
      if (to.size() <= from.size() || to.drop_front(extra) != from ||
          !llvm::all_of(to.take_front(extra), [](int64_t d) { return d == 1; }))
        continue;
      RankedTensorType result = op.getType();
      if (result.getRank() < int64_t(to.size()))
        continue;
      rewriter.modifyOpInPlace(op, [&] { op->setOperand(i, reshape.getX()); });
      return success();
    }
    return failure();
  }
};

} // namespace

void simplifyImported(func::FuncOp function) {
  RewritePatternSet patterns(function.getContext());
  patterns.add<ComposeTransposes, ComposeReshapes, DropWholeSlice,
               DropNoOpBroadcast, TransposedWeight, UnflattenLinear,
               DropLeadingUnitReshape<AddOp>, DropLeadingUnitReshape<SubOp>,
               DropLeadingUnitReshape<MulOp>, DropLeadingUnitReshape<DivOp>>(
      function.getContext());
  GreedyRewriteConfig config;
  config.enableFolding(false);
  (void)applyPatternsGreedily(function, std::move(patterns), config);
}

} // namespace loom::onnx_import
