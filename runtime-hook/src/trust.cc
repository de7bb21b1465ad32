#include "ascend/hook/trust.h"

#include <algorithm>

#include <fmt/format.h>

#include "ascend/hook/oci.h"
#include "ascend/hook/request.h"

namespace ascend::hook {

Result<std::vector<std::string>> marker_ids(const Spec& spec) {
  std::vector<std::string> ids;
  const JsonValue* mounts = json_member(spec.root(), "mounts");
  if (mounts == nullptr || !mounts->IsArray()) return ids;
  const std::string prefix = std::string(kMarkerDir) + "/";
  for (const auto& m : mounts->GetArray()) {
    std::string dest = json_string(m, "destination");
    while (dest.size() > 1 && dest.back() == '/') dest.pop_back();
    if (dest.rfind(prefix, 0) != 0 || json_string(m, "source") != "/dev/null") continue;
    std::string id = dest.substr(prefix.size());
    if (id.empty() || id.size() > 6 ||
        !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Error::invalid(
          fmt::format("config.json mount {}: a device marker must be {}<id>", dest, prefix));
    }
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

bool is_privileged(const Spec& spec) {
  const JsonValue* p = json_member(spec.root(), "process");
  const JsonValue* caps = p != nullptr ? json_member(*p, "capabilities") : nullptr;
  const JsonValue* bounding = caps != nullptr ? json_member(*caps, "bounding") : nullptr;
  if (bounding == nullptr || !bounding->IsArray()) return false;
  return std::any_of(bounding->Begin(), bounding->End(), [](const JsonValue& c) {
    return c.IsString() && std::string_view(c.GetString(), c.GetStringLength()) == "CAP_SYS_ADMIN";
  });
}

Result<TrustedRequest> trusted_request_env(const Spec& spec, std::vector<std::string> env,
                                           bool accept_env_when_unprivileged) {
  TrustedRequest out;
  ASCEND_ASSIGN(std::vector<std::string> markers, marker_ids(spec), "");
  const std::string key = kEnvVisibleDevices;
  auto from_env = env_value(env, key);
  if (!markers.empty()) {
    std::string ids;
    for (const auto& id : markers) ids += (ids.empty() ? "" : ",") + id;
    if (from_env && *from_env != ids) {
      out.note = key + "=" + *from_env +
                 " in the environment overridden by the orchestrator's device mounts (" + ids + ")";
    }
    env.push_back(key + "=" + ids);  // the last occurrence wins
  } else if (from_env && !accept_env_when_unprivileged && !is_privileged(spec)) {
    out.note = key + "=" + *from_env +
               " in the environment ignored: accept-env-when-unprivileged is false, the container is not "
               "privileged and the orchestrator mounted no device markers";
    std::erase_if(env, [&](const std::string& e) { return e == key || e.rfind(key + "=", 0) == 0; });
  }
  out.env = std::move(env);
  return out;
}

}  // namespace ascend::hook
