//===- GradientRules.cpp - The adjoint of each loom op --------------------===//
//
// Rules are written in terms of loom ops only, so the backward pass is
// sharded, costed and lowered by the same machinery as the forward pass.
// Fused ops map to their fused gradient op; everything else to a few
// elementwise and layout ops.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

using namespace mlir;

namespace loom {

Value buildSplat(OpBuilder &b, Location loc, RankedTensorType type,
                 double value) {
  Attribute element = b.getFloatAttr(type.getElementType(), value);
  return arith::ConstantOp::create(b, loc,
                                   DenseElementsAttr::get(type, element));
}

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// A 0-d constant of `like`'s element type: broadcasts against anything.
Value scalar(OpBuilder &b, Location loc, Value like, double value) {
  return buildSplat(
      b, loc, RankedTensorType::get({}, tensorType(like).getElementType()),
      value);
}

/// Sums `grad` (of a broadcast result) back to the shape of `target`,
/// undoing numpy broadcasting: the leading dimensions `target` lacks and
/// the dimensions where `target` has size 1 are summed away.
Value reduceToType(OpBuilder &b, Location loc, Value grad,
                   RankedTensorType target) {
  ArrayRef<int64_t> from = tensorType(grad).getShape();
  ArrayRef<int64_t> to = target.getShape();
  int64_t extra = from.size() - to.size();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < static_cast<int64_t>(from.size()); ++i)
    if (i < extra || (to[i - extra] == 1 && from[i] != 1))
      dims.push_back(i);
  if (!dims.empty())
    grad = ReduceSumOp::create(b, loc, grad, dims, /*keepDims=*/false);
  if (tensorType(grad).getShape() != to)
    grad = ReshapeOp::create(b, loc, grad, to);
  return grad;
}

/// Spreads the gradient of a reduction over `dims` of `input` back to the
/// input's shape.
Value unreduce(OpBuilder &b, Location loc, Value grad, RankedTensorType input,
               ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept(input.getShape());
  for (int64_t dim : dims)
    kept[dim] = 1;
  if (tensorType(grad).getShape() != ArrayRef<int64_t>(kept))
    grad = ReshapeOp::create(b, loc, grad, kept);
  return BroadcastOp::create(b, loc, grad, input.getShape());
}

/// Swaps the last two dimensions.
Value transposeLast2(OpBuilder &b, Location loc, Value x) {
  int64_t rank = tensorType(x).getRank();
  SmallVector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return TransposeOp::create(b, loc, x, perm);
}

/// Folds all dimensions but the last into one: [B..., M, K] -> [B*M, K].
Value flattenRows(OpBuilder &b, Location loc, Value x) {
  ArrayRef<int64_t> shape = tensorType(x).getShape();
  int64_t rows = 1;
  for (int64_t size : shape.drop_back())
    rows *= size;
  return ReshapeOp::create(b, loc, x, {rows, shape.back()});
}

/// C = op(A) op(B) with A = lhs (or its transpose), B = rhs (or its
/// transpose), so dA = G B^T and dB = A^T G, stored in the operands'
/// layouts. A 2-D rhs shared by a batched lhs sums dB over the batch by
/// folding the batch into the rows first.
void matmulGradients(OpBuilder &b, MatmulOp op, Value grad,
                     SmallVectorImpl<Value> &out) {
  Location loc = op.getLoc();
  Value lhs = op.getLhs(), rhs = op.getRhs();
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();

  Value dA = MatmulOp::create(b, loc, grad, rhs, false, !tr);
  out[0] = tl ? transposeLast2(b, loc, dA) : dA;

  bool sharedRhs =
      tensorType(rhs).getRank() == 2 && tensorType(lhs).getRank() > 2;
  if (sharedRhs) {
    Value a = flattenRows(b, loc, tl ? transposeLast2(b, loc, lhs) : lhs);
    Value g = flattenRows(b, loc, grad);
    out[1] = tr ? MatmulOp::create(b, loc, g, a, true, false)
                : MatmulOp::create(b, loc, a, g, true, false);
    return;
  }
  out[1] = tr ? MatmulOp::create(b, loc, grad, lhs, true, tl)
              : MatmulOp::create(b, loc, lhs, grad, !tl, false);
}

/// Whether `value` is a constant, which needs no gradient: building one
/// anyway would keep the other operand of a product alive for the backward
/// pass for nothing (a scale such as attention's 1 / sqrt(d) would save q).
bool isConstant(Value value) {
  return static_cast<bool>(value.getDefiningOp<arith::ConstantOp>());
}

/// `value`, or when it is the SiLU of a gated activation (read only by
/// products, Llama's silu(gate) * up) the SiLU rebuilt from its input at
/// the builder's point: the backward keeps the input for the SiLU's own
/// gradient, so keeping its output as well would save the [tokens, width]
/// of the gate twice. Megatron-Core's fused SwiGLU keeps only its input.
Value rematerializedGate(OpBuilder &b, Location loc, Value value) {
  auto silu = value.getDefiningOp<SiluOp>();
  if (!silu || !llvm::all_of(value.getUsers(),
                             [](Operation *user) { return isa<MulOp>(user); }))
    return value;
  return SiluOp::create(b, loc, silu.getX());
}

