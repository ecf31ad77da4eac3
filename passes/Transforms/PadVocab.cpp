//===- PadVocab.cpp - Logits of an aligned width for odd vocabularies -----===//
//
// --loom-pad-vocab (see Passes.td): a language model head whose vocabulary
// is not a multiple of `multiple` (GPT-2's 50257) leaves its logits, and
// both gradients of the head, with rows that no GEMM library reads at full
// speed (2-byte aligned for bf16: cuBLASLt then picks slow kernels, or the
// CUDA matmul stages them through scratch, three extra passes over the
// largest tensor of the step). The head's weight is padded with zero rows
// to the next multiple and the padded logits get -inf through a bias, so
// that the loss and its gradient see exactly the original vocabulary:
// exp(-inf) adds nothing to a row's sum and its softmax there is 0, so the
// padded columns' gradient is 0 and the weight gradient's padded rows are
// dropped by a slice. The parameters, the optimizer state and checkpoints
// keep their shapes: only the step's intermediates are padded (llm.c's
// "Vp", done here in the compiled program instead of the model).
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#define DEBUG_TYPE "loom-pad-vocab"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_LOOMPADVOCAB
#include "passes/Transforms/Passes.h.inc"

namespace {

/// The largest `multiple`: far past any alignment a GEMM wants, and a
/// padding whose mask stays small.
constexpr int64_t kMaxMultiple = 1 << 16;

/// What reads a head's logits: the losses and their gradients, and what
/// reads those gradients.
struct Head {
  MatmulOp logits; ///< matmul(h, w, transpose_rhs): [..., V]
  SmallVector<CrossEntropyOp> losses;
  SmallVector<CrossEntropyGradOp> grads;
  /// matmul(dlogits, w'): the gradient of h, contracting over V. w' is the
  /// head's weight, or another [V, d] value standing for it (a ZeRO
  /// regather of the weight for the backward): any is padded with zero
  /// rows, which the gradient's zero columns meet.
  SmallVector<MatmulOp> inputGrads;
  /// dlogits as [T, V]: read only by weight gradients.
  SmallVector<ReshapeOp> reshapes;
  /// matmul(dlogits or one of `reshapes`, x, transpose_lhs): [V, n], the
  /// gradient of w.
  SmallVector<MatmulOp> weightGrads;
};

/// A [T, V] dlogits read as the lhs of x^T.dy's transpose: [V, n].
bool isWeightGrad(MatmulOp matmul, Value dlogits) {
  return matmul.getLhs() == dlogits && matmul.getTransposeLhs() &&
         !matmul.getTransposeRhs() &&
         cast<RankedTensorType>(dlogits.getType()).getRank() == 2 &&
         matmul.getRhs() != dlogits;
}

/// A [V, d] value read untransposed as the rhs of a matmul of `dlogits`:
/// the gradient of the head's input.
bool isInputGrad(MatmulOp matmul, Value dlogits, int64_t vocab) {
  auto rhs = cast<RankedTensorType>(matmul.getRhs().getType());
  return matmul.getLhs() == dlogits && matmul.getRhs() != dlogits &&
         !matmul.getTransposeLhs() && !matmul.getTransposeRhs() &&
         rhs.getRank() == 2 && rhs.getShape()[0] == vocab;
}

/// Records in `head` what reads `dlogits`; false when something the pass
/// cannot widen does.
bool collectGradReaders(Value dlogits, int64_t vocab, Head &head) {
  for (Operation *user : dlogits.getUsers()) {
    if (auto matmul = dyn_cast<MatmulOp>(user)) {
      if (isInputGrad(matmul, dlogits, vocab))
        head.inputGrads.push_back(matmul);
      else if (isWeightGrad(matmul, dlogits))
        head.weightGrads.push_back(matmul);
      else
        return false;
      continue;
    }
    auto reshape = dyn_cast<ReshapeOp>(user);
    auto shape = reshape ? reshape.getType().getShape() : ArrayRef<int64_t>();
    if (!reshape || shape.size() != 2 || shape.back() != vocab)
      return false;
    head.reshapes.push_back(reshape);
    for (Operation *reader : reshape.getResult().getUsers()) {
      auto matmul = dyn_cast<MatmulOp>(reader);
      if (!matmul || !isWeightGrad(matmul, reshape.getResult()))
        return false;
      head.weightGrads.push_back(matmul);
    }
  }
  return true;
}

/// The head whose logits `loss` reads, when the pass can pad it: a matmul
/// by a [V, d] weight read transposed, whose logits only losses and their
/// gradients read, whose gradients only the head's two backward matmuls
/// read.
std::optional<Head> headOf(Value logits, int64_t multiple) {
  auto type = cast<RankedTensorType>(logits.getType());
  int64_t vocab = type.getShape().back();
  auto matmul = logits.getDefiningOp<MatmulOp>();
  if (!type.hasStaticShape() || vocab % multiple == 0 || !matmul ||
      matmul.getTransposeLhs() || !matmul.getTransposeRhs())
    return std::nullopt;
  auto weight = cast<RankedTensorType>(matmul.getRhs().getType());
  if (weight.getRank() != 2 || weight.getShape()[0] != vocab)
    return std::nullopt;
  Head head;
  head.logits = matmul;
  for (Operation *user : logits.getUsers()) {
    if (auto loss = dyn_cast<CrossEntropyOp>(user)) {
      head.losses.push_back(loss);
    } else if (auto grad = dyn_cast<CrossEntropyGradOp>(user);
               grad && collectGradReaders(grad.getResult(), vocab, head)) {
      head.grads.push_back(grad);
    } else {
      return std::nullopt;
    }
  }
  return head;
}

/// `type` with its dimension `dim` set to `size`.
RankedTensorType withDim(RankedTensorType type, unsigned dim, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size;
  return type.clone(shape);
}

/// `value` ([V, d]) with zero rows after it up to `padded` rows, at `b`.
Value padRows(OpBuilder &b, Location loc, Value value, int64_t padded) {
  auto type = cast<RankedTensorType>(value.getType());
  return PadOp::create(b, loc, withDim(type, 0, padded), value,
                       b.getDenseI64ArrayAttr({0, 0}));
}

/// Pads `head` to `padded` columns (see the file's banner).
void pad(Head &head, int64_t padded) {
  MatmulOp logits = head.logits;
  Location loc = logits.getLoc();
  Value w = logits.getRhs();
  auto logitsType = cast<RankedTensorType>(logits.getType());
  int64_t vocab = logitsType.getShape().back();
  Type element = logitsType.getElementType();

  OpBuilder b(logits);
  Value paddedW = padRows(b, loc, w, padded);
  // 0 over the vocabulary, -inf over the padding.
  auto floatType = cast<FloatType>(element);
  const llvm::fltSemantics &semantics = floatType.getFloatSemantics();
  SmallVector<APFloat> maskValues(vocab, APFloat::getZero(semantics));
  maskValues.resize(padded, APFloat::getInf(semantics, /*Negative=*/true));
  auto maskType = RankedTensorType::get({padded}, element);
  Value mask = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(maskType, maskValues));
  Value product = MatmulOp::create(b, loc, logits.getLhs(), paddedW,
                                   /*transposeLhs=*/false,
                                   /*transposeRhs=*/true);
  Value paddedLogits = AddOp::create(b, loc, product, mask);

