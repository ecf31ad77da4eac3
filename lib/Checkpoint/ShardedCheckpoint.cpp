//===- ShardedCheckpoint.cpp - Checkpoints every rank writes a part of ----===//
//
// The index is checked as a whole when it is read (every tensor tiled
// exactly by its shards), so a box read later is always covered, and the
// shard files are checked against the index as they are opened (the same
// step, the shapes the index gives).
//
//===----------------------------------------------------------------------===//

#include "loom/Checkpoint/ShardedCheckpoint.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/InputFile.h"
#include "loom/Support/Json.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace llvm;

namespace loom {
namespace {

constexpr StringLiteral kFormat = "loom-checkpoint";
/// Version 2 adds each file's digest to the index and each box's offsets to
/// its file; version 1 checkpoints still load.
constexpr int64_t kVersion = 2;
constexpr StringLiteral kIndexName = "index.json";

Error fileError(StringRef fileName, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), fileName + ": " + message);
}

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(shape))
    text += (i ? ", " : "") + std::to_string(dim);
  return text + "]";
}

std::string tensorWhere(StringRef key) {
  return ("tensor '" + key + "'").str();
}

/// `dir` without trailing separators ("ckpt/" and "ckpt" are one target).
StringRef withoutTrailingSlash(StringRef dir) {
  StringRef trimmed = dir.rtrim('/');
  return trimmed.empty() ? dir : trimmed;
}

std::string joinPath(StringRef dir, StringRef name) {
  SmallString<256> path(dir);
  sys::path::append(path, name);
  return path.str().str();
}

json::Array toJSON(ArrayRef<int64_t> values) {
  json::Array array;
  for (int64_t value : values)
    array.push_back(value);
  return array;
}

/// Product of `shape`, or nullopt when it overflows.
std::optional<int64_t> volume(ArrayRef<int64_t> shape) {
  int64_t product = 1;
  for (int64_t dim : shape) {
    std::optional<int64_t> next = checkedMul<int64_t>(product, dim);
    if (!next)
      return std::nullopt;
    product = *next;
  }
  return product;
}

bool overlaps(const ShardLocation &a, const ShardLocation &b) {
  for (size_t d = 0; d < a.offsets.size(); ++d)
    if (a.offsets[d] >= b.offsets[d] + b.shape[d] ||
        b.offsets[d] >= a.offsets[d] + a.shape[d])
      return false;
  return true;
}

/// Copies the part of box `src` (values `from`) that lies in box `dst`
/// (values `to`); both are row-major at their shapes, at offsets in one
/// global tensor.
void copyOverlap(const float *from, ArrayRef<int64_t> srcOffsets,
                 ArrayRef<int64_t> srcShape, float *to,
                 ArrayRef<int64_t> dstOffsets, ArrayRef<int64_t> dstShape) {
  size_t rank = srcShape.size();
  if (rank == 0) {
    *to = *from;
    return;
  }
  SmallVector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(srcOffsets[d], dstOffsets[d]);
    hi[d] = std::min(srcOffsets[d] + srcShape[d], dstOffsets[d] + dstShape[d]);
    if (lo[d] >= hi[d])
      return;
  }
  // One contiguous run per index of the leading dimensions.
  SmallVector<int64_t> srcStride(rank, 1), dstStride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    srcStride[d - 1] = srcStride[d] * srcShape[d];
    dstStride[d - 1] = dstStride[d] * dstShape[d];
  }
  int64_t run = hi[rank - 1] - lo[rank - 1];
  SmallVector<int64_t> index(lo);
  while (true) {
    int64_t srcAt = 0, dstAt = 0;
    for (size_t d = 0; d < rank; ++d) {
      srcAt += (index[d] - srcOffsets[d]) * srcStride[d];
      dstAt += (index[d] - dstOffsets[d]) * dstStride[d];
    }
    std::memcpy(to + dstAt, from + srcAt, run * sizeof(float));
    int64_t d = int64_t(rank) - 2;
    for (; d >= 0; --d) {
      if (++index[d] < hi[d])
        break;
      index[d] = lo[d];
    }
    if (d < 0)
      return;
  }
}

