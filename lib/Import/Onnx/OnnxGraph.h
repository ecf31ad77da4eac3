//===- OnnxGraph.h - An ONNX model as plain data ----------------*- C++ -*-===//
//
// What the ONNX importer reads from a ModelProto: the graph's inputs,
// outputs, initializers and nodes, with attributes and tensors decoded into
// plain structs, so that only OnnxReader.cpp sees protobuf. Host tensors
// (HostTensor) carry the data of initializers, Constant nodes and the values
// the importer folds at import time.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_ONNXGRAPH_H
#define LOOM_LIB_IMPORT_ONNX_ONNXGRAPH_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::onnx_import {

/// The element types the importer handles; anything else is Unsupported
/// (and an error where a value of it is needed).
enum class DType : int8_t {
  F32,
  F64,
  F16,
  BF16,
  I64,
  I32,
  I16,
  I8,
  U8,
  Bool,
  Unsupported
};

bool isFloat(DType type);
/// ONNX's name of the type ("float", "int64", ...), for messages.
llvm::StringRef dtypeName(DType type);
/// The DType of an ONNX TensorProto.DataType code.
DType dtypeFromOnnx(int code);

/// a * b, or INT64_MAX where that overflows. Dimensions come from the
/// model's bytes, so their products may overflow; the saturated value is a
/// size no tensor has, which the importer's size checks then reject.
int64_t saturatingMul(int64_t a, int64_t b);
/// The product of `shape`'s dimensions, saturated as saturatingMul (0 if
/// any is 0, whatever the others).
int64_t shapeProduct(llvm::ArrayRef<int64_t> shape);
/// `value` truncated to an integer, saturated at int64's range (NaN: 0):
/// folded float values may be anything the model's bytes say, and C++'s
/// conversion of one out of range is undefined.
int64_t toInteger(double value);

/// A tensor held on the host: float dtypes in `f`, integer and bool dtypes
/// in `i`, row-major.
struct HostTensor {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 4> shape;
  std::vector<double> f;
  std::vector<int64_t> i;

  bool isFloat() const { return onnx_import::isFloat(dtype); }
  int64_t numElements() const;
  /// Element `e` as a double, whatever the dtype.
  double value(int64_t e) const { return isFloat() ? f[e] : double(i[e]); }
  /// Element `e` as an integer (floats truncated).
  int64_t integer(int64_t e) const {
    return isFloat() ? toInteger(f[e]) : i[e];
  }
  /// Whether every element equals the first (a scalar broadcast).
  bool isSplat() const;

  static HostTensor ints(DType dtype, llvm::ArrayRef<int64_t> shape,
                         std::vector<int64_t> values);
  static HostTensor floats(DType dtype, llvm::ArrayRef<int64_t> shape,
                           std::vector<double> values);
};

/// An initializer or a tensor attribute before decoding: its little-endian
/// bytes (ONNX's raw_data layout), decoded on demand, since weights are big
/// and most are never folded.
struct RawTensor {
  std::string name;
  DType dtype = DType::Unsupported;
  int onnxType = 0; ///< the TensorProto.DataType code, for messages
  llvm::SmallVector<int64_t, 4> shape;
  std::string bytes;

  int64_t numElements() const;
  /// The data as a HostTensor (floats widened to double).
  HostTensor decode() const;
  /// The data as float32 values (for weights files).
  std::vector<float> decodeFloats() const;
};

struct OnnxAttribute {
  enum Kind { Int, Float, String, Tensor, Ints, Floats, Other };
  Kind kind = Other;
  int64_t i = 0;
  double f = 0;
  std::string s;
  llvm::SmallVector<int64_t> ints;
  llvm::SmallVector<double> floats;
  std::shared_ptr<RawTensor> tensor;
};

struct OnnxNode {
  std::string name, opType, domain;
  llvm::SmallVector<std::string, 4> inputs, outputs;
  llvm::StringMap<OnnxAttribute> attributes;

  const OnnxAttribute *attribute(llvm::StringRef key) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? nullptr : &it->second;
  }
  int64_t intAttr(llvm::StringRef key, int64_t fallback) const {
    const OnnxAttribute *a = attribute(key);
    return a && a->kind == OnnxAttribute::Int ? a->i : fallback;
  }
  double floatAttr(llvm::StringRef key, double fallback) const {
    const OnnxAttribute *a = attribute(key);
    return a && a->kind == OnnxAttribute::Float ? a->f : fallback;
  }
  /// The i-th input's name, "" when absent (ONNX's optional inputs).
  llvm::StringRef input(size_t index) const {
    return index < inputs.size() ? llvm::StringRef(inputs[index]) : "";
  }
};

/// A graph input or output: its type and, per dimension, the size or the
/// symbolic name of a dynamic axis.
struct TensorInfo {
  std::string name;
  DType dtype = DType::Unsupported;
  bool hasShape = false;
  llvm::SmallVector<std::optional<int64_t>, 4> dims;
  llvm::SmallVector<std::string, 4> dimNames;
};

struct OnnxGraph {
  /// The default domain's opset version.
  int64_t opset = 0;
  std::string producer;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<RawTensor> initializers;
  std::vector<OnnxNode> nodes;
};

/// Reads an ONNX model file. Errors name `path`: a file that does not parse
/// as a ModelProto (truncated, not ONNX), a graph without nodes or outputs,
/// a missing default-domain opset, external data that cannot be read.
llvm::Expected<OnnxGraph> readOnnxModel(llvm::StringRef path);

} // namespace loom::onnx_import

#endif // LOOM_LIB_IMPORT_ONNX_ONNXGRAPH_H
