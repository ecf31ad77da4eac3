//===- FakeCudnnGraph.cpp - The fake cuDNN's operation and graph checks ---===//
//
// What a finalized operation must agree with (FakeCuda.h): a matmul's
// [..., M, K] x [..., K, N] -> [..., M, N] with the batch dimensions of A
// in C and B's equal to A's, 1, or dividing them (grouped key/value heads,
// which cuDNN's attention engines take); a pointwise operation's operands
// broadcasting to its result, with its mode's operand count and types; a
// reduction's result smaller than its operand only where it reduces; a
// reshape keeping the element count. A graph's tensors have one uid each
// and one producer, and it reads no virtual tensor it does not produce.
//
// The heuristic stands in for the runtime-fusion engines' pattern match by
// the operations a graph holds, not by what they compute.
//
//===----------------------------------------------------------------------===//

#include "FakeCudnn.h"
#include "FakeDevice.h"

#include <algorithm>
#include <set>

namespace loom::fake::cudnn {
namespace {

/// The tensor a descriptor-valued attribute of `d` refers to, or null.
const TensorInfo *tensorAt(const Descriptor &d,
                           cudnnBackendAttributeName_t name) {
  auto found = d.attributes.find(name);
  if (found == d.attributes.end())
    return nullptr;
  Descriptor *other = live(found->second.at<cudnnBackendDescriptor_t>(0));
  return other ? &other->tensor : nullptr;
}

/// Operands a pointwise mode takes.
int arity(cudnnPointwiseMode_t mode) {
  switch (mode) {
  case CUDNN_POINTWISE_BINARY_SELECT:
    return 3;
  case CUDNN_POINTWISE_ABS:
  case CUDNN_POINTWISE_CEIL:
  case CUDNN_POINTWISE_COS:
  case CUDNN_POINTWISE_EXP:
  case CUDNN_POINTWISE_FLOOR:
  case CUDNN_POINTWISE_LOG:
  case CUDNN_POINTWISE_NEG:
  case CUDNN_POINTWISE_RSQRT:
  case CUDNN_POINTWISE_SIN:
  case CUDNN_POINTWISE_SQRT:
  case CUDNN_POINTWISE_TAN:
  case CUDNN_POINTWISE_ERF:
  case CUDNN_POINTWISE_IDENTITY:
  case CUDNN_POINTWISE_RECIPROCAL:
  case CUDNN_POINTWISE_GEN_INDEX:
  case CUDNN_POINTWISE_LOGICAL_NOT:
    return 1;
  default:
    return 2;
  }
}

bool isComparison(cudnnPointwiseMode_t mode) {
  return mode >= CUDNN_POINTWISE_CMP_EQ && mode <= CUDNN_POINTWISE_CMP_LE;
}

std::string shapeOf(const TensorInfo &t) {
  std::string text = "[";
  for (size_t i = 0; i < t.dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(t.dims[i]);
  return text + "]";
}

bool mismatch(const char *call, const char *op, const TensorInfo &a,
              const TensorInfo &b, const char *why) {
  return violation("%s: %s of uid %lld %s and uid %lld %s: %s", call, op,
                   static_cast<long long>(a.uid), shapeOf(a).c_str(),
                   static_cast<long long>(b.uid), shapeOf(b).c_str(), why);
}

bool checkPointwise(Descriptor &d, const char *call) {
  Descriptor *desc =
      live(d.attributes.at(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR)
               .at<cudnnBackendDescriptor_t>(0));
  const TensorInfo *x = tensorAt(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC),
                   *b = tensorAt(d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC),
                   *t = tensorAt(d, CUDNN_ATTR_OPERATION_POINTWISE_TDESC),
                   *y = tensorAt(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
  if (!desc || !x || !y)
    return violation("%s: a pointwise operation refers to a dead descriptor",
                     call);
  auto mode = desc->attributes.at(CUDNN_ATTR_POINTWISE_MODE)
                  .at<cudnnPointwiseMode_t>(0);
  int operands = 1 + (b != nullptr) + (t != nullptr);
  if (operands != arity(mode) || (t && !b))
    return violation("%s: pointwise mode %d takes %d operands, given %d", call,
                     static_cast<int>(mode), arity(mode), operands);
  if (y->byValue)
    return violation("%s: pointwise mode %d writes a by-value tensor", call,
                     static_cast<int>(mode));
  for (const TensorInfo *in : {x, b, t}) {
    if (!in)
      continue;
    if (in->dims.size() != y->dims.size())
      return mismatch(call, "pointwise", *in, *y, "ranks differ");
    for (size_t i = 0; i < y->dims.size(); ++i)
      if (in->dims[i] != y->dims[i] && in->dims[i] != 1)
        return mismatch(call, "pointwise", *in, *y,
                        "the operand does not broadcast to the result");
  }
  if (mode == CUDNN_POINTWISE_GEN_INDEX) {
    int64_t axis =
        desc->attributes.at(CUDNN_ATTR_POINTWISE_AXIS).at<int64_t>(0);
    if (x->dims != y->dims)
      return mismatch(call, "GEN_INDEX", *x, *y, "shapes differ");
    if (axis < 0 || axis >= static_cast<int64_t>(y->dims.size()))
      return violation("%s: GEN_INDEX along axis %lld of a rank-%zu tensor",
                       call, static_cast<long long>(axis), y->dims.size());
  }
  if (isComparison(mode) && y->type != CUDNN_DATA_BOOLEAN)
    return violation("%s: comparison %d into uid %lld of type %d, not "
                     "boolean",
                     call, static_cast<int>(mode),
                     static_cast<long long>(y->uid), y->type);
  if (mode == CUDNN_POINTWISE_BINARY_SELECT && t->type != CUDNN_DATA_BOOLEAN)
    return violation("%s: BINARY_SELECT on a mask of type %d, not boolean",
                     call, t->type);
  d.operation.mode = mode;
  for (const TensorInfo *in : {x, b, t})
    if (in)
      d.operation.inputs.push_back(*in);
  d.operation.outputs.push_back(*y);
  return true;
}

bool checkMatmul(Descriptor &d, const char *call) {
  const TensorInfo *a = tensorAt(d, CUDNN_ATTR_OPERATION_MATMUL_ADESC),
                   *b = tensorAt(d, CUDNN_ATTR_OPERATION_MATMUL_BDESC),
                   *c = tensorAt(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC);
  if (!a || !b || !c)
    return violation("%s: a matmul refers to a dead descriptor", call);
  size_t rank = a->dims.size();
  if (rank < 3 || b->dims.size() != rank || c->dims.size() != rank)
    return mismatch(call, "matmul", *a, *b,
                    "A, B and C need one rank of at least 3");
  if (a->dims[rank - 1] != b->dims[rank - 2])
    return mismatch(call, "matmul", *a, *b, "A's columns are not B's rows");
  if (c->dims[rank - 2] != a->dims[rank - 2] ||
      c->dims[rank - 1] != b->dims[rank - 1])
    return mismatch(call, "matmul", *a, *c, "C is not A's rows x B's columns");
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (c->dims[i] != a->dims[i])
      return mismatch(call, "matmul", *a, *c, "batch dimensions differ");
    if (a->dims[i] % b->dims[i] != 0)
      return mismatch(call, "matmul", *a, *b,
                      "B's batch dimension does not divide A's");
  }
  if (c->byValue || a->type == CUDNN_DATA_BOOLEAN ||
      b->type == CUDNN_DATA_BOOLEAN)
    return mismatch(call, "matmul", *a, *b, "operand types");
  d.operation.inputs = {*a, *b};
  d.operation.outputs = {*c};
  return true;
}

bool checkReduction(Descriptor &d, const char *call) {
  Descriptor *desc = live(d.attributes.at(CUDNN_ATTR_OPERATION_REDUCTION_DESC)
                              .at<cudnnBackendDescriptor_t>(0));
  const TensorInfo *x = tensorAt(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC),
                   *y = tensorAt(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC);
  if (!desc || !x || !y)
    return violation("%s: a reduction refers to a dead descriptor", call);
  if (x->dims.size() != y->dims.size() || x->dims == y->dims)
    return mismatch(call, "reduction", *x, *y,
                    "the result must have the operand's rank and be "
                    "smaller");
  for (size_t i = 0; i < x->dims.size(); ++i)
    if (x->dims[i] % y->dims[i] != 0)
      return mismatch(call, "reduction", *x, *y,
                      "a result dimension does not divide the operand's");
  d.operation.mode = desc->attributes.at(CUDNN_ATTR_REDUCTION_OPERATOR)
                         .at<cudnnReduceTensorOp_t>(0);
  d.operation.inputs = {*x};
  d.operation.outputs = {*y};
  return true;
}

bool checkReshape(Descriptor &d, const char *call) {
  const TensorInfo *x = tensorAt(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC),
                   *y = tensorAt(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC);
  if (!x || !y)
    return violation("%s: a reshape refers to a dead descriptor", call);
  int64_t xs = 1, ys = 1;
  for (int64_t dim : x->dims)
    xs *= dim;
  for (int64_t dim : y->dims)
    ys *= dim;
  if (xs != ys)
    return mismatch(call, "reshape", *x, *y, "element counts differ");
  d.operation.inputs = {*x};
  d.operation.outputs = {*y};
  return true;
}

bool sameTensor(const TensorInfo &a, const TensorInfo &b) {
  return a.type == b.type && a.dims == b.dims && a.strides == b.strides &&
         a.alignment == b.alignment && a.isVirtual == b.isVirtual &&
         a.byValue == b.byValue;
}

} // namespace

int64_t bytesOf(cudnnDataType_t type) {
  switch (type) {
  case CUDNN_DATA_DOUBLE:
  case CUDNN_DATA_INT64:
    return 8;
  case CUDNN_DATA_FLOAT:
  case CUDNN_DATA_INT32:
    return 4;
  case CUDNN_DATA_HALF:
  case CUDNN_DATA_BFLOAT16:
    return 2;
  case CUDNN_DATA_INT8:
  case CUDNN_DATA_UINT8:
  case CUDNN_DATA_BOOLEAN:
    return 1;
  default:
    return 0;
  }
}

bool checkOperation(Descriptor &d, const char *call) {
  d.operation = OperationInfo();
  d.operation.kind = d.type;
  switch (d.type) {
  case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    return checkPointwise(d, call);
  case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    return checkMatmul(d, call);
  case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    return checkReduction(d, call);
  case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
    return checkReshape(d, call);
  default:
    return violation("%s: descriptor type %d is not an operation", call,
                     static_cast<int>(d.type));
  }
}

bool checkGraph(Descriptor &d, const char *call) {
  const Attribute &ops = d.attributes.at(CUDNN_ATTR_OPERATIONGRAPH_OPS);
  GraphInfo graph;
  std::map<int64_t, int> producers;
  for (int64_t i = 0; i < ops.count; ++i) {
    Descriptor *op = live(ops.at<cudnnBackendDescriptor_t>(i));
    if (!op)
      return violation("%s: the graph's operation %lld is dead", call,
                       static_cast<long long>(i));
    graph.operations.push_back(op->operation);
    for (const auto *list : {&op->operation.inputs, &op->operation.outputs})
      for (const TensorInfo &t : *list) {
        auto [it, isNew] = graph.tensors.try_emplace(t.uid, t);
        if (!isNew && !sameTensor(it->second, t))
          return violation("%s: two different tensors have uid %lld", call,
                           static_cast<long long>(t.uid));
      }
    for (const TensorInfo &t : op->operation.outputs)
      if (++producers[t.uid] > 1)
        return violation("%s: uid %lld is written by two operations", call,
                         static_cast<long long>(t.uid));
  }
  for (const OperationInfo &op : graph.operations)
    for (const TensorInfo &t : op.inputs)
      if (t.isVirtual && !producers.count(t.uid))
        return violation("%s: virtual uid %lld is read but no operation of "
                         "the graph writes it",
                         call, static_cast<long long>(t.uid));
  d.graph = std::move(graph);
  return true;
}

std::string engineFor(const GraphInfo &graph, int64_t &index,
                      int64_t &workspaceBytes) {
  int matmuls = 0, reshapes = 0;
  std::set<int64_t> reductions, pointwise;
  bool identityOut = false, statsOut = false, matmulOut = false;
  for (const OperationInfo &op : graph.operations) {
    const TensorInfo &out = op.outputs.front();
    switch (op.kind) {
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
      ++matmuls;
      matmulOut = matmulOut || !out.isVirtual;
      break;
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
      ++reshapes;
      break;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
      reductions.insert(op.mode);
      break;
    default:
      pointwise.insert(op.mode);
      identityOut = identityOut ||
                    (op.mode == CUDNN_POINTWISE_IDENTITY && !out.isVirtual);
      statsOut =
          statsOut || (op.mode == CUDNN_POINTWISE_ADD && !out.isVirtual &&
                       out.type == CUDNN_DATA_FLOAT && out.dims.back() == 1);
    }
  }
  bool softmax = reductions.count(CUDNN_REDUCE_TENSOR_ADD) &&
                 pointwise.count(CUDNN_POINTWISE_EXP);
  if (matmuls == 2 && softmax && reductions.count(CUDNN_REDUCE_TENSOR_MAX) &&
      pointwise.count(CUDNN_POINTWISE_LOG) &&
      pointwise.count(CUDNN_POINTWISE_DIV) && matmulOut && statsOut) {
    index = 1;
    workspaceBytes = 4096;
    return "sdpa_fprop";
  }
  if (matmuls == 5 && softmax && reshapes >= 3 && identityOut) {
    index = 2;
    workspaceBytes = int64_t{1} << 20;
    return "sdpa_bprop";
  }
  return "";
}

} // namespace loom::fake::cudnn
