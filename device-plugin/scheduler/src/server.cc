#include "ascend/scheduler/server.h"

#include <httplib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ascend/common/fs.h"
#include "ascend/common/guarded.h"
#include "ascend/common/json_depth.h"
#include "ascend/common/listen_address.h"
#include "ascend/common/loop_clock.h"
#include "ascend/scheduler/extender.h"
#include "ascend/scheduler/kube_records.h"
#include "ascend/scheduler/kube_sync.h"
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

// An answer already written as JSON text: moved into the response, as set_content would copy it (a /filter
// answer of 5 000 nodes is a few hundred KB).
void reply_text(httplib::Response& res, int status, std::string body) {
  res.status = status;
  body += '\n';
  res.body = std::move(body);
  auto type = res.headers.equal_range("Content-Type");
  res.headers.erase(type.first, type.second);
  res.set_header("Content-Type", "application/json");
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
  return addr == "::1" || addr.starts_with("127.") || addr.starts_with("::ffff:127.");
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

// A listen flag's HOST:PORT (listen_address.h), or an error naming the flag.
Result<ListenAddress> parse_listen(const std::string& flag, const std::string& s) {
  auto where = parse_listen_address(s);
  if (!where) return Error::invalid(flag + " " + s + ": " + where.error().message());
  return where;
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
    // The names were checked as DNS-1123 names when the request was parsed; encoded all the same, so that no
    // name can ever add a path segment or a query to the API server's URL.
    std::string path = "/api/v1/namespaces/" + httplib::detail::encode_query_param(ns) + "/pods/" +
                       httplib::detail::encode_query_param(pod) + "/binding";
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

const char* const kVerbs[] = {"filter",      "prioritize", "bind",    "inventory", "reservations",
                              "allocations", "release",    "cluster", "jobs",      "dashboard",
                              "healthz",     "readyz",     "metrics"};

// Who may call a path, decided from the path alone before the body is read.
enum class Access {
  kOpen,      // /healthz, /readyz, /metrics: anyone (they carry no names)
  kExtender,  // kube-scheduler's verbs: the extender listener only
  kGuarded,   // everything else: the plugin endpoints, release, the views and the dashboard
};

Access access_of(const std::string& path) {
  if (path == "/healthz" || path == "/readyz" || path == "/metrics") return Access::kOpen;
  if (path == "/filter" || path == "/prioritize" || path == "/bind" || path == "/preempt")
    return Access::kExtender;
  return Access::kGuarded;
}

// The views and the dashboard: served on both listeners (on the extender's without a token, since whoever
// reaches it may already reserve chips).
bool is_view(const std::string& path) {
  return path == "/" || path == "/v1/cluster" || path.starts_with("/v1/jobs/");
}

bool is_host_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

// A refusal before the body is read: the connection is closed after it, so that the unread body is never
// taken for the next request.
void refuse(httplib::Response& res, int status, const std::string& why) {
  reply_error(res, status, why);
  res.set_header("Connection", "close");
}

// A name from a request path: the same limits as in a body (pod.h), or a 400 naming it.
bool path_name_ok(httplib::Response& res, const Status& s) {
  if (s.ok()) return true;
  reply_error(res, 400, s.error().message());
  return false;
}

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

struct Server::Impl final : SchedulerAccess {
  ServeOptions opts;
  std::unique_ptr<Binder> binder;
  // The last placement failure told to each pod (an Event only when the reason changes): bounded.
  std::mutex failures_mu;
  std::map<std::string, std::string> told_failure;
  std::string token;
  std::size_t node_count = 0;  // the cluster file's; a longer node list in a request is refused
  bool extender_tls = false;

  // Two listeners: `http` (--listen) for the device plugins, the views and the probes; `ext`
  // (--extender-listen) for kube-scheduler's verbs, loopback or TLS with a verified client certificate.
  std::unique_ptr<httplib::Server> http;
  std::unique_ptr<httplib::Server> ext;
  int port = 0;
  int ext_port = 0;

  std::mutex mu;  // guards sched: held for a transition and for taking a snapshot, never for building JSON
  Scheduler sched;

  // The state file is written outside `mu`, from a snapshot: writes are serialised by persist_mu, and one
  // older than the last written (by its change count) is dropped, so the file only moves forward.
  std::mutex persist_mu;
  std::atomic<std::uint64_t> written{0};

  // The time of every transition and of the expiry loop's waits: real unless a test passes its own.
  LoopClock& clock;
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::atomic<bool> serving{false};  // run() was called and has not returned
  std::atomic<bool> http_done{false};
  std::atomic<bool> ext_done{false};
  std::thread expirer;

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests = prometheus::BuildCounter()
                                                          .Name("ascend_scheduler_requests_total")
                                                          .Help("requests by verb and HTTP status class")
                                                          .Register(*registry);
  prometheus::Family<prometheus::Counter>& refusals =
      prometheus::BuildCounter()
          .Name("ascend_scheduler_refused_requests_total")
          .Help("requests refused before their body was read, by listener and reason")
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
  // Chip faults and recoveries (issue 23), from the API server's device ConfigMaps.
  prometheus::Family<prometheus::Counter>& faults =
      prometheus::BuildCounter()
          .Name("ascend_scheduler_chip_faults_total")
          .Help("new chip fault codes named by the nodes' device ConfigMaps, by handling level")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& recovery =
      prometheus::BuildCounter()
          .Name("ascend_scheduler_recovery_actions_total")
          .Help("what chip faults under running jobs led to: pods evicted, job restarts, jobs failed")
          .Register(*registry);
  prometheus::Histogram& recovery_seconds =
      prometheus::BuildHistogram()
          .Name("ascend_scheduler_fault_to_rebound_seconds")
          .Help("time from a chip fault under a job to every pod of the job bound again")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300});
  std::map<std::string, prometheus::Histogram*> latency_of;

  // With an API server: the scheduler is a cache of it (kube_sync.h) and bind writes the records there.
  // Declared last, so destroyed first: its threads reach `sched` and `mu` through with().
  std::unique_ptr<KubeSync> kube;

  Impl(ServeOptions o, topology::Cluster c, std::unique_ptr<Binder> b)
      : opts(std::move(o)),
        binder(std::move(b)),
        node_count(c.nodes.size()),
        sched(std::move(c), opts.reservation_ttl),
        clock(opts.clock != nullptr ? *opts.clock : real_loop_clock()) {
    static const prometheus::Histogram::BucketBoundaries kBuckets = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
    for (const char* v : kVerbs) latency_of[v] = &latency.Add({{"verb", v}}, kBuckets);
  }

  // Called with `lock` (on mu) held; releases it. Writes the state file when the scheduler changed since the
  // last write: the snapshot is taken under the lock, the JSON built and written outside it.
  Status persist(std::unique_lock<std::mutex>& lock) {
    if (opts.state.empty() || sched.changes() == written.load()) {
      lock.unlock();
      return ok_status();
    }
    Scheduler snap = sched.snapshot();
    lock.unlock();
    std::lock_guard p(persist_mu);
    if (snap.changes() <= written.load()) return ok_status();  // a newer snapshot is on disk already
    auto s = atomic_replace(opts.state, snap.save().dump() + "\n", 0600);
    if (!s.ok()) return s.error().context("state file");
    written = snap.changes();
    return ok_status();
  }

  void persist_or_log(std::unique_lock<std::mutex>& lock) {
    if (auto s = persist(lock); !s.ok()) spdlog::error("{}", s.error().message());
  }

  void with(const std::function<void(Scheduler&)>& f) override {
    std::unique_lock lock(mu);
    f(sched);
    persist_or_log(lock);
  }

  void sync_job(const std::string& ns, const std::string& job) {
    if (kube && !job.empty()) kube->sync_job(ns, job);
  }
  void tell_placed(const PodInfo& pod);
  void tell_refused(const PodInfo& pod, const std::string& why);

  Scheduler snapshot() {
    std::lock_guard lock(mu);
    return sched.snapshot();
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (token.empty()) {
      if (loopback(req.remote_addr)) return true;
      refusals.Add({{"listener", "plugin"}, {"reason", "not-loopback"}}).Increment();
      refuse(res, 403, "this endpoint accepts loopback peers only (start the scheduler with --token-file)");
      return false;
    }
    std::string auth = req.get_header_value("Authorization");
    if (!auth.starts_with("Bearer ") || !same(std::string_view(auth).substr(7), token)) {
      refusals.Add({{"listener", "plugin"}, {"reason", "no-token"}}).Increment();
      refuse(res, 401, "a valid bearer token is required");
      return false;
    }
    return true;
  }

  // The plugin listener's access check, before the body is read (pre-routing, and for Expect: 100-continue
  // before the client is asked to send it). True: go on to the handler.
  bool plugin_access(const httplib::Request& req, httplib::Response& res) {
    switch (access_of(req.path)) {
      case Access::kOpen:
        return true;
      case Access::kExtender:
        refusals.Add({{"listener", "plugin"}, {"reason", "extender-verb"}}).Increment();
        refuse(res, 404,
               "the extender verbs are served on the extender listener only (--extender-listen), not here");
        return false;
      case Access::kGuarded:
        return authorized(req, res);
    }
    return false;
  }

  // The extender listener's: a loopback peer, or over TLS a client certificate the handshake verified
  // against --extender-client-ca (checked again here); only the extender verbs, the views and the probes.
  bool extender_access(const httplib::Request& req, httplib::Response& res) {
    if (extender_tls) {
      const SSL* ssl = req.ssl;
      X509* peer = ssl != nullptr ? SSL_get_peer_certificate(ssl) : nullptr;
      bool verified = peer != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
      X509_free(peer);
      if (!verified) {
        refusals.Add({{"listener", "extender"}, {"reason", "no-client-certificate"}}).Increment();
        refuse(res, 403, "the extender verbs need a client certificate from --extender-client-ca");
        return false;
      }
    } else if (!loopback(req.remote_addr)) {
      refusals.Add({{"listener", "extender"}, {"reason", "not-loopback"}}).Increment();
      refuse(res, 403, "the extender listener serves loopback peers only");
      return false;
    }
    if (access_of(req.path) == Access::kGuarded && !is_view(req.path)) {
      refusals.Add({{"listener", "extender"}, {"reason", "plugin-endpoint"}}).Increment();
      refuse(res, 404, "the device-plugin endpoints are served on --listen, not on the extender listener");
      return false;
    }
    return true;
  }

  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Wraps a handler: metrics and a last-resort catch (one JSON line, never a crash). Access was checked
  // before routing.
  httplib::Server::Handler wrap(const char* verb, Handler h) {
    return [this, verb, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
      auto t0 = std::chrono::steady_clock::now();
      std::string why;
      if (!run_guarded(
              std::string("HTTP ") + verb, [&] { h(req, res); }, "answering 500", &why))
        reply_error(res, 500, "internal error: " + why);
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

  // The ExtenderArgs of a /filter or /prioritize: read straight from the text when it can be (wire.h), else
  // the long way, which gives the exact error; on failure answers 400 and returns nullopt.
  // (The fast way refuses nesting deeper than 64 itself: no scan of the text for the depth first.)
  std::optional<ExtenderArgs> extender_args(const httplib::Request& req, httplib::Response& res) const {
    if (auto fast = read_extender_args_fast(req.body, node_count)) return fast;
    json body;
    if (!body_json(req, res, body)) return std::nullopt;
    auto args = parse_extender_args(body, node_count);
    if (!args.ok()) {
      reply_error(res, 400, args.error().message());
      return std::nullopt;
    }
    return std::move(*args);
  }

  bool ready() const {
    return serving && http->is_running() && ext->is_running() && !http_done && !ext_done &&
           (!kube || kube->synced());
  }

  void routes();
  void common_routes(httplib::Server& s);
  void view_routes(httplib::Server& s);
  void plugin_routes(httplib::Server& s);
  void extender_routes(httplib::Server& s);
  void on_filter(const httplib::Request& req, httplib::Response& res);
  void on_prioritize(const httplib::Request& req, httplib::Response& res);
  void on_bind(const httplib::Request& req, httplib::Response& res);
  void on_job(const httplib::Request& req, httplib::Response& res);
  std::string metrics_text();
  void expire_loop();
  void expire_pass();
};

void Server::Impl::on_filter(const httplib::Request& req, httplib::Response& res) {
  auto args = extender_args(req, res);
  if (!args) return;
  if (kube && (!args->pod.resource.empty() || args->pod.job) &&
      !kube->pod_exists(args->pod.ns, args->pod.name, args->pod.uid)) {
    // A pod the API server does not have reserves nothing (whoever reaches the extender listener).
    spdlog::info("filter {}: the pod is not in the API server (deleted meanwhile?)", args->pod.key());
    FilterResult none;
    std::uint32_t why = none.unresolvable.reason("pod " + args->pod.key() + " is not in the API server");
    for (const auto& n : args->node_names) none.unresolvable.add(n, why);
    return reply_text(res, 200, filter_result_text(*args, none, NamesOfArgs{}));
  }
  // A job pod whose chips come through DRA ResourceClaims asks for what its claims ask (dra_claims.h).
  if (kube) kube->apply_claims(args->pod);
  FilterResult r;
  bool placed = false;
  bool job_moved = false;
  {
    std::unique_lock lock(mu);
    // The counters only (counts() walks every node).
    std::uint64_t placed0 = sched.placed_count(), refused0 = sched.refused_count();
    const std::string job = args->pod.job ? args->pod.job->name : "";
    std::uint64_t v0 = job.empty() ? 0 : sched.job_version(args->pod.ns, job);
    r = sched.filter(args->pod, args->node_names, clock.wall());
    placed = sched.placed_count() != placed0;
    job_moved = !job.empty() && sched.job_version(args->pod.ns, job) != v0;
    if (placed) {
      spdlog::info("placed job of pod {} ({} chips per pod)", args->pod.key(), args->pod.chips);
    } else if (sched.refused_count() != refused0 && !r.failed.empty()) {
      spdlog::info("refused pod {}: {}", args->pod.key(), r.failed.begin()->second);
    }
    persist_or_log(lock);
  }
  if (kube) {
    // The job's record goes to its ConfigMap before kube-scheduler hears the answer (it binds next).
    if (job_moved) sync_job(args->pod.ns, args->pod.job->name);
    if (placed) tell_placed(args->pod);
    if (r.passed.empty() && !args->node_names.empty()) {
      const auto& why = !r.unresolvable.empty() ? r.unresolvable.begin()->second : r.failed.begin()->second;
      if (!args->pod.resource.empty() || args->pod.job) tell_refused(args->pod, why);
    }
  }
  reply_text(res, 200, filter_result_text(*args, r, NamesOfArgs{}));
}

void Server::Impl::tell_placed(const PodInfo& pod) {
  std::optional<json> rec;
  double cost = 0;
  {
    std::lock_guard lock(mu);
    rec = sched.job_record(pod.ns, pod.job->name);
    if (auto v = sched.placement_of(pod.ns, pod.job->name); v.ok())
      cost = (*v)["cost"]["total"].get<double>();
  }
  if (!rec) return;
  std::set<std::string> nodes;
  for (const auto& sl : (*rec)["slots"]) nodes.insert(sl["node"].get<std::string>());
  std::string list;
  for (const auto& n : nodes) list += (list.empty() ? "" : ",") + n;
  kube->pod_event(
      pod.ns, pod.name, pod.uid, "Normal", "AscendPlaced",
      fmt::format("job {} ({} pods x {} chips, tp={} pp={} dp={}) placed on {} (cost {:.4g})", pod.job->name,
                  pod.job->pods, pod.chips, pod.job->tp, pod.job->pp, pod.job->dp, list, cost));
}

void Server::Impl::tell_refused(const PodInfo& pod, const std::string& why) {
  {
    std::lock_guard lock(failures_mu);
    auto it = told_failure.find(pod.key());
    if (it != told_failure.end() && it->second == why) return;
    if (told_failure.size() >= 4096) told_failure.clear();
    told_failure[pod.key()] = why;
  }
  kube->pod_event(pod.ns, pod.name, pod.uid, "Warning", "AscendPlacementFailed", why);
}

void Server::Impl::on_prioritize(const httplib::Request& req, httplib::Response& res) {
  auto args = extender_args(req, res);
  if (!args) return;
  if (kube) kube->apply_claims(args->pod);
  std::vector<int> scores;
  {
    std::lock_guard lock(mu);
    scores = sched.scores(args->pod, args->node_names);
  }
  reply_text(res, 200, priorities_text(args->node_names, scores));
}

void Server::Impl::on_bind(const httplib::Request& req, httplib::Response& res) {
  json body;
  if (!body_json(req, res, body)) return;
  auto b = parse_binding_args(body);
  if (!b.ok()) return reply_error(res, 400, b.error().message());
  // What the pod is: not in the API server (deleted meanwhile?), not ours (kube-scheduler sends every pod of
  // its profile: only bound), or a DRA job pod holding the chips kube-scheduler's allocator gave its claims
  // on this node (its PreBind wrote them before this bind; they replace the planned ones). One read of the
  // pod at most (the cache first).
  std::optional<std::vector<int>> claimed;
  if (kube) {
    auto c = kube->bind_pod(b->pod_namespace, b->pod_name, b->pod_uid, b->node);
    if (c.ok() && !c->found) {
      spdlog::warn("bind {}/{} to {}: the pod is not in the API server (deleted meanwhile?)",
                   b->pod_namespace, b->pod_name, b->node);
      return reply(
          res, 200,
          binding_result_json("pod " + b->pod_namespace + "/" + b->pod_name + " is not in the API server"));
    }
    if (!c.ok()) {
      spdlog::warn("bind {}/{} to {}: {}", b->pod_namespace, b->pod_name, b->node, c.error().message());
      return reply(res, 200, binding_result_json(c.error().message()));
    }
    if (!c->ours) {
      if (auto s = kube->bind(b->pod_namespace, b->pod_name, b->pod_uid, b->node, {}, -1); !s.ok()) {
        spdlog::warn("bind {}/{} to {}: {}", b->pod_namespace, b->pod_name, b->node, s.error().message());
        return reply(res, 200, binding_result_json(s.error().message()));
      }
      spdlog::debug("bound {}/{} to {} (no chips of ours)", b->pod_namespace, b->pod_name, b->node);
      return reply(res, 200, binding_result_json(""));
    }
    claimed = std::move(c->claimed);
  }
  std::optional<Scheduler::Held> held;
  std::string job_key;
  {
    std::unique_lock lock(mu);
    auto s = sched.bind(b->pod_namespace, b->pod_name, b->pod_uid, b->node, clock.wall(),
                        claimed ? &*claimed : nullptr);
    if (!s.ok()) return reply(res, 200, binding_result_json(s.error().message()));
    held = sched.held_by(b->pod_namespace, b->pod_name);
    job_key = sched.job_of(b->pod_namespace, b->pod_name);
    persist_or_log(lock);
  }
  if (kube && held) {
    // The annotations before the Binding: a pod that runs always says which chips it holds.
    auto s = kube->bind(b->pod_namespace, b->pod_name, b->pod_uid, b->node, held->chips, held->rank_start);
    if (!s.ok()) {
      std::unique_lock lock(mu);
      if (claimed) {
        // A DRA pod's slot is Allocated at bind (unbind reverts only Bound ones): its chips go back, and
        // kube-scheduler's retry filters the pod again (its slot is taken again, or placed around the
        // others).
        (void)sched.release(b->pod_namespace, b->pod_name, clock.wall(), b->pod_uid);
      } else {
        sched.unbind(b->pod_namespace, b->pod_name, clock.wall());
      }
      persist_or_log(lock);
      if (!job_key.empty()) sync_job(b->pod_namespace, job_key.substr(job_key.find('/') + 1));
      spdlog::warn("bind {}/{} to {}: {}", b->pod_namespace, b->pod_name, b->node, s.error().message());
      return reply(res, 200, binding_result_json(s.error().message()));
    }
    if (!job_key.empty()) sync_job(b->pod_namespace, job_key.substr(job_key.find('/') + 1));
  } else if (binder) {
    // Outside the lock: the API server may be slow. The chips stay held meanwhile; a failure gives them back.
    if (auto s = binder->bind(b->pod_namespace, b->pod_name, b->pod_uid, b->node); !s.ok()) {
      std::unique_lock lock(mu);
      sched.unbind(b->pod_namespace, b->pod_name, clock.wall());
      persist_or_log(lock);
      spdlog::warn("bind {}/{} to {}: {}", b->pod_namespace, b->pod_name, b->node, s.error().message());
      return reply(res, 200, binding_result_json("creating the Binding failed: " + s.error().message()));
    }
  }
  spdlog::info("bound {}/{} to {}", b->pod_namespace, b->pod_name, b->node);
  reply(res, 200, binding_result_json(""));
}

void Server::Impl::on_job(const httplib::Request& q, httplib::Response& r) {
  std::string ns = q.matches[1];
  std::string job = q.matches[2];
  std::string what = q.matches[3];
  if (!path_name_ok(r, check_dns1123_label(ns, "namespace")) ||
      !path_name_ok(r, check_dns1123_subdomain(job, "job", kJobNameMax)))
    return;
  auto snap = [&] {
    std::lock_guard lock(mu);
    return sched.job_snapshot(ns, job);
  }();
  if (!snap.ok()) return reply_error(r, http_status(snap.error()), snap.error().message());
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
    auto env = snap->env_of(ns, job, index);
    if (!env.ok()) return reply_error(r, http_status(env.error()), env.error().message());
    return reply(r, 200, json(*env));
  }
  auto v = what.empty()          ? snap->status_of(ns, job)
           : what == "placement" ? snap->placement_of(ns, job)
                                 : snap->ranktable_of(ns, job);
  if (!v.ok()) return reply_error(r, http_status(v.error()), v.error().message());
  reply(r, 200, *v);
}

std::string Server::Impl::metrics_text() {
  Scheduler::Counts c;
  std::vector<double> recovered;
  {
    std::lock_guard lock(mu);
    c = sched.counts();
    recovered = sched.take_recoveries();
  }
  chips.Add({{"state", "free"}}).Set(c.free);
  chips.Add({{"state", "used"}}).Set(c.used);
  chips.Add({{"state", "unhealthy"}}).Set(c.unhealthy);
  chips.Add({{"state", "isolated"}}).Set(c.isolated);
  jobs.Add({{"state", "held"}}).Set(c.jobs);
  jobs.Add({{"state", "pending"}}).Set(c.pending_jobs);
  jobs.Add({{"state", "running"}}).Set(c.running_jobs);
  jobs.Add({{"state", "recovering"}}).Set(c.recovering_jobs);
  jobs.Add({{"state", "failed"}}).Set(c.failed_jobs);
  for (double v : recovered) recovery_seconds.Observe(v);
  if (kube) {
    auto k = kube->stats();
    auto set = [](prometheus::Counter& x, std::uint64_t v) {
      x.Increment(static_cast<double>(v) - x.Value());
    };
    for (const auto& [level, n] : k.faults_by_level) set(faults.Add({{"level", level}}), n);
    set(recovery.Add({{"action", "evicted"}}), k.evictions);
    set(recovery.Add({{"action", "restarted"}}), k.restarts);
    set(recovery.Add({{"action", "failed"}}), k.jobs_failed);
  }
  auto& placed = outcomes.Add({{"outcome", "placed"}});
  placed.Increment(static_cast<double>(c.placed) - placed.Value());
  auto& refused = outcomes.Add({{"outcome", "refused"}});
  refused.Increment(static_cast<double>(c.refused) - refused.Value());
  return prometheus::TextSerializer().Serialize(registry->Collect());
}

// /healthz and /readyz on both listeners (they say nothing but "ok"/"ready").
void Server::Impl::common_routes(httplib::Server& s) {
  s.Get("/healthz", wrap("healthz", [](const auto&, auto& r) { r.set_content("ok\n", "text/plain"); }));
  s.Get("/readyz", wrap("readyz", [this](const auto&, auto& r) {
          if (ready()) return r.set_content("ready\n", "text/plain");
          r.status = 503;
          r.set_content("not ready\n", "text/plain");
        }));
}

void Server::Impl::view_routes(httplib::Server& s) {
  s.Get("/v1/cluster", wrap("cluster", [this](const auto&, auto& r) {
          // The snapshot under the lock, the JSON (every node and chip) outside it: a slow reader, or many,
          // never hold up a filter.
          Scheduler snap = snapshot();
          reply(r, 200, snap.cluster_view());
        }));
  s.Get(R"(/v1/jobs/([^/]+)/([^/]+)(?:/(placement|ranktable|env))?)",
        wrap("jobs", [this](const auto& q, auto& r) { on_job(q, r); }));
  s.Get("/", wrap("dashboard",
                  [](const auto&, auto& r) { r.set_content(dashboard_html(), "text/html; charset=utf-8"); }));
}

void Server::Impl::plugin_routes(httplib::Server& s) {
  s.Put(R"(/v1/nodes/([^/]+))", wrap("inventory", [this](const auto& q, auto& r) {
          std::string node = q.matches[1];
          if (!path_name_ok(r, check_dns1123_subdomain(node, "node"))) return;
          json body;
          if (!body_json(q, r, body)) return;
          auto inv = parse_inventory(body);
          if (!inv.ok()) return reply_error(r, 400, inv.error().message());
          std::unique_lock lock(mu);
          auto st = sched.put_inventory(node, *inv, clock.wall());
          if (!st.ok()) return reply_error(r, http_status(st.error()), st.error().message());
          persist_or_log(lock);
          reply(r, 200, json{{"node", node}, {"chips", inv->chips.size()}});
        }));
  s.Get(R"(/v1/nodes/([^/]+)/reservations)", wrap("reservations", [this](const auto& q, auto& r) {
          std::string node = q.matches[1];
          if (!path_name_ok(r, check_dns1123_subdomain(node, "node"))) return;
          std::lock_guard lock(mu);
          auto rs = sched.reservations(node);
          if (!rs.ok()) return reply_error(r, http_status(rs.error()), rs.error().message());
          reply(r, 200, reservations_json(node, *rs));
        }));
  s.Post(R"(/v1/nodes/([^/]+)/allocations)", wrap("allocations", [this](const auto& q, auto& r) {
           std::string node = q.matches[1];
           if (!path_name_ok(r, check_dns1123_subdomain(node, "node"))) return;
           json body;
           if (!body_json(q, r, body)) return;
           auto chips_or = parse_allocation(body);
           if (!chips_or.ok()) return reply_error(r, 400, chips_or.error().message());
           std::unique_lock lock(mu);
           auto g = sched.take_allocation(node, *chips_or, clock.wall());
           if (!g.ok()) return reply_error(r, http_status(g.error()), g.error().message());
           persist_or_log(lock);
           sync_job(g->ns, g->job);
           spdlog::info("{}/{} got its chips on {}", g->ns, g->pod, node);
           reply(r, 200, grant_json(*g));
         }));
  s.Post(R"(/v1/nodes/([^/]+)/allocations/return)", wrap("allocations", [this](const auto& q, auto& r) {
           std::string node = q.matches[1];
           if (!path_name_ok(r, check_dns1123_subdomain(node, "node"))) return;
           json body;
           if (!body_json(q, r, body)) return;
           auto chips_or = parse_allocation(body);
           if (!chips_or.ok()) return reply_error(r, 400, chips_or.error().message());
           std::unique_lock lock(mu);
           auto st = sched.return_allocation(node, *chips_or, clock.wall());
           if (!st.ok()) return reply_error(r, http_status(st.error()), st.error().message());
           persist_or_log(lock);
           spdlog::info("chips {} on {} are waiting for their pod again", body["chips"].dump(), node);
           reply(r, 200, json{{"returned", *chips_or}});
         }));
  s.Delete(R"(/v1/pods/([^/]+)/([^/]+))", wrap("release", [this](const auto& q, auto& r) {
             std::string ns = q.matches[1];
             std::string name = q.matches[2];
             if (!path_name_ok(r, check_dns1123_label(ns, "namespace")) ||
                 !path_name_ok(r, check_dns1123_subdomain(name, "pod")))
               return;
             std::unique_lock lock(mu);
             std::string job_key = sched.job_of(ns, name);
             auto st = sched.release(ns, name, clock.wall());
             if (!st.ok()) return reply_error(r, http_status(st.error()), st.error().message());
             persist_or_log(lock);
             if (!job_key.empty()) sync_job(ns, job_key.substr(job_key.find('/') + 1));
             spdlog::info("released {}/{}", ns, name);
             reply(r, 200, json{{"released", ns + "/" + name}});
           }));
  s.Get("/metrics", wrap("metrics", [this](const auto&, auto& r) {
          r.set_content(metrics_text(), "text/plain; version=0.0.4");
        }));
}

void Server::Impl::extender_routes(httplib::Server& s) {
  s.Post("/filter", wrap("filter", [this](const auto& q, auto& r) { on_filter(q, r); }));
  s.Post("/prioritize", wrap("prioritize", [this](const auto& q, auto& r) { on_prioritize(q, r); }));
  s.Post("/bind", wrap("bind", [this](const auto& q, auto& r) { on_bind(q, r); }));
}

void Server::Impl::routes() {
  plugin_routes(*http);
  view_routes(*http);
  common_routes(*http);
  extender_routes(*ext);
  view_routes(*ext);
  common_routes(*ext);

  // The access checks run before routing, so that nothing of a refused request's body is read; a client
  // that announces its body (Expect: 100-continue) is answered before it sends it.
  http->set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
    return plugin_access(q, r) ? httplib::Server::HandlerResponse::Unhandled
                               : httplib::Server::HandlerResponse::Handled;
  });
  http->set_expect_100_continue_handler([this](const httplib::Request& q, httplib::Response& r) {
    return plugin_access(q, r) ? 100 : r.status;
  });
  ext->set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
    return extender_access(q, r) ? httplib::Server::HandlerResponse::Unhandled
                                 : httplib::Server::HandlerResponse::Handled;
  });
  ext->set_expect_100_continue_handler([this](const httplib::Request& q, httplib::Response& r) {
    return extender_access(q, r) ? 100 : r.status;
  });

  for (httplib::Server* s : {http.get(), ext.get()}) {
    // Errors the HTTP library makes itself (unknown path, body over the limit) get the same JSON shape; a
    // body over the limit is a bad request like any other.
    s->set_error_handler(
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
    s->set_payload_max_length(opts.max_body);
    s->set_keep_alive_max_count(10000);
    s->set_tcp_nodelay(
        true);  // a response is written in two parts: no Nagle wait for the client's delayed ACK
    s->set_read_timeout(std::chrono::seconds(30));
  }
}

