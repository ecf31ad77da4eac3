//===- ShardedCheckpoint.h - Checkpoints every rank writes a part of -*- C++
//-*-//
//
// A training checkpoint of a job whose state is sharded over ranks is a
// directory (docs/runtime.md, "Checkpoints"):
//
//   DIR/index.json                        where every shard is (rank 0)
//   DIR/rank-00000-of-00002.safetensors   the shards rank 0 owns
//   DIR/rank-00001-of-00002.safetensors   the shards rank 1 owns
//
// Every state tensor ("param:<name>", "m:<name>", "v:<name>") is cut into
// shards, boxes of the global tensor that tile it exactly. A shard is an
// F32 tensor named by its key in the file of the rank that owns it; the
// index says where each box sits:
//
//   {"format": "loom-checkpoint", "version": 2, "steps": 5,
//    "world_size": 2, "batch": [8, 32],
//    "files": {"rank-00000-of-00002.safetensors":
//                {"bytes": 1234, "xxh3": "0123456789abcdef"}, ...},
//    "tensors": {"param:transformer.wte.weight":
//                  {"dtype": "F32", "global_shape": [256, 64],
//                   "shards": [{"file": "rank-00000-of-00002.safetensors",
//                               "offsets": [0, 0], "shape": [256, 32]},
//                              ...]},
//                ...}}
//
// A reader finds the values of any box through the offsets, so a checkpoint
// written under one plan loads under any other (resharding on load). Every
// shard file says in its metadata which rank of how many wrote it
// ("loom.rank", "loom.world_size") and where its boxes sit ("loom.offsets":
// {key: offsets}), and the index records each file's size and XXH3 hash:
// files swapped, copied over each other, edited, or named by the wrong
// index entry are errors, never silently wrong state (version 1
// checkpoints, without hashes and offsets, get the rank checks only). A
// checkpoint is assembled in a temporary sibling directory and renamed into
// place whole: DIR is always either the old checkpoint or the new one.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CHECKPOINT_SHARDEDCHECKPOINT_H
#define LOOM_CHECKPOINT_SHARDEDCHECKPOINT_H

#include "loom/Checkpoint/Safetensors.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom {

/// One box of a tensor, stored under the tensor's key in `file`.
struct ShardLocation {
  std::string file; ///< a file name inside the checkpoint directory
  llvm::SmallVector<int64_t> offsets, shape;
};

struct ShardedTensor {
  std::string dtype = "F32"; ///< the only dtype written so far
  llvm::SmallVector<int64_t> globalShape;
  std::vector<ShardLocation> shards;
};

/// What the index records of one shard file, to recognize it.
struct ShardFileDigest {
  uint64_t bytes = 0;
  std::string xxh3; ///< 16 hex digits of the XXH3-64 of the whole file
  bool operator==(const ShardFileDigest &other) const {
    return bytes == other.bytes && xxh3 == other.xxh3;
  }
};

/// The digest of a file's contents.
ShardFileDigest digestShardFile(llvm::StringRef contents);

/// The contents of index.json.
struct CheckpointIndex {
  int64_t version = 2;
  /// Training steps done: the next step is steps + 1, which trains on batch
  /// `steps` of the token file and corrects the optimizer's bias for it.
  int64_t steps = 0;
  int64_t worldSize = 1;             ///< ranks of the job that wrote it
  int64_t batchRows = 0, seqLen = 0; ///< the batch of every step
  std::map<std::string, ShardedTensor> tensors; ///< by state key
  /// By file name; every file a shard names (version 2).
  std::map<std::string, ShardFileDigest> files;
};

/// "rank-00001-of-00004.safetensors".
std::string shardFileName(int64_t rank, int64_t worldSize);

/// index.json's text (keys sorted, so equal indexes print equal bytes).
std::string printCheckpointIndex(const CheckpointIndex &index);

/// Parses index.json's fields; `checkCheckpointIndex` checks the shards.
/// Errors start with `fileName`.
llvm::Expected<CheckpointIndex> parseCheckpointIndex(llvm::StringRef text,
                                                     llvm::StringRef fileName);

/// Checks that every tensor's shards lie inside it, do not overlap and
/// cover it, and that files are plain names inside the directory.
llvm::Error checkCheckpointIndex(const CheckpointIndex &index,
                                 llvm::StringRef fileName);

/// Adds the tensors and shards of `part` (what one rank wrote) to `index`;
/// a tensor both hold must have the same dtype and global shape.
llvm::Error mergeCheckpointIndex(CheckpointIndex &index,
                                 const CheckpointIndex &part);

/// Writes one rank's shards, `tensors` named by key with their boxes at
/// `offsets` (one list per tensor), as file shardFileName(rank, worldSize)
/// of `dir`; returns the file's digest for the index.
llvm::Expected<ShardFileDigest>
writeCheckpointShards(llvm::StringRef dir, int64_t rank, int64_t worldSize,
                      int64_t steps, llvm::ArrayRef<CheckpointTensor> tensors,
                      llvm::ArrayRef<llvm::SmallVector<int64_t>> offsets);

/// Checks that `dir` can become a checkpoint: its parent is a directory
/// where a directory can be created (one is, and removed), and `dir` is
/// absent, empty, or a checkpoint (which saving replaces). A job calls it
/// before its first step, so that the training is not lost to a bad path.
llvm::Error checkCheckpointTarget(llvm::StringRef dir);

/// Creates an empty temporary directory next to `dir` to assemble it in.
llvm::Expected<std::string> createCheckpointTempDir(llvm::StringRef dir);

/// Writes `index` into `tempDir` and renames `tempDir` to `dir`. An
/// existing checkpoint at `dir` is swapped out in one rename and removed
/// only then.
llvm::Error commitCheckpoint(llvm::StringRef tempDir, llvm::StringRef dir,
                             const CheckpointIndex &index);

/// Reads a checkpoint directory: the index when opened, each rank's file
/// the first time a box needs it.
class ShardedCheckpointReader {
public:
  /// Reads and checks `dir`/index.json.
  static llvm::Expected<ShardedCheckpointReader> open(llvm::StringRef dir);

  const CheckpointIndex &index() const { return idx; }
  std::string indexPath() const;

  /// Copies the box of tensor `key` at `offsets` with `shape` into `out`,
  /// row-major, product(shape) floats. The tensor's global shape must be
  /// `globalShape`, and hold the box.
  llvm::Error read(llvm::StringRef key, llvm::ArrayRef<int64_t> globalShape,
                   llvm::ArrayRef<int64_t> offsets,
                   llvm::ArrayRef<int64_t> shape, float *out);

private:
  /// A shard file, checked against the index and its own metadata.
  struct ShardFile {
    Checkpoint contents;
    /// "loom.offsets" of its metadata (absent in version 1 files).
    std::optional<std::map<std::string, llvm::SmallVector<int64_t>>> offsets;
  };
  llvm::Expected<const ShardFile *> file(llvm::StringRef name);

  std::string dir;
  CheckpointIndex idx;
  std::map<std::string, ShardFile> files;
};

/// Writes the parameters of checkpoint `dir` ("param:<name>") whole, under
/// their Hugging Face names, as one safetensors file: what --init takes.
llvm::Error consolidateCheckpoint(llvm::StringRef dir, llvm::StringRef outPath);

} // namespace loom

#endif // LOOM_CHECKPOINT_SHARDEDCHECKPOINT_H
