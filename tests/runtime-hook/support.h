// Test support for the runtime-hook tests and the hook benchmark: temporary folders that may hold mounts,
// running a program with a timeout, an emulated host loaded with npu-sim, and OCI bundles whose rootfs is
// Debian's busybox-static. Not thread-safe (tests are single-threaded).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ascend::hook::testing {

// The build's binaries (ASCEND_BIN_DIR).
std::string bin(const std::string& name);

// Whether a program can be found in PATH.
bool have_program(const std::string& name);

// Reads/writes a whole file; read returns "" when missing.
std::string slurp(const std::string& path);

// The ids of the NPU rows of `npu-smi info` ("| 2     910B3  ..."), however the rest of the table looks.
std::set<int> smi_ids(const std::string& text);
std::set<int> smi_ids(const std::vector<std::string>& lines);
void spit(const std::string& path, const std::string& text);

// mkdtemp under $TMPDIR (else /tmp); removed (after detaching any mount below it) on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "hook");
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

struct Output {
  int exit_code = -1;  // 128+N when killed by signal N; -1 when it could not start
  std::string out;
  std::string err;
};

struct RunOptions {
  std::string input;                            // written to stdin
  std::optional<std::vector<std::string>> env;  // nullopt: inherit
  std::chrono::milliseconds timeout{60000};
  std::string cwd;
};

Output run(const std::vector<std::string>& argv, const RunOptions& opts = {});

// Starts a program in the background with stdout and stderr appended to `log`; returns its pid (-1: failed).
int spawn_background(const std::vector<std::string>& argv, const std::string& log);

// Sends SIGTERM, waits up to `grace`, then SIGKILL; reaps the process.
void stop_process(int pid, std::chrono::milliseconds grace);

// An emulated host under `root`, loaded with `npu-sim load` (and unloaded on destruction).
class EmulatedHost {
 public:
  // `extra` goes to `npu-sim load` (e.g. {"--node-index", "2"}).
  EmulatedHost(std::string root, const std::string& profile = "atlas800t-a2",
               const std::vector<std::string>& extra = {});
  ~EmulatedHost();
  const std::string& root() const { return root_; }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  std::string root_;
  bool ok_ = false;
  std::string error_;
};

// A config.yaml for the hook binaries: host-root, mount-list-dir (a folder holding a copy of the shipped
// base.list plus `extra_lists`), hook-path, a log file (all under `dir`), `injection` (spec | hook) and
// `extra_config` lines. Modes as the installer writes them (config 0640, lists 0440).
std::string write_hook_config(const std::string& dir, const std::string& host_root,
                              const std::map<std::string, std::string>& extra_lists = {},
                              const std::string& injection = "spec", const std::string& extra_config = "");

// Copies busybox into <rootfs>/bin with a symlink per applet.
void make_busybox_rootfs(const std::string& rootfs);

// An OCI bundle made with `runc spec`: busybox rootfs, no terminal, the given args and extra env.
class Bundle {
 public:
  explicit Bundle(std::string dir);
  const std::string& dir() const { return dir_; }
  std::string rootfs() const { return dir_ + "/rootfs"; }
  std::string config_path() const { return dir_ + "/config.json"; }
  nlohmann::json& spec() { return spec_; }
  void set_args(const std::vector<std::string>& args);
  void add_env(const std::string& entry);
  void save() const;  // writes config.json (pretty-printed)

 private:
  std::string dir_;
  nlohmann::json spec_;
};

// What the probe (probe_script) reported from inside a container.
struct Probe {
  bool started = false;
  std::map<std::string, std::string> devices;  // "/dev/davinci0" -> "c 234:0"
  std::map<std::string, std::string> mounts;   // mount point -> options
  std::map<std::string, std::string> opens;    // device -> the error opening it gave ("" when it opened)
  std::vector<std::string> smi;                // npu-smi info lines
  std::vector<std::string> env;                // ASCEND_* entries
  std::string write_error;                     // writing into the driver mount
};

// A shell script the container runs: lists its NPU nodes (type, major:minor), its mounts, the error from
// opening each NPU node (ENXIO "No such device or address" means the device cgroup let it through), its
// ASCEND_* env, the result of writing into a driver mount, and `npu-smi info` when npu-smi is there.
std::string probe_script();
Probe parse_probe(const std::string& out);

// Runs a runtime (the shim or runc) on a bundle in a private state root and deletes the container after.
class Runner {
 public:
  explicit Runner(std::string state_root) : state_root_(std::move(state_root)) {}
  // `runtime` is argv before the runc global options (e.g. {shim, "--config", cfg} or {"runc"}).
  Output run(const std::vector<std::string>& runtime, const Bundle& b, const std::string& id);
  Output create(const std::vector<std::string>& runtime, const Bundle& b, const std::string& id);
  Output runc(const std::vector<std::string>& args);  // plain runc with the state root
  void remove(const std::string& id);

 private:
  std::string state_root_;
};

std::string unique_id(const std::string& tag);

}  // namespace ascend::hook::testing
