// The npu-sim binary: usage, exit codes and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "run_command.h"
#include "test_dir.h"

namespace ascend {
namespace {

using testing::run_command;
const std::string kSim = std::string(ASCEND_BIN_DIR) + "/npu-sim";
const std::string kFixtures = ASCEND_FIXTURES;

TEST(NpuSimCli, HelpDocumentsExitCodes) {
  auto r = run_command({kSim, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
  EXPECT_NE(r.out.find("load"), std::string::npos);
}

TEST(NpuSimCli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_command({kSim}).exit_code, 2);
  EXPECT_EQ(run_command({kSim, "load"}).exit_code, 2);  // --profile is required
  EXPECT_EQ(run_command({kSim, "frobnicate"}).exit_code, 2);
  auto bad_code =
      run_command({kSim, "fault", "set", "--device", "0", "--code", "xyz", "--root", "/tmp/none"});
  EXPECT_EQ(bad_code.exit_code, 2);
  EXPECT_NE(bad_code.err.find("--code: 'xyz': expected a hexadecimal code"), std::string::npos)
      << bad_code.err;
  for (const char* code : {"0x", "0x1FFFFFFFF", "80E01801 ", "-1"}) {
    EXPECT_EQ(
        run_command({kSim, "fault", "set", "--device", "0", "--code", code, "--root", "/tmp/none"}).exit_code,
        2)
        << code;
  }
  auto bad_severity = run_command({kSim, "fault", "set", "--device", "0", "--code", "0x80E01801",
                                   "--severity", "ok", "--root", "/tmp/none"});
  EXPECT_EQ(bad_severity.exit_code, 2);
  EXPECT_NE(bad_severity.err.find("--severity: 'ok': use warning, alarm or critical"), std::string::npos)
      << bad_severity.err;
  // --majors must be five numbers, for load and for reboot
  auto bad_load =
      run_command({kSim, "load", "--profile", "atlas800t-a2", "--root", "/tmp/none", "--majors", "1,2"});
  auto bad_reboot = run_command({kSim, "reboot", "--root", "/tmp/none", "--majors", "1,2"});
  for (const auto* bad : {&bad_load, &bad_reboot}) {
    EXPECT_EQ(bad->exit_code, 2);
    EXPECT_NE(bad->err.find("--majors: '1,2': expected five numbers"), std::string::npos) << bad->err;
  }
  for (const char* majors : {"1,2,3,4,5,6", "1,2,3,4,", "a,b,c,d,e", "1,2,3,4,-5"}) {
    EXPECT_EQ(run_command({kSim, "reboot", "--root", "/tmp/none", "--majors", majors}).exit_code, 2)
        << majors;
  }
}

TEST(NpuSimCli, FailuresExitOneWithOneLine) {
  testing::TempDir d;
  auto r = run_command(
      {kSim, "load", "--profile", "atlas9000", "--root", d / "root", "--majors", "234,235,236,237,238"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("npu-sim: unknown profile 'atlas9000'", 0), 0U) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  auto st = run_command({kSim, "status", "--root", d / "root"});
  EXPECT_EQ(st.exit_code, 1);
  EXPECT_NE(st.err.find("npu-sim load --profile"), std::string::npos);
  auto yaml =
      run_command({kSim, "load", "--profile", kFixtures + "/npu-sim/bad-field.yaml", "--root", d / "root"});
  EXPECT_EQ(yaml.exit_code, 1);
  EXPECT_NE(yaml.err.find("unknown field 'nmae'"), std::string::npos) << yaml.err;
}

TEST(NpuSimCli, LoadStatusFaultUnload) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: load makes device nodes";
  testing::TempDir d;
  const std::string root = d / "root";
  auto load = run_command({kSim, "load", "--profile", "atlas800t-a3", "--root", root});
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_EQ(run_command({kSim, "fault", "set", "--device", "4", "--code", "0x8C084E00"},
                        {"ASCEND_SIM_ROOT=" + root})
                .exit_code,
            0);
  auto js = run_command({kSim, "status", "--json", "--root", root});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["profile"], "atlas800t-a3");
  EXPECT_EQ(j["chips"].size(), 16U);
  EXPECT_EQ(j["chips"][4]["health"], "Critical");
  EXPECT_EQ(j["chips"][3]["health"], "OK");
  auto text = run_command({kSim, "status", "--root", root});
  EXPECT_NE(text.out.find("fault 0x8C084E00 Critical"), std::string::npos) << text.out;
  EXPECT_EQ(run_command({kSim, "fault", "clear", "--device", "4", "--root", root}).exit_code, 0);
  EXPECT_EQ(run_command({kSim, "unload", "--root", root}).exit_code, 0);
  EXPECT_EQ(run_command({kSim, "unload", "--root", root}).exit_code, 1);
}

}  // namespace
}  // namespace ascend
