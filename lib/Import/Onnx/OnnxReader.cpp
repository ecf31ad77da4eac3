//===- OnnxReader.cpp - ModelProto to OnnxGraph ---------------------------===//
//
// The only file of the importer that includes protobuf: it parses the
// model with Debian's libonnx protobuf classes and copies what the importer
// needs into OnnxGraph. Tensors keep their bytes in raw_data's layout
// (little-endian), whichever field the writer used; external data is read
// from the file named relative to the model.
//
//===----------------------------------------------------------------------===//

#include "OnnxGraph.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace llvm;

namespace loom::onnx_import {
namespace {

Error readError(StringRef path, const Twine &message) {
  return createStringError(inconvertibleErrorCode(),
                           (path + ": " + message).str());
}

template <typename T> void appendBytes(std::string &bytes, T value) {
  char buffer[sizeof(T)];
  std::memcpy(buffer, &value, sizeof(T));
  bytes.append(buffer, sizeof(T));
}

/// Bytes per element of a type in raw_data.
int64_t elementBytes(DType type) {
  switch (type) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  case DType::Unsupported:
    return 0;
  }
  return 0;
}

/// A TensorProto's bytes in raw_data layout, from whichever field holds
/// them (raw_data, the typed repeated fields, or an external file).
Error tensorBytes(onnx::TensorProto &proto, DType type, StringRef modelPath,
                  std::string &bytes) {
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const onnx::StringStringEntryProto &entry : proto.external_data()) {
      bool bad = false;
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset")
        bad = StringRef(entry.value()).getAsInteger(10, offset);
      else if (entry.key() == "length")
        bad = StringRef(entry.value()).getAsInteger(10, length);
      if (bad)
        return readError(modelPath, "external data of tensor '" + proto.name() +
                                        "' has a bad " + entry.key());
    }
    SmallString<256> file(sys::path::parent_path(modelPath));
    sys::path::append(file, location);
    auto buffer = MemoryBuffer::getFile(file);
    if (!buffer)
      return readError(modelPath, "external data of tensor '" + proto.name() +
                                      "' in " + file + ": " +
                                      buffer.getError().message());
    StringRef all = (*buffer)->getBuffer();
    if (offset < 0 || offset > int64_t(all.size()) ||
        (length >= 0 && offset + length > int64_t(all.size())))
      return readError(modelPath, "external data of tensor '" + proto.name() +
                                      "' lies outside " + file);
    bytes = all.substr(offset, length < 0 ? StringRef::npos : length).str();
    return Error::success();
  }
  if (proto.has_raw_data()) {
    bytes.swap(*proto.mutable_raw_data()); // weights are big: no copy
    return Error::success();
  }
  switch (type) {
  case DType::F32:
    for (float v : proto.float_data())
      appendBytes(bytes, v);
    break;
  case DType::F64:
    for (double v : proto.double_data())
      appendBytes(bytes, v);
    break;
  case DType::I64:
    for (int64_t v : proto.int64_data())
      appendBytes(bytes, v);
    break;
  case DType::I32:
    for (int32_t v : proto.int32_data())
      appendBytes(bytes, v);
    break;
  case DType::I16:
  case DType::F16:
  case DType::BF16:
    for (int32_t v : proto.int32_data())
      appendBytes(bytes, static_cast<uint16_t>(v));
    break;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    for (int32_t v : proto.int32_data())
      appendBytes(bytes, static_cast<uint8_t>(v));
    break;
  case DType::Unsupported:
    break;
  }
  return Error::success();
}

Expected<RawTensor> readTensor(onnx::TensorProto &proto, StringRef modelPath) {
  RawTensor tensor;
  tensor.name = proto.name();
  tensor.onnxType = proto.data_type();
  tensor.dtype = dtypeFromOnnx(proto.data_type());
  for (int64_t d : proto.dims()) {
    if (d < 0)
      return readError(modelPath, "tensor '" + proto.name() +
                                      "' has a negative dimension");
    tensor.shape.push_back(d);
  }
  if (tensor.dtype == DType::Unsupported)
    return tensor; // an error only if the importer needs its values
  if (Error error = tensorBytes(proto, tensor.dtype, modelPath, tensor.bytes))
    return std::move(error);
  int64_t needed =
      saturatingMul(tensor.numElements(), elementBytes(tensor.dtype));
  if (int64_t(tensor.bytes.size()) != needed)
    return readError(
        modelPath,
        "tensor '" + proto.name() + "' holds " + Twine(tensor.bytes.size()) +
            " bytes, its shape needs " +
            (needed == INT64_MAX ? Twine("more than 2^63") : Twine(needed)));
  return tensor;
}

