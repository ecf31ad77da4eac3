//===- CudnnGraph.cpp - Operation graphs on cuDNN's backend API -----------===//
//
// The attribute each descriptor takes is cuDNN's backend API reference
// ("cuDNN Graph API: backend descriptor types"): a tensor's data type,
// dimensions, strides, unique id and byte alignment (and whether it is
// virtual or by value); an operation's descriptors of its tensors and of
// its mode; an operation graph's operations and handle; a heuristic's
// graph and mode; an execution plan's engine configuration and handle; a
// variant pack's uids, pointers and workspace.
//
//===----------------------------------------------------------------------===//

#include "CudnnGraph.h"

#include <cstdio>

namespace loom::cuda::cudnn {

cudnnStatus_t Descriptor::create(cudnnBackendDescriptorType_t type) {
  *this = Descriptor();
  cudnnStatus_t status = cudnnBackendCreateDescriptor(type, &raw);
  if (status != CUDNN_STATUS_SUCCESS)
    raw = nullptr;
  return status;
}

Descriptor::~Descriptor() {
  if (raw)
    cudnnBackendDestroyDescriptor(raw);
}

Descriptor &Descriptor::operator=(Descriptor &&other) noexcept {
  if (this != &other) {
    if (raw)
      cudnnBackendDestroyDescriptor(raw);
    raw = other.raw;
    other.raw = nullptr;
  }
  return *this;
}

std::string describe(cudnnStatus_t status) {
  std::string text = cudnnGetErrorString(status);
  char last[256] = "";
  cudnnGetLastErrorString(last, sizeof last);
  if (last[0])
    text += std::string(" (") + last + ")";
  return text;
}

void Graph::failed(const char *what, cudnnStatus_t status) {
  if (firstError.empty())
    firstError = std::string(what) + ": " + describe(status);
}

cudnnBackendDescriptor_t Graph::create(cudnnBackendDescriptorType_t type,
                                       const char *what) {
  if (!firstError.empty())
    return nullptr;
  Descriptor desc;
  if (cudnnStatus_t status = desc.create(type);
      status != CUDNN_STATUS_SUCCESS) {
    failed(what, status);
    return nullptr;
  }
  owned.push_back(std::move(desc));
  return owned.back().get();
}

void Graph::set(cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count,
                const void *values, const char *what) {
  if (!firstError.empty() || !desc)
    return;
  if (cudnnStatus_t status =
          cudnnBackendSetAttribute(desc, name, type, count, values);
      status != CUDNN_STATUS_SUCCESS) {
    char text[160];
    std::snprintf(text, sizeof text, "%s: attribute %d", what,
                  static_cast<int>(name));
    failed(text, status);
  }
}

void Graph::finalize(cudnnBackendDescriptor_t desc, const char *what) {
  if (!firstError.empty() || !desc)
    return;
  if (cudnnStatus_t status = cudnnBackendFinalize(desc);
      status != CUDNN_STATUS_SUCCESS)
    failed(what, status);
}

const Tensor *Graph::tensor(int64_t uid, cudnnDataType_t type,
                            std::vector<int64_t> dims,
                            std::vector<int64_t> strides, TensorKind kind) {
  auto t = std::make_unique<Tensor>();
  t->uid = uid;
  t->type = type;
  t->dims = std::move(dims);
  t->strides = std::move(strides);
  const char *what = "tensor";
  t->desc = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
  int64_t rank = static_cast<int64_t>(t->dims.size());
  bool isVirtual = kind == TensorKind::Virtual;
  bool byValue = kind == TensorKind::ByValue;
  set(t->desc, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t->type,
      what);
  set(t->desc, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank,
      t->dims.data(), what);
  set(t->desc, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank,
      t->strides.data(), what);
  set(t->desc, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t->uid, what);
  set(t->desc, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
      &kAlignment, what);
  set(t->desc, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual,
      what);
  set(t->desc, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValue,
      what);
  finalize(t->desc, what);
  tensors.push_back(std::move(t));
  return tensors.back().get();
}

const Tensor *Graph::intermediate(std::vector<int64_t> dims,
                                  cudnnDataType_t type,
                                  std::vector<int64_t> strides) {
  if (strides.empty()) {
    strides.assign(dims.size(), 1);
    for (size_t d = dims.size() - 1; d > 0; --d)
      strides[d - 1] = strides[d] * dims[d];
  }
  return tensor(nextVirtualUid++, type, std::move(dims), std::move(strides),
                TensorKind::Virtual);
}

const Tensor *Graph::scalar(int64_t uid) {
  return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1},
                TensorKind::ByValue);
}

void Graph::operation(cudnnBackendDescriptor_t op) {
  if (firstError.empty() && op)
    operations.push_back(op);
}

void Graph::matmul(const Tensor *a, const Tensor *b, const Tensor *c) {
  const char *what = "matmul";
  cudnnBackendDescriptor_t desc = create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set(desc, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute,
      what);
  finalize(desc, what);
  cudnnBackendDescriptor_t op =
      create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
      &a->desc, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
      &b->desc, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
      &c->desc, what);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
      &desc, what);
  finalize(op, what);
  operation(op);
}

