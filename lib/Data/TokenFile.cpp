//===- TokenFile.cpp - Token id files for training data -------------------===//
//
// Every size is checked before it is used, in an order that cannot
// overflow, so a truncated or corrupt file is an error and never a crash.
//
//===----------------------------------------------------------------------===//

#include "loom/Data/TokenFile.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/InputFile.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {
namespace {

constexpr StringLiteral kMagic = "LOOMTOKS";
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 24;

Error fileError(StringRef fileName, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), fileName + ": " + message);
}

} // namespace

Expected<TokenFile> parseTokenFile(StringRef contents, StringRef fileName) {
  if (contents.size() < kHeaderBytes)
    return fileError(fileName, "file is too short (" + Twine(contents.size()) +
                                   " bytes) for the 24-byte header");
  if (!contents.starts_with(kMagic))
    return fileError(fileName,
                     "not a token file (the magic is not \"" + kMagic + "\")");
  const char *header = contents.data();
  uint32_t version = support::endian::read32le(header + 8);
  if (version != kVersion)
    return fileError(fileName, "unsupported token file version " +
                                   Twine(version) + " (expected 1)");
  TokenFile file;
  file.bytesPerToken = support::endian::read32le(header + 12);
  if (file.bytesPerToken != 2 && file.bytesPerToken != 4)
    return fileError(fileName, "unsupported bytes per token " +
                                   Twine(file.bytesPerToken) +
                                   " (expected 2 or 4)");
  uint64_t count = support::endian::read64le(header + 16);
  uint64_t dataBytes = contents.size() - kHeaderBytes;
  // Compared by division first: count * width may overflow.
  if (count > dataBytes / file.bytesPerToken ||
      count * file.bytesPerToken != dataBytes)
    return fileError(fileName, "the token count " + Twine(count) +
                                   " in the header does not match the " +
                                   Twine(dataBytes) + " bytes after it (" +
                                   Twine(file.bytesPerToken) +
                                   " bytes per token)");

  file.ids.resize(count);
  const char *data = header + kHeaderBytes;
  for (uint64_t i = 0; i < count; ++i)
    file.ids[i] = file.bytesPerToken == 2
                      ? support::endian::read16le(data + 2 * i)
                      : support::endian::read32le(data + 4 * i);
  return file;
}

Expected<std::vector<uint32_t>> readTokenFile(StringRef path) {
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      readInputFile(path, kMaxTokenFileBytes);
  if (!buffer)
    return buffer.takeError();
  Expected<TokenFile> file = parseTokenFile((*buffer)->getBuffer(), path);
  if (!file)
    return file.takeError();
  return std::move(file->ids);
}

Error writeTokenFile(StringRef path, ArrayRef<uint32_t> ids,
                     unsigned bytesPerToken) {
  if (bytesPerToken != 2 && bytesPerToken != 4)
    return fileError(path, "unsupported bytes per token " +
                               Twine(bytesPerToken) + " (expected 2 or 4)");
  if (bytesPerToken == 2)
    for (auto [position, id] : llvm::enumerate(ids))
      if (id > UINT16_MAX)
        return fileError(path, "token id " + Twine(id) + " at position " +
                                   Twine(position) +
                                   " does not fit in 2 bytes");

  return writeFileAtomically(path, [&](raw_ostream &os) {
    char word[8];
    os << kMagic;
    support::endian::write32le(word, kVersion);
    os.write(word, 4);
    support::endian::write32le(word, bytesPerToken);
    os.write(word, 4);
    support::endian::write64le(word, ids.size());
    os.write(word, 8);
    for (uint32_t id : ids) {
      if (bytesPerToken == 2)
        support::endian::write16le(word, id);
      else
        support::endian::write32le(word, id);
      os.write(word, bytesPerToken);
    }
  });
}

Error checkTokenIds(ArrayRef<uint32_t> ids, uint32_t vocabSize) {
  for (auto [position, id] : llvm::enumerate(ids))
    if (id >= vocabSize)
      return createStringError(
          inconvertibleErrorCode(),
          "token id " + Twine(id) + " at position " + Twine(position) +
              " is not below the vocabulary size " + Twine(vocabSize));
  return Error::success();
}

} // namespace loom
