// ascend-scheduler serve as a cache of the API server (kube_sync.h), against the API server stand-in
// (tests/support/fake_apiserver.h) on loopback. Each row has its floor, measured in the same run:
//
//   pod deleted -> chips free    200 pods bound by annotation over 64 Atlas 800T A2 nodes (1 or 2 chips each,
//                                Running); each is deleted in the stand-in (FakeApiServer::remove) and
//                                GET /metrics (chips in use, counted under the lock: the cheap check) is
//                                polled every 1 ms until its chips are out of use; /v1/cluster is then
//                                checked to show them free, outside the timing. p50/p99/max. Floor: the same
//                                deletions seen by a bare kube::Informer on /api/v1/pods (remove() to its
//                                handler), with the scheduler stopped.
//   restart -> /readyz           the stand-in holds 5 000 Nodes and 20 000 pods bound with 2 chips each
//                                (4 per node); time from Server::create to /readyz 200 (polled every 5 ms),
//                                median of 3; /v1/cluster is then checked to hold 40 000 chips (outside the
//                                timing). Floor: LIST /api/v1/pods plus LIST /api/v1/nodes through
//                                kube::Client::get (parse included), median of 3. Peak RSS of the process
//                                (stand-in included) during each, from VmHWM reset through
//                                /proc/self/clear_refs.
//
// --quick: 40 deletions, 500 nodes and 2 000 pods, one restart (a smoke run).
#include <httplib.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ascend/common/kube_client.h"
#include "ascend/scheduler/kube_records.h"
#include "ascend/scheduler/server.h"
#include "ascend/topology/cluster.h"
#include "fake_apiserver.h"
#include "latency.h"
#include "served_scheduler.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using ascend::bench::ms_since;
using ascend::bench::Stats;
using ascend::bench::stats;
using ascend::testing::FakeApiServer;
using namespace std::chrono_literals;

constexpr int kChipsPerNode = 8;  // Atlas 800T A2

struct Sizes {
  int delete_nodes = 64, deletions = 200;
  int restart_nodes = 5000, pods_per_node = 4, restarts = 3;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "kube_cache_bench: %s\n", what.c_str());
  std::exit(1);
}

double median(std::vector<double> v) {
  return stats(std::move(v)).p50;
}

// VmRSS / VmHWM of /proc/self/status, in MiB.
long status_mib(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string key;
  long kib = 0;
  while (f >> key) {
    if (key == field + ":") {
      f >> kib;
      break;
    }
    f.ignore(1 << 16, '\n');
  }
  return kib / 1024;
}
long rss_mib() {
  return status_mib("VmRSS");
}
long peak_rss_mib() {
  return status_mib("VmHWM");
}
// The peak (VmHWM) starts again from the current RSS (proc(5), clear_refs "5").
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

// Atlas 800T A2 nodes, 32 to a leaf, 16 leaves to a spine.
ascend::topology::Cluster cluster_of(int nodes) {
  auto specs = ascend::topology::generate_nodes("atlas800t-a2", nodes, 32, 16, "node-");
  auto c = ascend::topology::make_cluster("bench", {}, specs, ascend::topology::builtin_profiles());
  if (!c.ok()) die(c.error().message());
  return std::move(*c);
}

// ---- The API server's objects ---------------------------------------------------------------------------

struct PodPlan {
  std::string name, node;
  std::vector<int> chips;  // physical ids on `node`
};

std::string pod_path(const std::string& name) {
  return "/api/v1/namespaces/default/pods/" + name;
}

std::string chips_text(const std::vector<int>& chips) {
  std::string s;
  for (int c : chips) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

// A pod bound by another replica (or before a restart): its node, our annotation, Running.
json bound_pod(const PodPlan& p) {
  json limits = {{"huawei.com/Ascend910", std::to_string(p.chips.size())}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", p.name},
            {"namespace", "default"},
            {"annotations", {{ascend::scheduler::kChipsAnnotation, chips_text(p.chips)}}}}},
          {"spec",
           {{"nodeName", p.node},
            {"containers", json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}},
          {"status", {{"phase", "Running"}}}};
}

void put_nodes(FakeApiServer& api, const ascend::topology::Cluster& c) {
  for (const auto& n : c.nodes) {
    api.create("/api/v1/nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", n.name}}}});
  }
}

void put_pods(FakeApiServer& api, const std::vector<PodPlan>& plans) {
  for (const auto& p : plans) api.create("/api/v1/namespaces/default/pods", bound_pod(p));
}

std::string pod_name(const std::string& prefix, int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%05d", i);
  return prefix + buf;
}

