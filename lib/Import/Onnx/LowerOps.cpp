//===- LowerOps.cpp - ONNX nodes to loom ops, one by one
//-------------------===//
//
// What no fusion pattern absorbed: each node becomes the loom ops that
// compute it on the static shapes of the analysis. Float tensors are in the
// compute type (so a Cast between float types is nothing), integer tensors
// are the i32 token ids and labels. Ops that only exist at import (Shape,
// Range, comparisons, ...) were folded; meeting one here means its operands
// depend on the tokens, which Loom cannot run.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "dialects/Loom/LoomOps.h"

#include <cmath>

using namespace mlir;

namespace loom::onnx_import {
namespace {

class OpLowering {
public:
  OpLowering(GraphImporter &im, const OnnxNode &node)
      : im(im), node(node), b(im.builder()), loc(im.locationOf(node)) {}

  bool run();

private:
  Value in(size_t i) { return im.ir(node.input(i)); }
  const ValueType &inType(size_t i) { return im.typeOf(node.input(i)); }
  const ValueType &outType(size_t k = 0) { return im.typeOf(node.outputs[k]); }
  bool define(Value value, size_t k = 0) {
    if (!value)
      return false;
    im.define(node.outputs[k], value);
    return true;
  }
  bool fail(const Twine &message) {
    im.fail(node, message);
    return false;
  }
  bool isFloatValue(size_t i) { return isFloat(inType(i).dtype); }

  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (cast<RankedTensorType>(x.getType()).getShape() == shape)
      return x;
    return ReshapeOp::create(b, loc, x, shape);
  }
  Value one(ArrayRef<int64_t> shape = {}) { return im.splat(1.0, shape, loc); }

  bool binary();
  bool power();
  bool unary();
  bool matmul();
  bool gemm();
  bool slice();
  bool split();
  bool gather();
  bool where();
  bool reduce();
  bool layerNorm();
  bool softmaxCrossEntropy();
  bool negativeLogLikelihood();

