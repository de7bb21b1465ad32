#include "ascend/scheduler/server.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ascend/common/fs.h"
#include "ascend/common/json_depth.h"
#include "ascend/scheduler/extender.h"
#include "ascend/scheduler/wire.h"

namespace ascend::scheduler {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// Nesting deeper than this is refused before parsing: the Node objects of a filter are echoed back, and
// serialising is recursive.
constexpr int kMaxDepth = 128;

bool too_deep(std::string_view s) {
  return json_nests_deeper_than(s, kMaxDepth);
}

template <typename J>
void reply(httplib::Response& res, int status, const J& body) {
  res.status = status;
  res.set_content(body.dump() + "\n", "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& why) {
  reply(res, status, json{{"error", why}});
}

int http_status(const Error& e) {
  switch (e.code()) {
    case ENOENT:
      return 404;
    case EBUSY:
      return 409;
    default:
      return 400;
  }
}

bool loopback(const std::string& addr) {
  return addr == "127.0.0.1" || addr == "::1" || addr == "::ffff:127.0.0.1" || addr.starts_with("127.");
}

Result<std::string> read_token(const std::string& path) {
  auto t = read_file(path, std::size_t{64} * 1024);
  if (!t.ok()) return t.error();
  std::string s = *t;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return Error::invalid(path + ": the token file is empty");
  return s;
}

bool same(std::string_view a, std::string_view b) {  // constant time in the length of b
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned>(i < a.size() ? a[i] ^ b[i] : 1);
  return diff == 0;
}

Result<std::pair<std::string, int>> parse_listen(const std::string& s) {
  std::size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) {
    return Error::invalid("--listen " + s + ": give HOST:PORT (port 0 picks a free one)");
  }
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  int port = 0;
  try {
    std::size_t used = 0;
    port = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1 || port < 0 || port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    return Error::invalid("--listen " + s + ": the port must be a number from 0 to 65535");
  }
  return std::make_pair(host, port);
}

class KubeBinder final : public Binder {
 public:
  KubeBinder(std::string url, std::string token, std::string ca)
      : url_(std::move(url)), token_(std::move(token)), ca_(std::move(ca)) {}
  Status bind(const std::string& ns, const std::string& pod, const std::string& uid,
              const std::string& node) override {
    httplib::Client cli(url_);
    cli.set_connection_timeout(std::chrono::seconds(5));
    cli.set_read_timeout(std::chrono::seconds(10));
    if (!ca_.empty()) cli.set_ca_cert_path(ca_.c_str());
    if (!token_.empty()) cli.set_bearer_token_auth(token_.c_str());
    std::string path = "/api/v1/namespaces/" + ns + "/pods/" + pod + "/binding";
    BindingArgs b{pod, ns, uid, node};
    auto r = cli.Post(path.c_str(), binding_object(b).dump(), "application/json");
    if (!r) return Error(EIO, "POST " + url_ + path + ": " + httplib::to_string(r.error()));
    if (r->status != 200 && r->status != 201) {
      std::string body = r->body.substr(0, 300);
      while (!body.empty() && body.back() == '\n') body.pop_back();
      return Error(EIO, "POST " + url_ + path + ": HTTP " + std::to_string(r->status) + ": " + body);
    }
    return ok_status();
  }

 private:
  std::string url_;
  std::string token_;
  std::string ca_;
};

const char* const kVerbs[] = {"filter",  "prioritize", "bind", "inventory", "reservations", "allocations",
                              "release", "cluster",    "jobs", "dashboard", "healthz",      "metrics"};

}  // namespace

Result<std::unique_ptr<Binder>> make_kube_binder(const std::string& api_url, const std::string& token_file,
                                                 const std::string& ca_file) {
  if (!api_url.starts_with("http://") && !api_url.starts_with("https://")) {
    return Error::invalid("--kube-api " + api_url + ": give an http:// or https:// URL");
  }
  std::string token;
  if (!token_file.empty()) {
    ASCEND_ASSIGN(token, read_token(token_file), "--kube-token-file");
  }
  std::unique_ptr<Binder> b = std::make_unique<KubeBinder>(api_url, token, ca_file);
  return b;
}

struct Server::Impl {
  ServeOptions opts;
  std::unique_ptr<Binder> binder;
  std::string token;
  std::unique_ptr<httplib::Server> http;
  int port = 0;

