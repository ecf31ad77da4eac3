//===- AtomicFile.h - Output files that are never half written --*- C++ -*-===//
//
// Every file a Loom tool writes goes through here: the content is written to
// a temporary file next to the target and renamed over it only when all of
// it was written, so an error (a full disk, a bad path) leaves either the
// old file or nothing.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_ATOMICFILE_H
#define LOOM_SUPPORT_ATOMICFILE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace loom {

/// True when `path` is one of the process's own descriptors (/dev/stdout,
/// /dev/stderr, /dev/fd/N), or exists and is neither a regular file nor a
/// directory (/dev/null, a FIFO, a terminal): such an output is written in
/// place, appending, never replaced by a rename.
bool isStreamOutput(llvm::StringRef path);

/// Where the atomic write of `path` renames its file to: `path`, or for a
/// symbolic link the file it names, so that the link stays a link.
std::string atomicOutputPath(llvm::StringRef path);

/// Writes what `write` produces to `path` atomically (a stream output in
/// place; through a symbolic link to the file it names). Errors start with
/// `path`. Unlike llvm::writeToOutput, a failed write is reported, not fatal.
llvm::Error
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<void(llvm::raw_ostream &)> write);

/// Checks, before the work whose result it will hold, that `path` can be
/// written as writeFileAtomically writes it: it is not a directory, its
/// directory exists, and a file can be created beside it (one is, and
/// removed). A stream output passes. Errors start with `path`; nothing is
/// left behind.
llvm::Error checkOutputFile(llvm::StringRef path);

/// Creates an empty directory named `target` + ".tmp-XXXXXX" beside
/// `target` and returns its path: in `target`'s directory, whether
/// `target` is absolute or relative (llvm::sys::fs::createUniqueDirectory
/// alone would put a relative one in the system's temporary directory,
/// from where no rename reaches `target`), with the mode the umask leaves
/// of 0777, like any directory a tool creates. Errors start with `target`.
llvm::Expected<std::string> createTempDirectoryBeside(llvm::StringRef target);

/// Puts the directory `tempDir` (a sibling of `target`) at `target`: with
/// one rename when `target` does not exist; else swapped in with one
/// rename (RENAME_EXCHANGE; on a file system without it, the old one is
/// moved aside first) and the old directory, now at `tempDir`'s name,
/// removed. The caller checks first that `target` is its to replace.
/// Errors start with `target`.
llvm::Error replaceDirectory(llvm::StringRef tempDir, llvm::StringRef target);

} // namespace loom

#endif // LOOM_SUPPORT_ATOMICFILE_H
