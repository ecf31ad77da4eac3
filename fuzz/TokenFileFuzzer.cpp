//===- TokenFileFuzzer.cpp - Fuzzing the token file reader ----------------===//
//
// Any bytes given to parseTokenFile (loom-run --data, loom-tokenize) are
// token ids or an error, never a crash; and any text encodes and decodes
// back to itself.
//
//===----------------------------------------------------------------------===//

#include "loom/Data/ByteTokenizer.h"
#include "loom/Data/TokenFile.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef contents(reinterpret_cast<const char *>(data), size);
  llvm::Expected<loom::TokenFile> file =
      loom::parseTokenFile(contents, "data.tokens");
  if (!file)
    llvm::consumeError(file.takeError());
  std::vector<uint32_t> ids = loom::encodeBytes(contents);
  if (loom::decodeBytes(ids) != contents)
    std::abort(); // The byte tokenizer must round-trip every text.
  return 0;
}
