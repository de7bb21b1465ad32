// Changes to what a chip of the emulated host is going through (emulator.h): its faults, its RoCE link and
// the workload running on it.
#include <algorithm>

#include "ascend/npu/emulator.h"
#include "ascend/npu/workload.h"

namespace ascend::npu {

Status Emulator::set_fault(int phy_id, std::uint32_t code, std::optional<Health> severity) {
  return update([&](HostState& s) -> Status {
    Chip* c = s.chip(phy_id);
    if (c == nullptr) return Error::not_found("no device " + std::to_string(phy_id));
    Health h = severity.value_or(severity_of_code(code));
    if (h == Health::kOk) return Error::invalid("a fault's severity cannot be OK (use 'fault clear')");
    auto it =
        std::find_if(c->faults.begin(), c->faults.end(), [&](const Fault& f) { return f.code == code; });
    if (it != c->faults.end()) {
      it->severity = h;
    } else {
      c->faults.push_back({code, h});
    }
    return {};
  });
}

Status Emulator::clear_faults(int phy_id) {
  return update([&](HostState& s) -> Status {
    Chip* c = s.chip(phy_id);
    if (c == nullptr) return Error::not_found("no device " + std::to_string(phy_id));
    c->faults.clear();
    return {};
  });
}

Status Emulator::set_link(int phy_id, bool up) {
  return update([&](HostState& s) -> Status {
    Chip* c = s.chip(phy_id);
    if (c == nullptr) return Error::not_found("no device " + std::to_string(phy_id));
    c->link_up = up;
    return {};
  });
}

Status Emulator::set_workload(const Workload& w) {
  ASCEND_CHECK(check_workload(w), "chip " + std::to_string(w.phy_id));
  const std::int64_t now = unix_now_ms();
  return update([&](HostState& s) -> Status {
    if (s.chip(w.phy_id) == nullptr) return Error::not_found("no device " + std::to_string(w.phy_id));
    std::erase_if(s.workloads, [&](const Workload& o) { return o.phy_id == w.phy_id || !running(o, now); });
    if (w.aicore_pct != 0 || w.aicpu_pct != 0 || w.hbm_mb != 0) {
      s.workloads.push_back(w);
      std::sort(s.workloads.begin(), s.workloads.end(),
                [](const Workload& a, const Workload& b) { return a.phy_id < b.phy_id; });
    }
    return {};
  });
}

}  // namespace ascend::npu
