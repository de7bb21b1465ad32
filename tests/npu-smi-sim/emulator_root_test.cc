// Loads every profile with real device nodes into a temporary root and checks them with stat(2).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "ascend/common/fs.h"

#include "emulator_fixture.h"

namespace ascend::npu {
namespace {

void expect_node(const std::string& path, int major, int minor) {
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << path;
  EXPECT_EQ(st.st_mode & 07777, 0660U) << path;
  EXPECT_EQ(static_cast<int>(::major(st.st_rdev)), major) << path;
  EXPECT_EQ(static_cast<int>(::minor(st.st_rdev)), minor) << path;
}

class RootTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mknod device nodes";
  }
};

TEST_P(RootTest, LoadCreatesRealDeviceNodes) {
  testing::EmulatedHost h(GetParam(), /*nodes=*/true);
  auto s = *h.emu().read_state();
  for (const auto& c : s.chips) {
    expect_node(h.root() + "/dev/davinci" + std::to_string(c.phy_id), s.majors.davinci, c.phy_id);
  }
  expect_node(h.root() + "/dev/davinci_manager", s.majors.manager, 0);
  expect_node(h.root() + "/dev/devmm_svm", s.majors.svm, 0);
  expect_node(h.root() + "/dev/hisi_hdc", s.majors.hdc, 0);
  EXPECT_FALSE(std::filesystem::exists(h.root() + "/dev/davinci" + std::to_string(s.chips.size())));

  auto v = h.emu().create_vnpu(0, s.templates.front().name, std::nullopt, {});
  ASSERT_TRUE(v.ok()) << v.error().message();
  expect_node(h.root() + "/dev/vdavinci" + std::to_string(v->id), s.majors.vdavinci, v->id);
  ASSERT_TRUE(h.emu().destroy_vnpu(v->id, 0, std::nullopt).ok());
  EXPECT_FALSE(std::filesystem::exists(h.root() + "/dev/vdavinci" + std::to_string(v->id)));

  ASSERT_TRUE(h.emu().unload().ok());
  EXPECT_FALSE(std::filesystem::exists(h.root() + "/dev"));
}

TEST_P(RootTest, DefaultMajorsAreFreeOnThisKernel) {
  ascend::testing::TempDir d;
  Emulator e(d / "root");
  auto opts = testing::test_load_options(true);
  opts.majors.reset();
  ASSERT_TRUE(e.load(*builtin_profile(GetParam()), opts).ok());
  auto s = *e.read_state();
  std::string devices = *read_file("/proc/devices");
  for (int m : {s.majors.davinci, s.majors.manager, s.majors.svm, s.majors.hdc, s.majors.vdavinci}) {
    std::string line = "\n";  // appended, not "\n" + ...: GCC 12 -O3 warns -Wrestrict inside libstdc++
    line.append(std::to_string(m)).append(" ");
    EXPECT_EQ(devices.find(line), std::string::npos) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Profiles, RootTest,
                         ::testing::Values("atlas800-9000", "atlas800t-a2", "atlas800t-a3", "atlas300i-duo"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ascend::npu
