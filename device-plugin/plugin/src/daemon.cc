#include "ascend/plugin/daemon.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "ascend/common/fs.h"
#include "ascend/common/guarded.h"
#include "ascend/common/kube_client.h"
#include "ascend/npu/vnpu_gc.h"
#include "ascend/plugin/dra_service.h"
#include "ascend/plugin/endpoint.h"
#include "ascend/plugin/grpc_status.h"
#include "ascend/plugin/kube_publisher.h"
#include "ascend/plugin/metrics.h"
#include "ascend/plugin/npu_exporter.h"
#include "ascend/plugin/plugin.h"
#include "ascend/plugin/reporter.h"
#include "ascend/plugin/scheduler_client.h"
#include "podresources/v1/podresources.grpc.pb.h"

namespace ascend::plugin {

namespace {

// Identifies one incarnation of a file: a re-created file differs in inode or ctime.
struct FileId {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  long sec = 0;
  long nsec = 0;
  bool operator==(const FileId&) const = default;
};

FileId file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_dev, st.st_ino, st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
}

constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kIdle = std::chrono::milliseconds(1000);
constexpr auto kRegisterTimeout = std::chrono::milliseconds(1000);

Result<std::map<std::string, std::set<std::string>>> list_pod_resources(const std::string& socket) {
  auto channel = grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  grpc::Status s = stub->List(&ctx, req, &resp);
  if (!s.ok()) return from_grpc_status(s, "list pod resources at " + socket);
  std::map<std::string, std::set<std::string>> out;
  for (const auto& pod : resp.pod_resources()) {
    for (const auto& c : pod.containers()) {
      for (const auto& d : c.devices())
        out[d.resource_name()].insert(d.device_ids().begin(), d.device_ids().end());
    }
  }
  return out;
}

// The API server's configuration from the flags; nullopt when there is none (--no-kube, or no flag and not
// in a cluster).
Result<std::optional<kube::Config>> kube_config(const Config& cfg) {
  kube::ConfigFlags f;
  f.kubeconfig = cfg.kubeconfig;
  f.api_url = cfg.kube_api;
  f.token_file = cfg.kube_token_file;
  f.ca_file = cfg.kube_ca_file;
  if (cfg.no_kube || cfg.metrics_only || cfg.telegraf) return std::optional<kube::Config>();
  return kube::resolve_config(f);
}

}  // namespace

Result<std::unique_ptr<Daemon>> Daemon::create(Config cfg, npu::DeviceQuery& query) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->cfg_ = cfg;
  d->query_ = &query;
  d->stop_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!d->stop_fd_.valid()) return Error::from_errno(errno, "eventfd");
  d->metrics_ = std::make_unique<Metrics>();
  if (!cfg.scheduler_url.empty()) {
    if (cfg.node_name.empty()) cfg.node_name = d->cfg_.node_name = default_node_name();
    ASCEND_CHECK(validate(cfg), "");
    ASCEND_ASSIGN(d->scheduler_, HttpScheduler::create(cfg, d->metrics_.get()), "");
    spdlog::info("scheduler {} (node {})", cfg.scheduler_url, cfg.node_name);
  }
  ASCEND_ASSIGN(auto kube, kube_config(cfg), "the API server");
  if (cfg.dra && !kube)
    return Error::invalid(
        "--dra needs the API server (its ResourceSlices live there): give --kubeconfig or --kube-api, or run "
        "in a cluster");
  if (kube) {
    if (cfg.node_name.empty()) cfg.node_name = d->cfg_.node_name = default_node_name();
    spdlog::info("API server {} ({}): publishing node {}'s chips", kube->server, kube->source, cfg.node_name);
    d->kube_ = std::make_unique<kube::Client>(std::move(*kube));
  }
  ASCEND_ASSIGN(d->plugin_, Plugin::create(query, std::move(cfg), d->metrics_.get(), d->scheduler_.get()),
                "");
  if (!d->cfg_.metrics_addr.empty()) {
    d->metrics_->attach(std::make_shared<NpuExporter>(
        plugin_sources(query, *d->plugin_, d->cfg_.pod_resources_socket)));  // NPU Exporter's metrics
    ASCEND_ASSIGN(d->metrics_server_, MetricsServer::start(d->cfg_.metrics_addr, *d->metrics_), "");
    spdlog::info("serving /metrics on port {}", d->metrics_server_->port());
  }
  for (const auto& r : d->plugin_->resources()) {
    if (d->cfg_.metrics_only || d->cfg_.telegraf) break;  // no kubelet: nothing to serve it
    if (d->cfg_.dra) break;                               // the chips go out through DRA alone (config.h)
    d->endpoints_.push_back(
        std::make_unique<Endpoint>(*d->plugin_, r, d->cfg_.kubelet_socket_dir, d->metrics_.get()));
  }
  return d;
}

