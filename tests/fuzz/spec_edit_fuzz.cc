// The spec editor, as the shim drives it (shim.cc prepare_bundle): a config.json in; its request parsed from
// process.env (a container that asks for nothing gets the request "0,1" here, so that every input is
// edited); the plan against an 8-chip 910B host; the edit in both injection modes, plus the vNPU poststop
// hook and env changes; the edited config.json out.
//
// Oracle, independent of the editor: the output is a JSON object; every field the edit does not own
// (everything but process.env, linux.devices, linux.resources.devices, mounts, hooks.prestart and
// hooks.poststop) is exactly as it was; the owned lists keep every entry they had, in order (env: every
// entry whose key the edit does not set); the edit's devices, rules, mounts and hooks are all there; and
// applying the same edit again changes nothing.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "ascend/hook/mount_list.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/plan.h"
#include "ascend/hook/request.h"
#include "ascend/hook/spec_edit.h"
#include "fuzz_util.h"
#include "hosts.h"

using namespace ascend;
using nlohmann::ordered_json;

namespace {

std::string key_of(const std::string& env_entry) {
  return env_entry.substr(0, env_entry.find('='));
}

// `after` has every member of `before` (an object) with the same value, except the keys in `owned`.
void same_except(const ordered_json& before, const ordered_json& after,
                 std::initializer_list<const char*> owned, const std::string& where) {
  for (auto it = before.begin(); it != before.end(); ++it) {
    if (std::find_if(owned.begin(), owned.end(), [&](const char* k) { return it.key() == k; }) != owned.end())
      continue;
    fuzz::check(after.contains(it.key()), where + it.key() + " was lost");
    fuzz::check(after[it.key()] == it.value(), where + it.key() + " was changed");
  }
}

// before[key] (when a list) is a subsequence of after[key] (in order: nothing lost, nothing reordered), with
// the entries `replaced` says may be replaced left out.
template <typename Pred>
void keeps_entries(const ordered_json& before, const ordered_json& after, const char* key,
                   const std::string& where, Pred replaced) {
  if (!before.is_object() || !before.contains(key) || !before[key].is_array()) return;
  fuzz::check(after.is_object() && after.contains(key) && after[key].is_array(), where + key + " is gone");
  const auto& a = after[key];
  std::size_t j = 0;
  for (const auto& e : before[key]) {
    if (replaced(e)) continue;
    while (j < a.size() && a[j] != e) ++j;
    fuzz::check(j < a.size(), where + key + " lost or reordered the entry " + e.dump());
    ++j;
  }
}

const ordered_json& member(const ordered_json& j, const char* key) {
  static const ordered_json none;
  return j.is_object() && j.contains(key) ? j[key] : none;
}

void check_edit(const ordered_json& before, const std::string& text, const hook::SpecEdit& edit) {
  auto out = hook::apply_spec_edit(text, edit);
  if (!out.ok()) return;
  ordered_json after = ordered_json::parse(*out, nullptr, false);
  fuzz::check(!after.is_discarded() && after.is_object(), "the edited spec is not a JSON object");

  same_except(before, after, {"process", "linux", "mounts", "hooks"}, "");
  same_except(member(before, "process"), member(after, "process"), {"env"}, "process.");
  same_except(member(before, "linux"), member(after, "linux"), {"devices", "resources"}, "linux.");
  same_except(member(member(before, "linux"), "resources"), member(member(after, "linux"), "resources"),
              {"devices"}, "linux.resources.");
  same_except(member(before, "hooks"), member(after, "hooks"), {"prestart", "poststop"}, "hooks.");

  std::vector<std::string> set_keys = edit.drop_env;
  for (const auto& e : edit.add_env) set_keys.push_back(key_of(e));
  keeps_entries(
      member(before, "process"), member(after, "process"), "env", "process.", [&](const ordered_json& e) {
        return e.is_string() &&
               std::find(set_keys.begin(), set_keys.end(), key_of(e.get<std::string>())) != set_keys.end();
      });
  // A device node at a path the edit injects is replaced by the edit's own.
  keeps_entries(member(before, "linux"), member(after, "linux"), "devices", "linux.",
                [&](const ordered_json& e) {
                  return e.is_object() && e.contains("path") &&
                         std::any_of(edit.devices.begin(), edit.devices.end(),
                                     [&](const auto& d) { return e["path"] == d.path; });
                });
  auto never = [](const ordered_json&) { return false; };
  keeps_entries(member(member(before, "linux"), "resources"), member(member(after, "linux"), "resources"),
                "devices", "linux.resources.", never);
  keeps_entries(before, after, "mounts", "", never);
  keeps_entries(member(before, "hooks"), member(after, "hooks"), "prestart", "hooks.", never);
  keeps_entries(member(before, "hooks"), member(after, "hooks"), "poststop", "hooks.", never);

  // What the edit adds is there.
  const auto& env = member(member(after, "process"), "env");
  for (const auto& e : edit.add_env)
    fuzz::check(std::find(env.begin(), env.end(), ordered_json(e)) != env.end(), "env " + e + " missing");
  const auto& devs = member(member(after, "linux"), "devices");
  for (const auto& d : edit.devices) {
    bool there = std::any_of(devs.begin(), devs.end(), [&](const ordered_json& e) {
      return e.is_object() && e.contains("path") && e["path"] == d.path && e.contains("major") &&
             e["major"] == d.major && e["minor"] == d.minor;
    });
    fuzz::check(there, "device " + d.path + " missing");
  }
  const auto& mounts = member(after, "mounts");
  for (const auto& m : edit.mounts) {
    bool there = std::any_of(mounts.begin(), mounts.end(), [&](const ordered_json& e) {
      return e.is_object() && e.contains("destination") && e["destination"] == m.destination &&
             e.contains("source") && e["source"] == m.source;
    });
    fuzz::check(there, "mount " + m.destination + " missing");
  }

  auto twice = hook::apply_spec_edit(*out, edit);
  fuzz::check(twice.ok() && *twice == *out, "applying the edit again changed the spec");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const npu::DeviceSnapshot host = npu::to_snapshot(fuzz::fuzz_host("atlas800t-a2", true));
  static const std::vector<hook::MountList> lists = [] {
    auto l = hook::parse_mount_list(
        "/usr/local/Ascend/driver/lib64\n/usr/local/dcmi\n/usr/local/bin/npu-smi\n/etc/hccn.conf\n", "base");
    fuzz::check(l.ok(), "the base list");
    return std::vector<hook::MountList>{*l};
  }();

  std::string text(fuzz::as_text(data, size));
  auto spec = hook::parse_spec(text);
  if (!spec.ok()) return 0;
  // The document before the edit as nlohmann reads it (spec_diff_test holds parse_spec to that reading).
  const ordered_json before = ordered_json::parse(text, nullptr, false);
  fuzz::check(!before.is_discarded(), "parse_spec took a text nlohmann refuses");
  hook::Request request;
  request.ids = {0, 1};
  auto env = hook::spec_env(*spec);
  if (env.ok() && hook::requests_devices(*env)) {
    auto parsed = hook::parse_request(*env, host);
    if (parsed.ok() && *parsed) request = **parsed;
  }
  hook::InjectionPlan plan =
      hook::make_plan(request, host, request.nodrv ? std::vector<hook::MountList>{} : lists);

  hook::HookCommand prestart;
  prestart.path = "/usr/local/bin/ascend-docker-hook";
  prestart.args = {"ascend-docker-hook", "prestart"};
  check_edit(before, text, hook::make_spec_edit(plan, prestart));

  std::vector<hook::BindMount> mounts;
  for (const auto& m : plan.mounts) mounts.push_back({"/host" + m.path, m.path});
  hook::SpecEdit edit = hook::make_spec_edit(plan, std::move(mounts));
  // As for a dynamic vNPU: the poststop hook and the env the shim rewrites.
  hook::HookCommand poststop = prestart;
  poststop.args = {"ascend-docker-hook", "poststop", "--destroy-vnpu", "100"};
  edit.poststop.push_back(poststop);
  edit.drop_env.emplace_back(hook::kEnvVnpuSpecs);
  edit.add_env.push_back(std::string(hook::kEnvVisibleDevices) + "=100");
  check_edit(before, text, edit);
  return 0;
}