  GraphImporter &im;
  const OnnxNode &node;
  OpBuilder &b;
  Location loc;
};

bool OpLowering::binary() {
  if (!isFloatValue(0) || !isFloatValue(1))
    return fail("computes on integer tensors at run time (only the token "
                "ids and labels are integer tensors Loom runs)");
  Value lhs = in(0), rhs = in(1);
  if (!lhs || !rhs)
    return false;
  StringRef op = node.opType;
  if (op == "Add")
    return define(AddOp::create(b, loc, lhs, rhs));
  if (op == "Sub")
    return define(SubOp::create(b, loc, lhs, rhs));
  if (op == "Mul")
    return define(MulOp::create(b, loc, lhs, rhs));
  return define(DivOp::create(b, loc, lhs, rhs));
}

/// x^p for the exponents models use: 2, 3, 0.5, -0.5, 1, -1.
bool OpLowering::power() {
  std::optional<double> p = im.scalar(node.input(1));
  if (!p)
    return fail("has an exponent that is not a constant");
  Value x = in(0);
  if (!x)
    return false;
  if (*p == 1)
    return define(x);
  if (*p == 2)
    return define(MulOp::create(b, loc, x, x));
  if (*p == 3)
    return define(MulOp::create(b, loc, MulOp::create(b, loc, x, x), x));
  if (*p == 0.5)
    return define(SqrtOp::create(b, loc, x));
  if (*p == -0.5)
    return define(RsqrtOp::create(b, loc, x));
  if (*p == -1)
    return define(DivOp::create(b, loc, one(), x));
  return fail("raises to the power " + std::to_string(*p) +
              " (Loom takes exponents 1, 2, 3, 0.5, -0.5 and -1)");
}

bool OpLowering::unary() {
  StringRef op = node.opType;
  if (!isFloatValue(0))
    return fail("computes on integer tensors at run time");
  if (op == "Erf" || op == "Cos" || op == "Sin" || op == "Abs" ||
      op == "Relu" || op == "Floor" || op == "Ceil")
    return fail("has no loom op outside a fused pattern (erf: the exact "
                "GELU; cos and sin: rotary tables folded at import)");
  Value x = in(0);
  if (!x)
    return false;
  if (op == "Sqrt")
    return define(SqrtOp::create(b, loc, x));
  if (op == "Neg")
    return define(NegOp::create(b, loc, x));
  if (op == "Tanh")
    return define(TanhOp::create(b, loc, x));
  if (op == "Exp")
    return define(ExpOp::create(b, loc, x));
  if (op == "Log")
    return define(LogOp::create(b, loc, x));
  if (op == "Reciprocal")
    return define(DivOp::create(b, loc, one(), x));
  // Sigmoid outside x * sigmoid(x): 1 / (1 + exp(-x)).
  Value e = ExpOp::create(b, loc, NegOp::create(b, loc, x));
  return define(DivOp::create(b, loc, one(), AddOp::create(b, loc, one(), e)));
}

/// numpy matmul: a 2-D rhs is a shared weight; batch dimensions are
/// broadcast to the result's first.
bool OpLowering::matmul() {
  if (!isFloatValue(0) || !isFloatValue(1))
    return fail("multiplies integer tensors");
  Value lhs = in(0), rhs = in(1);
  if (!lhs || !rhs)
    return false;
  ArrayRef<int64_t> a = inType(0).shape, w = inType(1).shape;
  ArrayRef<int64_t> out = outType().shape;
  if (w.size() == 1) { // a vector: [K] -> [K, 1], then drop the column
    Value column = reshape(rhs, {w[0], 1});
    Value product = MatmulOp::create(b, loc, lhs, column);
    return define(reshape(product, out));
  }
  if (a.size() < 2)
    return fail("takes a vector as its lhs");
  SmallVector<int64_t, 4> batch(out.begin(), out.end() - 2);
  bool sharedWeight =
      llvm::all_of(w.drop_back(2), [](int64_t d) { return d == 1; });
  if (sharedWeight) {
    rhs = reshape(rhs, w.take_back(2));
    if (a.size() - 2 < batch.size()) {
      SmallVector<int64_t, 4> shape = batch;
      shape.append(a.end() - 2, a.end());
      lhs = BroadcastOp::create(b, loc, lhs, shape);
    }
    return define(MatmulOp::create(b, loc, lhs, rhs));
  }
  auto full = [&](Value x, ArrayRef<int64_t> shape) {
    SmallVector<int64_t, 4> target = batch;
    target.append(shape.end() - 2, shape.end());
    if (ArrayRef<int64_t>(target) == shape)
      return x;
    return Value(BroadcastOp::create(b, loc, x, target));
  };
  return define(MatmulOp::create(b, loc, full(lhs, a), full(rhs, w)));
}

/// alpha * op(A) op(B) + beta * C.
bool OpLowering::gemm() {
  Value lhs = in(0), rhs = in(1);
  if (!lhs || !rhs)
    return false;
  Value y = MatmulOp::create(b, loc, lhs, rhs, node.intAttr("transA", 0) != 0,
                             node.intAttr("transB", 0) != 0);
  double alpha = node.floatAttr("alpha", 1.0), beta = node.floatAttr("beta", 1);
  if (alpha != 1.0)
    y = MulOp::create(b, loc, y, im.splat(alpha, {}, loc));
  if (!node.input(2).empty() && beta != 0.0) {
    Value c = in(2);
    if (!c)
      return false;
    if (beta != 1.0)
      c = MulOp::create(b, loc, c, im.splat(beta, {}, loc));
    y = AddOp::create(b, loc, y, c);
  }
  return define(y);
}

bool OpLowering::slice() {
  auto box = sliceBox(im.operandsOf(node), inType(0).shape);
  if (!box)
    return fail(toString(box.takeError()));
  if (llvm::any_of(box->steps, [](int64_t s) { return s != 1; }))
    return fail("slices with a step other than 1");
  Value x = in(0);
  if (!x)
    return false;
  return define(SliceOp::create(b, loc, im.tensorType(outType()), x,
                                b.getDenseI64ArrayAttr(box->starts)));
}

bool OpLowering::split() {
  Value x = in(0);
  if (!x)
    return false;
  int64_t rank = inType(0).shape.size();
  int64_t axis = node.intAttr("axis", 0);
  if (axis < 0)
    axis += rank;
  SmallVector<int64_t, 4> offsets(rank, 0);
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const ValueType &type = outType(k);
    define(SliceOp::create(b, loc, im.tensorType(type), x,
                           b.getDenseI64ArrayAttr(offsets)),
           k);
    offsets[axis] += type.shape[axis];
  }
  return true;
}