void Server::Impl::expire_pass() {
  if (opts.test_hooks.expiry_pass) opts.test_hooks.expiry_pass();
  std::vector<std::string> jobs_expired;
  {
    std::unique_lock lock(mu);
    if (int n = sched.expire(clock.wall(), &jobs_expired); n > 0) {
      spdlog::info("{} reservation(s) expired unbound", n);
    }
    persist_or_log(lock);
  }
  for (const auto& k : jobs_expired) sync_job(k.substr(0, k.find('/')), k.substr(k.find('/') + 1));
}

void Server::Impl::expire_loop() {
  std::string failed;  // the last exception's text (guarded.h)
  auto every =
      std::clamp(opts.reservation_ttl / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  std::unique_lock stop_lock(stop_mu);
  while (!stopping) {
    if (clock.wait_for(stop_lock, stop_cv, every, [this] { return stopping; })) break;
    stop_lock.unlock();
    // A pass that throws (a bug, out of memory) is logged; the next one runs on time.
    run_guarded(
        "reservation expiry", [this] { expire_pass(); }, "the next pass runs on time", &failed);
    stop_lock.lock();
  }
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  stop();
  if (impl_->expirer.joinable()) impl_->expirer.join();
}

namespace {

// Binds `s` to HOST:PORT (port 0: any free one; never shared with another listener: no SO_REUSEPORT); the
// port, or an error naming the flag.
Result<int> bind_listener(httplib::Server& s, const std::string& flag, const std::string& value,
                          const ListenAddress& where) {
  auto got = bind_http_listener(s, where);
  if (!got)
    return Error(EADDRINUSE,
                 "cannot listen on " + flag + " " + value + " (in use, or not an address of this host)");
  return got;
}

Result<std::unique_ptr<httplib::Server>> tls_server(const std::string& what, const std::string& cert,
                                                    const std::string& key, const std::string& client_ca) {
  for (const auto& f : {cert, key, client_ca}) {
    if (f.empty()) continue;
    if (auto t = read_file(f, 1U << 20); !t.ok()) return t.error().context(what);
  }
  // With a client CA the library verifies the peer in the handshake (SSL_VERIFY_PEER, and a client without
  // a certificate is refused): no HTTP request reaches us from anyone else.
  auto tls = std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str(),
                                                  client_ca.empty() ? nullptr : client_ca.c_str());
  if (!tls->is_valid())
    return Error::invalid(what + ": " + cert + " / " + key + (client_ca.empty() ? "" : " / " + client_ca) +
                          " is not a usable certificate, key" + (client_ca.empty() ? "" : " and CA"));
  std::unique_ptr<httplib::Server> s = std::move(tls);
  return s;
}

}  // namespace