// `pods` pods of 1 or 2 chips (alternately), dealt round-robin over the nodes, each node filled from chip 0.
std::vector<PodPlan> spread(const ascend::topology::Cluster& c, int pods, const std::string& prefix) {
  std::vector<int> next(c.nodes.size(), 0);
  std::vector<PodPlan> out;
  for (int i = 0; i < pods; ++i) {
    std::size_t n = static_cast<std::size_t>(i) % c.nodes.size();
    int k = 1 + i % 2;
    if (next[n] + k > kChipsPerNode) die("too many pods for " + std::to_string(c.nodes.size()) + " nodes");
    PodPlan p{pod_name(prefix, i), c.nodes[n].name, {}};
    for (int j = 0; j < k; ++j) p.chips.push_back(next[n]++);
    out.push_back(std::move(p));
  }
  return out;
}

// `per_node` pods of 2 chips on every node: chips 0-1, 2-3, ...
std::vector<PodPlan> packed(const ascend::topology::Cluster& c, int per_node) {
  std::vector<PodPlan> out;
  for (const auto& n : c.nodes) {
    for (int j = 0; j < per_node; ++j) {
      out.push_back({pod_name("pod-", static_cast<int>(out.size())), n.name, {2 * j, 2 * j + 1}});
    }
  }
  return out;
}

// ---- The scheduler ----------------------------------------------------------------------------------------