TensorInfo readInfo(const onnx::ValueInfoProto &proto) {
  TensorInfo info;
  info.name = proto.name();
  if (!proto.type().has_tensor_type())
    return info;
  const onnx::TypeProto_Tensor &tensor = proto.type().tensor_type();
  info.dtype = dtypeFromOnnx(tensor.elem_type());
  if (!tensor.has_shape())
    return info;
  info.hasShape = true;
  for (const onnx::TensorShapeProto_Dimension &dim : tensor.shape().dim()) {
    if (dim.has_dim_value() && dim.dim_value() >= 0)
      info.dims.push_back(dim.dim_value());
    else
      info.dims.push_back(std::nullopt);
    info.dimNames.push_back(dim.has_dim_param() ? dim.dim_param() : "");
  }
  return info;
}

Expected<OnnxAttribute> readAttribute(onnx::AttributeProto &proto,
                                      StringRef modelPath) {
  OnnxAttribute attribute;
  switch (proto.type()) {
  case onnx::AttributeProto_AttributeType_INT:
    attribute.kind = OnnxAttribute::Int;
    attribute.i = proto.i();
    break;
  case onnx::AttributeProto_AttributeType_FLOAT:
    attribute.kind = OnnxAttribute::Float;
    attribute.f = proto.f();
    break;
  case onnx::AttributeProto_AttributeType_STRING:
    attribute.kind = OnnxAttribute::String;
    attribute.s = proto.s();
    break;
  case onnx::AttributeProto_AttributeType_INTS:
    attribute.kind = OnnxAttribute::Ints;
    attribute.ints.assign(proto.ints().begin(), proto.ints().end());
    break;
  case onnx::AttributeProto_AttributeType_FLOATS:
    attribute.kind = OnnxAttribute::Floats;
    attribute.floats.assign(proto.floats().begin(), proto.floats().end());
    break;
  case onnx::AttributeProto_AttributeType_TENSOR: {
    auto tensor = readTensor(*proto.mutable_t(), modelPath);
    if (!tensor)
      return tensor.takeError();
    attribute.kind = OnnxAttribute::Tensor;
    attribute.tensor = std::make_shared<RawTensor>(std::move(*tensor));
    break;
  }
  default:
    attribute.kind = OnnxAttribute::Other;
    break;
  }
  return attribute;
}

} // namespace

Expected<OnnxGraph> readOnnxModel(StringRef path) {
  auto buffer = MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer)
    return readError(path, buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  onnx::ModelProto model;
  if (bytes.size() > size_t(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return readError(path, "not an ONNX model (the file does not parse as an "
                           "ONNX ModelProto; truncated or another format)");
  buffer->reset(); // the parsed model holds what it needs
  if (model.ir_version() <= 0 || !model.has_graph())
    return readError(path, "not an ONNX model (no IR version or no graph)");

  OnnxGraph graph;
  graph.producer = model.producer_name();
  for (const onnx::OperatorSetIdProto &set : model.opset_import())
    if (set.domain().empty() || set.domain() == "ai.onnx")
      graph.opset = set.version();
  if (graph.opset <= 0)
    return readError(path, "the model imports no opset of the default "
                           "(ai.onnx) domain");

  onnx::GraphProto &proto = *model.mutable_graph();
  if (proto.node_size() == 0 || proto.output_size() == 0)
    return readError(path, "the graph has no nodes or no outputs");
  for (const onnx::ValueInfoProto &input : proto.input())
    graph.inputs.push_back(readInfo(input));
  for (const onnx::ValueInfoProto &output : proto.output())
    graph.outputs.push_back(readInfo(output));
  for (onnx::TensorProto &initializer : *proto.mutable_initializer()) {
    auto tensor = readTensor(initializer, path);
    if (!tensor)
      return tensor.takeError();
    graph.initializers.push_back(std::move(*tensor));
  }
  for (onnx::NodeProto &nodeProto : *proto.mutable_node()) {
    OnnxNode node;
    node.name = nodeProto.name();
    node.opType = nodeProto.op_type();
    node.domain = nodeProto.domain();
    node.inputs.assign(nodeProto.input().begin(), nodeProto.input().end());
    node.outputs.assign(nodeProto.output().begin(), nodeProto.output().end());
    if (node.name.empty())
      node.name = node.outputs.empty() ? node.opType : node.outputs.front();
    for (onnx::AttributeProto &attr : *nodeProto.mutable_attribute()) {
      auto attribute = readAttribute(attr, path);
      if (!attribute)
        return attribute.takeError();
      node.attributes[attr.name()] = std::move(*attribute);
    }
    graph.nodes.push_back(std::move(node));
  }
  return graph;
}

} // namespace loom::onnx_import
