#include "ascend/hook/devices.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>

#include "ascend/common/fs.h"
#include "ascend/common/unique_fd.h"
#include "ascend/hook/request.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/node_query.h"

namespace ascend::hook {
namespace {

npu::HelperOptions helper_options(const Config& config) {
  npu::HelperOptions o;
  o.root = config.host_root;
  o.helper = config.dcmi_helper;
  o.dcmi_library = config.dcmi_library;
  return o;
}

// The helper must be root-owned and not writable by others (checked on the opened file) before it runs.
Status check_helper(const Config& config) {
  UniqueFd fd(::open(config.dcmi_helper.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return Error::from_errno(errno, "DCMI helper " + config.dcmi_helper + " (set dcmi-helper in the config)");
  return check_protected(fd.get(), config.dcmi_helper, "DCMI helper");
}

// The seam through the one factory (npu/backend.h), with DCMI reached through the helper, which is checked
// before it runs (a full query, or the factory's probe of the loader's search path).
Result<std::unique_ptr<npu::DeviceQuery>> open_backend(const Config& config, npu::HelperOptions helper,
                                                       npu::Backend* chosen) {
  npu::BackendOptions o;
  ASCEND_ASSIGN(o.backend, npu::parse_backend(config.backend), "config 'backend'");
  o.root = config.host_root;
  o.dcmi_library = config.dcmi_library;
  const bool full = helper.full;
  npu::DcmiOpener through_helper = npu::helper_dcmi_opener(std::move(helper));
  auto open_dcmi = [&](const npu::BackendOptions& b) -> Result<std::unique_ptr<npu::DeviceQuery>> {
    if (full || npu::dcmi_library_guessed(b)) ASCEND_CHECK(check_helper(config), "");
    return through_helper(b);
  };
  return npu::open_device_query(o, open_dcmi, chosen);
}

}  // namespace

Result<bool> uses_dcmi(const Config& config) {
  npu::Backend chosen = npu::Backend::kAuto;
  ASCEND_CHECK(open_backend(config, helper_options(config), &chosen), "");
  return chosen == npu::Backend::kDcmi;
}

Result<std::unique_ptr<ExecBroker>> start_helper_broker(const Config& config) {
  ASCEND_ASSIGN(bool dcmi, uses_dcmi(config), "");
  if (!dcmi) return std::unique_ptr<ExecBroker>();
  BrokerProgram p;
  p.prefix = npu::helper_argv(helper_options(config), {});
  p.env = npu::helper_env();
  p.admit = npu::admit_helper_verb;
  return ExecBroker::start(std::move(p)).context("DCMI helper (set dcmi-helper in the config)");
}

Result<std::unique_ptr<npu::DeviceQuery>> open_devices(const Config& config, bool full,
                                                       npu::HelperRunner run_helper) {
  npu::HelperOptions o = helper_options(config);
  o.full = full;
  o.run = std::move(run_helper);
  return open_backend(config, std::move(o), nullptr);
}

bool needs_full_snapshot(const std::vector<std::string>& env) {
  const std::string vis = std::string(kEnvVisibleDevices) + "=";
  const std::string specs = std::string(kEnvVnpuSpecs) + "=";
  for (const std::string& e : env) {
    if (e.rfind(specs, 0) == 0 && e.size() > specs.size()) return true;
    if (e.rfind(vis, 0) != 0) continue;
    std::string v;
    for (char c : e.substr(vis.size())) {
      if (!std::isspace(static_cast<unsigned char>(c)))
        v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (v == "all" || v == "none" || v == "void") continue;
    for (char c : v) {
      if (std::isalpha(static_cast<unsigned char>(c))) return true;
    }
  }
  return false;
}

}  // namespace ascend::hook
