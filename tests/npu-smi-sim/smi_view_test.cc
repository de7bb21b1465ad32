// npu-smi's pure parts: which rows a visible set gives, vNPU rows inside a container, and that every
// built-in profile prints well-formed output in its family's layout.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/smi/commands.h"
#include "ascend/npu/smi/format.h"
#include "ascend/npu/smi/view.h"
#include "ascend/npu/smi/vnpu_resources.h"

namespace ascend::npu::smi {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

std::string collapse(const std::string& l) {
  std::istringstream in(l);
  std::string w, out;
  while (in >> w) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

Output query(const HostState& s, const std::vector<std::string>& args,
             std::optional<Visible> v = std::nullopt) {
  return run_query(args, s, v ? *v : all_chips(s));
}

TEST(SmiView, OnlyVisibleChipsAreRows) {
  auto s = *builtin_profile("atlas800t-a2");
  View v = make_view(s, Visible{{1, 3}, {}});
  ASSERT_EQ(v.cards.size(), 2U);
  EXPECT_EQ(v.cards[0].id, 1);
  EXPECT_EQ(v.cards[1].id, 3);
  std::string out = query(s, {"info"}, Visible{{1, 3}, {}}).out;
  EXPECT_NE(out.find("| 1     910B3"), std::string::npos);
  EXPECT_NE(out.find("| 3     910B3"), std::string::npos);
  EXPECT_EQ(out.find("| 0     910B3"), std::string::npos);
  EXPECT_EQ(query(s, {"info", "-t", "board", "-i", "0"}, Visible{{1, 3}, {}}).exit_code,
            kExitInvalidParameter);
  // -l counts the visible cards only.
  EXPECT_EQ(
      query(s, {"info", "-l"}, Visible{{1, 3}, {}}).out.rfind("\tTotal Count                    : 2\n", 0),
      0U);
}

HostState with_vnpu(const std::string& profile, int phy, const std::string& tmpl) {
  auto s = *builtin_profile(profile);
  auto v = plan_vnpu(s, phy, tmpl, std::nullopt);
  EXPECT_TRUE(v.ok()) << v.error().message();
  s.vnpus.push_back(*v);
  return s;
}

TEST(SmiView, AVnpuInAContainerIsARowOfItsOwn) {
  // 310P: chip 3 (card 1, chip 1) split; the container received only vNPU 148 (100 + 16*3).
  HostState s = with_vnpu("atlas300i-duo", 3, "vir01");
  ASSERT_EQ(s.vnpus[0].id, 148);
  Output o = query(s, {"info"}, Visible{{}, {148}});
  ASSERT_EQ(o.exit_code, 0) << o.out;
  auto ls = lines(o.out);
  ASSERT_GE(ls.size(), 8U);
  EXPECT_EQ(ls[6].substr(0, 34), "| 1       310Pvir01             | ");
  // Its memory is the template's (3 GB), its used memory the parent's scaled by 1/8 AICore.
  EXPECT_NE(ls[7].find(" 176  / 3072 "), std::string::npos) << ls[7];
  EXPECT_EQ(ls[7].substr(0, 34), "| 0       0                     | ");
  EXPECT_NE(o.out.find("No running processes found in NPU 1 "), std::string::npos);
  // -m names it after the chip type too.
  EXPECT_NE(query(s, {"info", "-m"}, Visible{{}, {148}}).out.find(" Ascend 310Pvir01\n"), std::string::npos);
  // info-vnpu on a vNPU row is refused.
  EXPECT_EQ(query(s, {"info", "-t", "info-vnpu", "-i", "1", "-c", "0"}, Visible{{}, {148}}).exit_code,
            kExitNotSupported);
}

TEST(SmiView, A910BVnpuRowUsesTheFamilyAndTemplateName) {
  HostState s = with_vnpu("atlas800t-a2", 2, "vir10_3c_32g");
  Output o = query(s, {"info", "-t", "usages", "-i", "2"}, Visible{{}, {s.vnpus[0].id}});
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find(kv("HBM Capacity(MB)", "32768")), std::string::npos) << o.out;
  EXPECT_NE(query(s, {"info"}, Visible{{}, {s.vnpus[0].id}}).out.find("| 2     910Bvir10_3c_32g    | OK"),
            std::string::npos);
}

TEST(SmiView, AVnpuWhoseParentIsVisibleIsNotARow) {
  HostState s = with_vnpu("atlas800t-a2", 0, "vir05_1c_16g");
  View v = make_view(s, Visible{{0}, {100}});
  ASSERT_EQ(v.device_count(), 1U);
  EXPECT_EQ(v.cards[0].devices[0].vnpu, nullptr);
  EXPECT_EQ(v.cards[0].devices[0].name, "910B3");
}

// Each built-in profile prints every query in its family's layout, with no error.
TEST(SmiView, BuiltinProfilesPrintEveryQuery) {
  for (const auto& name : builtin_profile_names()) {
    SCOPED_TRACE(name);
    auto s = *builtin_profile(name);
    const std::size_t width = s.family == Family::k310P ? 106 : 98;
    Output table = query(s, {"info"});
    ASSERT_EQ(table.exit_code, 0) << table.out;
    std::size_t rows = 0;
    for (const auto& l : lines(table.out)) {
      EXPECT_EQ(l.size(), width) << l;
      if (l.rfind("| ", 0) == 0 && l.find(" OK ") != std::string::npos) ++rows;
    }
    EXPECT_EQ(rows, s.chips.size());
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"info", "-l"},
                                               {"info", "-m"},
                                               {"info", "-t", "topo"},
                                               {"info", "-t", "board", "-i", "0"},
                                               {"info", "-t", "board", "-i", "0", "-c", "0"},
                                               {"info", "-t", "usages", "-i", "0"},
                                               {"info", "-t", "common", "-i", "0"},
                                               {"info", "-t", "health", "-i", "0"},
                                               {"info", "-t", "memory", "-i", "0", "-c", "0"},
                                               {"info", "-t", "template-info"},
                                               {"info", "-t", "info-vnpu", "-i", "0", "-c", "0"},
                                               {"info", "-t", "vnpu-mode"}}) {
      Output o = query(s, args);
      EXPECT_EQ(o.exit_code, 0) << args.back() << ": " << o.out;
      EXPECT_FALSE(o.out.empty());
      EXPECT_EQ(o.err, "");
      for (const auto& l : lines(o.out)) {
        // key:value lines are "\t<key padded to 30> : value"
        if (l.size() > 33 && l[0] == '\t' && l.compare(31, 3, " : ") == 0) continue;
        EXPECT_EQ(l.find(" : "), std::string::npos) << "misaligned key:value line: " << l;
      }
    }
  }
}

