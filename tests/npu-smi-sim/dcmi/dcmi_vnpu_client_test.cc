// The C vNPU client (dcmi_vnpu_client.c) on the SAMPLE K host (800i-a2-910b4.yaml): what it lists through
// dcmi_get_device_info against what `npu-smi info -t info-vnpu` prints on the same host, and against the
// captures themselves (k-info-vnpu-before/after/held.txt, k-template-info.txt). The expected values come
// from those files and from the client's own creation steps, never from the library.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "client_check.h"
#include "emulator_fixture.h"

namespace ascend::npu {
namespace {

using testing::ClientOutput;
using testing::tokens;

const std::string kNpuSmi = std::string(ASCEND_BIN_DIR) + "/npu-smi";
const std::string kHost = std::string(ASCEND_FIXTURES) + "/npu-smi/800i-a2-910b4.yaml";

std::string fixture(const std::string& name) {
  auto text = ascend::read_file(std::string(ASCEND_FIXTURES) + "/npu-smi/" + name);
  EXPECT_TRUE(text.ok()) << name;
  return text.ok() ? *text : "";
}

ascend::testing::CommandResult run_vnpu_client(const std::string& root, int card, int device,
                                               const std::vector<std::string>& templates = {}) {
  std::vector<std::string> argv = {std::string(ASCEND_TESTS_DIR) + "/dcmi_vnpu_client",
                                   std::string(ASCEND_LIB_DIR) + "/libdcmi.so", std::to_string(card),
                                   std::to_string(device)};
  argv.insert(argv.end(), templates.begin(), templates.end());
  return ascend::testing::run_command(argv, {"ASCEND_SIM_ROOT=" + root});
}

// `npu-smi info -t info-vnpu` as text: the Free/Total cells in column order and the vNPU rows.
struct InfoVnpu {
  std::vector<std::string> cells;  // AICORE Memory AICPU VPC VENC VDEC JPEGD JPEGE PNGD
  int count = -1;                  // "Total number of vnpu"
  struct Row {
    std::string id, vgroup, container, status, name;
  };
  std::vector<Row> rows;
};

std::vector<std::string> pipe_cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] != '|') {
      cell += line[i];
      continue;
    }
    auto w = tokens(cell);
    out.push_back(w.empty() ? "" : w[0]);
    cell.clear();
  }
  return out;
}

InfoVnpu parse_info_vnpu(const std::string& text) {
  InfoVnpu r;
  std::istringstream in(text);
  std::string line;
  bool after_rule = false;
  while (std::getline(in, line)) {
    if (line.rfind("|====", 0) == 0) {
      after_rule = true;
      continue;
    }
    auto w = tokens(line.size() > 2 ? line.substr(1, line.size() - 2) : "");
    if (after_rule) {
      r.cells = w;
      after_rule = false;
    } else if (line.find("Total number of vnpu:") != std::string::npos) {
      r.count = std::stoi(w.back());
    } else if (auto c = pipe_cells(line); c.size() == 5 && !c[0].empty() && std::isdigit(c[0][0])) {
      r.rows.push_back({c[0], c[1], c[2], c[3], c[4]});
    }
  }
  return r;
}

// A template of `npu-smi info -t template-info` (two lines per template), by its name: name -> value of
// aicore, memory_gb, aicpu, vpc, venc, jpegd, pngd, vdec, jpege.
std::map<std::string, std::string> template_row(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto w = tokens(line.substr(1, line.size() > 2 ? line.size() - 2 : 0));
    if (w.size() != 7 || w[0] != name) continue;
    std::string next;
    std::getline(in, next);
    auto n = tokens(next.substr(1, next.size() > 2 ? next.size() - 2 : 0));
    if (n.size() != 3) break;
    return {{"aic", w[1]},   {"mem_gb", w[2]}, {"aicpu", w[3]}, {"vpc", w[4]},  {"venc", w[5]},
            {"jpegd", w[6]}, {"pngd", n[0]},   {"vdec", n[1]},  {"jpege", n[2]}};
  }
  return {};
}

// "<key> <value> <key> <value> ..." -> {key: value}.
std::map<std::string, std::string> pairs(const std::vector<std::string>& w, std::size_t from = 0) {
  std::map<std::string, std::string> out;
  for (std::size_t i = from; i + 1 < w.size(); i += 2) out[w[i]] = w[i + 1];
  return out;
}

