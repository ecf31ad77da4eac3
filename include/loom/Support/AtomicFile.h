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

namespace loom {

/// Writes what `write` produces to `path` atomically. Errors start with
/// `path`. Unlike llvm::writeToOutput, a failed write is reported, not
/// fatal.
llvm::Error
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace loom

#endif // LOOM_SUPPORT_ATOMICFILE_H
