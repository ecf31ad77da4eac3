//===- Safetensors.cpp - Reading and writing safetensors checkpoints ------===//
//
// The checks follow Hugging Face's reference reader (safetensors/src/
// tensor.rs, Metadata::validate), so that every file read here loads there
// too, and every file written here is one it writes: "__metadata__" first,
// contiguous offsets, the header padded with spaces to 8 bytes.
//
//===----------------------------------------------------------------------===//

#include "loom/Checkpoint/Safetensors.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/InputFile.h"
#include "loom/Support/Json.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdint>
#include <tuple>

using namespace llvm;

namespace loom {
namespace {

constexpr StringLiteral kMetadataKey = "__metadata__";

Error fileError(StringRef fileName, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), fileName + ": " + message);
}

std::string quoted(StringRef text) { return ("\"" + text + "\"").str(); }

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(shape))
    text += (i ? ", " : "") + std::to_string(dim);
  return text + "]";
}

std::string formatOffsets(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

/// IEEE binary16 to float, exactly (every half is a float).
float halfToFloat(uint16_t half) {
  uint32_t sign = uint32_t(half & 0x8000) << 16;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) // Infinity or NaN, payload kept.
    return bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  // Rebias the exponent from 15 to 127.
  return bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float readF32(const char *p) {
  return bit_cast<float>(support::endian::read32le(p));
}
float readF64(const char *p) {
  return static_cast<float>(bit_cast<double>(support::endian::read64le(p)));
}
float readF16(const char *p) {
  return halfToFloat(support::endian::read16le(p));
}
// bfloat16 is the top half of a float.
float readBF16(const char *p) {
  return bit_cast<float>(uint32_t(support::endian::read16le(p)) << 16);
}

struct DType {
  StringLiteral name;
  unsigned bytes;
  /// Widens one element to f32; null for the integer and boolean dtypes,
  /// whose tensors (masks, position buffers) are checked but not read.
  float (*read)(const char *);
};

constexpr DType kDTypes[] = {
    {"F32", 4, readF32},   {"F64", 8, readF64},  {"F16", 2, readF16},
    {"BF16", 2, readBF16}, {"BOOL", 1, nullptr}, {"U8", 1, nullptr},
    {"I8", 1, nullptr},    {"U16", 2, nullptr},  {"I16", 2, nullptr},
    {"U32", 4, nullptr},   {"I32", 4, nullptr},  {"U64", 8, nullptr},
    {"I64", 8, nullptr}};

/// One tensor of the header, checked on its own.
struct Entry {
  std::string name;
  const DType *dtype;
  SmallVector<int64_t> shape;
  uint64_t elements, begin, end;
  /// Position in the header, which orders tensors with equal offsets.
  size_t headerIndex;
};

/// The keys of the top-level object of `header`, in order (llvm::json's
/// objects have none). `header` must already have parsed as JSON, which
/// refuses a key given twice.
Expected<std::vector<std::string>> topLevelKeys(StringRef header) {
  std::vector<std::string> keys;
  int depth = 0;
  for (size_t i = 0; i < header.size(); ++i) {
    char c = header[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      size_t start = i;
      for (++i; header[i] != '"'; ++i)
        if (header[i] == '\\')
          ++i;
      StringRef token = header.slice(start, i + 1);
      StringRef rest = header.drop_front(i + 1).ltrim(" \t\r\n");
      if (depth != 1 || !rest.starts_with(":"))
        continue;
      Expected<json::Value> key = json::parse(token);
      if (!key)
        return key.takeError();
      keys.push_back(key->getAsString()->str());
    }
  }
  return keys;
}

/// Checks one tensor entry against itself and the data section's size.
Expected<Entry> parseEntry(StringRef fileName, StringRef name,
                           const json::Value &value, uint64_t dataSize) {
  auto fail = [&](const Twine &message) {
    return fileError(fileName, "tensor " + quoted(name) + ": " + message);
  };
  const json::Object *object = value.getAsObject();
  if (!object)
    return fail("entry is not a JSON object");
  Entry entry;
  entry.name = name.str();

  const json::Value *dtype = object->get("dtype");
  if (!dtype)
    return fail("missing key \"dtype\"");
  std::optional<StringRef> dtypeName = dtype->getAsString();
  if (!dtypeName)
    return fail("\"dtype\" is not a string");
  const DType *found = llvm::find_if(
      kDTypes, [&](const DType &d) { return d.name == *dtypeName; });
  if (found == std::end(kDTypes))
    return fail("unsupported dtype " + quoted(*dtypeName) +
                " (supported: F32, F64, F16, BF16, BOOL and integers)");
  entry.dtype = found;

  const json::Value *shape = object->get("shape");
  if (!shape)
    return fail("missing key \"shape\"");
  const json::Array *dims = shape->getAsArray();
  if (!dims)
    return fail("\"shape\" is not an array");
  for (const json::Value &dim : *dims) {
    // getAsUINT64 takes only integers written as such: Hugging Face's
    // reader (serde, usize) refuses 64.0 as a size, and so does Loom.
    std::optional<uint64_t> size = dim.getAsUINT64();
    if (!size || *size > uint64_t(INT64_MAX))
      return fail("\"shape\" must hold non-negative integers");
    entry.shape.push_back(int64_t(*size));
  }
  entry.elements = 1;
  for (int64_t size : entry.shape) {
    std::optional<uint64_t> product =
        checkedMulUnsigned<uint64_t>(entry.elements, size);
    if (!product)
      return fail("shape " + formatShape(entry.shape) + " is too large");
    entry.elements = *product;
  }

  const json::Value *offsets = object->get("data_offsets");
  if (!offsets)
    return fail("missing key \"data_offsets\"");
  const json::Array *pair = offsets->getAsArray();
  std::optional<uint64_t> begin, end;
  if (pair && pair->size() == 2) {
    begin = (*pair)[0].getAsUINT64();
    end = (*pair)[1].getAsUINT64();
  }
  if (!begin || !end)
    return fail("\"data_offsets\" must be two non-negative integers "
                "[begin, end]");
  entry.begin = *begin;
  entry.end = *end;
  if (entry.begin > entry.end)
    return fail("data_offsets " + formatOffsets(entry.begin, entry.end) +
                " end before they begin");
  if (entry.end > dataSize)
    return fail("data_offsets " + formatOffsets(entry.begin, entry.end) +
                " run past the end of the data (" + Twine(dataSize) +
                " bytes)");
  std::optional<uint64_t> bytes =
      checkedMulUnsigned<uint64_t>(entry.elements, entry.dtype->bytes);
  if (!bytes || *bytes != entry.end - entry.begin)
    return fail(
        "shape " + formatShape(entry.shape) + " of " + entry.dtype->name +
        " needs " + (bytes ? std::to_string(*bytes) : std::string("too many")) +
        " bytes but data_offsets " + formatOffsets(entry.begin, entry.end) +
        " hold " + Twine(entry.end - entry.begin));
  return entry;
}

Error parseMetadata(StringRef fileName, const json::Value &value,
                    std::map<std::string, std::string> &metadata) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return fileError(fileName, quoted(kMetadataKey) + " is not a JSON object");
  for (const auto &[key, entry] : *object) {
    std::optional<StringRef> text = entry.getAsString();
    if (!text)
      return fileError(fileName, quoted(kMetadataKey) + " key " + quoted(key) +
                                     " is not a string");
    metadata[key.str()] = text->str();
  }
  return Error::success();
}

