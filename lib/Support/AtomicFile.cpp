//===- AtomicFile.cpp - Output files that are never half written ----------===//

#include "loom/Support/AtomicFile.h"

#include "llvm/Support/FileSystem.h"

using namespace llvm;

namespace loom {

static Error pathError(StringRef path, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), path + ": " + message);
}

Error writeFileAtomically(StringRef path,
                          function_ref<void(raw_ostream &)> write) {
  Expected<sys::fs::TempFile> temp =
      sys::fs::TempFile::create(path + ".tmp-%%%%%%");
  if (!temp)
    return pathError(path, toString(temp.takeError()));
  {
    raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
    write(os);
    os.flush();
    if (std::error_code error = os.error()) {
      os.clear_error();
      consumeError(temp->discard());
      return pathError(path, error.message());
    }
  }
  if (Error error = temp->keep(path))
    return pathError(path, toString(std::move(error)));
  return Error::success();
}

} // namespace loom
