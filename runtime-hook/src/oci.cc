#include "ascend/hook/oci.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

#include "ascend/common/json_depth.h"

namespace ascend::hook {

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
  Status object_at(const JsonValue& parent, std::string_view key, const std::string& where) const {
    const JsonValue* v = json_member(parent, key);
    if (v == nullptr || v->IsNull() || v->IsObject()) return {};
    return bad(where, key, type_word(false));
  }
  Status list_at(const JsonValue& parent, std::string_view key, const std::string& where) const {
    const JsonValue* v = json_member(parent, key);
    if (v == nullptr || v->IsNull() || v->IsArray()) return {};
    return bad(where, key, type_word(true));
  }
  Status strings_at(const JsonValue& parent, std::string_view key, const std::string& where) const {
    ASCEND_CHECK(list_at(parent, key, where), "");
    const JsonValue* v = json_member(parent, key);
    if (v == nullptr || v->IsNull()) return {};
    for (const auto& e : v->GetArray()) {
      if (!e.IsString())
        return Error::invalid(fmt::format("config.json {}{} holds a non-string entry", where, key));
    }
    return {};
  }
  Status string_at(const JsonValue& parent, std::string_view key, const std::string& where) const {
    const JsonValue* v = json_member(parent, key);
    if (v == nullptr || v->IsNull() || v->IsString()) return {};
    return bad(where, key, "a string");
  }
  Status integer_at(const JsonValue& parent, std::string_view key, const std::string& where) const {
    const JsonValue* v = json_member(parent, key);
    if (v == nullptr || v->IsNull() || json_is_integer(*v)) return {};
    return bad(where, key, "an integer");
  }
  // Every element of parent[key] is an object whose listed fields have the right types.
  Status objects_at(const JsonValue& parent, std::string_view key, const std::string& where,
                    std::initializer_list<const char*> strings,
                    std::initializer_list<const char*> string_lists,
                    std::initializer_list<const char*> integers) const {
    ASCEND_CHECK(list_at(parent, key, where), "");
    const JsonValue* v = json_member(parent, key);
    if (v == nullptr || v->IsNull()) return {};
    for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
      const JsonValue& e = (*v)[i];
      if (fields_fit(e, strings, string_lists, integers)) continue;
      // Only an element that does not fit gets its place written out, for the message.
      std::string at = fmt::format("{}{}[{}]", where, key, i);
      if (!e.IsObject()) return bad(at, "", type_word(false));
      for (const char* f : strings) ASCEND_CHECK(string_at(e, f, at + "."), "");
      for (const char* f : string_lists) ASCEND_CHECK(strings_at(e, f, at + "."), "");
      for (const char* f : integers) ASCEND_CHECK(integer_at(e, f, at + "."), "");
    }
    return {};
  }

 private:
  // Whether `e` is an object whose listed fields are absent, null or of their type: the checks above
  // without the messages.
  static bool fields_fit(const JsonValue& e, std::initializer_list<const char*> strings,
                         std::initializer_list<const char*> string_lists,
                         std::initializer_list<const char*> integers) {
    if (!e.IsObject()) return false;
    auto fits = [&e](const char* f, auto&& of_type) {
      const JsonValue* v = json_member(e, f);
      return v == nullptr || v->IsNull() || of_type(*v);
    };
    auto is_strings = [](const JsonValue& v) {
      return v.IsArray() && std::all_of(v.Begin(), v.End(), [](const JsonValue& s) { return s.IsString(); });
    };
    return std::all_of(
               strings.begin(), strings.end(),
               [&](const char* f) { return fits(f, [](const JsonValue& v) { return v.IsString(); }); }) &&
           std::all_of(string_lists.begin(), string_lists.end(),
                       [&](const char* f) { return fits(f, is_strings); }) &&
           std::all_of(integers.begin(), integers.end(),
                       [&](const char* f) { return fits(f, json_is_integer); });
  }

  static Error bad(const std::string& where, std::string_view key, const char* want) {
    return Error::invalid(fmt::format("config.json {}{} is not {}", where, key, want));
  }
};

