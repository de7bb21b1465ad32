#include "ascend/hook/spec_edit.h"

#include <algorithm>

#include "ascend/hook/oci.h"

namespace ascend::hook {

using rapidjson::kArrayType;
using rapidjson::kObjectType;
using rapidjson::StringRef;

namespace {

std::string env_key(const std::string& entry) {
  return entry.substr(0, entry.find('='));
}

// The edit's values, made in the spec's own allocator.
class Builder {
 public:
  explicit Builder(JsonAllocator& a) : a_(a) {}

  JsonValue text(const std::string& s) const {
    return {s.data(), static_cast<rapidjson::SizeType>(s.size()), a_};
  }
  template <class Strings>
  JsonValue texts(const Strings& list) const {
    JsonValue out(kArrayType);
    for (const auto& s : list) out.PushBack(text(s), a_);
    return out;
  }
  // Appends a member whose key is a string literal (the spec's keys are kept as views of them).
  void put(JsonValue& object, const char* key, JsonValue value) const {
    object.AddMember(StringRef(key), value, a_);
  }
  // object[key] = value: in place when the object has the key, else appended (nlohmann's operator[]).
  void set(JsonValue& object, const char* key, JsonValue value) const {
    if (JsonValue* v = json_member(object, key)) {
      *v = value;  // a move
    } else {
      put(object, key, std::move(value));
    }
  }
  JsonAllocator& allocator() const { return a_; }

