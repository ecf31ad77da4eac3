//===- InputFile.h - Reading input files within bounds ----------*- C++ -*-===//
//
// What every Loom tool reads goes through here, so that a path that is not
// a file of sensible size (/dev/zero, a pipe that never ends, a 40 GB
// "config") is an error naming the file instead of an out-of-memory abort,
// and (loom/Support/Json.h) JSON that nests too deeply is an error instead
// of a stack overflow.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_INPUTFILE_H
#define LOOM_SUPPORT_INPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace loom {

/// Limits of readInputFile.
constexpr uint64_t kMaxJsonFileBytes = uint64_t(256) << 20; ///< 256 MiB
/// Checkpoints are mapped, not copied; token files are read into memory.
constexpr uint64_t kMaxCheckpointFileBytes = uint64_t(1) << 40; ///< 1 TiB
constexpr uint64_t kMaxTokenFileBytes = uint64_t(8) << 30;      ///< 8 GiB
/// A file that is not a regular file (a pipe, a device) is read as a stream
/// and may hold at most this much, whatever the caller's limit.
constexpr uint64_t kMaxStreamBytes = uint64_t(1) << 30; ///< 1 GiB

/// The contents of `path` ("-": standard input), at most `maxBytes` bytes.
/// Regular files are mapped; anything else is read in chunks and refused
/// once it passes the limit. Errors start with `path`.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, uint64_t maxBytes,
              bool requiresNullTerminator = false);

} // namespace loom

#endif // LOOM_SUPPORT_INPUTFILE_H
