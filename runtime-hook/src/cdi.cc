#include "ascend/hook/cdi.h"

#include <cctype>
#include <set>

#include <fmt/format.h>

#include "ascend/common/fs.h"

namespace ascend::hook {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// obj[key] when obj is an object holding it, else null; never throws (json::value() does on a non-object).
json field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? json() : *it;
}

// obj[key] when it is a string, else `fallback`.
std::string text_or(const json& obj, const char* key, const std::string& fallback) {
  json v = field(obj, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

ordered_json device_node(const npu::DeviceNode& n, const std::string& container_path, const CdiInput& in) {
  return {{"path", container_path},
          {"hostPath", in.host_path(n.path)},
          {"type", "c"},
          {"major", n.major},
          {"minor", n.minor},
          {"fileMode", n.mode},
          {"permissions", "rw"}};
}

bool alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// Name segment rules shared by device names and the kind's class: alphanumeric at both ends, '-', '_', '.'
// (and alphanumerics) between.
bool valid_name(const std::string& n, std::size_t max) {
  if (n.empty() || n.size() > max || !alnum(n.front()) || !alnum(n.back())) return false;
  for (char c : n) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool valid_dns_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t dot = s.find('.', start);
    std::string label = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.size() > 63 || !alnum(label.front()) || !alnum(label.back())) return false;
    for (char c : label) {
      if (!alnum(c) && c != '-') return false;
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return true;
}

// "0.5.0" -> {0,5,0}; nullopt when not a known version.
std::optional<std::vector<int>> known_version(const std::string& v) {
  static const std::set<std::string> kKnown = {"0.3.0", "0.4.0", "0.5.0", "0.6.0",
                                               "0.7.0", "0.8.0", "1.0.0", "1.1.0"};
  if (kKnown.count(v) == 0) return std::nullopt;
  return std::vector<int>{v[0] - '0', v[2] - '0', v[4] - '0'};
}

Status only_fields(const json& obj, const std::set<std::string>& allowed, const std::string& where) {
  if (!obj.is_object()) return Error::invalid(where + ": expected an object");
  for (const auto& [k, v] : obj.items()) {
    if (allowed.count(k) == 0) return Error::invalid(fmt::format("{}: unknown field '{}'", where, k));
  }
  return {};
}

bool absolute(const json& j) {
  return j.is_string() && !j.get<std::string>().empty() && j.get<std::string>()[0] == '/';
}

bool string_list(const json& j) {
  if (!j.is_array()) return false;
  for (const auto& e : j) {
    if (!e.is_string()) return false;
  }
  return true;
}

// Validates one containerEdits object; raises `min` to the version its features need.
Status check_edits(const json& e, const std::string& where, std::vector<int>& min) {
  ASCEND_CHECK(
      only_fields(e, {"env", "deviceNodes", "mounts", "hooks", "intelRdt", "additionalGids", "netDevices"},
                  where),
      "");
  if (e.contains("env")) {
    if (!string_list(e["env"])) return Error::invalid(where + ".env: expected a list of strings");
    for (const auto& v : e["env"]) {
      if (v.get<std::string>().find('=') == std::string::npos)
        return Error::invalid(where + ".env: entry without '='");
    }
  }
  if (e.contains("deviceNodes")) {
    if (!e["deviceNodes"].is_array()) return Error::invalid(where + ".deviceNodes: expected a list");
    for (const auto& d : e["deviceNodes"]) {
      std::string w = where + ".deviceNodes[" + text_or(d, "path", "?") + "]";
      ASCEND_CHECK(
          only_fields(
              d, {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}, w),
          "");
      if (!absolute(field(d, "path"))) return Error::invalid(w + ".path: required, absolute");
      if (d.contains("hostPath")) {
        if (!absolute(d["hostPath"])) return Error::invalid(w + ".hostPath: must be absolute");
        min = std::max(min, std::vector<int>{0, 5, 0});
      }
      if (d.contains("type") && d["type"] != "c" && d["type"] != "b" && d["type"] != "u" &&
          d["type"] != "p") {
        return Error::invalid(w + ".type: one of b, c, u, p");
      }
      for (const char* k : {"major", "minor", "fileMode", "uid", "gid"}) {
        if (d.contains(k) && !d[k].is_number_integer())
          return Error::invalid(w + "." + k + ": expected an integer");
      }
      if (d.contains("permissions")) {
        std::string p = d["permissions"].is_string() ? d["permissions"].get<std::string>() : "?";
        if (p.empty() || p.find_first_not_of("rwm") != std::string::npos) {
          return Error::invalid(w + ".permissions: letters of r, w, m");
        }
      }
    }
  }
  if (e.contains("mounts")) {
    if (!e["mounts"].is_array()) return Error::invalid(where + ".mounts: expected a list");
    for (const auto& m : e["mounts"]) {
      std::string w = where + ".mounts[" + text_or(m, "containerPath", "?") + "]";
      ASCEND_CHECK(only_fields(m, {"hostPath", "containerPath", "options", "type"}, w), "");
      if (!m.contains("hostPath") || !m["hostPath"].is_string())
        return Error::invalid(w + ".hostPath: required");
      if (!absolute(field(m, "containerPath")))
        return Error::invalid(w + ".containerPath: required, absolute");
      if (m.contains("options") && !string_list(m["options"]))
        return Error::invalid(w + ".options: list of strings");
      if (m.contains("type")) min = std::max(min, std::vector<int>{0, 4, 0});
    }
  }
  if (e.contains("hooks")) {
    if (!e["hooks"].is_array()) return Error::invalid(where + ".hooks: expected a list");
    for (const auto& h : e["hooks"]) {
      ASCEND_CHECK(only_fields(h, {"hookName", "path", "args", "env", "timeout"}, where + ".hooks"), "");
      if (!h.contains("hookName") || !absolute(field(h, "path"))) {
        return Error::invalid(where + ".hooks: hookName and an absolute path are required");
      }
    }
  }
  return {};
}

}  // namespace

ordered_json make_cdi_spec(const npu::DeviceSnapshot& host, const CdiInput& in) {
  ordered_json devices = ordered_json::array();
  ordered_json all_nodes = ordered_json::array();
  for (const auto& c : host.chips) {
    npu::DeviceNode n = host.chip_node(c.phy_id);
    ordered_json node = device_node(n, n.path, in);
    all_nodes.push_back(node);
    devices.push_back({{"name", std::to_string(c.phy_id)}, {"containerEdits", {{"deviceNodes", {node}}}}});
  }
  devices.push_back({{"name", "all"}, {"containerEdits", {{"deviceNodes", all_nodes}}}});

  ordered_json control = ordered_json::array();
  for (const auto& n : host.control_nodes()) control.push_back(device_node(n, n.path, in));
  ordered_json mounts = ordered_json::array();
  for (const auto& p : in.mounts) {
    mounts.push_back({{"hostPath", in.host_path(p)},
                      {"containerPath", p},
                      {"options", {"ro", "nosuid", "nodev", "bind"}}});
  }
  ordered_json edits = {{"deviceNodes", control}};
  if (!mounts.empty()) edits["mounts"] = mounts;
  return {{"cdiVersion", kCdiVersion}, {"kind", in.kind}, {"devices", devices}, {"containerEdits", edits}};
}

Status validate_cdi_spec(const json& spec) {
  ASCEND_CHECK(
      only_fields(spec, {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}, "CDI spec"), "");
  if (!spec.contains("cdiVersion") || !spec["cdiVersion"].is_string())
    return Error::invalid("cdiVersion: required");
  auto version = known_version(spec["cdiVersion"].get<std::string>());
  if (!version)
    return Error::invalid("cdiVersion: '" + spec["cdiVersion"].get<std::string>() + "' is not a CDI version");
  std::vector<int> min = {0, 3, 0};

  if (!spec.contains("kind") || !spec["kind"].is_string()) return Error::invalid("kind: required");
  std::string kind = spec["kind"].get<std::string>();
  auto slash = kind.find('/');
  if (slash == std::string::npos || kind.find('/', slash + 1) != std::string::npos ||
      !valid_dns_subdomain(kind.substr(0, slash)) || !valid_name(kind.substr(slash + 1), 63)) {
    return Error::invalid("kind: '" + kind + "' is not vendor.com/class");
  }
  if (kind.substr(slash + 1).find('.') != std::string::npos) min = std::max(min, std::vector<int>{0, 6, 0});
  if (spec.contains("annotations")) min = std::max(min, std::vector<int>{0, 6, 0});

  if (!spec.contains("devices") || !spec["devices"].is_array() || spec["devices"].empty()) {
    return Error::invalid("devices: at least one device is required");
  }
  std::set<std::string> names;
  for (const auto& d : spec["devices"]) {
    ASCEND_CHECK(only_fields(d, {"name", "annotations", "containerEdits"}, "devices[]"), "");
    if (!d.contains("name") || !d["name"].is_string() || !valid_name(d["name"].get<std::string>(), 253)) {
      return Error::invalid("devices[]: name missing or not [A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9]");
    }
    std::string name = d["name"].get<std::string>();
    if (!names.insert(name).second) return Error::invalid("devices[" + name + "]: duplicate name");
    if (!std::isalpha(static_cast<unsigned char>(name[0]))) min = std::max(min, std::vector<int>{0, 5, 0});
    if (d.contains("annotations")) min = std::max(min, std::vector<int>{0, 6, 0});
    if (!d.contains("containerEdits"))
      return Error::invalid("devices[" + name + "]: containerEdits is required");
    ASCEND_CHECK(check_edits(d["containerEdits"], "devices[" + name + "].containerEdits", min), "");
  }
  if (spec.contains("containerEdits"))
    ASCEND_CHECK(check_edits(spec["containerEdits"], "containerEdits", min), "");
  if (*version < min) {
    return Error::invalid("cdiVersion " + spec["cdiVersion"].get<std::string>() +
                          " is lower than the features used need (" + std::to_string(min[0]) + "." +
                          std::to_string(min[1]) + "." + std::to_string(min[2]) + ")");
  }
  return {};
}

std::vector<std::string> cdi_device_names(const json& spec) {
  std::vector<std::string> out;
  json devices = field(spec, "devices");
  if (!devices.is_array()) return out;
  for (const auto& d : devices) out.push_back(text_or(spec, "kind", "") + "=" + text_or(d, "name", ""));
  return out;
}

Result<std::string> validate_cdi_file(const std::string& path) {
  ASCEND_ASSIGN(std::string text, read_file(path, 16U << 20), "");
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Error::invalid(path + ": not JSON");
  ASCEND_CHECK(validate_cdi_spec(j), path);
  return fmt::format("{}: valid CDI spec ({})\n", path, j["cdiVersion"].get<std::string>());
}

}  // namespace ascend::hook
