#include "ascend/common/safe_path.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "test_dir.h"

namespace ascend {
namespace {

namespace fs = std::filesystem;

// A rootfs with traps: absolute and relative symlinks that point outside, a symlink loop.
class SafePathTest : public ::testing::TestWithParam<ResolveMode> {
 protected:
  void SetUp() override {
    root_ = dir_ / "rootfs";
    outside_ = dir_ / "outside";
    fs::create_directories(root_ + "/dev");
    fs::create_directories(root_ + "/usr/lib");
    fs::create_directories(outside_);
    std::ofstream(outside_ + "/secret") << "host secret";
    std::ofstream(root_ + "/usr/lib/inside") << "inside";
    std::ofstream(root_ + "/secret") << "rootfs secret";
    fs::create_directory_symlink("/", root_ + "/abs-root-link");
    fs::create_symlink("../../../../../../outside/secret", root_ + "/dotdot-link");
    fs::create_symlink(outside_ + "/secret", root_ + "/abs-link");
    fs::create_symlink("usr/lib/inside", root_ + "/rel-link");
    fs::create_symlink("loop-b", root_ + "/loop-a");
    fs::create_symlink("loop-a", root_ + "/loop-b");
    fd_ = UniqueFd(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(fd_.valid());
  }

  std::string read_via(const std::string& path, int flags = O_RDONLY) {
    auto r = open_in_root(fd_.get(), path, flags, GetParam());
    if (!r.ok()) return "ERR:" + r.error().message();
    std::string out(256, '\0');
    ssize_t n = ::read(r->get(), out.data(), out.size());
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
  }

  testing::TempDir dir_;
  std::string root_;
  std::string outside_;
  UniqueFd fd_;
};

TEST_P(SafePathTest, ResolvesPlainAndRelativeLinks) {
  EXPECT_EQ(read_via("/usr/lib/inside"), "inside");
  EXPECT_EQ(read_via("usr/lib/inside"), "inside");
  EXPECT_EQ(read_via("/rel-link"), "inside");
}

TEST_P(SafePathTest, DotDotNeverLeavesTheRoot) {
  EXPECT_EQ(read_via("/../../../../secret"), "rootfs secret");
  // The link climbs above the root: it is clamped there, so ../outside/secret does not exist in the root...
  auto r = open_in_root(fd_.get(), "/dotdot-link", O_RDONLY, GetParam());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ENOENT);
  // ...and once the rootfs has its own /outside/secret, that one is what it reaches, never the host's.
  fs::create_directories(root_ + "/outside");
  std::ofstream(root_ + "/outside/secret") << "clamped";
  EXPECT_EQ(read_via("/dotdot-link"), "clamped");
}

TEST_P(SafePathTest, AbsoluteLinksAreResolvedInsideTheRoot) {
  // /abs-link -> <outside>/secret, which inside the root does not exist.
  EXPECT_EQ(read_via("/abs-link").rfind("ERR:", 0), 0U);
  // /abs-root-link -> "/" means the root itself.
  EXPECT_EQ(read_via("/abs-root-link/secret"), "rootfs secret");
}

TEST_P(SafePathTest, LoopsFailWithELOOP) {
  auto r = open_in_root(fd_.get(), "/loop-a", O_RDONLY, GetParam());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ELOOP);
}

TEST_P(SafePathTest, NoFollowRefusesFinalSymlink) {
  auto r = open_in_root(fd_.get(), "/rel-link", O_RDONLY | O_NOFOLLOW, GetParam());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ELOOP);
}

TEST_P(SafePathTest, MissingComponentIsENOENTAndFileAsDirIsENOTDIR) {
  auto r = open_in_root(fd_.get(), "/dev/davinci0", O_RDONLY, GetParam());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ENOENT);
  auto n = open_in_root(fd_.get(), "/secret/x", O_RDONLY, GetParam());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code(), ENOTDIR);
}

TEST_P(SafePathTest, OPathOfDirectoryGivesUsableProcPath) {
  auto r = open_in_root(fd_.get(), "/usr/lib", O_PATH | O_DIRECTORY, GetParam());
  ASSERT_TRUE(r.ok()) << r.error().message();
  std::string target = fs::read_symlink(fd_path(r->get())).string();
  EXPECT_EQ(target, root_ + "/usr/lib");
}

TEST_P(SafePathTest, ResolvesDotDotWhileTheSystemRenamesFiles) {
  // openat2 fails with EAGAIN when a rename races with resolving "..": on a host that starts containers
  // (renames of config.json, mounts) that is routine, and a resolution must never fail because of it.
  std::atomic<bool> stop{false};
  std::string a = dir_ / "churn-a";
  std::string b = dir_ / "churn-b";
  std::ofstream(a) << "x";
  std::thread churn([&] {
    while (!stop.load()) {
      ::rename(a.c_str(), b.c_str());
      ::rename(b.c_str(), a.c_str());
    }
  });
  int failures = 0;
  std::string last;
  for (int i = 0; i < 20000; ++i) {
    auto r = open_in_root(fd_.get(), "/usr/lib/../../usr/../usr/lib/../lib/inside", O_RDONLY, GetParam());
    if (!r.ok()) {
      ++failures;
      last = r.error().message();
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(failures, 0) << last;
}

// Opens only what no link leads to: a link anywhere on the way, or as the entry itself (O_NOFOLLOW or not),
// and a ".." above the root are refused.
TEST_F(SafePathTest, BeneathWithoutLinksOpensOnlyPathsFreeOfLinks) {
  auto plain = open_beneath_without_links(fd_.get(), "/usr/lib/inside", O_RDONLY);
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  char c = 0;
  EXPECT_EQ(::read(plain->get(), &c, 1), 1);
  EXPECT_EQ(c, 'i');
  EXPECT_TRUE(open_beneath_without_links(fd_.get(), "usr/lib", O_PATH).ok());
  fs::create_directory_symlink("usr", root_ + "/usr-link");
  for (const char* path : {"/usr-link/lib/inside", "/rel-link", "/abs-root-link/secret"}) {
    for (int flags : {O_PATH, O_PATH | O_NOFOLLOW, O_RDONLY}) {
      auto r = open_beneath_without_links(fd_.get(), path, flags);
      ASSERT_FALSE(r.ok()) << path;
      EXPECT_EQ(r.error().code(), ELOOP) << path;
    }
  }
  auto above = open_beneath_without_links(fd_.get(), "/usr/../../outside/secret", O_RDONLY);
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.error().code(), EXDEV);
  EXPECT_EQ(open_beneath_without_links(fd_.get(), "/usr/nothing", O_PATH).error().code(), ENOENT);
}

INSTANTIATE_TEST_SUITE_P(Modes, SafePathTest, ::testing::Values(ResolveMode::kAuto, ResolveMode::kFallback),
                         [](const auto& info) {
                           return info.param == ResolveMode::kAuto ? "openat2" : "fallback";
                         });

}  // namespace
}  // namespace ascend
