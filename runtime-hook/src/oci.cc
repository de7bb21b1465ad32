#include "ascend/hook/oci.h"

#include <fmt/format.h>

#include "ascend/common/json_depth.h"

namespace ascend::hook {

using nlohmann::ordered_json;

namespace {

// An OCI document nests about six levels; anything past this is refused before parsing (see json_depth.h).
constexpr int kMaxJsonDepth = 64;

const char* type_word(bool array) {
  return array ? "a list" : "an object";
}

// The type checks of the spec's fields that the shim and the hook read. Each returns an error naming the
// field ("hooks.prestart[0].path is not a string"); an absent or null field is fine (its default applies).
class SpecChecker {
 public:
  Status object_at(const ordered_json& parent, const std::string& key, const std::string& where) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null() || it->is_object()) return {};
    return bad(where + key, type_word(false));
  }
  Status list_at(const ordered_json& parent, const std::string& key, const std::string& where) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null() || it->is_array()) return {};
    return bad(where + key, type_word(true));
  }
  Status strings_at(const ordered_json& parent, const std::string& key, const std::string& where) const {
    ASCEND_CHECK(list_at(parent, key, where), "");
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return {};
    for (const auto& v : *it) {
      if (!v.is_string())
        return Error::invalid(fmt::format("config.json {}{} holds a non-string entry", where, key));
    }
    return {};
  }
  Status string_at(const ordered_json& parent, const std::string& key, const std::string& where) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null() || it->is_string()) return {};
    return bad(where + key, "a string");
  }
  Status integer_at(const ordered_json& parent, const std::string& key, const std::string& where) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null() || it->is_number_integer()) return {};
    return bad(where + key, "an integer");
  }
  // Every element of parent[key] is an object whose listed fields have the right types.
  Status objects_at(const ordered_json& parent, const std::string& key, const std::string& where,
                    std::initializer_list<const char*> strings,
                    std::initializer_list<const char*> string_lists,
                    std::initializer_list<const char*> integers) const {
    ASCEND_CHECK(list_at(parent, key, where), "");
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return {};
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto& e = (*it)[i];
      std::string at = where + key + "[" + std::to_string(i) + "]";
      if (!e.is_object()) return bad(at, type_word(false));
      for (const char* f : strings) ASCEND_CHECK(string_at(e, f, at + "."), "");
      for (const char* f : string_lists) ASCEND_CHECK(strings_at(e, f, at + "."), "");
      for (const char* f : integers) ASCEND_CHECK(integer_at(e, f, at + "."), "");
    }
    return {};
  }

 private:
  static Error bad(const std::string& field, const char* want) {
    return Error::invalid("config.json " + field + " is not " + want);
  }
};

Status check_spec_types(const ordered_json& spec) {
  const SpecChecker c;
  ASCEND_CHECK(c.object_at(spec, "process", ""), "");
  if (auto p = spec.find("process"); p != spec.end() && p->is_object()) {
    ASCEND_CHECK(c.strings_at(*p, "env", "process."), "");
    ASCEND_CHECK(c.object_at(*p, "capabilities", "process."), "");
    if (auto caps = p->find("capabilities"); caps != p->end() && caps->is_object()) {
      ASCEND_CHECK(c.strings_at(*caps, "bounding", "process.capabilities."), "");
    }
  }
  ASCEND_CHECK(c.object_at(spec, "root", ""), "");
  if (auto r = spec.find("root"); r != spec.end() && r->is_object()) {
    ASCEND_CHECK(c.string_at(*r, "path", "root."), "");
  }
  ASCEND_CHECK(c.objects_at(spec, "mounts", "", {"destination", "type", "source"}, {"options"}, {}), "");
  ASCEND_CHECK(c.object_at(spec, "linux", ""), "");
  if (auto l = spec.find("linux"); l != spec.end() && l->is_object()) {
    ASCEND_CHECK(c.objects_at(*l, "devices", "linux.", {"path", "type"}, {}, {"major", "minor"}), "");
    ASCEND_CHECK(c.object_at(*l, "resources", "linux."), "");
    if (auto r = l->find("resources"); r != l->end() && r->is_object()) {
      ASCEND_CHECK(
          c.objects_at(*r, "devices", "linux.resources.", {"type", "access"}, {}, {"major", "minor"}), "");
    }
  }
  ASCEND_CHECK(c.object_at(spec, "hooks", ""), "");
  if (auto h = spec.find("hooks"); h != spec.end() && h->is_object()) {
    for (const auto& [stage, list] : h->items()) {
      (void)list;
      ASCEND_CHECK(c.objects_at(*h, stage, "hooks.", {"path"}, {"args", "env"}, {"timeout"}), "");
    }
  }
  return {};
}

}  // namespace

