//===- loom-tokenize.cpp - Byte-level tokenization of text corpora --------===//
//
//   loom-tokenize INPUT.txt -o OUT.tokens [--width 2|4]
//   loom-tokenize --decode IN.tokens [-o OUT.txt]
//   loom-tokenize --info IN.tokens
//
// Encodes a text file with the byte-level tokenizer (ByteTokenizer.h) into
// a token file (TokenFile.h), decodes one back to text, or describes one.
// Errors are one line naming the file, exit 1 and leave no output file
// behind (outputs are written to a temporary file and renamed).
//
//===----------------------------------------------------------------------===//

#include "loom/Data/ByteTokenizer.h"
#include "loom/Data/TokenFile.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/InputFile.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

#include <algorithm>

using namespace llvm;

namespace {
cl::OptionCategory category("loom-tokenize options");

cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                               cl::desc("<input: text file, or token file "
                                        "with --decode/--info>"),
                               cl::cat(category));
cl::opt<std::string> outputPath(
    "o", cl::cat(category), cl::value_desc("file"),
    cl::desc("Output file: the token file when encoding (required), the "
             "text when decoding (default: stdout)"));
cl::opt<unsigned> width("width", cl::init(2), cl::cat(category),
                        cl::desc("When encoding: bytes per token id in the "
                                 "token file, 2 or 4 (default 2)"));
cl::opt<bool> decode("decode", cl::cat(category),
                     cl::desc("Decode a token file back to text; every id "
                              "must be a byte (below 256)"));
cl::opt<bool> info("info", cl::cat(category),
                   cl::desc("Print a token file's token count, bytes per "
                            "token and smallest and largest id"));

int fail(const Twine &message) {
  WithColor::error(errs(), "loom-tokenize") << message << "\n";
  return 1;
}

/// Reads a token file with its width, the error naming the file.
Expected<loom::TokenFile> loadTokenFile(StringRef path) {
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      loom::readInputFile(path, loom::kMaxTokenFileBytes);
  if (!buffer)
    return buffer.takeError();
  return loom::parseTokenFile((*buffer)->getBuffer(), path);
}

int encode() {
  if (outputPath.empty())
    return fail("encoding needs an output file: -o OUT.tokens");
  // Each byte becomes one token id of up to 4 bytes: a text of at most
  // 1 GiB keeps the token file within what readTokenFile takes.
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      loom::readInputFile(inputPath, loom::kMaxStreamBytes);
  if (!buffer)
    return fail(toString(buffer.takeError()));
  std::vector<uint32_t> ids = loom::encodeBytes((*buffer)->getBuffer());
  if (Error error = loom::writeTokenFile(outputPath, ids, width))
    return fail(toString(std::move(error)));
  return 0;
}

int decodeFile() {
  Expected<std::vector<uint32_t>> ids = loom::readTokenFile(inputPath);
  if (!ids)
    return fail(toString(ids.takeError()));
  if (Error error = loom::checkTokenIds(*ids, loom::kByteVocabSize))
    return fail(inputPath + ": " + toString(std::move(error)));
  std::string text = loom::decodeBytes(*ids);
  if (outputPath.empty() || outputPath == "-") {
    outs() << text;
    return 0;
  }
  // Loom's writer, as every other output of the tools: its errors name the
  // path as they do, unquoted.
  if (Error error = loom::writeFileAtomically(
          outputPath, [&](raw_ostream &os) { os << text; }))
    return fail(toString(std::move(error)));
  return 0;
}

int printInfo() {
  Expected<loom::TokenFile> file = loadTokenFile(inputPath);
  if (!file)
    return fail(toString(file.takeError()));
  outs() << "tokens:          " << file->ids.size() << "\n"
         << "bytes per token: " << file->bytesPerToken << "\n";
  if (file->ids.empty()) {
    outs() << "min id:          none\nmax id:          none\n";
    return 0;
  }
  auto [min, max] = std::minmax_element(file->ids.begin(), file->ids.end());
  outs() << "min id:          " << *min << "\n"
         << "max id:          " << *max << "\n";
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv, "Byte-level tokenization of text into Loom token files\n");
  if (decode && info)
    return fail("--decode and --info cannot be combined");
  if ((decode || info) && width.getNumOccurrences())
    return fail("--width only applies when encoding");
  if (info && !outputPath.empty())
    return fail("--info prints to stdout and takes no -o");
  if (width != 2 && width != 4)
    return fail("--width must be 2 or 4, not " + Twine(width));
  if (decode)
    return decodeFile();
  if (info)
    return printInfo();
  return encode();
}