 private:
  JsonAllocator& a_;
};

// obj[key] as an object/array, created when missing or null; an error when it exists with another type.
// Adding a member may move obj's other members: a pointer to one of them is stale afterwards.
Result<JsonValue*> child(const Builder& b, JsonValue& obj, const char* key, bool array,
                         const std::string& where) {
  JsonValue* v = json_member(obj, key);
  if (v == nullptr) {
    b.put(obj, key, JsonValue(array ? kArrayType : kObjectType));
    return &(obj.MemberEnd() - 1)->value;
  }
  if (v->IsNull()) {
    if (array) {
      v->SetArray();
    } else {
      v->SetObject();
    }
    return v;
  }
  if (array ? !v->IsArray() : !v->IsObject()) {
    return Error::invalid("config.json " + where + key + " is not " + (array ? "a list" : "an object"));
  }
  return v;
}

JsonValue hook_json(const Builder& b, const HookCommand& h) {
  JsonValue j(kObjectType);
  b.put(j, "path", b.text(h.path));
  b.put(j, "args", b.texts(h.args));
  b.put(j, "env", b.texts(h.env));
  if (h.timeout) b.put(j, "timeout", JsonValue(*h.timeout));
  return j;
}

Status add_hooks(const Builder& b, JsonValue& hooks, const char* stage,
                 const std::vector<HookCommand>& cmds) {
  if (cmds.empty()) return {};
  ASCEND_ASSIGN(JsonValue * list, child(b, hooks, stage, true, "hooks."), "");
  for (const auto& h : cmds) {
    JsonValue j = hook_json(b, h);
    const JsonValue& args = *json_member(j, "args");
    bool present = std::any_of(list->Begin(), list->End(), [&](const JsonValue& e) {
      const JsonValue* theirs = json_member(e, "args");
      return json_string(e, "path") == h.path && theirs != nullptr && json_equal(*theirs, args);
    });
    if (!present) list->PushBack(j, b.allocator());
  }
  return {};
}

// The device node entry of linux.devices and its rule in linux.resources.devices.
JsonValue device_json(const Builder& b, const DeviceEntry& d) {
  JsonValue node(kObjectType);
  b.put(node, "path", b.text(d.path));
  b.put(node, "type", JsonValue(StringRef("c")));
  b.put(node, "major", JsonValue(d.major));
  b.put(node, "minor", JsonValue(d.minor));
  b.put(node, "fileMode", JsonValue(d.mode));
  b.put(node, "uid", JsonValue(0));
  b.put(node, "gid", JsonValue(0));
  return node;
}

JsonValue rule_json(const Builder& b, const DeviceEntry& d) {
  JsonValue rule(kObjectType);
  b.put(rule, "allow", JsonValue(true));
  b.put(rule, "type", JsonValue(StringRef("c")));
  b.put(rule, "major", JsonValue(d.major));
  b.put(rule, "minor", JsonValue(d.minor));
  b.put(rule, "access", JsonValue(StringRef("rwm")));
  return rule;
}

JsonValue mount_json(const Builder& b, const BindMount& m) {
  JsonValue entry(kObjectType);
  b.put(entry, "destination", b.text(m.destination));
  b.put(entry, "type", JsonValue(StringRef("bind")));
  b.put(entry, "source", b.text(m.source));
  JsonValue options(kArrayType);
  for (const char* o : kBindMountOptions) options.PushBack(StringRef(o), b.allocator());
  b.put(entry, "options", std::move(options));
  return entry;
}

bool contains(const JsonValue& list, const JsonValue& value) {
  return std::any_of(list.Begin(), list.End(), [&](const JsonValue& e) { return json_equal(e, value); });
}

Status edit_env(const Builder& b, Spec& spec, const SpecEdit& edit) {
  ASCEND_ASSIGN(std::vector<std::string> env, spec_env(spec), "");
  std::vector<std::string> drop = edit.drop_env;
  for (const auto& e : edit.add_env) drop.push_back(env_key(e));
  std::erase_if(env, [&](const std::string& e) {
    return std::find(drop.begin(), drop.end(), env_key(e)) != drop.end();
  });
  env.insert(env.end(), edit.add_env.begin(), edit.add_env.end());
  ASCEND_ASSIGN(JsonValue * process, child(b, spec.root(), "process", false, ""), "");
  b.set(*process, "env", b.texts(env));
  return {};
}

Status edit_devices(const Builder& b, Spec& spec, const std::vector<DeviceEntry>& devices) {
  ASCEND_ASSIGN(JsonValue * linux_, child(b, spec.root(), "linux", false, ""), "");
  ASCEND_CHECK(child(b, *linux_, "devices", true, "linux."), "");
  ASCEND_ASSIGN(JsonValue * resources, child(b, *linux_, "resources", false, "linux."), "");
  // Adding "resources" may have moved "devices".
  JsonValue* nodes = json_member(*linux_, "devices");
  ASCEND_ASSIGN(JsonValue * rules, child(b, *resources, "devices", true, "linux.resources."), "");
  for (const auto& d : devices) {
    JsonValue node = device_json(b, d);
    auto same = std::find_if(nodes->Begin(), nodes->End(),
                             [&](const JsonValue& e) { return json_string(e, "path") == d.path; });
    if (same != nodes->End()) {
      *same = node;  // a move
    } else {
      nodes->PushBack(node, b.allocator());
    }
    JsonValue rule = rule_json(b, d);
    if (!contains(*rules, rule)) rules->PushBack(rule, b.allocator());
  }
  return {};
}

Status edit_mounts(const Builder& b, Spec& spec, const SpecEdit& edit) {
  ASCEND_ASSIGN(JsonValue * mounts, child(b, spec.root(), "mounts", true, ""), "");
  for (const auto& m : edit.mounts) {
    JsonValue entry = mount_json(b, m);
    if (!contains(*mounts, entry)) mounts->PushBack(entry, b.allocator());
  }
  for (auto& m : mounts->GetArray()) {
    for (const auto& [from, to] : edit.retarget_mounts) {
      if (json_string(m, "destination") == from) b.set(m, "destination", b.text(to));
    }
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
  ASCEND_ASSIGN(Spec spec, parse_spec(spec_text), "");
  return apply_spec_edit_tree(std::move(spec), edit);
}

Result<std::string> apply_spec_edit_tree(Spec spec, const SpecEdit& edit) {
  const Builder b(spec.allocator());
  if (!edit.drop_env.empty() || !edit.add_env.empty()) ASCEND_CHECK(edit_env(b, spec, edit), "");
  if (!edit.devices.empty()) ASCEND_CHECK(edit_devices(b, spec, edit.devices), "");
  if (!edit.mounts.empty() || !edit.retarget_mounts.empty()) ASCEND_CHECK(edit_mounts(b, spec, edit), "");
  if (!edit.prestart.empty() || !edit.poststop.empty()) {
    ASCEND_ASSIGN(JsonValue * hooks, child(b, spec.root(), "hooks", false, ""), "");
    ASCEND_CHECK(add_hooks(b, *hooks, "prestart", edit.prestart), "");
    ASCEND_CHECK(add_hooks(b, *hooks, "poststop", edit.poststop), "");
  }
  return write_json(spec.root());
}

}  // namespace ascend::hook
