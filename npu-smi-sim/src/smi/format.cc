#include "ascend/npu/smi/format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <vector>

#include <fmt/printf.h>

#include "ascend/npu/smi/telemetry.h"
#include "ascend/npu/smi/vnpu_resources.h"

namespace ascend::npu::smi {

namespace {

// The layouts are specified as printf formats (the real tool's), so they are written as such, with fmt's
// type-checked sprintf.

std::string ljust(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string line(char edge, char fill, std::size_t inner) {
  return edge + std::string(inner, fill) + edge + "\n";
}

bool is_910_family(Family f) {
  return f == Family::k910 || f == Family::k910B || f == Family::k910_93;
}
bool no_ddr(Family f) {
  return f == Family::k910B || f == Family::k910_93;
}

int pct(long long used, long long total) {
  return total > 0 ? static_cast<int>(used * 100 / total) : 0;
}

// The leading number of a version string ("25.0.rc1.1" -> 25); 0 when there is none.
int major_version(const std::string& v) {
  int n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') break;
    n = n * 10 + (c - '0');
  }
  return n;
}

// ---- the info table ------------------------------------------------------------------------------------

constexpr const char* kClassicSep =
    "+---------------------------+---------------+----------------------------------------------------+\n";
constexpr const char* kClassicEq =
    "+===========================+===============+====================================================+\n";
constexpr const char* kClassicHdr1 =
    "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n";
constexpr const char* kClassicHdr2 =
    "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n";
constexpr const char* kClassicHdr2A3 =
    "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n";
constexpr const char* kClassicProcHdr =
    "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n";

constexpr const char* k310Sep =
    "+-------------------------------+-----------------+-----------------------------------------------------"
    "-+\n";
constexpr const char* k310Eq =
    "+===============================+=================+====================================================="
    "=+\n";
constexpr const char* k310Hdr1 =
    "| NPU     Name                  | Health          | Power(W)     Temp(C)           "
    "Hugepages-Usage(page) |\n";
constexpr const char* k310Hdr2 =
    "| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                       "
    " |\n";
constexpr const char* k310ProcHdr =
    "| NPU     Chip                  | Process id      | Process name             | Process memory(MB)       "
    " |\n";

std::string health_text(const Device& d) {
  return std::string(to_string(d.chip->health()));
}

// The process block of the tables: per card, its chips' processes (one row each, in the layout's format) or
// the "No running processes" line padded to the layout's width, then the layout's "=" separator.
template <typename Row>
std::string process_rows(const View& v, std::size_t width, const char* eq, Row row) {
  std::string out;
  for (const Card& card : v.cards) {
    bool any = false;
    for (const Device& d : card.devices) {
      if (d.vnpu != nullptr) continue;  // a vNPU's processes are not the chip's
      for (const Process& p : d.chip->processes) {
        out += row(card, d, p);
        any = true;
      }
    }
    if (!any) out += ljust(fmt::sprintf("| No running processes found in NPU %-7d", card.id), width) + "|\n";
    out += eq;
  }
  return out;
}

std::string classic_table(const View& v) {
  const HostState& s = *v.state;
  const bool a3 = s.family == Family::k910_93;
  std::string out = line('+', '-', 96);
  out += fmt::sprintf("| npu-smi %-24s Version: %-53s|\n", s.smi_version.c_str(), s.driver_version.c_str());
  out += kClassicSep;
  out += kClassicHdr1;
  out += a3 ? kClassicHdr2A3 : kClassicHdr2;
  out += kClassicEq;
  for (const Card& card : v.cards) {
    for (std::size_t i = 0; i < card.devices.size(); ++i) {
      const Device& d = card.devices[i];
      const Chip& c = *d.chip;
      if (i > 0) out += line('+', '-', 96);
      out += fmt::sprintf("| %-5d %-20s| %-13s | %-11s %-17d %-5d/ %-14d|\n", card.id, d.name.c_str(),
                          health_text(d).c_str(), power_text(s, c).c_str(), c.temp_c, c.hugepages_used,
                          c.hugepages_total);
      std::string chip_col =
          a3 ? fmt::sprintf("%-5d %d", d.chip_index, d.phy_id) : std::to_string(d.chip_index);
      const int mem_used = no_ddr(s.family) ? 0 : d.mem_used_mb;
      const int mem_total = no_ddr(s.family) ? 0 : d.mem_total_mb;
      out += fmt::sprintf("| %-26s| %-13s | %-11d %-5d/ %-10d %-5d/ %-14d|\n", chip_col.c_str(),
                          c.bus_id.c_str(), d.aicore_usage_pct, mem_used, mem_total, d.hbm_used_mb,
                          d.hbm_total_mb);
    }
    out += kClassicEq;
  }
  out += kClassicSep;
  out += kClassicProcHdr;
  out += kClassicEq;
  out += process_rows(v, 97, kClassicEq, [](const Card& card, const Device& d, const Process& p) {
    return fmt::sprintf("| %-7d %-18d| %-13d | %-24s | %-24d|\n", card.id, d.chip_index, p.pid,
                        p.name.c_str(), p.memory_mb);
  });
  return out;
}

std::string table_310p(const View& v) {
  const HostState& s = *v.state;
  std::string out = line('+', '-', 104);
  out += fmt::sprintf("| npu-smi %-40s Version: %-45s|\n", s.smi_version.c_str(), s.driver_version.c_str());
  out += k310Sep;
  out += k310Hdr1;
  out += k310Hdr2;
  out += k310Eq;
  for (const Card& card : v.cards) {
    for (std::size_t i = 0; i < card.devices.size(); ++i) {
      const Device& d = card.devices[i];
      const Chip& c = *d.chip;
      if (i > 0) out += k310Sep;
      out += fmt::sprintf("| %-7d %-22s| %-15s | %-12s %-17d %-6d/ %-13d |\n", card.id, d.name.c_str(),
                          health_text(d).c_str(), power_text(s, c).c_str(), c.temp_c, c.hugepages_used,
                          c.hugepages_total);
      out += fmt::sprintf("| %-7d %-22d| %-15s | %-12d %-5d/ %-32d |\n", d.chip_index, d.logic_id,
                          c.bus_id.c_str(), d.aicore_usage_pct, d.mem_used_mb, d.mem_total_mb);
    }
    out += k310Eq;
  }
  out += k310Sep;
  out += k310ProcHdr;
  out += k310Eq;
  out += process_rows(v, 105, k310Eq, [](const Card& card, const Device& d, const Process& p) {
    return fmt::sprintf("| %-7d %-22d| %-15d | %-24s | %-25d |\n", card.id, d.chip_index, p.pid,
                        p.name.c_str(), p.memory_mb);
  });
  return out;
}

// ---- key:value outputs ---------------------------------------------------------------------------------

std::vector<const Device*> selected(const Card& card, const Device* only) {
  std::vector<const Device*> out;
  if (only != nullptr) {
    out.push_back(only);
  } else {
    for (const auto& d : card.devices) out.push_back(&d);
  }
  return out;
}

std::string card_header(const Card& card) {
  return kv("NPU ID", std::to_string(card.id)) + kv("Chip Count", std::to_string(card.devices.size())) + "\n";
}

std::string num(long long n) {
  return std::to_string(n);
}

}  // namespace

std::string kv(std::string_view key, std::string_view value) {
  std::string out = "\t";
  out += key;
  if (key.size() < 30) out.append(30 - key.size(), ' ');
  out += " : ";
  out += value;
  out += "\n";
  return out;
}

std::string info_table(const View& v) {
  return v.state->family == Family::k310P ? table_310p(v) : classic_table(v);
}

std::string card_list(const View& v) {
  const HostState& s = *v.state;
  const BoardFacts b = board_facts(s.family);
  // Servers (the 910 families) print no Product Name / Serial Number here; PCIe cards do.
  const bool card_lines = s.family == Family::k310P;
  std::string out = kv("Total Count", num(static_cast<long long>(v.cards.size()))) + "\n";
  for (const Card& card : v.cards) {
    out += kv("NPU ID", num(card.id));
    if (card_lines) {
      out += kv("Product Name", b.product_name);
      out += kv("Serial Number", serial_number(card.id));
    }
    out += kv("Chip Count", num(static_cast<long long>(card.devices.size()))) + "\n";
  }
  return out;
}

std::string mapping(const View& v) {
  const HostState& s = *v.state;
  std::string out;
  if (s.family == Family::k910_93) {
    out += fmt::sprintf("\t%-30s %-30s %-30s %-30s %-30s\n", "NPU ID", "Chip ID", "Chip Logic ID",
                        "Chip Phy-ID", "Chip Name");
    for (const Card& card : v.cards) {
      for (const Device& d : card.devices) {
        out += fmt::sprintf("\t%-30d %-30d %-30d %-30d %s\n", card.id, d.chip_index, d.logic_id, d.phy_id,
                            d.name.c_str());
      }
      out += fmt::sprintf("\t%-30d %-30d %-30s %-30s %-30s\n", card.id, physical_chip_count(s, card.id), "-",
                          "-", "Mcu");
    }
    return out;
  }
  out += fmt::sprintf("\t%-30s %-30s %-30s %-30s\n", "NPU ID", "Chip ID", "Chip Logic ID", "Chip Name");
  for (const Card& card : v.cards) {
    for (const Device& d : card.devices) {
      out += fmt::sprintf("\t%-30d %-30d %-30d %s %s\n", card.id, d.chip_index, d.logic_id,
                          s.chip_type.c_str(), d.name.c_str());
    }
    out += fmt::sprintf("\t%-30d %-30d %-30s %-30s\n", card.id, physical_chip_count(s, card.id), "-", "Mcu");
  }
  return out;
}

std::string topo(const View& v) {
  const HostState& s = *v.state;
  const bool a3 = s.family == Family::k910_93;
  std::vector<const Device*> devs;
  bool affinity = false;
  for (const Card& card : v.cards) {
    for (const Device& d : card.devices) {
      if (d.vnpu != nullptr) continue;  // the matrix is between physical chips
      devs.push_back(&d);
      affinity = affinity || !d.chip->cpu_affinity.empty();
    }
  }
  auto label = [&](const Device& d) {
    return a3 ? fmt::sprintf("Phy-ID%-5d", d.phy_id) : fmt::sprintf("NPU%-8d", d.logic_id);
  };
  std::string out = "\t   ";
  for (const Device* d : devs) out += label(*d);
  if (affinity) out += "CPU Affinity";
  out += "\n";
  for (const Device* a : devs) {
    out += label(*a);
    for (const Device* b : devs) {
      out += fmt::sprintf("%-11s", std::string(to_string(s.link(a->phy_id, b->phy_id))).c_str());
    }
    if (affinity) out += a->chip->cpu_affinity;
    out += "\n";
  }
  out += "\nLegend:\n\n";
  out += "  X    = Self\n";
  out += "  SYS  = Path traversing PCIe and NUMA nodes. Nodes are connected through SMP, such as QPI, UPI.\n";
  out += "  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.\n";
  out += "  PIX  = Path traversing a single PCIe switch\n";
  out += "  PXB  = Path traversing multiple PCIe switches\n";
  out += "  HCCS = Connection traversing HCCS.\n";
  if (a3) {
    out += "  SIO  = Path traversing the SIO bus.\n";
    out += "  HCCS_SW = Connection traversing HCCS through a switch.\n";
  }
  out += "  NA   = Unknown relationship.\n";
  return out;
}

std::string card_board(const View& v, const Card& card) {
  const HostState& s = *v.state;
  const BoardFacts b = board_facts(s.family);
  const Chip& first = *card.devices.front().chip;
  std::string out = kv("NPU ID", num(card.id));
  if (b.product_lines) {
    out += kv("Product Name", b.product_name);
    out += kv("Model", "NA");
    out += kv("Manufacturer", "Huawei");
    out += kv("Serial Number", serial_number(card.id));
  }
  out += kv("Software Version", s.driver_version);
  out += kv("Firmware Version", s.firmware_version);
  out += kv("Compatibility", "OK");
  out += kv("Board ID", fmt::sprintf("0x%02x", b.board_id));
  if (s.family == Family::k910_93) out += kv("Main Board ID", fmt::sprintf("0x%02x", b.main_board_id));
  out += kv("PCB ID", "A");
  out += kv("BOM ID", "1");
  out += kv("PCIe Bus Info", first.bus_id);
  out += kv("Slot ID", num(card.id));
  out += kv("Class ID", "NA");
  out += kv("PCI Vendor ID", fmt::sprintf("0x%04X", pci_identity(s.family).vendor));
  out += kv("PCI Device ID", fmt::sprintf("0x%04X", b.pci_device));
  out += kv("Subsystem Vendor ID", fmt::sprintf("0x%04X", b.subsys_vendor));
  out += kv("Subsystem Device ID", fmt::sprintf("0x%04X", b.subsys_device));
  out += kv("Chip Count", num(static_cast<long long>(card.devices.size())));
  if (s.family == Family::k310P) {
    long long faulty = std::count_if(card.devices.begin(), card.devices.end(),
                                     [](const Device& d) { return d.chip->health() != Health::kOk; });
    out += kv("Chip Fault", num(faulty));
  }
  return out;
}

std::string chip_board(const View& v, const Device& d) {
  const HostState& s = *v.state;
  const BoardFacts b = board_facts(s.family);
  const Chip& c = *d.chip;
  std::string out = kv("NPU ID", num(d.card_id));
  if (s.family == Family::k910_93) out += kv("NPU Name", d.name);
  out += kv("Chip ID", num(d.chip_index));
  if (s.family != Family::k910_93) out += kv("Chip Type", s.chip_type);
  out += kv("Chip Name", d.name);
  out += kv("Chip Version", kChipVersion);
  out += kv("Board ID", fmt::sprintf("0x%02x", b.board_id));
  if (s.family != Family::k310P) {
    out += kv("PCB ID", "NA");
    out += kv("BOM ID", "1");
  }
  if (is_910_family(s.family)) {
    out += fmt::sprintf("\t%-30s :", "VDie ID") + die_id(c, 'V') + "\n";
    out += fmt::sprintf("\t%-30s :", "NDie ID") + die_id(c, 'N') + "\n";
  } else {
    out += fmt::sprintf("\t%-30s :", "Die ID") + die_id(c, 'D') + "\n";
  }
  out += kv("Chip Position ID", num(c.phy_id));
  out += kv("PCIe Bus Info", c.bus_id);
  out += kv("Firmware Version", s.firmware_version);
  return out;
}

std::string usages(const View& v, const Card& card, const Device* only) {
  const HostState& s = *v.state;
  const Family f = s.family;
  const bool newer = major_version(s.smi_version) >= 25;  // NPU Utilization / Aicube lines (SAMPLE M vs A)
  std::string out = card_header(card);
  bool first = true;
  for (const Device* d : selected(card, only)) {
    const Chip& c = *d->chip;
    if (!first) out += "\n";
    first = false;
    if (no_ddr(f)) {
      out += kv("DDR Capacity(MB)", "0");
      out += kv("DDR Usage Rate(%)", "0");
      out += kv("DDR Hugepages Total(page)", "0");
      out += kv("DDR Hugepages Usage Rate(%)", "0");
    } else {
      out += kv("DDR Capacity(MB)", num(d->mem_total_mb));
      out += kv("DDR Usage Rate(%)", num(pct(d->mem_used_mb, d->mem_total_mb)));
      out += kv("DDR Hugepages Total(page)", num(c.hugepages_total));
      out += kv("DDR Hugepages Usage Rate(%)", num(pct(c.hugepages_used, c.hugepages_total)));
    }
    if (is_910_family(f)) {
      out += kv("HBM Capacity(MB)", num(d->hbm_total_mb));
      out += kv("HBM Usage Rate(%)", num(pct(d->hbm_used_mb, d->hbm_total_mb)));
    }
    out += kv("Aicore Usage Rate(%)", num(d->aicore_usage_pct));
    if (no_ddr(f)) out += kv("Aivector Usage Rate(%)", "0");
    out += kv("Aicpu Usage Rate(%)", num(c.aicpu_usage_pct));
    out += kv("Ctrlcpu Usage Rate(%)", "0");
    if (f == Family::k310P) out += kv("Vectorcore Usage Rate(%)", "0");
    out += kv("DDR Bandwidth Usage Rate(%)", "0");
    if (is_910_family(f)) out += kv("HBM Bandwidth Usage Rate(%)", "0");
    if (f == Family::k310P) {
      for (const char* k : {"DVPP VDEC Usage Rate(%)", "DVPP VPC Usage Rate(%)", "DVPP VENC Usage Rate(%)",
                            "DVPP JPEGE Usage Rate(%)", "DVPP JPEGD Usage Rate(%)"}) {
        out += kv(k, "0");
      }
    }
    if (no_ddr(f) && newer) {
      out += kv("NPU Utilization(%)", num(d->aicore_usage_pct));
      out += kv("Aicube Usage Rate(%)", "0");
    }
    out += kv("Chip ID", num(d->chip_index));
  }
  return out;
}

// -t power and -t temp follow SAMPLE M (npu-smi 25.5.1): the card header, then per chip its value and
// "Chip ID", chips apart by a blank line; -t temp ends with the card's MCU board sensors (LM75A/B, read 3
// degrees below the chip in that capture: 39 / 36), which -c leaves out.
std::string power(const View& v, const Card& card, const Device* only) {
  std::string out = card_header(card);
  bool first = true;
  for (const Device* d : selected(card, only)) {
    if (!first) out += "\n";
    first = false;
    out += kv("NPU Real-time Power(W)", power_text(*v.state, *d->chip));
    out += kv("Chip ID", num(d->chip_index));
  }
  return out;
}

std::string temp(const View& /*v*/, const Card& card, const Device* only) {
  std::string out = card_header(card);
  bool first = true;
  for (const Device* d : selected(card, only)) {
    if (!first) out += "\n";
    first = false;
    out += kv("NPU Temperature (C)", num(d->chip->temp_c));
    out += kv("Chip ID", num(d->chip_index));
  }
  if (only == nullptr) {
    const int board = card.devices.front().chip->temp_c - 3;
    out.append("\n").append(kv("LM75A_TE (C)", num(board)));
    out += kv("LM75B_TE (C)", num(board));
    out += kv("Chip Name", "MCU");
  }
  return out;
}

std::string common(const View& v, const Card& card, const Device* only) {
  const HostState& s = *v.state;
  const Family f = s.family;
  const Clocks clk = clocks(f);
  std::string out =
      kv("NPU ID", num(card.id)) + kv("Chip Count", num(static_cast<long long>(card.devices.size())));
  for (const Device* d : selected(card, only)) {
    const Chip& c = *d->chip;
    out.append("\n").append(kv("Chip ID", num(d->chip_index)));  // not "\n" + kv(): see health()
    out += kv("Memory Usage Rate(%)", num(f == Family::k910B ? 0 : pct(d->mem_used_mb, d->mem_total_mb)));
    if (is_910_family(f)) out += kv("HBM Usage Rate(%)", num(pct(d->hbm_used_mb, d->hbm_total_mb)));
    out += kv("Aicore Usage Rate(%)", num(d->aicore_usage_pct));
    out += kv("Aicore Freq(MHZ)", num(clk.aicore_mhz));
    out += kv("Aicore curFreq(MHZ)", num(d->aicore_usage_pct > 0 ? clk.aicore_mhz : clk.aicore_idle_mhz));
    if (is_910_family(f)) out += kv("Aicore Count", num(d->aicore_count));
    out += kv("Temperature(C)", num(c.temp_c));
    if (is_910_family(f)) {
      out += kv("NPU Real-time Power(W)",
                (c.power_w < 0 || c.power_na) ? "NA" : fmt::sprintf("%.1f", c.power_w));
    }
  }
  const Chip& first = *card.devices.front().chip;
  out.append("\n").append(kv("Chip Name", "mcu"));
  out += kv("Temperature(C)", num(mcu_temp(first)));
  if (f == Family::k310P) out += kv("NPU Real-time Power(W)", "NA");
  return out;
}

std::string health(const View& /*v*/, const Card& card, const Device* only) {
  Health h = Health::kOk;
  std::vector<Fault> faults;
  for (const Device* d : selected(card, only)) {
    h = std::max(h, d->chip->health());
    faults.insert(faults.end(), d->chip->faults.begin(), d->chip->faults.end());
  }
  std::string out = kv("Health Status", to_string(h));
  if (faults.empty()) return out + kv("Error Code", "NA") + kv("Error Information", "NA");
  out += fmt::sprintf("\t%-30s :", "Error Code");
  for (const Fault& f : faults) out += fmt::sprintf(" %04X", f.code);
  out += "\n";
  out += fmt::sprintf("\t%-30s :", "Error Information");
  for (std::size_t i = 0; i < faults.size(); ++i) {
    std::string info = fmt::sprintf("npu-sim fault 0x%08X, severity %s", faults[i].code,
                                    std::string(to_string(faults[i].severity)).c_str());
    // Appended piece by piece: GCC 12 at -O3 misreads `" " + info + "\n"` as an overlapping copy
    // (-Wrestrict, GCC bug 105329).
    if (i == 0) {
      out.append(" ").append(info).append("\n");
    } else {
      out.append("\n").append(kv(" ", info));
    }
  }
  return out;
}

std::string memory(const View& v, const Card& card, const Device* only) {
  const HostState& s = *v.state;
  const Family f = s.family;
  const Clocks clk = clocks(f);
  std::string out = card_header(card);
  bool first = true;
  for (const Device* d : selected(card, only)) {
    const Chip& c = *d->chip;
    if (!first) out += "\n";
    first = false;
    if (no_ddr(f)) {
      out += kv("DDR Capacity(MB)", "0");
      out += kv("DDR Clock Speed(MHz)", "0");
    } else {
      if (f == Family::k310P) {
        // The card's DDR as installed (24 GB per chip, or 48 GB), of which the chip reports the usable part.
        const int installed = ((d->mem_total_mb + 24575) / 24576) * 24576;
        out += kv("Total DDR Capacity(MB)", num(installed));
      }
      out += kv("DDR Capacity(MB)", num(d->mem_total_mb));
      out += kv("DDR Clock Speed(MHz)", num(clk.ddr_mhz));
    }
    if (is_910_family(f)) {
      out += kv("HBM Capacity(MB)", num(d->hbm_total_mb));
      out += kv("HBM Clock Speed(MHz)", num(clk.hbm_mhz));
      out += kv("HBM Temperature(C)", num(c.temp_c));
      if (no_ddr(f)) out += kv("HBM Manufacturer ID", "0x6");
    }
    out += kv("Chip ID", num(d->chip_index));
  }
  return out;
}

std::string template_info(const HostState& s) {
  std::string out = line('+', '-', 90);
  out += "|NPU instance template info is:                                                            |\n";
  out += "|Name                AICORE    Memory    AICPU     VPC            VENC           JPEGD     |\n";
  out += "|                               GB                 PNGD           VDEC           JPEGE     |\n";
  out += line('|', '=', 90);
  for (const VnpuTemplate& t : s.templates) {
    out += fmt::sprintf("|%-19s %-9d %-9d %-9g %-14d %-14d %-10d|\n", t.name.c_str(), t.aicore,
                        t.memory_mb >> 10, t.aicpu, t.vpc, t.venc, t.jpegd);
    out += fmt::sprintf("|%-49s %-14g %-14d %-10d|\n", " ", t.pngd, t.vdec, t.jpege);
    out += line('+', '-', 90);
  }
  return out;
}

std::string info_vnpu(const HostState& s, const Chip& chip) {
  const VnpuResources r = vnpu_resources(s, chip.phy_id);
  auto cell = [](const Resource& x) {
    return x.na ? std::string("NA/NA") : fmt::sprintf("%d/%d", x.free, x.total);
  };
  std::vector<const Vnpu*> mine;
  for (const Vnpu& v : s.vnpus) {
    if (v.phy_id == chip.phy_id) mine.push_back(&v);
  }
  const std::string sep = line('+', '-', 79);
  std::string out = sep;
  out += "| NPU resource static info as follow:                                           |\n";
  out += "| Format:Free/Total                   NA: Currently, query is not supported.    |\n";
  out += "| AICORE    Memory    AICPU    VPC    VENC    VDEC    JPEGD    JPEGE    PNGD    |\n";
  out += "|            GB                                                                 |\n";
  out += line('|', '=', 79);
  out += fmt::sprintf("| %-9s %-9s %-8s %-6s %-7s %-7s %-8s %-8s %-8s|\n", cell(r.aicore).c_str(),
                      cell(r.memory_gb).c_str(), cell(r.aicpu).c_str(), cell(r.vpc).c_str(),
                      cell(r.venc).c_str(), cell(r.vdec).c_str(), cell(r.jpegd).c_str(),
                      cell(r.jpege).c_str(), cell(r.pngd).c_str());
  out += sep;
  out += ljust(fmt::sprintf("| Total number of vnpu: %-2zu", mine.size()), 80) + "|\n";
  out += sep;
  out += "|  Vnpu ID  |  Vgroup ID     |  Container ID  |  Status  |  Template Name       |\n";
  out += sep;
  for (const Vnpu* v : mine) {
    // The real tool shows a vNPU that a container holds as ffffffffffff with status 1 (it does not know the
    // container's id); ours knows it (the runtime tags dynamic vNPUs) but prints what the tool prints.
    const bool held = v->dynamic() || v->status != 0;
    out += fmt::sprintf("|  %-4d     |  %-12d  |  %-12s  |  %-2d      |  %-15s     |\n", v->id, v->vgroup,
                        held ? "ffffffffffff" : "000000000000", held ? 1 : 0, v->template_name.c_str());
    out += sep;
  }
  return out;
}

std::string vnpu_mode(const HostState& s) {
  return kv("vnpu-mode", s.vnpu_mode);
}

}  // namespace ascend::npu::smi
