#include "ascend/hook/hook.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "ascend/common/dev_char.h"
#include "ascend/common/fs.h"
#include "ascend/hook/devices.h"
#include "ascend/hook/executor.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/plan.h"
#include "ascend/hook/request.h"
#include "ascend/hook/spec_edit.h"
#include "ascend/hook/spec_scan.h"
#include "ascend/hook/trust.h"

namespace ascend::hook {

namespace {

// The planned nodes the runtime was not told to create (no matching linux.devices entry): the hook was
// registered without the shim and must make them itself.
std::vector<DeviceEntry> missing_nodes(const Spec& spec, const std::vector<DeviceEntry>& planned) {
  std::vector<DeviceEntry> out;
  const JsonValue* devices = nullptr;
  if (const JsonValue* l = json_member(spec.root(), "linux")) {
    if (const JsonValue* d = json_member(*l, "devices"); d != nullptr && d->IsArray()) devices = d;
  }
  for (const auto& p : planned) {
    bool present =
        devices != nullptr && std::any_of(devices->Begin(), devices->End(), [&](const JsonValue& e) {
          return json_string(e, "path") == p.path && json_integer(e, "major") == p.major &&
                 json_integer(e, "minor") == p.minor;
        });
    if (!present) out.push_back(p);
  }
  return out;
}

// Whether `options` is exactly the list of the shim's bind mounts (kBindMountOptions, in order).
bool are_our_options(const JsonValue& options) {
  if (!options.IsArray() || options.Size() != std::size(kBindMountOptions)) return false;
  for (rapidjson::SizeType i = 0; i < options.Size(); ++i) {
    const JsonValue& o = options[i];
    if (!o.IsString() || std::string_view(o.GetString(), o.GetStringLength()) != kBindMountOptions[i])
      return false;
  }
  return true;
}

// Drops the planned mounts the runtime performs itself: the shim (Config::injection "spec") wrote a bind
// mount with that destination and exactly its options, so a hook also registered through hooks.d does not
// stack a second copy on top. A user's own volume at a driver path (other options) is still covered by the
// driver's.
void drop_spec_mounts(const Spec& spec, std::vector<MountEntry>& planned) {
  const JsonValue* m = json_member(spec.root(), "mounts");
  if (m == nullptr || !m->IsArray()) return;
  std::erase_if(planned, [&](const MountEntry& p) {
    return std::any_of(m->Begin(), m->End(), [&](const JsonValue& e) {
      const JsonValue* options = json_member(e, "options");
      return json_string(e, "type") == "bind" && json_string(e, "destination") == p.path &&
             options != nullptr && are_our_options(*options);
    });
  });
}

}  // namespace

Status run_prestart(std::string_view oci_state, const Config& config, const PrestartOptions& opts) {
  ASCEND_ASSIGN(OciState state, parse_oci_state(oci_state), "");
  if (state.pid <= 0)
    return Error::invalid("OCI state of " + state.id + " has no pid; is this a prestart hook?");
  std::string spec_path = state.bundle + "/config.json";
  ASCEND_ASSIGN(std::string text, read_file(spec_path, kMaxSpecBytes), "read the container's spec");
  if (spec_requests_nothing(text)) {  // without a tree (spec_scan.h)
    spdlog::debug("container {} requests no NPU", state.id);
    return {};
  }
  ASCEND_ASSIGN(Spec spec, parse_spec(text), spec_path);
  ASCEND_ASSIGN(std::vector<std::string> spec_vars, spec_env(spec), spec_path);
  ASCEND_ASSIGN(TrustedRequest trusted,
                trusted_request_env(spec, std::move(spec_vars), config.accept_env_when_unprivileged),
                spec_path);
  const std::vector<std::string>& env = trusted.env;
  if (!trusted.note.empty()) spdlog::warn("container {}: {}", state.id, trusted.note);
  if (!requests_devices(env)) {
    spdlog::debug("container {} requests no NPU", state.id);
    return {};
  }

  ASCEND_ASSIGN(std::unique_ptr<npu::DeviceQuery> devices,
                open_devices(config, needs_full_snapshot(env), opts.run_helper), "");
  npu::DeviceQuery& dq = *devices;
  ASCEND_ASSIGN(npu::DeviceSnapshot host, dq.snapshot(), "read the NPU host");
  ASCEND_ASSIGN(std::optional<Request> request, parse_request(env, host), "");
  if (!request) return {};
  if (!request->vnpu_template.empty()) {
    return Error::invalid(
        std::string(kEnvVnpuSpecs) +
        " needs ascend-docker-runtime as the container runtime: the bare hook cannot create vNPUs");
  }
  std::vector<MountList> lists;
  if (!request->nodrv) {
    ASCEND_ASSIGN(lists, load_mount_lists(config.mount_list_dir, request->mount_lists), kEnvRuntimeMounts);
  }
  InjectionPlan plan = make_plan(*request, host, lists);
  ASCEND_ASSIGN(plan.devices, check_host_devices(plan.devices, host, dq), "");
  drop_spec_mounts(spec, plan.mounts);

  ExecTarget target;
  target.pid = state.pid;
  ASCEND_ASSIGN(target.rootfs, spec_rootfs(spec, state.bundle), spec_path);
  target.create_nodes = missing_nodes(spec, plan.devices);
  target.legacy_mounts = opts.legacy_mounts;
  if (!target.create_nodes.empty()) {
    spdlog::info("container {}: {} device nodes not in the spec, creating them (hook without the shim)",
                 state.id, target.create_nodes.size());
  }
  return execute(plan, dq, target).context("container " + state.id);
}

Status run_poststop(std::string_view oci_state, const Config& config, int destroy_vnpu,
                    const npu::HelperRunner& run_helper) {
  ASCEND_ASSIGN(OciState state, parse_oci_state(oci_state), "");
  const std::string& id = state.id;
  if (id.empty()) {
    return Error::invalid("OCI state has no container id: vNPU " + std::to_string(destroy_vnpu) +
                          " is left to 'ascend-ctk vnpu gc'");
  }
  ASCEND_ASSIGN(std::unique_ptr<npu::DeviceQuery> devices, open_devices(config, true, run_helper), "");
  npu::DeviceQuery& dq = *devices;
  // Only while this container still holds it: after a `vnpu gc` the id may belong to another container.
  npu::VnpuOwner holder;
  holder.container_id = id;
  // The node's numbers are read before the destroy: afterwards the seam no longer knows the vNPU.
  std::optional<npu::DeviceNode> node;
  if (auto host = dq.snapshot(); host && host->vnpu(destroy_vnpu) != nullptr)
    node = host->vnpu_node(destroy_vnpu);
  auto st = dq.destroy_vnpu(destroy_vnpu, std::nullopt, holder);
  if (!st) {
    if (st.error().code() == ENOENT || st.error().code() == ESTALE) {
      spdlog::info("container {}: vNPU {} already gone ({})", id, destroy_vnpu, st.error().message());
      return {};
    }
    return st.error().context("container " + id);
  }
  spdlog::info("container {}: destroyed vNPU {}", id, destroy_vnpu);
  if (node) {
    if (auto r = remove_stale_dev_char_link(dq.host_path("/"), node->path, node->major, node->minor); !r)
      spdlog::warn("container {}: {}", id, r.error().message());
  }
  return {};
}

}  // namespace ascend::hook
