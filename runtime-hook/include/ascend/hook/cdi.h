// CDI (Container Device Interface) specs for CDI-aware engines (podman, Docker 25+, containerd, CRI-O): the
// same devices and driver mounts the hook injects, as a file the engine applies itself. Follows the CDI
// specification (cncf-tags/container-device-interface SPEC.md): kind "huawei.com/npu", one device per chip
// named by its physical id plus "all", the control nodes and driver mounts in the spec-wide containerEdits.
// cdiVersion is the lowest version that has every feature used (0.5.0: device names starting with a digit,
// deviceNodes.hostPath). Pure functions; thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::hook {

inline constexpr const char* kCdiKind = "huawei.com/npu";
inline constexpr const char* kCdiVersion = "0.5.0";

struct CdiInput {
  std::string kind = kCdiKind;
  std::vector<std::string> mounts;  // absolute paths as the host sees them (before host_path), existing ones
  std::function<std::string(const std::string&)> host_path;  // DeviceQuery::host_path
};

nlohmann::ordered_json make_cdi_spec(const npu::DeviceSnapshot& host, const CdiInput& in);

// Checks a CDI document against the specification's rules: required fields, no unknown fields, a known
// cdiVersion no lower than the features used need, the kind and device-name syntax, unique names, absolute
// paths. Errors name the offending field.
Status validate_cdi_spec(const nlohmann::json& spec);
// `ascend-ctk cdi validate FILE`: reads and checks the file; the one line to print ("FILE: valid CDI spec
// (0.6.0)"), or an error naming the file.
Result<std::string> validate_cdi_file(const std::string& path);

// "huawei.com/npu=0", ... : the fully-qualified names a user passes to --device.
std::vector<std::string> cdi_device_names(const nlohmann::json& spec);

}  // namespace ascend::hook

namespace ascend::hook {

struct Config;

// Reads the host (the config's host root, through the device query API), checks its device nodes, reads the
// mount lists and keeps the entries present on the host (symlinks only with allow_link), and returns the
// validated spec. The one function here that touches the file system.
Result<nlohmann::ordered_json> generate_cdi_spec(const Config& config,
                                                 const std::vector<std::string>& mount_lists, bool allow_link,
                                                 const std::string& kind = kCdiKind);

}  // namespace ascend::hook
