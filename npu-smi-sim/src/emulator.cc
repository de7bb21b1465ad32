#include "ascend/npu/emulator.h"

#include "ascend/npu/profiles.h"
#include "ascend/npu/vnpu_load.h"
#include "ascend/npu/workload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>
#include <sstream>

#include "ascend/common/dev_char.h"
#include "ascend/common/fs.h"
#include "ascend/common/unique_fd.h"

namespace ascend::npu {

namespace {

constexpr const char* kManifest = "usr/local/Ascend/driver/lib64/npu-sim/manifest";
constexpr const char* kLock = "usr/local/Ascend/driver/lib64/npu-sim/state.lock";

std::string join(const std::string& root, const std::string& rel) {
  if (root.empty() || root == "/") return "/" + rel;
  return root + (root.back() == '/' ? "" : "/") + rel;
}

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

// Records what load() creates, so unload() removes exactly that.
class Layout {
 public:
  explicit Layout(std::string root) : root_(std::move(root)) {}

  Status dir(const std::string& rel) {
    std::string cur;
    std::size_t pos = 0;
    while (pos != std::string::npos) {
      pos = rel.find('/', pos + 1);
      cur = rel.substr(0, pos);
      std::string full = join(root_, cur);
      if (exists(full)) continue;
      if (::mkdir(full.c_str(), 0755) != 0 && errno != EEXIST)
        return Error::from_errno(errno, "mkdir " + full);
      created_.push_back(cur + "/");
    }
    return {};
  }

  Status file(const std::string& rel, std::string_view content, mode_t mode = 0644) {
    std::string full = join(root_, rel);
    ASCEND_CHECK(dir(rel.substr(0, rel.rfind('/'))), "");
    bool existed = exists(full);
    ASCEND_CHECK(atomic_replace(full, content, mode), "");
    if (::chmod(full.c_str(), mode) != 0) return Error::from_errno(errno, "chmod " + full);
    if (!existed) created_.push_back(rel);
    return {};
  }

