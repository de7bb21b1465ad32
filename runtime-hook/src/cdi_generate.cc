// generate_cdi_spec: the I/O around make_cdi_spec (kept apart so that cdi.cc stays pure).
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "ascend/hook/cdi.h"
#include "ascend/hook/config.h"
#include "ascend/hook/devices.h"
#include "ascend/hook/executor.h"
#include "ascend/hook/mount_list.h"
#include "ascend/hook/plan.h"

namespace ascend::hook {

Result<nlohmann::ordered_json> generate_cdi_spec(const Config& config,
                                                 const std::vector<std::string>& mount_lists, bool allow_link,
                                                 const std::string& kind) {
  ASCEND_ASSIGN(std::unique_ptr<npu::DeviceQuery> devices, open_devices(config, false), "");
  const npu::DeviceQuery& dq = *devices;
  ASCEND_ASSIGN(npu::DeviceSnapshot host, dq.snapshot(), "read the NPU host");
  Request all;
  for (const auto& c : host.chips) all.ids.push_back(c.phy_id);
  ASCEND_ASSIGN(std::vector<MountList> lists, load_mount_lists(config.mount_list_dir, mount_lists), "");
  InjectionPlan plan = make_plan(all, host, lists);
  ASCEND_CHECK(check_host_devices(plan.devices, host, dq), "");

  CdiInput in;
  in.kind = kind;
  in.host_path = [&dq](const std::string& p) { return dq.host_path(p); };
  for (const auto& m : plan.mounts) {
    std::string hp = dq.host_path(m.path);
    struct stat st {};
    if (::lstat(hp.c_str(), &st) != 0) {
      spdlog::info("mount list {}: {} is not on the host, skipped", m.list, m.path);
      continue;
    }
    if (S_ISLNK(st.st_mode) && !allow_link) {
      return Error(ELOOP, "mount list " + m.list + ": " + m.path +
                              " is a symbolic link on the host (pass --allow-link)");
    }
    in.mounts.push_back(m.path);
  }
  nlohmann::ordered_json spec = make_cdi_spec(host, in);
  ASCEND_CHECK(validate_cdi_spec(spec), "generated CDI spec");
  return spec;
}

}  // namespace ascend::hook
