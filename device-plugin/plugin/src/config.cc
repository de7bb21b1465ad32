#include "ascend/plugin/config.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "ascend/plugin/scheduler_client.h"

namespace ascend::plugin {

std::string_view to_string(AllocateMode m) {
  switch (m) {
    case AllocateMode::kRuntime:
      return "runtime";
    case AllocateMode::kDeviceSpec:
      return "device-spec";
    case AllocateMode::kCdi:
      return "cdi";
  }
  return "?";
}

Result<AllocateMode> parse_allocate_mode(std::string_view s) {
  if (s == "runtime") return AllocateMode::kRuntime;
  if (s == "device-spec") return AllocateMode::kDeviceSpec;
  if (s == "cdi") return AllocateMode::kCdi;
  return Error::invalid("unknown allocate mode '" + std::string(s) + "' (valid: runtime, device-spec, cdi)");
}

std::string_view to_string(VnpuMode m) {
  switch (m) {
    case VnpuMode::kOff:
      return "off";
    case VnpuMode::kStatic:
      return "static";
    case VnpuMode::kDynamic:
      return "dynamic";
  }
  return "?";
}

Result<VnpuMode> parse_vnpu_mode(std::string_view s) {
  if (s == "off") return VnpuMode::kOff;
  if (s == "static") return VnpuMode::kStatic;
  if (s == "dynamic") return VnpuMode::kDynamic;
  return Error::invalid("unknown vnpu mode '" + std::string(s) + "' (valid: off, static, dynamic)");
}

namespace {

Status validate_kube(const Config& c) {
  const bool given =
      !c.kubeconfig.empty() || !c.kube_api.empty() || !c.kube_token_file.empty() || !c.kube_ca_file.empty();
  if (c.no_kube && given)
    return Error::invalid(
        "--no-kube turns the API server off; it cannot go with --kubeconfig, --kube-api, "
        "--kube-token-file or --kube-ca-file");
  if (c.kube_api.empty() && (!c.kube_token_file.empty() || !c.kube_ca_file.empty()))
    return Error::invalid("--kube-token-file and --kube-ca-file go with --kube-api URL");
  if (!c.kubeconfig.empty() && !c.kube_api.empty())
    return Error::invalid("give either --kubeconfig or --kube-api, not both");
  if (c.dra && (c.no_kube || c.metrics_only || c.telegraf))
    return Error::invalid(
        "--dra publishes ResourceSlices through the API server: it cannot go with --no-kube, --metrics-only "
        "or --telegraf");
  if (c.dra_vnpu && !c.dra)
    return Error::invalid("--dra-vnpu publishes vNPUs as DRA devices: it needs --dra");
  for (const auto* dir : {&c.dra_registry_dir, &c.dra_plugin_dir, &c.dra_cdi_dir}) {
    if (dir->empty() || dir->front() != '/')
      return Error::invalid(
          "--dra-registry-dir, --dra-plugin-dir and --dra-cdi-dir must be absolute paths (got '" + *dir +
          "')");
  }
  return {};
}

}  // namespace

Status validate(const Config& c) {
  if (c.kubelet_socket_dir.empty() || c.kubelet_socket_dir.front() != '/') {
    return Error::invalid("--kubelet-socket-dir must be an absolute path (got '" + c.kubelet_socket_dir +
                          "')");
  }
  if (!c.resource_name.empty()) {
    auto slash = c.resource_name.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == c.resource_name.size() ||
        c.resource_name.find('/', slash + 1) != std::string::npos) {
      return Error::invalid("--resource-name must look like vendor-domain/name (got '" + c.resource_name +
                            "')");
    }
  }
  if (c.vnpu == VnpuMode::kDynamic && c.allocate_mode != AllocateMode::kRuntime) {
    return Error::invalid(
        "--vnpu=dynamic needs --allocate-mode=runtime (the Ascend runtime creates the vNPU at container "
        "start)");
  }
  if (c.vnpu == VnpuMode::kStatic && c.allocate_mode == AllocateMode::kCdi) {
    return Error::invalid(
        "--vnpu=static does not work with --allocate-mode=cdi (CDI specs name whole chips only)");
  }
  if (!c.scheduler_url.empty()) {
    ASCEND_ASSIGN(SchedulerUrl url, parse_scheduler_url(c.scheduler_url), "--scheduler-url");
    if (!url.https && !loopback_host(url.host) && !c.insecure_scheduler_http) {
      return Error::invalid("--scheduler-url " + c.scheduler_url +
                            " is plain http to a host that is not loopback: the bearer token would cross the "
                            "network in clear text and any answer would be believed; use https:// (with "
                            "--scheduler-ca-file) or, on a network you trust, --insecure-scheduler-http");
    }
    if (!url.https && !c.scheduler_ca_file.empty()) {
      return Error::invalid("--scheduler-ca-file is set but --scheduler-url " + c.scheduler_url +
                            " is not https://");
    }
    if (c.ranktable_dir.empty() || c.ranktable_dir.front() != '/') {
      return Error::invalid("--ranktable-dir must be an absolute path (got '" + c.ranktable_dir + "')");
    }
  }
  if (c.metrics_only) {
    if (c.metrics_addr.empty()) return Error::invalid("--metrics-only needs --metrics-addr host:port");
    if (!c.scheduler_url.empty() || !c.kubeconfig.empty() || !c.kube_api.empty())
      return Error::invalid(
          "--metrics-only serves /metrics alone: it cannot go with --scheduler-url, --kubeconfig or "
          "--kube-api");
  }
  if (c.telegraf && (!c.scheduler_url.empty() || !c.kubeconfig.empty() || !c.kube_api.empty())) {
    return Error::invalid(
        "--telegraf writes the NPU metrics for Telegraf alone: it cannot go with --scheduler-url, "
        "--kubeconfig "
        "or --kube-api");
  }
  return validate_kube(c);
}

bool tracks_whole_chips(const Config& c) {
  return c.vnpu == VnpuMode::kDynamic || !c.scheduler_url.empty();
}

std::string default_node_name() {
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') return env;
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

}  // namespace ascend::plugin
