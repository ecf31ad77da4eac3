//===- DataTest.cpp - Token files, the byte tokenizer and batching --------===//
//
// Token files are compared with bytes assembled here from the format in
// docs/token-file.md; batches with windows worked out by hand from the rule
// in Batch.h, including where it wraps around.
//
//===----------------------------------------------------------------------===//

#include "loom/Data/Batch.h"
#include "loom/Data/ByteTokenizer.h"
#include "loom/Data/TokenFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace loom;
using loom::unittest::littleEndian;
using loom::unittest::TempDir;

namespace {

std::string le(uint64_t value, int bytes) { return littleEndian(value, bytes); }

/// A token file header: magic, version, width, count.
std::string header(uint32_t version, uint32_t width, uint64_t count) {
  return "LOOMTOKS" + le(version, 4) + le(width, 4) + le(count, 8);
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  EXPECT_TRUE(static_cast<bool>(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

std::string errorText(llvm::Error error) {
  EXPECT_TRUE(static_cast<bool>(error));
  return llvm::toString(std::move(error));
}

template <typename T> std::string errorText(llvm::Expected<T> value) {
  EXPECT_FALSE(static_cast<bool>(value));
  return value ? std::string() : llvm::toString(value.takeError());
}

TEST(TokenFileTest, RoundTripsBothWidths) {
  TempDir dir("loom-data-test");
  std::vector<uint32_t> narrow = {0, 1, 255, 256, 65535, 7};
  std::vector<uint32_t> wide = {0, 65536, 4294967295u, 12345678};
  for (auto [ids, width] :
       {std::pair(narrow, 2u), std::pair(narrow, 4u), std::pair(wide, 4u),
        std::pair(std::vector<uint32_t>{}, 2u)}) {
    std::string path = dir.file("ids.tokens");
    ASSERT_FALSE(static_cast<bool>(writeTokenFile(path, ids, width)));
    EXPECT_EQ(readFile(path).size(), 24 + width * ids.size());
    llvm::Expected<std::vector<uint32_t>> read = readTokenFile(path);
    ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
    EXPECT_EQ(*read, ids);
    llvm::Expected<TokenFile> file = parseTokenFile(readFile(path), path);
    ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
    EXPECT_EQ(file->bytesPerToken, width);
  }
}

TEST(TokenFileTest, LayoutIsByteExact) {
  TempDir dir("loom-data-test");
  std::string path = dir.file("exact.tokens");
  ASSERT_FALSE(static_cast<bool>(writeTokenFile(path, {1, 258}, 2)));
  EXPECT_EQ(readFile(path),
            header(1, 2, 2) + "\x01" + std::string(1, '\0') + "\x02\x01");
  ASSERT_FALSE(static_cast<bool>(writeTokenFile(path, {0x01020304}, 4)));
  EXPECT_EQ(readFile(path), header(1, 4, 1) + "\x04\x03\x02\x01");
}

TEST(TokenFileTest, MalformedFilesAreErrorsNamingTheFile) {
  struct Case {
    std::string contents, error;
  } cases[] = {
      {"LOOMTOK", "file is too short (7 bytes) for the 24-byte header"},
      {header(1, 2, 0).substr(0, 23),
       "file is too short (23 bytes) for the 24-byte header"},
      {"LOOMTOKZ" + header(1, 2, 0).substr(8),
       "not a token file (the magic is not \"LOOMTOKS\")"},
      {header(2, 2, 0), "unsupported token file version 2 (expected 1)"},
      {header(1, 3, 0), "unsupported bytes per token 3 (expected 2 or 4)"},
      {header(1, 0, 0), "unsupported bytes per token 0 (expected 2 or 4)"},
      {header(1, 2, 3) + le(1, 2) + le(2, 2),
       "the token count 3 in the header does not match the 4 bytes after it "
       "(2 bytes per token)"},
      {header(1, 4, 1) + le(1, 4) + "x",
       "the token count 1 in the header does not match the 5 bytes after it "
       "(4 bytes per token)"},
      // 2^62 * 4 wraps to 0 in 64 bits: the check must not overflow.
      {header(1, 4, 1ull << 62),
       "the token count 4611686018427387904 in the header does not match the "
       "0 bytes after it (4 bytes per token)"},
  };
  for (const Case &c : cases) {
    std::string message = errorText(parseTokenFile(c.contents, "bad.tokens"));
    EXPECT_EQ(message, "bad.tokens: " + c.error) << c.error;
  }
  // Only the exact size passes.
  EXPECT_TRUE(static_cast<bool>(
      parseTokenFile(header(1, 2, 2) + le(1, 2) + le(2, 2), "ok.tokens")));
}

TEST(TokenFileTest, ReadErrorsNameTheFile) {
  TempDir dir("loom-data-test");
  std::string path = dir.file("absent.tokens");
  EXPECT_EQ(errorText(readTokenFile(path)),
            path + ": No such file or directory");
}

TEST(TokenFileTest, WriteErrorsLeaveNothingBehind) {
  TempDir dir("loom-data-test");
  std::string path = dir.file("out.tokens");
  EXPECT_EQ(errorText(writeTokenFile(path, {1, 65536}, 2)),
            path + ": token id 65536 at position 1 does not fit in 2 bytes");
  EXPECT_EQ(errorText(writeTokenFile(path, {1}, 3)),
            path + ": unsupported bytes per token 3 (expected 2 or 4)");
  std::string missing = dir.file("no-such-dir/out.tokens");
  EXPECT_EQ(errorText(writeTokenFile(missing, {1}, 2)),
            missing + ": No such file or directory");
  EXPECT_TRUE(dir.isEmpty());

  // Overwriting replaces the whole file; no temporary is left.
  ASSERT_FALSE(static_cast<bool>(writeTokenFile(path, {1, 2, 3}, 4)));
  ASSERT_FALSE(static_cast<bool>(writeTokenFile(path, {9}, 2)));
  EXPECT_EQ(readFile(path), header(1, 2, 1) + le(9, 2));
  EXPECT_EQ(errorText(writeTokenFile(path, {70000}, 2)),
            path + ": token id 70000 at position 0 does not fit in 2 bytes");
  EXPECT_EQ(readFile(path), header(1, 2, 1) + le(9, 2));
  std::error_code error;
  llvm::sys::fs::directory_iterator it(dir.file(""), error);
  ASSERT_FALSE(error);
  EXPECT_EQ(llvm::sys::path::filename(it->path()), "out.tokens");
  it.increment(error);
  EXPECT_EQ(it, llvm::sys::fs::directory_iterator());
}

TEST(TokenFileTest, CheckTokenIdsNamesTheFirstBadPosition) {
  EXPECT_FALSE(static_cast<bool>(checkTokenIds({0, 255, 17}, 256)));
  EXPECT_FALSE(static_cast<bool>(checkTokenIds({}, 1)));
  EXPECT_EQ(errorText(checkTokenIds({3, 256, 300}, 256)),
            "token id 256 at position 1 is not below the vocabulary size 256");
}

TEST(ByteTokenizerTest, EncodesBytesAsIds) {
  EXPECT_EQ(encodeBytes("Hi\n"), (std::vector<uint32_t>{72, 105, 10}));
  // UTF-8 "é" is two bytes, both above 127: no sign extension.
  EXPECT_EQ(encodeBytes("\xc3\xa9"), (std::vector<uint32_t>{0xc3, 0xa9}));
  EXPECT_TRUE(encodeBytes("").empty());
}

TEST(ByteTokenizerTest, EveryByteRoundTrips) {
  std::string all(256, '\0');
  std::iota(all.begin(), all.end(), 0);
  std::vector<uint32_t> ids = encodeBytes(all);
  ASSERT_EQ(ids.size(), 256u);
  for (uint32_t i = 0; i < 256; ++i)
    EXPECT_EQ(ids[i], i);
  EXPECT_EQ(decodeBytes(ids), all);
  EXPECT_FALSE(static_cast<bool>(checkTokenIds(ids, kByteVocabSize)));
}

TEST(ByteTokenizerTest, IdsOutsideTheVocabularyDecodeToReplacement) {
  EXPECT_EQ(decodeBytes({65, 256, 66, 4000000000u}), "A\xEF\xBF\xBD"
                                                     "B\xEF\xBF\xBD");
}

/// ids[i] = 100 + i, so a token's value tells its position.
std::vector<uint32_t> numbered(uint32_t count) {
  std::vector<uint32_t> ids(count);
  std::iota(ids.begin(), ids.end(), 100);
  return ids;
}

TEST(BatchTest, RowsFollowTheRuleAndWrapAround) {
  // N = 10, seqLen = 3: starts are ((s * 2 + b) * 3) mod 7.
  std::vector<uint32_t> ids = numbered(10);
  struct Case {
    int64_t step;
    std::vector<int32_t> tokens, labels;
  } cases[] = {
      // Starts 0 and 3.
      {0, {100, 101, 102, 103, 104, 105}, {101, 102, 103, 104, 105, 106}},
      // Starts 6 (the last window: its last label is ids[9]) and 9 mod 7 = 2.
      {1, {106, 107, 108, 102, 103, 104}, {107, 108, 109, 103, 104, 105}},
      // Starts 12 mod 7 = 5 and 15 mod 7 = 1.
      {2, {105, 106, 107, 101, 102, 103}, {106, 107, 108, 102, 103, 104}},
      // Starts 42 mod 7 = 0 and 45 mod 7 = 3: step 7 repeats step 0.
      {7, {100, 101, 102, 103, 104, 105}, {101, 102, 103, 104, 105, 106}},
  };
  for (const Case &e : cases) {
    llvm::Expected<Batch> batch = makeBatch(ids, e.step, 2, 3);
    ASSERT_TRUE(static_cast<bool>(batch)) << llvm::toString(batch.takeError());
    EXPECT_EQ(batch->tokens, e.tokens) << "step " << e.step;
    EXPECT_EQ(batch->labels, e.labels) << "step " << e.step;
  }
}

TEST(BatchTest, HugeStepsDoNotOverflow) {
  // 10^18 = 1 (mod 7), since 10 = 3 and 3^6 = 729 = 1 (mod 7); the start is
  // (10^18 * 3) mod 7 = 3, as Python's integers compute it.
  llvm::Expected<Batch> batch =
      makeBatch(numbered(10), 1000000000000000000, 1, 3);
  ASSERT_TRUE(static_cast<bool>(batch)) << llvm::toString(batch.takeError());
  EXPECT_EQ(batch->tokens, (std::vector<int32_t>{103, 104, 105}));
  EXPECT_EQ(batch->labels, (std::vector<int32_t>{104, 105, 106}));
}

TEST(BatchTest, ExactlyOneWindow) {
  // N = seqLen + 1: every row is the whole sequence.
  llvm::Expected<Batch> batch = makeBatch({5, 6, 7}, 3, 2, 2);
  ASSERT_TRUE(static_cast<bool>(batch)) << llvm::toString(batch.takeError());
  EXPECT_EQ(batch->tokens, (std::vector<int32_t>{5, 6, 5, 6}));
  EXPECT_EQ(batch->labels, (std::vector<int32_t>{6, 7, 6, 7}));
}

TEST(BatchTest, Errors) {
  std::vector<uint32_t> ids = numbered(4);
  EXPECT_EQ(errorText(makeBatch(ids, 0, 1, 4)),
            "a sequence length of 4 needs 5 tokens (inputs and labels), but "
            "there are 4");
  EXPECT_EQ(errorText(makeBatch({}, 0, 1, 1)),
            "a sequence length of 1 needs 2 tokens (inputs and labels), but "
            "there are 0");
  EXPECT_EQ(errorText(makeBatch(ids, -1, 1, 2)), "step -1 is negative");
  EXPECT_EQ(errorText(makeBatch(ids, 0, 0, 2)),
            "micro-batch size 0 is not positive");
  EXPECT_EQ(errorText(makeBatch(ids, 0, 1, 0)),
            "sequence length 0 is not positive");
  ids[3] = 0x80000000u;
  EXPECT_EQ(errorText(makeBatch(ids, 0, 1, 3)),
            "token id 2147483648 at position 3 does not fit in int32");
}

} // namespace