/// Gather: the embedding of token ids, or rows picked by constant indices
/// (a position table's first S rows: a slice).
bool OpLowering::gather() {
  const ValueType &data = inType(0), &indices = inType(1);
  int64_t axis = node.intAttr("axis", 0);
  if (axis < 0)
    axis += data.shape.size();
  if (!isFloat(data.dtype))
    return fail("gathers from an integer tensor at run time");
  if (const HostTensor *ids = im.constant(node.input(1))) {
    // Each index in [-extent, extent), as ONNX allows (negative: from the
    // end), checked before any arithmetic on it.
    int64_t n = ids->numElements(), extent = data.shape[axis], first = 0;
    for (int64_t k = 0; k < n; ++k) {
      int64_t id = ids->integer(k);
      if (id < -extent || id >= extent)
        return fail("gathers index " + Twine(id) + ", out of range for " +
                    Twine(extent) + " rows");
      int64_t row = id < 0 ? id + extent : id;
      if (k == 0)
        first = row;
      else if (row != first + k)
        return fail("gathers rows that are not consecutive");
    }
    Value x = in(0);
    if (!x)
      return false;
    SmallVector<int64_t, 4> box(data.shape.begin(), data.shape.end());
    box[axis] = n;
    SmallVector<int64_t, 4> offsets(box.size(), 0);
    offsets[axis] = first;
    Value rows =
        SliceOp::create(b, loc, RankedTensorType::get(box, im.computeType()), x,
                        b.getDenseI64ArrayAttr(offsets));
    return define(reshape(rows, outType().shape));
  }
  if (axis != 0 || data.shape.size() != 2 || isFloat(indices.dtype))
    return fail("gathers by run-time indices other than token ids from a "
                "[vocabulary, width] table");
  Value table = in(0), ids = in(1);
  if (!table || !ids)
    return false;
  return define(EmbeddingOp::create(b, loc, table, ids));
}

/// Where with a constant condition: x * m + y * (1 - m), with a constant
/// branch folded into an additive term (so that a -inf fill stays -inf
/// where it is chosen and adds 0 elsewhere).
bool OpLowering::where() {
  const HostTensor *cond = im.constant(node.input(0));
  if (!cond)
    return fail("selects by a condition computed at run time");
  const ValueType &out = outType();
  if (!isFloat(out.dtype))
    return fail("selects integer tensors at run time");
  HostTensor mask, term;
  mask.dtype = term.dtype = DType::F32;
  mask.shape = term.shape = out.shape;
  int64_t n = out.numElements();
  mask.f.assign(n, 0.0);
  term.f.assign(n, 0.0);
  // Element e of each operand, broadcast to the result's shape.
  auto at = [&](const HostTensor &t, int64_t e) {
    int64_t index = 0, stride = 1, rest = e;
    size_t offset = out.shape.size() - t.shape.size();
    SmallVector<int64_t, 4> coords(out.shape.size());
    for (int64_t d = out.shape.size() - 1; d >= 0; --d) {
      coords[d] = rest % out.shape[d];
      rest /= out.shape[d];
    }
    for (int64_t d = t.shape.size() - 1; d >= 0; --d) {
      if (t.shape[d] != 1)
        index += coords[d + offset] * stride;
      stride *= t.shape[d];
    }
    return t.value(index);
  };
  const HostTensor *x = im.constant(node.input(1));
  const HostTensor *y = im.constant(node.input(2));
  for (int64_t e = 0; e < n; ++e) {
    bool c = at(*cond, e) != 0;
    mask.f[e] = c;
    if (c && x)
      term.f[e] = at(*x, e);
    if (!c && y)
      term.f[e] = at(*y, e);
  }
  Value m = im.constantOf(mask, {DType::F32, out.shape}, loc);
  Value result = im.constantOf(term, {DType::F32, out.shape}, loc);
  if (!x) {
    Value value = in(1);
    if (!value)
      return false;
    result = AddOp::create(b, loc, MulOp::create(b, loc, value, m), result);
  }
  if (!y) {
    Value value = in(2);
    if (!value)
      return false;
    Value inverse = SubOp::create(b, loc, one(), m);
    result =
        AddOp::create(b, loc, MulOp::create(b, loc, value, inverse), result);
  }
  return define(result);
}

