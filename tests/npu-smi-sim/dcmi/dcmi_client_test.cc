// The C DCMI client on an emulated host loaded without device nodes (every chip visible, no root needed),
// against npu-smi of the same host and the expectations derived from the reference captures.
#include <gtest/gtest.h>

#include <cstdlib>

#include "client_check.h"
#include "emulator_fixture.h"

namespace ascend::npu {
namespace {

using testing::ClientOutput;

const std::string kNpuSmi = std::string(ASCEND_BIN_DIR) + "/npu-smi";

TEST(DcmiClientTest, SeesWhatNpuSmiShowsOnAnA2Host) {
  testing::EmulatedHost host("atlas800t-a2");
  auto r = testing::run_client(host.root(), "vir10_3c_32g");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ClientOutput out(r.out);
  EXPECT_EQ(out.after("init"), std::vector<std::string>{"0"});
  testing::expect_client_matches_npu_smi(out, kNpuSmi, host.root());
  testing::expect_client_matches_a2_captures(out);
  // vNPU ids: the lowest free of phy 0's range (reference vNPU table), destroyed again.
  EXPECT_EQ(out.after("vnpu create 0 0 vir10_3c_32g"), (std::vector<std::string>{"rc", "0", "id", "100"}));
  EXPECT_EQ(out.after("vnpu destroy 0 0 100"), (std::vector<std::string>{"rc", "0"}));
  EXPECT_TRUE(host.emu().snapshot()->vnpus.empty());
}

// What `npu-sim load` installs: the emulated library at the driver's paths, which finds its host from its own
// location (no $ASCEND_SIM_ROOT), as a vendor tool on the host would load it.
TEST(DcmiClientTest, TheInstalledLibraryFindsItsHostFromWhereItIs) {
  testing::EmulatedHost host("atlas800t-a2");
  for (const char* at : {"/usr/local/dcmi/libdcmi.so", "/usr/local/Ascend/driver/lib64/driver/libdcmi.so"}) {
    SCOPED_TRACE(at);
    auto r = testing::run_client("", "", host.root() + at);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ClientOutput out(r.out);
    EXPECT_EQ(out.after("init"), std::vector<std::string>{"0"});
    testing::expect_client_matches_npu_smi(out, kNpuSmi, host.root());
  }
}

// The other families: the client and npu-smi agree on every host the emulator ships.
class DcmiClientProfileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DcmiClientProfileTest, SeesWhatNpuSmiShows) {
  testing::EmulatedHost host(GetParam());
  ASSERT_TRUE(host.emu().set_fault(1, 0x84C98000U, std::nullopt).ok());
  auto r = testing::run_client(host.root());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  testing::expect_client_matches_npu_smi(ClientOutput(r.out), kNpuSmi, host.root());
}

INSTANTIATE_TEST_SUITE_P(Profiles, DcmiClientProfileTest,
                         ::testing::Values("atlas800t-a2", "atlas800-9000", "atlas800t-a3", "atlas300i-duo"));

TEST(DcmiClientTest, InitFailsWithoutAHost) {
  ascend::testing::TempDir empty;
  auto r = testing::run_client(empty.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(ClientOutput(r.out).after("init"),
            std::vector<std::string>{std::to_string(DCMI_ERR_CODE_INNER_ERR)});
}

}  // namespace
}  // namespace ascend::npu
