//===- ByteTokenizer.cpp - Byte-level tokenizer ---------------------------===//

#include "loom/Data/ByteTokenizer.h"

using namespace llvm;

namespace loom {

std::vector<uint32_t> encodeBytes(StringRef text) {
  return std::vector<uint32_t>(text.bytes_begin(), text.bytes_end());
}

std::string decodeBytes(ArrayRef<uint32_t> ids) {
  std::string text;
  text.reserve(ids.size());
  for (uint32_t id : ids) {
    if (id < kByteVocabSize)
      text.push_back(static_cast<char>(id));
    else
      text += "\xEF\xBF\xBD"; // U+FFFD
  }
  return text;
}

} // namespace loom
