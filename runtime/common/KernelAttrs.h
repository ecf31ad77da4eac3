//===- KernelAttrs.h - Each kernel's attributes as a struct -----*- C++ -*-===//
//
// The rows of loom/loom_kernels.def as C++: `Kernel`, an enumerator per
// kernel; `Attrs<Kernel::k>`, a struct with a field per attribute of k's
// meta, in the table's order; `kernelName(k)`; and `visitAttrs(io, attrs)`,
// which hands each field in turn to io.integer, io.real, io.unit or
// io.array. Decoding (readAttrs, for both kernel libraries) and encoding
// (appendAttrs, for the compiler's KernelCall.cpp) are two visitors of the
// same fields, so the meta's layout cannot differ between them.
//
// Header-only and free of MLIR, LLVM and CUDA, so that the kernel
// libraries (nvcc's host compiler too) and the compiler include it alike.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_KERNELATTRS_H
#define LOOM_RUNTIME_COMMON_KERNELATTRS_H

#include "KernelMeta.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace loom::kernels {

/// Every kernel of loom_kernels.def.
enum class Kernel {
#define LOOM_KERNEL(name, attributes) name,
#define LOOM_DEVICE_KERNEL(name, attributes) name,
#include "loom/loom_kernels.def"
};

/// The kernel's name: its entry points are loom_cpu_<name> and
/// loom_cuda_<name>.
inline const char *kernelName(Kernel kernel) {
  switch (kernel) {
#define LOOM_KERNEL(name, attributes)                                          \
  case Kernel::name:                                                           \
    return #name;
#define LOOM_DEVICE_KERNEL(name, attributes) LOOM_KERNEL(name, attributes)
#include "loom/loom_kernels.def"
  }
  return "";
}

/// Whether the CPU library has the kernel (every kernel but the
/// device-only rows).
inline bool onCpu(Kernel kernel) {
  switch (kernel) {
#define LOOM_KERNEL(name, attributes)                                          \
  case Kernel::name:                                                           \
    return true;
#define LOOM_DEVICE_KERNEL(name, attributes)                                   \
  case Kernel::name:                                                           \
    return false;
#include "loom/loom_kernels.def"
  }
  return false;
}