bool OpLowering::reduce() {
  auto axes = nodeAxes(node, im.operandsOf(node), 1, inType(0).shape.size());
  if (!axes)
    return fail(toString(axes.takeError()));
  SmallVector<int64_t, 4> dims;
  if (*axes)
    dims = **axes;
  else if (node.intAttr("noop_with_empty_axes", 0))
    return define(in(0));
  else
    for (size_t d = 0; d < inType(0).shape.size(); ++d)
      dims.push_back(d);
  llvm::sort(dims);
  bool keep = node.intAttr("keepdims", 1) != 0;
  Value x = in(0);
  if (!x)
    return false;
  StringRef op = node.opType;
  if (op == "ReduceMean")
    return define(ReduceMeanOp::create(b, loc, x, dims, keep));
  if (op == "ReduceSum")
    return define(ReduceSumOp::create(b, loc, x, dims, keep));
  if (op == "ReduceMax")
    return define(ReduceMaxOp::create(b, loc, x, dims, keep));
  return fail("has no loom op (Loom reduces by sum, mean and max)");
}

bool OpLowering::layerNorm() {
  int64_t rank = inType(0).shape.size();
  int64_t axis = node.intAttr("axis", -1);
  if (axis != -1 && axis != rank - 1)
    return fail("normalizes from axis " + Twine(axis) +
                " (Loom normalizes over the last axis)");
  for (size_t k = 1; k < node.outputs.size(); ++k)
    if (!node.outputs[k].empty() && im.state(node.outputs[k])->uses)
      return fail("has its mean or inverse deviation read");
  Value x = in(0), gamma = in(1);
  if (!x || !gamma)
    return false;
  Value beta =
      node.input(2).empty() ? im.splat(0.0, inType(1).shape, loc) : in(2);
  if (!beta)
    return false;
  im.noteFused("layernorm");
  double eps = node.floatAttr("epsilon", 1e-5);
  return define(LayerNormOp::create(b, loc, x, gamma, beta,
                                    b.getF64FloatAttr(shortestDecimal(eps))));
}

/// The mean cross-entropy of scores [N, C] or [N, C, d...] (classes in
/// dimension 1, as ONNX has them) against labels [N] or [N, d...].
Value crossEntropy(GraphImporter &im, OpBuilder &b, Location loc,
                   const OnnxNode &node, StringRef scoresName,
                   StringRef labelsName) {
  const ValueType &scores = im.typeOf(scoresName);
  Value logits = im.ir(scoresName), labels = im.ir(labelsName);
  if (!logits || !labels)
    return Value();
  if (scores.shape.size() > 2) { // classes last
    SmallVector<int64_t, 4> perm = {0};
    for (size_t d = 2; d < scores.shape.size(); ++d)
      perm.push_back(d);
    perm.push_back(1);
    logits = TransposeOp::create(b, loc, logits, perm);
  }
  return CrossEntropyOp::create(b, loc, logits, labels);
}

bool OpLowering::softmaxCrossEntropy() {
  if (node.outputs.size() > 1 && !node.outputs[1].empty() &&
      im.state(node.outputs[1])->uses)
    return fail("has its log-probabilities read");
  im.noteFused("cross_entropy");
  return define(crossEntropy(im, b, loc, node, node.input(0), node.input(1)));
}

