#include "ascend/plugin/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <exception>
#include <mutex>

#include "ascend/plugin/inventory.h"

namespace ascend::plugin {

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Gauge>& healthy = prometheus::BuildGauge()
                                                       .Name("ascend_npu_healthy")
                                                       .Help("1 when the device is Healthy for the kubelet")
                                                       .Register(*registry);
  prometheus::Family<prometheus::Gauge>& level =
      prometheus::BuildGauge()
          .Name("ascend_npu_health_level")
          .Help("worst fault severity: 0 OK, 1 Warning, 2 Alarm, 3 Critical")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& hbm_total =
      prometheus::BuildGauge().Name("ascend_npu_hbm_total_bytes").Help("HBM size").Register(*registry);
  prometheus::Family<prometheus::Gauge>& hbm_used =
      prometheus::BuildGauge().Name("ascend_npu_hbm_used_bytes").Help("HBM in use").Register(*registry);
  prometheus::Family<prometheus::Gauge>& aicore = prometheus::BuildGauge()
                                                      .Name("ascend_npu_aicore_count")
                                                      .Help("AICores of the device")
                                                      .Register(*registry);
  prometheus::Family<prometheus::Gauge>& temp = prometheus::BuildGauge()
                                                    .Name("ascend_npu_temperature_celsius")
                                                    .Help("device temperature")
                                                    .Register(*registry);
  prometheus::Family<prometheus::Counter>& requests =
      prometheus::BuildCounter()
          .Name("ascend_device_plugin_allocate_requests_total")
          .Help("Allocate calls")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& errors = prometheus::BuildCounter()
                                                        .Name("ascend_device_plugin_allocate_errors_total")
                                                        .Help("Allocate calls that failed")
                                                        .Register(*registry);
  prometheus::Family<prometheus::Histogram>& latency =
      prometheus::BuildHistogram()
          .Name("ascend_device_plugin_allocate_duration_seconds")
          .Help("time to answer an Allocate call")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& scheduler_requests =
      prometheus::BuildCounter()
          .Name("ascend_device_plugin_scheduler_requests_total")
          .Help("requests to the scheduler extender")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& scheduler_errors =
      prometheus::BuildCounter()
          .Name("ascend_device_plugin_scheduler_errors_total")
          .Help("requests to the scheduler extender that got no contract answer")
          .Register(*registry);
  std::mutex mu;  // Family::Add is thread-safe; the mutex keeps one update_chips consistent
  std::vector<std::shared_ptr<prometheus::Collectable>> attached;
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::update_chips(const npu::DeviceSnapshot& host) {
  std::lock_guard lock(impl_->mu);
  constexpr double kMiB = 1024.0 * 1024.0;
  for (const auto& c : host.chips) {
    const prometheus::Labels labels{{"device", std::to_string(c.phy_id)}};
    const npu::Health h = c.health();
    impl_->healthy.Add(labels).Set(is_healthy(h) ? 1 : 0);
    impl_->level.Add(labels).Set(static_cast<double>(static_cast<int>(h)));
    const int total = c.hbm_total_mb > 0 ? c.hbm_total_mb : c.mem_total_mb;
    const int used = c.hbm_total_mb > 0 ? c.hbm_used_mb : c.mem_used_mb;
    impl_->hbm_total.Add(labels).Set(total * kMiB);
    impl_->hbm_used.Add(labels).Set(used * kMiB);
    impl_->aicore.Add(labels).Set(c.aicore_count);
    impl_->temp.Add(labels).Set(c.temp_c);
  }
}

AllocateSeries Metrics::allocate_series(const std::string& resource) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                                   0.005,  0.01,    0.025,  0.1,   1.0};
  const prometheus::Labels labels{{"resource", resource}};
  AllocateSeries s;
  s.requests_ = &impl_->requests.Add(labels);
  s.errors_ = &impl_->errors.Add(labels);
  s.latency_ = &impl_->latency.Add(labels, kBuckets);
  return s;
}

void AllocateSeries::observe(std::chrono::nanoseconds took, bool ok) const {
  requests_->Increment();
  if (!ok) errors_->Increment();
  latency_->Observe(std::chrono::duration<double>(took).count());
}

void Metrics::observe_allocate(const std::string& resource, std::chrono::nanoseconds took, bool ok) {
  allocate_series(resource).observe(took, ok);
}

void Metrics::observe_scheduler_call(const std::string& call, bool answered) {
  // Family::Add is thread-safe and finds the existing series; these calls are rare (at most a few a second).
  const prometheus::Labels labels{{"call", call}};
  impl_->scheduler_requests.Add(labels).Increment();
  if (!answered) impl_->scheduler_errors.Add(labels).Increment();
}

void Metrics::attach(std::shared_ptr<prometheus::Collectable> c) {
  std::lock_guard lock(impl_->mu);
  impl_->attached.push_back(std::move(c));
}

struct MetricsServer::Impl {
  std::unique_ptr<prometheus::Exposer> exposer;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& addr, const Metrics& metrics) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 == addr.size()) {
    return Error::invalid("--metrics-addr must be host:port or :port (got '" + addr + "')");
  }
  // civetweb wants "port" or "host:port"; ":port" means every address.
  std::string bind = colon == 0 ? addr.substr(1) : addr;
  std::unique_ptr<MetricsServer> out(new MetricsServer());
  out->impl_ = std::make_unique<Impl>();
  try {
    out->impl_->exposer = std::make_unique<prometheus::Exposer>(bind, 2);
  } catch (const std::exception& e) {
    return Error(EADDRINUSE, "serve /metrics on " + addr + ": " + e.what());
  }
  out->impl_->exposer->RegisterCollectable(metrics.impl().registry);
  for (const auto& c : metrics.impl().attached) out->impl_->exposer->RegisterCollectable(c);
  auto ports = out->impl_->exposer->GetListeningPorts();
  out->port_ = ports.empty() ? 0 : ports.front();
  return out;
}

MetricsServer::~MetricsServer() = default;

}  // namespace ascend::plugin
