// The spec's reading and edit as they were with nlohmann's ordered_json (before issue 25 moved the product to
// rapidjson, oci.h, spec_edit.h, trust.h): the reference spec_diff_test holds the product to. Test-only; the
// functions are the product's of commit 01e543b, with their messages; pure, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/hook/spec_edit.h"
#include "ascend/hook/trust.h"

namespace ascend::hook::reference {

Result<nlohmann::ordered_json> parse_spec(std::string_view text);
std::string json_string(const nlohmann::ordered_json& obj, std::string_view key);
std::optional<long long> json_integer(const nlohmann::ordered_json& obj, std::string_view key);
Result<std::vector<std::string>> spec_env(const nlohmann::ordered_json& spec);
Result<std::string> spec_rootfs(const nlohmann::ordered_json& spec, const std::string& bundle);
Result<std::vector<std::string>> marker_ids(const nlohmann::ordered_json& spec);
bool is_privileged(const nlohmann::ordered_json& spec);
Result<TrustedRequest> trusted_request_env(const nlohmann::ordered_json& spec, std::vector<std::string> env,
                                           bool accept_env_when_unprivileged);
Result<std::string> apply_spec_edit(std::string_view spec_text, const SpecEdit& edit);

}  // namespace ascend::hook::reference
