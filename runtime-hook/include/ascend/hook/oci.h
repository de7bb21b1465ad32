// The two OCI documents the hook path reads: the runtime state a hook receives on stdin, and the bundle's
// config.json. Parsing only; bounded inputs; pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"

namespace ascend::hook {

inline constexpr std::size_t kMaxStateBytes = 1U << 20;  // the state a hook reads from stdin
inline constexpr std::size_t kMaxSpecBytes = 16U << 20;  // config.json

struct OciState {
  std::string id;
  std::string status;
  int pid = 0;  // 0 when the container has no process (poststop)
  std::string bundle;
};

Result<OciState> parse_oci_state(std::string_view text);

// config.json as an ordered document (key order is kept when it is written back).
Result<nlohmann::ordered_json> parse_spec(std::string_view text);

// process.env; entries that are not strings are errors.
Result<std::vector<std::string>> spec_env(const nlohmann::ordered_json& spec);

// root.path made absolute against the bundle.
Result<std::string> spec_rootfs(const nlohmann::ordered_json& spec, const std::string& bundle);

}  // namespace ascend::hook
