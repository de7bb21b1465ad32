// The plugin's Prometheus metrics (prometheus-cpp) and the /metrics HTTP endpoint. /metrics also serves the
// node's NPUs under MindCluster NPU Exporter's names (npu_exporter.h, attached by the daemon).
//
//   ascend_npu_healthy{device}                     1 Healthy, 0 Unhealthy (the kubelet's view)
//   ascend_npu_health_level{device}                0 OK, 1 Warning, 2 Alarm, 3 Critical
//   ascend_npu_hbm_total_bytes / _used_bytes{device}
//   ascend_npu_aicore_count{device}
//   ascend_npu_temperature_celsius{device}
//   ascend_device_plugin_allocate_requests_total{resource}
//   ascend_device_plugin_allocate_errors_total{resource}
//   ascend_device_plugin_allocate_duration_seconds{resource}   histogram
//   ascend_device_plugin_scheduler_requests_total{call}         calls to the scheduler (inventory,
//   ascend_device_plugin_scheduler_errors_total{call}           reservations, allocation) and those that got
//                                                               no contract answer (unreachable, timeout,
//                                                               5xx, an unexpected status or body)
//
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace prometheus {
class Collectable;
class Counter;
class Histogram;
}  // namespace prometheus

namespace ascend::plugin {

// The Allocate series of one resource (requests, errors, latency), looked up once so that a call costs
// only the updates, not a label lookup under the family's lock. Thread-safe; valid while its Metrics is.
class AllocateSeries {
 public:
  void observe(std::chrono::nanoseconds took, bool ok) const;

 private:
  friend class Metrics;
  prometheus::Counter* requests_ = nullptr;
  prometheus::Counter* errors_ = nullptr;
  prometheus::Histogram* latency_ = nullptr;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void update_chips(const npu::DeviceSnapshot& host);
  AllocateSeries allocate_series(const std::string& resource);
  void observe_allocate(const std::string& resource, std::chrono::nanoseconds took, bool ok);
  void observe_scheduler_call(const std::string& call, bool answered);
  // Serves `c`'s metrics after the plugin's own (the NPU Exporter metrics, npu_exporter.h). Call before
  // MetricsServer::start.
  void attach(std::shared_ptr<prometheus::Collectable> c);

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Serves `metrics` at http://<addr>/metrics until destroyed.
class MetricsServer {
 public:
  // `addr` is "host:port" or ":port"; port 0 picks a free port (see port()).
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& addr, const Metrics& metrics);
  ~MetricsServer();
  int port() const { return port_; }

  struct Impl;

 private:
  MetricsServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace ascend::plugin
