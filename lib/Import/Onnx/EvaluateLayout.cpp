//===- EvaluateLayout.cpp - Types and folding of layout nodes -------------===//
//
// Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Slice, Split, Concat,
// Expand and Gather: each result element is an element of an operand, so
// folding copies (exact for int64 shape tensors).
//
//===----------------------------------------------------------------------===//

#include "EvaluateSupport.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace llvm;

namespace loom::onnx_import {
using namespace detail;

Expected<SliceBox> sliceBox(ArrayRef<Operand> in, ArrayRef<int64_t> shape) {
  auto starts = intsOf(in, 1, "starts");
  if (!starts)
    return starts.takeError();
  auto ends = intsOf(in, 2, "ends");
  if (!ends)
    return ends.takeError();
  int64_t rank = shape.size();
  SmallVector<int64_t, 4> axes, steps;
  if (in.size() > 3 && in[3].present) {
    auto given = intsOf(in, 3, "axes");
    if (!given)
      return given.takeError();
    axes = *given;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (in.size() > 4 && in[4].present) {
    auto given = intsOf(in, 4, "steps");
    if (!given)
      return given.takeError();
    steps = *given;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (axes.size() != starts->size() || ends->size() != starts->size() ||
      steps.size() != starts->size())
    return failure("starts, ends, axes and steps differ in length");
  SliceBox box;
  box.starts.assign(rank, 0);
  box.steps.assign(rank, 1);
  box.sizes.assign(shape.begin(), shape.end());
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normalizeAxis(axes[i], rank);
    if (!axis)
      return axis.takeError();
    int64_t dim = shape[*axis], step = steps[i];
    if (step == 0)
      return failure("has a step of 0");
    // ONNX's clamping: negative indices count from the end, then clamp to
    // [0, dim] (step > 0) or [-1, dim - 1] (step < 0).
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return step > 0 ? std::clamp<int64_t>(v, 0, dim)
                      : std::clamp<int64_t>(v, -1, dim - 1);
    };
    int64_t start = clampIndex((*starts)[i]), end = clampIndex((*ends)[i]);
    int64_t size = step > 0
                       ? std::max<int64_t>(0, (end - start + step - 1) / step)
                       : std::max<int64_t>(0, (start - end - step - 1) / -step);
    box.starts[*axis] = start;
    box.steps[*axis] = step;
    box.sizes[*axis] = size;
  }
  return box;
}

Error checkSequenceFits(const OnnxNode &node, ArrayRef<Operand> in,
                        int64_t seqLen, bool tableKnown) {
  if (in.empty() || !in[0].present || node.inputs.empty())
    return Error::success();
  const ValueType &table = in[0].type;
  int64_t rank = table.shape.size();
  auto tooShort = [&](int64_t positions) {
    return failure("the sequence length " + Twine(seqLen) + " exceeds the " +
                   Twine(positions) + " positions of '" + node.inputs[0] + "'");
  };
  // Rows of a table picked by known indices: the positions 0..S-1 of a
  // learned position embedding.
  if (node.opType == "Gather" && in.size() > 1 && in[1].data && rank > 0) {
    auto axis = normalizeAxis(node.intAttr("axis", 0), rank);
    if (!axis) {
      consumeError(axis.takeError());
      return Error::success();
    }
    int64_t dim = table.shape[*axis];
    if (dim >= seqLen)
      return Error::success();
    const HostTensor &ids = *in[1].data;
    for (int64_t k = 0, n = ids.numElements(); k < n; ++k)
      if (ids.integer(k) >= dim)
        return tooShort(dim);
    return Error::success();
  }
  // A constant cut to the sequence length (a causal mask, a rotary
  // table): ONNX clamps the end, so a short one would come out short.
  if (node.opType == "Slice" && tableKnown && in.size() > 2 && in[2].data) {
    const HostTensor &ends = *in[2].data;
    const HostTensor *axes =
        in.size() > 3 && in[3].present ? in[3].data : nullptr;
    for (int64_t i = 0, n = ends.numElements(); i < n; ++i) {
      int64_t axis =
          axes ? (i < axes->numElements() ? axes->integer(i) : -1) : i;
      if (axis < 0)
        axis += rank;
      if (axis < 0 || axis >= rank)
        continue;
      if (ends.integer(i) == seqLen && table.shape[axis] < seqLen)
        return tooShort(table.shape[axis]);
    }
  }
  return Error::success();
}

namespace detail {

Expected<Evaluation> evaluateReshape(const OnnxNode &node, ArrayRef<Operand> in,
                                     bool wantData) {
  auto target = intsOf(in, 1, "shape");
  if (!target)
    return target.takeError();
  const ValueType &x = in[0].type;
  bool allowZero = node.intAttr("allowzero", 0) != 0;
  SmallVector<int64_t, 4> shape;
  int64_t inferred = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= x.shape.size())
        return failure("shape " + shapeText(*target) +
                       " copies a dimension the input does not have");
      d = x.shape[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return failure("shape " + shapeText(*target) + " has two -1");
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return failure("shape " + shapeText(*target) + " has a negative size");
    shape.push_back(d);
    known = saturatingMul(known, d);
  }
  if (inferred >= 0) {
    if (known == 0 || x.numElements() % known != 0)
      return failure("cannot reshape " + shapeText(x.shape) + " to " +
                     shapeText(*target));
    shape[inferred] = x.numElements() / known;
    known *= shape[inferred];
  }
  if (known != x.numElements())
    return failure("cannot reshape " + shapeText(x.shape) + " to " +
                   shapeText(*target));
  return rearrange(in, {x.dtype, shape}, wantData, [](int64_t e) { return e; });
}

Expected<Evaluation> evaluateTranspose(const OnnxNode &node,
                                       ArrayRef<Operand> in, bool wantData) {
  const ValueType &x = in[0].type;
  int64_t rank = x.shape.size();
  SmallVector<int64_t, 4> perm = transposePermutation(node, rank);
  SmallVector<bool, 4> seen(rank, false);
  if (int64_t(perm.size()) != rank)
    return failure("perm has " + Twine(perm.size()) + " entries for rank " +
                   Twine(rank));
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return failure("perm is not a permutation");
    seen[p] = true;
  }
  SmallVector<int64_t, 4> shape;
  for (int64_t p : perm)
    shape.push_back(x.shape[p]);
  SmallVector<int64_t, 4> inStrides = stridesOf(x.shape);
  SmallVector<int64_t, 4> outStrides = stridesOf(shape);
  return rearrange(in, {x.dtype, shape}, wantData, [=](int64_t e) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t coordinate = e / outStrides[d];
      e %= outStrides[d];
      source += coordinate * inStrides[perm[d]];
    }
    return source;
  });
}

