//===- AtomicFileTest.cpp - Output paths and temporary directories --------===//
//
// Artifacts and checkpoints are assembled in a directory created beside
// their target and renamed into place: that directory takes its mode from
// the umask like every other file a tool writes (0755 under umask 022, not
// 0750 whatever the umask); output paths are probed before the work.
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

// An output path is checked before the work whose result it holds: a file
// that can be created beside it passes and is removed again; a directory,
// or a directory that does not exist, fails naming the path.
TEST(AtomicFileTest, CheckOutputFileProbesAndLeavesNothing) {
  loom::unittest::TempDir dir;
  EXPECT_FALSE(bool(loom::checkOutputFile(dir.file("out.json"))));
  EXPECT_TRUE(dir.isEmpty());
  EXPECT_FALSE(bool(loom::checkOutputFile("/dev/null")));
  llvm::Error isDir = loom::checkOutputFile(dir.file(""));
  ASSERT_TRUE(bool(isDir));
  EXPECT_NE(llvm::toString(std::move(isDir)).find("is a directory"),
            std::string::npos);
  llvm::Error missing = loom::checkOutputFile(dir.file("missing/out.json"));
  ASSERT_TRUE(bool(missing));
  EXPECT_NE(llvm::toString(std::move(missing)).find("missing/out.json: "),
            std::string::npos);
  EXPECT_TRUE(dir.isEmpty());
}

} // namespace
