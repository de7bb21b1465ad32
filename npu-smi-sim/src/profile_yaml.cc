// Custom profiles: YAML read with yaml-cpp, turned into the JSON form the state file uses, validated by
// state_from_json. Kept apart from profiles.cc so that the static npu-smi does not link yaml-cpp.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "ascend/common/fs.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/yaml_json.h"

namespace ascend::npu {

using nlohmann::json;

namespace {

// A plain scalar that is an integer in JSON's form: -?(0|[1-9][0-9]*). No std::regex: compiling one costs the
// container runtime shim, which reads its YAML config on every container start, a few hundred microseconds.
bool is_json_integer(std::string_view v) {
  if (v.starts_with('-')) v.remove_prefix(1);
  if (v.empty() || (v[0] == '0' && v.size() > 1)) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A plain decimal number -?([0-9]+.[0-9]*|.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?, parsed whole.
std::optional<double> decimal(std::string_view v) {
  std::string_view body = v.starts_with('-') ? v.substr(1) : v;
  if (body.empty() || !((body[0] >= '0' && body[0] <= '9') || body[0] == '.')) return std::nullopt;
  double d = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d, std::chars_format::general);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

json scalar_to_json(const YAML::Node& n) {
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: always a string
  if (is_json_integer(v)) {
    long long i = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
    if (ec == std::errc() && end == v.data() + v.size()) return i;
    return v;  // out of range
  }
  if (auto d = decimal(v)) return *d;
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  if (v == "null" || v == "~") return nullptr;
  return v;
}

}  // namespace

json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(n);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
  }
  return nullptr;
}

Result<json> parse_yaml(const std::string& text, const std::string& name) {
  try {
    YAML::Node root = YAML::Load(text);
    return yaml_to_json(root);
  } catch (const YAML::Exception& e) {
    return Error::invalid(name + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

Result<json> load_yaml_file(const std::string& path) {
  ASCEND_ASSIGN(std::string text, read_file(path, 16U << 20), "read " + path);
  return parse_yaml(text, path);
}

Result<HostState> load_profile(const std::string& name_or_path) {
  bool is_file = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml") ||
                 name_or_path.ends_with(".yml");
  if (!is_file) return builtin_profile(name_or_path);
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
