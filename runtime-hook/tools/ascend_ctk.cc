// ascend-ctk: configures container engines for ascend-docker-runtime and generates CDI specs. See --help.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "ascend/common/fs.h"
#include "ascend/common/main_guard.h"
#include "ascend/hook/cdi.h"
#include "ascend/hook/cli.h"
#include "ascend/hook/config.h"
#include "ascend/hook/engine_config.h"
#include "ascend/hook/lifecycle.h"

namespace {

constexpr const char* kFooter = R"(
Examples:
  ascend-ctk runtime configure --runtime docker            # runtimes.ascend in /etc/docker/daemon.json
  ascend-ctk runtime configure --runtime containerd --set-as-default
  ascend-ctk cdi generate --output /etc/cdi/huawei.com-npu.json
  docker run --device huawei.com/npu=0 ...                 # with the CDI spec in place
  ascend-ctk vnpu gc --dry-run                             # dynamic vNPUs whose container is gone
  ascend-ctk system create-dev-char-symlinks               # /dev/char links for runc's systemd driver
Exit codes: 0 success, 1 the operation failed (one line on stderr says why), 2 bad usage.)";

constexpr const char* kGcFooter = R"(
Destroys the dynamic vNPUs (made by ascend-docker-runtime for ASCEND_VNPU_SPECS) whose container no longer
exists: its runtime process is gone and runc's state folder (the --root the engine gave runc: /run/runc,
/run/docker/runtime-runc/moby, /run/containerd/runc/<namespace>) shows no live container of that id. After a
reboot every container is gone, so the first gc frees every dynamic vNPU the driver restored. A vNPU whose
container is alive, or a static vNPU (npu-smi set -t create-vnpu), is never touched. Run it in the host's pid
namespace: a vNPU created in another one is kept.
Exit codes: 0 done (whatever was found), 1 the host could not be read or a vNPU could not be destroyed,
2 bad usage.)";

constexpr const char* kDevCharFooter = R"(
runc with the systemd cgroup driver names each device of a container as /dev/char/<major>:<minor> in the
unit's DeviceAllow=; udev makes those links only for devices it knows, and systemd drops a rule whose link is
missing when it re-applies the policy (systemctl daemon-reload): the container loses its NPUs. The runtime
makes the links at every container start; this makes them for every NPU node of the host now.
remove-dev-char-symlinks removes only the links this toolkit made (the uninstaller runs it).
Exit codes: 0 success, 1 the operation failed, 2 bad usage.)";

int fail(const ascend::Error& e) {
  return ascend::hook::report_failure("ascend-ctk", e);
}

ascend::Status write_out(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return {};
  }
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) ASCEND_CHECK(ascend::make_dirs(path.substr(0, slash)), "");
  return ascend::atomic_replace(path, text, 0644);
}

}  // namespace

