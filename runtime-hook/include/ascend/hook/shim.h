// ascend-docker-runtime, the library behind the binary: a drop-in for runc. Every verb and argument passes
// through to the configured runtime by exec; on `create` and `run`, a container that requests NPUs first has
// its <bundle>/config.json edited (spec_edit.h) and replaced atomically. A container that requests nothing
// keeps its config.json byte for byte. Not thread-safe (it ends in exec).
#pragma once

#include <optional>
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
// `spec_text`: config.json as already read (EarlyRead), else it is read here.
Result<bool> prepare_bundle(const RuntimeArgs& args, const Config& config,
                            std::optional<std::string> spec_text = std::nullopt);

// The absolute path of the runtime to exec: `runtime_path` itself when it has a '/', else the first match
// in $PATH that is not this executable.
Result<std::string> find_runtime(const std::string& runtime_path);

// prepare_bundle (for create/run), then exec of the runtime with the original argv. Returns only on failure.
Error run_shim(const RuntimeArgs& args, const Config& config,
               std::optional<std::string> spec_text = std::nullopt);

// The defaults the shim reads its config over (its own folder; the log runtime-run.log).
ConfigDefaults shim_config_defaults();

// The shim's command line asks for its --help (the one argument --help or -h).
bool wants_shim_help(int argc, const char* const* argv);

// The pass-through, done before the C++ run-time starts up: tools/ascend_docker_runtime.cc calls this from
// .preinit_array, which a static program runs before any static initialiser (so before libstdc++'s iostreams
// and locale, the libraries' static objects and logging). It execs the runtime, as run_shim would, when the
// call needs nothing of the shim: a verb other than create and run, or a create/run whose config.json asks
// for nothing (spec_requests_nothing), with no config or the installer's flat one. It uses nothing that
// static initialisation sets up (no CLI11, no spdlog, no iostreams; exceptions are caught here). In every
// other case, a failure included, it returns having changed nothing, and main does it all the ordinary way,
// so that every message and exit code stays main's.
void pass_through_early(int argc, char** argv) noexcept;

// What pass_through_early read before it found that the call needs the shim (a container that may ask for
// NPUs), for main to go on from rather than read it all again: the command line, the config and config.json.
struct EarlyRead {
  RuntimeArgs args;
  Config config;
  std::optional<std::string> spec_text;  // create/run: <bundle>/config.json
};
// Once; nullopt when the early pass-through did not run or stopped before it had read all three.
std::optional<EarlyRead> take_early_read();

// Appends one error line where the engine reads runc's errors (`--log`, in `--log-format`), so that Docker
// shows it. Best effort.
void report_to_runtime_log(const RuntimeArgs& args, const std::string& message);

}  // namespace ascend::hook