/// Reads a JSON array of integers (each at least `minimum`).
Expected<SmallVector<int64_t>> intArray(const json::Object &object,
                                        StringRef field, int64_t minimum,
                                        const Twine &where) {
  const json::Array *array = object.getArray(field);
  if (!array)
    return createStringError(where + ": \"" + field +
                             "\" is missing or not an array");
  SmallVector<int64_t> values;
  for (const json::Value &value : *array) {
    std::optional<int64_t> number = value.getAsInteger();
    if (!number || *number < minimum)
      return createStringError(where + ": \"" + field +
                               "\" must hold integers of at least " +
                               Twine(minimum));
    values.push_back(*number);
  }
  return values;
}

Expected<ShardedTensor> parseTensor(const json::Value &value,
                                    const Twine &where) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return createStringError(where + ": not a JSON object");
  ShardedTensor tensor;
  std::optional<StringRef> dtype = object->getString("dtype");
  if (!dtype)
    return createStringError(where + ": \"dtype\" is missing");
  tensor.dtype = dtype->str();
  auto global = intArray(*object, "global_shape", 0, where);
  if (!global)
    return global.takeError();
  tensor.globalShape = std::move(*global);
  const json::Array *shards = object->getArray("shards");
  if (!shards)
    return createStringError(where + ": \"shards\" is missing or not an array");
  for (auto [i, shardValue] : llvm::enumerate(*shards)) {
    std::string shardWhere = (where + ": shard " + Twine(i)).str();
    const json::Object *shard = shardValue.getAsObject();
    if (!shard)
      return createStringError(shardWhere + ": not a JSON object");
    ShardLocation location;
    std::optional<StringRef> file = shard->getString("file");
    if (!file)
      return createStringError(shardWhere + ": \"file\" is missing");
    location.file = file->str();
    auto offsets = intArray(*shard, "offsets", 0, shardWhere);
    if (!offsets)
      return offsets.takeError();
    auto shape = intArray(*shard, "shape", 0, shardWhere);
    if (!shape)
      return shape.takeError();
    location.offsets = std::move(*offsets);
    location.shape = std::move(*shape);
    tensor.shards.push_back(std::move(location));
  }
  return tensor;
}

} // namespace

std::string shardFileName(int64_t rank, int64_t worldSize) {
  return formatv("rank-{0:d5}-of-{1:d5}.safetensors", rank, worldSize).str();
}

std::string printCheckpointIndex(const CheckpointIndex &index) {
  // One line per tensor: the file stays readable (and diffable) for models
  // with thousands of shards.
  std::string text;
  raw_string_ostream os(text);
  os << "{\n  \"format\": " << json::Value(kFormat)
     << ",\n  \"version\": " << index.version
     << ",\n  \"steps\": " << index.steps
     << ",\n  \"world_size\": " << index.worldSize << ",\n  \"batch\": "
     << json::Value(json::Array{index.batchRows, index.seqLen});
  if (index.version >= 2) {
    os << ",\n  \"files\": {";
    for (auto [i, entry] : llvm::enumerate(index.files))
      os << (i ? ",\n    " : "\n    ") << json::Value(entry.first) << ": "
         << json::Value(json::Object{{"bytes", entry.second.bytes},
                                     {"xxh3", entry.second.xxh3}});
    os << (index.files.empty() ? "}" : "\n  }");
  }
  os << ",\n  \"tensors\": {";
  for (auto [i, entry] : llvm::enumerate(index.tensors)) {
    const auto &[key, tensor] = entry;
    json::Array shards;
    for (const ShardLocation &shard : tensor.shards)
      shards.push_back(json::Object{{"file", shard.file},
                                    {"offsets", toJSON(shard.offsets)},
                                    {"shape", toJSON(shard.shape)}});
    os << (i ? ",\n    " : "\n    ") << json::Value(key) << ": "
       << json::Value(json::Object{{"dtype", tensor.dtype},
                                   {"global_shape", toJSON(tensor.globalShape)},
                                   {"shards", std::move(shards)}});
  }
  os << (index.tensors.empty() ? "}\n}\n" : "\n  }\n}\n");
  return text;
}

