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
  if (ascend::hook::wants_shim_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  // What the early pass-through (below) already read, when it found a container that may ask for NPUs.
  auto early = ascend::hook::take_early_read();
  if (!early) {
    auto parsed = ascend::hook::parse_runtime_args(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed) {
      std::fprintf(stderr, "ascend-docker-runtime: %s\n", parsed.error().message().c_str());
      return 2;
    }
    auto config = ascend::hook::load_config(parsed->config, ascend::hook::shim_config_defaults());
    if (!config) {
      ascend::hook::report_to_runtime_log(*parsed, "ascend-docker-runtime: " + config.error().message());
      return ascend::hook::report_failure("ascend-docker-runtime", config.error());
    }
    early.emplace(ascend::hook::EarlyRead{std::move(*parsed), std::move(*config), std::nullopt});
  }
  const ascend::hook::RuntimeArgs& args = early->args;
  const ascend::hook::Config& config = early->config;
  // The shim sets up its log once a container asks for NPUs; the pass-through path never does.
  ascend::Error e = ascend::hook::run_shim(args, config, std::move(early->spec_text));
  ascend::hook::setup_binary_logging(config);
  ascend::hook::report_to_runtime_log(args, "ascend-docker-runtime: " + e.message());
  return ascend::hook::report_failure("ascend-docker-runtime", e);
}

// Most calls only pass through: every verb but create and run, and a create of a container that asks for
// nothing. A static program runs .preinit_array before its static initialisers, so these calls exec the
// runtime before libstdc++ sets up its iostreams and locale and the libraries their static objects: a third
// of the instructions the shim ran before its exec, and a quarter of its page faults (issue 25;
// docs/performance.md). Not in a sanitizer build, which is linked dynamically and whose run-time must start
// first.
#if defined(__SANITIZE_ADDRESS__)
#define ASCEND_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASCEND_SANITIZED 1
#endif
#endif
#if !defined(ASCEND_SANITIZED)
namespace {
void pass_through_before_init(int argc, char** argv, char** /*envp*/) {
  ascend::hook::pass_through_early(argc, argv);
}
}  // namespace
// The C library's table of early calls.
[[gnu::section(".preinit_array"),
  gnu::used]] static void (*const preinit_pass_through)(int, char**, char**) = pass_through_before_init;
#endif

int main(int argc, char** argv) {
  return ascend::guarded_main("ascend-docker-runtime", [&] { return run_main(argc, argv); });
}
