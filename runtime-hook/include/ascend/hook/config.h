// The configuration shared by the three binaries: /etc/ascend-docker-runtime.d/config.yaml, or the file given
// with --config. Every key is optional; without a file every binary finds its siblings (the hook, the mount
// lists) next to its own executable, so a build tree works uninstalled. Plain values; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"

namespace ascend::hook {

inline constexpr const char* kDefaultConfigDir = "/etc/ascend-docker-runtime.d";
inline constexpr const char* kDefaultConfigFile = "/etc/ascend-docker-runtime.d/config.yaml";
inline constexpr const char* kDefaultLogDir = "/var/log/ascend-docker-runtime";
inline constexpr const char* kHookName = "ascend-docker-hook";
inline constexpr const char* kDcmiHelperName = "ascend-dcmi-query";

struct Config {
  std::string config_file;            // the file this was read from; empty: defaults only
  std::string host_root = "/";        // where the (emulated) host's /dev and driver tree live
  std::string runtime_path = "runc";  // the low-level runtime; a bare name is looked up in PATH
  std::string hook_path;              // absolute path of ascend-docker-hook
  std::string mount_list_dir;         // folder of <name>.list files
  std::string log_file;               // size-capped rotating log; empty: stderr only
  std::string log_level = "info";
  // How the shim hands the driver files to a container: "spec" writes them into config.json as read-only bind
  // mounts that the runtime performs (no hook process; the default), "hook" registers ascend-docker-hook as a
  // prestart hook that mounts them itself (see executor.h).
  std::string injection = "spec";
  // Whether ASCEND_VISIBLE_DEVICES in the environment of an unprivileged container is a request (trust.h).
  // false on shared Kubernetes nodes: only the device plugin's marker mounts (or a privileged container) ask.
  bool accept_env_when_unprivileged = true;
  // The device seam's backend (devices.h): auto | emulator | dcmi; the DCMI library (empty: the driver's
  // under host-root); the helper that loads it for these static binaries (default: next to the executable).
  std::string backend = "auto";
  std::string dcmi_library;
  std::string dcmi_helper;
};

// Where the defaults come from, so that tests can point them elsewhere.
struct ConfigDefaults {
  std::string exe_dir;   // the calling executable's folder (self_exe_dir())
  std::string log_name;  // "runtime-run.log", "hook-run.log"; empty: no log file
  std::string config_dir = kDefaultConfigDir;
};

// The folder of /proc/self/exe.
std::string self_exe_dir();

// The config as the installer writes it, read without yaml-cpp (whose parse was half of what the shim did for
// a container that asks for nothing, issue 25): lines `key: value` at column 0, keys of letters, digits, '-'
// and '_', plain values of letters, digits, spaces and "/._-+~" (or none: null), comment and blank lines.
// Anything else (quotes, indentation, tabs, CR, non-ASCII, flow or block collections, anchors, tags,
// document markers, a duplicate key) is nullopt, and load_config reads the text with yaml-cpp instead; for
// every text this accepts the result equals parse_yaml's (common/yaml_json.h).
std::optional<nlohmann::json> parse_flat_yaml(std::string_view text);

// The two readers of a config file's text behind load_config (exposed for fast_path_test, which holds them to
// the same results). read_config_flat takes the installer's flat form (parse_flat_yaml) without CLI11, whose
// options alone cost more than a third of what the shim does for a container that asks for nothing (issue
// 25): when every key is a known one, of its kind and passing its check, it applies them over `c` and says
// true; for anything else (`c` untouched) it says false and load_config asks read_config_cli11, which reads
// every form and says what is wrong in CLI11's words. Both go by one table of the keys, their fields and
// their checks.
bool read_config_flat(std::string_view text, Config& c);
// CLI11's config reader over `c`; `given` and `file` (the path as given and made absolute) name the file in
// the refusals.
Status read_config_cli11(std::string_view text, Config& c, const std::string& given, const std::string& file);

// Reads `path` (or, when empty, the default config file if it exists) over the defaults. The keys are the
// options of a CLI11 app read through its config reader, as the device plugin reads its config file; unknown
// keys (the message lists the known ones, from the options), wrong types and relative paths are errors naming
// the file and the key.
//   host-root, runtime-path, hook-path, mount-list-dir, log-file, log-level, injection (spec | hook),
//   accept-env-when-unprivileged (true | false), backend (auto | emulator | dcmi), dcmi-library, dcmi-helper
// Which readers load_config may use: any (the flat reader, then CLI11's for every other form and every
// refusal) or flat_only, for the shim's early pass-through (shim.h), which runs before static initialisation
// and so before CLI11's static objects exist: a file the flat reader does not take is then an error, and the
// caller goes the ordinary way.
enum class ConfigReaders { any, flat_only };
Result<Config> load_config(const std::string& path, const ConfigDefaults& defaults,
                           ConfigReaders readers = ConfigReaders::any);

}  // namespace ascend::hook
