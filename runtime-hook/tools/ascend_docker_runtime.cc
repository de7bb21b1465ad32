// ascend-docker-runtime: a drop-in for runc that gives containers the NPUs they ask for. See --help.
#include <cstdio>
#include <string>
#include <vector>

#include "ascend/common/main_guard.h"
#include "ascend/hook/cli.h"
#include "ascend/hook/config.h"
#include "ascend/hook/shim.h"

namespace {

constexpr const char* kHelp = R"(ascend-docker-runtime: an OCI runtime shim that gives containers Ascend NPUs.

Usage: ascend-docker-runtime [--config FILE] [runc global options] VERB [runc verb options] ...

Every verb and argument passes through to the low-level runtime (runtime-path in the config, default runc
from PATH) by exec. On `create` and `run`, when the container's environment asks for NPUs
(ASCEND_VISIBLE_DEVICES), the shim adds the device nodes, their device-cgroup rules, the driver files and
ASCEND_DOCKER_RUNTIME=True to <bundle>/config.json, written atomically, before the exec. The driver files are
read-only bind mounts in the spec (injection: spec, the default) or mounted by the prestart hook
ascend-docker-hook (injection: hook). A container that asks for nothing keeps its config.json byte for byte.

Request (the container's environment; the last occurrence of a variable wins). The device plugin's
read-only mounts at /var/run/ascend-container-devices/<id> win over ASCEND_VISIBLE_DEVICES; with
accept-env-when-unprivileged: false the variable asks for nothing in an unprivileged container:
  ASCEND_VISIBLE_DEVICES  0 | 0,2 | 0-3 | 0-1,4 | all | Ascend910-3 | npu-3 ; void, none or empty: no device
  ASCEND_RUNTIME_OPTIONS  NODRV (devices only, no driver files), VIRTUAL (the ids are vNPU ids)
  ASCEND_RUNTIME_MOUNTS   mount lists to apply, <mount-list-dir>/<name>.list (default: base)
  ASCEND_ALLOW_LINK       True | False (default False): may a mount-list entry be a symlink
  ASCEND_VNPU_SPECS       a vNPU template: create a vNPU on the one requested chip, destroyed at poststop

Options:
  --config FILE  the configuration (default /etc/ascend-docker-runtime.d/config.yaml if it exists); given
                 before the verb, it is not passed to the runtime. Keys: host-root, runtime-path, hook-path,
                 mount-list-dir, log-file, log-level, injection (spec | hook),
                 accept-env-when-unprivileged (true | false). The config, the mount lists and the hook
                 must be root's and not writable by group or others.
  -h, --help     this text

Exit codes: the runtime's own when it ran; 1 when the request or the shim failed (one line on stderr says
why, and the line is also appended to the runtime's --log so that Docker shows it), or on an internal error
(one line); 2 bad usage.
)";

}  // namespace

static int run_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  auto parsed = ascend::hook::parse_runtime_args(args);
  if (!parsed) {
    std::fprintf(stderr, "ascend-docker-runtime: %s\n", parsed.error().message().c_str());
    return 2;
  }
  ascend::hook::ConfigDefaults defaults{ascend::hook::self_exe_dir(), "runtime-run.log"};
  auto config = ascend::hook::load_config(parsed->config, defaults);
  if (!config) {
    ascend::hook::report_to_runtime_log(*parsed, "ascend-docker-runtime: " + config.error().message());
    return ascend::hook::report_failure("ascend-docker-runtime", config.error());
  }
  // The shim sets up its log once a container asks for NPUs; the pass-through path never does.
  ascend::Error e = ascend::hook::run_shim(*parsed, *config);
  ascend::hook::setup_binary_logging(*config);
  ascend::hook::report_to_runtime_log(*parsed, "ascend-docker-runtime: " + e.message());
  return ascend::hook::report_failure("ascend-docker-runtime", e);
}

int main(int argc, char** argv) {
  return ascend::guarded_main("ascend-docker-runtime", [&] { return run_main(argc, argv); });
}
