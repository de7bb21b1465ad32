// npu-smi commands: argument handling, the real tool's error messages and exit codes, and the set commands
// acting through the emulator's state file. Hosts are loaded without device nodes (every chip visible).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ascend/npu/smi.h"
#include "ascend/npu/smi/commands.h"
#include "emulator_fixture.h"
#include "run_command.h"

namespace ascend::npu::smi {
namespace {

using ascend::npu::testing::EmulatedHost;

struct ErrorCase {
  std::vector<std::string> args;
  int exit_code;
  std::string out;  // the exact stdout
};

void PrintTo(const ErrorCase& c, std::ostream* os) {
  for (const auto& a : c.args) *os << a << " ";
}

class QueryErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(QueryErrors, PrintTheRealMessageAndExitNonZero) {
  static EmulatedHost host("atlas800t-a3");  // 8 cards x 2 chips
  const ErrorCase& c = GetParam();
  Output o = run(c.args, host.root());
  EXPECT_EQ(o.exit_code, c.exit_code) << o.out << o.err;
  EXPECT_EQ(o.out, c.out);
}

INSTANTIATE_TEST_SUITE_P(
    Info, QueryErrors,
    ::testing::Values(
        ErrorCase{{"info", "-t", "board", "-i", "8"},
                  kExitInvalidParameter,
                  "Invalid card id.\nError parameter of -i\n"},
        ErrorCase{{"info", "-t", "board", "-i", "x"},
                  kExitInvalidParameter,
                  "Invalid card id.\nError parameter of -i\n"},
        ErrorCase{{"info", "-t", "board", "-i"},
                  kExitInvalidParameter,
                  "Invalid card id.\nError parameter of -i\n"},
        ErrorCase{{"info", "-t", "board", "-i", "0", "-c", "2"},
                  kExitInvalidParameter,
                  "Invalid chip id.\nError parameter of -c\n"},
        ErrorCase{
            {"info", "-t", "board", "-c", "0", "-i", "0"},
            kExitInvalidParameter,
            "Invalid chip id.\nError parameter of -c\n"},  // -c is checked against the card given before it
        ErrorCase{{"info", "-t", "boards", "-i", "0"}, kExitInvalidParameter, "Error parameter of -t\n"},
        ErrorCase{{"info", "-t"}, kExitInvalidParameter, "Error parameter of -t\n"},
        ErrorCase{{"info", "-t", "ecc", "-i", "0"},
                  kExitNotSupported,
                  "This device does not support querying ecc.\n"},
        ErrorCase{{"info", "-t", "board", "-t", "health"}, kExitInvalidParameter, "Error parameter of -t\n"},
        ErrorCase{{"info", "-l", "-m"}, kExitInvalidParameter, "Error parameter of -m\n"},
        ErrorCase{{"info", "-x", "1"}, kExitInvalidParameter, "Error parameter of -x\n"},
        ErrorCase{{"info", "-i", "0", "-i", "1"}, kExitInvalidParameter, "Error parameter of -i\n"},
        ErrorCase{{"info", "-t", "usages"}, kExitInvalidParameter, "Must input parameter of card id.\n"},
        ErrorCase{{"info", "-t", "info-vnpu", "-i", "0"},
                  kExitInvalidParameter,
                  "Must input parameter of chip id.\n"},
        ErrorCase{{"info", "watch"}, kExitNotSupported, "This device does not support querying watch.\n"}));

TEST(SmiCommands, UnknownCommandAndNoArguments) {
  EmulatedHost host;
  Output o = run({"frobnicate"}, host.root());
  EXPECT_EQ(o.exit_code, kExitInnerError);
  EXPECT_EQ(o.out, "Command or option is not found.\n" + help_text());
  o = run({}, host.root());
  EXPECT_EQ(o.exit_code, kExitInvalidParameter);
  EXPECT_EQ(o.out, help_text());
}

TEST(SmiCommands, HelpNeedsNoHostAndDocumentsExitCodes) {
  ascend::testing::TempDir empty;
  for (const auto& args : std::vector<std::vector<std::string>>{{"-h"}, {"--help"}}) {
    Output o = run(args, empty.path());
    EXPECT_EQ(o.exit_code, 0);
    EXPECT_NE(o.out.find("Usage: npu-smi <Command|-h|-v> [Options...]"), std::string::npos);
    for (int code : {kExitInvalidParameter, kExitNotSupported, kExitResourceOccupied, kExitInnerError,
                     kExitDcmiInitFailed}) {
      EXPECT_NE(o.out.find(std::string("\t") + std::to_string(code) + " "), std::string::npos) << code;
    }
  }
  Output info = run({"info", "-h"}, empty.path());
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_EQ(info.out, info_help_text());
  Output set = run({"set", "--help"}, empty.path());
  EXPECT_EQ(set.exit_code, 0);
  EXPECT_EQ(set.out, set_help_text());
}

TEST(SmiCommands, VersionComesFromTheHost) {
  EmulatedHost host("atlas800t-a3");
  Output o = run({"-v"}, host.root());
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, "npu-smi version: 25.2.0\n");
}

TEST(SmiCommands, NoHostIsADcmiInitFailure) {
  ascend::testing::TempDir empty;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"info"}, {"info", "-t", "topo"}, {"set", "-t", "vnpu-mode", "-d", "0"}, {"-v"}}) {
    Output o = run(args, empty.path());
    EXPECT_EQ(o.exit_code, kExitDcmiInitFailed);
    EXPECT_EQ(o.out, "dcmi module initialize failed. ret is -8005\n");
    EXPECT_NE(o.err.find("npu-sim load"), std::string::npos) << o.err;
  }
}

