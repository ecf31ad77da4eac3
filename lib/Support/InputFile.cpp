//===- InputFile.cpp - Reading input files within bounds ------------------===//

#include "loom/Support/InputFile.h"
#include "loom/JsonDepth.h"
#include "loom/Support/Json.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"

using namespace llvm;

namespace loom {

static Error pathError(StringRef path, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), path + ": " + message);
}

static std::string formatBytes(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30) && bytes % (uint64_t(1) << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (uint64_t(1) << 20) && bytes % (uint64_t(1) << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

Expected<std::unique_ptr<MemoryBuffer>>
readInputFile(StringRef path, uint64_t maxBytes, bool requiresNullTerminator) {
  StringRef shown = path == "-" ? StringRef("<stdin>") : path;
  int fd = 0;
  if (path != "-") {
    if (std::error_code error =
            sys::fs::openFileForRead(path, fd, sys::fs::OF_None))
      return pathError(shown, error.message());
  }
  scope_exit closeFd([&] {
    if (path != "-")
      sys::Process::SafelyCloseFileDescriptor(fd);
  });
  sys::fs::file_status status;
  if (std::error_code error = sys::fs::status(fd, status))
    return pathError(shown, error.message());
  if (status.type() == sys::fs::file_type::directory_file)
    return pathError(shown, "is a directory, not a file");
  if (status.type() == sys::fs::file_type::regular_file) {
    if (status.getSize() > maxBytes)
      return pathError(
          shown, "is " + Twine(status.getSize()) + " bytes, more than the " +
                     formatBytes(maxBytes) + " Loom reads from such a file");
    ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
        MemoryBuffer::getOpenFile(sys::fs::convertFDToNativeFile(fd), path,
                                  status.getSize(), requiresNullTerminator);
    if (!buffer)
      return pathError(shown, buffer.getError().message());
    return std::move(*buffer);
  }
  // A pipe or a device: read until its end, or until it is too long.
  uint64_t limit = std::min(maxBytes, kMaxStreamBytes);
  SmallString<0> contents;
  while (true) {
    uint64_t chunk = 1 << 20;
    size_t size = contents.size();
    if (size > limit)
      return pathError(shown, "holds more than the " + formatBytes(limit) +
                                  " Loom reads from such a file (it is not "
                                  "a regular file)");
    contents.resize_for_overwrite(size + chunk);
    Expected<size_t> read = sys::fs::readNativeFile(
        sys::fs::convertFDToNativeFile(fd),
        MutableArrayRef<char>(contents.data() + size, chunk));
    if (!read)
      return pathError(shown, toString(read.takeError()));
    contents.truncate(size + *read);
    if (*read == 0)
      break;
  }
  return MemoryBuffer::getMemBufferCopy(contents, shown);
}

/// The first key that repeats in one object of `text`, valid JSON, as an
/// error naming it, its object's path and its byte offset. llvm::json keeps
/// the last of the two: a misspelt override would silently take effect.
static Error findDuplicateKey(StringRef text) {
  struct Frame {
    bool object = false;
    int64_t index = 0; ///< arrays: the element being read
    std::string key;   ///< objects: the member being read
    StringSet<> keys;
  };
  std::vector<Frame> stack;
  auto path = [&] {
    std::string result;
    for (const Frame &frame : stack)
      if (frame.object && !frame.key.empty())
        result += (result.empty() ? "" : ".") + frame.key;
      else if (!frame.object)
        result += "[" + std::to_string(frame.index) + "]";
    return result;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{' || c == '[') {
      stack.emplace_back();
      stack.back().object = c == '{';
    } else if ((c == '}' || c == ']') && !stack.empty()) {
      stack.pop_back();
    } else if (c == ',' && !stack.empty() && !stack.back().object) {
      ++stack.back().index;
    } else if (c == '"') {
      size_t start = i;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      StringRef token = text.slice(start, i + 1);
      if (stack.empty() || !stack.back().object ||
          !text.drop_front(i + 1).ltrim(" \t\r\n").starts_with(":"))
        continue;
      // A key is compared as decoded: "a" and "\u0061" are one key.
      std::string key = token.drop_front().drop_back().str();
      if (token.contains('\\')) {
        Expected<json::Value> decoded = json::parse(token);
        if (!decoded)
          return decoded.takeError();
        key = decoded->getAsString()->str();
      }
      Frame &object = stack.back();
      object.key.clear();
      std::string where = path();
      object.key = key;
      if (!object.keys.insert(key).second)
        return createStringError(inconvertibleErrorCode(),
                                 "duplicate key \"" + key + "\"" +
                                     (where.empty() ? "" : " in " + where) +
                                     " (at byte " + Twine(start) + ")");
    }
  }
  return Error::success();
}

Expected<json::Value> parseJson(StringRef text) {
  if (std::optional<size_t> at =
          findJsonTooDeep(std::string_view(text.data(), text.size())))
    return createStringError(inconvertibleErrorCode(),
                             "nests deeper than " + Twine(kMaxJsonDepth) +
                                 " arrays and objects (at byte " + Twine(*at) +
                                 ")");
  Expected<json::Value> value = json::parse(text);
  if (!value)
    return value.takeError();
  if (Error error = findDuplicateKey(text))
    return std::move(error);
  return value;
}

} // namespace loom
