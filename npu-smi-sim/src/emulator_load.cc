// Loading an emulated host under its root, unloading it, and rebooting it (emulator.h): the state it starts
// from, the programs it installs, and what it lays out (emulator_tree.h).
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <set>
#include <sstream>

#include "ascend/common/dev_char.h"
#include "ascend/common/fs.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "emulator_root.h"
#include "emulator_tree.h"

namespace ascend::npu {

using emulator_detail::DriverBinaries;
using emulator_detail::exists;
using emulator_detail::join;
using emulator_detail::kLock;
using emulator_detail::kManifest;

namespace {

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// The host a load starts: the profile with its majors and addresses, as a driver load leaves it (no faults,
// every link up, no process, no vNPU unless kept), at generation 1 with a new boot id.
Result<HostState> fresh_state(const HostState& profile, const LoadOptions& opts) {
  HostState s = profile;
  if (opts.majors) {
    s.majors = *opts.majors;
  } else {
    ASCEND_ASSIGN(std::string devices, read_file("/proc/devices"), "pick device majors");
    ASCEND_ASSIGN(s.majors, pick_free_majors(devices), "pick device majors");
  }
  if (!opts.keep_vnpus) assign_device_ips(s, opts.node_index);  // a reboot keeps the node's addresses
  for (auto& c : s.chips) {
    c.faults.clear();
    c.link_up = true;
  }
  s.workloads.clear();  // a driver load ends every process that ran on the chips
  if (!opts.keep_vnpus) s.vnpus.clear();
  s.device_nodes = opts.make_nodes;
  s.generation = 1;
  if (auto uuid = read_file("/proc/sys/kernel/random/uuid", 64); uuid && uuid->size() >= 36) {
    s.boot_id = uuid->substr(0, 36);
  } else {
    s.boot_id = std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
  }
  return s;
}

// npu-smi (opts.npu_smi_binary, else beside this program), and the libraries beside it as the build puts
// them.
Result<DriverBinaries> find_binaries(const LoadOptions& opts) {
  std::string smi = opts.npu_smi_binary.empty() ? self_dir() + "/npu-smi" : opts.npu_smi_binary;
  std::string stub = smi.substr(0, smi.rfind('/') + 1) + "libascend_driver_stub.so";
  if (!exists(smi))
    return Error::not_found("npu-smi binary not found at " + smi + " (build it, or pass --npu-smi)");
  if (!exists(stub))
    return Error::not_found("driver stub library not found at " + stub + " (build the project)");
  // The emulated libdcmi.so (npu-smi-sim/dcmi/): the build puts it in lib/ beside bin/.
  const std::string dcmi = smi.substr(0, smi.rfind('/') + 1) + "../lib/libdcmi.so";
  if (!exists(dcmi))
    return Error::not_found("emulated DCMI library not found at " + dcmi + " (build the project)");
  return DriverBinaries{smi, stub, dcmi};
}

// Every node the loaded host has, with its numbers: once a node is gone its /dev/char link must go too
// (udev removes a node's link with the node; the runtime made these, dev_char.h). The vNPU nodes, which are
// not in the manifest, are removed on the way.
std::vector<DeviceNode> nodes_removing_vnpus(const Emulator& emu) {
  auto snap = emu.read_state();
  std::vector<DeviceNode> nodes;
  if (snap) {
    for (const auto& v : snap->vnpus) {
      nodes.push_back(snap->vnpu_node(v.id));
      ::unlink(emu.host_path(nodes.back().path).c_str());
    }
    if (snap->device_nodes) {
      for (const auto& c : snap->chips) nodes.push_back(snap->chip_node(c.phy_id));
      for (const auto& n : snap->control_nodes()) nodes.push_back(n);
    }
  }
  return nodes;
}

// The manifest's entries (none when it cannot be read).
std::vector<std::string> manifest_entries(const std::string& root) {
  auto manifest = read_file(join(root, kManifest));
  std::vector<std::string> entries;
  if (manifest) {
    std::istringstream in(*manifest);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) entries.push_back(line);
    }
  }
  return entries;
}

}  // namespace