void Graph::pointwise(cudnnPointwiseMode_t mode, const Tensor *x,
                      const Tensor *y, const Tensor *b, const Tensor *t,
                      cudnnDataType_t precision, int64_t axis) {
  const char *what = "pointwise";
  cudnnBackendDescriptor_t desc =
      create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
  set(desc, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode,
      what);
  set(desc, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision,
      what);
  if (axis >= 0)
    set(desc, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
  finalize(desc, what);
  cudnnBackendDescriptor_t op =
      create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc, what);
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      1, &x->desc, what);
  if (b)
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        1, &b->desc, what);
  if (t)
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        1, &t->desc, what);
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      1, &y->desc, what);
  finalize(op, what);
  operation(op);
}

void Graph::reduction(cudnnReduceTensorOp_t reduce, const Tensor *x,
                      const Tensor *y) {
  const char *what = "reduction";
  cudnnBackendDescriptor_t desc =
      create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set(desc, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
      1, &reduce, what);
  set(desc, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute,
      what);
  finalize(desc, what);
  cudnnBackendDescriptor_t op =
      create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      1, &x->desc, what);
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      1, &y->desc, what);
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
      &desc, what);
  finalize(op, what);
  operation(op);
}

void Graph::reshape(const Tensor *x, const Tensor *y) {
  const char *what = "reshape";
  cudnnBackendDescriptor_t op =
      create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
  set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
      &x->desc, what);
  set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
      &y->desc, what);
  finalize(op, what);
  operation(op);
}

namespace {

/// The global index of `config`'s engine (for the profile and the bench),
/// or -1 when cuDNN does not give it.
int64_t engineIndex(cudnnBackendDescriptor_t config) {
  Descriptor engine;
  if (engine.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR) != CUDNN_STATUS_SUCCESS)
    return -1;
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t count = 0, index = -1;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &raw) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                               CUDNN_TYPE_INT64, 1, &count,
                               &index) != CUDNN_STATUS_SUCCESS)
    return -1;
  return index;
}

} // namespace

bool Graph::plan(cudnnHandle_t handle, Plan &out) {
  cudnnBackendDescriptor_t graph =
      create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<int64_t>(operations.size()), operations.data(),
      "operation graph");
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
      "operation graph");
  finalize(graph, "operation graph");
  cudnnBackendDescriptor_t heuristic =
      create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristic");
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  set(heuristic, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "engine heuristic");
  set(heuristic, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode,
      "engine heuristic");
  finalize(heuristic, "engine heuristic");
  if (!firstError.empty())
    return false;

  int64_t count = 0;
  if (cudnnStatus_t status = cudnnBackendGetAttribute(
          heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS,
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
      status != CUDNN_STATUS_SUCCESS) {
    failed("engine heuristic results", status);
    return false;
  }
  if (count <= 0) {
    firstError = "no engine configuration for the graph";
    return false;
  }
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count; ++i)
    configs.push_back(create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine cfg"));
  int64_t returned = 0;
  if (!firstError.empty())
    return false;
  if (cudnnStatus_t status = cudnnBackendGetAttribute(
          heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS,
          CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, configs.data());
      status != CUDNN_STATUS_SUCCESS) {
    failed("engine heuristic results", status);
    return false;
  }
  // The heuristic's order is its preference; an engine may still refuse
  // the graph when its plan is finalized (a shape, a layout).
  std::string refusals;
  for (int64_t i = 0; i < returned && i < count; ++i) {
    Descriptor plan;
    if (cudnnStatus_t status =
            plan.create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        status != CUDNN_STATUS_SUCCESS) {
      failed("execution plan", status);
      return false;
    }
    cudnnStatus_t status =
        cudnnBackendSetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                 CUDNN_TYPE_HANDLE, 1, &handle);
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendSetAttribute(
          plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]);
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendFinalize(plan.get());
    if (status != CUDNN_STATUS_SUCCESS) {
      if (refusals.empty())
        refusals = describe(status);
      continue;
    }
    int64_t got = 0;
    if (cudnnBackendGetAttribute(plan.get(),
                                 CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &got,
                                 &out.workspaceBytes) != CUDNN_STATUS_SUCCESS)
      continue;
    out.engine = engineIndex(configs[i]);
    out.plan = plan.get();
    owned.push_back(std::move(plan));
    out.owned = std::move(owned);
    return true;
  }
  firstError = "no engine configuration finalizes a plan" +
               (refusals.empty() ? std::string() : ": " + refusals);
  return false;
}

int32_t execute(cudnnHandle_t handle, const Plan &plan,
                const std::vector<int64_t> &uids,
                const std::vector<void *> &pointers, void *workspace,
                std::string &error) {
  Descriptor pack;
  if (cudnnStatus_t status = pack.create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      status != CUDNN_STATUS_SUCCESS) {
    error = "variant pack: " + describe(status);
    return 1;
  }
  int64_t count = static_cast<int64_t>(uids.size());
  const char *what = "variant pack";
  cudnnStatus_t status =
      cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                               CUDNN_TYPE_INT64, count, uids.data());
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendSetAttribute(
        pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
        count, pointers.data());
  if (status == CUDNN_STATUS_SUCCESS)
    status =
        cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                 CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendFinalize(pack.get());
  if (status == CUDNN_STATUS_SUCCESS) {
    what = "cudnnBackendExecute";
    status = cudnnBackendExecute(handle, plan.plan, pack.get());
  }
  if (status == CUDNN_STATUS_SUCCESS)
    return 0;
  error = std::string(what) + ": " + describe(status);
  return 1;
}

} // namespace loom::cuda::cudnn
