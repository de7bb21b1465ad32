#include "ascend/plugin/config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <climits>
#include <cstdlib>
#include <functional>
#include <map>

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

Result<long> parse_count(const std::string& v, long lo, long hi) {
  try {
    std::size_t pos = 0;
    long n = std::stol(v, &pos);
    if (pos == v.size() && n >= lo && n <= hi) return n;
  } catch (const std::exception&) {
  }
  return Error::invalid("expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                        " (got '" + v + "')");
}

Result<Config> load_config_file(const std::string& path, Config base) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Error::not_found("config file " + path + " cannot be read");
  } catch (const YAML::Exception& e) {
    return Error::invalid("config file " + path + ": " + e.what());
  }
  if (root.IsNull()) return base;
  if (!root.IsMap())
    return Error::invalid("config file " + path + ": expected a mapping of flag names to values");

  using Setter = std::function<Status(const std::string&)>;
  auto str = [](std::string& field) -> Setter {
    return [&field](const std::string& v) -> Status {
      field = v;
      return {};
    };
  };
  const std::map<std::string, Setter> setters = {
      {"kubelet-socket-dir", str(base.kubelet_socket_dir)},
      {"host-root", str(base.host_root)},
      {"backend", str(base.backend)},
      {"dcmi-library", str(base.dcmi_library)},
      {"resource-name", str(base.resource_name)},
      {"metrics-addr", str(base.metrics_addr)},
      {"pod-resources-socket", str(base.pod_resources_socket)},
      {"log-level", str(base.log_level)},
      {"log-file", str(base.log_file)},
      {"scheduler-url", str(base.scheduler_url)},
      {"node-name", str(base.node_name)},
      {"scheduler-token-file", str(base.scheduler_token_file)},
      {"scheduler-ca-file", str(base.scheduler_ca_file)},
      {"ranktable-dir", str(base.ranktable_dir)},
      {"health-interval",
       [&base](const std::string& v) -> Status {
         ASCEND_ASSIGN(long n, parse_count(v, 10, 60000), "");
         base.health_interval = std::chrono::milliseconds(n);
         return {};
       }},
      {"vnpu-gc-interval",
       [&base](const std::string& v) -> Status {
         ASCEND_ASSIGN(long n, parse_count(v, 0, 86400), "");
         base.vnpu_gc_interval = std::chrono::seconds(n);
         return {};
       }},
      {"allocate-mode",
       [&base](const std::string& v) -> Status {
         ASCEND_ASSIGN(base.allocate_mode, parse_allocate_mode(v), "");
         return {};
       }},
      {"vnpu",
       [&base](const std::string& v) -> Status {
         ASCEND_ASSIGN(base.vnpu, parse_vnpu_mode(v), "");
         return {};
       }},
  };
  for (const auto& kv : root) {
    std::string key;
    try {
      key = kv.first.as<std::string>();
    } catch (const YAML::Exception&) {
      return Error::invalid("config file " + path + ": a key is not a string");
    }
    auto it = setters.find(key);
    if (it == setters.end()) {
      std::string valid;
      for (const auto& s : setters) valid.append(valid.empty() ? "" : ", ").append(s.first);
      std::string msg = "config file " + path;
      msg.append(": unknown key '").append(key).append("' (valid: ").append(valid).append(")");
      return Error::invalid(msg);
    }
    std::string where = "config file " + path;
    where.append(": '").append(key).append("'");
    if (!kv.second.IsScalar()) return Error::invalid(where + " must be a string");
    ASCEND_CHECK(it->second(kv.second.as<std::string>()), where);
  }
  return base;
}

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
    ASCEND_CHECK(parse_scheduler_url(c.scheduler_url), "--scheduler-url");
    if (c.ranktable_dir.empty() || c.ranktable_dir.front() != '/') {
      return Error::invalid("--ranktable-dir must be an absolute path (got '" + c.ranktable_dir + "')");
    }
  }
  return {};
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
