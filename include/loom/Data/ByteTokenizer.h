//===- ByteTokenizer.h - Byte-level tokenizer -------------------*- C++ -*-===//
//
// The simplest tokenizer a language model can train on: each byte of the
// text is one token and its id is the byte's value, so the vocabulary has 256
// entries and every text (UTF-8 or not) round-trips exactly.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DATA_BYTETOKENIZER_H
#define LOOM_DATA_BYTETOKENIZER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// Vocabulary size of the byte-level tokenizer.
constexpr uint32_t kByteVocabSize = 256;

/// One id per byte of `text`: the byte's value, 0-255.
std::vector<uint32_t> encodeBytes(llvm::StringRef text);

/// The bytes the ids stand for. An id >= 256 (which a model with a larger
/// vocabulary may sample) is not an error: it decodes to U+FFFD, the Unicode
/// replacement character (the UTF-8 bytes EF BF BD), as Hugging Face
/// tokenizers do for undecodable bytes. Callers that want an error check
/// the ids first with checkTokenIds(ids, kByteVocabSize).
std::string decodeBytes(llvm::ArrayRef<uint32_t> ids);

} // namespace loom

#endif // LOOM_DATA_BYTETOKENIZER_H
