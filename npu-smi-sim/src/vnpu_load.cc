#include "ascend/npu/vnpu_load.h"

#include <algorithm>

namespace ascend::npu {

void VnpuLoad::add(const VnpuTemplate& t) {
  ++count;
  aicore += t.aicore;
  memory_mb += t.memory_mb;
  aicpu += t.aicpu;
  vpc += t.vpc;
  venc += t.venc;
  vdec += t.vdec;
  jpegd += t.jpegd;
  jpege += t.jpege;
  pngd += t.pngd;
}

VnpuLoad VnpuLoad::larger(const VnpuLoad& a, const VnpuLoad& b) {
  VnpuLoad m;
  m.count = std::max(a.count, b.count);
  m.aicore = std::max(a.aicore, b.aicore);
  m.memory_mb = std::max(a.memory_mb, b.memory_mb);
  m.aicpu = std::max(a.aicpu, b.aicpu);
  m.vpc = std::max(a.vpc, b.vpc);
  m.venc = std::max(a.venc, b.venc);
  m.vdec = std::max(a.vdec, b.vdec);
  m.jpegd = std::max(a.jpegd, b.jpegd);
  m.jpege = std::max(a.jpege, b.jpege);
  m.pngd = std::max(a.pngd, b.pngd);
  return m;
}

VnpuLoad vnpu_load(const std::vector<Vnpu>& vnpus, const std::vector<VnpuTemplate>& templates, int phy_id) {
  VnpuLoad load;
  for (const Vnpu& v : vnpus) {
    if (v.phy_id != phy_id) continue;
    auto t = std::find_if(templates.begin(), templates.end(),
                          [&](const VnpuTemplate& x) { return x.name == v.template_name; });
    if (t != templates.end()) {
      load.add(*t);
    } else {
      ++load.count;
    }
  }
  return load;
}

std::string vnpu_shortfall(const VnpuLoad& load, const VnpuTemplate& t, const VnpuCapacity& cap) {
  constexpr double kEps = 1e-9;
  auto over = [](double used, double need, double total) { return total >= 0 && used + need > total + kEps; };
  if (over(load.aicore, t.aicore, cap.aicore)) return "AICore";
  if (cap.memory_gb >= 0 && load.memory_mb + t.memory_mb > static_cast<long long>(cap.memory_gb) * 1024) {
    return "memory";
  }
  if (over(load.aicpu, t.aicpu, cap.aicpu)) return "AICPU";
  if (over(load.vpc, t.vpc, cap.vpc)) return "VPC";
  if (over(load.venc, t.venc, cap.venc)) return "VENC";
  if (over(load.vdec, t.vdec, cap.vdec)) return "VDEC";
  if (over(load.jpegd, t.jpegd, cap.jpegd)) return "JPEGD";
  if (over(load.jpege, t.jpege, cap.jpege)) return "JPEGE";
  if (over(load.pngd, t.pngd, cap.pngd)) return "PNGD";
  return "";
}

}  // namespace ascend::npu