TEST(SmiCommands, NothingVisibleIsADcmiInitFailure) {
  auto s = *builtin_profile("atlas800t-a2");
  Output o = run_query({"info"}, s, Visible{});
  EXPECT_EQ(o.exit_code, kExitDcmiInitFailed);
  EXPECT_EQ(o.out, "dcmi module initialize failed. ret is -8005\n");
}

TEST(SmiCommands, CardFilterShowsOneCard) {
  EmulatedHost host;
  Output o = run({"info", "-i", "3"}, host.root());
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find("| 3     910B3"), std::string::npos);
  EXPECT_EQ(o.out.find("| 2     910B3"), std::string::npos);
  EXPECT_NE(o.out.find("No running processes found in NPU 3 "), std::string::npos);
  EXPECT_EQ(o.out.find("No running processes found in NPU 2 "), std::string::npos);
}

// ---- set ------------------------------------------------------------------------------------------------

std::vector<std::string> create(const std::string& card, const std::string& chip, const std::string& tmpl) {
  return {"set", "-t", "create-vnpu", "-i", card, "-c", chip, "-f", tmpl};
}

TEST(SmiSet, CreateListsAndDestroysThroughTheStateFile) {
  EmulatedHost host("atlas800t-a3");
  Output o = run(create("3", "1", "vir06_1c_16g"), host.root());
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  // Card 3 chip 1 is physical chip 7: its first vNPU id is 100 + 16*7.
  auto s = host.emu().snapshot();
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->vnpus.size(), 1U);
  EXPECT_EQ(s->vnpus[0].id, 212);
  EXPECT_EQ(s->vnpus[0].phy_id, 7);
  Output info = run({"info", "-t", "info-vnpu", "-i", "3", "-c", "1"}, host.root());
  EXPECT_NE(info.out.find("| Total number of vnpu: 1 "), std::string::npos) << info.out;
  EXPECT_NE(
      info.out.find("|  212      |  0             |  000000000000  |  0       |  vir06_1c_16g        |"),
      std::string::npos)
      << info.out;
  // A chip that holds vNPUs still shows in the table.
  Output table = run({"info"}, host.root());
  EXPECT_NE(table.out.find("| 1     7                   | 0000:93:00.0"), std::string::npos) << table.out;
  Output d = run({"set", "-t", "destroy-vnpu", "-i", "3", "-c", "1", "-v", "212"}, host.root());
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_TRUE(host.emu().snapshot()->vnpus.empty());
}

TEST(SmiSet, ExplicitAndUnspecifiedVnpuIds) {
  EmulatedHost host;
  Output o =
      run({"set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir05_1c_16g", "-v", "120"}, host.root());
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  o = run({"set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir05_1c_16g", "-v", "4294967295"},
          host.root());
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  auto s = *host.emu().snapshot();
  ASSERT_EQ(s.vnpus.size(), 2U);
  EXPECT_EQ(s.vnpus[0].id, 116);  // unspecified: the lowest free id of chip 1
  EXPECT_EQ(s.vnpus[1].id, 120);
}

struct SetErrorCase {
  const char* what;
  std::vector<std::string> args;
  int exit_code;
  std::string out;
  std::string err_has;  // a piece of the stderr detail, or "" when there is none
};

