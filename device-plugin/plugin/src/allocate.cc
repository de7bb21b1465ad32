#include "ascend/plugin/allocate.h"

#include <algorithm>
#include <set>

namespace ascend::plugin {

namespace {

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// The id that ASCEND_VISIBLE_DEVICES, the marker mount and the CDI name use: the phy id of a chip, the
// vNPU id of a vNPU.
int visible_id(const DeviceEntry& d) {
  return d.kind == DeviceKind::kVnpu ? d.vnpu_id : d.phy;
}

MountSpec marker(int id) {
  return {std::string(kMarkerDir) + "/" + std::to_string(id), "/dev/null", true};
}

}  // namespace

Result<std::vector<DeviceEntry>> resolve_ids(const std::vector<DeviceEntry>& table, const ResourceSpec& res,
                                             const std::vector<std::string>& ids) {
  if (ids.empty()) return Error::invalid("no device ids requested for " + res.name);
  std::vector<std::string> unknown;
  std::vector<std::string> unhealthy;
  std::vector<std::string> withheld;
  std::vector<std::string> dup;
  std::set<std::string> seen;
  std::vector<DeviceEntry> out;
  for (const auto& id : ids) {
    if (!seen.insert(id).second) {
      dup.push_back(id);
      continue;
    }
    auto it = std::find_if(table.begin(), table.end(), [&](const DeviceEntry& e) { return e.id == id; });
    if (it == table.end()) {
      unknown.push_back(id);
    } else if (!is_healthy(it->health)) {
      unhealthy.push_back(id + " (" + std::string(npu::to_string(it->health)) + ")");
    } else if (!it->withheld.empty()) {
      withheld.push_back(id + " (" + it->withheld + ")");
    } else {
      out.push_back(*it);
    }
  }
  if (!unknown.empty() || !dup.empty()) {
    std::string msg = "allocate " + res.name + ":";
    if (!unknown.empty()) msg += " " + name_ids("unknown device ids", unknown) + ";";
    if (!dup.empty()) msg += " " + name_ids("duplicate device ids", dup) + ";";
    msg.pop_back();
    return Error::invalid(msg);
  }
  if (!unhealthy.empty() || !withheld.empty()) {
    std::string msg = "allocate " + res.name + ":";
    if (!unhealthy.empty()) msg += " " + name_ids("unhealthy devices", unhealthy) + ";";
    if (!withheld.empty()) msg += " " + name_ids("unavailable devices", withheld) + ";";
    msg.pop_back();
    return Error(EBUSY, msg);
  }
  std::sort(out.begin(), out.end(), [](const DeviceEntry& a, const DeviceEntry& b) {
    return std::tie(a.phy, a.vnpu_id, a.core) < std::tie(b.phy, b.vnpu_id, b.core);
  });
  return out;
}

Result<CorePlacement> place_cores(const npu::DeviceSnapshot& host, const Ledger& ledger,
                                  const std::vector<DeviceEntry>& tokens) {
  const int cores = static_cast<int>(tokens.size());
  const npu::VnpuTemplate* best = nullptr;
  for (const auto& t : host.templates) {
    if (t.aicore < cores) continue;
    if (best == nullptr || std::tie(t.aicore, t.memory_mb, t.aicpu, t.name) <
                               std::tie(best->aicore, best->memory_mb, best->aicpu, best->name)) {
      best = &t;
    }
  }
  if (best == nullptr) {
    int largest = 0;
    for (const auto& t : host.templates) largest = std::max(largest, t.aicore);
    return Error::invalid("no vNPU template covers " + std::to_string(cores) + " AICores (the largest has " +
                          std::to_string(largest) + "); request whole chips instead");
  }
  struct Candidate {
    int held;  // tokens of this request on the chip
    int left;  // AICores left after placing
    int phy;
  };
  std::vector<Candidate> candidates;
  for (const auto& c : host.chips) {
    if (!is_healthy(c.health()) || ledger.whole(c.phy_id)) continue;
    const npu::VnpuLoad load = ledger.load(host, c.phy_id);
    if (!npu::vnpu_shortfall(load, *best, host.vnpu_capacity).empty()) continue;
    int held = static_cast<int>(
        std::count_if(tokens.begin(), tokens.end(), [&](const DeviceEntry& t) { return t.phy == c.phy_id; }));
    candidates.push_back({held, host.vnpu_capacity.aicore - load.aicore - best->aicore, c.phy_id});
  }
  if (candidates.empty()) {
    return Error(ENOSPC, "no healthy chip has room for a " + best->name + " vNPU (" +
                             std::to_string(best->aicore) + " AICores)");
  }
  auto pick =
      std::min_element(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        return std::tie(b.held, a.left, a.phy) < std::tie(a.held, b.left, b.phy);
      });
  return CorePlacement{pick->phy, best->name};
}

