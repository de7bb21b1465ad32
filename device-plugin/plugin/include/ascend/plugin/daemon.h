// ascend-device-plugin's main loop: serves every resource, registers each with the kubelet (waiting for
// the kubelet when it is not there yet), follows kubelet restarts, and on stop deregisters by removing its
// sockets.
//
// A kubelet restart deletes every socket in the device-plugins folder and creates a new kubelet.sock. The
// loop watches the folder with inotify (and re-checks on a 100 ms tick): a deleted plugin socket is served
// again, a new kubelet.sock triggers registration of every resource.
//
// Every --vnpu-gc-interval it destroys dynamic vNPUs whose container is gone (vnpu_gc.h).
//
// With --scheduler-url, run() also keeps a Reporter that sends the node's inventory to the scheduler, and
// reads the kubelet's pod-resources list to learn which handed-out chips are free again.
//
// With --metrics-only, run() serves /metrics alone (no sockets, no registration) until stop(). With
// --telegraf, it writes Telegraf's lines on standard output until standard input closes or stop().
//
// With an API server (--kubeconfig, --kube-api, or in a cluster; not --no-kube), run() also keeps a
// KubePublisher that writes the node's chips to MindCluster's device ConfigMap and labels the Node.
//
// run() is called from one thread; stop() from any thread or from a signal handler.
#pragma once

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/common/unique_fd.h"
#include "ascend/npu/device_query.h"
#include "ascend/plugin/config.h"

namespace ascend::plugin {

class Plugin;
class Metrics;
class MetricsServer;
class Endpoint;
class SchedulerApi;
class Reporter;
}  // namespace ascend::plugin

namespace ascend::kube {
class Client;
}  // namespace ascend::kube

namespace ascend::plugin {

class Daemon {
 public:
  // Reads the devices, plans the resources and (with --metrics-addr) starts serving /metrics. With
  // --scheduler-url and no node name, the node name is default_node_name().
  static Result<std::unique_ptr<Daemon>> create(Config cfg, npu::DeviceQuery& query);
  ~Daemon();

  // Runs until stop(). Fails only when a socket cannot be served at all.
  Status run();
  // Async-signal-safe.
  void stop();

  Plugin& plugin() { return *plugin_; }
  const Config& config() const { return cfg_; }
  int registrations() const { return registrations_.load(); }
  int metrics_port() const;

 private:
  Daemon() = default;
  void reconcile_pod_resources();
  // --metrics-only: the driver check and /metrics, until stop().
  Status run_metrics_only();
  // --telegraf: the driver check and Telegraf's lines (npu_exporter.h run_telegraf), until standard input
  // closes or stop().
  Status run_telegraf_input();
  // One `vnpu gc` pass (vnpu_gc.h), logged.
  void collect_vnpus();

  Config cfg_;
  npu::DeviceQuery* query_ = nullptr;
  std::set<int> said_unsure_;  // vNPUs whose owner gc could not judge, logged once
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<SchedulerApi> scheduler_;  // before plugin_: the plugin uses it until it is gone
  std::unique_ptr<kube::Client> kube_;       // null: no API server
  std::unique_ptr<Plugin> plugin_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  UniqueFd stop_fd_;
  std::atomic<int> registrations_{0};
};

}  // namespace ascend::plugin
