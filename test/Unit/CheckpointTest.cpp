//===- CheckpointTest.cpp - safetensors reading and writing ---------------===//
//
// Files are assembled byte by byte here, independently of the writer: the
// header JSON is spelled out, its padding and size computed, and widened
// values are compared with bit patterns worked out by hand from the IEEE
// binary16 / bfloat16 / binary64 encodings.
//
//===----------------------------------------------------------------------===//

#include "loom/Checkpoint/Safetensors.h"

#include "llvm/ADT/bit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace loom;
using loom::unittest::littleEndian;
using loom::unittest::TempDir;

namespace {

std::string le64(uint64_t value) { return littleEndian(value, 8); }

std::string le32(uint32_t value) { return le64(value).substr(0, 4); }
std::string le16(uint16_t value) { return le64(value).substr(0, 2); }
std::string f32(float value) { return le32(llvm::bit_cast<uint32_t>(value)); }

/// A safetensors file: the header size, the header, the data.
std::string assemble(llvm::StringRef header, llvm::StringRef data) {
  return le64(header.size()) + header.str() + data.str();
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  EXPECT_TRUE(static_cast<bool>(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

void writeFile(const std::string &path, llvm::StringRef contents) {
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  ASSERT_FALSE(error) << error.message();
  os << contents;
}

Checkpoint parseOrFail(llvm::StringRef contents) {
  llvm::Expected<Checkpoint> checkpoint =
      parseSafetensors(contents, "test.safetensors");
  EXPECT_TRUE(static_cast<bool>(checkpoint))
      << llvm::toString(checkpoint.takeError());
  return checkpoint ? std::move(*checkpoint) : Checkpoint();
}

uint32_t bits(float value) { return llvm::bit_cast<uint32_t>(value); }

TEST(SafetensorsTest, RoundTripKeepsOrderShapesValuesAndMetadata) {
  TempDir dir("loom-checkpoint-test");
  std::vector<CheckpointTensor> tensors = {
      {"wte", {2, 3}, {1.5f, -2.0f, 0.0f, -0.0f, 1e-40f, 3.25e30f}},
      {"scalar", {}, {7.0f}},
      {"empty", {0, 4}, {}},
      {"bias", {3}, {std::numeric_limits<float>::infinity(), -1.0f, 0.125f}},
  };
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"step", "120"}};
  std::string path = dir.file("model.safetensors");
  ASSERT_FALSE(static_cast<bool>(writeSafetensors(path, tensors, metadata)));

  llvm::Expected<Checkpoint> read = readSafetensors(path);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->metadata, metadata);
  ASSERT_EQ(read->tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(read->tensors[i].name, tensors[i].name);
    EXPECT_EQ(read->tensors[i].shape, tensors[i].shape);
    ASSERT_EQ(read->tensors[i].values.size(), tensors[i].values.size());
    for (size_t j = 0; j < tensors[i].values.size(); ++j)
      EXPECT_EQ(bits(read->tensors[i].values[j]), bits(tensors[i].values[j]))
          << tensors[i].name << "[" << j << "]";
  }
  ASSERT_NE(read->find("bias"), nullptr);
  EXPECT_EQ(read->find("bias")->values[2], 0.125f);
  EXPECT_EQ(read->find("missing"), nullptr);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});
}

// A tool replacing its earlier output tells it from another file by the
// header alone: text, a header size past the end, a header that is not a
// JSON object.
TEST(SafetensorsTest, HeaderSniffTellsCheckpointsFromOtherFiles) {
  TempDir dir;
  CheckpointTensor tensor{"x", {2}, {1.0f, 2.0f}};
  ASSERT_FALSE(bool(writeSafetensors(dir.file("a.safetensors"), {tensor})));
  EXPECT_TRUE(hasSafetensorsHeader(dir.file("a.safetensors")));
  writeFile(dir.file("text"), "hello\n");
  EXPECT_FALSE(hasSafetensorsHeader(dir.file("text")));
  writeFile(dir.file("long"), littleEndian(100, 8) + "{}");
  EXPECT_FALSE(hasSafetensorsHeader(dir.file("long")));
  writeFile(dir.file("array"), littleEndian(2, 8) + "[]");
  EXPECT_FALSE(hasSafetensorsHeader(dir.file("array")));
  writeFile(dir.file("empty"), littleEndian(2, 8) + "{}");
  EXPECT_TRUE(hasSafetensorsHeader(dir.file("empty")));
  EXPECT_FALSE(hasSafetensorsHeader(dir.file("missing")));
}

