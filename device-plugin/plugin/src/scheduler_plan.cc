#include "ascend/plugin/scheduler_plan.h"

#include <spdlog/fmt/fmt.h>

#include <limits.h>

#include <algorithm>

#include "ascend/common/fs.h"

namespace ascend::plugin {

InventoryReport inventory_report(const npu::DeviceSnapshot& host, const ResourceSpec& chips,
                                 const Ledger& ledger) {
  InventoryReport out;
  out.resource = chips.name;
  for (const auto& e : device_table(host, chips, ledger)) {
    ChipReport r{e.phy, is_healthy(e.health), !e.withheld.empty() || ledger.whole(e.phy)};
    auto c = std::find_if(host.chips.begin(), host.chips.end(),
                          [&](const npu::Chip& x) { return x.phy_id == e.phy; });
    if (c != host.chips.end()) {
      const npu::ChipTelemetry t = npu::telemetry_of(*c);
      r.aicore_pct = std::clamp(t.aicore_pct, 0, 100);
      if (t.memory_total_mb > 0) {
        r.hbm_total_mb = t.memory_total_mb;
        r.hbm_used_mb = std::clamp(t.memory_used_mb, 0LL, t.memory_total_mb);
      }
    }
    out.chips.push_back(r);
  }
  std::sort(out.chips.begin(), out.chips.end(),
            [](const ChipReport& a, const ChipReport& b) { return a.phy_id < b.phy_id; });
  return out;
}

std::vector<std::string> chip_ids(const ResourceSpec& res, std::vector<int> phys) {
  std::sort(phys.begin(), phys.end());
  std::vector<std::string> out;
  out.reserve(phys.size());
  for (int p : phys) out.push_back(res.short_name() + "-" + std::to_string(p));
  return out;
}

std::vector<int> chip_phys(const std::vector<DeviceEntry>& table, const std::vector<std::string>& ids) {
  std::vector<int> out;
  for (const auto& id : ids) {
    auto it = std::find_if(table.begin(), table.end(), [&](const DeviceEntry& e) { return e.id == id; });
    if (it != table.end()) out.push_back(it->phy);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::size_t> pick_reservation(const std::vector<Reservation>& reservations,
                                            const ResourceSpec& res,
                                            const std::vector<std::string>& available,
                                            const std::vector<std::string>& must_include, int size,
                                            const std::set<std::size_t>& skip) {
  const std::set<std::string> avail(available.begin(), available.end());
  for (std::size_t i = 0; i < reservations.size(); ++i) {
    if (skip.count(i) != 0) continue;
    const auto ids = chip_ids(res, reservations[i].chips);
    const std::set<std::string> mine(ids.begin(), ids.end());
    if (static_cast<int>(mine.size()) != size || static_cast<int>(ids.size()) != size) continue;
    const bool inside =
        std::all_of(ids.begin(), ids.end(), [&](const auto& id) { return avail.count(id) != 0; });
    const bool holds_must = std::all_of(must_include.begin(), must_include.end(),
                                        [&](const auto& id) { return mine.count(id) != 0; });
    if (inside && holds_must) return i;
  }
  return std::nullopt;
}

namespace {

// A DNS-1123 name as Kubernetes requires of namespaces and pods: lower-case letters, digits, '-' and '.',
// starting and ending with a letter or digit. '_' is not among them, so "<namespace>_<pod>" is unambiguous.
bool dns_name(const std::string& s) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (s.empty() || s.size() > 253 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

// The container's own system: a folder mount at one of these hides what the image has there (its libraries,
// its /etc/passwd) or lands in a kernel filesystem.
constexpr std::array<std::string_view, 21> kTopLevelSystem = {
    "bin", "boot", "dev",  "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt",
    "opt", "proc", "root", "run", "sbin", "srv", "sys",   "tmp",   "usr",    "var",
};
constexpr std::array<std::string_view, 3> kKernelTrees = {"/proc/", "/sys/", "/dev/"};

// The '/'-separated components of an absolute path, without the leading empty one; none when a component is
// empty, "." or "..".
std::optional<std::vector<std::string_view>> clean_components(std::string_view p) {
  std::vector<std::string_view> out;
  p.remove_prefix(1);
  while (true) {
    const auto slash = p.find('/');
    const std::string_view c = p.substr(0, slash);
    if (!is_file_name(c)) return std::nullopt;
    out.push_back(c);
    if (slash == std::string_view::npos) return out;
    p.remove_prefix(slash + 1);
  }
}

}  // namespace

Result<RanktableMountPoint> ranktable_mount_point(const std::string& ranktable_path) {
  auto refuse = [&](std::string_view why) {
    return Error(EPROTO, fmt::format("the scheduler's ranktable_path {:?} {}", ranktable_path, why));
  };
  if (ranktable_path.empty() || ranktable_path.front() != '/' ||
      ranktable_path.find('\0') != std::string::npos) {
    return refuse("is not an absolute path");
  }
  const auto parts = clean_components(ranktable_path);
  if (!parts) return refuse("has an empty, '.' or '..' component (or ends with '/')");
  if (parts->back().size() > NAME_MAX) return refuse("names a file longer than NAME_MAX");
  if (parts->size() < 2) return refuse("lies in '/': the plugin mounts the rank table's folder");
  const std::string folder = ranktable_path.substr(0, ranktable_path.size() - parts->back().size() - 1);
  const bool system = (parts->size() == 2 && std::find(kTopLevelSystem.begin(), kTopLevelSystem.end(),
                                                       parts->front()) != kTopLevelSystem.end()) ||
                      std::any_of(kKernelTrees.begin(), kKernelTrees.end(),
                                  [&](std::string_view t) { return (folder + "/").starts_with(t); });
  if (system) {
    return refuse(
        fmt::format("lies in {}: the plugin mounts the rank table's folder, which would hide the "
                    "container's own; give a folder of its own, e.g. /etc/ascend",
                    folder));
  }
  return RanktableMountPoint{folder, std::string(parts->back())};
}

Result<RanktableHostPaths> ranktable_host_paths(const std::string& dir, const Grant& grant) {
  if (!dns_name(grant.pod_namespace) || !dns_name(grant.pod)) {
    return Error(EPROTO, fmt::format("the scheduler names pod '{}/{}', which is not a Kubernetes name",
                                     grant.pod_namespace, grant.pod));
  }
  ASCEND_ASSIGN(auto mount, ranktable_mount_point(grant.ranktable_path), "");
  const std::string base =
      fmt::format("{}{}{}_{}", dir, dir.ends_with('/') ? "" : "/", grant.pod_namespace, grant.pod);
  return RanktableHostPaths{base, base + "/" + mount.name, base + ".json"};
}

static_assert(std::is_sorted(kLaunchEnv.begin(), kLaunchEnv.end()), "launch_env_name searches it");

bool launch_env_name(std::string_view name) {
  return std::binary_search(kLaunchEnv.begin(), kLaunchEnv.end(), name);
}

Result<GrantedAllocation> with_grant(ContainerAllocation base, const Grant& grant,
                                     const std::string& host_folder) {
  std::string folder;
  if (!grant.ranktable.empty()) {
    ASCEND_ASSIGN(auto mount, ranktable_mount_point(grant.ranktable_path), "");
    folder = std::move(mount.folder);
  }
  GrantedAllocation out;
  for (const auto& [name, value] : grant.env) {
    if (!launch_env_name(name) || value.find('\0') != std::string::npos) {
      constexpr std::size_t kShown = 64;
      out.dropped.push_back(fmt::format("{:?}{}", name.substr(0, kShown), name.size() > kShown ? "..." : ""));
      continue;
    }
    base.envs.emplace(name, value);  // emplace keeps an entry the plugin set
  }
  if (!grant.ranktable.empty()) base.mounts.push_back({folder, host_folder, true});
  out.allocation = std::move(base);
  return out;
}

}  // namespace ascend::plugin
