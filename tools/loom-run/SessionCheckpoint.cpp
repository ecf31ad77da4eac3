//===- SessionCheckpoint.cpp - Sharded checkpoints of a job's sessions ----===//
//
// A save is one round trip to rank 0: rank 0 makes the temporary directory
// and broadcasts its name; every rank writes its file there and sends rank
// 0 either the shards it wrote (as an index fragment) or its error; rank 0
// merges the fragments, checks that they tile every tensor, writes the
// index, renames the directory into place (or removes it when a rank
// failed) and broadcasts the outcome. No rank waits on another that could
// not reach the collective, so a failed write never hangs the job.
//
//===----------------------------------------------------------------------===//

#include "SessionCheckpoint.h"

#include "loom/Checkpoint/ShardedCheckpoint.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <mpi.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

using namespace llvm;

namespace loom::run {
namespace {

/// Rank 0's `text` on every rank.
void broadcastString(std::string &text) {
  int64_t size = static_cast<int64_t>(text.size());
  MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  text.resize(size);
  MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD);
}

/// Every rank's `text` on rank 0 (in rank order; empty elsewhere).
std::vector<std::string> gatherStrings(const std::string &text,
                                       const JobShape &job) {
  int size = static_cast<int>(text.size());
  std::vector<int> sizes(job.worldSize), displacements(job.worldSize);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (job.rank == 0) {
    int total = 0;
    for (int r = 0; r < job.worldSize; ++r) {
      displacements[r] = total;
      total += sizes[r];
    }
    all.resize(total);
  }
  MPI_Gatherv(text.data(), size, MPI_CHAR, all.data(), sizes.data(),
              displacements.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> texts;
  if (job.rank == 0)
    for (int r = 0; r < job.worldSize; ++r)
      texts.push_back(all.substr(displacements[r], sizes[r]));
  return texts;
}

SmallVector<int64_t> dims(const int64_t *data, int32_t rank) {
  return SmallVector<int64_t>(data, data + rank);
}

/// Writes the shards this rank owns into `tempDir`; returns what rank 0
/// merges: 'K' and the index fragment, or 'E' and the error.
std::string writeOwnShards(RankSession &session, const JobShape &job,
                           StringRef tempDir, int64_t steps) {
  CheckpointIndex part;
  part.steps = steps;
  part.worldSize = job.worldSize;
  part.batchRows = job.batchRows;
  part.seqLen = job.seqLen;
  std::vector<CheckpointTensor> tensors;
  std::vector<SmallVector<int64_t>> offsets;
  std::string file = shardFileName(job.rank, job.worldSize);
  for (int32_t i = 0, e = session.stateCount(); i < e; ++i) {
    loom_state_info info = session.stateInfo(i);
    if (!info.owner)
      continue;
    if (info.dtype != LOOM_DTYPE_F32)
      return formatv("Erank {0}: state '{1}' is not f32; checkpoints hold "
                     "f32 state only",
                     job.rank, info.key);
    CheckpointTensor &tensor = tensors.emplace_back();
    tensor.name = info.key;
    tensor.shape = dims(info.shape, info.rank);
    int64_t count = 1;
    for (int64_t dim : tensor.shape)
      count *= dim;
    tensor.values.resize(count);
    if (std::string error = session.getState(i, tensor.values.data());
        !error.empty())
      return formatv("Erank {0}: reading state '{1}': {2}", job.rank, info.key,
                     error);
    ShardedTensor &sharded = part.tensors[info.key];
    sharded.globalShape = dims(info.global_shape, info.rank);
    sharded.shards.push_back(
        {file, dims(info.offsets, info.rank), tensor.shape});
    offsets.push_back(dims(info.offsets, info.rank));
  }
  Expected<ShardFileDigest> digest = writeCheckpointShards(
      tempDir, job.rank, job.worldSize, steps, tensors, offsets);
  if (!digest)
    return formatv("Erank {0}: {1}", job.rank, toString(digest.takeError()));
  part.files[file] = *digest;
  return "K" + printCheckpointIndex(part);
}

/// On rank 0: the index of every rank's fragment, or what failed (a rank's
/// own error as it sent it, rank 0's prefixed with its rank).
Expected<CheckpointIndex> mergeFragments(ArrayRef<std::string> replies,
                                         const JobShape &job, StringRef dir,
                                         int64_t steps) {
  CheckpointIndex index;
  index.steps = steps;
  index.worldSize = job.worldSize;
  index.batchRows = job.batchRows;
  index.seqLen = job.seqLen;
  for (auto [rank, reply] : llvm::enumerate(replies)) {
    StringRef text(reply);
    if (text.consume_front("E"))
      return createStringError(text);
    text.consume_front("K");
    Expected<CheckpointIndex> part =
        parseCheckpointIndex(text, formatv("rank {0}'s shards", rank).str());
    if (!part)
      return createStringError("rank 0: " + toString(part.takeError()));
    if (Error error = mergeCheckpointIndex(index, *part))
      return createStringError("rank 0: " + dir + ": " +
                               toString(std::move(error)));
  }
  // Every rank owns disjoint shards that tile each tensor; a plan that
  // breaks that would write a checkpoint nobody can read.
  if (Error error = checkCheckpointIndex(index, (dir + "/index.json").str()))
    return createStringError("rank 0: " + toString(std::move(error)));
  return index;
}

} // namespace

std::string saveCheckpoint(RankSession &session, const JobShape &job,
                           StringRef dir, int64_t steps) {
  // "K" and the temporary directory, or "E" and rank 0's error.
  std::string temp;
  if (job.rank == 0) {
    Expected<std::string> created = createCheckpointTempDir(dir);
    temp =
        created ? "K" + *created : "Erank 0: " + toString(created.takeError());
  }
  broadcastString(temp);
  if (StringRef(temp).consume_front("E"))
    return temp.substr(1);
  temp.erase(0, 1);

  std::string reply = writeOwnShards(session, job, temp, steps);
  std::vector<std::string> replies = gatherStrings(reply, job);
  std::string outcome;
  if (job.rank == 0) {
    Expected<CheckpointIndex> index = mergeFragments(replies, job, dir, steps);
    if (!index)
      outcome = toString(index.takeError());
    else if (Error error = commitCheckpoint(temp, dir, *index))
      outcome = "rank 0: " + toString(std::move(error));
    if (!outcome.empty())
      (void)sys::fs::remove_directories(temp);
  }
  broadcastString(outcome);
  return outcome;
}

Expected<int64_t> resumeCheckpoint(RankSession &session, const JobShape &job,
                                   StringRef dir) {
  Expected<ShardedCheckpointReader> reader = ShardedCheckpointReader::open(dir);
  if (!reader)
    return reader.takeError();
  const CheckpointIndex &index = reader->index();
  std::string indexPath = reader->indexPath();
  // Step s trains on batch s - 1: with another batch shape the next step
  // would not read the tokens that follow the checkpoint's.
  if (index.batchRows != job.batchRows || index.seqLen != job.seqLen)
    return createStringError(formatv(
        "{0}: the checkpoint was trained on batches of {1} x {2} tokens, "
        "this artifact takes {3} x {4}; the data would not continue where it "
        "stopped (to start afresh from its parameters: loom-checkpoint "
        "consolidate, then --init)",
        indexPath, index.batchRows, index.seqLen, job.batchRows, job.seqLen));
  for (int32_t i = 0, e = session.stateCount(); i < e; ++i) {
    loom_state_info info = session.stateInfo(i);
    if (!index.tensors.count(info.key))
      return createStringError(indexPath + ": no tensor '" + info.key +
                               "', which the artifact's state needs");
    if (info.dtype != LOOM_DTYPE_F32)
      return createStringError(std::string("state '") + info.key +
                               "' is not f32; checkpoints hold f32 state only");
    SmallVector<int64_t> shape = dims(info.shape, info.rank);
    std::vector<float> local(std::accumulate(
        shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>()));
    if (Error error =
            reader->read(info.key, dims(info.global_shape, info.rank),
                         dims(info.offsets, info.rank), shape, local.data()))
      return std::move(error);
    if (std::string error = session.setState(i, local.data()); !error.empty())
      return createStringError(std::string("state '") + info.key +
                               "': " + error);
  }
  return index.steps;
}

} // namespace loom::run