TEST(SafetensorsTest, WriterOutputIsByteExact) {
  TempDir dir("loom-checkpoint-test");
  std::string path = dir.file("exact.safetensors");
  ASSERT_FALSE(static_cast<bool>(
      writeSafetensors(path, {{"b", {2}, {1.0f, -2.0f}}, {"a", {1, 1}, {0.5f}}},
                       {{"format", "pt"}})));

  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}})";
  ASSERT_EQ(header.size(), 141u);
  header += std::string(3, ' '); // Padded to 144, a multiple of 8.
  // 1.0f, -2.0f, 0.5f.
  std::string expected =
      le64(144) + header + std::string("\x00\x00\x80\x3f", 4) +
      std::string("\x00\x00\x00\xc0", 4) + std::string("\x00\x00\x00\x3f", 4);
  EXPECT_EQ(readFile(path), expected);
}

TEST(SafetensorsTest, F64TensorsRoundTripUnrounded) {
  // A double-precision run's parameters: 1 + 2^-40 is not an f32.
  TempDir dir("loom-checkpoint-test");
  CheckpointTensor w{"w", {2}, {}};
  w.dtype = "F64";
  w.doubles = {1.0 + std::ldexp(1.0, -40), -0.1};
  std::string path = dir.file("f64.safetensors");
  ASSERT_FALSE(static_cast<bool>(writeSafetensors(path, {w})));
  EXPECT_NE(readFile(path).find(R"("dtype":"F64")"), std::string::npos);
  llvm::Expected<Checkpoint> read = readSafetensors(path);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  const CheckpointTensor &back = read->tensors.front();
  EXPECT_EQ(back.dtype, "F64");
  EXPECT_EQ(back.doubles, w.doubles);
  // The f32 view rounds.
  EXPECT_EQ(back.values[0], 1.0f);
}

