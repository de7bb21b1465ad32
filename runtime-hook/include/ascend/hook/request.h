// What a container asks for, read from its environment with the variables of Huawei's Ascend Docker Runtime
// (so existing images and docs keep working):
//   ASCEND_VISIBLE_DEVICES  0 | 0,2 | 0-3 | 0-1,4 | all | Ascend910-3 | npu-3 ; void, none or empty: nothing
//   ASCEND_RUNTIME_OPTIONS  comma list of NODRV (no driver files) and VIRTUAL (ids are vNPU ids)
//   ASCEND_RUNTIME_MOUNTS   comma list of mount-list names (default: base)
//   ASCEND_ALLOW_LINK       True | False (default False): whether a mount-list entry may be a symlink
//   ASCEND_VNPU_SPECS       a vNPU template: create a vNPU of it on the one requested chip
// When a variable appears more than once the last occurrence wins, as for the process itself; the shim and
// the hook both read the request through this one parser. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::hook {

inline constexpr const char* kEnvVisibleDevices = "ASCEND_VISIBLE_DEVICES";
inline constexpr const char* kEnvRuntimeOptions = "ASCEND_RUNTIME_OPTIONS";
inline constexpr const char* kEnvRuntimeMounts = "ASCEND_RUNTIME_MOUNTS";
inline constexpr const char* kEnvAllowLink = "ASCEND_ALLOW_LINK";
inline constexpr const char* kEnvVnpuSpecs = "ASCEND_VNPU_SPECS";
inline constexpr const char* kEnvMarker = "ASCEND_DOCKER_RUNTIME";  // set to True in served containers

struct Request {
  std::vector<int> ids;  // sorted, unique; physical ids, or vNPU ids when is_virtual
  bool nodrv = false;
  bool is_virtual = false;
  std::vector<std::string> mount_lists{"base"};
  bool allow_link = false;
  std::string vnpu_template;  // non-empty: create a vNPU of this template on ids[0]

  bool operator==(const Request&) const = default;
};

// The value of `key` in an OCI env list ("KEY=VALUE" strings): the last occurrence, or nullopt.
std::optional<std::string> env_value(const std::vector<std::string>& env, std::string_view key);

// True when ASCEND_VISIBLE_DEVICES names devices (not absent, empty, void or none). Needs no host facts, so
// the shim decides with it alone whether to touch a container at all.
bool requests_devices(const std::vector<std::string>& env);

// The full request, validated against the host. nullopt when no device is requested. Errors name the
// variable, its value and what is valid ("ASCEND_VISIBLE_DEVICES=9: no device 9 on this host (valid ids:
// 0-7)").
Result<std::optional<Request>> parse_request(const std::vector<std::string>& env,
                                             const npu::DeviceSnapshot& host);

// "0-3,5" for {0,1,2,3,5}.
std::string format_ids(const std::vector<int>& ids);

}  // namespace ascend::hook
