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
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

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

// A symbolic link to a file is written through: the file it names gets the
// new content and the link stays a link. (Renaming over the link replaced
// it with a plain file; for /dev/stdout, as root, that replaced the
// system's /dev/stdout.)
TEST(AtomicFileTest, ALinkIsWrittenThrough) {
  loom::unittest::TempDir dir;
  ASSERT_FALSE(llvm::sys::fs::create_directory(dir.file("real")));
  std::string target = dir.file("real/out.json");
  std::string link = dir.file("out.json");
  ASSERT_FALSE(bool(loom::writeFileAtomically(
      target, [](llvm::raw_ostream &os) { os << "old"; })));
  ASSERT_FALSE(llvm::sys::fs::create_link(target, link));
  EXPECT_FALSE(bool(loom::checkOutputFile(link)));
  ASSERT_FALSE(bool(loom::writeFileAtomically(
      link, [](llvm::raw_ostream &os) { os << "new"; })));
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(link));
  auto text = llvm::MemoryBuffer::getFile(target);
  ASSERT_TRUE(bool(text));
  EXPECT_EQ((*text)->getBuffer(), "new");
  EXPECT_EQ(dir.entries().size(), 2u); // real/ and the link, no temporary
}

// The process's own descriptors are streams whatever they point to: with
// stdout sent to a file, /dev/stdout resolves to a regular file, and an
// atomic write would rename over the link.
TEST(AtomicFileTest, OwnDescriptorsAreStreams) {
  for (const char *path :
       {"/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/2"})
    EXPECT_TRUE(loom::isStreamOutput(path)) << path;
  EXPECT_FALSE(loom::isStreamOutput("/dev/fd/x"));
  EXPECT_FALSE(bool(loom::checkOutputFile("/dev/stdout")));
  // A descriptor open on a regular file, as stdout is under `> log.txt`.
  loom::unittest::TempDir dir;
  int fd = -1;
  ASSERT_FALSE(llvm::sys::fs::openFileForWrite(dir.file("log.txt"), fd));
  std::string self = "/dev/fd/" + std::to_string(fd);
  EXPECT_TRUE(loom::isStreamOutput(self));
  EXPECT_FALSE(bool(loom::writeFileAtomically(
      self, [](llvm::raw_ostream &os) { os << "appended"; })));
  ::close(fd);
  auto text = llvm::MemoryBuffer::getFile(dir.file("log.txt"));
  ASSERT_TRUE(bool(text));
  EXPECT_EQ((*text)->getBuffer(), "appended");
  EXPECT_EQ(dir.entries().size(), 1u);
}

} // namespace