std::string json_string(const ordered_json& obj, std::string_view key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(std::string(key));
  if (it == obj.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

std::optional<long long> json_integer(const ordered_json& obj, std::string_view key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<long long>();
}

Result<OciState> parse_oci_state(std::string_view text) {
  if (text.size() > kMaxStateBytes) return Error(EFBIG, "OCI state larger than 1 MiB");
  if (json_nests_deeper_than(text, kMaxJsonDepth)) {
    return Error::invalid("OCI state on stdin nests deeper than " + std::to_string(kMaxJsonDepth) +
                          " levels");
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::invalid("OCI state on stdin is not a JSON object");
  OciState s;
  auto field = [&](const char* key) { return j.find(key); };
  if (auto b = field("bundle"); b == j.end() || !b->is_string()) {
    return Error::invalid("OCI state has no bundle (a string)");
  }
  s.bundle = j["bundle"].get<std::string>();
  if (s.bundle.empty() || s.bundle[0] != '/')
    return Error::invalid("OCI state bundle '" + s.bundle + "' is not absolute");
  for (auto [key, out] : {std::pair{"id", &s.id}, std::pair{"status", &s.status}}) {
    auto v = field(key);
    if (v == j.end() || v->is_null()) continue;
    if (!v->is_string()) return Error::invalid(std::string("OCI state ") + key + " is not a string");
    *out = v->get<std::string>();
  }
  if (auto pid = field("pid"); pid != j.end()) {
    if (!pid->is_number_integer() || pid->get<long long>() < 0 || pid->get<long long>() > (1 << 30)) {
      return Error::invalid("OCI state pid is not a process id");
    }
    s.pid = static_cast<int>(pid->get<long long>());
  }
  return s;
}

Result<ordered_json> parse_spec(std::string_view text) {
  if (text.size() > kMaxSpecBytes) return Error(EFBIG, "config.json larger than 16 MiB");
  if (json_nests_deeper_than(text, kMaxJsonDepth)) {
    return Error::invalid("config.json nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  auto j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::invalid("config.json is not a JSON object");
  ASCEND_CHECK(check_spec_types(j), "");
  return j;
}

Result<std::vector<std::string>> spec_env(const ordered_json& spec) {
  std::vector<std::string> env;
  auto p = spec.find("process");
  if (p == spec.end() || !p->is_object()) return env;
  auto e = p->find("env");
  if (e == p->end() || e->is_null()) return env;
  if (!e->is_array()) return Error::invalid("config.json process.env is not a list");
  for (const auto& v : *e) {
    if (!v.is_string()) return Error::invalid("config.json process.env holds a non-string entry");
    env.push_back(v.get<std::string>());
  }
  return env;
}

Result<std::string> spec_rootfs(const ordered_json& spec, const std::string& bundle) {
  auto r = spec.find("root");
  if (r == spec.end() || !r->is_object()) return Error::invalid("config.json has no root.path");
  std::string p = json_string(*r, "path");
  if (p.empty()) return Error::invalid("config.json has no root.path (a non-empty string)");
  if (p[0] == '/') return p;
  return bundle + (bundle.back() == '/' ? "" : "/") + p;
}

}  // namespace ascend::hook
