//===- FakeCudnn.cpp - cuDNN's graph API on the fake device ---------------===//
//
// The cudnn_graph.h calls of runtime/cuda/kernels/CudnnGraph.cpp: handles,
// backend descriptors with their attributes (each checked against the
// table below: which descriptor takes it, its type, its count, the kind of
// descriptor it refers to), finalization (required attributes, then the
// checks of FakeCudnnGraph.cpp), the heuristic's engine configurations,
// execution plans and their execution, which checks the variant pack
// against the plan's tensors and memory and records the call. Nothing is
// computed. The attribute table follows cuDNN's backend API reference; an
// attribute Loom does not use is refused here even where cuDNN would take
// it, so that using a new one means teaching the fake about it first.
//
//===----------------------------------------------------------------------===//

#include "FakeCudnn.h"
#include "FakeDevice.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>

namespace loom::fake::cudnn {
namespace {

/// What a descriptor attribute must be: the descriptor that takes it, its
/// value type, its count, and for a descriptor-valued one, the kind it
/// refers to (kAnyOperation: an operation of any kind).
struct Rule {
  cudnnBackendDescriptorType_t descriptor;
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type;
  int64_t minCount, maxCount;
  int refersTo;
  bool required;
};

constexpr int kNone = -1, kAnyOperation = -2;

#define RULE(desc, attr, type, lo, hi, refers, required)                       \
  {CUDNN_BACKEND_##desc##_DESCRIPTOR,                                          \
   CUDNN_ATTR_##attr,                                                          \
   CUDNN_TYPE_##type,                                                          \
   lo,                                                                         \
   hi,                                                                         \
   refers,                                                                     \
   required}
#define TENSOR_REF CUDNN_BACKEND_TENSOR_DESCRIPTOR

const Rule kRules[] = {
    RULE(TENSOR, TENSOR_DATA_TYPE, DATA_TYPE, 1, 1, kNone, true),
    RULE(TENSOR, TENSOR_DIMENSIONS, INT64, 1, CUDNN_DIM_MAX, kNone, true),
    RULE(TENSOR, TENSOR_STRIDES, INT64, 1, CUDNN_DIM_MAX, kNone, true),
    RULE(TENSOR, TENSOR_UNIQUE_ID, INT64, 1, 1, kNone, true),
    RULE(TENSOR, TENSOR_BYTE_ALIGNMENT, INT64, 1, 1, kNone, true),
    RULE(TENSOR, TENSOR_IS_VIRTUAL, BOOLEAN, 1, 1, kNone, false),
    RULE(TENSOR, TENSOR_IS_BY_VALUE, BOOLEAN, 1, 1, kNone, false),
    RULE(POINTWISE, POINTWISE_MODE, POINTWISE_MODE, 1, 1, kNone, true),
    RULE(POINTWISE, POINTWISE_MATH_PREC, DATA_TYPE, 1, 1, kNone, true),
    RULE(POINTWISE, POINTWISE_AXIS, INT64, 1, 1, kNone, false),
    RULE(MATMUL, MATMUL_COMP_TYPE, DATA_TYPE, 1, 1, kNone, true),
    RULE(REDUCTION, REDUCTION_OPERATOR, REDUCTION_OPERATOR_TYPE, 1, 1, kNone,
         true),
    RULE(REDUCTION, REDUCTION_COMP_TYPE, DATA_TYPE, 1, 1, kNone, true),
    RULE(OPERATION_POINTWISE, OPERATION_POINTWISE_PW_DESCRIPTOR,
         BACKEND_DESCRIPTOR, 1, 1, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, true),
    RULE(OPERATION_POINTWISE, OPERATION_POINTWISE_XDESC, BACKEND_DESCRIPTOR, 1,
         1, TENSOR_REF, true),
    RULE(OPERATION_POINTWISE, OPERATION_POINTWISE_BDESC, BACKEND_DESCRIPTOR, 1,
         1, TENSOR_REF, false),
    RULE(OPERATION_POINTWISE, OPERATION_POINTWISE_TDESC, BACKEND_DESCRIPTOR, 1,
         1, TENSOR_REF, false),
    RULE(OPERATION_POINTWISE, OPERATION_POINTWISE_YDESC, BACKEND_DESCRIPTOR, 1,
         1, TENSOR_REF, true),
    RULE(OPERATION_MATMUL, OPERATION_MATMUL_ADESC, BACKEND_DESCRIPTOR, 1, 1,
         TENSOR_REF, true),
    RULE(OPERATION_MATMUL, OPERATION_MATMUL_BDESC, BACKEND_DESCRIPTOR, 1, 1,
         TENSOR_REF, true),
    RULE(OPERATION_MATMUL, OPERATION_MATMUL_CDESC, BACKEND_DESCRIPTOR, 1, 1,
         TENSOR_REF, true),
    RULE(OPERATION_MATMUL, OPERATION_MATMUL_DESC, BACKEND_DESCRIPTOR, 1, 1,
         CUDNN_BACKEND_MATMUL_DESCRIPTOR, true),
    RULE(OPERATION_REDUCTION, OPERATION_REDUCTION_XDESC, BACKEND_DESCRIPTOR, 1,
         1, TENSOR_REF, true),
    RULE(OPERATION_REDUCTION, OPERATION_REDUCTION_YDESC, BACKEND_DESCRIPTOR, 1,
         1, TENSOR_REF, true),
    RULE(OPERATION_REDUCTION, OPERATION_REDUCTION_DESC, BACKEND_DESCRIPTOR, 1,
         1, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, true),
    RULE(OPERATION_RESHAPE, OPERATION_RESHAPE_XDESC, BACKEND_DESCRIPTOR, 1, 1,
         TENSOR_REF, true),
    RULE(OPERATION_RESHAPE, OPERATION_RESHAPE_YDESC, BACKEND_DESCRIPTOR, 1, 1,
         TENSOR_REF, true),
    RULE(OPERATIONGRAPH, OPERATIONGRAPH_OPS, BACKEND_DESCRIPTOR, 1, 1 << 20,
         kAnyOperation, true),
    RULE(OPERATIONGRAPH, OPERATIONGRAPH_HANDLE, HANDLE, 1, 1, kNone, true),
    RULE(ENGINEHEUR, ENGINEHEUR_OPERATION_GRAPH, BACKEND_DESCRIPTOR, 1, 1,
         CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, true),
    RULE(ENGINEHEUR, ENGINEHEUR_MODE, HEUR_MODE, 1, 1, kNone, true),
    RULE(EXECUTION_PLAN, EXECUTION_PLAN_ENGINE_CONFIG, BACKEND_DESCRIPTOR, 1, 1,
         CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, true),
    RULE(EXECUTION_PLAN, EXECUTION_PLAN_HANDLE, HANDLE, 1, 1, kNone, true),
    RULE(VARIANT_PACK, VARIANT_PACK_UNIQUE_IDS, INT64, 0, 1 << 20, kNone, true),
    RULE(VARIANT_PACK, VARIANT_PACK_DATA_POINTERS, VOID_PTR, 0, 1 << 20, kNone,
         true),
    RULE(VARIANT_PACK, VARIANT_PACK_WORKSPACE, VOID_PTR, 1, 1, kNone, true),
};

#undef RULE
#undef TENSOR_REF

/// The descriptor kinds Loom creates; the fake knows no other.
const std::set<int> kKnownTypes = {
    CUDNN_BACKEND_TENSOR_DESCRIPTOR,
    CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
    CUDNN_BACKEND_MATMUL_DESCRIPTOR,
    CUDNN_BACKEND_REDUCTION_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
    CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
    CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
    CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
    CUDNN_BACKEND_ENGINE_DESCRIPTOR,
    CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
    CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
};

bool isOperation(cudnnBackendDescriptorType_t type) {
  return type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ||
         type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ||
         type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR ||
         type == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR;
}

/// Bytes of one value of an attribute type (0: one the fake does not know).
size_t valueBytes(cudnnBackendAttributeType_t type) {
  switch (type) {
  case CUDNN_TYPE_HANDLE:
  case CUDNN_TYPE_VOID_PTR:
  case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    return sizeof(void *);
  case CUDNN_TYPE_BOOLEAN:
    return sizeof(bool);
  case CUDNN_TYPE_INT64:
    return sizeof(int64_t);
  case CUDNN_TYPE_FLOAT:
    return sizeof(float);
  case CUDNN_TYPE_DOUBLE:
    return sizeof(double);
  case CUDNN_TYPE_DATA_TYPE:
  case CUDNN_TYPE_POINTWISE_MODE:
  case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE:
  case CUDNN_TYPE_HEUR_MODE:
    return sizeof(int32_t); // enums
  default:
    return 0;
  }
}

struct Handle {
  cudaStream_t stream = nullptr;
};

struct Registry {
  std::map<cudnnBackendDescriptor_t, std::unique_ptr<Descriptor>> descriptors;
  std::map<cudnnHandle_t, Handle> handles;
};

Registry &registry() {
  static Registry *instance = new Registry;
  return *instance;
}

const Rule *ruleFor(cudnnBackendDescriptorType_t descriptor,
                    cudnnBackendAttributeName_t name) {
  for (const Rule &rule : kRules)
    if (rule.descriptor == descriptor && rule.name == name)
      return &rule;
  return nullptr;
}

/// The checks of finalize beyond the required attributes, by kind.
cudnnStatus_t finalizeChecks(Descriptor &d) {
  const char *call = "cudnnBackendFinalize";
  switch (d.type) {
  case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    return finalizeTensor(d);
  case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: {
    auto mode =
        d.attributes.at(CUDNN_ATTR_POINTWISE_MODE).at<cudnnPointwiseMode_t>(0);
    if (mode == CUDNN_POINTWISE_GEN_INDEX &&
        !d.attributes.count(CUDNN_ATTR_POINTWISE_AXIS))
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: a GEN_INDEX pointwise descriptor without its axis",
                    call);
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
  case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
    return CUDNN_STATUS_SUCCESS;
  case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    return checkGraph(d, call) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
  case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
    Descriptor *graph =
        live(d.attributes.at(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)
                 .at<cudnnBackendDescriptor_t>(0));
    if (!graph)
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: the heuristic's operation graph is dead", call);
    d.graph = graph->graph;
    const char *refused = std::getenv("LOOM_FAKE_CUDNN");
    if (refused && std::strcmp(refused, "refuse") == 0)
      d.engine.clear();
    else
      d.engine = engineFor(d.graph, d.engineIndex, d.workspaceBytes);
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
    Descriptor *config =
        live(d.attributes.at(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)
                 .at<cudnnBackendDescriptor_t>(0));
    if (!config)
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: the plan's engine configuration is dead", call);
    d.graph = config->graph;
    d.engine = config->engine;
    d.engineIndex = config->engineIndex;
    d.workspaceBytes = config->workspaceBytes;
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
    if (d.attributes.at(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS).count !=
        d.attributes.at(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS).count)
      return refuse(
          CUDNN_STATUS_BAD_PARAM,
          "%s: a variant pack with %lld uids and %lld pointers", call,
          static_cast<long long>(
              d.attributes.at(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS).count),
          static_cast<long long>(
              d.attributes.at(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS).count));
    return CUDNN_STATUS_SUCCESS;
  case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
  case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  "%s: the fake gives engine configurations and engines only "
                  "through the heuristic's results",
                  call);
  default:
    return checkOperation(d, call) ? CUDNN_STATUS_SUCCESS
                                   : CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  }
}

} // namespace

