// npu-smi shows the devices whose nodes exist under the root as the emulator made them: real character
// devices with the recorded major/minor (needs root for mknod). A container's view is a root holding the
// read-only state and a subset of nodes; a vNPU handed in as VIRTUAL appears as /dev/davinci<id>.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "ascend/common/fs.h"
#include "ascend/npu/smi.h"
#include "ascend/npu/smi/view.h"
#include "emulator_fixture.h"

namespace ascend::npu::smi {
namespace {

using ascend::npu::testing::EmulatedHost;

#define REQUIRE_ROOT() \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: creates device nodes with mknod"

void node(const std::string& path, int major, int minor) {
  ::unlink(path.c_str());
  ASSERT_EQ(::mknod(path.c_str(), S_IFCHR | 0660, makedev(major, minor)), 0)
      << path << ": " << strerror(errno);
}

TEST(SmiVisibleRoot, OnlyChipsWithTheirOwnNodeAreShown) {
  REQUIRE_ROOT();
  EmulatedHost host("atlas800t-a2", /*nodes=*/true);
  auto s = *host.emu().read_state();
  ASSERT_TRUE(s.device_nodes);
  EXPECT_EQ(visible_devices(s, host.root()).chips, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  const std::string dev = host.root() + "/dev/";
  for (int p = 4; p < 8; ++p) ASSERT_EQ(::unlink((dev + "davinci" + std::to_string(p)).c_str()), 0);
  node(dev + "davinci1", s.majors.davinci + 1, 1);  // another driver's device
  node(dev + "davinci2", s.majors.davinci, 5);      // the wrong chip
  ASSERT_EQ(::unlink((dev + "davinci3").c_str()), 0);
  ASSERT_TRUE(atomic_replace(dev + "davinci3", "not a device").ok());
  EXPECT_EQ(visible_devices(s, host.root()).chips, (std::vector<int>{0}));
  Output o = run({"info"}, host.root());
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("| 0     910B3"), std::string::npos);
  EXPECT_EQ(o.out.find("| 1     910B3"), std::string::npos);
  EXPECT_EQ(run({"info", "-t", "board", "-i", "1"}, host.root()).out,
            "Invalid card id.\nError parameter of -i\n");
  ASSERT_EQ(::unlink((dev + "davinci0").c_str()), 0);
  Output none = run({"info"}, host.root());
  EXPECT_EQ(none.exit_code, 187);
  EXPECT_EQ(none.out, "dcmi module initialize failed. ret is -8005\n");
}

TEST(SmiVisibleRoot, AVnpuHandedToAContainerIsItsOwnRow) {
  REQUIRE_ROOT();
  EmulatedHost host("atlas800t-a2", /*nodes=*/true);
  Output made = run({"set", "-t", "create-vnpu", "-i", "3", "-c", "0", "-f", "vir10_3c_32g"}, host.root());
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  auto s = *host.emu().read_state();
  ASSERT_EQ(s.vnpus.size(), 1U);
  const int id = s.vnpus[0].id;
  ASSERT_EQ(id, 148);
  // On the host the vNPU node exists but its chip is visible: no separate row.
  Visible on_host = visible_devices(s, host.root());
  EXPECT_EQ(on_host.vnpus, (std::vector<int>{148}));
  EXPECT_EQ(run({"info"}, host.root()).out.find("vir10_3c_32g"), std::string::npos);

  // The container: the driver tree's state and /dev/davinci148 (the host's /dev/vdavinci148).
  ascend::testing::TempDir ctr;
  const std::string state_dir = ctr.path() + "/" + kStateDir;
  ASSERT_TRUE(make_dirs(state_dir).ok());
  std::filesystem::copy_file(host.emu().state_path(), state_dir + "/state.json");
  ASSERT_TRUE(make_dirs(ctr.path() + "/dev").ok());
  node(ctr.path() + "/dev/davinci148", s.majors.vdavinci, 148);
  Visible in_ctr = visible_devices(s, ctr.path());
  EXPECT_TRUE(in_ctr.chips.empty());
  EXPECT_EQ(in_ctr.vnpus, (std::vector<int>{148}));
  Output o = run({"info"}, ctr.path());
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("| 3     910Bvir10_3c_32g    | OK "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("/ 32768 "), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("| 0     910B3"), std::string::npos);
  // A node of the wrong major is not the vNPU.
  node(ctr.path() + "/dev/davinci148", s.majors.davinci, 148);
  EXPECT_TRUE(visible_devices(s, ctr.path()).vnpus.empty());
}

}  // namespace
}  // namespace ascend::npu::smi
