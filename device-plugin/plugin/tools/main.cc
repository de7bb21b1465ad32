// ascend-device-plugin: the kubelet device plugin for Ascend NPUs (Device Plugin API v1beta1 over gRPC).
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <string>

#include "ascend/common/log.h"
#include "ascend/common/main_guard.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/emulator.h"
#include "ascend/plugin/daemon.h"

namespace {

constexpr const char* kFooter = R"(
Every flag may also be given in a YAML file (--config) under its name without the dashes, e.g.
  allocate-mode: device-spec
Flags on the command line win over the file.

Resources: the whole-chip resource (huawei.com/Ascend910, huawei.com/Ascend310P, or --resource-name);
  --vnpu=static adds one resource per vNPU template (huawei.com/Ascend910-10c.3cpu.32g for vir10_3c_32g);
  --vnpu=dynamic adds huawei.com/npu-core (one device per AICore).
Sockets: <kubelet-socket-dir>/ascend-<resource>.sock, registered on <kubelet-socket-dir>/kubelet.sock.
Devices: the host under --host-root (else $ASCEND_SIM_ROOT, else /), read through --backend: dcmi loads the
  driver's libdcmi.so (--dcmi-library, else <root>/usr/local/dcmi/libdcmi.so or the driver tree's) and polls
  it every 200 ms; emulator reads the emulated host's state file; auto (the default) is dcmi when that
  library is there, else the emulator.
Scheduler (--scheduler-url, the ascend-scheduler serve extender; without it the plugin works alone):
  inventory    PUT <url>/v1/nodes/<node-name> with every whole chip (healthy, in use) at start, within a
               second of each change, every 30 s anyway; retried with backoff while the scheduler is away.
               Handed-out chips are free again once the kubelet's pod-resources no longer lists them.
  preferred    GetPreferredAllocation returns the scheduler's reservation of the requested size when it
               lies inside the available chips (GET .../reservations, 500 ms), else the node-level choice.
  allocate     POST .../allocations with each container's chips (1 s): 200 adds the job's launch env and
               a read-only mount of its rank table (written to <ranktable-dir>/<namespace>_<pod>.json);
               409 fails the Allocate with the scheduler's reason; 404, no answer or 5xx answer as alone.
  https:// URLs are verified against --scheduler-ca-file (else the system's CAs); with
  --scheduler-token-file every request carries "Authorization: Bearer <token>".
Driver: every --health-interval the plugin asks the driver for its devices; when that fails (driver unloaded,
  DCMI failing) every device turns Unhealthy and Allocate is refused, with one log line saying why; when the
  driver answers again the devices follow it (its new device nodes and majors included).
vNPU gc: every --vnpu-gc-interval, dynamic vNPUs whose container is gone are destroyed (as ascend-ctk vnpu
  gc); this needs the host's pid namespace and runc's state folders, else nothing is destroyed.
Signals: SIGTERM or SIGINT removes the sockets (the kubelet then drops the resources) and exits 0.
Exit codes: 0 clean stop, 1 failure (one line on stderr says why), 2 bad usage.)";

ascend::plugin::Daemon* g_daemon = nullptr;

void on_signal(int /*sig*/) {
  if (g_daemon != nullptr) g_daemon->stop();
}

int fail(const ascend::Error& e) {
  std::fprintf(stderr, "ascend-device-plugin: %s\n", e.message().c_str());
  return 1;
}

}  // namespace