Expected<CheckpointIndex> parseCheckpointIndex(StringRef text,
                                               StringRef fileName) {
  Expected<json::Value> root = parseJson(text);
  if (!root)
    return fileError(fileName, "not valid JSON: " + toString(root.takeError()));
  const json::Object *object = root->getAsObject();
  if (!object || object->getString("format") != kFormat)
    return fileError(fileName, "not a Loom checkpoint index (\"format\" is "
                               "not \"loom-checkpoint\")");
  std::optional<int64_t> version = object->getInteger("version");
  if (!version || *version < 1 || *version > kVersion)
    return fileError(fileName, "unsupported \"version\" (this loom-run reads "
                               "versions 1 to " +
                                   Twine(kVersion) + ")");
  CheckpointIndex index;
  index.version = *version;
  if (index.version >= 2) {
    const json::Object *files = object->getObject("files");
    if (!files)
      return fileError(fileName, "\"files\" is missing or not an object");
    for (const auto &[name, value] : *files) {
      const json::Object *entry = value.getAsObject();
      const json::Value *size = entry ? entry->get("bytes") : nullptr;
      std::optional<uint64_t> bytes = size ? size->getAsUINT64() : std::nullopt;
      std::optional<StringRef> hash =
          entry ? entry->getString("xxh3") : std::nullopt;
      if (!bytes || !hash || hash->size() != 16 ||
          hash->find_first_not_of("0123456789abcdef") != StringRef::npos)
        return fileError(fileName, "file '" + name +
                                       "': needs \"bytes\" and \"xxh3\" "
                                       "(16 hex digits)");
      index.files[name.str()] = {*bytes, hash->str()};
    }
  }
  std::optional<int64_t> steps = object->getInteger("steps");
  std::optional<int64_t> worldSize = object->getInteger("world_size");
  if (!steps || *steps < 0)
    return fileError(fileName, "\"steps\" must be a non-negative integer");
  if (!worldSize || *worldSize < 1)
    return fileError(fileName, "\"world_size\" must be a positive integer");
  index.steps = *steps;
  index.worldSize = *worldSize;
  auto batch = intArray(*object, "batch", 1, fileName);
  if (!batch)
    return batch.takeError();
  if (batch->size() != 2)
    return fileError(fileName, "\"batch\" must be [rows, sequence length]");
  index.batchRows = (*batch)[0];
  index.seqLen = (*batch)[1];
  const json::Object *tensors = object->getObject("tensors");
  if (!tensors)
    return fileError(fileName, "\"tensors\" is missing or not an object");
  for (const auto &[key, value] : *tensors) {
    auto tensor = parseTensor(value, fileName + ": " + tensorWhere(key));
    if (!tensor)
      return tensor.takeError();
    index.tensors[key.str()] = std::move(*tensor);
  }
  return index;
}

Error checkCheckpointIndex(const CheckpointIndex &index, StringRef fileName) {
  for (const auto &[key, tensor] : index.tensors) {
    std::string where = (fileName + ": " + tensorWhere(key)).str();
    if (tensor.dtype != "F32")
      return createStringError(where + ": dtype \"" + tensor.dtype +
                               "\" is not supported (F32 only)");
    std::optional<int64_t> total = volume(tensor.globalShape);
    if (!total)
      return createStringError(where + ": global shape " +
                               formatShape(tensor.globalShape) +
                               " is too large");
    int64_t covered = 0;
    for (auto [i, shard] : llvm::enumerate(tensor.shards)) {
      std::string shardWhere = formatv("{0}: shard {1} (offsets {2}, shape "
                                       "{3} in {4})",
                                       where, i, formatShape(shard.offsets),
                                       formatShape(shard.shape), shard.file);
      StringRef file = shard.file;
      if (file.empty() || file == "." || file == ".." ||
          file.find_first_of("/\\") != StringRef::npos)
        return createStringError(shardWhere +
                                 ": the file must be a name inside the "
                                 "checkpoint directory");
      if (index.version >= 2 && !index.files.count(shard.file))
        return createStringError(shardWhere + ": the file is not in \"files\"");
      if (shard.offsets.size() != tensor.globalShape.size() ||
          shard.shape.size() != tensor.globalShape.size())
        return createStringError(shardWhere +
                                 ": rank differs from the "
                                 "global shape " +
                                 formatShape(tensor.globalShape));
      for (size_t d = 0; d < shard.shape.size(); ++d)
        if (shard.offsets[d] > tensor.globalShape[d] ||
            shard.shape[d] > tensor.globalShape[d] - shard.offsets[d])
          return createStringError(shardWhere +
                                   ": lies outside the global "
                                   "shape " +
                                   formatShape(tensor.globalShape));
      for (size_t j = 0; j < i; ++j)
        if (*volume(shard.shape) && *volume(tensor.shards[j].shape) &&
            overlaps(shard, tensor.shards[j]))
          return createStringError(shardWhere + ": overlaps shard " + Twine(j));
      covered += *volume(shard.shape);
    }
    if (covered != *total)
      return createStringError(
          formatv("{0}: the shards hold {1} of the {2} values of global "
                  "shape {3}",
                  where, covered, *total, formatShape(tensor.globalShape)));
  }
  return Error::success();
}