// npu-smi's Memory cell from the DCMI's MB values, by npu-smi's own rule (its info-vnpu printer): GB =
// MB >> 10, and on a 910B the total is shown as 32 when below 32 and as 64 between 32 and 64.
std::string memory_cell(const std::string& mb) {
  if (mb == "NA/NA") return mb;
  const auto slash = mb.find('/');
  const unsigned long long free_gb = std::stoull(mb.substr(0, slash)) >> 10;
  unsigned long long total_gb = std::stoull(mb.substr(slash + 1)) >> 10;
  if (total_gb < 32) total_gb = 32;
  if (total_gb > 32 && total_gb < 64) total_gb = 64;
  return std::to_string(free_gb) + "/" + std::to_string(total_gb);
}

// The client's chip line in npu-smi's column order.
std::vector<std::string> resource_cells(const ClientOutput& out, int card, int device) {
  const std::string at = std::to_string(card) + " " + std::to_string(device);
  auto r = pairs(out.after("chip " + at + " resources"));
  return {r["aic"], memory_cell(r["mem"]), r["aicpu"], r["vpc"], r["venc"], r["vdec"], r["jpegd"], r["jpege"],
          r["pngd"]};
}

// Every chip the client listed agrees with `npu-smi info -t info-vnpu -i <card> -c <chip>` on this host:
// the Free/Total cells, the vNPU count and each row (id, Vgroup ID, Container ID, Status, Template Name).
void expect_matches_npu_smi(const ClientOutput& out, const std::string& root) {
  int chips = 0;
  std::istringstream in(out.text());
  std::string line;
  while (std::getline(in, line)) {
    auto w = tokens(line);
    if (w.size() < 4 || w[0] != "chip" || w[3] != "vnpus") continue;
    const int card = std::stoi(w[1]);
    const int device = std::stoi(w[2]);
    SCOPED_TRACE(line);
    auto smi = testing::run_npu_smi(kNpuSmi, root, {"info", "-t", "info-vnpu", "-i", w[1], "-c", w[2]});
    ASSERT_EQ(smi.exit_code, 0) << smi.out << smi.err;
    const InfoVnpu want = parse_info_vnpu(smi.out);
    EXPECT_EQ(resource_cells(out, card, device), want.cells);
    ASSERT_EQ(w.size(), 5U + want.rows.size());
    EXPECT_EQ(std::stoi(w[4]), want.count);
    for (std::size_t i = 0; i < want.rows.size(); ++i) {
      const auto& row = want.rows[i];
      EXPECT_EQ(w[5 + i], row.id);
      auto v = pairs(out.after("vnpu " + w[1] + " " + w[2] + " " + row.id));
      EXPECT_EQ(v["name"], row.name);
      EXPECT_EQ(v["vgroup"], row.vgroup);
      EXPECT_EQ(v["container"], row.container);
      EXPECT_EQ(v["used"], row.status);  // npu-smi's Status column is is_container_used
    }
    chips++;
  }
  EXPECT_EQ(chips, 8) << out.text();  // SAMPLE K host: 8 cards of one 910B4
}

