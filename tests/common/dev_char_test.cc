// /dev/char/<major>:<minor> links (dev_char.h): made relative, kept when right, replaced when stale, removed
// only when ours and no longer needed. Device nodes need root; without it those cases are skipped.
#include "ascend/common/dev_char.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>

#include "test_dir.h"

namespace ascend {
namespace {

std::string link_of(const std::string& path) {
  char buf[256];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

class DevChar : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (mknod of device nodes)";
    std::filesystem::create_directories(root + "/dev");
  }
  void node(const std::string& name, int major, int minor) {
    std::string p = root + "/dev/" + name;
    ::unlink(p.c_str());
    ASSERT_EQ(::mknod(p.c_str(), S_IFCHR | 0600, makedev(major, minor)), 0) << p;
  }
  testing::TempDir dir;
  std::string root = dir.path() + "/host";
};

TEST_F(DevChar, MakesARelativeLinkOnceAndRecordsIt) {
  node("davinci3", 240, 3);
  auto made = ensure_dev_char_link(root, "/dev/davinci3", 240, 3);
  ASSERT_TRUE(made.ok()) << made.error().message();
  EXPECT_TRUE(*made);
  EXPECT_EQ(link_of(root + "/dev/char/240:3"), "../davinci3");
  auto again = ensure_dev_char_link(root, "/dev/davinci3", 240, 3);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(*recorded_dev_char_links(root), (std::vector<std::string>{"240:3 ../davinci3"}));
}

TEST_F(DevChar, KeepsAnotherNameOfTheSameDeviceAndReplacesAStaleOne) {
  node("davinci0", 240, 0);
  node("udev-name", 240, 1);
  std::filesystem::create_directories(root + "/dev/char");
  ASSERT_EQ(::symlink("../udev-name", (root + "/dev/char/240:1").c_str()), 0);
  ASSERT_EQ(::symlink("../davinci0", (root + "/dev/char/240:7").c_str()), 0);  // 240:0 now, not 240:7
  node("davinci7", 240, 7);
  ASSERT_FALSE(*ensure_dev_char_link(root, "/dev/davinci1", 240, 1));  // udev's link leads to 240:1: kept
  EXPECT_EQ(link_of(root + "/dev/char/240:1"), "../udev-name");
  ASSERT_TRUE(*ensure_dev_char_link(root, "/dev/davinci7", 240, 7));  // stale: replaced
  EXPECT_EQ(link_of(root + "/dev/char/240:7"), "../davinci7");
}

TEST_F(DevChar, StaleRemovalTouchesOnlyALinkToANodeThatIsGone) {
  node("vdavinci100", 244, 100);
  ASSERT_TRUE(*ensure_dev_char_link(root, "/dev/vdavinci100", 244, 100));
  EXPECT_FALSE(*remove_stale_dev_char_link(root, "/dev/vdavinci100", 244, 100));  // still there
  ::unlink((root + "/dev/vdavinci100").c_str());
  EXPECT_TRUE(*remove_stale_dev_char_link(root, "/dev/vdavinci100", 244, 100));
  struct stat st {};
  EXPECT_NE(::lstat((root + "/dev/char/244:100").c_str(), &st), 0);
  EXPECT_TRUE(recorded_dev_char_links(root)->empty());
}

TEST_F(DevChar, UninstallRemovesOnlyRecordedLinksStillPointingWhereWeMadeThem) {
  node("davinci0", 240, 0);
  node("davinci1", 240, 1);
  node("null", 1, 3);
  std::filesystem::create_directories(root + "/dev/char");
  ASSERT_EQ(::symlink("../null", (root + "/dev/char/1:3").c_str()), 0);  // udev's: not in the record
  ASSERT_TRUE(*ensure_dev_char_link(root, "/dev/davinci0", 240, 0));
  ASSERT_TRUE(*ensure_dev_char_link(root, "/dev/davinci1", 240, 1));
  // Someone re-pointed 240:1 since: no longer ours.
  ::unlink((root + "/dev/char/240:1").c_str());
  ASSERT_EQ(::symlink("../other", (root + "/dev/char/240:1").c_str()), 0);
  auto removed = remove_recorded_dev_char_links(root);
  ASSERT_TRUE(removed.ok()) << removed.error().message();
  EXPECT_EQ(*removed, (std::vector<std::string>{"/dev/char/240:0"}));
  EXPECT_EQ(link_of(root + "/dev/char/1:3"), "../null");
  EXPECT_EQ(link_of(root + "/dev/char/240:1"), "../other");
  EXPECT_TRUE(recorded_dev_char_links(root)->empty());
}

TEST(DevCharPaths, NodesOutsideDevAreRefused) {
  testing::TempDir dir;
  EXPECT_FALSE(ensure_dev_char_link(dir.path(), "/etc/passwd", 1, 1).ok());
  EXPECT_FALSE(ensure_dev_char_link(dir.path(), "/dev/../etc/x", 1, 1).ok());
  EXPECT_EQ(dev_char_link_path("/", 240, 3), "/dev/char/240:3");
  EXPECT_EQ(dev_char_link_path("/h", 240, 3), "/h/dev/char/240:3");
}

}  // namespace
}  // namespace ascend