Error mergeCheckpointIndex(CheckpointIndex &index,
                           const CheckpointIndex &part) {
  for (const auto &[name, digest] : part.files)
    if (!index.files.try_emplace(name, digest).second &&
        !(index.files[name] == digest))
      return createStringError("file '" + name +
                               "' is listed twice with different digests");
  for (const auto &[key, tensor] : part.tensors) {
    auto [it, inserted] = index.tensors.try_emplace(key, tensor);
    if (inserted)
      continue;
    ShardedTensor &into = it->second;
    if (into.dtype != tensor.dtype || into.globalShape != tensor.globalShape)
      return createStringError(tensorWhere(key) + " is " + tensor.dtype + " " +
                               formatShape(tensor.globalShape) +
                               " in one rank's state and " + into.dtype + " " +
                               formatShape(into.globalShape) + " in another's");
    llvm::append_range(into.shards, tensor.shards);
  }
  return Error::success();
}

ShardFileDigest digestShardFile(StringRef contents) {
  return {
      contents.size(),
      formatv("{0:x-16}", xxh3_64bits(arrayRefFromStringRef(contents))).str()};
}

Expected<ShardFileDigest>
writeCheckpointShards(StringRef dir, int64_t rank, int64_t worldSize,
                      int64_t steps, ArrayRef<CheckpointTensor> tensors,
                      ArrayRef<SmallVector<int64_t>> offsets) {
  json::Object boxes;
  for (auto [tensor, at] : llvm::zip_equal(tensors, offsets))
    boxes[tensor.name] = toJSON(at);
  std::string path = joinPath(dir, shardFileName(rank, worldSize));
  if (Error error = writeSafetensors(
          path, tensors,
          {{"loom.steps", std::to_string(steps)},
           {"loom.rank", std::to_string(rank)},
           {"loom.world_size", std::to_string(worldSize)},
           {"loom.offsets", formatv("{0}", json::Value(std::move(boxes)))}}))
    return std::move(error);
  // Read back: the digest is of what reached the file.
  Expected<std::unique_ptr<MemoryBuffer>> written =
      readInputFile(path, kMaxCheckpointFileBytes);
  if (!written)
    return written.takeError();
  return digestShardFile((*written)->getBuffer());
}

namespace {
/// checkCheckpointTarget without the probe: the parent exists, and `dir`
/// is absent, empty or a checkpoint.
Error checkReplaceable(StringRef dir) {
  StringRef parent = sys::path::parent_path(dir);
  if (parent.empty())
    parent = ".";
  if (!sys::fs::is_directory(parent))
    return fileError(dir, "the directory '" + parent + "' does not exist");
  if (!sys::fs::exists(dir))
    return Error::success();
  if (!sys::fs::is_directory(dir))
    return fileError(dir, "exists and is not a directory; a checkpoint is a "
                          "directory");
  if (sys::fs::exists(joinPath(dir, kIndexName)))
    return Error::success();
  std::error_code error;
  sys::fs::directory_iterator it(dir, error), end;
  if (error)
    return fileError(dir, error.message());
  if (it != end)
    return fileError(dir, "exists and is not a Loom checkpoint (no "
                          "index.json); not replacing it");
  return Error::success();
}
} // namespace

Error checkCheckpointTarget(StringRef path) {
  StringRef dir = withoutTrailingSlash(path);
  if (Error error = checkReplaceable(dir))
    return error;
  // A save assembles the checkpoint in a directory beside `dir`: make one
  // now, so that a read-only parent fails before training, not after.
  Expected<std::string> probe = createTempDirectoryBeside(dir);
  if (!probe)
    return probe.takeError();
  (void)sys::fs::remove(*probe);
  return Error::success();
}

Expected<std::string> createCheckpointTempDir(StringRef path) {
  return createTempDirectoryBeside(withoutTrailingSlash(path));
}

