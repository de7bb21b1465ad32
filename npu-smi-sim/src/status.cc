#include "ascend/npu/status.h"

#include <fmt/printf.h>

#include <nlohmann/json.hpp>

namespace ascend::npu {

std::string format_status(const HostState& s, const std::string& root) {
  std::string out = "root:      " + root + "\nprofile:   " + s.profile + " (" + s.description + ")\n" +
                    "driver:    " + s.driver_version + "\nvnpu-mode: " + s.vnpu_mode + "\n" +
                    "majors:    davinci " + std::to_string(s.majors.davinci) + ", davinci_manager " +
                    std::to_string(s.majors.manager) + ", devmm_svm " + std::to_string(s.majors.svm) +
                    ", hisi_hdc " + std::to_string(s.majors.hdc) + ", vdavinci " +
                    std::to_string(s.majors.vdavinci) + "\n\n";
  out += fmt::sprintf("%-5s %-5s %-5s %-10s %-9s %-14s %-7s %-8s %-15s %s\n", "PHY", "CARD", "CHIP", "NAME",
                      "HEALTH", "BUS-ID", "AICORE", "HBM(MB)", "DEVICE-IP", "VNPUS");
  for (const auto& c : s.chips) {
    std::string vn;
    for (const auto& v : s.vnpus) {
      if (v.phy_id != c.phy_id) continue;
      // Appended piece by piece: GCC 12 at -O3 misreads `"," + std::to_string(...)` (-Wrestrict, bug 105329).
      if (!vn.empty()) vn += ',';
      vn.append(std::to_string(v.id)).append(":").append(v.template_name);
    }
    out += fmt::sprintf("%-5d %-5d %-5d %-10s %-9s %-14s %-7d %-8d %-15s %s\n", c.phy_id, c.card_id,
                        c.chip_index, c.name, std::string(to_string(c.health())), c.bus_id, c.aicore_count,
                        c.hbm_total_mb, c.device_ip, vn.empty() ? std::string("-") : vn);
    for (const auto& f : c.faults) {
      out += fmt::sprintf("      fault 0x%08X %s\n", f.code, std::string(to_string(f.severity)));
    }
    if (!c.link_up) out += "      link down\n";
    for (const auto& w : s.workloads) {
      if (w.phy_id != c.phy_id) continue;
      out += fmt::sprintf(
          "      load-gen AICore %d%%, AICPU %d%%, +%lld MB%s\n", w.aicore_pct, w.aicpu_pct, w.hbm_mb,
          w.until_ms == 0 ? std::string()
                          : fmt::sprintf(", until %lld ms", static_cast<long long>(w.until_ms)));
    }
  }
  return out;
}

std::string format_status_json(const HostState& s, const std::string& root) {
  nlohmann::json j = s;
  j["root"] = root;
  for (auto& c : j["chips"]) c["health"] = to_string(s.chip(c["phy_id"].get<int>())->health());
  return j.dump(2) + "\n";
}

}  // namespace ascend::npu
