//===- FakeCudnn.h - The fake device's cuDNN descriptors --------*- C++ -*-===//
//
// What FakeCudnn.cpp (descriptors, attributes, execution) and
// FakeCudnnGraph.cpp (the checks of tensors, operations, graphs and variant
// packs; the heuristic) share. FakeCuda.h says what the fake cuDNN checks.
// Every function here is called with the device's mutex held.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_FAKECUDA_FAKECUDNN_H
#define LOOM_TEST_FAKECUDA_FAKECUDNN_H

#include <cudnn_graph.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace loom::fake::cudnn {

/// An attribute as it was set: its type, count and bytes.
struct Attribute {
  cudnnBackendAttributeType_t type = CUDNN_TYPE_HANDLE;
  int64_t count = 0;
  std::vector<uint8_t> bytes;

  template <typename T> T at(int64_t i) const {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    return value;
  }
  template <typename T> std::vector<T> all() const {
    std::vector<T> values;
    for (int64_t i = 0; i < count; ++i)
      values.push_back(at<T>(i));
    return values;
  }
};

/// A tensor as a finalized descriptor describes it.
struct TensorInfo {
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  int64_t alignment = 0;
  bool isVirtual = false, byValue = false;
};

/// An operation of a graph: its kind and mode, its operands' and results'
/// tensors.
struct OperationInfo {
  cudnnBackendDescriptorType_t kind =
      CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR;
  int64_t mode = -1; ///< pointwise mode or reduction operator
  std::vector<TensorInfo> inputs, outputs;
};

/// What a graph, a heuristic's configuration or a plan carries forward.
struct GraphInfo {
  std::vector<OperationInfo> operations;
  std::map<int64_t, TensorInfo> tensors; ///< by uid
};

/// A backend descriptor of the fake.
struct Descriptor {
  cudnnBackendDescriptorType_t type;
  bool finalized = false;
  std::map<cudnnBackendAttributeName_t, Attribute> attributes;
  TensorInfo tensor;          ///< a tensor's, once finalized
  OperationInfo operation;    ///< an operation's, once finalized
  GraphInfo graph;            ///< a graph's, a configuration's, a plan's
  std::string engine;         ///< a configuration's, a plan's, an engine's
  int64_t engineIndex = -1;   ///< likewise
  int64_t workspaceBytes = 0; ///< a plan's
};

/// The live descriptor `handle` is, or null.
Descriptor *live(cudnnBackendDescriptor_t handle);

/// cuDNN's last error string on this thread (cudnnGetLastErrorString).
std::string &lastError();

/// Records a violation (printf-style), also as cuDNN's last error string;
/// returns `status`.
cudnnStatus_t refuse(cudnnStatus_t status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// Finalize's checks of a tensor descriptor (strides, alignment, kind);
/// fills `d.tensor`.
cudnnStatus_t finalizeTensor(Descriptor &d);

/// An execution's checks of the variant pack against the plan.
cudnnStatus_t checkPack(const Descriptor &plan, const Descriptor &pack);

/// Checks a finalized operation's tensors against its kind (dimensions,
/// types, operand counts); fills `d.operation`. False after a violation.
bool checkOperation(Descriptor &d, const char *call);

/// Checks an operation graph (uids, producers) and fills `d.graph`.
bool checkGraph(Descriptor &d, const char *call);

/// The engine the fake's heuristic offers for `graph` ("" for none) and
/// its global index, and the workspace its plans ask for.
std::string engineFor(const GraphInfo &graph, int64_t &index,
                      int64_t &workspaceBytes);

/// Bytes per element of `type` (0 for a type the fake does not know).
int64_t bytesOf(cudnnDataType_t type);

} // namespace loom::fake::cudnn

#endif // LOOM_TEST_FAKECUDA_FAKECUDNN_H