Descriptor *live(cudnnBackendDescriptor_t handle) {
  auto &descriptors = registry().descriptors;
  auto found = descriptors.find(handle);
  return found == descriptors.end() ? nullptr : found->second.get();
}

} // namespace loom::fake::cudnn

using namespace loom::fake;
using namespace loom::fake::cudnn;

extern "C" {

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
  case CUDNN_STATUS_SUCCESS:
    return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_BAD_PARAM:
    return "CUDNN_STATUS_BAD_PARAM";
  case CUDNN_STATUS_BAD_PARAM_NULL_POINTER:
    return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
  case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
    return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
  case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED:
    return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
  case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH:
    return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
  case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES:
    return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
  case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE:
    return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
  case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE:
    return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
  case CUDNN_STATUS_NOT_SUPPORTED:
    return "CUDNN_STATUS_NOT_SUPPORTED";
  case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE:
    return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
  default:
    return "CUDNN_STATUS_INTERNAL_ERROR";
  }
}

void cudnnGetLastErrorString(char *message, size_t maxSize) {
  if (!message || maxSize == 0)
    return;
  std::snprintf(message, maxSize, "%s", lastError().c_str());
  lastError().clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  *handle = reinterpret_cast<cudnnHandle_t>(new char);
  registry().handles[*handle] = Handle();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!registry().handles.erase(handle))
    return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy: %p is not a handle",
                  static_cast<void *>(handle));
  delete reinterpret_cast<char *>(handle);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto found = registry().handles.find(handle);
  if (found == registry().handles.end())
    return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: %p is not a handle",
                  static_cast<void *>(handle));
  if (!liveStream(stream))
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "cudnnSetStream: stream %p is not a live stream",
                  static_cast<void *>(stream));
  found->second.stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *out) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!out)
    return refuse(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                  "cudnnBackendCreateDescriptor: no place for the result");
  if (!kKnownTypes.count(type))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  "cudnnBackendCreateDescriptor: descriptor type %d unknown "
                  "to the fake",
                  static_cast<int>(type));
  auto descriptor = std::make_unique<Descriptor>();
  descriptor->type = type;
  *out = descriptor.get();
  registry().descriptors[*out] = std::move(descriptor);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t desc) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!registry().descriptors.erase(desc))
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "cudnnBackendDestroyDescriptor: %p is not a live descriptor",
                  desc);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t desc,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type,
                                       int64_t count, const void *values) {
  Device &dev = device();
  std::lock_guard<std::mutex> lock(dev.mutex);
  const char *call = "cudnnBackendSetAttribute";
  Descriptor *d = live(desc);
  if (!d)
    return refuse(CUDNN_STATUS_BAD_PARAM, "%s: %p is not a live descriptor",
                  call, desc);
  if (d->finalized)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: attribute %d set on a finalized descriptor (type %d)",
                  call, static_cast<int>(name), static_cast<int>(d->type));
  const Rule *rule = ruleFor(d->type, name);
  if (!rule)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: attribute %d is not one the fake knows for descriptor "
                  "type %d",
                  call, static_cast<int>(name), static_cast<int>(d->type));
  if (type != rule->type)
    return refuse(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                  "%s: attribute %d of descriptor type %d given as type %d, "
                  "not %d",
                  call, static_cast<int>(name), static_cast<int>(d->type),
                  static_cast<int>(type), static_cast<int>(rule->type));
  if (count < rule->minCount || count > rule->maxCount ||
      (count > 0 && !values))
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: attribute %d of descriptor type %d with %lld values "
                  "(%lld to %lld)",
                  call, static_cast<int>(name), static_cast<int>(d->type),
                  static_cast<long long>(count),
                  static_cast<long long>(rule->minCount),
                  static_cast<long long>(rule->maxCount));
  Attribute attribute;
  attribute.type = type;
  attribute.count = count;
  auto *bytes = static_cast<const uint8_t *>(values);
  attribute.bytes.assign(bytes, bytes + count * valueBytes(type));
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
    for (int64_t i = 0; i < count; ++i) {
      Descriptor *other = live(attribute.at<cudnnBackendDescriptor_t>(i));
      if (!other)
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "%s: attribute %d refers to a dead descriptor", call,
                      static_cast<int>(name));
      if (!other->finalized)
        return refuse(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                      "%s: attribute %d refers to an unfinalized descriptor "
                      "(type %d)",
                      call, static_cast<int>(name),
                      static_cast<int>(other->type));
      bool kind = rule->refersTo == kAnyOperation
                      ? isOperation(other->type)
                      : static_cast<int>(other->type) == rule->refersTo;
      if (!kind)
        return refuse(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                      "%s: attribute %d refers to a descriptor of type %d",
                      call, static_cast<int>(name),
                      static_cast<int>(other->type));
    }
  if (type == CUDNN_TYPE_HANDLE &&
      !registry().handles.count(attribute.at<cudnnHandle_t>(0)))
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: attribute %d is not a live cuDNN handle", call,
                  static_cast<int>(name));
  d->attributes[name] = std::move(attribute);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t desc) {
  Device &dev = device();
  std::lock_guard<std::mutex> lock(dev.mutex);
  Descriptor *d = live(desc);
  if (!d)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "cudnnBackendFinalize: %p is not a live descriptor", desc);
  if (d->finalized)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "cudnnBackendFinalize: descriptor (type %d) finalized twice",
                  static_cast<int>(d->type));
  for (const Rule &rule : kRules)
    if (rule.descriptor == d->type && rule.required &&
        !d->attributes.count(rule.name))
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "cudnnBackendFinalize: descriptor type %d lacks its "
                    "required attribute %d",
                    static_cast<int>(d->type), static_cast<int>(rule.name));
  cudnnStatus_t status = finalizeChecks(*d);
  if (status == CUDNN_STATUS_SUCCESS)
    d->finalized = true;
  return status;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const desc,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type,
                                       int64_t requested, int64_t *count,
                                       void *values) {
  Device &dev = device();
  std::lock_guard<std::mutex> lock(dev.mutex);
  const char *call = "cudnnBackendGetAttribute";
  Descriptor *d = live(desc);
  if (!d || !d->finalized)
    return refuse(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                  "%s: attribute %d of a dead or unfinalized descriptor", call,
                  static_cast<int>(name));
  if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
      type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    int64_t available = d->engine.empty() ? 0 : 1;
    *count = std::min(available, requested > 0 ? requested : available);
    auto *configs = static_cast<cudnnBackendDescriptor_t *>(values);
    for (int64_t i = 0; requested > 0 && i < *count; ++i) {
      Descriptor *config = live(configs[i]);
      if (!config || config->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR ||
          config->finalized)
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "%s: heuristic result %lld is not a fresh engine "
                      "configuration descriptor",
                      call, static_cast<long long>(i));
      config->graph = d->graph;
      config->engine = d->engine;
      config->engineIndex = d->engineIndex;
      config->workspaceBytes = d->workspaceBytes;
      config->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE &&
      type == CUDNN_TYPE_INT64 && requested >= 1) {
    *count = 1;
    *static_cast<int64_t *>(values) = d->workspaceBytes;
    return CUDNN_STATUS_SUCCESS;
  }
  if (name == CUDNN_ATTR_ENGINECFG_ENGINE &&
      type == CUDNN_TYPE_BACKEND_DESCRIPTOR && requested >= 1) {
    Descriptor *engine = live(*static_cast<cudnnBackendDescriptor_t *>(values));
    if (!engine || engine->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR)
      return refuse(CUDNN_STATUS_BAD_PARAM,
                    "%s: the engine of a configuration goes into an engine "
                    "descriptor",
                    call);
    engine->engine = d->engine;
    engine->engineIndex = d->engineIndex;
    engine->finalized = true;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  if (name == CUDNN_ATTR_ENGINE_GLOBAL_INDEX && type == CUDNN_TYPE_INT64 &&
      requested >= 1) {
    *count = 1;
    *static_cast<int64_t *>(values) = d->engineIndex;
    return CUDNN_STATUS_SUCCESS;
  }
  return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                "%s: attribute %d as type %d is not one the fake gives", call,
                static_cast<int>(name), static_cast<int>(type));
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle,
                                  cudnnBackendDescriptor_t planHandle,
                                  cudnnBackendDescriptor_t packHandle) {
  Device &dev = device();
  std::lock_guard<std::mutex> lock(dev.mutex);
  const char *call = "cudnnBackendExecute";
  auto found = registry().handles.find(handle);
  if (found == registry().handles.end())
    return refuse(CUDNN_STATUS_BAD_PARAM, "%s: %p is not a handle", call,
                  static_cast<void *>(handle));
  if (!liveStream(found->second.stream))
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: the handle's stream %p is not live", call,
                  static_cast<void *>(found->second.stream));
  Descriptor *plan = live(planHandle), *pack = live(packHandle);
  if (!plan || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
      !plan->finalized || !pack ||
      pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !pack->finalized)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "%s: needs a finalized plan and variant pack", call);
  if (cudnnStatus_t status = checkPack(*plan, *pack);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  ++dev.stats.cudnn_executions;
  ++dev.cudnnExecutions[plan->engine];
  return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
