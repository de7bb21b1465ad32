#include "spec_reference.h"

#include <algorithm>

#include <fmt/format.h>

#include "ascend/common/json_depth.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/request.h"

namespace ascend::hook::reference {

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

namespace {

std::string env_key(const std::string& entry) {
  return entry.substr(0, entry.find('='));
}

// obj[key] as an object/array, created when missing; an error when it exists with another type.
Result<ordered_json*> child(ordered_json& obj, const char* key, bool array, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    obj[key] = array ? ordered_json::array() : ordered_json::object();
    return &obj[key];
  }
  if (array ? !it->is_array() : !it->is_object()) {
    return Error::invalid("config.json " + where + key + " is not " + (array ? "a list" : "an object"));
  }
  return &*it;
}

// Appends a member to a new object whose keys are distinct: what an initializer list builds, without its
// probing of every element for key-value pairs (a third of the edit's instructions for 0-7 + base.list).
void put(ordered_json& object, const char* key, ordered_json value) {
  object.get_ref<ordered_json::object_t&>().emplace_back(key, std::move(value));
}

ordered_json hook_json(const HookCommand& h) {
  ordered_json j = {{"path", h.path}, {"args", h.args}, {"env", h.env}};
  if (h.timeout) j["timeout"] = *h.timeout;
  return j;
}

Status add_hooks(ordered_json& hooks, const char* stage, const std::vector<HookCommand>& cmds) {
  if (cmds.empty()) return {};
  ASCEND_ASSIGN(ordered_json * list, child(hooks, stage, true, "hooks."), "");
  for (const auto& h : cmds) {
    ordered_json j = hook_json(h);
    bool present = std::any_of(list->begin(), list->end(), [&](const ordered_json& e) {
      return json_string(e, "path") == h.path && e.contains("args") && e["args"] == j["args"];
    });
    if (!present) list->push_back(std::move(j));
  }
  return {};
}

Result<std::string> apply_spec_edit_tree(ordered_json spec, const SpecEdit& edit) {
  if (!edit.drop_env.empty() || !edit.add_env.empty()) {
    ASCEND_ASSIGN(std::vector<std::string> env, spec_env(spec), "");
    std::vector<std::string> drop = edit.drop_env;
    for (const auto& e : edit.add_env) drop.push_back(env_key(e));
    std::erase_if(env, [&](const std::string& e) {
      return std::find(drop.begin(), drop.end(), env_key(e)) != drop.end();
    });
    env.insert(env.end(), edit.add_env.begin(), edit.add_env.end());
    ASCEND_ASSIGN(ordered_json * process, child(spec, "process", false, ""), "");
    (*process)["env"] = env;
  }

  if (!edit.devices.empty()) {
    ASCEND_ASSIGN(ordered_json * linux_, child(spec, "linux", false, ""), "");
    ASCEND_ASSIGN(ordered_json * devices, child(*linux_, "devices", true, "linux."), "");
    ASCEND_ASSIGN(ordered_json * resources, child(*linux_, "resources", false, "linux."), "");
    // An ordered_json object keeps its members in a vector: adding "resources" may have moved "devices".
    devices = &(*linux_)["devices"];
    ASCEND_ASSIGN(ordered_json * rules, child(*resources, "devices", true, "linux.resources."), "");
    for (const auto& d : edit.devices) {
      ordered_json node = ordered_json::object();
      put(node, "path", d.path);
      put(node, "type", "c");
      put(node, "major", d.major);
      put(node, "minor", d.minor);
      put(node, "fileMode", d.mode);
      put(node, "uid", 0);
      put(node, "gid", 0);
      auto same = std::find_if(devices->begin(), devices->end(),
                               [&](const ordered_json& e) { return json_string(e, "path") == d.path; });
      if (same != devices->end()) {
        *same = std::move(node);
      } else {
        devices->push_back(std::move(node));
      }
      ordered_json rule = ordered_json::object();
      put(rule, "allow", true);
      put(rule, "type", "c");
      put(rule, "major", d.major);
      put(rule, "minor", d.minor);
      put(rule, "access", "rwm");
      if (std::find(rules->begin(), rules->end(), rule) == rules->end()) rules->push_back(std::move(rule));
    }
  }

  if (!edit.mounts.empty()) {
    ASCEND_ASSIGN(ordered_json * mounts, child(spec, "mounts", true, ""), "");
    for (const auto& m : edit.mounts) {
      ordered_json entry = ordered_json::object();
      put(entry, "destination", m.destination);
      put(entry, "type", "bind");
      put(entry, "source", m.source);
      put(entry, "options", kBindMountOptions);
      if (std::find(mounts->begin(), mounts->end(), entry) == mounts->end())
        mounts->push_back(std::move(entry));
    }
  }

  if (!edit.retarget_mounts.empty()) {
    ASCEND_ASSIGN(ordered_json * mounts, child(spec, "mounts", true, ""), "");
    for (auto& m : *mounts) {
      for (const auto& [from, to] : edit.retarget_mounts) {
        if (json_string(m, "destination") == from) m["destination"] = to;
      }
    }
  }

  if (!edit.prestart.empty() || !edit.poststop.empty()) {
    ASCEND_ASSIGN(ordered_json * hooks, child(spec, "hooks", false, ""), "");
    ASCEND_CHECK(add_hooks(*hooks, "prestart", edit.prestart), "");
    ASCEND_CHECK(add_hooks(*hooks, "poststop", edit.poststop), "");
  }
  return spec.dump();
}

}  // namespace

Result<std::string> apply_spec_edit(std::string_view spec_text, const SpecEdit& edit) {
  ASCEND_ASSIGN(ordered_json spec, parse_spec(spec_text), "");
  return apply_spec_edit_tree(std::move(spec), edit);
}

Result<std::vector<std::string>> marker_ids(const ordered_json& spec) {
  std::vector<std::string> ids;
  auto mounts = spec.find("mounts");
  if (mounts == spec.end() || !mounts->is_array()) return ids;
  const std::string prefix = std::string(kMarkerDir) + "/";
  for (const auto& m : *mounts) {
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

bool is_privileged(const ordered_json& spec) {
  auto p = spec.find("process");
  if (p == spec.end() || !p->is_object()) return false;
  auto caps = p->find("capabilities");
  if (caps == p->end() || !caps->is_object()) return false;
  auto bounding = caps->find("bounding");
  if (bounding == caps->end() || !bounding->is_array()) return false;
  return std::any_of(bounding->begin(), bounding->end(), [](const ordered_json& c) {
    return c.is_string() && c.get<std::string>() == "CAP_SYS_ADMIN";
  });
}

Result<TrustedRequest> trusted_request_env(const ordered_json& spec, std::vector<std::string> env,
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

}  // namespace ascend::hook::reference
