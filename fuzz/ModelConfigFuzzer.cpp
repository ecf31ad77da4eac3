//===- ModelConfigFuzzer.cpp - Fuzzing the Hugging Face config reader -----===//
//
// Any bytes given to parseModelConfig (loom-import and loom-plan read
// config.json with it) are a config or an error, never a crash.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelConfig.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<loom::ModelConfig> config =
      loom::parseModelConfig(text, "config.json");
  if (!config)
    llvm::consumeError(config.takeError());
  return 0;
}