/// The kernel named `name` (the part after loom_cpu_ / loom_cuda_), or
/// false.
inline bool kernelNamed(const char *name, Kernel &kernel) {
#define LOOM_KERNEL(row, attributes)                                           \
  if (std::strcmp(name, #row) == 0) {                                          \
    kernel = Kernel::row;                                                      \
    return true;                                                               \
  }
#define LOOM_DEVICE_KERNEL(row, attributes) LOOM_KERNEL(row, attributes)
#include "loom/loom_kernels.def"
  return false;
}

/// The number of attributes of the kernel's row (its tail not counted).
inline int attrCount(Kernel kernel) {
  switch (kernel) {
#define LOOM_ATTR(kind, field) +1
#define LOOM_KERNEL(name, attributes)                                          \
  case Kernel::name:                                                           \
    return 0 attributes;
#define LOOM_DEVICE_KERNEL(name, attributes) LOOM_KERNEL(name, attributes)
#include "loom/loom_kernels.def"
  }
  return 0;
}

/// The fused_elementwise opcode of a fusible kernel (loom_fused_opcode),
/// or -1 for any other kernel.
inline int fusedOpcodeOf(Kernel kernel) {
  switch (kernel) {
#define LOOM_KERNEL(name, attributes)                                          \
  case Kernel::name:                                                           \
    return -1;
#define LOOM_DEVICE_KERNEL(name, attributes) LOOM_KERNEL(name, attributes)
#define LOOM_FUSIBLE_KERNEL(name, opcode, number, operands)                    \
  case Kernel::name:                                                           \
    return number;
#include "loom/loom_kernels.def"
  }
  return -1;
}

/// The registers a fused_elementwise instruction reads (1: a, 2: a and b),
/// or 0 for a number that is no opcode.
inline int fusedOperandCount(int64_t opcode) {
#define LOOM_KERNEL(name, attributes)
#define LOOM_FUSIBLE_KERNEL(name, code, number, operands)                      \
  if (opcode == (number))                                                      \
    return operands;
#include "loom/loom_kernels.def"
  return 0;
}

/// An array attribute: a view of its elements (in the meta, or in what the
/// encoder was given).
struct AttrArray {
  const int64_t *data = nullptr;
  int64_t size = 0;

  const int64_t *begin() const { return data; }
  const int64_t *end() const { return data + size; }
  int64_t operator[](int64_t i) const { return data[i]; }
};

/// The attributes of kernel K (empty for a kernel without any).
template <Kernel K> struct Attrs;

#define LOOM_ATTR_TYPE_integer int64_t
#define LOOM_ATTR_TYPE_real double
#define LOOM_ATTR_TYPE_unit bool
#define LOOM_ATTR_TYPE_array AttrArray
#define LOOM_ATTR(kind, field) LOOM_ATTR_TYPE_##kind field{};
#define LOOM_KERNEL(name, attributes)                                          \
  template <> struct Attrs<Kernel::name> {                                     \
    attributes                                                                 \
  };
#define LOOM_DEVICE_KERNEL(name, attributes) LOOM_KERNEL(name, attributes)
#include "loom/loom_kernels.def"
#undef LOOM_ATTR_TYPE_integer
#undef LOOM_ATTR_TYPE_real
#undef LOOM_ATTR_TYPE_unit
#undef LOOM_ATTR_TYPE_array

/// Hands each field of `attrs` to `io`, in the meta's order:
/// io.integer(int64_t &), io.real(double &), io.unit(bool &),
/// io.array(AttrArray &).
#define LOOM_ATTR(kind, field) io.kind(attrs.field);
#define LOOM_KERNEL(name, attributes)                                          \
  template <typename IO>                                                       \
  void visitAttrs([[maybe_unused]] IO &io,                                     \
                  [[maybe_unused]] Attrs<Kernel::name> &attrs) {               \
    attributes                                                                 \
  }
#define LOOM_DEVICE_KERNEL(name, attributes) LOOM_KERNEL(name, attributes)
#include "loom/loom_kernels.def"

/// The visitor that decodes: each field from the attribute reader.
struct AttrDecoder {
  AttributeReader &reader;
  void integer(int64_t &value) { value = reader.integer(); }
  void real(double &value) { value = reader.real(); }
  void unit(bool &value) { value = reader.unit(); }
  void array(AttrArray &value) { value.data = reader.array(value.size); }
};

/// The visitor that encodes: each field appended to `meta` (a
/// std::vector<int64_t>, an llvm::SmallVector...), as the decoder reads it.
template <typename Meta> struct AttrEncoder {
  Meta &meta;
  void integer(int64_t &value) { meta.push_back(value); }
  void real(double &value) {
    int64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    meta.push_back(bits);
  }
  void unit(bool &value) { meta.push_back(value ? 1 : 0); }
  void array(AttrArray &value) {
    meta.push_back(value.size);
    for (int64_t element : value)
      meta.push_back(element);
  }
};

/// Appends kernel K's attributes to `meta` in its row's order.
template <Kernel K, typename Meta>
void appendAttrs(Meta &meta, Attrs<K> attrs) {
  AttrEncoder<Meta> encoder{meta};
  visitAttrs(encoder, attrs);
}

/// Reads kernel K's attributes from `reader` (a KernelArgs or a
/// TensorList after its tensors); a tail (a mask block, a program) comes
/// next.
template <Kernel K> Attrs<K> readAttrs(AttributeReader &reader) {
  Attrs<K> attrs;
  AttrDecoder decoder{reader};
  visitAttrs(decoder, attrs);
  return attrs;
}

/// The shape of a concat, which reads its own meta (it may have more inputs
/// than KernelArgs holds views): result block `o` of `outer` is each
/// input's block `o` in turn, input t's block `extents[t] * inner`
/// elements of `bytes` bytes.
struct ConcatLayout {
  int64_t operands = 0, outer = 1, inner = 1, bytes = 0;
  std::vector<int64_t> extents; ///< each input's extent along the axis
};

/// Decodes and checks a concat's meta; `name` starts the message written to
/// `error` when it returns false.
inline bool readConcat(const int64_t *meta, const char *name,
                       ConcatLayout &layout, char *error, size_t errorSize) {
  int64_t operands = meta[0], results = meta[1];
  if (results != 1) {
    std::snprintf(error, errorSize, "%s: %lld results, expected 1", name,
                  static_cast<long long>(results));
    return false;
  }
  // The extent of each input along the axis needs the axis, which follows
  // every tensor: note where each tensor's dimensions start.
  std::vector<const int64_t *> shapes(operands + 1);
  std::vector<int64_t> ranks(operands + 1);
  const int64_t *cursor = meta + 2;
  for (int64_t t = 0; t <= operands; ++t) {
    layout.bytes = loom_dtype_bytes(static_cast<loom_dtype>(*cursor++));
    ranks[t] = *cursor++;
    shapes[t] = cursor;
    cursor += ranks[t];
  }
  AttributeReader attrs(cursor);
  int64_t axis = readAttrs<Kernel::concat>(attrs).axis;
  int64_t rank = ranks[operands];
  const int64_t *outShape = shapes[operands];
  if (axis < 0 || axis >= rank) {
    std::snprintf(error, errorSize,
                  "%s: axis %lld is out of range for rank %lld", name,
                  static_cast<long long>(axis), static_cast<long long>(rank));
    return false;
  }
  layout.operands = operands;
  for (int64_t d = 0; d < axis; ++d)
    layout.outer *= outShape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    layout.inner *= outShape[d];
  int64_t total = 0;
  for (int64_t t = 0; t < operands; ++t) {
    if (ranks[t] != rank) {
      std::snprintf(error, errorSize,
                    "%s: input #%lld has rank %lld, the result %lld", name,
                    static_cast<long long>(t), static_cast<long long>(ranks[t]),
                    static_cast<long long>(rank));
      return false;
    }
    layout.extents.push_back(shapes[t][axis]);
    total += shapes[t][axis];
  }
  if (total != outShape[axis]) {
    std::snprintf(error, errorSize,
                  "%s: the inputs have %lld elements along axis %lld, the "
                  "result %lld",
                  name, static_cast<long long>(total),
                  static_cast<long long>(axis),
                  static_cast<long long>(outShape[axis]));
    return false;
  }
  return true;
}

} // namespace loom::kernels

#endif // LOOM_RUNTIME_COMMON_KERNELATTRS_H
