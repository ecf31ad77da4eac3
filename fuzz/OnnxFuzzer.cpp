//===- OnnxFuzzer.cpp - Fuzzing the ONNX importer -------------------------===//
//
// Any bytes given to loom-import as MODEL.onnx are an imported @forward
// (with its summary and its family, when it is one) or a one-line error,
// never a crash: the protobuf parse, the initializers' bytes, every node's
// attributes, the folding of shape arithmetic and the pattern matchers.
//
// importOnnx reads a path (external data is named relative to the model),
// so each input is written to one file in a directory of this process.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/OnnxImporter.h"

#include "mlir/IR/MLIRContext.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

/// model.onnx in a directory made once per process.
const std::string &modelPath() {
  static const std::string path = [] {
    llvm::SmallString<128> dir;
    if (llvm::sys::fs::createUniqueDirectory("loom-fuzz-onnx", dir)) {
      llvm::errs() << "loom-fuzz-onnx: cannot make a temporary directory\n";
      std::abort();
    }
    llvm::sys::path::append(dir, "model.onnx");
    return std::string(dir);
  }();
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = modelPath();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      llvm::errs() << "loom-fuzz-onnx: " << path << ": " << ec.message()
                   << "\n";
      std::abort();
    }
    os.write(reinterpret_cast<const char *>(data), size);
  }
  // A context per input: the importer's types and attributes of one input
  // never make the next one pass or fail.
  mlir::MLIRContext context;
  loom::OnnxImportOptions options;
  llvm::Expected<loom::OnnxImport> import =
      loom::importOnnx(context, path, options);
  if (!import) {
    llvm::consumeError(import.takeError());
    return 0;
  }
  std::string summary;
  llvm::raw_string_ostream os(summary);
  loom::printOnnxSummary(os, path, *import);
  loom::printOnnxSummaryJSON(os, path, *import);
  llvm::Expected<loom::ModelConfig> config = loom::recognizeModel(*import);
  if (!config)
    llvm::consumeError(config.takeError());
  return 0;
}
