//===- TestFiles.h - Temporary directories and raw bytes for unit tests ---===//

#ifndef LOOM_TEST_UNIT_TESTFILES_H
#define LOOM_TEST_UNIT_TESTFILES_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom::unittest {

/// A fresh directory, removed with everything in it at the end of a test.
class TempDir {
public:
  explicit TempDir(llvm::StringRef prefix = "loom-test") {
    std::error_code error = llvm::sys::fs::createUniqueDirectory(prefix, path);
    EXPECT_FALSE(error) << error.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }

  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> result(path);
    llvm::sys::path::append(result, name);
    return std::string(result);
  }

  /// The names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    std::error_code error;
    for (llvm::sys::fs::directory_iterator it(path, error), end;
         it != end && !error; it.increment(error))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    llvm::sort(names);
    return names;
  }

  bool isEmpty() const { return entries().empty(); }

private:
  llvm::SmallString<128> path;
};

/// `value` as `bytes` little-endian bytes.
inline std::string littleEndian(uint64_t value, int bytes) {
  std::string result(bytes, '\0');
  for (int i = 0; i < bytes; ++i)
    result[i] = static_cast<char>(value >> (8 * i));
  return result;
}

} // namespace loom::unittest

#endif // LOOM_TEST_UNIT_TESTFILES_H
