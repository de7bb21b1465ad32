#include "ascend/hook/lifecycle.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

#include "ascend/common/dev_char.h"
#include "ascend/hook/devices.h"

namespace ascend::hook {

namespace {

std::string describe(const npu::GcItem& item) {
  const npu::Vnpu& v = item.vnpu;
  return "vNPU " + std::to_string(v.id) + " (" + v.template_name + ", device " + std::to_string(v.phy_id) +
         "): " + item.why;
}

}  // namespace

std::string format_gc_report(const npu::GcReport& report, int static_count, bool dry_run) {
  std::string out;
  for (const auto& d : report.destroyed)
    out += (dry_run ? "would destroy " : "destroyed ") + describe(d) + "\n";
  for (const auto& k : report.kept) out += "kept " + describe(k) + "\n";
  for (const auto& e : report.errors) out += "failed: " + e + "\n";
  out += "vnpu gc: " + std::to_string(report.destroyed.size()) +
         (dry_run ? " to destroy, " : " destroyed, ") + std::to_string(report.kept.size()) + " kept, " +
         std::to_string(static_count) + " static\n";
  return out;
}

Result<GcOutcome> vnpu_gc(const Config& config, bool dry_run) {
  ASCEND_ASSIGN(std::unique_ptr<npu::DeviceQuery> devices, open_devices(config, true), "vnpu gc");
  npu::DeviceQuery& dq = *devices;
  ASCEND_ASSIGN(npu::DeviceSnapshot host, dq.snapshot(), "vnpu gc");
  const int statics = static_cast<int>(
      std::count_if(host.vnpus.begin(), host.vnpus.end(), [](const npu::Vnpu& v) { return !v.dynamic(); }));
  npu::ContainerProbe probe;
  ASCEND_ASSIGN(npu::GcReport report, npu::run_vnpu_gc(dq, probe, dry_run), "");
  return GcOutcome{format_gc_report(report, statics, dry_run), !report.errors.empty()};
}

Result<std::vector<std::string>> create_dev_char_symlinks(const Config& config) {
  ASCEND_ASSIGN(std::unique_ptr<npu::DeviceQuery> devices, open_devices(config, false), "");
  const npu::DeviceQuery& dq = *devices;
  ASCEND_ASSIGN(npu::DeviceSnapshot host, dq.snapshot(), "read the NPU host");
  std::vector<npu::DeviceNode> nodes;
  for (const auto& c : host.chips) nodes.push_back(host.chip_node(c.phy_id));
  for (const auto& n : host.control_nodes()) nodes.push_back(n);
  for (const auto& v : host.vnpus) nodes.push_back(host.vnpu_node(v.id));
  const std::string root = dq.host_path("/");
  std::vector<std::string> made;
  for (const auto& n : nodes) {
    struct stat st {};
    // Only nodes that are there as the driver reports them: a link to nothing helps nobody.
    if (::stat(dq.host_path(n.path).c_str(), &st) != 0 || !S_ISCHR(st.st_mode) ||
        st.st_rdev != makedev(n.major, n.minor))
      continue;
    ASCEND_ASSIGN(bool wrote, ensure_dev_char_link(root, n.path, n.major, n.minor), "");
    if (wrote) {
      made.push_back("/dev/char/" + std::to_string(n.major) + ":" + std::to_string(n.minor) + " -> .." +
                     n.path.substr(4));
    }
  }
  return made;
}

Result<std::vector<std::string>> remove_dev_char_symlinks(const Config& config) {
  return remove_recorded_dev_char_links(config.host_root);
}

}  // namespace ascend::hook
