//===- AtomicFile.cpp - Output files that are never half written ----------===//

#include "loom/Support/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>

using namespace llvm;

namespace loom {

static Error pathError(StringRef path, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), path + ": " + message);
}

/// The process's own descriptor a path names (/dev/stdout, /dev/stderr,
/// /dev/fd/N, /proc/self/fd/N), or -1.
static int ownDescriptor(StringRef path) {
  if (path == "/dev/stdout")
    return 1;
  if (path == "/dev/stderr")
    return 2;
  for (StringRef prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    unsigned fd;
    if (path.consume_front(prefix) && !path.getAsInteger(10, fd))
      return int(fd);
  }
  return -1;
}

bool isStreamOutput(StringRef path) {
  // /dev/stdout is a link to the descriptor, which may be a regular file
  // (`> log.txt`): renaming over the link would replace /dev/stdout itself
  // (as root) or fail in /dev, so it is a stream whatever it points to.
  if (ownDescriptor(path) >= 0)
    return true;
  sys::fs::file_status status;
  if (sys::fs::status(path, status))
    return false;
  return status.type() != sys::fs::file_type::regular_file &&
         status.type() != sys::fs::file_type::directory_file;
}

std::string atomicOutputPath(StringRef path) {
  // A link to a file: replace the file it names, so that the link stays.
  SmallString<256> resolved;
  if (sys::fs::is_symlink_file(path) && !sys::fs::real_path(path, resolved))
    return std::string(resolved);
  return std::string(path);
}

Error writeFileAtomically(StringRef path,
                          function_ref<void(raw_ostream &)> write) {
  if (isStreamOutput(path)) {
    // In place, appending: a log sent to /dev/stdout while stdout goes to a
    // file follows what the tool printed there, rather than truncating it.
    outs().flush();
    errs().flush();
    std::error_code error;
    raw_fd_ostream os(path, error, sys::fs::OF_Append);
    if (!error) {
      write(os);
      os.flush();
      error = os.error();
      os.clear_error();
    }
    if (error)
      return pathError(path, error.message());
    return Error::success();
  }
  std::string target = atomicOutputPath(path);
  Expected<sys::fs::TempFile> temp =
      sys::fs::TempFile::create(target + ".tmp-%%%%%%");
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
  if (Error error = temp->keep(target))
    return pathError(path, toString(std::move(error)));
  return Error::success();
}

Error checkOutputFile(StringRef path) {
  if (isStreamOutput(path))
    return Error::success();
  if (sys::fs::is_directory(path))
    return pathError(path, "is a directory");
  std::string target = atomicOutputPath(path);
  SmallString<128> directory = sys::path::parent_path(target);
  if (directory.empty())
    directory = ".";
  if (!sys::fs::is_directory(directory))
    return pathError(path, "the directory '" + directory + "' does not exist");
  // The rename needs a new file in the same directory: create one now, so
  // that a missing or read-only directory fails before any work, not after.
  Expected<sys::fs::TempFile> probe =
      sys::fs::TempFile::create(target + ".tmp-%%%%%%");
  if (!probe)
    return pathError(path, "cannot create a file in its directory: " +
                               toString(probe.takeError()));
  if (Error error = probe->discard())
    return pathError(path, toString(std::move(error)));
  return Error::success();
}

Expected<std::string> createTempDirectoryBeside(StringRef target) {
  SmallString<256> model(target);
  model += ".tmp";
  sys::fs::make_absolute(model);
  // Not llvm::sys::fs::createUniqueDirectory: it creates mode 0770, so an
  // artifact or checkpoint renamed from here would be drwxr-x--- under any
  // umask, while the files in it honour the umask. 0777 lets mkdir apply
  // the umask as it does for every other directory.
  model += "-%%%%%%";
  SmallString<256> temp;
  std::error_code error;
  for (int attempt = 0; attempt < 128; ++attempt) {
    sys::fs::createUniquePath(model, temp, /*MakeAbsolute=*/false);
    error = sys::fs::create_directory(temp, /*IgnoreExisting=*/false,
                                      sys::fs::all_all);
    if (error != std::errc::file_exists)
      break;
  }
  if (error)
    return pathError(target,
                     "cannot create a temporary directory: " + error.message());
  return temp.str().str();
}

Error replaceDirectory(StringRef tempDir, StringRef target) {
  std::string temp = tempDir.str(), path = target.str();
  if (!sys::fs::exists(path)) {
    if (std::rename(temp.c_str(), path.c_str()))
      return pathError(target, "cannot rename " + tempDir +
                                   " to it: " + std::strerror(errno));
    return Error::success();
  }
  if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(),
                  RENAME_EXCHANGE) == 0) {
    // The new directory is in place; an old one that cannot be removed
    // stays behind under the temporary name.
    (void)sys::fs::remove_directories(temp);
    return Error::success();
  }
  if (errno != EINVAL && errno != ENOSYS)
    return pathError(target, "cannot replace it with " + tempDir + ": " +
                                 std::strerror(errno));
  // For a moment `target` is missing, but never half there.
  std::string aside = path + ".old";
  (void)sys::fs::remove_directories(aside);
  if (std::rename(path.c_str(), aside.c_str()))
    return pathError(target, "cannot move it aside to " + aside + ": " +
                                 std::strerror(errno));
  if (std::rename(temp.c_str(), path.c_str())) {
    std::string message = std::strerror(errno);
    std::rename(aside.c_str(), path.c_str());
    return pathError(target, "cannot rename " + tempDir + " to it: " + message);
  }
  (void)sys::fs::remove_directories(aside);
  return Error::success();
}

} // namespace loom