  std::mutex mu;  // guards sched and saved
  Scheduler sched;
  std::uint64_t saved = 0;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::atomic<bool> serving{false};  // run() was called and has not returned
  std::thread expirer;

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests = prometheus::BuildCounter()
                                                          .Name("ascend_scheduler_requests_total")
                                                          .Help("requests by verb and HTTP status class")
                                                          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& latency = prometheus::BuildHistogram()
                                                           .Name("ascend_scheduler_request_duration_seconds")
                                                           .Help("time to answer a request, by verb")
                                                           .Register(*registry);
  prometheus::Family<prometheus::Gauge>& chips =
      prometheus::BuildGauge().Name("ascend_scheduler_chips").Help("chips by state").Register(*registry);
  prometheus::Family<prometheus::Gauge>& jobs =
      prometheus::BuildGauge().Name("ascend_scheduler_jobs").Help("jobs held, by state").Register(*registry);
  prometheus::Family<prometheus::Counter>& outcomes = prometheus::BuildCounter()
                                                          .Name("ascend_scheduler_jobs_total")
                                                          .Help("jobs placed or refused since start")
                                                          .Register(*registry);
  std::map<std::string, prometheus::Histogram*> latency_of;

  Impl(ServeOptions o, topology::Cluster c, std::unique_ptr<Binder> b)
      : opts(std::move(o)), binder(std::move(b)), sched(std::move(c), opts.reservation_ttl) {
    static const prometheus::Histogram::BucketBoundaries kBuckets = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
    for (const char* v : kVerbs) latency_of[v] = &latency.Add({{"verb", v}}, kBuckets);
  }

  // Writes the state file when the scheduler changed since the last write. Called with `mu` held.
  Status persist_locked() {
    if (opts.state.empty() || sched.changes() == saved) return ok_status();
    auto s = atomic_replace(opts.state, sched.save().dump() + "\n", 0600);
    if (!s.ok()) return s.error().context("state file");
    saved = sched.changes();
    return ok_status();
  }