Expected<Evaluation> evaluateSqueezeLike(const OnnxNode &node,
                                         ArrayRef<Operand> in, bool wantData) {
  const ValueType &x = in[0].type;
  int64_t rank = x.shape.size();
  SmallVector<int64_t, 4> shape;
  if (node.opType == "Flatten") {
    auto axis = normalizeAxis(node.intAttr("axis", 1), rank + 1);
    if (!axis)
      return axis.takeError();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d)
      (d < *axis ? outer : inner) *= x.shape[d];
    shape = {outer, inner};
  } else if (node.opType == "Squeeze") {
    auto axes = nodeAxes(node, in, 1, rank);
    if (!axes)
      return axes.takeError();
    for (int64_t d = 0; d < rank; ++d) {
      bool listed = *axes && llvm::is_contained(**axes, d);
      if (listed && x.shape[d] != 1)
        return failure("squeezes dimension " + Twine(d) + " of size " +
                       Twine(x.shape[d]));
      if (!(listed || (!*axes && x.shape[d] == 1)))
        shape.push_back(x.shape[d]);
    }
  } else { // Unsqueeze: the axes index the result.
    SmallVector<int64_t, 4> raw;
    if (const OnnxAttribute *attr = node.attribute("axes")) {
      raw.assign(attr->ints.begin(), attr->ints.end());
    } else {
      auto given = intsOf(in, 1, "axes");
      if (!given)
        return given.takeError();
      raw = *given;
    }
    int64_t outRank = rank + raw.size();
    SmallVector<int64_t, 4> positions;
    for (int64_t a : raw) {
      auto axis = normalizeAxis(a, outRank);
      if (!axis)
        return axis.takeError();
      positions.push_back(*axis);
    }
    for (int64_t d = 0, next = 0; d < outRank; ++d)
      shape.push_back(llvm::is_contained(positions, d) ? 1 : x.shape[next++]);
  }
  return rearrange(in, {x.dtype, shape}, wantData, [](int64_t e) { return e; });
}