Status check_spec_types(const JsonValue& spec) {
  const SpecChecker c;
  ASCEND_CHECK(c.object_at(spec, "process", ""), "");
  if (const JsonValue* p = json_member(spec, "process"); p != nullptr && p->IsObject()) {
    ASCEND_CHECK(c.strings_at(*p, "env", "process."), "");
    ASCEND_CHECK(c.object_at(*p, "capabilities", "process."), "");
    if (const JsonValue* caps = json_member(*p, "capabilities"); caps != nullptr && caps->IsObject()) {
      ASCEND_CHECK(c.strings_at(*caps, "bounding", "process.capabilities."), "");
    }
  }
  ASCEND_CHECK(c.object_at(spec, "root", ""), "");
  if (const JsonValue* r = json_member(spec, "root"); r != nullptr && r->IsObject()) {
    ASCEND_CHECK(c.string_at(*r, "path", "root."), "");
  }
  ASCEND_CHECK(c.objects_at(spec, "mounts", "", {"destination", "type", "source"}, {"options"}, {}), "");
  ASCEND_CHECK(c.object_at(spec, "linux", ""), "");
  if (const JsonValue* l = json_member(spec, "linux"); l != nullptr && l->IsObject()) {
    ASCEND_CHECK(c.objects_at(*l, "devices", "linux.", {"path", "type"}, {}, {"major", "minor"}), "");
    ASCEND_CHECK(c.object_at(*l, "resources", "linux."), "");
    if (const JsonValue* r = json_member(*l, "resources"); r != nullptr && r->IsObject()) {
      ASCEND_CHECK(
          c.objects_at(*r, "devices", "linux.resources.", {"type", "access"}, {}, {"major", "minor"}), "");
    }
  }
  ASCEND_CHECK(c.object_at(spec, "hooks", ""), "");
  if (const JsonValue* h = json_member(spec, "hooks"); h != nullptr && h->IsObject()) {
    for (const auto& stage : h->GetObject()) {
      const std::string_view name(stage.name.GetString(), stage.name.GetStringLength());
      ASCEND_CHECK(c.objects_at(*h, name, "hooks.", {"path"}, {"args", "env"}, {"timeout"}), "");
    }
  }
  return {};
}

}  // namespace

const JsonValue* json_member(const JsonValue& obj, std::string_view key) {
  if (!obj.IsObject()) return nullptr;
  for (const auto& m : obj.GetObject()) {
    if (std::string_view(m.name.GetString(), m.name.GetStringLength()) == key) return &m.value;
  }
  return nullptr;
}

JsonValue* json_member(JsonValue& obj, std::string_view key) {
  return const_cast<JsonValue*>(json_member(std::as_const(obj), key));
}

std::string json_string(const JsonValue& obj, std::string_view key) {
  const JsonValue* v = json_member(obj, key);
  if (v == nullptr || !v->IsString()) return {};
  return {v->GetString(), v->GetStringLength()};
}

std::optional<long long> json_integer(const JsonValue& obj, std::string_view key) {
  const JsonValue* v = json_member(obj, key);
  if (v == nullptr || !json_is_integer(*v)) return std::nullopt;
  // nlohmann's get<long long>: an unsigned one past int64 is cast.
  return v->IsInt64() ? v->GetInt64() : static_cast<long long>(v->GetUint64());
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

Result<Spec> parse_spec(std::string_view text) {
  if (text.size() > kMaxSpecBytes) return Error(EFBIG, "config.json larger than 16 MiB");
  // The depth is bounded in the parse itself; the text is scanned for it only when the parse failed, to say
  // which (the same verdict as a scan first: the two count nesting alike).
  Spec spec;
  if (!spec.doc_.parse(text, kMaxJsonDepth)) {
    if (json_nests_deeper_than(text, kMaxJsonDepth))
      return Error::invalid(fmt::format("config.json nests deeper than {} levels", kMaxJsonDepth));
    return Error::invalid("config.json is not a JSON object");
  }
  if (!spec.root().IsObject()) return Error::invalid("config.json is not a JSON object");
  ASCEND_CHECK(check_spec_types(spec.root()), "");
  return spec;
}

Result<std::vector<std::string>> spec_env(const Spec& spec) {
  std::vector<std::string> env;
  const JsonValue* p = json_member(spec.root(), "process");
  if (p == nullptr || !p->IsObject()) return env;
  const JsonValue* e = json_member(*p, "env");
  if (e == nullptr || e->IsNull()) return env;
  if (!e->IsArray()) return Error::invalid("config.json process.env is not a list");
  env.reserve(e->Size());
  for (const auto& v : e->GetArray()) {
    if (!v.IsString()) return Error::invalid("config.json process.env holds a non-string entry");
    env.emplace_back(v.GetString(), v.GetStringLength());
  }
  return env;
}

Result<std::string> spec_rootfs(const Spec& spec, const std::string& bundle) {
  const JsonValue* r = json_member(spec.root(), "root");
  if (r == nullptr || !r->IsObject()) return Error::invalid("config.json has no root.path");
  std::string p = json_string(*r, "path");
  if (p.empty()) return Error::invalid("config.json has no root.path (a non-empty string)");
  if (p[0] == '/') return p;
  return bundle + (bundle.back() == '/' ? "" : "/") + p;
}

}  // namespace ascend::hook
