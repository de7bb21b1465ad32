// The emulated host's vNPUs (emulator.h): the planning rules (plan_vnpu, pure), creating and destroying
// one with its device node, and the vNPU mode.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "ascend/common/dev_char.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/vnpu_load.h"
#include "emulator_root.h"

namespace ascend::npu {
namespace {

// The template `template_name` names, or EINVAL listing the valid ones.
Result<const VnpuTemplate*> find_template(const HostState& s, const Chip& c,
                                          const std::string& template_name) {
  const VnpuTemplate* t = s.find_template(template_name);
  if (t == nullptr) {
    std::string names;
    for (const auto& x : s.templates) names += (names.empty() ? "" : ", ") + x.name;
    return Error::invalid("unknown vNPU template '" + template_name + "' for " + c.name +
                          " (valid: " + names + ")");
  }
  return t;
}

// Whether chip `phy_id` has room for one more vNPU of template `t`: ENOSPC naming what it is short of.
Status check_room(const HostState& s, int phy_id, const VnpuTemplate& t, const std::string& template_name) {
  const VnpuLoad load = vnpu_load(s.vnpus, s.templates, phy_id);
  const auto& cap = s.vnpu_capacity;
  const std::string short_of = vnpu_shortfall(load, t, cap);
  if (short_of == "AICore") {
    return Error(ENOSPC, "device " + std::to_string(phy_id) + " has not enough free AICore for " +
                             template_name + " (" + std::to_string(load.aicore) + " of " +
                             std::to_string(cap.aicore) + " in use, needs " + std::to_string(t.aicore) + ")");
  }
  if (!short_of.empty()) {
    return Error(ENOSPC, "device " + std::to_string(phy_id) + " has not enough free " + short_of + " for " +
                             template_name);
  }
  return {};
}

// The new vNPU's id: `id` when it is free and in the chip's range (100 + 16 * phy_id, 16 ids), else the
// range's first free one.
Result<int> pick_vnpu_id(const std::set<int>& used_ids, int phy_id, std::optional<int> id) {
  int lo = 100 + 16 * phy_id;
  int hi = lo + 15;
  if (id) {
    if (*id < lo || *id > hi) {
      return Error::invalid("vNPU id " + std::to_string(*id) + " is outside device " +
                            std::to_string(phy_id) + "'s range " + std::to_string(lo) + "-" +
                            std::to_string(hi));
    }
    if (used_ids.count(*id) != 0) return Error(EEXIST, "vNPU id " + std::to_string(*id) + " already exists");
    return *id;
  }
  for (int k = lo; k <= hi; ++k) {
    if (used_ids.count(k) == 0) return k;
  }
  return Error(ENOSPC, "device " + std::to_string(phy_id) + " has no free vNPU id");
}

// The vNPU `vnpu_id` (on chip `phy_id` when given), checked to be held by `holder` when given.
Result<std::vector<Vnpu>::iterator> find_held(HostState& s, int vnpu_id, std::optional<int> phy_id,
                                              const std::optional<VnpuOwner>& holder) {
  auto it = std::find_if(s.vnpus.begin(), s.vnpus.end(), [&](const Vnpu& v) { return v.id == vnpu_id; });
  if (it == s.vnpus.end() || (phy_id && it->phy_id != *phy_id)) {
    return Error::not_found("no vNPU " + std::to_string(vnpu_id) +
                            (phy_id ? " on device " + std::to_string(*phy_id) : std::string()));
  }
  if (holder && !held_by(*it, *holder)) {
    std::string now = it->dynamic() ? "container " + it->owner.container_id : "no container";
    return Error(ESTALE, "vNPU " + std::to_string(vnpu_id) + " is now held by " + now + ", not " +
                             (holder->container_id.empty() ? "the expected owner"
                                                           : "container " + holder->container_id));
  }
  return it;
}

}  // namespace

Status Emulator::set_vnpu_mode(const std::string& mode) {
  return update([&](HostState& s) -> Status {
    if (mode != "docker" && mode != "vm") return Error::invalid("unknown vnpu mode '" + mode + "'");
    if (mode != s.vnpu_mode && !s.vnpus.empty()) {
      return Error(EBUSY,
                   "The vNPU(s) in another mode already exist. Destroy them before switching the mode");
    }
    s.vnpu_mode = mode;
    return {};
  });
}

Result<Vnpu> plan_vnpu(const HostState& s, int phy_id, const std::string& template_name,
                       std::optional<int> id) {
  const Chip* c = s.chip(phy_id);
  if (c == nullptr) return Error::not_found("no device with physical id " + std::to_string(phy_id));
  ASCEND_ASSIGN(const VnpuTemplate* t, find_template(s, *c, template_name), "");
  ASCEND_CHECK(check_room(s, phy_id, *t, template_name), "");
  std::set<int> used_ids;
  std::set<int> used_groups;
  for (const auto& v : s.vnpus) {
    used_ids.insert(v.id);
    if (v.phy_id == phy_id) used_groups.insert(v.vgroup);
  }
  Vnpu v;
  v.phy_id = phy_id;
  v.template_name = template_name;
  ASCEND_ASSIGN(v.id, pick_vnpu_id(used_ids, phy_id, id), "");
  while (used_groups.count(v.vgroup) != 0) v.vgroup++;
  return v;
}

Result<Vnpu> Emulator::create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                                   const VnpuOwner& owner) {
  Vnpu made;
  std::string node_made;  // removed again when the state cannot be committed
  auto st = update([&](HostState& s) -> Status {
    ASCEND_ASSIGN(made, plan_vnpu(s, phy_id, template_name, id), "");
    made.owner = owner;
    made.status = owner.container_id.empty() ? 0 : 1;
    if (s.device_nodes) {
      auto node = s.vnpu_node(made.id);
      std::string path = host_path(node.path);
      ::unlink(path.c_str());
      if (::mknod(path.c_str(), S_IFCHR | 0660, makedev(node.major, node.minor)) != 0) {
        return Error::from_errno(errno, "mknod " + path);
      }
      ::chmod(path.c_str(), 0660);
      node_made = path;
    }
    s.vnpus.push_back(made);
    std::sort(s.vnpus.begin(), s.vnpus.end(), [](const Vnpu& a, const Vnpu& b) { return a.id < b.id; });
    return {};
  });
  if (!st) {
    if (!node_made.empty()) ::unlink(node_made.c_str());
    return st.error().context("create vNPU");
  }
  return made;
}

Status Emulator::destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                              const std::optional<VnpuOwner>& holder) {
  // The node goes after the commit (under the lock still): a writer killed in between leaves a node without
  // a vNPU, which the next change removes, never a vNPU without its node. When it fails, the next change
  // retries.
  std::string node;
  DeviceNode numbers;
  // As udev does when a device goes: its /dev/char/<major>:<minor> link goes with the node (a container
  // start made it, dev_char.h), or it would dangle once no later holder of the id removes it.
  auto remove_node = [&] {
    if (node.empty()) return;
    ::unlink(node.c_str());
    (void)remove_stale_dev_char_link(root_, numbers.path, numbers.major, numbers.minor);
  };
  auto change = [&](HostState& s) -> Status {
    ASCEND_ASSIGN(auto it, find_held(s, vnpu_id, phy_id, holder), "");
    if (s.device_nodes) {
      numbers = s.vnpu_node(vnpu_id);
      node = host_path(numbers.path);
    }
    s.vnpus.erase(it);
    return {};
  };
  return emulator_detail::locked_update(*this, remove_node, change)
      .context("destroy vNPU " + std::to_string(vnpu_id));
}

}  // namespace ascend::npu