/// NegativeLogLikelihoodLoss of LogSoftmax over the classes: the
/// cross-entropy.
bool OpLowering::negativeLogLikelihood() {
  const OnnxNode *logSoftmax = im.producer(node.input(0));
  if (!logSoftmax || logSoftmax->opType != "LogSoftmax")
    return fail("reads something other than a LogSoftmax (Loom takes the "
                "negative log-likelihood of log-probabilities)");
  int64_t rank = im.typeOf(logSoftmax->input(0)).shape.size();
  int64_t axis = logSoftmax->intAttr("axis", -1);
  if (axis < 0)
    axis += rank;
  if (axis != 1 && !(rank == 2 && axis == 1))
    return fail("reads a LogSoftmax over axis " + Twine(axis) +
                ", not the classes (axis 1)");
  im.noteFused("cross_entropy");
  return define(
      crossEntropy(im, b, loc, node, logSoftmax->input(0), node.input(1)));
}

bool OpLowering::run() {
  StringRef op = node.opType;
  if (op == "Identity" || op == "Dropout")
    return define(in(0));
  if (op == "Cast" || op == "CastLike") {
    if (isFloat(inType(0).dtype) != isFloat(outType().dtype))
      return fail("casts between float and integer tensors at run time");
    return define(in(0)); // float tensors are all in the compute type
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div")
    return binary();
  if (op == "Pow")
    return power();
  if (op == "MatMul")
    return matmul();
  if (op == "Gemm")
    return gemm();
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Flatten") {
    Value x = in(0);
    return x && define(reshape(x, outType().shape));
  }
  if (op == "Transpose") {
    Value x = in(0);
    return x &&
           define(TransposeOp::create(
               b, loc, x, transposePermutation(node, inType(0).shape.size())));
  }
  if (op == "Expand") {
    Value x = in(0);
    if (!x)
      return false;
    if (inType(0).shape == outType().shape)
      return define(x);
    return define(BroadcastOp::create(b, loc, x, outType().shape));
  }
  if (op == "Slice")
    return slice();
  if (op == "Split")
    return split();
  if (op == "Concat") {
    SmallVector<Value> parts;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (Value part = in(i); part)
        parts.push_back(part);
      else
        return false;
    int64_t axis = node.intAttr("axis", 0);
    if (axis < 0)
      axis += outType().shape.size();
    return define(ConcatOp::create(b, loc, parts, axis));
  }
  if (op == "Gather")
    return gather();
  if (op == "Where")
    return where();
  if (op == "Softmax") {
    int64_t rank = inType(0).shape.size(), axis = node.intAttr("axis", -1);
    if (axis != -1 && axis != rank - 1)
      return fail("takes the softmax over axis " + Twine(axis) +
                  " (Loom takes it over the last)");
    Value x = in(0);
    return x && define(SoftmaxOp::create(b, loc, x, false));
  }
  if (op == "LogSoftmax") {
    int64_t rank = inType(0).shape.size(), axis = node.intAttr("axis", -1);
    if (axis != -1 && axis != rank - 1)
      return fail("takes the log-softmax over axis " + Twine(axis));
    Value x = in(0);
    return x && define(LogOp::create(b, loc, SoftmaxOp::create(b, loc, x)));
  }
  if (op.starts_with("Reduce"))
    return reduce();
  if (op == "LayerNormalization")
    return layerNorm();
  if (op == "SoftmaxCrossEntropyLoss")
    return softmaxCrossEntropy();
  if (op == "NegativeLogLikelihoodLoss")
    return negativeLogLikelihood();
  if (llvm::is_contained({"Sqrt", "Reciprocal", "Neg", "Tanh", "Erf", "Sigmoid",
                          "Cos", "Sin", "Exp", "Log", "Abs", "Relu", "Floor",
                          "Ceil"},
                         op))
    return unary();
  return fail("computes at run time what Loom only folds at import (its "
              "operands depend on the token ids)");
}

} // namespace

bool lowerNode(GraphImporter &importer, const OnnxNode &node) {
  return OpLowering(importer, node).run();
}

} // namespace loom::onnx_import
