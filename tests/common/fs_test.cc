#include "ascend/common/fs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "test_dir.h"

namespace ascend {
namespace {

using testing::TempDir;

TEST(ReadFile, ReadsWholeFileAndReportsMissing) {
  TempDir d;
  std::ofstream(d / "a") << "hello\nworld";
  auto r = read_file(d / "a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "hello\nworld");
  auto missing = read_file(d / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ENOENT);
  EXPECT_NE(missing.error().message().find(d / "nope"), std::string::npos);
}

TEST(ReadFile, RefusesTooLarge) {
  TempDir d;
  std::ofstream(d / "big") << std::string(100, 'x');
  auto r = read_file(d / "big", 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EFBIG);
}

TEST(AtomicReplace, CreatesWithModeAndKeepsOldMode) {
  TempDir d;
  std::string p = d / "cfg.json";
  ASSERT_TRUE(atomic_replace(p, "one", 0600).ok());
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600U);
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  ASSERT_TRUE(atomic_replace(p, "two").ok());
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640U);
  EXPECT_EQ(*read_file(p), "two");
  ASSERT_TRUE(atomic_replace(p, "three", 0600, Durability::kEphemeral).ok());  // same contract, no fsync
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640U);
  EXPECT_EQ(*read_file(p), "three");
  // No temporary files are left behind.
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(d.path())) {
    (void)e;
    ++n;
  }
  EXPECT_EQ(n, 1);
}

TEST(AtomicReplace, KeepsTheOwnerOfAnExistingFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a file owned by another user)";
  TempDir d;
  std::string p = d / "daemon.json";
  ASSERT_TRUE(atomic_replace(p, "{}", 0640).ok());
  ASSERT_EQ(::chown(p.c_str(), 1234, 5678), 0);
  ASSERT_EQ(::chmod(p.c_str(), 0604), 0);
  ASSERT_TRUE(atomic_replace(p, "{\"a\": 1}").ok());
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1234U);
  EXPECT_EQ(st.st_gid, 5678U);
  EXPECT_EQ(st.st_mode & 07777, 0604U);
  EXPECT_EQ(*read_file(p), "{\"a\": 1}");
}

TEST(AtomicReplace, FailsInMissingDirectory) {
  TempDir d;
  Status s = atomic_replace(d / "no/such/dir/file", "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ENOENT);
}

TEST(AtomicReplace, ReadersNeverSeeATornFile) {
  TempDir d;
  std::string p = d / "state";
  const std::string a(std::size_t{64} * 1024, 'a');
  const std::string b(std::size_t{64} * 1024, 'b');
  ASSERT_TRUE(atomic_replace(p, a).ok());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(atomic_replace(p, i % 2 ? a : b).ok());
    stop = true;
  });
  int reads = 0;
  while (!stop) {
    auto r = read_file(p);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(*r == a || *r == b) << "torn read of " << r->size() << " bytes";
    ++reads;
  }
  writer.join();
  EXPECT_GT(reads, 0);
}

TEST(IsFileName, OneEntryOfAFolderAndNothingElse) {
  for (const char* yes : {"abc", "0123456789abcdef", ".hidden", "...", "a..b"}) {
    EXPECT_TRUE(is_file_name(yes)) << '"' << yes << '"';
  }
  for (const char* no : {"", ".", "..", "a/b", "/", "../x", "x/"}) {
    EXPECT_FALSE(is_file_name(no)) << '"' << no << '"';
  }
}

TEST(MakeDirs, CreatesNestedAndRejectsFile) {
  TempDir d;
  ASSERT_TRUE(make_dirs(d / "x/y/z").ok());
  EXPECT_TRUE(std::filesystem::is_directory(d / "x/y/z"));
  ASSERT_TRUE(make_dirs(d / "x/y/z").ok());  // idempotent
  std::ofstream(d / "f") << "";
  Status s = make_dirs(d / "f");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ENOTDIR);
}

TEST(FileLock, SerialisesReadModifyWriteAcrossProcesses) {
  TempDir d;
  std::string counter = d / "counter";
  std::string lock = d / "counter.lock";
  ASSERT_TRUE(atomic_replace(counter, "0").ok());
  constexpr int kProcs = 8;
  constexpr int kIncrements = 50;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kIncrements; ++i) {
        auto l = FileLock::acquire(lock);
        if (!l.ok()) ::_exit(2);
        int v = std::stoi(*read_file(counter));
        if (!atomic_replace(counter, std::to_string(v + 1)).ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(k, &status, 0), k);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(*read_file(counter), std::to_string(kProcs * kIncrements));
}

// An unload removes the lock file while a writer waits on it, and a load creates a new one: the waiting
// writer must end up excluded by the new file's lock, not holding the old, unlinked one.
TEST(FileLock, RetriesWhenTheLockFileWasReplacedWhileWaiting) {
  TempDir d;
  std::string path = d / "state.lock";
  auto old_lock = std::make_optional(FileLock::acquire(path).value());
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    auto l = FileLock::acquire(path);
    ASSERT_TRUE(l.ok());
    acquired = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the waiter blocks on the old inode
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto new_lock = std::make_optional(FileLock::acquire(path).value());  // a new inode, locked by us
  old_lock.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(acquired) << "the waiter took the stale lock while the new one is held";
  new_lock.reset();
  waiter.join();
  EXPECT_TRUE(acquired);
}

TEST(FileLock, ReportsUnopenableLock) {
  auto l = FileLock::acquire("/nonexistent-dir-for-test/x.lock");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code(), ENOENT);
}

}  // namespace
}  // namespace ascend