static int run_main(int argc, char** argv) {
  CLI::App app{"ascend-ctk: container engine configuration and CDI specs for Ascend NPUs"};
  app.footer(kFooter);
  app.require_subcommand(1);
  std::string config_path;
  app.add_option("--config", config_path, "ascend-docker-runtime configuration (host root, mount lists)");

  auto* runtime = app.add_subcommand("runtime", "register ascend-docker-runtime with an engine");
  runtime->require_subcommand(1);
  ascend::hook::EngineEdit edit;
  auto* configure = runtime->add_subcommand("configure", "add (or update) the runtime entry");
  auto* unconfigure = runtime->add_subcommand("unconfigure", "remove the runtime entry");
  for (auto* sub : {configure, unconfigure}) {
    sub->add_option("--runtime", edit.engine, "docker or containerd")
        ->check(CLI::IsMember({"docker", "containerd"}));
    sub->add_option("--file", edit.file,
                    "the engine's config (default /etc/docker/daemon.json, /etc/containerd/config.toml)");
    sub->add_option("--name", edit.entry.name, "the runtime's name in the engine (default ascend)");
    sub->add_flag("--dry-run", edit.dry_run, "print the new file instead of writing it");
  }
  configure->add_option("--runtime-path", edit.entry.path,
                        "ascend-docker-runtime (default: next to ascend-ctk)");
  configure->add_option("--runtime-arg", edit.entry.runtime_args,
                        "an argument the engine passes (docker only)");
  configure->add_flag("--set-as-default", edit.entry.set_default, "make it the engine's default runtime");

  auto* cdi = app.add_subcommand("cdi", "CDI specs");
  cdi->require_subcommand(1);
  auto* generate = cdi->add_subcommand("generate", "write the CDI spec of this host's NPUs");
  auto* list = cdi->add_subcommand("list", "print the CDI device names of this host");
  auto* validate = cdi->add_subcommand("validate", "check a CDI spec file against the CDI specification");
  std::string output;
  std::vector<std::string> lists{"base"};
  bool allow_link = false;
  std::string validate_file;
  generate->add_option("--output", output, "file to write (default: standard output)");
  for (auto* sub : {generate, list}) {
    sub->add_option("--mount-list", lists, "mount lists to include (default base)");
    sub->add_flag("--allow-link", allow_link, "allow mount-list entries that are symlinks");
  }
  validate->add_option("file", validate_file, "the spec (JSON)")->required();

  auto* vnpu = app.add_subcommand("vnpu", "dynamic vNPUs");
  vnpu->require_subcommand(1);
  auto* gc = vnpu->add_subcommand("gc", "destroy dynamic vNPUs whose container is gone");
  gc->footer(kGcFooter);
  bool gc_dry_run = false;
  gc->add_flag("--dry-run", gc_dry_run, "print what would be destroyed, destroy nothing");

  auto* system = app.add_subcommand("system", "host set-up");
  system->require_subcommand(1);
  auto* mklinks =
      system->add_subcommand("create-dev-char-symlinks", "link /dev/char/<major>:<minor> to each NPU node");
  auto* rmlinks =
      system->add_subcommand("remove-dev-char-symlinks", "remove the /dev/char links this toolkit made");
  mklinks->footer(kDevCharFooter);
  rmlinks->footer(kDevCharFooter);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  ascend::hook::ConfigDefaults defaults{ascend::hook::self_exe_dir(), ""};
  auto config = ascend::hook::load_config(config_path, defaults);
  if (!config) return fail(config.error());
  ascend::hook::setup_binary_logging(*config);

  if (runtime->parsed()) {
    edit.add = configure->parsed();
    if (edit.entry.path.empty()) edit.entry.path = defaults.exe_dir + "/ascend-docker-runtime";
    auto out = ascend::hook::edit_engine_config(edit);
    if (!out) return fail(out.error());
    std::fputs(out->c_str(), stdout);
    return 0;
  }

  if (gc->parsed()) {
    auto out = ascend::hook::vnpu_gc(*config, gc_dry_run);
    if (!out) return fail(out.error());
    std::fputs(out->text.c_str(), stdout);
    return out->failed ? 1 : 0;
  }
  if (mklinks->parsed() || rmlinks->parsed()) {
    auto out = mklinks->parsed() ? ascend::hook::create_dev_char_symlinks(*config)
                                 : ascend::hook::remove_dev_char_symlinks(*config);
    if (!out) return fail(out.error());
    for (const auto& line : *out)
      std::printf("%s %s\n", mklinks->parsed() ? "linked" : "removed", line.c_str());
    return 0;
  }

  if (validate->parsed()) {
    auto out = ascend::hook::validate_cdi_file(validate_file);
    if (!out) return fail(out.error());
    std::fputs(out->c_str(), stdout);
    return 0;
  }

  auto spec = ascend::hook::generate_cdi_spec(*config, lists, allow_link);
  if (!spec) return fail(spec.error());
  if (list->parsed()) {
    for (const auto& n : ascend::hook::cdi_device_names(*spec)) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (auto st = write_out(output, spec->dump(2) + "\n"); !st) return fail(st.error());
  return 0;
}

int main(int argc, char** argv) {
  return ascend::guarded_main("ascend-ctk", [&] { return run_main(argc, argv); });
}