  // Large binaries (npu-smi) are copied without fsync: the emulated tree is scratch, not durable data.
  Status copy(const std::string& rel, const std::string& src, mode_t mode) {
    std::string full = join(root_, rel);
    ASCEND_CHECK(dir(rel.substr(0, rel.rfind('/'))), "");
    bool existed = exists(full);
    std::string tmp = full + ".tmp";
    std::error_code ec;
    std::filesystem::copy_file(src, tmp, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return Error(ec.value(), "copy " + src + " to " + tmp + ": " + ec.message());
    if (::chmod(tmp.c_str(), mode) != 0 || ::rename(tmp.c_str(), full.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return Error::from_errno(err, "install " + full);
    }
    if (!existed) created_.push_back(rel);
    return {};
  }

  Status node(const std::string& rel, int major, int minor) {
    std::string full = join(root_, rel);
    ASCEND_CHECK(dir(rel.substr(0, rel.rfind('/'))), "");
    if (exists(full)) {
      if (::unlink(full.c_str()) != 0) return Error::from_errno(errno, "remove old " + full);
    }
    if (::mknod(full.c_str(), S_IFCHR | 0660, makedev(major, minor)) != 0) {
      return Error::from_errno(errno, "mknod " + full);
    }
    if (::chmod(full.c_str(), 0660) != 0) return Error::from_errno(errno, "chmod " + full);
    created_.push_back(rel);
    return {};
  }

  std::string manifest() const {
    std::string out;
    for (const auto& p : created_) out += p + "\n";
    return out;
  }

 private:
  std::string root_;
  std::vector<std::string> created_;
};

std::string version_info(const HostState& s) {
  return "Version=" + s.driver_version +
         "\nascendhal_version=7.35.19\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\nprof_version=2."
         "0\n"
         "dvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion=V100R001C15SPC006B220\n"
         "compatible_version=[V100R001C30],[V100R001C13],[V100R001C15],[V100R001C17]\n"
         "compatible_version_fw=[7.0.0,7.2.99]\n";
}

std::string hccn_conf(const HostState& s) {
  std::string out;
  for (const auto& c : s.chips) {
    std::string id = std::to_string(c.phy_id);
    std::string gw = c.device_ip.substr(0, c.device_ip.rfind('.')) + ".254";
    for (const auto& [key, value] : {std::pair<const char*, std::string>{"address_", c.device_ip},
                                     {"netmask_", "255.255.255.0"},
                                     {"netdetect_", gw},
                                     {"gateway_", gw},
                                     {"send_arp_status_", "1"}}) {
      out += key;
      out += id;
      out += '=';
      out += value;
      out += '\n';
    }
  }
  return out;
}

constexpr const char* kInstallInfo =
    "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Type=full\n"
    "Driver_Install_Path_Param=/usr/local/Ascend\nDriver_Install_For_All=no\nDriver_Install_Mode=normal\n"
    "Driver_Install_Status=complete\nFirmware_Install_Type=full\nFirmware_Install_Path_Param=/usr/local/"
    "Ascend\n";

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

Emulator::Emulator(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string Emulator::state_path() const {
  return join(root_, kStateFile);
}

bool Emulator::loaded() const {
  return exists(state_path());
}

std::string Emulator::host_path(const std::string& abs_path) const {
  if (root_ == "/") return abs_path;
  return root_ + abs_path;
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

  Layout l(root_);
  if (opts.make_nodes) {
    for (const auto& c : s.chips) {
      auto n = s.chip_node(c.phy_id);
      ASCEND_CHECK(l.node(n.path.substr(1), n.major, n.minor), "create device node");
    }
    for (const auto& n : s.control_nodes())
      ASCEND_CHECK(l.node(n.path.substr(1), n.major, n.minor), "create device node");
    // vNPU nodes are not in the manifest: unload removes them from the state's list, as destroy does.
    for (const auto& v : s.vnpus) {
      auto n = s.vnpu_node(v.id);
      std::string full = join(root_, n.path.substr(1));
      ::unlink(full.c_str());
      if (::mknod(full.c_str(), S_IFCHR | 0660, makedev(n.major, n.minor)) != 0)
        return Error::from_errno(errno, "mknod " + full);
    }
  }
  const std::string drv = "usr/local/Ascend/driver/";
  ASCEND_CHECK(l.file(drv + "version.info", version_info(s)), "driver tree");
  for (const char* so : {"lib64/driver/libascend_hal.so", "lib64/driver/libdrvdsmi_host.so",
                         "lib64/common/libc_sec.so", "lib64/common/libmmpa.so"}) {
    ASCEND_CHECK(l.copy(drv + so, stub, 0755), "driver tree");
  }
  ASCEND_CHECK(l.copy(drv + "lib64/driver/libdcmi.so", dcmi, 0755), "driver tree");
  ASCEND_CHECK(l.file(drv + "include/dsmi_common_interface.h",
                      "/* emulated Ascend driver: see npu-sim --help */\n#pragma once\n"),
               "driver tree");
  ASCEND_CHECK(l.file(drv + "tools/hccn_tool",
                      "#!/bin/sh\necho 'hccn_tool: emulated host, no NIC' >&2\nexit 1\n", 0755),
               "driver tree");
  ASCEND_CHECK(l.copy("usr/local/dcmi/libdcmi.so", dcmi, 0755), "dcmi");
  ASCEND_CHECK(l.file("usr/local/dcmi/dcmi_interface_api.h", "/* emulated DCMI */\n#pragma once\n"), "dcmi");
  ASCEND_CHECK(l.copy("usr/local/bin/npu-smi", smi, 0755), "npu-smi");
  ASCEND_CHECK(l.file("etc/ascend_install.info", kInstallInfo), "etc");
  ASCEND_CHECK(l.file("etc/hccn.conf", hccn_conf(s)), "etc");
  // Each chip's PCI function in sysfs, as far as the DCMI backend reads it there: its NUMA node
  // (/sys/bus/pci/devices/<bus id, lower case>/numa_node), which DCMI itself does not report. Not on the
  // real root, whose /sys is the kernel's.
  if (root_ != "/") {
    for (const auto& c : s.chips) {
      std::string bdf = c.bus_id;
      for (char& ch : bdf) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      ASCEND_CHECK(l.file("sys/bus/pci/devices/" + bdf + "/numa_node", std::to_string(c.numa_node) + "\n"),
                   "sysfs");
    }
  }
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
  auto snap = read_state();
  // Every node this host has, with its numbers: once a node is gone its /dev/char link must go too (udev
  // removes a node's link with the node; the runtime made these, dev_char.h).
  std::vector<DeviceNode> nodes;
  if (snap) {
    for (const auto& v : snap->vnpus) {
      nodes.push_back(snap->vnpu_node(v.id));
      ::unlink(host_path(nodes.back().path).c_str());
    }
    if (snap->device_nodes) {
      for (const auto& c : snap->chips) nodes.push_back(snap->chip_node(c.phy_id));
      for (const auto& n : snap->control_nodes()) nodes.push_back(n);
    }
  }
  auto manifest = read_file(join(root_, kManifest));
  std::vector<std::string> entries;
  if (manifest) {
    std::istringstream in(*manifest);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) entries.push_back(line);
    }
  }
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

Result<HostState> Emulator::read_state() const {
  auto text = read_file(state_path(), 16U << 20);
  if (!text) {
    if (text.error().code() == ENOENT) {
      return Error::not_found("no emulated host is loaded at " + root_ +
                              " (run 'npu-sim load --profile NAME')");
    }
    return text.error().context("read state");
  }
  return parse_state(*text).context("state file " + state_path());
}

Result<HostState> Emulator::live_state() const {
  ASCEND_ASSIGN(HostState s, read_state(), "");
  apply_workloads(s, unix_now_ms());
  return s;
}

Result<DeviceSnapshot> Emulator::snapshot() const {
  ASCEND_ASSIGN(HostState s, live_state(), "read the emulated host");
  return to_snapshot(s);
}

Result<std::vector<ChipTelemetry>> Emulator::telemetry() const {
  ASCEND_ASSIGN(HostState s, live_state(), "read the emulated host");
  std::vector<ChipTelemetry> out;
  out.reserve(s.chips.size());
  for (const auto& c : s.chips) out.push_back(telemetry_of(c));
  return out;
}

namespace {

// What a writer SIGKILLed inside its change leaves behind (tests/npu-smi-sim/kill_test.cc): a temporary
// state file that never replaced the state, and the node of a vNPU it had not committed yet (create makes
// the node first) or had just committed away (destroy removes the node after). Only a writer holding the
// lock makes either, so under the lock both are a dead writer's: removed before the next change. Only
// character devices with this host's vNPU major go.
void remove_dead_writers_leftovers(const std::string& root, const HostState& s) {
  std::error_code ec;
  const std::string state_file = std::filesystem::path(kStateFile).filename().string() + ".tmp.";
  for (const auto& e : std::filesystem::directory_iterator(join(root, kStateDir), ec)) {
    if (e.path().filename().string().rfind(state_file, 0) == 0) ::unlink(e.path().c_str());
  }
  if (!s.device_nodes) return;
  for (const auto& e : std::filesystem::directory_iterator(join(root, "dev"), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vdavinci", 0) != 0) continue;
    const char* digits = name.c_str() + 8;
    char* end = nullptr;
    const long id = std::strtol(digits, &end, 10);
    struct stat st {};
    if (end == digits || *end != '\0' || s.vnpu(static_cast<int>(id)) != nullptr ||
        ::lstat(e.path().c_str(), &st) != 0 || !S_ISCHR(st.st_mode) ||
        static_cast<int>(major(st.st_rdev)) != s.majors.vdavinci) {
      continue;
    }
    ::unlink(e.path().c_str());
  }
}

// Every change: under the lock, read, put right what a dead writer left, change, commit, then `after_commit`
// (still under the lock).
Status locked_update(const Emulator& emu, const std::function<void()>& after_commit,
                     const std::function<Status(HostState&)>& change) {
  if (!emu.loaded())
    return Error::not_found("no emulated host is loaded at " + emu.root() +
                            " (run 'npu-sim load --profile NAME')");
  ASCEND_ASSIGN(FileLock lock, FileLock::acquire(join(emu.root(), kLock)), "update state");
  ASCEND_ASSIGN(HostState s, emu.read_state(), "update state");
  remove_dead_writers_leftovers(emu.root(), s);
  ASCEND_CHECK(change(s), "");
  s.generation++;
  ASCEND_CHECK(atomic_replace(join(emu.root(), kStateFile), serialize(s)), "update state");
  if (after_commit) after_commit();
  return {};
}

}  // namespace

Status Emulator::update(const std::function<Status(HostState&)>& change) {
  return locked_update(*this, nullptr, change);
}

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

Status Emulator::set_link(int phy_id, bool up) {
  return update([&](HostState& s) -> Status {
    Chip* c = s.chip(phy_id);
    if (c == nullptr) return Error::not_found("no device " + std::to_string(phy_id));
    c->link_up = up;
    return {};
  });
}

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
  const VnpuTemplate* t = s.find_template(template_name);
  if (t == nullptr) {
    std::string names;
    for (const auto& x : s.templates) names += (names.empty() ? "" : ", ") + x.name;
    return Error::invalid("unknown vNPU template '" + template_name + "' for " + c->name +
                          " (valid: " + names + ")");
  }
  std::set<int> used_ids;
  std::set<int> used_groups;
  for (const auto& v : s.vnpus) {
    used_ids.insert(v.id);
    if (v.phy_id == phy_id) used_groups.insert(v.vgroup);
  }
  const VnpuLoad load = vnpu_load(s.vnpus, s.templates, phy_id);
  const auto& cap = s.vnpu_capacity;
  const std::string short_of = vnpu_shortfall(load, *t, cap);
  if (short_of == "AICore") {
    return Error(ENOSPC, "device " + std::to_string(phy_id) + " has not enough free AICore for " +
                             template_name + " (" + std::to_string(load.aicore) + " of " +
                             std::to_string(cap.aicore) + " in use, needs " + std::to_string(t->aicore) +
                             ")");
  }
  if (!short_of.empty()) {
    return Error(ENOSPC, "device " + std::to_string(phy_id) + " has not enough free " + short_of + " for " +
                             template_name);
  }
  int lo = 100 + 16 * phy_id;
  int hi = lo + 15;
  Vnpu v;
  v.phy_id = phy_id;
  v.template_name = template_name;
  if (id) {
    if (*id < lo || *id > hi) {
      return Error::invalid("vNPU id " + std::to_string(*id) + " is outside device " +
                            std::to_string(phy_id) + "'s range " + std::to_string(lo) + "-" +
                            std::to_string(hi));
    }
    if (used_ids.count(*id) != 0) return Error(EEXIST, "vNPU id " + std::to_string(*id) + " already exists");
    v.id = *id;
  } else {
    v.id = -1;
    for (int k = lo; k <= hi; ++k) {
      if (used_ids.count(k) == 0) {
        v.id = k;
        break;
      }
    }
    if (v.id < 0) return Error(ENOSPC, "device " + std::to_string(phy_id) + " has no free vNPU id");
  }
  while (used_groups.count(v.vgroup) != 0) v.vgroup++;
  return v;
}

namespace {

// Whether `v` is held by `want`: every field `want` gives must match.

}  // namespace

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
  return locked_update(
             *this, remove_node,
             [&](HostState& s) -> Status {
               auto it = std::find_if(s.vnpus.begin(), s.vnpus.end(),
                                      [&](const Vnpu& v) { return v.id == vnpu_id; });
               if (it == s.vnpus.end() || (phy_id && it->phy_id != *phy_id)) {
                 return Error::not_found("no vNPU " + std::to_string(vnpu_id) +
                                         (phy_id ? " on device " + std::to_string(*phy_id) : std::string()));
               }
               if (holder && !held_by(*it, *holder)) {
                 std::string now = it->dynamic() ? "container " + it->owner.container_id : "no container";
                 return Error(ESTALE,
                              "vNPU " + std::to_string(vnpu_id) + " is now held by " + now + ", not " +
                                  (holder->container_id.empty() ? "the expected owner"
                                                                : "container " + holder->container_id));
               }
               if (s.device_nodes) {
                 numbers = s.vnpu_node(vnpu_id);
                 node = host_path(numbers.path);
               }
               s.vnpus.erase(it);
               return {};
             })
      .context("destroy vNPU " + std::to_string(vnpu_id));
}

}  // namespace ascend::npu
