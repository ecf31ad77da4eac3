//===- FakeCudnnGraph.cpp - The fake cuDNN's checks of tensors and graphs -===//
//
// A tensor's layout must not overlap itself. What a finalized operation
// must agree with (FakeCuda.h): a matmul's
// [..., M, K] x [..., K, N] -> [..., M, N] with the batch dimensions of A
// in C and B's equal to A's, 1, or dividing them (grouped key/value heads,
// which cuDNN's attention engines take); a pointwise operation's operands
// broadcasting to its result, with its mode's operand count and types; a
// reduction's result smaller than its operand only where it reduces; a
// reshape keeping the element count. A graph's tensors have one uid each
// and one producer, and it reads no virtual tensor it does not produce.
//
// The heuristic stands in for the runtime-fusion engines' pattern match by
// the operations a graph holds, not by what they compute. An execution's
// variant pack must give the plan's tensors in memory, and only those,
// where memory is.
//
//===----------------------------------------------------------------------===//

#include "FakeCudnn.h"
#include "FakeDevice.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
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

/// The extent in bytes of a tensor in memory, from its first element.
uint64_t extentOf(const TensorInfo &t) {
  uint64_t elements = 1;
  for (size_t i = 0; i < t.dims.size(); ++i)
    elements += static_cast<uint64_t>(t.dims[i] - 1) *
                static_cast<uint64_t>(t.strides[i]);
  return elements * static_cast<uint64_t>(bytesOf(t.type));
}

} // namespace

std::string &lastError() {
  thread_local std::string text;
  return text;
}

__attribute__((format(printf, 2, 3))) cudnnStatus_t refuse(cudnnStatus_t status,
                                                           const char *format,
                                                           ...) {
  char text[512];
  va_list list;
  va_start(list, format);
  std::vsnprintf(text, sizeof text, format, list);
  va_end(list);
  violation("%s", text);
  lastError() = text;
  return status;
}

cudnnStatus_t finalizeTensor(Descriptor &d) {
  const char *call = "cudnnBackendFinalize(tensor)";
  TensorInfo &t = d.tensor;
  auto &attrs = d.attributes;
  t.type = attrs.at(CUDNN_ATTR_TENSOR_DATA_TYPE).at<cudnnDataType_t>(0);
  t.dims = attrs.at(CUDNN_ATTR_TENSOR_DIMENSIONS).all<int64_t>();
  t.strides = attrs.at(CUDNN_ATTR_TENSOR_STRIDES).all<int64_t>();
  t.uid = attrs.at(CUDNN_ATTR_TENSOR_UNIQUE_ID).at<int64_t>(0);
  t.alignment = attrs.at(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT).at<int64_t>(0);
  auto flag = [&](cudnnBackendAttributeName_t name) {
    auto found = attrs.find(name);
    return found != attrs.end() && found->second.at<bool>(0);
  };
  t.isVirtual = flag(CUDNN_ATTR_TENSOR_IS_VIRTUAL);
  t.byValue = flag(CUDNN_ATTR_TENSOR_IS_BY_VALUE);
  if (bytesOf(t.type) == 0)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                  "%s: data type %d unknown to the fake", call, t.type);
  if (t.dims.size() != t.strides.size())
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: uid %lld has %zu dimensions and %zu strides", call,
                  static_cast<long long>(t.uid), t.dims.size(),
                  t.strides.size());
  for (size_t i = 0; i < t.dims.size(); ++i)
    if (t.dims[i] <= 0 || t.strides[i] <= 0)
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: uid %lld has dimension %lld or stride %lld <= 0", call,
                    static_cast<long long>(t.uid),
                    static_cast<long long>(t.dims[i]),
                    static_cast<long long>(t.strides[i]));
  if (t.alignment <= 0 || (t.alignment & (t.alignment - 1)) != 0)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: uid %lld has byte alignment %lld, not a power of two",
                  call, static_cast<long long>(t.uid),
                  static_cast<long long>(t.alignment));
  if (t.isVirtual && t.byValue)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: uid %lld is both virtual and by value", call,
                  static_cast<long long>(t.uid));
  // No two elements at one address: ordered by stride, each dimension must
  // step over all of the ones inside it.
  std::vector<std::pair<int64_t, int64_t>> order; // (stride, dim)
  for (size_t i = 0; i < t.dims.size(); ++i)
    if (t.dims[i] > 1)
      order.push_back({t.strides[i], t.dims[i]});
  std::sort(order.begin(), order.end());
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i].first < order[i - 1].first * order[i - 1].second)
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: uid %lld has overlapping strides (stride %lld "
                    "inside a dimension of %lld x stride %lld)",
                    call, static_cast<long long>(t.uid),
                    static_cast<long long>(order[i].first),
                    static_cast<long long>(order[i - 1].second),
                    static_cast<long long>(order[i - 1].first));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t checkPack(const Descriptor &plan, const Descriptor &pack) {
  const char *call = "cudnnBackendExecute";
  std::vector<int64_t> uids =
      pack.attributes.at(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS).all<int64_t>();
  std::vector<void *> pointers =
      pack.attributes.at(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS).all<void *>();
  void *workspace =
      pack.attributes.at(CUDNN_ATTR_VARIANT_PACK_WORKSPACE).at<void *>(0);
  std::set<int64_t> seen;
  for (size_t i = 0; i < uids.size(); ++i) {
    auto found = plan.graph.tensors.find(uids[i]);
    if (found == plan.graph.tensors.end())
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: uid %lld of the variant pack is not in the plan's "
                    "graph",
                    call, static_cast<long long>(uids[i]));
    const TensorInfo &t = found->second;
    if (t.isVirtual)
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: uid %lld is virtual, but the variant pack gives it "
                    "memory",
                    call, static_cast<long long>(uids[i]));
    if (!seen.insert(uids[i]).second)
      return refuse(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                    "%s: uid %lld twice in the variant pack", call,
                    static_cast<long long>(uids[i]));
    if (t.byValue) {
      if (!pointers[i] || isDevicePointer(pointers[i]))
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "%s: by-value uid %lld needs a host pointer, got %p",
                      call, static_cast<long long>(uids[i]), pointers[i]);
      continue;
    }
    if (reinterpret_cast<uintptr_t>(pointers[i]) % t.alignment != 0)
      return refuse(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                    "%s: uid %lld at %p is not %lld-byte aligned", call,
                    static_cast<long long>(uids[i]), pointers[i],
                    static_cast<long long>(t.alignment));
    char what[64];
    std::snprintf(what, sizeof what, "uid %lld",
                  static_cast<long long>(uids[i]));
    if (!inside(pointers[i], extentOf(t), call, what)) {
      lastError() = device().lastViolation;
      return CUDNN_STATUS_BAD_PARAM;
    }
  }
  for (const auto &[uid, t] : plan.graph.tensors)
    if (!t.isVirtual && !seen.count(uid))
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: uid %lld of the plan's graph is not in the variant "
                    "pack",
                    call, static_cast<long long>(uid));
  if (plan.workspaceBytes > 0 &&
      !inside(workspace, static_cast<uint64_t>(plan.workspaceBytes), call,
              "workspace")) {
    lastError() = device().lastViolation;
    return CUDNN_STATUS_BAD_PARAM;
  }
  return CUDNN_STATUS_SUCCESS;
}

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
