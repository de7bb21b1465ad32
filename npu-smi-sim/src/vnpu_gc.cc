#include "ascend/npu/vnpu_gc.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ascend/common/dev_char.h"
#include "ascend/common/fs.h"

namespace ascend::npu {

namespace {

std::string read_link(const std::string& path) {
  char buf[256];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// runc writes init_process_start as a number (older versions: a string).
std::uint64_t as_u64(const nlohmann::json& j) {
  if (j.is_number_unsigned() || j.is_number_integer()) return j.get<std::uint64_t>();
  if (j.is_string()) {
    try {
      return std::stoull(j.get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

std::uint64_t process_start(const std::string& proc, int pid) {
  if (pid <= 0) return 0;
  auto text = read_file(proc + "/" + std::to_string(pid) + "/stat", 64U << 10);
  if (!text) return 0;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the fields follow the last ')'.
  auto close = text->rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(text->substr(close + 1));
  std::string field;
  std::uint64_t start = 0;
  for (int i = 3; i <= 22 && in >> field; ++i) {
    if (i == 3 && field == "Z") return 0;
    if (i == 22) start = std::strtoull(field.c_str(), nullptr, 10);
  }
  return start;
}

std::string own_pid_ns(const std::string& proc) {
  return read_link(proc + "/self/ns/pid");
}

std::string boot_of(const DeviceSnapshot& host, const std::string& proc) {
  auto kernel = read_file(proc + "/sys/kernel/random/boot_id", 64);
  std::string k = kernel ? kernel->substr(0, kernel->find('\n')) : std::string("?");
  return k + ":" + host.boot_id;
}

VnpuOwner owner_for_this_process(std::string container_id, std::string state_root,
                                 const DeviceSnapshot& host) {
  VnpuOwner o;
  o.boot = boot_of(host, "/proc");
  o.container_id = std::move(container_id);
  o.state_root = std::move(state_root);
  o.pid = static_cast<int>(::getpid());
  o.pid_start = process_start("/proc", o.pid);
  o.pid_ns = own_pid_ns("/proc");
  return o;
}

ContainerProbe::ContainerProbe(std::string proc) : proc_(std::move(proc)), pid_ns_(own_pid_ns(proc_)) {}

bool earlier_boot(std::string_view recorded, std::string_view now) {
  if (recorded.empty()) return false;  // an owner recorded before boots were: no verdict by boot
  const auto split = [](std::string_view b) {
    const auto colon = b.find(':');
    return colon == std::string_view::npos ? std::pair(b, std::string_view())
                                           : std::pair(b.substr(0, colon), b.substr(colon + 1));
  };
  const auto [kernel_then, load_then] = split(recorded);
  const auto [kernel_now, load_now] = split(now);
  if (kernel_then != kernel_now) return true;
  return !load_then.empty() && !load_now.empty() && load_then != load_now;
}

Liveness ContainerProbe::check(const VnpuOwner& o, const std::string& boot) const {
  using S = Liveness::State;
  const std::string& id = o.container_id;
  if (earlier_boot(o.boot, boot))
    return {S::kGone, "container " + id + " was of a boot before the last reboot"};
  if (!is_file_name(id)) return {S::kUnsure, "container id '" + id + "' is not a runc id"};
  if (!o.pid_ns.empty() && o.pid_ns != pid_ns_) {
    return {S::kUnsure, "created in pid namespace " + o.pid_ns + ", this is " +
                            (pid_ns_.empty() ? "unknown" : pid_ns_) +
                            " (run gc in the host's pid namespace)"};
  }
  // The creator first: once it is gone it can create nothing more, so the engine's state read after it is
  // final. (Read the other way round, a container created in between would look gone.)
  if (o.pid > 0 && o.pid_start != 0 && process_start(proc_, o.pid) == o.pid_start) {
    return {S::kHeld, "its runtime process " + std::to_string(o.pid) + " is still creating container " + id};
  }
  const std::string root = o.state_root.empty() ? "/run/runc" : o.state_root;
  const std::string state = root + "/" + id + "/state.json";
  auto text = read_file(state, 16U << 20);
  if (!text) {
    int e = text.error().code();
    struct stat st {};
    // runc made the folder for this container during this boot and nothing removes it but a reboot: when it
    // is missing, this process does not see the host's (a container without the mount).
    if (::stat(root.c_str(), &st) != 0)
      return {S::kUnsure, "state folder " + root + " is not visible here (mount it, or run on the host)"};
    if (e == ENOENT || e == ENOTDIR) return {S::kGone, "container " + id + " does not exist in " + root};
    return {S::kUnsure, text.error().message()};
  }
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("init_process_pid")) {
    return {S::kUnsure, state + " is not a runc state file"};
  }
  const auto& pid_j = j["init_process_pid"];
  const int pid = pid_j.is_number_integer() ? pid_j.get<int>() : 0;
  const std::uint64_t start = j.contains("init_process_start") ? as_u64(j["init_process_start"]) : 0;
  if (pid > 0 && start != 0 && process_start(proc_, pid) == start) {
    return {S::kHeld, "container " + id + " is alive (init pid " + std::to_string(pid) + ")"};
  }
  return {S::kGone, "container " + id + " has stopped (init pid " + std::to_string(pid) + " is gone)"};
}

GcPlan plan_vnpu_gc(const DeviceSnapshot& host, const std::function<Liveness(const VnpuOwner&)>& liveness) {
  GcPlan plan;
  for (const auto& v : host.vnpus) {
    if (!v.dynamic() || v.owner.container_id.starts_with(kDraClaimOwnerPrefix)) continue;
    Liveness l = liveness(v.owner);
    (l.state == Liveness::State::kGone ? plan.destroy : plan.keep).push_back({v, l.why, l.state});
  }
  return plan;
}

Result<GcReport> run_vnpu_gc(DeviceQuery& dq, const ContainerProbe& probe, bool dry_run) {
  ASCEND_ASSIGN(DeviceSnapshot host, dq.snapshot(), "vnpu gc");
  const std::string boot = boot_of(host, "/proc");
  GcPlan plan = plan_vnpu_gc(host, [&](const VnpuOwner& o) { return probe.check(o, boot); });
  GcReport report;
  report.kept = std::move(plan.keep);
  const std::string root = dq.host_path("/");
  for (auto& item : plan.destroy) {
    if (!dry_run) {
      auto st = dq.destroy_vnpu(item.vnpu.id, item.vnpu.phy_id, item.vnpu.owner);
      if (!st) {
        // Gone already (its poststop hook ran) or given to a new container since: nothing to do.
        if (st.error().code() == ENOENT || st.error().code() == ESTALE) continue;
        report.errors.push_back(st.error().message());
        continue;
      }
      auto node = host.vnpu_node(item.vnpu.id);
      if (auto r = remove_stale_dev_char_link(root, node.path, node.major, node.minor); !r) {
        report.errors.push_back("vNPU " + std::to_string(item.vnpu.id) + ": " + r.error().message());
      }
    }
    report.destroyed.push_back(std::move(item));
  }
  return report;
}

}  // namespace ascend::npu