Result<std::unique_ptr<Server>> Server::create(const ServeOptions& o, topology::Cluster cluster,
                                               std::unique_ptr<Binder> binder,
                                               std::shared_ptr<kube::Client> api) {
  ASCEND_ASSIGN(auto listen, parse_listen("--listen", o.listen), "");
  ASCEND_ASSIGN(auto ext_listen, parse_listen("--extender-listen", o.extender_listen), "");
  if (o.tls_cert.empty() != o.tls_key.empty())
    return Error::invalid("give both --tls-cert and --tls-key, or neither");
  bool ext_tls = !o.extender_tls_cert.empty() || !o.extender_tls_key.empty() || !o.extender_client_ca.empty();
  if (ext_tls && (o.extender_tls_cert.empty() || o.extender_tls_key.empty() || o.extender_client_ca.empty()))
    return Error::invalid(
        "give --extender-tls-cert, --extender-tls-key and --extender-client-ca together: TLS on the "
        "extender listener is for verifying kube-scheduler's client certificate");
  if (!ext_tls && !is_host_loopback(ext_listen.host)) {
    return Error::invalid("--extender-listen " + o.extender_listen +
                          ": the extender verbs reserve chips and create Bindings; serve them on a loopback "
                          "address, or give --extender-tls-cert, --extender-tls-key and --extender-client-ca "
                          "so that only a client with a certificate from that CA is served");
  }
  auto impl = std::make_unique<Impl>(o, std::move(cluster), std::move(binder));
  impl->extender_tls = ext_tls;
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
      impl->written = impl->sched.changes();
    } else if (text.error().code() != ENOENT) {
      return text.error().context("state file");
    }
  }
  if (!o.tls_cert.empty()) {
    ASCEND_ASSIGN(impl->http, tls_server("TLS", o.tls_cert, o.tls_key, ""), "");
  } else {
    impl->http = std::make_unique<httplib::Server>();
  }
  if (ext_tls) {
    ASCEND_ASSIGN(impl->ext,
                  tls_server("extender TLS", o.extender_tls_cert, o.extender_tls_key, o.extender_client_ca),
                  "");
  } else {
    impl->ext = std::make_unique<httplib::Server>();
  }
  if (o.threads > 0) {
    int n = o.threads;
    impl->http->new_task_queue = [n] { return new httplib::ThreadPool(static_cast<std::size_t>(n)); };
    impl->ext->new_task_queue = [n] { return new httplib::ThreadPool(static_cast<std::size_t>(n)); };
  }
  if (api) {
    KubeSyncOptions ko;
    ko.instance = o.instance;
    impl->kube = std::make_unique<KubeSync>(std::move(api), *impl, ko);
  }
  impl->routes();
  ASCEND_ASSIGN(impl->port, bind_listener(*impl->http, "--listen", o.listen, listen), "");
  ASCEND_ASSIGN(impl->ext_port, bind_listener(*impl->ext, "--extender-listen", o.extender_listen, ext_listen),
                "");
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const {
  return impl_->port;
}