// The error paths, on the chip the client was pointed at.
void expect_error_paths(const ClientOutput& out) {
  const std::string invalid = std::to_string(DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(out.after("error small_total"),
            (std::vector<std::string>{"rc", invalid, "size", "359"}));  // *size left as given
  EXPECT_EQ(out.after("error small_vdev"), (std::vector<std::string>{"rc", invalid}));
  EXPECT_EQ(out.after("error unknown_vdev"),
            (std::vector<std::string>{"rc", std::to_string(DCMI_ERR_CODE_DEVICE_NOT_EXIST)}));
  EXPECT_EQ(out.after("error unknown_sub"),
            (std::vector<std::string>{"rc", std::to_string(DCMI_ERR_CODE_NOT_SUPPORT)}));
  EXPECT_EQ(out.after("error unknown_main"),
            (std::vector<std::string>{"rc", std::to_string(DCMI_ERR_CODE_NOT_SUPPORT)}));
  EXPECT_EQ(out.after("error null_size"), (std::vector<std::string>{"rc", invalid}));
  EXPECT_EQ(out.after("error unknown_device"),
            (std::vector<std::string>{"rc", std::to_string(DCMI_ERR_CODE_INVALID_DEVICE_ID)}));
}

TEST(DcmiVnpuClientTest, ListsNoVnpuOnAFreshHostAsCaptured) {
  testing::EmulatedHost host(kHost);
  auto r = run_vnpu_client(host.root(), 0, 0);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ClientOutput out(r.out);
  expect_matches_npu_smi(out, host.root());
  const InfoVnpu before = parse_info_vnpu(fixture("k-info-vnpu-before.txt"));
  EXPECT_EQ(resource_cells(out, 0, 0), before.cells);
  EXPECT_EQ(out.after("chip 0 0 vnpus"), std::vector<std::string>{"0:"});
  // *size is what was written: the reference layouts' sizes on LP64.
  EXPECT_EQ(out.after("chip 0 0 sizes"), (std::vector<std::string>{"360", "224"}));
  expect_error_paths(out);
}

TEST(DcmiVnpuClientTest, ListsTwoCreatedVnpusAsNpuSmiAndTheCaptureShow) {
  testing::EmulatedHost host(kHost);
  auto r = run_vnpu_client(host.root(), 0, 0, {"vir10_3c_16g", "vir10_3c_16g"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ClientOutput out(r.out);
  // The client's own steps: two vir10_3c_16g on card 0 chip 0; ids the lowest free of phy 0 (SAMPLE K).
  EXPECT_EQ(out.count("create 0 0 vir10_3c_16g rc 0 id 100"), 1) << out.text();
  EXPECT_EQ(out.count("create 0 0 vir10_3c_16g rc 0 id 101"), 1) << out.text();
  EXPECT_EQ(out.after("chip 0 0 vnpus"), (std::vector<std::string>{"2:", "100", "101"}));
  expect_matches_npu_smi(out, host.root());

  // The SAMPLE K capture after the same two creations.
  const InfoVnpu after = parse_info_vnpu(fixture("k-info-vnpu-after.txt"));
  EXPECT_EQ(resource_cells(out, 0, 0), after.cells);
  ASSERT_EQ(after.rows.size(), 2U);
  const auto tmpl = template_row(fixture("k-template-info.txt"), "vir10_3c_16g");
  ASSERT_FALSE(tmpl.empty());
  for (const auto& row : after.rows) {
    SCOPED_TRACE(row.id);
    auto v = pairs(out.after("vnpu 0 0 " + row.id));
    EXPECT_EQ(v["name"], row.name);
    EXPECT_EQ(v["vgroup"], row.vgroup);
    EXPECT_EQ(v["vfg"], row.vgroup);
    EXPECT_EQ(v["container"], row.container);
    EXPECT_EQ(v["used"], row.status);
    // The vNPU's resources: its template's row of `npu-smi info -t template-info` (memory there in GB).
    EXPECT_EQ(v["aic"], tmpl.at("aic"));
    EXPECT_EQ(v["mem"], std::to_string(std::stoi(tmpl.at("mem_gb")) * 1024));
    for (const char* k : {"aicpu", "vpc", "venc", "vdec", "jpegd", "jpege", "pngd"})
      EXPECT_EQ(v[k], tmpl.at(k)) << k;
    EXPECT_EQ(v["size"], "264");
  }
  // Another chip of the host holds none.
  EXPECT_EQ(out.after("chip 1 0 vnpus"), std::vector<std::string>{"0:"});
  expect_error_paths(out);
}

TEST(DcmiVnpuClientTest, ShowsTheVnpuAContainerHoldsAsCaptured) {
  testing::EmulatedHost host(kHost);
  // As SAMPLE K's notes describe: vNPU 100 made for (and held by) a container, 101 made by an administrator.
  VnpuOwner owner;
  owner.container_id = "3f2a9c41d0b7e6f5a8c9d2e1b0a3f4c5d6e7f8091a2b3c4d5e6f708192a3b4c5";
  owner.state_root = "/run/docker/runtime-runc/moby";
  ASSERT_TRUE(host.emu().create_vnpu(0, "vir10_3c_16g", std::nullopt, owner).ok());
  ASSERT_TRUE(host.emu().create_vnpu(0, "vir10_3c_16g", std::nullopt, {}).ok());
  auto r = run_vnpu_client(host.root(), 0, 0);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ClientOutput out(r.out);
  expect_matches_npu_smi(out, host.root());
  const InfoVnpu held = parse_info_vnpu(fixture("k-info-vnpu-held.txt"));
  EXPECT_EQ(resource_cells(out, 0, 0), held.cells);
  ASSERT_EQ(held.rows.size(), 2U);
  for (const auto& row : held.rows) {
    SCOPED_TRACE(row.id);
    auto v = pairs(out.after("vnpu 0 0 " + row.id));
    EXPECT_EQ(v["container"], row.container);  // ffffffffffff for 100, 000000000000 for 101
    EXPECT_EQ(v["used"], row.status);
    EXPECT_EQ(v["name"], row.name);
  }
}

}  // namespace
}  // namespace ascend::npu