  void persist_or_log() {
    if (auto s = persist_locked(); !s.ok()) spdlog::error("{}", s.error().message());
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) const {
    if (token.empty()) {
      if (loopback(req.remote_addr)) return true;
      reply_error(res, 403,
                  "this endpoint accepts loopback peers only (start the scheduler with --token-file)");
      return false;
    }
    std::string auth = req.get_header_value("Authorization");
    if (!auth.starts_with("Bearer ") || !same(std::string_view(auth).substr(7), token)) {
      reply_error(res, 401, "a valid bearer token is required");
      return false;
    }
    return true;
  }

  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Wraps a handler: metrics, optional access check, and a last-resort catch (one JSON line, never a crash).
  httplib::Server::Handler wrap(const char* verb, bool guarded, Handler h) {
    return [this, verb, guarded, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
      auto t0 = std::chrono::steady_clock::now();
      try {
        if (!guarded || authorized(req, res)) h(req, res);
      } catch (const std::exception& e) {
        reply_error(res, 500, std::string("internal error: ") + e.what());
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      latency_of[verb]->Observe(secs);
      std::string cls = std::to_string(res.status / 100) + "xx";
      requests.Add({{"verb", verb}, {"code", cls}}).Increment();
    };
  }

  // Parses a JSON body; on failure answers 400 and returns false.
  static bool body_json(const httplib::Request& req, httplib::Response& res, json& out) {
    if (too_deep(req.body)) {
      reply_error(res, 400, "request body nests deeper than " + std::to_string(kMaxDepth) + " levels");
      return false;
    }
    out = json::parse(req.body, nullptr, false);
    if (out.is_discarded()) {
      reply_error(res, 400, "request body is not valid JSON");
      return false;
    }
    return true;
  }

  void routes();
  void on_filter(const httplib::Request& req, httplib::Response& res);
  void on_prioritize(const httplib::Request& req, httplib::Response& res);
  void on_bind(const httplib::Request& req, httplib::Response& res);
  std::string metrics_text();
  void expire_loop();
};

void Server::Impl::on_filter(const httplib::Request& req, httplib::Response& res) {
  json body;
  if (!body_json(req, res, body)) return;
  auto args = parse_extender_args(body);
  if (!args.ok()) return reply_error(res, 400, args.error().message());
  FilterResult r;
  {
    std::lock_guard lock(mu);
    auto before = sched.counts();
    r = sched.filter(args->pod, args->node_names, std::chrono::system_clock::now());
    auto after = sched.counts();
    if (after.placed != before.placed) {
      spdlog::info("placed job of pod {} ({} chips per pod)", args->pod.key(), args->pod.chips);
    } else if (after.refused != before.refused && !r.failed.empty()) {
      spdlog::info("refused pod {}: {}", args->pod.key(), r.failed.begin()->second);
    }
    persist_or_log();
  }
  reply(res, 200, filter_result_json(*args, r));
}

void Server::Impl::on_prioritize(const httplib::Request& req, httplib::Response& res) {
  json body;
  if (!body_json(req, res, body)) return;
  auto args = parse_extender_args(body);
  if (!args.ok()) return reply_error(res, 400, args.error().message());
  std::vector<NodeScore> scores;
  {
    std::lock_guard lock(mu);
    scores = sched.prioritize(args->pod, args->node_names);
  }
  reply(res, 200, priorities_json(scores));
}

void Server::Impl::on_bind(const httplib::Request& req, httplib::Response& res) {
  json body;
  if (!body_json(req, res, body)) return;
  auto b = parse_binding_args(body);
  if (!b.ok()) return reply_error(res, 400, b.error().message());
  {
    std::lock_guard lock(mu);
    auto s = sched.bind(b->pod_namespace, b->pod_name, b->pod_uid, b->node, std::chrono::system_clock::now());
    if (!s.ok()) return reply(res, 200, binding_result_json(s.error().message()));
    persist_or_log();
  }
  if (binder) {
    // Outside the lock: the API server may be slow. The chips stay held meanwhile; a failure gives them back.
    if (auto s = binder->bind(b->pod_namespace, b->pod_name, b->pod_uid, b->node); !s.ok()) {
      std::lock_guard lock(mu);
      sched.unbind(b->pod_namespace, b->pod_name, std::chrono::system_clock::now());
      persist_or_log();
      spdlog::warn("bind {}/{} to {}: {}", b->pod_namespace, b->pod_name, b->node, s.error().message());
      return reply(res, 200, binding_result_json("creating the Binding failed: " + s.error().message()));
    }
  }
  spdlog::info("bound {}/{} to {}", b->pod_namespace, b->pod_name, b->node);
  reply(res, 200, binding_result_json(""));
}

std::string Server::Impl::metrics_text() {
  Scheduler::Counts c;
  {
    std::lock_guard lock(mu);
    c = sched.counts();
  }
  chips.Add({{"state", "free"}}).Set(c.free);
  chips.Add({{"state", "used"}}).Set(c.used);
  chips.Add({{"state", "unhealthy"}}).Set(c.unhealthy);
  jobs.Add({{"state", "held"}}).Set(c.jobs);
  jobs.Add({{"state", "pending"}}).Set(c.pending_jobs);
  auto& placed = outcomes.Add({{"outcome", "placed"}});
  placed.Increment(static_cast<double>(c.placed) - placed.Value());
  auto& refused = outcomes.Add({{"outcome", "refused"}});
  refused.Increment(static_cast<double>(c.refused) - refused.Value());
  return prometheus::TextSerializer().Serialize(registry->Collect());
}

void Server::Impl::routes() {
  auto& s = *http;
  s.Post("/filter", wrap("filter", false, [this](const auto& q, auto& r) { on_filter(q, r); }));
  s.Post("/prioritize", wrap("prioritize", false, [this](const auto& q, auto& r) { on_prioritize(q, r); }));
  s.Post("/bind", wrap("bind", false, [this](const auto& q, auto& r) { on_bind(q, r); }));

  s.Put(R"(/v1/nodes/([^/]+))", wrap("inventory", true, [this](const auto& q, auto& r) {
          json body;
          if (!body_json(q, r, body)) return;
          auto inv = parse_inventory(body);
          if (!inv.ok()) return reply_error(r, 400, inv.error().message());
          std::string node = q.matches[1];
          std::lock_guard lock(mu);
          auto st = sched.put_inventory(node, *inv, std::chrono::system_clock::now());
          if (!st.ok()) return reply_error(r, http_status(st.error()), st.error().message());
          persist_or_log();
          reply(r, 200, json{{"node", node}, {"chips", inv->chips.size()}});
        }));
  s.Get(R"(/v1/nodes/([^/]+)/reservations)", wrap("reservations", true, [this](const auto& q, auto& r) {
          std::string node = q.matches[1];
          std::lock_guard lock(mu);
          auto rs = sched.reservations(node);
          if (!rs.ok()) return reply_error(r, http_status(rs.error()), rs.error().message());
          reply(r, 200, reservations_json(node, *rs));
        }));
  s.Post(R"(/v1/nodes/([^/]+)/allocations)", wrap("allocations", true, [this](const auto& q, auto& r) {
           json body;
           if (!body_json(q, r, body)) return;
           auto chips_or = parse_allocation(body);
           if (!chips_or.ok()) return reply_error(r, 400, chips_or.error().message());
           std::string node = q.matches[1];
           std::lock_guard lock(mu);
           auto g = sched.take_allocation(node, *chips_or, std::chrono::system_clock::now());
           if (!g.ok()) return reply_error(r, http_status(g.error()), g.error().message());
           persist_or_log();
           spdlog::info("{}/{} got its chips on {}", g->ns, g->pod, node);
           reply(r, 200, grant_json(*g));
         }));
  s.Post(R"(/v1/nodes/([^/]+)/allocations/return)", wrap("allocations", true, [this](const auto& q, auto& r) {
           json body;
           if (!body_json(q, r, body)) return;
           auto chips_or = parse_allocation(body);
           if (!chips_or.ok()) return reply_error(r, 400, chips_or.error().message());
           std::string node = q.matches[1];
           std::lock_guard lock(mu);
           auto st = sched.return_allocation(node, *chips_or, std::chrono::system_clock::now());
           if (!st.ok()) return reply_error(r, http_status(st.error()), st.error().message());
           persist_or_log();
           spdlog::info("chips {} on {} are waiting for their pod again", body["chips"].dump(), node);
           reply(r, 200, json{{"returned", *chips_or}});
         }));
  s.Delete(R"(/v1/pods/([^/]+)/([^/]+))", wrap("release", true, [this](const auto& q, auto& r) {
             std::string ns = q.matches[1];
             std::string name = q.matches[2];
             std::lock_guard lock(mu);
             auto st = sched.release(ns, name, std::chrono::system_clock::now());
             if (!st.ok()) return reply_error(r, http_status(st.error()), st.error().message());
             persist_or_log();
             spdlog::info("released {}/{}", ns, name);
             reply(r, 200, json{{"released", ns + "/" + name}});
           }));

  s.Get("/v1/cluster", wrap("cluster", false, [this](const auto&, auto& r) {
          ordered_json v;
          {
            std::lock_guard lock(mu);
            v = sched.cluster_view();
          }
          reply(r, 200, v);
        }));
  s.Get(R"(/v1/jobs/([^/]+)/([^/]+)/(placement|ranktable|env))",
        wrap("jobs", false, [this](const auto& q, auto& r) {
          std::string ns = q.matches[1];
          std::string job = q.matches[2];
          std::string what = q.matches[3];
          std::lock_guard lock(mu);
          if (what == "env") {
            std::string pod = q.get_param_value("pod");
            int index = -1;
            try {
              std::size_t used = 0;
              index = std::stoi(pod, &used);
              if (used != pod.size()) index = -1;
            } catch (const std::exception&) {
              index = -1;
            }
            if (index < 0) return reply_error(r, 400, "give ?pod=N, the pod's index in its job");
            auto env = sched.env_of(ns, job, index);
            if (!env.ok()) return reply_error(r, http_status(env.error()), env.error().message());
            return reply(r, 200, json(*env));
          }
          auto v = what == "placement" ? sched.placement_of(ns, job) : sched.ranktable_of(ns, job);
          if (!v.ok()) return reply_error(r, http_status(v.error()), v.error().message());
          reply(r, 200, *v);
        }));
  s.Get("/healthz",
        wrap("healthz", false, [](const auto&, auto& r) { r.set_content("ok\n", "text/plain"); }));
  s.Get("/metrics", wrap("metrics", false, [this](const auto&, auto& r) {
          r.set_content(metrics_text(), "text/plain; version=0.0.4");
        }));
  s.Get("/", wrap("dashboard", false,
                  [](const auto&, auto& r) { r.set_content(dashboard_html(), "text/html; charset=utf-8"); }));

  // Errors the HTTP library makes itself (unknown path, body over the limit) get the same JSON shape; a
  // body over the limit is a bad request like any other.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 413) {
          reply_error(res, 400, "request body is larger than the limit (--max-body)");
        } else if (res.status == 404) {
          reply_error(res, 404, "no such endpoint");
        } else {
          reply_error(res, res.status, "HTTP " + std::to_string(res.status));
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_payload_max_length(opts.max_body);
  s.set_keep_alive_max_count(10000);
  s.set_tcp_nodelay(true);  // a response is written in two parts: no Nagle wait for the client's delayed ACK
  s.set_read_timeout(std::chrono::seconds(30));
}

void Server::Impl::expire_loop() {
  auto every =
      std::clamp(opts.reservation_ttl / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  std::unique_lock stop_lock(stop_mu);
  while (!stopping) {
    stop_cv.wait_for(stop_lock, every);
    if (stopping) break;
    stop_lock.unlock();
    {
      std::lock_guard lock(mu);
      if (int n = sched.expire(std::chrono::system_clock::now()); n > 0) {
        spdlog::info("{} reservation(s) expired unbound", n);
      }
      persist_or_log();
    }
    stop_lock.lock();
  }
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  stop();
  if (impl_->expirer.joinable()) impl_->expirer.join();
}

Result<std::unique_ptr<Server>> Server::create(const ServeOptions& o, topology::Cluster cluster,
                                               std::unique_ptr<Binder> binder) {
  ASCEND_ASSIGN(auto listen, parse_listen(o.listen), "");
  if (o.tls_cert.empty() != o.tls_key.empty())
    return Error::invalid("give both --tls-cert and --tls-key, or neither");
  auto impl = std::make_unique<Impl>(o, std::move(cluster), std::move(binder));
  if (!o.token_file.empty()) {
    ASCEND_ASSIGN(impl->token, read_token(o.token_file), "--token-file");
  }
  if (!o.state.empty()) {
    auto text = read_file(o.state);
    if (text.ok()) {
      json saved = json::parse(*text, nullptr, false);
      if (saved.is_discarded()) {
        return Error::invalid("state file " + o.state + " is not valid JSON; move it away to start empty");
      }
      if (auto s = impl->sched.load(saved); !s.ok()) {
        return Error::invalid("state file " + o.state + ": " + s.error().message() +
                              "; fix or move it away to start empty");
      }
      impl->saved = impl->sched.changes();
    } else if (text.error().code() != ENOENT) {
      return text.error().context("state file");
    }
  }
  if (!o.tls_cert.empty()) {
    for (const auto& f : {o.tls_cert, o.tls_key}) {
      if (auto t = read_file(f, 1U << 20); !t.ok()) return t.error().context("TLS");
    }
    auto tls = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
    if (!tls->is_valid())
      return Error::invalid("TLS: " + o.tls_cert + " / " + o.tls_key +
                            " is not a usable certificate and key");
    impl->http = std::move(tls);
  } else {
    impl->http = std::make_unique<httplib::Server>();
  }
  if (o.threads > 0) {
    int n = o.threads;
    impl->http->new_task_queue = [n] { return new httplib::ThreadPool(static_cast<std::size_t>(n)); };
  }
  impl->routes();
  auto [host, port] = listen;
  if (port == 0) {
    impl->port = impl->http->bind_to_any_port(host.c_str());
  } else {
    impl->port = impl->http->bind_to_port(host.c_str(), port) ? port : -1;
  }
  if (impl->port <= 0)
    return Error(EADDRINUSE, "cannot listen on " + o.listen + " (in use, or not an address of this host)");
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const {
  return impl_->port;
}

Status Server::run() {
  impl_->serving = true;
  {
    std::lock_guard lock(impl_->stop_mu);
    if (impl_->stopping) {
      impl_->serving = false;
      return ok_status();
    }
  }
  impl_->expirer = std::thread([this] { impl_->expire_loop(); });
  bool ok = impl_->http->listen_after_bind();
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  impl_->expirer.join();
  impl_->serving = false;
  std::lock_guard lock(impl_->mu);
  ASCEND_CHECK(impl_->persist_locked(), "");
  if (!ok) return Error(EIO, "the HTTP server stopped with an error");
  return ok_status();
}

void Server::stop() {
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  // httplib's stop() does nothing before the listening loop runs: wait for it while run() is starting.
  while (impl_->serving && !impl_->http->is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http->stop();
}

}  // namespace ascend::scheduler