/// Sorts the entries into file order and checks that they tile the data
/// section: each begins where the previous ends, the last ends at its end.
Error checkContiguous(StringRef fileName, std::vector<Entry> &entries,
                      uint64_t dataSize) {
  llvm::sort(entries, [](const Entry &a, const Entry &b) {
    return std::tie(a.begin, a.end, a.headerIndex) <
           std::tie(b.begin, b.end, b.headerIndex);
  });
  uint64_t position = 0;
  const Entry *previous = nullptr;
  for (const Entry &entry : entries) {
    std::string where = "tensor " + quoted(entry.name) + ": data_offsets " +
                        formatOffsets(entry.begin, entry.end);
    if (entry.begin < position)
      return fileError(fileName,
                       where + " overlap tensor " + quoted(previous->name) +
                           " " + formatOffsets(previous->begin, previous->end));
    if (entry.begin > position)
      return fileError(fileName, where + " leave bytes [" + Twine(position) +
                                     ", " + Twine(entry.begin) +
                                     ") of the data unused");
    position = entry.end;
    previous = &entry;
  }
  if (position != dataSize)
    return fileError(fileName, "bytes [" + Twine(position) + ", " +
                                   Twine(dataSize) +
                                   ") of the data belong to no tensor");
  return Error::success();
}

} // namespace