static int run_main(int argc, char** argv) {
  // gRPC's threads allocate for every call; one malloc arena keeps the resident heap of a long-running
  // daemon small (about 4 MB less after 10 000 calls) at no measurable cost for its call rate.
  ::mallopt(M_ARENA_MAX, 1);
  using ascend::plugin::Config;
  CLI::App app{
      "ascend-device-plugin: advertises Ascend NPUs to the kubelet and allocates them to containers"};
  app.footer(kFooter);
  Config cfg;
  std::string config_file;
  std::string allocate_mode = "runtime";
  std::string vnpu = "off";
  app.add_option("--config", config_file, "YAML file with any of the flags below")->check(CLI::ExistingFile);
  auto* o_dir =
      app.add_option("--kubelet-socket-dir", cfg.kubelet_socket_dir, "the kubelet's device-plugins folder")
          ->capture_default_str();
  auto* o_root = app.add_option("--host-root", cfg.host_root, "root of the (emulated) host");
  auto* o_backend = app.add_option("--backend", cfg.backend, "device backend: auto | emulator | dcmi")
                        ->capture_default_str();
  auto* o_dcmi = app.add_option("--dcmi-library", cfg.dcmi_library,
                                "libdcmi.so for --backend dcmi (default: the driver's under --host-root)");
  auto* o_res =
      app.add_option("--resource-name", cfg.resource_name, "whole-chip resource (default: from the chip)");
  auto* o_mode =
      app.add_option("--allocate-mode", allocate_mode, "runtime | device-spec | cdi")->capture_default_str();
  auto* o_vnpu = app.add_option("--vnpu", vnpu, "off | static | dynamic")->capture_default_str();
  auto* o_metrics =
      app.add_option("--metrics-addr", cfg.metrics_addr, "serve /metrics on host:port (default: off)");
  auto* o_pr = app.add_option("--pod-resources-socket", cfg.pod_resources_socket,
                              "kubelet pod-resources socket (dynamic vNPU bookkeeping)")
                   ->capture_default_str();
  auto* o_level =
      app.add_option("--log-level", cfg.log_level, "trace|debug|info|warn|error")->capture_default_str();
  auto* o_log = app.add_option("--log-file", cfg.log_file, "log file (default: stderr)");
  auto* o_sched = app.add_option("--scheduler-url", cfg.scheduler_url,
                                 "scheduler extender, http(s)://host:port (default: none, work alone)");
  auto* o_node = app.add_option("--node-name", cfg.node_name,
                                "this node's name for the scheduler (default: $NODE_NAME, "
                                "else the host name)");
  auto* o_token = app.add_option("--scheduler-token-file", cfg.scheduler_token_file,
                                 "file holding the scheduler's bearer token");
  auto* o_ca = app.add_option("--scheduler-ca-file", cfg.scheduler_ca_file,
                              "CA certificate(s) for an https scheduler (default: the system's)");
  auto* o_rt = app.add_option("--ranktable-dir", cfg.ranktable_dir, "where job rank tables are written")
                   ->capture_default_str();
  long health_ms = cfg.health_interval.count();
  long gc_s = cfg.vnpu_gc_interval.count();
  auto* o_health = app.add_option("--health-interval", health_ms,
                                  "ms between checks that the driver is there (devices Unhealthy when not)")
                       ->check(CLI::Range(10L, 60000L))
                       ->capture_default_str();
  auto* o_gc = app.add_option("--vnpu-gc-interval", gc_s,
                              "s between destroying dynamic vNPUs whose container is gone (0: never)")
                   ->check(CLI::Range(0L, 86400L))
                   ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (!config_file.empty()) {
    // The file is the base; flags given on the command line are applied over it.
    Config flags = cfg;
    auto from_file = ascend::plugin::load_config_file(config_file, Config{});
    if (!from_file) return fail(from_file.error());
    cfg = *from_file;
    if (o_dir->count() > 0) cfg.kubelet_socket_dir = flags.kubelet_socket_dir;
    if (o_root->count() > 0) cfg.host_root = flags.host_root;
    if (o_backend->count() > 0) cfg.backend = flags.backend;
    if (o_dcmi->count() > 0) cfg.dcmi_library = flags.dcmi_library;
    if (o_res->count() > 0) cfg.resource_name = flags.resource_name;
    if (o_metrics->count() > 0) cfg.metrics_addr = flags.metrics_addr;
    if (o_pr->count() > 0) cfg.pod_resources_socket = flags.pod_resources_socket;
    if (o_level->count() > 0) cfg.log_level = flags.log_level;
    if (o_log->count() > 0) cfg.log_file = flags.log_file;
    if (o_sched->count() > 0) cfg.scheduler_url = flags.scheduler_url;
    if (o_node->count() > 0) cfg.node_name = flags.node_name;
    if (o_token->count() > 0) cfg.scheduler_token_file = flags.scheduler_token_file;
    if (o_ca->count() > 0) cfg.scheduler_ca_file = flags.scheduler_ca_file;
    if (o_rt->count() > 0) cfg.ranktable_dir = flags.ranktable_dir;
  }
  if (config_file.empty() || o_health->count() > 0)
    cfg.health_interval = std::chrono::milliseconds(health_ms);
  if (config_file.empty() || o_gc->count() > 0) cfg.vnpu_gc_interval = std::chrono::seconds(gc_s);
  if (config_file.empty() || o_mode->count() > 0) {
    auto m = ascend::plugin::parse_allocate_mode(allocate_mode);
    if (!m) return fail(m.error().context("--allocate-mode"));
    cfg.allocate_mode = *m;
  }
  if (config_file.empty() || o_vnpu->count() > 0) {
    auto m = ascend::plugin::parse_vnpu_mode(vnpu);
    if (!m) return fail(m.error().context("--vnpu"));
    cfg.vnpu = *m;
  }

  ascend::LogOptions log;
  log.level = cfg.log_level;
  log.file = cfg.log_file;
  if (auto st = ascend::setup_logging(log); !st) return fail(st.error());

  ascend::npu::BackendOptions backend;
  auto b = ascend::npu::parse_backend(cfg.backend);
  if (!b) return fail(b.error().context("--backend"));
  backend.backend = *b;
  backend.root =
      ascend::npu::resolve_root(cfg.host_root.empty() ? std::nullopt : std::optional(cfg.host_root));
  backend.dcmi_library = cfg.dcmi_library;
  auto query = ascend::npu::open_device_query(backend);
  if (!query) return fail(query.error());
  if (auto first = (*query)->snapshot())
    spdlog::info("devices: {} backend, root {}", first->backend, backend.root);
  auto daemon = ascend::plugin::Daemon::create(cfg, **query);
  if (!daemon) return fail(daemon.error());
  g_daemon = daemon->get();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  auto st = (*daemon)->run();
  g_daemon = nullptr;
  if (!st) return fail(st.error());
  return 0;
}

int main(int argc, char** argv) {
  return ascend::guarded_main("ascend-device-plugin", [&] { return run_main(argc, argv); });
}
