// YAML to JSON (yaml_json.h): yaml-cpp reads, nlohmann::json is what every reader validates.
#include "ascend/common/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

#include "ascend/common/fs.h"

namespace ascend {

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

}  // namespace

json plain_scalar_to_json(std::string_view v) {
  if (is_json_integer(v)) {
    long long i = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
    if (ec == std::errc() && end == v.data() + v.size()) return i;
    return std::string(v);  // out of range
  }
  if (auto d = decimal(v)) return *d;
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  if (v == "null" || v == "~") return nullptr;
  return std::string(v);
}

namespace {

json scalar_to_json(const YAML::Node& n) {
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: always a string
  return plain_scalar_to_json(v);
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

bool names_yaml_file(std::string_view name) {
  return name.find('/') != std::string_view::npos || name.ends_with(".yaml") || name.ends_with(".yml");
}

Result<json> load_yaml_file(const std::string& path) {
  ASCEND_ASSIGN(std::string text, read_file(path, 16U << 20), "read " + path);
  return parse_yaml(text, path);
}

}  // namespace ascend