int Server::extender_port() const {
  return impl_->ext_port;
}

namespace {

// httplib's stop() does nothing before the listening loop runs: wait for it while run() is starting (or
// until that loop ended by itself).
void stop_listener(httplib::Server& s, const std::atomic<bool>& serving, const std::atomic<bool>& done) {
  while (serving && !done && !s.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.stop();
}

}  // namespace

Status Server::run() {
  impl_->serving = true;
  {
    std::lock_guard lock(impl_->stop_mu);
    if (impl_->stopping) {
      impl_->serving = false;
      return ok_status();
    }
  }
  if (impl_->kube) impl_->kube->start();
  impl_->expirer = std::thread([this] { impl_->expire_loop(); });
  // One listener per thread; when either ends (stop(), or an error), the other is stopped too. A listener
  // that throws cannot carry on: it is logged and the server stops with an error (the daemon exits non-zero).
  bool ext_ok = false;
  bool ext_threw = false;
  std::thread ext_thread([this, &ext_ok, &ext_threw] {
    ext_threw = !run_guarded(
        "extender listener",
        [&] {
          if (impl_->opts.test_hooks.extender_listener) impl_->opts.test_hooks.extender_listener();
          ext_ok = impl_->ext->listen_after_bind();
        },
        "stopping the scheduler");
    impl_->ext_done = true;
    stop_listener(*impl_->http, impl_->serving, impl_->http_done);
  });
  bool ok = false;
  const bool http_threw = !run_guarded(
      "plugin listener", [&] { ok = impl_->http->listen_after_bind(); }, "stopping the scheduler");
  impl_->http_done = true;
  stop_listener(*impl_->ext, impl_->serving, impl_->ext_done);
  ext_thread.join();
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  impl_->expirer.join();
  if (impl_->kube) impl_->kube->stop();
  impl_->serving = false;
  std::unique_lock lock(impl_->mu);
  ASCEND_CHECK(impl_->persist(lock), "");
  if (http_threw || ext_threw)
    return Error(EIO, fmt::format("the {} listener's thread threw (logged above)",
                                  http_threw ? "plugin" : "extender"));
  if (!ok || !ext_ok) return Error(EIO, "the HTTP server stopped with an error");
  return ok_status();
}

void Server::stop() {
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  stop_listener(*impl_->http, impl_->serving, impl_->http_done);
  stop_listener(*impl_->ext, impl_->serving, impl_->ext_done);
}

}  // namespace ascend::scheduler