/// d(lhs op rhs) for the four broadcasting binary ops; none for a constant
/// operand.
LogicalResult binaryGradients(OpBuilder &b, Operation *op, Value grad,
                              SmallVectorImpl<Value> &out) {
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value dl, dr;
  if (isa<AddOp>(op)) {
    dl = dr = grad;
  } else if (isa<SubOp>(op)) {
    dl = grad;
    if (!isConstant(rhs))
      dr = NegOp::create(b, loc, grad);
  } else if (isa<MulOp>(op)) {
    if (!isConstant(lhs))
      dl = MulOp::create(b, loc, grad, rematerializedGate(b, loc, rhs));
    if (!isConstant(rhs))
      dr = MulOp::create(b, loc, grad, rematerializedGate(b, loc, lhs));
  } else {
    // y = l / r: dl = g / r, dr = -g * y / r.
    if (!isConstant(lhs))
      dl = DivOp::create(b, loc, grad, rhs);
    if (!isConstant(rhs)) {
      Value gy = MulOp::create(b, loc, grad, op->getResult(0));
      dr = NegOp::create(b, loc, DivOp::create(b, loc, gy, rhs));
    }
  }
  if (dl && !isConstant(lhs))
    out[0] = reduceToType(b, loc, dl, tensorType(lhs));
  if (dr && !isConstant(rhs))
    out[1] = reduceToType(b, loc, dr, tensorType(rhs));
  return success();
}

/// dx for y = f(x) of the pointwise math ops, from x, y and g.
Value unaryGradient(OpBuilder &b, Operation *op, Value g) {
  Location loc = op->getLoc();
  Value x = op->getOperand(0), y = op->getResult(0);
  return TypeSwitch<Operation *, Value>(op)
      .Case([&](NegOp) { return NegOp::create(b, loc, g); })
      .Case([&](ExpOp) { return MulOp::create(b, loc, g, y); })
      .Case([&](LogOp) { return DivOp::create(b, loc, g, x); })
      .Case([&](SqrtOp) { // g / (2 sqrt(x))
        return DivOp::create(b, loc, g, AddOp::create(b, loc, y, y));
      })
      .Case([&](RsqrtOp) { // g * -0.5 * x^-3/2 = g * -0.5 * y^3
        Value y3 = MulOp::create(b, loc, MulOp::create(b, loc, y, y), y);
        Value gy3 = MulOp::create(b, loc, g, y3);
        return MulOp::create(b, loc, gy3, scalar(b, loc, g, -0.5));
      })
      .Case([&](TanhOp) { // g * (1 - y^2)
        Value gy2 = MulOp::create(b, loc, g, MulOp::create(b, loc, y, y));
        return SubOp::create(b, loc, g, gy2);
      })
      .Default([](Operation *) { return Value(); });
}

/// The gradient of each input of a concat is its slice of the gradient.
void concatGradients(OpBuilder &b, ConcatOp op, Value grad,
                     SmallVectorImpl<Value> &out) {
  int64_t axis = op.getAxis();
  int64_t rank = tensorType(grad).getRank();
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    if (isFloatTensorType(input.getType())) {
      SmallVector<int64_t> offsets(rank, 0);
      offsets[axis] = offset;
      out[i] = SliceOp::create(b, op.getLoc(), tensorType(input), grad,
                               b.getDenseI64ArrayAttr(offsets));
    }
    offset += tensorType(input).getDimSize(axis);
  }
}

/// Rules for layout ops and reductions: each maps to its inverse.
LogicalResult layoutGradients(OpBuilder &b, Operation *op, Value g,
                              SmallVectorImpl<Value> &out) {
  Location loc = op->getLoc();
  RankedTensorType inType = tensorType(op->getOperand(0));
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ReshapeOp) {
        out[0] = ReshapeOp::create(b, loc, g, inType.getShape());
        return success();
      })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> perm = t.getPermutation();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = i;
        out[0] = TransposeOp::create(b, loc, g, inverse);
        return success();
      })
      .Case([&](BroadcastOp) {
        out[0] = reduceToType(b, loc, g, inType);
        return success();
      })
      .Case([&](SliceOp s) {
        out[0] = PadOp::create(b, loc, inType, g, s.getOffsetsAttr());
        return success();
      })
      .Case([&](PadOp p) {
        out[0] = SliceOp::create(b, loc, inType, g, p.getLowAttr());
        return success();
      })
      .Case([&](ConcatOp c) {
        concatGradients(b, c, g, out);
        return success();
      })
      .Case([&](ReduceSumOp r) {
        out[0] = unreduce(b, loc, g, inType, r.getDims());
        return success();
      })
      .Case([&](ReduceMeanOp r) {
        int64_t count = 1;
        for (int64_t dim : r.getDims())
          count *= inType.getDimSize(dim);
        Value scaled = MulOp::create(b, loc, g, scalar(b, loc, g, 1.0 / count));
        out[0] = unreduce(b, loc, scaled, inType, r.getDims());
        return success();
      })
      .Case([&](ReduceMaxOp r) {
        out[0] = ReduceMaxGradOp::create(b, loc, inType, g, r.getX(),
                                         r.getDimsAttr(), r.getKeepDimsAttr());
        return success();
      })
      .Case([&](CastOp) {
        out[0] = CastOp::create(b, loc, g, inType.getElementType());
        return success();
      })
      .Default([](Operation *) { return failure(); });
}