void PrintTo(const SetErrorCase& c, std::ostream* os) {
  *os << c.what;
}

class SetErrors : public ::testing::TestWithParam<SetErrorCase> {};

// Every case starts from an A2 host whose chip 0 already holds vNPUs 100 (vir10_3c_32g) and 101
// (vir05_1c_16g): 15 of its 20 AICores are taken.
TEST_P(SetErrors, AreRefusedWithTheRealMessageAndChangeNothing) {
  EmulatedHost host;
  ASSERT_EQ(run(create("0", "0", "vir10_3c_32g"), host.root()).exit_code, 0);
  ASSERT_EQ(run(create("0", "0", "vir05_1c_16g"), host.root()).exit_code, 0);
  auto before = *host.emu().snapshot();
  const SetErrorCase& c = GetParam();
  Output o = run(c.args, host.root());
  EXPECT_EQ(o.exit_code, c.exit_code) << o.out << o.err;
  EXPECT_EQ(o.out, c.out);
  if (c.err_has.empty()) {
    EXPECT_EQ(o.err, "");
  } else {
    EXPECT_NE(o.err.find(c.err_has), std::string::npos) << o.err;
  }
  auto after = *host.emu().snapshot();
  EXPECT_EQ(after.generation, before.generation) << "the state must not change";
  EXPECT_EQ(after.vnpus.size(), before.vnpus.size());
}

