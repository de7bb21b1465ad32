// npu-sim: loads, inspects and perturbs an emulated Ascend host under a root directory.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "ascend/common/cli_check.h"
#include "ascend/common/log.h"
#include "ascend/common/main_guard.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/status.h"
#include "ascend/npu/workload.h"

namespace {

constexpr const char* kFooter = R"(
Root: --root DIR, else $ASCEND_SIM_ROOT, else /.
Profiles: 'npu-sim profiles' lists the built-in ones; or a YAML file (see docs/npu-sim.md).
Fault severity, when --severity is not given, comes from bits 27..24 of the code (0x8?......):
  0-3 Warning, 4-7 Alarm, 8-F Critical. Warning keeps a device usable; Alarm and Critical make it unhealthy.
Exit codes: 0 success, 1 the operation failed (one line on stderr says why), 2 bad usage.)";

int fail(const ascend::Error& e) {
  std::fprintf(stderr, "npu-sim: %s\n", e.message().c_str());
  return 1;
}

}  // namespace

static int run_main(int argc, char** argv) {
  CLI::App app{
      "npu-sim: an emulated Ascend NPU host (device nodes, driver tree, state) under a root directory"};
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();  // --root may follow the subcommand
  std::optional<std::string> root_flag;
  app.add_option("--root", root_flag, "host root directory")->envname("ASCEND_SIM_ROOT");

  auto* load = app.add_subcommand("load", "lay out an emulated host under the root");
  std::string profile;
  std::string majors;
  std::string smi_bin;
  int node_index = 0;
  bool force = false;
  load->add_option("--profile", profile, "built-in profile name or YAML file")->required();
  const auto majors_check = ascend::parsed_by(ascend::npu::parse_majors, "A,B,C,D,E");
  load->add_option("--majors", majors, "char majors davinci,manager,svm,hdc,vdavinci (default: free ones)")
      ->check(majors_check);
  load->add_option("--npu-smi", smi_bin, "static npu-smi to install (default: the one next to npu-sim)");
  load->add_option("--node-index", node_index, "this node's index in the cluster (device IPs)")
      ->check(CLI::Range(0, 65000));
  load->add_flag("--force", force, "replace a host that is already loaded");

  auto* unload = app.add_subcommand("unload", "remove everything load created");
  auto* reboot = app.add_subcommand(
      "reboot", "unload and load the same host again; vNPUs are restored (vnpu-cfg-recover), faults cleared");
  reboot->add_option("--majors", majors, "char majors of the reloaded driver (default: the same)")
      ->check(majors_check);
  reboot->add_option("--npu-smi", smi_bin, "static npu-smi to install (default: the one next to npu-sim)");
  auto* status = app.add_subcommand("status", "print the loaded host");
  bool json = false;
  status->add_flag("--json", json, "print the state as JSON");
  auto* profiles = app.add_subcommand("profiles", "list the built-in profiles");

  auto* fault = app.add_subcommand("fault", "inject or clear a device fault");
  fault->require_subcommand(1);
  auto* fset = fault->add_subcommand("set", "raise a fault on a device");
  auto* fclear = fault->add_subcommand("clear", "clear every fault of a device");
  int device = -1;
  std::string code;
  std::string severity;
  fset->add_option("--device", device, "physical device id")->required();
  fset->add_option("--code", code, "fault code, 0xHEX")
      ->required()
      ->check(ascend::parsed_by(ascend::npu::parse_fault_code, "0xHEX"));
  fset->add_option("--severity", severity, "warning|alarm|critical (default: from the code)")
      ->check(ascend::parsed_by(
          [](std::string_view v) -> ascend::Result<ascend::npu::Health> {
            auto h = ascend::npu::parse_health(v);
            if (!h || *h == ascend::npu::Health::kOk) {
              return ascend::Error::invalid("'" + std::string(v) + "': use warning, alarm or critical");
            }
            return h;
          },
          "SEVERITY"));
  fclear->add_option("--device", device, "physical device id")->required();

  auto* loadgen = app.add_subcommand(
      "load-gen",
      "make a device busy: its utilization, memory, temperature and power follow (see docs/npu-sim.md)");
  int util = 0;
  int aicpu = 0;
  double hbm_gib = 0;
  double seconds = 0;
  bool stop = false;
  loadgen->add_option("--device", device, "physical device id")->required();
  loadgen->add_option("--util", util, "AICore utilization, percent")->check(CLI::Range(0, 100));
  loadgen->add_option("--aicpu", aicpu, "AICPU utilization, percent (default 0)")->check(CLI::Range(0, 100));
  loadgen->add_option("--hbm", hbm_gib, "on-chip memory to hold, GiB (default 0)")
      ->check(CLI::Range(0.0, 1024.0));
  loadgen->add_option("--seconds", seconds, "end by itself after this long (default: until --stop)")
      ->check(CLI::PositiveNumber);
  loadgen->add_flag("--stop", stop, "stop the work on the device")
      ->excludes("--util", "--aicpu", "--hbm", "--seconds");
  auto* link = app.add_subcommand("link", "take a device's RoCE port down or up");
  std::string link_state;
  link->add_option("--device", device, "physical device id")->required();
  link->add_option("state", link_state, "up|down")->required()->check(CLI::IsMember({"up", "down"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  ascend::LogOptions log_opts;
  log_opts.level = "warn";
  (void)ascend::setup_logging(log_opts);
  ascend::npu::Emulator emu(ascend::npu::resolve_root(root_flag));

  if (*profiles) {
    for (const auto& n : ascend::npu::builtin_profile_names()) {
      auto p = ascend::npu::builtin_profile(n);
      std::printf("%-15s %s\n", n.c_str(), p->description.c_str());
    }
    return 0;
  }
  // --majors, shared by load and reboot (checked while parsing).
  auto take_majors = [&](ascend::npu::LoadOptions& opts) {
    if (!majors.empty()) opts.majors = *ascend::npu::parse_majors(majors);
  };
  if (*load) {
    auto p = ascend::npu::load_profile(profile);
    if (!p) return fail(p.error());
    ascend::npu::LoadOptions opts;
    take_majors(opts);
    opts.npu_smi_binary = smi_bin;
    opts.node_index = node_index;
    opts.force = force;
    if (auto s = emu.load(*p, opts); !s) return fail(s.error().context("load " + profile));
    std::printf("loaded %s (%zu devices) at %s\n", p->profile.c_str(), p->chips.size(), emu.root().c_str());
    return 0;
  }
  if (*reboot) {
    ascend::npu::LoadOptions opts;
    take_majors(opts);
    opts.npu_smi_binary = smi_bin;
    if (auto s = emu.reboot(opts); !s) return fail(s.error());
    std::printf("rebooted %s\n", emu.root().c_str());
    return 0;
  }
  if (*unload) {
    if (auto s = emu.unload(); !s) return fail(s.error());
    std::printf("unloaded %s\n", emu.root().c_str());
    return 0;
  }
  if (*status) {
    auto s = emu.read_state();
    if (!s) return fail(s.error());
    std::cout << (json ? ascend::npu::format_status_json(*s, emu.root())
                       : ascend::npu::format_status(*s, emu.root()));
    return 0;
  }
  if (*fset) {
    // Both checked while parsing.
    const std::uint32_t c = *ascend::npu::parse_fault_code(code);
    std::optional<ascend::npu::Health> sev;
    if (!severity.empty()) sev = *ascend::npu::parse_health(severity);
    if (auto s = emu.set_fault(device, c, sev); !s) return fail(s.error().context("fault set"));
    return 0;
  }
  if (*loadgen) {
    ascend::npu::Workload w;
    w.phy_id = device;
    if (!stop) {
      w.aicore_pct = util;
      w.aicpu_pct = aicpu;
      w.hbm_mb = static_cast<long long>(hbm_gib * 1024.0);
      if (seconds > 0) w.until_ms = ascend::npu::unix_now_ms() + static_cast<std::int64_t>(seconds * 1000.0);
    }
    if (auto s = emu.set_workload(w); !s) return fail(s.error().context("load-gen"));
    return 0;
  }
  if (*link) {
    if (auto s = emu.set_link(device, link_state == "up"); !s) return fail(s.error().context("link"));
    return 0;
  }
  if (*fclear) {
    if (auto s = emu.clear_faults(device); !s) return fail(s.error().context("fault clear"));
    return 0;
  }
  return 0;
}

int main(int argc, char** argv) {
  return ascend::guarded_main("npu-sim", [&] { return run_main(argc, argv); });
}
