//===- AtomicFileTest.cpp - Temporary directories beside their target -----===//
//
// Artifacts and checkpoints are assembled in a directory created beside
// their target and renamed into place: that directory takes its mode from
// the umask like every other file a tool writes (0755 under umask 022, not
// 0750 whatever the umask).
//
//===----------------------------------------------------------------------===//

#include "loom/Support/AtomicFile.h"

#include "TestFiles.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

namespace {

/// The permission bits of a directory created beside `target` under
/// `mask`.
unsigned modeUnderUmask(const std::string &target, mode_t mask) {
  mode_t old = ::umask(mask);
  llvm::Expected<std::string> dir = loom::createTempDirectoryBeside(target);
  ::umask(old);
  EXPECT_TRUE(bool(dir)) << (dir ? "" : llvm::toString(dir.takeError()));
  if (!dir)
    return 0;
  struct stat info;
  EXPECT_EQ(::stat(dir->c_str(), &info), 0);
  llvm::sys::fs::remove(*dir);
  return info.st_mode & 07777;
}

TEST(AtomicFileTest, TempDirectoryHonoursTheUmask) {
  loom::unittest::TempDir dir;
  EXPECT_EQ(modeUnderUmask(dir.file("model.loom"), 022), 0755u);
  EXPECT_EQ(modeUnderUmask(dir.file("model.loom"), 077), 0700u);
  EXPECT_EQ(modeUnderUmask(dir.file("model.loom"), 002), 0775u);
  EXPECT_TRUE(dir.isEmpty());
}

TEST(AtomicFileTest, TempDirectoriesBesideOneTargetAreDistinct) {
  loom::unittest::TempDir dir;
  llvm::Expected<std::string> a =
      loom::createTempDirectoryBeside(dir.file("c"));
  llvm::Expected<std::string> b =
      loom::createTempDirectoryBeside(dir.file("c"));
  ASSERT_TRUE(bool(a) && bool(b));
  EXPECT_NE(*a, *b);
  EXPECT_EQ(dir.entries().size(), 2u);
}

} // namespace