TEST(SmiView, A3RowsShowPhyIdDieSeparatorAndNoPowerOnDie1) {
  auto s = *builtin_profile("atlas800t-a3");
  auto ls = lines(query(s, {"info"}).out);
  EXPECT_EQ(
      ls[4],
      "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |");
  EXPECT_EQ(ls[6].substr(0, 64), "| 0     Ascend910           | OK            | 211.3       43    ");
  EXPECT_EQ(ls[7].substr(0, 30), "| 0     0                   | ");
  EXPECT_EQ(ls[8], "+" + std::string(96, '-') + "+");
  EXPECT_EQ(ls[9].substr(0, 64), "| 0     Ascend910           | OK            | -           44    ");
  EXPECT_EQ(ls[10].substr(0, 30), "| 1     1                   | ");
}

// SAMPLE O: the A3 topology between dies 2, 3, 12 and 13 (a container holding those four), and the A3 -m
// columns as parsers of real output read them (whitespace collapsed).
TEST(SmiView, A3TopologyAndMappingAsCaptured) {
  auto s = *builtin_profile("atlas800t-a3");
  auto ls = lines(query(s, {"info", "-t", "topo"}, Visible{{2, 3, 12, 13}, {}}).out);
  EXPECT_EQ(rstrip(ls[0]), "\t   Phy-ID2    Phy-ID3    Phy-ID12   Phy-ID13");
  EXPECT_EQ(rstrip(ls[1]), "Phy-ID2    X          SIO        HCCS_SW    HCCS_SW");
  EXPECT_EQ(rstrip(ls[2]), "Phy-ID3    SIO        X          HCCS_SW    HCCS_SW");
  std::string legend = query(s, {"info", "-t", "topo"}).out;
  EXPECT_NE(legend.find("  SIO  = Path traversing the SIO bus.\n"), std::string::npos);
  EXPECT_NE(legend.find("  HCCS_SW = Connection traversing HCCS through a switch.\n"), std::string::npos);
  auto m = lines(query(s, {"info", "-m"}).out);
  ASSERT_GE(m.size(), 5U);
  EXPECT_EQ(collapse(m[0]), "NPU ID Chip ID Chip Logic ID Chip Phy-ID Chip Name");
  EXPECT_EQ(collapse(m[1]), "0 0 0 0 Ascend910");
  EXPECT_EQ(collapse(m[2]), "0 1 1 1 Ascend910");
  EXPECT_EQ(collapse(m[3]), "0 2 - - Mcu");
  EXPECT_EQ(collapse(m[4]), "1 0 2 2 Ascend910");
}