  for (CrossEntropyOp loss : head.losses)
    loss.getLogitsMutable().assign(paddedLogits);
  for (CrossEntropyGradOp grad : head.grads) {
    grad.getLogitsMutable().assign(paddedLogits);
    grad.getResult().setType(cast<RankedTensorType>(paddedLogits.getType()));
  }
  for (MatmulOp matmul : head.inputGrads) {
    Value rhs = matmul.getRhs();
    b.setInsertionPoint(matmul);
    matmul.getRhsMutable().assign(
        rhs == w ? paddedW : padRows(b, matmul.getLoc(), rhs, padded));
  }
  for (ReshapeOp reshape : head.reshapes)
    reshape.getResult().setType(withDim(reshape.getType(), 1, padded));
  for (MatmulOp matmul : head.weightGrads) {
    auto resultType = cast<RankedTensorType>(matmul.getType());
    matmul.getResult().setType(withDim(resultType, 0, padded));
    b.setInsertionPointAfter(matmul);
    auto slice =
        SliceOp::create(b, matmul.getLoc(), resultType, matmul.getResult(),
                        b.getDenseI64ArrayAttr({0, 0}));
    matmul.getResult().replaceAllUsesExcept(slice.getResult(), slice);
  }
  logits.erase();
}

struct PadVocabPass : impl::LoomPadVocabBase<PadVocabPass> {
  using LoomPadVocabBase::LoomPadVocabBase;

  void runOnOperation() override {
    if (multiple < 1 || multiple > kMaxMultiple) {
      emitLineError(getOperation())
          << "--loom-pad-vocab: multiple must be 1 to " << kMaxMultiple
          << ", not " << static_cast<int64_t>(multiple);
      return signalPassFailure();
    }
    std::vector<Head> heads;
    llvm::SmallPtrSet<Operation *, 4> seen;
    // Every head once, found from its losses and gradients.
    getOperation().walk([&](Operation *op) {
      Value logits;
      if (auto loss = dyn_cast<CrossEntropyOp>(op))
        logits = loss.getLogits();
      else if (auto grad = dyn_cast<CrossEntropyGradOp>(op))
        logits = grad.getLogits();
      else
        return;
      Operation *def = logits.getDefiningOp();
      if (!def || !seen.insert(def).second)
        return;
      if (std::optional<Head> head = headOf(logits, multiple))
        heads.push_back(std::move(*head));
    });
    for (Head &head : heads) {
      int64_t vocab =
          cast<RankedTensorType>(head.logits.getType()).getShape().back();
      pad(head, (vocab + multiple - 1) / multiple * multiple);
    }
  }
};

} // namespace
} // namespace loom
