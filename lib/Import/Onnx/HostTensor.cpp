//===- HostTensor.cpp - Element types and host tensors --------------------===//

#include "OnnxGraph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace loom::onnx_import {

bool isFloat(DType type) {
  return type == DType::F32 || type == DType::F64 || type == DType::F16 ||
         type == DType::BF16;
}

llvm::StringRef dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "float";
  case DType::F64:
    return "double";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::I16:
    return "int16";
  case DType::I8:
    return "int8";
  case DType::U8:
    return "uint8";
  case DType::Bool:
    return "bool";
  case DType::Unsupported:
    return "unsupported";
  }
  return "unsupported";
}

DType dtypeFromOnnx(int code) {
  // TensorProto.DataType (onnx.proto).
  switch (code) {
  case 1:
    return DType::F32;
  case 2:
    return DType::U8;
  case 3:
    return DType::I8;
  case 5:
    return DType::I16;
  case 6:
    return DType::I32;
  case 7:
    return DType::I64;
  case 9:
    return DType::Bool;
  case 10:
    return DType::F16;
  case 11:
    return DType::F64;
  case 16:
    return DType::BF16;
  default:
    return DType::Unsupported;
  }
}

int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t product;
  if (llvm::MulOverflow(a, b, product))
    return std::numeric_limits<int64_t>::max();
  return product;
}

int64_t shapeProduct(llvm::ArrayRef<int64_t> shape) {
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    n = saturatingMul(n, d);
  return n;
}

int64_t toInteger(double value) {
  if (std::isnan(value))
    return 0;
  // 2^63 is exact in double; every double below it converts.
  if (value >= 0x1p63)
    return std::numeric_limits<int64_t>::max();
  if (value < -0x1p63)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

int64_t HostTensor::numElements() const { return shapeProduct(shape); }

bool HostTensor::isSplat() const {
  int64_t n = numElements();
  for (int64_t e = 1; e < n; ++e)
    if (value(e) != value(0))
      return false;
  return true;
}

HostTensor HostTensor::ints(DType dtype, llvm::ArrayRef<int64_t> shape,
                            std::vector<int64_t> values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.i = std::move(values);
  return t;
}

HostTensor HostTensor::floats(DType dtype, llvm::ArrayRef<int64_t> shape,
                              std::vector<double> values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.f = std::move(values);
  return t;
}

int64_t RawTensor::numElements() const { return shapeProduct(shape); }

namespace {

template <typename T> T load(const char *at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

float halfToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  int exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else { // subnormal: normalize
      int shift = 0;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ff;
      out = sign | uint32_t(127 - 15 - shift + 1) << 23 | (mantissa << 13);
    }
  } else {
    out = sign | uint32_t(exponent - 15 + 127) << 23 | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

float bf16ToFloat(uint16_t bits) {
  uint32_t out = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

/// Element e of `bytes` of type `type` as a double.
double floatAt(const std::string &bytes, DType type, int64_t e) {
  const char *data = bytes.data();
  switch (type) {
  case DType::F32:
    return load<float>(data + 4 * e);
  case DType::F64:
    return load<double>(data + 8 * e);
  case DType::F16:
    return halfToFloat(load<uint16_t>(data + 2 * e));
  case DType::BF16:
    return bf16ToFloat(load<uint16_t>(data + 2 * e));
  default:
    return 0;
  }
}

int64_t intAt(const std::string &bytes, DType type, int64_t e) {
  const char *data = bytes.data();
  switch (type) {
  case DType::I64:
    return load<int64_t>(data + 8 * e);
  case DType::I32:
    return load<int32_t>(data + 4 * e);
  case DType::I16:
    return load<int16_t>(data + 2 * e);
  case DType::I8:
    return load<int8_t>(data + e);
  case DType::U8:
    return load<uint8_t>(data + e);
  case DType::Bool:
    return load<uint8_t>(data + e) != 0;
  default:
    return 0;
  }
}

} // namespace

HostTensor RawTensor::decode() const {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  int64_t n = numElements();
  if (isFloat(dtype)) {
    t.f.resize(n);
    for (int64_t e = 0; e < n; ++e)
      t.f[e] = floatAt(bytes, dtype, e);
  } else {
    t.i.resize(n);
    for (int64_t e = 0; e < n; ++e)
      t.i[e] = intAt(bytes, dtype, e);
  }
  return t;
}

std::vector<float> RawTensor::decodeFloats() const {
  int64_t n = numElements();
  std::vector<float> values(n);
  for (int64_t e = 0; e < n; ++e)
    values[e] = static_cast<float>(floatAt(bytes, dtype, e));
  return values;
}

} // namespace loom::onnx_import
