// The device seam as the runtime's binaries open it (runtime-hook/src/devices.cc): a request by number sees
// the emulated host through its device nodes, as the DCMI backend sees a real host; a full query reads the
// emulator's state. The expected chips are the profile's (atlas800t-a2: eight chips, 0-7) less the node the
// test removes or replaces by a link; the device numbers are the nodes' own, read back with lstat.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ascend/hook/devices.h"
#include "support.h"

namespace ascend::hook {
namespace {

using testing::EmulatedHost;
using testing::TempDir;

std::vector<int> phy_ids(const npu::DeviceSnapshot& s) {
  std::vector<int> out;
  for (const auto& c : s.chips) out.push_back(c.phy_id);
  return out;
}

TEST(OpenDevices, ARequestByNumberSeesTheEmulatedHostsDeviceNodes) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (npu-sim load makes device nodes only as root)";
  TempDir tmp("devices");
  EmulatedHost host(tmp / "host");
  ASSERT_TRUE(host.ok()) << host.error();
  Config config;
  config.host_root = host.root();
  config.backend = "emulator";
  // A chip whose node is gone (the driver lost it): the emulator's state still lists it. And a link by a
  // node's name, to another chip's node: no node of its own, so no chip.
  ASSERT_EQ(::unlink((host.root() + "/dev/davinci3").c_str()), 0);
  ASSERT_EQ(::unlink((host.root() + "/dev/davinci5").c_str()), 0);
  ASSERT_EQ(::symlink("davinci6", (host.root() + "/dev/davinci5").c_str()), 0);

  auto nodes = open_devices(config, false);
  ASSERT_TRUE(nodes.ok()) << nodes.error().message();
  auto scanned = (*nodes)->snapshot();
  ASSERT_TRUE(scanned.ok()) << scanned.error().message();
  EXPECT_EQ(scanned->backend, "emulator");
  EXPECT_EQ(phy_ids(*scanned), (std::vector<int>{0, 1, 2, 4, 6, 7}));
  EXPECT_TRUE(scanned->nodes_checked);
  ASSERT_EQ(scanned->chip_nodes.size(), 6U);
  for (const auto& n : scanned->chip_nodes) {
    struct stat st {};
    ASSERT_EQ(::lstat((host.root() + n.path).c_str(), &st), 0) << n.path;
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << n.path;
    EXPECT_EQ(makedev(n.major, n.minor), st.st_rdev) << n.path;
    EXPECT_EQ(n.mode, st.st_mode & 07777) << n.path;
  }
  EXPECT_EQ(scanned->control_nodes().size(), 3U);
  EXPECT_EQ((*nodes)->host_path("/dev/davinci0"), host.root() + "/dev/davinci0");

  auto full = open_devices(config, true);
  ASSERT_TRUE(full.ok()) << full.error().message();
  auto state = (*full)->snapshot();
  ASSERT_TRUE(state.ok()) << state.error().message();
  EXPECT_EQ(state->backend, "emulator");
  EXPECT_EQ(phy_ids(*state), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(state->nodes_checked);
  EXPECT_FALSE(state->resource_name.empty());
}

// With no node to read, the emulator says why: here, that no host is loaded, and how to load one.
TEST(OpenDevices, WithoutAHostTheEmulatorSaysHowToLoadOne) {
  TempDir tmp("devices");
  Config config;
  config.host_root = tmp / "nothing";
  config.backend = "emulator";
  auto nodes = open_devices(config, false);
  ASSERT_TRUE(nodes.ok()) << nodes.error().message();
  auto s = (*nodes)->snapshot();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("no emulated host is loaded"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("npu-sim load"), std::string::npos) << s.error().message();
}

}  // namespace
}  // namespace ascend::hook
