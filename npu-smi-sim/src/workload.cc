// The load model of the emulated host (workload.h).
#include "ascend/npu/workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace ascend::npu {

LoadModel load_model(Family f) {
  switch (f) {
    case Family::k910:  // Ascend 910 (A1): 310 W is the chip's published maximum
      return {310.0, 35};
    case Family::k910B:  // Ascend 910B: the OAM module's 400 W class
    case Family::k910_93:
      return {400.0, 35};
    case Family::k310P:  // no power of its own (npu-smi prints NA)
      return {0.0, 25};
  }
  return {0.0, 0};
}

bool running(const Workload& w, std::int64_t now_ms) {
  return w.until_ms == 0 || now_ms < w.until_ms;
}

void apply_workloads(HostState& s, std::int64_t now_ms) {
  const LoadModel m = load_model(s.family);
  for (const Workload& w : s.workloads) {
    Chip* c = s.chip(w.phy_id);
    if (c == nullptr || !running(w, now_ms)) continue;
    const int u = std::clamp(w.aicore_pct, 0, 100);
    c->aicore_usage_pct = std::max(c->aicore_usage_pct, u);
    c->aicpu_usage_pct = std::max(c->aicpu_usage_pct, std::clamp(w.aicpu_pct, 0, 100));
    if (c->hbm_total_mb > 0) {
      c->hbm_used_mb = static_cast<int>(std::min<long long>(c->hbm_total_mb, c->hbm_used_mb + w.hbm_mb));
    } else {
      c->mem_used_mb = static_cast<int>(std::min<long long>(c->mem_total_mb, c->mem_used_mb + w.hbm_mb));
    }
    c->temp_c += m.temp_rise_c * u / 100;
    if (!c->power_na && c->power_w >= 0 && m.max_power_w > c->power_w) {
      const double p = c->power_w + (m.max_power_w - c->power_w) * u / 100.0;
      c->power_w = std::round(p * 10.0) / 10.0;
    }
  }
}

std::int64_t unix_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Status check_workload(const Workload& w) {
  auto pct = [](int v, const char* what) -> Status {
    if (v < 0 || v > 100)
      return Error::invalid(std::string(what) + " " + std::to_string(v) + "% is not 0-100");
    return {};
  };
  ASCEND_CHECK(pct(w.aicore_pct, "AICore utilization"), "");
  ASCEND_CHECK(pct(w.aicpu_pct, "AICPU utilization"), "");
  if (w.hbm_mb < 0) return Error::invalid("memory " + std::to_string(w.hbm_mb) + " MB is negative");
  if (w.until_ms < 0) return Error::invalid("end time is negative");
  return {};
}

}  // namespace ascend::npu
