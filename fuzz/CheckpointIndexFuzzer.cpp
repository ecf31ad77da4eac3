//===- CheckpointIndexFuzzer.cpp - Fuzzing index.json of checkpoints ------===//
//
// Any bytes given as a checkpoint's index.json are an index whose shards
// tile every tensor, or an error, never a crash; an index that passes
// prints and parses back to itself.
//
//===----------------------------------------------------------------------===//

#include "loom/Checkpoint/ShardedCheckpoint.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<loom::CheckpointIndex> index =
      loom::parseCheckpointIndex(text, "index.json");
  if (!index) {
    llvm::consumeError(index.takeError());
    return 0;
  }
  if (llvm::Error error = loom::checkCheckpointIndex(*index, "index.json")) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  std::string printed = loom::printCheckpointIndex(*index);
  llvm::Expected<loom::CheckpointIndex> again =
      loom::parseCheckpointIndex(printed, "printed");
  if (!again || loom::printCheckpointIndex(*again) != printed)
    std::abort(); // What the writer prints, the reader must take back.
  return 0;
}