/// Rules for the fused ops: each has a fused gradient op. Reports ops that
/// have no rule at all.
LogicalResult fusedGradients(OpBuilder &b, Operation *op,
                             ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &out) {
  Location loc = op->getLoc();
  Value g = resultGrads[0];
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](LayerNormOp n) {
        Type gammaType = n.getGamma().getType();
        auto grad = LayerNormGradOp::create(b, loc, n.getX().getType(),
                                            gammaType, gammaType, g, n.getX(),
                                            n.getGamma(), n.getEpsilonAttr());
        out.assign({grad.getDx(), grad.getDgamma(), grad.getDbeta()});
        return success();
      })
      .Case([&](RMSNormOp n) {
        auto grad = RMSNormGradOp::create(b, loc, n.getX().getType(),
                                          n.getGamma().getType(), g, n.getX(),
                                          n.getGamma(), n.getEpsilonAttr());
        out.assign({grad.getDx(), grad.getDgamma()});
        return success();
      })
      .Case([&](GeluOp a) {
        out[0] = GeluGradOp::create(b, loc, g.getType(), g, a.getX());
        return success();
      })
      .Case([&](GeluErfOp a) {
        out[0] = GeluErfGradOp::create(b, loc, g.getType(), g, a.getX());
        return success();
      })
      .Case([&](SiluOp a) {
        out[0] = SiluGradOp::create(b, loc, g.getType(), g, a.getX());
        return success();
      })
      .Case([&](SoftmaxOp s) {
        out[0] = SoftmaxGradOp::create(b, loc, g.getType(), g, s.getResult());
        return success();
      })
      .Case([&](RopeOp r) {
        out[0] = RopeGradOp::create(
            b, loc, g.getType(), g, r.getThetaAttr(), r.getScalingFactorAttr(),
            r.getLowFreqFactorAttr(), r.getHighFreqFactorAttr(),
            r.getOriginalMaxPositionsAttr());
        return success();
      })
      .Case([&](AttentionOp a) -> LogicalResult {
        if (resultGrads[1])
          return a.emitError("loom-autodiff: the loss depends on the "
                             "log-sum-exp result of attention, which has no "
                             "gradient rule");
        auto grad = AttentionGradOp::create(
            b, loc, a.getQ().getType(), a.getK().getType(), a.getV().getType(),
            g, a.getQ(), a.getK(), a.getV(), a.getOut(), a.getLse(),
            a.getStep(), a.getCausalAttr(), a.getScaleAttr(),
            a.getDropoutRateAttr(), a.getDropoutSeedAttr(),
            a.getDropoutKeyAttr());
        out.assign({grad.getDq(), grad.getDk(), grad.getDv()});
        return success();
      })
      .Case([&](EmbeddingOp e) {
        out[0] = EmbeddingGradOp::create(b, loc, e.getTable().getType(), g,
                                         e.getIds());
        return success();
      })
      .Case([&](CrossEntropyOp c) {
        out[0] = CrossEntropyGradOp::create(b, loc, c.getLogits().getType(), g,
                                            c.getLogits(), c.getLabels(),
                                            c.getTokenCountAttr());
        return success();
      })
      .Case([&](DropoutOp d) {
        out[0] = DropoutGradOp::create(b, loc, g.getType(), g, d.getStep(),
                                       d.getRateAttr(), d.getSeedAttr(),
                                       d.getKeyAttr());
        return success();
      })
      .Default([](Operation *op) {
        return op->emitError() << "loom-autodiff: no gradient rule for '"
                               << op->getName() << "'";
      });
}

} // namespace

LogicalResult buildOperandGradients(OpBuilder &b, Operation *op,
                                    ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(op->getNumOperands(), Value());
  Value g = resultGrads.empty() ? Value() : resultGrads[0];

  if (isa<AddOp, SubOp, MulOp, DivOp>(op))
    return binaryGradients(b, op, g, operandGrads);
  if (isa<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp>(op)) {
    operandGrads[0] = unaryGradient(b, op, g);
    return success();
  }
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    matmulGradients(b, matmul, g, operandGrads);
    return success();
  }
  if (op->getNumResults() == 1 &&
      succeeded(layoutGradients(b, op, g, operandGrads)))
    return success();
  // The fused ops, and the error for an op without a rule. Only attention
  // has two results; its rule reports a loss that depends on the lse.
  return fusedGradients(b, op, resultGrads, operandGrads);
}

} // namespace loom
