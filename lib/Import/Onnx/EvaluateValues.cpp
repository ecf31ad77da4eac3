//===- EvaluateValues.cpp - Types and folding of value-making nodes -------===//
//
// Constants (Constant, ConstantOfShape, Range, Shape), masks (Trilu,
// Where), casts, products and reductions: folded in double and rounded to
// the result's dtype, integers in int64.
//
//===----------------------------------------------------------------------===//

#include "EvaluateSupport.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace llvm;

namespace loom::onnx_import::detail {

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

Expected<Evaluation> evaluateConstant(const OnnxNode &node) {
  for (const auto &entry : node.attributes) {
    const OnnxAttribute &a = entry.second;
    StringRef key = entry.first();
    if (key == "value" && a.tensor) {
      if (a.tensor->dtype == DType::Unsupported)
        return failure("holds a tensor of an unsupported element type");
      return single(a.tensor->decode());
    }
    if (key == "value_float")
      return single(HostTensor::floats(DType::F32, {}, {a.f}));
    if (key == "value_int")
      return single(HostTensor::ints(DType::I64, {}, {a.i}));
    if (key == "value_floats")
      return single(HostTensor::floats(
          DType::F32, {int64_t(a.floats.size())},
          std::vector<double>(a.floats.begin(), a.floats.end())));
    if (key == "value_ints")
      return single(
          HostTensor::ints(DType::I64, {int64_t(a.ints.size())},
                           std::vector<int64_t>(a.ints.begin(), a.ints.end())));
  }
  return failure("has no value Loom can read (value, value_float, "
                 "value_int, value_floats or value_ints)");
}

Expected<Evaluation> evaluateShape(const OnnxNode &node, ArrayRef<Operand> in) {
  ArrayRef<int64_t> shape = in[0].type.shape;
  int64_t rank = shape.size();
  int64_t start = node.intAttr("start", 0), end = node.intAttr("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims(shape.begin() + start,
                            shape.begin() + std::max(start, end));
  int64_t n = dims.size();
  return single(HostTensor::ints(DType::I64, {n}, std::move(dims)));
}

Expected<Evaluation> evaluateConstantOfShape(const OnnxNode &node,
                                             ArrayRef<Operand> in,
                                             bool wantData) {
  auto shape = intsOf(in, 0, "shape");
  if (!shape)
    return shape.takeError();
  HostTensor fill = HostTensor::floats(DType::F32, {1}, {0.0});
  if (const OnnxAttribute *value = node.attribute("value"))
    if (value->tensor)
      fill = value->tensor->decode();
  if (fill.numElements() != 1)
    return failure("value must hold one element");
  if (!wantData) {
    Evaluation result;
    result.types.push_back({fill.dtype, *shape});
    return result;
  }
  HostTensor out = makeLike(fill.dtype, *shape);
  for (int64_t e = 0, n = out.numElements(); e < n; ++e)
    copyElement(fill, 0, out, e);
  return single(std::move(out));
}

Expected<Evaluation> evaluateRange(ArrayRef<Operand> in, bool wantData) {
  auto start = constantOperand(in, 0, "start");
  auto limit = constantOperand(in, 1, "limit");
  auto delta = constantOperand(in, 2, "delta");
  if (!start || !limit || !delta) {
    consumeError(limit.takeError());
    consumeError(delta.takeError());
    return start ? failure("its limit and delta inputs must be constants")
                 : start.takeError();
  }
  DType dtype = (*start)->dtype;
  double s = (*start)->value(0), l = (*limit)->value(0), d = (*delta)->value(0);
  if (d == 0)
    return failure("has a delta of 0");
  double count = std::ceil((l - s) / d);
  if (!(count < double(int64_t(1) << 40)))
    return failure("has " + std::to_string(count) + " elements, too many");
  int64_t n = count > 0 ? int64_t(count) : 0;
  if (!wantData) {
    Evaluation result;
    result.types.push_back({dtype, {n}});
    return result;
  }
  HostTensor out = makeLike(dtype, {n});
  for (int64_t e = 0; e < n; ++e)
    setValue(out, e, s + e * d);
  return single(std::move(out));
}

Expected<Evaluation> evaluateTrilu(const OnnxNode &node, ArrayRef<Operand> in,
                                   bool wantData) {
  const ValueType &x = in[0].type;
  if (x.shape.size() < 2)
    return failure("needs a tensor of rank 2 or more");
  Evaluation result;
  result.types.push_back(x);
  if (!wantData || !in[0].data)
    return result;
  int64_t k = 0;
  if (in.size() > 1 && in[1].present) {
    auto given = constantOperand(in, 1, "k");
    if (!given)
      return given.takeError();
    k = (*given)->integer(0);
  }
  bool upper = node.intAttr("upper", 1) != 0;
  HostTensor out = *in[0].data;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  for (int64_t e = 0, n = out.numElements(); e < n; ++e) {
    int64_t i = (e / cols) % rows, j = e % cols;
    bool keep = upper ? j - i >= k : j - i <= k;
    if (!keep)
      setValue(out, e, 0);
  }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

Expected<Evaluation> evaluateWhere(ArrayRef<Operand> in, bool wantData) {
  if (in.size() != 3)
    return failure("needs three inputs");
  auto ab = broadcast(in[1].type.shape, in[2].type.shape);
  if (!ab)
    return ab.takeError();
  auto shape = broadcast(in[0].type.shape, *ab);
  if (!shape)
    return shape.takeError();
  Evaluation result;
  result.types.push_back({in[1].type.dtype, *shape});
  if (!wantData || !in[0].data || !in[1].data || !in[2].data)
    return result;
  std::vector<int64_t> ic = broadcastIndices(in[0].type.shape, *shape);
  std::vector<int64_t> ix = broadcastIndices(in[1].type.shape, *shape);
  std::vector<int64_t> iy = broadcastIndices(in[2].type.shape, *shape);
  HostTensor out = makeLike(in[1].type.dtype, *shape);
  for (size_t e = 0; e < ic.size(); ++e) {
    bool c = in[0].data->integer(ic[e]) != 0;
    copyElement(c ? *in[1].data : *in[2].data, c ? ix[e] : iy[e], out, e);
  }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

Expected<Evaluation> evaluateCast(const OnnxNode &node, ArrayRef<Operand> in,
                                  bool wantData) {
  DType to = node.opType == "CastLike" ? in[1].type.dtype
                                       : dtypeFromOnnx(node.intAttr("to", 0));
  if (to == DType::Unsupported)
    return failure("casts to an unsupported element type");
  Evaluation result;
  result.types.push_back({to, in[0].type.shape});
  if (!wantData || !in[0].data)
    return result;
  const HostTensor &x = *in[0].data;
  HostTensor out = makeLike(to, x.shape);
  for (int64_t e = 0, n = x.numElements(); e < n; ++e) {
    if (!out.isFloat() && !x.isFloat())
      out.i[e] = to == DType::Bool ? x.i[e] != 0 : x.i[e];
    else
      setValue(out, e, x.value(e));
  }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

Expected<Evaluation> evaluateMatMul(ArrayRef<Operand> in, bool wantData) {
  ArrayRef<int64_t> a = in[0].type.shape, b = in[1].type.shape;
  if (a.size() < 2 || b.size() < 1)
    return failure("takes matrices (rank 2 or more) and a rank-1+ rhs, not " +
                   shapeText(a) + " and " + shapeText(b));
  SmallVector<int64_t, 4> bShape(b.begin(), b.end());
  bool vector = bShape.size() == 1;
  if (vector)
    bShape.push_back(1);
  int64_t m = a[a.size() - 2], k = a.back(), n = bShape.back();
  if (bShape[bShape.size() - 2] != k)
    return failure("contracts " + shapeText(a) + " with " + shapeText(b));
  auto batch =
      broadcast(a.drop_back(2), ArrayRef<int64_t>(bShape).drop_back(2));
  if (!batch)
    return batch.takeError();
  SmallVector<int64_t, 4> shape = *batch;
  shape.push_back(m);
  if (!vector)
    shape.push_back(n);
  Evaluation result;
  result.types.push_back({in[0].type.dtype, shape});
  if (!wantData || !in[0].data || !in[1].data)
    return result;
  std::vector<int64_t> ia = broadcastIndices(a.drop_back(2), *batch);
  std::vector<int64_t> ib =
      broadcastIndices(ArrayRef<int64_t>(bShape).drop_back(2), *batch);
  HostTensor out = makeLike(in[0].type.dtype, shape);
  for (size_t t = 0; t < ia.size(); ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += in[0].data->value((ia[t] * m + i) * k + l) *
                 in[1].data->value((ib[t] * k + l) * n + j);
        setValue(out, (t * m + i) * n + j, sum);
      }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

Expected<Evaluation> evaluateReduce(const OnnxNode &node, ArrayRef<Operand> in,
                                    bool wantData) {
  const ValueType &x = in[0].type;
  int64_t rank = x.shape.size();
  auto axes = nodeAxes(node, in, 1, rank);
  if (!axes)
    return axes.takeError();
  bool keep = node.intAttr("keepdims", 1) != 0;
  SmallVector<int64_t, 4> reduced;
  if (*axes)
    reduced = **axes;
  else if (!node.intAttr("noop_with_empty_axes", 0))
    for (int64_t d = 0; d < rank; ++d)
      reduced.push_back(d);
  SmallVector<int64_t, 4> shape, kept;
  for (int64_t d = 0; d < rank; ++d) {
    bool r = llvm::is_contained(reduced, d);
    if (!r || keep)
      shape.push_back(r ? 1 : x.shape[d]);
    kept.push_back(r ? 1 : x.shape[d]);
  }
  Evaluation result;
  result.types.push_back({x.dtype, shape});
  if (!wantData || !in[0].data)
    return result;
  StringRef op = node.opType;
  HostTensor out = makeLike(x.dtype, shape);
  std::vector<double> acc(out.numElements(), op == "ReduceMax"   ? -INFINITY
                                             : op == "ReduceMin" ? INFINITY
                                                                 : 0.0);
  SmallVector<int64_t, 4> strides = stridesOf(x.shape),
                          keptStrides = stridesOf(kept);
  int64_t count = x.numElements() / std::max<int64_t>(1, out.numElements());
  for (int64_t e = 0, n = x.numElements(); e < n; ++e) {
    int64_t rest = e, target = 0;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t coordinate = rest / strides[d];
      rest %= strides[d];
      if (kept[d] != 1)
        target += coordinate * keptStrides[d];
    }
    double v = in[0].data->value(e);
    if (op == "ReduceMax")
      acc[target] = std::max(acc[target], v);
    else if (op == "ReduceMin")
      acc[target] = std::min(acc[target], v);
    else
      acc[target] += v;
  }
  for (size_t e = 0; e < acc.size(); ++e)
    setValue(out, e, op == "ReduceMean" ? acc[e] / count : acc[e]);
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

/// Ops whose results have their first operand's type, and that are not
/// folded (the importer lowers them).

} // namespace loom::onnx_import::detail
