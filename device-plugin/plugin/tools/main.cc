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
#include "ascend/plugin/config.h"
#include "ascend/plugin/daemon.h"
#include "ascend/plugin/options.h"
#include "ascend/plugin/scheduler_client.h"

namespace {

constexpr const char* kFooter = R"(
Every flag may also be given in a YAML file (--config) under its name without the dashes, e.g.
  allocate-mode: device-spec
Flags on the command line win over the file; an unknown key or a bad value in it is bad usage.

Resources: the whole-chip resource (huawei.com/Ascend910, huawei.com/Ascend310P, or --resource-name);
  --vnpu=static adds one resource per vNPU template (huawei.com/Ascend910-10c.3cpu.32g for vir10_3c_32g);
  --vnpu=dynamic adds huawei.com/npu-core (one device per AICore).
Sockets: <kubelet-socket-dir>/ascend-<resource>.sock, registered on <kubelet-socket-dir>/kubelet.sock;
  mode 0600 whatever the umask (only root, the kubelet, may call Allocate).
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
               a read-only mount of its rank table's folder (<ranktable-dir>/<namespace>_<pod>/, at the
               folder of the scheduler's ranktable_path, /etc/ascend);
               409 fails the Allocate with the scheduler's reason; 404, no answer or 5xx answer as alone.
  env          only the launch env the scheduler documents (ASCEND_JOB, RANK_TABLE_FILE, RANK_SIZE,
               WORLD_SIZE, RANK_START, NODE_RANK, NNODES, NPROC_PER_NODE); any other name the answer
               carries (LD_PRELOAD, PATH, ASCEND_*, ...) is dropped with one log line.
  rank tables  mode 0640, root and --ranktable-group (a non-root job container's group); rewritten in
               place when GET .../v1/jobs/<ns>/<job>/ranktable (asked every 2 s) differs; removed once
               none of their chips is in use (pod-resources) or one is handed out again.
  https:// URLs are verified against --scheduler-ca-file (else the system's CAs); an unverified server
  gets nothing. With --scheduler-token-file every request carries "Authorization: Bearer <token>".
  http:// is refused (bad usage) unless the host is loopback (127.0.0.0/8, ::1, localhost) or
  --insecure-scheduler-http is given.
API server (--kubeconfig, --kube-api URL with --kube-token-file/--kube-ca-file, else the in-cluster service
  account when KUBERNETES_SERVICE_HOST is set; --no-kube: none), as MindCluster's device plugin publishes:
  ConfigMap    kube-system/mindx-dl-deviceinfo-<node-name> (data DeviceInfoCfg: healthy, unhealthy chips and
               their fault codes, UpdateTime, CheckCode), within a second of each change and every 60 s;
               created, else merge-patched (other keys, ManuallySeparateNPU, stay). Volcano reads it.
  labels       accelerator, node.kubernetes.io/npu.chip.name, servertype, huawei.com/npu.chip.name,
               huawei.com/npu.server.type, huawei.com/npu.driver.version, huawei.com/driver.version,
               huawei.com/npu.count on the Node, patched only when a value differs from the Node's.
  Needs RBAC: configmaps get/create/patch in kube-system, nodes get/patch.
Driver: every --health-interval the plugin asks the driver for its devices; when that fails (driver unloaded,
  DCMI failing) every device turns Unhealthy and Allocate is refused, with one log line saying why; when the
  driver answers again the devices follow it (its new device nodes and majors included).
vNPU gc: every --vnpu-gc-interval, dynamic vNPUs whose container is gone are destroyed (as ascend-ctk vnpu
  gc); this needs the host's pid namespace and runc's state folders, else nothing is destroyed.
Metrics (--metrics-addr): the plugin's own and the node's NPUs under MindCluster NPU Exporter's names, with
  the pod labels of the kubelet's pod-resources; --metrics-only serves them alone on a host with no kubelet.
Telegraf (--telegraf): as Telegraf's execd input, NPU Exporter's Telegraf lines on stdout every
  --telegraf-interval seconds and at each line on stdin, until stdin closes (then exit 0); no kubelet.
Signals: SIGTERM or SIGINT removes the sockets (the kubelet then drops the resources) and exits 0.
Exit codes: 0 clean stop, 1 failure (one line on stderr says why), 2 bad usage (a flag or a combination of
  flags, or the --config file: unreadable, malformed, an unknown key or a bad value).)";

ascend::plugin::Daemon* g_daemon = nullptr;

void on_signal(int /*sig*/) {
  if (g_daemon != nullptr) g_daemon->stop();
}

int fail(const ascend::Error& e, int code = 1) {
  std::fprintf(stderr, "ascend-device-plugin: %s\n", e.message().c_str());
  return code;
}

}  // namespace

static int run_main(int argc, char** argv) {
  // gRPC's threads allocate for every call; one malloc arena keeps the resident heap of a long-running
  // daemon small (about 4 MB less after 10 000 calls) at no measurable cost for its call rate.
  ::mallopt(M_ARENA_MAX, 1);
  CLI::App app{
      "ascend-device-plugin: advertises Ascend NPUs to the kubelet and allocates them to containers"};
  app.footer(kFooter);
  ascend::plugin::Options options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  const ascend::plugin::Config cfg = options.config();
  if (auto st = ascend::plugin::validate(cfg); !st) return fail(st.error(), 2);
  // Before anything else is opened or logged: a CA file that cannot verify any server is the whole story.
  if (!cfg.scheduler_url.empty() && !cfg.scheduler_ca_file.empty()) {
    if (auto st = ascend::plugin::check_ca_file(cfg.scheduler_ca_file); !st) return fail(st.error());
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
