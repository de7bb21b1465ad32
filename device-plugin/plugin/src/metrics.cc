#include "ascend/plugin/metrics.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "ascend/common/guarded.h"
#include "ascend/common/listen_address.h"
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

namespace {

// The scrape's workers: `threads` of them, and at most `max_waiting` accepted connections waiting for one. A
// full queue holds the accepting thread (further peers wait in the kernel's backlog), as civetweb's did when
// prometheus-cpp's exposer served /metrics (2 threads, 20 waiting); httplib's own ThreadPool would queue
// every connection a peer opens.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(std::size_t threads, std::size_t max_waiting) : max_waiting_(max_waiting) {
    for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  BoundedPool(const BoundedPool&) = delete;
  BoundedPool& operator=(const BoundedPool&) = delete;
  ~BoundedPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    room_.wait(lock, [&] { return jobs_.size() < max_waiting_ || stopping_; });
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }
  // The connections already accepted are served (each closes its socket), then the workers end.
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
    for (auto& w : workers_) {
      if (w.joinable()) w.join();
    }
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      room_.notify_one();
      try {
        fn();
      } catch (const std::exception& e) {
        spdlog::warn("/metrics: a connection failed: {}", e.what());
      } catch (...) {
        spdlog::warn("/metrics: a connection failed");
      }
    }
  }

  const std::size_t max_waiting_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable room_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

constexpr std::size_t kScrapeThreads = 2;
constexpr std::size_t kScrapesWaiting = 20;

}  // namespace

// /metrics on cpp-httplib's server (the library the scheduler client already uses) and prometheus-cpp's text
// format: what prometheus-cpp's Exposer answered, without civetweb. Its own three series come first, as the
// Exposer's did: exposer_transferred_bytes_total (the body's bytes, before any compression),
// exposer_scrapes_total and exposer_request_latencies (microseconds to collect and serialize).
struct MetricsServer::Impl {
  std::shared_ptr<prometheus::Registry> own = std::make_shared<prometheus::Registry>();
  prometheus::Counter& bytes = prometheus::BuildCounter()
                                   .Name("exposer_transferred_bytes_total")
                                   .Help("Transferred bytes to metrics services")
                                   .Register(*own)
                                   .Add({});
  prometheus::Counter& scrapes = prometheus::BuildCounter()
                                     .Name("exposer_scrapes_total")
                                     .Help("Number of times metrics were scraped")
                                     .Register(*own)
                                     .Add({});
  prometheus::Summary& latency =
      prometheus::BuildSummary()
          .Name("exposer_request_latencies")
          .Help("Latencies of serving scrape requests, in microseconds")
          .Register(*own)
          .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}});
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  httplib::Server http;
  std::thread listener;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    http.stop();
    if (listener.joinable()) listener.join();
  }

  std::string scrape() {
    const auto start = std::chrono::steady_clock::now();
    std::vector<prometheus::MetricFamily> families;
    for (const auto& c : collectables) {
      auto more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
    std::string body = prometheus::TextSerializer().Serialize(families);
    latency.Observe(static_cast<double>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start)
            .count()));
    bytes.Increment(static_cast<double>(body.size()));
    scrapes.Increment();
    return body;
  }
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& addr, const Metrics& metrics) {
  auto where = parse_listen_address(addr);
  if (!where) return Error::invalid("--metrics-addr " + addr + ": " + where.error().message());

  std::unique_ptr<MetricsServer> out(new MetricsServer());
  out->impl_ = std::make_unique<Impl>();
  Impl& impl = *out->impl_;
  impl.collectables.push_back(impl.own);
  impl.collectables.push_back(metrics.impl().registry);
  for (const auto& c : metrics.impl().attached) impl.collectables.push_back(c);

  httplib::Server& http = impl.http;
  http.new_task_queue = [] { return new BoundedPool(kScrapeThreads, kScrapesWaiting); };
  http.set_payload_max_length(0);  // a scrape carries no body
  // An idle keep-alive connection holds a worker until this timeout, and stopping waits for it: 1 s
  // (Prometheus scrapes every 15 s or more, so a longer one would not keep a connection between scrapes
  // anyway).
  http.set_keep_alive_timeout(1);
  // Only GET /metrics: anything else is refused before routing, so that nothing of its body is read (the
  // HTTP library reads a chunked body, or one without a length, whole, whatever the payload limit says),
  // and the connection closes after the refusal.
  auto scrape_only = [](const httplib::Request& q, httplib::Response& r) {
    if (q.method == "GET" && q.path == "/metrics") return true;
    r.status = q.path == "/metrics" ? 405 : 404;
    if (r.status == 405) r.set_header("Allow", "GET");
    r.set_header("Connection", "close");
    r.set_content(r.status == 405 ? "only GET /metrics\n" : "not found: only GET /metrics\n", "text/plain");
    return false;
  };
  http.set_pre_routing_handler([scrape_only](const httplib::Request& q, httplib::Response& r) {
    return scrape_only(q, r) ? httplib::Server::HandlerResponse::Unhandled
                             : httplib::Server::HandlerResponse::Handled;
  });
  // A scrape has no body to announce: a client that announces one is answered before it sends it.
  http.set_expect_100_continue_handler([scrape_only](const httplib::Request& q, httplib::Response& r) {
    if (!scrape_only(q, r)) return r.status;
    r.set_header("Connection", "close");
    return 417;
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, const std::exception_ptr& ep) {
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          spdlog::warn("/metrics: the scrape failed: {}", e.what());
        } catch (...) {
          spdlog::warn("/metrics: the scrape failed");
        }
        res.status = 500;
        res.set_content("scrape failed\n", "text/plain");
      });
  http.Get("/metrics", [&impl](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl.scrape(), "text/plain; charset=utf-8");
  });
  // Never shared with another listener (no SO_REUSEPORT): a second plugin, or another process, cannot take
  // half of the scrapes.
  auto port = bind_http_listener(http, *where);
  if (!port) return Error(EADDRINUSE, "serve /metrics on " + addr + ": cannot listen on that address");
  out->port_ = *port;
  // The listener thread survives its own exception (guarded.h); an accept loop that ends on its own (the
  // machine out of descriptors or memory) says so: /metrics is gone while the daemon runs on.
  auto done = std::make_shared<std::atomic<bool>>(false);
  impl.listener = std::thread([&http, done] {
    ascend::run_guarded("/metrics listener", [&http] {
      if (!http.listen_after_bind())
        spdlog::error("/metrics: the listener stopped accepting connections; /metrics is not served");
    });
    done->store(true);
  });
  // Listening from here on (a stop before the loop runs would not end it), unless the loop ended first.
  while (!http.is_running() && !done->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!http.is_running()) return Error(EIO, "serve /metrics on " + addr + ": the listener ended at once");
  return out;
}

MetricsServer::~MetricsServer() = default;

}  // namespace ascend::plugin