const CheckpointTensor *Checkpoint::find(StringRef name) const {
  auto it = llvm::find_if(
      tensors, [&](const CheckpointTensor &t) { return t.name == name; });
  return it == tensors.end() ? nullptr : &*it;
}

Expected<Checkpoint> parseSafetensors(StringRef contents, StringRef fileName) {
  if (contents.size() < 8)
    return fileError(fileName, "file is too short (" + Twine(contents.size()) +
                                   " bytes) to hold the 8-byte header size");
  uint64_t headerSize = support::endian::read64le(contents.data());
  StringRef rest = contents.drop_front(8);
  if (headerSize > rest.size())
    return fileError(fileName, "header size " + Twine(headerSize) +
                                   " is larger than the rest of the file (" +
                                   Twine(rest.size()) + " bytes)");
  StringRef header = rest.take_front(headerSize);
  StringRef data = rest.drop_front(headerSize);

  Expected<json::Value> root = parseJson(header);
  if (!root)
    return fileError(fileName,
                     "header is not valid JSON: " + toString(root.takeError()));
  const json::Object *object = root->getAsObject();
  if (!object)
    return fileError(fileName, "header is not a JSON object");
  Expected<std::vector<std::string>> keys = topLevelKeys(header);
  if (!keys)
    return fileError(fileName, toString(keys.takeError()));

  Checkpoint checkpoint;
  std::vector<Entry> entries;
  for (const std::string &key : *keys) {
    const json::Value *value = object->get(key);
    if (!value) // Not reached: the scanner agrees with the parser.
      return fileError(fileName, "cannot find key " + quoted(key));
    if (key == kMetadataKey) {
      if (Error error = parseMetadata(fileName, *value, checkpoint.metadata))
        return std::move(error);
      continue;
    }
    Expected<Entry> entry = parseEntry(fileName, key, *value, data.size());
    if (!entry)
      return entry.takeError();
    entry->headerIndex = entries.size();
    entries.push_back(std::move(*entry));
  }
  if (Error error = checkContiguous(fileName, entries, data.size()))
    return std::move(error);

  // Offsets and sizes are checked: every read below is inside `data`.
  for (Entry &entry : entries) {
    CheckpointTensor &tensor = checkpoint.tensors.emplace_back();
    tensor.name = std::move(entry.name);
    tensor.shape = std::move(entry.shape);
    tensor.dtype = entry.dtype->name.str();
    if (!entry.dtype->read)
      continue;
    tensor.values.resize(entry.elements);
    const char *bytes = data.data() + entry.begin;
    for (uint64_t i = 0; i < entry.elements; ++i)
      tensor.values[i] = entry.dtype->read(bytes + i * entry.dtype->bytes);
    if (tensor.dtype == "F64") {
      tensor.doubles.resize(entry.elements);
      for (uint64_t i = 0; i < entry.elements; ++i)
        tensor.doubles[i] =
            bit_cast<double>(support::endian::read64le(bytes + i * 8));
    }
  }
  return checkpoint;
}

