// A chip fault under a running job to its replacement pod bound (issue 23), against the API server stand-in
// (tests/support/fake_apiserver.h) on loopback, with ascend-scheduler serve watching it:
//
//   fault -> replacement bound   64 Atlas 800T A2 nodes; job "ft", tp=8 x pp=4 x dp=2 (8 pods of 8 chips),
//                                recovery `pod`, placed and bound through /filter and /bind. Each of 50
//                                faults: a chip of one of its pods is written SeparateNPU into its node's
//                                device ConfigMap (t0); the bench plays the job's controller: it polls the
//                                pod (in-process, every 0.2 ms) until the eviction has deleted it, makes it
//                                again at once, and sends /filter and /bind as kube-scheduler would; t1 is
//                                /bind's answer. The chip is then healed (the ConfigMap all healthy again)
//                                before the next fault. p50/p99/max of t1 - t0, and of t0 -> pod gone (the
//                                scheduler's reaction) alone.
//   floor                        the Eviction and the Binding calls themselves: for a pod of the stand-in,
//                                kube::Client::evict, the pod made again, then kube::Client::bind; the time
//                                of the two calls (the re-creation not counted). p50/p99 over 50.
//
// --quick: 10 faults.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ascend/common/kube_client.h"
#include "ascend/common/main_guard.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/scheduler/kube_records.h"
#include "ascend/scheduler/server.h"
#include "ascend/topology/cluster.h"
#include "fake_apiserver.h"
#include "latency.h"
#include "served_scheduler.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using ascend::bench::Stats;
using ascend::bench::stats;
using ascend::testing::FakeApiServer;
using namespace std::chrono_literals;

constexpr int kNodes = 64;
constexpr int kPods = 8;
constexpr int kChips = 8;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "recovery_bench: %s\n", what.c_str());
  std::exit(1);
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

ascend::topology::Cluster cluster_of(int nodes) {
  auto specs = ascend::topology::generate_nodes("atlas800t-a2", nodes, 32, 16, "node-");
  auto c = ascend::topology::make_cluster("bench", {}, specs, ascend::topology::builtin_profiles());
  if (!c.ok()) die(c.error().message());
  return std::move(*c);
}

std::string pod_path(const std::string& name) {
  return "/api/v1/namespaces/default/pods/" + name;
}

json job_pod(int index) {
  json limits = {{"huawei.com/Ascend910", std::to_string(kChips)}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "ft-" + std::to_string(index)},
            {"namespace", "default"},
            {"annotations",
             {{"ascend.huawei.com/job", "ft"},
              {"ascend.huawei.com/job-pods", std::to_string(kPods)},
              {"ascend.huawei.com/parallel", "tp=8,pp=4,dp=2"},
              {"ascend.huawei.com/recovery", "pod"},
              {"ascend.huawei.com/max-restarts", "100"}}}}},
          {"spec", {{"containers", json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}}};
}

// The node's device ConfigMap: every chip healthy but `bad` (SeparateNPU, -1: none).
void put_devices(FakeApiServer& api, const std::string& node, int bad) {
  ascend::deviceinfo::NodeDevices d;
  d.node = node;
  d.resource = "huawei.com/Ascend910";
  for (int c = 0; c < kChips; ++c) (c == bad ? d.unhealthy : d.healthy).push_back(c);
  if (bad >= 0) d.faults.push_back({bad, {"80E18402"}, "SeparateNPU", false});
  const std::string dir = std::string("/api/v1/namespaces/") + ascend::deviceinfo::kNamespace + "/configmaps";
  const std::string path = dir + "/" + ascend::deviceinfo::configmap_name(node);
  json cm = ascend::deviceinfo::to_configmap(d);
  if (api.get(path).is_null()) {
    api.create(dir, cm);
  } else {
    api.update(path, cm);
  }
}

class Scheduler {
 public:
  Scheduler(ascend::topology::Cluster c, const std::string& api_url) {
    auto s = ascend::testing::ServedScheduler::start(std::move(c), api_url);
    if (!s.ok()) die(s.error().message());
    served_ = std::move(*s);
    views_ = std::make_unique<httplib::Client>("127.0.0.1", served_->port());
    extender_ = std::make_unique<httplib::Client>("127.0.0.1", served_->extender_port());
    extender_->set_keep_alive(true);
    extender_->set_tcp_nodelay(true);  // as kube-scheduler's Go client
    auto until = Clock::now() + 30s;
    while (Clock::now() < until) {
      auto r = views_->Get("/readyz");
      if (r && r->status == 200) return;
      std::this_thread::sleep_for(5ms);
    }
    die("the scheduler did not become ready");
  }
  ~Scheduler() { served_.reset(); }  // the server stops before its clients close
  json post(const std::string& path, const json& body) {
    auto r = extender_->Post(path.c_str(), body.dump(), "application/json");
    if (!r || r->status != 200) die(path + ": " + (r ? r->body : httplib::to_string(r.error())));
    return json::parse(r->body);
  }
  // kube-scheduler's part for a pod the API server has: /filter over every node, then /bind. `filtered`: when
  // /filter answered.
  std::string schedule(const json& pod, const std::vector<std::string>& nodes,
                       Clock::time_point* filtered = nullptr) {
    json f = post("/filter", {{"Pod", pod}, {"NodeNames", nodes}});
    if (filtered != nullptr) *filtered = Clock::now();
    if (f["NodeNames"].size() != 1)
      die("filter of " + pod["metadata"]["name"].get<std::string>() + ": " + f.dump());
    std::string node = f["NodeNames"][0];
    json b = post("/bind", {{"PodName", pod["metadata"]["name"]},
                            {"PodNamespace", "default"},
                            {"PodUID", pod["metadata"]["uid"]},
                            {"Node", node}});
    if (!b.value("Error", "").empty()) die("bind: " + b.dump());
    return node;
  }

