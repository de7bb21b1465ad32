// ascend-docker-runtime, the library behind the binary: a drop-in for runc. Every verb and argument passes
// through to the configured runtime by exec; on `create` and `run`, a container that requests NPUs first has
// its <bundle>/config.json edited (spec_edit.h) and replaced atomically. A container that requests nothing
// keeps its config.json byte for byte. Not thread-safe (it ends in exec).
#pragma once

#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/hook/config.h"

namespace ascend::hook {

struct RuntimeArgs {
  std::vector<std::string> runtime_args;  // what the real runtime receives after argv[0]: the original argv
                                          // without the shim's own --config
  std::string config;                     // --config FILE (only before the verb)
  std::string verb;                       // "create", "run", "state", ...; empty when there is none
  std::string bundle;                     // create/run: --bundle/-b, empty: the current directory
  std::string log_file;                   // runc's --log, where engines look for the error
  std::string log_format;                 // runc's --log-format
  std::string state_root;    // runc's --root (where it keeps its containers' state); empty: default
  std::string container_id;  // create/run: the container id (the verb's first operand)
};

// The state folder runc uses for `args`: --root (made absolute), else /run/runc (as root) or
// $XDG_RUNTIME_DIR/runc (rootless), as runc itself chooses.
std::string runc_state_root(const RuntimeArgs& args);

// A test switch, compiled only into the test build of the shim (ascend-docker-runtime-testkill, built with
// ASCEND_TEST_HOOKS=1; the shipped binary has no such code path): ASCEND_RUNTIME_ABORT_AT=<step> makes the
// shim SIGKILL itself on reaching <step>, as a crash or an OOM kill would, so that tests can prove what
// cleans up after it. Steps: "vnpu-created" (the dynamic vNPU exists, config.json not yet written) and
// "spec-written" (config.json written, runc not yet started).

// Parses runc's command line (after argv[0]): global options, the verb, and the verb's --bundle. Pure.
Result<RuntimeArgs> parse_runtime_args(const std::vector<std::string>& args);

// For create/run with an NPU request: validates it, creates a dynamic vNPU if asked (destroyed again on any
// later failure), edits and atomically replaces config.json. Returns whether config.json was changed.
Result<bool> prepare_bundle(const RuntimeArgs& args, const Config& config);

// The absolute path of the runtime to exec: `runtime_path` itself when it has a '/', else the first match
// in $PATH that is not this executable.
Result<std::string> find_runtime(const std::string& runtime_path);

// prepare_bundle (for create/run), then exec of the runtime with the original argv. Returns only on failure.
Error run_shim(const RuntimeArgs& args, const Config& config);

// Appends one error line where the engine reads runc's errors (`--log`, in `--log-format`), so that Docker
// shows it. Best effort.
void report_to_runtime_log(const RuntimeArgs& args, const std::string& message);

}  // namespace ascend::hook
