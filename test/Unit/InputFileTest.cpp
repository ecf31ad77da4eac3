//===- InputFileTest.cpp - Bounded input files and JSON nesting -----------===//
//
// The checks every reader relies on: JSON nesting is measured without
// recursion (brackets in strings do not count), and an input that is not a
// regular file of sensible size is an error naming it.
//
//===----------------------------------------------------------------------===//

#include "loom/Support/InputFile.h"
#include "loom/JsonDepth.h"
#include "loom/Support/Json.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(JsonDepthTest, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(loom::findJsonTooDeep(R"({"a": [1, {"b": []}]})", 4), std::nullopt);
  // The third level opens at byte 10.
  EXPECT_EQ(loom::findJsonTooDeep(R"({"a": [1, {"b": []}]})", 2),
            std::optional<size_t>(10));
  // Brackets and escaped quotes inside strings are text.
  EXPECT_EQ(loom::findJsonTooDeep(R"(["[[[[", "\"[[[", {}])", 2), std::nullopt);
  // Unbalanced closing brackets do not underflow the count.
  EXPECT_EQ(loom::findJsonTooDeep("]]]][[", 2), std::nullopt);
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(loom::findJsonTooDeep(deep),
            std::optional<size_t>(loom::kMaxJsonDepth));
}

TEST(JsonDepthTest, ParseJsonRefusesDeepNestingBeforeParsing) {
  std::string deep = std::string(100000, '{') + std::string(100000, '}');
  llvm::Expected<llvm::json::Value> parsed = loom::parseJson(deep);
  ASSERT_FALSE(bool(parsed));
  EXPECT_EQ(llvm::toString(parsed.takeError()),
            "nests deeper than 64 arrays and objects (at byte 64)");
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(bool(loom::parseJson(ok)));
}

TEST(JsonDepthTest, ParseJsonRefusesDuplicateKeys) {
  auto error = [](llvm::StringRef text) {
    llvm::Expected<llvm::json::Value> parsed = loom::parseJson(text);
    return parsed ? std::string() : llvm::toString(parsed.takeError());
  };
  EXPECT_EQ(error(R"({"nodes": 1, "nodes": 4})"),
            "duplicate key \"nodes\" (at byte 13)");
  // Nested, after an array; the path names where the object is.
  EXPECT_EQ(error(R"({"a": [0, {"b": {"c": 1, "c": 2}}]})"),
            "duplicate key \"c\" in a[1].b (at byte 25)");
  // Escapes decode before comparing; a quote inside a key is no end.
  EXPECT_EQ(error(R"({"x": 1, "\u0078": 2})"),
            "duplicate key \"x\" (at byte 9)");
  EXPECT_EQ(error(R"({"a\"b": 1, "a\"b": 2})"),
            "duplicate key \"a\"b\" (at byte 12)");
  // The same key in sibling objects, and strings equal to keys, are fine.
  EXPECT_EQ(error(R"({"a": {"k": 1}, "b": {"k": 2}, "c": ["a", "a"]})"), "");
  EXPECT_EQ(error(R"([{"k": 1}, {"k": 1}])"), "");
  EXPECT_EQ(error(R"({"k": "k", "v": {"k": "k"}})"), "");
}

TEST(InputFileTest, RefusesStreamsPastTheLimit) {
  // /dev/zero never ends: reading stops past the limit.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> zero =
      loom::readInputFile("/dev/zero", 1 << 20);
  ASSERT_FALSE(bool(zero));
  EXPECT_EQ(llvm::toString(zero.takeError()),
            "/dev/zero: holds more than the 1 MiB Loom reads from such a "
            "file (it is not a regular file)");
}

TEST(InputFileTest, ReadsRegularFilesWithinTheLimitOnly) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("loom-input", "txt", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    out << "0123456789";
  }
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> whole =
      loom::readInputFile(path, 10);
  ASSERT_TRUE(bool(whole));
  EXPECT_EQ((*whole)->getBuffer(), "0123456789");
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> tooBig =
      loom::readInputFile(path, 9);
  ASSERT_FALSE(bool(tooBig));
  EXPECT_EQ(llvm::toString(tooBig.takeError()),
            (path + ": is 10 bytes, more than the 9 bytes Loom reads from "
                    "such a file")
                .str());
  llvm::sys::fs::remove(path);
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> missing =
      loom::readInputFile(path, 10);
  EXPECT_FALSE(bool(missing));
  llvm::consumeError(missing.takeError());
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> directory =
      loom::readInputFile("/", 10);
  ASSERT_FALSE(bool(directory));
  EXPECT_EQ(llvm::toString(directory.takeError()),
            "/: is a directory, not a file");
}

} // namespace