bool hasSafetensorsHeader(StringRef path) {
  uint64_t fileSize = 0;
  if (sys::fs::file_size(path, fileSize) || fileSize < 8)
    return false;
  auto size = MemoryBuffer::getFileSlice(path, 8, 0);
  if (!size)
    return false;
  uint64_t headerSize = support::endian::read64le((*size)->getBufferStart());
  if (headerSize > fileSize - 8 || headerSize > kMaxJsonFileBytes)
    return false;
  auto header = MemoryBuffer::getFileSlice(path, headerSize, 8);
  if (!header)
    return false;
  Expected<json::Value> root = parseJson((*header)->getBuffer());
  if (!root) {
    consumeError(root.takeError());
    return false;
  }
  return root->getAsObject() != nullptr;
}

Expected<Checkpoint> readSafetensors(StringRef path) {
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      readInputFile(path, kMaxCheckpointFileBytes);
  if (!buffer)
    return buffer.takeError();
  return parseSafetensors((*buffer)->getBuffer(), path);
}

Error writeSafetensors(StringRef path, ArrayRef<CheckpointTensor> tensors,
                       const std::map<std::string, std::string> &metadata) {
  // Check everything before the file is opened.
  StringSet<> names;
  for (const CheckpointTensor &tensor : tensors) {
    auto fail = [&](const Twine &message) {
      return fileError(path, "tensor " + quoted(tensor.name) + ": " + message);
    };
    if (tensor.name == kMetadataKey)
      return fail("the name is reserved for the metadata");
    if (!json::isUTF8(tensor.name))
      return fail("the name is not valid UTF-8");
    if (!names.insert(tensor.name).second)
      return fail("the name appears twice");
    uint64_t elements = 1;
    for (int64_t dim : tensor.shape) {
      std::optional<uint64_t> product =
          dim < 0 ? std::nullopt
                  : checkedMulUnsigned<uint64_t>(elements, uint64_t(dim));
      if (!product)
        return fail("invalid shape " + formatShape(tensor.shape));
      elements = *product;
    }
    size_t given =
        tensor.dtype == "F64" ? tensor.doubles.size() : tensor.values.size();
    if (elements != given)
      return fail("shape " + formatShape(tensor.shape) + " has " +
                  Twine(elements) + " elements but " + Twine(given) +
                  " values are given");
  }
  for (const auto &[key, value] : metadata)
    if (!json::isUTF8(key) || !json::isUTF8(value))
      return fileError(path, quoted(kMetadataKey) + " key " + quoted(key) +
                                 " or its value is not valid UTF-8");

  std::string header;
  raw_string_ostream headerStream(header);
  json::OStream writer(headerStream);
  writer.object([&] {
    if (!metadata.empty())
      writer.attributeObject(kMetadataKey, [&] {
        for (const auto &[key, value] : metadata)
          writer.attribute(key, value);
      });
    uint64_t offset = 0;
    for (const CheckpointTensor &tensor : tensors) {
      bool f64 = tensor.dtype == "F64";
      uint64_t end =
          offset + (f64 ? 8 * tensor.doubles.size() : 4 * tensor.values.size());
      writer.attributeObject(tensor.name, [&] {
        writer.attribute("dtype", f64 ? "F64" : "F32");
        writer.attributeArray("shape", [&] {
          for (int64_t dim : tensor.shape)
            writer.value(dim);
        });
        writer.attributeArray("data_offsets", [&] {
          writer.value(offset);
          writer.value(end);
        });
      });
      offset = end;
    }
  });
  header.append((8 - header.size() % 8) % 8, ' ');

  return writeFileAtomically(path, [&](raw_ostream &os) {
    char word[8];
    support::endian::write64le(word, header.size());
    os.write(word, 8);
    os << header;
    for (const CheckpointTensor &tensor : tensors) {
      if (tensor.dtype == "F64") {
        for (double value : tensor.doubles) {
          support::endian::write64le(word, bit_cast<uint64_t>(value));
          os.write(word, 8);
        }
        continue;
      }
      for (float value : tensor.values) {
        support::endian::write32le(word, bit_cast<uint32_t>(value));
        os.write(word, 4);
      }
    }
  });
}

} // namespace loom