INSTANTIATE_TEST_SUITE_P(
    Vnpu, SetErrors,
    ::testing::Values(
        SetErrorCase{"unknown template", create("0", "0", "vir99"), kExitInvalidParameter,
                     "Error parameter of -f\n", "valid: vir10_3c_32g, vir05_1c_16g"},
        SetErrorCase{"missing template",
                     {"set", "-t", "create-vnpu", "-i", "0", "-c", "0"},
                     kExitInvalidParameter,
                     "Must input parameter of -f.\n",
                     ""},
        SetErrorCase{"unknown card", create("9", "0", "vir05_1c_16g"), kExitInvalidParameter,
                     "Invalid card id.\nError parameter of -i\n", ""},
        SetErrorCase{"unknown chip", create("0", "1", "vir05_1c_16g"), kExitInvalidParameter,
                     "Invalid chip id.\nError parameter of -c\n", ""},
        SetErrorCase{"missing chip",
                     {"set", "-t", "create-vnpu", "-i", "0", "-f", "vir05_1c_16g"},
                     kExitInvalidParameter,
                     "Must input parameter of chip id.\n",
                     ""},
        SetErrorCase{"AICore over-commit", create("0", "0", "vir10_3c_32g"), kExitNotSupported,
                     "Insufficient number of cores available, unallocated cores number:5.000000.\n", ""},
        SetErrorCase{"vNPU id of another chip",
                     {"set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir05_1c_16g", "-v", "116"},
                     kExitInvalidParameter,
                     "create vnpu failed.\n",
                     "outside device 0's range 100-115"},
        SetErrorCase{"vNPU id in use",
                     {"set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir05_1c_16g", "-v", "100"},
                     kExitInvalidParameter,
                     "create vnpu failed.\n",
                     "already exists"},
        SetErrorCase{"vNPU id not a number",
                     {"set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir05_1c_16g", "-v", "x"},
                     kExitInvalidParameter,
                     "Error parameter of -v\n",
                     ""},
        SetErrorCase{"vGroup",
                     {"set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir05_1c_16g", "-g", "1"},
                     kExitNotSupported,
                     "This device does not support setting create-vnpu with -g.\n",
                     "vGroups"},
        SetErrorCase{"destroy unknown vNPU",
                     {"set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "102"},
                     kExitInvalidParameter,
                     "Error parameter of -v.\n",
                     "no vNPU 102 on card 0 chip 0"},
        SetErrorCase{"destroy on the wrong chip",
                     {"set", "-t", "destroy-vnpu", "-i", "1", "-c", "0", "-v", "100"},
                     kExitInvalidParameter,
                     "Error parameter of -v.\n",
                     "no vNPU 100 on card 1 chip 0"},
        SetErrorCase{"destroy without id",
                     {"set", "-t", "destroy-vnpu", "-i", "0", "-c", "0"},
                     kExitInvalidParameter,
                     "Error parameter of -v.\n",
                     ""},
        SetErrorCase{
            "mode switch with vNPUs",
            {"set", "-t", "vnpu-mode", "-d", "1"},
            kExitResourceOccupied,
            "\tStatus                         : Fail\n\tMessage                        : The vNPU(s) in "
            "another mode already exist. Destroy them before switching the mode\n",
            ""},
        SetErrorCase{"mode without -d",
                     {"set", "-t", "vnpu-mode"},
                     kExitInvalidParameter,
                     "Must input parameter of -d.\n",
                     ""},
        SetErrorCase{"mode out of range",
                     {"set", "-t", "vnpu-mode", "-d", "2"},
                     kExitInvalidParameter,
                     "Error parameter of -d\n",
                     ""},
        SetErrorCase{"unmodelled set type",
                     {"set", "-t", "reset", "-i", "0"},
                     kExitNotSupported,
                     "This device does not support setting reset.\n",
                     ""},
        SetErrorCase{"unknown set type",
                     {"set", "-t", "explode"},
                     kExitInvalidParameter,
                     "Error parameter of -t\n",
                     ""}));

TEST(SmiSet, AicpuOverCommitOn310P) {
  EmulatedHost host("atlas300i-duo");                                   // 8 AICore, 7 AICPU per chip
  ASSERT_EQ(run(create("0", "0", "vir04"), host.root()).exit_code, 0);  // 4 AICore, 4 AICPU
  Output o = run(create("0", "0", "vir04_4c_dvpp"), host.root());       // 4 more AICPU: 8 > 7
  EXPECT_EQ(o.exit_code, kExitNotSupported);
  EXPECT_EQ(o.out, "Insufficient number of AICPU available, unallocated AICPU number:3.\n");
  EXPECT_EQ(host.emu().snapshot()->vnpus.size(), 1U);
}

TEST(SmiSet, MemoryOverCommitIsRefusedByTheEmulator) {
  EmulatedHost host;
  ASSERT_TRUE(host.emu()
                  .update([](HostState& s) -> Status {
                    s.vnpu_capacity.memory_gb = 16;
                    return {};
                  })
                  .ok());
  Output o = run(create("0", "0", "vir10_3c_32g"), host.root());
  EXPECT_EQ(o.exit_code, kExitNotSupported);
  EXPECT_EQ(o.out, "create vnpu failed.\n");
  EXPECT_NE(o.err.find("not enough free memory"), std::string::npos) << o.err;
  EXPECT_TRUE(host.emu().snapshot()->vnpus.empty());
}

TEST(SmiSet, VnpuModeSwitchesWhenNoVnpuExists) {
  EmulatedHost host;
  Output o = run({"set", "-t", "vnpu-mode", "-d", "1"}, host.root());
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_EQ(
      o.out,
      "\tStatus                         : OK\n\tMessage                        : Set vnpu vm mode success\n");
  EXPECT_EQ(run({"info", "-t", "vnpu-mode"}, host.root()).out, "\tvnpu-mode                      : vm\n");
  EXPECT_EQ(host.emu().snapshot()->vnpu_mode, "vm");
}

TEST(SmiSet, UnwritableStateIsAnInternalError) {
  EmulatedHost host;
  // A directory where the emulator's lock file goes: every update fails, for root too.
  std::string lock = host.root() + "/" + kStateDir + "/state.lock";
  ::unlink(lock.c_str());
  ASSERT_EQ(::mkdir(lock.c_str(), 0755), 0);
  Output o = run(create("0", "0", "vir05_1c_16g"), host.root());
  EXPECT_EQ(o.exit_code, kExitInnerError);
  EXPECT_EQ(o.out, "create vnpu failed.\n");
  EXPECT_NE(o.err.find("state.lock"), std::string::npos) << o.err;
  ::rmdir(lock.c_str());
}

// The static binary in the driver tree is the same program: same bytes, same exit code.
TEST(SmiBinary, InstalledNpuSmiMatchesTheLibrary) {
  EmulatedHost host("atlas800t-a3");
  const std::string bin = host.root() + "/usr/local/bin/npu-smi";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"info"}, {"info", "-t", "topo"}, {"info", "-t", "board", "-i", "9"}}) {
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = ascend::testing::run_command(argv, {"ASCEND_SIM_ROOT=" + host.root()});
    Output lib = run(args, host.root());
    EXPECT_EQ(r.exit_code, lib.exit_code);
    EXPECT_EQ(r.out, lib.out);
  }
}

}  // namespace
}  // namespace ascend::npu::smi
