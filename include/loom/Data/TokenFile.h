//===- TokenFile.h - Token id files for training data -----------*- C++ -*-===//
//
// A token file holds one sequence of token ids (a tokenized corpus):
//
//   bytes 0-7    ASCII magic "LOOMTOKS"
//   bytes 8-11   u32 little-endian format version, 1
//   bytes 12-15  u32 little-endian bytes per token W: 2 (uint16 ids) or 4
//                (uint32 ids)
//   bytes 16-23  u64 little-endian token count N
//   bytes 24..   N little-endian ids of W bytes each; the file ends there
//
// docs/token-file.md describes the same format for writers in other
// languages.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DATA_TOKENFILE_H
#define LOOM_DATA_TOKENFILE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace loom {

/// The contents of a token file.
struct TokenFile {
  /// 2 or 4.
  unsigned bytesPerToken;
  std::vector<uint32_t> ids;
};

/// Parses the bytes of a token file, checking the magic, version, width and
/// that the size is exactly 24 + N * W bytes; `fileName` only prefixes
/// errors.
llvm::Expected<TokenFile> parseTokenFile(llvm::StringRef contents,
                                         llvm::StringRef fileName);

/// Reads the ids of a token file (see parseTokenFile for the checks).
llvm::Expected<std::vector<uint32_t>> readTokenFile(llvm::StringRef path);

/// Writes `ids` with `bytesPerToken` (2 or 4) bytes each; an id that does
/// not fit is an error naming its position. Writes a temporary file and
/// renames it, so a failure never leaves a half-written file.
llvm::Error writeTokenFile(llvm::StringRef path, llvm::ArrayRef<uint32_t> ids,
                           unsigned bytesPerToken);

/// Checks that every id is below `vocabSize`; the error names the first id
/// that is not and its position.
llvm::Error checkTokenIds(llvm::ArrayRef<uint32_t> ids, uint32_t vocabSize);

} // namespace loom

#endif // LOOM_DATA_TOKENFILE_H