ContainerAllocation plan_container(const npu::DeviceSnapshot& host, const npu::DeviceQuery& paths,
                                   AllocateMode mode, const std::vector<DeviceEntry>& devices) {
  ContainerAllocation out;
  const bool virt = std::any_of(devices.begin(), devices.end(),
                                [](const DeviceEntry& d) { return d.kind == DeviceKind::kVnpu; });
  switch (mode) {
    case AllocateMode::kRuntime: {
      std::vector<std::string> ids;
      for (const auto& d : devices) {
        ids.push_back(std::to_string(visible_id(d)));
        out.mounts.push_back(marker(visible_id(d)));
      }
      out.envs[kVisibleDevicesEnv] = join(ids, ",");
      if (virt) out.envs[kRuntimeOptionsEnv] = "VIRTUAL";
      break;
    }
    case AllocateMode::kDeviceSpec: {
      for (const auto& d : devices) {
        if (d.kind == DeviceKind::kVnpu) {
          // As the Ascend runtime does: host /dev/vdavinciN is /dev/davinciN inside the container.
          auto node = host.vnpu_node(d.vnpu_id);
          out.devices.push_back(
              {"/dev/davinci" + std::to_string(d.vnpu_id), paths.host_path(node.path), "rw"});
        } else {
          auto node = host.chip_node(d.phy);
          out.devices.push_back({node.path, paths.host_path(node.path), "rw"});
        }
      }
      for (const auto& n : host.control_nodes())
        out.devices.push_back({n.path, paths.host_path(n.path), "rw"});
      for (const auto& f : paths.driver_files()) out.mounts.push_back({f, paths.host_path(f), true});
      break;
    }
    case AllocateMode::kCdi:
      for (const auto& d : devices)
        out.cdi_devices.push_back(std::string(kCdiKind) + "=" + std::to_string(visible_id(d)));
      break;
  }
  return out;
}

ContainerAllocation plan_dynamic(const CorePlacement& placement) {
  ContainerAllocation out;
  out.envs[kVisibleDevicesEnv] = std::to_string(placement.phy);
  out.envs[kVnpuSpecsEnv] = placement.template_name;
  out.mounts.push_back(marker(placement.phy));
  return out;
}

Result<std::vector<ContainerAllocation>> allocate(const npu::DeviceSnapshot& host,
                                                  const npu::DeviceQuery& paths, const Config& cfg,
                                                  const ResourceSpec& res, Ledger& ledger,
                                                  const std::vector<std::vector<std::string>>& requests,
                                                  Clock::time_point now) {
  if (requests.empty()) return Error::invalid("allocate " + res.name + ": no container requests");
  Ledger before = ledger;
  std::vector<ContainerAllocation> out;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& ids = requests[i];
    auto one = [&]() -> Result<ContainerAllocation> {
      if (res.kind == DeviceKind::kCore) {
        ledger.release_tokens(ids);  // the kubelet hands a token out again only once its pod is gone
        ASCEND_ASSIGN(auto tokens, resolve_ids(device_table(host, res, ledger), res, ids), "");
        ASCEND_ASSIGN(CorePlacement p, place_cores(host, ledger, tokens), "allocate " + res.name);
        ledger.add_promise({p.phy, p.template_name, ids, now});
        return plan_dynamic(p);
      }
      ASCEND_ASSIGN(auto devices, resolve_ids(device_table(host, res, ledger), res, ids), "");
      if (tracks_whole_chips(cfg) && res.kind == DeviceKind::kChip) {
        std::vector<int> phys;
        std::vector<std::pair<int, std::string>> claims;
        for (const auto& d : devices) {
          phys.push_back(d.phy);
          claims.emplace_back(d.phy, d.id);
        }
        ledger.release_whole(phys);
        ASCEND_CHECK(ledger.claim_whole(claims, now), "allocate " + res.name);
      }
      return plan_container(host, paths, cfg.allocate_mode, devices);
    }();
    if (!one) {
      ledger = std::move(before);
      if (requests.size() == 1) return one.error();
      return one.error().context("container request " + std::to_string(i + 1) + " of " +
                                 std::to_string(requests.size()));
    }
    out.push_back(std::move(one).value());
  }
  return out;
}

}  // namespace ascend::plugin