TEST(SafetensorsTest, WriterWithoutMetadataOmitsTheKey) {
  TempDir dir("loom-checkpoint-test");
  std::string path = dir.file("plain.safetensors");
  ASSERT_FALSE(static_cast<bool>(writeSafetensors(path, {{"x", {1}, {2.0f}}})));
  std::string header =
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header += std::string((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(readFile(path), assemble(header, f32(2.0f)));
}

TEST(SafetensorsTest, ReadsHandAssembledFileInOffsetOrder) {
  // Listed out of order in the header; file order is data order.
  std::string header =
      R"({"second": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},)"
      R"( "first": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
      R"( "__metadata__": {"source": "hand"}})";
  Checkpoint checkpoint =
      parseOrFail(assemble(header, f32(1.0f) + f32(2.0f) + f32(-3.0f)));
  ASSERT_EQ(checkpoint.tensors.size(), 2u);
  EXPECT_EQ(checkpoint.tensors[0].name, "first");
  EXPECT_EQ(checkpoint.tensors[0].values, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(checkpoint.tensors[1].name, "second");
  EXPECT_EQ(checkpoint.tensors[1].values, (std::vector<float>{-3.0f}));
  EXPECT_EQ(checkpoint.metadata.at("source"), "hand");
}

TEST(SafetensorsTest, KeepsIntegerAndBoolBuffersUnread) {
  // HF checkpoints may hold non-parameter buffers (GPT-2's causal mask,
  // position ids): they are listed with their dtype and no values.
  std::string header =
      R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
      R"( "mask": {"dtype": "BOOL", "shape": [2, 2], "data_offsets": [4, 8]},)"
      R"( "pos": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]}})";
  Checkpoint checkpoint = parseOrFail(
      assemble(header, f32(0.5f) + std::string("\x01\x00\x01\x01", 4) +
                           std::string(8, '\0')));
  ASSERT_EQ(checkpoint.tensors.size(), 3u);
  EXPECT_TRUE(checkpoint.tensors[0].isFloat());
  EXPECT_EQ(checkpoint.tensors[0].values, (std::vector<float>{0.5f}));
  EXPECT_EQ(checkpoint.tensors[1].dtype, "BOOL");
  EXPECT_FALSE(checkpoint.tensors[1].isFloat());
  EXPECT_TRUE(checkpoint.tensors[1].values.empty());
  EXPECT_EQ(checkpoint.tensors[2].dtype, "I64");
  EXPECT_EQ(checkpoint.tensors[2].shape, (llvm::SmallVector<int64_t>{1}));
}

TEST(SafetensorsTest, WidensBF16) {
  // bfloat16 is the top 16 bits of a float.
  std::string header =
      R"({"w": {"dtype": "BF16", "shape": [5], "data_offsets": [0, 10]}})";
  Checkpoint checkpoint =
      parseOrFail(assemble(header, le16(0x3f80) + le16(0xc040) + le16(0x3e20) +
                                       le16(0x7f80) + le16(0x0001)));
  const std::vector<float> &v = checkpoint.tensors.at(0).values;
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -3.0f);
  EXPECT_EQ(v[2], 0.15625f); // 2^-3 * (1 + 0.25)
  EXPECT_EQ(v[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits(v[4]), 0x00010000u); // A float subnormal.
}

TEST(SafetensorsTest, WidensF16) {
  std::string header =
      R"({"w": {"dtype": "F16", "shape": [2, 4], "data_offsets": [0, 16]}})";
  Checkpoint checkpoint = parseOrFail(assemble(
      header, le16(0x3c00) + le16(0xc000) + le16(0x3555) + le16(0x0001) +
                  le16(0x7bff) + le16(0x8000) + le16(0xfc00) + le16(0x7e00)));
  const std::vector<float> &v = checkpoint.tensors.at(0).values;
  ASSERT_EQ(v.size(), 8u);
  EXPECT_EQ(checkpoint.tensors[0].shape, (llvm::SmallVector<int64_t>{2, 4}));
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 0.333251953125f);        // 2^-2 * (1 + 341/1024)
  EXPECT_EQ(v[3], 5.9604644775390625e-8f); // 2^-24, the smallest subnormal
  EXPECT_EQ(v[4], 65504.0f);               // The largest half.
  EXPECT_EQ(bits(v[5]), 0x80000000u);      // -0
  EXPECT_EQ(v[6], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[7]));
}

TEST(SafetensorsTest, RoundsF64ToNearestFloat) {
  std::string header =
      R"({"w": {"dtype": "F64", "shape": [3], "data_offsets": [0, 24]}})";
  // 1/3 = 0x3FD5555555555555 rounds up to 0x3EAAAAAB; 0.1 =
  // 0x3FB999999999999A rounds up to 0x3DCCCCCD; -2.5 is exact.
  Checkpoint checkpoint = parseOrFail(assemble(
      header, le64(0x3FD5555555555555ull) + le64(0x3FB999999999999Aull) +
                  le64(0xC004000000000000ull)));
  const std::vector<float> &v = checkpoint.tensors.at(0).values;
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(bits(v[0]), 0x3EAAAAABu);
  EXPECT_EQ(bits(v[1]), 0x3DCCCCCDu);
  EXPECT_EQ(v[2], -2.5f);
}

TEST(SafetensorsTest, ZeroSizeTensorsAndEmptyFile) {
  Checkpoint empty = parseOrFail(assemble("{}      ", ""));
  EXPECT_TRUE(empty.tensors.empty());
  EXPECT_TRUE(empty.metadata.empty());

  // Two zero-size tensors share offset 4 and keep their header order.
  std::string header =
      R"({"z2": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},)"
      R"( "a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},)"
      R"( "z1": {"dtype": "BF16", "shape": [3, 0], "data_offsets": [4, 4]}})";
  Checkpoint checkpoint = parseOrFail(assemble(header, f32(4.0f)));
  ASSERT_EQ(checkpoint.tensors.size(), 3u);
  EXPECT_EQ(checkpoint.tensors[0].name, "a");
  EXPECT_EQ(checkpoint.tensors[0].values, (std::vector<float>{4.0f}));
  EXPECT_EQ(checkpoint.tensors[1].name, "z2");
  EXPECT_EQ(checkpoint.tensors[2].name, "z1");
  EXPECT_TRUE(checkpoint.tensors[2].values.empty());
}

