//===- Gradients.cpp - The gradient rule of each loom op ------------------===//
//
// Implements GradientOpInterface for every op that has an adjoint. Rules
// are written in terms of loom ops only, so the backward pass is sharded,
// costed and lowered by the same machinery as the forward pass. Fused ops
// map to their fused gradient op; everything else to a few elementwise and
// layout ops.
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/GradientBuilders.h"
#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace loom;

#include "dialects/Loom/GradientInterface.cpp.inc"

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
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

/// Sets the gradients `dl` and `dr` of a broadcasting binary op's operands,
/// summed back to their shapes; none for a constant operand.
LogicalResult setBinaryGradients(OpBuilder &b, Operation *op, Value dl,
                                 Value dr, SmallVectorImpl<Value> &out) {
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  if (dl && !isConstant(lhs))
    out[0] = reduceToType(b, loc, dl, tensorType(lhs));
  if (dr && !isConstant(rhs))
    out[1] = reduceToType(b, loc, dr, tensorType(rhs));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildOperandGradients(OpBuilder &b,
                                           ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0];
  return setBinaryGradients(b, *this, g, g, out);
}

LogicalResult SubOp::buildOperandGradients(OpBuilder &b,
                                           ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0], dr;
  if (!isConstant(getRhs()))
    dr = NegOp::create(b, getLoc(), g);
  return setBinaryGradients(b, *this, g, dr, out);
}

LogicalResult MulOp::buildOperandGradients(OpBuilder &b,
                                           ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value g = resultGrads[0], dl, dr;
  if (!isConstant(getLhs()))
    dl = MulOp::create(b, loc, g, rematerializedGate(b, loc, getRhs()));
  if (!isConstant(getRhs()))
    dr = MulOp::create(b, loc, g, rematerializedGate(b, loc, getLhs()));
  return setBinaryGradients(b, *this, dl, dr, out);
}

/// y = l / r: dl = g / r, dr = -g * y / r.
LogicalResult DivOp::buildOperandGradients(OpBuilder &b,
                                           ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value g = resultGrads[0], dl, dr;
  if (!isConstant(getLhs()))
    dl = DivOp::create(b, loc, g, getRhs());
  if (!isConstant(getRhs())) {
    Value gy = MulOp::create(b, loc, g, getResult());
    dr = NegOp::create(b, loc, DivOp::create(b, loc, gy, getRhs()));
  }
  return setBinaryGradients(b, *this, dl, dr, out);
}

// The unary math ops build their gradients in their ODS definitions
// (ElementwiseOps.td).

LogicalResult CastOp::buildOperandGradients(OpBuilder &b,
                                            ArrayRef<Value> resultGrads,
                                            SmallVectorImpl<Value> &out) {
  out[0] = CastOp::create(b, getLoc(), resultGrads[0],
                          tensorType(getX()).getElementType());
  return success();
}

//===----------------------------------------------------------------------===//
// Layout ops and reductions: each maps to its inverse
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildOperandGradients(OpBuilder &b,
                                               ArrayRef<Value> resultGrads,
                                               SmallVectorImpl<Value> &out) {
  out[0] = ReshapeOp::create(b, getLoc(), resultGrads[0],
                             tensorType(getX()).getShape());
  return success();
}

LogicalResult TransposeOp::buildOperandGradients(OpBuilder &b,
                                                 ArrayRef<Value> resultGrads,
                                                 SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  out[0] = TransposeOp::create(b, getLoc(), resultGrads[0], inverse);
  return success();
}

LogicalResult BroadcastOp::buildOperandGradients(OpBuilder &b,
                                                 ArrayRef<Value> resultGrads,
                                                 SmallVectorImpl<Value> &out) {
  out[0] = reduceToType(b, getLoc(), resultGrads[0], tensorType(getX()));
  return success();
}

LogicalResult SliceOp::buildOperandGradients(OpBuilder &b,
                                             ArrayRef<Value> resultGrads,
                                             SmallVectorImpl<Value> &out) {
  out[0] = PadOp::create(b, getLoc(), tensorType(getX()), resultGrads[0],
                         getOffsetsAttr());
  return success();
}

