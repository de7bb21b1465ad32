// Golden tests: npu-smi output for hosts that reproduce real captures, compared byte for byte with the
// captures in tests/fixtures/npu-smi (README.md there says where each came from and what, if anything, was
// reconstructed). The host comes from a profile (built-in or fixture YAML) and, where the capture was taken
// inside a container, a visible subset.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ascend/common/fs.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/smi/commands.h"
#include "ascend/npu/smi/view.h"
#include "ascend/npu/workload.h"
#include "run_command.h"
#include "test_dir.h"

namespace ascend::npu::smi {
namespace {

const std::string kDir = std::string(ASCEND_FIXTURES) + "/npu-smi/";

std::string fixture(const std::string& name) {
  auto text = read_file(kDir + name);
  EXPECT_TRUE(text.ok()) << name << ": " << text.error().message();
  return text.ok() ? *text : std::string();
}

HostState profile(const std::string& name) {
  auto p = load_profile(name.find(".yaml") != std::string::npos ? kDir + name : name);
  EXPECT_TRUE(p.ok()) << name << ": " << p.error().message();
  return p.ok() ? *p : HostState{};
}

// Removes the first occurrence of `block` from `text` (and fails the test when it is not there).
std::string without(std::string text, const std::string& block) {
  auto pos = text.find(block);
  EXPECT_NE(pos, std::string::npos) << "expected block not found:\n" << block;
  if (pos != std::string::npos) text.erase(pos, block.size());
  return text;
}

const std::string kClassicEq =
    "+===========================+===============+====================================================+\n";
const std::string kClassicProcHead =
    "+---------------------------+---------------+----------------------------------------------------+\n"
    "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n" +
    kClassicEq;

enum class Match {
  kExact,
  kPrefix,  // the capture stops early: the output must start with it
};

struct Golden {
  const char* fixture = "";
  const char* profile = "";
  std::vector<std::string> args = {};
  std::vector<int> visible = {};  // empty: every chip
  Match match = Match::kExact;
  // Applied to our output before the comparison, for a capture that was edited by its publisher.
  std::function<std::string(const std::string&)> edit = nullptr;
  std::function<void(HostState&)> setup = nullptr;
};

std::vector<Golden> cases() {
  auto two_vnpus = [](HostState& s) {
    for (int k = 0; k < 2; ++k) {
      auto v = plan_vnpu(s, 0, "vir10_3c_16g", std::nullopt);
      ASSERT_TRUE(v.ok()) << v.error().message();
      s.vnpus.push_back(*v);
    }
  };
  // NPU 0 at 80 % AICore, 10 % AICPU, 16 GiB more HBM, as `npu-sim load-gen` records it and a query sees it.
  auto busy = [](HostState& s) {
    s.workloads.push_back(Workload{0, 80, 10, 16384, 0});
    apply_workloads(s, 0);
  };
  return {
      // SAMPLE M: -t power and -t temp of an idle 910B3 (25.5.1); the same layouts with NPU 0 busy, the
      // values derived by hand from the load model (docs/npu-sim.md, "Telemetry").
      {"m-power.txt", "m-910b3-25.5.1.yaml", {"info", "-t", "power", "-i", "0"}},
      {"m-temp.txt", "m-910b3-25.5.1.yaml", {"info", "-t", "temp", "-i", "0"}},
      {"m-power-load.txt",
       "m-910b3-25.5.1.yaml",
       {"info", "-t", "power", "-i", "0"},
       {},
       Match::kExact,
       nullptr,
       busy},
      {"m-temp-load.txt",
       "m-910b3-25.5.1.yaml",
       {"info", "-t", "temp", "-i", "0"},
       {},
       Match::kExact,
       nullptr,
       busy},
      {"m-usages-load.txt",
       "m-910b3-25.5.1.yaml",
       {"info", "-t", "usages", "-i", "0"},
       {},
       Match::kExact,
       nullptr,
       busy},
      // SAMPLE G: the built-in atlas800t-a2 is this host. Its capture ends before the process table.
      {"a2-info.txt", "atlas800t-a2", {"info"}, {}, Match::kPrefix},
      {"a2-topo.txt", "atlas800t-a2", {"info", "-t", "topo"}},
      // SAMPLE L: Atlas 800I A2 (910B4), table with the empty process table, -m, -l.
      {"l-info.txt", "800i-a2-910b4.yaml", {"info"}},
      {"l-mapping.txt", "800i-a2-910b4.yaml", {"info", "-m"}},
      {"l-list.txt", "800i-a2-910b4.yaml", {"info", "-l"}},
      // SAMPLE K on the same host: templates, vnpu-mode, info-vnpu before and after two vir10_3c_16g.
      {"k-template-info.txt", "800i-a2-910b4.yaml", {"info", "-t", "template-info"}},
      {"k-vnpu-mode.txt", "800i-a2-910b4.yaml", {"info", "-t", "vnpu-mode"}},
      {"k-info-vnpu-before.txt", "800i-a2-910b4.yaml", {"info", "-t", "info-vnpu", "-i", "0", "-c", "0"}},
      {"k-info-vnpu-after.txt",
       "800i-a2-910b4.yaml",
       {"info", "-t", "info-vnpu", "-i", "0", "-c", "0"},
       {},
       Match::kExact,
       nullptr,
       two_vnpus},
      // SAMPLE N: A1 "910ProB" with on-chip DDR; SAMPLE B's health query (its argument order) on an A1.
      {"n-a1-info.txt", "a1-910prob.yaml", {"info"}},
      {"b-health.txt", "a1-910prob.yaml", {"info", "-i", "0", "-c", "0", "-t", "health"}},
      // SAMPLE F: A3, 16 dies, Phy-ID column, "-" power on die 1, processes with empty names.
      {"f-a3-info.txt", "a3-processes.yaml", {"info"}},
      // SAMPLE E: its publisher kept only NPU 0 and 5 of the host (here: only their nodes are visible) and
      // also dropped NPU 0's "No running processes" block, which the real tool prints for every NPU.
      {"e-info.txt",
       "a2-910b3-25.5.1.yaml",
       {"info"},
       {0, 5},
       Match::kExact,
       [](const std::string& out) {
         return without(out,
                        "| No running processes found in NPU 0                                            "
                        "                |\n" +
                            kClassicEq);
       }},
      // SAMPLE M: board of card 0 (25.5.1).
      {"m-board.txt", "a2-910b3-25.5.1.yaml", {"info", "-t", "board", "-i", "0"}},
      // SAMPLE A: usages and common of a 910B1 host, npu-smi 23.0.rc2 (no NPU Utilization / Aicube lines).
      {"a-usages.txt", "a2-910b1-23.0.rc2.yaml", {"info", "-t", "usages", "-i", "0"}},
      {"a-common.txt", "a2-910b1-23.0.rc2.yaml", {"info", "-t", "common", "-i", "1"}},
      // SAMPLE I: 310P layout, one Duo card as NPU 2; the capture's process rows are approximate, so the
      // comparison stops after the process table header.
      {"i-310p-info-head.txt", "300i-duo-card2.yaml", {"info"}, {}, Match::kPrefix},
      // SAMPLE J: 310P templates (line 5 normalized to "|===|", see README).
      {"j-310p-template-info.txt", "atlas300i-duo", {"info", "-t", "template-info"}},
  };
}

void PrintTo(const Golden& g, std::ostream* os) {
  *os << g.fixture;
}

class SmiGolden : public ::testing::TestWithParam<Golden> {};

TEST_P(SmiGolden, MatchesCapture) {
  const Golden& g = GetParam();
  HostState s = profile(g.profile);
  if (g.setup) g.setup(s);
  Visible visible = all_chips(s);
  if (!g.visible.empty()) visible.chips = g.visible;
  Output out = run_query(g.args, s, visible);
  ASSERT_EQ(out.exit_code, 0) << out.out << out.err;
  EXPECT_EQ(out.err, "");
  std::string got = g.edit ? g.edit(out.out) : out.out;
  std::string want = fixture(g.fixture);
  if (g.match == Match::kPrefix) {
    ASSERT_GE(got.size(), want.size()) << got;
    EXPECT_EQ(got.substr(0, want.size()), want);
  } else {
    EXPECT_EQ(got, want);
  }
}

std::string name_of(const ::testing::TestParamInfo<Golden>& info) {
  std::string n = info.param.fixture;
  n = n.substr(0, n.find('.'));
  for (char& c : n) {
    if (c == '-') c = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Captures, SmiGolden, ::testing::ValuesIn(cases()), name_of);

// SAMPLE G's capture stops before the process table: what follows it must be that table, empty.
TEST(SmiGoldenExtra, A2InfoContinuesWithTheProcessTable) {
  HostState s = profile("atlas800t-a2");
  std::string out = run_query({"info"}, s, all_chips(s)).out;
  std::string rest = out.substr(fixture("a2-info.txt").size());
  ASSERT_EQ(rest.rfind(kClassicProcHead, 0), 0U) << rest;
  for (int n = 0; n < 8; ++n) {
    EXPECT_NE(rest.find("| No running processes found in NPU " + std::to_string(n) + " "), std::string::npos);
  }
}

// Live values end to end: `npu-sim load-gen` (another process) changes what npu-smi prints, in the real
// layouts; --stop brings the captured idle values back; -c leaves the MCU's sensors out.
TEST(SmiGoldenExtra, LoadGenShowsInPowerTempAndUsages) {
  ascend::testing::TempDir dir;
  Emulator emu(dir.path() + "/root");
  LoadOptions opts;
  opts.make_nodes = false;
  opts.majors = DeviceMajors{234, 235, 236, 237, 238};
  opts.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
  ASSERT_TRUE(emu.load(profile("m-910b3-25.5.1.yaml"), opts).ok());
  const std::string root = emu.root();
  const std::string sim = std::string(ASCEND_BIN_DIR) + "/npu-sim";
  auto r = ascend::testing::run_command(
      {sim, "load-gen", "--device", "0", "--util", "80", "--aicpu", "10", "--hbm", "16", "--root", root});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run({"info", "-t", "power", "-i", "0"}, root).out, fixture("m-power-load.txt"));
  EXPECT_EQ(run({"info", "-t", "temp", "-i", "0"}, root).out, fixture("m-temp-load.txt"));
  EXPECT_EQ(run({"info", "-t", "usages", "-i", "0"}, root).out, fixture("m-usages-load.txt"));
  const std::string table = run({"info"}, root).out;
  EXPECT_NE(table.find("| 0     910B3               | OK            | 340.7       67 "), std::string::npos)
      << table;
  EXPECT_NE(
      table.find("| 0                         | 0000:C1:00.0  | 80          0    / 0          19702/ 65536"),
      std::string::npos)
      << table;
  EXPECT_EQ(run({"info", "-t", "temp", "-i", "0", "-c", "0"}, root).out,
            "\tNPU ID                         : 0\n\tChip Count                     : 1\n\n"
            "\tNPU Temperature (C)            : 67\n\tChip ID                        : 0\n");
  r = ascend::testing::run_command({sim, "load-gen", "--device", "0", "--stop", "--root", root});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run({"info", "-t", "power", "-i", "0"}, root).out, fixture("m-power.txt"));
  EXPECT_EQ(run({"info", "-t", "temp", "-i", "0"}, root).out, fixture("m-temp.txt"));
}

// SAMPLE K end to end: `npu-smi set` through the emulator's state file, then the same queries.
TEST(SmiGoldenExtra, VnpuCreateAndDestroyAsCaptured) {
  ascend::testing::TempDir dir;
  Emulator emu(dir.path() + "/root");
  LoadOptions opts;
  opts.make_nodes = false;
  opts.majors = DeviceMajors{234, 235, 236, 237, 238};
  opts.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
  ASSERT_TRUE(emu.load(profile("800i-a2-910b4.yaml"), opts).ok());
  const std::string root = emu.root();
  const std::vector<std::string> create = {"set", "-t", "create-vnpu", "-i",          "0",
                                           "-c",  "0",  "-f",          "vir10_3c_16g"};
  for (int k = 0; k < 2; ++k) {
    Output o = run(create, root);
    EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
    EXPECT_EQ(o.out, fixture("k-create.txt"));
  }
  EXPECT_EQ(run({"info", "-t", "info-vnpu", "-i", "0", "-c", "0"}, root).out,
            fixture("k-info-vnpu-after.txt"));
  Output d = run({"set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "100"}, root);
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_EQ(d.out, fixture("k-destroy.txt"));
  auto snap = emu.read_state();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->vnpus.size(), 1U);
  EXPECT_EQ(snap->vnpus[0].id, 101);
}

// A vNPU that a container holds (the runtime tagged it when it made it) shows as the real tool shows it:
// Container ID ffffffffffff, Status 1; the static one beside it stays 000000000000 / 0.
TEST(SmiGoldenExtra, VnpuHeldByAContainerAsCaptured) {
  ascend::testing::TempDir dir;
  Emulator emu(dir.path() + "/root");
  LoadOptions opts;
  opts.make_nodes = false;
  opts.majors = DeviceMajors{234, 235, 236, 237, 238};
  opts.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
  ASSERT_TRUE(emu.load(profile("800i-a2-910b4.yaml"), opts).ok());
  VnpuOwner owner;
  owner.container_id = "3f2a9c41d0b7e6f5a8c9d2e1b0a3f4c5d6e7f8091a2b3c4d5e6f708192a3b4c5";
  owner.state_root = "/run/docker/runtime-runc/moby";
  ASSERT_TRUE(emu.create_vnpu(0, "vir10_3c_16g", std::nullopt, owner).ok());
  ASSERT_TRUE(emu.create_vnpu(0, "vir10_3c_16g", std::nullopt, {}).ok());
  EXPECT_EQ(run({"info", "-t", "info-vnpu", "-i", "0", "-c", "0"}, emu.root()).out,
            fixture("k-info-vnpu-held.txt"));
}

}  // namespace
}  // namespace ascend::npu::smi
