//===- SafetensorsFuzzer.cpp - Fuzzing the safetensors reader -------------===//
//
// Any bytes given to parseSafetensors (loom-run --init, checkpoint shards,
// loom-checkpoint) are a checkpoint or an error, never a crash: the header
// size, the JSON header and every tensor's offsets are checked before any
// value is read.
//
//===----------------------------------------------------------------------===//

#include "loom/Checkpoint/Safetensors.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef contents(reinterpret_cast<const char *>(data), size);
  llvm::Expected<loom::Checkpoint> checkpoint =
      loom::parseSafetensors(contents, "model.safetensors");
  if (!checkpoint)
    llvm::consumeError(checkpoint.takeError());
  return 0;
}
