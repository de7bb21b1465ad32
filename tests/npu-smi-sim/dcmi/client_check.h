// Runs the C DCMI client (dcmi_client.c) on an emulated host and holds what it prints against two
// outside sources: npu-smi of the same host (table, -m, -t topo, -t board, hccn.conf) and the expectations
// derived from the reference captures (tests/fixtures/dcmi/, tests/fixtures/npu-smi/a2-topo.txt).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ascend/common/fs.h"
#include "dcmi_interface_api.h"
#include "run_command.h"

namespace ascend::npu::testing {

inline std::vector<std::string> tokens(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string t;
  while (in >> t) out.push_back(t);
  return out;
}

inline std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// The client's lines, looked up by their leading words ("dev 0 0 chip").
class ClientOutput {
 public:
  explicit ClientOutput(const std::string& text) : text_(text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) lines_.push_back(line);
  }
  // The words after `prefix` on the line that starts with it; empty when there is none.
  std::vector<std::string> after(const std::string& prefix) const {
    for (const auto& l : lines_) {
      if (l.rfind(prefix + " ", 0) == 0) return tokens(l.substr(prefix.size()));
    }
    return {};
  }
  int count(const std::string& prefix) const {
    return static_cast<int>(std::count_if(lines_.begin(), lines_.end(),
                                          [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::vector<std::string> lines_;
};

// Runs the client with the built library (or `library`), the host root in $ASCEND_SIM_ROOT (empty: the
// library finds its host from where it is installed), and optionally a vNPU template to create and destroy.
inline ascend::testing::CommandResult run_client(const std::string& root, const std::string& tmpl = "",
                                                 const std::string& library = "") {
  std::vector<std::string> argv = {std::string(ASCEND_TESTS_DIR) + "/dcmi_client",
                                   library.empty() ? std::string(ASCEND_LIB_DIR) + "/libdcmi.so" : library};
  if (!tmpl.empty()) argv.push_back(tmpl);
  // An empty root leaves the variable empty (the library then ignores it), whatever the caller's is.
  std::vector<std::string> env = {"ASCEND_SIM_ROOT=" + root};
  return ascend::testing::run_command(argv, env);
}

inline ascend::testing::CommandResult run_npu_smi(const std::string& npu_smi, const std::string& root,
                                                  const std::vector<std::string>& args) {
  std::vector<std::string> argv = {npu_smi};
  argv.insert(argv.end(), args.begin(), args.end());
  return ascend::testing::run_command(argv, {"ASCEND_SIM_ROOT=" + root});
}

// "\tKey   : value" lines of npu-smi -> {Key: value}.
inline std::map<std::string, std::string> key_values(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(" : ");
    if (colon == std::string::npos) continue;
    auto key = tokens(line.substr(0, colon));
    std::string k;
    for (const auto& w : key) k += (k.empty() ? "" : " ") + w;
    auto v = line.substr(colon + 3);
    while (!v.empty() && v.back() == ' ') v.pop_back();
    out[k] = v;
  }
  return out;
}

inline std::string health_code_of(const std::string& npu_smi_health) {
  // reference dcmi_get_device_health: 0 normal, 1 minor, 2 major, 3 critical
  static const std::map<std::string, std::string> m = {
      {"OK", "0"}, {"Warning", "1"}, {"Alarm", "2"}, {"Critical", "3"}};
  auto it = m.find(npu_smi_health);
  return it == m.end() ? "?" : it->second;
}

inline std::string topo_code_of(const std::string& link) {
  // reference enum dcmi_topo_type: SELF 0, SYS 1, PHB 2, HCCS 3, PXB 4, PIX 5, BUTT 6
  static const std::map<std::string, std::string> m = {
      {"X", "0"}, {"SYS", "1"}, {"PHB", "2"}, {"HCCS", "3"}, {"PXB", "4"}, {"PIX", "5"}, {"NA", "6"}};
  auto it = m.find(link);
  return it == m.end() ? "?" : it->second;
}

struct TableRow {
  int card = -1;
  int chip = -1;
  std::string name, health, bus;
  std::string temp, hbm_used, hbm_total, mem_used, mem_total, aicore;
};

// The rows of `npu-smi info` (A2 classic layout: two lines per chip).
inline std::vector<TableRow> parse_info_table(const std::string& text) {
  std::vector<TableRow> rows;
  std::istringstream in(text);
  std::string line;
  TableRow cur;
  bool half = false;
  auto cells = [](const std::string& l) {
    std::vector<std::string> out;
    std::string cell;
    std::istringstream s(l);
    while (std::getline(s, cell, '|')) out.push_back(cell);
    return out;
  };
  while (std::getline(in, line)) {
    if (line.rfind("| No running", 0) == 0 || line.find("Process") != std::string::npos) break;
    auto c = cells(line);
    if (c.size() < 4 || c[0] != "") continue;
    auto first = tokens(c[1]);
    if (first.empty() || !std::isdigit(static_cast<unsigned char>(first[0][0]))) continue;
    // "%-5d/" runs a five-digit number into its slash ("61609/ 65536"): split on the slash too.
    std::string usage = c[3];
    for (std::size_t p = usage.find('/'); p != std::string::npos; p = usage.find('/', p + 3)) {
      usage.replace(p, 1, " / ");
    }
    auto third = tokens(usage);
    if (!half && first.size() >= 2 && third.size() >= 5) {
      cur = TableRow{};
      cur.card = std::stoi(first[0]);
      cur.name = first[1];
      cur.health = tokens(c[2]).at(0);
      cur.temp = third[1];
      half = true;
    } else if (half && third.size() >= 4) {
      cur.chip = std::stoi(first[0]);
      cur.bus = tokens(c[2]).at(0);
      cur.aicore = third[0];
      cur.mem_used = third[1];
      cur.mem_total = third[3];
      if (third.size() >= 7) {  // no HBM columns on 310P
        cur.hbm_used = third[4];
        cur.hbm_total = third[6];
      }
      rows.push_back(cur);
      half = false;
    }
  }
  return rows;
}

// `npu-smi info -t topo`: links[i][j] and affinity[i], rows in NPU order.
struct Topo {
  std::vector<std::vector<std::string>> links;
  std::vector<std::string> affinity;
};

inline Topo parse_topo(const std::string& text) {
  Topo t;
  std::istringstream in(text);
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    auto w = tokens(line);
    if (w.empty()) continue;
    // Labels are NPU<i> (one chip per card) or Phy-ID<i> (A3: two dies per card), in device order.
    auto label = [](const std::string& x) { return x.rfind("NPU", 0) == 0 || x.rfind("Phy-ID", 0) == 0; };
    if (n == 0 && (w[0] == "NPU0" || w[0] == "Phy-ID0")) {
      n = static_cast<std::size_t>(std::count_if(w.begin(), w.end(), label));
      continue;
    }
    if (n == 0 || !label(w[0]) || w.size() < n + 1) continue;
    t.links.emplace_back(w.begin() + 1, w.begin() + 1 + static_cast<std::ptrdiff_t>(n));
    t.affinity.push_back(w.size() > n + 1 ? w[n + 1] : "-");
  }
  return t;
}

inline std::string dev(int card, int device, const std::string& what) {
  return "dev " + std::to_string(card) + " " + std::to_string(device) + " " + what;
}

// Every visible device of `npu-smi info`, its -m logic id, -t board chip facts, -t topo row and the
// host's hccn.conf address, against what the client printed for the same (card, chip).
inline void expect_client_matches_npu_smi(const ClientOutput& client, const std::string& npu_smi,
                                          const std::string& root) {
  auto info = run_npu_smi(npu_smi, root, {"info"});
  ASSERT_EQ(info.exit_code, 0) << info.out << info.err;
  auto rows = parse_info_table(info.out);
  ASSERT_FALSE(rows.empty()) << info.out;
  EXPECT_EQ(client.count("dev "), static_cast<int>(rows.size()) * 9) << client.text();
  auto cards = client.after("cards");
  std::vector<std::string> smi_cards;
  for (const auto& r : rows) {
    if (r.chip == 0) smi_cards.push_back(std::to_string(r.card));
  }
  ASSERT_FALSE(cards.empty()) << client.text();
  EXPECT_EQ(cards[0], std::to_string(smi_cards.size()) + ":");
  EXPECT_EQ(std::vector<std::string>(cards.begin() + 1, cards.end()), smi_cards);

  auto hccn = ascend::read_file(root + "/etc/hccn.conf");
  ASSERT_TRUE(hccn.ok());
  auto hccn_kv = [&](const std::string& key) {
    std::istringstream in(*hccn);
    std::string l;
    while (std::getline(in, l)) {
      if (l.rfind(key + "=", 0) == 0) return l.substr(key.size() + 1);
    }
    return std::string();
  };

  for (const auto& r : rows) {
    SCOPED_TRACE("npu-smi card " + std::to_string(r.card) + " chip " + std::to_string(r.chip));
    auto chip = client.after(dev(r.card, r.chip, "chip"));
    ASSERT_GE(chip.size(), 5U) << client.text();
    EXPECT_EQ(chip[1], r.name);
    EXPECT_EQ(client.after(dev(r.card, r.chip, "health")).at(0), health_code_of(r.health));
    auto hbm = client.after(dev(r.card, r.chip, "hbm"));
    if (r.hbm_total.empty()) {
      EXPECT_EQ(hbm, (std::vector<std::string>{"rc", std::to_string(DCMI_ERR_CODE_NOT_SUPPORT)}));
    } else {
      ASSERT_GE(hbm.size(), 6U);
      EXPECT_EQ(hbm[0], r.hbm_total);
      EXPECT_EQ(hbm[1], r.hbm_used);
    }
    auto mem = client.after(dev(r.card, r.chip, "memory"));
    ASSERT_GE(mem.size(), 1U);
    EXPECT_EQ(mem[0], r.mem_total);
    auto temp = client.after(dev(r.card, r.chip, "temp"));
    if (r.hbm_total.empty()) {  // the client asks for the HBM rate on the same line
      EXPECT_EQ(temp, (std::vector<std::string>{"rc", std::to_string(DCMI_ERR_CODE_NOT_SUPPORT)}));
    } else {
      ASSERT_GE(temp.size(), 3U);
      EXPECT_EQ(temp[0], r.temp);
      EXPECT_EQ(temp[2], r.aicore);
    }
    auto pcie = client.after(dev(r.card, r.chip, "pcie"));
    ASSERT_EQ(pcie.size(), 3U);
    EXPECT_EQ(upper(pcie[2]), upper(r.bus));

    auto board = key_values(
        run_npu_smi(npu_smi, root,
                    {"info", "-t", "board", "-i", std::to_string(r.card), "-c", std::to_string(r.chip)})
            .out);
    if (board.count("Chip Type") != 0) {
      EXPECT_EQ(chip[0], board["Chip Type"]);
    }
    EXPECT_EQ(chip[2], board["Chip Version"]);
    auto card_board =
        key_values(run_npu_smi(npu_smi, root, {"info", "-t", "board", "-i", std::to_string(r.card)}).out);
    EXPECT_EQ(upper("0x" + pcie[0].substr(0, 4)), upper(card_board["PCI Vendor ID"]));
    EXPECT_EQ(upper("0x" + pcie[0].substr(5)), upper(card_board["PCI Device ID"]));
    EXPECT_EQ(upper("0x" + pcie[1].substr(0, 4)), upper(card_board["Subsystem Vendor ID"]));
    EXPECT_EQ(upper("0x" + pcie[1].substr(5)), upper(card_board["Subsystem Device ID"]));
    auto common = key_values(
        run_npu_smi(npu_smi, root,
                    {"info", "-t", "common", "-i", std::to_string(r.card), "-c", std::to_string(r.chip)})
            .out);
    if (common.count("Aicore Count") != 0) {  // the 910 families print it
      EXPECT_EQ(chip[4], common["Aicore Count"]);
    }

    auto ip = client.after(dev(r.card, r.chip, "ip"));
    ASSERT_EQ(ip.size(), 2U);
    auto phy = std::stoi(board["Chip Position ID"]);
    EXPECT_EQ(ip[0], hccn_kv("address_" + std::to_string(phy)));
    EXPECT_EQ(ip[1], hccn_kv("netmask_" + std::to_string(phy)));
    EXPECT_EQ(client.after("phy " + std::to_string(phy)),
              (std::vector<std::string>{"logic", client.after(dev(r.card, r.chip, "logic")).at(0)}));
  }

  // -m: NPU ID, Chip ID, Chip Logic ID per line.
  auto mapping = run_npu_smi(npu_smi, root, {"info", "-m"});
  std::istringstream in(mapping.out);
  std::string line;
  int mapped = 0;
  while (std::getline(in, line)) {
    auto w = tokens(line);
    // Rows of chips only: the MCU row has no logic id ("-").
    if (w.size() < 4 || !std::isdigit(static_cast<unsigned char>(w[0][0])) ||
        !std::isdigit(static_cast<unsigned char>(w[2][0]))) {
      continue;
    }
    auto logic = client.after(dev(std::stoi(w[0]), std::stoi(w[1]), "logic"));
    ASSERT_FALSE(logic.empty()) << line;
    EXPECT_EQ(logic[0], w[2]) << line;
    mapped++;
  }
  EXPECT_EQ(mapped, static_cast<int>(rows.size()));

  // -t topo: NPU i is the i-th row of the table.
  auto topo = parse_topo(run_npu_smi(npu_smi, root, {"info", "-t", "topo"}).out);
  ASSERT_EQ(topo.links.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& a = rows[i];
    auto affinity = client.after(dev(a.card, a.chip, "affinity"));
    EXPECT_EQ(affinity, std::vector<std::string>{topo.affinity[i]});
    for (std::size_t j = 0; j < rows.size(); ++j) {
      const auto& b = rows[j];
      auto code = client.after("topo " + std::to_string(a.card) + " " + std::to_string(a.chip) + " " +
                               std::to_string(b.card) + " " + std::to_string(b.chip));
      std::string want =
          topo.links[i][j] == "SIO" || topo.links[i][j] == "HCCS_SW" ? "3" : topo_code_of(topo.links[i][j]);
      EXPECT_EQ(code, std::vector<std::string>{want}) << "NPU" << i << " NPU" << j;
    }
  }
}

// The built-in atlas800t-a2 host against tests/fixtures/dcmi/atlas800t-a2.devices and the SAMPLE G topo.
inline void expect_client_matches_a2_captures(const ClientOutput& client) {
  std::ifstream f(std::string(ASCEND_FIXTURES) + "/dcmi/atlas800t-a2.devices");
  ASSERT_TRUE(f.good());
  std::string line;
  int devices = 0;
  while (std::getline(f, line)) {
    auto w = tokens(line);
    if (w.empty() || w[0][0] == '#') continue;
    ASSERT_EQ(w.size(), 9U) << line;
    const int card = std::stoi(w[0]);
    const int device = std::stoi(w[1]);
    SCOPED_TRACE(line);
    EXPECT_EQ(client.after(dev(card, device, "chip")),
              (std::vector<std::string>{"Ascend", w[2], "V1", "aicore", "20"}));  // SAMPLE M/L board
    auto pcie = client.after(dev(card, device, "pcie"));
    ASSERT_EQ(pcie.size(), 3U);
    EXPECT_EQ(pcie[0], "19e5:d802");  // SAMPLE M
    EXPECT_EQ(pcie[1], "19e5:3003");
    EXPECT_EQ(upper(pcie[2]), w[3]);
    auto hbm = client.after(dev(card, device, "hbm"));
    ASSERT_GE(hbm.size(), 2U);
    EXPECT_EQ(hbm[0], w[4]);
    EXPECT_EQ(hbm[1], w[5]);
    EXPECT_EQ(client.after(dev(card, device, "temp")).at(0), w[6]);
    EXPECT_EQ(client.after(dev(card, device, "affinity")), std::vector<std::string>{w[7]});
    EXPECT_EQ(client.after(dev(card, device, "ip")).at(0), w[8]);
    EXPECT_EQ(client.after(dev(card, device, "health")), (std::vector<std::string>{"0", "errors", "0"}));
    EXPECT_EQ(client.after(dev(card, device, "memory")).at(0), "0");  // SAMPLE M: DDR Capacity(MB) 0
    devices++;
  }
  EXPECT_EQ(devices, 8);
  auto topo_text = ascend::read_file(std::string(ASCEND_FIXTURES) + "/npu-smi/a2-topo.txt");
  ASSERT_TRUE(topo_text.ok());
  auto topo = parse_topo(*topo_text);
  ASSERT_EQ(topo.links.size(), 8U);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(client.after("topo " + std::to_string(i) + " 0 " + std::to_string(j) + " 0"),
                std::vector<std::string>{
                    topo_code_of(topo.links[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)])});
    }
  }
}

}  // namespace ascend::npu::testing