struct MalformedCase {
  const char *what;
  std::string contents;
  const char *error;
};

std::string entry(llvm::StringRef name, llvm::StringRef dtype,
                  llvm::StringRef shape, llvm::StringRef offsets) {
  return ("\"" + name + "\": {\"dtype\": \"" + dtype +
          "\", \"shape\": " + shape + ", \"data_offsets\": " + offsets + "}")
      .str();
}

std::vector<MalformedCase> malformedCases() {
  std::string w4 = entry("w", "F32", "[1]", "[0, 4]");
  std::string data4 = f32(1.0f), data8 = data4 + data4, data12 = data8 + data4;
  return {
      {"short", "abc",
       "file is too short (3 bytes) to hold the 8-byte header "
       "size"},
      {"empty", "", "file is too short (0 bytes)"},
      {"header size", le64(100) + "{}",
       "header size 100 is larger than the rest of the file (2 bytes)"},
      {"header size max", le64(~0ull) + "{}",
       "header size 18446744073709551615 is larger than the rest of the file"},
      {"json", assemble("{\"w\": ", ""), "header is not valid JSON: "},
      {"empty header", assemble("", ""), "header is not valid JSON: "},
      {"array", assemble("[1, 2]", ""), "header is not a JSON object"},
      {"entry", assemble(R"({"w": 3})", ""),
       "tensor \"w\": entry is not a JSON object"},
      {"dtype",
       assemble(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", data4),
       "tensor \"w\": missing key \"dtype\""},
      {"dtype type",
       assemble(R"({"w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})",
                data4),
       "tensor \"w\": \"dtype\" is not a string"},
      {"F8",
       assemble("{" + entry("w", "F8_E4M3", "[4]", "[0, 4]") + "}", data4),
       "tensor \"w\": unsupported dtype \"F8_E4M3\" (supported: F32, F64, "
       "F16, BF16, BOOL and integers)"},
      {"I32 size",
       assemble("{" + entry("ids", "I32", "[2]", "[0, 4]") + "}", data4),
       "tensor \"ids\""},
      {"shape",
       assemble(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", data4),
       "tensor \"w\": missing key \"shape\""},
      {"shape type",
       assemble("{" + entry("w", "F32", "4", "[0, 4]") + "}", data4),
       "tensor \"w\": \"shape\" is not an array"},
      {"negative dim",
       assemble("{" + entry("w", "F32", "[-1]", "[0, 4]") + "}", data4),
       "tensor \"w\": \"shape\" must hold non-negative integers"},
      {"fractional dim",
       assemble("{" + entry("w", "F32", "[1.5]", "[0, 4]") + "}", data4),
       "tensor \"w\": \"shape\" must hold non-negative integers"},
      // Hugging Face's reader (serde, usize) refuses an integral float too.
      {"float dim",
       assemble("{" + entry("w", "F32", "[1.0]", "[0, 4]") + "}", data4),
       "tensor \"w\": \"shape\" must hold non-negative integers"},
      {"deep header",
       assemble(std::string(100000, '[') + std::string(100000, ']'), ""),
       "header is not valid JSON: nests deeper than 64 arrays and objects"},
      {"huge shape",
       assemble("{" +
                    entry("w", "F32", "[4294967296, 4294967296, 4294967296]",
                          "[0, 4]") +
                    "}",
                data4),
       "tensor \"w\": shape [4294967296, 4294967296, 4294967296] is too large"},
      {"offsets", assemble(R"({"w": {"dtype": "F32", "shape": [1]}})", data4),
       "tensor \"w\": missing key \"data_offsets\""},
      {"offsets count",
       assemble("{" + entry("w", "F32", "[1]", "[4]") + "}", data4),
       "tensor \"w\": \"data_offsets\" must be two non-negative integers"},
      {"offsets negative",
       assemble("{" + entry("w", "F32", "[1]", "[-4, 0]") + "}", data4),
       "tensor \"w\": \"data_offsets\" must be two non-negative integers"},
      {"reversed",
       assemble("{" + entry("w", "F32", "[1]", "[4, 0]") + "}", data4),
       "tensor \"w\": data_offsets [4, 0] end before they begin"},
      {"out of range",
       assemble("{" + entry("w", "F32", "[25]", "[0, 100]") + "}", data4),
       "tensor \"w\": data_offsets [0, 100] run past the end of the data (4 "
       "bytes)"},
      {"size mismatch",
       assemble("{" + entry("w", "F32", "[3]", "[0, 8]") + "}", data8),
       "tensor \"w\": shape [3] of F32 needs 12 bytes but data_offsets [0, 8] "
       "hold 8"},
      {"overlap",
       assemble("{" + entry("a", "F32", "[2]", "[0, 8]") + ", " +
                    entry("b", "F32", "[2]", "[4, 12]") + "}",
                data12),
       "tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" [0, 8]"},
      {"gap",
       assemble("{" + entry("a", "F32", "[1]", "[0, 4]") + ", " +
                    entry("b", "F32", "[1]", "[8, 12]") + "}",
                data12),
       "tensor \"b\": data_offsets [8, 12] leave bytes [4, 8) of the data "
       "unused"},
      {"leading gap",
       assemble("{" + entry("w", "F32", "[1]", "[4, 8]") + "}", data8),
       "tensor \"w\": data_offsets [4, 8] leave bytes [0, 4) of the data "
       "unused"},
      {"trailing", assemble("{" + w4 + "}", data8),
       "bytes [4, 8) of the data belong to no tensor"},
      {"duplicate",
       assemble("{" + w4 + ", " + entry("w", "F32", "[1]", "[4, 8]") + "}",
                data8),
       "header is not valid JSON: duplicate key \"w\" (at byte"},
      {"duplicate escaped",
       assemble("{" + w4 + ", " + entry("\\u0077", "F32", "[1]", "[4, 8]") +
                    "}",
                data8),
       "header is not valid JSON: duplicate key \"w\" (at byte"},
      {"duplicate metadata",
       assemble(R"({"__metadata__": {}, "__metadata__": {}})", ""),
       "header is not valid JSON: duplicate key \"__metadata__\" (at byte "
       "21)"},
      {"metadata type", assemble(R"({"__metadata__": [1]})", ""),
       "\"__metadata__\" is not a JSON object"},
      {"metadata value", assemble(R"({"__metadata__": {"step": 3}})", ""),
       "\"__metadata__\" key \"step\" is not a string"},
  };
}

TEST(SafetensorsTest, MalformedFilesAreErrorsNamingFileAndTensor) {
  for (const MalformedCase &c : malformedCases()) {
    llvm::Expected<Checkpoint> checkpoint =
        parseSafetensors(c.contents, "bad.safetensors");
    ASSERT_FALSE(static_cast<bool>(checkpoint)) << c.what;
    std::string message = llvm::toString(checkpoint.takeError());
    EXPECT_EQ(message.rfind("bad.safetensors: ", 0), 0u) << message;
    EXPECT_NE(message.find(c.error), std::string::npos)
        << c.what << ": got \"" << message << "\"";
  }
}

TEST(SafetensorsTest, EveryTruncationOfAValidFileIsAnError) {
  std::string valid = assemble(
      R"({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})",
      le16(0x3f80) + le16(0x4000));
  ASSERT_TRUE(static_cast<bool>(parseOrFail(valid).find("a")));
  for (size_t size = 0; size < valid.size(); ++size) {
    llvm::Expected<Checkpoint> checkpoint =
        parseSafetensors(llvm::StringRef(valid).take_front(size), "cut");
    EXPECT_FALSE(static_cast<bool>(checkpoint)) << size;
    llvm::consumeError(checkpoint.takeError());
  }
}

TEST(SafetensorsTest, MissingFileIsAnErrorNamingIt) {
  TempDir dir("loom-checkpoint-test");
  std::string path = dir.file("absent.safetensors");
  llvm::Expected<Checkpoint> checkpoint = readSafetensors(path);
  ASSERT_FALSE(static_cast<bool>(checkpoint));
  EXPECT_EQ(llvm::toString(checkpoint.takeError()),
            path + ": No such file or directory");
}

TEST(SafetensorsTest, WriterRejectsBadTensorsAndLeavesNothing) {
  TempDir dir("loom-checkpoint-test");
  std::string path = dir.file("bad.safetensors");
  struct Case {
    std::vector<CheckpointTensor> tensors;
    std::string error;
  } cases[] = {
      {{{"w", {2, 2}, {1, 2, 3}}},
       "tensor \"w\": shape [2, 2] has 4 elements but 3 values are given"},
      {{{"w", {-1}, {}}}, "tensor \"w\": invalid shape [-1]"},
      {{{"w", {1}, {1}}, {"w", {1}, {2}}},
       "tensor \"w\": the name appears twice"},
      {{{"__metadata__", {1}, {1}}},
       "tensor \"__metadata__\": the name is reserved for the metadata"},
      {{{"\xff", {1}, {1}}}, "tensor \"\xff\": the name is not valid UTF-8"},
  };
  for (const Case &c : cases) {
    llvm::Error error = writeSafetensors(path, c.tensors);
    ASSERT_TRUE(static_cast<bool>(error)) << c.error;
    EXPECT_EQ(llvm::toString(std::move(error)), path + ": " + c.error);
  }
  llvm::Error error = writeSafetensors(path, {}, {{"k", "\xc3"}});
  EXPECT_NE(llvm::toString(std::move(error)).find("not valid UTF-8"),
            std::string::npos);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(SafetensorsTest, WriteIsAtomic) {
  TempDir dir("loom-checkpoint-test");
  // A directory that does not exist: an error, and nothing is created.
  std::string missing = dir.file("no-such-dir/model.safetensors");
  llvm::Error error = writeSafetensors(missing, {{"w", {1}, {1.0f}}});
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            missing + ": No such file or directory");
  EXPECT_TRUE(dir.entries().empty());

  // Overwriting replaces the file; a failed write keeps the old one whole.
  std::string path = dir.file("model.safetensors");
  ASSERT_FALSE(static_cast<bool>(writeSafetensors(path, {{"w", {1}, {1.0f}}})));
  ASSERT_FALSE(
      static_cast<bool>(writeSafetensors(path, {{"w", {2}, {2.0f, 3.0f}}})));
  std::string before = readFile(path);
  llvm::Error failed = writeSafetensors(path, {{"w", {2}, {2.0f}}});
  EXPECT_TRUE(static_cast<bool>(failed));
  llvm::consumeError(std::move(failed));
  EXPECT_EQ(readFile(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});
  llvm::Expected<Checkpoint> read = readSafetensors(path);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->tensors.at(0).values, (std::vector<float>{2.0f, 3.0f}));
}

TEST(SafetensorsTest, ReadsAFileFromDisk) {
  TempDir dir("loom-checkpoint-test");
  std::string path = dir.file("hand.safetensors");
  writeFile(path, assemble(R"({"x": {"dtype": "F32", "shape": [1], )"
                           R"("data_offsets": [0, 4]}})",
                           f32(-1.25f)));
  llvm::Expected<Checkpoint> read = readSafetensors(path);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->tensors.at(0).values, (std::vector<float>{-1.25f}));
}

} // namespace
