// The vNPU resource accounting of `npu-smi info -t info-vnpu` (vnpu_resources.h).
#include "ascend/npu/smi/vnpu_resources.h"

#include <algorithm>
#include <cmath>

#include "ascend/npu/vnpu_load.h"

namespace ascend::npu::smi {

VnpuResources vnpu_resources(const HostState& s, int phy_id) {
  const VnpuCapacity& cap = s.vnpu_capacity;
  const bool reserve = s.family == Family::k910B || s.family == Family::k910_93;
  const long long reserve_mb = reserve ? 4096 : 0;
  const VnpuLoad load = vnpu_load(s.vnpus, s.templates, phy_id);
  // Memory as npu-smi shows it: each vNPU's template less its share of the reserve.
  long long mem_mb = 0;
  for (const Vnpu& v : s.vnpus) {
    const VnpuTemplate* t = v.phy_id == phy_id ? s.find_template(v.template_name) : nullptr;
    if (t == nullptr) continue;
    const long long share = cap.aicore > 0 ? reserve_mb * t->aicore / cap.aicore : 0;
    mem_mb += t->memory_mb - share;
  }
  auto res = [](long long total, double used) {
    if (total < 0) return Resource{0, 0, true};
    long long free = total - static_cast<long long>(std::ceil(used - 1e-9));
    return Resource{static_cast<int>(std::max(0LL, free)), static_cast<int>(total), false};
  };
  VnpuResources r;
  r.aicore = res(cap.aicore, load.aicore);
  if (cap.memory_gb < 0) {
    r.memory_gb = Resource{0, 0, true};
  } else {
    r.memory_usable_mb = std::max(0LL, static_cast<long long>(cap.memory_gb) * 1024 - reserve_mb);
    r.memory_free_mb = std::max(0LL, r.memory_usable_mb - mem_mb);
    r.memory_gb = Resource{static_cast<int>(r.memory_free_mb / 1024), cap.memory_gb, false};
  }
  const int extra_aicpu = (s.family == Family::k910B && load.count > 0 && cap.aicpu >= 0) ? 1 : 0;
  r.aicpu = res(cap.aicpu + extra_aicpu, load.aicpu);
  r.vpc = res(cap.vpc, load.vpc);
  r.venc = res(cap.venc, load.venc);
  r.vdec = res(cap.vdec, load.vdec);
  r.jpegd = res(cap.jpegd, load.jpegd);
  r.jpege = res(cap.jpege, load.jpege);
  r.pngd = res(cap.pngd, load.pngd);
  return r;
}

}  // namespace ascend::npu::smi