Result<DeviceMajors> pick_free_majors(const std::string& proc_devices_text) {
  std::set<int> used;
  std::istringstream in(proc_devices_text);
  std::string line;
  bool chr = false;
  while (std::getline(in, line)) {
    if (line.rfind("Character devices", 0) == 0) {
      chr = true;
      continue;
    }
    if (line.rfind("Block devices", 0) == 0) break;
    if (!chr) continue;
    std::istringstream ls(line);
    int major = 0;
    if (ls >> major) used.insert(major);
  }
  std::vector<int> free;
  for (int m = 234; m <= 254 && free.size() < 5; ++m) {
    if (used.count(m) == 0) free.push_back(m);
  }
  for (int m = 384; m <= 511 && free.size() < 5; ++m) {
    if (used.count(m) == 0) free.push_back(m);
  }
  if (free.size() < 5) return Error(ENOSPC, "no five free character majors in 234-254 and 384-511");
  return DeviceMajors{free[0], free[1], free[2], free[3], free[4]};
}

Status Emulator::load(const HostState& profile, const LoadOptions& opts) {
  if (loaded()) {
    if (!opts.force) {
      auto cur = read_state();
      std::string name = cur ? cur->profile : "unreadable state";
      return Error(EEXIST, "a host (" + name + ") is already loaded at " + root_ +
                               "; run 'npu-sim unload' first or pass --force");
    }
    ASCEND_CHECK(unload(), "replace the loaded host");
  }
  ASCEND_CHECK(make_dirs(root_), "create root");
  ASCEND_ASSIGN(const HostState s, fresh_state(profile, opts), "");
  ASCEND_ASSIGN(const DriverBinaries bins, find_binaries(opts), "");

  emulator_detail::Layout l(root_);
  if (opts.make_nodes) ASCEND_CHECK(make_device_nodes(l, root_, s), "");
  ASCEND_CHECK(write_driver_tree(l, s, bins), "");
  if (root_ != "/") ASCEND_CHECK(write_sysfs(l, s), "");
  ASCEND_CHECK(l.dir(kStateDir), "state");
  ASCEND_ASSIGN(FileLock lock, FileLock::acquire(join(root_, kLock)), "state");
  ASCEND_CHECK(atomic_replace(join(root_, kManifest), l.manifest()), "state");
  ASCEND_CHECK(atomic_replace(state_path(), serialize(s)), "state");
  return {};
}

Status Emulator::unload() {
  if (!loaded()) return Error::not_found("no emulated host is loaded at " + root_);
  // Held while the state and the lock file go away: a writer waiting on it then finds no host.
  ASCEND_ASSIGN(FileLock lock, FileLock::acquire(join(root_, kLock)), "unload");
  const std::vector<DeviceNode> nodes = nodes_removing_vnpus(*this);
  const std::vector<std::string> entries = manifest_entries(root_);
  for (const char* f : {kStateFile, kLock, kManifest}) ::unlink(join(root_, f).c_str());
  // Files first, then directories deepest first; a directory that holds foreign files stays.
  for (const auto& e : entries) {
    if (e.back() != '/') ::unlink(join(root_, e).c_str());
  }
  ::rmdir(join(root_, kStateDir).c_str());
  // Only a link that leads to its node's path and no longer to the device: another device's, or a node
  // someone made again since, keeps its link.
  for (const auto& n : nodes) (void)remove_stale_dev_char_link(root_, n.path, n.major, n.minor);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->back() == '/') ::rmdir(join(root_, it->substr(0, it->size() - 1)).c_str());
  }
  return {};
}

Status Emulator::reboot(LoadOptions opts) {
  ASCEND_ASSIGN(HostState s, read_state(), "reboot");
  if (!opts.majors) opts.majors = s.majors;
  opts.keep_vnpus = true;
  opts.force = true;
  opts.make_nodes = s.device_nodes;
  ASCEND_CHECK(unload(), "reboot");
  return load(s, opts).context("reboot");
}

}  // namespace ascend::npu
