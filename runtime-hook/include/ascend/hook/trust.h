// Which request for NPUs to believe. A container's environment comes from the image as much as from the
// orchestrator: an image that bakes in ASCEND_VISIBLE_DEVICES=all would take every NPU of a shared node. The
// device plugin's Allocate also answers with a mount of /dev/null at
// /var/run/ascend-container-devices/<id> per device, which only the orchestrator can add to config.json (an
// image can add env, not mounts; an image VOLUME gets a volume folder as its source, never /dev/null).
//
//   - Such marker mounts, when present, are the request: their ids replace ASCEND_VISIBLE_DEVICES.
//   - Without them, ASCEND_VISIBLE_DEVICES from the environment is honoured when the configuration's
//     accept-env-when-unprivileged is true (the default, Huawei's runtime's behaviour), or when the container
//     is privileged (CAP_SYS_ADMIN in its bounding set: it could open any device anyway); otherwise it is
//     ignored and the container starts without NPUs.
// The shim and the hook both decide through this one function, on the same config.json. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/hook/oci.h"

namespace ascend::hook {

inline constexpr const char* kMarkerDir = "/var/run/ascend-container-devices";

struct TrustedRequest {
  std::vector<std::string> env;  // the environment to parse the request from (request.h)
  std::string note;              // non-empty: what was overridden or ignored, for the log
};

// The ids (decimal strings, in mount order) of the marker mounts in spec.mounts: destination
// <kMarkerDir>/<id> with source /dev/null. A marker whose name is not a decimal id is an error.
Result<std::vector<std::string>> marker_ids(const Spec& spec);

// CAP_SYS_ADMIN in process.capabilities.bounding.
bool is_privileged(const Spec& spec);

// `env` (process.env) with ASCEND_VISIBLE_DEVICES replaced by the marker ids, kept, or dropped, as above.
Result<TrustedRequest> trusted_request_env(const Spec& spec, std::vector<std::string> env,
                                           bool accept_env_when_unprivileged);

}  // namespace ascend::hook
