#include "ascend/hook/devices.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>

#include "ascend/common/fs.h"
#include "ascend/common/unique_fd.h"
#include "ascend/hook/request.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/node_query.h"

namespace ascend::hook {
namespace {

bool dcmi_backend(const Config& config, npu::Backend b) {
  if (b != npu::Backend::kAuto) return b == npu::Backend::kDcmi;
  if (!config.dcmi_library.empty()) return true;
  for (const std::string& lib : npu::dcmi_library_candidates(config.host_root)) {
    if (::access(lib.c_str(), R_OK) == 0) return true;
  }
  return false;
}

npu::HelperOptions helper_options(const Config& config) {
  npu::HelperOptions o;
  o.root = config.host_root;
  o.helper = config.dcmi_helper;
  o.dcmi_library = config.dcmi_library;
  return o;
}

}  // namespace

Result<bool> uses_dcmi(const Config& config) {
  ASCEND_ASSIGN(npu::Backend b, npu::parse_backend(config.backend), "config 'backend'");
  return dcmi_backend(config, b);
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
  ASCEND_ASSIGN(bool dcmi, uses_dcmi(config), "");
  if (!dcmi) return std::unique_ptr<npu::DeviceQuery>(std::make_unique<npu::Emulator>(config.host_root));
  if (full) {
    UniqueFd fd(::open(config.dcmi_helper.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid())
      return Error::from_errno(errno,
                               "DCMI helper " + config.dcmi_helper + " (set dcmi-helper in the config)");
    ASCEND_CHECK(check_protected(fd.get(), config.dcmi_helper, "DCMI helper"), "");
  }
  npu::HelperOptions o = helper_options(config);
  o.full = full;
  o.run = std::move(run_helper);
  return npu::open_node_query(std::move(o));
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