class Running {
 public:
  Running(ascend::topology::Cluster c, const std::string& api_url) {
    auto s = ascend::testing::ServedScheduler::start(std::move(c), api_url);
    if (!s.ok()) die("Server::create: " + s.error().message());
    served_ = std::move(*s);
    http_ = std::make_unique<httplib::Client>("127.0.0.1", served_->port());
    http_->set_keep_alive(true);
    http_->set_tcp_nodelay(true);
    http_->set_read_timeout(60, 0);
  }
  ~Running() {
    http_.reset();  // first: the server's stop() waits for an idle keep-alive connection to time out (5 s)
    served_.reset();
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

  bool ready() {
    auto r = http_->Get("/readyz");
    return r && r->status == 200;
  }
  json view() {
    auto r = http_->Get("/v1/cluster");
    if (!r || r->status != 200) die("GET /v1/cluster failed");
    return json::parse(r->body);
  }
  // The cheap check: the chips in use, from /metrics (counted under the scheduler's lock, no view built).
  long used_chips() {
    auto r = http_->Get("/metrics");
    if (!r || r->status != 200) die("GET /metrics failed");
    const std::string key = "ascend_scheduler_chips{state=\"used\"} ";
    auto at = r->body.find(key);
    if (at == std::string::npos) die("/metrics has no " + key);
    return std::strtol(r->body.c_str() + at + key.size(), nullptr, 10);
  }
  double request_ms(const char* path) {
    std::vector<double> v;
    for (int i = 0; i < 20; ++i) {
      auto t0 = Clock::now();
      auto r = http_->Get(path);
      if (!r || r->status != 200) die(std::string("GET ") + path + " failed");
      v.push_back(ms_since(t0));
    }
    return median(v);
  }

 private:
  std::unique_ptr<ascend::testing::ServedScheduler> served_;
  std::unique_ptr<httplib::Client> http_;
};

// Chips some pod holds in the view.
std::size_t held_chips(const json& view) {
  std::size_t n = 0;
  for (const auto& node : view.at("nodes")) {
    for (const auto& c : node.at("chips")) n += c.contains("pod") ? 1 : 0;
  }
  return n;
}

bool chips_free(const json& view, const PodPlan& p) {
  for (const auto& node : view.at("nodes")) {
    if (node.at("name") != p.node) continue;
    for (const auto& c : node.at("chips")) {
      int phy = c.at("phy").get<int>();
      bool mine = std::find(p.chips.begin(), p.chips.end(), phy) != p.chips.end();
      if (mine && c.at("state") != "free") return false;
    }
    return true;
  }
  die("node " + p.node + " is not in /v1/cluster");
}

void wait_until(const std::function<bool()>& f, std::chrono::milliseconds every, std::chrono::seconds limit,
                const std::string& what) {
  auto until = Clock::now() + limit;
  while (!f()) {
    if (Clock::now() > until) die("timed out waiting for " + what);
    std::this_thread::sleep_for(every);
  }
}

// ---- 1. pod deleted -> chips free -------------------------------------------------------------------------

// Each pod deleted in turn; the latency ends when /metrics counts its chips out of use (nothing else
// changes meanwhile), then /v1/cluster is checked to show them free (outside the timing).
struct PollCost {
  double view_ms = 0, metrics_ms = 0;
};
std::vector<double> deletions_through_scheduler(FakeApiServer& api, const ascend::topology::Cluster& c,
                                                const std::vector<PodPlan>& plans, PollCost& cost) {
  Running srv(c, api.url());
  long used = 0;
  for (const auto& p : plans) used += static_cast<long>(p.chips.size());
  wait_until([&] { return srv.ready() && held_chips(srv.view()) == static_cast<std::size_t>(used); }, 20ms,
             60s, "the scheduler to hold the pods' chips");
  if (srv.used_chips() != used) die("/metrics does not count the adopted pods' chips as used");
  cost = {srv.request_ms("/v1/cluster"), srv.request_ms("/metrics")};
  std::vector<double> out;
  for (const auto& p : plans) {
    used -= static_cast<long>(p.chips.size());
    auto t0 = Clock::now();
    if (!api.remove(pod_path(p.name))) die("pod " + p.name + " is not in the stand-in");
    wait_until([&] { return srv.used_chips() == used; }, 1ms, 10s, "the chips of " + p.name);
    out.push_back(ms_since(t0));
    if (!chips_free(srv.view(), p)) die("/v1/cluster does not show the chips of " + p.name + " free");
  }
  return out;
}

// The floor: the same deletions as a bare informer on /api/v1/pods sees them.
std::vector<double> deletions_through_informer(FakeApiServer& api, const std::vector<PodPlan>& plans) {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Clock::time_point> seen;
  ascend::kube::Config cfg;
  cfg.server = api.url();
  ascend::kube::InformerOptions o;
  o.path = "/api/v1/pods";
  o.name = "pods";
  ascend::kube::Informer inf(std::make_shared<ascend::kube::Client>(cfg), o,
                             [&](ascend::kube::EventType t, const json& obj) {
                               if (t != ascend::kube::EventType::kDeleted) return;
                               auto now = Clock::now();
                               std::lock_guard l(mu);
                               seen[ascend::kube::key_of(obj)] = now;
                               cv.notify_all();
                             });
  inf.start();
  if (!inf.wait_synced(60s)) die("the bare informer did not list /api/v1/pods");
  std::vector<double> out;
  for (const auto& p : plans) {
    const std::string key = "default/" + p.name;
    auto t0 = Clock::now();
    if (!api.remove(pod_path(p.name))) die("pod " + p.name + " is not in the stand-in");
    std::unique_lock l(mu);
    if (!cv.wait_for(l, 10s, [&] { return seen.count(key) != 0; })) die("no DELETED event for " + key);
    out.push_back(std::chrono::duration<double, std::milli>(seen[key] - t0).count());
  }
  inf.stop();
  return out;
}

void print_latency(const char* label, const Stats& s) {
  std::printf("  %-44s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", label, s.p50, s.p99, s.max);
}

void pod_deleted_to_chips_free(const Sizes& z) {
  auto c = cluster_of(z.delete_nodes);
  FakeApiServer api;
  put_nodes(api, c);
  auto first = spread(c, z.deletions, "held-");
  put_pods(api, first);
  PollCost cost;
  Stats ours = stats(deletions_through_scheduler(api, c, first, cost));
  auto second = spread(c, z.deletions, "bare-");
  put_pods(api, second);
  Stats floor = stats(deletions_through_informer(api, second));
  std::printf(
      "pod deleted -> chips free in /v1/cluster (%d deletions, %d nodes; /metrics polled every 1 ms, one GET "
      "%.2f ms; one GET /v1/cluster %.2f ms):\n",
      z.deletions, z.delete_nodes, cost.metrics_ms, cost.view_ms);
  print_latency("scheduler: remove() -> chips counted free", ours);
  print_latency("floor: remove() -> bare informer's DELETED", floor);
  std::printf("  %-44s p50 %7.1fx      p99 %7.1fx      max %7.1fx\n", "ratio", ours.p50 / floor.p50,
              ours.p99 / floor.p99, ours.max / floor.max);
}

// ---- 2. restart -> /readyz --------------------------------------------------------------------------------

// Peak RSS (the whole process, the stand-in included) while a step ran, and RSS after it.
struct Memory {
  long peak = 0, after = 0;
};

double restart_once(const ascend::topology::Cluster& c, const std::string& api_url, std::size_t want_chips,
                    bool check, Memory& mem) {
  auto copy = c;  // outside the timing
  reset_peak_rss();
  auto t0 = Clock::now();
  Running srv(std::move(copy), api_url);
  double create_ms = ms_since(t0);
  wait_until([&] { return srv.ready(); }, 5ms, 120s, "/readyz");
  double ready_ms = ms_since(t0);
  long peak = peak_rss_mib();
  malloc_trim(0);  // what the cache keeps, without the heap glibc has not given back
  mem = {peak, rss_mib()};
  std::printf(
      "    restart: Server::create %.0f ms, /readyz 200 at %.0f ms; peak RSS %ld MiB, RSS at ready %ld MiB "
      "(after malloc_trim)\n",
      create_ms, ready_ms, mem.peak, mem.after);
  if (check) {
    std::size_t held = held_chips(srv.view());
    if (held != want_chips) {
      die("/v1/cluster holds " + std::to_string(held) + " chips after /readyz, expected " +
          std::to_string(want_chips));
    }
  }
  return ready_ms;
}

double list_floor_once(const std::string& api_url, std::size_t want_pods, std::size_t want_nodes,
                       Memory& mem) {
  ascend::kube::Config cfg;
  cfg.server = api_url;
  ascend::kube::Client client(cfg);
  reset_peak_rss();
  auto t0 = Clock::now();
  auto pods = client.get("/api/v1/pods");
  auto nodes = client.get("/api/v1/nodes");
  double ms = ms_since(t0);
  mem = {peak_rss_mib(), rss_mib()};
  if (!pods.ok() || !nodes.ok()) die("LIST: " + (pods.ok() ? nodes.error() : pods.error()).message());
  if ((*pods)["items"].size() != want_pods || (*nodes)["items"].size() != want_nodes) {
    die("LIST answered " + std::to_string((*pods)["items"].size()) + " pods and " +
        std::to_string((*nodes)["items"].size()) + " nodes");
  }
  return ms;
}

void restart_to_ready(const Sizes& z) {
  auto c = cluster_of(z.restart_nodes);
  auto plans = packed(c, z.pods_per_node);
  FakeApiServer api;
  auto t0 = Clock::now();
  put_nodes(api, c);
  put_pods(api, plans);
  double populate_ms = ms_since(t0);
  long rss_before = rss_mib();
  std::printf(
      "restart: %d nodes and %zu pods -> /readyz (stand-in populated through FakeApiServer::create in "
      "%.0f ms; RSS %ld MiB before the scheduler):\n",
      z.restart_nodes, plans.size(), populate_ms, rss_before);
  std::vector<double> ours, floor;
  std::vector<double> ours_peak, floor_peak, kept;
  for (int i = 0; i < z.restarts; ++i) {
    Memory m;
    ours.push_back(restart_once(c, api.url(), plans.size() * 2, i == 0, m));
    malloc_trim(0);  // each step starts from the heap the stand-in needs, not from the last one's peak
    ours_peak.push_back(static_cast<double>(m.peak));
    kept.push_back(static_cast<double>(m.after));
    floor.push_back(list_floor_once(api.url(), plans.size(), c.nodes.size(), m));
    malloc_trim(0);
    floor_peak.push_back(static_cast<double>(m.peak));
  }
  double o = median(ours), f = median(floor);
  std::printf("  %-44s %8.0f ms (median of %d)\n", "Server::create -> /readyz 200", o, z.restarts);
  std::printf("  %-44s %8.0f ms (median of %d)\n", "floor: LIST pods + LIST nodes, parsed", f, z.restarts);
  std::printf("  %-44s %8.1fx\n", "ratio", o / f);
  std::printf("  %-44s %8.0f MiB (median; process: stand-in included, %ld MiB before)\n", "peak RSS, restart",
              median(ours_peak), rss_before);
  std::printf("  %-44s %8.0f MiB (median)\n", "peak RSS, floor LISTs", median(floor_peak));
  std::printf("  %-44s %8.0f MiB (median, after malloc_trim; the stand-in's %ld MiB included)\n",
              "RSS with the scheduler ready", median(kept), rss_before);
}

}  // namespace

int main(int argc, char** argv) {
  Sizes z;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      z = {64, 40, 500, 4, 1};
    } else {
      std::printf(
          "usage: kube_cache_bench [--quick]\n  Measures ascend-scheduler serve as a cache of the API server "
          "(stand-in): a deleted pod's chips freed, and a restart's time to /readyz. --quick: fewer "
          "objects.\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they are measured
  spdlog::set_level(spdlog::level::warn);
  try {
    pod_deleted_to_chips_free(z);
    restart_to_ready(z);
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
