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

// The emulator as a container start that names its chips by number sees it: the device nodes its host holds,
// read as the DCMI backend reads them on real hardware (node_query.h), not its state file. The nodes are
// what such a request needs (numbers, vNPU ids, device numbers), the emulator makes them with each change of
// its state (a vNPU's node before its state, chips' nodes at load), and a real host answers the same request
// the same way. Everything else goes to the emulator itself.
class EmulatorNodes final : public npu::DeviceQuery {
 public:
  explicit EmulatorNodes(std::unique_ptr<npu::DeviceQuery> emulator, std::string root)
      : emulator_(std::move(emulator)), root_(std::move(root)) {}
  Result<npu::DeviceSnapshot> snapshot() const override {
    auto s = npu::scan_device_nodes(root_);
    // No node at all: the emulator says why (no host loaded: which command loads one), or answers from its
    // state (a host loaded without nodes, by a user who may not make them), whose nodes are then checked.
    if (!s) return emulator_->snapshot();
    s->backend = "emulator";
    return s;
  }
  Result<std::vector<npu::ChipTelemetry>> telemetry() const override { return emulator_->telemetry(); }
  std::string host_path(const std::string& abs_path) const override { return emulator_->host_path(abs_path); }
  std::vector<std::string> driver_files() const override { return emulator_->driver_files(); }
  Result<npu::Vnpu> create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                                const npu::VnpuOwner& owner) override {
    return emulator_->create_vnpu(phy_id, template_name, id, owner);
  }
  Status destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                      const std::optional<npu::VnpuOwner>& holder) override {
    return emulator_->destroy_vnpu(vnpu_id, phy_id, holder);
  }
  Result<std::unique_ptr<npu::Subscription>> subscribe(ChangeCallback on_change) const override {
    return emulator_->subscribe(std::move(on_change));
  }

 private:
  std::unique_ptr<npu::DeviceQuery> emulator_;
  std::string root_;
};

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
  npu::Backend chosen = npu::Backend::kAuto;
  ASCEND_ASSIGN(std::unique_ptr<npu::DeviceQuery> dq, open_backend(config, std::move(o), &chosen), "");
  if (full || chosen != npu::Backend::kEmulator) return dq;
  return std::unique_ptr<npu::DeviceQuery>(std::make_unique<EmulatorNodes>(std::move(dq), config.host_root));
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
