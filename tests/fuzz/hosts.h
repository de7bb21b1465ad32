// The emulated hosts the pure fuzz targets plan against: built-in profiles with majors set and, on the 910B
// host, two vNPUs (so that VIRTUAL requests and vNPU ids have something to name).
#pragma once

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "fuzz_util.h"

namespace ascend::fuzz {

inline npu::HostState fuzz_host(const char* profile, bool with_vnpus) {
  auto p = npu::builtin_profile(profile);
  check(p.ok(), std::string("profile ") + profile);
  npu::HostState s = *p;
  s.majors = {240, 241, 242, 243, 244};
  if (with_vnpus) {
    for (int phy : {6, 7}) {
      auto v = npu::plan_vnpu(s, phy, s.templates.front().name, std::nullopt);
      check(v.ok(), "plan a vNPU");
      s.vnpus.push_back(*v);
    }
  }
  return s;
}

}  // namespace ascend::fuzz