Daemon::~Daemon() {
  metrics_server_.reset();  // its scrapes read the plugin (npu_exporter.h)
  endpoints_.clear();
  plugin_.reset();
}

int Daemon::metrics_port() const {
  return metrics_server_ ? metrics_server_->port() : 0;
}

void Daemon::stop() {
  std::uint64_t one = 1;
  // write(2) is async-signal-safe; a full counter still wakes the loop.
  [[maybe_unused]] auto n = ::write(stop_fd_.get(), &one, sizeof one);
}

void Daemon::reconcile_pod_resources() {
  if (!tracks_whole_chips(cfg_) || cfg_.pod_resources_socket.empty()) return;
  if (!file_id(cfg_.pod_resources_socket).exists) return;
  auto in_use = list_pod_resources(cfg_.pod_resources_socket);
  if (!in_use) {
    spdlog::debug("{}", in_use.error().message());
    return;
  }
  plugin_->reconcile(*in_use, cfg_.promise_grace);
}

Status Daemon::run_metrics_only() {
  ASCEND_CHECK(plugin_->watch(), "");  // the driver check: the labels follow a reloaded driver
  spdlog::info("--metrics-only: serving /metrics alone (no kubelet, no plugin sockets)");
  pollfd fd = {stop_fd_.get(), POLLIN, 0};
  while (::poll(&fd, 1, -1) < 0) {
    if (errno != EINTR) return Error::from_errno(errno, "poll");
  }
  return {};
}

Status Daemon::run_telegraf_input() {
  ASCEND_CHECK(plugin_->watch(), "");  // the driver check: the lines follow a reloaded driver
  std::string prefix = "Ascend910";
  for (const auto& r : plugin_->resources()) {
    if (r.kind == DeviceKind::kChip) prefix = r.short_name();
  }
  spdlog::info(
      "--telegraf: the NPU metrics for Telegraf on standard output every {} s and at each line on "
      "standard input, until it closes",
      cfg_.telegraf_interval.count());
  // No kubelet: no pod-resources, so no pod labels (as --metrics-only).
  return run_telegraf(plugin_sources(*query_, *plugin_, ""), prefix, cfg_.telegraf_interval, STDIN_FILENO,
                      STDOUT_FILENO, stop_fd_.get());
}

void Daemon::collect_vnpus() {
  if (!plugin_->driver_lost().empty()) return;
  npu::ContainerProbe probe;
  auto r = npu::run_vnpu_gc(*query_, probe, false);
  if (!r) {
    spdlog::warn("vnpu gc: {}", r.error().message());
    return;
  }
  for (const auto& d : r->destroyed) {
    spdlog::info("vnpu gc: destroyed vNPU {} ({}, device {}): {}", d.vnpu.id, d.vnpu.template_name,
                 d.vnpu.phy_id, d.why);
  }
  for (const auto& k : r->kept) {
    if (k.state == npu::Liveness::State::kUnsure && said_unsure_.insert(k.vnpu.id).second)
      spdlog::warn("vnpu gc: keeping vNPU {}: {}", k.vnpu.id, k.why);
  }
  for (const auto& e : r->errors) spdlog::warn("vnpu gc: {}", e);
}