 private:
  std::unique_ptr<ascend::testing::ServedScheduler> served_;
  std::unique_ptr<httplib::Client> views_, extender_;
};

struct Row {
  Stats total, reaction, create, filter, bind, floor;
};

Row run(int faults) {
  FakeApiServer api;
  auto cluster = cluster_of(kNodes);
  std::vector<std::string> nodes;
  for (const auto& n : cluster.nodes) {
    nodes.push_back(n.name);
    api.create("/api/v1/nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", n.name}}}});
    put_devices(api, n.name, -1);
  }
  Scheduler s(std::move(cluster), api.url());
  for (int i = 0; i < kPods; ++i) {
    json pod = api.create("/api/v1/namespaces/default/pods", job_pod(i));
    s.schedule(pod, nodes);
  }
  std::vector<double> total, reaction, create, filter, bind;
  for (int k = 0; k < faults; ++k) {
    const std::string name = "ft-" + std::to_string(k % kPods);
    json pod = api.get(pod_path(name));
    const std::string node = pod["spec"]["nodeName"];
    auto chips =
        ascend::scheduler::parse_chips(pod["metadata"]["annotations"][ascend::scheduler::kChipsAnnotation]);
    if (!chips.ok() || chips->empty()) die("pod " + name + " has no chips annotation");
    const int bad = (*chips)[static_cast<std::size_t>(k) % chips->size()];
    const auto t0 = Clock::now();
    put_devices(api, node, bad);
    while (!api.get(pod_path(name)).is_null()) {
      if (Clock::now() - t0 > 10s) die("pod " + name + " was not evicted within 10 s");
      std::this_thread::sleep_for(200us);
    }
    const auto gone = Clock::now();
    json again = api.create("/api/v1/namespaces/default/pods", job_pod(k % kPods));
    const auto made = Clock::now();
    Clock::time_point filtered;
    s.schedule(again, nodes, &filtered);
    const auto t1 = Clock::now();
    total.push_back(ms_between(t0, t1));
    reaction.push_back(ms_between(t0, gone));
    create.push_back(ms_between(gone, made));
    filter.push_back(ms_between(made, filtered));
    bind.push_back(ms_between(filtered, t1));
    put_devices(api, node, -1);  // healed (a replaced chip): offered again
    std::this_thread::sleep_for(20ms);
  }
  // The floor: the Eviction and the Binding calls themselves, through the same client library.
  ascend::kube::Config cfg;
  cfg.server = api.url();
  ascend::kube::Client client(cfg);
  std::vector<double> floor;
  for (int k = 0; k < faults; ++k) {
    json p = job_pod(100 + k);
    p["metadata"]["name"] = "floor-" + std::to_string(k);
    p["metadata"]["annotations"] = json::object();
    api.create("/api/v1/namespaces/default/pods", p);
    auto t0 = Clock::now();
    if (auto st = client.evict("default", p["metadata"]["name"]); !st.ok())
      die("evict: " + st.error().message());
    auto t1 = Clock::now();
    json made = api.create("/api/v1/namespaces/default/pods", p);
    auto t2 = Clock::now();
    if (auto st = client.bind("default", made["metadata"]["name"], made["metadata"]["uid"], "node-0");
        !st.ok())
      die("bind: " + st.error().message());
    auto t3 = Clock::now();
    floor.push_back(ms_between(t0, t1) + ms_between(t2, t3));
  }
  return {stats(total), stats(reaction), stats(create), stats(filter), stats(bind), stats(floor)};
}

}  // namespace

namespace {

int run_main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int faults = quick ? 10 : 50;
  Row r = run(faults);
  std::printf(
      "recovery_bench: %d faults, %d nodes, job tp=8 x pp=4 x dp=2 (%d pods of %d chips), recovery pod\n",
      faults, kNodes, kPods, kChips);
  std::printf("  fault -> replacement bound   p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", r.total.p50,
              r.total.p99, r.total.max);
  std::printf("  fault -> pod evicted         p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", r.reaction.p50,
              r.reaction.p99, r.reaction.max);
  std::printf("    the pod made again        p50 %7.2f ms  p99 %7.2f ms\n", r.create.p50, r.create.p99);
  std::printf("    /filter                   p50 %7.2f ms  p99 %7.2f ms\n", r.filter.p50, r.filter.p99);
  std::printf("    /bind                     p50 %7.2f ms  p99 %7.2f ms\n", r.bind.p50, r.bind.p99);
  std::printf("  floor: Eviction + Binding    p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", r.floor.p50,
              r.floor.p99, r.floor.max);
  std::printf("  ratio to the floor (p50)     %.1fx\n", r.floor.p50 > 0 ? r.total.p50 / r.floor.p50 : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ascend::guarded_main("recovery_bench", [&] { return run_main(argc, argv); });
}