LogicalResult PadOp::buildOperandGradients(OpBuilder &b,
                                           ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &out) {
  out[0] = SliceOp::create(b, getLoc(), tensorType(getX()), resultGrads[0],
                           getLowAttr());
  return success();
}

/// The gradient of each float input is its slice of the gradient.
LogicalResult ConcatOp::buildOperandGradients(OpBuilder &b,
                                              ArrayRef<Value> resultGrads,
                                              SmallVectorImpl<Value> &out) {
  Value grad = resultGrads[0];
  int64_t axis = getAxis();
  int64_t rank = tensorType(grad).getRank();
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    if (isFloatTensorType(input.getType())) {
      SmallVector<int64_t> offsets(rank, 0);
      offsets[axis] = offset;
      out[i] = SliceOp::create(b, getLoc(), tensorType(input), grad,
                               b.getDenseI64ArrayAttr(offsets));
    }
    offset += tensorType(input).getDimSize(axis);
  }
  return success();
}

LogicalResult ReduceSumOp::buildOperandGradients(OpBuilder &b,
                                                 ArrayRef<Value> resultGrads,
                                                 SmallVectorImpl<Value> &out) {
  out[0] = unreduce(b, getLoc(), resultGrads[0], tensorType(getX()), getDims());
  return success();
}

LogicalResult ReduceMeanOp::buildOperandGradients(OpBuilder &b,
                                                  ArrayRef<Value> resultGrads,
                                                  SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value g = resultGrads[0];
  RankedTensorType inType = tensorType(getX());
  int64_t count = 1;
  for (int64_t dim : getDims())
    count *= inType.getDimSize(dim);
  Value scaled = MulOp::create(b, loc, g, buildScalar(b, loc, g, 1.0 / count));
  out[0] = unreduce(b, loc, scaled, inType, getDims());
  return success();
}

/// Ties share the gradient (reduce_max_grad).
LogicalResult ReduceMaxOp::buildOperandGradients(OpBuilder &b,
                                                 ArrayRef<Value> resultGrads,
                                                 SmallVectorImpl<Value> &out) {
  out[0] =
      ReduceMaxGradOp::create(b, getLoc(), tensorType(getX()), resultGrads[0],
                              getX(), getDimsAttr(), getKeepDimsAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

/// C = op(A) op(B) with A = lhs (or its transpose), B = rhs (or its
/// transpose), so dA = G B^T and dB = A^T G, stored in the operands'
/// layouts. A 2-D rhs shared by a batched lhs sums dB over the batch by
/// folding the batch into the rows first.
LogicalResult MatmulOp::buildOperandGradients(OpBuilder &b,
                                              ArrayRef<Value> resultGrads,
                                              SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value grad = resultGrads[0];
  Value lhs = getLhs(), rhs = getRhs();
  bool tl = getTransposeLhs(), tr = getTransposeRhs();

  Value dA = MatmulOp::create(b, loc, grad, rhs, false, !tr);
  out[0] = tl ? transposeLast2(b, loc, dA) : dA;

  bool sharedRhs =
      tensorType(rhs).getRank() == 2 && tensorType(lhs).getRank() > 2;
  if (sharedRhs) {
    Value a = flattenRows(b, loc, tl ? transposeLast2(b, loc, lhs) : lhs);
    Value g = flattenRows(b, loc, grad);
    out[1] = tr ? MatmulOp::create(b, loc, g, a, true, false)
                : MatmulOp::create(b, loc, a, g, true, false);
    return success();
  }
  out[1] = tr ? MatmulOp::create(b, loc, grad, lhs, true, tl)
              : MatmulOp::create(b, loc, lhs, grad, !tl, false);
  return success();
}

//===----------------------------------------------------------------------===//
// Fused ops: each has a fused gradient op
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::buildOperandGradients(OpBuilder &b,
                                                 ArrayRef<Value> resultGrads,
                                                 SmallVectorImpl<Value> &out) {
  Type gammaType = getGamma().getType();
  auto grad = LayerNormGradOp::create(b, getLoc(), getX().getType(), gammaType,
                                      gammaType, resultGrads[0], getX(),
                                      getGamma(), getEpsilonAttr());
  out[0] = grad.getDx();
  out[1] = grad.getDgamma();
  out[2] = grad.getDbeta();
  return success();
}

LogicalResult RMSNormOp::buildOperandGradients(OpBuilder &b,
                                               ArrayRef<Value> resultGrads,
                                               SmallVectorImpl<Value> &out) {
  auto grad = RMSNormGradOp::create(b, getLoc(), getX().getType(),
                                    getGamma().getType(), resultGrads[0],
                                    getX(), getGamma(), getEpsilonAttr());
  out[0] = grad.getDx();
  out[1] = grad.getDgamma();
  return success();
}

LogicalResult GeluOp::buildOperandGradients(OpBuilder &b,
                                            ArrayRef<Value> resultGrads,
                                            SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0];
  out[0] = GeluGradOp::create(b, getLoc(), g.getType(), g, getX());
  return success();
}

LogicalResult GeluErfOp::buildOperandGradients(OpBuilder &b,
                                               ArrayRef<Value> resultGrads,
                                               SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0];
  out[0] = GeluErfGradOp::create(b, getLoc(), g.getType(), g, getX());
  return success();
}

