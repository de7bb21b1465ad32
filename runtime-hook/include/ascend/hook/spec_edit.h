// The edit the shim makes to a container's config.json when it requests devices: the device nodes (with an
// allow rule each in the device cgroup), the driver files (as read-only bind mounts the runtime performs, or
// the prestart hook that mounts them), for a dynamic vNPU the poststop hook that destroys it (hooks carry an
// explicit minimal environment), and the environment changes. Pure: text in, text out.
// A container that requests nothing is never edited (the shim does not call this), so its config.json stays
// byte for byte. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/plan.h"

namespace ascend::hook {

// The whole environment a hook runs with. Nothing comes from the image or the engine: an inherited
// LD_PRELOAD or PATH would let the image run code in the privileged hook (CVE-2025-23266).
inline constexpr const char* kHookPathEnv =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct HookCommand {
  std::string path;               // absolute
  std::vector<std::string> args;  // argv, argv[0] included
  std::vector<std::string> env{kHookPathEnv};
  std::optional<int> timeout;  // seconds

  bool operator==(const HookCommand&) const = default;
};

// A driver path for the runtime to bind-mount: {"destination", "type": "bind", "source", "options": ["bind",
// "ro", "nosuid", "nodev"]}. The source is the host file already resolved and checked (executor.h:
// resolve_bind_mounts); runc resolves the destination inside the rootfs (securejoin), never onto the host.
struct BindMount {
  std::string source;       // absolute host path, no symlink in it
  std::string destination;  // absolute path in the container

  bool operator==(const BindMount&) const = default;
};

inline constexpr const char* kBindMountOptions[] = {"bind", "ro", "nosuid", "nodev"};

struct SpecEdit {
  std::vector<DeviceEntry> devices;  // linux.devices, and an "allow c M:m rwm" rule each
  std::vector<BindMount> mounts;     // appended to mounts (after the engine's own, so on top of them)
  std::vector<HookCommand> prestart;
  std::vector<HookCommand> poststop;
  std::vector<std::string> drop_env;  // keys whose entries leave process.env
  std::vector<std::string> add_env;   // "KEY=VALUE", appended after every earlier entry of KEY is dropped
  // {from, to}: a mount whose destination is `from` gets `to` instead (the device marker of a dynamic vNPU).
  std::vector<std::pair<std::string, std::string>> retarget_mounts;
};

// The edit for `plan` with the driver files mounted by the prestart hook: its devices and env, and
// `prestart`.
SpecEdit make_spec_edit(const InjectionPlan& plan, const HookCommand& prestart);

// The edit for `plan` with the driver files as bind mounts in the spec (`mounts`, the plan's mounts resolved
// on the host): its devices, env and those mounts, and no hook.
SpecEdit make_spec_edit(const InjectionPlan& plan, std::vector<BindMount> mounts);

// Applies `edit` to a config.json text and returns the new text (compact JSON, key order kept; a key the
// text gave twice once, with its last value). Idempotent: a device, rule, mount or hook that is already
// there is not added twice.
Result<std::string> apply_spec_edit(std::string_view spec_text, const SpecEdit& edit);
// The same on a spec parse_spec (oci.h) already returned, so that the shim parses config.json once.
Result<std::string> apply_spec_edit_tree(Spec spec, const SpecEdit& edit);

}  // namespace ascend::hook