Expected<Evaluation> evaluateSlice(ArrayRef<Operand> in, bool wantData) {
  const ValueType &x = in[0].type;
  auto box = sliceBox(in, x.shape);
  if (!box)
    return box.takeError();
  SmallVector<int64_t, 4> inStrides = stridesOf(x.shape);
  SmallVector<int64_t, 4> outStrides = stridesOf(box->sizes);
  SliceBox b = *box;
  return rearrange(in, {x.dtype, b.sizes}, wantData, [=](int64_t e) {
    int64_t source = 0;
    for (size_t d = 0; d < b.sizes.size(); ++d) {
      int64_t coordinate = e / outStrides[d];
      e %= outStrides[d];
      source += (b.starts[d] + coordinate * b.steps[d]) * inStrides[d];
    }
    return source;
  });
}

/// Copies a box of `in` (offsets along one axis) into a result.
static std::function<int64_t(int64_t)> boxSource(ArrayRef<int64_t> inShape,
                                                 ArrayRef<int64_t> outShape,
                                                 int64_t axis, int64_t offset) {
  SmallVector<int64_t, 4> inStrides = stridesOf(inShape);
  SmallVector<int64_t, 4> outStrides = stridesOf(outShape);
  return [=](int64_t e) {
    int64_t source = 0;
    for (size_t d = 0; d < outStrides.size(); ++d) {
      int64_t coordinate = e / outStrides[d];
      e %= outStrides[d];
      source += (coordinate + (int64_t(d) == axis ? offset : 0)) * inStrides[d];
    }
    return source;
  };
}

Expected<Evaluation> evaluateSplit(const OnnxNode &node, ArrayRef<Operand> in,
                                   bool wantData) {
  const ValueType &x = in[0].type;
  auto axis = normalizeAxis(node.intAttr("axis", 0), x.shape.size());
  if (!axis)
    return axis.takeError();
  SmallVector<int64_t, 4> sizes;
  int64_t count = node.outputs.size();
  if (in.size() > 1 && in[1].present) {
    auto given = intsOf(in, 1, "split");
    if (!given)
      return given.takeError();
    sizes = *given;
  } else if (const OnnxAttribute *attr = node.attribute("split")) {
    sizes.assign(attr->ints.begin(), attr->ints.end());
  } else {
    // Equal parts (opset 18's num_outputs: the last may be smaller).
    int64_t dim = x.shape[*axis];
    int64_t part = (dim + count - 1) / count;
    for (int64_t i = 0; i < count; ++i)
      sizes.push_back(std::min(part, dim - i * part));
  }
  if (int64_t(sizes.size()) != count ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != x.shape[*axis])
    return failure("split sizes " + shapeText(sizes) + " do not cut " +
                   Twine(x.shape[*axis]) + " into " + Twine(count) + " parts");
  Evaluation result;
  if (wantData && in[0].data)
    result.data.emplace();
  int64_t offset = 0;
  for (int64_t size : sizes) {
    ValueType type = x;
    type.shape[*axis] = size;
    result.types.push_back(type);
    if (result.data)
      result.data->push_back(
          gatherElements(*in[0].data, x.dtype, type.shape,
                         boxSource(x.shape, type.shape, *axis, offset)));
    offset += size;
  }
  return result;
}

