// Engine configuration, as `ascend-ctk runtime configure` does it: the runtime entry that makes Docker
// (daemon.json) or containerd (config.toml) start containers through ascend-docker-runtime. Pure text-to-text
// merges: everything else in the file is kept (daemon.json keeps its key order but not its layout;
// config.toml keeps its text, comments included, with the runtime's table appended or cut out, except where
// only a full toml++ rewrite gives the right values, which drops comments). Malformed input is an error
// naming the line. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"

namespace ascend::hook {

struct RuntimeEntry {
  std::string name = "ascend";
  std::string path;                       // absolute path of ascend-docker-runtime
  std::vector<std::string> runtime_args;  // docker only: e.g. {"--config", "/etc/.../config.yaml"}
  bool set_default = false;               // also make it the engine's default runtime
};

// daemon.json: runtimes.<name> = {path, runtimeArgs}; "default-runtime" with set_default. `current` may be
// empty (no file yet).
Result<std::string> configure_docker(std::string_view current, const RuntimeEntry& entry);
// Removes runtimes.<name> (and default-runtime when it names it).
Result<std::string> unconfigure_docker(std::string_view current, const std::string& name);

// config.toml version 2 (plugins."io.containerd.grpc.v1.cri") or 3 (plugins."io.containerd.cri.v1.runtime"):
// containerd.runtimes.<name> = {runtime_type = "io.containerd.runc.v2", options = {BinaryName = path}};
// containerd.default_runtime_name with set_default. An empty `current` becomes a version 2 file. Without
// set_default the table is appended to the text as it is; unconfigure cuts that table out again.
Result<std::string> configure_containerd(std::string_view current, const RuntimeEntry& entry);
Result<std::string> unconfigure_containerd(std::string_view current, const std::string& name);

// `ascend-ctk runtime configure|unconfigure` for `engine` ("docker" or "containerd"): the engine's config
// file (`file`, else /etc/docker/daemon.json or /etc/containerd/config.toml) read (absent: empty), edited
// and, unless `dry_run`, replaced atomically. Returns what to print: the new text with `dry_run`, else one
// line naming the file and what to restart.
struct EngineEdit {
  std::string engine = "docker";
  std::string file;
  bool add = true;  // configure; false: unconfigure
  bool dry_run = false;
  RuntimeEntry entry;
};
Result<std::string> edit_engine_config(EngineEdit edit);

}  // namespace ascend::hook
