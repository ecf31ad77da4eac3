//===- Evaluate.cpp - Types and folding of ONNX nodes ---------------------===//
//
// One evaluator per op type: the result types (ONNX's operator definitions,
// opsets 13 to 18), and, on known operands, the results. Floats fold in
// double and are rounded to float32 where the result is float32, as the
// exporter's own constant folding would compute them; integers in int64.
//
//===----------------------------------------------------------------------===//

#include "EvaluateSupport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>

using namespace llvm;

namespace loom::onnx_import {

int64_t ValueType::numElements() const { return shapeProduct(shape); }

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    text += (i ? ", " : "") + std::to_string(d);
  return text + "]";
}

double shortestDecimal(double value) {
  for (int digits = 1; digits <= 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    double candidate = std::strtod(text, nullptr);
    if (static_cast<float>(candidate) == static_cast<float>(value))
      return candidate;
  }
  return value;
}

namespace detail {

Error failure(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message.str());
}

Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, StringRef what) {
  if (rank <= 0)
    return failure("takes an " + what + " of a scalar");
  if (axis < -rank || axis >= rank)
    return failure(
        formatv("{0} {1} is out of range for rank {2}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

/// Row-major strides of `shape`.
SmallVector<int64_t, 4> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t, 4> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// numpy broadcasting of two shapes.
Expected<SmallVector<int64_t, 4>> broadcast(ArrayRef<int64_t> a,
                                            ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t, 4> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure("shapes " + shapeText(a) + " and " + shapeText(b) +
                     " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// For each element of `out`, the index of the element of a tensor of
/// `shape` that broadcasts to it.
std::vector<int64_t> broadcastIndices(ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> out) {
  size_t offset = out.size() - shape.size();
  SmallVector<int64_t, 4> inStrides = stridesOf(shape);
  SmallVector<int64_t, 4> outStrides = stridesOf(out);
  int64_t n = 1;
  for (int64_t d : out)
    n *= d;
  std::vector<int64_t> indices(n);
  for (int64_t e = 0; e < n; ++e) {
    int64_t index = 0, rest = e;
    for (size_t d = 0; d < out.size(); ++d) {
      int64_t coordinate = rest / outStrides[d];
      rest %= outStrides[d];
      if (d >= offset && shape[d - offset] != 1)
        index += coordinate * inStrides[d - offset];
    }
    indices[e] = index;
  }
  return indices;
}

/// Rounds a folded float to its dtype's precision.
double roundTo(DType type, double value) {
  if (type == DType::F32 || type == DType::F16 || type == DType::BF16)
    return static_cast<float>(value);
  return value;
}

HostTensor makeLike(DType dtype, ArrayRef<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  int64_t n = t.numElements();
  if (t.isFloat())
    t.f.assign(n, 0.0);
  else
    t.i.assign(n, 0);
  return t;
}

void setValue(HostTensor &t, int64_t e, double value) {
  if (t.isFloat())
    t.f[e] = roundTo(t.dtype, value);
  else if (t.dtype == DType::Bool)
    t.i[e] = value != 0;
  else
    t.i[e] = toInteger(value);
}

/// A copy of element `from` of `in` to element `to` of `out` (same dtype
/// family), exact for int64.
void copyElement(const HostTensor &in, int64_t from, HostTensor &out,
                 int64_t to) {
  if (out.isFloat())
    out.f[to] = in.isFloat() ? in.f[from] : double(in.i[from]);
  else
    out.i[to] = in.isFloat() ? int64_t(in.f[from]) : in.i[from];
}

/// The data of a constant operand, or an error naming its role.
Expected<const HostTensor *> constantOperand(ArrayRef<Operand> inputs,
                                             size_t index, StringRef role) {
  if (index >= inputs.size() || !inputs[index].present)
    return failure("needs its " + role + " input");
  if (!inputs[index].data)
    return failure("its " + role +
                   " input is not a constant after folding (a shape computed "
                   "from data Loom cannot fold at import)");
  return inputs[index].data;
}

Expected<SmallVector<int64_t, 4>> intsOf(ArrayRef<Operand> inputs, size_t index,
                                         StringRef role) {
  auto data = constantOperand(inputs, index, role);
  if (!data)
    return data.takeError();
  SmallVector<int64_t, 4> values;
  for (int64_t e = 0, n = (*data)->numElements(); e < n; ++e)
    values.push_back((*data)->integer(e));
  return values;
}

/// Gathers `out`'s elements from `in` by a per-element source index.
HostTensor gatherElements(const HostTensor &in, DType dtype,
                          ArrayRef<int64_t> shape,
                          const std::function<int64_t(int64_t)> &source) {
  HostTensor out = makeLike(dtype, shape);
  for (int64_t e = 0, n = out.numElements(); e < n; ++e)
    copyElement(in, source(e), out, e);
  return out;
}

/// Evaluation with one result of `type` whose element e is element
/// `source(e)` of operand 0 (reshapes, transposes, slices, ...).
Expected<Evaluation> rearrange(ArrayRef<Operand> in, ValueType type,
                               bool wantData,
                               const std::function<int64_t(int64_t)> &source) {
  Evaluation result;
  result.types.push_back(type);
  if (wantData && in[0].data) {
    result.data.emplace();
    result.data->push_back(
        gatherElements(*in[0].data, type.dtype, type.shape, source));
  }
  return result;
}

Expected<Evaluation> single(HostTensor t) {
  Evaluation result;
  result.types.push_back({t.dtype, t.shape});
  result.data.emplace();
  result.data->push_back(std::move(t));
  return result;
}

} // namespace detail

namespace {
using namespace detail;

/// The most elements a folded constant may have (a causal mask of 8192
/// positions, a rotary table of far more).
constexpr int64_t kMaxFoldedElements = int64_t(1) << 26;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

using Binary = std::function<double(double, double)>;
using IntBinary = std::function<int64_t(int64_t, int64_t)>;

struct BinaryOp {
  Binary real;
  IntBinary integer; // null: computed in double
  bool comparison = false;
};

// Integer arithmetic wraps in two's complement, as the int64 tensors of an
// ONNX runtime do (the model's bytes may hold any values; C++'s signed
// overflow would be undefined).
int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }
int64_t wrappingAdd(int64_t a, int64_t b) { return wrap(uint64_t(a) + b); }
int64_t wrappingSub(int64_t a, int64_t b) { return wrap(uint64_t(a) - b); }
int64_t wrappingMul(int64_t a, int64_t b) {
  return wrap(uint64_t(a) * uint64_t(b));
}
int64_t wrappingDiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return wrappingSub(0, a); // INT64_MIN / -1 wraps to INT64_MIN
  return a / b;
}

std::optional<BinaryOp> binaryOp(StringRef op) {
  auto cmp = [](Binary f) { return BinaryOp{f, nullptr, true}; };
  if (op == "Add")
    return BinaryOp{std::plus<double>(), wrappingAdd};
  if (op == "Sub")
    return BinaryOp{std::minus<double>(), wrappingSub};
  if (op == "Mul")
    return BinaryOp{std::multiplies<double>(), wrappingMul};
  if (op == "Div")
    return BinaryOp{std::divides<double>(), wrappingDiv};
  if (op == "Pow")
    return BinaryOp{[](double a, double b) { return std::pow(a, b); }, nullptr};
  if (op == "Max")
    return BinaryOp{[](double a, double b) { return std::max(a, b); },
                    [](int64_t a, int64_t b) { return std::max(a, b); }};
  if (op == "Min")
    return BinaryOp{[](double a, double b) { return std::min(a, b); },
                    [](int64_t a, int64_t b) { return std::min(a, b); }};
  if (op == "Equal")
    return cmp([](double a, double b) { return double(a == b); });
  if (op == "Less")
    return cmp([](double a, double b) { return double(a < b); });
  if (op == "LessOrEqual")
    return cmp([](double a, double b) { return double(a <= b); });
  if (op == "Greater")
    return cmp([](double a, double b) { return double(a > b); });
  if (op == "GreaterOrEqual")
    return cmp([](double a, double b) { return double(a >= b); });
  if (op == "And")
    return cmp([](double a, double b) { return double(a != 0 && b != 0); });
  if (op == "Or")
    return cmp([](double a, double b) { return double(a != 0 || b != 0); });
  if (op == "Xor")
    return cmp([](double a, double b) { return double((a != 0) != (b != 0)); });
  return std::nullopt;
}

std::optional<std::function<double(double)>> unaryOp(StringRef op) {
  return StringSwitch<std::optional<std::function<double(double)>>>(op)
      .Case("Sqrt", [](double x) { return std::sqrt(x); })
      .Case("Reciprocal", [](double x) { return 1.0 / x; })
      .Case("Neg", [](double x) { return -x; })
      .Case("Tanh", [](double x) { return std::tanh(x); })
      .Case("Erf", [](double x) { return std::erf(x); })
      .Case("Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); })
      .Case("Cos", [](double x) { return std::cos(x); })
      .Case("Sin", [](double x) { return std::sin(x); })
      .Case("Exp", [](double x) { return std::exp(x); })
      .Case("Log", [](double x) { return std::log(x); })
      .Case("Abs", [](double x) { return std::fabs(x); })
      .Case("Relu", [](double x) { return x > 0 ? x : 0.0; })
      .Case("Floor", [](double x) { return std::floor(x); })
      .Case("Ceil", [](double x) { return std::ceil(x); })
      .Case("Not", [](double x) { return double(x == 0); })
      .Default(std::nullopt);
}

Expected<Evaluation> evaluateBinary(const OnnxNode &node, const BinaryOp &op,
                                    ArrayRef<Operand> in, bool wantData) {
  if (in.size() != 2 || !in[0].present || !in[1].present)
    return failure("needs two inputs");
  auto shape = broadcast(in[0].type.shape, in[1].type.shape);
  if (!shape)
    return shape.takeError();
  DType dtype = op.comparison ? DType::Bool : in[0].type.dtype;
  Evaluation result;
  result.types.push_back({dtype, *shape});
  if (!wantData || !in[0].data || !in[1].data)
    return result;
  const HostTensor &a = *in[0].data, &b = *in[1].data;
  HostTensor out = makeLike(dtype, *shape);
  std::vector<int64_t> ia = broadcastIndices(a.shape, *shape);
  std::vector<int64_t> ib = broadcastIndices(b.shape, *shape);
  bool integer = !a.isFloat() && !b.isFloat() && op.integer && !out.isFloat();
  for (size_t e = 0; e < ia.size(); ++e) {
    if (integer)
      out.i[e] = op.integer(a.i[ia[e]], b.i[ib[e]]);
    else
      setValue(out, e, op.real(a.value(ia[e]), b.value(ib[e])));
  }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

Expected<Evaluation> evaluateUnary(const OnnxNode &node,
                                   const std::function<double(double)> &fn,
                                   ArrayRef<Operand> in, bool wantData) {
  if (in.empty() || !in[0].present)
    return failure("needs an input");
  DType dtype = node.opType == "Not" ? DType::Bool : in[0].type.dtype;
  Evaluation result;
  result.types.push_back({dtype, in[0].type.shape});
  if (!wantData || !in[0].data)
    return result;
  const HostTensor &x = *in[0].data;
  HostTensor out = makeLike(dtype, x.shape);
  for (int64_t e = 0, n = x.numElements(); e < n; ++e) {
    if (!x.isFloat() && node.opType == "Neg")
      out.i[e] = wrappingSub(0, x.i[e]);
    else if (!x.isFloat() && node.opType == "Abs")
      out.i[e] = x.i[e] < 0 ? wrappingSub(0, x.i[e]) : x.i[e];
    else
      setValue(out, e, fn(x.value(e)));
  }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

Expected<Evaluation> sameTypeAsInput(ArrayRef<Operand> in) {
  Evaluation result;
  result.types.push_back(in[0].type);
  return result;
}

Expected<Evaluation> evaluateGemm(const OnnxNode &node, ArrayRef<Operand> in) {
  ArrayRef<int64_t> a = in[0].type.shape, b = in[1].type.shape;
  if (a.size() != 2 || b.size() != 2)
    return failure("takes matrices, not " + shapeText(a) + " and " +
                   shapeText(b));
  bool ta = node.intAttr("transA", 0), tb = node.intAttr("transB", 0);
  int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb)
    return failure("contracts " + shapeText(a) + " with " + shapeText(b));
  Evaluation result;
  result.types.push_back({in[0].type.dtype, {m, n}});
  return result;
}

Expected<Evaluation> evaluateLoss(const OnnxNode &node, ArrayRef<Operand> in) {
  StringRef reduction = "mean";
  if (const OnnxAttribute *a = node.attribute("reduction"))
    reduction = a->s;
  if (reduction != "mean")
    return failure("has reduction '" + reduction +
                   "' (Loom takes the mean over tokens)");
  if (in.size() > 2 && in[2].present)
    return failure("has class weights, which Loom does not take");
  Evaluation result;
  result.types.push_back({in[0].type.dtype, {}});
  for (size_t i = 1; i < node.outputs.size(); ++i)
    result.types.push_back(in[0].type); // log_prob
  return result;
}

} // namespace

SmallVector<int64_t, 4> transposePermutation(const OnnxNode &node,
                                             int64_t rank) {
  if (const OnnxAttribute *perm = node.attribute("perm"))
    return SmallVector<int64_t, 4>(perm->ints.begin(), perm->ints.end());
  SmallVector<int64_t, 4> reversed;
  for (int64_t d = rank - 1; d >= 0; --d)
    reversed.push_back(d);
  return reversed;
}

Expected<std::optional<SmallVector<int64_t, 4>>>
nodeAxes(const OnnxNode &node, ArrayRef<Operand> inputs, size_t inputIndex,
         int64_t rank) {
  SmallVector<int64_t, 4> raw;
  if (const OnnxAttribute *attr = node.attribute("axes")) {
    raw.assign(attr->ints.begin(), attr->ints.end());
  } else if (inputIndex < inputs.size() && inputs[inputIndex].present) {
    auto given = intsOf(inputs, inputIndex, "axes");
    if (!given)
      return given.takeError();
    raw = *given;
  } else {
    return std::nullopt;
  }
  SmallVector<int64_t, 4> axes;
  for (int64_t a : raw) {
    auto axis = normalizeAxis(a, rank);
    if (!axis)
      return axis.takeError();
    axes.push_back(*axis);
  }
  return std::optional<SmallVector<int64_t, 4>>(axes);
}

static const StringSet<> &layoutOps() {
  static const StringSet<> ops = {
      "Identity", "Cast",      "CastLike", "Transpose", "Reshape",
      "Squeeze",  "Unsqueeze", "Flatten",  "Slice",     "Split",
      "Concat",   "Expand",    "Gather",   "Dropout"};
  return ops;
}

static const StringSet<> &otherOps() {
  static const StringSet<> ops = {"Add",
                                  "Sub",
                                  "Mul",
                                  "Div",
                                  "Pow",
                                  "Max",
                                  "Min",
                                  "Equal",
                                  "Less",
                                  "LessOrEqual",
                                  "Greater",
                                  "GreaterOrEqual",
                                  "And",
                                  "Or",
                                  "Xor",
                                  "Not",
                                  "Sqrt",
                                  "Reciprocal",
                                  "Neg",
                                  "Tanh",
                                  "Erf",
                                  "Sigmoid",
                                  "Cos",
                                  "Sin",
                                  "Exp",
                                  "Log",
                                  "Abs",
                                  "Relu",
                                  "Floor",
                                  "Ceil",
                                  "Where",
                                  "MatMul",
                                  "Gemm",
                                  "Shape",
                                  "Size",
                                  "ConstantOfShape",
                                  "Constant",
                                  "Range",
                                  "Trilu",
                                  "ReduceMean",
                                  "ReduceSum",
                                  "ReduceMax",
                                  "ReduceMin",
                                  "Softmax",
                                  "LogSoftmax",
                                  "LayerNormalization",
                                  "SoftmaxCrossEntropyLoss",
                                  "NegativeLogLikelihoodLoss"};
  return ops;
}

bool isSupportedOp(StringRef opType) {
  return layoutOps().contains(opType) || otherOps().contains(opType);
}

bool isLayoutOp(StringRef opType) { return layoutOps().contains(opType); }

bool isFoldableOp(StringRef opType) {
  return isSupportedOp(opType) && opType != "Gemm" && opType != "Softmax" &&
         opType != "LogSoftmax" && opType != "LayerNormalization" &&
         opType != "SoftmaxCrossEntropyLoss" &&
         opType != "NegativeLogLikelihoodLoss";
}

static Expected<Evaluation> evaluateOp(const OnnxNode &node,
                                       ArrayRef<Operand> inputs, int64_t opset,
                                       bool wantData);

Expected<Evaluation> evaluate(const OnnxNode &node, ArrayRef<Operand> inputs,
                              int64_t opset, bool wantData) {
  StringRef op = node.opType;
  wantData &= isFoldableOp(op);
  // The inputs every op needs, checked before any evaluator reads them.
  size_t required =
      StringSwitch<size_t>(op)
          .Case("Constant", 0)
          .Cases({"Where", "Slice", "Range"}, 3)
          .Cases({"Identity", "Dropout", "Cast", "Transpose", "Squeeze",
                  "Flatten", "Split", "Concat", "Shape", "Size",
                  "ConstantOfShape", "Trilu", "Softmax", "LogSoftmax"},
                 1)
          .StartsWith("Reduce", 1)
          .Default(unaryOp(op) ? 1 : 2);
  if (inputs.size() < required)
    return failure("has " + Twine(inputs.size()) + " inputs; it needs " +
                   Twine(required));
  for (size_t i = 0; i < required; ++i)
    if (!inputs[i].present)
      return failure("has no input " + Twine(i));
  if (node.outputs.empty())
    return failure("has no outputs");
  if (op != "Split" && op != "Dropout" && op != "LayerNormalization" &&
      op != "SoftmaxCrossEntropyLoss" && node.outputs.size() > 1)
    return failure("has " + Twine(node.outputs.size()) +
                   " outputs; Loom knows of one");
  // The types first: shapes computed from a bad graph (negative sizes, an
  // absurd element count) end here, before anything allocates them.
  auto types = evaluateOp(node, inputs, opset, /*wantData=*/false);
  if (!types)
    return types.takeError();
  for (const ValueType &type : types->types) {
    double elements = 1;
    for (int64_t d : type.shape) {
      if (d < 0)
        return failure("computes the negative shape " + shapeText(type.shape));
      elements *= double(d);
    }
    if (elements > double(int64_t(1) << 40))
      return failure("computes a tensor of shape " + shapeText(type.shape) +
                     ", too large");
    if (wantData && elements > double(kMaxFoldedElements))
      return failure("would fold a constant of shape " + shapeText(type.shape) +
                     " (Loom folds at most " + Twine(kMaxFoldedElements) +
                     " elements at import)");
  }
  if (!wantData)
    return types;
  return evaluateOp(node, inputs, opset, /*wantData=*/true);
}

static Expected<Evaluation> evaluateOp(const OnnxNode &node,
                                       ArrayRef<Operand> inputs, int64_t opset,
                                       bool wantData) {
  StringRef op = node.opType;
  if (std::optional<BinaryOp> binary = binaryOp(op))
    return evaluateBinary(node, *binary, inputs, wantData);
  if (auto unary = unaryOp(op))
    return evaluateUnary(node, *unary, inputs, wantData);
  if (op == "Identity" || op == "Dropout") {
    Evaluation result;
    result.types.push_back(inputs[0].type);
    if (op == "Dropout" && node.outputs.size() > 1)
      result.types.push_back({DType::Bool, inputs[0].type.shape});
    if (wantData && inputs[0].data) {
      result.data.emplace();
      result.data->push_back(*inputs[0].data);
      if (node.outputs.size() > 1) {
        HostTensor mask = makeLike(DType::Bool, inputs[0].type.shape);
        std::fill(mask.i.begin(), mask.i.end(), 1);
        result.data->push_back(std::move(mask));
      }
    }
    return result;
  }
  if (op == "Cast" || op == "CastLike")
    return evaluateCast(node, inputs, wantData);
  if (op == "Reshape")
    return evaluateReshape(node, inputs, wantData);
  if (op == "Transpose")
    return evaluateTranspose(node, inputs, wantData);
  if (op == "Squeeze" || op == "Unsqueeze" || op == "Flatten")
    return evaluateSqueezeLike(node, inputs, wantData);
  if (op == "Slice")
    return evaluateSlice(inputs, wantData);
  if (op == "Split")
    return evaluateSplit(node, inputs, wantData);
  if (op == "Concat")
    return evaluateConcat(node, inputs, wantData);
  if (op == "Expand")
    return evaluateExpand(inputs, wantData);
  if (op == "Gather")
    return evaluateGather(node, inputs, wantData);
  if (op == "Where")
    return evaluateWhere(inputs, wantData);
  if (op == "MatMul")
    return evaluateMatMul(inputs, wantData);
  if (op == "Gemm")
    return evaluateGemm(node, inputs);
  if (op == "Constant")
    return evaluateConstant(node);
  if (op == "Shape")
    return evaluateShape(node, inputs);
  if (op == "Size")
    return single(
        HostTensor::ints(DType::I64, {}, {inputs[0].type.numElements()}));
  if (op == "ConstantOfShape")
    return evaluateConstantOfShape(node, inputs, wantData);
  if (op == "Range")
    return evaluateRange(inputs, wantData);
  if (op == "Trilu")
    return evaluateTrilu(node, inputs, wantData);
  if (op.starts_with("Reduce"))
    return evaluateReduce(node, inputs, wantData);
  if (op == "Softmax" || op == "LogSoftmax")
    return sameTypeAsInput(inputs);
  if (op == "LayerNormalization") {
    Evaluation result = *sameTypeAsInput(inputs);
    for (size_t i = 1; i < node.outputs.size(); ++i)
      result.types.push_back(inputs[0].type); // mean, inverse std (unused)
    return result;
  }
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss")
    return evaluateLoss(node, inputs);
  return failure("is not supported");
}

} // namespace loom::onnx_import