Expected<Evaluation> evaluateConcat(const OnnxNode &node, ArrayRef<Operand> in,
                                    bool wantData) {
  if (in.empty())
    return failure("needs inputs");
  const ValueType &first = in[0].type;
  if (first.shape.empty())
    return failure("joins scalars (its inputs need a rank of 1 or more)");
  auto axis = normalizeAxis(node.intAttr("axis", 0), first.shape.size());
  if (!axis)
    return axis.takeError();
  ValueType type = first;
  type.shape[*axis] = 0;
  bool known = true;
  for (const Operand &operand : in) {
    if (operand.type.shape.size() != first.shape.size())
      return failure("joins tensors of different ranks");
    for (size_t d = 0; d < first.shape.size(); ++d)
      if (int64_t(d) != *axis && operand.type.shape[d] != first.shape[d])
        return failure("joins " + shapeText(first.shape) + " and " +
                       shapeText(operand.type.shape) + " along axis " +
                       Twine(*axis));
    type.shape[*axis] += operand.type.shape[*axis];
    known &= operand.data != nullptr;
  }
  Evaluation result;
  result.types.push_back(type);
  if (!wantData || !known)
    return result;
  HostTensor out = makeLike(type.dtype, type.shape);
  SmallVector<int64_t, 4> outStrides = stridesOf(type.shape);
  int64_t offset = 0;
  for (const Operand &operand : in) {
    const HostTensor &t = *operand.data;
    SmallVector<int64_t, 4> strides = stridesOf(t.shape);
    for (int64_t e = 0, n = t.numElements(); e < n; ++e) {
      int64_t rest = e, target = 0;
      for (size_t d = 0; d < strides.size(); ++d) {
        int64_t coordinate = rest / strides[d];
        rest %= strides[d];
        target +=
            (coordinate + (int64_t(d) == *axis ? offset : 0)) * outStrides[d];
      }
      copyElement(t, e, out, target);
    }
    offset += t.shape[*axis];
  }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

Expected<Evaluation> evaluateExpand(ArrayRef<Operand> in, bool wantData) {
  auto target = intsOf(in, 1, "shape");
  if (!target)
    return target.takeError();
  auto shape = broadcast(in[0].type.shape, *target);
  if (!shape)
    return shape.takeError();
  ValueType type{in[0].type.dtype, *shape};
  if (!wantData || llvm::any_of(*shape, [](int64_t d) { return d < 0; })) {
    Evaluation result;
    result.types.push_back(type);
    return result;
  }
  std::vector<int64_t> indices = broadcastIndices(in[0].type.shape, *shape);
  return rearrange(
      in, type, wantData,
      [indices = std::move(indices)](int64_t e) { return indices[e]; });
}

Expected<Evaluation> evaluateGather(const OnnxNode &node, ArrayRef<Operand> in,
                                    bool wantData) {
  const ValueType &data = in[0].type, &indices = in[1].type;
  auto axis = normalizeAxis(node.intAttr("axis", 0), data.shape.size());
  if (!axis)
    return axis.takeError();
  SmallVector<int64_t, 4> shape(data.shape.begin(), data.shape.begin() + *axis);
  shape.append(indices.shape.begin(), indices.shape.end());
  shape.append(data.shape.begin() + *axis + 1, data.shape.end());
  Evaluation result;
  result.types.push_back({data.dtype, shape});
  if (!wantData || !in[0].data || !in[1].data)
    return result;
  int64_t dim = data.shape[*axis];
  int64_t inner = 1, outer = 1;
  for (size_t d = *axis + 1; d < data.shape.size(); ++d)
    inner *= data.shape[d];
  for (int64_t d = 0; d < *axis; ++d)
    outer *= data.shape[d];
  const HostTensor &ids = *in[1].data;
  int64_t count = ids.numElements();
  for (int64_t k = 0; k < count; ++k) {
    int64_t id = ids.integer(k);
    if (id < -dim || id >= dim)
      return failure("index " + Twine(id) + " is out of range for " +
                     Twine(dim));
  }
  HostTensor out = makeLike(data.dtype, shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < count; ++k) {
      int64_t id = ids.integer(k);
      if (id < 0)
        id += dim;
      for (int64_t j = 0; j < inner; ++j)
        copyElement(*in[0].data, (o * dim + id) * inner + j, out,
                    (o * count + k) * inner + j);
    }
  result.data.emplace();
  result.data->push_back(std::move(out));
  return result;
}

} // namespace detail
} // namespace loom::onnx_import