Error commitCheckpoint(StringRef tempDir, StringRef path,
                       const CheckpointIndex &index) {
  StringRef dir = withoutTrailingSlash(path);
  if (Error error = writeFileAtomically(
          joinPath(tempDir, kIndexName),
          [&](raw_ostream &os) { os << printCheckpointIndex(index); }))
    return error;
  // Checked again: the directory may have changed since the job started.
  if (Error error = checkReplaceable(dir))
    return error;
  return replaceDirectory(tempDir, dir);
}

Expected<ShardedCheckpointReader> ShardedCheckpointReader::open(StringRef dir) {
  ShardedCheckpointReader reader;
  reader.dir = withoutTrailingSlash(dir).str();
  std::string path = reader.indexPath();
  if (sys::fs::exists(reader.dir) && !sys::fs::is_directory(reader.dir))
    return fileError(reader.dir, "is not a directory; a checkpoint is a "
                                 "directory (loom-run --save DIR)");
  if (!sys::fs::is_directory(reader.dir))
    return fileError(reader.dir, "no such checkpoint directory");
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      readInputFile(path, kMaxJsonFileBytes);
  if (!buffer)
    return buffer.takeError();
  Expected<CheckpointIndex> index =
      parseCheckpointIndex((*buffer)->getBuffer(), path);
  if (!index)
    return index.takeError();
  if (Error error = checkCheckpointIndex(*index, path))
    return std::move(error);
  reader.idx = std::move(*index);
  return reader;
}

std::string ShardedCheckpointReader::indexPath() const {
  return joinPath(dir, kIndexName);
}

Expected<const ShardedCheckpointReader::ShardFile *>
ShardedCheckpointReader::file(StringRef name) {
  auto it = files.find(name.str());
  if (it != files.end())
    return &it->second;
  std::string path = joinPath(dir, name);
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      readInputFile(path, kMaxCheckpointFileBytes);
  if (!buffer)
    return buffer.takeError();
  Expected<Checkpoint> ckpt = parseSafetensors((*buffer)->getBuffer(), path);
  if (!ckpt)
    return ckpt.takeError();
  auto steps = ckpt->metadata.find("loom.steps");
  if (steps == ckpt->metadata.end() ||
      steps->second != std::to_string(idx.steps))
    return fileError(path, "was not written at step " + Twine(idx.steps) +
                               " like " + indexPath() +
                               " (\"loom.steps\" in its metadata is " +
                               (steps == ckpt->metadata.end()
                                    ? std::string("missing")
                                    : "\"" + steps->second + "\"") +
                               "): the directory mixes two checkpoints");
  // The rank and world size its metadata names must be the file's own.
  auto meta = [&](StringRef key) -> std::string {
    auto found = ckpt->metadata.find(key.str());
    return found == ckpt->metadata.end() ? "" : found->second;
  };
  std::string rank = meta("loom.rank"), world = meta("loom.world_size");
  int64_t rankNumber = -1, worldNumber = -1;
  if (StringRef(rank).getAsInteger(10, rankNumber) ||
      StringRef(world).getAsInteger(10, worldNumber) ||
      worldNumber != idx.worldSize ||
      shardFileName(rankNumber, worldNumber) != name)
    return fileError(
        path, formatv("its metadata (\"loom.rank\" {0}, \"loom.world_size\" "
                      "{1}) does not make it {2} of a {3}-rank checkpoint: "
                      "the shard files are mixed up (swapped, copied or "
                      "renamed)",
                      rank.empty() ? "missing" : rank,
                      world.empty() ? "missing" : world, name, idx.worldSize));
  std::string boxText = meta("loom.offsets");
  ShardFile shard{std::move(*ckpt), std::nullopt};
  if (idx.version >= 2) {
    ShardFileDigest digest = digestShardFile((*buffer)->getBuffer());
    const ShardFileDigest &expected = idx.files.at(name.str());
    if (!(digest == expected))
      return fileError(path, formatv("holds {0} bytes of XXH3 {1}, not the "
                                     "{2} bytes of XXH3 {3} that {4} "
                                     "recorded: the file was changed or "
                                     "replaced after the save",
                                     digest.bytes, digest.xxh3, expected.bytes,
                                     expected.xxh3, indexPath()));
    Expected<json::Value> boxes = parseJson(boxText);
    const json::Object *object = boxes ? boxes->getAsObject() : nullptr;
    if (!object) {
      if (!boxes)
        consumeError(boxes.takeError());
      return fileError(path, "\"loom.offsets\" in its metadata is missing "
                             "or not a JSON object");
    }
    shard.offsets.emplace();
    for (const auto &[key, value] : *object) {
      Expected<SmallVector<int64_t>> at =
          intArray(*object, key, 0, path + ": \"loom.offsets\"");
      if (!at)
        return at.takeError();
      (*shard.offsets)[key.str()] = std::move(*at);
    }
  }
  return &files.emplace(name.str(), std::move(shard)).first->second;
}

