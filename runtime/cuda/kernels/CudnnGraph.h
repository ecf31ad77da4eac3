//===- CudnnGraph.h - Operation graphs on cuDNN's backend API ---*- C++ -*-===//
//
// A small layer over cudnn_graph.h's backend descriptors, enough for the
// fused attention graphs of CudnnAttention.cpp: tensors, matmul, pointwise,
// reduction and reshape operations, an operation graph, the heuristic's
// engine configurations tried in turn until one gives an execution plan,
// and the plan's execution with a variant pack. Every descriptor is
// finalized as soon as its attributes are set, so that an operation only
// ever refers to finalized tensors and a graph to finalized operations.
//
// Nothing here throws or prints: the first failing call is kept as a
// message naming the call, the attribute and cuDNN's status, and every
// later call does nothing, so that a graph is built in straight-line code
// and checked once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_CUDNNGRAPH_H
#define LOOM_RUNTIME_CUDA_KERNELS_CUDNNGRAPH_H

#include <cudnn_graph.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::cuda::cudnn {

/// A backend descriptor that destroys itself.
class Descriptor {
public:
  Descriptor() = default;
  ~Descriptor();
  Descriptor(Descriptor &&other) noexcept : raw(other.raw) {
    other.raw = nullptr;
  }
  Descriptor &operator=(Descriptor &&other) noexcept;
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;

  /// Creates a descriptor of `type` (destroying any held); cuDNN's status.
  cudnnStatus_t create(cudnnBackendDescriptorType_t type);
  cudnnBackendDescriptor_t get() const { return raw; }

private:
  cudnnBackendDescriptor_t raw = nullptr;
};

/// What a tensor of a graph is: in memory (the variant pack gives its
/// address), a host scalar passed by value, or virtual (it lives inside
/// the fused kernel).
enum class TensorKind { Memory, ByValue, Virtual };

/// A tensor of a graph: its descriptor's handle and what the graph's
/// checks need.
struct Tensor {
  cudnnBackendDescriptor_t desc = nullptr;
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
};

/// An execution plan and everything it was built from (kept alive with it).
struct Plan {
  std::vector<Descriptor> owned;
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspaceBytes = 0;
  /// The engine's global index (-1 when cuDNN does not say).
  int64_t engine = -1;
};

/// Builds one operation graph. Tensors and operations are created and
/// finalized at once; `error()` is the first failure, "" if none.
class Graph {
public:
  /// Every tensor's byte alignment: what cuDNN's fused attention engines
  /// need of the tensors in memory (16-byte vector loads).
  static constexpr int64_t kAlignment = 16;

  /// A tensor with explicit strides (elements).
  const Tensor *tensor(int64_t uid, cudnnDataType_t type,
                       std::vector<int64_t> dims, std::vector<int64_t> strides,
                       TensorKind kind);
  /// A virtual tensor with the next free virtual uid: packed row-major
  /// unless `strides` are given.
  const Tensor *intermediate(std::vector<int64_t> dims,
                             cudnnDataType_t type = CUDNN_DATA_FLOAT,
                             std::vector<int64_t> strides = {});
  /// A host scalar of type f32 passed by value.
  const Tensor *scalar(int64_t uid);

  /// c = a b over the last two dimensions (batch dimensions before them).
  void matmul(const Tensor *a, const Tensor *b, const Tensor *c);
  /// y = mode(x[, b[, t]]) elementwise with broadcasting, computed in
  /// `precision`; `axis` for CUDNN_POINTWISE_GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const Tensor *x, const Tensor *y,
                 const Tensor *b = nullptr, const Tensor *t = nullptr,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT,
                 int64_t axis = -1);
  /// y = x reduced over the dimensions where y is smaller.
  void reduction(cudnnReduceTensorOp_t op, const Tensor *x, const Tensor *y);
  /// y = x seen through y's dimensions and strides (a transpose here).
  void reshape(const Tensor *x, const Tensor *y);

  /// The graph's plan: the heuristic's configurations (mode A) tried in
  /// order until one finalizes. False, with `error()` saying why, when
  /// none does or the graph itself was refused.
  bool plan(cudnnHandle_t handle, Plan &out);

  const std::string &error() const { return firstError; }

private:
  /// A new descriptor of `type`, owned by the graph; null after an error.
  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type,
                                  const char *what);
  void set(cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void *values,
           const char *what);
  void finalize(cudnnBackendDescriptor_t desc, const char *what);
  void failed(const char *what, cudnnStatus_t status);
  void operation(cudnnBackendDescriptor_t op);

  std::vector<Descriptor> owned;
  std::vector<std::unique_ptr<Tensor>> tensors;
  std::vector<cudnnBackendDescriptor_t> operations;
  int64_t nextVirtualUid = 1000;
  std::string firstError;
};

/// Runs `plan` on `handle`'s stream: `uids[i]` at `pointers[i]` (device
/// memory; a host scalar for a by-value tensor), with `workspace`. 0, or
/// the failing call and cuDNN's status in `error`.
int32_t execute(cudnnHandle_t handle, const Plan &plan,
                const std::vector<int64_t> &uids,
                const std::vector<void *> &pointers, void *workspace,
                std::string &error);

/// cuDNN's message for `status`, with its last error string when it has
/// one.
std::string describe(cudnnStatus_t status);

} // namespace loom::cuda::cudnn

#endif // LOOM_RUNTIME_CUDA_KERNELS_CUDNNGRAPH_H