LogicalResult SiluOp::buildOperandGradients(OpBuilder &b,
                                            ArrayRef<Value> resultGrads,
                                            SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0];
  out[0] = SiluGradOp::create(b, getLoc(), g.getType(), g, getX());
  return success();
}

LogicalResult SoftmaxOp::buildOperandGradients(OpBuilder &b,
                                               ArrayRef<Value> resultGrads,
                                               SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0];
  out[0] = SoftmaxGradOp::create(b, getLoc(), g.getType(), g, getResult());
  return success();
}

LogicalResult RopeOp::buildOperandGradients(OpBuilder &b,
                                            ArrayRef<Value> resultGrads,
                                            SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0];
  out[0] = RopeGradOp::create(b, getLoc(), g.getType(), g, getThetaAttr(),
                              getScalingFactorAttr(), getLowFreqFactorAttr(),
                              getHighFreqFactorAttr(),
                              getOriginalMaxPositionsAttr());
  return success();
}

/// The log-sum-exp result is kept for the backward pass only; a loss that
/// depends on it has no rule.
LogicalResult AttentionOp::buildOperandGradients(OpBuilder &b,
                                                 ArrayRef<Value> resultGrads,
                                                 SmallVectorImpl<Value> &out) {
  if (resultGrads[1])
    return emitError("loom-autodiff: the loss depends on the log-sum-exp "
                     "result of attention, which has no gradient rule");
  auto grad = AttentionGradOp::create(
      b, getLoc(), getQ().getType(), getK().getType(), getV().getType(),
      resultGrads[0], getQ(), getK(), getV(), getOut(), getLse(), getStep(),
      getCausalAttr(), getScaleAttr(), getDropoutRateAttr(),
      getDropoutSeedAttr(), getDropoutKeyAttr());
  out[0] = grad.getDq();
  out[1] = grad.getDk();
  out[2] = grad.getDv();
  return success();
}

LogicalResult EmbeddingOp::buildOperandGradients(OpBuilder &b,
                                                 ArrayRef<Value> resultGrads,
                                                 SmallVectorImpl<Value> &out) {
  out[0] = EmbeddingGradOp::create(b, getLoc(), getTable().getType(),
                                   resultGrads[0], getIds());
  return success();
}

LogicalResult
CrossEntropyOp::buildOperandGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &out) {
  out[0] = CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(),
                                      resultGrads[0], getLogits(), getLabels(),
                                      getTokenCountAttr());
  return success();
}

LogicalResult DropoutOp::buildOperandGradients(OpBuilder &b,
                                               ArrayRef<Value> resultGrads,
                                               SmallVectorImpl<Value> &out) {
  Value g = resultGrads[0];
  out[0] = DropoutGradOp::create(b, getLoc(), g.getType(), g, getStep(),
                                 getRateAttr(), getSeedAttr(), getKeyAttr());
  return success();
}