Status Daemon::run() {
  if (cfg_.telegraf) return run_telegraf_input();
  if (cfg_.metrics_only) return run_metrics_only();
  const std::string& dir = cfg_.kubelet_socket_dir;
  const std::string kubelet = dir + (dir.ends_with('/') ? "" : "/") + kKubeletSocketName;
  ASCEND_CHECK(make_dirs(dir), "create the device-plugins folder");
  ASCEND_CHECK(plugin_->watch(), "");
  for (auto& e : endpoints_) ASCEND_CHECK(e->start(), "");
  // Ends (joining its thread) whichever way run() returns.
  std::unique_ptr<Reporter> reporter;
  if (scheduler_) {
    ReporterOptions opts;
    opts.resend_every = cfg_.report_every;
    reporter = std::make_unique<Reporter>(*plugin_, *scheduler_, opts);
  }
  std::unique_ptr<DraService> dra;
  if (cfg_.dra) {
    DraOptions o;
    o.node_name = cfg_.node_name;
    o.registry_dir = cfg_.dra_registry_dir;
    o.plugin_dir = cfg_.dra_plugin_dir;
    DraVnpus vnpus;
    if (cfg_.dra_vnpu) {  // the claims' vNPUs are made through the device query, as the runtime's are
      vnpus.query = query_;
      vnpus.healthy = dra_healthy_chips(*plugin_);
      vnpus.cdi_dir = cfg_.dra_cdi_dir;
    }
    dra = std::make_unique<DraService>(o, *kube_, dra_usable_chips(*plugin_), std::move(vnpus));
    ASCEND_CHECK(dra->start(), "serve the kubelet's DRA plugin API");
    spdlog::info("--dra: driver {} registering with the kubelet at {} (no Device Plugin resources)",
                 dra::kDriver, dra->registration_socket());
  }
  std::unique_ptr<KubePublisher> publisher;
  if (kube_) {
    KubePublisherOptions opts;
    opts.refresh_every = cfg_.kube_refresh;
    opts.dra_slices = cfg_.dra;
    opts.dra_vnpu = cfg_.dra_vnpu;
    publisher = std::make_unique<KubePublisher>(*plugin_, *kube_, cfg_.node_name, opts);
  }

  UniqueFd ino(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!ino.valid() ||
      ::inotify_add_watch(ino.get(), dir.c_str(), IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
    spdlog::warn("cannot watch {} with inotify ({}); noticing kubelet restarts by polling", dir,
                 std::strerror(errno));
  }

  std::vector<bool> pending(endpoints_.size(), true);
  FileId kubelet_id;
  bool said_waiting = false;
  auto next_reconcile = std::chrono::steady_clock::now();
  auto next_gc = std::chrono::steady_clock::now();
  std::string reconcile_failed, gc_failed;  // the last exceptions' texts
  while (true) {
    // A kubelet restart deletes our sockets: serve again.
    for (std::size_t i = 0; i < endpoints_.size(); ++i) {
      auto& e = *endpoints_[i];
      if (e.serving() && e.socket_intact()) continue;
      if (e.serving())
        spdlog::info("{}: socket {} is gone (kubelet restart?); serving again", e.resource().name,
                     e.socket_path());
      e.stop();
      if (auto st = e.start(); !st) {
        spdlog::error("{}", st.error().message());
        continue;
      }
      pending[i] = true;
    }
    // A new kubelet.sock is a new kubelet: register everything again.
    auto id = file_id(kubelet);
    if (id.exists && id != kubelet_id) {
      if (kubelet_id.exists) spdlog::info("kubelet socket {} was re-created; registering again", kubelet);
      pending.assign(endpoints_.size(), true);
    }
    kubelet_id = id;
    if (id.exists) {
      said_waiting = false;
      for (std::size_t i = 0; i < endpoints_.size(); ++i) {
        if (!pending[i] || !endpoints_[i]->serving()) continue;
        if (auto st = endpoints_[i]->register_with(kubelet, kRegisterTimeout); !st) {
          spdlog::warn("{}; retrying", st.error().message());
          continue;
        }
        pending[i] = false;
        registrations_++;
        spdlog::info("{}: registered with the kubelet ({})", endpoints_[i]->resource().name,
                     endpoints_[i]->resource().socket_name());
      }
    } else if (!said_waiting) {
      spdlog::info("waiting for the kubelet: no {} yet", kubelet);
      said_waiting = true;
    }
    // The periodic chores: one that throws is logged and runs again at its next time (guarded.h).
    if (std::chrono::steady_clock::now() >= next_reconcile) {
      run_guarded(
          "pod-resources reconcile", [this] { reconcile_pod_resources(); }, "carrying on", &reconcile_failed);
      next_reconcile = std::chrono::steady_clock::now() + cfg_.reconcile_every;
    }
    if (cfg_.vnpu_gc_interval.count() > 0 && std::chrono::steady_clock::now() >= next_gc) {
      run_guarded(
          "vNPU gc", [this] { collect_vnpus(); }, "carrying on", &gc_failed);
      next_gc = std::chrono::steady_clock::now() + cfg_.vnpu_gc_interval;
    }

    bool any_pending = false;
    for (bool p : pending) any_pending = any_pending || p;
    pollfd fds[2] = {{stop_fd_.get(), POLLIN, 0}, {ino.get(), POLLIN, 0}};
    auto wait = (any_pending && id.exists) ? kTick : kIdle;
    if (tracks_whole_chips(cfg_)) wait = std::min(wait, cfg_.reconcile_every);
    int n = ::poll(fds, ino.valid() ? 2 : 1, static_cast<int>(wait.count()));
    if (n < 0 && errno != EINTR) return Error::from_errno(errno, "poll");
    if ((fds[0].revents & POLLIN) != 0) break;
    if (ino.valid() && (fds[1].revents & POLLIN) != 0) {
      alignas(inotify_event) char buf[4096];
      while (::read(ino.get(), buf, sizeof buf) > 0) {
        // The events only wake the loop; the checks above decide what to do.
      }
    }
  }
  reporter.reset();
  publisher.reset();
  dra.reset();
  spdlog::info("stopping: removing the plugin sockets");
  for (auto& e : endpoints_) e->stop();
  return {};
}

}  // namespace ascend::plugin
