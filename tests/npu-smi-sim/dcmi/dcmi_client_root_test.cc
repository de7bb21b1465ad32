// The C DCMI client on a host laid out by the real `npu-sim load` (device nodes: needs root), compared
// with the npu-smi that npu-sim installed into the host; and visibility by device node, as npu-smi has it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "client_check.h"
#include "dcmi_library.h"
#include "test_dir.h"

namespace ascend::npu {
namespace {

using testing::ClientOutput;

class DcmiClientRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: npu-sim load creates device nodes";
    auto r = ascend::testing::run_command(
        {std::string(ASCEND_BIN_DIR) + "/npu-sim", "load", "--profile", "atlas800t-a2", "--root", root()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void TearDown() override {
    if (::geteuid() == 0)
      ascend::testing::run_command({std::string(ASCEND_BIN_DIR) + "/npu-sim", "unload", "--root", root()});
  }
  std::string root() const { return dir_ / "root"; }
  std::string installed_npu_smi() const { return root() + "/usr/local/bin/npu-smi"; }

  ascend::testing::TempDir dir_;
};

TEST_F(DcmiClientRootTest, SeesWhatTheInstalledNpuSmiShows) {
  auto r = testing::run_client(root(), "vir05_1c_16g");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ClientOutput out(r.out);
  testing::expect_client_matches_npu_smi(out, installed_npu_smi(), root());
  testing::expect_client_matches_a2_captures(out);
  EXPECT_EQ(out.after("vnpu create 0 0 vir05_1c_16g"), (std::vector<std::string>{"rc", "0", "id", "100"}));
  EXPECT_EQ(out.after("vnpu destroy 0 0 100"), (std::vector<std::string>{"rc", "0"}));
  EXPECT_FALSE(std::filesystem::exists(root() + "/dev/vdavinci100"));
}

TEST_F(DcmiClientRootTest, AMissingDeviceNodeHidesTheChipAsFromNpuSmi) {
  std::filesystem::remove(root() + "/dev/davinci3");
  auto r = testing::run_client(root());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ClientOutput out(r.out);
  EXPECT_EQ(out.after("cards"), (std::vector<std::string>{"7:", "0", "1", "2", "4", "5", "6", "7"}));
  testing::expect_client_matches_npu_smi(out, installed_npu_smi(), root());
}

// One session (the library keeps what it read between calls): a node removed after dcmi_init hides its chip
// from the next call, and a node made again shows it again.
TEST_F(DcmiClientRootTest, ANodeRemovedDuringASessionHidesTheChipAtTheNextCall) {
  ::setenv("ASCEND_SIM_ROOT", root().c_str(), 1);
  testing::DcmiLibrary lib(testing::built_libdcmi(), dir_ / "libdcmi.so");
  testing::DcmiApi api(lib);
  ASSERT_EQ(api.init(), DCMI_OK);
  const auto cards = [&] {
    int n = 0;
    int list[MAX_CARD_NUM] = {};
    EXPECT_EQ(api.card_num_list(&n, list, MAX_CARD_NUM), DCMI_OK);
    return std::vector<int>(list, list + n);
  };
  EXPECT_EQ(cards(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  struct stat st {};
  ASSERT_EQ(::stat((root() + "/dev/davinci3").c_str(), &st), 0);
  std::filesystem::remove(root() + "/dev/davinci3");
  EXPECT_EQ(cards(), (std::vector<int>{0, 1, 2, 4, 5, 6, 7}));
  ASSERT_EQ(::mknod((root() + "/dev/davinci3").c_str(), st.st_mode, st.st_rdev), 0);
  EXPECT_EQ(cards(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  ::unsetenv("ASCEND_SIM_ROOT");
}

TEST_F(DcmiClientRootTest, NoVisibleDeviceFailsInitAsNpuSmi) {
  for (int i = 0; i < 8; ++i) std::filesystem::remove(root() + "/dev/davinci" + std::to_string(i));
  auto r = testing::run_client(root());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(ClientOutput(r.out).after("init"),
            std::vector<std::string>{std::to_string(DCMI_ERR_CODE_INNER_ERR)});
  auto smi = testing::run_npu_smi(installed_npu_smi(), root(), {"info"});
  EXPECT_NE(smi.out.find("ret is " + std::to_string(DCMI_ERR_CODE_INNER_ERR)), std::string::npos) << smi.out;
}

TEST_F(DcmiClientRootTest, TheLibraryInstalledInTheHostFindsItWithoutTheEnvironment) {
  // Where a later change will install it: over the stub that npu-sim load put there (unload removes it).
  const std::string lib = root() + "/usr/local/dcmi/libdcmi.so";
  std::filesystem::copy_file(std::string(ASCEND_LIB_DIR) + "/libdcmi.so", lib,
                             std::filesystem::copy_options::overwrite_existing);
  auto r = testing::run_client("", "", lib);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  testing::expect_client_matches_npu_smi(ClientOutput(r.out), installed_npu_smi(), root());
}

}  // namespace
}  // namespace ascend::npu