Error ShardedCheckpointReader::read(StringRef key,
                                    ArrayRef<int64_t> globalShape,
                                    ArrayRef<int64_t> offsets,
                                    ArrayRef<int64_t> shape, float *out) {
  auto it = idx.tensors.find(key.str());
  if (it == idx.tensors.end())
    return fileError(indexPath(), "no " + tensorWhere(key));
  const ShardedTensor &tensor = it->second;
  if (ArrayRef<int64_t>(tensor.globalShape) != globalShape)
    return fileError(indexPath(), tensorWhere(key) + " has global shape " +
                                      formatShape(tensor.globalShape) +
                                      ", the model expects " +
                                      formatShape(globalShape));
  bool inside = offsets.size() == globalShape.size() &&
                shape.size() == globalShape.size();
  for (size_t d = 0; inside && d < shape.size(); ++d)
    inside = offsets[d] >= 0 && shape[d] >= 0 &&
             offsets[d] + shape[d] <= globalShape[d];
  if (!inside)
    return fileError(indexPath(), "the box at " + formatShape(offsets) +
                                      " of shape " + formatShape(shape) +
                                      " lies outside " + tensorWhere(key));
  ShardLocation box{"", SmallVector<int64_t>(offsets),
                    SmallVector<int64_t>(shape)};
  for (const ShardLocation &shard : tensor.shards) {
    if (!*volume(shard.shape) || !*volume(box.shape) || !overlaps(shard, box))
      continue;
    Expected<const ShardFile *> ckpt = file(shard.file);
    if (!ckpt)
      return ckpt.takeError();
    std::string path = joinPath(dir, shard.file);
    const CheckpointTensor *values = (*ckpt)->contents.find(key);
    if (!values)
      return fileError(path, "no " + tensorWhere(key) + ", which " +
                                 indexPath() + " puts there");
    if (const auto &boxes = (*ckpt)->offsets) {
      auto at = boxes->find(key.str());
      if (at == boxes->end() ||
          ArrayRef<int64_t>(at->second) != ArrayRef<int64_t>(shard.offsets))
        return fileError(path,
                         tensorWhere(key) + " holds the box at " +
                             (at == boxes->end() ? std::string("?")
                                                 : formatShape(at->second)) +
                             ", " + indexPath() + " says " +
                             formatShape(shard.offsets) +
                             ": the index names the wrong file");
    }
    if (values->dtype != "F32" ||
        ArrayRef<int64_t>(values->shape) != ArrayRef<int64_t>(shard.shape))
      return fileError(path, tensorWhere(key) + " is " + values->dtype + " " +
                                 formatShape(values->shape) + ", " +
                                 indexPath() + " says F32 " +
                                 formatShape(shard.shape));
    copyOverlap(values->values.data(), shard.offsets, shard.shape, out, offsets,
                shape);
  }
  return Error::success();
}

Error consolidateCheckpoint(StringRef dir, StringRef outPath) {
  Expected<ShardedCheckpointReader> reader = ShardedCheckpointReader::open(dir);
  if (!reader)
    return reader.takeError();
  std::vector<CheckpointTensor> params;
  for (const auto &[key, tensor] : reader->index().tensors) {
    StringRef name = key;
    if (!name.consume_front("param:"))
      continue;
    CheckpointTensor &param = params.emplace_back();
    param.name = name.str();
    param.shape = tensor.globalShape;
    param.values.resize(*volume(tensor.globalShape));
    SmallVector<int64_t> origin(tensor.globalShape.size(), 0);
    if (Error error = reader->read(key, tensor.globalShape, origin,
                                   tensor.globalShape, param.values.data()))
      return error;
  }
  if (params.empty())
    return fileError(reader->indexPath(), "the checkpoint holds no "
                                          "parameters (\"param:<name>\")");
  return writeSafetensors(
      outPath, params,
      {{"format", "pt"},
       {"loom.steps", std::to_string(reader->index().steps)}});
}

} // namespace loom
