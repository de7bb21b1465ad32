// ascend-docker-hook: the OCI hook that injects NPUs into a container. See --help.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "ascend/common/fs.h"
#include "ascend/common/main_guard.h"
#include "ascend/hook/cli.h"
#include "ascend/hook/config.h"
#include "ascend/hook/devices.h"
#include "ascend/hook/hardening.h"
#include "ascend/hook/hook.h"
#include "ascend/hook/oci.h"

namespace {

constexpr const char* kFooter = R"(
Stages (the OCI state arrives on stdin, at most 1 MiB):
  prestart   (the default) re-derives the container's request from <bundle>/config.json and injects it in
             the container's mount namespace: driver files bind-mounted read-only, nosuid, nodev; device
             nodes checked by st_rdev. ascend-docker-runtime registers it with "injection: hook"; with the
             default "injection: spec" runc mounts the driver files itself, and a hook registered as well
             leaves those mounts alone. Registered without ascend-docker-runtime (OCI hooks.d style) it also
             creates the device nodes and writes the cgroup v1 devices.allow rules; on cgroup v2 that needs
             the runtime, and the hook fails saying so.
  poststop   --destroy-vnpu ID destroys the dynamic vNPU the runtime made for the container.
The hook runs with an explicit minimal environment, least capabilities and a seccomp filter (no exec). With
the DCMI backend it forks, before hardening, a broker that can run only the configured dcmi-helper
(ascend-dcmi-query) with the config's --root/--library and the helper's own verbs; the stages reach DCMI
through it.
Exit codes: 0 done (or nothing requested), 1 the injection failed (one line on stderr says why; the container
does not start), 2 bad usage.)";

}  // namespace

static int run_main(int argc, char** argv) {
  CLI::App app{"ascend-docker-hook: the OCI hook that gives a container the Ascend NPUs it requested"};
  app.footer(kFooter);
  std::string config_path;
  app.add_option("--config", config_path,
                 "configuration file (default /etc/ascend-docker-runtime.d/config.yaml)");
  auto* prestart = app.add_subcommand("prestart", "inject the requested NPUs (the default stage)");
  bool legacy = false;
  prestart->add_flag("--legacy-mounts", legacy, "use mount(2) instead of the new mount API (for tests)");
  auto* poststop = app.add_subcommand("poststop", "release what the container held");
  int vnpu = -1;
  poststop->add_option("--destroy-vnpu", vnpu, "the dynamic vNPU to destroy")->required();
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // Nothing of the caller's environment is used past this point (CVE-2025-23266).
  ascend::hook::scrub_environment();

  ascend::hook::ConfigDefaults defaults{ascend::hook::self_exe_dir(), "hook-run.log"};
  auto config = ascend::hook::load_config(config_path, defaults);
  if (!config) return ascend::hook::report_failure("ascend-docker-hook", config.error());
  ascend::hook::setup_binary_logging(*config);

  auto state = ascend::read_file("/dev/stdin", ascend::hook::kMaxStateBytes);
  if (!state)
    return ascend::hook::report_failure("ascend-docker-hook", state.error().context("read OCI state"));
  // With DCMI the stages need the helper, which the hardened process can no longer run itself.
  auto broker = ascend::hook::start_helper_broker(*config);
  if (!broker) return ascend::hook::report_failure("ascend-docker-hook", broker.error());
  ascend::npu::HelperRunner run_helper;
  if (*broker) run_helper = (*broker)->runner();
  if (auto st = ascend::hook::harden_hook_process(); !st) {
    return ascend::hook::report_failure("ascend-docker-hook", st.error());
  }
  ascend::Status st = poststop->parsed() ? ascend::hook::run_poststop(*state, *config, vnpu, run_helper)
                                         : ascend::hook::run_prestart(*state, *config, {legacy, run_helper});
  if (!st) return ascend::hook::report_failure("ascend-docker-hook", st.error());
  return 0;
}

int main(int argc, char** argv) {
  return ascend::guarded_main("ascend-docker-hook", [&] { return run_main(argc, argv); });
}
