//===- Layout.cpp - Reshape, transpose, broadcast, slice, pad, concat -----===//
//
// Most layout ops are gathers: each result element is one operand element,
// whose offset a strided walk of the result computes (stridedOffsets). The
// same code then moves float and integer elements. Reductions run the walk
// the other way: each operand element adds into one result element; the
// gradient of reduce_max lives here with them.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "dialects/Loom/LoomOps.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace loom::interp {

std::vector<int64_t> stridedOffsets(ArrayRef<int64_t> shape,
                                    ArrayRef<int64_t> strides, int64_t base) {
  std::vector<int64_t> offsets(numElementsOf(shape));
  SmallVector<int64_t, 4> index(shape.size(), 0);
  int64_t offset = base;
  for (int64_t &out : offsets) {
    out = offset;
    // Advances the row-major index like an odometer.
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      offset += strides[d];
      if (++index[d] < shape[d])
        break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
  return offsets;
}

/// The strides that read an operand of shape `from` as if it had the shape
/// `to` it broadcasts to: 0 along stretched and missing leading dimensions.
static SmallVector<int64_t, 4> broadcastStrides(ArrayRef<int64_t> from,
                                                ArrayRef<int64_t> to) {
  SmallVector<int64_t, 4> fromStrides = stridesOf(from);
  SmallVector<int64_t, 4> strides(to.size(), 0);
  size_t shift = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1)
      strides[shift + d] = fromStrides[d];
  return strides;
}

/// The elements of `x` at `offsets`, as a tensor of `result`'s type.
static Tensor gather(Value result, const Tensor &x,
                     const std::vector<int64_t> &offsets) {
  if (x.isFloat()) {
    std::vector<double> values(offsets.size());
    for (size_t e = 0; e < offsets.size(); ++e)
      values[e] = x.f()[offsets[e]];
    return floatsLike(result, std::move(values));
  }
  std::vector<int64_t> values(offsets.size());
  for (size_t e = 0; e < offsets.size(); ++e)
    values[e] = x.i()[offsets[e]];
  return Tensor::ints(elementTypeOf(result), shapeOf(result),
                      std::move(values));
}

std::vector<double> broadcastTo(const Tensor &x, ArrayRef<int64_t> shape) {
  if (x.shape() == shape)
    return x.f();
  std::vector<int64_t> offsets =
      stridedOffsets(shape, broadcastStrides(x.shape(), shape));
  std::vector<double> values(offsets.size());
  for (size_t e = 0; e < offsets.size(); ++e)
    values[e] = x.f()[offsets[e]];
  return values;
}

static Tensor reshape(ReshapeOp op, const Tensor &x) {
  if (x.isFloat())
    return floatsLike(op, x.f());
  return Tensor::ints(elementTypeOf(op), shapeOf(op), x.i());
}

/// Result dimension d is operand dimension permutation[d].
static Tensor transpose(TransposeOp op, const Tensor &x) {
  SmallVector<int64_t, 4> xStrides = stridesOf(x.shape()), strides;
  for (int64_t p : op.getPermutation())
    strides.push_back(xStrides[p]);
  return gather(op, x, stridedOffsets(shapeOf(op), strides));
}

static Tensor broadcast(BroadcastOp op, const Tensor &x) {
  return gather(
      op, x,
      stridedOffsets(shapeOf(op), broadcastStrides(x.shape(), shapeOf(op))));
}

/// The offset of `index` in a tensor with `strides`.
static int64_t offsetOf(ArrayRef<int64_t> index, ArrayRef<int64_t> strides) {
  int64_t offset = 0;
  for (auto [i, stride] : llvm::zip(index, strides))
    offset += i * stride;
  return offset;
}

static Tensor slice(SliceOp op, const Tensor &x) {
  SmallVector<int64_t, 4> strides = stridesOf(x.shape());
  return gather(
      op, x,
      stridedOffsets(shapeOf(op), strides, offsetOf(op.getOffsets(), strides)));
}

/// Zeros with `x` placed at `low`.
static Tensor pad(PadOp op, const Tensor &x) {
  SmallVector<int64_t, 4> strides = stridesOf(shapeOf(op));
  std::vector<int64_t> targets =
      stridedOffsets(x.shape(), strides, offsetOf(op.getLow(), strides));
  std::vector<double> values(numElementsOf(shapeOf(op)), 0.0);
  for (size_t e = 0; e < targets.size(); ++e)
    values[targets[e]] = x.f()[e];
  return floatsLike(op, std::move(values));
}

/// Appends, for each of the `outer` blocks before the axis, each input's
/// block in turn.
template <typename T>
static std::vector<T> concatBlocks(ArrayRef<const std::vector<T> *> inputs,
                                   ArrayRef<int64_t> blockSizes,
                                   int64_t outer) {
  std::vector<T> values;
  for (int64_t o = 0; o < outer; ++o)
    for (auto [input, size] : llvm::zip(inputs, blockSizes))
      values.insert(values.end(), input->begin() + o * size,
                    input->begin() + (o + 1) * size);
  return values;
}

