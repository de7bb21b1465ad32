#include "ascend/hook/plan.h"

#include <algorithm>

namespace ascend::hook {

InjectionPlan make_plan(const Request& request, const npu::DeviceSnapshot& host,
                        const std::vector<MountList>& lists) {
  InjectionPlan plan;
  for (int id : request.ids) {
    if (request.is_virtual) {
      npu::DeviceNode n = host.vnpu_node(id);
      plan.devices.push_back({"/dev/davinci" + std::to_string(id), n.path, n.major, n.minor, n.mode});
    } else {
      npu::DeviceNode n = host.chip_node(id);
      plan.devices.push_back({n.path, n.path, n.major, n.minor, n.mode});
    }
  }
  for (const auto& n : host.control_nodes())
    plan.devices.push_back({n.path, n.path, n.major, n.minor, n.mode});

  if (!request.nodrv) {
    for (const auto& l : lists) {
      for (const auto& p : l.paths) {
        bool seen = std::any_of(plan.mounts.begin(), plan.mounts.end(),
                                [&](const MountEntry& m) { return m.path == p; });
        if (!seen) plan.mounts.push_back({p, l.name});
      }
    }
  }
  plan.allow_link = request.allow_link;
  plan.env.push_back(std::string(kEnvMarker) + "=True");
  return plan;
}

std::string describe(const InjectionPlan& plan) {
  std::string devs;
  int control = 0;
  for (const auto& d : plan.devices) {
    if (d.path.rfind("/dev/davinci", 0) == 0 && d.path != "/dev/davinci_manager") {
      devs.append(devs.empty() ? "" : ",").append(d.path, 12);  // not `"," + ...`: GCC 12's -Wrestrict at -O3
    } else {
      ++control;
    }
  }
  std::string lists;
  for (const auto& m : plan.mounts) {
    if (lists.find(m.list) == std::string::npos) lists += (lists.empty() ? "" : ",") + m.list;
  }
  std::string env;
  for (const auto& e : plan.env) env += " " + e;
  return "devices " + (devs.empty() ? "none" : devs) + " (+" + std::to_string(control) + " control), " +
         std::to_string(plan.mounts.size()) + " mounts" + (lists.empty() ? "" : " (" + lists + ")") +
         ", env" + env;
}

}  // namespace ascend::hook
