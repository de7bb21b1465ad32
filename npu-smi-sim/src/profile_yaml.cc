// Custom profiles: YAML (common/yaml_json.h) in the JSON form the state file uses, validated by
// state_from_json. Kept apart from profiles.cc so that the static npu-smi does not link yaml-cpp.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "ascend/common/fs.h"
#include "ascend/common/yaml_json.h"
#include "ascend/npu/profiles.h"

namespace ascend::npu {

using nlohmann::json;

Result<HostState> load_profile(const std::string& name_or_path) {
  if (!names_yaml_file(name_or_path)) return builtin_profile(name_or_path);
  ASCEND_ASSIGN(json j, load_yaml_file(name_or_path), "profile");
  if (!j.is_object()) return Error::invalid("profile " + name_or_path + ": expected a mapping at the top");
  json merged;
  if (j.contains("base")) {
    if (!j["base"].is_string()) return Error::invalid("profile " + name_or_path + ": base: expected a name");
    ASCEND_ASSIGN(HostState base, builtin_profile(j["base"].get<std::string>()), "profile " + name_or_path);
    merged = base;
    j.erase("base");
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() != "chips") {
        merged[it.key()] = it.value();
        continue;
      }
      if (!it.value().is_array())
        return Error::invalid("profile " + name_or_path + ": chips: expected a list");
      for (const auto& patch : it.value()) {
        if (!patch.is_object() || !patch.contains("phy_id")) {
          return Error::invalid("profile " + name_or_path + ": chips: every entry needs a phy_id");
        }
        bool found = false;
        for (auto& c : merged["chips"]) {
          if (c["phy_id"] == patch["phy_id"]) {
            c.merge_patch(patch);
            found = true;
          }
        }
        if (!found) merged["chips"].push_back(patch);
      }
    }
  } else {
    merged = std::move(j);
  }
  ASCEND_ASSIGN(HostState s, state_from_json(merged), "profile " + name_or_path);
  if (s.profile.empty()) s.profile = "custom";
  if (s.templates.empty()) {
    int mem = s.chips.front().hbm_total_mb > 0 ? s.chips.front().hbm_total_mb : 24576;
    s.templates = templates_for(s.family, mem);
    if (s.vnpu_capacity.aicore == 0)
      s.vnpu_capacity = vnpu_capacity_for(s.family, s.chips.front().aicore_count, mem);
  }
  for (auto& c : s.chips) {
    if (c.device_ip.empty()) c.device_ip = device_ip(0, c.phy_id);
  }
  return s;
}

}  // namespace ascend::npu