TEST(SmiView, UsagesOfNewerToolsAddUtilizationLines) {
  auto s = *builtin_profile("atlas800t-a2");
  EXPECT_EQ(query(s, {"info", "-t", "usages", "-i", "0"}).out.find("NPU Utilization(%)"), std::string::npos);
  s.smi_version = s.driver_version = "25.5.1";
  std::string out = query(s, {"info", "-t", "usages", "-i", "0"}).out;
  EXPECT_NE(out.find(kv("NPU Utilization(%)", "0") + kv("Aicube Usage Rate(%)", "0") + kv("Chip ID", "0")),
            std::string::npos)
      << out;
}

TEST(SmiView, FaultsShowInTheTableAndInHealth) {
  auto s = *builtin_profile("atlas800t-a3");
  s.chip(3)->faults.push_back({0x80E01801U, Health::kCritical});
  s.chip(3)->faults.push_back({0x80C98000U, Health::kWarning});
  std::string table = query(s, {"info"}).out;
  EXPECT_NE(table.find("| 1     Ascend910           | Critical      | -  "), std::string::npos) << table;
  Output h = query(s, {"info", "-t", "health", "-i", "1", "-c", "1"});
  EXPECT_EQ(h.out, kv("Health Status", "Critical") +
                       "\tError Code                     : 80E01801 80C98000\n" +
                       "\tError Information              : npu-sim fault 0x80E01801, severity Critical\n\n" +
                       kv(" ", "npu-sim fault 0x80C98000, severity Warning"));
  // The card's health is its worst chip's; chip 0 of that card alone is OK.
  EXPECT_EQ(lines(query(s, {"info", "-t", "health", "-i", "1"}).out)[0],
            "\tHealth Status                  : Critical");
  EXPECT_EQ(query(s, {"info", "-t", "health", "-i", "1", "-c", "0"}).out,
            kv("Health Status", "OK") + kv("Error Code", "NA") + kv("Error Information", "NA"));
}

TEST(SmiView, VnpuResourcesOf310PAndA1) {
  // 310P: no HBM reserve, PNGD not queryable.
  HostState duo = with_vnpu("atlas300i-duo", 0, "vir02");
  VnpuResources r = vnpu_resources(duo, 0);
  EXPECT_EQ(r.aicore.free, 6);
  EXPECT_EQ(r.aicore.total, 8);
  EXPECT_EQ(r.memory_gb.free, 18);
  EXPECT_EQ(r.memory_gb.total, 24);
  EXPECT_EQ(r.aicpu.free, 5);
  EXPECT_EQ(r.aicpu.total, 7);
  EXPECT_TRUE(r.pngd.na);
  EXPECT_NE(
      query(duo, {"info", "-t", "info-vnpu", "-i", "0", "-c", "0"}).out.find("| 6/8       18/24     5/7 "),
      std::string::npos);
  // Other chips are untouched.
  EXPECT_EQ(vnpu_resources(duo, 1).aicore.free, 8);
  // A1: vir16 takes half of a 32-AICore, 32 GB chip.
  HostState a1 = with_vnpu("atlas800-9000", 5, "vir16");
  VnpuResources q = vnpu_resources(a1, 5);
  EXPECT_EQ(q.aicore.free, 16);
  EXPECT_EQ(q.memory_gb.free, 16);
  EXPECT_EQ(q.aicpu.free, 7);
  EXPECT_EQ(q.aicpu.total, 14);
}

TEST(SmiView, KeyValueLinesAreTabbedAndPadded) {
  EXPECT_EQ(kv("NPU ID", "0"), "\tNPU ID                         : 0\n");
  EXPECT_EQ(kv("A key that is longer than thirty", "x"), "\tA key that is longer than thirty : x\n");
}

}  // namespace
}  // namespace ascend::npu::smi
