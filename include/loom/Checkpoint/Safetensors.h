//===- Safetensors.h - Reading and writing safetensors checkpoints -*- C++ -*-//
//
// The safetensors format (https://github.com/huggingface/safetensors):
//
//   bytes 0-7    u64 little-endian N, the size of the header
//   bytes 8..    N bytes of JSON, padded with spaces:
//                  {"__metadata__": {"key": "value", ...},
//                   "name": {"dtype": "F32", "shape": [2, 3],
//                            "data_offsets": [begin, end]}, ...}
//   then         the data; offsets count from the first byte after the
//                header, tensors are little-endian and row-major.
//
// The reader accepts what Hugging Face's reader accepts: the data offsets of
// all tensors, sorted, must tile the data section exactly (no gap, no
// overlap, nothing after the last tensor), and every tensor's byte size must
// match its shape and dtype. Anything else is an error that names the file
// and the offending tensor or key; malformed input never crashes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CHECKPOINT_SAFETENSORS_H
#define LOOM_CHECKPOINT_SAFETENSORS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom {

/// One tensor of a checkpoint, widened to f32 on read.
struct CheckpointTensor {
  std::string name;
  llvm::SmallVector<int64_t> shape;
  /// Row-major, product(shape) elements; empty for a tensor whose dtype is
  /// not floating point (a BOOL or integer buffer, which no parameter is).
  std::vector<float> values;
  /// The dtype in the file (F32, BF16, ..., I64); the writer writes F64
  /// from `doubles` when this is "F64", F32 from `values` otherwise.
  std::string dtype = "F32";
  /// An F64 tensor's values unrounded (read), or what the writer writes for
  /// dtype "F64": a double-precision run saves and resumes without rounding
  /// to f32. Empty for every other dtype.
  std::vector<double> doubles = {};

  bool isFloat() const {
    return dtype == "F32" || dtype == "F64" || dtype == "F16" ||
           dtype == "BF16";
  }
};

struct Checkpoint {
  /// In file order: sorted by data offset (zero-size tensors, which share an
  /// offset with their neighbour, keep their order in the header).
  std::vector<CheckpointTensor> tensors;
  /// The "__metadata__" entry (empty when the file has none).
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or null.
  const CheckpointTensor *find(llvm::StringRef name) const;
};

/// Reads a safetensors file. Dtypes F32, F64, F16 and BF16 are widened (F64
/// rounded) to float, F64 also kept whole in `doubles`; any other dtype is
/// an error naming the tensor.
llvm::Expected<Checkpoint> readSafetensors(llvm::StringRef path);

/// Parses the bytes of a safetensors file; `fileName` only prefixes errors.
llvm::Expected<Checkpoint> parseSafetensors(llvm::StringRef contents,
                                            llvm::StringRef fileName);

/// True when `path` begins as a safetensors file does: an 8-byte header
/// size within the file, then that many bytes of a JSON object. Reads the
/// header only, so that a tool may tell an earlier checkpoint it replaces
/// from some other file it must not overwrite.
bool hasSafetensorsHeader(llvm::StringRef path);

/// Writes F32 tensors, or F64 ones (`doubles`) for dtype "F64" (both
/// HF-loadable), metadata included; writes a temporary
/// file then renames it, so a failure never leaves a half-written file.
/// The header lists "__metadata__" first (omitted when empty), then the
/// tensors in the given order with contiguous data offsets, and is padded
/// with spaces to a multiple of 8 bytes. Names must be unique, valid UTF-8
/// and not "__metadata__"; each tensor needs product(shape) values.
llvm::Error
writeSafetensors(llvm::StringRef path, llvm::ArrayRef<CheckpointTensor> tensors,
                 const std::map<std::string, std::string> &metadata = {});

} // namespace loom

#endif // LOOM_CHECKPOINT_SAFETENSORS_H
