#include "ascend/hook/spec_edit.h"

#include <algorithm>

#include "ascend/hook/oci.h"

namespace ascend::hook {

using nlohmann::ordered_json;

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

}  // namespace

SpecEdit make_spec_edit(const InjectionPlan& plan, const HookCommand& prestart) {
  SpecEdit e;
  e.devices = plan.devices;
  e.prestart.push_back(prestart);
  e.add_env = plan.env;
  return e;
}

SpecEdit make_spec_edit(const InjectionPlan& plan, std::vector<BindMount> mounts) {
  SpecEdit e;
  e.devices = plan.devices;
  e.mounts = std::move(mounts);
  e.add_env = plan.env;
  return e;
}

Result<std::string> apply_spec_edit(std::string_view spec_text, const SpecEdit& edit) {
  ASCEND_ASSIGN(ordered_json spec, parse_spec(spec_text), "");
  return apply_spec_edit_tree(std::move(spec), edit);
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

}  // namespace ascend::hook