static Tensor concat(ConcatOp op, Operands in) {
  int64_t axis = op.getAxis();
  int64_t outer = numElementsOf(shapeOf(op).take_front(axis));
  int64_t inner = numElementsOf(shapeOf(op).drop_front(axis + 1));
  SmallVector<int64_t> blockSizes;
  for (const Tensor *input : in)
    blockSizes.push_back(input->shape()[axis] * inner);
  if (in.front()->isFloat()) {
    SmallVector<const std::vector<double> *> inputs;
    for (const Tensor *input : in)
      inputs.push_back(&input->f());
    return floatsLike(op, concatBlocks<double>(inputs, blockSizes, outer));
  }
  SmallVector<const std::vector<int64_t> *> inputs;
  for (const Tensor *input : in)
    inputs.push_back(&input->i());
  return Tensor::ints(elementTypeOf(op), shapeOf(op),
                      concatBlocks<int64_t>(inputs, blockSizes, outer));
}

namespace {
enum class Reduction { Sum, Mean, Max };
} // namespace

/// For each element of a tensor of `shape`, the offset of its group (the
/// result element it reduces into) when `dims` are reduced. The result's
/// layout is that of the operand with the reduced dimensions set to 1
/// (keep_dims only changes the shape), so this is a strided walk of the
/// operand with stride 0 along the reduced dimensions.
static std::vector<int64_t> groupOffsets(ArrayRef<int64_t> shape,
                                         ArrayRef<int64_t> dims) {
  SmallVector<int64_t, 4> keptShape(shape);
  for (int64_t d : dims)
    keptShape[d] = 1;
  SmallVector<int64_t, 4> strides = stridesOf(keptShape);
  for (int64_t d : dims)
    strides[d] = 0;
  return stridedOffsets(shape, strides);
}

/// The maximum of each group; NaN wins.
static std::vector<double> groupMaxima(const Tensor &x,
                                       const std::vector<int64_t> &groups,
                                       int64_t numGroups) {
  std::vector<double> maxima(numGroups,
                             -std::numeric_limits<double>::infinity());
  for (size_t e = 0; e < groups.size(); ++e) {
    double v = x.f()[e], &max = maxima[groups[e]];
    if (v > max || std::isnan(v))
      max = v;
  }
  return maxima;
}

static Tensor reduce(Operation *op, const Tensor &x, ArrayRef<int64_t> dims,
                     Reduction kind) {
  Value result = op->getResult(0);
  int64_t numGroups = numElementsOf(shapeOf(result));
  std::vector<int64_t> groups = groupOffsets(x.shape(), dims);
  if (kind == Reduction::Max)
    return floatsLike(result, groupMaxima(x, groups, numGroups));
  std::vector<double> sums(numGroups, 0.0);
  for (size_t e = 0; e < groups.size(); ++e)
    sums[groups[e]] += x.f()[e];
  if (kind == Reduction::Mean) {
    double count = static_cast<double>(x.numElements() / numGroups);
    for (double &v : sums)
      v /= count;
  }
  return floatsLike(result, std::move(sums));
}

/// Each group's gradient goes to the elements equal to its maximum, shared
/// evenly between ties.
static Tensor reduceMaxGrad(ReduceMaxGradOp op, const Tensor &dy,
                            const Tensor &x) {
  int64_t numGroups = dy.numElements();
  std::vector<int64_t> groups = groupOffsets(x.shape(), op.getDims());
  std::vector<double> maxima = groupMaxima(x, groups, numGroups);
  std::vector<int64_t> ties(numGroups, 0);
  for (size_t e = 0; e < groups.size(); ++e)
    ties[groups[e]] += x.f()[e] == maxima[groups[e]];
  std::vector<double> dx(x.f().size(), 0.0);
  for (size_t e = 0; e < groups.size(); ++e)
    if (x.f()[e] == maxima[groups[e]])
      dx[e] = dy.f()[groups[e]] / static_cast<double>(ties[groups[e]]);
  return floatsLike(op, std::move(dx));
}

void addLayoutKernels(KernelTable &table) {
  table.add<ReshapeOp>(
      [](ReshapeOp op, Operands in) { return reshape(op, *in[0]); });
  table.add<TransposeOp>(
      [](TransposeOp op, Operands in) { return transpose(op, *in[0]); });
  table.add<BroadcastOp>(
      [](BroadcastOp op, Operands in) { return broadcast(op, *in[0]); });
  table.add<SliceOp>([](SliceOp op, Operands in) { return slice(op, *in[0]); });
  table.add<PadOp>([](PadOp op, Operands in) { return pad(op, *in[0]); });
  table.add<ConcatOp>([](ConcatOp op, Operands in) { return concat(op, in); });
  table.add<ReduceSumOp>([](ReduceSumOp op, Operands in) {
    return reduce(op, *in[0], op.getDims(), Reduction::Sum);
  });
  table.add<ReduceMeanOp>([](ReduceMeanOp op, Operands in) {
    return reduce(op, *in[0], op.getDims(), Reduction::Mean);
  });
  table.add<ReduceMaxOp>([](ReduceMaxOp op, Operands in) {
    return reduce(op, *in[0], op.getDims(), Reduction::Max);
  });
  table.add<ReduceMaxGradOp>([](ReduceMaxGradOp op, Operands in) {
    return reduceMaxGrad(op, *in[0], *in[1]);
  });
}

} // namespace loom::interp
