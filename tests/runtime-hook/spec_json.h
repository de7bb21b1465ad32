// For tests that build config.json as nlohmann's document: the product's readers of a spec (oci.h, trust.h)
// take the Spec that parse_spec reads, so these read the document's text with parse_spec first, as the shim
// and the hook read config.json. Test-only; pure, thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/trust.h"

namespace ascend::hook {

// root.path made absolute against the bundle.
inline Result<std::string> spec_rootfs(const nlohmann::ordered_json& spec, const std::string& bundle) {
  ASCEND_ASSIGN(Spec read, parse_spec(spec.dump()), "");
  return spec_rootfs(read, bundle);
}

// A spec parse_spec refuses is not privileged.
inline bool is_privileged(const nlohmann::ordered_json& spec) {
  auto read = parse_spec(spec.dump());
  return read && is_privileged(*read);
}

// A spec parse_spec refuses: its error is the request's.
inline Result<TrustedRequest> trusted_request_env(const nlohmann::ordered_json& spec,
                                                  std::vector<std::string> env,
                                                  bool accept_env_when_unprivileged) {
  ASCEND_ASSIGN(Spec read, parse_spec(spec.dump()), "");
  return trusted_request_env(read, std::move(env), accept_env_when_unprivileged);
}

}  // namespace ascend::hook
